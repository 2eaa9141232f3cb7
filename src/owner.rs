//! Who holds a piece of work: THE ownership rule (API.md §1.7). Every open store is an *owner*
//! (a fresh uuid, with its host id and pid for diagnostics) whose lease, a row in the store's
//! `owners` table, expires `leaseMs` after it was last renewed. Runs and outbox claims name their
//! owner; work is held iff its owner's lease has not expired. A gone owner's work is taken over
//! once its lease has expired, or at once when its row says it ran on this host (same host id)
//! under a pid that is no longer running: never while the lease is live on another host.
//!
//! Leases are written and judged by one clock per database ([`Lease::now`]): on a database server
//! several hosts share, the server's (so a host whose clock is off neither stretches its own
//! lease nor cuts another's short); on a SQLite file, this machine's ([`Clock`], the system
//! clock or a test's).
//!
//! This module owns the identity of this process ([`Here`]), the clock leases are read against,
//! the rule itself ([`Lease::holds`]) and the lease's own row operations (acquire, renew,
//! release, reap). It never touches runs or outbox rows (their SQL applies the rule's
//! expiry part, `src/store/`), and it never starts tasks (the heartbeat is the orchestrator's).

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, OnceLock};

use crate::error::Result;
use crate::store::owners::OwnerRecord;
use crate::store::{Db, Store};

/// The default lease length (the setting `ownership.leaseMs`).
pub const DEFAULT_LEASE_MS: u64 = 30_000;
/// The shortest lease accepted: shorter ones are raised to this.
pub const MIN_LEASE_MS: u64 = 1_000;
/// The longest lease accepted (a day): longer ones are lowered to this.
pub const MAX_LEASE_MS: u64 = 86_400_000;

/// The lease length in force: the setting `ownership.leaseMs` (clamped when read), or the
/// default.
pub fn lease_ms(config: &crate::config::Config) -> u64 {
    config.settings.lease_ms.unwrap_or(DEFAULT_LEASE_MS)
}

/// This host's clock, in ms since the epoch: the system clock, or a test's. Leases are read
/// against it when the database has no clock of its own (see [`Lease::now`]).
pub type Clock = Arc<dyn Fn() -> i64 + Send + Sync>;

/// The system clock.
pub fn system_clock() -> Clock {
    Arc::new(crate::entry::now_ms)
}

/// Where this process runs, and how to tell whether a pid there is still running.
#[derive(Clone)]
pub struct Here {
    /// Processes with the same host id see the same pids: on Linux, one boot of one machine's
    /// kernel (`boot_id`) and one pid namespace. Unknown: a fresh id (no other process shares
    /// it, so only expiry takes its work over).
    pub host_id: String,
    pub host_name: String,
    pub pid: u32,
    /// Whether `pid` is running on this host. When it cannot tell, it must answer `true`.
    pub pid_running: fn(u32) -> bool,
}

impl Here {
    /// This process (read once per process).
    pub fn detect() -> Here {
        static HERE: OnceLock<Here> = OnceLock::new();
        HERE.get_or_init(|| Here { host_id: host_id(), host_name: host_name(), pid: std::process::id(), pid_running })
            .clone()
    }
}

fn read_trimmed(path: &str) -> Option<String> {
    std::fs::read_to_string(path).ok().map(|s| s.trim().to_owned()).filter(|s| !s.is_empty())
}

fn host_id() -> String {
    let boot = read_trimmed("/proc/sys/kernel/random/boot_id");
    let pid_ns = std::fs::read_link("/proc/self/ns/pid").ok().map(|p| p.to_string_lossy().into_owned());
    match (boot, pid_ns) {
        (Some(boot), Some(ns)) => format!("linux:{boot}:{ns}"),
        _ => format!("unknown:{}", uuid::Uuid::new_v4()),
    }
}

fn host_name() -> String {
    read_trimmed("/proc/sys/kernel/hostname")
        .or_else(|| std::env::var("HOSTNAME").ok().filter(|h| !h.is_empty()))
        .unwrap_or_else(|| "unknown".to_owned())
}

/// Linux: `/proc/<pid>` exists. Without `/proc` it cannot tell, so it says running.
fn pid_running(pid: u32) -> bool {
    if !std::path::Path::new("/proc/self").exists() {
        return true;
    }
    std::path::Path::new(&format!("/proc/{pid}")).exists()
}

/// The lease of one open store.
pub struct Lease {
    id: String,
    here: Here,
    clock: Clock,
    started_at: i64,
    /// set by [`Lease::release`]: a renewal still under way must not record the lease again
    released: AtomicBool,
}

