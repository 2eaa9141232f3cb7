//! `sessions_send`'s surface (REFERENCE.md §5.1–§5.2): its parameters read into a
//! [`SendRequest`] (the message, the target with every check of §5.2 passed, the timing), and
//! its result and refusal payloads. What happens after the parameters are read (the runs, the
//! flow, the announce) is `orchestrate::send`'s.

use serde_json::{json, Map, Value};

use super::target::{resolve_reference, spawned_by_requester};
use super::{read_number, read_string, Checked, Refusal, Requester, ToolContext};
use crate::engine::Engine;
use crate::error::{Error, ErrorCode};
use crate::keys::normalize_agent_id;
use crate::policy::{a2a, sandbox};

/// `timeoutSeconds` when the model gives none.
pub const DEFAULT_TIMEOUT_SECONDS: u64 = 30;
/// The announce-step timeout of a fire-and-forget send.
pub const FIRE_AND_FORGET_ANNOUNCE_MS: u64 = 30_000;
/// Every wait of the agent-to-agent flow is capped at this.
pub const MAX_STEP_WAIT_MS: u64 = 60_000;

pub const BOTH_GIVEN: &str = "Provide either sessionKey or label (not both).";
pub const NONE_GIVEN: &str = "Either sessionKey or label is required";
pub const SANDBOX_LABEL_LOOKUP: &str = "Sandboxed sessions_send label lookup is limited to this agent";
pub const A2A_DISABLED: &str =
    "Agent-to-agent messaging is disabled. Set tools.agentToAgent.enabled=true to allow cross-agent sends.";
pub const A2A_DENIED: &str = "Agent-to-agent messaging denied by tools.agentToAgent.allow.";
/// The refusal of a target whose send policy denies.
pub use crate::orchestrate::delivery::SEND_BLOCKED;

/// A `sessions_send` call with its parameters read and its target checked.
pub struct SendRequest {
    /// trimmed, non-empty
    pub message: String,
    pub target: Target,
    pub timing: Timing,
}

/// Reads a call: `message` is required (an error, which the model sees as a thrown payload),
/// then the target (§5.2 steps 2–9, refusals as payloads), then the timing.
pub fn read(engine: &Engine, params: &Value, ctx: &ToolContext) -> Checked<SendRequest> {
    let message = read_string(params, "message").ok_or_else(|| Error::invalid_request("message required"))?;
    let target = resolve_target(engine, params, ctx)?;
    Ok(SendRequest { message, target, timing: Timing::of(params) })
}

/// The chain-limit refusal (DECISIONS.md #4).
pub fn chain_limit_text(max: u32) -> String {
    format!("Agent-to-agent chain limit reached ({max} turns).")
}

pub fn new_id() -> String {
    uuid::Uuid::new_v4().to_string()
}

/// A result payload in the key order of §5.1: `runId, status, reply?, error?, sessionKey?,
/// delivery?`.
pub fn payload(
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
pub fn refused(status: &str, error: &str, session_key: Option<&str>) -> Value {
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
pub struct Target {
    /// canonical key
    pub key: String,
    /// what the requester is shown
    pub display: String,
    pub requester: Requester,
}

/// §5.2 steps 2–9 (all but the timeouts): who asks, which session is meant, and whether the
/// requester may reach it.
pub fn resolve_target(engine: &Engine, params: &Value, ctx: &ToolContext) -> Checked<Target> {
    let cfg = engine.config();
    let requester = Requester::of(&cfg, ctx)?;
    let restricted = sandbox::restrict_to_spawned(&cfg, ctx.sandboxed, requester.key.as_deref(), &requester.agent);
    let session_key = read_string(params, "sessionKey");
    let label = read_string(params, "label");
    let input = match (session_key, label) {
        (Some(_), Some(_)) => return Err(Refusal::Payload(refused("error", BOTH_GIVEN, None))),
        (Some(key), None) => key,
        (None, Some(label)) => lookup_label(engine, params, &label, &requester, restricted)?,
        (None, None) => return Err(Refusal::Payload(refused("error", NONE_GIVEN, None))),
    };
    let resolved = match resolve_reference(engine, &cfg, &input, &requester, restricted) {
        Ok(r) => r,
        Err(Refusal::Failed(e)) => return Err(e.into()),
        Err(Refusal::Payload(refusal)) => {
            let status = refusal.get("status").and_then(Value::as_str).unwrap_or("error");
            let error = refusal.get("error").and_then(Value::as_str).unwrap_or_default();
            return Err(Refusal::Payload(refused(status, error, None)));
        }
    };
    if restricted && !resolved.via_session_id && !spawned_by_requester(engine, &resolved.key, &requester)? {
        let text = format!("Session not visible from this sandboxed agent session: {input}");
        return Err(Refusal::Payload(refused("forbidden", &text, Some(&resolved.display))));
    }
    let target_agent = cfg.key_model().agent_id_of(&resolved.key);
    match a2a::check(&cfg.agent_to_agent, &requester.agent, &target_agent) {
        a2a::A2aDecision::Allowed => {}
        a2a::A2aDecision::Disabled => {
            return Err(Refusal::Payload(refused("forbidden", A2A_DISABLED, Some(&resolved.display))))
        }
        a2a::A2aDecision::Denied => {
            return Err(Refusal::Payload(refused("forbidden", A2A_DENIED, Some(&resolved.display))))
        }
    }
    Ok(Target { key: resolved.key, display: resolved.display, requester })
}

/// §5.2 step 4: the key a label names, within the requested agent's sessions when `agentId` is
/// given (and within the requester's children when sandboxed).
fn lookup_label(
    engine: &Engine,
    params: &Value,
    label: &str,
    requester: &Requester,
    restricted: bool,
) -> Checked<String> {
    let cfg = engine.config();
    let requested_agent = read_string(params, "agentId").map(|a| normalize_agent_id(&a));
    if let Some(agent) = &requested_agent {
        if restricted && normalize_agent_id(&requester.agent) != *agent {
            return Err(Refusal::Payload(refused("forbidden", SANDBOX_LABEL_LOOKUP, None)));
        }
        match a2a::check(&cfg.agent_to_agent, &requester.agent, agent) {
            a2a::A2aDecision::Allowed => {}
            a2a::A2aDecision::Disabled => return Err(Refusal::Payload(refused("forbidden", A2A_DISABLED, None))),
            a2a::A2aDecision::Denied => return Err(Refusal::Payload(refused("forbidden", A2A_DENIED, None))),
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
            Some(key) => Ok(key.to_owned()),
            None => Err(Refusal::Payload(failed(""))),
        },
        Err(e) if matches!(e.code(), ErrorCode::Closed | ErrorCode::StoreError) => Err(e.into()),
        Err(e) => Err(Refusal::Payload(failed(e.message()))),
    }
}
