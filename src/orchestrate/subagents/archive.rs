//! The archive sweeper: one timer, set for the next archive due, that archives kept children
//! whose time has come.

use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

use serde_json::{json, Value};

use crate::entry::{self};
use crate::error::Result;
use crate::orchestrate::state::Orchestrator;
use crate::orchestrate::task::blocking;

/// Starts the archive timer (once): it sleeps until the next archive due, or until woken by a
/// new archive time.
pub(super) fn start_sweeper(orch: &Arc<Orchestrator>) {
    let reg = orch.subagents();
    if reg.sweeper_started.swap(true, Ordering::SeqCst) {
        return;
    }
    let (weak, wake, engine) = (Arc::downgrade(orch), reg.sweeper_wake.clone(), orch.engine().clone());
    orch.subagents().spawn_task(async move {
        loop {
            let e = engine.clone();
            let next = blocking(move || e.store().read(|db| db.next_subagent_archive())).await;
            match next {
                Ok(Some(at)) => {
                    let wait = at - entry::now_ms();
                    if wait <= 0 {
                        let Some(orch) = weak.upgrade() else { return };
                        if archive_due(&orch).await.is_err() {
                            tokio::time::sleep(Duration::from_millis(1000)).await;
                        }
                        continue;
                    }
                    tokio::select! {
                        _ = tokio::time::sleep(Duration::from_millis(wait as u64)) => {}
                        _ = wake.notified() => {}
                    }
                }
                Ok(None) => wake.notified().await,
                Err(_) => {
                    tokio::select! {
                        _ = tokio::time::sleep(Duration::from_millis(1000)) => {}
                        _ = wake.notified() => {}
                    }
                }
            }
            if weak.strong_count() == 0 {
                return;
            }
        }
    });
}

/// Archives every record whose time has come: the child session and its transcript are
/// deleted, the record removed, `subagent.archived` emitted. A record that is somehow due while
/// its run or announce is unfinished loses its archive time instead.
pub(super) async fn archive_due(orch: &Arc<Orchestrator>) -> Result<()> {
    let e = orch.engine().clone();
    let archived = blocking(move || {
        let due = e.store().read(|db| db.due_subagent_archives(entry::now_ms()))?;
        let mut archived = Vec::new();
        for r in due {
            if r.ended_at.is_none() || r.announce.status == "pending" {
                e.store().write(|db| {
                    if let Some(mut cur) = db.subagent_run(&r.run_id)? {
                        cur.archive_at_ms = None;
                        db.put_subagent_run(&cur)?;
                    }
                    Ok(())
                })?;
                continue;
            }
            let _ = e.delete_session(&Value::from(r.child_session_key.clone()), &json!({"deleteTranscript": true}));
            if e.store().write(|db| db.delete_subagent_run(&r.run_id))? {
                archived.push(r);
            }
        }
        Ok(archived)
    })
    .await?;
    for r in archived {
        orch.emit(
            "subagent.archived",
            Some(&r.run_id),
            Some(&r.requester_session_key),
            json!({"childSessionKey": r.child_session_key}),
        );
    }
    Ok(())
}
