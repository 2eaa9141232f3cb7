//! Runs: every model run the engine starts, executed through the [`Host`], one at a time per
//! session in arrival order (a *lane* per session key), concurrently across sessions.
//!
//! A run records itself in the store, creates its session when missing, appends the incoming
//! message (with its provenance) and then the run's messages to the transcript, records usage
//! and model on the session, and settles its waiters. [`Runs::wait`] has `agent.wait`
//! semantics (REFERENCE.md §5.8): a wait that times out ends the wait, not the run. This module
//! never decides policy: whoever starts a run has checked that it may.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering as AtomicOrdering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde_json::{json, Map, Value};
use tokio::sync::{oneshot, watch};

use super::blocking;
use crate::engine::Engine;
use crate::entry;
use crate::error::{Error, Result};
use crate::host::{AgentRunRequest, AgentRunResult, Event, Host, RunOptions};
use crate::store::runs::RunRecord;

/// How a run stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RunStatus {
    Running,
    Ok,
    Error,
    Timeout,
}

impl RunStatus {
    pub fn as_str(self) -> &'static str {
        match self {
            RunStatus::Running => "running",
            RunStatus::Ok => "ok",
            RunStatus::Error => "error",
            RunStatus::Timeout => "timeout",
        }
    }
    fn parse(s: &str) -> RunStatus {
        match s {
            "ok" => RunStatus::Ok,
            "error" => RunStatus::Error,
            "timeout" => RunStatus::Timeout,
            _ => RunStatus::Running,
        }
    }
}

/// What `waitRun` answers.
#[derive(Debug, Clone, PartialEq)]
pub struct RunSnapshot {
    pub run_id: String,
    pub status: RunStatus,
    pub started_at: Option<i64>,
    pub ended_at: Option<i64>,
    pub error: Option<String>,
}

impl RunSnapshot {
    /// `{runId, status, startedAt?, endedAt?, error?}`; a run still going reads as `timeout`.
    pub fn to_json(&self) -> Value {
        let mut m = Map::new();
        m.insert("runId".into(), self.run_id.clone().into());
        let status = if self.status == RunStatus::Running { RunStatus::Timeout } else { self.status };
        m.insert("status".into(), status.as_str().into());
        if let Some(s) = self.started_at {
            m.insert("startedAt".into(), s.into());
        }
        if let Some(e) = self.ended_at {
            m.insert("endedAt".into(), e.into());
        }
        if let Some(e) = &self.error {
            m.insert("error".into(), e.clone().into());
        }
        Value::Object(m)
    }
}

/// Where an incoming message came from (API.md §2.1 `provenance`).
#[derive(Debug, Clone, PartialEq)]
pub struct Provenance {
    /// inter_session | subagent_task | announce
    pub kind: &'static str,
    pub source_session_key: Option<String>,
}

/// A run to start: the session, the incoming message and how to run it; the registry fills in
/// the run id, the session id and the agent.
#[derive(Debug, Clone)]
pub struct RunSpec {
    pub session_key: String,
    pub message: String,
    pub provenance: Provenance,
    pub options: RunOptions,
    /// The most runs `options.chain_id` may hold, this one included (DECISIONS.md #4); `None`:
    /// no budget.
    pub chain_limit: Option<u32>,
}

/// The error of a run whose process stopped (or whose store was closed) before it finished
/// (DECISIONS.md #3).
pub const INTERRUPTED: &str = "interrupted: the process stopped before the run finished";

/// How a run ended, short of the bookkeeping.
enum Outcome {
    Ok,
    Error(String),
    Timeout(String),
    /// the store was closed meanwhile: nothing more is recorded
    Dropped,
}

/// The queue of one session: tickets handed out in arrival order, served one at a time.
struct SessionLane {
    next: u64,
    serving: watch::Sender<u64>,
}

/// The run registry of one open store.
pub struct Runs {
    owner: String,
    lanes: Mutex<HashMap<String, SessionLane>>,
    live: Mutex<HashMap<String, watch::Sender<RunSnapshot>>>,
    /// session key → (run id, chain id) of the run executing on it now
    active: Mutex<HashMap<String, (String, String)>>,
    /// run id → where to send the reason it is stopped early ([`Runs::abort`])
    aborts: Mutex<HashMap<String, oneshot::Sender<String>>>,
    closed: AtomicBool,
}

