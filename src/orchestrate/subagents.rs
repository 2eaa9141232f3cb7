//! The sub-agent registry (REFERENCE.md §6.4–§6.8, DECISIONS.md #3, #5): records persisted in
//! `subagent_runs`, the completion wait, the announce flow (through the outbox), queue and
//! steer modes, cleanup, the archive sweeper and restart recovery.
//!
//! A child's life: `sessions_spawn` registers its record and arms a *completion wait*; when the
//! run ends, the record gets `endedAt`/`outcome` and its announce is recorded in the outbox
//! under the record's idempotency key (so recording it again, e.g. on recovery, adds nothing).
//! The outbox worker calls [`attempt_announce`]: the trigger message (§6.5, §6.7) reaches the
//! requester by steering its active run, through the per-requester announce queue while a run
//! is active (§6.8), or directly as an `announce` run with `deliver: true`. When the announce
//! settles, [`announce_settled`] records it and cleans up (`delete` removes the child, `keep`
//! sets `cleanupCompletedAt` and the archive time, counted from the run's end). The sweeper is
//! one timer, set for the next archive due. Every change to a record is one transaction that
//! reads it fresh, so the completion wait, the outbox and a requester's deletion never undo
//! each other's writes. Nothing here decides whether a spawn is allowed: `spawn` does.

use std::collections::{HashMap, VecDeque};
use std::future::Future;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde_json::{json, Value};
use tokio::sync::{oneshot, watch, Notify};

use super::outbox::{Attempt, OutboxRow};
use super::prompts::{self, SubagentOutcome};
use super::runs::{Provenance, RunSnapshot, RunSpec, RunStatus, INTERRUPTED};
use super::stats::{self, ModelCost, RunStats};
use super::{blocking, reply, Orchestrator, SUBAGENT_ANNOUNCE};
use crate::config::Config;
use crate::entry::{self, DeliveryContext, Entry};
use crate::error::Result;
use crate::host::{Lane, RunOptions};
use crate::js::collapse_whitespace;
pub use crate::store::subagents::{AnnounceState, RunOutcome, SubagentRun};

/// The outcome error of a child whose requester session was deleted while it ran.
pub const REQUESTER_DELETED: &str = "stopped: requester session deleted";
/// The title of a combined announce in `collect` mode (§6.8).
pub const QUEUED_TITLE: &str = "[Queued announce messages while agent was busy]";
/// How long one wait for a run lasts before it is renewed.
const WAIT_SLICE_MS: u64 = 60_000;
/// The longest an announce attempt waits for its run (the outbox lease is 15 minutes).
const MAX_ANNOUNCE_WAIT_MS: u64 = 14 * 60 * 1000;

/// In-memory state of the registry of one open store.
pub struct Registry {
    shutdown: watch::Sender<bool>,
    sweeper_wake: Arc<Notify>,
    sweeper_started: AtomicBool,
    /// announce idempotency key → the announce run started for it, so that a retry waits for
    /// that run instead of starting a second one
    announce_runs: Mutex<HashMap<String, String>>,
    /// requester canonical key → its announce queue (§6.8)
    queues: Mutex<HashMap<String, AnnounceQueue>>,
    /// held by a spawn from its `maxActive` check until its run is registered, so that
    /// concurrent spawns cannot all pass the check before any of them is counted
    pub(crate) spawn_gate: tokio::sync::Mutex<()>,
}

impl Default for Registry {
    fn default() -> Self {
        Registry {
            shutdown: watch::channel(false).0,
            sweeper_wake: Arc::new(Notify::new()),
            sweeper_started: AtomicBool::new(false),
            announce_runs: Mutex::new(HashMap::new()),
            queues: Mutex::new(HashMap::new()),
            spawn_gate: tokio::sync::Mutex::new(()),
        }
    }
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

/// Runs `fut` in the background until it ends or the registry is closed.
fn spawn_task(orch: &Orchestrator, fut: impl Future<Output = ()> + Send + 'static) {
    let mut stop = orch.subagents().shutdown.subscribe();
    if *stop.borrow() {
        return;
    }
    tokio::spawn(async move {
        tokio::select! {
            _ = stop.wait_for(|s| *s) => {}
            _ = fut => {}
        }
    });
}

/// `archiveAfterMinutes` in milliseconds (fractions kept); `None`: archiving disabled.
pub fn archive_after_ms(cfg: &Config) -> Option<i64> {
    cfg.subagents
        .archive_after_minutes
        .filter(|m| m.is_finite() && *m > 0.0)
        .map(|m| (m * 60_000.0).round().max(1.0) as i64)
}

// ---- records ---------------------------------------------------------------------------------

/// Changes one record in one transaction (read fresh, changed by `f`, written back); the record
/// as written, or `None` when it is gone or `f` changed nothing.
async fn update(
    orch: &Orchestrator,
    run_id: &str,
    f: impl Fn(&mut SubagentRun) -> bool + Send + 'static,
) -> Result<Option<SubagentRun>> {
    let (e, id) = (orch.engine().clone(), run_id.to_owned());
    blocking(move || {
        e.store().write(|db| {
            let Some(mut r) = db.subagent_run(&id)? else { return Ok(None) };
            if !f(&mut r) {
                return Ok(None);
            }
            db.put_subagent_run(&r)?;
            Ok(Some(r))
        })
    })
    .await
}

async fn load(orch: &Orchestrator, run_id: &str) -> Result<Option<SubagentRun>> {
    let (e, id) = (orch.engine().clone(), run_id.to_owned());
    blocking(move || e.store().read(|db| db.subagent_run(&id))).await
}

/// Registers a freshly started child run (§6.4 *Register*) and arms its completion wait.
pub async fn register(orch: &Arc<Orchestrator>, record: SubagentRun) -> Result<()> {
    let e = orch.engine().clone();
    let r = record.clone();
    blocking(move || e.store().write(|db| db.put_subagent_run(&r))).await?;
    arm_completion(orch, record.run_id);
    Ok(())
}

/// `listSubagentRuns(requesterKey?)`: the API.md §4 `SubagentRun` records, in `createdAt`
/// order, of one requester (its key canonicalised) or of all.
pub fn list(orch: &Orchestrator, requester_key: Option<&str>) -> Result<Vec<Value>> {
    let key = match requester_key {
        Some(raw) => Some(orch.engine().config().key_model().canonical(raw)?),
        None => None,
    };
    let runs = orch.engine().store().read(|db| db.subagent_runs(key.as_deref()))?;
    Ok(runs.iter().map(SubagentRun::to_json).collect())
}

/// Children of `requester_key` (canonical) still running.
pub fn running_count(orch: &Orchestrator, requester_key: &str) -> Result<u64> {
    orch.engine().store().read(|db| db.running_subagent_count(requester_key))
}

// ---- completion --------------------------------------------------------------------------------

/// Waits (in the background) for a child run to end, then records how and announces it.
fn arm_completion(orch: &Arc<Orchestrator>, run_id: String) {
    let weak = Arc::downgrade(orch);
    let (engine, runs) = (orch.engine().clone(), orch.runs().clone());
    spawn_task(orch, async move {
        let snap = loop {
            match runs.wait(&engine, &run_id, WAIT_SLICE_MS).await {
                Ok(s) if s.status != RunStatus::Timeout || s.ended_at.is_some() => break s,
                Ok(_) => {}
                Err(_) => tokio::time::sleep(Duration::from_millis(500)).await,
            }
            if weak.strong_count() == 0 {
                return;
            }
        };
        if let Some(orch) = weak.upgrade() {
            run_ended(&orch, &run_id, snap).await;
        }
    });
}

fn outcome_of(snap: &RunSnapshot) -> RunOutcome {
    match snap.status {
        RunStatus::Ok => RunOutcome { status: "ok".into(), error: None },
        RunStatus::Timeout => RunOutcome { status: "timeout".into(), error: None },
        RunStatus::Error => RunOutcome { status: "error".into(), error: snap.error.clone() },
        RunStatus::Running => RunOutcome { status: "unknown".into(), error: None },
    }
}

/// The child run ended: `endedAt`/`outcome` recorded (unless something else ended the record
/// first, e.g. its requester's deletion), then the announce is recorded in the outbox.
async fn run_ended(orch: &Arc<Orchestrator>, run_id: &str, snap: RunSnapshot) {
    let outcome = outcome_of(&snap);
    let (started, ended) = (snap.started_at, snap.ended_at.unwrap_or_else(entry::now_ms));
    let changed = update(orch, run_id, move |r| {
        if r.ended_at.is_some() {
            return false;
        }
        r.started_at = r.started_at.or(started);
        r.ended_at = Some(ended);
        r.outcome = Some(outcome.clone());
        r.archive_at_ms = None;
        true
    })
    .await;
    match changed {
        Ok(Some(rec)) => enqueue_announce(orch, &rec).await,
        Ok(None) => {}
        Err(e) => orch.emit("store.error", Some(run_id), None, json!({"error": e.message()})),
    }
}

/// Records the announce of an ended child in the outbox (a no-op when it is there already; an
/// item that already reached its final status is settled on the record, for a process that
/// stopped between the two).
async fn enqueue_announce(orch: &Arc<Orchestrator>, rec: &SubagentRun) {
    if rec.announce.status != "pending" {
        return;
    }
    let (e, outbox) = (orch.engine().clone(), orch.outbox().clone());
    let (key, requester, run_id) =
        (rec.announce.idempotency_key.clone(), rec.requester_session_key.clone(), rec.run_id.clone());
    let done = blocking(move || {
        let payload = json!({ "runId": run_id });
        if outbox.enqueue(&key, SUBAGENT_ANNOUNCE, Some(&requester), &payload)? {
            return Ok(None);
        }
        let item = e.store().read(|db| db.outbox_item(&key))?;
        Ok(item.filter(|i| i.status != "pending"))
    })
    .await;
    match done {
        Ok(Some(item)) => {
            settle(orch, &rec.run_id, &item.status, item.attempts).await;
        }
        Ok(None) => {}
        Err(e) => orch.emit("store.error", Some(&rec.run_id), None, json!({"error": e.message()})),
    }
}

// ---- the announce --------------------------------------------------------------------------

/// §6.5 steps 2–7: the trigger message for an ended child.
async fn build_trigger(orch: &Orchestrator, rec: &SubagentRun) -> Result<String> {
    let e = orch.engine().clone();
    let child = rec.child_session_key.clone();
    let (entry, messages) = blocking(move || {
        let key = Value::from(child);
        let entry = e.get_session(&key)?;
        let (_, _, page) = e.chat_history(&key, &json!({"limit": 50}))?;
        let messages: Vec<Value> = page.messages.iter().filter_map(|m| serde_json::from_str(&m.json).ok()).collect();
        Ok((entry, messages))
    })
    .await?;
    let found = reply::latest_assistant_reply(&messages);
    let outcome = match rec.outcome.as_ref().map(|o| o.status.as_str()) {
        Some("ok") => SubagentOutcome::Ok,
        Some("timeout") => SubagentOutcome::Timeout,
        Some("error") => SubagentOutcome::Error(rec.outcome.as_ref().and_then(|o| o.error.clone())),
        _ => SubagentOutcome::Unknown,
    };
    let cfg = orch.engine().config();
    let entry = entry.unwrap_or_default();
    let line = stats::stats_line(&run_stats(orch, &cfg, rec, &entry).as_ref());
    let title = prompts::task_title(rec.label.as_deref(), Some(&rec.task));
    Ok(prompts::subagent_trigger(title, &prompts::status_label(&outcome), found.as_deref(), &line))
}

/// Owned stats inputs, borrowed by [`RunStats`].
struct StatsInput {
    base: RunStats<'static>,
    key: String,
    session_id: Option<String>,
    transcript: Option<String>,
}

impl StatsInput {
    fn as_ref(&self) -> RunStats<'_> {
        RunStats {
            session_key: &self.key,
            session_id: self.session_id.as_deref(),
            transcript_path: self.transcript.as_deref(),
            ..self.base.clone()
        }
    }
}

