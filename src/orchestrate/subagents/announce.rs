//! One try of a sub-agent announce (§6.5–§6.7): the trigger message with its stats line, the
//! requester's send policy, then steering the requester's active run, queueing, or an announce run.

use super::*;
use std::sync::Arc;

use serde_json::{json, Value};

use crate::config::Config;
use crate::entry::{self, DeliveryContext, Entry};
use crate::error::Result;
use crate::orchestrate::delivery::{self, Verdict};
use crate::orchestrate::outbox::{Attempt, OutboxRow, SUBAGENT_ANNOUNCE};
use crate::orchestrate::prompts::{self, SubagentOutcome};
use crate::orchestrate::reply;
use crate::orchestrate::state::Orchestrator;
use crate::orchestrate::stats::{self, ModelCost, RunStats};
use crate::orchestrate::task::blocking;

/// §6.5 steps 2–7: the trigger message for an ended child.
pub(super) async fn build_trigger(orch: &Orchestrator, rec: &SubagentRun) -> Result<String> {
    let e = orch.engine().clone();
    let child = rec.child_session_key.clone();
    let (entry, messages) = blocking(move || {
        let key = Value::from(child);
        let entry = e.get_session(&key)?;
        let (_, _, page) = e.chat_history(&key, &json!({"limit": 50}))?;
        let messages: Vec<Value> = page.messages.iter().filter_map(|m| serde_json::from_str(&m.json).ok()).collect();
        Ok((entry, messages))
    })
    .await?;
    let found = reply::latest_assistant_reply(&messages);
    let outcome = match rec.outcome.as_ref().map(|o| o.status.as_str()) {
        Some("ok") => SubagentOutcome::Ok,
        Some("timeout") => SubagentOutcome::Timeout,
        Some("error") => SubagentOutcome::Error(rec.outcome.as_ref().and_then(|o| o.error.clone())),
        _ => SubagentOutcome::Unknown,
    };
    let cfg = orch.engine().config();
    let entry = entry.unwrap_or_default();
    if cfg.contract == crate::contract::Contract::V2026_9 {
        return Ok(handoff_2026_9(rec, &entry, found));
    }
    let line = stats::stats_line(&run_stats(orch, &cfg, rec, &entry).as_ref());
    let title = prompts::task_title(rec.label.as_deref(), Some(&rec.task));
    Ok(prompts::subagent_trigger(title, &prompts::status_label(&outcome), found.as_deref(), &line))
}

/// The 2026.9 handoff: the completion event in the protected runtime context, its status from
/// the run's outcome, never from the model's text.
fn handoff_2026_9(rec: &SubagentRun, entry: &Entry, found: Option<String>) -> String {
    use crate::orchestrate::completion9::{self, Handoff};
    let (status, error) = match &rec.outcome {
        Some(o) => (o.status.as_str(), o.error.as_deref()),
        None => ("unknown", None),
    };
    let num = |k: &str| entry.get(k).and_then(Value::as_f64).filter(|f| f.is_finite());
    let runtime = match (rec.started_at, rec.ended_at) {
        (Some(s), Some(e)) => Some(e - s),
        _ => None,
    };
    let requester_is_subagent = crate::keys::is_subagent_key(&rec.requester_session_key);
    // `completionTarget: "parent"`: a private turn, without the stats line
    let private = is_private(entry);
    completion9::handoff_text(&Handoff {
        child_session_key: rec.child_session_key.clone(),
        child_session_id: entry::str_field(entry, "sessionId").map(str::to_owned),
        task_label: rec.label.clone().filter(|l| !l.is_empty()).unwrap_or_else(|| {
            if rec.task.is_empty() {
                "task".to_owned()
            } else {
                rec.task.clone()
            }
        }),
        status_label: completion9::status_label(status, error),
        result: found,
        stats_line: (!private).then(|| completion9::stats_line(runtime, num("inputTokens"), num("outputTokens"))),
        reply_instruction: if private {
            completion9::private_instruction()
        } else {
            completion9::reply_instruction(requester_is_subagent, true)
        },
    })
}