impl Default for Runs {
    fn default() -> Self {
        Runs {
            owner: crate::owner::new_owner(),
            lanes: Mutex::new(HashMap::new()),
            live: Mutex::new(HashMap::new()),
            active: Mutex::new(HashMap::new()),
            aborts: Mutex::new(HashMap::new()),
            closed: AtomicBool::new(false),
        }
    }
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

fn event(kind: &'static str, run_id: &str, session_key: &str, details: Value) -> Event {
    Event {
        kind,
        at: entry::now_ms(),
        run_id: Some(run_id.to_owned()),
        session_key: Some(session_key.to_owned()),
        details: details.as_object().cloned().unwrap_or_default(),
    }
}

/// A cap on the running children of one requester, checked in the same write as the run is
/// recorded (DECISIONS.md #5), so that concurrent spawns, from any store or process on the file,
/// cannot all pass it.
#[derive(Debug, Clone)]
pub struct ChildCap {
    pub requester_key: String,
    pub max_active: u32,
}

/// Whether a run was started, and if not, why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Admission {
    Started(String),
    /// the chain already holds `chain_limit` runs
    ChainFull,
    /// the requester already has this many running children (at least `max_active`)
    TooManyChildren(u64),
}

impl Runs {
    /// Starts a run: records it, takes its place in the session's lane, and returns its id at
    /// once; `None` (and nothing recorded) when its chain already holds `spec.chain_limit` runs.
    /// Blocks on one write; must be called inside a tokio runtime.
    pub fn start(self: &Arc<Self>, engine: Arc<Engine>, host: Arc<dyn Host>, spec: RunSpec) -> Result<Option<String>> {
        self.start_keyed(engine, host, spec, None)
    }

    /// As [`Runs::start`], with the `idempotencyKey` the host sees (default: the run id): an
    /// announce passes its own key, the same for every try (DECISIONS.md #2).
    pub fn start_keyed(
        self: &Arc<Self>,
        engine: Arc<Engine>,
        host: Arc<dyn Host>,
        spec: RunSpec,
        idempotency_key: Option<String>,
    ) -> Result<Option<String>> {
        Ok(match self.start_admitted(engine, host, spec, idempotency_key, None)? {
            Admission::Started(id) => Some(id),
            _ => None,
        })
    }

    /// As [`Runs::start`], also refused when `cap.requester_key` already has `cap.max_active`
    /// running children.
    pub fn start_capped(
        self: &Arc<Self>,
        engine: Arc<Engine>,
        host: Arc<dyn Host>,
        spec: RunSpec,
        cap: &ChildCap,
    ) -> Result<Admission> {
        self.start_admitted(engine, host, spec, None, Some(cap))
    }

