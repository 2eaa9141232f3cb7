//! The `subagents` tool (OpenClaw 2026.9 §1.7) over the task ledger: `list` (the runs and
//! tasks of the caller's session tree), `wait` (until a selected task finishes or needs
//! attention, at most 60 s; a timeout cancels nothing) and `cancel` (stops one run, records it
//! `cancelled`, never announces it), with the ownership refusals.
//!
//! Each sub-agent run has one task row with a stable id (`task_runs`, where the tasks imported
//! from a 2026.9 state folder are too: they show in their owners' trees). Rows are brought in step
//! with the registry (`subagent_runs`) whenever the tool reads them, in one write: a new run
//! gets its row, a known one its current status; a `cancelled` row stays cancelled, and a row
//! whose record is gone keeps its last state. Which runs a caller may see or stop is decided
//! here from the ledger's owner keys; nothing here delivers completions.

use std::collections::HashSet;
use std::sync::Arc;
use std::time::{Duration, Instant};

use serde_json::{json, Map, Value};

use super::subagents::cascade;
use super::{blocking, yields, Orchestrator};
use crate::entry;
use crate::error::{Error, Result};
use crate::keys;
use crate::store::subagents::{RunOutcome, SubagentRun};
use crate::store::tasks::TaskRow;
use crate::store::Db;
use crate::tools::{self, Requester, ToolContext};

/// The error a cancelled task records (and the outcome error of its run).
pub const CANCELLED: &str = "Cancelled by operator.";
/// `forbidden`: the task is not in the caller's tree.
pub const OUTSIDE_TREE: &str = "Task outside session tree.";
/// `forbidden`: a leaf cannot stop what it does not own.
pub const LEAF_CANNOT_CANCEL: &str = "Leaf subagents cannot cancel other sessions.";
/// `error` for an action that is not list, wait or cancel.
pub const UNSUPPORTED: &str = "Unsupported action.";
/// `reason` of a cancel of a finished task.
pub const ALREADY_TERMINAL: &str = "Task is already terminal.";
/// `reason` of a cancel of a task this engine does not run (an imported ACP or cron task).
pub const NO_BACKING: &str = "Task backing ownership could not be verified.";
/// The most tasks one tree walk reads.
const MAX_TREE_TASKS: usize = 2_000;
/// How often `wait` looks at the ledger again.
const WAIT_POLL: Duration = Duration::from_millis(100);

/// The ledger status of a record: `queued|running|succeeded|failed|timed_out|lost` (an
/// interrupted run is `lost`), and its delivery status.
pub fn ledger_status(rec: &SubagentRun) -> (&'static str, &'static str) {
    let status = match (rec.ended_at, rec.outcome.as_ref().map(|o| o.status.as_str())) {
        (None, _) => "running",
        (Some(_), Some("ok")) => "succeeded",
        (Some(_), Some("timeout")) => "timed_out",
        (Some(_), Some("error"))
            if rec.outcome.as_ref().and_then(|o| o.error.as_deref()) == Some(super::runs::INTERRUPTED) =>
        {
            "lost"
        }
        (Some(_), Some("error")) => "failed",
        (Some(_), _) => "lost",
    };
    let delivery = match rec.announce.status.as_str() {
        "pending" => "pending",
        "delivered" => "delivered",
        "failed" => "failed",
        _ => "not_applicable",
    };
    (status, delivery)
}

fn is_terminal(status: &str) -> bool {
    !matches!(status, "queued" | "running")
}

/// The outbox item of a record's completion, when it reached a final status: (status, last
/// error). The record itself learns it a moment later.
fn settled_item(db: &Db<'_>, rec: &SubagentRun) -> Result<Option<(String, Option<String>)>> {
    Ok(db
        .outbox_item(&rec.announce.idempotency_key)?
        .filter(|i| i.status != "pending")
        .map(|i| (i.status, i.last_error)))
}

