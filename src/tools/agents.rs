//! `agents_list` (REFERENCE.md §10.1): the agent ids the caller may spawn sub-agents under.

use serde_json::{json, Map, Value};

use super::ToolContext;
use crate::config::Config;
use crate::error::Result;
use crate::keys::normalize_agent_id;
use crate::policy::subagents::agents_for;

pub fn run(cfg: &Config, ctx: &ToolContext) -> Result<Value> {
    let km = cfg.key_model();
    let requester_key = match &ctx.agent_session_key {
        Some(raw) => km.canonical(raw)?,
        None => km.main_session_key(),
    };
    let requester = match &ctx.requester_agent_id_override {
        Some(o) => normalize_agent_id(o),
        None => km.agent_id_of(&requester_key),
    };
    let (any, agents) = agents_for(cfg, &requester);
    let agents: Vec<Value> = agents
        .into_iter()
        .map(|a| {
            let mut m = Map::new();
            m.insert("id".into(), Value::from(a.id));
            if let Some(n) = a.name {
                m.insert("name".into(), Value::from(n));
            }
            m.insert("configured".into(), Value::from(a.configured));
            Value::Object(m)
        })
        .collect();
    Ok(json!({"requester": requester, "allowAny": any, "agents": agents}))
}
