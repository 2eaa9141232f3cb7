//! The session inventory of the 2026.9 `sessions_list`: the facts 2026.9 filters on (archived,
//! pinned, owner, creator, project, workspace, group, parent and owner session), projected
//! from the entry into indexed columns when a session is written, and one page of sessions
//! (newest first, `LIMIT … OFFSET …`) with every filter applied in SQL.
//!
//! A page reads only the rows it returns, plus the index entries it skips for its offset (and,
//! with filters beyond `archived`, the rows behind them): each
//! query is driven by the index of its most selective filter (`INDEXED BY`), every filter that
//! can have an index has one (migration 3 in `schema.rs`). `search` is a substring match over
//! the `search` column (display name, label, subject, sessionId and key, lower-cased): it has no
//! index and costs one look at each row the driving index walks past. Never decides who may see
//! a row: the caller applies the visibility policy to what comes back.

use super::listing::ListedRow;
use super::{Db, Dialect};
use crate::entry::{self, Entry};
use crate::error::{Error, Result};
use crate::keys::SessionKind;
use crate::{args, named};

/// The filters of one inventory page.
#[derive(Debug, Clone, Default)]
pub struct InventoryFilter {
    /// keep `global` (never `unknown`)
    pub include_global: bool,
    /// only this key (visibility `self`)
    pub only_key: Option<String>,
    pub agent_id: Option<String>,
    pub spawned_by: Option<String>,
    pub label: Option<String>,
    /// lower-cased needle (see the module header)
    pub search: Option<String>,
    pub active_since: Option<i64>,
    /// Some(false): active only; Some(true): archived only; None: both
    pub archived: Option<bool>,
    pub pinned: Option<bool>,
    pub owner_id: Option<String>,
    pub creator_id: Option<String>,
    pub project_id: Option<String>,
    pub workspace_dir: Option<String>,
    /// the sidebar group; `""` = ungrouped
    pub group: Option<String>,
    pub exclude_subagents: bool,
    pub kinds: Option<Vec<SessionKind>>,
    /// keep only sessions of these agents (non-agent keys: `default_agent`) …
    pub agents: Option<Vec<String>>,
    /// … or owned by this key (`spawnedBy`, `parentSessionKey` or `ownerSessionKey`)
    pub owned_by: Option<String>,
    /// keep only this key and the rows it owns
    pub tree_of: Option<String>,
    pub main_key: String,
    pub global_scope: bool,
    pub default_agent: String,
    pub offset: u64,
    pub limit: u32,
}

macro_rules! inventory_sql {
    ($index:literal, $driver:literal) => {
        concat!(
            "SELECT key, entry FROM sessions ",
            $index,
            " WHERE ",
            $driver,
            inventory_where!(),
            " ORDER BY updated_at DESC, key ASC LIMIT :limit OFFSET :offset"
        )
    };
}

/// The conditions of every inventory page, after its driving one.
macro_rules! inventory_where {
    () => {
        concat!(
            " AND key <> 'unknown' AND (key <> 'global' OR :include_global)",
            " AND (:only_key IS NULL OR key = :only_key)",
            " AND (:agent_id IS NULL OR agent_id = :agent_id)",
            " AND (:spawned_by IS NULL OR spawned_by = :spawned_by)",
            " AND (:label IS NULL OR label = :label)",
            " AND (:search IS NULL OR instr(search, :search) > 0)",
            " AND (:active_since IS NULL OR updated_at >= :active_since)",
            " AND (:archived IS NULL OR archived = :archived)",
            " AND (:pinned IS NULL OR pinned = :pinned)",
            " AND (:owner_id IS NULL OR owner_id = :owner_id)",
            " AND (:creator_id IS NULL OR creator_id = :creator_id)",
            " AND (:project_id IS NULL OR project_id = :project_id)",
            " AND (:workspace_dir IS NULL OR workspace_dir = :workspace_dir)",
            " AND (:grp IS NULL OR coalesce(grp, '') = :grp)",
            " AND (NOT :exclude_subagents OR coalesce(rest, key) NOT LIKE 'subagent:%')",
            " AND (:kinds IS NULL OR instr(:kinds, ',' || CASE WHEN (rest IS NOT NULL AND rest = :main_key)",
            " OR (key = 'global' AND :global_scope) THEN 'main' ELSE base_kind END || ',') > 0)",
            " AND (:agents IS NULL OR instr(:agents, ',' || COALESCE(agent_id, :default_agent) || ',') > 0",
            " OR spawned_by = :owned_by OR parent_key = :owned_by OR owner_key = :owned_by)",
            " AND (:tree_of IS NULL OR key = :tree_of OR spawned_by = :tree_of OR parent_key = :tree_of",
            " OR owner_key = :tree_of)"
        )
    };
}

