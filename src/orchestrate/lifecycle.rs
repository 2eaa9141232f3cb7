//! Opening, starting and closing an [`Orchestrator`]: the open sequence (the store, the engine
//! with its mirror folder, the lease and the takeover of what gone owners left, recovery of the
//! sub-agents, the outbox worker, the sweeper and the heartbeat), and the orderly close.

use std::sync::{Arc, Weak};

use super::outbox::Dispatcher;
use super::state::Orchestrator;
use super::{subagents, yields};
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
        let opened = tokio::task::spawn_blocking(move || -> Result<Engine> {
            let store = Store::open(&path)?;
            let mirror_dir = mirror.resolve(store.file());
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

    /// What a fresh open does, inside the tokio runtime: records this store's lease and ends
    /// the runs of gone owners as interrupted (API.md §1.7), recovers the sub-agent registry
    /// (announcing what was left unannounced), and starts the outbox worker, the archive
    /// sweeper and the lease's heartbeat.
    pub async fn start(self: &Arc<Self>) -> Result<()> {
        self.report_deprecated();
        self.take_lease().await?;
        // renewed from now on: the recovery below may take longer than the lease
        self.start_heartbeat();
        subagents::recover(self).await?;
        yields::recover(self).await?;
        super::watch::install(self);
        let me: Arc<dyn Dispatcher> = self.clone();
        let weak: Weak<dyn Dispatcher> = Arc::downgrade(&me);
        self.outbox.start(weak);
        Ok(())
    }
    /// Stops runs, the outbox and the sweeper (in-flight runs are recorded as interrupted),
    /// releases the lease, then closes the store. Idempotent. The process is no longer kept
    /// alive for them.
    pub async fn close(self: &Arc<Self>) {
        self.host.idle();
        self.outbox.close();
        subagents::close(self);
        let (this, e, r) = (self.clone(), self.engine.clone(), self.runs.clone());
        let _ = tokio::task::spawn_blocking(move || {
            if !e.store().is_closed() {
                r.close(&e);
                this.release_lease();
            }
            e.close();
        })
        .await;
    }
}
