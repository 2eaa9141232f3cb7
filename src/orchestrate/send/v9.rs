//! `sessions_send` under the 2026.9 contract (OpenClaw 2026.9 §1.3): the parameters of
//! `tools::send9`, the target as for 2026.1 (or an agent's main session, created on demand), the
//! 2026.9 refusals (thread sessions, the calling session when waiting), the modes (`notify`
//! queues the annotated message on the target's transcript for its next turn, `steer` goes
//! through the host's `steer`, `followup`/default start a run, `resume` continues a child paused
//! in its own `sessions_yield`, as does a send without `mode` to such a child of the caller:
//! `resume9`), every result with a `runId`, `accepted` instead of `timeout` for
//! a wait that ran out while the run goes on, `watched` (the requester watches the target,
//! `orchestrate::watch`), and the reply flow by reply mode: none for a
//! sub-agent requester, `one-way` (the reply handed once to the requester) for a sub-agent
//! target, else the peer ping-pong and announce of [`Flow`].

use std::sync::Arc;

use serde_json::{json, Value};

use super::flow::{Flow, Primary};
use super::resume9;
use super::{latest_reply, start_checked, Started, WEBCHAT};
use crate::error::{ErrorCode, Result};
use crate::host::{Lane, RunOptions};
use crate::keys::{self, SessionKind};
use crate::orchestrate::prompts9;
use crate::orchestrate::runs::{Provenance, RunSpec, RunStatus};
use crate::orchestrate::state::Orchestrator;
use crate::orchestrate::task::{blocking, new_chain_id};
use crate::orchestrate::watch;
use crate::tools::send::{chain_limit_text, Timing, SEND_BLOCKED};
use crate::tools::send9::{self, Mode, Provenance9};
use crate::tools::{read_string, ToolContext};

/// How a target's reply goes back (2026.9 `replyMode`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum ReplyMode {
    /// requester is a sub-agent: the result stays with the tool call
    None,
    /// target is a sub-agent: its reply is handed to the requester once
    OneWay,
    /// the ping-pong and announce
    Peer,
}

