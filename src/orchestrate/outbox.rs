//! The outbox worker (DECISIONS.md #2): every announce is recorded before it is attempted
//! ([`Outbox::enqueue`]), then attempted by one worker per open store, retried with backoff
//! (`session.outbox.backoffMs`, doubling, at most 60 s) up to `session.outbox.maxAttempts`
//! tries (under the 2026.9 contract a sub-agent completion instead within its retry window,
//! `retry9`, then blocked). A claim holds while the claimant store's lease does: a crashed or
//! stopped store's items are taken over by another (API.md §1.7). One idempotency key per item,
//! for all of its tries. What an attempt *does* is the [`Dispatcher`]'s business.

use std::collections::HashSet;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, OnceLock, Weak};
use std::time::Duration;

use serde_json::{json, Value};
use tokio::sync::Notify;

use super::retry9::RetryWindow;
use super::task::blocking;
use crate::contract::Contract;
use crate::engine::Engine;
use crate::entry;
use crate::error::{Error, Result};
use crate::host::Event;
use crate::owner::Lease;
pub use crate::store::outbox::OutboxRow;

/// The outbox kind of an agent-to-agent announce (a `deliver` call).
pub const A2A_ANNOUNCE: &str = "a2a_announce";
/// The outbox kind of a sub-agent announce (a run on the requester with `deliver: true`).
pub const SUBAGENT_ANNOUNCE: &str = "subagent_announce";

/// An attempt of this store that has not ended after this long is tried again by it (another
/// owner takes a claim over only when this store's lease is gone: API.md §1.7).
const ATTEMPT_MS: i64 = 15 * 60 * 1000;
/// How often the worker looks for items another process recorded (when the store does not
/// wake it for them, see `Store::on_outbox_notify`).
const POLL_MS: i64 = 5_000;
/// Items claimed per pass.
const BATCH: u32 = 16;
/// The longest wait between two tries.
const MAX_BACKOFF_MS: u64 = 60_000;

/// What one attempt came to.
#[derive(Debug, Clone, PartialEq)]
pub enum Attempt {
    /// done: status `delivered`
    Delivered,
    /// nothing to deliver, or not allowed to (the reason is recorded): status `skipped`
    Skipped(String),
    /// failed; tried again after the backoff unless the tries are used up
    Retry(String),
    /// failed for good: status `failed`
    Failed(String),
}

/// One attempt in progress.
pub type AttemptFuture = std::pin::Pin<Box<dyn std::future::Future<Output = Attempt> + Send + 'static>>;

/// Makes attempts and hears how items end.
pub trait Dispatcher: Send + Sync + 'static {
    fn attempt(&self, row: OutboxRow) -> AttemptFuture;
    /// An item reached a final status (`delivered`, `skipped`, `failed`) after `attempts` tries.
    fn settled(&self, row: &OutboxRow, status: &str, attempts: u32, error: Option<&str>);
    fn emit(&self, event: Event);
    /// The kinds this process can attempt (an item of another kind is left for a process that
    /// can: a command-line tool with no callbacks must not use up a gateway's tries).
    fn kinds(&self) -> [Option<&'static str>; 2];
}

/// The wait before try `n + 1` after `n` failed tries: `backoff`, doubling, at most 60 s.
pub fn backoff_after(n: u32, backoff_ms: u64) -> u64 {
    let factor = 1u64.checked_shl(n.saturating_sub(1)).unwrap_or(u64::MAX);
    backoff_ms.saturating_mul(factor).min(MAX_BACKOFF_MS)
}

pub struct Outbox {
    engine: Arc<Engine>,
    /// the store's lease: claims name it, and are read against its clock
    lease: Arc<Lease>,
    wake: Notify,
    closed: AtomicBool,
    dispatcher: OnceLock<Weak<dyn Dispatcher>>,
    /// the ids of the items this worker is attempting now
    attempting: Mutex<HashSet<i64>>,
}

impl Outbox {
    pub fn new(engine: Arc<Engine>, lease: Arc<Lease>) -> Arc<Outbox> {
        Arc::new(Outbox {
            engine,
            lease,
            wake: Notify::new(),
            closed: AtomicBool::new(false),
            dispatcher: OnceLock::new(),
            attempting: Mutex::new(HashSet::new()),
        })
    }

