//! Orchestration: model runs through the host, `sessions_send` with its reply-back loop and
//! announce step, `sessions_spawn` with durable sub-agents, and the outbox that delivers every
//! announce. The [`Orchestrator`] is one open store's conductor: it owns the run registry, the
//! outbox worker and the sub-agent registry, and is what the napi skin calls for the async
//! tools, `waitRun`, `listSubagentRuns` and `close`.

pub mod announce_target;
pub mod completion9;
pub mod outbox;
pub mod prompts;
pub mod prompts9;
pub mod reply;
pub mod retry9;
pub mod runs;
pub mod send;
pub mod spawn;
pub mod stats;
pub mod subagents;
pub mod task_list;
pub mod tasks;
pub mod thinking;
pub mod yields;

use std::sync::{Arc, Weak};

use serde_json::{json, Value};

use crate::contract::Contract;
use crate::engine::Engine;
use crate::entry;
use crate::error::{Error, Result};
use crate::host::{Event, Host};
use crate::tools::{self, ToolContext};
use outbox::{Attempt, AttemptFuture, Dispatcher, Outbox, OutboxRow};
use runs::Runs;

/// The outbox kind of an agent-to-agent announce (a `deliver` call).
pub const A2A_ANNOUNCE: &str = "a2a_announce";
/// The outbox kind of a sub-agent announce (a run on the requester with `deliver: true`).
pub const SUBAGENT_ANNOUNCE: &str = "subagent_announce";

pub struct Orchestrator {
    engine: Arc<Engine>,
    host: Arc<dyn Host>,
    runs: Arc<Runs>,
    outbox: Arc<Outbox>,
    subagents: subagents::Registry,
    me: Weak<Orchestrator>,
}

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

