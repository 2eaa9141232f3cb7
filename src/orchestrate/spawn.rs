//! `sessions_spawn` (REFERENCE.md §6.1–§6.3, DECISIONS.md #5): the tool, which checks, builds
//! and starts a sub-agent run and registers it.
//!
//! Every refusal comes before anything is written or run: a sub-agent requester, an agent the
//! allow list does not name, a model outside the catalog, an unknown thinking level, too many
//! running children, an over-long label. Then the child's entry is written (`spawnedBy`,
//! `label`, `model`), its run started in the `subagent` lane, and the run registered; the
//! registry (`subagents`) takes it from there.

use std::sync::Arc;

use serde_json::{json, Map, Value};

use super::runs::{Admission, ChildCap, Provenance, RunSpec};
use super::state::Orchestrator;
use super::task::{blocking, new_chain_id};
use super::{prompts, subagents, thinking};
use crate::entry::{self, DeliveryContext};
use crate::error::{Error, Result};
use crate::host::{Lane, RunOptions};
use crate::keys::{is_subagent_key, normalize_agent_id};
use crate::policy::subagents::SpawnAllowlist;
use crate::tools::{read_number, read_string, refusal, Requester, ToolContext};

/// `sessions_spawn is not allowed from sub-agent sessions`
pub const FROM_SUBAGENT: &str = "sessions_spawn is not allowed from sub-agent sessions";

