//! The outbox (DECISIONS.md #2): every announce is a row before it is attempted. A row is
//! claimed by one owner at a time: the claim holds while the claimant's lease in `owners` has
//! not expired (API.md §1.7), the claim and its check are one write transaction (on PostgreSQL
//! the claimed rows are also locked, skipping rows another transaction holds); a row keeps one
//! idempotency key for all of its tries. On PostgreSQL recording a row notifies the other stores
//! on the schema (`pg::listen`). This module never decides when an item is attempted.

use serde_json::Value;

use super::{Db, Dialect, Row};
use crate::args;
use crate::error::Result;

/// One outbox item as stored.
#[derive(Debug, Clone, PartialEq)]
pub struct OutboxRow {
    pub id: i64,
    pub idempotency_key: String,
    /// a2a_announce | subagent_announce
    pub kind: String,
    pub session_key: Option<String>,
    pub payload: Value,
    /// pending | delivered | failed | skipped
    pub status: String,
    pub attempts: u32,
    pub next_attempt_at: i64,
    pub last_error: Option<String>,
    /// when the item was recorded (ms): a completion's retry window starts here
    pub created_at: i64,
}

/// The PostgreSQL channel an outbox insert notifies: the other stores on the database listen
/// on it to look for work without waiting for their next poll.
pub const OUTBOX_CHANNEL: &str = "session_tools_outbox";

/// The notification of a new item (constant text: [`OUTBOX_CHANNEL`]), naming the schema the
/// item is in (stores under other schemas of the database ignore it).
const NOTIFY: &str = "SELECT pg_notify('session_tools_outbox', coalesce(current_schema(), ''))";

/// The columns [`row`] reads, as a literal so that every statement stays one constant string.
macro_rules! columns {
    () => {
        "id, idempotency_key, kind, session_key, payload, status, attempts, next_attempt_at, last_error, created_at"
    };
}

/// Whether a row is claimable by the owner bound at `$me` at the time bound at `$now` (see
/// [`Db::claim_outbox`]); one literal shared by the claim and the next-due query, so that they
/// never disagree.
macro_rules! claimable {
    ($now:literal, $me:literal) => {
        concat!(
            "(owner IS NULL OR (owner = ",
            $me,
            " AND (lease_until IS NULL OR lease_until <= ",
            $now,
            "))",
            " OR (owner <> ",
            $me,
            " AND owner NOT IN (SELECT owner_id FROM owners WHERE expires_at > ",
            $now,
            ")))"
        )
    };
}

fn row(r: &Row<'_>) -> Result<OutboxRow> {
    let payload: String = r.get(4)?;
    Ok(OutboxRow {
        id: r.get(0)?,
        idempotency_key: r.get(1)?,
        kind: r.get(2)?,
        session_key: r.get(3)?,
        payload: serde_json::from_str(&payload).unwrap_or(Value::Null),
        status: r.get(5)?,
        attempts: r.get::<i64>(6)?.clamp(0, i64::from(u32::MAX)) as u32,
        next_attempt_at: r.get(7)?,
        last_error: r.get(8)?,
        created_at: r.get(9)?,
    })
}

/// The claim: the due, claimable rows (oldest due first) marked as `owner`'s until the attempt
/// deadline, returned in one statement. On PostgreSQL the rows are locked as they are picked,
/// skipping rows another transaction holds, so two claimants never take one row even without
/// the write lock.
macro_rules! claim {
    ($lock:literal) => {
        concat!(
            "UPDATE outbox SET owner = ?5, lease_until = ?6, updated_at = ?1 WHERE id IN (SELECT id FROM outbox \
             WHERE status = 'pending' AND next_attempt_at <= ?1 AND kind IN (?3, ?4) AND ",
            claimable!("?1", "?5"),
            " ORDER BY next_attempt_at, id LIMIT ?2",
            $lock,
            ") RETURNING ",
            columns!()
        )
    };
}