const BY_KEY: &str = inventory_sql!("", "key = :only_key");
const BY_SPAWNED_BY: &str = inventory_sql!("INDEXED BY sessions_by_spawned_by", "spawned_by = :spawned_by");
const BY_LABEL: &str = inventory_sql!("INDEXED BY sessions_by_label", "label = :label");
const BY_OWNER_ID: &str = inventory_sql!("INDEXED BY sessions_by_owner_id", "owner_id = :owner_id");
const BY_CREATOR_ID: &str = inventory_sql!("INDEXED BY sessions_by_creator_id", "creator_id = :creator_id");
const BY_PROJECT_ID: &str = inventory_sql!("INDEXED BY sessions_by_project_id", "project_id = :project_id");
const BY_WORKSPACE: &str = inventory_sql!("INDEXED BY sessions_by_workspace_dir", "workspace_dir = :workspace_dir");
const BY_GROUP: &str = inventory_sql!("INDEXED BY sessions_by_grp", "grp = :grp");
const BY_PINNED: &str = inventory_sql!("INDEXED BY sessions_by_pinned", "pinned = 1");
/// An agent with few rows: its rows, sorted (see `listing::LIST_BY_AGENT`).
pub(super) const BY_AGENT: &str = inventory_sql!("INDEXED BY sessions_by_agent_id", "agent_id = :agent_id");
pub(super) const BY_ARCHIVED: &str = inventory_sql!("INDEXED BY sessions_by_archived", "archived = :archived");
/// No filter with an index of its own: the two halves of `sessions_by_archived` (active, then
/// archived), each already in the page's order (`updated_at` DESC, key), merged; nothing is
/// sorted (the migration of issue 17 dropped `sessions_by_updated`).
pub(super) const BY_UPDATED: &str = concat!(
    "SELECT key, entry, updated_at FROM sessions INDEXED BY sessions_by_archived WHERE archived = 0",
    inventory_where!(),
    " UNION ALL SELECT key, entry, updated_at FROM sessions INDEXED BY sessions_by_archived WHERE archived = 1",
    inventory_where!(),
    " ORDER BY 3 DESC, 1 ASC LIMIT :limit OFFSET :offset"
);
// PostgreSQL plans the scan itself (it has no INDEXED BY).
const PG_BY_KEY: &str = inventory_sql!("", "key = :only_key");
const PG_BY_SPAWNED_BY: &str = inventory_sql!("", "spawned_by = :spawned_by");
const PG_BY_LABEL: &str = inventory_sql!("", "label = :label");
const PG_BY_OWNER_ID: &str = inventory_sql!("", "owner_id = :owner_id");
const PG_BY_CREATOR_ID: &str = inventory_sql!("", "creator_id = :creator_id");
const PG_BY_PROJECT_ID: &str = inventory_sql!("", "project_id = :project_id");
const PG_BY_WORKSPACE: &str = inventory_sql!("", "workspace_dir = :workspace_dir");
const PG_BY_GROUP: &str = inventory_sql!("", "grp = :grp");
const PG_BY_PINNED: &str = inventory_sql!("", "pinned = 1");
const PG_BY_AGENT: &str = inventory_sql!("", "agent_id = :agent_id");
const PG_BY_ARCHIVED: &str = inventory_sql!("", "archived = :archived");
const PG_BY_UPDATED: &str = inventory_sql!("", "TRUE");

fn joined<T: AsRef<str>>(items: &[T]) -> String {
    let mut s = String::from(",");
    for i in items {
        s.push_str(i.as_ref());
        s.push(',');
    }
    s
}

/// A string inside an object of the entry (`owner` → `actor` → `id`), when a string.
fn nested<'a>(e: &'a Entry, first: &str, rest: &[&str]) -> Option<&'a str> {
    let mut v = e.get(first)?;
    for p in rest {
        v = v.get(p)?;
    }
    v.as_str()
}

fn set(e: &Entry, name: &str) -> bool {
    e.get(name).is_some_and(|v| !v.is_null())
}

