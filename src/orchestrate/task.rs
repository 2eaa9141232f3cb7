//! Small shared pieces of the orchestration: running store work on a blocking thread, the busy
//! guard that keeps the host process alive while work is in flight, and chain ids.
//!
//! Depends on nothing else in `orchestrate/`; everything else may use it.

use std::sync::Arc;

use tokio::sync::Semaphore;

use crate::error::{Error, Result};
use crate::host::Host;

/// Store work running at once on blocking threads. The store runs its writes one at a time on
/// one connection, so more threads only wait for it; unbounded, 1,000 concurrent sends had tokio
/// start its 512 blocking threads, whose creation and first page faults took about a third of
/// the machine's CPU and starved the JS thread (issue 17: the event-loop delay of the 1,000
/// concurrent sends moved between 24 and 319 ms). The rest wait their turn here, in order.
const STORE_THREADS: usize = 4;
static STORE_SLOTS: Semaphore = Semaphore::const_new(STORE_THREADS);

/// Runs store work on a blocking thread (at most [`STORE_THREADS`] at once).
pub async fn blocking<T: Send + 'static>(f: impl FnOnce() -> Result<T> + Send + 'static) -> Result<T> {
    let slot = STORE_SLOTS.acquire().await.map_err(|_| Error::store("internal error: no store thread"))?;
    // the slot goes with the work: a caller that stops waiting does not free it before the
    // work ends
    tokio::task::spawn_blocking(move || {
        let _slot = slot;
        f()
    })
    .await
    .unwrap_or_else(|_| Err(Error::store("internal error: a store task failed")))
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

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::sync::Arc;
    use std::time::Duration;

    use super::{blocking, STORE_THREADS};

    #[test]
    fn given_many_store_tasks_at_once_then_each_gets_its_own_result_and_at_most_the_bound_run_together() {
        let rt = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().unwrap();
        let running = Arc::new(AtomicUsize::new(0));
        let most = Arc::new(AtomicUsize::new(0));
        let outs: Vec<usize> = rt.block_on(async {
            let tasks: Vec<_> = (0..64)
                .map(|i| {
                    let (running, most) = (running.clone(), most.clone());
                    tokio::spawn(blocking(move || {
                        let now = running.fetch_add(1, Ordering::SeqCst) + 1;
                        most.fetch_max(now, Ordering::SeqCst);
                        std::thread::sleep(Duration::from_millis(2));
                        running.fetch_sub(1, Ordering::SeqCst);
                        Ok(i)
                    }))
                })
                .collect();
            let mut outs = Vec::new();
            for t in tasks {
                outs.push(t.await.unwrap().unwrap());
            }
            outs
        });
        assert_eq!(outs, (0..64).collect::<Vec<_>>());
        assert!(most.load(Ordering::SeqCst) <= STORE_THREADS);
        assert!(most.load(Ordering::SeqCst) >= 1);
    }
}
