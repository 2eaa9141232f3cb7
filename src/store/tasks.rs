//! The task ledger (`task_runs`): one row per background task, the 2026.9 task row kept whole
//! as camelCase JSON (`record`) with the columns it is looked up by (owner, run, child)
//! derived from it, so they never disagree. One table for every task: those the engine creates
//! for its sub-agent runs (the `subagents` tool's stable ids) and those imported from a 2026.9
//! state folder, whose record text is kept byte for byte until the engine changes the task, so
//! that an export writes back what was read. Fields this build does not know are kept as they
//! came. No decisions here: callers hand in finished rows; it never interprets a status.

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use super::{Db, Dialect, Row};
use crate::args;
use crate::error::Result;

/// One task (2026.9 `TaskRecord`): `status` queued|running|succeeded|failed|timed_out|
/// cancelled|lost, `deliveryStatus` pending|delivered|failed|not_applicable|….
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct TaskRow {
    pub task_id: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub run_id: Option<String>,
    pub runtime: String,
    /// the owning session's canonical key
    pub owner_key: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub requester_session_key: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub child_session_key: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub agent_id: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub requester_agent_id: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub label: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub task: Option<String>,
    pub status: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub delivery_status: Option<String>,
    #[serde(default)]
    pub created_at: i64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub started_at: Option<i64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ended_at: Option<i64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_event_at: Option<i64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub progress_summary: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub terminal_summary: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub terminal_outcome: Option<String>,
    /// every other field of the 2026.9 row (`scopeKind`, `detail`, `deliveryState`, …)
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

impl TaskRow {
    /// A stored record; `None` when it is not a task object.
    pub fn from_json(text: &str) -> Option<TaskRow> {
        serde_json::from_str(text).ok()
    }

    pub fn to_json(&self) -> Value {
        serde_json::to_value(self).unwrap_or(Value::Null)
    }

    /// The row as stored: its filter columns and its whole record.
    fn stored(&self) -> StoredTask {
        StoredTask {
            task_id: self.task_id.clone(),
            run_id: self.run_id.clone(),
            runtime: self.runtime.clone(),
            status: self.status.clone(),
            delivery_status: self.delivery_status.clone(),
            owner_key: self.owner_key.clone(),
            requester_session_key: self.requester_session_key.clone(),
            child_session_key: self.child_session_key.clone(),
            agent_id: self.agent_id.clone(),
            created_at: self.created_at,
            ended_at: self.ended_at,
            record: self.to_json().to_string(),
        }
    }
}

/// A task row as stored, its record unparsed: what the importer adds (a 2026.9 ledger row, the
/// filter columns read from it) and what the export reads back.
#[derive(Debug, Clone, PartialEq)]
pub struct StoredTask {
    pub task_id: String,
    pub run_id: Option<String>,
    pub runtime: String,
    pub status: String,
    pub delivery_status: Option<String>,
    pub owner_key: String,
    pub requester_session_key: Option<String>,
    pub child_session_key: Option<String>,
    pub agent_id: Option<String>,
    pub created_at: i64,
    pub ended_at: Option<i64>,
    /// the whole task as a JSON object (camelCase names), as written
    pub record: String,
}

/// The columns of `task_runs` in [`StoredTask`]'s order (`?1`…`?12` in the writes).
macro_rules! task_columns {
    () => {
        "task_id, run_id, runtime, status, delivery_status, owner_key, requester_session_key, \
         child_session_key, agent_id, created_at, ended_at, record"
    };
}

/// A task, or the row with the same `taskId` replaced (it keeps its place among equal
/// `createdAt`s).
const PUT_TASK: &str = concat!(
    "INSERT INTO task_runs (",
    task_columns!(),
    ") VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12)
     ON CONFLICT (task_id) DO UPDATE SET run_id = ?2, runtime = ?3, status = ?4, delivery_status = ?5,
       owner_key = ?6, requester_session_key = ?7, child_session_key = ?8, agent_id = ?9,
       created_at = ?10, ended_at = ?11, record = ?12"
);
/// A task, unless one with its `taskId` is stored.
const ADD_TASK: &str = concat!(
    "INSERT INTO task_runs (",
    task_columns!(),
    ") VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12) ON CONFLICT (task_id) DO NOTHING"
);

fn stored_task(r: &Row<'_>) -> Result<StoredTask> {
    Ok(StoredTask {
        task_id: r.get(0)?,
        run_id: r.get(1)?,
        runtime: r.get(2)?,
        status: r.get(3)?,
        delivery_status: r.get(4)?,
        owner_key: r.get(5)?,
        requester_session_key: r.get(6)?,
        child_session_key: r.get(7)?,
        agent_id: r.get(8)?,
        created_at: r.get(9)?,
        ended_at: r.get(10)?,
        record: r.get(11)?,
    })
}

fn read_rows(rows: Vec<String>) -> Vec<TaskRow> {
    rows.iter().filter_map(|t| TaskRow::from_json(t)).collect()
}

/// The blocked completions still within their retention, read from the record (SQLite's JSON
/// functions; on PostgreSQL `jsonb`, where a `cleanupAfter` that is not a number counts as "still
/// kept", as SQLite's ordering of text above numbers makes it there).
const BLOCKED_SQLITE: &str =
    "SELECT count(*) FROM task_runs WHERE json_extract(record, '$.terminalOutcome') = 'blocked'
       AND coalesce(json_extract(record, '$.cleanupAfter'), ?1 + 1) > ?1";
const BLOCKED_PG: &str = "SELECT count(*) FROM task_runs WHERE (record::jsonb ->> 'terminalOutcome') = 'blocked'
       AND CASE WHEN jsonb_typeof(record::jsonb -> 'cleanupAfter') = 'number'
           THEN (record::jsonb ->> 'cleanupAfter')::numeric > ?1 ELSE TRUE END";

impl Db<'_> {
    /// Inserts a task, or replaces the row with the same `taskId` (it keeps its place among
    /// equal `createdAt`s).
    pub fn put_task_run(&self, t: &TaskRow) -> Result<()> {
        self.insert_task(PUT_TASK, &t.stored())?;
        Ok(())
    }

    /// Adds a task as given, its record text unchanged, unless one with its task id is stored
    /// (that one stands, whatever the engine has made of it since); whether it was added.
    pub fn insert_task_if_absent(&self, t: &StoredTask) -> Result<bool> {
        Ok(self.insert_task(ADD_TASK, t)? > 0)
    }

    /// One of the two inserts above, `t`'s columns bound as `?1`…`?12`.
    fn insert_task(&self, sql: &'static str, t: &StoredTask) -> Result<usize> {
        self.exec(
            sql,
            args![
                t.task_id,
                t.run_id,
                t.runtime,
                t.status,
                t.delivery_status,
                t.owner_key,
                t.requester_session_key,
                t.child_session_key,
                t.agent_id,
                t.created_at,
                t.ended_at,
                t.record
            ],
        )
    }

    /// Every task as stored, oldest first (then by id).
    pub fn all_tasks(&self) -> Result<Vec<StoredTask>> {
        self.rows(
            concat!("SELECT ", task_columns!(), " FROM task_runs ORDER BY created_at, task_id"),
            args![],
            stored_task,
        )
    }

    /// One task by id; `None` when missing or unreadable.
    pub fn task_run(&self, task_id: &str) -> Result<Option<TaskRow>> {
        let text =
            self.row("SELECT record FROM task_runs WHERE task_id = ?1", args![task_id], |r| r.get::<String>(0))?;
        Ok(text.and_then(|t| TaskRow::from_json(&t)))
    }

    /// The task of a run (the oldest, should there be more than one).
    pub fn task_run_by_run_id(&self, run_id: &str) -> Result<Option<TaskRow>> {
        let text = self.row(
            "SELECT record FROM task_runs WHERE run_id = ?1 ORDER BY created_at, rowid LIMIT 1",
            args![run_id],
            |r| r.get::<String>(0),
        )?;
        Ok(text.and_then(|t| TaskRow::from_json(&t)))
    }

    /// Completed tasks whose completion could not be delivered (terminal outcome `blocked`)
    /// still within their retention at `now`.
    pub fn blocked_task_count(&self, now: i64) -> Result<u64> {
        let q = match self.dialect() {
            Dialect::Sqlite => BLOCKED_SQLITE,
            Dialect::Postgres => BLOCKED_PG,
        };
        self.count(q, args![now])
    }

    /// The tasks one session owns, oldest first; unreadable rows skipped.
    pub fn task_runs_for_owner(&self, owner_key: &str) -> Result<Vec<TaskRow>> {
        let rows = self.rows(
            "SELECT record FROM task_runs WHERE owner_key = ?1 ORDER BY created_at, rowid",
            args![owner_key],
            |r| r.get(0),
        )?;
        Ok(read_rows(rows))
    }
}

#[cfg(test)]
#[path = "tasks_tests.rs"]
mod tests;
