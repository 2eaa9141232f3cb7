//! Paused children (OpenClaw 2026.9 `pauseReason: "sessions_yield"`): a child whose run ends
//! while its session waits in its own `sessions_yield` (for a message, or for its own children)
//! is *paused*, not ended: its record keeps no `endedAt`, its completion is held back (nothing
//! goes to the outbox) and its task stays `running`. A later run of the child *adopts* the
//! paused record: `sessions_send` `mode: "resume"` from its owner, or the engine's yield-resume
//! turn once the child's own children have delivered (`yields`). The record moves to the new
//! run id in one write (its announce key, task row and the requester's yield claims with it),
//! so that the task id stays and the one completion, when that run ends, goes through the
//! outbox as for any child (or the child is paused again, when that run yields again). Nothing
//! here decides who may resume: `send::resume9` and `yields` do.

use super::*;
use std::sync::Arc;

use serde_json::json;

use crate::config::Config;
use crate::entry;
use crate::error::Result;
use crate::host::{Lane, RunOptions};
use crate::orchestrate::runs::{RunSnapshot, RunStatus, INTERRUPTED};
use crate::orchestrate::state::Orchestrator;
use crate::orchestrate::task::blocking;
use crate::store::yields::YieldRow;
use crate::store::Db;

/// `pauseReason` of a child paused in its own `sessions_yield`.
pub const YIELD_PAUSE: &str = "sessions_yield";

/// Whether a record is a paused child (its run ended in a `sessions_yield`).
pub fn is_paused(rec: &SubagentRun) -> bool {
    rec.ended_at.is_none() && rec.pause_reason.as_deref() == Some(YIELD_PAUSE)
}

/// The child run `run_id` ended: when its session waits in its own `sessions_yield` (and the
/// run did not time out, as 2026.9 decides), the record is marked paused in one write and
/// `true` is returned: nothing is announced. `true` also for a record that is paused already
/// (a recovery pass seeing its ended run again). A child whose own children have all delivered
/// by then (they can finish before its run's end is recorded) is resumed at once (`yields`).
pub(super) async fn pause_if_yielded(orch: &Arc<Orchestrator>, run_id: &str, snap: &RunSnapshot) -> Result<bool> {
    let (e, id) = (orch.engine().clone(), run_id.to_owned());
    let (timed_out, started) = (snap.status == RunStatus::Timeout, snap.started_at);
    let interrupted = snap.error.as_deref() == Some(INTERRUPTED);
    let paused = blocking(move || {
        e.store().write(|db| {
            let Some(mut r) = db.subagent_run(&id)? else { return Ok(None) };
            if is_paused(&r) {
                return Ok(Some(None));
            }
            r.started_at = r.started_at.or(started);
            if r.ended_at.is_some() || timed_out || !waits_in_yield(db, &r, interrupted)? {
                return Ok(None);
            }
            r.pause_reason = Some(YIELD_PAUSE.to_owned());
            r.archive_at_ms = None;
            db.put_subagent_run(&r)?;
            Ok(Some(Some(r)))
        })
    })
    .await?;
    if let Some(Some(r)) = &paused {
        orch.emit(
            "subagent.paused",
            Some(run_id),
            Some(&r.requester_session_key),
            json!({"childSessionKey": r.child_session_key}),
        );
        crate::orchestrate::yields::check(orch, &r.child_session_key).await;
    }
    Ok(paused.is_some())
}

/// Whether the run of `rec` ended in its session's own `sessions_yield`: that run yielded (a
/// yield still waiting that it made), or the run was a yield-resume turn cut short by a restart
/// (that yield is `resuming` with this run): paused again, the next open's resume adopts it
/// anew. As in 2026.9 the pause is the run's: a run that adopted a paused child by hand
/// (`mode: "resume"`) and ends without yielding again completes, though the yield its earlier
/// run made may still wait for children ([`settle_earlier_yields`]).
fn waits_in_yield(db: &Db<'_>, rec: &SubagentRun, interrupted: bool) -> Result<bool> {
    Ok(db.open_yields_of(&rec.child_session_key)?.iter().any(|y| {
        (y.status == "waiting" && made_by(y, rec))
            || (interrupted && y.status == "resuming" && y.resume_run_id.as_deref() == Some(rec.run_id.as_str()))
    }))
}

