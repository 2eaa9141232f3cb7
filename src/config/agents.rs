//! `agents.*` and the `tools.*` switches of the session tools: the agent roster (`agents.list[]`
//! and 2026.9's `agents.entries.<id>` with `agents.ownership`), the sub-agent defaults, sandbox
//! and session-tool visibility, and the agent-to-agent switch. Reads and validates only; the
//! policies that use these values live in `crate::policy`.

use serde_json::Value;

use super::read::{floor_u32, invalid, Section};
use crate::contract::Rules;
use crate::error::Result;
use crate::keys::normalize_agent_id;

/// `sessionToolsVisibility`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Visibility {
    #[default]
    Spawned,
    All,
}

/// `tools.sessions.visibility` (2026.9): which sessions the session tools may see.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Hash)]
pub enum SessionVisibility {
    /// the requester's own session only
    SelfOnly,
    /// the requester's session and the sessions it owns (spawned, parented); from an agent's
    /// main session, every session of that agent
    Tree,
    /// every session of the requester's agent
    Agent,
    /// every session; cross-agent ones as `tools.agentToAgent` allows
    #[default]
    All,
}

impl SessionVisibility {
    pub fn as_str(self) -> &'static str {
        match self {
            SessionVisibility::SelfOnly => "self",
            SessionVisibility::Tree => "tree",
            SessionVisibility::Agent => "agent",
            SessionVisibility::All => "all",
        }
    }
}

/// `sandbox.mode` (2026.9): which of an agent's sessions run sandboxed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum SandboxMode {
    /// none
    #[default]
    Off,
    /// every session but the agent's main session
    NonMain,
    /// every session
    All,
}

/// `sandbox.mode` of this sandbox section, when given (read under 2026.9 only).
pub(super) fn read_sandbox_mode(sandbox: &Section<'_>) -> Result<Option<SandboxMode>> {
    match sandbox.lowered("mode")?.as_deref() {
        None => Ok(None),
        Some("off") => Ok(Some(SandboxMode::Off)),
        Some("non-main") => Ok(Some(SandboxMode::NonMain)),
        Some("all") => Ok(Some(SandboxMode::All)),
        Some(_) => Err(sandbox.bad("mode", r#"must be "off", "non-main" or "all""#)),
    }
}

/// `tools.sessions_spawn.attachments` (2026.9): inline files a spawn may hand its child.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AttachmentLimits {
    /// `enabled`, only when literally `true`
    pub enabled: bool,
    /// `maxTotalBytes`, default 5 MiB
    pub max_total_bytes: u64,
    /// `maxFiles`, default 50
    pub max_files: u64,
    /// `maxFileBytes`, default 1 MiB
    pub max_file_bytes: u64,
    /// `retainOnSessionKeep`: keep the files with a kept child session
    pub retain_on_keep: bool,
}

impl Default for AttachmentLimits {
    fn default() -> Self {
        AttachmentLimits {
            enabled: false,
            max_total_bytes: 5 * 1024 * 1024,
            max_files: 50,
            max_file_bytes: 1024 * 1024,
            retain_on_keep: false,
        }
    }
}

/// `tools.sessions_spawn.attachments`, numbers floored.
pub(super) fn read_attachment_limits(a: &Section<'_>) -> Result<AttachmentLimits> {
    let d = AttachmentLimits::default();
    let n = |key: &str, default: u64| -> Result<u64> { Ok(a.number(key)?.map_or(default, super::floor_u64)) };
    Ok(AttachmentLimits {
        enabled: a.boolean("enabled")? == Some(true),
        max_total_bytes: n("maxTotalBytes", d.max_total_bytes)?,
        max_files: n("maxFiles", d.max_files)?,
        max_file_bytes: n("maxFileBytes", d.max_file_bytes)?,
        retain_on_keep: a.boolean("retainOnSessionKeep")? == Some(true),
    })
}

/// `tools.agentToAgent`.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct AgentToAgentConfig {
    /// 2026.1: true only for the literal boolean `true`; 2026.9: true unless literally `false`
    pub enabled: bool,
    /// the patterns as given (strings only; matching trims them)
    pub allow: Vec<String>,
}