/// A child spawned with 2026.9 `completionTarget: "parent"` (its entry says so).
fn is_private(child_entry: &Entry) -> bool {
    child_entry.get("completionTarget").and_then(Value::as_str) == Some("parent")
}

/// Whether the child's result goes to a private requester turn.
async fn private_completion(orch: &Orchestrator, rec: &SubagentRun) -> Result<bool> {
    if orch.engine().config().contract != crate::contract::Contract::V2026_9 {
        return Ok(false);
    }
    let (e, child) = (orch.engine().clone(), rec.child_session_key.clone());
    let entry = blocking(move || e.get_session(&Value::from(child))).await?;
    Ok(entry.as_ref().is_some_and(is_private))
}

/// Owned stats inputs, borrowed by [`RunStats`].
pub(super) struct StatsInput {
    base: RunStats<'static>,
    key: String,
    session_id: Option<String>,
    transcript: Option<String>,
}

impl StatsInput {
    fn as_ref(&self) -> RunStats<'_> {
        RunStats {
            session_key: &self.key,
            session_id: self.session_id.as_deref(),
            transcript_path: self.transcript.as_deref(),
            ..self.base.clone()
        }
    }
}

/// §6.7: the child's usage from its entry (written before its run was recorded as ended, so
/// one read is enough), the price from the config's cost table.
pub(super) fn run_stats(orch: &Orchestrator, cfg: &Config, rec: &SubagentRun, entry: &Entry) -> StatsInput {
    let num = |k: &str| entry.get(k).and_then(Value::as_f64).filter(|f| f.is_finite());
    let model = entry::text_field(entry, "model");
    let provider = entry::text_field(entry, "modelProvider");
    let cost = model.and_then(|m| {
        let (p, id) = match provider {
            Some(p) => (p.to_owned(), m.to_owned()),
            None => {
                let r = cfg.models.resolve(m)?;
                (r.provider?, r.model)
            }
        };
        cfg.models.cost(&p, &id).map(|c| ModelCost { input: c.input, output: c.output })
    });
    StatsInput {
        base: RunStats {
            started_at: rec.started_at.map(|v| v as f64),
            ended_at: rec.ended_at.map(|v| v as f64),
            total_tokens: num("totalTokens"),
            input_tokens: num("inputTokens"),
            output_tokens: num("outputTokens"),
            cost,
            session_key: "",
            session_id: None,
            transcript_path: None,
        },
        key: rec.child_session_key.clone(),
        session_id: entry::str_field(entry, "sessionId").map(str::to_owned),
        transcript: orch.engine().transcript_path(entry),
    }
}
/// One try of a sub-agent announce (a `subagent_announce` outbox item).
pub async fn attempt_announce(orch: &Arc<Orchestrator>, row: OutboxRow) -> Attempt {
    let Some(run_id) = row.payload.get("runId").and_then(Value::as_str).map(str::to_owned) else {
        return Attempt::Failed("malformed sub-agent announce: no runId".to_owned());
    };
    let rec = match load(orch, &run_id).await {
        Ok(Some(r)) => r,
        Ok(None) => return Attempt::Skipped("the sub-agent run is no longer registered".to_owned()),
        Err(e) => return Attempt::Retry(e.message().to_owned()),
    };
    if rec.announce.status != "pending" {
        return Attempt::Skipped(format!("the announce is already {}", rec.announce.status));
    }
    let key = rec.announce.idempotency_key.clone();
    // an announce run an earlier try of this process started: wait for it, never start another
    let earlier = lock(&orch.subagents().announce_runs).get(&key).cloned();
    if let Some(run) = earlier {
        return await_announce_run(orch, &[key], &run).await;
    }
    match announce(orch, &rec).await {
        Ok(a) => a,
        Err(e) => Attempt::Retry(e.message().to_owned()),
    }
}

