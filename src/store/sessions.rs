//! Session rows: one row per canonical key, the entry kept whole as JSON beside the columns the
//! list pipeline (`listing`) filters and sorts by (REFERENCE.md §2.7), so that a listing reads
//! only the rows it returns.

use super::listing::{listed_row, ListedRow};
use super::{Db, Row};
use crate::args;
use crate::entry::{self, Entry};
use crate::error::{Error, Result};
use crate::keys::{self, SessionKind};

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

fn read_row(r: &Row<'_>) -> Result<ListedRow> {
    r.with_text(0, |key| r.with_text(1, |json| listed_row(key, json)))
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

    /// How many sessions are stored.
    pub fn session_count(&self) -> Result<u64> {
        self.count("SELECT count(*) FROM sessions", args![])
    }
}