/// §6.7: the child's usage from its entry (written before its run was recorded as ended, so
/// one read is enough), the price from the config's cost table.
fn run_stats(orch: &Orchestrator, cfg: &Config, rec: &SubagentRun, entry: &Entry) -> StatsInput {
    let num = |k: &str| entry.get(k).and_then(Value::as_f64).filter(|f| f.is_finite());
    let model = entry::text_field(entry, "model");
    let provider = entry::text_field(entry, "modelProvider");
    let cost = model.and_then(|m| {
        let (p, id) = match provider {
            Some(p) => (p.to_owned(), m.to_owned()),
            None => {
                let r = cfg.models.resolve(m)?;
                (r.provider?, r.model)
            }
        };
        cfg.models.cost(&p, &id).map(|c| ModelCost { input: c.input, output: c.output })
    });
    StatsInput {
        base: RunStats {
            started_at: rec.started_at.map(|v| v as f64),
            ended_at: rec.ended_at.map(|v| v as f64),
            total_tokens: num("totalTokens"),
            input_tokens: num("inputTokens"),
            output_tokens: num("outputTokens"),
            cost,
            session_key: "",
            session_id: None,
            transcript_path: None,
        },
        key: rec.child_session_key.clone(),
        session_id: entry::str_field(entry, "sessionId").map(str::to_owned),
        transcript: orch.engine().transcript_path(entry),
    }
}

/// The queue mode of §6.8, normalized.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum QueueMode {
    Steer,
    SteerBacklog,
    Interrupt,
    Followup,
    Collect,
}

fn normalize_mode(raw: &str) -> Option<QueueMode> {
    Some(match raw.trim().to_lowercase().as_str() {
        "queue" | "queued" | "steer" | "steering" => QueueMode::Steer,
        "interrupt" | "interrupts" | "abort" => QueueMode::Interrupt,
        "followup" | "follow-ups" | "followups" => QueueMode::Followup,
        "collect" | "coalesce" => QueueMode::Collect,
        "steer+backlog" | "steer-backlog" | "steer_backlog" => QueueMode::SteerBacklog,
        _ => return None,
    })
}

/// What to do when the cap is reached.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DropPolicy {
    Old,
    New,
    Summarize,
}

fn normalize_drop(raw: &str) -> Option<DropPolicy> {
    Some(match raw.trim().to_lowercase().as_str() {
        "old" | "oldest" => DropPolicy::Old,
        "new" | "newest" => DropPolicy::New,
        "summarize" | "summary" => DropPolicy::Summarize,
        _ => return None,
    })
}

/// The requester's queue settings (§6.8).
#[derive(Debug, Clone, PartialEq)]
pub struct QueueSettings {
    pub mode: QueueMode,
    pub debounce_ms: u64,
    pub cap: usize,
    pub drop: DropPolicy,
}

/// §6.8: the entry's own settings, then the config's per-channel and general ones, then the
/// defaults (collect, 1000 ms, 20, summarize).
pub fn queue_settings(cfg: &Config, entry: &Entry) -> QueueSettings {
    let channel =
        entry::text_field(entry, "channel").or(entry::text_field(entry, "lastChannel")).map(str::to_lowercase);
    let q = &cfg.queue;
    let by_channel = |m: &std::collections::BTreeMap<String, String>| channel.as_ref().and_then(|c| m.get(c)).cloned();
    let mode = [entry::text_field(entry, "queueMode").map(str::to_owned), by_channel(&q.by_channel), q.mode.clone()]
        .into_iter()
        .flatten()
        .find_map(|m| normalize_mode(&m))
        .unwrap_or(QueueMode::Collect);
    let number = |k: &str| entry.get(k).and_then(Value::as_f64).filter(|f| f.is_finite() && *f >= 0.0);
    let debounce_ms = number("queueDebounceMs")
        .map(|f| f.floor() as u64)
        .or_else(|| channel.as_ref().and_then(|c| q.debounce_ms_by_channel.get(c)).copied())
        .or(q.debounce_ms)
        .unwrap_or(1000);
    let cap =
        number("queueCap").map(|f| f.floor().max(1.0) as usize).or(q.cap.map(|c| c.max(1) as usize)).unwrap_or(20);
    let drop = [entry::text_field(entry, "queueDrop").map(str::to_owned), q.drop.clone()]
        .into_iter()
        .flatten()
        .find_map(|d| normalize_drop(&d))
        .unwrap_or(DropPolicy::Summarize);
    QueueSettings { mode, debounce_ms, cap, drop }
}

/// One try of a sub-agent announce (a `subagent_announce` outbox item).
pub async fn attempt_announce(orch: &Arc<Orchestrator>, row: OutboxRow) -> Attempt {
    let Some(run_id) = row.payload.get("runId").and_then(Value::as_str).map(str::to_owned) else {
        return Attempt::Failed("malformed sub-agent announce: no runId".to_owned());
    };
    let rec = match load(orch, &run_id).await {
        Ok(Some(r)) => r,
        Ok(None) => return Attempt::Skipped("the sub-agent run is no longer registered".to_owned()),
        Err(e) => return Attempt::Retry(e.message().to_owned()),
    };
    if rec.announce.status != "pending" {
        return Attempt::Skipped(format!("the announce is already {}", rec.announce.status));
    }
    let key = rec.announce.idempotency_key.clone();
    // an announce run an earlier try of this process started: wait for it, never start another
    let earlier = lock(&orch.subagents().announce_runs).get(&key).cloned();
    if let Some(run) = earlier {
        return await_announce_run(orch, &[key], &run).await;
    }
    match announce(orch, &rec).await {
        Ok(a) => a,
        Err(e) => Attempt::Retry(e.message().to_owned()),
    }
}

/// §6.5 step 8–9 with §6.8: steer, queue or direct.
async fn announce(orch: &Arc<Orchestrator>, rec: &SubagentRun) -> Result<Attempt> {
    let trigger = build_trigger(orch, rec).await?;
    let requester = rec.requester_session_key.clone();
    let e = orch.engine().clone();
    let k = requester.clone();
    let entry = blocking(move || e.get_session(&Value::from(k))).await?;
    let cfg = orch.engine().config();
    let origin = DeliveryContext::of_object(rec.requester_origin.as_ref());
    let chain = chain_of(orch, &rec.run_id).await;
    if let Some(entry) = entry.as_ref().filter(|e| entry::str_field(e, "sessionId").is_some()) {
        let settings = queue_settings(&cfg, entry);
        if matches!(settings.mode, QueueMode::Steer | QueueMode::SteerBacklog) && orch.host().can_steer() {
            if let Ok(true) = orch.host().steer(requester.clone(), trigger.clone()).await {
                return Ok(Attempt::Delivered);
            }
        }
        let (e, r, k) = (orch.engine().clone(), orch.runs().clone(), requester.clone());
        let active = blocking(move || r.active_run(&e, &k)).await?;
        if active.is_some() {
            let item_origin = entry::delivery_context(entry).overlay(origin);
            if let Some(blocked) = send_blocked(orch, rec, item_origin.channel.as_deref()).await {
                return Ok(blocked);
            }
            let item = QueueItem {
                prompt: trigger,
                summary_line: prompts::task_title(rec.label.as_deref(), Some(&rec.task)).to_owned(),
                origin_key: origin_key(&item_origin),
                origin: item_origin,
                key: rec.announce.idempotency_key.clone(),
                child_key: rec.child_session_key.clone(),
                chain,
                done: None,
            };
            return Ok(enqueue_queued(orch, &requester, settings, item).await);
        }
    }
    let route =
        if origin.is_empty() { entry.as_ref().map(entry::delivery_context).unwrap_or_default() } else { origin };
    if let Some(blocked) = send_blocked(orch, rec, route.channel.as_deref()).await {
        return Ok(blocked);
    }
    let key = rec.announce.idempotency_key.clone();
    let run = start_announce_run(orch, &requester, trigger, &route, &rec.child_session_key, chain, Some(key.clone()))?;
    lock(&orch.subagents().announce_runs).insert(key.clone(), run.clone());
    Ok(await_announce_run(orch, &[key], &run).await)
}

