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

#[cfg(test)]
#[path = "limits_tests.rs"]
mod limits_tests;
#[cfg(test)]
mod tests;
mod wait;

use super::task::{blocking, BusyGuard};
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

impl Runs {
    /// The run registry of the store whose lease is `owner` (API.md §1.7): every run it
    /// records names that owner.
    pub fn new(owner: String) -> Runs {
        Runs {
            owner,
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
    /// the caller's [`Guard`] declined it
    Declined,
}

/// A check made in the same write as a run is recorded, given the new run's id: it may write
/// (e.g. claim the work the run is for); `false` refuses the run and nothing is recorded. It
/// may be called again if the write is retried.
pub type Guard<'a> = &'a (dyn Fn(&crate::store::Db<'_>, &str) -> Result<bool> + Sync);

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
        self.start_guarded(engine, host, spec, idempotency_key, None)
    }

    /// As [`Runs::start_keyed`], recorded only when `guard` (run in the same write) agrees:
    /// `None` when it declined.
    pub fn start_guarded(
        self: &Arc<Self>,
        engine: Arc<Engine>,
        host: Arc<dyn Host>,
        spec: RunSpec,
        idempotency_key: Option<String>,
        guard: Option<Guard<'_>>,
    ) -> Result<Option<String>> {
        Ok(match self.start_admitted(engine, host, spec, idempotency_key, None, guard)? {
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
        self.start_admitted(engine, host, spec, None, Some(cap), None)
    }

    fn start_admitted(
        self: &Arc<Self>,
        engine: Arc<Engine>,
        host: Arc<dyn Host>,
        spec: RunSpec,
        idempotency_key: Option<String>,
        cap: Option<&ChildCap>,
        guard: Option<Guard<'_>>,
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
            if let Some(guard) = guard {
                if !guard(db, &run_id)? {
                    return Ok(Some(Admission::Declined));
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
        let busy = BusyGuard::new(host.clone());
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
        // A run left `running` in the store would hold its session (an announce queued behind it
        // waits for it) until this store closes: a failed write (the database unreachable a
        // moment) is tried again while the store is open.
        let mut pause = Duration::from_millis(200);
        let stored = loop {
            let (e, rid, err) = (engine.clone(), run_id.to_owned(), error.clone());
            let stored =
                blocking(move || e.store().write(|db| db.finish_run(&rid, status.as_str(), ended, err.as_deref())))
                    .await;
            match stored {
                Err(e) if !self.closed.load(AtomicOrdering::SeqCst) && !engine.store().is_closed() => {
                    host.emit(event("store.error", run_id, session_key, json!({"error": e.message()})));
                    tokio::time::sleep(pause).await;
                    pause = (pause * 2).min(Duration::from_secs(5));
                }
                other => break other,
            }
        };
        match stored {
            Err(e) => host.emit(event("store.error", run_id, session_key, json!({"error": e.message()}))),
            // another owner took the run over first (this store's lease had lapsed): its end stands
            Ok(false) => return self.taken_over(engine, run_id).await,
            Ok(true) => {}
        }
        let kind = match status {
            RunStatus::Ok => "run.end",
            RunStatus::Timeout => "run.timeout",
            _ => "run.error",
        };
        let details = match (&error, status) {
            (Some(e), _) => json!({"error": e}),
            // the event always says why a run failed, even when the run keeps no error text
            (None, RunStatus::Error) => json!({"error": crate::host::failure_text(String::new(), "runAgent")}),
            (None, _) => json!({}),
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

    /// A run of this registry that another owner ended first: its waiters get the stored end.
    async fn taken_over(&self, engine: &Arc<Engine>, run_id: &str) {
        let stored = self.stored(engine, run_id).await.ok().flatten();
        if let (Some(tx), Some(snap)) = (lock(&self.live).remove(run_id), stored) {
            let _ = tx.send(snap);
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
    }

    pub fn is_closed(&self) -> bool {
        self.closed.load(AtomicOrdering::SeqCst)
    }
}
