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
    /// 2026.9: the validated `taskName`
    pub task_name: Option<String>,
    /// the call is made under the 2026.9 contract
    pub v9: bool,
    /// 2026.9 `context: "fork"`: the child starts with a copy of the requester's transcript
    pub fork: bool,
    /// 2026.9 `expectsCompletionMessage` (default true): false = no completion handoff
    pub expects_completion: bool,
    /// the other 2026.9 options (defaults under 2026.1)
    pub opts9: super::spawn9::Options,
}

/// §6.1 steps 1–10 but 8: what the call asks for, and the refusals the config decides.
pub fn read(cfg: &Config, params: &Value, ctx: &ToolContext) -> Checked<SpawnRequest> {
    let km = cfg.key_model();
    let v9 = cfg.contract == crate::contract::Contract::V2026_9;
    // 2026.9: channel-delivery parameters and `timeoutSeconds` are refused before anything else
    if v9 {
        super::spawn9::check_unsupported(params)?;
    }
    // 1. task, label, cleanup
    let task = read_string(params, "task").ok_or_else(|| Error::invalid_request("task required"))?;
    let task_name = if v9 {
        super::spawn9::task_name(params).map_err(|text| Refusal::Payload(refusal("error", text)))?
    } else {
        None
    };
    let expects_completion = !v9 || params.get("expectsCompletionMessage") != Some(&Value::Bool(false));
    let opts9 = if v9 {
        super::spawn9::options(params, expects_completion).map_err(|text| Refusal::Payload(refusal("error", text)))?
    } else {
        super::spawn9::Options::default()
    };
    let label = read_string(params, "label");
    // 2026.9: a persistent (`session`) child is always kept
    let cleanup = match params.get("cleanup").and_then(Value::as_str).map(str::trim) {
        Some("delete") if !opts9.session_mode => "delete",
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
    // 4. not from a sub-agent (2026.9: by depth, checked against the stored lineage later)
    let requester = Requester::of(cfg, ctx)?;
    let raw_is_subagent = ctx.agent_session_key.as_deref().is_some_and(is_subagent_key);
    if !v9 && (raw_is_subagent || requester.key.as_deref().is_some_and(is_subagent_key)) {
        return Err(Refusal::Payload(refusal("forbidden", FROM_SUBAGENT)));
    }
    // 5–6. requester and target
    let requester_key = requester.key_or_main(cfg);
    let requester_agent =
        normalize_agent_id(ctx.requester_agent_id_override.as_deref().unwrap_or(&km.agent_id_of(&requester_key)));
    let display_key = km.display(&requester_key, &requester_agent);
    let target_agent =
        read_string(params, "agentId").map_or_else(|| requester_agent.clone(), |a| normalize_agent_id(&a));
    // 7. the allow list (2026.9: the requester agent's allowAgents, else the defaults', over
    // the configured agents)
    if v9 {
        let requested = read_string(params, "agentId").is_some();
        let require =
            cfg.agent(&requester_agent).and_then(|a| a.require_agent_id).unwrap_or(cfg.subagents.require_agent_id);
        if require && !requested {
            return Err(Refusal::Payload(refusal("forbidden", super::spawn9::REQUIRE_AGENT_ID)));
        }
        let own = cfg.agent(&requester_agent).filter(|a| a.allow_agents_set).map(|a| a.allow_agents.clone());
        let allow = own.or_else(|| cfg.subagents.allow_agents.clone());
        let configured: Vec<String> = cfg.agents.iter().map(|a| a.id.clone()).collect();
        if let Some(text) =
            super::spawn9::target_refusal(&requester_agent, &target_agent, requested, allow.as_deref(), &configured)
        {
            return Err(Refusal::Payload(refusal("forbidden", text)));
        }
    } else {
        let allowlist = SpawnAllowlist::for_agent(cfg, &requester_agent);
        if !allowlist.allows(&requester_agent, &target_agent) {
            return Err(Refusal::Payload(refusal("forbidden", allowlist.refusal())));
        }
    }
    // 2026.9 `context: "fork"` (a fork to another agent is refused once the child key exists,
    // by `orchestrate::spawn`, as 2026.9 refuses it when it prepares the child's context)
    let fork = v9 && params.get("context").and_then(Value::as_str) == Some("fork");
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
        task_name,
        v9,
        fork,
        expects_completion,
        opts9,
    })
}

/// What an accepted 2026.9 spawn reports.
pub struct Accepted9 {
    pub child_key: String,
    pub run_id: String,
    /// `run` or `session`
    pub mode: &'static str,
    /// whether a completion handoff will come (false for quiet and thread-direct children)
    pub expects_completion: bool,
    pub completion_parent: bool,
    pub fork: bool,
    pub task_name: Option<String>,
    pub note: Option<String>,
    /// model and provider of the `model` given
    pub resolved: Option<(String, Option<String>)>,
    pub model_applied: bool,
    /// the staged attachments' receipt
    pub attachments: Option<Value>,
}

/// 2026.9's `{status: "accepted", childSessionKey, runId, mode, expectsCompletionMessage,
/// completionTarget?, context, taskName?, note?, resolvedModel?, resolvedProvider?,
/// modelApplied?, attachments?}`.
pub fn accepted_2026_9(a: Accepted9) -> Value {
    let mut out = serde_json::Map::new();
    out.insert("status".into(), "accepted".into());
    out.insert("childSessionKey".into(), a.child_key.into());
    out.insert("runId".into(), a.run_id.into());
    out.insert("mode".into(), a.mode.into());
    out.insert("expectsCompletionMessage".into(), a.expects_completion.into());
    if a.completion_parent {
        out.insert("completionTarget".into(), "parent".into());
    }
    out.insert("context".into(), if a.fork { "fork" } else { "isolated" }.into());
    if let Some(t) = a.task_name {
        out.insert("taskName".into(), t.into());
    }
    if let Some(note) = a.note {
        out.insert("note".into(), note.into());
    }
    if let Some((model, provider)) = a.resolved {
        out.insert("resolvedModel".into(), model.into());
        if let Some(p) = provider {
            out.insert("resolvedProvider".into(), p.into());
        }
    }
    if a.model_applied {
        out.insert("modelApplied".into(), true.into());
    }
    if let Some(receipt) = a.attachments {
        out.insert("attachments".into(), receipt);
    }
    Value::Object(out)
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