/// DECISIONS.md #6: an announce is delivered, so the requester's send policy decides first; a
/// denied one (or one whose policy cannot be evaluated) is skipped with `delivery.blocked`.
async fn send_blocked(orch: &Orchestrator, rec: &SubagentRun, channel: Option<&str>) -> Option<Attempt> {
    let e = orch.engine().clone();
    let mut params = json!({ "sessionKey": rec.requester_session_key });
    if let Some(c) = channel {
        params["channel"] = Value::from(c);
    }
    let reason = match blocking(move || e.resolve_send_policy(&params)).await {
        Ok(crate::config::PolicyAction::Allow) => return None,
        Ok(crate::config::PolicyAction::Deny) => "send blocked by session policy".to_owned(),
        Err(err) => format!("send policy could not be evaluated: {}", err.message()),
    };
    orch.emit(
        "delivery.blocked",
        Some(&rec.run_id),
        Some(&rec.requester_session_key),
        json!({"kind": SUBAGENT_ANNOUNCE, "idempotencyKey": rec.announce.idempotency_key, "reason": reason}),
    );
    Some(Attempt::Skipped(reason))
}

/// The chain of the child's run, for the announce run on the requester.
async fn chain_of(orch: &Orchestrator, run_id: &str) -> String {
    let (e, id) = (orch.engine().clone(), run_id.to_owned());
    blocking(move || e.store().read(|db| db.run(&id)))
        .await
        .ok()
        .flatten()
        .and_then(|r| r.chain_id)
        .unwrap_or_else(super::new_chain_id)
}

fn thread_text(v: &Option<Value>) -> Option<String> {
    match v {
        Some(Value::String(s)) if !s.is_empty() => Some(s.clone()),
        Some(Value::Number(n)) => Some(n.to_string()),
        _ => None,
    }
}

/// Starts an `announce` run on the requester, delivered to `route`; the host sees `key` (the
/// announce's own idempotency key, when the run carries exactly one announce). The announce is
/// owed, so it is not held to the chain budget.
fn start_announce_run(
    orch: &Orchestrator,
    requester: &str,
    message: String,
    route: &DeliveryContext,
    child_key: &str,
    chain: String,
    key: Option<String>,
) -> Result<String> {
    let cfg = orch.engine().config();
    let options = RunOptions {
        deliver: true,
        channel: route.channel.clone(),
        to: route.to.clone(),
        account_id: route.account_id.clone(),
        thread_id: thread_text(&route.thread_id),
        ..RunOptions::new(Lane::Announce, cfg.default_timeout_seconds.saturating_mul(1000), chain)
    };
    let spec = RunSpec {
        session_key: requester.to_owned(),
        message,
        provenance: Provenance { kind: "announce", source_session_key: Some(child_key.to_owned()) },
        options,
        chain_limit: None,
    };
    orch.runs()
        .start_keyed(orch.engine().clone(), orch.host().clone(), spec, key)?
        .ok_or_else(|| crate::error::Error::store("the announce run was not admitted"))
}

/// Waits for an announce run: `ok` → delivered; an error → retried (a fresh run next time); a
/// run still going → retried later, waiting for the same run.
async fn await_announce_run(orch: &Orchestrator, keys: &[String], run: &str) -> Attempt {
    let timeout = orch.engine().config().default_timeout_seconds.saturating_mul(1000);
    let cap = timeout.saturating_add(WAIT_SLICE_MS).min(MAX_ANNOUNCE_WAIT_MS);
    let snap = orch.runs().wait(orch.engine(), run, cap).await;
    let forget = || {
        let mut map = lock(&orch.subagents().announce_runs);
        for k in keys {
            map.remove(k);
        }
    };
    match snap {
        Ok(s) if s.status == RunStatus::Ok => {
            forget();
            Attempt::Delivered
        }
        Ok(s) if s.status == RunStatus::Timeout && s.ended_at.is_none() => {
            Attempt::Retry("the announce run is still going".to_owned())
        }
        Ok(s) => {
            forget();
            Attempt::Retry(s.error.unwrap_or_else(|| format!("the announce run ended with {}", s.status.as_str())))
        }
        Err(e) => Attempt::Retry(e.message().to_owned()),
    }
}

// ---- the announce queue (§6.8) ---------------------------------------------------------------------

struct QueueItem {
    prompt: String,
    summary_line: String,
    origin: DeliveryContext,
    origin_key: Option<String>,
    /// the announce idempotency key
    key: String,
    child_key: String,
    chain: String,
    done: Option<oneshot::Sender<Attempt>>,
}

impl QueueItem {
    fn finish(&mut self, a: Attempt) {
        if let Some(tx) = self.done.take() {
            let _ = tx.send(a);
        }
    }
}

struct AnnounceQueue {
    settings: QueueSettings,
    items: VecDeque<QueueItem>,
    last_enqueued: Instant,
    dropped: usize,
    summary_lines: Vec<String>,
}

fn origin_key(o: &DeliveryContext) -> Option<String> {
    match (&o.channel, &o.to) {
        (Some(c), Some(t)) => Some(format!(
            "{c}|{t}|{}|{}",
            o.account_id.clone().unwrap_or_default(),
            thread_text(&o.thread_id).unwrap_or_default()
        )),
        _ => None,
    }
}

fn summary_line(text: &str) -> String {
    let line = collapse_whitespace(text);
    if line.chars().count() > 160 {
        let cut: String = line.chars().take(159).collect();
        format!("{}…", cut.trim_end())
    } else {
        line
    }
}

/// `[Queue overflow] Dropped <n> announce(s) due to cap.` with the summary lines.
pub fn overflow_summary(dropped: usize, lines: &[String]) -> String {
    let noun = if dropped == 1 { "announce" } else { "announces" };
    let mut out = vec![format!("[Queue overflow] Dropped {dropped} {noun} due to cap.")];
    if !lines.is_empty() {
        out.push("Summary:".to_owned());
        out.extend(lines.iter().map(|l| format!("- {l}")));
    }
    out.join("\n")
}

/// Queues an announce behind the requester's active run and waits for its delivery. Over the
/// cap, `new` refuses this item and `old`/`summarize` drop the oldest; a dropped item fails
/// (the outbox records it with `delivery.failed`), and `summarize` sends a summary of the
/// dropped ones in addition to the next delivery.
async fn enqueue_queued(
    orch: &Arc<Orchestrator>,
    requester: &str,
    settings: QueueSettings,
    mut item: QueueItem,
) -> Attempt {
    let (tx, rx) = oneshot::channel();
    item.done = Some(tx);
    let start_drain = {
        let mut queues = lock(&orch.subagents().queues);
        let fresh = !queues.contains_key(requester);
        let q = queues.entry(requester.to_owned()).or_insert_with(|| AnnounceQueue {
            settings: settings.clone(),
            items: VecDeque::new(),
            last_enqueued: Instant::now(),
            dropped: 0,
            summary_lines: Vec::new(),
        });
        q.settings = settings;
        let cap = q.settings.cap.max(1);
        if q.items.len() >= cap {
            let reason = format!("dropped: the announce queue of {requester} is full (cap {cap})");
            if q.settings.drop == DropPolicy::New {
                return Attempt::Failed(reason);
            }
            let excess = q.items.len() + 1 - cap;
            for mut old in q.items.drain(..excess).collect::<Vec<_>>() {
                if q.settings.drop == DropPolicy::Summarize {
                    q.dropped += 1;
                    q.summary_lines.push(summary_line(&old.summary_line));
                }
                old.finish(Attempt::Failed(reason.clone()));
            }
            let keep_from = q.summary_lines.len().saturating_sub(cap);
            q.summary_lines.drain(..keep_from);
        }
        q.items.push_back(item);
        q.last_enqueued = Instant::now();
        fresh
    };
    if start_drain {
        let (o, k) = (orch.clone(), requester.to_owned());
        spawn_task(orch, async move { drain(&o, &k).await });
    }
    rx.await.unwrap_or_else(|_| Attempt::Retry("the announce queue was closed".to_owned()))
}

/// One requester's queue: waits for its active run to end and the debounce to pass, then sends
/// (collect: one combined prompt when every item has the same route, else one by one).
async fn drain(orch: &Arc<Orchestrator>, requester: &str) {
    loop {
        loop {
            let (e, r, k) = (orch.engine().clone(), orch.runs().clone(), requester.to_owned());
            match blocking(move || r.active_run(&e, &k)).await {
                Ok(Some(run)) => {
                    let _ = orch.runs().wait(orch.engine(), &run, WAIT_SLICE_MS).await;
                }
                Ok(None) => break,
                Err(_) => tokio::time::sleep(Duration::from_millis(200)).await,
            }
        }
        loop {
            let left = {
                let queues = lock(&orch.subagents().queues);
                let Some(q) = queues.get(requester) else { return };
                let debounce = Duration::from_millis(q.settings.debounce_ms);
                debounce.saturating_sub(q.last_enqueued.elapsed())
            };
            if left.is_zero() {
                break;
            }
            tokio::time::sleep(left).await;
        }
        let (batch, summary, mode) = {
            let mut queues = lock(&orch.subagents().queues);
            let Some(q) = queues.get_mut(requester) else { return };
            if q.items.is_empty() {
                queues.remove(requester);
                return;
            }
            let summary = (q.dropped > 0).then(|| overflow_summary(q.dropped, &q.summary_lines));
            q.dropped = 0;
            q.summary_lines.clear();
            let batch: Vec<QueueItem> = if q.settings.mode == QueueMode::Collect {
                q.items.drain(..).collect()
            } else {
                q.items.pop_front().into_iter().collect()
            };
            (batch, summary, q.settings.mode)
        };
        send_batch(orch, requester, batch, summary, mode).await;
    }
}

fn cross_origin(items: &[QueueItem]) -> bool {
    let keyed: Vec<&String> = items.iter().filter_map(|i| i.origin_key.as_ref()).collect();
    let unkeyed_with_origin = items.iter().any(|i| i.origin_key.is_none() && !i.origin.is_empty());
    let mut distinct = keyed.clone();
    distinct.sort();
    distinct.dedup();
    let mixed = !keyed.is_empty() && keyed.len() < items.len();
    unkeyed_with_origin || distinct.len() > 1 || mixed
}

