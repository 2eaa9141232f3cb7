//! Whole-store statements: what moving a gateway state folder in and out needs (walking every
//! session and every message in order, adding sub-agent registry records that are not there
//! yet) and the counts `stats` reports.

use rusqlite::params;

use super::{sql, Db};
use crate::error::{Error, Result};

/// One `subagent_runs` row (the record is the API.md §4 `SubagentRun` as JSON text).
#[derive(Debug, Clone, PartialEq)]
pub struct SubagentRunRow {
    pub run_id: String,
    pub requester_key: String,
    pub child_key: String,
    pub ended: bool,
    pub announce_status: String,
    pub archive_at: Option<i64>,
    pub record: String,
}

/// What `stats` reports.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct StoreStats {
    pub sessions: u64,
    pub messages: u64,
    pub subagent_runs: u64,
    pub outbox_pending: u64,
    pub db_bytes: u64,
}

/// `query` is `'static`: only constant statements can be counted.
fn count(db: &Db<'_>, query: &'static str) -> Result<u64> {
    let mut st = db.conn()?.prepare_cached(query).map_err(sql)?;
    Ok(st.query_row([], |r| r.get::<_, i64>(0)).map_err(sql)?.max(0) as u64)
}

impl Db<'_> {
    /// Adds a sub-agent registry record unless one with its run id is stored; whether it was
    /// added.
    pub fn insert_subagent_run_if_absent(&self, r: &SubagentRunRow) -> Result<bool> {
        let mut st = self
            .conn()?
            .prepare_cached(
                "INSERT OR IGNORE INTO subagent_runs (run_id, requester_key, child_key, ended, announce_status, archive_at, record)
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)",
            )
            .map_err(sql)?;
        let n = st
            .execute(params![
                r.run_id,
                r.requester_key,
                r.child_key,
                i64::from(r.ended),
                r.announce_status,
                r.archive_at,
                r.record
            ])
            .map_err(sql)?;
        Ok(n > 0)
    }

    /// Every sub-agent registry record, in run id order.
    pub fn all_subagent_runs(&self) -> Result<Vec<SubagentRunRow>> {
        let mut st = self
            .conn()?
            .prepare_cached(
                "SELECT run_id, requester_key, child_key, ended, announce_status, archive_at, record
                 FROM subagent_runs ORDER BY run_id",
            )
            .map_err(sql)?;
        let rows = st
            .query_map([], |r| {
                Ok(SubagentRunRow {
                    run_id: r.get(0)?,
                    requester_key: r.get(1)?,
                    child_key: r.get(2)?,
                    ended: r.get::<_, i64>(3)? != 0,
                    announce_status: r.get(4)?,
                    archive_at: r.get(5)?,
                    record: r.get(6)?,
                })
            })
            .map_err(sql)?;
        rows.collect::<rusqlite::Result<Vec<_>>>().map_err(sql)
    }

    /// Every session (key, entry JSON text), in key order.
    pub fn all_sessions(&self, mut f: impl FnMut(String, String) -> Result<()>) -> Result<()> {
        let mut st = self.conn()?.prepare_cached("SELECT key, entry FROM sessions ORDER BY key").map_err(sql)?;
        let mut rows = st.query([]).map_err(sql)?;
        while let Some(r) = rows.next().map_err(sql)? {
            f(r.get(0).map_err(sql)?, r.get(1).map_err(sql)?)?;
        }
        Ok(())
    }

    /// Every message of a transcript (sequence number, JSON text), oldest first.
    pub fn each_message(&self, session_id: &str, mut f: impl FnMut(i64, &str) -> Result<()>) -> Result<()> {
        let mut st = self
            .conn()?
            .prepare_cached("SELECT seq, message FROM messages WHERE session_id = ?1 ORDER BY seq")
            .map_err(sql)?;
        let mut rows = st.query([session_id]).map_err(sql)?;
        while let Some(r) = rows.next().map_err(sql)? {
            let seq: i64 = r.get(0).map_err(sql)?;
            let text = r.get_ref(1).map_err(sql)?.as_str().map_err(|e| Error::store(format!("sqlite: {e}")))?;
            f(seq, text)?;
        }
        Ok(())
    }

    /// The counts of `stats`, and the size of the database (pages in use × page size).
    pub fn stats(&self) -> Result<StoreStats> {
        let pages = count(self, "PRAGMA page_count")?;
        let page_size = count(self, "PRAGMA page_size")?;
        Ok(StoreStats {
            sessions: count(self, "SELECT count(*) FROM sessions")?,
            messages: count(self, "SELECT count(*) FROM messages")?,
            subagent_runs: count(self, "SELECT count(*) FROM subagent_runs")?,
            outbox_pending: count(self, "SELECT count(*) FROM outbox WHERE status = 'pending'")?,
            db_bytes: pages * page_size,
        })
    }
}
