//! Stopping a stopped child's whole tree (OpenClaw 2026.9: a kill cascades): when a child is
//! cancelled (`subagents` `cancel`) or stopped by its requester's deletion, every descendant
//! under it (its children, theirs, at any depth) whose run is live or paused is stopped too.
//! Each such record ends `error` `killed`, is never announced, its open yields are closed, and
//! its task row ends `cancelled` with `Subagent run killed.`. The tree is walked through ended
//! children as well (their own children may still run).
//!
//! [`stop_descendants_in`] is the write: it runs inside the caller's transaction, so that the
//! stop and a descendant's completion are one race (whichever commits first wins: a descendant
//! whose end was recorded first keeps it and its announce). [`after_stop`] is what follows the
//! commit (aborting the runs, cleanup, events). Nothing here decides who may stop a child.

use super::*;
use std::collections::HashSet;
use std::sync::Arc;
use std::time::Duration;

use serde_json::json;

use crate::error::Result;
use crate::orchestrate::state::Orchestrator;
use crate::store::Db;

/// The outcome error of a descendant stopped with its ancestor (2026.9 records `killed`).
pub const KILLED: &str = "killed";
/// The error of a stopped descendant's task (2026.9 `Subagent run killed.`).
pub const KILLED_TASK: &str = "Subagent run killed.";

/// A descendant's record as the stop ended it, and its task id.
pub(crate) type Stopped = (SubagentRun, Option<String>);

/// In the caller's write: ends every live or paused descendant of the child session `root`
/// (breadth first, each session once) as stopped with it, closes its open yields and cancels
/// its task row. Returns the records it ended, each with its task id.
pub(crate) fn stop_descendants_in(
    db: &Db<'_>,
    root: &str,
    now: i64,
    agent_of: &dyn Fn(&str) -> String,
) -> Result<Vec<Stopped>> {
    let mut sessions = vec![root.to_owned()];
    let mut seen: HashSet<String> = sessions.iter().cloned().collect();
    let mut stopped = Vec::new();
    let mut i = 0;
    while i < sessions.len() {
        let requester = sessions[i].clone();
        i += 1;
        for mut r in db.subagent_runs(Some(&requester))? {
            if seen.insert(r.child_session_key.clone()) {
                sessions.push(r.child_session_key.clone());
            }
            if r.ended_at.is_some() {
                continue;
            }
            r.ended_at = Some(now);
            r.outcome = Some(RunOutcome { status: "error".into(), error: Some(KILLED.into()) });
            r.announce.status = "skipped".into();
            r.archive_at_ms = None;
            r.pause_reason = None;
            db.put_subagent_run(&r)?;
            super::pause::close_yields(db, &r.child_session_key, now)?;
            let task_id = cancel_task_in(db, &r, now, agent_of)?;
            stopped.push((r, task_id));
        }
    }
    Ok(stopped)
}

/// The task row of a stopped descendant (created if the ledger has not seen it yet) ends
/// `cancelled`; a row that ended already keeps its end. Its task id.
fn cancel_task_in(
    db: &Db<'_>,
    rec: &SubagentRun,
    now: i64,
    agent_of: &dyn Fn(&str) -> String,
) -> Result<Option<String>> {
    if let Some(t) = db.task_run_by_run_id(&rec.run_id)?.filter(|t| !matches!(t.status.as_str(), "queued" | "running"))
    {
        return Ok(Some(t.task_id));
    }
    crate::orchestrate::tasks::sync_record(db, rec, agent_of)?;
    let Some(mut t) = db.task_run_by_run_id(&rec.run_id)? else { return Ok(None) };
    t.status = "cancelled".into();
    t.delivery_status = Some("not_applicable".into());
    t.error = Some(KILLED_TASK.into());
    t.ended_at = Some(now);
    t.last_event_at = Some(now);
    db.put_task_run(&t)?;
    Ok(Some(t.task_id))
}

/// After the write committed: each stopped descendant's run is ended in this engine and by the
/// host (`abortRun`, with `reason`), its cleanup runs, and `subagent.cancelled` is emitted with
/// the `reason` and `cascadeOf` (the run whose stop took it along, when one did).
pub(crate) async fn after_stop(
    orch: &Arc<Orchestrator>,
    stopped: Vec<Stopped>,
    cascade_of: Option<&str>,
    reason: &str,
) {
    for (rec, task_id) in stopped {
        orch.runs().abort(&rec.run_id, reason);
        abort_in_host(orch, &rec.run_id, reason);
        let mut details =
            json!({"taskId": task_id, "requesterSessionKey": rec.requester_session_key, "reason": reason});
        if let Some(run) = cascade_of {
            details["cascadeOf"] = run.into();
        }
        orch.emit("subagent.cancelled", Some(&rec.run_id), Some(&rec.child_session_key), details);
        finalize(orch, rec).await;
    }
}

/// Asks the host to stop the model turn of a stopped run (`abortRun`, when it has one), in the
/// background: its answer is ignored, and a host that never answers is given up after 60 s.
pub(crate) fn abort_in_host(orch: &Arc<Orchestrator>, run_id: &str, reason: &str) {
    if orch.host().can_abort() {
        let (host, id, why) = (orch.host().clone(), run_id.to_owned(), reason.to_owned());
        orch.spawn_busy(async move {
            let _ = tokio::time::timeout(Duration::from_secs(60), host.abort_run(id, why)).await;
        });
    }
}

#[cfg(test)]
#[path = "cascade_tests.rs"]
mod tests;
