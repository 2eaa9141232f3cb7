//! The agent tools: what a model calls, with what it may pass, and what it gets back.
//!
//! [`Tool`] (`tool.rs`) is the one list of tools and their definitions (JSON Schemas); one file
//! per tool's surface (`list`, `history`, `agents`, and the parameters and refusals of `send`
//! and `spawn`, whose runs are the orchestration's), `target` for the session a reference names,
//! plus here the shared parameter readers (REFERENCE.md preamble), the caller's
//! [`ToolContext`], and [`Refusal`]. Tools work through the [`Engine`](crate::engine::Engine) and
//! the store's typed methods; they never talk SQL. A tool never fails because of what the model
//! sent: every refusal is a payload.

pub mod agents;
pub mod attach9;
pub mod bytes9;
pub mod history;
pub mod indexed;
pub mod list;
mod list_row;
pub mod send;
pub mod send9;
pub mod spawn;
pub mod spawn9;
pub mod target;
pub mod tool;
pub mod v2026_9;

pub use tool::Tool;

use serde_json::{json, Map, Value};

use crate::config::Config;
use crate::error::{Error, Result};
use crate::keys;

/// Who is calling a tool (API.md §3).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ToolContext {
    pub agent_session_key: Option<String>,
    pub agent_channel: Option<String>,
    pub agent_account_id: Option<String>,
    pub agent_to: Option<String>,
    pub agent_thread_id: Option<Value>,
    pub agent_group_id: Option<String>,
    pub agent_group_channel: Option<String>,
    pub agent_group_space: Option<String>,
    pub sandboxed: bool,
    pub requester_agent_id_override: Option<String>,
    pub run_id: Option<String>,
}

impl ToolContext {
    /// Reads the context object the gateway passes; a field of the wrong type is refused.
    pub fn from_json(v: &Value) -> Result<ToolContext> {
        let o = match v {
            Value::Null => return Ok(ToolContext::default()),
            Value::Object(o) => o,
            _ => return Err(Error::invalid_request("invalid ctx: must be an object")),
        };
        let s = |name: &str| -> Result<Option<String>> {
            match o.get(name) {
                None | Some(Value::Null) => Ok(None),
                Some(Value::String(s)) => Ok(Some(s.trim().to_owned()).filter(|s| !s.is_empty())),
                Some(_) => Err(Error::invalid_request(format!("invalid ctx.{name}: must be a string"))),
            }
        };
        let thread = match o.get("agentThreadId") {
            None | Some(Value::Null) => None,
            Some(v @ (Value::String(_) | Value::Number(_))) => Some(v.clone()),
            Some(_) => return Err(Error::invalid_request("invalid ctx.agentThreadId: must be a string or a number")),
        };
        let sandboxed = match o.get("sandboxed") {
            None | Some(Value::Null) => false,
            Some(Value::Bool(b)) => *b,
            Some(_) => return Err(Error::invalid_request("invalid ctx.sandboxed: must be a boolean")),
        };
        Ok(ToolContext {
            agent_session_key: s("agentSessionKey")?,
            agent_channel: s("agentChannel")?,
            agent_account_id: s("agentAccountId")?,
            agent_to: s("agentTo")?,
            agent_thread_id: thread,
            agent_group_id: s("agentGroupId")?,
            agent_group_channel: s("agentGroupChannel")?,
            agent_group_space: s("agentGroupSpace")?,
            sandboxed,
            requester_agent_id_override: s("requesterAgentIdOverride")?,
            run_id: s("runId")?,
        })
    }
}

/// The requester as the tools see it.
#[derive(Debug, Clone)]
pub struct Requester {
    /// the canonical key, `None` when the caller gave no `agentSessionKey`
    pub key: Option<String>,
    /// the key as given (for prompt-context lines)
    pub raw: Option<String>,
    pub agent: String,
}

impl Requester {
    /// With no key the requester counts as the main session of the default agent (API.md §3).
    pub fn of(cfg: &Config, ctx: &ToolContext) -> Result<Requester> {
        let km = cfg.key_model();
        let key = match &ctx.agent_session_key {
            Some(raw) => Some(km.canonical(raw)?),
            None => None,
        };
        let agent = match &key {
            Some(k) => km.agent_id_of(k),
            None => km.default_agent().to_owned(),
        };
        Ok(Requester { key, raw: ctx.agent_session_key.clone(), agent })
    }

    /// The canonical key, or the default agent's main session.
    pub fn key_or_main(&self, cfg: &Config) -> String {
        self.key.clone().unwrap_or_else(|| cfg.key_model().main_session_key())
    }
}

