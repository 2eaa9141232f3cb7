//! The in-memory state of one open store's sub-agent registry: shutdown, the sweeper's
//! wake-up, the announce runs in flight, the announce queues, the spawn gate. State only: it
//! never imports the orchestrator.

use std::collections::HashMap;
use std::future::Future;
use std::sync::atomic::AtomicBool;
use std::sync::{Arc, Mutex};

use tokio::sync::{watch, Notify};

use super::queue::AnnounceQueue;

/// In-memory state of the registry of one open store.
pub struct Registry {
    pub(super) shutdown: watch::Sender<bool>,
    pub(super) sweeper_wake: Arc<Notify>,
    pub(super) sweeper_started: AtomicBool,
    /// announce idempotency key → the announce run started for it, so that a retry waits for
    /// that run instead of starting a second one
    pub(super) announce_runs: Mutex<HashMap<String, String>>,
    /// requester canonical key → its announce queue (§6.8)
    pub(super) queues: Mutex<HashMap<String, AnnounceQueue>>,
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

pub(super) fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

impl Registry {
    /// Runs `fut` in the background until it ends or the registry is closed.
    pub(super) fn spawn_task(&self, fut: impl Future<Output = ()> + Send + 'static) {
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
