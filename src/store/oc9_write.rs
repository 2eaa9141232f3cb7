//! Writing our sessions, transcripts and runs into a 2026.9 gateway state folder the gateway
//! has initialised (OPENCLAW-2026.9.md §4; API.md §5, `layout: '2026.9'`).
//!
//! It owns the connection to the gateway's database and the constant statements. It never
//! creates a table or a database (the gateway's schema is the gateway's: a file it did not
//! initialise at the schema version we know is refused), writes only the rows of the tables
//! named below in one `BEGIN IMMEDIATE` transaction, never replaces a transcript that is already
//! there, and decides nothing about the rows' content (`migrate::sqlite9` builds them).

use std::path::Path;

use rusqlite::types::Value as SqlValue;
use rusqlite::{Connection, OpenFlags};
use serde_json::{Map, Value};

use super::oc9_read::Why;

fn why(e: rusqlite::Error) -> Why {
    format!("cannot write it: {e}")
}

/// The `session_nodes` columns an export writes, in the order of [`PUT_NODE`].
pub const NODE_COLUMNS: [&str; 29] = [
    "session_key",
    "current_session_id",
    "entry_json",
    "updated_at",
    "status",
    "created_at",
    "created_via",
    "created_actor_type",
    "created_actor_id",
    "owner_actor_type",
    "owner_actor_id",
    "owner_assigned_by_type",
    "owner_assigned_by_id",
    "owner_assigned_at",
    "project_id",
    "parent_session_key",
    "spawned_by",
    "fork_source_session_key",
    "fork_source_session_id",
    "fork_source_entry_id",
    "label",
    "display_name",
    "category",
    "icon",
    "pinned_at",
    "archived_at",
    "last_read_at",
    "last_interaction_at",
    "last_activity_at",
];

const PUT_NODE: &str = "INSERT INTO session_nodes (session_key, current_session_id, entry_json, updated_at, status,
      created_at, created_via, created_actor_type, created_actor_id, owner_actor_type, owner_actor_id,
      owner_assigned_by_type, owner_assigned_by_id, owner_assigned_at, project_id, parent_session_key, spawned_by,
      fork_source_session_key, fork_source_session_id, fork_source_entry_id, label, display_name, category, icon,
      pinned_at, archived_at, last_read_at, last_interaction_at, last_activity_at)
    VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, ?15, ?16, ?17, ?18, ?19, ?20, ?21, ?22,
      ?23, ?24, ?25, ?26, ?27, ?28, ?29)
    ON CONFLICT (session_key) DO UPDATE SET current_session_id = excluded.current_session_id,
      entry_json = excluded.entry_json, updated_at = excluded.updated_at, status = excluded.status,
      created_at = excluded.created_at, created_via = excluded.created_via,
      created_actor_type = excluded.created_actor_type, created_actor_id = excluded.created_actor_id,
      owner_actor_type = excluded.owner_actor_type, owner_actor_id = excluded.owner_actor_id,
      owner_assigned_by_type = excluded.owner_assigned_by_type, owner_assigned_by_id = excluded.owner_assigned_by_id,
      owner_assigned_at = excluded.owner_assigned_at, project_id = excluded.project_id,
      parent_session_key = excluded.parent_session_key, spawned_by = excluded.spawned_by,
      fork_source_session_key = excluded.fork_source_session_key,
      fork_source_session_id = excluded.fork_source_session_id,
      fork_source_entry_id = excluded.fork_source_entry_id, label = excluded.label,
      display_name = excluded.display_name, category = excluded.category, icon = excluded.icon,
      pinned_at = excluded.pinned_at, archived_at = excluded.archived_at, last_read_at = excluded.last_read_at,
      last_interaction_at = excluded.last_interaction_at, last_activity_at = excluded.last_activity_at";

/// The `session_windows` columns an export writes, in the order of [`PUT_WINDOW`].
pub const WINDOW_COLUMNS: [&str; 22] = [
    "session_id",
    "session_key",
    "previous_session_id",
    "reason",
    "session_scope",
    "created_at",
    "updated_at",
    "started_at",
    "ended_at",
    "status",
    "chat_type",
    "channel",
    "account_id",
    "model_provider",
    "model",
    "agent_harness_id",
    "parent_session_key",
    "spawned_by",
    "display_name",
    "acp_owned",
    "plugin_owner_id",
    "hook_external_content_source",
];