// ---- parameter readers (REFERENCE.md preamble) -------------------------------------------

/// A string param: must be a string; trimmed; empty → absent.
pub fn read_string(args: &Value, name: &str) -> Option<String> {
    args.get(name).and_then(Value::as_str).map(str::trim).filter(|s| !s.is_empty()).map(str::to_owned)
}

/// A string-array param: strings kept (trimmed, empties removed); one string is a list of one.
pub fn read_string_list(args: &Value, name: &str) -> Option<Vec<String>> {
    let out: Vec<String> = match args.get(name)? {
        Value::String(s) => vec![s.trim().to_owned()],
        Value::Array(a) => a.iter().filter_map(Value::as_str).map(|s| s.trim().to_owned()).collect(),
        _ => return None,
    };
    let out: Vec<String> = out.into_iter().filter(|s| !s.is_empty()).collect();
    (!out.is_empty()).then_some(out)
}

/// A numeric param: only a finite JSON number counts.
pub fn read_number(args: &Value, name: &str) -> Option<f64> {
    args.get(name).and_then(Value::as_f64).filter(|f| f.is_finite())
}

/// `{status: "error", tool, error}`: what the model sees when a tool throws.
pub fn thrown(tool: &str, error: impl std::fmt::Display) -> Value {
    json!({"status": "error", "tool": tool, "error": error.to_string()})
}

/// Why a tool call ends before it does anything: a refusal the model sees as a payload, or a
/// failure of the store (an error). `?` turns a store error into one.
#[derive(Debug)]
pub enum Refusal {
    Payload(Value),
    Failed(Error),
}

impl From<Error> for Refusal {
    fn from(e: Error) -> Refusal {
        Refusal::Failed(e)
    }
}

impl Refusal {
    /// What the tool returns: the payload, or the store's error.
    pub fn into_payload(self) -> Result<Value> {
        match self {
            Refusal::Payload(p) => Ok(p),
            Refusal::Failed(e) => Err(e),
        }
    }
}

/// A step of a tool that may refuse.
pub type Checked<T> = std::result::Result<T, Refusal>;

/// `{status, error}` refusal payload.
pub fn refusal(status: &str, error: impl std::fmt::Display) -> Value {
    json!({"status": status, "error": error.to_string()})
}

/// The tool definitions a caller is offered ([`available`]) under its contract: 2026.1's, or
/// (2026.9) the 2026.9 schemas of `sessions_list`, `sessions_history` and `agents_list` with
/// the other tools' integers typed `integer`.
pub fn definitions_for(engine: &crate::engine::Engine, ctx: &ToolContext) -> Vec<Value> {
    let cfg = engine.config();
    let rules = cfg.rules();
    available(engine, ctx).into_iter().map(|t| definition_for(rules, t)).collect()
}

/// One tool's definition under a contract.
pub fn definition_for(rules: &crate::contract::Rules, tool: Tool) -> Value {
    if rules.tool_shape == crate::contract::ToolShape::Reference2026_1 {
        return tool.definition();
    }
    v2026_9::definition(tool, rules.integer_type).unwrap_or_else(|| {
        let mut d = tool.definition();
        v2026_9::retype_numbers(&mut d, rules.integer_type);
        d
    })
}

/// The tools a caller is offered, in definition order. 2026.1: a sub-agent caller gets none of
/// the session tools (REFERENCE.md §6.9). 2026.9: a sub-agent never gets `sessions_send` or
/// `agents_list`; one under `maxSpawnDepth` (an orchestrator, its depth read from the stored
/// lineage) keeps `sessions_list`, `sessions_history`, `sessions_spawn`, `sessions_yield` and
/// `subagents`; a leaf keeps `sessions_yield` only. A lineage that cannot be read counts as a
/// leaf's.
pub fn available(engine: &crate::engine::Engine, ctx: &ToolContext) -> Vec<Tool> {
    let cfg = engine.config();
    let contract = cfg.contract;
    let all = Tool::ALL.into_iter().filter(|t| t.in_contract(contract));
    let Some(key) = ctx.agent_session_key.as_deref().filter(|k| keys::is_subagent_key(k)) else {
        return all.collect();
    };
    if contract != crate::contract::Contract::V2026_9 {
        return Vec::new();
    }
    let depth = cfg
        .key_model()
        .canonical(key)
        .ok()
        .and_then(|k| engine.store().read(|db| db.spawn_depth(&k)).ok())
        .unwrap_or(u32::MAX);
    let orchestrator = depth < cfg.subagents.max_spawn_depth;
    all.filter(|t| match t {
        Tool::SessionsSend | Tool::AgentsList => false,
        Tool::SessionsYield => true,
        Tool::SessionsList | Tool::SessionsHistory | Tool::SessionsSpawn | Tool::Subagents => orchestrator,
    })
    .collect()
}

