//! Transcripts: one row per transcript entry, keyed by the session's `sessionId` and a sequence
//! number shared by all the entries of a transcript. Entries that carry a message live in
//! `messages` (the visible transcript: every read of messages looks only there, so the last N
//! messages, or the N before a cursor, cost O(N) whatever the transcript's length); the other
//! entries (compaction, branch summaries, model changes, custom entries, …) live in
//! `transcript_entries`, kept for export and never shown as messages.
//!
//! Every entry has an id and a parent link, as in the gateway's version-3 transcripts: an entry
//! appended without an id gets `%08x` of its sequence number (with a `-<n>` suffix in the rare case
//! that an id read from a file already has that form) and the id of the entry before it as its
//! parent (rows written before ids were stored read the same way, and so does an appended
//! message whose id and parent are exactly those: it is stored without them, outside the id
//! index). Ids are unique in a transcript: sequence numbers are, and a generated id is checked
//! against the ids read from files only when the transcript has any (an index lookup).

use super::bulk::EntryRow;
use super::{Db, Dialect, Row};
use crate::args;
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

/// What a transcript entry holds.
#[derive(Debug, Clone, PartialEq)]
pub enum EntryBody {
    /// An entry with a message (a visible message).
    Message {
        role: Option<String>,
        /// the message object as JSON
        message: String,
        /// the entry as JSON without its `message` (its `type`, `id`, `parentId`, `timestamp`
        /// and whatever else it had); `None` for a plain message entry we wrote ourselves
        envelope: Option<String>,
    },
    /// Any other entry: its `type` (`None` when it had none) and the whole entry as JSON.
    Other { kind: Option<String>, entry: String },
}

impl EntryBody {
    /// A plain message (role, JSON text) as `appendMessages` stores it.
    pub fn message(role: Option<String>, message: String) -> EntryBody {
        EntryBody::Message { role, message, envelope: None }
    }

    pub fn is_message(&self) -> bool {
        matches!(self, EntryBody::Message { .. })
    }
}

/// A transcript entry on its way in. Without an `id` it gets one on append (and the entry
/// before it as its parent); with one, `parent_id` is kept as given (`None`: a root).
#[derive(Debug, Clone, PartialEq)]
pub struct NewEntry {
    pub id: Option<String>,
    pub parent_id: Option<String>,
    pub body: EntryBody,
}

impl NewEntry {
    /// A plain message without an id.
    pub fn message(role: Option<String>, message: String) -> NewEntry {
        NewEntry { id: None, parent_id: None, body: EntryBody::message(role, message) }
    }
}

/// A transcript entry as stored, with its id and parent link always known.
#[derive(Debug, Clone, PartialEq)]
pub struct StoredEntry {
    pub seq: i64,
    pub id: String,
    pub parent_id: Option<String>,
    pub body: EntryBody,
}

/// Where an append went: the sequence number of its first entry, that entry's parent, and the
/// ids the entries got, in order (each the parent of the next).
#[derive(Debug, Clone, PartialEq)]
pub struct Appended {
    pub first_seq: i64,
    pub first_parent: Option<String>,
    pub ids: Vec<String>,
}

/// The id an entry appended without one gets: its sequence number as 8 hex digits.
pub fn seq_id(seq: i64) -> String {
    format!("{:08x}", seq & 0xffff_ffff)
}

/// The id and parent of a row: a row stored without an id reads as the mirror always wrote it.
fn ids_of(seq: i64, entry_id: Option<String>, parent_id: Option<String>) -> (String, Option<String>) {
    match entry_id {
        Some(id) => (id, parent_id),
        None => (seq_id(seq), (seq > 1).then(|| seq_id(seq - 1))),
    }
}

