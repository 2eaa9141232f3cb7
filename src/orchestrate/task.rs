//! Small shared pieces of the orchestration: running store work on a blocking thread, the busy
//! guard that keeps the host process alive while work is in flight, and chain ids.
//!
//! Depends on nothing else in `orchestrate/`; everything else may use it.

use std::sync::Arc;

use crate::error::{Error, Result};
use crate::host::Host;

/// Runs store work on a blocking thread.
pub async fn blocking<T: Send + 'static>(f: impl FnOnce() -> Result<T> + Send + 'static) -> Result<T> {
    tokio::task::spawn_blocking(f).await.unwrap_or_else(|_| Err(Error::store("internal error: a store task failed")))
}

/// Work in progress that should keep the host process alive (a run, an announce attempt, a
/// send's background flow): [`Host::busy`] `true` now, `false` when dropped.
pub struct BusyGuard(Arc<dyn Host>);

impl BusyGuard {
    pub fn new(host: Arc<dyn Host>) -> BusyGuard {
        host.busy(true);
        BusyGuard(host)
    }
}

impl Drop for BusyGuard {
    fn drop(&mut self) {
        self.0.busy(false);
    }
}

/// A fresh chain id (DECISIONS.md #4).
pub fn new_chain_id() -> String {
    uuid::Uuid::new_v4().to_string()
}
