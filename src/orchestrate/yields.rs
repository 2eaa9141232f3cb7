//! `sessions_yield` (OpenClaw 2026.9 §1.6): a turn ends itself to wait for the completions of
//! the children it spawned, and the engine resumes the session when they have all been
//! delivered.
//!
//! A yield is a row in `yields` (it survives a restart) that *claims* the requester's children
//! whose completion has not reached it yet, that the yielding turn spawned (`spawn_turns`, by
//! `ctx.runId`; every child when the turn gives none) and that no earlier open yield claimed;
//! the children of other turns make it `already_pending`. The tool
//! answers `yielded` and the host ends the turn. Each child's completion is still delivered to
//! the requester on its own (the requester is woken while it is yielded). When none of the
//! claimed children is undelivered any more, [`check`] moves the yield to `resuming` and starts
//! one resume run on the session (its message is the private `message` with the 2026.9
//! context line); when that run ends the yield is `resumed`. A resume run cut short by a
//! restart is started again by the next open ([`recover`]), or by the store that takes over
//! from its gone owner ([`adopt`]). A sub-agent session's yield resumes only once its run has
//! ended and paused it, and its resume run adopts the paused child (2026.9: that turn's end is
//! the child's completion; `subagents::pause`). Nothing here decides how a completion is
//! delivered: that is the sub-agent registry's.

use std::collections::HashSet;
use std::sync::Arc;

use serde_json::{json, Map, Value};

use super::runs::{Provenance, RunSpec, RunStatus, INTERRUPTED};
use super::subagents::{pause, SubagentRun};
use super::{blocking, new_chain_id, Orchestrator};
use crate::entry::{self, DeliveryContext};
use crate::error::Result;
use crate::host::{Lane, RunOptions};
use crate::keys::{self, SessionKind};
use crate::store::yields::{PendingChild, YieldRow};
use crate::tools::{self, Requester, ToolContext};

/// The private message of a yield that gave none.
pub const DEFAULT_MESSAGE: &str = "Turn yielded.";
/// `error` when `waitFor` is not `"message"`.
pub const BAD_WAIT_FOR: &str = "waitFor must be \"message\" when provided.";
/// `error` without a calling session.
pub const NO_SESSION: &str = "No session context";
/// `error` when no resume turn can be run (no `runAgent` callback).
pub const NOT_SUPPORTED: &str = "Yield not supported in this context";
/// `deferred`: the host says earlier async tool results are still on their way.
pub const DEFERRED: &str = "Earlier async tool results are still being delivered. Finish this response to receive them, then yield again only if external work still requires waiting.";
/// `error` when nothing is pending for this turn.
pub const NO_CLAIM: &str = "No pending child completion is owned by this turn. If the assigned work is complete, return its result normally. An unfinished subagent waiting for an incoming continuation must explicitly set waitFor: \"message\".";
/// `error` for a cron (isolated automation) session.
pub const CRON_UNSUPPORTED: &str = "Isolated automation turns cannot use sessions_yield because no requester continuation is available. Finish this turn so the scheduler can handle child output under the job's delivery policy.";

/// The resumed turn's message: the private message and the 2026.9 context line.
pub fn resume_text(message: &str) -> String {
    format!("{message}\n\n[Context: The previous turn ended intentionally via sessions_yield while waiting for a follow-up event.]")
}

/// One pending child as `already_pending` lists it.
#[derive(Debug, Clone, PartialEq)]
pub struct ChildView {
    pub run_id: String,
    pub child_session_key: String,
    pub label: Option<String>,
    pub started_at: Option<i64>,
    /// running | completing | paused
    pub state: &'static str,
    pub wake_armed: bool,
}

impl ChildView {
    fn to_json(&self) -> Value {
        let mut m = Map::new();
        m.insert("runId".into(), self.run_id.clone().into());
        m.insert("childSessionKey".into(), self.child_session_key.clone().into());
        if let Some(l) = &self.label {
            m.insert("label".into(), l.clone().into());
        }
        if let Some(s) = self.started_at {
            m.insert("startedAt".into(), s.into());
        }
        m.insert("state".into(), self.state.into());
        m.insert("wakeArmed".into(), self.wake_armed.into());
        Value::Object(m)
    }

    fn describe(&self) -> String {
        let name = match &self.label {
            Some(l) => format!("{l} ({})", self.child_session_key),
            None => self.child_session_key.clone(),
        };
        let started = self.started_at.map(|t| format!(", started {}", crate::mirror::iso(t))).unwrap_or_default();
        format!("{name}, {}{started}", self.state)
    }
}

