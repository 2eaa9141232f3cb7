//! The outbox (DECISIONS.md #2): every announce is a row before it is attempted. A row is
//! claimed by one owner at a time: the claim holds while the claimant's lease in `owners` has
//! not expired (API.md §1.7), the claim and its check are one write transaction; a row keeps one
//! idempotency key for all of its tries.

use rusqlite::{params, OptionalExtension, Row};
use serde_json::Value;

use super::{sql, Db};
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

/// The columns [`row`] reads, as a literal so that every statement stays one constant string.
macro_rules! columns {
    () => {
        "id, idempotency_key, kind, session_key, payload, status, attempts, next_attempt_at, last_error, owner, lease_until, \
         created_at"
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

fn row(r: &Row<'_>) -> rusqlite::Result<(OutboxRow, Option<String>, Option<i64>)> {
    let payload: String = r.get(4)?;
    Ok((
        OutboxRow {
            id: r.get(0)?,
            idempotency_key: r.get(1)?,
            kind: r.get(2)?,
            session_key: r.get(3)?,
            payload: serde_json::from_str(&payload).unwrap_or(Value::Null),
            status: r.get(5)?,
            attempts: r.get::<_, i64>(6)?.max(0) as u32,
            next_attempt_at: r.get(7)?,
            last_error: r.get(8)?,
            created_at: r.get(11)?,
        },
        r.get(9)?,
        r.get(10)?,
    ))
}

impl Db<'_> {
    /// Records an item as pending, due at once; `false` when its idempotency key is already
    /// recorded (the item is not added twice).
    pub fn insert_outbox(
        &self,
        idempotency_key: &str,
        kind: &str,
        session_key: Option<&str>,
        payload: &Value,
        now: i64,
    ) -> Result<bool> {
        let mut st = self
            .conn()?
            .prepare_cached(
                "INSERT OR IGNORE INTO outbox
                   (idempotency_key, kind, session_key, payload, status, attempts, next_attempt_at, created_at, updated_at)
                 VALUES (?1, ?2, ?3, ?4, 'pending', 0, ?5, ?5, ?5)",
            )
            .map_err(sql)?;
        let n = st.execute(params![idempotency_key, kind, session_key, payload.to_string(), now]).map_err(sql)?;
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
        let mut st = self
            .conn()?
            .prepare_cached(concat!(
                "SELECT ",
                columns!(),
                " FROM outbox WHERE status = 'pending' AND next_attempt_at <= ?1 AND kind IN (?3, ?4) AND ",
                claimable!("?1", "?5"),
                " ORDER BY next_attempt_at, id LIMIT ?2"
            ))
            .map_err(sql)?;
        let claimed = st
            .query_map(params![now, limit, kinds[0], kinds[1], owner], row)
            .map_err(sql)?
            .collect::<rusqlite::Result<Vec<_>>>()
            .map_err(sql)?;
        let mut claim = self
            .conn()?
            .prepare_cached("UPDATE outbox SET owner = ?2, lease_until = ?3, updated_at = ?4 WHERE id = ?1")
            .map_err(sql)?;
        let mut out = Vec::with_capacity(claimed.len());
        for (item, _, _) in claimed {
            claim.execute(params![item.id, owner, now + attempt_ms, now]).map_err(sql)?;
            out.push(item);
        }
        Ok(out)
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
        let mut st = self
            .conn()?
            .prepare_cached(
                "UPDATE outbox SET status = ?2, attempts = ?3, next_attempt_at = ?4, last_error = ?5,
                   owner = NULL, lease_until = NULL, updated_at = ?6 WHERE id = ?1",
            )
            .map_err(sql)?;
        st.execute(params![id, status, attempts, next_attempt_at, error, now]).map_err(sql)?;
        Ok(())
    }

    /// When the next pending item `owner` may claim is due, if any (items under another
    /// owner's live claim are left out: their owner attempts them).
    pub fn outbox_next_claimable(&self, owner: &str, now: i64) -> Result<Option<i64>> {
        let mut st = self
            .conn()?
            .prepare_cached(concat!(
                "SELECT min(next_attempt_at) FROM outbox WHERE status = 'pending' AND ",
                claimable!("?1", "?2"),
            ))
            .map_err(sql)?;
        st.query_row(params![now, owner], |r| r.get::<_, Option<i64>>(0)).map_err(sql)
    }

    pub fn outbox_item(&self, idempotency_key: &str) -> Result<Option<OutboxRow>> {
        let mut st = self
            .conn()?
            .prepare_cached(concat!("SELECT ", columns!(), " FROM outbox WHERE idempotency_key = ?1"))
            .map_err(sql)?;
        st.query_row([idempotency_key], row).optional().map(|o| o.map(|(r, _, _)| r)).map_err(sql)
    }

    pub fn outbox_pending_count(&self) -> Result<u64> {
        let mut st =
            self.conn()?.prepare_cached("SELECT count(*) FROM outbox WHERE status = 'pending'").map_err(sql)?;
        st.query_row([], |r| r.get::<_, i64>(0)).map(|n| n.max(0) as u64).map_err(sql)
    }

    /// Every item, oldest first (for tests and `stats`).
    pub fn outbox_items(&self) -> Result<Vec<OutboxRow>> {
        let mut st =
            self.conn()?.prepare_cached(concat!("SELECT ", columns!(), " FROM outbox ORDER BY id")).map_err(sql)?;
        let rows = st.query_map([], row).map_err(sql)?.collect::<rusqlite::Result<Vec<_>>>().map_err(sql)?;
        Ok(rows.into_iter().map(|(r, _, _)| r).collect())
    }
}