    fn start_admitted(
        self: &Arc<Self>,
        engine: Arc<Engine>,
        host: Arc<dyn Host>,
        spec: RunSpec,
        idempotency_key: Option<String>,
        cap: Option<&ChildCap>,
    ) -> Result<Admission> {
        if self.closed.load(AtomicOrdering::SeqCst) {
            return Err(Error::closed());
        }
        let run_id = uuid::Uuid::new_v4().to_string();
        let started = entry::now_ms();
        let record = RunRecord {
            run_id: run_id.clone(),
            session_key: spec.session_key.clone(),
            lane: spec.options.lane.as_str().to_owned(),
            chain_id: Some(spec.options.chain_id.clone()),
            status: RunStatus::Running.as_str().to_owned(),
            started_at: Some(started),
            ended_at: None,
            error: None,
        };
        let refused = engine.store().write(|db| {
            if let Some(cap) = cap {
                let running = db.running_subagent_count(&cap.requester_key)?;
                if running >= u64::from(cap.max_active) {
                    return Ok(Some(Admission::TooManyChildren(running)));
                }
            }
            if let Some(limit) = spec.chain_limit {
                if db.chain_run_count(&spec.options.chain_id)? >= u64::from(limit) {
                    return Ok(Some(Admission::ChainFull));
                }
            }
            db.insert_run(&record, &self.owner)?;
            Ok(None)
        })?;
        if let Some(refused) = refused {
            return Ok(refused);
        }
        let (tx, _) = watch::channel(RunSnapshot {
            run_id: run_id.clone(),
            status: RunStatus::Running,
            started_at: Some(started),
            ended_at: None,
            error: None,
        });
        lock(&self.live).insert(run_id.clone(), tx);
        let (abort_tx, abort_rx) = oneshot::channel();
        lock(&self.aborts).insert(run_id.clone(), abort_tx);
        // The ticket is taken now, synchronously, so runs on one session keep arrival order.
        let (ticket, mut serving) = {
            let mut lanes = lock(&self.lanes);
            let lane = lanes
                .entry(spec.session_key.clone())
                .or_insert_with(|| SessionLane { next: 0, serving: watch::channel(0).0 });
            let t = lane.next;
            lane.next += 1;
            (t, lane.serving.subscribe())
        };
        let this = self.clone();
        let id = run_id.clone();
        let busy = super::BusyGuard::new(host.clone());
        tokio::spawn(async move {
            let _busy = busy;
            let _ = serving.wait_for(|s| *s == ticket).await;
            lock(&this.active).insert(spec.session_key.clone(), (id.clone(), spec.options.chain_id.clone()));
            let key = idempotency_key.unwrap_or_else(|| id.clone());
            let outcome = this.execute(&engine, host.as_ref(), &id, &key, spec.clone(), abort_rx).await;
            lock(&this.aborts).remove(&id);
            lock(&this.active).remove(&spec.session_key);
            this.settle(&engine, host.as_ref(), &id, &spec.session_key, started, outcome).await;
            let mut lanes = lock(&this.lanes);
            if let Some(lane) = lanes.get_mut(&spec.session_key) {
                let _ = lane.serving.send(ticket + 1);
                if lane.next == ticket + 1 {
                    lanes.remove(&spec.session_key);
                }
            }
        });
        Ok(Admission::Started(run_id))
    }

    async fn execute(
        &self,
        engine: &Arc<Engine>,
        host: &dyn Host,
        run_id: &str,
        idempotency_key: &str,
        spec: RunSpec,
        abort: oneshot::Receiver<String>,
    ) -> Outcome {
        if self.closed.load(AtomicOrdering::SeqCst) {
            return Outcome::Dropped;
        }
        // The host is asked to stop at `timeout_ms`. The engine stops waiting for it then too,
        // except for sessions_send's runs (lane nested): a waited send's wait ends at its
        // timeoutSeconds, but its run may go on up to the agents' default timeout, so that a
        // late reply still gets its reply-back loop and announce (DECISIONS.md #1).
        let timeout_ms = match spec.options.lane {
            crate::host::Lane::Nested => {
                spec.options.timeout_ms.max(engine.config().default_timeout_seconds.saturating_mul(1000))
            }
            _ => spec.options.timeout_ms,
        };
        let call = self.call(engine, host, run_id, idempotency_key, spec);
        let aborted = async {
            match abort.await {
                Ok(reason) => reason,
                Err(_) => std::future::pending().await,
            }
        };
        tokio::select! {
            done = tokio::time::timeout(Duration::from_millis(timeout_ms.max(1)), call) => match done {
                _ if self.closed.load(AtomicOrdering::SeqCst) => Outcome::Dropped,
                Ok(Ok(())) => Outcome::Ok,
                Ok(Err(e)) => Outcome::Error(e),
                Err(_) => Outcome::Timeout(format!("run timed out after {timeout_ms} ms")),
            },
            reason = aborted => if self.closed.load(AtomicOrdering::SeqCst) { Outcome::Dropped } else { Outcome::Error(reason) },
        }
    }