/// The row of `rec`, keeping an existing row's id and creation time; `None` when nothing
/// changed (or the row is cancelled, which the registry never undoes). A completed run whose
/// completion could not be delivered is `blocked` (2026.9: terminal outcome `blocked`, kept
/// visible for 7 days after its run ended).
fn task_of(
    rec: &SubagentRun,
    existing: Option<TaskRow>,
    item: Option<(String, Option<String>)>,
    agent_of: impl Fn(&str) -> String,
) -> Option<TaskRow> {
    let mut rec = rec.clone();
    if let (Some((status, _)), "pending") = (&item, rec.announce.status.as_str()) {
        rec.announce.status = status.clone();
    }
    let (status, delivery) = ledger_status(&rec);
    let mut row = existing.clone().unwrap_or_else(|| TaskRow {
        task_id: uuid::Uuid::new_v4().to_string(),
        run_id: Some(rec.run_id.clone()),
        runtime: "subagent".into(),
        owner_key: rec.requester_session_key.clone(),
        requester_session_key: Some(rec.requester_session_key.clone()),
        child_session_key: Some(rec.child_session_key.clone()),
        agent_id: Some(agent_of(&rec.child_session_key)),
        requester_agent_id: Some(agent_of(&rec.requester_session_key)),
        created_at: rec.created_at,
        ..TaskRow::default()
    });
    if row.status == "cancelled" {
        return None;
    }
    row.label = rec.label.clone();
    row.task = Some(rec.task.clone());
    row.status = status.into();
    row.delivery_status = Some(delivery.into());
    row.started_at = rec.started_at;
    row.ended_at = rec.ended_at;
    // never back in time: an imported task may know of events after its run's end
    row.last_event_at = row.last_event_at.max(rec.ended_at.or(rec.started_at).or(Some(rec.created_at)));
    row.error = rec.outcome.as_ref().and_then(|o| o.error.clone());
    if status == "succeeded" && delivery == "failed" {
        let reason = item.and_then(|(_, e)| e);
        row.terminal_outcome = Some("blocked".into());
        row.terminal_summary = Some(super::retry9::blocked_summary(reason.as_deref()));
        row.error = reason.or(row.error);
        let until = rec.ended_at.unwrap_or(rec.created_at).saturating_add(super::retry9::BLOCKED_RETENTION_MS);
        row.extra.insert("cleanupAfter".into(), until.into());
    }
    (existing.as_ref() != Some(&row)).then_some(row)
}

/// Brings the row of one record in step (creating it if need be; a run imported from a 2026.9
/// folder has its imported task, id and all, in the same ledger).
pub(crate) fn sync_record(db: &Db<'_>, rec: &SubagentRun, agent_of: &dyn Fn(&str) -> String) -> Result<()> {
    let existing = db.task_run_by_run_id(&rec.run_id)?;
    if let Some(row) = task_of(rec, existing, settled_item(db, rec)?, agent_of) {
        db.put_task_run(&row)?;
    }
    Ok(())
}

/// Brings the rows of one owner in step with its records; its rows, oldest first, without
/// those past their retention (`cleanupAfter`).
fn sync_owner(db: &Db<'_>, owner: &str, agent_of: &dyn Fn(&str) -> String) -> Result<Vec<TaskRow>> {
    for rec in db.subagent_runs(Some(owner))? {
        sync_record(db, &rec, agent_of)?;
    }
    let now = entry::now_ms();
    let mut rows = db.task_runs_for_owner(owner)?;
    rows.retain(|t| t.extra.get("cleanupAfter").and_then(Value::as_i64).is_none_or(|at| at > now));
    Ok(rows)
}

