//! The sub-agent registry (REFERENCE.md §6.4–§6.8, DECISIONS.md #3, #5): records persisted in
//! `subagent_runs`, the completion wait, the announce flow (through the outbox), queue and
//! steer modes, cleanup, the archive sweeper and restart recovery.
//!
//! A child's life: `sessions_spawn` registers its record and arms a *completion wait*; when the
//! run ends, the record gets `endedAt`/`outcome` and its announce is recorded in the outbox
//! under the record's idempotency key (so recording it again, e.g. on recovery, adds nothing).
//! The outbox worker calls [`attempt_announce`]: the trigger message (§6.5, §6.7) reaches the
//! requester by steering its active run, through the per-requester announce queue while a run
//! is active (§6.8), or directly as an `announce` run with `deliver: true`. When the announce
//! settles, [`announce_settled`] records it and cleans up (`delete` removes the child, `keep`
//! sets `cleanupCompletedAt` and the archive time, counted from the run's end). The sweeper is
//! one timer, set for the next archive due. Every change to a record is one transaction that
//! reads it fresh, so the completion wait, the outbox and a requester's deletion never undo
//! each other's writes. Nothing here decides whether a spawn is allowed: `spawn` does.

mod announce;
mod announce_run;
mod archive;
mod cleanup;
mod completion;
mod lifecycle;
mod queue;
mod records;
#[cfg(test)]
pub(crate) mod testkit;
#[cfg(test)]
mod tests;

use std::collections::HashMap;
use std::future::Future;
use std::sync::atomic::AtomicBool;
use std::sync::{Arc, Mutex};

use tokio::sync::{watch, Notify};

use crate::config::Config;
pub use crate::store::subagents::{AnnounceState, RunOutcome, SubagentRun};

pub use announce::attempt_announce;
use announce::*;
use announce_run::*;
use archive::*;
pub use cleanup::announce_settled;
use cleanup::*;
use completion::*;
pub use lifecycle::{close, on_session_deleted, recover};
use queue::*;
pub use queue::{overflow_summary, queue_settings, DropPolicy, QueueMode, QueueSettings};
use records::*;
pub use records::{list, register, running_count};

/// The outcome error of a child whose requester session was deleted while it ran.
pub const REQUESTER_DELETED: &str = "stopped: requester session deleted";
/// The title of a combined announce in `collect` mode (§6.8).
pub const QUEUED_TITLE: &str = "[Queued announce messages while agent was busy]";
/// How long one wait for a run lasts before it is renewed.
const WAIT_SLICE_MS: u64 = 60_000;
/// The longest an announce attempt waits for its run (the outbox lease is 15 minutes).
const MAX_ANNOUNCE_WAIT_MS: u64 = 14 * 60 * 1000;

/// In-memory state of the registry of one open store.
pub struct Registry {
    shutdown: watch::Sender<bool>,
    sweeper_wake: Arc<Notify>,
    sweeper_started: AtomicBool,
    /// announce idempotency key → the announce run started for it, so that a retry waits for
    /// that run instead of starting a second one
    announce_runs: Mutex<HashMap<String, String>>,
    /// requester canonical key → its announce queue (§6.8)
    queues: Mutex<HashMap<String, AnnounceQueue>>,
    /// held by a spawn from its `maxActive` check until its run is registered, so that
    /// concurrent spawns cannot all pass the check before any of them is counted
    pub(crate) spawn_gate: tokio::sync::Mutex<()>,
}

impl Default for Registry {
    fn default() -> Self {
        Registry {
            shutdown: watch::channel(false).0,
            sweeper_wake: Arc::new(Notify::new()),
            sweeper_started: AtomicBool::new(false),
            announce_runs: Mutex::new(HashMap::new()),
            queues: Mutex::new(HashMap::new()),
            spawn_gate: tokio::sync::Mutex::new(()),
        }
    }
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

impl Registry {
    /// Runs `fut` in the background until it ends or the registry is closed.
    fn spawn_task(&self, fut: impl Future<Output = ()> + Send + 'static) {
        let mut stop = self.shutdown.subscribe();
        if *stop.borrow() {
            return;
        }
        tokio::spawn(async move {
            tokio::select! {
                _ = stop.wait_for(|s| *s) => {}
                _ = fut => {}
            }
        });
    }
}

/// `archiveAfterMinutes` in milliseconds (fractions kept); `None`: archiving disabled.
pub fn archive_after_ms(cfg: &Config) -> Option<i64> {
    cfg.subagents
        .archive_after_minutes
        .filter(|m| m.is_finite() && *m > 0.0)
        .map(|m| (m * 60_000.0).round().max(1.0) as i64)
}