/// One agent of the roster: an `agents.list[]` entry, or (2026.9) an `agents.entries.<id>`
/// value with its key as the id.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct AgentConfig {
    /// normalized
    pub id: String,
    /// trimmed, non-empty
    pub name: Option<String>,
    pub is_default: bool,
    /// `subagents.allowAgents` as given (strings); None when the key is absent
    pub allow_agents: Vec<String>,
    /// whether `subagents.allowAgents` was given at all
    pub allow_agents_set: bool,
    /// `subagents.model` (a string, or `{primary}`), trimmed, non-empty
    pub subagent_model: Option<String>,
    /// `model` (a string, or `{primary}`): the agent's default model ref
    pub model: Option<String>,
    /// `agentRuntime` / `runtime` id configured for the agent
    pub runtime: Option<String>,
    pub sandbox_visibility: Option<Visibility>,
    /// 2026.9 `sandbox.mode` of this agent, when given
    pub sandbox_mode: Option<SandboxMode>,
    /// 2026.9 `subagents.requireAgentId` of this agent, when given
    pub require_agent_id: Option<bool>,
}

/// `agents.defaults.subagents`.
#[derive(Debug, Clone, PartialEq)]
pub struct SubagentDefaults {
    /// minutes after a child's run ends (and its announce settles) that it is archived;
    /// None = archiving disabled (absent → 60; 0 → disabled; fractional allowed; a negative
    /// value is refused like every negative number)
    pub archive_after_minutes: Option<f64>,
    /// a string, or `{primary}`
    pub model: Option<String>,
    /// 2026.1 `maxActive`, default 8: running children per requester
    pub max_active: u32,
    /// `maxSpawnDepth`: how deep sub-agents may nest (2026.9: default 5, 1–5)
    pub max_spawn_depth: u32,
    /// `maxChildrenPerAgent`: active children per requester session (2026.9: default 5, 1–20)
    pub max_children_per_agent: u32,
    /// `maxConcurrent`: the sub-agent run lane (default 8, ≥ 1)
    pub max_concurrent: u32,
    /// `allowAgents` of the defaults (2026.9 falls back to it when the agent has none)
    pub allow_agents: Option<Vec<String>>,
    /// 2026.9 `requireAgentId` of the defaults (false)
    pub require_agent_id: bool,
}

impl SubagentDefaults {
    /// The defaults of a contract when nothing is configured.
    pub fn for_rules(rules: &Rules) -> SubagentDefaults {
        SubagentDefaults {
            archive_after_minutes: Some(60.0),
            model: None,
            max_active: 8,
            max_spawn_depth: rules.max_spawn_depth_default,
            max_children_per_agent: rules.max_children_default,
            max_concurrent: rules.max_concurrent_default,
            allow_agents: None,
            require_agent_id: false,
        }
    }
}

impl Default for SubagentDefaults {
    fn default() -> Self {
        SubagentDefaults::for_rules(crate::contract::Contract::default().rules())
    }
}

/// `agents.defaults.subagents`, with the contract's defaults and ranges. A value outside the
/// range is refused naming the key (fail closed), not clamped.
pub(super) fn read_subagent_defaults(sub: &Section<'_>, rules: &Rules) -> Result<SubagentDefaults> {
    let d = SubagentDefaults::for_rules(rules);
    let ranged = |key: &str, default: u32, (lo, hi): (u32, u32)| -> Result<u32> {
        match sub.number(key)? {
            None => Ok(default),
            Some(n) if n.fract() == 0.0 && n >= f64::from(lo) && n <= f64::from(hi) => Ok(floor_u32(n)),
            Some(_) => Err(sub.bad(key, &format!("must be an integer from {lo} to {hi}"))),
        }
    };
    let (max_spawn_depth, max_children_per_agent, max_concurrent) = if rules.agents_entries {
        (
            ranged("maxSpawnDepth", d.max_spawn_depth, rules.max_spawn_depth_range)?,
            ranged("maxChildrenPerAgent", d.max_children_per_agent, rules.max_children_range)?,
            ranged("maxConcurrent", d.max_concurrent, (1, u32::MAX))?,
        )
    } else {
        (d.max_spawn_depth, d.max_children_per_agent, d.max_concurrent)
    };
    Ok(SubagentDefaults {
        archive_after_minutes: sub.number("archiveAfterMinutes")?.map_or(Some(60.0), |n| (n > 0.0).then_some(n)),
        model: sub.model("model")?,
        max_active: sub.number("maxActive")?.map_or(8, floor_u32),
        max_spawn_depth,
        max_children_per_agent,
        max_concurrent,
        allow_agents: sub.strings("allowAgents")?,
        require_agent_id: sub.boolean("requireAgentId")? == Some(true),
    })
}