/// A child's completion settled (`status` final): its task row is brought in step at once, so
/// that it keeps its last state after the record is archived. A blocked completion counts
/// toward the backlog warning (2026.9: 25 blocked completions).
pub async fn completion_settled(orch: &Arc<Orchestrator>, run_id: &str, status: &str) {
    let (e, id, agent_of) = (orch.engine().clone(), run_id.to_owned(), agent_resolver(orch));
    let blocked = status == "failed";
    let synced = blocking(move || {
        e.store().write(|db| {
            if let Some(rec) = db.subagent_run(&id)? {
                sync_record(db, &rec, &agent_of)?;
            }
            if blocked {
                db.blocked_task_count(entry::now_ms())
            } else {
                Ok(0)
            }
        })
    })
    .await;
    match synced {
        Ok(n) if n >= super::retry9::BACKLOG_WARNING => orch.emit(
            "delivery.backlog",
            Some(run_id),
            None,
            json!({"suspendedCount": n, "warningThreshold": super::retry9::BACKLOG_WARNING}),
        ),
        Ok(_) => {}
        Err(err) => orch.emit("store.error", Some(run_id), None, json!({"error": err.message()})),
    }
}

/// The tasks of `root`'s tree (its own, its children's, theirs, …), synced, breadth first.
fn tree(db: &Db<'_>, root: &str, agent_of: &dyn Fn(&str) -> String) -> Result<Vec<TaskRow>> {
    let mut owners = vec![root.to_owned()];
    let mut seen: HashSet<String> = owners.iter().cloned().collect();
    let mut out = Vec::new();
    let mut i = 0;
    while i < owners.len() && out.len() < MAX_TREE_TASKS {
        let owner = owners[i].clone();
        i += 1;
        for t in sync_owner(db, &owner, agent_of)? {
            // 2026.9 shows only session-scoped tasks (an imported flow task is not in a tree)
            if t.extra.get("scopeKind").and_then(Value::as_str).is_some_and(|k| k != "session") {
                continue;
            }
            if let Some(child) = &t.child_session_key {
                if seen.insert(child.clone()) {
                    owners.push(child.clone());
                }
            }
            out.push(t);
        }
    }
    Ok(out)
}

/// The caller as the tool sees it: its key, whether it is a sub-agent, and whether it may
/// control its children's children (`children`) or only its own (`none`, a leaf: a sub-agent
/// at `maxSpawnDepth`).
struct Controller {
    key: String,
    is_subagent: bool,
    leaf: bool,
}

fn controller(db: &Db<'_>, key: &str, max_depth: u32) -> Result<Controller> {
    let is_subagent = keys::is_subagent_key(key);
    let leaf = is_subagent && db.spawn_depth(key)? >= max_depth;
    Ok(Controller { key: key.to_owned(), is_subagent, leaf })
}

/// A task as the tool shows it (2026.9 `mapTask`), with its `execution` when known.
pub fn task_view(t: &TaskRow, execution: Option<&Value>) -> Value {
    let status = match t.status.as_str() {
        "succeeded" if t.terminal_outcome.as_deref() == Some("blocked") => "blocked",
        "succeeded" => "completed",
        "lost" => "failed",
        s @ ("queued" | "running" | "failed" | "timed_out" | "cancelled") => s,
        _ => "failed",
    };
    let mut m = Map::new();
    m.insert("taskId".into(), t.task_id.clone().into());
    m.insert("runtime".into(), t.runtime.clone().into());
    m.insert("deliveryStatus".into(), t.delivery_status.clone().unwrap_or_else(|| "not_applicable".into()).into());
    if let Some(x) = execution {
        m.insert("execution".into(), x.clone());
    }
    m.insert("status".into(), status.into());
    let mut opt = |k: &str, v: &Option<String>| {
        if let Some(s) = v.as_deref().filter(|s| !s.is_empty()) {
            m.insert(k.into(), s.into());
        }
    };
    opt("label", &t.label);
    opt("progressSummary", &t.progress_summary);
    opt("terminalSummary", &t.terminal_summary);
    opt("terminalOutcome", &t.terminal_outcome);
    let error = t.error.as_deref().map(collapse).filter(|s| !s.is_empty()).map(|s| clip(&s, 120));
    opt("error", &error);
    Value::Object(m)
}

fn collapse(s: &str) -> String {
    s.split_whitespace().collect::<Vec<_>>().join(" ")
}

