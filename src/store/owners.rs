//! The owners table: one row per open store that may hold work (runs, outbox claims), with the
//! time its lease expires. Runs and outbox claims name their owner by `owner_id`; work is held
//! while its owner's row exists with `expires_at` in the future (API.md §1.7).
//!
//! It also reads the database's clock ([`Db::shared_clock_ms`]): on a server several hosts
//! share, leases are written and judged by the server's time, never by one host's.
//!
//! This module only reads and writes the rows. It never decides whether an owner is gone: that
//! rule (expiry, or a dead process on this host) is `crate::owner`'s, which tells this module
//! which rows to delete.

use super::{Db, Store};
use crate::args;
use crate::error::Result;

/// One owner as stored.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OwnerRecord {
    /// a fresh uuid per open store
    pub owner_id: String,
    /// where its process runs: processes with the same host id can see each other's pids
    pub host_id: String,
    /// the machine's name, for people reading the table
    pub host_name: String,
    pub pid: u32,
    pub started_at: i64,
    /// the lease ends at this time (ms) unless renewed
    pub expires_at: i64,
}

impl Db<'_> {
    /// The time (ms since the epoch) on the database's own clock, when every process on the
    /// database shares one: PostgreSQL's (the server's, whatever the clocks of the hosts
    /// connected to it say); `None` on SQLite, whose processes share this machine's clock.
    pub fn shared_clock_ms(&self) -> Result<Option<i64>> {
        // PostgreSQL's is read as its transactions open (see `pg::tx`): no round trip of its own
        self.server_clock_ms()
    }

    /// The time leases on this database are read against: [`Db::shared_clock_ms`] when there
    /// is one, else this process's clock.
    pub fn now_ms(&self) -> Result<i64> {
        Ok(self.shared_clock_ms()?.unwrap_or_else(crate::entry::now_ms))
    }

    /// Records an owner, or renews it when its row exists (same id).
    pub fn put_owner(&self, o: &OwnerRecord) -> Result<()> {
        self.exec(
            "INSERT INTO owners (owner_id, host_id, host_name, pid, started_at, expires_at)
             VALUES (?1, ?2, ?3, ?4, ?5, ?6)
             ON CONFLICT (owner_id) DO UPDATE SET expires_at = excluded.expires_at",
            args![o.owner_id, o.host_id, o.host_name, o.pid, o.started_at, o.expires_at],
        )?;
        Ok(())
    }

    /// Moves an owner's expiry; `false` when it has no row (it was released, or taken over).
    pub fn renew_owner(&self, owner_id: &str, expires_at: i64) -> Result<bool> {
        Ok(self.exec("UPDATE owners SET expires_at = ?2 WHERE owner_id = ?1", args![owner_id, expires_at])? > 0)
    }

    /// Removes the row of an owner found gone, only while it still has the expiry it was judged
    /// by (`o.expires_at`): a renewal that got there first keeps it (see `pg::lease` for why
    /// this makes renewals outside the write lock safe); whether it was removed.
    pub fn reap_owner(&self, o: &OwnerRecord) -> Result<bool> {
        Ok(self.exec("DELETE FROM owners WHERE owner_id = ?1 AND expires_at = ?2", args![o.owner_id, o.expires_at])?
            > 0)
    }

    /// Removes an owner's row: its work is no longer held by anyone.
    pub fn delete_owner(&self, owner_id: &str) -> Result<()> {
        self.exec("DELETE FROM owners WHERE owner_id = ?1", args![owner_id])?;
        Ok(())
    }

    /// Every owner on record.
    pub fn owners(&self) -> Result<Vec<OwnerRecord>> {
        self.rows("SELECT owner_id, host_id, host_name, pid, started_at, expires_at FROM owners", args![], |r| {
            Ok(OwnerRecord {
                owner_id: r.get(0)?,
                host_id: r.get(1)?,
                host_name: r.get(2)?,
                pid: r.get::<i64>(3)?.clamp(0, i64::from(u32::MAX)) as u32,
                started_at: r.get(4)?,
                expires_at: r.get(5)?,
            })
        })
    }
}

impl Store {
    /// Moves an owner's expiry to `length_ms` after the database's lease clock, in a transaction
    /// of its own; `false` when it has no row. On PostgreSQL it is one statement on the owner's
    /// row, by the server's clock, that never waits for the write lock (`pg::lease`); on a SQLite
    /// file it is a write like any other (one writer per file), by `host_now`.
    pub fn renew_owner(&self, owner_id: &str, length_ms: i64, host_now: &dyn Fn() -> i64) -> Result<bool> {
        if let Some(pg) = &self.pg {
            // a round trip: never on the JS thread
            if super::inline_mode() {
                return Err(super::would_block());
            }
            return pg.renew_owner(owner_id, length_ms);
        }
        self.write(|db| db.renew_owner(owner_id, host_now().saturating_add(length_ms)))
    }
}