/// `tools.sessions.visibility`: `self|tree|agent|all` (case-insensitive, trimmed), absent →
/// the contract's default; anything else is refused naming the key.
pub(super) fn read_session_visibility(tools: &Section<'_>, rules: &Rules) -> Result<SessionVisibility> {
    let sessions = tools.section("sessions")?;
    match sessions.lowered("visibility")?.as_deref() {
        None => Ok(rules.default_session_visibility),
        Some("self") => Ok(SessionVisibility::SelfOnly),
        Some("tree") => Ok(SessionVisibility::Tree),
        Some("agent") => Ok(SessionVisibility::Agent),
        Some("all") => Ok(SessionVisibility::All),
        Some(_) => Err(sessions.bad("visibility", r#"must be one of "self", "tree", "agent", "all""#)),
    }
}

pub(super) fn read_visibility(section: &Section<'_>) -> Result<Option<Visibility>> {
    const KEY: &str = "sessionToolsVisibility";
    match section.lowered(KEY)?.as_deref() {
        None => Ok(None),
        Some("spawned") => Ok(Some(Visibility::Spawned)),
        Some("all") => Ok(Some(Visibility::All)),
        Some(_) => Err(section.bad(KEY, r#"must be "spawned" or "all""#)),
    }
}

/// One roster entry at `entry` (already known to be present), with this raw id.
fn read_agent(entry: &Section<'_>, id: &str, rules: &Rules) -> Result<AgentConfig> {
    if entry.map.is_none() {
        return Err(invalid(&entry.path, "must be an object"));
    }
    let subagents = entry.section("subagents")?;
    let allow = subagents.strings("allowAgents")?;
    let runtime = match entry.get("agentRuntime").or_else(|| entry.get("runtime")) {
        Some(Value::String(s)) => Some(s.trim().to_string()).filter(|s| !s.is_empty()),
        Some(Value::Object(o)) => {
            o.get("id").and_then(Value::as_str).map(|s| s.trim().to_string()).filter(|s| !s.is_empty())
        }
        _ => None,
    };
    Ok(AgentConfig {
        id: normalize_agent_id(id),
        name: entry.trimmed("name")?,
        is_default: entry.boolean("default")? == Some(true),
        allow_agents_set: allow.is_some(),
        allow_agents: allow.unwrap_or_default(),
        subagent_model: subagents.model("model")?,
        model: entry.model("model")?,
        runtime,
        sandbox_visibility: read_visibility(&entry.section("sandbox")?)?,
        sandbox_mode: if rules.agents_entries { read_sandbox_mode(&entry.section("sandbox")?)? } else { None },
        require_agent_id: subagents.boolean("requireAgentId")?,
    })
}

/// The roster. 2026.1: `agents.list[]`. 2026.9: `agents.entries.<id>` when present (the list
/// is then ignored, as the gateway does), else the list (read for migration); a roster of more
/// than one agent needs `agents.ownership: "explicit"` or one entry with `default: true`.
pub(super) fn read_agents(agents: &Section<'_>, rules: &Rules) -> Result<Vec<AgentConfig>> {
    let from_list = || -> Result<Vec<AgentConfig>> {
        agents
            .array("list")?
            .iter()
            .enumerate()
            .map(|(i, entry)| {
                let entry = Section::at(Some(entry), format!("{}[{i}]", agents.path_of("list")))?;
                if entry.map.is_none() {
                    return Err(invalid(&entry.path, "must be an object"));
                }
                let id = entry.string("id")?.ok_or_else(|| entry.bad("id", "must be a string"))?;
                read_agent(&entry, id, rules)
            })
            .collect()
    };
    if !rules.agents_entries {
        return from_list();
    }
    let ownership = agents.lowered("ownership")?;
    if ownership.as_deref().is_some_and(|o| o != "explicit") {
        return Err(agents.bad("ownership", r#"must be "explicit""#));
    }
    let roster = if agents.get("entries").is_some() {
        let mut out: Vec<AgentConfig> = Vec::new();
        for (id, value, path) in agents.entries("entries")? {
            let agent = read_agent(&Section::at(Some(value), path.clone())?, id, rules)?;
            if out.iter().any(|a| a.id == agent.id) {
                return Err(invalid(&path, "names an agent that is already listed"));
            }
            out.push(agent);
        }
        out
    } else {
        from_list()?
    };
    if roster.len() > 1 && ownership.is_none() && !roster.iter().any(|a| a.is_default) {
        return Err(agents.bad(
            "ownership",
            r#"must be "explicit" when more than one agent is configured and none has default: true"#,
        ));
    }
    Ok(roster)
}