/// At most `max` UTF-16 units, the last three `...` when cut.
fn clip(s: &str, max: usize) -> String {
    if s.encode_utf16().count() <= max {
        return s.to_owned();
    }
    let mut out = String::new();
    let mut units = 0;
    for c in s.chars() {
        if units + c.len_utf16() > max - 3 {
            break;
        }
        units += c.len_utf16();
        out.push(c);
    }
    format!("{}...", out.trim_end())
}

fn updated_at(t: &TaskRow) -> i64 {
    t.last_event_at.or(t.ended_at).or(t.started_at).unwrap_or(t.created_at)
}

// ---- parameters ------------------------------------------------------------------------------

fn raw<'a>(params: &'a Value, key: &str, snake: &str) -> Option<&'a Value> {
    params.get(key).filter(|v| !v.is_null()).or_else(|| params.get(snake).filter(|v| !v.is_null()))
}

fn blank(v: &Value) -> bool {
    matches!(v, Value::String(s) if s.trim().is_empty())
}

/// An integer param (a number or a numeric string); `Err` with 2026.9's text otherwise.
fn integer(params: &Value, key: &str, snake: &str, positive: bool) -> Result<Option<u64>> {
    let Some(v) = raw(params, key, snake).filter(|v| !blank(v)) else { return Ok(None) };
    let n = match v {
        Value::Number(n) => n.as_f64(),
        Value::String(s) => s.trim().parse::<f64>().ok(),
        _ => None,
    };
    match n {
        Some(f) if f.is_finite() && f.fract() == 0.0 && (if positive { f >= 1.0 } else { f >= 0.0 }) => {
            Ok(Some(f.min(u64::MAX as f64) as u64))
        }
        _ => Err(Error::invalid_request(if positive {
            format!("{key} must be a positive integer")
        } else {
            format!("{key} must be a non-negative integer")
        })),
    }
}

fn string_list(params: &Value, key: &str, snake: &str) -> Vec<String> {
    let out: Vec<String> = match raw(params, key, snake) {
        Some(Value::String(s)) => vec![s.trim().to_owned()],
        Some(Value::Array(a)) => a.iter().filter_map(Value::as_str).map(|s| s.trim().to_owned()).collect(),
        _ => Vec::new(),
    };
    out.into_iter().filter(|s| !s.is_empty()).collect()
}

// ---- the tool ----------------------------------------------------------------------------------

/// Runs `subagents` for a caller.
pub async fn run(orch: &Arc<Orchestrator>, params: &Value, ctx: &ToolContext) -> Result<Value> {
    let action = tools::read_string(params, "action").unwrap_or_else(|| "list".to_owned());
    let cfg = orch.engine().config();
    let caller = Requester::of(&cfg, ctx)?.key_or_main(&cfg);
    match action.as_str() {
        "list" => {
            let minutes = integer(params, "recentMinutes", "recent_minutes", true)?.unwrap_or(30).min(1_440);
            list(orch, &caller, minutes as i64).await
        }
        "wait" => {
            let mut ids = string_list(params, "taskIds", "task_ids");
            let mut seen = HashSet::new();
            ids.retain(|i| seen.insert(i.clone()));
            if ids.is_empty() {
                return Err(Error::invalid_request("taskIds required"));
            }
            if ids.len() > 32 {
                return Err(Error::invalid_request("subagents wait supports at most 32 taskIds."));
            }
            let secs = integer(params, "timeoutSeconds", "timeout_seconds", false)?.unwrap_or(30).min(60);
            wait(orch, &caller, ids, Duration::from_secs(secs)).await
        }
        "cancel" => {
            let id = tools::read_string(params, "taskId")
                .or_else(|| tools::read_string(params, "task_id"))
                .ok_or_else(|| Error::invalid_request("taskId required"))?;
            cancel(orch, &caller, &id).await
        }
        _ => Ok(json!({"status": "error", "error": UNSUPPORTED})),
    }
}

