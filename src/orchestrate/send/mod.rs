//! `sessions_send` (REFERENCE.md §5, DECISIONS.md #1, #4, #6): the tool, its primary run, and the
//! agent-to-agent flow after it (reply-back loop, announce step, announce delivery through the
//! outbox).
//!
//! `tools::send` reads the parameters and checks the target (label lookup, sessionId input,
//! sandbox visibility, the agent-to-agent policy); from there this module checks the target's
//! send policy (`delivery`), starts the primary run in the requester's chain and, in wait mode,
//! waits for it. Everything after the primary run happens
//! in a background [`Flow`] that never affects the tool's result: its failures become events,
//! never errors. Every run started here counts against the chain budget (DECISIONS.md #4); the
//! announce itself is an outbox item, delivered by the orchestrator's dispatcher through the
//! send policy.

use std::sync::Arc;

use serde_json::{json, Value};

mod flow;
#[cfg(test)]
mod flow_tests;
mod resume9;
mod route;
#[cfg(test)]
mod testkit;
#[cfg(test)]
mod tests;
pub mod v9;

use flow::{Flow, Primary};

use super::delivery::{self, Verdict};
use super::runs::{Provenance, RunSnapshot, RunSpec, RunStatus};
use super::state::Orchestrator;
use super::task::{blocking, new_chain_id};
use super::{prompts, reply};
use crate::engine::Engine;
use crate::error::{ErrorCode, Result};
use crate::host::{Lane, RunOptions};
pub use crate::tools::send::{
    chain_limit_text, A2A_DENIED, A2A_DISABLED, BOTH_GIVEN, DEFAULT_TIMEOUT_SECONDS, FIRE_AND_FORGET_ANNOUNCE_MS,
    MAX_STEP_WAIT_MS, NONE_GIVEN, SANDBOX_LABEL_LOOKUP, SEND_BLOCKED,
};
use crate::tools::send::{new_id, payload, refused, SendRequest, Timing};
use crate::tools::ToolContext;

/// Messages read to find a run's reply.
pub const REPLY_READ_LIMIT: u32 = 50;
/// The channel every run of the flow is made on.
pub(crate) const WEBCHAT: &str = "webchat";

/// What trying to start a run came to.
enum Started {
    Run(String),
    /// the chain already holds `maxChainTurns` runs
    ChainFull,
    /// the session's send policy denies it (or could not be evaluated: fail closed)
    Blocked,
}

/// Starts a run after checking the send policy of its session, as the gateway's `agent` method
/// does for every run (REFERENCE.md §7.2); a policy that cannot be evaluated denies
/// (DECISIONS.md #6). A blocked run emits `send.blocked` with the reason.
async fn start_checked(orch: &Arc<Orchestrator>, spec: RunSpec) -> Result<Started> {
    let (engine, host, runs) = (orch.engine().clone(), orch.host().clone(), orch.runs().clone());
    let key = spec.session_key.clone();
    let started = blocking(move || {
        if let Verdict::Blocked { reason, error } = delivery::check(&engine, &spec.session_key, None) {
            return match error {
                Some(e) if e.code() == ErrorCode::Closed => Err(e),
                _ => Ok(Err(reason)),
            };
        }
        Ok(Ok(runs.start(engine, host, spec)?))
    })
    .await?;
    Ok(match started {
        Ok(Some(run_id)) => Started::Run(run_id),
        Ok(None) => Started::ChainFull,
        Err(reason) => {
            orch.emit("send.blocked", None, Some(&key), json!({ "reason": reason }));
            Started::Blocked
        }
    })
}

/// The reply of run `run_id` on a session (§5.7): the session's last 50 messages, tool results
/// dropped, the latest assistant reply among them. A run's messages follow its incoming message
/// (they are appended in one lane turn), so when that message is among the 50, only the
/// messages of this run count: a later run on the same session (another flow's step) cannot
/// hide or replace its reply.
async fn latest_reply(engine: &Arc<Engine>, session_key: &str, run_id: &str) -> Result<Option<String>> {
    let (e, key, run_id) = (engine.clone(), session_key.to_owned(), run_id.to_owned());
    blocking(move || {
        let (_, _, page) = e.chat_history(&Value::from(key), &json!({ "limit": REPLY_READ_LIMIT }))?;
        let messages: Vec<Value> = page
            .messages
            .iter()
            .filter(|m| m.role.as_deref() != Some("toolResult"))
            .filter_map(|m| serde_json::from_str(&m.json).ok())
            .collect();
        Ok(reply::latest_assistant_reply(run_messages(&messages, &run_id)))
    })
    .await
}