    /// Stops a run of this registry early: it ends with status `error` and `reason` (whatever
    /// its callback returns later is dropped). `false` when no such run is in flight here.
    pub fn abort(&self, run_id: &str, reason: &str) -> bool {
        match lock(&self.aborts).remove(run_id) {
            Some(tx) => tx.send(reason.to_owned()).is_ok(),
            None => false,
        }
    }

    async fn call(
        &self,
        engine: &Arc<Engine>,
        host: &dyn Host,
        run_id: &str,
        idempotency_key: &str,
        spec: RunSpec,
    ) -> Result<(), String> {
        host.emit(event("run.start", run_id, &spec.session_key, json!({"lane": spec.options.lane.as_str()})));
        let e = engine.clone();
        let (key, message, prov, rid) =
            (spec.session_key.clone(), spec.message.clone(), spec.provenance.clone(), run_id.to_owned());
        let (session_id, agent_id) = blocking(move || {
            let incoming = json!({
                "role": "user",
                "content": [{"type": "text", "text": message}],
                "timestamp": entry::now_ms(),
                "provenance": {"kind": prov.kind, "sourceSessionKey": prov.source_session_key, "runId": rid},
            });
            let r = e.append_messages(&Value::from(key.clone()), &Value::Array(vec![incoming]))?;
            let sid = r.get("sessionId").and_then(Value::as_str).unwrap_or_default().to_owned();
            Ok((sid, e.config().key_model().agent_id_of(&key)))
        })
        .await
        .map_err(|e| e.message().to_owned())?;
        let req = AgentRunRequest {
            run_id: run_id.to_owned(),
            idempotency_key: idempotency_key.to_owned(),
            session_key: spec.session_key.clone(),
            session_id,
            agent_id,
            message: spec.message,
            options: spec.options,
        };
        if !host.can_run() {
            return Err("no runAgent callback is configured".to_owned());
        }
        let raw = host.run_agent(req).await?;
        let result = AgentRunResult::from_json(&raw, entry::now_ms())?;
        if self.closed.load(AtomicOrdering::SeqCst) {
            return Ok(());
        }
        let e = engine.clone();
        let key = spec.session_key;
        blocking(move || {
            let key_v = Value::from(key.clone());
            if !result.messages.is_empty() {
                e.append_messages(&key_v, &Value::Array(result.messages.clone()))?;
            }
            let mut patch = Map::new();
            if let Some(u) = &result.usage {
                let n = |v: Option<f64>| v.map(|f| json!(f.round() as i64));
                if let Some(v) = n(u.input) {
                    patch.insert("inputTokens".into(), v);
                }
                if let Some(v) = n(u.output) {
                    patch.insert("outputTokens".into(), v);
                }
                let total = u.total.or(match (u.input, u.output) {
                    (Some(i), Some(o)) => Some(i + o),
                    _ => None,
                });
                if let Some(v) = n(total) {
                    patch.insert("totalTokens".into(), v);
                }
            }
            if let Some(m) = &result.model {
                patch.insert("model".into(), m.clone().into());
            }
            if let Some(p) = &result.provider {
                patch.insert("modelProvider".into(), p.clone().into());
            }
            if !patch.is_empty() {
                e.upsert_session(&key_v, &Value::Object(patch))?;
            }
            Ok(())
        })
        .await
        .map_err(|e| e.message().to_owned())
    }

    async fn settle(
        &self,
        engine: &Arc<Engine>,
        host: &dyn Host,
        run_id: &str,
        session_key: &str,
        started: i64,
        outcome: Outcome,
    ) {
        let ended = entry::now_ms();
        let (status, error) = match outcome {
            Outcome::Ok => (RunStatus::Ok, None),
            // A run that failed without a message keeps no error text (`agent error`, §5.2).
            Outcome::Error(e) => (RunStatus::Error, Some(e).filter(|e| !e.trim().is_empty())),
            Outcome::Timeout(e) => (RunStatus::Timeout, Some(e)),
            Outcome::Dropped => return,
        };
        let e = engine.clone();
        let (rid, err) = (run_id.to_owned(), error.clone());
        let stored =
            blocking(move || e.store().write(|db| db.finish_run(&rid, status.as_str(), ended, err.as_deref()))).await;
        if let Err(e) = stored {
            host.emit(event("store.error", run_id, session_key, json!({"error": e.message()})));
        }
        let kind = match status {
            RunStatus::Ok => "run.end",
            RunStatus::Timeout => "run.timeout",
            _ => "run.error",
        };
        let details = match &error {
            Some(e) => json!({"error": e}),
            None => json!({}),
        };
        host.emit(event(kind, run_id, session_key, details));
        if let Some(tx) = lock(&self.live).remove(run_id) {
            let _ = tx.send(RunSnapshot {
                run_id: run_id.to_owned(),
                status,
                started_at: Some(started),
                ended_at: Some(ended),
                error,
            });
        }
    }