/// The child of `rec` completed with a run that did not yield (one that adopted it by hand):
/// the yields an earlier run made for children that have all delivered since (into this run,
/// steered) are settled without a wake; the session has seen what they waited for. A yield
/// with children still pending stays, and their delivery wakes the session.
pub async fn settle_earlier_yields(orch: &Arc<Orchestrator>, rec: &SubagentRun) {
    let (e, r) = (orch.engine().clone(), rec.clone());
    // a read first: most children end with no yield of an earlier run, and pay no write for it
    let settled = blocking(move || {
        let stale: Vec<String> = e.store().read(|db| {
            let earlier = |y: &YieldRow| y.status == "waiting" && y.wait_for == "children" && !made_by(y, &r);
            let yields: Vec<YieldRow> = db.open_yields_of(&r.child_session_key)?.into_iter().filter(earlier).collect();
            if yields.is_empty() {
                return Ok(Vec::new());
            }
            let pending = db.undelivered_children(&r.child_session_key)?;
            Ok(yields
                .into_iter()
                .filter(|y| !pending.iter().any(|c| y.children.contains(&c.run_id)))
                .map(|y| y.yield_id)
                .collect())
        })?;
        if stale.is_empty() {
            return Ok(());
        }
        // each moves only if it still waits (a delivery may resume it meanwhile)
        e.store().write(|db| {
            for id in &stale {
                db.move_yield(id, "waiting", "resumed", None, Some(entry::now_ms()))?;
            }
            Ok(())
        })
    })
    .await;
    if let Err(err) = settled {
        orch.emit("store.error", Some(&rec.run_id), None, json!({"error": err.message()}));
    }
}

/// Whether the yield `y` was made by the run of `rec`: its turn names that run, or (the host
/// gave no run id of ours) it was made once that run had started.
fn made_by(y: &YieldRow, rec: &SubagentRun) -> bool {
    y.turn_run_id.as_deref() == Some(rec.run_id.as_str()) || rec.started_at.is_none_or(|s| y.created_at >= s)
}

/// Whether a yield of session `key` must wait before it resumes: the session is a child whose
/// run is still going (not yet ended and paused). Its end pauses it and resumes the yield then,
/// adopting the paused record, so that the resume is neither lost nor run beside that run.
pub fn yield_held(db: &Db<'_>, key: &str) -> Result<bool> {
    if !crate::keys::is_subagent_key(key) {
        return Ok(false);
    }
    let latest = db.subagent_runs_of_child(key)?.into_iter().next_back();
    Ok(latest.is_some_and(|r| r.ended_at.is_none() && !is_paused(&r)))
}

/// The options of a paused child's next run (a resume or a yield-resume turn): a `subagent`
/// turn on `webchat` with the child's label and requester, and the child's own run timeout
/// from its spawn (the configured default when it gave none).
pub fn resumed_options(cfg: &Config, rec: &SubagentRun, chain_id: String) -> RunOptions {
    let secs = rec.run_timeout_seconds.filter(|s| *s > 0).unwrap_or(cfg.default_timeout_seconds);
    RunOptions {
        channel: Some(crate::orchestrate::send::WEBCHAT.to_owned()),
        label: rec.label.clone(),
        spawned_by: Some(rec.requester_session_key.clone()),
        ..RunOptions::new(Lane::Subagent, secs.saturating_mul(1000), chain_id)
    }
}

/// The open yields of a child session are closed (settled without a run): the child was
/// cancelled or stopped, and is never woken again.
pub fn close_yields(db: &Db<'_>, child_key: &str, now: i64) -> Result<()> {
    for y in db.open_yields_of(child_key)? {
        db.move_yield(&y.yield_id, &y.status, "resumed", None, Some(now))?;
    }
    Ok(())
}

/// The paused record of a child session, if any (the latest).
pub fn paused_of(db: &Db<'_>, child_key: &str) -> Result<Option<SubagentRun>> {
    Ok(db.subagent_runs_of_child(child_key)?.into_iter().rev().find(is_paused))
}