pub(crate) fn agent_resolver(orch: &Orchestrator) -> impl Fn(&str) -> String + Send + 'static {
    let km = orch.engine().config().key_model().clone();
    move |k: &str| km.agent_id_of(k)
}

async fn read_tree(orch: &Orchestrator, caller: &str) -> Result<(Controller, Vec<TaskRow>)> {
    let (e, k, agent_of) = (orch.engine().clone(), caller.to_owned(), agent_resolver(orch));
    let max_depth = orch.engine().config().subagents.max_spawn_depth;
    blocking(move || {
        e.store().write(|db| {
            let c = controller(db, &k, max_depth)?;
            let tasks = tree(db, &c.key, &agent_of)?;
            Ok((c, tasks))
        })
    })
    .await
}

/// The tasks as the tool shows them, each with its `execution`.
async fn views(orch: &Orchestrator, tasks: &[&TaskRow]) -> Result<Vec<Value>> {
    let (e, owned): (_, Vec<TaskRow>) = (orch.engine().clone(), tasks.iter().map(|t| (*t).clone()).collect());
    blocking(move || e.store().read(|db| owned.iter().map(|t| views_in(db, t)).collect())).await
}

fn views_in(db: &Db<'_>, t: &TaskRow) -> Result<Value> {
    Ok(task_view(t, Some(&super::task_exec::execution(db, t)?)))
}

/// `list`: the caller's tree, its run list and each task's `execution`, read in one
/// transaction so the text, the runs and the tasks never disagree about a child that paused
/// or ended meanwhile.
async fn list(orch: &Orchestrator, caller: &str, minutes: i64) -> Result<Value> {
    let (e, k, agent_of) = (orch.engine().clone(), caller.to_owned(), agent_resolver(orch));
    let max_depth = orch.engine().config().subagents.max_spawn_depth;
    let now = entry::now_ms();
    blocking(move || {
        e.store().write(|db| {
            let c = controller(db, &k, max_depth)?;
            let tasks = tree(db, &c.key, &agent_of)?;
            let cutoff = now - minutes * 60_000;
            let mut shown: Vec<&TaskRow> =
                tasks.iter().filter(|t| !is_terminal(&t.status) || updated_at(t) >= cutoff).collect();
            shown.sort_by_key(|t| std::cmp::Reverse(updated_at(t)));
            let views = shown.iter().map(|t| views_in(db, t)).collect::<Result<Vec<Value>>>()?;
            let view = super::task_list::run_view(db, db.subagent_runs(Some(&c.key))?, now, minutes)?;
            Ok(json!({
                "status": "ok",
                "action": "list",
                "requesterSessionKey": c.key,
                "callerSessionKey": k,
                "callerIsSubagent": c.is_subagent,
                "total": view.total,
                "taskTotal": shown.len(),
                "tasks": views,
                "active": view.active,
                "recent": view.recent,
                "text": view.text,
            }))
        })
    })
    .await
}

async fn wait(orch: &Orchestrator, caller: &str, ids: Vec<String>, timeout: Duration) -> Result<Value> {
    let deadline = Instant::now() + timeout;
    loop {
        let (_, tasks) = read_tree(orch, caller).await?;
        let selected: Vec<&TaskRow> = ids.iter().filter_map(|id| tasks.iter().find(|t| &t.task_id == id)).collect();
        let unavailable: Vec<&String> = ids.iter().filter(|id| !tasks.iter().any(|t| &t.task_id == *id)).collect();
        let attention: Vec<&str> = selected
            .iter()
            .filter(|t| t.terminal_outcome.as_deref() == Some("blocked"))
            .map(|t| t.task_id.as_str())
            .collect();
        let completed: Vec<&str> =
            selected.iter().filter(|t| is_terminal(&t.status)).map(|t| t.task_id.as_str()).collect();
        let reason = if !unavailable.is_empty() {
            Some("unavailable")
        } else if !attention.is_empty() {
            Some("attention")
        } else if !completed.is_empty() {
            Some("completed")
        } else {
            None
        };
        let timed_out = Instant::now() >= deadline;
        if reason.is_some() || timed_out {
            let mut out = json!({
                "status": "ok",
                "action": "wait",
                "reason": reason.unwrap_or("timeout"),
                "tasks": views(orch, &selected).await?,
                "completed": completed,
                "attention": attention,
            });
            if !unavailable.is_empty() {
                out["unavailable"] = json!(unavailable);
            }
            return Ok(out);
        }
        let left = deadline.saturating_duration_since(Instant::now());
        tokio::time::sleep(left.min(WAIT_POLL)).await;
    }
}

