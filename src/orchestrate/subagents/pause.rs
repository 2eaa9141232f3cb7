//! Paused children (OpenClaw 2026.9 `pauseReason: "sessions_yield"`): a child whose run ends
//! while its session waits in its own `sessions_yield` with `waitFor: "message"` is *paused*,
//! not ended: its record keeps no `endedAt`, its completion is held back (nothing goes to the
//! outbox) and its task stays `running`. A later run of the child (`sessions_send` `mode:
//! "resume"` from its owner) *adopts* the paused record: the record moves to the new run id in
//! one write (its announce key, task row and the requester's yield claims with it), so that the
//! task id stays and the one completion, when that run ends, goes through the outbox as for any
//! child. Nothing here decides who may resume: `send::resume9` does.

use super::*;
use std::sync::Arc;

use serde_json::json;

use crate::entry;
use crate::error::Result;
use crate::orchestrate::runs::{RunSnapshot, RunStatus};
use crate::orchestrate::state::Orchestrator;
use crate::orchestrate::task::blocking;
use crate::store::Db;

/// `pauseReason` of a child paused in its own `sessions_yield`.
pub const YIELD_PAUSE: &str = "sessions_yield";

/// Whether a record is a paused child (its run ended in a `waitFor: "message"` yield).
pub fn is_paused(rec: &SubagentRun) -> bool {
    rec.ended_at.is_none() && rec.pause_reason.as_deref() == Some(YIELD_PAUSE)
}

/// The child run `run_id` ended: when its session waits in a `waitFor: "message"` yield (and
/// the run did not time out, as 2026.9 decides), the record is marked paused in one write and
/// `true` is returned: nothing is announced. `true` also for a record that is paused already
/// (a recovery pass seeing its ended run again).
pub(super) async fn pause_if_yielded(orch: &Arc<Orchestrator>, run_id: &str, snap: &RunSnapshot) -> Result<bool> {
    let (e, id) = (orch.engine().clone(), run_id.to_owned());
    let (timed_out, started) = (snap.status == RunStatus::Timeout, snap.started_at);
    let paused = blocking(move || {
        e.store().write(|db| {
            let Some(mut r) = db.subagent_run(&id)? else { return Ok(None) };
            if is_paused(&r) {
                return Ok(Some(false));
            }
            if r.ended_at.is_some() || timed_out || !waits_for_message(db, &r.child_session_key)? {
                return Ok(None);
            }
            r.started_at = r.started_at.or(started);
            r.pause_reason = Some(YIELD_PAUSE.to_owned());
            r.archive_at_ms = None;
            db.put_subagent_run(&r)?;
            Ok(Some(true))
        })
    })
    .await?;
    if let Some(true) = paused {
        let (e, id) = (orch.engine().clone(), run_id.to_owned());
        let rec = blocking(move || e.store().read(|db| db.subagent_run(&id))).await?;
        if let Some(r) = rec {
            orch.emit(
                "subagent.paused",
                Some(run_id),
                Some(&r.requester_session_key),
                json!({"childSessionKey": r.child_session_key}),
            );
        }
    }
    Ok(paused.is_some())
}

/// Whether a child session waits in an open `sessions_yield` with `waitFor: "message"`.
fn waits_for_message(db: &Db<'_>, child_key: &str) -> Result<bool> {
    Ok(db.open_yields_of(child_key)?.iter().any(|y| y.status == "waiting" && y.wait_for == "message"))
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

/// The paused record `expected` continues as run `new_run_id`, in one write: the record is
/// re-keyed to the new run (no longer paused, started now, the same announce key and the task
/// run id of its first run), the task row follows it (created first if the ledger had not
/// seen the task yet, so the task id is the one `subagents` showed), the requester's open
/// yields and the spawning turn follow it, and the child's `waitFor: "message"` yields are
/// settled as resumed by the new run. Then the completion wait is armed on the new run.
/// Returns the task run id.
pub async fn adopt(
    orch: &Arc<Orchestrator>,
    expected: &SubagentRun,
    new_run_id: &str,
) -> Result<std::result::Result<String, NotAdopted>> {
    let (e, old_id, new_id) = (orch.engine().clone(), expected.run_id.clone(), new_run_id.to_owned());
    let agent_of = crate::orchestrate::tasks::agent_resolver(orch);
    let adopted = blocking(move || {
        e.store().write(|db| {
            let Some(old) = db.subagent_run(&old_id)?.filter(is_paused) else {
                return Ok(Err(NotAdopted::Changed));
            };
            let now = entry::now_ms();
            // the task row exists before the record moves, so that it keeps its id
            crate::orchestrate::tasks::sync_record(db, &old, &agent_of)?;
            let task_run_id = old.task_run_id.clone().unwrap_or_else(|| old.run_id.clone());
            let mut next = old.clone();
            next.run_id = new_id.clone();
            next.task_run_id = Some(task_run_id.clone());
            next.pause_reason = None;
            next.started_at = Some(now);
            db.put_subagent_run(&next)?;
            db.delete_subagent_run(&old.run_id)?;
            if let Some(mut t) = db.task_run_by_run_id(&old.run_id)? {
                t.run_id = Some(new_id.clone());
                t.last_event_at = Some(now);
                db.put_task_run(&t)?;
            }
            if let Some(turn) = db.spawn_turn(&old.run_id)? {
                db.record_spawn_turn(&new_id, &turn)?;
            }
            db.rename_yield_child(&old.requester_session_key, &old.run_id, &new_id)?;
            for y in db.open_yields_of(&old.child_session_key)? {
                if y.wait_for == "message" {
                    db.move_yield(&y.yield_id, "waiting", "resumed", Some(&new_id), Some(now))?;
                }
            }
            Ok(Ok(task_run_id))
        })
    })
    .await?;
    if let Ok(task_run_id) = &adopted {
        arm_completion(orch, new_run_id.to_owned());
        orch.emit(
            "subagent.resumed",
            Some(new_run_id),
            Some(&expected.requester_session_key),
            json!({"childSessionKey": expected.child_session_key, "previousRunId": expected.run_id, "taskRunId": task_run_id}),
        );
    }
    Ok(adopted)
}

#[cfg(test)]
#[path = "pause_tests.rs"]
mod tests;
