//! Shared by the `sessions_send` tests: a fake host that answers each run of the flow by its
//! kind (told from its prompt), an orchestrator over it, and bounded waits.

use std::sync::Arc;

use serde_json::{json, Value};

use super::prompts;
use crate::config::Config;
use crate::engine::Engine;
use crate::host::testing::FakeHost;
use crate::host::AgentRunRequest;
use crate::orchestrate::state::Orchestrator;
use crate::store::Store;

/// What a run of the flow is, told from its prompt.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Kind {
    Primary,
    RequesterTurn,
    TargetTurn,
    Announce,
    Other,
}

pub(super) fn kind(req: &AgentRunRequest) -> Kind {
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

pub(super) type Script = dyn Fn(Kind, &AgentRunRequest) -> std::result::Result<String, String> + Send + Sync;

/// A host answering each run with what `f` says for its kind.
pub(super) fn scripted(
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
pub(super) fn ping_pong_host(primary: &'static str) -> FakeHost {
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

pub(super) async fn open(config: Value, host: FakeHost) -> (Arc<Orchestrator>, Arc<FakeHost>) {
    let cfg = Config::from_json(&config).unwrap();
    let engine = Arc::new(Engine::new(Store::open(":memory:").unwrap(), cfg, None));
    let host = Arc::new(host);
    let orch = Orchestrator::new(engine, host.clone());
    orch.start().await.unwrap();
    (orch, host)
}

pub(super) async fn send(orch: &Arc<Orchestrator>, params: Value, ctx: Value) -> Value {
    orch.tool(crate::tools::Tool::SessionsSend, params, ctx, false).await.unwrap()
}

/// Polls `f` every 10 ms for up to 20 s (the registry's tests' wait).
pub(super) async fn eventually(what: &str, f: impl Fn() -> bool) {
    crate::orchestrate::subagents::testkit::until(what, f).await
}

pub(super) fn count(host: &FakeHost, kind: &str) -> usize {
    host.event_kinds().iter().filter(|k| **k == kind).count()
}

/// Waits for `n` agent-to-agent flows to end.
pub(super) async fn flows_end(host: &FakeHost, n: usize) {
    eventually(&format!("{n} a2a flow(s) end"), || count(host, "a2a.end") >= n).await;
}

pub(super) fn kinds(host: &FakeHost) -> Vec<Kind> {
    host.requests().iter().map(kind).collect()
}

pub(super) fn keys_of(v: &Value) -> Vec<String> {
    v.as_object().map(|o| o.keys().cloned().collect()).unwrap_or_default()
}

pub(super) fn is_uuid(v: &Value) -> bool {
    v.as_str().and_then(|s| uuid::Uuid::parse_str(s).ok()).is_some()
}

pub(super) fn two_turns() -> Value {
    json!({"session": {"agentToAgent": {"maxPingPongTurns": 2}}})
}

pub(super) fn discord_requester() -> Value {
    json!({"agentSessionKey": "discord:group:req", "agentChannel": "discord"})
}
