//! Persisted `sessions_yield` waits (`yields`) and the one query a yield needs: which children
//! of a requester have not yet delivered their completion (their run still going, or their
//! announce not yet final in the outbox). Plain reads and writes; when a yield resumes is the
//! orchestration's decision.

use super::{Db, Dialect, Row};
use crate::args;
use crate::error::Result;

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

fn yield_row(r: &Row<'_>) -> Result<YieldRow> {
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
        origin: r.get::<Option<String>>(11)?.and_then(|t| serde_json::from_str(&t).ok()),
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

/// The children a yield still waits for (see [`Db::undelivered_children`]), joined to their
/// outbox item by the idempotency key the record names (SQLite's JSON functions, PostgreSQL's
/// `jsonb`).
macro_rules! undelivered_sql {
    ($idempotency_key:literal) => {
        concat!(
            "SELECT s.run_id, s.child_key, s.record, s.ended FROM subagent_runs s
             LEFT JOIN outbox o ON o.idempotency_key = ",
            $idempotency_key,
            " WHERE s.requester_key = ?1 AND s.announce_status <> 'skipped'
               AND (s.ended = 0 OR (s.announce_status = 'pending' AND (o.status IS NULL OR o.status = 'pending')))
             ORDER BY s.rowid"
        )
    };
}
const UNDELIVERED_SQLITE: &str = undelivered_sql!("json_extract(s.record, '$.announce.idempotencyKey')");
const UNDELIVERED_PG: &str = undelivered_sql!("(s.record::jsonb -> 'announce' ->> 'idempotencyKey')");

impl Db<'_> {
    /// The children of `requester_key` whose completion has not reached it: the run has not
    /// ended, or its announce is still pending and its outbox item (if recorded) is not final.
    /// A child with no completion to deliver (announce `skipped`) never counts.
    /// In registration order.
    pub fn undelivered_children(&self, requester_key: &str) -> Result<Vec<PendingChild>> {
        let q = match self.dialect() {
            Dialect::Sqlite => UNDELIVERED_SQLITE,
            Dialect::Postgres => UNDELIVERED_PG,
        };
        self.rows(q, args![requester_key], |r| {
            Ok(PendingChild {
                run_id: r.get(0)?,
                child_session_key: r.get(1)?,
                record: r.get(2)?,
                ended: r.get::<i64>(3)? != 0,
            })
        })
    }

    pub fn insert_yield(&self, y: &YieldRow) -> Result<()> {
        let children = serde_json::to_string(&y.children).unwrap_or_else(|_| "[]".to_owned());
        self.exec(
            concat!(
                "INSERT INTO yields (",
                yield_columns!(),
                ") VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12)"
            ),
            args![
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
            ],
        )?;
        Ok(())
    }

    pub fn yield_row(&self, yield_id: &str) -> Result<Option<YieldRow>> {
        self.row(concat!("SELECT ", yield_columns!(), " FROM yields WHERE yield_id = ?1"), args![yield_id], yield_row)
    }

    /// The yields of a session that have not resumed yet, oldest first.
    pub fn open_yields_of(&self, session_key: &str) -> Result<Vec<YieldRow>> {
        self.rows(
            concat!(
                "SELECT ",
                yield_columns!(),
                " FROM yields WHERE session_key = ?1 AND status <> 'resumed' ORDER BY created_at, rowid"
            ),
            args![session_key],
            yield_row,
        )
    }

    /// Every yield that has not resumed yet, oldest first.
    pub fn open_yields(&self) -> Result<Vec<YieldRow>> {
        self.rows(
            concat!("SELECT ", yield_columns!(), " FROM yields WHERE status <> 'resumed' ORDER BY created_at, rowid"),
            args![],
            yield_row,
        )
    }

    /// A child run of `requester_key` continues under a new run id (a resumed child): the open
    /// yields that claimed `old` claim `new` instead.
    pub fn rename_yield_child(&self, requester_key: &str, old: &str, new: &str) -> Result<()> {
        for y in self.open_yields_of(requester_key)? {
            if !y.children.iter().any(|c| c == old) {
                continue;
            }
            let children: Vec<&str> = y.children.iter().map(|c| if c == old { new } else { c.as_str() }).collect();
            let text = serde_json::to_string(&children).unwrap_or_else(|_| "[]".to_owned());
            self.exec("UPDATE yields SET children = ?2 WHERE yield_id = ?1", args![y.yield_id, text])?;
        }
        Ok(())
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
        let n = self.exec(
            "UPDATE yields SET status = ?3, resume_run_id = coalesce(?4, resume_run_id),
               resumed_at = coalesce(?5, resumed_at)
             WHERE yield_id = ?1 AND status = ?2",
            args![yield_id, from, to, resume_run_id, at],
        )?;
        Ok(n > 0)
    }

    /// Moves a yield that still stands as `status` with `resume_run_id` (as it was read) to
    /// `resuming` with the resume run `run_id`: the claim a resume makes, in the same write as
    /// it records its run. `false` when the yield moved meanwhile (another process or task
    /// claimed it first).
    pub fn claim_yield_resume(
        &self,
        yield_id: &str,
        status: &str,
        resume_run_id: Option<&str>,
        run_id: &str,
    ) -> Result<bool> {
        let n = self.exec(
            "UPDATE yields SET status = 'resuming', resume_run_id = ?4
             WHERE yield_id = ?1 AND status = ?2 AND coalesce(resume_run_id, '') = coalesce(?3, '')",
            args![yield_id, status, resume_run_id, run_id],
        )?;
        Ok(n > 0)
    }
}

#[cfg(test)]
#[path = "yields_tests.rs"]
mod tests;
