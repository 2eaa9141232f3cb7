//! Settling an announce and cleaning up after it: `delete` removes the child, `keep` sets
//! `cleanupCompletedAt` and the archive time (counted from the run's end).

use super::*;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use serde_json::{json, Value};

use crate::entry::{self};
use crate::orchestrate::outbox::OutboxRow;
use crate::orchestrate::state::Orchestrator;
use crate::orchestrate::task::blocking;

/// A sub-agent announce reached a final status.
pub fn announce_settled(orch: &Arc<Orchestrator>, row: &OutboxRow, status: &str, attempts: u32, error: Option<&str>) {
    let _ = error;
    let Some(run_id) = row.payload.get("runId").and_then(Value::as_str).map(str::to_owned) else { return };
    let (o, status) = (orch.clone(), status.to_owned());
    orch.subagents().spawn_task(async move { settle(&o, &run_id, &status, attempts).await });
}

/// Records the announce's final status, then cleans up. `subagent.announced` is emitted by the
/// store whose write moved the record from `pending`: another store (another process, or the
/// second store of one) settling the same record afterwards finds it settled and stays quiet.
pub(super) async fn settle(orch: &Arc<Orchestrator>, run_id: &str, status: &str, attempts: u32) {
    let s = status.to_owned();
    let moved = Arc::new(AtomicBool::new(false));
    let m = moved.clone();
    let rec = update(orch, run_id, move |r| {
        // set on every try of the write (a retried write calls this again)
        let pending = r.announce.status == "pending";
        m.store(pending, Ordering::SeqCst);
        if pending {
            r.announce.status = s.clone();
        }
        r.announce.attempts = r.announce.attempts.max(attempts);
        true
    })
    .await;
    let rec = match rec {
        Ok(Some(r)) => r,
        Ok(None) => return,
        Err(e) => {
            orch.emit("store.error", Some(run_id), None, json!({"error": e.message()}));
            return;
        }
    };
    if status == "delivered" && rec.announce.status == "delivered" && moved.load(Ordering::SeqCst) {
        orch.emit(
            "subagent.announced",
            Some(run_id),
            Some(&rec.requester_session_key),
            json!({"childSessionKey": rec.child_session_key, "attempts": rec.announce.attempts}),
        );
    }
    finalize(orch, rec).await;
}

/// Cleanup after the announce settled: `delete` removes the child session (with its
/// transcript) and the record; `keep` patches the label back, sets `cleanupCompletedAt` and,
/// when archiving is on, `archiveAtMs` counted from the run's end.
pub(crate) async fn finalize(orch: &Arc<Orchestrator>, rec: SubagentRun) {
    if rec.cleanup_completed_at.is_some() || rec.ended_at.is_none() {
        return;
    }
    let e = orch.engine().clone();
    let r = rec.clone();
    let done = blocking(move || {
        let child = Value::from(r.child_session_key.clone());
        if r.cleanup == "delete" {
            let _ = e.delete_session(&child, &json!({"deleteTranscript": true}));
            e.store().write(|db| db.delete_subagent_run(&r.run_id))?;
            return Ok(false);
        }
        if let Some(label) = &r.label {
            let _ = e.patch_session(&json!({"key": r.child_session_key, "label": label}));
        }
        let archive = archive_after_ms(&e.config());
        let now = entry::now_ms();
        e.store().write(|db| {
            let Some(mut cur) = db.subagent_run(&r.run_id)? else { return Ok(false) };
            if cur.cleanup_completed_at.is_some() {
                return Ok(false);
            }
            cur.cleanup_completed_at = Some(now);
            cur.archive_at_ms = archive.map(|ms| cur.ended_at.unwrap_or(now).saturating_add(ms));
            db.put_subagent_run(&cur)?;
            Ok(cur.archive_at_ms.is_some())
        })
    })
    .await;
    match done {
        Ok(true) => orch.subagents().sweeper_wake.notify_one(),
        Ok(false) => {}
        Err(e) => orch.emit("store.error", Some(&rec.run_id), None, json!({"error": e.message()})),
    }
}