async fn send_batch(
    orch: &Arc<Orchestrator>,
    requester: &str,
    mut batch: Vec<QueueItem>,
    summary: Option<String>,
    mode: QueueMode,
) {
    if mode == QueueMode::Collect && !cross_origin(&batch) {
        let mut blocks = vec![QUEUED_TITLE.to_owned()];
        blocks.extend(summary);
        blocks.extend(batch.iter().enumerate().map(|(i, it)| format!("---\nQueued #{}\n{}", i + 1, it.prompt)));
        let Some(last) = batch.last() else { return };
        let (route, child, chain) = (last.origin.clone(), last.child_key.clone(), last.chain.clone());
        let keys: Vec<String> = batch.iter().map(|i| i.key.clone()).collect();
        let outcome = send_one(orch, requester, blocks.join("\n\n"), &route, &child, chain, &keys).await;
        for it in &mut batch {
            it.finish(outcome.clone());
        }
        return;
    }
    let mut summary = summary;
    for mut it in batch {
        if let Some(text) = summary.take() {
            // sent in addition to the item, never instead of it; its own delivery is best effort
            let _ = send_one(orch, requester, text, &it.origin, &it.child_key, it.chain.clone(), &[]).await;
        }
        let keys = [it.key.clone()];
        let outcome =
            send_one(orch, requester, it.prompt.clone(), &it.origin, &it.child_key, it.chain.clone(), &keys).await;
        it.finish(outcome);
    }
}

async fn send_one(
    orch: &Arc<Orchestrator>,
    requester: &str,
    message: String,
    route: &DeliveryContext,
    child_key: &str,
    chain: String,
    keys: &[String],
) -> Attempt {
    let key = match keys {
        [one] => Some(one.clone()),
        _ => None,
    };
    match start_announce_run(orch, requester, message, route, child_key, chain, key) {
        Ok(run) => {
            {
                let mut map = lock(&orch.subagents().announce_runs);
                for k in keys {
                    map.insert(k.clone(), run.clone());
                }
            }
            await_announce_run(orch, keys, &run).await
        }
        Err(e) => Attempt::Retry(e.message().to_owned()),
    }
}

// ---- settling and cleanup --------------------------------------------------------------------

/// A sub-agent announce reached a final status.
pub fn announce_settled(orch: &Arc<Orchestrator>, row: &OutboxRow, status: &str, attempts: u32, error: Option<&str>) {
    let _ = error;
    let Some(run_id) = row.payload.get("runId").and_then(Value::as_str).map(str::to_owned) else { return };
    let (o, status) = (orch.clone(), status.to_owned());
    spawn_task(orch, async move { settle(&o, &run_id, &status, attempts).await });
}

/// Records the announce's final status, then cleans up.
async fn settle(orch: &Arc<Orchestrator>, run_id: &str, status: &str, attempts: u32) {
    let s = status.to_owned();
    let rec = update(orch, run_id, move |r| {
        if r.announce.status == "pending" {
            r.announce.status = s.clone();
        }
        r.announce.attempts = r.announce.attempts.max(attempts);
        true
    })
    .await;
    let rec = match rec {
        Ok(Some(r)) => r,
        Ok(None) => return,
        Err(e) => {
            orch.emit("store.error", Some(run_id), None, json!({"error": e.message()}));
            return;
        }
    };
    if status == "delivered" && rec.announce.status == "delivered" {
        orch.emit(
            "subagent.announced",
            Some(run_id),
            Some(&rec.requester_session_key),
            json!({"childSessionKey": rec.child_session_key, "attempts": rec.announce.attempts}),
        );
    }
    finalize(orch, rec).await;
}

/// Cleanup after the announce settled: `delete` removes the child session (with its
/// transcript) and the record; `keep` patches the label back, sets `cleanupCompletedAt` and,
/// when archiving is on, `archiveAtMs` counted from the run's end.
async fn finalize(orch: &Arc<Orchestrator>, rec: SubagentRun) {
    if rec.cleanup_completed_at.is_some() || rec.ended_at.is_none() {
        return;
    }
    let e = orch.engine().clone();
    let r = rec.clone();
    let done = blocking(move || {
        let child = Value::from(r.child_session_key.clone());
        if r.cleanup == "delete" {
            let _ = e.delete_session(&child, &json!({"deleteTranscript": true}));
            e.store().write(|db| db.delete_subagent_run(&r.run_id))?;
            return Ok(false);
        }
        if let Some(label) = &r.label {
            let _ = e.patch_session(&json!({"key": r.child_session_key, "label": label}));
        }
        let archive = archive_after_ms(&e.config());
        let now = entry::now_ms();
        e.store().write(|db| {
            let Some(mut cur) = db.subagent_run(&r.run_id)? else { return Ok(false) };
            if cur.cleanup_completed_at.is_some() {
                return Ok(false);
            }
            cur.cleanup_completed_at = Some(now);
            cur.archive_at_ms = archive.map(|ms| cur.ended_at.unwrap_or(now).saturating_add(ms));
            db.put_subagent_run(&cur)?;
            Ok(cur.archive_at_ms.is_some())
        })
    })
    .await;
    match done {
        Ok(true) => orch.subagents().sweeper_wake.notify_one(),
        Ok(false) => {}
        Err(e) => orch.emit("store.error", Some(&rec.run_id), None, json!({"error": e.message()})),
    }
}

// ---- the sweeper -------------------------------------------------------------------------------

/// Starts the archive timer (once): it sleeps until the next archive due, or until woken by a
/// new archive time.
fn start_sweeper(orch: &Arc<Orchestrator>) {
    let reg = orch.subagents();
    if reg.sweeper_started.swap(true, Ordering::SeqCst) {
        return;
    }
    let (weak, wake, engine) = (Arc::downgrade(orch), reg.sweeper_wake.clone(), orch.engine().clone());
    spawn_task(orch, async move {
        loop {
            let e = engine.clone();
            let next = blocking(move || e.store().read(|db| db.next_subagent_archive())).await;
            match next {
                Ok(Some(at)) => {
                    let wait = at - entry::now_ms();
                    if wait <= 0 {
                        let Some(orch) = weak.upgrade() else { return };
                        if archive_due(&orch).await.is_err() {
                            tokio::time::sleep(Duration::from_millis(1000)).await;
                        }
                        continue;
                    }
                    tokio::select! {
                        _ = tokio::time::sleep(Duration::from_millis(wait as u64)) => {}
                        _ = wake.notified() => {}
                    }
                }
                Ok(None) => wake.notified().await,
                Err(_) => {
                    tokio::select! {
                        _ = tokio::time::sleep(Duration::from_millis(1000)) => {}
                        _ = wake.notified() => {}
                    }
                }
            }
            if weak.strong_count() == 0 {
                return;
            }
        }
    });
}

/// Archives every record whose time has come: the child session and its transcript are
/// deleted, the record removed, `subagent.archived` emitted. A record that is somehow due while
/// its run or announce is unfinished loses its archive time instead.
async fn archive_due(orch: &Arc<Orchestrator>) -> Result<()> {
    let e = orch.engine().clone();
    let archived = blocking(move || {
        let due = e.store().read(|db| db.due_subagent_archives(entry::now_ms()))?;
        let mut archived = Vec::new();
        for r in due {
            if r.ended_at.is_none() || r.announce.status == "pending" {
                e.store().write(|db| {
                    if let Some(mut cur) = db.subagent_run(&r.run_id)? {
                        cur.archive_at_ms = None;
                        db.put_subagent_run(&cur)?;
                    }
                    Ok(())
                })?;
                continue;
            }
            let _ = e.delete_session(&Value::from(r.child_session_key.clone()), &json!({"deleteTranscript": true}));
            if e.store().write(|db| db.delete_subagent_run(&r.run_id))? {
                archived.push(r);
            }
        }
        Ok(archived)
    })
    .await?;
    for r in archived {
        orch.emit(
            "subagent.archived",
            Some(&r.run_id),
            Some(&r.requester_session_key),
            json!({"childSessionKey": r.child_session_key}),
        );
    }
    Ok(())
}

// ---- open, close, requester deletion ---------------------------------------------------------

/// On open: what was left unannounced is announced; runs that were in flight end as
/// interrupted and are announced; runs still going under a live process are waited for again;
/// a cleanup cut short is finished; the archive timer is set.
pub async fn recover(orch: &Arc<Orchestrator>) -> Result<()> {
    start_sweeper(orch);
    let e = orch.engine().clone();
    let records = blocking(move || e.store().read(|db| db.subagent_runs(None))).await?;
    for rec in records {
        if rec.announce.status != "pending" {
            if rec.cleanup_completed_at.is_none() && rec.ended_at.is_some() {
                finalize(orch, rec).await;
            }
            continue;
        }
        if rec.archive_at_ms.is_some() {
            // archiving waits for the announce (an imported record may carry the reference's
            // registration-based time)
            update(orch, &rec.run_id, |r| r.archive_at_ms.take().is_some()).await?;
        }
        if rec.ended_at.is_some() {
            enqueue_announce(orch, &rec).await;
            continue;
        }
        let (e, id) = (orch.engine().clone(), rec.run_id.clone());
        let run = blocking(move || e.store().read(|db| db.run(&id))).await?;
        match run {
            Some(r) if r.status == "running" => arm_completion(orch, rec.run_id.clone()),
            Some(r) => {
                let status = match r.status.as_str() {
                    "ok" => RunStatus::Ok,
                    "timeout" => RunStatus::Timeout,
                    _ => RunStatus::Error,
                };
                let snap = RunSnapshot {
                    run_id: r.run_id,
                    status,
                    started_at: r.started_at,
                    ended_at: r.ended_at,
                    error: r.error,
                };
                run_ended(orch, &rec.run_id, snap).await;
            }
            None => {
                let snap = RunSnapshot {
                    run_id: rec.run_id.clone(),
                    status: RunStatus::Error,
                    started_at: rec.started_at,
                    ended_at: None,
                    error: Some(INTERRUPTED.to_owned()),
                };
                run_ended(orch, &rec.run_id, snap).await;
            }
        }
    }
    Ok(())
}

