//! Starting and closing an [`Orchestrator`]: recovery of the runs and sub-agents a dead
//! process left, the outbox worker and the sweeper, and the orderly close.

use std::sync::{Arc, Weak};

use super::outbox::Dispatcher;
use super::state::Orchestrator;
use super::subagents;
use super::task::blocking;
use crate::error::Result;

impl Orchestrator {
    /// What a fresh open does, inside the tokio runtime: ends the runs of dead processes as
    /// interrupted, recovers the sub-agent registry (announcing what was left unannounced),
    /// and starts the outbox worker and the archive sweeper.
    pub async fn start(self: &Arc<Self>) -> Result<()> {
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
