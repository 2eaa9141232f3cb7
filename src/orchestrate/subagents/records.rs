//! Reading and changing sub-agent records (`subagent_runs`): one transaction per change, the
//! registration of a new child, and the registry views (`listSubagentRuns`, running children).

use super::*;
use std::sync::Arc;

use serde_json::Value;

use crate::error::Result;
use crate::orchestrate::state::Orchestrator;
use crate::orchestrate::task::blocking;

/// Changes one record in one transaction (read fresh, changed by `f`, written back); the record
/// as written, or `None` when it is gone or `f` changed nothing.
pub(super) async fn update(
    orch: &Orchestrator,
    run_id: &str,
    f: impl Fn(&mut SubagentRun) -> bool + Send + 'static,
) -> Result<Option<SubagentRun>> {
    let (e, id) = (orch.engine().clone(), run_id.to_owned());
    blocking(move || {
        e.store().write(|db| {
            let Some(mut r) = db.subagent_run(&id)? else { return Ok(None) };
            if !f(&mut r) {
                return Ok(None);
            }
            db.put_subagent_run(&r)?;
            Ok(Some(r))
        })
    })
    .await
}

pub(super) async fn load(orch: &Orchestrator, run_id: &str) -> Result<Option<SubagentRun>> {
    let (e, id) = (orch.engine().clone(), run_id.to_owned());
    blocking(move || e.store().read(|db| db.subagent_run(&id))).await
}

/// Registers a freshly started child run (§6.4 *Register*) and arms its completion wait.
pub async fn register(orch: &Arc<Orchestrator>, record: SubagentRun) -> Result<()> {
    let e = orch.engine().clone();
    let r = record.clone();
    blocking(move || e.store().write(|db| db.put_subagent_run(&r))).await?;
    arm_completion(orch, record.run_id);
    Ok(())
}

/// `listSubagentRuns(requesterKey?)`: the API.md §4 `SubagentRun` records, in `createdAt`
/// order, of one requester (its key canonicalised) or of all.
pub fn list(orch: &Orchestrator, requester_key: Option<&str>) -> Result<Vec<Value>> {
    let key = match requester_key {
        Some(raw) => Some(orch.engine().config().key_model().canonical(raw)?),
        None => None,
    };
    let runs = orch.engine().store().read(|db| db.subagent_runs(key.as_deref()))?;
    Ok(runs.iter().map(SubagentRun::to_json).collect())
}

/// `listSubagentRuns(requesterKey?)` with its argument as the caller passed it: absent, or a
/// string.
pub fn list_json(orch: &Orchestrator, requester_key: &Value) -> Result<Value> {
    let key = match requester_key {
        Value::Null => None,
        Value::String(s) => Some(s.as_str()),
        _ => return Err(crate::error::Error::invalid_request("invalid requesterKey: must be a string")),
    };
    list(orch, key).map(Value::Array)
}

/// Children of `requester_key` (canonical) still running.
pub fn running_count(orch: &Orchestrator, requester_key: &str) -> Result<u64> {
    orch.engine().store().read(|db| db.running_subagent_count(requester_key))
}