const PUT_WINDOW: &str = "INSERT INTO session_windows (session_id, session_key, previous_session_id, reason,
      session_scope, created_at, updated_at, started_at, ended_at, status, chat_type, channel, account_id,
      model_provider, model, agent_harness_id, parent_session_key, spawned_by, display_name, acp_owned,
      plugin_owner_id, hook_external_content_source)
    VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, ?15, ?16, ?17, ?18, ?19, ?20, ?21, ?22)
    ON CONFLICT (session_id) DO UPDATE SET session_key = excluded.session_key, updated_at = excluded.updated_at";

/// The `subagent_runs` columns, in the order of [`PUT_RUN`].
pub const RUN_COLUMNS: [&str; 6] =
    ["run_id", "child_session_key", "controller_session_key", "requester_session_key", "created_at", "payload_json"];

const PUT_RUN: &str = "INSERT OR IGNORE INTO subagent_runs (run_id, child_session_key, controller_session_key,
      requester_session_key, created_at, payload_json) VALUES (?1, ?2, ?3, ?4, ?5, ?6)";

/// The `task_runs` columns, in the order of [`PUT_TASK`].
pub const TASK_COLUMNS: [&str; 30] = [
    "task_id",
    "runtime",
    "task_kind",
    "source_id",
    "requester_session_key",
    "owner_key",
    "scope_kind",
    "child_session_key",
    "parent_flow_id",
    "parent_task_id",
    "agent_id",
    "requester_agent_id",
    "run_id",
    "label",
    "task",
    "status",
    "delivery_status",
    "notify_policy",
    "created_at",
    "started_at",
    "ended_at",
    "last_event_at",
    "cleanup_after",
    "tool_use_count",
    "last_tool_name",
    "error",
    "progress_summary",
    "terminal_summary",
    "terminal_outcome",
    "detail_json",
];

const PUT_TASK: &str = "INSERT OR IGNORE INTO task_runs (task_id, runtime, task_kind, source_id, requester_session_key,
      owner_key, scope_kind, child_session_key, parent_flow_id, parent_task_id, agent_id, requester_agent_id, run_id,
      label, task, status, delivery_status, notify_policy, created_at, started_at, ended_at, last_event_at,
      cleanup_after, tool_use_count, last_tool_name, error, progress_summary, terminal_summary, terminal_outcome,
      detail_json)
    VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, ?15, ?16, ?17, ?18, ?19, ?20, ?21, ?22,
      ?23, ?24, ?25, ?26, ?27, ?28, ?29, ?30)";

const PUT_TASK_DELIVERY: &str = "INSERT OR IGNORE INTO task_delivery_state (task_id, requester_origin_json,
      last_notified_event_at) VALUES (?1, ?2, ?3)";

fn sql_value(v: Option<&Value>) -> SqlValue {
    match v {
        None | Some(Value::Null) => SqlValue::Null,
        Some(Value::Bool(b)) => SqlValue::Integer(i64::from(*b)),
        Some(Value::Number(n)) => match n.as_i64() {
            Some(i) => SqlValue::Integer(i),
            None => n.as_f64().map_or(SqlValue::Null, |f| SqlValue::Integer(f.floor() as i64)),
        },
        Some(Value::String(s)) => SqlValue::Text(s.clone()),
        Some(other) => SqlValue::Text(other.to_string()),
    }
}

fn bind(columns: &[&str], row: &Map<String, Value>) -> Vec<SqlValue> {
    columns.iter().map(|c| sql_value(row.get(*c))).collect()
}

/// A 2026.9 database the gateway initialised, open for one export transaction.
pub struct Oc9Writer {
    conn: Connection,
}