async fn cancel(orch: &Arc<Orchestrator>, caller: &str, task_id: &str) -> Result<Value> {
    let (c, tasks) = read_tree(orch, caller).await?;
    let Some(target) = tasks.into_iter().find(|t| t.task_id == task_id) else {
        return Ok(json!({"status": "forbidden", "error": OUTSIDE_TREE}));
    };
    if c.leaf && target.owner_key != c.key {
        return Ok(json!({"status": "forbidden", "error": LEAF_CANNOT_CANCEL}));
    }
    if is_terminal(&target.status) {
        return Ok(
            json!({"status": "error", "taskId": task_id, "found": true, "cancelled": false, "reason": ALREADY_TERMINAL}),
        );
    }
    // the record and the task first, in one write: the completion wait then finds the run
    // ended and announces nothing, here or in any other process
    let (e, run_id, id) = (orch.engine().clone(), target.run_id.clone().unwrap_or_default(), target.task_id.clone());
    let (now, agent_of) = (entry::now_ms(), agent_resolver(orch));
    let done = blocking(move || e.store().write(|db| cancel_in(db, &id, &run_id, now, &agent_of))).await?;
    let run_id = target.run_id.clone().unwrap_or_default();
    let descendants = match done {
        Cancel::Stopped(descendants) => descendants,
        // it ended after the tree was read: its completion stands; say how, as the gateway
        // does, which also stops the live descendants of a run that ended meanwhile
        ended => {
            if let Cancel::RunEnded(descendants) = ended {
                cascade::after_stop(orch, descendants, Some(&run_id), CANCELLED).await;
            }
            let (e, id, run) = (orch.engine().clone(), task_id.to_owned(), run_id.clone());
            let rows = blocking(move || e.store().read(|db| Ok((db.task_run(&id)?, db.subagent_run(&run)?)))).await?;
            let reason = ended_meanwhile(rows.0.as_ref(), rows.1.as_ref());
            return Ok(
                json!({"status": "error", "taskId": task_id, "found": true, "cancelled": false, "reason": reason}),
            );
        }
    };
    orch.runs().abort(&run_id, CANCELLED);
    // its cleanup (label, archive time, or deletion) as for any settled child
    let (e, id) = (orch.engine().clone(), run_id.clone());
    if let Ok(Some(rec)) = blocking(move || e.store().read(|db| db.subagent_run(&id))).await {
        super::subagents::finalize(orch, rec).await;
    }
    // the model turn itself is the host's to stop (its answer, if any, is dropped anyway)
    cascade::abort_in_host(orch, &run_id, CANCELLED);
    orch.emit(
        "subagent.cancelled",
        Some(&run_id),
        target.child_session_key.as_deref(),
        json!({"taskId": task_id, "requesterSessionKey": target.owner_key}),
    );
    // its descendants, stopped in the same write, after it (the tree top first)
    cascade::after_stop(orch, descendants, Some(&run_id), CANCELLED).await;
    yields::check(orch, &target.owner_key).await;
    Ok(json!({"status": "cancelled", "taskId": task_id, "found": true, "cancelled": true}))
}

