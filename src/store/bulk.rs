//! Whole-store statements: what moving a gateway state folder in and out needs (writing a
//! transcript's rows many at a time, the import's fast path; walking every session and every
//! message in order; adding sub-agent registry records that are not there yet) and the counts
//! `stats` reports. It writes rows it is handed; numbering and linking entries is `transcripts`'.

use super::transcripts::EntryBody;
use super::value::{Arg, ToArg, Ty};
use super::{Db, Dialect};
use crate::args;
use crate::error::Result;

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

/// A transcript entry on its way into its table, its id and parent already settled
/// (`transcripts` numbers and links them; this module only writes them). `id` `None`: the
/// positional id and parent (`%08x` of `seq`, and of `seq - 1`), stored as NULL.
pub struct EntryRow<'a> {
    pub seq: i64,
    pub id: Option<String>,
    pub parent_id: Option<String>,
    pub body: &'a EntryBody,
}

const MESSAGE_TYPES: [Ty; 7] = [Ty::Text, Ty::Int, Ty::Text, Ty::Text, Ty::Text, Ty::Text, Ty::Text];
const ENTRY_TYPES: [Ty; 6] = [Ty::Text, Ty::Int, Ty::Text, Ty::Text, Ty::Text, Ty::Text];

impl Db<'_> {
    /// Writes the rows of a transcript's new entries: messages to `messages`, the others to
    /// `transcript_entries`, each table in one go (see [`Db::insert_rows`]: on PostgreSQL a few
    /// rows are single inserts, more one `COPY`).
    pub(crate) fn insert_entries(&self, session_id: &str, rows: &[EntryRow<'_>]) -> Result<()> {
        let mut messages: Vec<Arg<'_>> = Vec::new();
        let mut others: Vec<Arg<'_>> = Vec::new();
        for r in rows {
            match r.body {
                EntryBody::Message { role, message, envelope } => messages.extend([
                    session_id.to_arg(),
                    r.seq.to_arg(),
                    role.to_arg(),
                    message.to_arg(),
                    r.id.to_arg(),
                    r.parent_id.to_arg(),
                    envelope.to_arg(),
                ]),
                EntryBody::Other { kind, entry } => others.extend([
                    session_id.to_arg(),
                    r.seq.to_arg(),
                    r.id.to_arg(),
                    r.parent_id.to_arg(),
                    kind.to_arg(),
                    entry.to_arg(),
                ]),
            }
        }
        if !messages.is_empty() {
            self.insert_rows(
                "INSERT INTO messages (session_id, seq, role, message, entry_id, parent_id, envelope) \
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)",
                "COPY messages (session_id, seq, role, message, entry_id, parent_id, envelope) \
                 FROM STDIN (FORMAT binary)",
                &MESSAGE_TYPES,
                &messages,
            )?;
        }
        if !others.is_empty() {
            self.insert_rows(
                "INSERT INTO transcript_entries (session_id, seq, entry_id, parent_id, type, entry) \
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6)",
                "COPY transcript_entries (session_id, seq, entry_id, parent_id, type, entry) FROM STDIN (FORMAT binary)",
                &ENTRY_TYPES,
                &others,
            )?;
        }
        Ok(())
    }

    /// Adds a sub-agent registry record unless one with its run id is stored; whether it was
    /// added.
    pub fn insert_subagent_run_if_absent(&self, r: &SubagentRunRow) -> Result<bool> {
        let n = self.exec(
            "INSERT INTO subagent_runs (run_id, requester_key, child_key, ended, announce_status, archive_at, record)
             VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7) ON CONFLICT DO NOTHING",
            args![
                r.run_id,
                r.requester_key,
                r.child_key,
                i64::from(r.ended),
                r.announce_status,
                r.archive_at,
                r.record
            ],
        )?;
        Ok(n > 0)
    }

    /// Every sub-agent registry record, in run id order.
    pub fn all_subagent_runs(&self) -> Result<Vec<SubagentRunRow>> {
        self.rows(
            "SELECT run_id, requester_key, child_key, ended, announce_status, archive_at, record
             FROM subagent_runs ORDER BY run_id",
            args![],
            |r| {
                Ok(SubagentRunRow {
                    run_id: r.get(0)?,
                    requester_key: r.get(1)?,
                    child_key: r.get(2)?,
                    ended: r.get::<i64>(3)? != 0,
                    announce_status: r.get(4)?,
                    archive_at: r.get(5)?,
                    record: r.get(6)?,
                })
            },
        )
    }

    /// Every session (key, entry JSON text), in key order.
    pub fn all_sessions(&self, mut f: impl FnMut(String, String) -> Result<()>) -> Result<()> {
        self.each("SELECT key, entry FROM sessions ORDER BY key", args![], |r| {
            f(r.get(0)?, r.get(1)?)?;
            Ok(true)
        })
    }

    /// Every message of a transcript (sequence number, JSON text), oldest first.
    pub fn each_message(&self, session_id: &str, mut f: impl FnMut(i64, &str) -> Result<()>) -> Result<()> {
        self.each("SELECT seq, message FROM messages WHERE session_id = ?1 ORDER BY seq", args![session_id], |r| {
            let text: String = r.get(1)?;
            f(r.get(0)?, &text)?;
            Ok(true)
        })
    }

    /// The counts of `stats`, and the size of the database: on SQLite the pages in use × the
    /// page size; on PostgreSQL the size of the store's tables with their indexes and TOAST.
    pub fn stats(&self) -> Result<StoreStats> {
        let db_bytes = match self.dialect() {
            Dialect::Sqlite => self.count("PRAGMA page_count", args![])? * self.count("PRAGMA page_size", args![])?,
            Dialect::Postgres => self.count(
                "SELECT CAST(coalesce(sum(pg_total_relation_size(c.oid)), 0) AS BIGINT) FROM pg_class c \
                 JOIN pg_namespace n ON n.oid = c.relnamespace \
                 WHERE n.nspname = current_schema() AND c.relkind = 'r'",
                args![],
            )?,
        };
        Ok(StoreStats {
            sessions: self.count("SELECT count(*) FROM sessions", args![])?,
            messages: self.count("SELECT count(*) FROM messages", args![])?,
            subagent_runs: self.count("SELECT count(*) FROM subagent_runs", args![])?,
            outbox_pending: self.count("SELECT count(*) FROM outbox WHERE status = 'pending'", args![])?,
            db_bytes,
        })
    }
}