/// The paused children of a requester (its deletion stops them as it stops running ones).
pub fn paused_of_requester(db: &Db<'_>, requester_key: &str) -> Result<Vec<SubagentRun>> {
    Ok(db.subagent_runs(Some(requester_key))?.into_iter().filter(is_paused).collect())
}

/// Why an adoption did not happen.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum NotAdopted {
    /// the paused record is gone or no longer paused (cancelled, resumed by someone else)
    Changed,
}

/// The paused record `expected` continues as run `new_run_id` (see [`adopt_in`]), then the
/// completion wait is armed on the new run. Returns the task run id.
pub async fn adopt(
    orch: &Arc<Orchestrator>,
    expected: &SubagentRun,
    new_run_id: &str,
) -> Result<std::result::Result<String, NotAdopted>> {
    let (e, old_id, new_id) = (orch.engine().clone(), expected.run_id.clone(), new_run_id.to_owned());
    let agent_of = crate::orchestrate::tasks::agent_resolver(orch);
    let adopted = blocking(move || e.store().write(|db| adopt_in(db, &old_id, &new_id, &agent_of))).await?;
    if let Ok(task_run_id) = &adopted {
        adopted_by(orch, expected, new_run_id, task_run_id);
    }
    Ok(adopted)
}

/// The paused record `old_id` continues as run `new_id`, in the caller's write: the record is
/// re-keyed to the new run (no longer paused, started now, the same announce key and the task
/// run id of its first run), the task row follows it (created first if the ledger had not
/// seen the task yet, so the task id is the one `subagents` showed), the requester's open
/// yields and the spawning turn follow it, and the child's `waitFor: "message"` yields are
/// settled as resumed by the new run. Returns the task run id.
pub fn adopt_in(
    db: &Db<'_>,
    old_id: &str,
    new_id: &str,
    agent_of: &dyn Fn(&str) -> String,
) -> Result<std::result::Result<String, NotAdopted>> {
    let Some(old) = db.subagent_run(old_id)?.filter(is_paused) else {
        return Ok(Err(NotAdopted::Changed));
    };
    let now = entry::now_ms();
    // the task row exists before the record moves, so that it keeps its id
    crate::orchestrate::tasks::sync_record(db, &old, agent_of)?;
    let task_run_id = old.task_run_id.clone().unwrap_or_else(|| old.run_id.clone());
    let mut next = old.clone();
    next.run_id = new_id.to_owned();
    next.task_run_id = Some(task_run_id.clone());
    next.pause_reason = None;
    next.started_at = Some(now);
    db.put_subagent_run(&next)?;
    db.delete_subagent_run(&old.run_id)?;
    if let Some(mut t) = db.task_run_by_run_id(&old.run_id)? {
        t.run_id = Some(new_id.to_owned());
        t.last_event_at = Some(now);
        db.put_task_run(&t)?;
    }
    if let Some(turn) = db.spawn_turn(&old.run_id)? {
        db.record_spawn_turn(new_id, &turn)?;
    }
    db.rename_yield_child(&old.requester_session_key, &old.run_id, new_id)?;
    for y in db.open_yields_of(&old.child_session_key)? {
        if y.wait_for == "message" {
            db.move_yield(&y.yield_id, "waiting", "resumed", Some(new_id), Some(now))?;
        }
    }
    Ok(Ok(task_run_id))
}

/// After [`adopt_in`] committed: the completion wait on the new run, and `subagent.resumed`.
pub fn adopted_by(orch: &Arc<Orchestrator>, expected: &SubagentRun, new_run_id: &str, task_run_id: &str) {
    arm_completion(orch, new_run_id.to_owned());
    orch.emit(
        "subagent.resumed",
        Some(new_run_id),
        Some(&expected.requester_session_key),
        json!({"childSessionKey": expected.child_session_key, "previousRunId": expected.run_id, "taskRunId": task_run_id}),
    );
}

#[cfg(test)]
#[path = "pause_tests.rs"]
mod tests;

#[cfg(test)]
#[path = "pause_children_tests.rs"]
mod children_tests;