    /// The chain a tool call made during a run belongs to: the run named by `run_id`, else the
    /// run active on `session_key` (here, or in another process on the same file).
    pub fn chain_of(&self, engine: &Engine, run_id: Option<&str>, session_key: Option<&str>) -> Result<Option<String>> {
        if let Some(id) = run_id {
            if let Some(chain) = engine.store().read(|db| db.run(id))?.and_then(|r| r.chain_id) {
                return Ok(Some(chain));
            }
        }
        let Some(key) = session_key else { return Ok(None) };
        if let Some((_, chain)) = lock(&self.active).get(key) {
            return Ok(Some(chain.clone()));
        }
        Ok(engine.store().read(|db| db.running_on(key))?.and_then(|(_, chain)| chain))
    }

    /// The id of the run active on a session (here, or in another process), if any.
    pub fn active_run(&self, engine: &Engine, session_key: &str) -> Result<Option<String>> {
        if let Some((run, _)) = lock(&self.active).get(session_key) {
            return Ok(Some(run.clone()));
        }
        Ok(engine.store().read(|db| db.running_on(session_key))?.map(|(run, _)| run))
    }

    /// Ends, as interrupted, the runs still marked running whose process is gone (a crash, a
    /// kill): what a fresh open does first. Returns their ids.
    pub fn recover(&self, engine: &Engine) -> Result<Vec<String>> {
        let now = entry::now_ms();
        engine.store().write(|db| {
            let mut ended = Vec::new();
            for (run_id, owner) in db.running_runs()? {
                let alive = owner.as_deref().map(crate::owner::is_alive).unwrap_or(false);
                if !alive && db.end_if_running(&run_id, RunStatus::Error.as_str(), now, INTERRUPTED)? {
                    ended.push(run_id);
                }
            }
            Ok(ended)
        })
    }

    /// Stops taking runs; the runs of this registry still in flight are recorded as interrupted
    /// and their waiters told so; whatever their callbacks return later is dropped. Idempotent.
    pub fn close(&self, engine: &Engine) {
        if self.closed.swap(true, AtomicOrdering::SeqCst) {
            return;
        }
        let now = entry::now_ms();
        let live: Vec<(String, watch::Sender<RunSnapshot>)> = lock(&self.live).drain().collect();
        let ids: Vec<String> = live.iter().map(|(id, _)| id.clone()).collect();
        let _ = engine.store().write(|db| {
            for id in &ids {
                db.end_if_running(id, RunStatus::Error.as_str(), now, INTERRUPTED)?;
            }
            Ok(())
        });
        for (id, tx) in live {
            let started_at = tx.borrow().started_at;
            let _ = tx.send(RunSnapshot {
                run_id: id,
                status: RunStatus::Error,
                started_at,
                ended_at: Some(now),
                error: Some(INTERRUPTED.to_owned()),
            });
        }
        crate::owner::retire(&self.owner);
    }

    pub fn is_closed(&self) -> bool {
        self.closed.load(AtomicOrdering::SeqCst)
    }