/// As [`run`] for a caller that wants the payload as JSON text (`wrap` false): `sessions_list`
/// builds its rows straight into text; the other tools serialize their value.
pub fn run_text(engine: &crate::engine::Engine, tool: Tool, params: &Value, ctx: &Value) -> Result<String> {
    text_or_wire(engine, tool, params, ctx, false)
}

/// As [`run_text`], for the napi skin: a listing's rows are indexed ([`indexed`]), so that JS
/// parses only the rows it has not kept.
pub fn run_wire(engine: &crate::engine::Engine, tool: Tool, params: &Value, ctx: &Value) -> Result<String> {
    text_or_wire(engine, tool, params, ctx, true)
}

fn text_or_wire(engine: &crate::engine::Engine, tool: Tool, params: &Value, ctx: &Value, wire: bool) -> Result<String> {
    let shape = engine.config().rules().tool_shape;
    if tool == Tool::SessionsList && shape == crate::contract::ToolShape::Reference2026_1 {
        let c = ToolContext::from_json(ctx)?;
        return match list::run_text(engine, params, &c) {
            Ok(listing) if wire => Ok(listing.into_wire()),
            Ok(list::Listing(text, _)) => Ok(text),
            Err(e) => payload_or_error(tool, Err(e)).map(|v| v.to_string()),
        };
    }
    if tool == Tool::SessionsHistory && shape == crate::contract::ToolShape::Reference2026_1 {
        let c = ToolContext::from_json(ctx)?;
        return match history::run_text(engine, params, &c) {
            Ok(text) => Ok(text),
            Err(e) => payload_or_error(tool, Err(e)).map(|v| v.to_string()),
        };
    }
    let v = run(engine, tool, params, ctx, false)?;
    serde_json::to_string(&v).map_err(|e| Error::store(format!("cannot encode the result: {e}")))
}

/// Runs a store-job tool for a caller whose context arrives as JSON; `wrap` gives the
/// `{content, details}` envelope. The store's own failures (`CLOSED`, `STORE_ERROR`) are errors;
/// anything else a tool refuses or throws is a payload. The orchestrated tools are run by the
/// orchestrator ([`Tool::is_orchestrated`]); asked of this function, they are refused.
pub fn run(engine: &crate::engine::Engine, tool: Tool, params: &Value, ctx: &Value, wrap: bool) -> Result<Value> {
    let ctx = ToolContext::from_json(ctx)?;
    if engine.config().rules().tool_shape == crate::contract::ToolShape::Openclaw2026_9 {
        if let Some(details) = v2026_9::run(engine, tool, params, &ctx) {
            let details = payload_or_error(tool, details)?;
            return Ok(if wrap { envelope(details) } else { details });
        }
    }
    let details = match tool {
        Tool::SessionsList => list::run(engine, params, &ctx),
        Tool::SessionsHistory => history::run(engine, params, &ctx),
        Tool::AgentsList => agents::run(&engine.config(), &ctx),
        Tool::SessionsSend | Tool::SessionsSpawn | Tool::SessionsYield | Tool::Subagents => {
            return Err(Error::invalid_request(format!("{} needs the orchestrator", tool.name())))
        }
    };
    let details = payload_or_error(tool, details)?;
    Ok(if wrap { envelope(details) } else { details })
}

/// What a tool's outcome becomes: the store's own failures (`CLOSED`, `STORE_ERROR`) stay
/// errors; anything else a tool refuses or throws is the `{status: "error", tool, error}`
/// payload the model sees.
pub fn payload_or_error(tool: Tool, details: Result<Value>) -> Result<Value> {
    match details {
        Ok(d) => Ok(d),
        Err(e) if matches!(e.code(), crate::error::ErrorCode::Closed | crate::error::ErrorCode::StoreError) => Err(e),
        Err(e) => Ok(thrown(tool.name(), e.message())),
    }
}

/// The tool result envelope: `{content: [{type: "text", text}], details}`.
pub fn envelope(details: Value) -> Value {
    let text = serde_json::to_string_pretty(&details).unwrap_or_default();
    let mut m = Map::new();
    m.insert("content".into(), json!([{"type": "text", "text": text}]));
    m.insert("details".into(), details);
    Value::Object(m)
}