impl Oc9Writer {
    /// Opens the existing database at `path` (never creating it) when it carries the gateway's
    /// `role` and schema `version`, and begins the transaction.
    pub fn open(path: &Path, role: &str, version: i64) -> Result<Oc9Writer, Why> {
        if !path.is_file() {
            return Err("it does not exist".into());
        }
        let flags = OpenFlags::SQLITE_OPEN_READ_WRITE | OpenFlags::SQLITE_OPEN_NO_MUTEX;
        let conn = Connection::open_with_flags(path, flags).map_err(why)?;
        conn.busy_timeout(std::time::Duration::from_secs(10)).map_err(why)?;
        let found: i64 = conn.query_row("PRAGMA user_version", [], |r| r.get(0)).map_err(why)?;
        let meta: i64 = conn
            .query_row("SELECT count(*) FROM sqlite_master WHERE type = 'table' AND name = 'schema_meta'", [], |r| {
                r.get(0)
            })
            .map_err(why)?;
        let found_role: Option<String> = if meta > 0 {
            conn.query_row("SELECT role FROM schema_meta ORDER BY meta_key LIMIT 1", [], |r| r.get(0)).ok()
        } else {
            None
        };
        if found != version || found_role.as_deref() != Some(role) {
            return Err(format!(
                "not a {role} database of schema {version} initialised by the 2026.9 gateway (schema {found}, role {})",
                found_role.as_deref().unwrap_or("none")
            ));
        }
        conn.execute_batch("PRAGMA foreign_keys = ON; BEGIN IMMEDIATE").map_err(why)?;
        Ok(Oc9Writer { conn })
    }

    fn run(&self, query: &'static str, values: Vec<SqlValue>) -> Result<usize, Why> {
        let mut st = self.conn.prepare_cached(query).map_err(why)?;
        st.execute(rusqlite::params_from_iter(values)).map_err(why)
    }

    /// Adds or replaces the node of `row["session_key"]` (columns [`NODE_COLUMNS`]).
    pub fn put_node(&self, row: &Map<String, Value>) -> Result<(), Why> {
        self.run(PUT_NODE, bind(&NODE_COLUMNS, row)).map(drop)
    }

    /// Adds a generation (columns [`WINDOW_COLUMNS`]); one already there keeps its columns but
    /// its key and `updated_at`.
    pub fn put_window(&self, row: &Map<String, Value>) -> Result<(), Why> {
        self.run(PUT_WINDOW, bind(&WINDOW_COLUMNS, row)).map(drop)
    }

    /// How many events the generation already holds.
    pub fn event_count(&self, session_id: &str) -> Result<u64, Why> {
        let mut st =
            self.conn.prepare_cached("SELECT count(*) FROM transcript_events WHERE session_id = ?1").map_err(why)?;
        st.query_row([session_id], |r| r.get::<_, i64>(0)).map(|n| n.max(0) as u64).map_err(why)
    }

    /// Adds one event as JSON text.
    pub fn put_event(&self, session_id: &str, seq: i64, json: &str, created_at: i64) -> Result<(), Why> {
        let mut st = self
            .conn
            .prepare_cached(
                "INSERT INTO transcript_events (session_id, seq, event_json, created_at) VALUES (?1, ?2, ?3, ?4)",
            )
            .map_err(why)?;
        st.execute(rusqlite::params![session_id, seq, json, created_at]).map(drop).map_err(why)
    }

    /// Adds a sub-agent run unless its run id is there (columns [`RUN_COLUMNS`]); whether it was.
    pub fn put_run(&self, row: &Map<String, Value>) -> Result<bool, Why> {
        self.run(PUT_RUN, bind(&RUN_COLUMNS, row)).map(|n| n > 0)
    }

    /// Adds a task row and its delivery state unless its task id is there (columns
    /// [`TASK_COLUMNS`], plus `requester_origin_json` and `last_notified_event_at`).
    pub fn put_task(&self, row: &Map<String, Value>) -> Result<bool, Why> {
        let added = self.run(PUT_TASK, bind(&TASK_COLUMNS, row))? > 0;
        if added && (row.contains_key("requester_origin_json") || row.contains_key("last_notified_event_at")) {
            self.run(PUT_TASK_DELIVERY, bind(&["task_id", "requester_origin_json", "last_notified_event_at"], row))?;
        }
        Ok(added)
    }

    /// Commits everything written since [`Oc9Writer::open`].
    pub fn commit(self) -> Result<(), Why> {
        self.conn.execute_batch("COMMIT").map_err(why)
    }
}

impl Drop for Oc9Writer {
    fn drop(&mut self) {
        if !self.conn.is_autocommit() {
            let _ = self.conn.execute_batch("ROLLBACK");
        }
    }
}