fn child_count(n: usize) -> String {
    format!("{n} {}", if n == 1 { "child session" } else { "child sessions" })
}

/// The `already_pending` message (2026.9's wording).
pub fn pending_message(children: &[ChildView]) -> String {
    let (paused, active): (Vec<&ChildView>, Vec<&ChildView>) = children.iter().partition(|c| c.state == "paused");
    let list = |v: &[&ChildView]| v.iter().map(|c| c.describe()).collect::<Vec<_>>().join("; ");
    let mut parts = Vec::new();
    if !active.is_empty() {
        let owner = if active.iter().any(|c| c.wake_armed) {
            "An earlier turn of this session already yielded for"
        } else {
            "An earlier turn of this session already spawned"
        };
        parts.push(format!(
            "{owner} {} whose completion is still pending: {}. Their completion will arrive in this session as a later turn; do not re-spawn, re-send, or poll to wake them.",
            child_count(active.len()),
            list(&active)
        ));
    }
    if !paused.is_empty() {
        let one = paused.len() == 1;
        parts.push(format!(
            "{} spawned by an earlier turn of this session {} paused by {} own sessions_yield and will not complete until an incoming continuation arrives: {}. Send that continuation with sessions_send if this session owns it; otherwise the work stays waiting.",
            child_count(paused.len()),
            if one { "is" } else { "are" },
            if one { "its" } else { "their" },
            list(&paused)
        ));
    }
    parts.push("This turn owns no new claim, so no yield is needed: end this turn normally.".to_owned());
    parts.join(" ")
}

/// The parameters as the model sent them (2026.9 reads each as a trimmed string; anything else
/// is absent).
struct Params {
    message: String,
    acknowledgment: Option<String>,
    wait_for: Option<String>,
}

fn read_params(params: &Value) -> Params {
    Params {
        message: tools::read_string(params, "message").unwrap_or_else(|| DEFAULT_MESSAGE.to_owned()),
        acknowledgment: tools::read_string(params, "acknowledgment"),
        wait_for: tools::read_string(params, "waitFor").or_else(|| tools::read_string(params, "wait_for")),
    }
}

fn error(text: &str) -> Value {
    json!({"status": "error", "error": text})
}

/// Runs `sessions_yield` for a caller whose raw context is `ctx_raw` (read for the host's
/// `hasUnobservedAsyncToolResults` flag).
pub async fn run(orch: &Arc<Orchestrator>, params: &Value, ctx: &ToolContext, ctx_raw: &Value) -> Result<Value> {
    let p = read_params(params);
    if p.wait_for.as_deref().is_some_and(|w| w != "message") {
        return Ok(error(BAD_WAIT_FOR));
    }
    if ctx.agent_session_key.is_none() {
        return Ok(error(NO_SESSION));
    }
    let cfg = orch.engine().config();
    let requester = Requester::of(&cfg, ctx)?;
    let key = requester.key_or_main(&cfg);
    if keys::key_kind(&key) == SessionKind::Cron {
        return Ok(error(CRON_UNSUPPORTED));
    }
    if !orch.host().can_run() {
        return Ok(error(NOT_SUPPORTED));
    }
    if ctx_raw.get("hasUnobservedAsyncToolResults") == Some(&Value::Bool(true)) {
        return Ok(json!({"status": "deferred", "message": DEFERRED}));
    }
    let (e, k) = (orch.engine().clone(), key.clone());
    let (turn, wait_message) = (ctx.run_id.clone(), p.wait_for.is_some() && keys::is_subagent_key(&key));
    let (message, ack) = (p.message.clone(), p.acknowledgment.clone());
    let origin = origin_of(ctx);
    let claimed = blocking(move || {
        e.store().write(|db| {
            let undelivered = db.undelivered_children(&k)?;
            let open = db.open_yields_of(&k)?;
            let taken: HashSet<&String> = open.iter().flat_map(|y| y.children.iter()).collect();
            // a turn claims the children it spawned itself (all of them without a turn id)
            let (mut own, mut others) = (Vec::new(), Vec::new());
            for c in undelivered {
                let mine = match &turn {
                    Some(t) => db.spawn_turn(&c.run_id)?.as_deref() == Some(t.as_str()),
                    None => true,
                };
                if mine {
                    own.push(c);
                } else {
                    others.push(c);
                }
            }
            let fresh: Vec<String> =
                own.iter().filter(|c| !taken.contains(&c.run_id)).map(|c| c.run_id.clone()).collect();
            if fresh.is_empty() && !wait_message {
                let pending = if turn.is_some() { others } else { own };
                let views = views(&pending, &taken)?;
                return Ok(Err(views));
            }
            let row = YieldRow {
                yield_id: uuid::Uuid::new_v4().to_string(),
                session_key: k.clone(),
                turn_run_id: turn.clone(),
                message: message.clone(),
                acknowledgment: ack.clone(),
                origin: origin.clone(),
                wait_for: if fresh.is_empty() { "message" } else { "children" }.to_owned(),
                children: fresh,
                status: "waiting".to_owned(),
                resume_run_id: None,
                created_at: entry::now_ms(),
                resumed_at: None,
            };
            db.insert_yield(&row)?;
            Ok(Ok(row))
        })
    })
    .await?;
    match claimed {
        Ok(row) => {
            orch.emit(
                "session.yielded",
                turn_of(&row),
                Some(&row.session_key),
                json!({"yieldId": row.yield_id, "children": row.children, "waitFor": row.wait_for}),
            );
            // children that delivered between the claim and now
            check(orch, &key).await;
            let mut out = json!({"status": "yielded"});
            if let Some(a) = p.acknowledgment {
                out["acknowledgment"] = a.into();
            }
            Ok(out)
        }
        Err(views) if !views.is_empty() => Ok(json!({
            "status": "already_pending",
            "message": pending_message(&views),
            "pendingChildren": views.iter().map(ChildView::to_json).collect::<Vec<_>>(),
        })),
        Err(_) => Ok(error(NO_CLAIM)),
    }
}