/// The tool: the payload the model sees.
pub async fn run(orch: &Arc<Orchestrator>, params: &Value, ctx: &ToolContext) -> Result<Value> {
    let cfg = orch.engine().config();
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
    let requester = Requester::of(&cfg, ctx)?;
    let raw_is_subagent = ctx.agent_session_key.as_deref().is_some_and(is_subagent_key);
    if raw_is_subagent || requester.key.as_deref().is_some_and(is_subagent_key) {
        return Ok(refusal("forbidden", FROM_SUBAGENT));
    }
    // 5–6. requester and target
    let requester_key = requester.key_or_main(&cfg);
    let requester_agent =
        normalize_agent_id(ctx.requester_agent_id_override.as_deref().unwrap_or(&km.agent_id_of(&requester_key)));
    let display_key = km.display(&requester_key, &requester_agent);
    let target_agent =
        read_string(params, "agentId").map_or_else(|| requester_agent.clone(), |a| normalize_agent_id(&a));
    // 7. the allow list
    let allowlist = SpawnAllowlist::for_agent(&cfg, &requester_agent);
    if !allowlist.allows(&requester_agent, &target_agent) {
        return Ok(refusal("forbidden", allowlist.refusal()));
    }
    // 9. the model (DECISIONS.md: outside the catalog is an error)
    let model = read_string(params, "model")
        .or_else(|| cfg.agent(&target_agent).and_then(|a| a.subagent_model.clone()))
        .or_else(|| cfg.subagents.model.clone());
    if let Some(m) = &model {
        if cfg.models.resolve(m).is_none() {
            return Ok(refusal("error", format!("invalid model: {m}")));
        }
    }
    // 10. thinking
    let thinking = match params.get("thinking").and_then(Value::as_str) {
        Some(raw) if !crate::js::js_trim(raw).is_empty() => match thinking::resolve_thinking(raw, model.as_deref()) {
            Ok(level) => Some(level.as_str().to_owned()),
            Err(text) => return Ok(refusal("error", text)),
        },
        _ => None,
    };
    // DECISIONS.md #5: at most maxActive running children per requester. The check and the
    // registration below are one step for this store: concurrent spawns wait here, so each one
    // counts the children registered before it.
    let _gate = orch.subagents().spawn_gate.lock().await;
    let (o, k) = (orch.clone(), requester_key.clone());
    let active = blocking(move || subagents::running_count(&o, &k)).await?;
    if active >= u64::from(cfg.subagents.max_active) {
        return Ok(refusal("forbidden", format!("Too many active sub-agents ({active}); wait for one to finish.")));
    }
    if !orch.host().can_run() {
        return Ok(refusal("error", "no runAgent callback is configured"));
    }
    // 8. the child
    let child_key = format!("agent:{target_agent}:subagent:{}", uuid::Uuid::new_v4());
    // §6.2: the agent call's schema refuses labels over 64 characters
    if let Some(l) = &label {
        if l.chars().count() > entry::MAX_LABEL_LEN {
            return Ok(json!({
                "status": "error",
                "error": format!("invalid agent params: at /label: must NOT have more than {} characters", entry::MAX_LABEL_LEN),
                "childSessionKey": child_key,
            }));
        }
    }
    // 11. the child's entry: who spawned it, its label, its model
    let mut patch = Map::new();
    patch.insert("spawnedBy".into(), Value::from(requester_key.clone()));
    if let Some(l) = &label {
        patch.insert("label".into(), Value::from(l.clone()));
    }
    if let Some(m) = &model {
        patch.insert("model".into(), Value::from(m.clone()));
    }
    let (e, ck) = (orch.engine().clone(), child_key.clone());
    if let Err(err) = blocking(move || e.upsert_session(&Value::from(ck), &Value::Object(patch))).await {
        if matches!(err.code(), crate::error::ErrorCode::Closed) {
            return Err(err);
        }
        return Ok(json!({"status": "error", "error": err.message(), "childSessionKey": child_key}));
    }
    // 12. the child's system prompt
    let system_prompt = prompts::subagent_system_prompt(
        &task,
        label.as_deref(),
        ctx.agent_session_key.as_deref(),
        origin.channel.as_deref(),
        &child_key,
    );
    // 13. the child's run, in the requester's chain
    let (e, r, run_id, k) = (orch.engine().clone(), orch.runs().clone(), ctx.run_id.clone(), requester_key.clone());
    let chain = blocking(move || r.chain_of(&e, run_id.as_deref(), Some(&k))).await?.unwrap_or_else(new_chain_id);
    let timeout_ms =
        if run_timeout_secs > 0 { run_timeout_secs } else { cfg.default_timeout_seconds }.saturating_mul(1000);
    let options = RunOptions {
        extra_system_prompt: Some(system_prompt),
        channel: origin.channel.clone(),
        model: model.clone(),
        thinking,
        label: label.clone(),
        spawned_by: Some(requester_key.clone()),
        ..RunOptions::new(Lane::Subagent, timeout_ms, chain)
    };
    let spec = RunSpec {
        session_key: child_key.clone(),
        message: task.clone(),
        provenance: Provenance { kind: "subagent_task", source_session_key: Some(requester_key.clone()) },
        options,
        chain_limit: Some(cfg.max_chain_turns),
    };
    // The maxActive check again, in the same write as the run is recorded: the one above does
    // not see children another store on this file is spawning at the same moment.
    let cap = ChildCap { requester_key: requester_key.clone(), max_active: cfg.subagents.max_active };
    let (e, h, r) = (orch.engine().clone(), orch.host().clone(), orch.runs().clone());
    let refused = match blocking(move || r.start_capped(e, h, spec, &cap)).await? {
        Admission::Started(run_id) => Ok(run_id),
        Admission::ChainFull => Err(format!("Agent-to-agent chain limit reached ({} turns).", cfg.max_chain_turns)),
        Admission::TooManyChildren(n) => Err(format!("Too many active sub-agents ({n}); wait for one to finish.")),
    };
    let run_id = match refused {
        Ok(run_id) => run_id,
        Err(text) => {
            // refused: the child entry written above goes again
            let (e, ck) = (orch.engine().clone(), child_key.clone());
            let _ = blocking(move || e.delete_session(&Value::from(ck), &json!({"deleteTranscript": true}))).await;
            return Ok(refusal("forbidden", text));
        }
    };
    // 14. register
    let now = entry::now_ms();
    let record = subagents::SubagentRun {
        run_id: run_id.clone(),
        child_session_key: child_key.clone(),
        requester_session_key: requester_key,
        requester_display_key: display_key,
        requester_origin: (!origin.is_empty()).then(|| origin.to_json()),
        task,
        label,
        cleanup: cleanup.to_owned(),
        created_at: now,
        started_at: Some(now),
        ended_at: None,
        outcome: None,
        announce: subagents::AnnounceState {
            status: "pending".into(),
            attempts: 0,
            idempotency_key: uuid::Uuid::new_v4().to_string(),
        },
        archive_at_ms: None,
        cleanup_completed_at: None,
    };
    subagents::register(orch, record).await?;
    // 15.
    let mut out = Map::new();
    out.insert("status".into(), "accepted".into());
    out.insert("childSessionKey".into(), child_key.into());
    out.insert("runId".into(), run_id.into());
    if model.is_some() {
        out.insert("modelApplied".into(), true.into());
    }
    Ok(Value::Object(out))
}

#[cfg(test)]
#[path = "spawn_tests.rs"]
mod tests;
