//! The one list of agent tools: [`Tool`] names each tool, parses it from its name, gives its
//! definition (JSON Schema, API.md §3), and says how it runs (orchestrated or a store job, and
//! whether a call is bounded enough to run inline). Adding a tool is adding a variant here and
//! its arms; nothing else matches on tool names.

use serde_json::{json, Value};

use crate::error::{Error, Result};

/// An agent tool.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Tool {
    SessionsList,
    SessionsHistory,
    SessionsSend,
    SessionsSpawn,
    AgentsList,
    /// 2026.9 only
    SessionsYield,
    /// 2026.9 only
    Subagents,
}

impl Tool {
    /// Every tool, in definition order.
    pub const ALL: [Tool; 7] = [
        Tool::SessionsList,
        Tool::SessionsHistory,
        Tool::SessionsSend,
        Tool::SessionsSpawn,
        Tool::AgentsList,
        Tool::SessionsYield,
        Tool::Subagents,
    ];

    /// Whether the tool exists under a contract: `sessions_yield` and `subagents` are 2026.9's.
    pub fn in_contract(self, contract: crate::contract::Contract) -> bool {
        !matches!(self, Tool::SessionsYield | Tool::Subagents) || contract == crate::contract::Contract::V2026_9
    }

    /// The tool's name, as models and the gateway call it.
    pub fn name(self) -> &'static str {
        match self {
            Tool::SessionsList => "sessions_list",
            Tool::SessionsHistory => "sessions_history",
            Tool::SessionsSend => "sessions_send",
            Tool::SessionsSpawn => "sessions_spawn",
            Tool::AgentsList => "agents_list",
            Tool::SessionsYield => "sessions_yield",
            Tool::Subagents => "subagents",
        }
    }

    /// The tool a name names, if any.
    pub fn parse(name: &str) -> Option<Tool> {
        Tool::ALL.into_iter().find(|t| t.name() == name)
    }

    /// `executeTool`'s `name` argument: a tool's name, else `INVALID_REQUEST`.
    pub fn from_json(name: &Value) -> Result<Tool> {
        match name {
            Value::String(s) => {
                Tool::parse(s).ok_or_else(|| Error::invalid_request(format!("unknown tool: {}", crate::error::clip(s))))
            }
            _ => Err(Error::invalid_request("invalid name: must be a tool name string")),
        }
    }

    /// Whether the tool runs through the orchestration (runs models, waits): `sessions_send`,
    /// `sessions_spawn`, `sessions_yield`, `subagents`. The others are store jobs.
    pub fn is_orchestrated(self) -> bool {
        matches!(self, Tool::SessionsSend | Tool::SessionsSpawn | Tool::SessionsYield | Tool::Subagents)
    }

    /// Whether a store-job call is bounded enough to run inline: `agents_list`;
    /// `sessions_history` of at most 200 messages (it reads O(limit) rows); `sessions_list` with a small
    /// `limit` and none of the filters that may walk many rows (`kinds`, `activeMinutes`) and
    /// no message previews. Orchestrated tools never are.
    pub fn is_bounded(self, params: &Value) -> bool {
        match self {
            Tool::AgentsList => true,
            // a 2026.9 `messageId` that is not positional walks the transcript; past 200
            // messages (the default) a read is long enough to hold the event loop (listfast: a
            // 1,000-message read took several ms), so it goes to a worker
            Tool::SessionsHistory => {
                params.get("messageId").is_none_or(Value::is_null)
                    && params.get("limit").and_then(Value::as_f64).is_none_or(|l| l <= 200.0)
            }
            Tool::SessionsList => {
                let small = params.get("limit").and_then(Value::as_f64).map(|l| l <= 100.0).unwrap_or(false);
                // 2026.9: `offset` skips index entries, `search` and the titles read per row
                let walks =
                    ["kinds", "activeMinutes", "offset", "search", "includeDerivedTitles", "includeLastMessage"]
                        .iter()
                        .any(|k| params.get(*k).map(|v| !v.is_null()).unwrap_or(false));
                let previews = params.get("messageLimit").and_then(Value::as_f64).map(|m| m > 0.0).unwrap_or(false);
                small && !walks && !previews
            }
            Tool::SessionsSend | Tool::SessionsSpawn | Tool::SessionsYield | Tool::Subagents => false,
        }
    }

    /// The tool's definition (API.md §3): numbers typed `number`, no top-level anyOf/oneOf.
    pub fn definition(self) -> Value {
        match self {
            Tool::SessionsList => json!({
                "name": "sessions_list",
                "label": "Sessions",
                "description": "List sessions, optionally filtered by kind and recent activity, with their last messages.",
                "parameters": {
                    "type": "object",
                    "properties": {
                        "kinds": {"type": "array", "items": {"type": "string"}, "description": "Only these kinds: main, group, cron, hook, node, other."},
                        "limit": {"type": "number", "minimum": 1, "description": "Most rows to return."},
                        "activeMinutes": {"type": "number", "minimum": 1, "description": "Only sessions updated within this many minutes."},
                        "messageLimit": {"type": "number", "minimum": 0, "description": "Include up to this many last messages per session (0-20)."}
                    }
                }
            }),
            Tool::SessionsHistory => json!({
                "name": "sessions_history",
                "label": "Session History",
                "description": "Fetch the message history of a session, by session key or sessionId.",
                "parameters": {
                    "type": "object",
                    "properties": {
                        "sessionKey": {"type": "string", "description": "A session key or a sessionId from sessions_list."},
                        "limit": {"type": "number", "minimum": 1, "description": "Most messages to return."},
                        "includeTools": {"type": "boolean", "description": "Include tool results."},
                        "maxChars": {"type": "number", "minimum": 1, "description": "Drop the oldest messages while the messages JSON is longer than this."}
                    },
                    "required": ["sessionKey"]
                }
            }),
            Tool::SessionsSend => json!({
                "name": "sessions_send",
                "label": "Session Send",
                "description": "Send a message into another session, chosen by sessionKey (or sessionId) or by label, and wait for its reply (timeoutSeconds 0: do not wait). The exchange may continue back and forth, and its outcome may be announced to the target's channel.",
                "parameters": {
                    "type": "object",
                    "properties": {
                        "sessionKey": {"type": "string", "description": "The target session's key or sessionId."},
                        "label": {"type": "string", "minLength": 1, "maxLength": 64, "description": "The target session's label (instead of sessionKey)."},
                        "agentId": {"type": "string", "minLength": 1, "maxLength": 64, "description": "With label: the agent whose sessions the label is looked up in."},
                        "message": {"type": "string", "description": "The message to send."},
                        "timeoutSeconds": {"type": "number", "minimum": 0, "description": "How long to wait for the reply (default 30; 0: send and return at once)."}
                    },
                    "required": ["message"]
                }
            }),
            Tool::SessionsSpawn => json!({
                "name": "sessions_spawn",
                "label": "Sessions",
                "description": "Spawn a sub-agent that works on a task in the background in its own session; its result is announced back to this chat when it finishes.",
                "parameters": {
                    "type": "object",
                    "properties": {
                        "task": {"type": "string", "description": "What the sub-agent is to do."},
                        "label": {"type": "string", "description": "A short name for the task."},
                        "agentId": {"type": "string", "description": "Run the sub-agent as this agent (see agents_list)."},
                        "model": {"type": "string", "description": "Model for the sub-agent (provider/model)."},
                        "thinking": {"type": "string", "description": "Thinking level: off, minimal, low, medium, high."},
                        "runTimeoutSeconds": {"type": "number", "minimum": 0, "description": "Stop the sub-agent after this many seconds (0: the default)."},
                        "timeoutSeconds": {"type": "number", "minimum": 0, "description": "Older name of runTimeoutSeconds."},
                        "cleanup": {"type": "string", "enum": ["delete", "keep"], "description": "Delete the sub-agent's session after it announces, or keep it (default)."}
                    },
                    "required": ["task"]
                }
            }),
            Tool::SessionsYield => json!({
                "name": "sessions_yield",
                "label": "Yield",
                "description": "End this turn for pending child completion events; this is not a final-result submission. Return completed work normally. An unfinished subagent waiting for an incoming continuation must set waitFor:\"message\". Collector runs require explicit collection instead. acknowledgment can send a waiting reply for an otherwise-silent interactive parent.",
                "parameters": {
                    "type": "object",
                    "properties": {
                        "waitFor": {"type": "string", "enum": ["message"], "description": "Explicitly pause an unfinished subagent until an incoming continuation message. Does not schedule a message or submit the final result."},
                        "message": {"type": "string", "description": "Private context for the resumed turn; not sent to the user."},
                        "acknowledgment": {"type": "string", "description": "Optional waiting reply for an otherwise-silent interactive parent turn."}
                    }
                }
            }),
            Tool::Subagents => json!({
                "name": "subagents",
                "label": "Subagents",
                "description": "Background work: list status, wait for selected taskIds to finish or need attention, or cancel a taskId. wait keeps this turn active; timeout does not cancel work or consume completion delivery.",
                "parameters": {
                    "type": "object",
                    "properties": {
                        "action": {"type": "string", "enum": ["list", "wait", "cancel"]},
                        "recentMinutes": {"type": "number", "minimum": 1},
                        "taskId": {"type": "string", "description": "Task id"},
                        "taskIds": {"type": "array", "items": {"type": "string", "minLength": 1}, "minItems": 1, "maxItems": 32},
                        "timeoutSeconds": {"type": "number", "minimum": 0, "maximum": 60}
                    }
                }
            }),
            Tool::AgentsList => json!({
                "name": "agents_list",
                "label": "Agents",
                "description": "List the agent ids this session may use with sessions_spawn.",
                "parameters": {"type": "object", "properties": {}}
            }),
        }
    }
}
