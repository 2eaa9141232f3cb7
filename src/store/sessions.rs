//! Session rows: one row per canonical key, the entry kept whole as JSON beside the columns the
//! list pipeline filters and sorts by (REFERENCE.md §2.7), so that a listing reads only the rows
//! it returns.

use super::{Db, Dialect, Row};
use crate::entry::{self, Entry};
use crate::error::{Error, Result};
use crate::keys::{self, SessionKind};
use crate::{args, named};

/// The entry fields the inventory columns are projected from (`inventory.rs`): a write that
/// changes one of them takes the full [`Db::put_session`].
const INVENTORY_SOURCES: [&str; 10] = [
    "archivedAt",
    "pinnedAt",
    "owner",
    "createdActor",
    "projectId",
    "spawnedCwd",
    "spawnedWorkspaceDir",
    "category",
    "parentSessionKey",
    "ownerSessionKey",
];

/// The entry fields a session row's columns are made from, besides `updatedAt` and the
/// [`SEARCH_SOURCES`]: a patch naming one of them takes the parsing path of an upsert
/// ([`Db::put_session_over_text`]), which compares them old and new.
pub fn feeds_columns(field: &str) -> bool {
    matches!(field, "sessionId" | "spawnedBy" | "label" | "chatType") || INVENTORY_SOURCES.contains(&field)
}

/// The entry fields the `search` column is made from (with the key): what
/// [`Db::put_merged_text`] reads of an entry whose merge set one of them.
pub const SEARCH_SOURCES: [&str; 8] =
    ["displayName", "channel", "subject", "groupChannel", "space", "label", "origin", "sessionId"];

/// A stored session: its canonical key and its entry (whole, or a [`SparseEntry`]).
#[derive(Debug, Clone, PartialEq)]
pub struct Listed<E = Entry> {
    pub key: String,
    pub entry: E,
}

/// A stored session with its whole entry.
pub type ListedRow = Listed<Entry>;

/// Entry field names with a lookup that costs a few integer operations and one comparison: a
/// small open-addressed table (listfast: a binary search of the names, one `memcmp` per step,
/// was a quarter of a listing).
#[derive(Debug)]
pub struct FieldSet {
    names: &'static [&'static str],
    /// slot → index + 1 of a name (0: empty); unused past [`FieldSet::MAX`] names
    table: [u8; 256],
}

impl FieldSet {
    /// Most names the table holds; a longer set is searched name by name.
    const MAX: usize = 128;

    pub fn new(names: &'static [&'static str]) -> FieldSet {
        let mut table = [0u8; 256];
        if names.len() <= Self::MAX {
            for (i, n) in names.iter().enumerate() {
                let mut h = Self::slot(n);
                while table[h] != 0 {
                    h = (h + 1) & 255;
                }
                table[h] = (i + 1) as u8;
            }
        }
        FieldSet { names, table }
    }

    fn slot(name: &str) -> usize {
        let b = name.as_bytes();
        let at = |i: usize| b.get(i).copied().unwrap_or(0) as usize;
        (b.len().wrapping_mul(37) ^ at(0).wrapping_mul(11) ^ at(b.len().saturating_sub(1)).wrapping_mul(5) ^ at(4))
            & 255
    }

    /// The position of `name` in the set.
    pub fn index(&self, name: &str) -> Option<usize> {
        if self.names.len() > Self::MAX {
            return self.names.iter().position(|n| *n == name);
        }
        let mut h = Self::slot(name);
        loop {
            let i = self.table[h].checked_sub(1)? as usize;
            if self.names[i] == name {
                return Some(i);
            }
            h = (h + 1) & 255;
        }
    }

    pub fn len(&self) -> usize {
        self.names.len()
    }

    pub fn is_empty(&self) -> bool {
        self.names.is_empty()
    }
}

/// An entry of which only some fields were parsed (a listing shows a few fields of each
/// entry): one slot per name of its [`FieldSet`], no map, no key copied (listfast: building a
/// map per entry, its keys hashed on insert and on every read, was a fifth of a 50-row listing).
#[derive(Debug, Clone)]
pub struct SparseEntry {
    set: &'static FieldSet,
    values: Vec<Option<serde_json::Value>>,
}