    /// Records an item (pending, due now) and wakes the worker. Blocks on one write. `false`:
    /// an item with this idempotency key exists already, nothing was added.
    pub fn enqueue(
        &self,
        idempotency_key: &str,
        kind: &str,
        session_key: Option<&str>,
        payload: &Value,
    ) -> Result<bool> {
        let added = self.engine.store().write(|db| {
            let now = self.lease.now(db)?;
            db.insert_outbox(idempotency_key, kind, session_key, payload, now)
        })?;
        self.wake.notify_one();
        Ok(added)
    }

    /// Starts the worker (inside a tokio runtime). It holds the dispatcher weakly and stops when
    /// the outbox is closed or the dispatcher is gone.
    pub fn start(self: &Arc<Self>, dispatcher: Weak<dyn Dispatcher>) {
        if self.dispatcher.set(dispatcher).is_err() {
            return;
        }
        // Items other processes record wake the worker when the store can tell; the poll stays.
        let me = Arc::downgrade(self);
        self.engine.store().on_outbox_notify(Box::new(move || {
            if let Some(outbox) = me.upgrade() {
                outbox.wake();
            }
        }));
        let this = self.clone();
        tokio::spawn(async move { this.work().await });
    }

    /// Stops the worker; attempts in flight are not recorded (their items are tried again by
    /// the next open, with the same key). Idempotent.
    pub fn close(&self) {
        self.closed.store(true, Ordering::SeqCst);
        self.wake.notify_one();
    }

    /// Wakes the worker for a pass now (claims another owner left may be free).
    pub fn wake(&self) {
        self.wake.notify_one();
    }

    fn dispatcher(&self) -> Option<Arc<dyn Dispatcher>> {
        self.dispatcher.get().and_then(Weak::upgrade)
    }

    async fn work(self: Arc<Self>) {
        loop {
            if self.closed.load(Ordering::SeqCst) || self.dispatcher().is_none() {
                return;
            }
            let (e, lease) = (self.engine.clone(), self.lease.clone());
            let kinds = self.dispatcher().map(|d| d.kinds()).unwrap_or([None, None]);
            let claimed = blocking(move || {
                e.store().write(|db| db.claim_outbox(lease.id(), kinds, lease.now(db)?, ATTEMPT_MS, BATCH))
            })
            .await;
            match claimed {
                Ok(rows) => {
                    for row in rows {
                        self.attempting.lock().unwrap_or_else(|p| p.into_inner()).insert(row.id);
                        let this = self.clone();
                        tokio::spawn(async move { this.attempt(row).await });
                    }
                }
                Err(err) => {
                    if self.closed.load(Ordering::SeqCst) {
                        return;
                    }
                    if let Some(d) = self.dispatcher() {
                        d.emit(store_error(&err));
                    }
                    // The claim may have committed unseen (the connection broke as it did):
                    // give back what this worker holds but is not attempting.
                    let held: Vec<i64> =
                        self.attempting.lock().unwrap_or_else(|p| p.into_inner()).iter().copied().collect();
                    let (e, lease) = (self.engine.clone(), self.lease.clone());
                    let _ = blocking(move || e.store().write(|db| db.release_outbox_claims(lease.id(), &held))).await;
                }
            }
            let (e, lease) = (self.engine.clone(), self.lease.clone());
            let next = blocking(move || {
                e.store().read(|db| {
                    let now = lease.now(db)?;
                    Ok(db.outbox_next_claimable(lease.id(), now)?.map(|due| due - now))
                })
            })
            .await;
            let wait = match next {
                Ok(Some(in_ms)) => in_ms.clamp(0, POLL_MS),
                _ => POLL_MS,
            };
            // an item due now but not claimable (held by a live process) must not spin the loop
            let wait = wait.max(20) as u64;
            tokio::select! {
                _ = tokio::time::sleep(Duration::from_millis(wait)) => {}
                _ = self.wake.notified() => {}
            }
        }
    }

