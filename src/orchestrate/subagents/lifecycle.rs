//! The registry on open and close, and when a requester is deleted: recovery (announcing what
//! was left unannounced, ending what was in flight), adoption of what a gone owner left after a
//! takeover (API.md §1.7), shutdown, and stopping a deleted requester's children.

use super::*;
use std::sync::Arc;

use crate::entry::{self};
use crate::error::Result;
use crate::orchestrate::runs::{RunSnapshot, RunStatus, INTERRUPTED};
use crate::orchestrate::state::Orchestrator;
use crate::orchestrate::task::blocking;

/// On open: what was left unannounced is announced; runs that were in flight end as
/// interrupted and are announced; runs still going under a live owner are waited for again;
/// a record whose run a live owner has just ended is left to that owner; a cleanup cut short
/// is finished; the archive timer is set.
pub async fn recover(orch: &Arc<Orchestrator>) -> Result<()> {
    start_sweeper(orch);
    resume(orch, true).await
}

/// After a takeover pass ended a gone owner's runs (API.md §1.7): what it left unannounced is
/// announced (each once: the announce's outbox key is the record's), its children's records
/// get their interrupted end. Runs still going are left to their owners (nothing is armed), and
/// cleanups are left to the owner whose announce settles.
pub async fn adopt(orch: &Arc<Orchestrator>) -> Result<()> {
    resume(orch, false).await
}

async fn resume(orch: &Arc<Orchestrator>, on_open: bool) -> Result<()> {
    let e = orch.engine().clone();
    let records = blocking(move || e.store().read(|db| db.subagent_runs(None))).await?;
    for rec in records {
        // a child that asked for no completion (announce `skipped` from the start) is still
        // waited for while it runs
        let unasked_running = rec.announce.status == "skipped" && rec.ended_at.is_none();
        if rec.announce.status != "pending" && !unasked_running {
            if on_open && rec.cleanup_completed_at.is_none() && rec.ended_at.is_some() {
                finalize(orch, rec).await;
            }
            continue;
        }
        if on_open && rec.archive_at_ms.is_some() {
            // archiving waits for the announce (an imported record may carry the reference's
            // registration-based time)
            update(orch, &rec.run_id, |r| r.archive_at_ms.take().is_some()).await?;
        }
        if rec.ended_at.is_some() {
            enqueue_announce(orch, &rec).await;
            continue;
        }
        let (e, id, lease) = (orch.engine().clone(), rec.run_id.clone(), orch.lease().clone());
        let (run, held) = blocking(move || {
            e.store().read(|db| {
                let now = lease.now(db)?;
                Ok((db.run(&id)?, db.run_held(&id, now)?))
            })
        })
        .await?;
        match run {
            Some(r) if r.status == "running" => {
                if on_open {
                    arm_completion(orch, rec.run_id.clone());
                }
            }
            // ended by an owner that holds its lease (another live store, or this one): its
            // completion wait records the end and announces it, never a second store
            Some(_) if held => {}
            Some(r) => {
                let status = match r.status.as_str() {
                    "ok" => RunStatus::Ok,
                    "timeout" => RunStatus::Timeout,
                    _ => RunStatus::Error,
                };
                let snap = RunSnapshot {
                    run_id: r.run_id,
                    status,
                    started_at: r.started_at,
                    ended_at: r.ended_at,
                    error: r.error,
                };
                run_ended(orch, &rec.run_id, snap).await;
            }
            None => {
                let snap = RunSnapshot {
                    run_id: rec.run_id.clone(),
                    status: RunStatus::Error,
                    started_at: rec.started_at,
                    ended_at: None,
                    error: Some(INTERRUPTED.to_owned()),
                };
                run_ended(orch, &rec.run_id, snap).await;
            }
        }
    }
    Ok(())
}

/// Stops the sweeper, the completion waits and the announce queues. Idempotent.
pub fn close(orch: &Orchestrator) {
    let reg = orch.subagents();
    let _ = reg.shutdown.send(true);
    let queues: Vec<AnnounceQueue> = lock(&reg.queues).drain().map(|(_, q)| q).collect();
    drop(queues);
    lock(&reg.announce_runs).clear();
}

/// A requester session was deleted: its running (or paused) children are stopped, end with
/// `error` `stopped: requester session deleted`, and are not announced; their own live
/// descendants are stopped with each, in the same write (`cascade`); their cleanup runs.
pub async fn on_session_deleted(orch: &Arc<Orchestrator>, key: &str) -> Result<()> {
    let canonical = orch.engine().config().key_model().canonical(key)?;
    let (e, requester) = (orch.engine().clone(), canonical.clone());
    let running = blocking(move || {
        e.store().read(|db| {
            let mut running = db.running_subagent_runs(&requester)?;
            running.extend(super::pause::paused_of_requester(db, &requester)?);
            Ok(running)
        })
    })
    .await?;
    for rec in running {
        // the record first: the completion wait then finds it ended and announces nothing
        let now = entry::now_ms();
        let (e, id, agent_of) =
            (orch.engine().clone(), rec.run_id.clone(), crate::orchestrate::tasks::agent_resolver(orch));
        let stopped = blocking(move || {
            e.store().write(|db| {
                let Some(mut r) = db.subagent_run(&id)? else { return Ok(None) };
                if r.ended_at.is_some() {
                    return Ok(None);
                }
                r.ended_at = Some(now);
                r.outcome = Some(RunOutcome { status: "error".into(), error: Some(REQUESTER_DELETED.into()) });
                r.announce.status = "skipped".into();
                r.archive_at_ms = None;
                r.pause_reason = None;
                db.put_subagent_run(&r)?;
                // a stopped child is never woken by its own yield
                super::pause::close_yields(db, &r.child_session_key, now)?;
                let descendants = super::cascade::stop_descendants_in(db, &r.child_session_key, now, &agent_of)?;
                Ok(Some((r, descendants)))
            })
        })
        .await?;
        orch.runs().abort(&rec.run_id, REQUESTER_DELETED);
        if let Some((r, descendants)) = stopped {
            // as 2026.9 aborts every run it stops, the child's model turn too
            super::cascade::abort_in_host(orch, &rec.run_id, REQUESTER_DELETED);
            finalize(orch, r).await;
            super::cascade::after_stop(orch, descendants, Some(&rec.run_id), REQUESTER_DELETED).await;
        }
    }
    // the children are all ended now: what still runs under one that had ended before (its own
    // children, theirs) is stopped too, as 2026.9 walks the whole tree
    let (e, now, agent_of) = (orch.engine().clone(), entry::now_ms(), crate::orchestrate::tasks::agent_resolver(orch));
    let rest =
        blocking(move || e.store().write(|db| super::cascade::stop_descendants_in(db, &canonical, now, &agent_of)))
            .await?;
    super::cascade::after_stop(orch, rest, None, REQUESTER_DELETED).await;
    Ok(())
}
