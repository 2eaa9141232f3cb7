//! `agents_list` as OpenClaw 2026.9.6 answers it (OPENCLAW-2026.9.md §1.5): the agents the
//! requester may spawn under, each with `configured`, its default `model` and `agentRuntime`
//! when configured; allow-list ids naming agents no longer configured are left out; refused to
//! sub-agent callers (the gateway never offers it to them).

use std::collections::BTreeSet;

use serde_json::{json, Map, Value};

use super::{requester_agent, ToolInput};
use crate::config::Config;
use crate::error::Result;
use crate::keys::{is_subagent_key, js_trim, normalize_agent_id};
use crate::tools::refusal;

/// The refusal a sub-agent caller gets (the gateway's tool list never has it for them).
pub const SUBAGENT_DENIED: &str = "agents_list is not available to sub-agent sessions.";

/// The configured agent ids (the default agent when the roster is empty).
fn configured_ids(cfg: &Config) -> BTreeSet<String> {
    let ids: BTreeSet<String> = cfg.agents.iter().map(|a| a.id.clone()).collect();
    if ids.is_empty() {
        [cfg.default_agent_id().to_string()].into()
    } else {
        ids
    }
}

/// `(allowAny, ids)`: the requester agent's `subagents.allowAgents`, else the defaults'.
fn allowed(cfg: &Config, requester: &str) -> (bool, Vec<String>) {
    let own = cfg.agent(requester).filter(|a| a.allow_agents_set).map(|a| a.allow_agents.clone());
    let Some(list) = own.or_else(|| cfg.subagents.allow_agents.clone()) else {
        return (false, vec![requester.to_string()]);
    };
    let configured = configured_ids(cfg);
    let any = list.iter().any(|v| js_trim(v) == "*");
    let mut ids: BTreeSet<String> = if any {
        configured
    } else {
        list.iter()
            .map(|v| js_trim(v))
            .filter(|v| !v.is_empty() && *v != "*")
            .map(normalize_agent_id)
            .filter(|id| configured.contains(id))
            .collect()
    };
    if any {
        ids.insert(requester.to_string());
    }
    let listed = ids.contains(requester);
    let rest = ids.into_iter().filter(|id| id != requester);
    (any, if listed { std::iter::once(requester.to_string()).chain(rest).collect() } else { rest.collect() })
}

/// `agents_list` for the 2026.9 contract.
pub fn run(cfg: &Config, input: &ToolInput<'_>) -> Result<Value> {
    if input.ctx.agent_session_key.as_deref().is_some_and(is_subagent_key) {
        return Ok(refusal("forbidden", SUBAGENT_DENIED));
    }
    let requester = input.requester(cfg)?;
    let agent = requester_agent(cfg, input.ctx, &requester);
    let configured = configured_ids(cfg);
    let (any, ids) = allowed(cfg, &agent);
    let agents: Vec<Value> = ids
        .into_iter()
        .map(|id| {
            let a = cfg.agent(&id);
            let mut m = Map::new();
            m.insert("id".into(), Value::from(id.clone()));
            if let Some(n) = a.and_then(|a| a.name.clone()) {
                m.insert("name".into(), Value::from(n));
            }
            m.insert("configured".into(), Value::Bool(configured.contains(&id)));
            let model = a.and_then(|a| a.model.clone()).or_else(|| cfg.default_model.clone());
            if let Some(r) = model.as_deref().and_then(|m| cfg.models.resolve(m)) {
                let provider = r.provider.unwrap_or_default();
                let text = if provider.is_empty() { r.model } else { format!("{provider}/{}", r.model) };
                m.insert("model".into(), Value::from(text));
            }
            if let Some(rt) = a.and_then(|a| a.runtime.clone()) {
                m.insert("agentRuntime".into(), json!({"id": rt, "source": "agent"}));
            }
            Value::Object(m)
        })
        .collect();
    Ok(json!({"requester": agent, "allowAny": any, "agents": agents}))
}
