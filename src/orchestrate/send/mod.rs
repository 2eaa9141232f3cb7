//! `sessions_send` (REFERENCE.md §5, DECISIONS.md #1, #4, #6): the tool, its primary run, and the
//! agent-to-agent flow after it (reply-back loop, announce step, announce delivery through the
//! outbox).
//!
//! The tool resolves and checks its target (label lookup, sessionId input, sandbox visibility,
//! the agent-to-agent policy), checks the target's send policy, starts the primary run in the
//! requester's chain and, in wait mode, waits for it. Everything after the primary run happens
//! in a background [`Flow`] that never affects the tool's result: its failures become events,
//! never errors. Every run started here counts against the chain budget (DECISIONS.md #4); the
//! announce itself is an outbox item, delivered by the orchestrator's dispatcher through the
//! send policy.

use std::sync::Arc;

use serde_json::{json, Map, Value};

mod flow;
mod route;
#[cfg(test)]
mod tests;

use flow::{Flow, Primary};

use super::delivery::{self, Verdict};
use super::runs::{Provenance, RunSnapshot, RunSpec, RunStatus};
use super::state::Orchestrator;
use super::task::{blocking, new_chain_id};
use super::{prompts, reply};
use crate::engine::Engine;
use crate::error::{Error, ErrorCode, Result};
use crate::host::{Lane, RunOptions};
use crate::keys::normalize_agent_id;
use crate::policy::{a2a, sandbox};
use crate::tools::history::{resolve_reference, spawned_by_requester};
use crate::tools::{read_number, read_string, Requester, ToolContext};

/// `timeoutSeconds` when the model gives none.
pub const DEFAULT_TIMEOUT_SECONDS: u64 = 30;
/// The announce-step timeout of a fire-and-forget send.
pub const FIRE_AND_FORGET_ANNOUNCE_MS: u64 = 30_000;
/// Every wait of the agent-to-agent flow is capped at this.
pub const MAX_STEP_WAIT_MS: u64 = 60_000;
/// Messages read to find a run's reply.
pub const REPLY_READ_LIMIT: u32 = 50;
/// The channel every run of the flow is made on.
const WEBCHAT: &str = "webchat";

pub const BOTH_GIVEN: &str = "Provide either sessionKey or label (not both).";
pub const NONE_GIVEN: &str = "Either sessionKey or label is required";
pub const SANDBOX_LABEL_LOOKUP: &str = "Sandboxed sessions_send label lookup is limited to this agent";
pub const A2A_DISABLED: &str =
    "Agent-to-agent messaging is disabled. Set tools.agentToAgent.enabled=true to allow cross-agent sends.";
pub const A2A_DENIED: &str = "Agent-to-agent messaging denied by tools.agentToAgent.allow.";
pub use super::delivery::SEND_BLOCKED;

/// The chain-limit refusal (DECISIONS.md #4).
pub fn chain_limit_text(max: u32) -> String {
    format!("Agent-to-agent chain limit reached ({max} turns).")
}

fn new_id() -> String {
    uuid::Uuid::new_v4().to_string()
}

/// A result payload in the key order of §5.1: `runId, status, reply?, error?, sessionKey?,
/// delivery?`.
fn payload(
    run_id: &str,
    status: &str,
    reply: Option<&str>,
    error: Option<&str>,
    session_key: Option<&str>,
    pending_delivery: bool,
) -> Value {
    let mut m = Map::new();
    m.insert("runId".into(), run_id.into());
    m.insert("status".into(), status.into());
    if let Some(r) = reply {
        m.insert("reply".into(), r.into());
    }
    if let Some(e) = error {
        m.insert("error".into(), e.into());
    }
    if let Some(k) = session_key {
        m.insert("sessionKey".into(), k.into());
    }
    if pending_delivery {
        m.insert("delivery".into(), json!({"status": "pending", "mode": "announce"}));
    }
    Value::Object(m)
}

/// A refusal produced before any run: a fresh, meaningless run id (§5.1).
fn refused(status: &str, error: &str, session_key: Option<&str>) -> Value {
    payload(&new_id(), status, None, Some(error), session_key, false)
}

/// §5.2 step 8: the wait and the announce-step timeout.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Timing {
    /// max(0, floor(timeoutSeconds)) when a finite number, else 30; 0 = fire-and-forget
    pub timeout_seconds: u64,
    pub timeout_ms: u64,
    /// 30 000 for a fire-and-forget send, else `timeout_ms`
    pub announce_timeout_ms: u64,
}

impl Timing {
    pub fn of(params: &Value) -> Timing {
        // `as` saturates: a huge number becomes u64::MAX, a negative one 0
        let timeout_seconds =
            read_number(params, "timeoutSeconds").map_or(DEFAULT_TIMEOUT_SECONDS, |n| n.floor() as u64);
        let timeout_ms = timeout_seconds.saturating_mul(1000);
        let announce_timeout_ms = if timeout_seconds == 0 { FIRE_AND_FORGET_ANNOUNCE_MS } else { timeout_ms };
        Timing { timeout_seconds, timeout_ms, announce_timeout_ms }
    }

    /// How long the flow waits for one of its runs (and for a fire-and-forget primary).
    pub fn step_wait_ms(&self) -> u64 {
        self.announce_timeout_ms.min(MAX_STEP_WAIT_MS)
    }
}

