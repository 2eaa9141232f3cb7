//! The sub-agent registry (REFERENCE.md §6.4–§6.8, DECISIONS.md #3, #5): records persisted in
//! `subagent_runs`, the completion wait, the announce flow (through the outbox), queue and
//! steer modes, cleanup, the archive sweeper and restart recovery.

use std::sync::Arc;

use serde_json::Value;

use super::outbox::{Attempt, OutboxRow};
use super::Orchestrator;
use crate::error::Result;

/// In-memory state of the registry of one open store.
#[derive(Default)]
pub struct Registry {}

/// On open: what was left unannounced is announced; runs that were in flight end as
/// interrupted and are announced.
pub async fn recover(orch: &Arc<Orchestrator>) -> Result<()> {
    let _ = orch;
    Ok(())
}

/// Stops the sweeper and the completion waits. Idempotent.
pub fn close(orch: &Orchestrator) {
    let _ = orch;
}

/// One try of a sub-agent announce (a `subagent_announce` outbox item).
pub async fn attempt_announce(orch: &Arc<Orchestrator>, row: OutboxRow) -> Attempt {
    let _ = (orch, row);
    Attempt::Failed("sub-agent announces are not available yet".to_owned())
}

/// A sub-agent announce reached a final status.
pub fn announce_settled(orch: &Arc<Orchestrator>, row: &OutboxRow, status: &str, attempts: u32, error: Option<&str>) {
    let _ = (orch, row, status, attempts, error);
}

/// `listSubagentRuns(requesterKey?)`: the API.md §4 `SubagentRun` records.
pub fn list(orch: &Orchestrator, requester_key: Option<&str>) -> Result<Vec<Value>> {
    let _ = (orch, requester_key);
    Ok(Vec::new())
}