impl Orchestrator {
    pub fn new(engine: Arc<Engine>, host: Arc<dyn Host>) -> Arc<Orchestrator> {
        let outbox = Outbox::new(engine.clone());
        Arc::new_cyclic(|me| Orchestrator {
            engine,
            host,
            runs: Arc::new(Runs::default()),
            outbox,
            subagents: subagents::Registry::default(),
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
    pub fn runs(&self) -> &Arc<Runs> {
        &self.runs
    }
    pub fn outbox(&self) -> &Arc<Outbox> {
        &self.outbox
    }
    pub fn subagents(&self) -> &subagents::Registry {
        &self.subagents
    }

    /// What a fresh open does, inside the tokio runtime: ends the runs of dead processes as
    /// interrupted, recovers the sub-agent registry (announcing what was left unannounced),
    /// and starts the outbox worker and the archive sweeper.
    pub async fn start(self: &Arc<Self>) -> Result<()> {
        let (e, r) = (self.engine.clone(), self.runs.clone());
        blocking(move || r.recover(&e)).await?;
        subagents::recover(self).await?;
        yields::recover(self).await?;
        let me: Arc<dyn Dispatcher> = self.clone();
        let weak: Weak<dyn Dispatcher> = Arc::downgrade(&me);
        self.outbox.start(weak);
        Ok(())
    }

    /// Spawns background work that keeps the host process alive while it runs.
    pub fn spawn_busy(&self, fut: impl std::future::Future<Output = ()> + Send + 'static) {
        let guard = BusyGuard::new(self.host.clone());
        tokio::spawn(async move {
            fut.await;
            drop(guard);
        });
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

    /// Runs a tool by name for a caller whose context arrives as JSON; `wrap` gives the
    /// `{content, details}` envelope. As [`tools::run`], with the async tools too.
    pub async fn tool(self: &Arc<Self>, name: &str, params: Value, ctx: Value, wrap: bool) -> Result<Value> {
        if self.runs.is_closed() || self.engine.store().is_closed() {
            return Err(Error::closed());
        }
        let details = match name {
            "sessions_send" | "sessions_spawn" => {
                let ctx = ToolContext::from_json(&ctx)?;
                if name == "sessions_send" {
                    send::run(self, &params, &ctx).await
                } else {
                    spawn::run(self, &params, &ctx).await
                }
            }
            // tools of the 2026.9 contract only; under 2026.1 they are unknown tools
            "sessions_yield" if self.engine.config().contract == Contract::V2026_9 => {
                yields::run(self, &params, &ToolContext::from_json(&ctx)?, &ctx).await
            }
            "subagents" if self.engine.config().contract == Contract::V2026_9 => {
                tasks::run(self, &params, &ToolContext::from_json(&ctx)?).await
            }
            _ => {
                let (e, name) = (self.engine.clone(), name.to_owned());
                return blocking(move || tools::run(&e, &name, &params, &ctx, wrap)).await;
            }
        };
        let details = tools::payload_or_error(name, details)?;
        Ok(if wrap { tools::envelope(details) } else { details })
    }

    /// `waitRun(runId, { timeoutMs })` (agent.wait semantics).
    pub async fn wait_run(&self, run_id: &str, timeout_ms: u64) -> Result<Value> {
        Ok(self.runs.wait(&self.engine, run_id, timeout_ms).await?.to_json())
    }

    /// `waitRun` with its arguments as the caller passed them: a non-empty run id, `timeoutMs`
    /// a number ≥ 0 (floored; default 30 000).
    pub async fn wait_run_json(&self, run_id: &Value, options: &Value) -> Result<Value> {
        let bad = |m: &str| Error::invalid_request(format!("invalid waitRun params: {m}"));
        let run_id = match run_id {
            Value::String(s) if !s.trim().is_empty() => s.trim().to_owned(),
            _ => return Err(bad("runId must be a non-empty string")),
        };
        let timeout = match options {
            Value::Null => None,
            Value::Object(o) => match o.get("timeoutMs") {
                None | Some(Value::Null) => None,
                Some(v) => match v.as_f64() {
                    Some(f) if f.is_finite() && f >= 0.0 => Some(f.floor().min(2_147_483_647.0) as u64),
                    _ => return Err(bad("timeoutMs must be a number >= 0")),
                },
            },
            _ => return Err(bad("options must be an object")),
        };
        if self.engine.store().is_closed() {
            return Err(Error::closed());
        }
        self.wait_run(&run_id, timeout.unwrap_or(30_000)).await
    }

    /// `deleteSession(key, options)`: the gateway's `sessions.delete`, then the children of the
    /// deleted session that are still running are stopped (DECISIONS.md: `stopped: requester
    /// session deleted`, not announced).
    pub async fn delete_session(self: &Arc<Self>, key: Value, options: Value) -> Result<Value> {
        if self.engine.store().is_closed() {
            return Err(Error::closed());
        }
        let e = self.engine.clone();
        let out = blocking(move || e.delete_session(&key, &options)).await?;
        if out.get("deleted") == Some(&Value::Bool(true)) {
            if let Some(key) = out.get("key").and_then(Value::as_str) {
                subagents::on_session_deleted(self, key).await?;
            }
        }
        Ok(out)
    }

    /// Delivers one agent-to-agent announce (an `a2a_announce` outbox item): the send policy
    /// of its session first (a denied one is skipped, fail closed), then the host's `deliver`.
    async fn attempt_delivery(&self, row: OutboxRow) -> Attempt {
        let key = row.session_key.clone().unwrap_or_default();
        let (e, k) = (self.engine.clone(), key.clone());
        let policy = blocking(move || e.resolve_send_policy(&json!({ "sessionKey": k }))).await;
        let denied = match policy {
            Ok(p) => (p == crate::config::PolicyAction::Deny).then(|| "send blocked by session policy".to_owned()),
            Err(err) => Some(format!("send policy could not be evaluated: {}", err.message())),
        };
        if let Some(reason) = denied {
            self.host.emit(outbox::item_event("delivery.blocked", &row, json!({ "reason": reason })));
            return Attempt::Skipped(reason);
        }
        if !self.host.can_deliver() {
            return Attempt::Failed("no deliver callback is configured".to_owned());
        }
        let sent =
            tokio::time::timeout(std::time::Duration::from_secs(60), self.host.deliver(row.payload.clone())).await;
        match sent {
            Ok(Ok(())) => {
                self.host.emit(outbox::item_event("delivery.sent", &row, json!({ "attempt": row.attempts + 1 })));
                Attempt::Delivered
            }
            Ok(Err(e)) => Attempt::Retry(e),
            Err(_) => Attempt::Retry("deliver did not settle within 60 s".to_owned()),
        }
    }
}

impl Dispatcher for Orchestrator {
    fn attempt(&self, row: OutboxRow) -> AttemptFuture {
        // The worker holds the orchestrator weakly; an attempt holds it for its duration.
        let this = if self.runs.is_closed() { None } else { self.me() };
        Box::pin(async move {
            let Some(this) = this else { return Attempt::Retry("the store is closing".to_owned()) };
            let _busy = BusyGuard::new(this.host.clone());
            match row.kind.as_str() {
                A2A_ANNOUNCE => this.attempt_delivery(row).await,
                SUBAGENT_ANNOUNCE => subagents::attempt_announce(&this, row).await,
                other => Attempt::Failed(format!("unknown outbox item kind: {other}")),
            }
        })
    }

    fn settled(&self, row: &OutboxRow, status: &str, attempts: u32, error: Option<&str>) {
        if row.kind == SUBAGENT_ANNOUNCE {
            if let Some(this) = self.me() {
                subagents::announce_settled(&this, row, status, attempts, error);
                // the task ledger keeps the completion's outcome; a yield of the requester
                // may be waiting for it
                let (o, requester, status) = (this.clone(), row.session_key.clone(), status.to_owned());
                let run_id = row.payload.get("runId").and_then(Value::as_str).map(str::to_owned);
                this.spawn_busy(async move {
                    if let Some(run_id) = run_id {
                        tasks::completion_settled(&o, &run_id, &status).await;
                    }
                    if let Some(requester) = requester {
                        yields::check(&o, &requester).await;
                    }
                });
            }
        }
    }

    fn emit(&self, event: Event) {
        self.host.emit(event);
    }

    fn kinds(&self) -> [Option<&'static str>; 2] {
        [self.host.can_deliver().then_some(A2A_ANNOUNCE), self.host.can_run().then_some(SUBAGENT_ANNOUNCE)]
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::Config;
    use crate::host::testing::FakeHost;
    use crate::store::Store;
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::time::Duration;

    fn temp_db() -> String {
        let dir = std::env::temp_dir().join(format!("st-orch-{}", uuid::Uuid::new_v4()));
        dir.join("s.db").to_string_lossy().into_owned()
    }

    fn open(path: &str, cfg: serde_json::Value, host: Arc<FakeHost>) -> Arc<Orchestrator> {
        let engine = Engine::new(Store::open(path).unwrap(), Config::from_json(&cfg).unwrap(), None);
        Orchestrator::new(Arc::new(engine), host)
    }

    fn payload(key: &str) -> Value {
        json!({"channel": "discord", "to": "channel:dev", "message": "hi", "idempotencyKey": key,
               "sessionKey": "agent:main:discord:group:dev", "kind": "a2a_announce"})
    }

    async fn until<T>(mut f: impl FnMut() -> Option<T>) -> T {
        for _ in 0..500 {
            if let Some(v) = f() {
                return v;
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        panic!("condition not reached within 5 s");
    }

    fn item(orch: &Orchestrator, key: &str) -> OutboxRow {
        orch.engine.store().read(|db| db.outbox_item(key)).unwrap().unwrap()
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_failing_delivery_is_retried_with_backoff_and_one_key_until_it_succeeds() {
        let tries = Arc::new(AtomicUsize::new(0));
        let t = tries.clone();
        let host = Arc::new(FakeHost::replying("x").with_deliver(move |_| {
            let n = t.fetch_add(1, Ordering::SeqCst);
            Box::pin(async move {
                if n < 2 {
                    Err(format!("channel down {n}"))
                } else {
                    Ok(())
                }
            })
        }));
        let cfg = json!({"session": {"outbox": {"backoffMs": 20}}});
        let orch = open(":memory:", cfg, host.clone());
        orch.start().await.unwrap();
        assert!(orch.outbox.enqueue("k1", A2A_ANNOUNCE, Some("agent:main:discord:group:dev"), &payload("k1")).unwrap());
        // recording it again adds nothing
        assert!(!orch
            .outbox
            .enqueue("k1", A2A_ANNOUNCE, Some("agent:main:discord:group:dev"), &payload("k1"))
            .unwrap());
        until(|| (item(&orch, "k1").status == "delivered").then_some(())).await;
        let row = item(&orch, "k1");
        assert_eq!(row.attempts, 3);
        let keys: Vec<Value> = host.deliveries().iter().map(|d| d["idempotencyKey"].clone()).collect();
        assert_eq!(keys, vec![json!("k1"); 3]);
        let failed: Vec<_> = host.events().into_iter().filter(|e| e.kind == "delivery.failed").collect();
        assert_eq!(failed.len(), 2);
        assert_eq!(failed[0].details["final"], json!(false));
        assert_eq!(host.event_kinds().iter().filter(|k| **k == "delivery.sent").count(), 1);
        orch.close().await;
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn tries_stop_at_max_attempts_and_a_denied_session_is_skipped_without_a_call() {
        let host =
            Arc::new(FakeHost::replying("x").with_deliver(|_| Box::pin(async { Err("always down".to_owned()) })));
        let cfg = json!({"session": {"outbox": {"backoffMs": 1, "maxAttempts": 3}}});
        let orch = open(":memory:", cfg, host.clone());
        orch.start().await.unwrap();
        orch.outbox.enqueue("k2", A2A_ANNOUNCE, Some("agent:main:discord:group:dev"), &payload("k2")).unwrap();
        until(|| (item(&orch, "k2").status == "failed").then_some(())).await;
        assert_eq!(item(&orch, "k2").attempts, 3);
        assert_eq!(item(&orch, "k2").last_error.as_deref(), Some("always down"));
        let last = host.events().into_iter().rfind(|e| e.kind == "delivery.failed").unwrap();
        assert_eq!(last.details["final"], json!(true));

        orch.engine.upsert_session(&json!("agent:main:quiet"), &json!({"sendPolicy": "deny"})).unwrap();
        let before = host.deliveries().len();
        orch.outbox.enqueue("k3", A2A_ANNOUNCE, Some("agent:main:quiet"), &payload("k3")).unwrap();
        until(|| (item(&orch, "k3").status == "skipped").then_some(())).await;
        assert_eq!(host.deliveries().len(), before, "a denied delivery is not made");
        assert!(host.event_kinds().contains(&"delivery.blocked"));
        orch.close().await;
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn an_item_left_pending_by_a_closed_store_is_delivered_by_the_next_open_with_the_same_key() {
        let path = temp_db();
        let down = Arc::new(FakeHost::replying("x").with_deliver(|_| Box::pin(async { Err("not yet".to_owned()) })));
        let cfg = json!({"session": {"outbox": {"backoffMs": 60000}}});
        let first = open(&path, cfg.clone(), down.clone());
        first.start().await.unwrap();
        first.outbox.enqueue("k4", A2A_ANNOUNCE, Some("agent:main:discord:group:dev"), &payload("k4")).unwrap();
        until(|| (item(&first, "k4").attempts == 1).then_some(())).await;
        first.close().await;

        let up = Arc::new(FakeHost::replying("x"));
        let second = open(&path, json!({"session": {"outbox": {"backoffMs": 1}}}), up.clone());
        // due in a minute by the first store's backoff: make it due now, as if the minute passed
        second
            .engine
            .store()
            .write(|db| db.settle_outbox(item(&second, "k4").id, "pending", 1, 0, Some("not yet"), 0))
            .unwrap();
        second.start().await.unwrap();
        until(|| (item(&second, "k4").status == "delivered").then_some(())).await;
        assert_eq!(up.deliveries()[0]["idempotencyKey"], "k4");
        assert_eq!(item(&second, "k4").attempts, 2);
        second.close().await;
    }

    #[test]
    fn a_claim_held_by_a_live_owner_is_left_alone_and_a_dead_owners_claim_is_taken_over() {
        const K: [Option<&str>; 2] = [Some(A2A_ANNOUNCE), None];
        let store = Store::open(":memory:").unwrap();
        store.write(|db| db.insert_outbox("k", A2A_ANNOUNCE, None, &json!({}), 0)).unwrap();
        let other_kind = store
            .write(|db| db.claim_outbox("1:alive", [None, Some(SUBAGENT_ANNOUNCE)], 10, 1000, 8, |_| true))
            .unwrap();
        assert!(other_kind.is_empty(), "only the kinds a process can attempt are claimed");
        let a = store.write(|db| db.claim_outbox("1:alive", K, 10, 1000, 8, |_| true)).unwrap();
        assert_eq!(a.len(), 1);
        let b = store.write(|db| db.claim_outbox("2:other", K, 20, 1000, 8, |_| true)).unwrap();
        assert!(b.is_empty(), "a live claim is respected");
        let c = store.write(|db| db.claim_outbox("2:other", K, 20, 1000, 8, |o| o != "1:alive")).unwrap();
        assert_eq!(c.len(), 1, "the claim of a dead owner is taken over");
        let d = store.write(|db| db.claim_outbox("3:third", K, 5000, 1000, 8, |_| true)).unwrap();
        assert_eq!(d.len(), 1, "a lapsed lease is taken over");
    }
}
