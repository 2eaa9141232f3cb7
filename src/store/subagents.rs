//! The sub-agent registry as stored (REFERENCE.md §6.4, API.md §4 `SubagentRun`): one row per
//! spawned child run, the record itself as JSON plus the columns the registry looks things up
//! by (requester, ended or not, announce status, archive time). The columns are always derived
//! from the record, so they never disagree with it. No decisions here: callers hand in finished
//! records.

use serde::{Deserialize, Serialize};

use super::Db;
use crate::args;
use crate::error::Result;

/// How a child run ended (`outcome`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RunOutcome {
    /// ok | error | timeout | unknown
    pub status: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

/// Where its announce stands (`announce`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct AnnounceState {
    /// pending | delivered | failed | skipped
    pub status: String,
    #[serde(default, deserialize_with = "count")]
    pub attempts: u32,
    pub idempotency_key: String,
}

/// One registry record, exactly the API.md §4 `SubagentRun` shape.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SubagentRun {
    pub run_id: String,
    pub child_session_key: String,
    pub requester_session_key: String,
    pub requester_display_key: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub requester_origin: Option<serde_json::Value>,
    #[serde(default)]
    pub task: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub label: Option<String>,
    /// delete | keep
    #[serde(default = "keep")]
    pub cleanup: String,
    #[serde(default, deserialize_with = "ms")]
    pub created_at: i64,
    #[serde(default, skip_serializing_if = "Option::is_none", deserialize_with = "opt_ms")]
    pub started_at: Option<i64>,
    #[serde(default, skip_serializing_if = "Option::is_none", deserialize_with = "opt_ms")]
    pub ended_at: Option<i64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub outcome: Option<RunOutcome>,
    pub announce: AnnounceState,
    #[serde(default, skip_serializing_if = "Option::is_none", deserialize_with = "opt_ms")]
    pub archive_at_ms: Option<i64>,
    #[serde(default, skip_serializing_if = "Option::is_none", deserialize_with = "opt_ms")]
    pub cleanup_completed_at: Option<i64>,
    /// 2026.9 `pauseReason`: `sessions_yield` while the child waits in its own
    /// `sessions_yield` with `waitFor: "message"` (its run ended, its completion is held back)
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pause_reason: Option<String>,
    /// 2026.9 `taskRunId`: the run the task started with, when this record is a later run of
    /// the same task (a resumed child)
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub task_run_id: Option<String>,
    /// 2026.9 `runTimeoutSeconds`: the child's own run timeout from its spawn (absent: the
    /// default), the timeout of its resumed runs too
    #[serde(default, skip_serializing_if = "Option::is_none", deserialize_with = "opt_secs")]
    pub run_timeout_seconds: Option<u64>,
}

// Timestamps and counts written by JavaScript may arrive as floats (`1.7e12`); any finite
// number is taken (truncated), anything else reads as absent.
fn number<'de, D: serde::Deserializer<'de>>(d: D) -> std::result::Result<Option<f64>, D::Error> {
    let v = serde_json::Value::deserialize(d)?;
    Ok(v.as_f64().filter(|f| f.is_finite()))
}

fn opt_ms<'de, D: serde::Deserializer<'de>>(d: D) -> std::result::Result<Option<i64>, D::Error> {
    Ok(number(d)?.map(|f| f.trunc() as i64))
}

fn opt_secs<'de, D: serde::Deserializer<'de>>(d: D) -> std::result::Result<Option<u64>, D::Error> {
    Ok(number(d)?.filter(|f| *f >= 0.0).map(|f| f.min(u64::MAX as f64).trunc() as u64))
}

fn ms<'de, D: serde::Deserializer<'de>>(d: D) -> std::result::Result<i64, D::Error> {
    Ok(opt_ms(d)?.unwrap_or(0))
}

fn count<'de, D: serde::Deserializer<'de>>(d: D) -> std::result::Result<u32, D::Error> {
    Ok(number(d)?.map_or(0, |f| f.clamp(0.0, f64::from(u32::MAX)) as u32))
}

fn keep() -> String {
    "keep".to_owned()
}

impl SubagentRun {
    /// Reads a stored record. A record without `announce` (written by hand, or by an older
    /// importer) gets a pending one whose key is derived from the run id, so that every
    /// reading of it names the same outbox item. `None` for text that is not a record.
    pub fn from_json(text: &str) -> Option<SubagentRun> {
        let mut v: serde_json::Value = serde_json::from_str(text).ok()?;
        let o = v.as_object_mut()?;
        if !o.get("announce").is_some_and(serde_json::Value::is_object) {
            let run_id = o.get("runId")?.as_str()?.to_owned();
            o.insert(
                "announce".into(),
                serde_json::json!({"status": "pending", "attempts": 0, "idempotencyKey": format!("subagent-announce:{run_id}")}),
            );
        }
        serde_json::from_value(v).ok()
    }

    pub fn to_json(&self) -> serde_json::Value {
        serde_json::to_value(self).unwrap_or(serde_json::Value::Null)
    }
}