/// Stops the sweeper, the completion waits and the announce queues. Idempotent.
pub fn close(orch: &Orchestrator) {
    let reg = orch.subagents();
    let _ = reg.shutdown.send(true);
    let queues: Vec<AnnounceQueue> = lock(&reg.queues).drain().map(|(_, q)| q).collect();
    drop(queues);
    lock(&reg.announce_runs).clear();
}

/// A requester session was deleted: its running children are stopped, end with `error`
/// `stopped: requester session deleted`, and are not announced; their cleanup runs.
pub async fn on_session_deleted(orch: &Arc<Orchestrator>, key: &str) -> Result<()> {
    let canonical = orch.engine().config().key_model().canonical(key)?;
    let e = orch.engine().clone();
    let running = blocking(move || e.store().read(|db| db.running_subagent_runs(&canonical))).await?;
    for rec in running {
        // the record first: the completion wait then finds it ended and announces nothing
        let now = entry::now_ms();
        let stopped = update(orch, &rec.run_id, move |r| {
            if r.ended_at.is_some() {
                return false;
            }
            r.ended_at = Some(now);
            r.outcome = Some(RunOutcome { status: "error".into(), error: Some(REQUESTER_DELETED.into()) });
            r.announce.status = "skipped".into();
            r.archive_at_ms = None;
            true
        })
        .await?;
        orch.runs().abort(&rec.run_id, REQUESTER_DELETED);
        if let Some(r) = stopped {
            finalize(orch, r).await;
        }
    }
    Ok(())
}

/// Shared by the tests of `spawn` and of this module: an orchestrator over a fake host, and
/// bounded waits.
#[cfg(test)]
pub(crate) mod testkit {
    use super::*;
    use crate::engine::Engine;
    pub use crate::host::testing::FakeHost;
    use crate::host::AgentRunRequest;
    use crate::store::Store;

    pub fn tmp_db() -> String {
        let dir = std::env::temp_dir().join(format!("st-sub-{}", uuid::Uuid::new_v4()));
        dir.join("s.db").to_string_lossy().into_owned()
    }

    pub async fn open_at(path: &str, config: Value, host: Arc<FakeHost>) -> Arc<Orchestrator> {
        let engine = Engine::new(Store::open(path).unwrap(), Config::from_json(&config).unwrap(), None);
        let o = Orchestrator::new(Arc::new(engine), host);
        o.start().await.unwrap();
        o
    }

    pub async fn open(config: Value, host: Arc<FakeHost>) -> Arc<Orchestrator> {
        open_at(":memory:", config, host).await
    }

    pub async fn spawn(o: &Arc<Orchestrator>, params: Value, ctx: Value) -> Value {
        o.tool("sessions_spawn", params, ctx, false).await.unwrap()
    }

