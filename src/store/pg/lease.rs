//! Lease renewal on PostgreSQL without the write lock: one connection of its own, outside the
//! pool, that renews an owner's lease with one statement on the owner's own row.
//!
//! Every write transaction of every store on the database queues for one advisory lock (see
//! `pg`). A renewal that queued there (or for a pooled connection held by a write waiting there)
//! could outlast a short lease under load, letting another gateway take over a live one's runs.
//! So a renewal is the single `UPDATE` [`RENEW`], sent in autocommit on this connection: it
//! never takes the write lock, and never waits for the pool.
//!
//! Why it is correct without the lock. A takeover deletes the gone owner's row (`owners::reap_owner`)
//! only where it still has the expiry the taker judged lapsed, then ends the runs whose owner
//! holds no live row, in the taker's write transaction (`READ COMMITTED`). The renewal and that
//! `DELETE` meet on one row, whose row lock orders them:
//! - renewal first: the `DELETE` finds (directly, or on re-checking the row once the renewal
//!   commits) a different expiry and deletes nothing; the taker's next statement sees the live
//!   row, so none of the owner's runs end. The renewal said `true`: rightly.
//! - `DELETE` first: the renewal waits for the taker's commit on that row only (never for the
//!   write lock), then finds no row and says `false`: the lease had lapsed and was taken over, and
//!   the old owner learns it. A rolled-back taker leaves the row, and the renewal renews it.
//!
//! So a lapsed lease is taken over at most once and a renewal after a takeover fails, exactly as
//! when renewals were writes under the lock. The expiry is computed by the server's clock in
//! the statement itself, as every lease time on PostgreSQL is. This module never decides when
//! a lease is renewed, nor whether an owner is gone.

use tokio::sync::Mutex;
use tokio_postgres::types::Type;
use tokio_postgres::{Client, Config, Statement};
use tokio_postgres_rustls::MakeRustlsConnect;

use super::describe;

/// Moves one owner's expiry to `$2` ms after the server's now; constant text.
const RENEW: &str =
    "UPDATE owners SET expires_at = CAST(floor(extract(epoch from clock_timestamp()) * 1000) AS BIGINT) + $2
     WHERE owner_id = $1";
/// The renewing connection's `application_name`.
pub(super) const APPLICATION_NAME: &str = "session-tools-lease";

/// The renewing connection, made on first use and again after the server dropped it.
pub(super) struct LeaseConn {
    config: Config,
    tls: MakeRustlsConnect,
    conn: Mutex<Option<(Client, Statement)>>,
}

impl LeaseConn {
    pub(super) fn new(mut config: Config, tls: MakeRustlsConnect) -> LeaseConn {
        // named apart from the pool's connections, for whoever reads pg_stat_activity
        config.application_name(APPLICATION_NAME);
        LeaseConn { config, tls, conn: Mutex::new(None) }
    }

    /// Renews `owner_id`'s lease to `length_ms` from the server's now; `false` when it has no
    /// row. Run on the store's runtime. After a failure the connection is replaced and the
    /// statement tried once more (renewing twice is harmless: the second only moves the expiry
    /// again).
    pub(super) async fn renew(&self, owner_id: &str, length_ms: i64) -> Result<bool, String> {
        let mut slot = self.conn.lock().await;
        let mut tried = false;
        loop {
            let (client, st) = match slot.take() {
                Some(open) if !open.0.is_closed() => open,
                _ => self.connect().await?,
            };
            match client.execute(&st, &[&owner_id, &length_ms]).await {
                Ok(n) => {
                    *slot = Some((client, st));
                    return Ok(n > 0);
                }
                // the connection is dropped: a server that ended it (a restart, an operator)
                // may say so as an error before the connection is seen closed
                Err(_) if !tried => tried = true,
                Err(e) => return Err(describe(&e)),
            }
        }
    }

    async fn connect(&self) -> Result<(Client, Statement), String> {
        let (client, conn) = self.config.connect(self.tls.clone()).await.map_err(|e| describe(&e))?;
        tokio::spawn(conn);
        let st = client.prepare_typed(RENEW, &[Type::TEXT, Type::INT8]).await.map_err(|e| describe(&e))?;
        Ok((client, st))
    }

    /// Drops the connection (the store closed).
    pub(super) fn close(&self) {
        if let Ok(mut slot) = self.conn.try_lock() {
            *slot = None;
        }
    }
}
