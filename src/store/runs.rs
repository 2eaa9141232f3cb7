//! Run records: one row per model run the engine starts, so that `waitRun` answers for runs of
//! an earlier process too, and so that the runs of an owner whose lease is gone (a crash, a
//! kill, another host that stopped) can be told and ended. Each run names its owner
//! (`owners.owner_id`, API.md §1.7).

use super::Db;
use crate::args;
use crate::error::Result;

/// A run as stored.
#[derive(Debug, Clone, PartialEq)]
pub struct RunRecord {
    pub run_id: String,
    pub session_key: String,
    pub lane: String,
    pub chain_id: Option<String>,
    /// running | ok | error | timeout
    pub status: String,
    pub started_at: Option<i64>,
    pub ended_at: Option<i64>,
    pub error: Option<String>,
}

impl Db<'_> {
    /// Records a run as running.
    pub fn insert_run(&self, r: &RunRecord, owner: &str) -> Result<()> {
        self.exec(
            "INSERT INTO runs (run_id, session_key, lane, chain_id, status, started_at, ended_at, error, owner)
             VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9)",
            args![r.run_id, r.session_key, r.lane, r.chain_id, r.status, r.started_at, r.ended_at, r.error, owner],
        )?;
        Ok(())
    }

    /// Records how a run ended, unless it already has (someone that took it over ended it
    /// first: the first end stands); whether it was still running.
    pub fn finish_run(&self, run_id: &str, status: &str, ended_at: i64, error: Option<&str>) -> Result<bool> {
        let n = self.exec(
            "UPDATE runs SET status = ?2, ended_at = ?3, error = ?4 WHERE run_id = ?1 AND status = 'running'",
            args![run_id, status, ended_at, error],
        )?;
        Ok(n > 0)
    }

    pub fn run(&self, run_id: &str) -> Result<Option<RunRecord>> {
        self.row(
            "SELECT run_id, session_key, lane, chain_id, status, started_at, ended_at, error FROM runs WHERE run_id = ?1",
            args![run_id],
            |r| {
                Ok(RunRecord {
                    run_id: r.get(0)?,
                    session_key: r.get(1)?,
                    lane: r.get(2)?,
                    chain_id: r.get(3)?,
                    status: r.get(4)?,
                    started_at: r.get(5)?,
                    ended_at: r.get(6)?,
                    error: r.get(7)?,
                })
            },
        )
    }

    /// How many runs a chain holds.
    pub fn chain_run_count(&self, chain_id: &str) -> Result<u64> {
        self.count("SELECT count(*) FROM runs WHERE chain_id = ?1", args![chain_id])
    }

    /// The newest run still running on a session: `(run_id, chain_id)`.
    pub fn running_on(&self, session_key: &str) -> Result<Option<(String, Option<String>)>> {
        self.row(
            "SELECT run_id, chain_id FROM runs WHERE session_key = ?1 AND status = 'running'
             ORDER BY started_at DESC LIMIT 1",
            args![session_key],
            |r| Ok((r.get(0)?, r.get(1)?)),
        )
    }

    /// Ends with `status` and `error` every run still running whose owner holds no lease at
    /// `now` (no owner, an owner with no row, or one whose lease expired): the takeover of a
    /// gone owner's runs (API.md §1.7). Returns their ids.
    pub fn end_unheld_runs(&self, now: i64, status: &str, error: &str) -> Result<Vec<String>> {
        self.rows(
            "UPDATE runs SET status = ?2, ended_at = ?1, error = ?3
             WHERE status = 'running'
               AND (owner IS NULL OR owner NOT IN (SELECT owner_id FROM owners WHERE expires_at > ?1))
             RETURNING run_id",
            args![now, status, error],
            |r| r.get(0),
        )
    }

    /// Whether the owner a run names still holds its lease at `now` (its row is on record with a
    /// later expiry): the run, and what follows its end, is that owner's business.
    pub fn run_held(&self, run_id: &str, now: i64) -> Result<bool> {
        let n = self.count(
            "SELECT count(*) FROM runs r JOIN owners o ON o.owner_id = r.owner
             WHERE r.run_id = ?1 AND o.expires_at > ?2",
            args![run_id, now],
        )?;
        Ok(n > 0)
    }

    /// Ends a run that is still running (and only then) with `status` and `error`; whether it was.
    pub fn end_if_running(&self, run_id: &str, status: &str, ended_at: i64, error: &str) -> Result<bool> {
        self.finish_run(run_id, status, ended_at, Some(error))
    }
}

#[cfg(test)]
#[path = "runs_tests.rs"]
mod tests;
