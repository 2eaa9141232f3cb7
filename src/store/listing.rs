//! The list pipeline (REFERENCE.md §2.7): its filters, the statement for each index that can
//! drive it (on both backends), the walk that hands rows on newest first with equal timestamps
//! in insertion order, and the sparse parse of the entries a listing shows.

use super::sessions::parse_entry;
use super::{Db, Dialect, ToArg};
use crate::entry::{self, Entry};
use crate::error::{Error, Result};
use crate::keys::SessionKind;
use crate::{args, named};

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
/// (active, then archived), each walked newest first and merged, nothing sorted and no `LIMIT`:
/// [`Db::list_newest_first`] reads `updated_at` and the rowid of each row (from the index, no
/// entry read) and stops stepping at the limit. The walk gives rows of equal `updated_at` in key
/// order; each run of them is put in insertion (rowid) order as it is read, and the entries of
/// the rows picked are read by rowid after it ([`ROWS_BY_ROWID`]). (The migration of issue 17
/// dropped `sessions_by_updated`: one index fewer for every upsert to write. Issue 17, nineteenth
/// pass: sorting each run in SQL, through a temporary B-tree, was a fifth of a 50-row listing at
/// 1,000 sessions.)
pub(super) const LIST_BY_UPDATED: &str = concat!(
    "SELECT updated_at, rowid FROM sessions INDEXED BY sessions_by_archived WHERE archived = 0",
    list_where!(),
    " UNION ALL SELECT updated_at, rowid FROM sessions INDEXED BY sessions_by_archived WHERE archived = 1",
    list_where!(),
    " ORDER BY 1 DESC"
);
/// The key and entry of each rowid of `?1` (a JSON array), in the array's order: `json_each`
/// drives the join and yields the array in order.
pub(super) const ROWS_BY_ROWID: &str =
    "SELECT s.key, s.entry FROM json_each(?1) AS j CROSS JOIN sessions AS s ON s.rowid = j.value";
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

/// A listed row of `key`'s stored entry text.
pub(super) fn listed_row(key: &str, json: &str) -> Result<ListedRow> {
    Ok(ListedRow { entry: parse_entry(key, json)?, key: key.to_owned() })
}

