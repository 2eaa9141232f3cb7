//! `sessions_spawn`'s surface (REFERENCE.md §6.1–§6.2, DECISIONS.md #5): its parameters read
//! into a [`SpawnRequest`] with the refusals that need nothing but the config (a sub-agent
//! requester, an agent the allow list does not name, a model outside the catalog, an unknown
//! thinking level), and the refusal payloads of the later checks. Starting the child is
//! `orchestrate::spawn`'s.

use serde_json::{json, Value};

use super::{read_number, read_string, refusal, Checked, Refusal, Requester, ToolContext};
use crate::config::Config;
use crate::entry::{self, DeliveryContext};
use crate::error::Error;
use crate::keys::{is_subagent_key, normalize_agent_id};
use crate::orchestrate::thinking;
use crate::policy::subagents::SpawnAllowlist;

/// `sessions_spawn is not allowed from sub-agent sessions`
pub const FROM_SUBAGENT: &str = "sessions_spawn is not allowed from sub-agent sessions";

/// A `sessions_spawn` call with its parameters read and its config checks passed.
pub struct SpawnRequest {
    pub task: String,
    pub label: Option<String>,
    /// `delete` or `keep`
    pub cleanup: &'static str,
    /// the requester's route
    pub origin: DeliveryContext,
    /// 0: the default
    pub run_timeout_secs: u64,
    /// canonical (the default agent's main session when the caller gave none)
    pub requester_key: String,
    pub requester_agent: String,
    pub display_key: String,
    pub target_agent: String,
    pub model: Option<String>,
    pub thinking: Option<String>,
}

/// §6.1 steps 1–10 but 8: what the call asks for, and the refusals the config decides.
pub fn read(cfg: &Config, params: &Value, ctx: &ToolContext) -> Checked<SpawnRequest> {
    let km = cfg.key_model();
    // 1. task, label, cleanup
    let task = read_string(params, "task").ok_or_else(|| Error::invalid_request("task required"))?;
    let label = read_string(params, "label");
    let cleanup = match params.get("cleanup").and_then(Value::as_str).map(str::trim) {
        Some("delete") => "delete",
        _ => "keep",
    };
    // 2. the requester's route
    let text = |v: &Option<String>| v.clone().map(Value::from);
    let origin = DeliveryContext::from_parts(
        text(&ctx.agent_channel).as_ref(),
        text(&ctx.agent_to).as_ref(),
        text(&ctx.agent_account_id).as_ref(),
        ctx.agent_thread_id.as_ref(),
    );
    // 3. the run's time limit
    let run_timeout_secs = read_number(params, "runTimeoutSeconds")
        .or_else(|| read_number(params, "timeoutSeconds"))
        .map_or(0, |n| n.floor().max(0.0) as u64);
    // 4. not from a sub-agent
    let requester = Requester::of(cfg, ctx)?;
    let raw_is_subagent = ctx.agent_session_key.as_deref().is_some_and(is_subagent_key);
    if raw_is_subagent || requester.key.as_deref().is_some_and(is_subagent_key) {
        return Err(Refusal::Payload(refusal("forbidden", FROM_SUBAGENT)));
    }
    // 5–6. requester and target
    let requester_key = requester.key_or_main(cfg);
    let requester_agent =
        normalize_agent_id(ctx.requester_agent_id_override.as_deref().unwrap_or(&km.agent_id_of(&requester_key)));
    let display_key = km.display(&requester_key, &requester_agent);
    let target_agent =
        read_string(params, "agentId").map_or_else(|| requester_agent.clone(), |a| normalize_agent_id(&a));
    // 7. the allow list
    let allowlist = SpawnAllowlist::for_agent(cfg, &requester_agent);
    if !allowlist.allows(&requester_agent, &target_agent) {
        return Err(Refusal::Payload(refusal("forbidden", allowlist.refusal())));
    }
    // 9. the model (DECISIONS.md: outside the catalog is an error)
    let model = read_string(params, "model")
        .or_else(|| cfg.agent(&target_agent).and_then(|a| a.subagent_model.clone()))
        .or_else(|| cfg.subagents.model.clone());
    if let Some(m) = &model {
        if cfg.models.resolve(m).is_none() {
            return Err(Refusal::Payload(refusal("error", format!("invalid model: {m}"))));
        }
    }
    // 10. thinking
    let thinking = match params.get("thinking").and_then(Value::as_str) {
        Some(raw) if !crate::js::js_trim(raw).is_empty() => match thinking::resolve_thinking(raw, model.as_deref()) {
            Ok(level) => Some(level.as_str().to_owned()),
            Err(text) => return Err(Refusal::Payload(refusal("error", text))),
        },
        _ => None,
    };
    Ok(SpawnRequest {
        task,
        label,
        cleanup,
        origin,
        run_timeout_secs,
        requester_key,
        requester_agent,
        display_key,
        target_agent,
        model,
        thinking,
    })
}

/// DECISIONS.md #5: the requester already has `maxActive` running children.
pub fn too_many_children(active: u64) -> Value {
    refusal("forbidden", format!("Too many active sub-agents ({active}); wait for one to finish."))
}

/// §6.2: the agent call's schema refuses labels over 64 characters.
pub fn label_too_long(child_key: &str) -> Value {
    failed(
        child_key,
        &format!("invalid agent params: at /label: must NOT have more than {} characters", entry::MAX_LABEL_LEN),
    )
}

/// The child's entry could not be written.
pub fn failed(child_key: &str, error: &str) -> Value {
    json!({"status": "error", "error": error, "childSessionKey": child_key})
}

/// `{status: "accepted", childSessionKey, runId, modelApplied?}` (§6.3).
pub fn accepted(child_key: String, run_id: String, model_applied: bool) -> Value {
    let mut out = serde_json::Map::new();
    out.insert("status".into(), "accepted".into());
    out.insert("childSessionKey".into(), child_key.into());
    out.insert("runId".into(), run_id.into());
    if model_applied {
        out.insert("modelApplied".into(), true.into());
    }
    Value::Object(out)
}