    /// `agent.wait`: the run's outcome, or `timeout` when it has not ended within `timeout_ms`
    /// (the run goes on). Runs of an earlier process answer from the store.
    pub async fn wait(&self, engine: &Arc<Engine>, run_id: &str, timeout_ms: u64) -> Result<RunSnapshot> {
        let rx = lock(&self.live).get(run_id).map(|tx| tx.subscribe());
        let pending = RunSnapshot {
            run_id: run_id.to_owned(),
            status: RunStatus::Timeout,
            started_at: None,
            ended_at: None,
            error: None,
        };
        if let Some(mut rx) = rx {
            let started_at = rx.borrow().started_at;
            let done = tokio::time::timeout(
                Duration::from_millis(timeout_ms),
                rx.wait_for(|s| s.status != RunStatus::Running),
            )
            .await
            .map(|r| r.map(|s| s.clone()));
            return Ok(match done {
                Ok(Ok(s)) => s,
                // settled between the lookup and the subscription: the store has it
                Ok(Err(_)) => self.stored(engine, run_id).await?.unwrap_or(pending),
                Err(_) => RunSnapshot { started_at, ..pending },
            });
        }
        match self.stored(engine, run_id).await? {
            Some(s) if s.status != RunStatus::Running => Ok(s),
            other => {
                tokio::time::sleep(Duration::from_millis(timeout_ms.min(60_000))).await;
                match self.stored(engine, run_id).await? {
                    Some(s) if s.status != RunStatus::Running => Ok(s),
                    _ => Ok(RunSnapshot { started_at: other.and_then(|o| o.started_at), ..pending }),
                }
            }
        }
    }

