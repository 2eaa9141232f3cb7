//! The owners table: one row per open store that may hold work (runs, outbox claims), with the
//! time its lease expires. Runs and outbox claims name their owner by `owner_id`; work is held
//! while its owner's row exists with `expires_at` in the future (API.md §1.7).
//!
//! This module only reads and writes the rows. It never decides whether an owner is gone: that
//! rule (expiry, or a dead process on this host) is `crate::owner`'s, which tells this module
//! which rows to delete.

use rusqlite::params;

use super::{sql, Db};
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
    /// Records an owner, or renews it when its row exists (same id).
    pub fn put_owner(&self, o: &OwnerRecord) -> Result<()> {
        let mut st = self
            .conn()?
            .prepare_cached(
                "INSERT INTO owners (owner_id, host_id, host_name, pid, started_at, expires_at)
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6)
                 ON CONFLICT (owner_id) DO UPDATE SET expires_at = excluded.expires_at",
            )
            .map_err(sql)?;
        st.execute(params![o.owner_id, o.host_id, o.host_name, o.pid, o.started_at, o.expires_at]).map_err(sql)?;
        Ok(())
    }

    /// Moves an owner's expiry; `false` when it has no row (it was released, or taken over).
    pub fn renew_owner(&self, owner_id: &str, expires_at: i64) -> Result<bool> {
        let mut st =
            self.conn()?.prepare_cached("UPDATE owners SET expires_at = ?2 WHERE owner_id = ?1").map_err(sql)?;
        Ok(st.execute(params![owner_id, expires_at]).map_err(sql)? > 0)
    }

    /// Removes an owner's row: its work is no longer held by anyone.
    pub fn delete_owner(&self, owner_id: &str) -> Result<()> {
        let mut st = self.conn()?.prepare_cached("DELETE FROM owners WHERE owner_id = ?1").map_err(sql)?;
        st.execute([owner_id]).map_err(sql)?;
        Ok(())
    }

    /// Every owner on record.
    pub fn owners(&self) -> Result<Vec<OwnerRecord>> {
        let mut st = self
            .conn()?
            .prepare_cached("SELECT owner_id, host_id, host_name, pid, started_at, expires_at FROM owners")
            .map_err(sql)?;
        let rows = st
            .query_map([], |r| {
                Ok(OwnerRecord {
                    owner_id: r.get(0)?,
                    host_id: r.get(1)?,
                    host_name: r.get(2)?,
                    pid: r.get::<_, i64>(3)?.clamp(0, i64::from(u32::MAX)) as u32,
                    started_at: r.get(4)?,
                    expires_at: r.get(5)?,
                })
            })
            .map_err(sql)?;
        rows.collect::<rusqlite::Result<Vec<_>>>().map_err(sql)
    }
}
