//! Transcripts: one row per message, keyed by the session's `sessionId` and a sequence number,
//! so that the last N messages (or the N before a cursor) cost O(N) whatever the transcript's
//! length.

use rusqlite::params;

use super::{sql, Db};
use crate::error::Result;

/// One stored message: its sequence number, role and JSON text.
#[derive(Debug, Clone, PartialEq)]
pub struct StoredMessage {
    pub seq: i64,
    pub role: Option<String>,
    pub json: String,
}

/// A page of a transcript, oldest first.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct HistoryPage {
    pub messages: Vec<StoredMessage>,
    /// the cursor for the page before this one; `None` on the oldest page
    pub next_before: Option<i64>,
}

impl Db<'_> {
    /// Appends messages (role, JSON text) after the last one; returns the sequence number the
    /// first of them got.
    pub fn append_messages(&self, session_id: &str, messages: &[(Option<String>, String)]) -> Result<i64> {
        let mut last = self
            .conn
            .prepare_cached("SELECT coalesce(max(seq), 0) FROM messages WHERE session_id = ?1")
            .map_err(sql)?;
        let mut seq: i64 = last.query_row([session_id], |r| r.get(0)).map_err(sql)?;
        let mut ins = self
            .conn
            .prepare_cached("INSERT INTO messages (session_id, seq, role, message) VALUES (?1, ?2, ?3, ?4)")
            .map_err(sql)?;
        let first = seq + 1;
        for (role, json) in messages {
            seq += 1;
            ins.execute(params![session_id, seq, role, json]).map_err(sql)?;
        }
        Ok(first)
    }

    /// The last `limit` messages before `before` (a sequence number; `None` = the end), oldest
    /// first. Reads at most `limit + 1` rows.
    pub fn history_page(&self, session_id: &str, limit: u32, before: Option<i64>) -> Result<HistoryPage> {
        let mut st = self
            .conn
            .prepare_cached(
                "SELECT seq, role, message FROM messages WHERE session_id = ?1 AND seq < ?2 ORDER BY seq DESC LIMIT ?3",
            )
            .map_err(sql)?;
        let rows = st
            .query_map(params![session_id, before.unwrap_or(i64::MAX), i64::from(limit) + 1], |r| {
                Ok(StoredMessage { seq: r.get(0)?, role: r.get(1)?, json: r.get(2)? })
            })
            .map_err(sql)?;
        let mut messages = rows.collect::<rusqlite::Result<Vec<_>>>().map_err(sql)?;
        let more = messages.len() > limit as usize;
        messages.truncate(limit as usize);
        messages.reverse();
        let next_before = if more { messages.first().map(|m| m.seq) } else { None };
        Ok(HistoryPage { messages, next_before })
    }

    /// The first `limit` messages, oldest first.
    pub fn first_messages(&self, session_id: &str, limit: u32) -> Result<Vec<StoredMessage>> {
        let mut st = self
            .conn
            .prepare_cached("SELECT seq, role, message FROM messages WHERE session_id = ?1 ORDER BY seq LIMIT ?2")
            .map_err(sql)?;
        let rows = st
            .query_map(params![session_id, limit], |r| {
                Ok(StoredMessage { seq: r.get(0)?, role: r.get(1)?, json: r.get(2)? })
            })
            .map_err(sql)?;
        rows.collect::<rusqlite::Result<Vec<_>>>().map_err(sql)
    }

    /// Removes a transcript; how many messages it held.
    pub fn delete_transcript(&self, session_id: &str) -> Result<usize> {
        let mut st = self.conn.prepare_cached("DELETE FROM messages WHERE session_id = ?1").map_err(sql)?;
        st.execute([session_id]).map_err(sql)
    }

    /// How many messages a transcript holds.
    pub fn message_count(&self, session_id: &str) -> Result<u64> {
        let mut st = self.conn.prepare_cached("SELECT count(*) FROM messages WHERE session_id = ?1").map_err(sql)?;
        Ok(st.query_row([session_id], |r| r.get::<_, i64>(0)).map_err(sql)?.max(0) as u64)
    }
}