impl entry::Fields for SparseEntry {
    fn field(&self, name: &str) -> Option<&serde_json::Value> {
        self.values[self.set.index(name)?].as_ref()
    }
}

/// The filters of the list pipeline (§2.7 steps 1–7), plus the tool layer's kind and
/// cross-agent filters, all applied in SQL before the limit.
#[derive(Debug, Clone, Default)]
pub struct ListFilter {
    pub include_global: bool,
    pub include_unknown: bool,
    /// keep only sessions of this agent (drops `global`, `unknown` and non-agent keys)
    pub agent_id: Option<String>,
    /// keep only children of this key (drops `global` and `unknown`)
    pub spawned_by: Option<String>,
    pub label: Option<String>,
    /// lower-cased needle matched against displayName, label, subject, sessionId and key
    pub search: Option<String>,
    /// keep only rows with `updatedAt >= active_since`
    pub active_since: Option<i64>,
    pub limit: Option<u32>,
    /// tool layer: keep only these kinds
    pub kinds: Option<Vec<SessionKind>>,
    /// tool layer: keep only sessions whose agent (non-agent keys: `default_agent`) is listed
    pub agents: Option<Vec<String>>,
    /// what makes a row `main`: its key after `agent:<id>:` equals this …
    pub main_key: String,
    /// … or it is `global` under global scope
    pub global_scope: bool,
    pub default_agent: String,
}

fn joined<T: AsRef<str>>(items: &[T]) -> String {
    let mut s = String::from(",");
    for i in items {
        s.push_str(i.as_ref());
        s.push(',');
    }
    s
}

/// The conditions shared by every list variant, with named parameters bound by [`Db::list`]:
/// SQLite is told which index drives the scan; PostgreSQL plans it itself and reads a NULL
/// limit as none.
macro_rules! list_sql {
    (sqlite, $index:literal, $driver:literal) => {
        list_sql!(concat!(" INDEXED BY ", $index), $driver, "LIMIT :limit")
    };
    (postgres, $driver:literal) => {
        list_sql!("", $driver, "LIMIT NULLIF(:limit, -1)")
    };
    ($indexed:expr, $driver:literal, $limit:literal) => {
        concat!(
            "SELECT key, entry FROM sessions",
            $indexed,
            " WHERE ",
            $driver,
            list_where!(),
            " ORDER BY updated_at DESC, rowid ASC ",
            $limit
        )
    };
}

/// The conditions of every list variant, after its driving one.
macro_rules! list_where {
    () => {
        concat!(
            " AND (key <> 'global' OR (:include_global AND :spawned_by IS NULL))",
            " AND (key <> 'unknown' OR (:include_unknown AND :spawned_by IS NULL))",
            " AND (:agent_id IS NULL OR agent_id = :agent_id)",
            " AND (:spawned_by IS NULL OR spawned_by = :spawned_by)",
            " AND (:label IS NULL OR label = :label)",
            " AND (:search IS NULL OR instr(search, :search) > 0)",
            " AND (:active_since IS NULL OR updated_at >= :active_since)",
            " AND (:kinds IS NULL OR instr(:kinds, ',' || CASE WHEN (rest IS NOT NULL AND rest = :main_key)",
            " OR (key = 'global' AND :global_scope) THEN 'main' ELSE base_kind END || ',') > 0)",
            " AND (:agents IS NULL OR instr(:agents, ',' || COALESCE(agent_id, :default_agent) || ',') > 0)"
        )
    };
}

