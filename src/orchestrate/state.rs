//! The [`Orchestrator`]: one open store's conductor state (the engine, the host, the store's
//! lease, the run registry, the outbox and the sub-agent registry) and its accessors.
//!
//! Only state lives here: what is done with it lives in the modules that use it (`lifecycle`,
//! `api`, `dispatch`, `send`, `spawn`, `subagents`). It never imports those modules.

use std::sync::{Arc, Weak};

use serde_json::Value;
use tokio::sync::Notify;

use super::outbox::Outbox;
use super::runs::Runs;
use super::subagents::registry::Registry;
use super::task::BusyGuard;
use crate::engine::Engine;
use crate::entry;
use crate::host::{Event, Host};
use crate::owner::Lease;

pub struct Orchestrator {
    pub(super) engine: Arc<Engine>,
    pub(super) host: Arc<dyn Host>,
    /// the owner this store's runs and claims name (API.md §1.7)
    pub(super) lease: Arc<Lease>,
    /// stops the lease's heartbeat
    pub(super) heartbeat: Arc<Notify>,
    pub(super) runs: Arc<Runs>,
    pub(super) outbox: Arc<Outbox>,
    pub(super) subagents: Registry,
    me: Weak<Orchestrator>,
}

impl Orchestrator {
    pub fn new(engine: Arc<Engine>, host: Arc<dyn Host>) -> Arc<Orchestrator> {
        Orchestrator::with_lease(engine, host, Lease::detect())
    }

    /// As [`Orchestrator::new`], with a given lease (a test's host identity or clock).
    pub fn with_lease(engine: Arc<Engine>, host: Arc<dyn Host>, lease: Lease) -> Arc<Orchestrator> {
        let lease = Arc::new(lease);
        let outbox = Outbox::new(engine.clone(), lease.clone());
        Arc::new_cyclic(|me| Orchestrator {
            engine,
            host,
            runs: Arc::new(Runs::new(lease.id().to_owned())),
            lease,
            heartbeat: Arc::new(Notify::new()),
            outbox,
            subagents: Registry::default(),
            me: me.clone(),
        })
    }

    /// This orchestrator as an `Arc`, while it is alive.
    pub fn me(&self) -> Option<Arc<Orchestrator>> {
        self.me.upgrade()
    }

    pub fn engine(&self) -> &Arc<Engine> {
        &self.engine
    }
    pub fn host(&self) -> &Arc<dyn Host> {
        &self.host
    }
    pub fn lease(&self) -> &Arc<Lease> {
        &self.lease
    }
    pub fn runs(&self) -> &Arc<Runs> {
        &self.runs
    }
    pub fn outbox(&self) -> &Arc<Outbox> {
        &self.outbox
    }
    pub fn subagents(&self) -> &Registry {
        &self.subagents
    }

    /// Spawns background work that keeps the host process alive while it runs.
    pub fn spawn_busy(&self, fut: impl std::future::Future<Output = ()> + Send + 'static) {
        let guard = BusyGuard::new(self.host.clone());
        tokio::spawn(async move {
            fut.await;
            drop(guard);
        });
    }

    /// Swaps the config (`setConfig`) and reports the keys of it that moved to the settings.
    pub fn set_config(&self, config: crate::config::Config) {
        self.engine.set_config(config);
        self.report_deprecated();
    }

    /// One `config.deprecated` event per key of the config in force that moved to the settings.
    pub fn report_deprecated(&self) {
        for d in &self.engine.config().deprecated {
            self.emit("config.deprecated", None, None, serde_json::json!({"key": d.key, "use": d.moved_to}));
        }
    }

    /// Emits a lifecycle event (API.md §2.3).
    pub fn emit(&self, kind: &'static str, run_id: Option<&str>, session_key: Option<&str>, details: Value) {
        self.host.emit(Event {
            kind,
            at: entry::now_ms(),
            run_id: run_id.map(str::to_owned),
            session_key: session_key.map(str::to_owned),
            details: details.as_object().cloned().unwrap_or_default(),
        });
    }
}