/// The yielding turn's route, as the context gives it.
fn origin_of(ctx: &ToolContext) -> Option<Value> {
    let mut m = Map::new();
    let mut put = |k: &str, v: Option<Value>| {
        if let Some(v) = v {
            m.insert(k.into(), v);
        }
    };
    put("channel", ctx.agent_channel.clone().map(Value::from));
    put("to", ctx.agent_to.clone().map(Value::from));
    put("accountId", ctx.agent_account_id.clone().map(Value::from));
    put("threadId", ctx.agent_thread_id.clone());
    (!m.is_empty()).then_some(Value::Object(m))
}

fn turn_of(row: &YieldRow) -> Option<&str> {
    row.turn_run_id.as_deref()
}

/// The pending children as `already_pending` shows them: a child paused in its own
/// `sessions_yield` is `paused`; `wakeArmed` when an open yield claimed it.
fn views(pending: &[PendingChild], taken: &HashSet<&String>) -> Result<Vec<ChildView>> {
    let mut out = Vec::new();
    for c in pending {
        let record: Value = serde_json::from_str(&c.record).unwrap_or(Value::Null);
        // 2026.9: a child whose run ended in its own `sessions_yield` (`subagents::pause`)
        let paused = record.get("pauseReason").and_then(Value::as_str) == Some(pause::YIELD_PAUSE)
            && record.get("endedAt").is_none_or(Value::is_null);
        let state = if paused {
            "paused"
        } else if c.ended {
            "completing"
        } else {
            "running"
        };
        out.push(ChildView {
            run_id: c.run_id.clone(),
            child_session_key: c.child_session_key.clone(),
            label: record.get("label").and_then(Value::as_str).filter(|s| !s.trim().is_empty()).map(str::to_owned),
            started_at: record.get("startedAt").and_then(Value::as_f64).map(|f| f as i64),
            state,
            wake_armed: taken.contains(&c.run_id),
        });
    }
    out.sort_by_key(|c| c.started_at.unwrap_or(0));
    Ok(out)
}

/// Resumes every waiting yield of `session_key` whose claimed children have all delivered.
/// Called when a completion of one of its children settles, after a cancel, on open, and when
/// a child session is paused. A child session whose run is still going is left until its run
/// has ended and paused it (`subagents::pause`).
pub async fn check(orch: &Arc<Orchestrator>, session_key: &str) {
    let (e, k) = (orch.engine().clone(), session_key.to_owned());
    let due = blocking(move || {
        e.store().read(|db| {
            if pause::yield_held(db, &k)? {
                return Ok(Vec::new());
            }
            let undelivered: HashSet<String> = db.undelivered_children(&k)?.into_iter().map(|c| c.run_id).collect();
            let open = db.open_yields_of(&k)?;
            Ok(open
                .into_iter()
                .filter(|y| {
                    y.status == "waiting"
                        && y.wait_for == "children"
                        && !y.children.iter().any(|c| undelivered.contains(c))
                })
                .collect::<Vec<_>>())
        })
    })
    .await;
    match due {
        Ok(due) => {
            for y in due {
                resume(orch, y).await;
            }
        }
        Err(err) => orch.emit("store.error", None, Some(session_key), json!({"error": err.message()})),
    }
}