impl Lease {
    pub fn new(here: Here, clock: Clock) -> Lease {
        let started_at = clock();
        Lease { id: uuid::Uuid::new_v4().to_string(), here, clock, started_at, released: AtomicBool::new(false) }
    }

    /// A lease of this process on the system clock.
    pub fn detect() -> Lease {
        Lease::new(Here::detect(), system_clock())
    }

    /// The owner id that runs and claims record.
    pub fn id(&self) -> &str {
        &self.id
    }

    /// The time leases are read against, for a transaction on `db`: the database's own clock
    /// when every process on it shares one (a PostgreSQL server's), else this host's. Every
    /// lease time (expiry, claim deadline, due time) that is stored or compared comes from here.
    pub fn now(&self, db: &Db<'_>) -> Result<i64> {
        Ok(db.shared_clock_ms()?.unwrap_or_else(|| (self.clock)()))
    }

    /// THE rule: whether `owner` still holds its work at `now`, as seen from here. Its lease
    /// must not have expired, and when it ran on this host under another pid, that pid must
    /// still be running (a crash here is taken over at once; elsewhere, only expiry tells).
    pub fn holds(&self, owner: &OwnerRecord, now: i64) -> bool {
        if owner.expires_at <= now {
            return false;
        }
        let local_elsewhere = owner.host_id == self.here.host_id && owner.pid != self.here.pid;
        !local_elsewhere || (self.here.pid_running)(owner.pid)
    }

    fn record(&self, now: i64, length_ms: u64) -> OwnerRecord {
        OwnerRecord {
            owner_id: self.id.clone(),
            host_id: self.here.host_id.clone(),
            host_name: self.here.host_name.clone(),
            pid: self.here.pid,
            started_at: self.started_at,
            expires_at: expiry(now, length_ms),
        }
    }

    /// Records this owner with a lease of `length_ms` from now. Call inside a write.
    pub fn acquire(&self, db: &Db<'_>, length_ms: u64) -> Result<()> {
        db.put_owner(&self.record(self.now(db)?, length_ms))
    }

    /// Extends the lease to `length_ms` from now, in a transaction of its own (never inside a
    /// write: on PostgreSQL it does not wait for the write lock, see `store::pg::lease`); `false`
    /// when its row was gone (the lease had lapsed and another owner reaped it, so its work may
    /// have been taken over): then [`Lease::restore`] records it again. After [`Lease::release`]
    /// it does nothing.
    pub fn renew(&self, store: &Store, length_ms: u64) -> Result<bool> {
        if self.released.load(Ordering::SeqCst) {
            return Ok(true);
        }
        let length = i64::try_from(length_ms).unwrap_or(i64::MAX);
        let renewed = store.renew_owner(&self.id, length, &*self.clock)?;
        // a release that deleted the row meanwhile is no lapse
        Ok(renewed || self.released.load(Ordering::SeqCst))
    }

    /// Records the lease again after a renewal found its row gone: it holds from now on. After
    /// [`Lease::release`] it does nothing. Call inside a write.
    pub fn restore(&self, db: &Db<'_>, length_ms: u64) -> Result<()> {
        if self.released.load(Ordering::SeqCst) {
            return Ok(());
        }
        self.acquire(db, length_ms)
    }

    /// Ends the lease at once, for good: this owner's work is free for others. Call inside a
    /// write.
    pub fn release(&self, db: &Db<'_>) -> Result<()> {
        self.released.store(true, Ordering::SeqCst);
        db.delete_owner(&self.id)
    }

    /// Deletes the rows of the owners that no longer hold their work ([`Lease::holds`]), so
    /// that the store's queries (a row with a future expiry holds) see them gone; their ids.
    /// Call inside a write, before ending their runs in the same transaction.
    pub fn reap(&self, db: &Db<'_>, now: i64) -> Result<Vec<String>> {
        let mut gone = Vec::new();
        for owner in db.owners()? {
            // a renewal that moved its expiry since it was read keeps it (see `store::pg::lease`)
            if owner.owner_id != self.id && !self.holds(&owner, now) && db.reap_owner(&owner)? {
                gone.push(owner.owner_id);
            }
        }
        Ok(gone)
    }
}

fn expiry(now: i64, length_ms: u64) -> i64 {
    now.saturating_add(i64::try_from(length_ms).unwrap_or(i64::MAX))
}

#[cfg(test)]
#[path = "owner_tests.rs"]
mod tests;

#[cfg(test)]
#[path = "owner_pg_tests.rs"]
mod pg_tests;
