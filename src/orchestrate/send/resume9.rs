//! `sessions_send` `mode: "resume"` under the 2026.9 contract (OpenClaw 2026.9 §1.3): the owner
//! of a child paused in its own `sessions_yield` (`subagents::pause`) continues it with a
//! message. The refusals in the gateway's order (the session entry, the paused child, the
//! caller's control of it, a child that hands no completion over); then one new run of the
//! child, which adopts the paused task, and the admission-only answer `{status: "accepted",
//! mode: "resume", runId, taskRunId, sessionKey, completion: "task"}`: the completion of that
//! run reaches the owner through the outbox as for any child. Also [`should_auto_resume`], the
//! gateway's resume of a paused child when `mode` is omitted.

use std::sync::Arc;

use serde_json::{json, Value};

use super::{start_checked, Started};
use crate::entry::Entry;
use crate::error::Result;
use crate::keys;
use crate::orchestrate::runs::{Provenance, RunSpec};
use crate::orchestrate::state::Orchestrator;
use crate::orchestrate::subagents::{pause, SubagentRun};
use crate::orchestrate::task::{blocking, new_chain_id};
use crate::store::Db;
use crate::tools::send::SEND_BLOCKED;
use crate::tools::send9;

/// One resume as the tool asks for it.
pub struct ResumeAsk<'a> {
    /// the child session (canonical) and its key as the caller named it
    pub target_key: &'a str,
    pub display: &'a str,
    /// the calling session (canonical)
    pub caller: &'a str,
    /// the annotated message
    pub message: String,
    /// the run the call is made from (its chain carries the new run)
    pub from_run: Option<String>,
}

/// What the store says of a paused child and its caller.
struct Found {
    paused: Option<SubagentRun>,
    caller_is_leaf: bool,
}

fn find(db: &Db<'_>, target: &str, caller: &str, max_depth: u32) -> Result<Found> {
    let caller_is_leaf = keys::is_subagent_key(caller) && db.spawn_depth(caller)? >= max_depth;
    Ok(Found { paused: pause::paused_of(db, target)?, caller_is_leaf })
}

async fn lookup(orch: &Orchestrator, target: &str, caller: &str) -> Result<Found> {
    let (e, t, c) = (orch.engine().clone(), target.to_owned(), caller.to_owned());
    let max_depth = orch.engine().config().subagents.max_spawn_depth;
    blocking(move || e.store().read(|db| find(db, &t, &c, max_depth))).await
}

/// The refusal of a resume of this child by this caller, if any (2026.9's order after the
/// session entry: not paused, not controlled by the caller, no completion to hand over).
fn refusal(found: &Found, caller: &str) -> std::result::Result<SubagentRun, &'static str> {
    let Some(rec) = found.paused.clone() else { return Err(send9::RESUME_NEEDS_PAUSED) };
    if found.caller_is_leaf || rec.requester_session_key != caller {
        return Err(send9::RESUME_NOT_CONTROLLER);
    }
    if rec.announce.status == "skipped" {
        return Err(send9::RESUME_NO_COMPLETION);
    }
    Ok(rec)
}

/// Whether a send without `mode` resumes its target (2026.9): the target is a child paused in
/// its own `sessions_yield`, whose completion goes to its requester, and the caller is that
/// requester and may control its children.
pub async fn should_auto_resume(orch: &Orchestrator, target: &str, caller: &str) -> Result<bool> {
    // only a sub-agent session can hold a paused child: other sends read nothing more
    if !keys::is_subagent_key(target) {
        return Ok(false);
    }
    let found = lookup(orch, target, caller).await?;
    Ok(refusal(&found, caller).is_ok())
}

/// Resumes the paused child `ask.target_key` (its session `entry`): the tool's answer.
pub async fn run(orch: &Arc<Orchestrator>, ask: ResumeAsk<'_>, entry: Option<&Entry>) -> Result<Value> {
    if let Some(text) = send9::resume_refusal(entry) {
        return Ok(send9::resume_failed(ask.display, text));
    }
    let found = lookup(orch, ask.target_key, ask.caller).await?;
    let paused = match refusal(&found, ask.caller) {
        Ok(rec) => rec,
        Err(text) => return Ok(send9::resume_failed(ask.display, text)),
    };
    let cfg = orch.engine().config();
    let (e, runs, from, c) = (orch.engine().clone(), orch.runs().clone(), ask.from_run.clone(), ask.caller.to_owned());
    let chain = blocking(move || runs.chain_of(&e, from.as_deref(), Some(&c))).await?.unwrap_or_else(new_chain_id);
    let spec = RunSpec {
        session_key: ask.target_key.to_owned(),
        message: ask.message,
        provenance: Provenance { kind: "inter_session", source_session_key: Some(ask.caller.to_owned()) },
        options: pause::resumed_options(&cfg, &paused, chain),
        chain_limit: None,
    };
    let run_id = match start_checked(orch, spec).await? {
        Started::Run(id) => id,
        Started::Blocked => return Ok(send9::resume_failed(ask.display, SEND_BLOCKED)),
        Started::ChainFull => return Ok(send9::resume_failed(ask.display, send9::RESUME_REJECTED)),
    };
    match pause::adopt(orch, &paused, &run_id).await {
        Ok(Ok(task_run_id)) => Ok(send9::resume_accepted(&run_id, &task_run_id, ask.display)),
        Ok(Err(_)) => {
            // the paused task changed under us (cancelled, or resumed by another caller): the
            // run just started continues nothing
            stop(orch, &run_id);
            Ok(send9::resume_failed(ask.display, send9::RESUME_REJECTED))
        }
        Err(err) => {
            stop(orch, &run_id);
            if err.code() == crate::error::ErrorCode::Closed {
                return Err(err);
            }
            Ok(send9::resume_failed(ask.display, send9::RESUME_REJECTED))
        }
    }
}

/// Ends a run that adopted nothing (and asks the host to stop its turn, if it can).
fn stop(orch: &Arc<Orchestrator>, run_id: &str) {
    orch.runs().abort(run_id, send9::RESUME_REJECTED);
    if orch.host().can_abort() {
        let (host, id) = (orch.host().clone(), run_id.to_owned());
        orch.spawn_busy(async move {
            let _ = tokio::time::timeout(
                std::time::Duration::from_secs(60),
                host.abort_run(id, send9::RESUME_REJECTED.to_owned()),
            )
            .await;
        });
    }
    orch.emit("a2a.error", Some(run_id), None, json!({"error": send9::RESUME_REJECTED}));
}
