//! Transcript windows by position, for the 2026.9 `sessions_history`: how long a transcript
//! is, the messages `offset` places from its end, and the window around one message found by
//! its entry id. Each call reads O(window) rows through the `(session_id, seq)` key or the
//! entry-id index. Positions are sequence numbers, which the transcript's non-message entries
//! share: where a transcript has such entries, a window holds fewer messages than its width.

use super::transcripts::seq_id;
use super::Db;
use crate::args;
use crate::error::Result;

/// A message of a window: its position, role, JSON text and entry id (the stored one, else its
/// position as `%08x`, as the transcript store names entries without one).
#[derive(Debug, Clone, PartialEq)]
pub struct WindowMessage {
    pub seq: i64,
    pub role: Option<String>,
    pub json: String,
    pub id: String,
}

impl Db<'_> {
    /// The sequence number of the last message (0 for an empty transcript): the transcript's
    /// length, as messages are numbered 1, 2, … in append order.
    pub fn last_seq(&self, session_id: &str) -> Result<i64> {
        let last = self.row(
            "SELECT seq FROM messages WHERE session_id = ?1 ORDER BY seq DESC LIMIT 1",
            args![session_id],
            |r| r.get::<i64>(0),
        )?;
        Ok(last.unwrap_or(0))
    }

    /// The messages with `first <= seq <= last`, oldest first.
    pub fn messages_between(&self, session_id: &str, first: i64, last: i64) -> Result<Vec<WindowMessage>> {
        self.rows(
            "SELECT seq, role, message, entry_id FROM messages
             WHERE session_id = ?1 AND seq >= ?2 AND seq <= ?3 ORDER BY seq",
            args![session_id, first, last],
            |r| {
                let seq: i64 = r.get(0)?;
                let id: Option<String> = r.get(3)?;
                Ok(WindowMessage { seq, role: r.get(1)?, json: r.get(2)?, id: id.unwrap_or_else(|| seq_id(seq)) })
            },
        )
    }

    /// The position of the message with this entry id: a stored id (through its index), or an
    /// id of the `%08x` form naming a message stored without one (appended messages with their
    /// positional id are stored so); the first of them when both are there.
    pub fn seq_of_message_id(&self, session_id: &str, id: &str) -> Result<Option<i64>> {
        let stored = self.row(
            "SELECT seq FROM messages WHERE session_id = ?1 AND entry_id = ?2 ORDER BY seq LIMIT 1",
            args![session_id, id],
            |r| r.get::<i64>(0),
        )?;
        let Some(seq) = (id.len() == 8).then(|| i64::from_str_radix(id, 16).ok()).flatten() else { return Ok(stored) };
        if stored.is_some_and(|s| s < seq) {
            return Ok(stored);
        }
        let n = self.count(
            "SELECT count(*) FROM messages WHERE session_id = ?1 AND seq = ?2 AND entry_id IS NULL",
            args![session_id, seq],
        )?;
        Ok(if n > 0 { Some(seq) } else { stored })
    }
}

#[cfg(test)]
mod tests {
    use crate::store::pg::testdb;
    use crate::store::transcripts::{EntryBody, NewEntry};

    #[test]
    fn a_stored_entry_id_and_a_positional_id_both_find_their_message_and_gaps_are_kept() {
        for s in testdb::stores() {
            let msg = |text: &str| r#"{"role":"user","content":"X"}"#.replace('X', text);
            s.write(|db| {
                db.append_entries(
                    "t",
                    &[
                        NewEntry {
                            id: Some("abc".into()),
                            parent_id: None,
                            body: EntryBody::Message { role: Some("user".into()), message: msg("one"), envelope: None },
                        },
                        NewEntry {
                            id: Some("cmp".into()),
                            parent_id: None,
                            body: EntryBody::Other { kind: Some("compaction".into()), entry: "{}".into() },
                        },
                    ],
                )?;
                db.append_messages("t", &[(Some("user".into()), msg("three"))])
            })
            .unwrap();
            s.read(|db| {
                assert_eq!(db.seq_of_message_id("t", "abc")?, Some(1));
                assert_eq!(db.seq_of_message_id("t", "00000003")?, Some(3));
                assert_eq!(db.seq_of_message_id("t", "00000001")?, None, "message 1 has an id of its own");
                assert_eq!(db.seq_of_message_id("t", "cmp")?, None, "not a message");
                assert_eq!(db.last_seq("t")?, 3);
                let w = db.messages_between("t", 1, 3)?;
                assert_eq!(w.iter().map(|m| (m.seq, m.id.as_str())).collect::<Vec<_>>(), [(1, "abc"), (3, "00000003")]);
                Ok(())
            })
            .unwrap();
        }
    }
}