/// The `reason` of a cancel that found its task ended after the caller's tree was read: how it
/// ended, from its task row if that has ended (a cancel of its own, or a cascade), else from its
/// record (a completion that committed first).
fn ended_meanwhile(task: Option<&TaskRow>, rec: Option<&SubagentRun>) -> String {
    let status = match (task.filter(|t| is_terminal(&t.status)), rec.filter(|r| r.ended_at.is_some())) {
        (Some(t), _) => t.status.as_str(),
        (None, Some(r)) => ledger_status(r).0,
        (None, None) => return ALREADY_TERMINAL.into(),
    };
    match status {
        "succeeded" => "Subagent completed while cancellation was in progress.".into(),
        "cancelled" => "Subagent was cancelled while cancellation was in progress.".into(),
        other => format!("Subagent became {other} while cancellation was in progress."),
    }
}

/// What the write of a cancel did.
#[derive(Debug)]
pub(crate) enum Cancel {
    /// The target and its live or paused descendants (returned) were stopped.
    Stopped(Vec<cascade::Stopped>),
    /// The target's run or task had ended since the caller read it (its completion committed
    /// first, perhaps in another process): that end stands, but the target's live descendants
    /// (returned) were stopped all the same, as 2026.9 walks the tree whether or not the target
    /// was still live.
    RunEnded(Vec<cascade::Stopped>),
    /// The task is gone: nothing was written.
    Gone,
}

/// The cancel of task `task_id` (child run `run_id`) in one write: the task row and the child's
/// record end as cancelled, and the record's announce is skipped; the child's live or paused
/// descendants are stopped with it (`subagents::cascade`). Whichever of the cancel and a
/// completion (the child's or a descendant's) commits first wins; the other finds it ended.
pub(crate) fn cancel_in(
    db: &Db<'_>,
    task_id: &str,
    run_id: &str,
    now: i64,
    agent_of: &dyn Fn(&str) -> String,
) -> Result<Cancel> {
    let Some(mut t) = db.task_run(task_id)? else { return Ok(Cancel::Gone) };
    let record = db.subagent_run(run_id)?;
    if is_terminal(&t.status) || record.as_ref().is_some_and(|r| r.ended_at.is_some()) {
        let stopped = match &record {
            Some(r) => cascade::stop_descendants_in(db, &r.child_session_key, now, agent_of)?,
            None => Vec::new(),
        };
        return Ok(Cancel::RunEnded(stopped));
    }
    let mut stopped = Vec::new();
    if let Some(mut r) = record {
        r.ended_at = Some(now);
        // 2026.9 records `killed` on the run and the operator's words on the task
        r.outcome = Some(RunOutcome { status: "error".into(), error: Some(cascade::KILLED.into()) });
        r.announce.status = "skipped".into();
        r.archive_at_ms = None;
        r.pause_reason = None;
        db.put_subagent_run(&r)?;
        // a cancelled child is never woken by its own yield
        super::subagents::pause::close_yields(db, &r.child_session_key, now)?;
        stopped = cascade::stop_descendants_in(db, &r.child_session_key, now, agent_of)?;
    }
    t.status = "cancelled".into();
    t.delivery_status = Some("not_applicable".into());
    t.error = Some(CANCELLED.into());
    t.ended_at = Some(now);
    t.last_event_at = Some(now);
    db.put_task_run(&t)?;
    Ok(Cancel::Stopped(stopped))
}

/// An orchestrator under the 2026.9 contract over a fake host (the tests of this module and of
/// `yields`).
#[cfg(test)]
pub(crate) mod testkit9 {
    use super::*;
    use crate::config::Config;
    use crate::contract::Contract;
    use crate::engine::Engine;
    use crate::host::testing::FakeHost;
    use crate::store::Store;

    pub async fn open9_at(path: &str, config: Value, host: Arc<FakeHost>) -> Arc<Orchestrator> {
        let cfg = Config::from_json_for(&config, Contract::V2026_9).unwrap();
        let o = Orchestrator::new(Arc::new(Engine::new(Store::open(path).unwrap(), cfg, None)), host);
        o.start().await.unwrap();
        o
    }

    pub async fn open9(config: Value, host: Arc<FakeHost>) -> Arc<Orchestrator> {
        open9_at(":memory:", config, host).await
    }
}

#[cfg(test)]
#[path = "tasks_tests.rs"]
mod tests;
