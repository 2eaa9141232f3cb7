//! Blocking on a round trip to the server from wherever the engine calls the store.
//!
//! The store is synchronous; most calls come from blocking threads, but some come from the
//! engine's async tasks (a run starting inside an announce, say). A tokio runtime cannot block
//! a thread that is driving async tasks, so there the wait is first declared with
//! `block_in_place` (multi-thread runtimes), or made on a helper thread (current-thread
//! runtimes, as in `#[tokio::test]`). This module never decides what is sent.

use std::future::Future;

use tokio::runtime::{Handle, Runtime, RuntimeFlavor};

/// The runtime that drives the store's connections.
pub struct PgRuntime(pub(super) Runtime);

impl PgRuntime {
    /// Runs `f` to completion on the store's runtime, blocking the calling thread.
    pub fn block_on<F>(&self, f: F) -> F::Output
    where
        F: Future + Send,
        F::Output: Send,
    {
        match Handle::try_current().map(|h| h.runtime_flavor()) {
            Err(_) => self.0.block_on(f),
            Ok(RuntimeFlavor::CurrentThread) => std::thread::scope(|s| match s.spawn(|| self.0.block_on(f)).join() {
                Ok(out) => out,
                Err(panic) => std::panic::resume_unwind(panic),
            }),
            Ok(_) => tokio::task::block_in_place(|| self.0.block_on(f)),
        }
    }
}