    async fn attempt(self: Arc<Self>, row: OutboxRow) {
        let Some(d) = self.dispatcher() else { return };
        let outcome = d.attempt(row.clone()).await;
        if self.closed.load(Ordering::SeqCst) {
            return;
        }
        let tries = row.attempts + 1;
        // A settlement that could not be written (the database unreachable a moment) would leave
        // the item held by this live store, unattempted, until its attempt deadline: it is written
        // again while the outbox is open.
        let mut pause = Duration::from_millis(200);
        let stored = loop {
            let (e, lease, item, out) = (self.engine.clone(), self.lease.clone(), row.clone(), outcome.clone());
            // The next due time is read against the lease clock, in the transaction that records it.
            let stored = blocking(move || {
                e.store().write(|db| {
                    let now = lease.now(db)?;
                    let (status, next, error) = settlement(&e.config(), &item, &out, tries, now);
                    db.settle_outbox(item.id, status, tries, next, error.as_deref(), now)?;
                    Ok((status, error))
                })
            })
            .await;
            match stored {
                Err(err) if !self.closed.load(Ordering::SeqCst) && !self.engine.store().is_closed() => {
                    d.emit(store_error(&err));
                    tokio::time::sleep(pause).await;
                    pause = (pause * 2).min(Duration::from_secs(5));
                }
                other => break other,
            }
        };
        let status = stored.as_ref().map_or("pending", |(status, _)| *status);
        if let Attempt::Retry(why) | Attempt::Failed(why) = &outcome {
            let mut ev = event("delivery.failed", &row);
            ev.details.insert("attempt".into(), tries.into());
            ev.details.insert("error".into(), why.clone().into());
            ev.details.insert("final".into(), (status == "failed").into());
            d.emit(ev);
        }
        self.attempting.lock().unwrap_or_else(|p| p.into_inner()).remove(&row.id);
        match stored {
            Err(err) => d.emit(store_error(&err)),
            Ok((status, error)) if status != "pending" => d.settled(&row, status, tries, error.as_deref()),
            Ok(_) => {}
        }
        self.wake.notify_one();
    }
}

/// What try number `tries` of `row`, ended with `outcome` at `now`, leaves: the status, the next
/// due time and the error recorded.
fn settlement(
    cfg: &crate::config::Config,
    row: &OutboxRow,
    outcome: &Attempt,
    tries: u32,
    now: i64,
) -> (&'static str, i64, Option<String>) {
    match outcome {
        Attempt::Delivered => ("delivered", now, None),
        Attempt::Skipped(why) => ("skipped", now, Some(why.clone())),
        Attempt::Failed(why) => ("failed", now, Some(why.clone())),
        // 2026.9: a completion is retried within its window, then blocked
        Attempt::Retry(why) if row.kind == SUBAGENT_ANNOUNCE && cfg.contract == Contract::V2026_9 => {
            let (first_ms, max_ms, expire_ms) = cfg.completion_retry_ms;
            let window = RetryWindow { first_ms, max_ms, expire_ms };
            let jitter = f64::from(uuid::Uuid::new_v4().as_bytes()[0]) / 255.0;
            match window.next_attempt(tries, row.created_at, now, jitter) {
                Some(at) => ("pending", at, Some(why.clone())),
                None => ("failed", now, Some(why.clone())),
            }
        }
        Attempt::Retry(why) if tries >= cfg.outbox_max_attempts => ("failed", now, Some(why.clone())),
        Attempt::Retry(why) => ("pending", now + backoff_after(tries, cfg.outbox_backoff_ms) as i64, Some(why.clone())),
    }
}

fn event(kind: &'static str, row: &OutboxRow) -> Event {
    let mut details = serde_json::Map::new();
    details.insert("idempotencyKey".into(), row.idempotency_key.clone().into());
    details.insert("kind".into(), row.kind.clone().into());
    Event { kind, at: entry::now_ms(), run_id: None, session_key: row.session_key.clone(), details }
}

/// An event about one outbox item.
pub fn item_event(kind: &'static str, row: &OutboxRow, extra: Value) -> Event {
    let mut ev = event(kind, row);
    if let Value::Object(m) = extra {
        ev.details.extend(m);
    }
    ev
}

fn store_error(err: &Error) -> Event {
    Event {
        kind: "store.error",
        at: entry::now_ms(),
        run_id: None,
        session_key: None,
        details: json!({"error": err.message()}).as_object().cloned().unwrap_or_default(),
    }
}

#[cfg(test)]
#[path = "outbox_tests.rs"]
mod tests;
