//! `sessions_spawn` (REFERENCE.md §6.1–§6.3, DECISIONS.md #5): the tool, which checks, builds
//! and starts a sub-agent run and registers it.
//!
//! `tools::spawn` reads the parameters and makes the config's refusals (a sub-agent requester,
//! an agent the allow list does not name, a model outside the catalog, an unknown thinking
//! level); here, before anything is written or run: too many running children, an over-long
//! label. Then the child's entry is written (`spawnedBy`,
//! `label`, `model`), its run started in the `subagent` lane, and the run registered; the
//! registry (`subagents`) takes it from there.

use std::sync::Arc;

use serde_json::{json, Map, Value};

use super::runs::{Admission, ChildCap, Provenance, RunSpec};
use super::state::Orchestrator;
use super::task::{blocking, new_chain_id};
use super::{prompts, spawn_v9, subagents};
use crate::entry::{self, DeliveryContext};
use crate::error::Result;
use crate::host::{Lane, RunOptions};
use crate::tools::send::chain_limit_text;
use crate::tools::spawn::{self as tool, SpawnRequest};
use crate::tools::spawn9;
use crate::tools::{refusal, ToolContext};

pub use crate::tools::spawn::FROM_SUBAGENT;

/// The most messages of the requester's transcript a forked child starts with (a history page).
const FORK_MESSAGES: u32 = 1000;