/// A target that passed every check of §5.2.
struct Target {
    /// canonical key
    key: String,
    /// what the requester is shown
    display: String,
    requester: Requester,
}

/// §5.2 steps 2–9 (all but the timeouts): who asks, which session is meant, and whether the
/// requester may reach it. `Err` inside is the refusal payload.
fn resolve_target(engine: &Engine, params: &Value, ctx: &ToolContext) -> Result<std::result::Result<Target, Value>> {
    let cfg = engine.config();
    let requester = Requester::of(&cfg, ctx)?;
    let restricted = sandbox::restrict_to_spawned(&cfg, ctx.sandboxed, requester.key.as_deref(), &requester.agent);
    let session_key = read_string(params, "sessionKey");
    let label = read_string(params, "label");
    let input = match (session_key, label) {
        (Some(_), Some(_)) => return Ok(Err(refused("error", BOTH_GIVEN, None))),
        (Some(key), None) => key,
        (None, Some(label)) => match lookup_label(engine, params, &label, &requester, restricted)? {
            Ok(key) => key,
            Err(refusal) => return Ok(Err(refusal)),
        },
        (None, None) => return Ok(Err(refused("error", NONE_GIVEN, None))),
    };
    let resolved = match resolve_reference(engine, &cfg, &input, &requester, restricted)? {
        Ok(r) => r,
        Err(refusal) => {
            let status = refusal.get("status").and_then(Value::as_str).unwrap_or("error");
            let error = refusal.get("error").and_then(Value::as_str).unwrap_or_default();
            return Ok(Err(refused(status, error, None)));
        }
    };
    if restricted && !resolved.via_session_id && !spawned_by_requester(engine, &resolved.key, &requester)? {
        let text = format!("Session not visible from this sandboxed agent session: {input}");
        return Ok(Err(refused("forbidden", &text, Some(&resolved.display))));
    }
    let target_agent = cfg.key_model().agent_id_of(&resolved.key);
    match a2a::check(&cfg.agent_to_agent, &requester.agent, &target_agent) {
        a2a::A2aDecision::Allowed => {}
        a2a::A2aDecision::Disabled => return Ok(Err(refused("forbidden", A2A_DISABLED, Some(&resolved.display)))),
        a2a::A2aDecision::Denied => return Ok(Err(refused("forbidden", A2A_DENIED, Some(&resolved.display)))),
    }
    Ok(Ok(Target { key: resolved.key, display: resolved.display, requester }))
}

/// §5.2 step 4: the key a label names, within the requested agent's sessions when `agentId` is
/// given (and within the requester's children when sandboxed).
fn lookup_label(
    engine: &Engine,
    params: &Value,
    label: &str,
    requester: &Requester,
    restricted: bool,
) -> Result<std::result::Result<String, Value>> {
    let cfg = engine.config();
    let requested_agent = read_string(params, "agentId").map(|a| normalize_agent_id(&a));
    if let Some(agent) = &requested_agent {
        if restricted && normalize_agent_id(&requester.agent) != *agent {
            return Ok(Err(refused("forbidden", SANDBOX_LABEL_LOOKUP, None)));
        }
        match a2a::check(&cfg.agent_to_agent, &requester.agent, agent) {
            a2a::A2aDecision::Allowed => {}
            a2a::A2aDecision::Disabled => return Ok(Err(refused("forbidden", A2A_DISABLED, None))),
            a2a::A2aDecision::Denied => return Ok(Err(refused("forbidden", A2A_DENIED, None))),
        }
    }
    let mut query = Map::new();
    query.insert("label".into(), label.into());
    if let Some(agent) = requested_agent {
        query.insert("agentId".into(), agent.into());
    }
    if restricted {
        if let Some(key) = &requester.key {
            query.insert("spawnedBy".into(), key.clone().into());
        }
    }
    let failed = |message: &str| {
        if restricted {
            refused("forbidden", &format!("Session not visible from this sandboxed agent session: label={label}"), None)
        } else if message.is_empty() {
            refused("error", &format!("No session found with label: {label}"), None)
        } else {
            refused("error", message, None)
        }
    };
    match engine.resolve_session(&Value::Object(query)) {
        Ok(found) => match found.get("key").and_then(Value::as_str).filter(|k| !k.is_empty()) {
            Some(key) => Ok(Ok(key.to_owned())),
            None => Ok(Err(failed(""))),
        },
        Err(e) if matches!(e.code(), ErrorCode::Closed | ErrorCode::StoreError) => Err(e),
        Err(e) => Ok(Err(failed(e.message()))),
    }
}

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
pub async fn run(orch: &Arc<Orchestrator>, params: &Value, ctx: &ToolContext) -> Result<Value> {
    let message = read_string(params, "message").ok_or_else(|| Error::invalid_request("message required"))?;
    let engine = orch.engine().clone();
    let cfg = engine.config();
    let (e, p, c) = (engine.clone(), params.clone(), ctx.clone());
    let target = match blocking(move || resolve_target(&e, &p, &c)).await? {
        Ok(t) => t,
        Err(refusal) => return Ok(refusal),
    };
    let timing = Timing::of(params);
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
