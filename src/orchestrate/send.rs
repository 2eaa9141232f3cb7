//! `sessions_send` (REFERENCE.md §5, DECISIONS.md #1, #4): the tool, its primary run, and the
//! agent-to-agent flow after it (reply-back loop, announce step, announce delivery through the
//! outbox).

use std::sync::Arc;

use serde_json::Value;

use super::Orchestrator;
use crate::error::Result;
use crate::tools::ToolContext;

/// The tool: the payload the model sees.
pub async fn run(orch: &Arc<Orchestrator>, params: &Value, ctx: &ToolContext) -> Result<Value> {
    let _ = (orch, params, ctx);
    Ok(crate::tools::thrown("sessions_send", "sessions_send is not available yet"))
}
