//! The `execution` of a task as 2026.9's `subagents` shows it (`getTaskExecutionObservation`),
//! apart from its status and its delivery: `finished` once the task is terminal, `unknown` when
//! it is lost or its run is not in the sub-agent registry, `waiting` while the child is paused
//! in its own `sessions_yield` (on its pending children, or `external` when none), else
//! `running`. Reads only.

use serde_json::{json, Map, Value};

use crate::error::Result;
use crate::store::tasks::TaskRow;
use crate::store::Db;

/// The most dependencies a `waiting` execution lists.
const MAX_DEPENDENCIES: usize = 32;

/// The execution of one task.
pub fn execution(db: &Db<'_>, t: &TaskRow) -> Result<Value> {
    match t.status.as_str() {
        "lost" => return Ok(json!({"state": "unknown"})),
        "queued" | "running" => {}
        _ => return Ok(json!({"state": "finished"})),
    }
    let record = match (&t.run_id, &t.child_session_key) {
        (Some(run), Some(child)) => db.subagent_run(run)?.filter(|r| &r.child_session_key == child),
        _ => None,
    };
    let Some(record) = record else { return Ok(json!({"state": "unknown"})) };
    if crate::orchestrate::subagents::pause::is_paused(&record) {
        let mut pending = db.undelivered_children(&record.child_session_key)?;
        pending.sort_by(|a, b| a.run_id.cmp(&b.run_id));
        let wait = if pending.is_empty() {
            json!({"kind": "external"})
        } else {
            let deps: Vec<Value> = pending
                .iter()
                .take(MAX_DEPENDENCIES)
                .map(|c| {
                    let mut d = Map::new();
                    d.insert("runId".into(), c.run_id.clone().into());
                    d.insert("sessionKey".into(), c.child_session_key.clone().into());
                    let rec: Value = serde_json::from_str(&c.record).unwrap_or(Value::Null);
                    if let Some(l) = rec.get("label").and_then(Value::as_str).filter(|l| !l.is_empty()) {
                        d.insert("label".into(), l.into());
                    }
                    Value::Object(d)
                })
                .collect();
            json!({"kind": "children", "pendingCount": pending.len(), "dependencies": deps})
        };
        return Ok(json!({"state": "waiting", "wait": wait}));
    }
    Ok(json!({"state": if record.ended_at.is_some() { "finished" } else { "running" }}))
}