    async fn stored(&self, engine: &Arc<Engine>, run_id: &str) -> Result<Option<RunSnapshot>> {
        let e = engine.clone();
        let id = run_id.to_owned();
        let rec = blocking(move || e.store().read(|db| db.run(&id))).await?;
        Ok(rec.map(|r| RunSnapshot {
            run_id: r.run_id,
            status: RunStatus::parse(&r.status),
            started_at: r.started_at,
            ended_at: r.ended_at,
            error: r.error,
        }))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::Config;
    use crate::host::HostFuture;
    use crate::store::Store;
    use std::sync::atomic::{AtomicUsize, Ordering};

    type Behaviour = Box<dyn Fn(AgentRunRequest) -> HostFuture<Value> + Send + Sync>;

    struct FakeHost {
        behaviour: Behaviour,
        events: Mutex<Vec<Event>>,
    }

    impl Host for FakeHost {
        fn run_agent(&self, req: AgentRunRequest) -> HostFuture<Value> {
            (self.behaviour)(req)
        }
        fn can_run(&self) -> bool {
            true
        }
        fn emit(&self, event: Event) {
            lock(&self.events).push(event);
        }
    }

    fn host(f: impl Fn(AgentRunRequest) -> HostFuture<Value> + Send + Sync + 'static) -> Arc<FakeHost> {
        Arc::new(FakeHost { behaviour: Box::new(f), events: Mutex::new(Vec::new()) })
    }

    fn engine() -> Arc<Engine> {
        Arc::new(Engine::new(Store::open(":memory:").unwrap(), Config::default(), None))
    }

    fn spec(key: &str, message: &str) -> RunSpec {
        RunSpec {
            session_key: key.into(),
            message: message.into(),
            provenance: Provenance { kind: "inter_session", source_session_key: Some("agent:main:req".into()) },
            options: RunOptions {
                channel: Some("webchat".into()),
                ..RunOptions::new(crate::host::Lane::Nested, 30_000, "chain-1")
            },
            chain_limit: None,
        }
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_run_appends_the_incoming_message_and_the_reply_and_records_usage() {
        let e = engine();
        let runs = Arc::new(Runs::default());
        let h = host(|req| {
            Box::pin(async move {
                Ok(
                    json!({"reply": format!("pong:{}", req.message), "usage": {"input": 10, "output": 5}, "model": "m1"}),
                )
            })
        });
        let id = runs.start(e.clone(), h.clone(), spec("agent:main:target", "ping")).unwrap().unwrap();
        let snap = runs.wait(&e, &id, 5_000).await.unwrap();
        assert_eq!(snap.status, RunStatus::Ok);
        let (_, _, page) = e.chat_history(&json!("agent:main:target"), &Value::Null).unwrap();
        let msgs: Vec<Value> = page.messages.iter().map(|m| serde_json::from_str(&m.json).unwrap()).collect();
        assert_eq!(msgs.len(), 2);
        assert_eq!(
            msgs[0]["provenance"],
            json!({"kind": "inter_session", "sourceSessionKey": "agent:main:req", "runId": id})
        );
        assert_eq!(msgs[1]["content"][0]["text"], "pong:ping");
        let entry = e.get_session(&json!("agent:main:target")).unwrap().unwrap();
        assert_eq!(
            (entry["inputTokens"].clone(), entry["totalTokens"].clone(), entry["model"].clone()),
            (json!(10), json!(15), json!("m1"))
        );
        let kinds: Vec<&str> = lock(&h.events).iter().map(|e| e.kind).collect();
        assert_eq!(kinds, ["run.start", "run.end"]);
        assert_eq!(snap.to_json()["status"], "ok");
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn runs_on_one_session_go_one_at_a_time_in_arrival_order_and_sessions_overlap() {
        let e = engine();
        let runs = Arc::new(Runs::default());
        let active: Arc<Mutex<HashMap<String, usize>>> = Arc::default();
        let max_same = Arc::new(AtomicUsize::new(0));
        let max_total = Arc::new(AtomicUsize::new(0));
        let order: Arc<Mutex<Vec<String>>> = Arc::default();
        let (a2, ms, mt, o2) = (active.clone(), max_same.clone(), max_total.clone(), order.clone());
        let h = host(move |req| {
            let (a, ms, mt, o) = (a2.clone(), ms.clone(), mt.clone(), o2.clone());
            Box::pin(async move {
                {
                    let mut act = lock(&a);
                    *act.entry(req.session_key.clone()).or_default() += 1;
                    ms.fetch_max(act[&req.session_key], Ordering::SeqCst);
                    mt.fetch_max(act.values().sum(), Ordering::SeqCst);
                    lock(&o).push(req.message.clone());
                }
                tokio::time::sleep(Duration::from_millis(30)).await;
                *lock(&a).entry(req.session_key.clone()).or_default() -= 1;
                Ok(json!({"reply": "ok"}))
            })
        });
        let mut ids = Vec::new();
        for i in 0..5 {
            ids.push(runs.start(e.clone(), h.clone(), spec("agent:main:one", &format!("one-{i}"))).unwrap().unwrap());
            ids.push(runs.start(e.clone(), h.clone(), spec("agent:main:two", &format!("two-{i}"))).unwrap().unwrap());
        }
        for id in &ids {
            assert_eq!(runs.wait(&e, id, 10_000).await.unwrap().status, RunStatus::Ok);
        }
        assert_eq!(max_same.load(Ordering::SeqCst), 1, "two runs of one session overlapped");
        assert_eq!(max_total.load(Ordering::SeqCst), 2, "runs of different sessions did not overlap");
        let seen = lock(&order).clone();
        let ones: Vec<&String> = seen.iter().filter(|m| m.starts_with("one")).collect();
        assert_eq!(ones, ["one-0", "one-1", "one-2", "one-3", "one-4"]);
        // the lane is released just after the waiters hear of the last run
        for _ in 0..100 {
            if lock(&runs.lanes).is_empty() {
                break;
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        assert!(lock(&runs.lanes).is_empty(), "idle lanes are dropped");
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_failing_or_misbehaving_host_ends_the_run_with_error_and_its_message() {
        let e = engine();
        let runs = Arc::new(Runs::default());
        let cases: Vec<(Arc<FakeHost>, &str)> = vec![
            (host(|_| Box::pin(async { Err("model down".to_owned()) })), "model down"),
            (host(|_| Box::pin(async { Ok(json!(42)) })), "runAgent must resolve to an object"),
            (
                host(|_| Box::pin(async { Ok(json!({"messages": [{"no": "role"}]})) })),
                "messages[0] must be an object with a string role",
            ),
        ];
        for (h, text) in cases {
            let id = runs.start(e.clone(), h.clone(), spec("agent:main:t", "x")).unwrap().unwrap();
            let s = runs.wait(&e, &id, 5_000).await.unwrap();
            assert_eq!(s.status, RunStatus::Error);
            assert!(s.error.as_deref().unwrap_or_default().contains(text), "{:?}", s.error);
            assert_eq!(lock(&h.events).last().map(|e| e.kind), Some("run.error"));
        }
        // the session lane is free again: a good run still goes through
        let ok = runs
            .start(e.clone(), host(|_| Box::pin(async { Ok(json!({"reply": "fine"})) })), spec("agent:main:t", "y"))
            .unwrap()
            .unwrap();
        assert_eq!(runs.wait(&e, &ok, 5_000).await.unwrap().status, RunStatus::Ok);
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn an_aborted_run_ends_at_once_with_the_reason_and_frees_its_lane() {
        let e = engine();
        let runs = Arc::new(Runs::default());
        let h = host(|req| {
            Box::pin(async move {
                if req.message == "slow" {
                    tokio::time::sleep(Duration::from_secs(30)).await;
                }
                Ok(json!({"reply": "done"}))
            })
        });
        let id = runs.start(e.clone(), h.clone(), spec("agent:main:a", "slow")).unwrap().unwrap();
        let next = runs.start(e.clone(), h.clone(), spec("agent:main:a", "fast")).unwrap().unwrap();
        assert!(runs.abort(&id, "stopped: requester session deleted"));
        let s = runs.wait(&e, &id, 5_000).await.unwrap();
        assert_eq!((s.status, s.error.as_deref()), (RunStatus::Error, Some("stopped: requester session deleted")));
        assert_eq!(runs.wait(&e, &next, 5_000).await.unwrap().status, RunStatus::Ok);
        assert!(!runs.abort(&id, "again"), "an ended run cannot be aborted");
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_wait_that_times_out_ends_the_wait_not_the_run() {
        let e = engine();
        let runs = Arc::new(Runs::default());
        let h = host(|_| {
            Box::pin(async {
                tokio::time::sleep(Duration::from_millis(300)).await;
                Ok(json!({"reply": "late"}))
            })
        });
        let id = runs.start(e.clone(), h, spec("agent:main:slow", "x")).unwrap().unwrap();
        let first = runs.wait(&e, &id, 20).await.unwrap();
        assert_eq!(first.status, RunStatus::Timeout);
        assert_eq!(first.to_json()["status"], "timeout");
        let later = runs.wait(&e, &id, 5_000).await.unwrap();
        assert_eq!(later.status, RunStatus::Ok);
        let (_, _, page) = e.chat_history(&json!("agent:main:slow"), &Value::Null).unwrap();
        assert!(page.messages.last().map(|m| m.json.contains("late")).unwrap_or(false));
        // a run that already ended answers at once, from memory or the store
        assert_eq!(runs.wait(&e, &id, 0).await.unwrap().status, RunStatus::Ok);
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn an_unknown_run_times_out_at_once_with_zero_and_earlier_runs_answer_from_the_store() {
        let dir = std::env::temp_dir().join(format!("st-runs-{}", uuid::Uuid::new_v4()));
        let path = dir.join("s.db");
        let e = Arc::new(Engine::new(Store::open(path.to_str().unwrap()).unwrap(), Config::default(), None));
        let runs = Arc::new(Runs::default());
        assert_eq!(runs.wait(&e, "nope", 0).await.unwrap().status, RunStatus::Timeout);
        let id = runs
            .start(e.clone(), host(|_| Box::pin(async { Err("boom".to_owned()) })), spec("agent:main:x", "x"))
            .unwrap()
            .unwrap();
        runs.wait(&e, &id, 5_000).await.unwrap();
        // a new process: a fresh engine and registry on the same file
        let e2 = Arc::new(Engine::new(Store::open(path.to_str().unwrap()).unwrap(), Config::default(), None));
        let s = Arc::new(Runs::default()).wait(&e2, &id, 0).await.unwrap();
        assert_eq!((s.status, s.error.as_deref()), (RunStatus::Error, Some("boom")));
        assert!(s.started_at.is_some() && s.ended_at.is_some());
    }
}
