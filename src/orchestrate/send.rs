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

use super::runs::{Provenance, RunSnapshot, RunSpec, RunStatus};
use super::{announce_target, blocking, prompts, reply, Orchestrator, A2A_ANNOUNCE};
use crate::config::PolicyAction;
use crate::engine::Engine;
use crate::entry::DeliveryContext;
use crate::error::{Error, ErrorCode, Result};
use crate::host::{Lane, RunOptions};
use crate::js::js_trim;
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
pub const SEND_BLOCKED: &str = "send blocked by session policy";

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
        let blocked = match engine.resolve_send_policy(&json!({ "sessionKey": spec.session_key })) {
            Ok(PolicyAction::Allow) => None,
            Ok(PolicyAction::Deny) => Some(SEND_BLOCKED.to_owned()),
            Err(e) if e.code() == ErrorCode::Closed => return Err(e),
            Err(e) => Some(format!("send policy could not be evaluated: {}", e.message())),
        };
        if let Some(reason) = blocked {
            return Ok(Err(reason));
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
    let chain_id = blocking(move || runs.chain_of(&e, run_id.as_deref(), req_key.as_deref()))
        .await?
        .unwrap_or_else(super::new_chain_id);

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

/// Where the flow gets the primary run's reply from.
enum Primary {
    /// read already (wait mode): `None` when the run left no reply
    Reply(Option<String>),
    /// wait for the run (fire-and-forget), at most the step wait
    Wait(String),
    /// wait for the run however long it takes (after a `timeout` result, DECISIONS.md #1)
    UntilEnd(String),
}

/// Where an announce is delivered (§5.6 with DECISIONS.md's thread rule).
#[derive(Debug, Clone, PartialEq)]
struct Route {
    channel: String,
    to: String,
    account_id: Option<String>,
    thread_id: Option<String>,
}

/// `resolveAnnounceTarget`: the route the key names, unless none does or its channel prefers
/// the session lookup (WhatsApp); then the target's stored route (`deliveryContext` over the
/// `last*` fields) when it has a channel and a recipient; else the key's route, if any.
fn announce_route(engine: &Engine, internal_key: &str, display_key: &str) -> Option<Route> {
    let from_key = announce_target::from_key(internal_key).or_else(|| announce_target::from_key(display_key));
    let fallback = from_key.map(|t| Route { channel: t.channel, to: t.to, account_id: None, thread_id: t.thread_id });
    if let Some(route) = &fallback {
        if route.channel != "whatsapp" {
            return fallback;
        }
    }
    let stored = engine.store().read(|db| db.session(internal_key)).ok().flatten();
    if let Some(e) = stored {
        let ctx = DeliveryContext::of_object(e.get("deliveryContext")).overlay(DeliveryContext::from_parts(
            e.get("lastChannel"),
            e.get("lastTo"),
            e.get("lastAccountId"),
            e.get("lastThreadId"),
        ));
        if let (Some(channel), Some(to)) = (ctx.channel, ctx.to) {
            let thread_id = match ctx.thread_id {
                Some(Value::String(s)) => Some(s),
                Some(Value::Number(n)) => Some(n.to_string()),
                _ => None,
            };
            // a stored route without a thread keeps the one the key names
            let thread_id = thread_id.or_else(|| fallback.as_ref().and_then(|f| f.thread_id.clone()));
            return Some(Route { channel, to, account_id: ctx.account_id, thread_id });
        }
    }
    fallback
}

/// One run of the flow (a reply step or the announce step) and what came of it.
struct Step {
    run_id: Option<String>,
    /// ok | error | timeout | chain_limit | blocked
    status: &'static str,
    /// the run's reply, when it ended ok and left one
    reply: Option<String>,
}

/// The agent-to-agent flow after the primary run (§5.5): the reply-back loop between requester
/// and target, then the announce step on the target, whose reply goes to the outbox.
struct Flow {
    orch: Arc<Orchestrator>,
    target_key: String,
    target_display: String,
    /// the original message (trimmed)
    message: String,
    timing: Timing,
    max_turns: u32,
    max_chain_turns: u32,
    /// the run timeout of the flow's runs (agents.defaults.timeoutSeconds)
    run_timeout_ms: u64,
    /// canonical
    requester_key: Option<String>,
    /// as the caller gave it (prompt lines)
    requester_raw: Option<String>,
    requester_channel: Option<String>,
    chain_id: String,
}

impl Flow {
    /// Runs the flow to its end; failures are reported as events (`a2a.error`), never returned.
    /// `a2a.end` closes every flow, with the reason it stopped.
    async fn run(self, primary: Primary) {
        let (reason, error) = match self.go(primary).await {
            Ok(reason) => (reason, None),
            Err(e) => ("failed", Some(e.message().to_owned())),
        };
        let key = Some(self.target_key.as_str());
        if let Some(error) = &error {
            self.orch.emit("a2a.error", None, key, json!({ "error": error }));
        }
        self.orch.emit("a2a.end", None, key, json!({ "reason": reason, "chainId": self.chain_id }));
    }

    async fn go(&self, primary: Primary) -> Result<&'static str> {
        let engine = self.orch.engine().clone();
        let round_one = match primary {
            Primary::Reply(reply) => reply,
            Primary::Wait(run_id) => {
                let snap = self.orch.runs().wait(&engine, &run_id, self.timing.step_wait_ms()).await?;
                self.reply_if_ok(&snap, &self.target_key).await?
            }
            Primary::UntilEnd(run_id) => {
                let snap = self.until_end(&run_id).await?;
                self.reply_if_ok(&snap, &self.target_key).await?
            }
        };
        let Some(round_one) = round_one else { return Ok("no reply") };

        let (e, internal, display) = (engine.clone(), self.target_key.clone(), self.target_display.clone());
        let route = blocking(move || Ok(announce_route(&e, &internal, &display))).await?;
        let target_channel = route.as_ref().map_or("unknown", |r| r.channel.as_str()).to_owned();

        let mut latest = round_one.clone();
        let requester = self.requester_key.clone().filter(|k| *k != self.target_key);
        if let (Some(requester_key), true) = (requester, self.max_turns > 0) {
            let mut incoming = round_one.clone();
            let mut requester_speaks = true;
            for turn in 1..=self.max_turns {
                let (speaker, listener) = if requester_speaks {
                    (requester_key.clone(), self.target_key.clone())
                } else {
                    (self.target_key.clone(), requester_key.clone())
                };
                let context = prompts::reply_step_context(
                    requester_speaks,
                    turn,
                    self.max_turns,
                    self.requester_raw.as_deref(),
                    self.requester_channel.as_deref(),
                    &self.target_display,
                    Some(&target_channel),
                );
                let step = self.step(&speaker, incoming.clone(), context, Some(listener)).await?;
                let skipped = step.reply.as_deref().is_none_or(prompts::is_reply_skip);
                self.orch.emit(
                    "a2a.turn",
                    step.run_id.as_deref(),
                    Some(&speaker),
                    json!({
                        "turn": turn,
                        "maxTurns": self.max_turns,
                        "speaker": if requester_speaks { "requester" } else { "target" },
                        "status": step.status,
                        "skipped": skipped,
                    }),
                );
                match step.reply {
                    Some(reply) if !skipped => {
                        latest = reply.clone();
                        incoming = reply;
                        requester_speaks = !requester_speaks;
                    }
                    _ => break,
                }
            }
        }

        let context = prompts::announce_step_context(
            self.requester_raw.as_deref(),
            self.requester_channel.as_deref(),
            &self.target_display,
            Some(&target_channel),
            &self.message,
            Some(&round_one),
            Some(&latest),
        );
        let step = self
            .step(&self.target_key, prompts::ANNOUNCE_STEP_MESSAGE.to_owned(), context, self.requester_key.clone())
            .await?;
        let key = Some(self.target_key.as_str());
        let skip = |reason: &str| json!({ "status": "skipped", "reason": reason });
        if step.status != "ok" {
            self.orch.emit("a2a.announce", step.run_id.as_deref(), key, skip(step.status));
            return Ok("announce step did not complete");
        }
        let text = step.reply.as_deref().map(js_trim).unwrap_or_default().to_owned();
        if text.is_empty() || prompts::is_announce_skip(&text) {
            let reason = if text.is_empty() { "no reply" } else { prompts::ANNOUNCE_SKIP };
            self.orch.emit("a2a.announce", step.run_id.as_deref(), key, skip(reason));
            return Ok("announce skipped");
        }
        let Some(route) = route else {
            self.orch.emit("a2a.announce", step.run_id.as_deref(), key, skip("no announce target"));
            return Ok("no announce target");
        };
        let idempotency_key = new_id();
        let mut item = Map::new();
        item.insert("channel".into(), route.channel.clone().into());
        item.insert("to".into(), route.to.clone().into());
        if let Some(a) = &route.account_id {
            item.insert("accountId".into(), a.clone().into());
        }
        if let Some(t) = &route.thread_id {
            item.insert("threadId".into(), t.clone().into());
        }
        item.insert("message".into(), text.into());
        item.insert("idempotencyKey".into(), idempotency_key.clone().into());
        item.insert("sessionKey".into(), self.target_key.clone().into());
        item.insert("kind".into(), A2A_ANNOUNCE.into());
        let item = Value::Object(item);
        let (outbox, ik, sk) = (self.orch.outbox().clone(), idempotency_key.clone(), self.target_key.clone());
        blocking(move || outbox.enqueue(&ik, A2A_ANNOUNCE, Some(&sk), &item)).await?;
        self.orch.emit(
            "a2a.announce",
            step.run_id.as_deref(),
            key,
            json!({
                "status": "queued",
                "idempotencyKey": idempotency_key,
                "channel": route.channel,
                "to": route.to,
            }),
        );
        Ok("announced")
    }

    /// Waits until a run has ended, however long (it ends at the latest at its own timeout),
    /// unless the store closes or the run is unknown.
    async fn until_end(&self, run_id: &str) -> Result<RunSnapshot> {
        let engine = self.orch.engine().clone();
        loop {
            let snap = self.orch.runs().wait(&engine, run_id, MAX_STEP_WAIT_MS).await?;
            if ended(&snap) || snap.status != RunStatus::Timeout || snap.started_at.is_none() {
                return Ok(snap);
            }
            if self.orch.runs().is_closed() {
                return Err(Error::closed());
            }
        }
    }

    /// The run's reply when it ended ok.
    async fn reply_if_ok(&self, snap: &RunSnapshot, session_key: &str) -> Result<Option<String>> {
        if snap.status != RunStatus::Ok {
            return Ok(None);
        }
        latest_reply(self.orch.engine(), session_key, &snap.run_id).await
    }

    /// One run of the flow on `session_key` (§5.5 step 6): started in the chain (unless its
    /// budget is used up or the session's policy denies it), waited for at most the step wait,
    /// its reply read when it ended ok.
    async fn step(&self, session_key: &str, message: String, context: String, source: Option<String>) -> Result<Step> {
        let spec = RunSpec {
            session_key: session_key.to_owned(),
            message,
            provenance: Provenance { kind: "inter_session", source_session_key: source },
            options: RunOptions {
                extra_system_prompt: Some(context),
                channel: Some(WEBCHAT.to_owned()),
                ..RunOptions::new(Lane::Nested, self.run_timeout_ms, self.chain_id.clone())
            },
            chain_limit: Some(self.max_chain_turns),
        };
        let run_id = match start_checked(&self.orch, spec).await? {
            Started::Run(id) => id,
            Started::ChainFull => return Ok(Step { run_id: None, status: "chain_limit", reply: None }),
            Started::Blocked => return Ok(Step { run_id: None, status: "blocked", reply: None }),
        };
        let snap = self.orch.runs().wait(self.orch.engine(), &run_id, self.timing.step_wait_ms()).await?;
        let status = match snap.status {
            RunStatus::Ok => "ok",
            RunStatus::Error => "error",
            RunStatus::Timeout | RunStatus::Running => "timeout",
        };
        let reply = self.reply_if_ok(&snap, session_key).await?;
        Ok(Step { run_id: Some(run_id), status, reply })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::Config;
    use crate::host::testing::FakeHost;
    use crate::host::AgentRunRequest;
    use crate::store::Store;
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::sync::{Mutex, OnceLock, Weak};
    use std::time::Duration;

    /// What a run of the flow is, told from its prompt.
    #[derive(Debug, Clone, Copy, PartialEq, Eq)]
    enum Kind {
        Primary,
        RequesterTurn,
        TargetTurn,
        Announce,
        Other,
    }

    fn kind(req: &AgentRunRequest) -> Kind {
        let ctx = req.options.extra_system_prompt.as_deref().unwrap_or_default();
        if ctx.starts_with("Agent-to-agent message context:") {
            Kind::Primary
        } else if ctx.starts_with("Agent-to-agent reply step:") {
            if ctx.contains("Current agent: Agent 1 (requester).") {
                Kind::RequesterTurn
            } else {
                Kind::TargetTurn
            }
        } else if req.message == prompts::ANNOUNCE_STEP_MESSAGE && ctx.starts_with("Agent-to-agent announce step:") {
            Kind::Announce
        } else {
            Kind::Other
        }
    }

    type Script = dyn Fn(Kind, &AgentRunRequest) -> std::result::Result<String, String> + Send + Sync;

    /// A host answering each run with what `f` says for its kind.
    fn scripted(
        f: impl Fn(Kind, &AgentRunRequest) -> std::result::Result<String, String> + Send + Sync + 'static,
    ) -> FakeHost {
        let f: Arc<Script> = Arc::new(f);
        FakeHost::new(move |req| {
            let r = f(kind(&req), &req);
            Box::pin(async move { r.map(|text| json!({ "reply": text })) })
        })
    }

    /// The reference's mocks (D1–D2): the target answers `initial`, the requester's turn
    /// `pong`, the target's turn `REPLY_SKIP`, the announce step `ANNOUNCE_SKIP`.
    fn ping_pong_host(primary: &'static str) -> FakeHost {
        scripted(move |k, _| {
            Ok(match k {
                Kind::Primary => primary,
                Kind::RequesterTurn => "pong",
                Kind::TargetTurn => "REPLY_SKIP",
                Kind::Announce => "ANNOUNCE_SKIP",
                Kind::Other => "?",
            }
            .to_owned())
        })
    }

    async fn open(config: Value, host: FakeHost) -> (Arc<Orchestrator>, Arc<FakeHost>) {
        let cfg = Config::from_json(&config).unwrap();
        let engine = Arc::new(Engine::new(Store::open(":memory:").unwrap(), cfg, None));
        let host = Arc::new(host);
        let orch = Orchestrator::new(engine, host.clone());
        orch.start().await.unwrap();
        (orch, host)
    }

    async fn send(orch: &Arc<Orchestrator>, params: Value, ctx: Value) -> Value {
        orch.tool("sessions_send", params, ctx, false).await.unwrap()
    }

    /// Polls `f` every 10 ms for up to 5 s.
    async fn eventually(what: &str, f: impl Fn() -> bool) {
        for _ in 0..500 {
            if f() {
                return;
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        panic!("not within 5 s: {what}");
    }

    fn count(host: &FakeHost, kind: &str) -> usize {
        host.event_kinds().iter().filter(|k| **k == kind).count()
    }

    /// Waits for `n` agent-to-agent flows to end.
    async fn flows_end(host: &FakeHost, n: usize) {
        eventually(&format!("{n} a2a flow(s) end"), || count(host, "a2a.end") >= n).await;
    }

    fn kinds(host: &FakeHost) -> Vec<Kind> {
        host.requests().iter().map(kind).collect()
    }

    fn keys_of(v: &Value) -> Vec<String> {
        v.as_object().map(|o| o.keys().cloned().collect()).unwrap_or_default()
    }

    fn is_uuid(v: &Value) -> bool {
        v.as_str().and_then(|s| uuid::Uuid::parse_str(s).ok()).is_some()
    }

    fn two_turns() -> Value {
        json!({"session": {"agentToAgent": {"maxPingPongTurns": 2}}})
    }

    fn discord_requester() -> Value {
        json!({"agentSessionKey": "discord:group:req", "agentChannel": "discord"})
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn d1_fire_and_forget_is_accepted_and_the_flow_makes_four_nested_webchat_runs() {
        let (orch, host) = open(two_turns(), ping_pong_host("initial")).await;
        let out =
            send(&orch, json!({"sessionKey": "main", "message": "ping", "timeoutSeconds": 0}), discord_requester())
                .await;
        assert_eq!(keys_of(&out), ["runId", "status", "sessionKey", "delivery"]);
        assert_eq!(out["status"], "accepted");
        assert_eq!(out["sessionKey"], "main");
        assert_eq!(out["delivery"], json!({"status": "pending", "mode": "announce"}));
        flows_end(&host, 1).await;
        let reqs = host.requests();
        assert_eq!(out["runId"], reqs[0].run_id.as_str(), "runId is the primary run's id");
        assert_eq!(kinds(&host), [Kind::Primary, Kind::RequesterTurn, Kind::TargetTurn, Kind::Announce]);
        let sessions: Vec<&str> = reqs.iter().map(|r| r.session_key.as_str()).collect();
        assert_eq!(sessions, ["agent:main:main", "agent:main:discord:group:req", "agent:main:main", "agent:main:main"]);
        for r in &reqs {
            assert_eq!(
                (r.options.lane, r.options.channel.as_deref(), r.options.deliver),
                (Lane::Nested, Some("webchat"), false)
            );
            assert_eq!(r.options.chain_id, reqs[0].options.chain_id);
        }
        // a fire-and-forget primary runs with the agents' default timeout
        assert_eq!(reqs[0].options.timeout_ms, 600_000);
        assert!(host.deliveries().is_empty());
        assert_eq!(count(&host, "a2a.turn"), 2);
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn d2_wait_mode_returns_the_reply_and_the_flow_shows_all_three_prompts() {
        let (orch, host) = open(two_turns(), ping_pong_host("done")).await;
        let out =
            send(&orch, json!({"sessionKey": "main", "message": " ping ", "timeoutSeconds": 1}), discord_requester())
                .await;
        assert_eq!(keys_of(&out), ["runId", "status", "reply", "sessionKey", "delivery"]);
        assert_eq!(
            (out["status"].as_str(), out["reply"].as_str(), out["sessionKey"].as_str()),
            (Some("ok"), Some("done"), Some("main"))
        );
        assert_eq!(out["delivery"], json!({"status": "pending", "mode": "announce"}));
        flows_end(&host, 1).await;
        let reqs = host.requests();
        assert_eq!(reqs.len(), 4);
        assert_eq!(reqs[0].message, "ping", "the message is trimmed");
        assert_eq!(reqs[0].options.timeout_ms, 1000);
        assert_eq!(
            reqs[0].options.extra_system_prompt.as_deref(),
            Some(
                "Agent-to-agent message context:\nAgent 1 (requester) session: discord:group:req.\n\
                 Agent 1 (requester) channel: discord.\nAgent 2 (target) session: main."
            )
        );
        assert_eq!(
            reqs[1].options.extra_system_prompt.as_deref(),
            Some(
                "Agent-to-agent reply step:\nCurrent agent: Agent 1 (requester).\nTurn 1 of 2.\n\
                 Agent 1 (requester) session: discord:group:req.\nAgent 1 (requester) channel: discord.\n\
                 Agent 2 (target) session: main.\nAgent 2 (target) channel: unknown.\n\
                 If you want to stop the ping-pong, reply exactly \"REPLY_SKIP\"."
            )
        );
        assert_eq!((reqs[1].message.as_str(), reqs[2].message.as_str()), ("done", "pong"));
        assert!(reqs[2].options.extra_system_prompt.as_deref().unwrap_or_default().contains("Turn 2 of 2."));
        assert_eq!(reqs[3].message, "Agent-to-agent announce step.");
        assert_eq!(
            reqs[3].options.extra_system_prompt.as_deref(),
            Some(
                "Agent-to-agent announce step:\nAgent 1 (requester) session: discord:group:req.\n\
                 Agent 1 (requester) channel: discord.\nAgent 2 (target) session: main.\n\
                 Agent 2 (target) channel: unknown.\nOriginal request: ping\nRound 1 reply: done\n\
                 Latest reply: pong\nIf you want to remain silent, reply exactly \"ANNOUNCE_SKIP\".\n\
                 Any other reply will be posted to the target channel.\n\
                 After this reply, the agent-to-agent conversation is over."
            )
        );
        // each run's incoming message names the other side as its source
        let (_, _, page) = orch.engine().chat_history(&json!("agent:main:discord:group:req"), &Value::Null).unwrap();
        let first: Value = serde_json::from_str(&page.messages[0].json).unwrap();
        assert_eq!(first["provenance"]["kind"], "inter_session");
        assert_eq!(first["provenance"]["sourceSessionKey"], "agent:main:main");
        let (_, _, page) = orch.engine().chat_history(&json!("agent:main:main"), &Value::Null).unwrap();
        let first: Value = serde_json::from_str(&page.messages[0].json).unwrap();
        assert_eq!(first["provenance"]["sourceSessionKey"], "agent:main:discord:group:req");
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn d3_a_group_target_gets_its_announce_delivered_to_its_channel() {
        let host = scripted(|k, _| {
            Ok(match k {
                Kind::Primary => "initial",
                Kind::RequesterTurn => "pong-1",
                Kind::TargetTurn => "pong-2",
                _ => "announce now",
            }
            .to_owned())
        });
        let (orch, host) = open(two_turns(), host).await;
        let out =
            send(&orch, json!({"sessionKey": "discord:group:target", "message": "hi"}), discord_requester()).await;
        assert_eq!(out["status"], "ok");
        assert_eq!(out["reply"], "initial");
        assert_eq!(out["sessionKey"], "agent:main:discord:group:target");
        flows_end(&host, 1).await;
        assert_eq!(kinds(&host), [Kind::Primary, Kind::RequesterTurn, Kind::TargetTurn, Kind::Announce]);
        let announce = &host.requests()[3];
        let ctx = announce.options.extra_system_prompt.clone().unwrap_or_default();
        assert!(ctx.contains("Agent 2 (target) channel: discord.\n") && ctx.contains("Latest reply: pong-2"), "{ctx}");
        eventually("the announce is delivered", || count(&host, "delivery.sent") == 1).await;
        let d = host.deliveries();
        assert_eq!(d.len(), 1);
        assert_eq!(keys_of(&d[0]), ["channel", "to", "message", "idempotencyKey", "sessionKey", "kind"]);
        assert_eq!(
            (&d[0]["channel"], &d[0]["to"], &d[0]["message"], &d[0]["sessionKey"], &d[0]["kind"]),
            (
                &json!("discord"),
                &json!("channel:target"),
                &json!("announce now"),
                &json!("agent:main:discord:group:target"),
                &json!("a2a_announce")
            )
        );
        assert!(is_uuid(&d[0]["idempotencyKey"]));
        let queued = host.events().into_iter().find(|e| e.kind == "a2a.announce").unwrap();
        assert_eq!(queued.details["status"], "queued");
        assert_eq!(queued.details["idempotencyKey"], d[0]["idempotencyKey"]);
    }

    /// D4: the requester's first turn says `REPLY_SKIP`; the announce step answers `announce`.
    async fn d4_case(announce: &'static str) -> Arc<FakeHost> {
        let host = scripted(move |k, _| {
            Ok(match k {
                Kind::Primary => "initial",
                Kind::RequesterTurn => "  REPLY_SKIP \n",
                Kind::TargetTurn => "never asked",
                _ => announce,
            }
            .to_owned())
        });
        let (orch, host) = open(Value::Null, host).await;
        let out =
            send(&orch, json!({"sessionKey": "discord:group:target", "message": "hi"}), discord_requester()).await;
        assert_eq!(out["status"], "ok");
        flows_end(&host, 1).await;
        assert_eq!(kinds(&host), [Kind::Primary, Kind::RequesterTurn, Kind::Announce]);
        host
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn d4_reply_skip_ends_the_loop_announce_skip_posts_nothing_other_replies_post_trimmed() {
        let host = d4_case("ANNOUNCE_SKIP").await;
        let skipped = host.events().into_iter().find(|e| e.kind == "a2a.announce").unwrap();
        assert_eq!(skipped.details["status"], "skipped");
        assert!(host.deliveries().is_empty());

        let host = d4_case("  hello ").await;
        eventually("the announce is delivered", || host.deliveries().len() == 1).await;
        assert_eq!(host.deliveries()[0]["message"], "hello");
        // "REPLY_SKIP now" is not a skip
        assert!(!prompts::is_reply_skip("REPLY_SKIP now"));
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn d5_d6_d7_t2_target_parameter_errors() {
        let (orch, host) = open(Value::Null, FakeHost::replying("x")).await;
        let both = send(&orch, json!({"sessionKey": "main", "label": "w", "message": "m"}), Value::Null).await;
        assert_eq!(keys_of(&both), ["runId", "status", "error"]);
        assert_eq!((&both["status"], &both["error"]), (&json!("error"), &json!(BOTH_GIVEN)));
        assert!(is_uuid(&both["runId"]));
        let neither = send(&orch, json!({"message": "m", "label": "  "}), Value::Null).await;
        assert_eq!(neither["error"], NONE_GIVEN);
        let unknown = send(&orch, json!({"label": "nobody", "message": "m"}), Value::Null).await;
        assert_eq!(
            (&unknown["status"], &unknown["error"]),
            (&json!("error"), &json!("No session found with label: nobody"))
        );
        for params in [
            json!({"sessionKey": "main"}),
            json!({"sessionKey": "main", "message": "   "}),
            json!({"sessionKey": "main", "message": 5}),
        ] {
            let out = send(&orch, params, Value::Null).await;
            assert_eq!(out, json!({"status": "error", "tool": "sessions_send", "error": "message required"}));
        }
        assert!(host.requests().is_empty());
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn d8_a_label_resolves_to_its_session() {
        let (orch, host) = open(Value::Null, FakeHost::replying("labeled response")).await;
        orch.engine().patch_session(&json!({"key": "test-labeled-session", "label": "my-test-worker"})).unwrap();
        let out =
            send(&orch, json!({"label": "my-test-worker", "message": "hi", "timeoutSeconds": 5}), Value::Null).await;
        assert_eq!(out["status"], "ok");
        assert_eq!(out["reply"], "labeled response");
        assert_eq!(out["sessionKey"], "agent:main:test-labeled-session");
        flows_end(&host, 1).await;
        // no requester: no requester lines, no reply-back loop, only the announce step
        assert_eq!(kinds(&host), [Kind::Primary, Kind::Announce]);
        assert_eq!(
            host.requests()[0].options.extra_system_prompt.as_deref(),
            Some("Agent-to-agent message context:\nAgent 2 (target) session: agent:main:test-labeled-session.")
        );
        assert_eq!(count(&host, "a2a.turn"), 0);
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn d9_cross_agent_sends_follow_the_agent_to_agent_policy_and_make_no_run() {
        let requester = json!({"agentSessionKey": "agent:main:main"});
        let (orch, host) = open(Value::Null, FakeHost::replying("x")).await;
        let out = send(&orch, json!({"sessionKey": "agent:other:main", "message": "m"}), requester.clone()).await;
        assert_eq!(keys_of(&out), ["runId", "status", "error", "sessionKey"]);
        assert_eq!(
            (&out["status"], &out["error"], &out["sessionKey"]),
            (&json!("forbidden"), &json!(A2A_DISABLED), &json!("agent:other:main"))
        );
        let by_label = send(&orch, json!({"label": "w", "agentId": "other", "message": "m"}), requester.clone()).await;
        assert_eq!((&by_label["status"], &by_label["error"]), (&json!("forbidden"), &json!(A2A_DISABLED)));
        assert!(host.requests().is_empty());

        let cfg = json!({"tools": {"agentToAgent": {"enabled": true, "allow": ["main"]}}});
        let (orch, host) = open(cfg, FakeHost::replying("x")).await;
        let out = send(&orch, json!({"sessionKey": "agent:other:main", "message": "m"}), requester.clone()).await;
        assert_eq!((&out["status"], &out["error"]), (&json!("forbidden"), &json!(A2A_DENIED)));
        assert!(host.requests().is_empty());

        let cfg = json!({"tools": {"agentToAgent": {"enabled": true}}});
        let (orch, host) = open(cfg, FakeHost::replying("x")).await;
        let out =
            send(&orch, json!({"sessionKey": "agent:other:main", "message": "m", "timeoutSeconds": 0}), requester)
                .await;
        assert_eq!(out["status"], "accepted");
        eventually("the primary runs", || !host.requests().is_empty()).await;
        assert_eq!(host.requests()[0].session_key, "agent:other:main");
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn d10_x3_a_sandboxed_requester_reaches_only_its_children() {
        let sandboxed = json!({"agentSessionKey": "agent:main:main", "sandboxed": true});
        let (orch, host) = open(Value::Null, FakeHost::replying("child here")).await;
        let out = send(&orch, json!({"label": "w", "agentId": "other", "message": "m"}), sandboxed.clone()).await;
        assert_eq!((&out["status"], &out["error"]), (&json!("forbidden"), &json!(SANDBOX_LABEL_LOOKUP)));
        let out = send(&orch, json!({"sessionKey": "agent:main:stranger", "message": "m"}), sandboxed.clone()).await;
        assert_eq!(
            (&out["status"], &out["error"], &out["sessionKey"]),
            (
                &json!("forbidden"),
                &json!("Session not visible from this sandboxed agent session: agent:main:stranger"),
                &json!("agent:main:stranger")
            )
        );
        orch.engine().patch_session(&json!({"key": "agent:main:stranger", "label": "w"})).unwrap();
        let out = send(&orch, json!({"label": "w", "message": "m"}), sandboxed.clone()).await;
        assert_eq!(out["error"], "Session not visible from this sandboxed agent session: label=w");
        let out = send(&orch, json!({"sessionKey": "no-such-id", "message": "m"}), sandboxed.clone()).await;
        assert_eq!(out["error"], "Session not visible from this sandboxed agent session: no-such-id");
        assert!(host.requests().is_empty());

        orch.engine()
            .patch_session(&json!({"key": "agent:main:subagent:kid", "label": "kid", "spawnedBy": "agent:main:main"}))
            .unwrap();
        let out = send(&orch, json!({"label": "kid", "message": "m", "timeoutSeconds": 5}), sandboxed.clone()).await;
        assert_eq!((&out["status"], &out["reply"]), (&json!("ok"), &json!("child here")));
        let out = send(
            &orch,
            json!({"sessionKey": "agent:main:subagent:kid", "message": "m", "timeoutSeconds": 5}),
            sandboxed,
        )
        .await;
        assert_eq!(out["status"], "ok");
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn d11_a_failed_run_is_an_error_with_its_message_or_agent_error_and_starts_no_flow() {
        let host = FakeHost::new(|req| {
            let err = if req.message == "silent" { String::new() } else { "model down".to_owned() };
            Box::pin(async move { Err(err) })
        });
        let (orch, host) = open(Value::Null, host).await;
        let out = send(&orch, json!({"sessionKey": "discord:group:t", "message": "silent"}), discord_requester()).await;
        assert_eq!(keys_of(&out), ["runId", "status", "error", "sessionKey"]);
        assert_eq!((&out["status"], &out["error"]), (&json!("error"), &json!("agent error")));
        let out = send(&orch, json!({"sessionKey": "discord:group:t", "message": "loud"}), discord_requester()).await;
        assert_eq!((&out["status"], &out["error"]), (&json!("error"), &json!("model down")));
        tokio::time::sleep(Duration::from_millis(100)).await;
        assert_eq!(host.requests().len(), 2);
        assert_eq!(count(&host, "a2a.end"), 0, "no flow after an error");
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn d11_a_run_that_outlives_its_wait_and_its_timeout_is_a_timeout_with_no_flow() {
        let host = FakeHost::new(|_| {
            Box::pin(async {
                tokio::time::sleep(Duration::from_millis(3000)).await;
                Ok(json!({"reply": "too late"}))
            })
        });
        // the wait ends at timeoutSeconds (1 s); the run may go on to the agents' default
        // timeout (2 s here), which it outlives too
        let (orch, host) = open(json!({"agents": {"defaults": {"timeoutSeconds": 2}}}), host).await;
        let out = send(
            &orch,
            json!({"sessionKey": "discord:group:t", "message": "m", "timeoutSeconds": 1}),
            discord_requester(),
        )
        .await;
        assert_eq!(out["status"], "timeout");
        assert_eq!(out["sessionKey"], "agent:main:discord:group:t");
        // the run is aborted at the default timeout and never replied: nothing follows
        eventually("the run is aborted", || count(&host, "run.timeout") == 1).await;
        tokio::time::sleep(Duration::from_millis(200)).await;
        assert_eq!(host.requests().len(), 1);
        assert!(host.deliveries().is_empty());
        for end in host.events().into_iter().filter(|e| e.kind == "a2a.end") {
            assert_eq!(end.details["reason"], "no reply");
        }
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn d13_a_target_whose_policy_denies_gets_no_run() {
        let (orch, host) = open(Value::Null, FakeHost::replying("x")).await;
        orch.engine().upsert_session(&json!("agent:main:quiet"), &json!({"sendPolicy": "deny"})).unwrap();
        let out = send(&orch, json!({"sessionKey": "agent:main:quiet", "message": "m"}), discord_requester()).await;
        assert_eq!(keys_of(&out), ["runId", "status", "error", "sessionKey"]);
        assert_eq!(
            (&out["status"], &out["error"], &out["sessionKey"]),
            (&json!("error"), &json!(SEND_BLOCKED), &json!("agent:main:quiet"))
        );
        assert!(host.requests().is_empty());
        assert_eq!(count(&host, "send.blocked"), 1);

        let cfg = json!({"session": {"sendPolicy": {"rules": [{"action": "deny", "match": {"keyPrefix": "cron:"}}]}}});
        let (orch, host) = open(cfg, FakeHost::replying("x")).await;
        let out =
            send(&orch, json!({"sessionKey": "cron:job-1", "message": "m", "timeoutSeconds": 0}), Value::Null).await;
        assert_eq!(out["error"], SEND_BLOCKED);
        assert!(host.requests().is_empty());
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn d15_max_ping_pong_turns_bounds_the_reply_steps() {
        let chatty = || scripted(|k, _| Ok(if k == Kind::Announce { "ANNOUNCE_SKIP" } else { "more" }.to_owned()));
        for (turns, expected) in [(json!(5), 5), (Value::Null, 5), (json!(2), 2), (json!(0), 0)] {
            let (orch, host) = open(json!({"session": {"agentToAgent": {"maxPingPongTurns": turns}}}), chatty()).await;
            let out = send(
                &orch,
                json!({"sessionKey": "agent:main:t", "message": "m", "timeoutSeconds": 0}),
                discord_requester(),
            )
            .await;
            assert_eq!(out["status"], "accepted");
            flows_end(&host, 1).await;
            let steps = kinds(&host).iter().filter(|k| matches!(k, Kind::RequesterTurn | Kind::TargetTurn)).count();
            assert_eq!(steps, expected, "maxPingPongTurns {turns}");
            assert_eq!(kinds(&host).last(), Some(&Kind::Announce));
            if expected > 0 {
                let last = &host.requests()[expected];
                let ctx = last.options.extra_system_prompt.clone().unwrap_or_default();
                assert!(ctx.contains(&format!("Turn {expected} of {expected}.")), "{ctx}");
            }
        }
    }

    #[test]
    fn d16_timeouts_are_floored_clamped_and_default_to_30_seconds() {
        let t = |v: Value| Timing::of(&json!({ "timeoutSeconds": v }));
        assert_eq!(t(json!(0)), Timing { timeout_seconds: 0, timeout_ms: 0, announce_timeout_ms: 30_000 });
        assert_eq!(t(json!(1.9)), Timing { timeout_seconds: 1, timeout_ms: 1000, announce_timeout_ms: 1000 });
        assert_eq!(Timing::of(&json!({})).timeout_ms, 30_000);
        assert_eq!(t(json!("10")).timeout_ms, 30_000, "strings are ignored");
        assert_eq!(t(json!(-5)).timeout_seconds, 0);
        assert_eq!(t(json!(1e300)).timeout_ms, u64::MAX);
        assert_eq!(t(json!(0)).step_wait_ms(), 30_000);
        assert_eq!(t(json!(120)).step_wait_ms(), 60_000);
        assert_eq!(t(json!(5)).step_wait_ms(), 5_000);
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn d16_the_primary_runs_with_the_send_timeout_or_the_agents_default() {
        let cfg = json!({"agents": {"defaults": {"timeoutSeconds": 42}}, "session": {"agentToAgent": {"maxPingPongTurns": 0}}});
        let (orch, host) = open(cfg, FakeHost::replying("ANNOUNCE_SKIP")).await;
        send(&orch, json!({"sessionKey": "agent:main:t", "message": "m", "timeoutSeconds": 1.9}), Value::Null).await;
        send(&orch, json!({"sessionKey": "agent:main:t", "message": "m", "timeoutSeconds": 0}), Value::Null).await;
        flows_end(&host, 2).await;
        let primaries: Vec<u64> =
            host.requests().iter().filter(|r| kind(r) == Kind::Primary).map(|r| r.options.timeout_ms).collect();
        assert_eq!(primaries, [1000, 42_000]);
        let announces: Vec<u64> =
            host.requests().iter().filter(|r| kind(r) == Kind::Announce).map(|r| r.options.timeout_ms).collect();
        assert_eq!(announces, [42_000, 42_000]);
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn d14_a_run_that_ends_before_the_wait_begins_is_ok_and_huge_timeouts_are_fine() {
        let (orch, host) = open(Value::Null, FakeHost::replying("pong")).await;
        for timeout in [json!(30), json!(1e300)] {
            let out =
                send(&orch, json!({"sessionKey": "main", "message": "ping", "timeoutSeconds": timeout}), Value::Null)
                    .await;
            assert_eq!(
                (&out["status"], &out["reply"], &out["sessionKey"]),
                (&json!("ok"), &json!("pong"), &json!("main"))
            );
        }
        flows_end(&host, 2).await;
        let primary = &host.requests()[0];
        assert_eq!((primary.options.lane, primary.session_key.as_str()), (Lane::Nested, "agent:main:main"));
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_reply_step_into_a_denied_session_ends_the_loop_and_the_announce_still_runs() {
        let host = scripted(|k, _| Ok(if k == Kind::Announce { "summary" } else { "more" }.to_owned()));
        let (orch, host) = open(Value::Null, host).await;
        orch.engine().upsert_session(&json!("discord:group:req"), &json!({"sendPolicy": "deny"})).unwrap();
        let out = send(&orch, json!({"sessionKey": "discord:group:t", "message": "m"}), discord_requester()).await;
        assert_eq!(out["status"], "ok");
        flows_end(&host, 1).await;
        assert_eq!(kinds(&host), [Kind::Primary, Kind::Announce]);
        let turn = host.events().into_iter().find(|e| e.kind == "a2a.turn").unwrap();
        assert_eq!(turn.details["status"], "blocked");
        let blocked = host.events().into_iter().find(|e| e.kind == "send.blocked").unwrap();
        assert_eq!(blocked.session_key.as_deref(), Some("agent:main:discord:group:req"));
        eventually("the announce is delivered", || host.deliveries().len() == 1).await;
        assert_eq!(host.deliveries()[0]["message"], "summary");
    }

    #[test]
    fn a_runs_reply_is_read_from_its_own_messages() {
        let incoming = |run: &str| json!({"role": "user", "content": [{"type": "text", "text": "q"}], "provenance": {"runId": run}});
        let said = |t: &str| json!({"role": "assistant", "content": [{"type": "text", "text": t}]});
        let msgs = vec![incoming("r1"), said("first"), incoming("r2"), said("second")];
        assert_eq!(reply::latest_assistant_reply(run_messages(&msgs, "r1")).as_deref(), Some("first"));
        assert_eq!(reply::latest_assistant_reply(run_messages(&msgs, "r2")).as_deref(), Some("second"));
        // a later run that has only just begun hides nothing
        let msgs = vec![incoming("r1"), said("first"), incoming("r2")];
        assert_eq!(reply::latest_assistant_reply(run_messages(&msgs, "r1")).as_deref(), Some("first"));
        assert_eq!(reply::latest_assistant_reply(run_messages(&msgs, "r2")), None);
        // an incoming message out of reach: the session's latest reply, as the reference reads it
        assert_eq!(reply::latest_assistant_reply(run_messages(&msgs[1..2], "r0")).as_deref(), Some("first"));
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn d17_a_session_id_targets_its_session() {
        let (orch, host) = open(Value::Null, FakeHost::replying("ANNOUNCE_SKIP")).await;
        orch.engine()
            .upsert_session(&json!("agent:main:discord:channel:123"), &json!({"sessionId": "sess-send"}))
            .unwrap();
        let out =
            send(&orch, json!({"sessionKey": "sess-send", "message": "m", "timeoutSeconds": 0}), Value::Null).await;
        assert_eq!(out["status"], "accepted");
        assert_eq!(out["sessionKey"], "agent:main:discord:channel:123");
        eventually("the primary runs", || !host.requests().is_empty()).await;
        assert_eq!(host.requests()[0].session_key, "agent:main:discord:channel:123");
        let missing = send(&orch, json!({"sessionKey": "no-such-id", "message": "m"}), Value::Null).await;
        assert_eq!(keys_of(&missing), ["runId", "status", "error"]);
        assert_eq!((&missing["status"], &missing["error"]), (&json!("error"), &json!("No session found: no-such-id")));
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn d21_d22_no_reply_steps_to_oneself_or_with_zero_turns() {
        let (orch, host) = open(Value::Null, ping_pong_host("initial")).await;
        let out =
            send(&orch, json!({"sessionKey": "main", "message": "m"}), json!({"agentSessionKey": "agent:main:main"}))
                .await;
        assert_eq!(out["status"], "ok");
        flows_end(&host, 1).await;
        assert_eq!(kinds(&host), [Kind::Primary, Kind::Announce]);

        let cfg = json!({"session": {"agentToAgent": {"maxPingPongTurns": 0}}});
        let (orch, host) = open(cfg, ping_pong_host("initial")).await;
        let out = send(&orch, json!({"sessionKey": "main", "message": "m"}), discord_requester()).await;
        assert_eq!(out["status"], "ok");
        flows_end(&host, 1).await;
        assert_eq!(kinds(&host), [Kind::Primary, Kind::Announce]);
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_late_reply_after_timeout_still_gets_its_reply_back_and_announce() {
        // The target session is busy for 1.7 s, so the primary (queued behind) outlives the 1 s
        // wait but not its own timeout, which starts when it runs.
        let host = FakeHost::new(|req| {
            let k = kind(&req);
            Box::pin(async move {
                let reply = match k {
                    Kind::Other => {
                        tokio::time::sleep(Duration::from_millis(1700)).await;
                        "busy work done"
                    }
                    Kind::Primary => "late answer",
                    Kind::RequesterTurn => "thanks",
                    Kind::TargetTurn => "REPLY_SKIP",
                    Kind::Announce => "announcing late",
                };
                Ok(json!({ "reply": reply }))
            })
        });
        let (orch, host) = open(two_turns(), host).await;
        let busy = RunSpec {
            session_key: "agent:main:discord:group:slow".into(),
            message: "busy".into(),
            provenance: Provenance { kind: "inter_session", source_session_key: None },
            options: RunOptions::new(Lane::Nested, 10_000, "other-chain"),
            chain_limit: None,
        };
        orch.runs().start(orch.engine().clone(), orch.host().clone(), busy).unwrap().unwrap();
        let out = send(
            &orch,
            json!({"sessionKey": "discord:group:slow", "message": "m", "timeoutSeconds": 1}),
            discord_requester(),
        )
        .await;
        assert_eq!(keys_of(&out), ["runId", "status", "sessionKey"]);
        assert_eq!(out["status"], "timeout");
        flows_end(&host, 1).await;
        assert_eq!(kinds(&host), [Kind::Other, Kind::Primary, Kind::RequesterTurn, Kind::TargetTurn, Kind::Announce]);
        let announce = &host.requests()[4];
        assert!(announce
            .options
            .extra_system_prompt
            .as_deref()
            .unwrap_or_default()
            .contains("Round 1 reply: late answer"));
        eventually("the late announce is delivered", || host.deliveries().len() == 1).await;
        assert_eq!(host.deliveries()[0]["message"], "announcing late");
        assert_eq!(host.deliveries()[0]["to"], "channel:slow");
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn the_chain_budget_holds_across_three_agents_pinging_each_other() {
        const MAX: usize = 5;
        let cell: Arc<OnceLock<Weak<Orchestrator>>> = Arc::default();
        let results: Arc<Mutex<Vec<Value>>> = Arc::default();
        let (c, r) = (cell.clone(), results.clone());
        let host = FakeHost::new(move |req| {
            let (orch, results) = (c.get().and_then(Weak::upgrade), r.clone());
            let k = kind(&req);
            Box::pin(async move {
                if k != Kind::Primary {
                    return Ok(json!({"reply": "ANNOUNCE_SKIP"}));
                }
                let next = match req.session_key.as_str() {
                    "agent:main:a" => "agent:main:b",
                    "agent:main:b" => "agent:main:c",
                    _ => "agent:main:a",
                };
                let orch = orch.ok_or("the store is gone")?;
                let ctx = json!({"agentSessionKey": req.session_key, "runId": req.run_id});
                let params = json!({"sessionKey": next, "message": "pass it on", "timeoutSeconds": 0});
                let out = orch.tool("sessions_send", params, ctx, false).await.map_err(|e| e.message().to_owned())?;
                results.lock().unwrap_or_else(|p| p.into_inner()).push(out);
                Ok(json!({"reply": "passed"}))
            })
        });
        let cfg = json!({"session": {"agentToAgent": {"maxPingPongTurns": 0, "maxChainTurns": MAX}}});
        let (orch, host) = open(cfg, host).await;
        let _ = cell.set(Arc::downgrade(&orch));
        let first = send(
            &orch,
            json!({"sessionKey": "agent:main:b", "message": "start", "timeoutSeconds": 0}),
            json!({"agentSessionKey": "agent:main:a"}),
        )
        .await;
        assert_eq!(first["status"], "accepted");
        let limit = chain_limit_text(MAX as u32);
        let forbidden = || {
            results
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .iter()
                .any(|o| o["status"] == "forbidden" && o["error"] == limit.as_str())
        };
        eventually("a send is refused for the chain limit", forbidden).await;
        // every flow has ended: the first one and one per accepted nested send
        let accepted =
            || results.lock().unwrap_or_else(|p| p.into_inner()).iter().filter(|o| o["status"] == "accepted").count();
        eventually("every flow ends", || count(&host, "a2a.end") > accepted()).await;
        let reqs = host.requests();
        let chain = reqs[0].options.chain_id.clone();
        assert!(reqs.iter().all(|r| r.options.chain_id == chain), "nested sends join the chain");
        assert_eq!(reqs.len(), MAX, "the chain holds exactly maxChainTurns runs");
        assert_eq!(limit, "Agent-to-agent chain limit reached (5 turns).");
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_reply_back_loop_that_reaches_the_chain_budget_stops_and_skips_the_announce() {
        let cfg = json!({"session": {"agentToAgent": {"maxChainTurns": 3}}});
        let chatty = scripted(|_, _| Ok("more".to_owned()));
        let (orch, host) = open(cfg, chatty).await;
        let out = send(&orch, json!({"sessionKey": "discord:group:t", "message": "m"}), discord_requester()).await;
        assert_eq!(out["status"], "ok");
        flows_end(&host, 1).await;
        assert_eq!(kinds(&host), [Kind::Primary, Kind::RequesterTurn, Kind::TargetTurn]);
        let turns: Vec<Value> =
            host.events().into_iter().filter(|e| e.kind == "a2a.turn").map(|e| e.details["status"].clone()).collect();
        assert_eq!(turns, [json!("ok"), json!("ok"), json!("chain_limit")]);
        let announce = host.events().into_iter().find(|e| e.kind == "a2a.announce").unwrap();
        assert_eq!(announce.details, *json!({"status": "skipped", "reason": "chain_limit"}).as_object().unwrap());
        assert!(host.deliveries().is_empty());
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn an_announce_to_a_target_denied_after_the_primary_is_blocked_at_delivery() {
        let cell: Arc<OnceLock<Weak<Orchestrator>>> = Arc::default();
        let c = cell.clone();
        let host = scripted(move |k, req| {
            if k == Kind::Announce {
                // the owner turns sending off while the announce step runs
                let orch = c.get().and_then(Weak::upgrade).ok_or("gone")?;
                orch.engine()
                    .upsert_session(&json!(req.session_key), &json!({"sendPolicy": "deny"}))
                    .map_err(|e| e.to_string())?;
                return Ok("announce now".to_owned());
            }
            Ok("REPLY_SKIP".to_owned())
        });
        let (orch, host) = open(Value::Null, host).await;
        let _ = cell.set(Arc::downgrade(&orch));
        let out = send(&orch, json!({"sessionKey": "discord:group:t", "message": "m"}), discord_requester()).await;
        assert_eq!(out["status"], "ok");
        eventually("the delivery is blocked", || count(&host, "delivery.blocked") == 1).await;
        assert!(host.deliveries().is_empty());
        let blocked = host.events().into_iter().find(|e| e.kind == "delivery.blocked").unwrap();
        assert_eq!(blocked.session_key.as_deref(), Some("agent:main:discord:group:t"));
        assert_eq!(blocked.details["reason"], SEND_BLOCKED);
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_delivery_that_fails_twice_is_tried_three_times_with_one_idempotency_key() {
        let tries = Arc::new(AtomicUsize::new(0));
        let t = tries.clone();
        let host = scripted(|k, _| Ok(if k == Kind::Announce { "posted" } else { "REPLY_SKIP" }.to_owned()))
            .with_deliver(move |_| {
                let n = t.fetch_add(1, Ordering::SeqCst);
                Box::pin(async move {
                    if n < 2 {
                        Err("channel down".to_owned())
                    } else {
                        Ok(())
                    }
                })
            });
        let cfg = json!({"session": {"outbox": {"backoffMs": 10}}});
        let (orch, host) = open(cfg, host).await;
        let out = send(&orch, json!({"sessionKey": "discord:group:t", "message": "m"}), discord_requester()).await;
        assert_eq!(out["status"], "ok");
        eventually("the third try succeeds", || count(&host, "delivery.sent") == 1).await;
        let d = host.deliveries();
        assert_eq!(d.len(), 3);
        assert!(d.iter().all(|x| x["idempotencyKey"] == d[0]["idempotencyKey"]));
        assert_eq!(count(&host, "delivery.failed"), 2);
        assert_eq!(tries.load(Ordering::SeqCst), 3);
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_thread_in_the_target_key_is_passed_as_thread_id() {
        let host = scripted(|k, _| Ok(if k == Kind::Announce { "in thread" } else { "REPLY_SKIP" }.to_owned()));
        let (orch, host) = open(Value::Null, host).await;
        let key = "agent:main:slack:channel:c1:thread:1700000000.123";
        let out = send(&orch, json!({"sessionKey": key, "message": "m"}), discord_requester()).await;
        assert_eq!(out["sessionKey"], key);
        eventually("the announce is delivered", || host.deliveries().len() == 1).await;
        let d = &host.deliveries()[0];
        assert_eq!(keys_of(d), ["channel", "to", "threadId", "message", "idempotencyKey", "sessionKey", "kind"]);
        assert_eq!(
            (&d["channel"], &d["to"], &d["threadId"]),
            (&json!("slack"), &json!("channel:c1"), &json!("1700000000.123"))
        );
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn d19_whatsapp_and_direct_targets_take_the_stored_route() {
        let (orch, _host) = open(Value::Null, FakeHost::replying("x")).await;
        let e = orch.engine().clone();
        let wa = "agent:main:whatsapp:group:123@g.us";
        e.upsert_session(
            &json!(wa),
            &json!({"deliveryContext": {"channel": "whatsapp", "to": "123@g.us", "accountId": "work"}}),
        )
        .unwrap();
        let route = announce_route(&e, wa, wa).unwrap();
        assert_eq!(
            route,
            Route {
                channel: "whatsapp".into(),
                to: "123@g.us".into(),
                account_id: Some("work".into()),
                thread_id: None
            }
        );
        // without a stored route, the key's own
        let bare =
            announce_route(&e, "agent:main:whatsapp:group:999@g.us", "agent:main:whatsapp:group:999@g.us").unwrap();
        assert_eq!((bare.channel.as_str(), bare.to.as_str()), ("whatsapp", "group:999@g.us"));
        // a direct session: its last route, thread included
        e.upsert_session(
            &json!("agent:main:main"),
            &json!({"lastChannel": "telegram", "lastTo": "42", "lastThreadId": 7}),
        )
        .unwrap();
        let direct = announce_route(&e, "agent:main:main", "main").unwrap();
        assert_eq!(
            direct,
            Route { channel: "telegram".into(), to: "42".into(), account_id: None, thread_id: Some("7".into()) }
        );
        // a discord key needs no lookup, whatever is stored
        e.upsert_session(&json!("agent:main:discord:group:dev"), &json!({"lastChannel": "telegram", "lastTo": "1"}))
            .unwrap();
        let dev = announce_route(&e, "agent:main:discord:group:dev", "agent:main:discord:group:dev").unwrap();
        assert_eq!((dev.channel.as_str(), dev.to.as_str()), ("discord", "channel:dev"));
        assert_eq!(announce_route(&e, "agent:main:nowhere", "agent:main:nowhere"), None);
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn an_announce_for_a_direct_session_goes_to_its_last_route() {
        let host = scripted(|k, _| Ok(if k == Kind::Announce { "to the chat" } else { "REPLY_SKIP" }.to_owned()));
        let (orch, host) = open(Value::Null, host).await;
        orch.engine()
            .upsert_session(
                &json!("agent:main:main"),
                &json!({"lastChannel": "telegram", "lastTo": "42", "lastAccountId": "bot"}),
            )
            .unwrap();
        let out =
            send(&orch, json!({"sessionKey": "main", "message": "m", "timeoutSeconds": 0}), discord_requester()).await;
        assert_eq!(out["status"], "accepted");
        eventually("the announce is delivered", || host.deliveries().len() == 1).await;
        let d = &host.deliveries()[0];
        assert_eq!((&d["channel"], &d["to"], &d["accountId"]), (&json!("telegram"), &json!("42"), &json!("bot")));
        assert_eq!(d["sessionKey"], "agent:main:main");
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_target_that_leaves_no_reply_ends_the_flow_quietly() {
        let host = FakeHost::new(|_| {
            Box::pin(async { Ok(json!({"messages": [{"role": "assistant", "content": "plain string"}]})) })
        });
        let (orch, host) = open(Value::Null, host).await;
        let out = send(&orch, json!({"sessionKey": "discord:group:t", "message": "m"}), discord_requester()).await;
        assert_eq!(keys_of(&out), ["runId", "status", "sessionKey", "delivery"]);
        assert_eq!(out["status"], "ok");
        flows_end(&host, 1).await;
        assert_eq!(host.requests().len(), 1);
    }
}
