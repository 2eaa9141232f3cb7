//! The task ledger (`task_runs`) and the persisted yields (`yields`): the rows behind the
//! `subagents` tool's stable task ids and behind `sessions_yield`'s resume. Plain reads and
//! writes of finished rows; which status a task has, and when a yield resumes, is decided by
//! the orchestration. Also the one query both need: which children of a requester have not
//! yet delivered their completion (their run still going, or their announce not yet final in
//! the outbox).

use rusqlite::{params, OptionalExtension, Row};

use super::{sql, Db};
use crate::error::Result;

/// One task as stored (the 2026.9 ledger's words: `status` queued|running|succeeded|failed|
/// timed_out|cancelled|lost, `delivery_status` pending|delivered|failed|not_applicable).
#[derive(Debug, Clone, PartialEq, Default)]
pub struct TaskRow {
    pub task_id: String,
    pub run_id: String,
    pub runtime: String,
    pub owner_key: String,
    pub child_session_key: Option<String>,
    pub agent_id: Option<String>,
    pub requester_agent_id: Option<String>,
    pub label: Option<String>,
    pub task: Option<String>,
    pub status: String,
    pub delivery_status: String,
    pub created_at: i64,
    pub started_at: Option<i64>,
    pub ended_at: Option<i64>,
    pub last_event_at: Option<i64>,
    pub error: Option<String>,
    pub progress_summary: Option<String>,
    pub terminal_summary: Option<String>,
    pub terminal_outcome: Option<String>,
}

macro_rules! task_columns {
    () => {
        "task_id, run_id, runtime, owner_key, child_session_key, agent_id, requester_agent_id, label, task, \
         status, delivery_status, created_at, started_at, ended_at, last_event_at, error, progress_summary, \
         terminal_summary, terminal_outcome"
    };
}

fn task_row(r: &Row<'_>) -> rusqlite::Result<TaskRow> {
    Ok(TaskRow {
        task_id: r.get(0)?,
        run_id: r.get(1)?,
        runtime: r.get(2)?,
        owner_key: r.get(3)?,
        child_session_key: r.get(4)?,
        agent_id: r.get(5)?,
        requester_agent_id: r.get(6)?,
        label: r.get(7)?,
        task: r.get(8)?,
        status: r.get(9)?,
        delivery_status: r.get(10)?,
        created_at: r.get(11)?,
        started_at: r.get(12)?,
        ended_at: r.get(13)?,
        last_event_at: r.get(14)?,
        error: r.get(15)?,
        progress_summary: r.get(16)?,
        terminal_summary: r.get(17)?,
        terminal_outcome: r.get(18)?,
    })
}

/// One persisted yield.
#[derive(Debug, Clone, PartialEq)]
pub struct YieldRow {
    pub yield_id: String,
    pub session_key: String,
    pub turn_run_id: Option<String>,
    pub message: String,
    pub acknowledgment: Option<String>,
    /// where the yielding turn came from (`{channel, to, accountId, threadId}`), the resumed
    /// turn's route
    pub origin: Option<serde_json::Value>,
    /// children | message
    pub wait_for: String,
    /// the child run ids the yield waits for
    pub children: Vec<String>,
    /// waiting | resuming | resumed
    pub status: String,
    pub resume_run_id: Option<String>,
    pub created_at: i64,
    pub resumed_at: Option<i64>,
}

macro_rules! yield_columns {
    () => {
        "yield_id, session_key, turn_run_id, message, acknowledgment, wait_for, children, status, resume_run_id, \
         created_at, resumed_at, origin"
    };
}

fn yield_row(r: &Row<'_>) -> rusqlite::Result<YieldRow> {
    let children: String = r.get(6)?;
    Ok(YieldRow {
        yield_id: r.get(0)?,
        session_key: r.get(1)?,
        turn_run_id: r.get(2)?,
        message: r.get(3)?,
        acknowledgment: r.get(4)?,
        wait_for: r.get(5)?,
        children: serde_json::from_str(&children).unwrap_or_default(),
        status: r.get(7)?,
        resume_run_id: r.get(8)?,
        created_at: r.get(9)?,
        resumed_at: r.get(10)?,
        origin: r.get::<_, Option<String>>(11)?.and_then(|t| serde_json::from_str(&t).ok()),
    })
}

/// A child whose completion has not reached its requester yet.
#[derive(Debug, Clone, PartialEq)]
pub struct PendingChild {
    pub run_id: String,
    pub child_session_key: String,
    /// the record as JSON (label, startedAt are read from it)
    pub record: String,
    /// the run has ended (its completion is being delivered)
    pub ended: bool,
}

