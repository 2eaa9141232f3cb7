//! Transcript windows by position, for the 2026.9 `sessions_history`: how long a transcript
//! is, the messages `offset` places from its end, and the window around one message. Each
//! call reads O(window) rows through the `(session_id, seq)` key; only finding a message by an
//! id stored inside its JSON walks the transcript.

use rusqlite::{params, OptionalExtension};

use super::transcripts::StoredMessage;
use super::{sql, Db};
use crate::error::Result;

impl Db<'_> {
    /// The sequence number of the last message (0 for an empty transcript): the transcript's
    /// length, as messages are numbered 1, 2, … in append order.
    pub fn last_seq(&self, session_id: &str) -> Result<i64> {
        let mut st = self
            .conn
            .prepare_cached("SELECT coalesce(max(seq), 0) FROM messages WHERE session_id = ?1")
            .map_err(sql)?;
        st.query_row([session_id], |r| r.get(0)).map_err(sql)
    }

    /// The messages with `first <= seq <= last`, oldest first.
    pub fn messages_between(&self, session_id: &str, first: i64, last: i64) -> Result<Vec<StoredMessage>> {
        let mut st = self
            .conn
            .prepare_cached(
                "SELECT seq, role, message FROM messages WHERE session_id = ?1 AND seq >= ?2 AND seq <= ?3 ORDER BY seq",
            )
            .map_err(sql)?;
        let rows = st
            .query_map(params![session_id, first, last], |r| {
                Ok(StoredMessage { seq: r.get(0)?, role: r.get(1)?, json: r.get(2)? })
            })
            .map_err(sql)?;
        rows.collect::<rusqlite::Result<Vec<_>>>().map_err(sql)
    }

    /// The sequence number of the message whose JSON carries this `id` (top level or
    /// `__openclaw.id`). Walks the transcript: O(length).
    pub fn seq_of_message_id(&self, session_id: &str, id: &str) -> Result<Option<i64>> {
        let mut st = self
            .conn
            .prepare_cached(
                "SELECT seq FROM messages WHERE session_id = ?1
                   AND (json_extract(message, '$.id') = ?2 OR json_extract(message, '$.__openclaw.id') = ?2)
                 ORDER BY seq LIMIT 1",
            )
            .map_err(sql)?;
        st.query_row(params![session_id, id], |r| r.get(0)).optional().map_err(sql)
    }
}