impl Db<'_> {
    /// Writes the inventory columns of a stored session from its entry (after
    /// [`Db::put_session`]).
    pub fn put_inventory_facts(&self, key: &str, e: &Entry) -> Result<()> {
        self.exec(
            "UPDATE sessions SET archived = ?2, pinned = ?3, owner_id = ?4, creator_id = ?5, project_id = ?6,
               workspace_dir = ?7, grp = ?8, parent_key = ?9, owner_key = ?10 WHERE key = ?1",
            args![
                key,
                i64::from(set(e, "archivedAt")),
                i64::from(set(e, "pinnedAt")),
                nested(e, "owner", &["actor", "id"]),
                nested(e, "createdActor", &["id"]),
                entry::str_field(e, "projectId"),
                entry::str_field(e, "spawnedCwd").or_else(|| entry::str_field(e, "spawnedWorkspaceDir")),
                entry::str_field(e, "category"),
                entry::str_field(e, "parentSessionKey"),
                entry::str_field(e, "ownerSessionKey"),
            ],
        )?;
        Ok(())
    }

    /// One page of the inventory, newest first (ties by key): the rows from `offset` on, at most
    /// `limit`. Without filters beyond `archived` the rows an offset skips are skipped inside
    /// the index (it holds the key), without reading them.
    pub fn inventory_page(&self, f: &InventoryFilter) -> Result<Vec<ListedRow>> {
        let group = f.group.as_deref();
        let (lite, pg) = if f.only_key.is_some() {
            (BY_KEY, PG_BY_KEY)
        } else if f.spawned_by.is_some() {
            (BY_SPAWNED_BY, PG_BY_SPAWNED_BY)
        } else if f.label.is_some() {
            (BY_LABEL, PG_BY_LABEL)
        } else if f.owner_id.is_some() {
            (BY_OWNER_ID, PG_BY_OWNER_ID)
        } else if f.creator_id.is_some() {
            (BY_CREATOR_ID, PG_BY_CREATOR_ID)
        } else if f.project_id.is_some() {
            (BY_PROJECT_ID, PG_BY_PROJECT_ID)
        } else if f.workspace_dir.is_some() {
            (BY_WORKSPACE, PG_BY_WORKSPACE)
        } else if group.is_some_and(|g| !g.is_empty()) {
            (BY_GROUP, PG_BY_GROUP)
        } else if f.pinned == Some(true) {
            (BY_PINNED, PG_BY_PINNED)
        } else if f.agent_id.is_some() {
            // SQLite: a common agent's rows are picked out of `sessions_by_archived`, which holds
            // `agent_id` (see `listing::LIST_BY_AGENT`)
            let lite = if self.dialect() == Dialect::Postgres || !self.agent_is_common(f.agent_id.as_deref())? {
                BY_AGENT
            } else if f.archived.is_some() {
                BY_ARCHIVED
            } else {
                BY_UPDATED
            };
            (lite, PG_BY_AGENT)
        } else if f.archived.is_some() {
            (BY_ARCHIVED, PG_BY_ARCHIVED)
        } else {
            (BY_UPDATED, PG_BY_UPDATED)
        };
        let template = if self.dialect() == Dialect::Postgres { pg } else { lite };
        let kinds = f.kinds.as_ref().map(|k| joined(&k.iter().map(|k| k.as_str()).collect::<Vec<_>>()));
        let agents = f.agents.as_ref().map(|a| joined(a));
        let offset = i64::try_from(f.offset).map_err(|_| Error::invalid_request("offset too large"))?;
        self.rows_named(
            template,
            named![
                    ":include_global" => f.include_global,
                    ":only_key" => f.only_key,
                    ":agent_id" => f.agent_id,
                    ":spawned_by" => f.spawned_by,
                    ":label" => f.label,
                    ":search" => f.search,
                    ":active_since" => f.active_since,
                    ":archived" => f.archived.map(i64::from),
                    ":pinned" => f.pinned.map(i64::from),
                    ":owner_id" => f.owner_id,
                    ":creator_id" => f.creator_id,
                    ":project_id" => f.project_id,
                    ":workspace_dir" => f.workspace_dir,
                    ":grp" => group,
                    ":exclude_subagents" => f.exclude_subagents,
                    ":kinds" => kinds,
                    ":main_key" => f.main_key,
                    ":global_scope" => f.global_scope,
                    ":agents" => agents,
                    ":default_agent" => f.default_agent,
                    ":owned_by" => f.owned_by,
                    ":tree_of" => f.tree_of,
                    ":limit" => i64::from(f.limit),
                    ":offset" => offset,
            ],
            |r| {
                let (key, json): (String, String) = (r.get(0)?, r.get(1)?);
                let entry = serde_json::from_str::<Entry>(&json)
                    .map_err(|e| Error::store(format!("the stored entry of {key} is not valid JSON: {e}")))?;
                Ok(ListedRow { key, entry })
            },
        )
    }
}