    /// Polls `check` every 10 ms for at most 5 s.
    pub async fn until(what: &str, mut check: impl FnMut() -> bool) {
        for _ in 0..500 {
            if check() {
                return;
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        panic!("still waiting after 5 s: {what}");
    }

    pub fn record(o: &Orchestrator, run_id: &str) -> Option<SubagentRun> {
        o.engine().store().read(|db| db.subagent_run(run_id)).unwrap()
    }

    pub fn requests_in(host: &FakeHost, lane: Lane) -> Vec<AgentRunRequest> {
        host.requests().into_iter().filter(|r| r.options.lane == lane).collect()
    }

    /// A host: child runs answer `child says hi`, every other run `ok`.
    pub fn replying_host() -> Arc<FakeHost> {
        Arc::new(FakeHost::new(|req| {
            Box::pin(async move {
                let text = if req.options.lane == Lane::Subagent { "child says hi" } else { "ok" };
                Ok(json!({"reply": text}))
            })
        }))
    }

    pub fn str_of(v: &Value, k: &str) -> String {
        v.get(k).and_then(Value::as_str).unwrap_or_default().to_owned()
    }
}

#[cfg(test)]
mod tests {
    use super::testkit::*;
    use super::*;
    use crate::host::AgentRunRequest;

    fn announced(o: &Orchestrator, run_id: &str) -> bool {
        record(o, run_id).is_some_and(|r| r.announce.status == "delivered")
    }

    // ---- P12–P15: the two runs, their lanes, routes and the cleanup ----------------------------

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn p12_p13_a_child_run_then_one_delivered_announce_on_the_requester_and_delete_cleanup() {
        let host = replying_host();
        let o = open(json!({}), host.clone()).await;
        let out = spawn(
            &o,
            json!({"task": "count the stars", "cleanup": "delete"}),
            json!({"agentSessionKey": "discord:group:req", "agentChannel": "discord"}),
        )
        .await;
        assert_eq!(out["status"], "accepted", "{out}");
        let (child, run_id) = (str_of(&out, "childSessionKey"), str_of(&out, "runId"));
        until("the record is removed by the delete cleanup", || record(&o, &run_id).is_none()).await;
        let reqs = host.requests();
        assert_eq!(reqs.len(), 2, "{reqs:?}");
        let (c, a) = (&reqs[0], &reqs[1]);
        assert_eq!(
            (c.session_key.as_str(), c.options.lane, c.options.deliver),
            (child.as_str(), Lane::Subagent, false)
        );
        assert_eq!(c.options.channel.as_deref(), Some("discord"));
        assert_eq!(c.message, "count the stars");
        assert_eq!(
            (a.session_key.as_str(), a.options.lane, a.options.deliver),
            ("agent:main:discord:group:req", Lane::Announce, true)
        );
        assert!(a.message.contains("background task"), "{}", a.message);
        assert!(a.message.contains("child says hi"));
        assert_eq!(a.options.channel.as_deref(), Some("discord"));
        assert!(host.deliveries().is_empty(), "no direct send");
        assert_eq!(o.engine().get_session(&json!(child)).unwrap(), None, "the child session is deleted");
        let (_, sid, page) = o.engine().chat_history(&json!(child), &Value::Null).unwrap();
        assert!(sid.is_none() && page.messages.is_empty());
        // the announce run's incoming message names the child as its source
        let (_, _, page) = o.engine().chat_history(&json!("agent:main:discord:group:req"), &Value::Null).unwrap();
        let first: Value = serde_json::from_str(&page.messages[0].json).unwrap();
        assert_eq!(first["provenance"]["kind"], "announce");
        assert_eq!(first["provenance"]["sourceSessionKey"], json!(child));
        assert!(host.event_kinds().contains(&"subagent.announced"));
        // announced once
        tokio::time::sleep(Duration::from_millis(100)).await;
        assert_eq!(host.requests().len(), 2);
        o.close().await;
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn p14_the_label_titles_the_trigger_is_patched_back_and_the_announce_goes_to_main() {
        let host = replying_host();
        let o = open(json!({}), host.clone()).await;
        let out = spawn(&o, json!({"task": "t", "label": "my-task"}), json!({"agentSessionKey": "main"})).await;
        let (child, run_id) = (str_of(&out, "childSessionKey"), str_of(&out, "runId"));
        until("announced", || announced(&o, &run_id)).await;
        until("cleanup done", || record(&o, &run_id).is_some_and(|r| r.cleanup_completed_at.is_some())).await;
        let a = requests_in(&host, Lane::Announce);
        assert_eq!(a[0].session_key, "agent:main:main");
        assert!(
            a[0].message.starts_with("A background task \"my-task\" just completed successfully."),
            "{}",
            a[0].message
        );
        assert_eq!(o.engine().get_session(&json!(child)).unwrap().unwrap()["label"], "my-task");
        let rec = record(&o, &run_id).unwrap();
        assert_eq!((rec.label.as_deref(), rec.requester_display_key.as_str()), (Some("my-task"), "main"));
        o.close().await;
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn p15_p25_the_requester_origin_routes_the_direct_announce() {
        let host = replying_host();
        let o = open(json!({}), host.clone()).await;
        let out = spawn(
            &o,
            json!({"task": "t"}),
            json!({"agentSessionKey": "main", "agentChannel": " whatsapp ", "agentAccountId": " acct-987 ", "agentTo": "+1555", "agentThreadId": 42}),
        )
        .await;
        let run_id = str_of(&out, "runId");
        until("announced", || announced(&o, &run_id)).await;
        let a = &requests_in(&host, Lane::Announce)[0];
        assert_eq!(
            (
                a.options.channel.as_deref(),
                a.options.account_id.as_deref(),
                a.options.to.as_deref(),
                a.options.thread_id.as_deref()
            ),
            (Some("whatsapp"), Some("acct-987"), Some("+1555"), Some("42"))
        );
        assert!(a.options.deliver);
        let rec = record(&o, &run_id).unwrap();
        assert_eq!(
            rec.requester_origin,
            Some(json!({"channel": "whatsapp", "to": "+1555", "accountId": "acct-987", "threadId": 42}))
        );
        o.close().await;
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn p15_without_an_origin_the_requester_entry_route_is_used() {
        let host = replying_host();
        let o = open(json!({}), host.clone()).await;
        o.engine()
            .upsert_session(&json!("main"), &json!({"lastChannel": "whatsapp", "lastTo": "+1", "lastAccountId": "kev"}))
            .unwrap();
        let out = spawn(&o, json!({"task": "t"}), json!({"agentSessionKey": "main"})).await;
        let run_id = str_of(&out, "runId");
        until("announced", || announced(&o, &run_id)).await;
        let a = &requests_in(&host, Lane::Announce)[0];
        assert_eq!((a.options.channel.as_deref(), a.options.account_id.as_deref()), (Some("whatsapp"), Some("kev")));
        o.close().await;
    }

    // ---- P20, P21, P27: the trigger and its stats line ---------------------------------------

    async fn trigger_for(
        config: Value,
        outcome: Option<RunOutcome>,
        child_entry: Value,
        reply: Option<&str>,
    ) -> String {
        let o = open(config, replying_host()).await;
        let child = "agent:main:subagent:fixed";
        o.engine().upsert_session(&json!(child), &child_entry).unwrap();
        if let Some(text) = reply {
            o.engine()
                .append_messages(
                    &json!(child),
                    &json!([{"role": "assistant", "content": [{"type": "text", "text": text}]}]),
                )
                .unwrap();
        }
        let rec = SubagentRun {
            run_id: "r".into(),
            child_session_key: child.into(),
            requester_session_key: "agent:main:main".into(),
            requester_display_key: "main".into(),
            requester_origin: None,
            task: "dig".into(),
            label: None,
            cleanup: "keep".into(),
            created_at: 1_000,
            started_at: Some(1_000),
            ended_at: Some(66_000),
            outcome,
            announce: AnnounceState { status: "pending".into(), attempts: 0, idempotency_key: "k".into() },
            archive_at_ms: None,
            cleanup_completed_at: None,
        };
        let t = build_trigger(&o, &rec).await.unwrap();
        o.close().await;
        t
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn p20_a_failed_child_trigger_has_the_error_the_findings_and_the_stats() {
        let t = trigger_for(
            json!({}),
            Some(RunOutcome { status: "error".into(), error: Some("boom".into()) }),
            json!({}),
            Some("partial findings"),
        )
        .await;
        assert!(
            t.starts_with("A background task \"dig\" just failed: boom.\n\nFindings:\npartial findings\n\nStats: "),
            "{t}"
        );
        assert!(t.ends_with("(e.g., internal task with no user-facing result)."));
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn p21_ok_unknown_and_no_output() {
        let ok = trigger_for(json!({}), Some(RunOutcome { status: "ok".into(), error: None }), json!({}), None).await;
        assert!(ok.contains("just completed successfully.") && ok.contains("Findings:\n(no output)\n"), "{ok}");
        let unknown = trigger_for(json!({}), None, json!({}), Some("x")).await;
        assert!(unknown.contains("just finished with unknown status."));
        let timeout =
            trigger_for(json!({}), Some(RunOutcome { status: "timeout".into(), error: None }), json!({}), None).await;
        assert!(timeout.contains("just timed out."));
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn p27_the_stats_line_reads_usage_and_cost_from_the_child_entry() {
        let config = json!({"models": {"providers": {"anthropic": {"models": [{"id": "claude", "cost": {"input": 3, "output": 15}}]}}}});
        let t = trigger_for(
            config,
            Some(RunOutcome { status: "ok".into(), error: None }),
            json!({"inputTokens": 10_000, "outputTokens": 2_345, "model": "claude", "modelProvider": "anthropic"}),
            None,
        )
        .await;
        let stats = t.lines().find(|l| l.starts_with("Stats: ")).unwrap();
        assert!(
            stats.starts_with("Stats: runtime 1m5s \u{2022} tokens 12.3k (in 10.0k / out 2.3k) \u{2022} est $0.07 \u{2022} sessionKey agent:main:subagent:fixed \u{2022} sessionId "),
            "{stats}"
        );
        let none = trigger_for(json!({}), None, json!({}), None).await;
        assert!(none.contains("\u{2022} tokens n/a \u{2022}"), "{none}");
    }

    // ---- P22–P24: steer and queue ----------------------------------------------------------------

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn p22_steer_mode_injects_the_trigger_and_starts_no_announce_run() {
        let host = Arc::new(
            FakeHost::new(|_| Box::pin(async { Ok(json!({"reply": "child says hi"})) }))
                .with_steer(|_, _| Box::pin(async { Ok(true) })),
        );
        let o = open(json!({}), host.clone()).await;
        o.engine().upsert_session(&json!("main"), &json!({"queueMode": "steer"})).unwrap();
        let out = spawn(&o, json!({"task": "t"}), json!({"agentSessionKey": "main"})).await;
        let run_id = str_of(&out, "runId");
        until("announced", || announced(&o, &run_id)).await;
        let steers = host.steers.lock().unwrap().clone();
        assert_eq!(steers.len(), 1);
        assert_eq!(steers[0].0, "agent:main:main");
        assert!(steers[0].1.contains("child says hi"));
        assert!(requests_in(&host, Lane::Announce).is_empty());
        o.close().await;
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_host_without_steer_gets_the_direct_announce_in_steer_mode() {
        let host = replying_host();
        let o = open(json!({}), host.clone()).await;
        o.engine().upsert_session(&json!("main"), &json!({"queueMode": "steer"})).unwrap();
        let out = spawn(&o, json!({"task": "t"}), json!({"agentSessionKey": "main"})).await;
        until("announced", || announced(&o, &str_of(&out, "runId"))).await;
        assert!(host.steers.lock().unwrap().is_empty());
        assert_eq!(requests_in(&host, Lane::Announce).len(), 1);
        o.close().await;
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_steer_the_host_declines_falls_back_to_the_direct_announce() {
        let host = Arc::new(
            FakeHost::new(|_| Box::pin(async { Ok(json!({"reply": "r"})) }))
                .with_steer(|_, _| Box::pin(async { Ok(false) })),
        );
        let o = open(json!({}), host.clone()).await;
        o.engine().upsert_session(&json!("main"), &json!({"queueMode": "steer-backlog"})).unwrap();
        let out = spawn(&o, json!({"task": "t"}), json!({"agentSessionKey": "main"})).await;
        until("announced", || announced(&o, &str_of(&out, "runId"))).await;
        assert_eq!(host.steers.lock().unwrap().len(), 1);
        assert_eq!(requests_in(&host, Lane::Announce).len(), 1);
        o.close().await;
    }

    #[test]
    fn queue_settings_come_from_the_entry_then_the_channel_then_the_config_then_defaults() {
        let entry = |v: Value| v.as_object().cloned().unwrap();
        let cfg = Config::from_json(&json!({"messages": {"queue": {
            "mode": "followup", "byChannel": {"whatsapp": "steer+backlog"}, "debounceMs": 500,
            "debounceMsByChannel": {"whatsapp": 50}, "cap": 3, "drop": "new"
        }}}))
        .unwrap();
        assert_eq!(
            queue_settings(&Config::default(), &entry(json!({}))),
            QueueSettings { mode: QueueMode::Collect, debounce_ms: 1000, cap: 20, drop: DropPolicy::Summarize }
        );
        assert_eq!(
            queue_settings(&cfg, &entry(json!({"lastChannel": "WhatsApp"}))),
            QueueSettings { mode: QueueMode::SteerBacklog, debounce_ms: 50, cap: 3, drop: DropPolicy::New }
        );
        assert_eq!(
            queue_settings(
                &cfg,
                &entry(json!({"queueMode": "Interrupt", "queueDebounceMs": 0, "queueCap": 0, "queueDrop": "oldest"}))
            ),
            QueueSettings { mode: QueueMode::Interrupt, debounce_ms: 0, cap: 1, drop: DropPolicy::Old }
        );
        assert_eq!(queue_settings(&cfg, &entry(json!({"queueMode": "bogus"}))).mode, QueueMode::Followup);
    }

    #[test]
    fn the_overflow_summary_counts_and_lists_what_was_dropped() {
        assert_eq!(overflow_summary(1, &[]), "[Queue overflow] Dropped 1 announce due to cap.");
        assert_eq!(
            overflow_summary(2, &["a".into(), "b".into()]),
            "[Queue overflow] Dropped 2 announces due to cap.\nSummary:\n- a\n- b"
        );
        let long = summary_line(&format!("  many   words {}", "x".repeat(300)));
        assert_eq!(long.chars().count(), 160);
        assert!(long.starts_with("many words x") && long.ends_with('…'));
    }

    #[test]
    fn archive_time_keeps_fractions_of_a_minute() {
        let cfg = |m: Value| {
            Config::from_json(&json!({"agents": {"defaults": {"subagents": {"archiveAfterMinutes": m}}}})).unwrap()
        };
        assert_eq!(archive_after_ms(&cfg(json!(0.01))), Some(600));
        assert_eq!(archive_after_ms(&cfg(json!(1))), Some(60_000));
        assert_eq!(archive_after_ms(&cfg(json!(0))), None);
        assert_eq!(archive_after_ms(&Config::default()), Some(3_600_000));
    }

    /// A host whose `nested` runs on the requester hold until the gate opens.
    fn gated_host(gate: tokio::sync::watch::Receiver<bool>) -> Arc<FakeHost> {
        Arc::new(FakeHost::new(move |req: AgentRunRequest| {
            let mut gate = gate.clone();
            Box::pin(async move {
                match req.options.lane {
                    Lane::Nested => {
                        let _ = gate.wait_for(|open| *open).await;
                        Ok(json!({"reply": "busy done"}))
                    }
                    Lane::Subagent => Ok(json!({"reply": format!("result of {}", req.message)})),
                    Lane::Announce => Ok(json!({"reply": "ok"})),
                }
            })
        }))
    }

    fn busy_run(o: &Arc<Orchestrator>, key: &str) -> String {
        let spec = RunSpec {
            session_key: key.into(),
            message: "busy".into(),
            provenance: Provenance { kind: "inter_session", source_session_key: None },
            options: RunOptions::new(Lane::Nested, 30_000, "c"),
            chain_limit: None,
        };
        o.runs().start(o.engine().clone(), o.host().clone(), spec).unwrap().unwrap()
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn p23_collect_mode_queues_behind_the_active_run_and_routes_by_the_entry() {
        let (open_gate, gate) = tokio::sync::watch::channel(false);
        let host = gated_host(gate);
        let o = open(json!({}), host.clone()).await;
        o.engine()
            .upsert_session(
                &json!("main"),
                &json!({"queueMode": "collect", "queueDebounceMs": 0, "lastChannel": "whatsapp", "lastTo": "+1555", "lastAccountId": "kev"}),
            )
            .unwrap();
        busy_run(&o, "agent:main:main");
        let out = spawn(&o, json!({"task": "t1"}), json!({"agentSessionKey": "main", "agentChannel": "discord"})).await;
        let run_id = str_of(&out, "runId");
        until("the child ended", || record(&o, &run_id).is_some_and(|r| r.ended_at.is_some())).await;
        tokio::time::sleep(Duration::from_millis(100)).await;
        assert!(requests_in(&host, Lane::Announce).is_empty(), "queued while the requester is busy");
        open_gate.send(true).unwrap();
        until("announced", || announced(&o, &run_id)).await;
        let a = requests_in(&host, Lane::Announce);
        assert_eq!(a.len(), 1);
        assert_eq!(
            (a[0].options.channel.as_deref(), a[0].options.to.as_deref(), a[0].options.account_id.as_deref()),
            (Some("whatsapp"), Some("+1555"), Some("kev"))
        );
        assert!(
            a[0].message.starts_with(&format!("{QUEUED_TITLE}\n\n---\nQueued #1\nA background task \"t1\"")),
            "{}",
            a[0].message
        );
        o.close().await;
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn p24_collect_mode_sends_announces_of_different_origins_separately() {
        let (open_gate, gate) = tokio::sync::watch::channel(false);
        let host = gated_host(gate);
        let o = open(json!({"messages": {"queue": {"mode": "collect", "debounceMs": 80}}}), host.clone()).await;
        o.engine().upsert_session(&json!("main"), &json!({})).unwrap();
        busy_run(&o, "agent:main:main");
        let mut ids = Vec::new();
        for acct in ["acct-a", "acct-b"] {
            let ctx =
                json!({"agentSessionKey": "main", "agentChannel": "whatsapp", "agentTo": "+1", "agentAccountId": acct});
            ids.push(str_of(&spawn(&o, json!({"task": acct}), ctx).await, "runId"));
        }
        until("both children ended", || ids.iter().all(|id| record(&o, id).is_some_and(|r| r.ended_at.is_some())))
            .await;
        tokio::time::sleep(Duration::from_millis(100)).await;
        open_gate.send(true).unwrap();
        until("both announced", || ids.iter().all(|id| announced(&o, id))).await;
        let mut accts: Vec<String> =
            requests_in(&host, Lane::Announce).iter().filter_map(|r| r.options.account_id.clone()).collect();
        accts.sort();
        assert_eq!(accts, ["acct-a", "acct-b"]);
        o.close().await;
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn an_overflowing_queue_records_the_dropped_announce_and_sends_the_summary_too() {
        let (open_gate, gate) = tokio::sync::watch::channel(false);
        let host = gated_host(gate);
        let config =
            json!({"messages": {"queue": {"mode": "followup", "debounceMs": 0, "cap": 1, "drop": "summarize"}}});
        let o = open(config, host.clone()).await;
        o.engine().upsert_session(&json!("main"), &json!({})).unwrap();
        busy_run(&o, "agent:main:main");
        let first = str_of(&spawn(&o, json!({"task": "first"}), json!({"agentSessionKey": "main"})).await, "runId");
        until("first queued", || {
            lock(&o.subagents().queues).get("agent:main:main").is_some_and(|q| q.items.len() == 1)
        })
        .await;
        let second = str_of(&spawn(&o, json!({"task": "second"}), json!({"agentSessionKey": "main"})).await, "runId");
        until("the first is dropped", || record(&o, &first).is_some_and(|r| r.announce.status == "failed")).await;
        open_gate.send(true).unwrap();
        until("the second announced", || announced(&o, &second)).await;
        let msgs: Vec<String> = requests_in(&host, Lane::Announce).into_iter().map(|r| r.message).collect();
        assert_eq!(msgs.len(), 2, "{msgs:?}");
        assert_eq!(msgs[0], "[Queue overflow] Dropped 1 announce due to cap.\nSummary:\n- first");
        assert!(msgs[1].starts_with("A background task \"second\""), "the next item keeps its own text");
        let failed: Vec<_> = host.events().into_iter().filter(|e| e.kind == "delivery.failed").collect();
        assert_eq!(failed.len(), 1);
        assert!(failed[0].details["error"].as_str().unwrap().starts_with("dropped: "));
        o.close().await;
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_requester_whose_send_policy_denies_gets_no_announce_run() {
        let host = replying_host();
        let o = open(json!({}), host.clone()).await;
        o.engine().upsert_session(&json!("main"), &json!({"sendPolicy": "deny"})).unwrap();
        let out = spawn(&o, json!({"task": "t"}), json!({"agentSessionKey": "main"})).await;
        let run_id = str_of(&out, "runId");
        until("skipped", || record(&o, &run_id).is_some_and(|r| r.announce.status == "skipped")).await;
        assert!(requests_in(&host, Lane::Announce).is_empty());
        let ev = host.events().into_iter().find(|e| e.kind == "delivery.blocked").unwrap();
        assert_eq!(ev.details["reason"], "send blocked by session policy");
        o.close().await;
    }

    // ---- DECISIONS: retries, timeout, requester deletion ----------------------------------------

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn an_announce_that_fails_twice_is_tried_three_times_under_one_key() {
        let tries = Arc::new(std::sync::atomic::AtomicUsize::new(0));
        let t2 = tries.clone();
        let host = Arc::new(FakeHost::new(move |req| {
            let n = if req.options.lane == Lane::Announce { t2.fetch_add(1, Ordering::SeqCst) + 1 } else { 0 };
            Box::pin(async move {
                if (1..=2).contains(&n) {
                    Err(format!("requester busy {n}"))
                } else {
                    Ok(json!({"reply": "fine"}))
                }
            })
        }));
        let o = open(json!({"session": {"outbox": {"backoffMs": 10}}}), host.clone()).await;
        let out = spawn(&o, json!({"task": "t"}), json!({"agentSessionKey": "main"})).await;
        let run_id = str_of(&out, "runId");
        until("announced", || announced(&o, &run_id)).await;
        let rec = record(&o, &run_id).unwrap();
        assert_eq!(rec.announce.attempts, 3);
        assert_eq!(tries.load(Ordering::SeqCst), 3);
        let keys: Vec<String> = requests_in(&host, Lane::Announce).into_iter().map(|r| r.idempotency_key).collect();
        assert_eq!(keys, vec![rec.announce.idempotency_key.clone(); 3], "the host sees one key for every try");
        let items = o.engine().store().read(|db| db.outbox_items()).unwrap();
        assert_eq!(items.len(), 1);
        assert_eq!(
            (items[0].idempotency_key.as_str(), items[0].status.as_str()),
            (rec.announce.idempotency_key.as_str(), "delivered")
        );
        let failed = host.events().into_iter().filter(|e| e.kind == "delivery.failed").count();
        assert_eq!(failed, 2);
        o.close().await;
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_child_that_outlives_its_time_limit_is_announced_as_timed_out() {
        let host = Arc::new(FakeHost::new(|req| {
            Box::pin(async move {
                if req.options.lane == Lane::Subagent {
                    tokio::time::sleep(Duration::from_secs(4)).await;
                }
                Ok(json!({"reply": "ok"}))
            })
        }));
        let o = open(json!({}), host.clone()).await;
        let out = spawn(&o, json!({"task": "slow", "runTimeoutSeconds": 1}), json!({"agentSessionKey": "main"})).await;
        let run_id = str_of(&out, "runId");
        until("announced", || announced(&o, &run_id)).await;
        assert_eq!(record(&o, &run_id).unwrap().outcome, Some(RunOutcome { status: "timeout".into(), error: None }));
        assert!(requests_in(&host, Lane::Announce)[0]
            .message
            .starts_with("A background task \"slow\" just timed out."));
        o.close().await;
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn deleting_the_requester_stops_its_running_children_without_an_announce() {
        let (_open_gate, gate) = tokio::sync::watch::channel(false);
        let host = Arc::new(FakeHost::new(move |_| {
            let mut gate = gate.clone();
            Box::pin(async move {
                let _ = gate.wait_for(|open| *open).await;
                Ok(json!({"reply": "late"}))
            })
        }));
        let o = open(json!({}), host.clone()).await;
        let ctx = json!({"agentSessionKey": "agent:main:work"});
        let run_id = str_of(&spawn(&o, json!({"task": "t"}), ctx.clone()).await, "runId");
        let other = str_of(&spawn(&o, json!({"task": "t"}), json!({"agentSessionKey": "main"})).await, "runId");
        o.engine().delete_session(&json!("agent:main:work"), &Value::Null).unwrap();
        on_session_deleted(&o, "work").await.unwrap();
        let rec = record(&o, &run_id).unwrap();
        assert_eq!(rec.outcome, Some(RunOutcome { status: "error".into(), error: Some(REQUESTER_DELETED.into()) }));
        assert_eq!(rec.announce.status, "skipped");
        assert!(rec.cleanup_completed_at.is_some());
        let w = o.wait_run(&run_id, 5_000).await.unwrap();
        assert_eq!((w["status"].as_str(), w["error"].as_str()), (Some("error"), Some(REQUESTER_DELETED)));
        tokio::time::sleep(Duration::from_millis(100)).await;
        assert!(requests_in(&host, Lane::Announce).is_empty());
        assert!(o.engine().store().read(|db| db.outbox_items()).unwrap().is_empty());
        assert!(record(&o, &other).unwrap().ended_at.is_none(), "another requester's child runs on");
        o.close().await;
    }

    // ---- P26 and DECISIONS: archiving ------------------------------------------------------------

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn p26_archiving_counts_from_the_end_after_the_announce_and_never_while_running() {
        let (open_gate, gate) = tokio::sync::watch::channel(false);
        let host = Arc::new(FakeHost::new(move |req| {
            let mut gate = gate.clone();
            Box::pin(async move {
                if req.options.lane == Lane::Subagent {
                    let _ = gate.wait_for(|open| *open).await;
                }
                Ok(json!({"reply": "done"}))
            })
        }));
        // 0.01 min = 600 ms
        let o = open(json!({"agents": {"defaults": {"subagents": {"archiveAfterMinutes": 0.01}}}}), host.clone()).await;
        let out = spawn(&o, json!({"task": "t"}), json!({"agentSessionKey": "main"})).await;
        let (child, run_id) = (str_of(&out, "childSessionKey"), str_of(&out, "runId"));
        tokio::time::sleep(Duration::from_millis(900)).await;
        let rec = record(&o, &run_id).expect("a running child is never archived");
        assert_eq!(rec.archive_at_ms, None);
        open_gate.send(true).unwrap();
        until("announced", || announced(&o, &run_id)).await;
        until("archive time set", || record(&o, &run_id).is_none_or(|r| r.archive_at_ms.is_some())).await;
        if let Some(rec) = record(&o, &run_id) {
            let (ended, at) = (rec.ended_at.unwrap(), rec.archive_at_ms.unwrap());
            assert_eq!(at - ended, 600, "counted from the run's end");
        }
        until("archived", || record(&o, &run_id).is_none()).await;
        assert_eq!(o.engine().get_session(&json!(child)).unwrap(), None);
        let ev = host.events().into_iter().find(|e| e.kind == "subagent.archived").unwrap();
        assert_eq!(ev.details["childSessionKey"], json!(child));
        o.close().await;
    }

    // ---- P16–P19, DECISIONS #3: restart recovery, for real on a file ------------------------------

    /// A host whose runs in `lane` never finish.
    fn hanging_in(lane: Lane) -> Arc<FakeHost> {
        Arc::new(FakeHost::new(move |req| {
            Box::pin(async move {
                if req.options.lane == lane {
                    std::future::pending::<()>().await;
                }
                Ok(json!({"reply": "child says hi"}))
            })
        }))
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn p16_a_child_in_flight_when_the_store_closed_ends_interrupted_and_is_announced_on_the_next_open() {
        let path = tmp_db();
        let first = hanging_in(Lane::Subagent);
        let o1 = open_at(&path, json!({}), first.clone()).await;
        let ctx = json!({"agentSessionKey": "main", "agentChannel": " whatsapp ", "agentAccountId": " acct-main "});
        let out = spawn(&o1, json!({"task": "long job"}), ctx).await;
        let run_id = str_of(&out, "runId");
        until("the child run started", || !requests_in(&first, Lane::Subagent).is_empty()).await;
        o1.close().await;
        assert!(requests_in(&first, Lane::Announce).is_empty());

        let second = replying_host();
        let o2 = open_at(&path, json!({}), second.clone()).await;
        until("announced by the next open", || announced(&o2, &run_id)).await;
        let rec = record(&o2, &run_id).unwrap();
        assert_eq!(rec.outcome, Some(RunOutcome { status: "error".into(), error: Some(INTERRUPTED.into()) }));
        assert_eq!(rec.requester_origin, Some(json!({"channel": "whatsapp", "accountId": "acct-main"})));
        let a = requests_in(&second, Lane::Announce);
        assert_eq!(a.len(), 1);
        assert!(a[0].message.contains(&format!("just failed: {INTERRUPTED}.")), "{}", a[0].message);
        assert_eq!(
            (a[0].options.channel.as_deref(), a[0].options.account_id.as_deref()),
            (Some("whatsapp"), Some("acct-main"))
        );
        let w = o2.wait_run(&run_id, 0).await.unwrap();
        assert_eq!((w["status"].as_str(), w["error"].as_str()), (Some("error"), Some(INTERRUPTED)));
        o2.close().await;
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn p19_an_announce_cut_short_by_close_is_retried_by_the_next_open_with_the_same_key() {
        let path = tmp_db();
        let first = hanging_in(Lane::Announce);
        let o1 = open_at(&path, json!({}), first.clone()).await;
        let run_id = str_of(&spawn(&o1, json!({"task": "t"}), json!({"agentSessionKey": "main"})).await, "runId");
        until("the announce run started", || !requests_in(&first, Lane::Announce).is_empty()).await;
        let key = record(&o1, &run_id).unwrap().announce.idempotency_key;
        o1.close().await;

        let second = replying_host();
        let o2 = open_at(&path, json!({}), second.clone()).await;
        until("announced by the next open", || announced(&o2, &run_id)).await;
        let rec = record(&o2, &run_id).unwrap();
        assert_eq!(rec.announce.idempotency_key, key);
        assert_eq!(rec.outcome, Some(RunOutcome { status: "ok".into(), error: None }));
        let items = o2.engine().store().read(|db| db.outbox_items()).unwrap();
        assert_eq!(items.len(), 1);
        assert_eq!(items[0].idempotency_key, key);
        let tries: Vec<String> = requests_in(&first, Lane::Announce)
            .into_iter()
            .chain(requests_in(&second, Lane::Announce))
            .map(|r| r.idempotency_key)
            .collect();
        assert_eq!(tries, [key.clone(), key], "the host sees the same key before and after the restart");
        assert_eq!(requests_in(&second, Lane::Subagent).len(), 0, "the child is not run again");
        o2.close().await;
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn p19_a_failed_try_before_close_counts_and_the_next_open_delivers() {
        let path = tmp_db();
        let first = Arc::new(FakeHost::new(|req| {
            Box::pin(async move {
                match req.options.lane {
                    Lane::Announce => Err("requester offline".to_owned()),
                    _ => Ok(json!({"reply": "child says hi"})),
                }
            })
        }));
        let config = json!({"session": {"outbox": {"backoffMs": 800}}});
        let o1 = open_at(&path, config.clone(), first.clone()).await;
        let run_id = str_of(&spawn(&o1, json!({"task": "t"}), json!({"agentSessionKey": "main"})).await, "runId");
        until("one failed try", || {
            o1.engine().store().read(|db| db.outbox_items()).unwrap().first().is_some_and(|i| i.attempts == 1)
        })
        .await;
        o1.close().await;
        let o2 = open_at(&path, config, replying_host()).await;
        until("announced and cleaned up by the next open", || {
            record(&o2, &run_id).is_some_and(|r| r.announce.status == "delivered" && r.cleanup_completed_at.is_some())
        })
        .await;
        assert_eq!(record(&o2, &run_id).unwrap().announce.attempts, 2);
        o2.close().await;
    }

    fn imported(run_id: &str, ended: Option<i64>, status: &str) -> SubagentRun {
        SubagentRun {
            run_id: run_id.into(),
            child_session_key: format!("agent:main:subagent:{run_id}"),
            requester_session_key: "agent:main:main".into(),
            requester_display_key: "main".into(),
            requester_origin: Some(json!({"channel": "whatsapp", "accountId": "acct-main"})),
            task: format!("task {run_id}"),
            label: None,
            cleanup: "keep".into(),
            created_at: 1_000,
            started_at: Some(1_000),
            ended_at: ended,
            outcome: ended.map(|_| RunOutcome { status: "ok".into(), error: None }),
            announce: AnnounceState { status: status.into(), attempts: 0, idempotency_key: format!("key-{run_id}") },
            // the reference's registration-based archive time, long past
            archive_at_ms: Some(2_000),
            cleanup_completed_at: (status != "pending").then_some(3_000),
        }
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn p17_imported_records_in_flight_ended_and_settled_are_each_resumed_correctly() {
        let path = tmp_db();
        {
            let store = crate::store::Store::open(&path).unwrap();
            store
                .write(|db| {
                    db.put_subagent_run(&imported("inflight", None, "pending"))?;
                    db.put_subagent_run(&imported("ended", Some(5_000), "pending"))?;
                    db.put_subagent_run(&imported("settled", Some(5_000), "delivered"))?;
                    // a run of a process that was killed (its pid is gone) is still marked running
                    db.put_subagent_run(&imported("killed", None, "pending"))?;
                    let run = crate::store::runs::RunRecord {
                        run_id: "killed".into(),
                        session_key: "agent:main:subagent:killed".into(),
                        lane: "subagent".into(),
                        chain_id: Some("c".into()),
                        status: "running".into(),
                        started_at: Some(1_000),
                        ended_at: None,
                        error: None,
                    };
                    db.insert_run(&run, "4294967295:dead")
                })
                .unwrap();
            store.close();
        }
        let host = replying_host();
        let o =
            open_at(&path, json!({"agents": {"defaults": {"subagents": {"archiveAfterMinutes": 0}}}}), host.clone())
                .await;
        until("the unannounced records announced", || {
            ["inflight", "ended", "killed"].iter().all(|id| announced(&o, id))
        })
        .await;
        let killed = record(&o, "killed").unwrap();
        assert_eq!(killed.outcome, Some(RunOutcome { status: "error".into(), error: Some(INTERRUPTED.into()) }));
        let inflight = record(&o, "inflight").unwrap();
        assert_eq!(inflight.outcome, Some(RunOutcome { status: "error".into(), error: Some(INTERRUPTED.into()) }));
        assert_eq!(record(&o, "ended").unwrap().outcome, Some(RunOutcome { status: "ok".into(), error: None }));
        let msgs: Vec<String> = requests_in(&host, Lane::Announce).into_iter().map(|r| r.message).collect();
        assert_eq!(msgs.len(), 3, "the settled record is not announced again: {msgs:?}");
        assert!(msgs.iter().any(|m| m.starts_with("A background task \"task ended\" just completed successfully.")));
        // the settled record's archive time had come: archived; the others lost the
        // registration-based time (archiving is off here, so they keep their records)
        until("the settled record is archived", || record(&o, "settled").is_none()).await;
        assert_eq!(record(&o, "ended").unwrap().archive_at_ms, None);
        assert_eq!(record(&o, "inflight").unwrap().archive_at_ms, None);
        o.close().await;
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn list_filters_by_the_canonical_requester_in_created_order() {
        let o = open(json!({}), replying_host()).await;
        let a = str_of(&spawn(&o, json!({"task": "a"}), json!({"agentSessionKey": "main"})).await, "runId");
        let b = str_of(&spawn(&o, json!({"task": "b"}), json!({"agentSessionKey": "agent:main:other"})).await, "runId");
        let c = str_of(&spawn(&o, json!({"task": "c"}), json!({"agentSessionKey": "agent:main:main"})).await, "runId");
        let ids = |v: Vec<Value>| v.iter().map(|r| str_of(r, "runId")).collect::<Vec<_>>();
        assert_eq!(ids(list(&o, Some("main")).unwrap()), [a.clone(), c.clone()]);
        assert_eq!(ids(list(&o, None).unwrap()).len(), 3);
        assert_eq!(ids(list(&o, Some("other")).unwrap()), [b]);
        let first = &list(&o, Some("main")).unwrap()[0];
        assert_eq!(first["requesterSessionKey"], "agent:main:main");
        assert!(first["announce"]["idempotencyKey"].is_string());
        o.close().await;
    }
}