/// SQLite, no filter with an index of its own: the two halves of `sessions_by_archived`
/// (active, then archived), each walked in `updated_at` order and merged; only rows of equal
/// `updated_at` are sorted (by rowid, the insertion order), a few at a time (the migration of
/// issue 17 dropped `sessions_by_updated`: one index fewer for every upsert to write). The sort
/// carries only `updated_at` and the rowid; the rows picked are read by rowid after it, in its
/// order (listraw: sorting whole rows, entries included, was a tenth of a listing).
pub(super) const LIST_BY_UPDATED: &str = concat!(
    "WITH picked (u, r) AS (",
    "SELECT updated_at, rowid FROM sessions INDEXED BY sessions_by_archived WHERE archived = 0",
    list_where!(),
    " UNION ALL SELECT updated_at, rowid FROM sessions INDEXED BY sessions_by_archived WHERE archived = 1",
    list_where!(),
    " ORDER BY 1 DESC, 2 ASC LIMIT :limit)",
    " SELECT s.key, s.entry FROM picked CROSS JOIN sessions AS s ON s.rowid = picked.r",
    " ORDER BY picked.u DESC, picked.r ASC"
);
pub(super) const LIST_BY_SPAWNED_BY: &str = list_sql!(sqlite, "sessions_by_spawned_by", "spawned_by = :spawned_by");
pub(super) const LIST_BY_LABEL: &str = list_sql!(sqlite, "sessions_by_label", "label = :label");
/// SQLite, an agent with fewer than [`COMMON_AGENT_ROWS`] rows: its rows (through
/// `sessions_by_agent_id`, which holds no `updated_at`, so an upsert leaves it alone), sorted.
/// An agent with more is listed by [`LIST_BY_UPDATED`], whose index holds `agent_id`: the other
/// agents' entries are passed over in the index, their rows never read, where a sort would grow
/// with the agent's rows (a rare agent's list among 50,000 rows walked the whole index: 9-13 ms
/// against 0.24 ms sorted).
pub(super) const LIST_BY_AGENT: &str = list_sql!(sqlite, "sessions_by_agent_id", "agent_id = :agent_id");
/// Rows from which an agent's list walks the newest-first index instead of sorting its rows.
pub(super) const COMMON_AGENT_ROWS: i64 = 1_000;
const PG_LIST_BY_UPDATED: &str = list_sql!(postgres, "TRUE");
const PG_LIST_BY_SPAWNED_BY: &str = list_sql!(postgres, "spawned_by = :spawned_by");
const PG_LIST_BY_LABEL: &str = list_sql!(postgres, "label = :label");
const PG_LIST_BY_AGENT: &str = list_sql!(postgres, "agent_id = :agent_id");

fn read_row(r: &Row<'_>) -> Result<ListedRow> {
    let key: String = r.get(0)?;
    let json: String = r.get(1)?;
    Ok(ListedRow { entry: parse_entry(&key, &json)?, key })
}

/// As [`read_row`], parsing only `fields` of the entry.
fn read_sparse_row(r: &Row<'_>, fields: &'static FieldSet) -> Result<Listed<SparseEntry>> {
    let key: String = r.get(0)?;
    let json: String = r.get(1)?;
    let entry = SparseEntry::parse(&json, fields)
        .map_err(|e| Error::store(format!("the stored entry of {key} is not valid JSON: {e}")))?;
    Ok(Listed { entry, key })
}

impl SparseEntry {
    /// Parses the entry text `json`, keeping only `fields`; the others are checked as JSON and
    /// read past.
    pub fn parse(json: &str, fields: &'static FieldSet) -> std::result::Result<SparseEntry, serde_json::Error> {
        use serde::de::DeserializeSeed;
        let mut de = serde_json::Deserializer::from_str(json);
        Sparse(fields).deserialize(&mut de).and_then(|e| de.end().map(|()| e))
    }
}

/// Parses an entry keeping only these fields; the others are read past (checked as JSON, not
/// built).
struct Sparse(&'static FieldSet);

/// A key of an entry: borrowed from the text when it has no escapes.
struct FieldName<'de>(std::borrow::Cow<'de, str>);