pub async fn run(orch: &Arc<Orchestrator>, params: &Value, ctx: &ToolContext) -> Result<Value> {
    let p = send9::read(params)?;
    // `resume`: the caller is the calling session (`ctx.agentSessionKey`)
    if let Some(refused) = send9::check_resume(&p, ctx.agent_session_key.is_some())? {
        return Ok(refused);
    }
    let engine = orch.engine().clone();
    let cfg = engine.config();

    // `agentId` alone names that agent's main session (created on demand)
    let mut target_params = params.clone();
    if read_string(params, "sessionKey").is_none() && read_string(params, "label").is_none() {
        if let Some(raw) = read_string(params, "agentId") {
            let id = keys::normalize_agent_id(&raw);
            if !cfg.agents.iter().any(|a| a.id == id) && id != cfg.key_model().default_agent() {
                let text = format!("Agent \"{raw}\" not found. Run openclaw agents list to see configured agents.");
                return Ok(send9::refused("error", &text, None));
            }
            if let Some(o) = target_params.as_object_mut() {
                o.insert("sessionKey".into(), cfg.key_model().main_session_key_of(&id).into());
                o.remove("agentId");
            }
        }
    }
    let (e, tp, c) = (engine.clone(), target_params, ctx.clone());
    let target = match blocking(move || Ok(crate::tools::send::resolve_target(&e, &tp, &c))).await? {
        Ok(t) => t,
        Err(refused) => return refused.into_payload(),
    };
    let display = target.display.clone();
    let waited = p.timeout_seconds > 0;
    if waited && target.requester.key.as_deref() == Some(target.key.as_str()) {
        return Ok(send9::refused("error", send9::SELF_TARGET, Some(&display)));
    }
    if keys::thread_parent(&target.key).is_some() {
        return Ok(send9::refused("error", send9::THREAD_TARGET, Some(&display)));
    }
    let (e, k) = (engine.clone(), target.key.clone());
    let target_entry = blocking(move || e.get_session(&Value::from(k))).await?;
    if target_entry.is_none() && matches!(p.mode, Some(Mode::Notify | Mode::Steer | Mode::Resume)) {
        return Ok(send9::refused("error", send9::MISSING_SESSION, Some(&display)));
    }
    let requester_key = target.requester.key.clone();
    let requester_is_subagent = requester_key.as_deref().is_some_and(keys::is_subagent_key);
    let requester_is_cron = requester_key.as_deref().is_some_and(|k| keys::key_kind(k) == SessionKind::Cron);
    let target_is_subagent = keys::is_subagent_key(&target.key);
    let reply_mode = if requester_is_subagent {
        ReplyMode::None
    } else if target_is_subagent && !requester_is_cron {
        ReplyMode::OneWay
    } else {
        ReplyMode::Peer
    };
    let provenance = Provenance9 {
        source_session_key: requester_key.clone(),
        source_channel: ctx.agent_channel.clone(),
        source_tool: "sessions_send",
    };
    let annotated = send9::annotate(&p.message, &provenance);
    // `resume`, or a send without `mode` to a paused child of the caller (2026.9 resumes it)
    let resume = match (p.mode, requester_key.as_deref()) {
        (Some(Mode::Resume), _) => true,
        (None, Some(caller)) if ctx.agent_session_key.is_some() && target_entry.is_some() => {
            resume9::should_auto_resume(orch, &target.key, caller).await?
        }
        _ => false,
    };
    if resume {
        let Some(caller) = requester_key.as_deref() else {
            return Ok(send9::refused("forbidden", send9::RESUME_NEEDS_CALLER, None));
        };
        let ask = resume9::ResumeAsk {
            target_key: &target.key,
            display: &display,
            caller,
            message: annotated,
            from_run: ctx.run_id.clone(),
        };
        return resume9::run(orch, ask, target_entry.as_ref()).await;
    }
    // `watch`: registered once the message is accepted
    let watch = |target_key: String| {
        let (o, rk) = (orch.clone(), requester_key.clone());
        async move { watch::register(&o, p.watch, rk.as_deref(), &target_key).await }
    };

    match p.mode {
        Some(Mode::Notify) => {
            let (e, k, src) = (engine.clone(), target.key.clone(), requester_key.clone());
            let id = uuid::Uuid::new_v4().to_string();
            let note = json!([{
                "role": "user",
                "content": [{"type": "text", "text": annotated}],
                "timestamp": crate::entry::now_ms(),
                "provenance": {"kind": "inter_session", "sourceSessionKey": src, "sourceTool": "sessions_send", "notificationId": id},
            }]);
            return match blocking(move || e.append_messages(&Value::from(k), &note)).await {
                Ok(_) => Ok(send9::queued(&display, &id)),
                Err(err) if matches!(err.code(), ErrorCode::Closed | ErrorCode::StoreError) => Err(err),
                Err(_) => Ok(send9::refused("error", send9::NOT_QUEUED, Some(&display))),
            };
        }
        Some(Mode::Steer) => {
            let run_id = uuid::Uuid::new_v4().to_string();
            let steered =
                orch.host().can_steer() && matches!(orch.host().steer(target.key.clone(), annotated).await, Ok(true));
            return Ok(if steered {
                let watched = watch(target.key.clone()).await?;
                send9::accepted(&run_id, &display, true, send9::delivery(false), watched)
            } else {
                json!({"runId": run_id, "status": "error", "error": send9::NO_ACTIVE_RUN, "sessionKey": display})
            });
        }
        _ => {}
    }

    // the chain of the run this call is made from (DECISIONS.md #4), else a new one
    let (e, runs, from, rk) = (engine.clone(), orch.runs().clone(), ctx.run_id.clone(), requester_key.clone());
    let chain_id =
        blocking(move || runs.chain_of(&e, from.as_deref(), rk.as_deref())).await?.unwrap_or_else(new_chain_id);
    let timing = Timing::of(&json!({ "timeoutSeconds": p.timeout_seconds }));
    let run_timeout_ms = cfg.default_timeout_seconds.saturating_mul(1000);
    let context = (!requester_is_subagent && !target_is_subagent)
        .then(|| prompts9::message_context(requester_key.is_some(), ctx.agent_channel.as_deref()));
    let spec = RunSpec {
        session_key: target.key.clone(),
        message: annotated,
        provenance: Provenance { kind: "inter_session", source_session_key: requester_key.clone() },
        options: RunOptions {
            extra_system_prompt: context,
            channel: Some(WEBCHAT.to_owned()),
            ..RunOptions::new(Lane::Nested, if waited { timing.timeout_ms } else { run_timeout_ms }, chain_id.clone())
        },
        chain_limit: Some(cfg.max_chain_turns),
    };
    let run_id = match start_checked(orch, spec).await? {
        Started::Run(id) => id,
        Started::ChainFull => {
            return Ok(send9::refused("forbidden", &chain_limit_text(cfg.max_chain_turns), Some(&display)))
        }
        Started::Blocked => return Ok(send9::refused("error", SEND_BLOCKED, Some(&display))),
    };
    let watched = watch(target.key.clone()).await?;
    let flow = Flow {
        orch: orch.clone(),
        target_key: target.key.clone(),
        target_display: display.clone(),
        message: p.message.trim().to_owned(),
        timing,
        max_turns: cfg.ping_pong_turns_for(requester_key.as_deref()),
        max_chain_turns: cfg.max_chain_turns,
        run_timeout_ms,
        requester_key: requester_key.clone(),
        requester_raw: target.requester.raw.clone(),
        requester_channel: ctx.agent_channel.clone(),
        chain_id: chain_id.clone(),
    };
    let delayed = send9::delivery(reply_mode != ReplyMode::None);
    let delivery = if waited && target_is_subagent { send9::delivery(false) } else { delayed.clone() };
    let follow = |primary: Primary| {
        let (o, mode) = (orch.clone(), reply_mode);
        async move {
            match mode {
                ReplyMode::None => {}
                ReplyMode::Peer => flow.run(primary).await,
                ReplyMode::OneWay => one_way(&o, &flow, primary).await,
            }
        }
    };

    if !waited {
        orch.spawn_busy(follow(Primary::Wait(run_id.clone())));
        return Ok(send9::accepted(&run_id, &display, false, delivery, watched));
    }
    let snap = match orch.runs().wait(&engine, &run_id, timing.timeout_ms).await {
        Ok(s) => s,
        Err(e) if e.code() == ErrorCode::Closed => return Err(e),
        Err(e) => return Ok(send9::failed_after_send(&run_id, "error", e.message(), &display, None, watched)),
    };
    match snap.status {
        RunStatus::Ok => match latest_reply(&engine, &target.key, &run_id).await? {
            Some(reply) if !reply.trim().is_empty() => {
                if delivery["status"] == "pending" {
                    orch.spawn_busy(follow(Primary::Reply(Some(reply.clone()))));
                }
                Ok(send9::ok(&run_id, &display, delivery, &reply, watched))
            }
            _ => Ok(send9::no_reply(&run_id, &display, false, watched)),
        },
        RunStatus::Error => {
            let error = snap.error.as_deref().filter(|e| !e.is_empty()).unwrap_or(send9::AGENT_ERROR);
            Ok(send9::failed_after_send(&run_id, "error", error, &display, None, watched))
        }
        RunStatus::Timeout if snap.ended_at.is_some() => {
            let error = snap.error.as_deref().filter(|e| !e.is_empty()).unwrap_or(send9::RUN_TIMED_OUT);
            Ok(send9::failed_after_send(&run_id, "timeout", error, &display, None, watched))
        }
        RunStatus::Timeout | RunStatus::Running => {
            // the wait ran out, the run goes on: its late reply still gets its flow
            orch.spawn_busy(follow(Primary::UntilEnd(run_id.clone())));
            Ok(send9::accepted(&run_id, &display, false, delayed, watched))
        }
    }
}