/// The messages of one run: those after its incoming message (the one whose provenance names
/// it), up to the next run's incoming message; all of them when its incoming message is not
/// among them.
fn run_messages<'a>(messages: &'a [Value], run_id: &str) -> &'a [Value] {
    let run_of =
        |m: &Value| m.get("provenance").and_then(|p| p.get("runId")).and_then(Value::as_str).map(str::to_owned);
    let Some(start) = messages.iter().rposition(|m| run_of(m).as_deref() == Some(run_id)) else {
        return messages;
    };
    let rest = &messages[start + 1..];
    let end = rest.iter().position(|m| run_of(m).is_some()).unwrap_or(rest.len());
    &rest[..end]
}

/// The tool: the payload the model sees.
pub async fn run(orch: &Arc<Orchestrator>, request: SendRequest, ctx: &ToolContext) -> Result<Value> {
    let SendRequest { message, target, timing } = request;
    let engine = orch.engine().clone();
    let cfg = engine.config();
    let waited = timing.timeout_seconds > 0;

    // The chain of the run this call is made from (DECISIONS.md #4), else a new one.
    let (e, runs, run_id, req_key) =
        (engine.clone(), orch.runs().clone(), ctx.run_id.clone(), target.requester.key.clone());
    let chain_id =
        blocking(move || runs.chain_of(&e, run_id.as_deref(), req_key.as_deref())).await?.unwrap_or_else(new_chain_id);

    let flow = Flow {
        orch: orch.clone(),
        target_key: target.key.clone(),
        target_display: target.display.clone(),
        message: message.clone(),
        timing,
        max_turns: cfg.max_ping_pong_turns,
        max_chain_turns: cfg.max_chain_turns,
        run_timeout_ms: cfg.default_timeout_seconds.saturating_mul(1000),
        requester_key: target.requester.key.clone(),
        requester_raw: target.requester.raw.clone(),
        requester_channel: ctx.agent_channel.clone(),
        chain_id: chain_id.clone(),
    };
    let context =
        prompts::message_context(target.requester.raw.as_deref(), ctx.agent_channel.as_deref(), &target.display);
    let primary_timeout_ms = if waited { timing.timeout_ms } else { flow.run_timeout_ms };
    let spec = RunSpec {
        session_key: target.key.clone(),
        message,
        provenance: Provenance { kind: "inter_session", source_session_key: target.requester.key.clone() },
        options: RunOptions {
            extra_system_prompt: Some(context),
            channel: Some(WEBCHAT.to_owned()),
            ..RunOptions::new(Lane::Nested, primary_timeout_ms, chain_id)
        },
        chain_limit: Some(cfg.max_chain_turns),
    };
    let display = target.display.as_str();
    let run_id = match start_checked(orch, spec).await? {
        Started::Run(id) => id,
        Started::ChainFull => {
            return Ok(refused("forbidden", &chain_limit_text(cfg.max_chain_turns), Some(display)));
        }
        Started::Blocked => return Ok(refused("error", SEND_BLOCKED, Some(display))),
    };

    if !waited {
        orch.spawn_busy(flow.run(Primary::Wait(run_id.clone())));
        return Ok(payload(&run_id, "accepted", None, None, Some(display), true));
    }

    let snap = match orch.runs().wait(&engine, &run_id, timing.timeout_ms).await {
        Ok(s) => s,
        Err(e) if e.code() == ErrorCode::Closed => return Err(e),
        Err(e) => return Ok(payload(&run_id, "error", None, Some(e.message()), Some(display), false)),
    };
    match snap.status {
        RunStatus::Ok => {
            let reply = latest_reply(&engine, &target.key, &run_id).await?;
            orch.spawn_busy(flow.run(Primary::Reply(reply.clone())));
            Ok(payload(&run_id, "ok", reply.as_deref(), None, Some(display), true))
        }
        RunStatus::Error => {
            let error = snap.error.as_deref().filter(|e| !e.is_empty()).unwrap_or("agent error");
            Ok(payload(&run_id, "error", None, Some(error), Some(display), false))
        }
        RunStatus::Timeout | RunStatus::Running => {
            // DECISIONS.md #1: the run goes on; when it ends well, the flow still happens.
            if !ended(&snap) {
                orch.spawn_busy(flow.run(Primary::UntilEnd(run_id.clone())));
            }
            Ok(payload(&run_id, "timeout", None, snap.error.as_deref(), Some(display), false))
        }
    }
}

/// Whether a snapshot is of a run that has ended (rather than a wait that ran out).
fn ended(snap: &RunSnapshot) -> bool {
    snap.ended_at.is_some() && snap.status != RunStatus::Running
}
