//! The completion wait of a child's run (§6.4): when it ends, the record gets `endedAt` and its
//! outcome, and its announce is recorded in the outbox under the record's idempotency key
//! (unless the child is paused in its own `sessions_yield`: `pause`).

use super::*;
use std::sync::Arc;
use std::time::Duration;

use serde_json::json;

use crate::entry::{self};
use crate::orchestrate::outbox::SUBAGENT_ANNOUNCE;
use crate::orchestrate::runs::{RunSnapshot, RunStatus};
use crate::orchestrate::state::Orchestrator;
use crate::orchestrate::task::blocking;

/// Waits (in the background) for a child run to end, then records how and announces it.
pub(super) fn arm_completion(orch: &Arc<Orchestrator>, run_id: String) {
    let weak = Arc::downgrade(orch);
    let (engine, runs) = (orch.engine().clone(), orch.runs().clone());
    orch.subagents().spawn_task(async move {
        let snap = loop {
            match runs.wait(&engine, &run_id, WAIT_SLICE_MS).await {
                Ok(s) if s.status != RunStatus::Timeout || s.ended_at.is_some() => break s,
                Ok(_) => {}
                Err(_) => tokio::time::sleep(Duration::from_millis(500)).await,
            }
            if weak.strong_count() == 0 {
                return;
            }
        };
        // while this store lives, nobody else records this end (the run is its own, see
        // `lifecycle`): a write that failed (the database unreachable a moment) is tried again
        let mut pause = Duration::from_millis(200);
        loop {
            let Some(orch) = weak.upgrade() else { return };
            if run_ended(&orch, &run_id, snap.clone()).await {
                return;
            }
            drop(orch);
            tokio::time::sleep(pause).await;
            pause = (pause * 2).min(Duration::from_secs(5));
        }
    });
}

pub(super) fn outcome_of(snap: &RunSnapshot) -> RunOutcome {
    match snap.status {
        RunStatus::Ok => RunOutcome { status: "ok".into(), error: None },
        RunStatus::Timeout => RunOutcome { status: "timeout".into(), error: None },
        RunStatus::Error => RunOutcome { status: "error".into(), error: snap.error.clone() },
        RunStatus::Running => RunOutcome { status: "unknown".into(), error: None },
    }
}

/// The child run ended: `endedAt`/`outcome` recorded (unless something else ended the record
/// first, e.g. its requester's deletion), then the announce is recorded in the outbox. `false`
/// when a store error left the record as it was (an announce that could not be recorded is
/// recorded again by the next open or takeover, which find the record ended).
pub(super) async fn run_ended(orch: &Arc<Orchestrator>, run_id: &str, snap: RunSnapshot) -> bool {
    // 2026.9: a child waiting in its own `sessions_yield` for a message is paused, not ended
    match super::pause::pause_if_yielded(orch, run_id, &snap).await {
        Ok(true) => return true,
        Ok(false) => {}
        Err(e) => {
            orch.emit("store.error", Some(run_id), None, json!({"error": e.message()}));
            return false;
        }
    }
    let outcome = outcome_of(&snap);
    let (started, ended) = (snap.started_at, snap.ended_at.unwrap_or_else(entry::now_ms));
    let changed = update(orch, run_id, move |r| {
        if r.ended_at.is_some() {
            return false;
        }
        r.started_at = r.started_at.or(started);
        r.ended_at = Some(ended);
        r.outcome = Some(outcome.clone());
        r.archive_at_ms = None;
        true
    })
    .await;
    let rec = match changed {
        Ok(Some(rec)) => {
            super::pause::settle_earlier_yields(orch, &rec).await;
            rec
        }
        // ended already: by something else (its announce is that one's), or by an earlier try
        // of this one whose announce could not be recorded (recorded now; a no-op otherwise)
        Ok(None) => match load(orch, run_id).await {
            Ok(Some(rec)) if rec.ended_at.is_some() && rec.announce.status == "pending" => rec,
            Ok(_) => return true,
            Err(e) => {
                orch.emit("store.error", Some(run_id), None, json!({"error": e.message()}));
                return false;
            }
        },
        Err(e) => {
            orch.emit("store.error", Some(run_id), None, json!({"error": e.message()}));
            return false;
        }
    };
    enqueue_announce(orch, &rec).await
}

/// Records the announce of an ended child in the outbox (a no-op when it is there already; an
/// item that already reached its final status is settled on the record, for a process that
/// stopped between the two). `false` when a store error left it unrecorded.
pub(super) async fn enqueue_announce(orch: &Arc<Orchestrator>, rec: &SubagentRun) -> bool {
    if rec.announce.status == "skipped" && rec.ended_at.is_some() {
        // no completion was asked for (2026.9 `expectsCompletionMessage: false`): clean up now
        super::cleanup::finalize(orch, rec.clone()).await;
        return true;
    }
    if rec.announce.status != "pending" {
        return true;
    }
    let (e, outbox) = (orch.engine().clone(), orch.outbox().clone());
    let (key, requester, run_id) =
        (rec.announce.idempotency_key.clone(), rec.requester_session_key.clone(), rec.run_id.clone());
    let done = blocking(move || {
        let payload = json!({ "runId": run_id });
        if outbox.enqueue(&key, SUBAGENT_ANNOUNCE, Some(&requester), &payload)? {
            return Ok(None);
        }
        let item = e.store().read(|db| db.outbox_item(&key))?;
        Ok(item.filter(|i| i.status != "pending"))
    })
    .await;
    match done {
        Ok(Some(item)) => settle(orch, &rec.run_id, &item.status, item.attempts).await,
        Ok(None) => {}
        Err(e) => {
            orch.emit("store.error", Some(&rec.run_id), None, json!({"error": e.message()}));
            return false;
        }
    }
    true
}