/// §6.5 step 8–9 with §6.8: steer, queue or direct.
pub(super) async fn announce(orch: &Arc<Orchestrator>, rec: &SubagentRun) -> Result<Attempt> {
    let trigger = build_trigger(orch, rec).await?;
    let requester = rec.requester_session_key.clone();
    if private_completion(orch, rec).await? {
        let (chain, key) = (chain_of(orch, &rec.run_id).await, rec.announce.idempotency_key.clone());
        let run = start_private_run(orch, &requester, trigger, &rec.child_session_key, chain, Some(key.clone()))?;
        lock(&orch.subagents().announce_runs).insert(key.clone(), run.clone());
        return Ok(await_announce_run(orch, &[key], &run).await);
    }
    let e = orch.engine().clone();
    let k = requester.clone();
    let entry = blocking(move || e.get_session(&Value::from(k))).await?;
    let cfg = orch.engine().config();
    let origin = DeliveryContext::of_object(rec.requester_origin.as_ref());
    let chain = chain_of(orch, &rec.run_id).await;
    if let Some(entry) = entry.as_ref().filter(|e| entry::str_field(e, "sessionId").is_some()) {
        let settings = queue_settings(&cfg, entry);
        if matches!(settings.mode, QueueMode::Steer | QueueMode::SteerBacklog) && orch.host().can_steer() {
            if let Ok(true) = orch.host().steer(requester.clone(), trigger.clone()).await {
                return Ok(Attempt::Delivered);
            }
        }
        let (e, r, k) = (orch.engine().clone(), orch.runs().clone(), requester.clone());
        let active = blocking(move || r.active_run(&e, &k)).await?;
        if active.is_some() {
            let item_origin = entry::delivery_context(entry).overlay(origin);
            if let Some(blocked) = send_blocked(orch, rec, item_origin.channel.as_deref()).await {
                return Ok(blocked);
            }
            let item = QueueItem {
                prompt: trigger,
                summary_line: prompts::task_title(rec.label.as_deref(), Some(&rec.task)).to_owned(),
                origin_key: origin_key(&item_origin),
                origin: item_origin,
                key: rec.announce.idempotency_key.clone(),
                child_key: rec.child_session_key.clone(),
                chain,
                done: None,
            };
            return Ok(enqueue_queued(orch, &requester, settings, item).await);
        }
    }
    let route =
        if origin.is_empty() { entry.as_ref().map(entry::delivery_context).unwrap_or_default() } else { origin };
    if let Some(blocked) = send_blocked(orch, rec, route.channel.as_deref()).await {
        return Ok(blocked);
    }
    let key = rec.announce.idempotency_key.clone();
    let run = start_announce_run(orch, &requester, trigger, &route, &rec.child_session_key, chain, Some(key.clone()))?;
    lock(&orch.subagents().announce_runs).insert(key.clone(), run.clone());
    Ok(await_announce_run(orch, &[key], &run).await)
}

/// DECISIONS.md #6: an announce is delivered, so the requester's send policy decides first; a
/// denied one (or one whose policy cannot be evaluated) is skipped with `delivery.blocked`.
pub(super) async fn send_blocked(orch: &Orchestrator, rec: &SubagentRun, channel: Option<&str>) -> Option<Attempt> {
    let Verdict::Blocked { reason, .. } = delivery::check_async(orch, &rec.requester_session_key, channel).await else {
        return None;
    };
    orch.emit(
        "delivery.blocked",
        Some(&rec.run_id),
        Some(&rec.requester_session_key),
        json!({"kind": SUBAGENT_ANNOUNCE, "idempotencyKey": rec.announce.idempotency_key, "reason": reason}),
    );
    Some(Attempt::Skipped(reason))
}

/// The chain of the child's run, for the announce run on the requester.
pub(super) async fn chain_of(orch: &Orchestrator, run_id: &str) -> String {
    let (e, id) = (orch.engine().clone(), run_id.to_owned());
    blocking(move || e.store().read(|db| db.run(&id)))
        .await
        .ok()
        .flatten()
        .and_then(|r| r.chain_id)
        .unwrap_or_else(crate::orchestrate::task::new_chain_id)
}