/// Starts the resume run of a yield and settles the yield when the run ends. The yield moves to
/// `resuming` with that run's id in the write that records the run, and only if it still
/// stands as `y` was read (waiting, or resuming a run cut short): of two stores or tasks that
/// try, one resumes it, and no store ever sees it `resuming` without its run.
///
/// The yield of a child paused in it (2026.9) resumes it as the child: the resume run adopts
/// the paused record in that same write (`subagents::pause::adopt_in`), so that its end is
/// the child's one completion.
async fn resume(orch: &Arc<Orchestrator>, y: YieldRow) {
    let (e, k) = (orch.engine().clone(), y.session_key.clone());
    let paused = if keys::is_subagent_key(&k) {
        match blocking(move || e.store().read(|db| pause::paused_of(db, &k))).await {
            Ok(p) => p,
            Err(err) => {
                orch.emit("store.error", None, Some(&y.session_key), json!({"error": err.message()}));
                return;
            }
        }
    } else {
        None
    };
    let (e, k) = (orch.engine().clone(), y.session_key.clone());
    let stored = blocking(move || e.get_session(&Value::from(k)))
        .await
        .ok()
        .flatten()
        .map(|entry| entry::delivery_context(&entry))
        .unwrap_or_default();
    let origin = DeliveryContext::of_object(y.origin.as_ref());
    let route = if origin.is_empty() { stored } else { origin };
    let run_id = match start_resume_run(orch, &y, &route, paused.as_ref()) {
        Ok(Some(id)) => id,
        // another store or task resumed it first
        Ok(None) => return,
        Err(err) => {
            // nothing was recorded: the next check or open tries again
            orch.emit(
                "session.resume_failed",
                None,
                Some(&y.session_key),
                json!({"yieldId": y.yield_id, "error": err.message()}),
            );
            return;
        }
    };
    if let Some(rec) = &paused {
        let task_run_id = rec.task_run_id.clone().unwrap_or_else(|| rec.run_id.clone());
        pause::adopted_by(orch, rec, &run_id, &task_run_id);
    }
    orch.emit("session.resumed", Some(&run_id), Some(&y.session_key), json!({"yieldId": y.yield_id}));
    await_resume(orch, y.yield_id, run_id);
}

/// Records the resume run of `y` and claims the yield for it, in one write; with `paused`, the
/// run is the child's (its options, its timeout) and adopts that record in the same write. It
/// declines when the session's paused record is not `paused` any more (or was paused since the
/// yield was read): whoever changed it resumes the yield, or closed it.
fn start_resume_run(
    orch: &Orchestrator,
    y: &YieldRow,
    route: &DeliveryContext,
    paused: Option<&SubagentRun>,
) -> Result<Option<String>> {
    let cfg = orch.engine().config();
    if let Some(rec) = paused {
        let spec = RunSpec {
            session_key: y.session_key.clone(),
            message: resume_text(&y.message),
            provenance: Provenance { kind: "sessions_yield", source_session_key: None },
            options: pause::resumed_options(&cfg, rec, new_chain_id()),
            chain_limit: None,
        };
        let agent_of = crate::orchestrate::tasks::agent_resolver(orch);
        let claim = |db: &crate::store::Db<'_>, run_id: &str| {
            let now = pause::paused_of(db, &y.session_key)?;
            if now.as_ref().map(|r| r.run_id.as_str()) != Some(rec.run_id.as_str())
                || !db.claim_yield_resume(&y.yield_id, &y.status, y.resume_run_id.as_deref(), run_id)?
            {
                return Ok(false);
            }
            Ok(pause::adopt_in(db, &rec.run_id, run_id, &agent_of)?.is_ok())
        };
        let key = Some(format!("yield-resume:{}", y.yield_id));
        return orch.runs().start_guarded(orch.engine().clone(), orch.host().clone(), spec, key, Some(&claim));
    }
    let thread = match &route.thread_id {
        Some(Value::String(s)) if !s.is_empty() => Some(s.clone()),
        Some(Value::Number(n)) => Some(n.to_string()),
        _ => None,
    };
    let options = RunOptions {
        deliver: route.channel.is_some() && route.to.is_some(),
        channel: route.channel.clone(),
        to: route.to.clone(),
        account_id: route.account_id.clone(),
        thread_id: thread,
        ..RunOptions::new(Lane::Announce, cfg.default_timeout_seconds.saturating_mul(1000), new_chain_id())
    };
    let spec = RunSpec {
        session_key: y.session_key.clone(),
        message: resume_text(&y.message),
        provenance: Provenance { kind: "sessions_yield", source_session_key: None },
        options,
        chain_limit: None,
    };
    let claim = |db: &crate::store::Db<'_>, run_id: &str| {
        // a session paused since the yield was read is resumed by its pause, as the child
        if keys::is_subagent_key(&y.session_key) && pause::paused_of(db, &y.session_key)?.is_some() {
            return Ok(false);
        }
        db.claim_yield_resume(&y.yield_id, &y.status, y.resume_run_id.as_deref(), run_id)
    };
    let key = Some(format!("yield-resume:{}", y.yield_id));
    orch.runs().start_guarded(orch.engine().clone(), orch.host().clone(), spec, key, Some(&claim))
}