impl Db<'_> {
    /// Inserts a task, or replaces the row with the same `task_id`.
    pub fn put_task(&self, t: &TaskRow) -> Result<()> {
        let mut st = self
            .conn
            .prepare_cached(concat!(
                "INSERT OR REPLACE INTO task_runs (",
                task_columns!(),
                ") VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, ?15, ?16, ?17, ?18, ?19)"
            ))
            .map_err(sql)?;
        st.execute(params![
            t.task_id,
            t.run_id,
            t.runtime,
            t.owner_key,
            t.child_session_key,
            t.agent_id,
            t.requester_agent_id,
            t.label,
            t.task,
            t.status,
            t.delivery_status,
            t.created_at,
            t.started_at,
            t.ended_at,
            t.last_event_at,
            t.error,
            t.progress_summary,
            t.terminal_summary,
            t.terminal_outcome
        ])
        .map_err(sql)?;
        Ok(())
    }

    pub fn task(&self, task_id: &str) -> Result<Option<TaskRow>> {
        let mut st = self
            .conn
            .prepare_cached(concat!("SELECT ", task_columns!(), " FROM task_runs WHERE task_id = ?1"))
            .map_err(sql)?;
        st.query_row([task_id], task_row).optional().map_err(sql)
    }

    pub fn task_by_run(&self, run_id: &str) -> Result<Option<TaskRow>> {
        let mut st = self
            .conn
            .prepare_cached(concat!("SELECT ", task_columns!(), " FROM task_runs WHERE run_id = ?1"))
            .map_err(sql)?;
        st.query_row([run_id], task_row).optional().map_err(sql)
    }

    /// The tasks one session owns, oldest first.
    pub fn tasks_of_owner(&self, owner_key: &str) -> Result<Vec<TaskRow>> {
        let mut st = self
            .conn
            .prepare_cached(concat!(
                "SELECT ",
                task_columns!(),
                " FROM task_runs WHERE owner_key = ?1 ORDER BY created_at, rowid"
            ))
            .map_err(sql)?;
        let rows = st.query_map([owner_key], task_row).map_err(sql)?;
        rows.collect::<rusqlite::Result<Vec<_>>>().map_err(sql)
    }

    /// The children of `requester_key` whose completion has not reached it: the run has not
    /// ended, or its announce is still pending and its outbox item (if recorded) is not final.
    /// In registration order.
    pub fn undelivered_children(&self, requester_key: &str) -> Result<Vec<PendingChild>> {
        let mut st = self
            .conn
            .prepare_cached(
                "SELECT s.run_id, s.child_key, s.record, s.ended FROM subagent_runs s
                 LEFT JOIN outbox o ON o.idempotency_key = json_extract(s.record, '$.announce.idempotencyKey')
                 WHERE s.requester_key = ?1
                   AND (s.ended = 0 OR (s.announce_status = 'pending' AND (o.status IS NULL OR o.status = 'pending')))
                 ORDER BY s.rowid",
            )
            .map_err(sql)?;
        let rows = st
            .query_map([requester_key], |r| {
                Ok(PendingChild {
                    run_id: r.get(0)?,
                    child_session_key: r.get(1)?,
                    record: r.get(2)?,
                    ended: r.get::<_, i64>(3)? != 0,
                })
            })
            .map_err(sql)?;
        rows.collect::<rusqlite::Result<Vec<_>>>().map_err(sql)
    }

    pub fn insert_yield(&self, y: &YieldRow) -> Result<()> {
        let mut st = self
            .conn
            .prepare_cached(concat!(
                "INSERT INTO yields (",
                yield_columns!(),
                ") VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12)"
            ))
            .map_err(sql)?;
        let children = serde_json::to_string(&y.children).unwrap_or_else(|_| "[]".to_owned());
        st.execute(params![
            y.yield_id,
            y.session_key,
            y.turn_run_id,
            y.message,
            y.acknowledgment,
            y.wait_for,
            children,
            y.status,
            y.resume_run_id,
            y.created_at,
            y.resumed_at,
            y.origin.as_ref().map(|o| o.to_string())
        ])
        .map_err(sql)?;
        Ok(())
    }

    pub fn yield_row(&self, yield_id: &str) -> Result<Option<YieldRow>> {
        let mut st = self
            .conn
            .prepare_cached(concat!("SELECT ", yield_columns!(), " FROM yields WHERE yield_id = ?1"))
            .map_err(sql)?;
        st.query_row([yield_id], yield_row).optional().map_err(sql)
    }

    /// The yields of a session that have not resumed yet, oldest first.
    pub fn open_yields_of(&self, session_key: &str) -> Result<Vec<YieldRow>> {
        let mut st = self
            .conn
            .prepare_cached(concat!(
                "SELECT ",
                yield_columns!(),
                " FROM yields WHERE session_key = ?1 AND status <> 'resumed' ORDER BY created_at, rowid"
            ))
            .map_err(sql)?;
        let rows = st.query_map([session_key], yield_row).map_err(sql)?;
        rows.collect::<rusqlite::Result<Vec<_>>>().map_err(sql)
    }

    /// Every yield that has not resumed yet, oldest first.
    pub fn open_yields(&self) -> Result<Vec<YieldRow>> {
        let mut st = self
            .conn
            .prepare_cached(concat!(
                "SELECT ",
                yield_columns!(),
                " FROM yields WHERE status <> 'resumed' ORDER BY created_at, rowid"
            ))
            .map_err(sql)?;
        let rows = st.query_map([], yield_row).map_err(sql)?;
        rows.collect::<rusqlite::Result<Vec<_>>>().map_err(sql)
    }

    /// Moves a yield from status `from` to `to` (with the resume run and time); `false` when
    /// it was not in `from` (another process or task moved it first).
    pub fn move_yield(
        &self,
        yield_id: &str,
        from: &str,
        to: &str,
        resume_run_id: Option<&str>,
        at: Option<i64>,
    ) -> Result<bool> {
        let mut st = self
            .conn
            .prepare_cached(
                "UPDATE yields SET status = ?3, resume_run_id = coalesce(?4, resume_run_id),
                   resumed_at = coalesce(?5, resumed_at)
                 WHERE yield_id = ?1 AND status = ?2",
            )
            .map_err(sql)?;
        Ok(st.execute(params![yield_id, from, to, resume_run_id, at]).map_err(sql)? > 0)
    }
}

#[cfg(test)]
#[path = "tasks_tests.rs"]
mod tests;
