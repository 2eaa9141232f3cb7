//! A typed, validated view of the gateway's config object.
//!
//! Owns API.md §1.1: which keys are read, their defaults, clamps and validation. The config
//! arrives as JSON (the gateway's own object, unknown keys ignored) and leaves as a [`Config`]
//! that the rest of the engine reads without further checks. A malformed value is refused with
//! `INVALID_CONFIG` naming the key (DECISIONS.md #6: fail closed), never read as a default.

mod agents;
mod models;
mod read;
mod sessions;

use serde_json::Value;

pub use agents::{
    AgentConfig, AgentToAgentConfig, AttachmentLimits, SandboxMode, SessionVisibility, SubagentDefaults, Visibility,
};
pub use models::{CatalogModel, ModelCatalog, ModelCost, ModelRef};
pub use sessions::{ChatType, PolicyAction, QueueConfig, Scope, SendPolicyConfig, SendPolicyRule};

use crate::contract::{Contract, Rules};
use crate::error::{Error, Result};
use crate::keys::{normalize_agent_id, KeyModel, DEFAULT_AGENT_ID, MAX_KEY_LEN};
use read::Section;
pub(crate) use read::{floor_u32, floor_u64, number_at};

/// Longest `session.mainKey` accepted (bytes): leaves room for `agent:<64-char id>:` so that
/// every main session key stays within [`MAX_KEY_LEN`].
pub const MAX_MAIN_KEY_LEN: usize = MAX_KEY_LEN - 96;

/// The whole typed config.
#[derive(Debug, Clone, PartialEq)]
pub struct Config {
    /// the gateway contract this config was read for (it decides defaults and shapes)
    pub contract: Contract,
    pub scope: Scope,
    /// `session.store`, trimmed (only reported as `sessions.list`'s `path`)
    pub store: Option<String>,
    /// trimmed, lower-cased, empty → `main`
    pub main_key: String,
    pub send_policy: Option<SendPolicyConfig>,
    /// default 5; floored, clamped to 0..=5 (2026.9: always 5, the key is not read)
    pub max_ping_pong_turns: u32,
    /// default 20 (DECISIONS.md #4)
    pub max_chain_turns: u32,
    pub agent_to_agent: AgentToAgentConfig,
    /// `tools.sessions.visibility` (the contract's default when absent)
    pub session_visibility: SessionVisibility,
    pub subagent_tools_allow: Option<Vec<String>>,
    pub subagent_tools_deny: Vec<String>,
    /// `agents.defaults.timeoutSeconds`, default 600, floored, min 1
    pub default_timeout_seconds: u64,
    /// 2026.9 `tools.sessions_spawn.attachments` (off unless `enabled: true`)
    pub spawn_attachments: AttachmentLimits,
    /// `agents.defaults.sandbox.sessionToolsVisibility`, default spawned
    pub sandbox_visibility: Visibility,
    /// 2026.9 `agents.defaults.sandbox.mode`, default off (not read under 2026.1)
    pub sandbox_mode: SandboxMode,
    pub subagents: SubagentDefaults,
    /// `agents.defaults.model` (a string, or `{primary}`)
    pub default_model: Option<String>,
    pub agents: Vec<AgentConfig>,
    /// `agents.ownership` (2026.9): `explicit` or absent
    pub agents_ownership_explicit: bool,
    pub queue: QueueConfig,
    pub models: ModelCatalog,
    /// `session.history.maxChars`
    pub history_max_chars: Option<u64>,
    /// `logging.redactPatterns`: regular expressions masked in 2026.9 history before the built-in
    /// patterns (each checked here: one the engine cannot apply is `INVALID_CONFIG`)
    pub history_redact_patterns: Vec<String>,
    /// `session.outbox.maxAttempts`, default 5, min 1
    pub outbox_max_attempts: u32,
    /// `session.outbox.backoffMs`, default 1000
    pub outbox_backoff_ms: u64,
    /// 2026.9: `session.outbox.completionRetry.{firstMs, maxMs, expireMs}`, the retry window
    /// of a sub-agent completion (default 15 s, 5 min, 30 min)
    pub completion_retry_ms: (u64, u64, u64),
    /// keys of the gateway config that moved to our settings and are still there
    /// ([`crate::settings::effective_config`])
    pub deprecated: Vec<crate::settings::Deprecated>,
    /// our own settings as given (the fields above hold their effect)
    pub settings: crate::settings::Settings,
    key_model: KeyModel,
}

impl Default for Config {
    fn default() -> Self {
        Config::from_json(&Value::Null).expect("the empty config is valid")
    }
}