/// Waits (in the background) for a resume run; the yield is `resumed` when it ended, whatever
/// its outcome, unless the store closed first (the next open sees it `resuming`).
fn await_resume(orch: &Arc<Orchestrator>, yield_id: String, run_id: String) {
    let weak = Arc::downgrade(orch);
    let (engine, runs) = (orch.engine().clone(), orch.runs().clone());
    orch.spawn_busy(async move {
        let snap = loop {
            match runs.wait(&engine, &run_id, 60_000).await {
                Ok(s) if s.status != RunStatus::Running => break s,
                Ok(_) => {}
                Err(_) => return,
            }
            if weak.strong_count() == 0 || runs.is_closed() {
                return;
            }
        };
        if snap.error.as_deref() == Some(INTERRUPTED) || runs.is_closed() {
            return;
        }
        let e = engine.clone();
        let _ = blocking(move || {
            e.store().write(|db| db.move_yield(&yield_id, "resuming", "resumed", None, Some(entry::now_ms())))
        })
        .await;
    });
}

/// On open: a `resuming` yield whose run was cut short (its owner gone, the run ended as
/// interrupted) or is missing is started again (by one store only, see [`resume`]); one whose
/// run is still going (another live store) or ended is waited for or settled; every waiting
/// yield is checked.
pub async fn recover(orch: &Arc<Orchestrator>) -> Result<()> {
    pass(orch, true).await
}

/// After a takeover pass ended a gone owner's runs (API.md §1.7): the yields whose resume run
/// it cut short are resumed again, as on open; runs still going are left to their owners.
pub async fn adopt(orch: &Arc<Orchestrator>) -> Result<()> {
    pass(orch, false).await
}

async fn pass(orch: &Arc<Orchestrator>, on_open: bool) -> Result<()> {
    let e = orch.engine().clone();
    let open = blocking(move || e.store().read(|db| db.open_yields())).await?;
    let mut sessions: Vec<String> = Vec::new();
    for y in open {
        if y.status == "resuming" {
            let run = match &y.resume_run_id {
                Some(id) => {
                    let (e, id) = (orch.engine().clone(), id.clone());
                    blocking(move || e.store().read(|db| db.run(&id))).await?
                }
                None => None,
            };
            match run {
                Some(r) if r.status == "running" => {
                    if on_open {
                        await_resume(orch, y.yield_id.clone(), r.run_id)
                    }
                }
                Some(r) if r.error.as_deref() != Some(INTERRUPTED) => {
                    let (e, id) = (orch.engine().clone(), y.yield_id.clone());
                    blocking(move || {
                        e.store().write(|db| db.move_yield(&id, "resuming", "resumed", None, Some(entry::now_ms())))
                    })
                    .await?;
                }
                _ => resume(orch, y).await,
            }
        } else if !sessions.contains(&y.session_key) {
            sessions.push(y.session_key.clone());
        }
    }
    for s in sessions {
        check(orch, &s).await;
    }
    Ok(())
}

#[cfg(test)]
#[path = "yields_tests.rs"]
mod tests;