/// The one-way handoff: the sub-agent target's reply, once, as a turn of the requester.
async fn one_way(orch: &Arc<Orchestrator>, flow: &Flow, primary: Primary) {
    let Some(requester) = flow.requester_key.clone() else { return };
    let reply = match flow.primary_reply(primary).await {
        Ok(Some(r)) if !send9::is_non_deliverable(&r) => r,
        Ok(_) => return,
        Err(e) => {
            orch.emit("a2a.error", None, Some(&flow.target_key), json!({ "error": e.message() }));
            return;
        }
    };
    let spec = RunSpec {
        session_key: requester,
        message: reply,
        provenance: Provenance { kind: "inter_session", source_session_key: Some(flow.target_key.clone()) },
        options: RunOptions {
            extra_system_prompt: Some(prompts9::one_way_context()),
            channel: Some(WEBCHAT.to_owned()),
            ..RunOptions::new(Lane::Nested, flow.run_timeout_ms, flow.chain_id.clone())
        },
        chain_limit: Some(flow.max_chain_turns),
    };
    if let Err(e) = start_checked(orch, spec).await {
        orch.emit("a2a.error", None, Some(&flow.target_key), json!({ "error": e.message() }));
    }
    orch.emit("a2a.end", None, Some(&flow.target_key), json!({ "reason": "one-way", "chainId": flow.chain_id }));
}

#[cfg(test)]
#[path = "v9_tests.rs"]
mod tests;
