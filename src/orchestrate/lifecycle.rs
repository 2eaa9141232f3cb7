//! Opening, starting and closing an [`Orchestrator`]: the open sequence (the store, the engine
//! with its mirror folder, recovery of the runs and sub-agents a dead process left, the outbox
//! worker and the sweeper), and the orderly close.

use std::sync::{Arc, Weak};

use super::outbox::Dispatcher;
use super::state::Orchestrator;
use super::subagents;
use super::task::blocking;
use crate::config::Config;
use crate::engine::Engine;
use crate::error::Error;
use crate::error::Result;
use crate::host::Host;
use crate::mirror::MirrorDir;
use crate::store::Store;

impl Orchestrator {
    /// `SessionTools.open`: opens (creating when missing) the store at `path`, starts the
    /// orchestration over `host`; a failed start closes what was opened.
    pub async fn open(
        path: String,
        config: Config,
        mirror: MirrorDir,
        host: Arc<dyn Host>,
    ) -> Result<Arc<Orchestrator>> {
        let mirror_dir = mirror.resolve(&path);
        let opened = tokio::task::spawn_blocking(move || -> Result<Engine> {
            let store = Store::open(&path)?;
            Ok(Engine::new(store, config, mirror_dir))
        })
        .await;
        let engine =
            opened.unwrap_or_else(|_| Err(Error::store("internal error: opening the store failed unexpectedly")))?;
        let orch = Orchestrator::new(Arc::new(engine), host);
        if let Err(e) = orch.start().await {
            orch.close().await;
            return Err(e);
        }
        Ok(orch)
    }

    /// What a fresh open does, inside the tokio runtime: ends the runs of dead processes as
    /// interrupted, recovers the sub-agent registry (announcing what was left unannounced),
    /// and starts the outbox worker and the archive sweeper.
    pub async fn start(self: &Arc<Self>) -> Result<()> {
        self.report_deprecated();
        let (e, r) = (self.engine.clone(), self.runs.clone());
        blocking(move || r.recover(&e)).await?;
        subagents::recover(self).await?;
        let me: Arc<dyn Dispatcher> = self.clone();
        let weak: Weak<dyn Dispatcher> = Arc::downgrade(&me);
        self.outbox.start(weak);
        Ok(())
    }
    /// Stops runs, the outbox and the sweeper (in-flight runs are recorded as interrupted),
    /// then closes the store. Idempotent. The process is no longer kept alive for them.
    pub async fn close(self: &Arc<Self>) {
        self.host.idle();
        self.outbox.close();
        subagents::close(self);
        let (e, r) = (self.engine.clone(), self.runs.clone());
        let _ = tokio::task::spawn_blocking(move || {
            if !e.store().is_closed() {
                r.close(&e);
            }
            e.store().close();
        })
        .await;
    }
}
