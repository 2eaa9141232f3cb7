//! The session tools as OpenClaw 2026.9.6 shapes them (OPENCLAW-2026.9.md §1): what differs
//! from the 2026.1 tools in parameters, results and texts. [`crate::tools`] sends a call here
//! once, when the config's contract says [`ToolShape::Openclaw2026_9`]; nothing below tests the
//! contract again (numbers come from [`crate::contract::Rules`]).
//!
//! [`ToolShape::Openclaw2026_9`]: crate::contract::ToolShape::Openclaw2026_9

pub mod agents;
pub mod history;
pub mod list;
pub mod params;
pub mod redact;
mod redact_auth;
mod redact_aws;
mod redact_fields;
mod redact_form;
mod redact_pass;
pub mod redact_rx;

use serde_json::{json, Value};

use super::{Requester, Tool, ToolContext};
use crate::config::Config;
use crate::engine::Engine;
use crate::error::Result;
use crate::keys::normalize_agent_id;

/// One call: the model's arguments and the caller.
pub struct ToolInput<'a> {
    pub args: &'a Value,
    pub ctx: &'a ToolContext,
}

impl ToolInput<'_> {
    pub fn requester(&self, cfg: &Config) -> Result<Requester> {
        Requester::of(cfg, self.ctx)
    }
}

/// The requester's agent: `requesterAgentIdOverride`, else the agent of its key.
pub fn requester_agent(_cfg: &Config, ctx: &ToolContext, requester: &Requester) -> String {
    ctx.requester_agent_id_override.as_deref().map_or_else(|| requester.agent.clone(), normalize_agent_id)
}

/// How 2026.9 shows a key: the alias and the main key as `main`, anything else as it is.
pub fn display_key(cfg: &Config, key: &str) -> String {
    let km = cfg.key_model();
    let key = key.trim();
    if key == km.alias() || key == km.main_key() {
        "main".to_string()
    } else {
        key.to_string()
    }
}

/// Runs a 2026.9 store-job tool; None for a tool this module does not shape.
pub fn run(engine: &Engine, tool: Tool, args: &Value, ctx: &ToolContext) -> Option<Result<Value>> {
    let input = ToolInput { args, ctx };
    match tool {
        Tool::SessionsList => Some(list::run(engine, &input)),
        Tool::SessionsHistory => Some(history::run(engine, &input)),
        Tool::AgentsList => Some(agents::run(&engine.config(), &input)),
        Tool::SessionsSend | Tool::SessionsSpawn | Tool::SessionsYield | Tool::Subagents => None,
    }
}

/// The 2026.9 definition of a tool this module shapes (integers typed `int`).
pub fn definition(tool: Tool, int: &str) -> Option<Value> {
    match tool {
        Tool::SessionsList => Some(json!({
            "name": "sessions_list",
            "label": "Sessions",
            "description": "List the sessions you may see, newest first, one page at a time: filter by kind, agent, label, search text, owner, creator, project, workspace, group, pinned or archived state and recent activity; continue with nextOffset while hasMore. Titles, last-message previews and recent messages on request.",
            "parameters": {
                "type": "object",
                "properties": {
                    "kinds": {"type": "array", "items": {"type": "string", "enum": ["main", "group", "cron", "hook", "node", "other"]}},
                    "limit": {"type": int, "minimum": 1, "description": "Rows per page (default 100; at most 200 are returned)."},
                    "offset": {"type": int, "minimum": 0, "maximum": 9_007_199_254_740_991_u64, "description": "Where the page starts: a nextOffset from the previous page."},
                    "activeMinutes": {"type": int, "minimum": 1},
                    "excludeSubagents": {"type": "boolean"},
                    "relationship": {"type": "string", "enum": ["owned", "created", "involving"], "description": "Needs an authenticated requesting user."},
                    "ownerId": {"type": "string", "minLength": 1},
                    "creatorId": {"type": "string", "minLength": 1},
                    "projectId": {"type": "string", "minLength": 1},
                    "workspaceDir": {"type": "string", "minLength": 1},
                    "group": {"type": "string", "description": "Sidebar group; an empty string selects ungrouped sessions."},
                    "pinned": {"type": "boolean"},
                    "messageLimit": {"type": int, "minimum": 0, "description": "Recent messages per row (at most 20)."},
                    "label": {"type": "string", "minLength": 1},
                    "agentId": {"type": "string", "minLength": 1, "maxLength": 64},
                    "search": {"type": "string", "minLength": 1, "description": "Case-insensitive text in the display name, label, subject, sessionId or key."},
                    "archived": {"anyOf": [{"type": "boolean"}, {"type": "string", "const": "all"}], "description": "true: archived only; \"all\": both; default: active only."},
                    "includeDerivedTitles": {"type": "boolean"},
                    "includeLastMessage": {"type": "boolean"}
                }
            }
        })),
        Tool::SessionsHistory => Some(json!({
            "name": "sessions_history",
            "label": "Session History",
            "description": "Read a visible session's history, redacted and bounded: the latest messages, older pages with offset, or the messages around messageId. Tool results only with includeTools.",
            "parameters": {
                "type": "object",
                "properties": {
                    "sessionKey": {"type": "string", "minLength": 1, "description": "A session key, a sessionId, main, or current."},
                    "limit": {"type": int, "minimum": 1, "maximum": 1000},
                    "offset": {"type": int, "minimum": 0, "description": "Messages to skip from the newest; ignored with messageId."},
                    "pendingBefore": {"type": int, "minimum": 1},
                    "messageId": {"type": "string", "minLength": 1, "description": "Read around this message (its __openclaw.id)."},
                    "sessionId": {"type": "string", "minLength": 1, "description": "The transcript that holds messageId; needs messageId."},
                    "includeTools": {"type": "boolean"}
                },
                "required": ["sessionKey"]
            }
        })),
        Tool::AgentsList => Some(json!({
            "name": "agents_list",
            "label": "Agents",
            "description": "List the agent ids you may use with sessions_spawn, with their name, model and runtime.",
            "parameters": {"type": "object", "properties": {}}
        })),
        Tool::SessionsSend | Tool::SessionsSpawn | Tool::SessionsYield | Tool::Subagents => None,
    }
}

/// Retypes the `number` parameters of a 2026.1 definition as `int`.
pub fn retype_numbers(def: &mut Value, int: &str) {
    if let Some(props) = def.pointer_mut("/parameters/properties").and_then(Value::as_object_mut) {
        for p in props.values_mut() {
            if p.get("type").and_then(Value::as_str) == Some("number") {
                p["type"] = Value::from(int);
            }
        }
    }
}