impl<'de> serde::Deserialize<'de> for FieldName<'de> {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> std::result::Result<Self, D::Error> {
        struct V;
        impl<'de> serde::de::Visitor<'de> for V {
            type Value = FieldName<'de>;
            fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str("a field name")
            }
            fn visit_borrowed_str<E>(self, v: &'de str) -> std::result::Result<Self::Value, E> {
                Ok(FieldName(std::borrow::Cow::Borrowed(v)))
            }
            fn visit_str<E>(self, v: &str) -> std::result::Result<Self::Value, E> {
                Ok(FieldName(std::borrow::Cow::Owned(v.to_owned())))
            }
        }
        d.deserialize_str(V)
    }
}

impl<'de> serde::de::DeserializeSeed<'de> for Sparse {
    type Value = SparseEntry;
    fn deserialize<D: serde::Deserializer<'de>>(self, d: D) -> std::result::Result<SparseEntry, D::Error> {
        d.deserialize_map(self)
    }
}

impl<'de> serde::de::Visitor<'de> for Sparse {
    type Value = SparseEntry;
    fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("an entry object")
    }
    fn visit_map<A: serde::de::MapAccess<'de>>(self, mut a: A) -> std::result::Result<SparseEntry, A::Error> {
        let mut values = vec![None; self.0.len()];
        while let Some(FieldName(k)) = a.next_key()? {
            match self.0.index(&k) {
                // a repeated field: the last one wins, as in a full parse
                Some(i) => values[i] = Some(a.next_value::<serde_json::Value>()?),
                None => {
                    a.next_value::<serde::de::IgnoredAny>()?;
                }
            }
        }
        Ok(SparseEntry { set: self.0, values })
    }
}

fn encode(key: &str, entry: &Entry) -> Result<String> {
    serde_json::to_string(entry).map_err(|e| Error::store(format!("cannot encode the entry of {key}: {e}")))
}

/// An entry read from its stored text.
pub fn parse_entry(key: &str, json: &str) -> Result<Entry> {
    serde_json::from_str::<Entry>(json)
        .map_err(|e| Error::store(format!("the stored entry of {key} is not valid JSON: {e}")))
}

/// The config-independent kind of a stored session (everything but `main`).
pub fn base_kind(key: &str, entry: &Entry) -> SessionKind {
    match keys::key_kind(key) {
        k @ (SessionKind::Cron | SessionKind::Hook | SessionKind::Node) => k,
        k => {
            let chat = entry::str_field(entry, "chatType").map(|c| c.trim().to_lowercase());
            if matches!(chat.as_deref(), Some("group") | Some("channel")) {
                SessionKind::Group
            } else {
                k
            }
        }
    }
}

/// What `search` matches (§2.7 step 5), lower-cased, fields separated by a newline so that a
/// needle never spans two fields.
fn search_text(key: &str, entry: &Entry) -> String {
    let mut parts: Vec<String> = Vec::with_capacity(5);
    if let Some(d) = entry::display_name(key, entry) {
        parts.push(d);
    }
    for name in ["label", "subject", "sessionId"] {
        if let Some(v) = entry::str_field(entry, name) {
            parts.push(v.to_owned());
        }
    }
    parts.push(key.to_owned());
    parts.join("\n").to_lowercase()
}