/// As [`listed_row`], parsing only `fields` of the entry.
fn listed_sparse_row(key: &str, json: &str, fields: &'static FieldSet) -> Result<Listed<SparseEntry>> {
    let entry = SparseEntry::parse(json, fields)
        .map_err(|e| Error::store(format!("the stored entry of {key} is not valid JSON: {e}")))?;
    Ok(Listed { entry, key: key.to_owned() })
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

impl Db<'_> {
    /// Whether `agent` (SQLite) holds at least [`COMMON_AGENT_ROWS`] rows: counted in
    /// `sessions_by_agent_id`, reading at most that many of its entries.
    pub(super) fn agent_is_common(&self, agent: Option<&str>) -> Result<bool> {
        let n = self.count(
            "SELECT count(*) FROM (SELECT 1 FROM sessions INDEXED BY sessions_by_agent_id WHERE agent_id = ?1 LIMIT ?2)",
            args![agent, COMMON_AGENT_ROWS],
        )?;
        Ok(n as i64 >= COMMON_AGENT_ROWS)
    }

    /// The list pipeline: filter, sort by `updatedAt` descending (ties in insertion order),
    /// limit. Reads only the rows it returns when an index serves the filter.
    pub fn list(&self, f: &ListFilter) -> Result<Vec<ListedRow>> {
        self.list_with(f, listed_row)
    }

    /// As [`list`](Self::list), parsing only `fields` of each entry (a field missing from it
    /// reads as absent).
    pub fn list_sparse(&self, f: &ListFilter, fields: &'static FieldSet) -> Result<Vec<Listed<SparseEntry>>> {
        self.list_with(f, |key, json| listed_sparse_row(key, json, fields))
    }

    /// As [`list`](Self::list), handing `f` each row's key and stored entry text as they are
    /// (borrowed from the row: nothing parsed, nothing copied).
    pub fn list_texts(&self, f: &ListFilter, each: impl FnMut(&str, &str) -> Result<()>) -> Result<()> {
        self.list_with(f, each).map(drop)
    }

    fn list_with<T>(&self, f: &ListFilter, mut read: impl FnMut(&str, &str) -> Result<T>) -> Result<Vec<T>> {
        let pg = self.dialect() == Dialect::Postgres;
        // `None`: the newest-first walk, which sorts its ties itself
        let sorted = match (f.spawned_by.is_some(), f.label.is_some(), f.agent_id.is_some(), pg) {
            (true, _, _, false) => Some(LIST_BY_SPAWNED_BY),
            (true, _, _, true) => Some(PG_LIST_BY_SPAWNED_BY),
            (false, true, _, false) => Some(LIST_BY_LABEL),
            (false, true, _, true) => Some(PG_LIST_BY_LABEL),
            (false, false, true, false) if !self.agent_is_common(f.agent_id.as_deref())? => Some(LIST_BY_AGENT),
            (false, false, _, false) => None,
            (false, false, true, true) => Some(PG_LIST_BY_AGENT),
            (false, false, false, true) => Some(PG_LIST_BY_UPDATED),
        };
        let kinds = f.kinds.as_ref().map(|k| joined(&k.iter().map(|k| k.as_str()).collect::<Vec<_>>()));
        let agents = f.agents.as_ref().map(|a| joined(a));
        let limit: i64 = f.limit.map(i64::from).unwrap_or(-1);
        let args = named![
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
        ];
        let Some(template) = sorted else {
            return self.list_newest_first(args, f.limit, read);
        };
        self.rows_named(template, args, |r| r.with_text(0, |key| r.with_text(1, |entry| read(key, entry))))
    }

    /// [`LIST_BY_UPDATED`]'s rows handed to `read`, newest first and equal timestamps in
    /// insertion order, at most `limit`: the walk reads rowids only and stops once `limit` of
    /// them are picked and the run of equal timestamps it is in has ended; each run is sorted
    /// by rowid as it ends. Then [`ROWS_BY_ROWID`] reads the picked rows, in that order (in the
    /// same transaction: the same rows).
    fn list_newest_first<T>(
        &self,
        args: &[(&str, &dyn ToArg)],
        limit: Option<u32>,
        mut read: impl FnMut(&str, &str) -> Result<T>,
    ) -> Result<Vec<T>> {
        let room = limit.map_or(usize::MAX, |l| l as usize);
        let mut picked: Vec<i64> = Vec::with_capacity(room.min(1_024));
        let mut run: Vec<i64> = Vec::new();
        let mut run_at = None;
        let pick = |run: &mut Vec<i64>, picked: &mut Vec<i64>| {
            run.sort_unstable();
            picked.extend(run.drain(..).take(room - picked.len()));
        };
        let walk: Vec<(&str, &dyn ToArg)> = args.iter().filter(|(name, _)| *name != ":limit").copied().collect();
        self.each_named(LIST_BY_UPDATED, &walk, |r| {
            let at: i64 = r.get(0)?;
            if run_at != Some(at) {
                pick(&mut run, &mut picked);
                if picked.len() >= room {
                    return Ok(false);
                }
                run_at = Some(at);
            }
            run.push(r.get(1)?);
            Ok(true)
        })?;
        pick(&mut run, &mut picked);
        if picked.is_empty() {
            return Ok(Vec::new());
        }
        let ids = serde_json::to_string(&picked).map_err(|e| Error::store(format!("cannot encode rowids: {e}")))?;
        let mut out = Vec::with_capacity(picked.len());
        self.each(ROWS_BY_ROWID, args![ids], |r| {
            out.push(r.with_text(0, |key| r.with_text(1, |entry| read(key, entry)))?);
            Ok(true)
        })?;
        Ok(out)
    }
}