/// The tool after its parameters are read: the payload the model sees.
pub async fn run(orch: &Arc<Orchestrator>, request: SpawnRequest, ctx: &ToolContext) -> Result<Value> {
    let cfg = orch.engine().config();
    // DECISIONS.md #5: at most maxActive running children per requester. The check and the
    // registration below are one step for this store: concurrent spawns wait here, so each one
    // counts the children registered before it.
    let _gate = orch.subagents().spawn_gate.lock().await;
    let (o, k) = (orch.clone(), request.requester_key.clone());
    let active = blocking(move || subagents::running_count(&o, &k)).await?;
    // 2026.9: the depth of the requester in the stored lineage, and maxChildrenPerAgent
    let max_children = if request.v9 { cfg.subagents.max_children_per_agent } else { cfg.subagents.max_active };
    let admitted = if request.v9 {
        match spawn_v9::admit(orch, &request, ctx, active, max_children).await? {
            Ok(a) => a,
            Err(refused) => return Ok(refused),
        }
    } else {
        spawn_v9::Admitted { depth: 0, sandbox_required: false }
    };
    let depth = admitted.depth;
    let SpawnRequest {
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
    } = request;
    if active >= u64::from(max_children) {
        return Ok(tool::too_many_children(active));
    }
    if !orch.host().can_run() {
        return Ok(refusal("error", "no runAgent callback is configured"));
    }
    // 8. the child
    let child_key = format!("agent:{target_agent}:subagent:{}", uuid::Uuid::new_v4());
    // §6.2: the agent call's schema refuses labels over 64 characters
    if label.as_ref().is_some_and(|l| l.chars().count() > entry::MAX_LABEL_LEN) {
        return Ok(tool::label_too_long(&child_key));
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
    if v9 {
        // the lineage 2026.9 reads depth from, and the child's role by it
        let child_depth = depth + 1;
        let role = if child_depth < cfg.subagents.max_spawn_depth { "orchestrator" } else { "leaf" };
        patch.insert("spawnDepth".into(), child_depth.into());
        patch.insert("subagentRole".into(), role.into());
        if admitted.sandbox_required {
            patch.insert("sandbox".into(), "required".into());
        }
        if opts9.completion_parent {
            patch.insert("completionTarget".into(), "parent".into());
        }
    }
    let (e, ck) = (orch.engine().clone(), child_key.clone());
    if let Err(err) = blocking(move || e.upsert_session(&Value::from(ck), &Value::Object(patch))).await {
        if matches!(err.code(), crate::error::ErrorCode::Closed) {
            return Err(err);
        }
        return Ok(tool::failed(&child_key, err.message()));
    }
    // 2026.9: a thread spawn without `context` forks (threadBindings.defaultSpawnContext)
    let fork =
        fork || (opts9.thread && opts9.context.is_none() && origin.channel.is_some() && orch.host().can_bind_thread());
    if fork && target_agent != requester_agent {
        return Ok(discard(orch, &child_key, tool::failed(&child_key, spawn9::FORK_SAME_AGENT)).await);
    }
    // 2026.9 `context: "fork"`: the child starts with a copy of the requester's transcript
    if fork {
        let (e, from, to) = (orch.engine().clone(), requester_key.clone(), child_key.clone());
        let copied = blocking(move || {
            let (_, _, page) = e.chat_history(&Value::from(from), &json!({"limit": FORK_MESSAGES}))?;
            let messages: Vec<Value> =
                page.messages.iter().filter_map(|m| serde_json::from_str(&m.json).ok()).collect();
            if !messages.is_empty() {
                e.append_messages(&Value::from(to), &Value::Array(messages))?;
            }
            Ok(())
        })
        .await;
        if let Err(err) = copied {
            if matches!(err.code(), crate::error::ErrorCode::Closed) {
                return Err(err);
            }
            return Ok(tool::failed(&child_key, err.message()));
        }
    }
    // 2026.9 `thread: true`: the child is bound to a thread of the requester's channel
    let bound = if opts9.thread {
        let ask = spawn_v9::ThreadAsk {
            opts9: &opts9,
            origin: &origin,
            requester_key: &requester_key,
            target_agent: &target_agent,
            label: label.as_ref(),
            child_key: &child_key,
        };
        match spawn_v9::bind_thread(orch, ask).await? {
            Ok(bound) => Some(bound),
            Err(text) => return Ok(discard(orch, &child_key, tool::failed(&child_key, &text)).await),
        }
    } else {
        None
    };
    // 2026.9 `attachments`: staged by the host, listed in the child's system prompt
    let staged = if v9 {
        let ask = spawn_v9::StageAsk {
            opts9: &opts9,
            child_key: &child_key,
            target_agent: &target_agent,
            sandboxed: spawn_v9::child_sandboxed(orch, &target_agent, &admitted),
        };
        match spawn_v9::stage_attachments(orch, ask).await? {
            Ok(staged) => staged,
            Err(refused) => {
                spawn_v9::release_thread(orch, bound.is_some(), &child_key).await;
                return Ok(discard(orch, &child_key, refused).await);
            }
        }
    } else {
        None
    };
    let completion = match &bound {
        Some(_) if opts9.session_mode => spawn9::CompletionMode::ThreadDirect,
        _ if expects_completion => spawn9::CompletionMode::Announce,
        _ => spawn9::CompletionMode::Quiet,
    };
    // 12. the child's system prompt
    let mut system_prompt = prompts::subagent_system_prompt(
        &task,
        label.as_deref(),
        ctx.agent_session_key.as_deref(),
        origin.channel.as_deref(),
        &child_key,
    );
    if let Some(s) = &staged {
        system_prompt = format!("{system_prompt}\n\n{}", s.prompt_suffix);
    }
    // 13. the child's run, in the requester's chain
    let (e, r, run_id, k) = (orch.engine().clone(), orch.runs().clone(), ctx.run_id.clone(), requester_key.clone());
    let chain = blocking(move || r.chain_of(&e, run_id.as_deref(), Some(&k))).await?.unwrap_or_else(new_chain_id);
    let timeout_ms =
        if run_timeout_secs > 0 { run_timeout_secs } else { cfg.default_timeout_seconds }.saturating_mul(1000);
    // 2026.9: a bound child runs on its thread (and delivers there itself in `session` mode)
    let route =
        bound.clone().unwrap_or_else(|| DeliveryContext { channel: origin.channel.clone(), ..Default::default() });
    let options = RunOptions {
        extra_system_prompt: Some(system_prompt),
        deliver: completion == spawn9::CompletionMode::ThreadDirect,
        channel: route.channel,
        to: route.to,
        account_id: route.account_id,
        thread_id: subagents::thread_text(&route.thread_id),
        model: model.clone(),
        thinking,
        label: label.clone(),
        spawned_by: Some(requester_key.clone()),
        light_context: opts9.light_context,
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
    let cap = ChildCap { requester_key: requester_key.clone(), max_active: max_children };
    let (e, h, r) = (orch.engine().clone(), orch.host().clone(), orch.runs().clone());
    let refused = match blocking(move || r.start_capped(e, h, spec, &cap)).await? {
        Admission::Started(run_id) => Ok(run_id),
        Admission::ChainFull => Err(chain_limit_text(cfg.max_chain_turns)),
        Admission::TooManyChildren(n) if v9 => Err(spawn9::children_refusal(n, max_children).unwrap_or_default()),
        Admission::TooManyChildren(n) => Err(format!("Too many active sub-agents ({n}); wait for one to finish.")),
        Admission::Declined => Err("the child run was not admitted".to_owned()),
    };
    let run_id = match refused {
        Ok(run_id) => run_id,
        // refused: the child entry written above goes again, and its thread binding
        Err(text) => {
            spawn_v9::release_thread(orch, bound.is_some(), &child_key).await;
            return Ok(discard(orch, &child_key, refusal("forbidden", text)).await);
        }
    };
    // 2026.9: the turn that spawned the child (a yield of that turn claims it)
    if let (true, Some(turn)) = (v9, ctx.run_id.clone()) {
        let (e, r) = (orch.engine().clone(), run_id.clone());
        blocking(move || e.store().write(|db| db.record_spawn_turn(&r, &turn))).await?;
    }
    // 14. register
    let requester_key_view = requester_key.clone();
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
            // 2026.9 `expectsCompletionMessage: false` (or a child that answers on its own
            // thread): nothing is handed over
            status: if completion == spawn9::CompletionMode::Announce { "pending" } else { "skipped" }.into(),
            attempts: 0,
            idempotency_key: uuid::Uuid::new_v4().to_string(),
        },
        archive_at_ms: None,
        cleanup_completed_at: None,
        pause_reason: None,
        task_run_id: None,
        run_timeout_seconds: (run_timeout_secs > 0).then_some(run_timeout_secs),
    };
    subagents::register(orch, record).await?;
    // 15.
    if v9 {
        let resolved = model.as_deref().and_then(|m| cfg.models.resolve(m)).map(|r| (r.model, r.provider));
        let cron = crate::keys::key_kind(&requester_key_view) == crate::keys::SessionKind::Cron;
        return Ok(tool::accepted_2026_9(tool::Accepted9 {
            child_key,
            run_id,
            mode: opts9.mode(),
            expects_completion: completion == spawn9::CompletionMode::Announce,
            completion_parent: opts9.completion_parent,
            fork,
            task_name,
            note: spawn9::accepted_note(&opts9, completion, cron),
            resolved,
            model_applied: model.is_some(),
            attachments: staged.map(|s| s.receipt),
        }));
    }
    Ok(tool::accepted(child_key, run_id, model.is_some()))
}

/// A refused spawn: the child entry already written goes again; `payload` is the answer.
async fn discard(orch: &Arc<Orchestrator>, child_key: &str, payload: Value) -> Value {
    let (e, ck) = (orch.engine().clone(), child_key.to_owned());
    let _ = blocking(move || e.delete_session(&Value::from(ck), &json!({"deleteTranscript": true}))).await;
    payload
}

#[cfg(test)]
#[path = "spawn_tests.rs"]
mod tests;

#[cfg(test)]
#[path = "spawn9_tests.rs"]
mod tests9;

#[cfg(test)]
#[path = "spawn9_opts_tests.rs"]
mod tests9_opts;
