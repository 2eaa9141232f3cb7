//! [`Rt`]: the runtime that drives the store's PostgreSQL connections, and the one way the
//! store's blocking calls wait on it.
//!
//! The store's methods block, like SQLite's. The engine runs them on blocking threads, but a
//! call may also come from an async task (as a SQLite call may: it blocks that task's thread).
//! Tokio refuses to block on a runtime from inside another one, so such a call is first moved
//! off the task: on a multi-thread runtime's worker by `block_in_place` (the worker's other
//! tasks move elsewhere meanwhile); on a current-thread runtime the thread parks until the
//! store's runtime, whose own threads drive the connections, has the answer.
//! It never decides what is sent; it only waits for it.

use std::future::Future;
use std::mem::ManuallyDrop;
use std::sync::Arc;
use std::task::{Context, Poll, Wake, Waker};

use tokio::runtime::{Handle, Runtime, RuntimeFlavor};

/// The store's runtime, shut down without waiting when dropped (an async task cannot wait for
/// a runtime to stop).
pub struct Rt(ManuallyDrop<Runtime>);

impl Rt {
    pub fn new(rt: Runtime) -> Rt {
        Rt(ManuallyDrop::new(rt))
    }

    /// Runs `f` to completion on the store's runtime, blocking the calling thread, from any
    /// thread (see the module header).
    pub fn block_on<F: Future>(&self, f: F) -> F::Output {
        match Handle::try_current().map(|h| h.runtime_flavor()) {
            Err(_) => self.0.block_on(f),
            Ok(RuntimeFlavor::CurrentThread) => {
                // The store's own threads drive its connections and timers; this thread only
                // waits for the answer, under the store's runtime (for what `f` spawns).
                let _on_store = self.0.enter();
                park_on(f)
            }
            Ok(_) => tokio::task::block_in_place(|| self.0.block_on(f)),
        }
    }
}

/// Wakes the thread parked in [`park_on`].
struct Unpark(std::thread::Thread);

impl Wake for Unpark {
    fn wake(self: Arc<Self>) {
        self.0.unpark();
    }
}

/// Polls `f` on this thread, parking it between wake-ups, until it is ready.
fn park_on<F: Future>(f: F) -> F::Output {
    let waker = Waker::from(Arc::new(Unpark(std::thread::current())));
    let mut cx = Context::from_waker(&waker);
    let mut f = std::pin::pin!(f);
    loop {
        if let Poll::Ready(v) = f.as_mut().poll(&mut cx) {
            return v;
        }
        std::thread::park();
    }
}

/// The runtime itself, for spawning onto it (the outbox listener). Waiting goes through
/// [`Rt::block_on`], which this type's own method shadows.
impl std::ops::Deref for Rt {
    type Target = Runtime;

    fn deref(&self) -> &Runtime {
        &self.0
    }
}

impl Drop for Rt {
    /// Tells the runtime's threads to stop without waiting for them: the store may be dropped on
    /// an async task, where a runtime cannot block.
    fn drop(&mut self) {
        // SAFETY: the runtime is taken once, here, and `self` is gone afterwards.
        let rt = unsafe { ManuallyDrop::take(&mut self.0) };
        rt.shutdown_background();
    }
}

#[cfg(test)]
mod tests {
    use crate::store::pg::testdb;
    use crate::store::Store;

    fn round_trip(s: &Store) -> u64 {
        let e = serde_json::json!({"sessionId": "s1", "updatedAt": 1});
        s.write(|db| db.put_session("agent:main:a", &serde_json::from_value(e.clone()).expect("entry")))
            .expect("write");
        s.read(|db| db.session_count()).expect("read")
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_store_opened_used_and_dropped_on_a_multi_thread_runtimes_task_works() {
        let s = Store::open(&testdb::fresh_url()).expect("open");
        assert_eq!(round_trip(&s), 1);
        drop(s);
    }

    #[tokio::test]
    async fn a_store_opened_used_and_dropped_on_a_current_thread_runtimes_task_works() {
        let s = Store::open(&testdb::fresh_url()).expect("open");
        assert_eq!(round_trip(&s), 1);
        drop(s);
    }

    #[test]
    fn a_store_used_from_a_blocking_thread_of_a_runtime_works() {
        let rt = tokio::runtime::Builder::new_current_thread().build().expect("runtime");
        let url = testdb::fresh_url();
        let n = rt.block_on(async move {
            tokio::task::spawn_blocking(move || round_trip(&Store::open(&url).expect("open"))).await.expect("join")
        });
        assert_eq!(n, 1);
    }
}