impl Db<'_> {
    /// Depth of a session in its spawn lineage (a main session is 0): its stored `spawnDepth`,
    /// else the stored `spawnedBy` chain (2026.9 never reads it from the key).
    pub fn spawn_depth(&self, key: &str) -> Result<u32> {
        let mut depth = 0;
        let mut cur = key.to_owned();
        let mut seen = std::collections::HashSet::new();
        while seen.insert(cur.clone()) && depth < 64 {
            let entry = self.session(&cur)?;
            if let Some(stored) = entry.as_ref().and_then(|e| e.get("spawnDepth")).and_then(serde_json::Value::as_f64) {
                if stored.is_finite() && stored >= 0.0 {
                    return Ok(depth + stored.min(64.0) as u32);
                }
            }
            let parent = entry.and_then(|e| crate::entry::str_field(&e, "spawnedBy").map(str::to_owned));
            let Some(parent) = parent else { break };
            depth += 1;
            cur = parent;
        }
        Ok(depth)
    }

    /// The entry stored under exactly this key.
    pub fn session(&self, key: &str) -> Result<Option<Entry>> {
        let json = self.row("SELECT entry FROM sessions WHERE key = ?1", args![key], |r| r.get::<String>(0))?;
        json.map(|j| parse_entry(key, &j)).transpose()
    }

    /// The entry text stored under exactly this key, as stored.
    pub fn session_text(&self, key: &str) -> Result<Option<String>> {
        self.row("SELECT entry FROM sessions WHERE key = ?1", args![key], |r| r.get::<String>(0))
    }

    /// The first of `keys` that is stored, with its entry.
    pub fn first_session(&self, keys: &[String]) -> Result<Option<ListedRow>> {
        for k in keys {
            if let Some(entry) = self.session(k)? {
                return Ok(Some(ListedRow { key: k.clone(), entry }));
            }
        }
        Ok(None)
    }

    /// Inserts or replaces the entry of `key`, keeping the row (and its position among equal
    /// `updatedAt`s) when it exists.
    pub fn put_session(&self, key: &str, entry: &Entry) -> Result<()> {
        self.put_session_json(key, entry, &encode(key, entry)?)
    }

    /// [`put_session`](Self::put_session) with the entry's JSON text already made.
    fn put_session_json(&self, key: &str, entry: &Entry, json: &str) -> Result<()> {
        let session_id = entry::str_field(entry, "sessionId")
            .ok_or_else(|| Error::store(format!("refusing to store {key} without a sessionId")))?;
        let parsed = keys::parse_agent_key(key);
        self.exec(
            "INSERT INTO sessions (key, session_id, agent_id, rest, updated_at, spawned_by, label, base_kind, search, entry)
             VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10)
             ON CONFLICT (key) DO UPDATE SET session_id = ?2, agent_id = ?3, rest = ?4, updated_at = ?5,
               spawned_by = ?6, label = ?7, base_kind = ?8, search = ?9, entry = ?10",
            args![
            key,
            session_id,
            parsed.as_ref().map(|p| p.agent_id.as_str()),
            parsed.as_ref().map(|p| p.rest.as_str()),
            entry::updated_at(entry),
            entry::str_field(entry, "spawnedBy"),
            entry::str_field(entry, "label"),
            base_kind(key, entry).as_str(),
            search_text(key, entry),
            json,
        ],
        )?;
        self.put_inventory_facts(key, entry)
    }

    /// As [`put_session`](Self::put_session), given the entry the row holds now (`old`, read in
    /// the same transaction): when the new entry leaves every indexed column but `updated_at` as
    /// it was (the usual upsert: new counters, a new route), only `updated_at`, `search` and the
    /// entry are written, so SQLite rewrites one index instead of five (perf: 30 KB of log per
    /// upsert against better-sqlite3's 19 KB).
    pub fn put_session_over(&self, key: &str, old: Option<&Entry>, entry: &Entry) -> Result<()> {
        self.put_session_over_text(key, old, entry).map(drop)
    }

    /// As [`put_session_over`](Self::put_session_over), answering the entry's JSON text as
    /// stored (an upsert answers it as is: the entry is serialised once).
    pub fn put_session_over_text(&self, key: &str, old: Option<&Entry>, entry: &Entry) -> Result<String> {
        let json = encode(key, entry)?;
        let same = |f: &str| old.map(|o| entry::str_field(o, f) == entry::str_field(entry, f)).unwrap_or(false);
        // the fields the inventory columns are projected from (inventory.rs), compared whole
        let same_value = |f: &str| old.map(|o| o.get(f) == entry.get(f)).unwrap_or(false);
        let unchanged = old.is_some_and(|o| base_kind(key, o) == base_kind(key, entry))
            && ["sessionId", "spawnedBy", "label"].iter().all(|f| same(f))
            && INVENTORY_SOURCES.iter().all(|f| same_value(f));
        if !unchanged {
            self.put_session_json(key, entry, &json)?;
            return Ok(json);
        }
        let n = self.exec(
            "UPDATE sessions SET updated_at = ?2, search = ?3, entry = ?4 WHERE key = ?1",
            args![key, entry::updated_at(entry), search_text(key, entry), json.as_str()],
        )?;
        if n == 0 {
            self.put_session_json(key, entry, &json)?;
        }
        Ok(json)
    }

    /// Stores `text` as the entry of the existing row of `key`, when the entry it replaces and
    /// `text` differ in no field [`feeds_columns`] names (an upsert merged on the stored text,
    /// `entry_text`): the write [`put_session_over_text`](Self::put_session_over_text) makes
    /// then. `search` holds the new entry's [`SEARCH_SOURCES`] when the merge set one of them;
    /// `None` leaves the `search` column as it is (made of the same fields, by the same rule).
    /// Whether the row was there.
    pub fn put_merged_text(&self, key: &str, updated_at: i64, search: Option<&Entry>, text: &str) -> Result<bool> {
        let n = self.exec(
            "UPDATE sessions SET updated_at = ?2, search = coalesce(?3, search), entry = ?4 WHERE key = ?1",
            args![key, updated_at, search.map(|fields| search_text(key, fields)), text],
        )?;
        Ok(n > 0)
    }

    /// Replaces the stored text of `key`'s entry as it is (tests: entry texts another writer may
    /// have stored, with escapes, spacing or repeated names). The other columns are untouched but
    /// `search`, which every writer makes of the entry it stores (an upsert that sets none of its
    /// [`SEARCH_SOURCES`] leaves it as it is); a text that is not JSON leaves it too.
    #[cfg(test)]
    pub fn set_entry_text(&self, key: &str, text: &str) -> Result<usize> {
        let search = parse_entry(key, text).ok().map(|e| search_text(key, &e));
        self.exec(
            "UPDATE sessions SET entry = ?1, search = coalesce(?3, search) WHERE key = ?2",
            args![text, key, search],
        )
    }

    /// Every column of `key`'s row, as one JSON array text (tests: two rows compared whole).
    #[cfg(test)]
    pub fn row_columns(&self, key: &str) -> Result<Option<String>> {
        self.row(
            "SELECT json_array(key, session_id, agent_id, rest, updated_at, spawned_by, label, base_kind, search, entry,
               archived, pinned, owner_id, creator_id, project_id, workspace_dir, grp, parent_key, owner_key)
             FROM sessions WHERE key = ?1",
            args![key],
            |r| r.get::<String>(0),
        )
    }

    /// Removes the row of `key`; whether it existed.
    pub fn delete_session(&self, key: &str) -> Result<bool> {
        Ok(self.exec("DELETE FROM sessions WHERE key = ?1", args![key])? > 0)
    }

    /// Whether any session still uses this transcript.
    pub fn session_id_in_use(&self, session_id: &str) -> Result<bool> {
        Ok(self.row("SELECT 1 FROM sessions WHERE session_id = ?1 LIMIT 1", args![session_id], |_| Ok(()))?.is_some())
    }

    /// Sessions whose `sessionId` (or key) equals `id` exactly, newest first, at most `limit`.
    pub fn sessions_with_id(&self, id: &str, limit: u32) -> Result<Vec<ListedRow>> {
        let mut out = self.rows(
            "SELECT key, entry FROM sessions WHERE session_id = ?1
             UNION SELECT key, entry FROM sessions WHERE key = ?1
             LIMIT ?2",
            args![id, limit],
            read_row,
        )?;
        out.sort_by_key(|r| std::cmp::Reverse(entry::updated_at(&r.entry)));
        Ok(out)
    }

    /// Another session of the same agent (`agent_id`, NULL for non-agent keys) carrying
    /// exactly this label.
    pub fn label_holder(&self, label: &str, agent_id: Option<&str>, except_key: &str) -> Result<Option<String>> {
        self.row(
            "SELECT key FROM sessions WHERE label = ?1 AND agent_id IS NOT DISTINCT FROM ?2 AND key <> ?3 LIMIT 1",
            args![label, agent_id, except_key],
            |r| r.get(0),
        )
    }

    /// The distinct agent ids of stored agent keys.
    pub fn stored_agents(&self) -> Result<Vec<String>> {
        self.rows("SELECT DISTINCT agent_id FROM sessions WHERE agent_id IS NOT NULL", args![], |r| r.get(0))
    }

    /// Whether `agent` (SQLite) holds at least [`COMMON_AGENT_ROWS`] rows: counted in
    /// `sessions_by_agent_id`, reading at most that many of its entries.
    pub(super) fn agent_is_common(&self, agent: Option<&str>) -> Result<bool> {
        let n = self.count(
            "SELECT count(*) FROM (SELECT 1 FROM sessions INDEXED BY sessions_by_agent_id WHERE agent_id = ?1 LIMIT ?2)",
            args![agent, COMMON_AGENT_ROWS],
        )?;
        Ok(n as i64 >= COMMON_AGENT_ROWS)
    }

    /// How many sessions are stored.
    pub fn session_count(&self) -> Result<u64> {
        self.count("SELECT count(*) FROM sessions", args![])
    }

    /// The list pipeline: filter, sort by `updatedAt` descending (ties in insertion order),
    /// limit. Reads only the rows it returns when an index serves the filter.
    pub fn list(&self, f: &ListFilter) -> Result<Vec<ListedRow>> {
        self.list_with(f, read_row)
    }

    /// As [`list`](Self::list), parsing only `fields` of each entry (a field missing from it
    /// reads as absent).
    pub fn list_sparse(&self, f: &ListFilter, fields: &'static FieldSet) -> Result<Vec<Listed<SparseEntry>>> {
        self.list_with(f, |r| read_sparse_row(r, fields))
    }

    /// As [`list`](Self::list), handing `f` each row's key and stored entry text as they are
    /// (borrowed from the row: nothing parsed, nothing copied).
    pub fn list_texts(&self, f: &ListFilter, mut each: impl FnMut(&str, &str) -> Result<()>) -> Result<()> {
        self.list_with(f, |r| r.with_text(0, |key| r.with_text(1, |entry| each(key, entry)))).map(drop)
    }

    fn list_with<T>(&self, f: &ListFilter, read: impl FnMut(&Row<'_>) -> Result<T>) -> Result<Vec<T>> {
        let pg = self.dialect() == Dialect::Postgres;
        let template = match (f.spawned_by.is_some(), f.label.is_some(), f.agent_id.is_some(), pg) {
            (true, _, _, false) => LIST_BY_SPAWNED_BY,
            (true, _, _, true) => PG_LIST_BY_SPAWNED_BY,
            (false, true, _, false) => LIST_BY_LABEL,
            (false, true, _, true) => PG_LIST_BY_LABEL,
            (false, false, true, false) if !self.agent_is_common(f.agent_id.as_deref())? => LIST_BY_AGENT,
            (false, false, _, false) => LIST_BY_UPDATED,
            (false, false, true, true) => PG_LIST_BY_AGENT,
            (false, false, false, true) => PG_LIST_BY_UPDATED,
        };
        let kinds = f.kinds.as_ref().map(|k| joined(&k.iter().map(|k| k.as_str()).collect::<Vec<_>>()));
        let agents = f.agents.as_ref().map(|a| joined(a));
        let limit: i64 = f.limit.map(i64::from).unwrap_or(-1);
        self.rows_named(
            template,
            named![
                    ":include_global" => f.include_global,
                    ":include_unknown" => f.include_unknown,
                    ":agent_id" => f.agent_id,
                    ":spawned_by" => f.spawned_by,
                    ":label" => f.label,
                    ":search" => f.search,
                    ":active_since" => f.active_since,
                    ":kinds" => kinds,
                    ":main_key" => f.main_key,
                    ":global_scope" => f.global_scope,
                    ":agents" => agents,
                    ":default_agent" => f.default_agent,
                    ":limit" => limit,
            ],
            read,
        )
    }
}