/// The records of one child session (what finds a paused child), on `subagent_runs_by_child`.
pub(crate) const RUNS_OF_CHILD: &str = "SELECT record FROM subagent_runs WHERE child_key = ?1 ORDER BY rowid";

fn read_rows(rows: Vec<String>) -> Vec<SubagentRun> {
    let mut out: Vec<SubagentRun> = rows.iter().filter_map(|t| SubagentRun::from_json(t)).collect();
    // rows arrive in registration order; a stable sort keeps it among equal createdAt
    out.sort_by_key(|r| r.created_at);
    out
}

impl Db<'_> {
    /// Inserts a record, or updates it in place (it keeps its place in registration order).
    pub fn put_subagent_run(&self, r: &SubagentRun) -> Result<()> {
        self.exec(
            "INSERT INTO subagent_runs
               (run_id, requester_key, child_key, ended, announce_status, archive_at, record)
             VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)
             ON CONFLICT (run_id) DO UPDATE SET requester_key = ?2, child_key = ?3, ended = ?4,
               announce_status = ?5, archive_at = ?6, record = ?7",
            args![
                r.run_id,
                r.requester_session_key,
                r.child_session_key,
                // a paused child's run has ended too (2026.9 counts it as no active child)
                i64::from(r.ended_at.is_some() || r.pause_reason.is_some()),
                r.announce.status,
                r.archive_at_ms,
                r.to_json().to_string()
            ],
        )?;
        Ok(())
    }

    /// One record; `None` when missing or unreadable.
    pub fn subagent_run(&self, run_id: &str) -> Result<Option<SubagentRun>> {
        let text =
            self.row("SELECT record FROM subagent_runs WHERE run_id = ?1", args![run_id], |r| r.get::<String>(0))?;
        Ok(text.and_then(|t| SubagentRun::from_json(&t)))
    }

    /// Every record (or those of one requester), in `createdAt` order (registration order among equals); unreadable rows skipped.
    pub fn subagent_runs(&self, requester_key: Option<&str>) -> Result<Vec<SubagentRun>> {
        let rows = match requester_key {
            Some(key) => self.rows(
                "SELECT record FROM subagent_runs WHERE requester_key = ?1 ORDER BY rowid",
                args![key],
                |r| r.get(0),
            )?,
            None => self.rows("SELECT record FROM subagent_runs ORDER BY rowid", args![], |r| r.get(0))?,
        };
        Ok(read_rows(rows))
    }

    /// The records of one child session, in `createdAt` order (index `subagent_runs_by_child`).
    pub fn subagent_runs_of_child(&self, child_key: &str) -> Result<Vec<SubagentRun>> {
        Ok(read_rows(self.rows(RUNS_OF_CHILD, args![child_key], |r| r.get(0))?))
    }

    /// The records of a requester whose run has not ended, in `createdAt` order.
    pub fn running_subagent_runs(&self, requester_key: &str) -> Result<Vec<SubagentRun>> {
        let rows = self.rows(
            "SELECT record FROM subagent_runs WHERE requester_key = ?1 AND ended = 0 ORDER BY rowid",
            args![requester_key],
            |r| r.get(0),
        )?;
        Ok(read_rows(rows))
    }

    /// How many children of a requester are still running: registered ones whose run has not
    /// ended, and ones whose run has started (in any process) but which are not registered yet.
    pub fn running_subagent_count(&self, requester_key: &str) -> Result<u64> {
        self.count(
            concat!(
                "SELECT count(*) FROM (",
                "SELECT child_key FROM subagent_runs WHERE requester_key = ?1 AND ended = 0 ",
                "UNION SELECT r.session_key FROM runs r JOIN sessions s ON s.key = r.session_key ",
                "WHERE r.status = 'running' AND r.lane = 'subagent' AND s.spawned_by = ?1) AS running"
            ),
            args![requester_key],
        )
    }

    /// When the next archive is due, if any record has one.
    pub fn next_subagent_archive(&self) -> Result<Option<i64>> {
        let due = self.row("SELECT min(archive_at) FROM subagent_runs WHERE archive_at IS NOT NULL", args![], |r| {
            r.get::<Option<i64>>(0)
        })?;
        Ok(due.flatten())
    }

    /// The records whose archive time has come (`archive_at <= now`).
    pub fn due_subagent_archives(&self, now: i64) -> Result<Vec<SubagentRun>> {
        let rows = self.rows(
            "SELECT record FROM subagent_runs WHERE archive_at IS NOT NULL AND archive_at <= ?1 ORDER BY rowid",
            args![now],
            |r| r.get(0),
        )?;
        Ok(read_rows(rows))
    }

    /// Removes a record; whether there was one.
    pub fn delete_subagent_run(&self, run_id: &str) -> Result<bool> {
        Ok(self.exec("DELETE FROM subagent_runs WHERE run_id = ?1", args![run_id])? > 0)
    }
}

#[cfg(test)]
#[path = "subagents_tests.rs"]
pub(crate) mod tests;