impl Config {
    /// Reads the gateway config object. `null` (or a missing config) is the empty config; a
    /// non-object is refused. Every key listed in API.md §1.1 is type-checked: a wrong type, a
    /// negative number, a non-finite number, a send-policy `action`/`default` outside
    /// allow|deny, a `chatType` outside direct|dm|group|channel, a `scope` outside
    /// per-sender|global, a `sessionToolsVisibility` outside spawned|all, or a non-array
    /// `allow`/`allowAgents`/`rules`/`agents.list` is `INVALID_CONFIG` with a message naming the
    /// key path, e.g. `invalid config: session.sendPolicy.rules[1].action must be "allow" or
    /// "deny"`. Clamps instead of refusing where REFERENCE.md clamps (maxPingPongTurns 9 → 5).
    pub fn from_json(v: &Value) -> Result<Config> {
        Config::from_json_for(v, Contract::V2026_1)
    }

    /// As [`Config::from_json`], for a contract: 2026.9 reads `agents.entries.<id>` and
    /// `agents.ownership`, the sub-agent limits `maxSpawnDepth` (1–5), `maxChildrenPerAgent`
    /// (1–20) and `maxConcurrent` (≥ 1), turns `tools.agentToAgent.enabled` on unless it is
    /// literally `false`, and ignores `session.agentToAgent.maxPingPongTurns` (a constant).
    /// `tools.sessions.visibility` is read under both (absent → `all`).
    pub fn from_json_for(v: &Value, contract: Contract) -> Result<Config> {
        let rules: &Rules = contract.rules();
        let root = match v {
            Value::Null => Section { map: None, path: String::new() },
            Value::Object(map) => Section { map: Some(map), path: String::new() },
            _ => return Err(Error::invalid_config("invalid config: the config must be an object")),
        };

        let session = root.section("session")?;
        let scope = match session.lowered("scope")?.as_deref() {
            None | Some("per-sender") => Scope::PerSender,
            Some("global") => Scope::Global,
            Some(_) => return Err(session.bad("scope", r#"must be "per-sender" or "global""#)),
        };
        let main_key = sessions::read_main_key(&session)?;
        let store = session.trimmed("store")?;
        let send_policy = sessions::read_send_policy(&session.section("sendPolicy")?)?;
        let a2a_session = session.section("agentToAgent")?;
        // The gateway's schema refuses anything but a whole number 0..5 (its run time clamps);
        // 2026.9 has no such key (a constant).
        let max_ping_pong_turns = if rules.ping_pong_turns_configurable {
            match a2a_session.number("maxPingPongTurns")? {
                Some(n) if n.fract() != 0.0 || n > 5.0 => {
                    return Err(a2a_session.bad("maxPingPongTurns", "must be a whole number from 0 to 5"))
                }
                n => n.map_or(rules.ping_pong_turns, floor_u32),
            }
        } else {
            rules.ping_pong_turns
        };
        let max_chain_turns = a2a_session.number("maxChainTurns")?.map_or(20, floor_u32);
        let history_max_chars = session.section("history")?.number("maxChars")?.map(floor_u64);
        let outbox = session.section("outbox")?;
        let outbox_max_attempts = outbox.number("maxAttempts")?.map_or(5, |n| floor_u32(n).max(1));
        let outbox_backoff_ms = outbox.number("backoffMs")?.map_or(1000, floor_u64);
        let retry = outbox.section("completionRetry")?;
        let completion_retry_ms = (
            retry.number("firstMs")?.map_or(15_000, floor_u64),
            retry.number("maxMs")?.map_or(300_000, floor_u64),
            retry.number("expireMs")?.map_or(1_800_000, floor_u64),
        );

        let tools = root.section("tools")?;
        let a2a_tools = tools.section("agentToAgent")?;
        let agent_to_agent = AgentToAgentConfig {
            enabled: a2a_tools.boolean("enabled")?.unwrap_or(rules.a2a_enabled_by_default),
            allow: a2a_tools.strings("allow")?.unwrap_or_default(),
        };
        let session_visibility = agents::read_session_visibility(&tools, rules)?;
        let spawn_attachments = if rules.agents_entries {
            agents::read_attachment_limits(&tools.section("sessions_spawn")?.section("attachments")?)?
        } else {
            AttachmentLimits::default()
        };
        let subagent_tools = tools.section("subagents")?.section("tools")?;
        let subagent_tools_allow = subagent_tools.strings("allow")?;
        let subagent_tools_deny = subagent_tools.strings("deny")?.unwrap_or_default();

        let agents = root.section("agents")?;
        let defaults = agents.section("defaults")?;
        let default_timeout_seconds = defaults.number("timeoutSeconds")?.map_or(600, |n| floor_u64(n).max(1));
        let sandbox_visibility = agents::read_visibility(&defaults.section("sandbox")?)?.unwrap_or_default();
        let sandbox_mode = if rules.agents_entries {
            agents::read_sandbox_mode(&defaults.section("sandbox")?)?.unwrap_or_default()
        } else {
            SandboxMode::Off
        };
        let default_model = defaults.model("model")?;
        let subagents = agents::read_subagent_defaults(&defaults.section("subagents")?, rules)?;
        let agent_list = agents::read_agents(&agents, rules)?;
        let agents_ownership_explicit = rules.agents_entries && agents.lowered("ownership")?.is_some();
        let default_agent = agent_list
            .iter()
            .find(|a| a.is_default)
            .or_else(|| agent_list.first())
            .map_or(DEFAULT_AGENT_ID, |a| a.id.as_str())
            .to_string();

        let history_redact_patterns = root.section("logging")?.strings("redactPatterns")?.unwrap_or_default();
        for p in &history_redact_patterns {
            if let Err(why) = crate::tools::v2026_9::redact_rx::configured(p) {
                return Err(Error::invalid_config(format!("invalid config: logging.redactPatterns {p:?} {why}")));
            }
        }
        let queue = sessions::read_queue(&root.section("messages")?.section("queue")?)?;
        let models = models::read_catalog(&root.section("models")?.section("providers")?)?;

        let key_model = KeyModel::new(scope == Scope::Global, &main_key, &default_agent);
        Ok(Config {
            contract,
            scope,
            store,
            main_key: key_model.main_key().to_string(),
            send_policy,
            max_ping_pong_turns,
            max_chain_turns,
            agent_to_agent,
            session_visibility,
            subagent_tools_allow,
            subagent_tools_deny,
            default_timeout_seconds,
            spawn_attachments,
            sandbox_visibility,
            sandbox_mode,
            subagents,
            default_model,
            agents: agent_list,
            agents_ownership_explicit,
            queue,
            models,
            history_max_chars,
            history_redact_patterns,
            outbox_max_attempts,
            outbox_backoff_ms,
            completion_retry_ms,
            deprecated: Vec::new(),
            settings: Default::default(),
            key_model,
        })
    }

    /// The table of differences of this config's contract.
    pub fn rules(&self) -> &'static Rules {
        self.contract.rules()
    }

    /// The ping-pong turns of an exchange a requester starts: the configured value (2026.1), or
    /// the constant of 2026.9, which is 0 when the requester is a cron session.
    pub fn ping_pong_turns_for(&self, requester_key: Option<&str>) -> u32 {
        let cron = requester_key.is_some_and(|k| crate::keys::key_kind(k) == crate::keys::SessionKind::Cron);
        if !self.rules().ping_pong_turns_configurable && cron {
            0
        } else {
            self.max_ping_pong_turns
        }
    }

    pub fn key_model(&self) -> &KeyModel {
        &self.key_model
    }

    /// §1.1: the first `agents.list[]` entry with `default: true`, else the first entry, else
    /// `main`.
    pub fn default_agent_id(&self) -> &str {
        self.key_model.default_agent()
    }

    /// The `agents.list[]` entry with this (normalized) id.
    pub fn agent(&self, agent_id: &str) -> Option<&AgentConfig> {
        let id = normalize_agent_id(agent_id);
        self.agents.iter().find(|a| a.id == id)
    }

    /// The agents whose sessions the gateway lists (it reads only their stores): with an
    /// `agents.list`, its ids and the default agent; without one, every agent (`None`).
    pub fn listed_agents(&self) -> Option<Vec<String>> {
        let mut ids: Vec<String> = self.agents.iter().map(|a| a.id.clone()).collect();
        if ids.is_empty() {
            return None;
        }
        ids.push(self.default_agent_id().to_owned());
        ids.sort();
        ids.dedup();
        Some(ids)
    }

    /// 2026.9: the agent's `sandbox.mode`, else the defaults'.
    pub fn sandbox_mode_for(&self, agent_id: &str) -> SandboxMode {
        self.agent(agent_id).and_then(|a| a.sandbox_mode).unwrap_or(self.sandbox_mode)
    }

    /// DECISIONS.md: the per-agent `sandbox.sessionToolsVisibility` wins over the default.
    pub fn visibility_for(&self, agent_id: &str) -> Visibility {
        self.agent(agent_id).and_then(|a| a.sandbox_visibility).unwrap_or(self.sandbox_visibility)
    }
}

#[cfg(test)]
mod tests;

#[cfg(test)]
mod tests_2026_9;