impl Db<'_> {
    /// Records an item as pending, due at once; `false` when its idempotency key is already
    /// recorded (the item is not added twice). On PostgreSQL the insert also notifies the
    /// channel the other stores on the database listen on ([`OUTBOX_CHANNEL`]), delivered when
    /// the transaction commits.
    pub fn insert_outbox(
        &self,
        idempotency_key: &str,
        kind: &str,
        session_key: Option<&str>,
        payload: &Value,
        now: i64,
    ) -> Result<bool> {
        let n = self.exec(
            "INSERT INTO outbox
               (idempotency_key, kind, session_key, payload, status, attempts, next_attempt_at, created_at, updated_at)
             VALUES (?1, ?2, ?3, ?4, 'pending', 0, ?5, ?5, ?5)
             ON CONFLICT DO NOTHING",
            args![idempotency_key, kind, session_key, payload.to_string(), now],
        )?;
        if n > 0 && self.dialect() == Dialect::Postgres {
            self.exec(NOTIFY, args![])?;
        }
        Ok(n > 0)
    }

    /// Claims up to `limit` due pending items of the given kinds (at most two; a process
    /// claims only what its callbacks can attempt) for `owner` at `now`. An item is claimable
    /// when nobody claimed it, when its claimant holds no lease at `now` (no row in `owners`,
    /// or an expired one), or when it is `owner`'s own claim whose attempt deadline passed (an
    /// attempt of its own that never ended); a claim records `now + attempt_ms` as that
    /// deadline. Call it inside a write: the check and the claim are one transaction.
    pub fn claim_outbox(
        &self,
        owner: &str,
        kinds: [Option<&str>; 2],
        now: i64,
        attempt_ms: i64,
        limit: u32,
    ) -> Result<Vec<OutboxRow>> {
        let q = match self.dialect() {
            Dialect::Sqlite => claim!(""),
            Dialect::Postgres => claim!(" FOR UPDATE SKIP LOCKED"),
        };
        let until = now.saturating_add(attempt_ms);
        let mut out = self.rows(q, args![now, i64::from(limit), kinds[0], kinds[1], owner, until], row)?;
        out.sort_by_key(|r| (r.next_attempt_at, r.id));
        Ok(out)
    }

    /// Gives back `owner`'s claims on pending items it is not attempting (`attempting`: the ids it
    /// is): claimable again at once, by `owner` only while its lease lives. For a claim whose
    /// commit could not be confirmed (the connection broke as it committed): the rows it may
    /// hold would otherwise wait out the attempt deadline unattempted. How many were given back.
    pub fn release_outbox_claims(&self, owner: &str, attempting: &[i64]) -> Result<usize> {
        let mut list = String::from(",");
        for id in attempting {
            list.push_str(&id.to_string());
            list.push(',');
        }
        self.exec(
            "UPDATE outbox SET lease_until = NULL
             WHERE owner = ?1 AND status = 'pending' AND instr(?2, ',' || CAST(id AS TEXT) || ',') = 0",
            args![owner, list],
        )
    }

    /// Records the outcome of one attempt and releases the claim: `status` pending (with the
    /// next due time) or final.
    pub fn settle_outbox(
        &self,
        id: i64,
        status: &str,
        attempts: u32,
        next_attempt_at: i64,
        error: Option<&str>,
        now: i64,
    ) -> Result<()> {
        self.exec(
            "UPDATE outbox SET status = ?2, attempts = ?3, next_attempt_at = ?4, last_error = ?5,
               owner = NULL, lease_until = NULL, updated_at = ?6 WHERE id = ?1",
            args![id, status, attempts, next_attempt_at, error, now],
        )?;
        Ok(())
    }

    /// When the next pending item `owner` may claim is due, if any (items under another
    /// owner's live claim are left out: their owner attempts them).
    pub fn outbox_next_claimable(&self, owner: &str, now: i64) -> Result<Option<i64>> {
        let next = self.row(
            concat!("SELECT min(next_attempt_at) FROM outbox WHERE status = 'pending' AND ", claimable!("?1", "?2")),
            args![now, owner],
            |r| r.get::<Option<i64>>(0),
        )?;
        Ok(next.flatten())
    }

    pub fn outbox_item(&self, idempotency_key: &str) -> Result<Option<OutboxRow>> {
        self.row(concat!("SELECT ", columns!(), " FROM outbox WHERE idempotency_key = ?1"), args![idempotency_key], row)
    }

    pub fn outbox_pending_count(&self) -> Result<u64> {
        self.count("SELECT count(*) FROM outbox WHERE status = 'pending'", args![])
    }

    /// Every item, oldest first (for tests and `stats`).
    pub fn outbox_items(&self) -> Result<Vec<OutboxRow>> {
        self.rows(concat!("SELECT ", columns!(), " FROM outbox ORDER BY id"), args![], row)
    }
}

#[cfg(test)]
#[path = "outbox_tests.rs"]
mod tests;
