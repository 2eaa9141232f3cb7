//! The calls the napi skin makes on an [`Orchestrator`] beyond the engine's own methods: a tool
//! by name (the orchestrated ones included), `waitRun` and `deleteSession`.

use std::sync::Arc;

use serde_json::Value;

use super::state::Orchestrator;
use super::task::blocking;
use super::{send, spawn, subagents, tasks, yields};
use crate::contract::Contract;
use crate::error::{Error, Result};
use crate::tools::{self, Tool, ToolContext};

impl Orchestrator {
    /// Runs a tool for a caller whose context arrives as JSON; `wrap` gives the `{content,
    /// details}` envelope. As [`tools::run`], with the orchestrated tools too: their parameters
    /// are read by `tools::send` / `tools::spawn`, what follows is `send` / `spawn`.
    pub async fn tool(self: &Arc<Self>, tool: Tool, params: Value, ctx: Value, wrap: bool) -> Result<Value> {
        if self.runs.is_closed() || self.engine.store().is_closed() {
            return Err(Error::closed());
        }
        let details = match tool {
            Tool::SessionsSend if self.engine.config().contract == Contract::V2026_9 => {
                send::v9::run(self, &params, &ToolContext::from_json(&ctx)?).await
            }
            Tool::SessionsSend => {
                let ctx = ToolContext::from_json(&ctx)?;
                let (e, c) = (self.engine.clone(), ctx.clone());
                match blocking(move || Ok(tools::send::read(&e, &params, &c))).await? {
                    Ok(request) => send::run(self, request, &ctx).await,
                    Err(refused) => refused.into_payload(),
                }
            }
            Tool::SessionsSpawn => {
                let ctx = ToolContext::from_json(&ctx)?;
                let cfg = self.engine.config();
                let out = match tools::spawn::read(&cfg, &params, &ctx) {
                    Ok(request) => spawn::run(self, request, &ctx).await,
                    Err(refused) => refused.into_payload(),
                };
                // 2026.9: a refused spawn names the agent it asked for as `role`
                if cfg.contract == Contract::V2026_9 {
                    out.map(|payload| tools::spawn9::with_role(payload, &params))
                } else {
                    out
                }
            }
            // 2026.9 tools: under 2026.1 they are unknown tools
            Tool::SessionsYield | Tool::Subagents if !tool.in_contract(self.engine.config().contract) => {
                return Err(Error::invalid_request(format!("unknown tool: {}", tool.name())));
            }
            Tool::SessionsYield => yields::run(self, &params, &ToolContext::from_json(&ctx)?, &ctx).await,
            Tool::Subagents => tasks::run(self, &params, &ToolContext::from_json(&ctx)?).await,
            Tool::SessionsList | Tool::SessionsHistory | Tool::AgentsList => {
                let e = self.engine.clone();
                return blocking(move || tools::run(&e, tool, &params, &ctx, wrap)).await;
            }
        };
        let details = tools::payload_or_error(tool, details)?;
        Ok(if wrap { tools::envelope(details) } else { details })
    }

    /// `waitRun(runId, { timeoutMs })` (agent.wait semantics).
    pub async fn wait_run(&self, run_id: &str, timeout_ms: u64) -> Result<Value> {
        Ok(self.runs.wait(&self.engine, run_id, timeout_ms).await?.to_json())
    }

    /// `waitRun` with its arguments as the caller passed them: a non-empty run id, `timeoutMs`
    /// a number ≥ 0 (floored; default 30 000).
    pub async fn wait_run_json(&self, run_id: &Value, options: &Value) -> Result<Value> {
        let bad = |m: &str| Error::invalid_request(format!("invalid waitRun params: {m}"));
        let run_id = match run_id {
            Value::String(s) if !s.trim().is_empty() => s.trim().to_owned(),
            _ => return Err(bad("runId must be a non-empty string")),
        };
        let timeout = match options {
            Value::Null => None,
            Value::Object(o) => match o.get("timeoutMs") {
                None | Some(Value::Null) => None,
                Some(v) => match v.as_f64() {
                    Some(f) if f.is_finite() && f >= 0.0 => Some(f.floor().min(2_147_483_647.0) as u64),
                    _ => return Err(bad("timeoutMs must be a number >= 0")),
                },
            },
            _ => return Err(bad("options must be an object")),
        };
        if self.engine.store().is_closed() {
            return Err(Error::closed());
        }
        self.wait_run(&run_id, timeout.unwrap_or(30_000)).await
    }

    /// `deleteSession(key, options)`: the gateway's `sessions.delete`, then the children of the
    /// deleted session that are still running are stopped (DECISIONS.md: `stopped: requester
    /// session deleted`, not announced).
    pub async fn delete_session(self: &Arc<Self>, key: Value, options: Value) -> Result<Value> {
        if self.engine.store().is_closed() {
            return Err(Error::closed());
        }
        let e = self.engine.clone();
        let out = blocking(move || e.delete_session(&key, &options)).await?;
        if out.get("deleted") == Some(&Value::Bool(true)) {
            if let Some(key) = out.get("key").and_then(Value::as_str) {
                subagents::on_session_deleted(self, key).await?;
                super::watch::forget(self, key).await?;
            }
        }
        Ok(out)
    }
}