impl Db<'_> {
    /// The last entry of a transcript: its sequence number (0 when empty) and id.
    fn last_entry(&self, session_id: &str) -> Result<(i64, Option<String>)> {
        let last = self.row(
            "SELECT seq, entry_id FROM \
             (SELECT seq, entry_id FROM messages WHERE session_id = ?1 ORDER BY seq DESC LIMIT 1) AS m \
             UNION ALL SELECT seq, entry_id FROM \
             (SELECT seq, entry_id FROM transcript_entries WHERE session_id = ?1 ORDER BY seq DESC LIMIT 1) AS t \
             ORDER BY 1 DESC LIMIT 1",
            args![session_id],
            |r| Ok((r.get::<i64>(0)?, r.get::<Option<String>>(1)?)),
        )?;
        Ok(match last {
            Some((seq, id)) => (seq, Some(id.unwrap_or_else(|| seq_id(seq)))),
            None => (0, None),
        })
    }

    /// Whether an id was read from a file into this transcript (a message read from a file
    /// keeps its envelope; an appended one has none).
    fn id_was_read(&self, session_id: &str, id: &str) -> Result<bool> {
        let q = match self.dialect() {
            // INDEXED BY: without statistics the planner would walk the transcript by its key.
            Dialect::Sqlite => {
                "SELECT EXISTS (SELECT 1 FROM messages INDEXED BY messages_by_entry_id \
                 WHERE session_id = ?1 AND entry_id = ?2 AND envelope IS NOT NULL) \
                 OR EXISTS (SELECT 1 FROM transcript_entries INDEXED BY transcript_entries_by_id \
                 WHERE session_id = ?1 AND entry_id = ?2)"
            }
            Dialect::Postgres => {
                "SELECT EXISTS (SELECT 1 FROM messages \
                 WHERE session_id = ?1 AND entry_id = ?2 AND envelope IS NOT NULL) \
                 OR EXISTS (SELECT 1 FROM transcript_entries WHERE session_id = ?1 AND entry_id = ?2)"
            }
        };
        Ok(self.row(q, args![session_id, id], |r| r.get::<bool>(0))?.unwrap_or(false))
    }

    /// Whether the transcript holds anything read from a file (whose ids a generated one must
    /// avoid). PostgreSQL only: on SQLite each generated id is looked up instead (see
    /// `append_entries`).
    ///
    /// PostgreSQL answers it from the partial index `messages_by_read_id` (which is why that
    /// index stays there, where SQLite's migration 11 dropped it); without it every append to a
    /// long transcript would scan the transcript.
    fn has_read_entries(&self, session_id: &str) -> Result<bool> {
        self.row(
            "SELECT EXISTS (SELECT 1 FROM messages WHERE session_id = ?1 AND envelope IS NOT NULL) \
             OR EXISTS (SELECT 1 FROM transcript_entries WHERE session_id = ?1)",
            args![session_id],
            |r| r.get::<bool>(0),
        )
        .map(|found| found.unwrap_or(false))
    }

    /// The id an entry appended without one gets at `seq`.
    fn generated_id(&self, session_id: &str, seq: i64, check: bool) -> Result<String> {
        let base = seq_id(seq);
        if !check || !self.id_was_read(session_id, &base)? {
            return Ok(base);
        }
        let mut n = 1u32;
        loop {
            let id = format!("{base}-{n}");
            if !self.id_was_read(session_id, &id)? {
                return Ok(id);
            }
            n += 1;
        }
    }

    /// Appends entries after the last one, in order.
    pub fn append_entries(&self, session_id: &str, entries: &[NewEntry]) -> Result<Appended> {
        let (mut seq, mut prev) = self.last_entry(session_id)?;
        // On SQLite each generated id is looked up among the read ones (two index probes), which
        // is cheaper than a second index on every imported message that only tells whether there
        // are any (issue 17, migration 11); on PostgreSQL, where each lookup is a round trip, one
        // look first.
        let check = entries.iter().any(|e| e.id.is_none())
            && (self.dialect() == Dialect::Sqlite || self.has_read_entries(session_id)?);
        let mut appended = Appended { first_seq: seq + 1, first_parent: None, ids: Vec::with_capacity(entries.len()) };
        let mut rows = Vec::with_capacity(entries.len());
        for (i, e) in entries.iter().enumerate() {
            seq += 1;
            let (id, parent) = match &e.id {
                Some(id) => (id.clone(), e.parent_id.clone()),
                None => (self.generated_id(session_id, seq, check)?, prev.clone()),
            };
            if i == 0 {
                appended.first_parent = parent.clone();
            }
            appended.ids.push(id.clone());
            prev = Some(id.clone());
            // A plain message whose id and parent are the positional ones is stored without
            // them: they read back the same (`ids_of`), and the row stays out of the id index
            // (issue 17: one index page fewer for every appended message).
            let positional = matches!(e.body, EntryBody::Message { envelope: None, .. })
                && id == seq_id(seq)
                && parent == (seq > 1).then(|| seq_id(seq - 1));
            let (id, parent_id) = if positional { (None, None) } else { (Some(id), parent) };
            rows.push(EntryRow { seq, id, parent_id, body: &e.body });
        }
        self.insert_entries(session_id, &rows)?;
        Ok(appended)
    }

    /// Appends messages (role, JSON text) without ids after the last entry.
    pub fn append_messages(&self, session_id: &str, messages: &[(Option<String>, String)]) -> Result<Appended> {
        let entries: Vec<NewEntry> = messages.iter().map(|(r, m)| NewEntry::message(r.clone(), m.clone())).collect();
        self.append_entries(session_id, &entries)
    }

    /// Replaces a whole transcript with `entries` (numbered from 1 again).
    pub fn replace_transcript(&self, session_id: &str, entries: &[NewEntry]) -> Result<Appended> {
        self.delete_transcript(session_id)?;
        self.append_entries(session_id, entries)
    }

    /// Every entry of a transcript, messages and the others, in order.
    pub fn each_entry(&self, session_id: &str, mut f: impl FnMut(StoredEntry) -> Result<()>) -> Result<()> {
        self.each(
            "SELECT seq, entry_id, parent_id, 1, role, message, envelope FROM messages WHERE session_id = ?1 \
             UNION ALL \
             SELECT seq, entry_id, parent_id, 0, type, entry, NULL FROM transcript_entries WHERE session_id = ?1 \
             ORDER BY 1",
            args![session_id],
            |r| {
                let seq: i64 = r.get(0)?;
                let (id, parent_id) = ids_of(seq, r.get(1)?, r.get(2)?);
                let body = if r.get::<i64>(3)? == 1 {
                    EntryBody::Message { role: r.get(4)?, message: r.get(5)?, envelope: r.get(6)? }
                } else {
                    EntryBody::Other { kind: r.get(4)?, entry: r.get(5)? }
                };
                f(StoredEntry { seq, id, parent_id, body })?;
                Ok(true)
            },
        )
    }

    /// The last `limit` messages before `before` (a sequence number; `None` = the end), oldest
    /// first. Reads at most `limit + 1` rows; entries that are not messages are never read.
    pub fn history_page(&self, session_id: &str, limit: u32, before: Option<i64>) -> Result<HistoryPage> {
        let mut messages = self.rows(
            "SELECT seq, role, message FROM messages WHERE session_id = ?1 AND seq < ?2 ORDER BY seq DESC LIMIT ?3",
            args![session_id, before.unwrap_or(i64::MAX), i64::from(limit) + 1],
            stored_message,
        )?;
        let more = messages.len() > limit as usize;
        messages.truncate(limit as usize);
        messages.reverse();
        let next_before = if more { messages.first().map(|m| m.seq) } else { None };
        Ok(HistoryPage { messages, next_before })
    }

    /// The first `limit` messages, oldest first.
    pub fn first_messages(&self, session_id: &str, limit: u32) -> Result<Vec<StoredMessage>> {
        self.rows(
            "SELECT seq, role, message FROM messages WHERE session_id = ?1 ORDER BY seq LIMIT ?2",
            args![session_id, limit],
            stored_message,
        )
    }

    /// Removes a transcript, its other entries too; how many messages it held.
    pub fn delete_transcript(&self, session_id: &str) -> Result<usize> {
        self.exec("DELETE FROM transcript_entries WHERE session_id = ?1", args![session_id])?;
        self.exec("DELETE FROM messages WHERE session_id = ?1", args![session_id])
    }

    /// How many messages a transcript holds.
    pub fn message_count(&self, session_id: &str) -> Result<u64> {
        self.count("SELECT count(*) FROM messages WHERE session_id = ?1", args![session_id])
    }

    /// How many entries a transcript holds, messages and the others.
    pub fn entry_count(&self, session_id: &str) -> Result<u64> {
        self.count(
            "SELECT (SELECT count(*) FROM messages WHERE session_id = ?1) \
             + (SELECT count(*) FROM transcript_entries WHERE session_id = ?1)",
            args![session_id],
        )
    }
}

fn stored_message(r: &Row<'_>) -> Result<StoredMessage> {
    Ok(StoredMessage { seq: r.get(0)?, role: r.get(1)?, json: r.get(2)? })
}

#[cfg(test)]
#[path = "transcripts_tests.rs"]
pub(crate) mod tests;
