//! `sessions_spawn` (REFERENCE.md §6.1–§6.3, DECISIONS.md #5): the tool, which checks, builds
//! and starts a sub-agent run and registers it.

use std::sync::Arc;

use serde_json::Value;

use super::Orchestrator;
use crate::error::Result;
use crate::tools::ToolContext;

/// The tool: the payload the model sees.
pub async fn run(orch: &Arc<Orchestrator>, params: &Value, ctx: &ToolContext) -> Result<Value> {
    let _ = (orch, params, ctx);
    Ok(crate::tools::thrown("sessions_spawn", "sessions_spawn is not available yet"))
}
