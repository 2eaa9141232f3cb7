//! A typed, validated view of the gateway's config object.
//!
//! Owns API.md §1.1: which keys are read, their defaults, clamps and validation. The config
//! arrives as JSON (the gateway's own object, unknown keys ignored) and leaves as a [`Config`]
//! that the rest of the engine reads without further checks. A malformed value is refused with
//! `INVALID_CONFIG` naming the key (DECISIONS.md #6: fail closed), never read as a default.

use std::collections::BTreeMap;

use serde_json::Value;

use crate::error::{Error, Result};
use crate::keys::{js_trim, normalize_agent_id, KeyModel, DEFAULT_AGENT_ID, MAX_KEY_LEN};

/// Longest `session.mainKey` accepted (bytes): leaves room for `agent:<64-char id>:` so that
/// every main session key stays within [`MAX_KEY_LEN`].
pub const MAX_MAIN_KEY_LEN: usize = MAX_KEY_LEN - 96;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Scope {
    #[default]
    PerSender,
    Global,
}

/// `sessionToolsVisibility`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Visibility {
    #[default]
    Spawned,
    All,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum PolicyAction {
    #[default]
    Allow,
    Deny,
}

impl PolicyAction {
    pub fn as_str(self) -> &'static str {
        match self {
            PolicyAction::Allow => "allow",
            PolicyAction::Deny => "deny",
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ChatType {
    Direct,
    Group,
    Channel,
}

impl ChatType {
    /// §7.1 normalization: trimmed, lower-cased; `direct`/`dm` → Direct; `group`; `channel`;
    /// anything else → None.
    pub fn normalize(raw: &str) -> Option<ChatType> {
        match js_trim(raw).to_lowercase().as_str() {
            "direct" | "dm" => Some(ChatType::Direct),
            "group" => Some(ChatType::Group),
            "channel" => Some(ChatType::Channel),
            _ => None,
        }
    }
}

/// One `session.sendPolicy.rules[]` entry, normalized (§7.1 step 6).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct SendPolicyRule {
    /// missing action → allow (REFERENCE.md §7.1); an action outside allow|deny is refused
    pub action: PolicyAction,
    /// trimmed, lower-cased; None when absent or empty
    pub channel: Option<String>,
    pub chat_type: Option<ChatType>,
    /// trimmed, lower-cased; None when absent or empty
    pub key_prefix: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct SendPolicyConfig {
    pub default: PolicyAction,
    pub rules: Vec<SendPolicyRule>,
}

/// `tools.agentToAgent`.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct AgentToAgentConfig {
    /// true only for the literal boolean `true`
    pub enabled: bool,
    /// the patterns as given (strings only; matching trims them)
    pub allow: Vec<String>,
}

/// One `agents.list[]` entry.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct AgentConfig {
    /// normalized
    pub id: String,
    /// trimmed, non-empty
    pub name: Option<String>,
    pub is_default: bool,
    /// `subagents.allowAgents` as given (strings)
    pub allow_agents: Vec<String>,
    /// `subagents.model` (a string, or `{primary}`), trimmed, non-empty
    pub subagent_model: Option<String>,
    pub sandbox_visibility: Option<Visibility>,
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
    /// default 8
    pub max_active: u32,
}

impl Default for SubagentDefaults {
    fn default() -> Self {
        SubagentDefaults { archive_after_minutes: Some(60.0), model: None, max_active: 8 }
    }
}

/// `messages.queue.*` (REFERENCE.md §6.8), kept close to the raw shape: normalizing the mode
/// vocabulary is the orchestration's job.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct QueueConfig {
    pub mode: Option<String>,
    /// keys lower-cased
    pub by_channel: BTreeMap<String, String>,
    pub debounce_ms: Option<u64>,
    /// keys lower-cased
    pub debounce_ms_by_channel: BTreeMap<String, u64>,
    pub cap: Option<u32>,
    pub drop: Option<String>,
}

/// Per-million-token prices of a model.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct ModelCost {
    pub input: f64,
    pub output: f64,
    pub cache_read: f64,
    pub cache_write: f64,
}

#[derive(Debug, Clone, PartialEq)]
pub struct CatalogModel {
    pub id: String,
    pub cost: Option<ModelCost>,
}

/// `models.providers.<provider>.models[]`, in config order.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct ModelCatalog {
    pub providers: Vec<(String, Vec<CatalogModel>)>,
}

/// A model reference resolved against the catalog.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ModelRef {
    /// None only when no catalog is configured and the ref had no `provider/` part
    pub provider: Option<String>,
    pub model: String,
}

impl ModelCatalog {
    /// No provider lists any model.
    pub fn is_empty(&self) -> bool {
        self.providers.iter().all(|(_, models)| models.is_empty())
    }
    /// API.md §1.1: `provider/id` is valid when listed under that provider; a bare `id` when
    /// listed under some provider (the first in config order wins); with an empty
    /// catalog every non-empty ref is valid (`provider/id` split at the first `/`). None =
    /// invalid. The ref is trimmed first. A `provider/id` whose provider does not list it is
    /// also tried as a bare id (model ids may contain `/`, e.g. `meta-llama/Llama-3`). Provider
    /// names match case-insensitively, model ids exactly.
    pub fn resolve(&self, model_ref: &str) -> Option<ModelRef> {
        let model_ref = js_trim(model_ref);
        if model_ref.is_empty() {
            return None;
        }
        let split = model_ref
            .split_once('/')
            .map(|(p, m)| (js_trim(p), js_trim(m)))
            .filter(|(p, m)| !p.is_empty() && !m.is_empty());
        if self.is_empty() {
            return Some(match split {
                Some((p, m)) => ModelRef { provider: Some(p.to_string()), model: m.to_string() },
                None => ModelRef { provider: None, model: model_ref.to_string() },
            });
        }
        let listed = |provider: &str, model: &str| {
            self.provider(provider)
                .filter(|(_, models)| models.iter().any(|m| m.id == model))
                .map(|(name, _)| ModelRef { provider: Some(name.clone()), model: model.to_string() })
        };
        if let Some(found) = split.and_then(|(p, m)| listed(p, m)) {
            return Some(found);
        }
        self.providers
            .iter()
            .find(|(_, models)| models.iter().any(|m| m.id == model_ref))
            .map(|(name, _)| ModelRef { provider: Some(name.clone()), model: model_ref.to_string() })
    }

    pub fn cost(&self, provider: &str, model: &str) -> Option<&ModelCost> {
        self.provider(provider)?.1.iter().find(|m| m.id == model)?.cost.as_ref()
    }

    /// The first provider of this name (trimmed, case-insensitive).
    fn provider(&self, provider: &str) -> Option<&(String, Vec<CatalogModel>)> {
        let wanted = js_trim(provider).to_lowercase();
        self.providers.iter().find(|(name, _)| name.to_lowercase() == wanted)
    }
}

/// The whole typed config.
#[derive(Debug, Clone, PartialEq)]
pub struct Config {
    pub scope: Scope,
    /// `session.store`, trimmed (only reported as `sessions.list`'s `path`)
    pub store: Option<String>,
    /// trimmed, lower-cased, empty → `main`
    pub main_key: String,
    pub send_policy: Option<SendPolicyConfig>,
    /// default 5; floored, clamped to 0..=5
    pub max_ping_pong_turns: u32,
    /// default 20 (DECISIONS.md #4)
    pub max_chain_turns: u32,
    pub agent_to_agent: AgentToAgentConfig,
    pub subagent_tools_allow: Option<Vec<String>>,
    pub subagent_tools_deny: Vec<String>,
    /// `agents.defaults.timeoutSeconds`, default 600, floored, min 1
    pub default_timeout_seconds: u64,
    /// `agents.defaults.sandbox.sessionToolsVisibility`, default spawned
    pub sandbox_visibility: Visibility,
    pub subagents: SubagentDefaults,
    pub agents: Vec<AgentConfig>,
    pub queue: QueueConfig,
    pub models: ModelCatalog,
    /// `session.history.maxChars`
    pub history_max_chars: Option<u64>,
    /// `session.outbox.maxAttempts`, default 5, min 1
    pub outbox_max_attempts: u32,
    /// `session.outbox.backoffMs`, default 1000
    pub outbox_backoff_ms: u64,
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
        let main_key = read_main_key(&session)?;
        let store = session.trimmed("store")?;
        let send_policy = read_send_policy(&session.section("sendPolicy")?)?;
        let a2a_session = session.section("agentToAgent")?;
        // The gateway's schema refuses anything but a whole number 0..5 (its run time clamps).
        let max_ping_pong_turns = match a2a_session.number("maxPingPongTurns")? {
            Some(n) if n.fract() != 0.0 || n > 5.0 => {
                return Err(a2a_session.bad("maxPingPongTurns", "must be a whole number from 0 to 5"))
            }
            n => n.map_or(5, floor_u32),
        };
        let max_chain_turns = a2a_session.number("maxChainTurns")?.map_or(20, floor_u32);
        let history_max_chars = session.section("history")?.number("maxChars")?.map(floor_u64);
        let outbox = session.section("outbox")?;
        let outbox_max_attempts = outbox.number("maxAttempts")?.map_or(5, |n| floor_u32(n).max(1));
        let outbox_backoff_ms = outbox.number("backoffMs")?.map_or(1000, floor_u64);

        let tools = root.section("tools")?;
        let a2a_tools = tools.section("agentToAgent")?;
        let agent_to_agent = AgentToAgentConfig {
            enabled: a2a_tools.boolean("enabled")? == Some(true),
            allow: a2a_tools.strings("allow")?.unwrap_or_default(),
        };
        let subagent_tools = tools.section("subagents")?.section("tools")?;
        let subagent_tools_allow = subagent_tools.strings("allow")?;
        let subagent_tools_deny = subagent_tools.strings("deny")?.unwrap_or_default();

        let agents = root.section("agents")?;
        let defaults = agents.section("defaults")?;
        let default_timeout_seconds = defaults.number("timeoutSeconds")?.map_or(600, |n| floor_u64(n).max(1));
        let sandbox_visibility = read_visibility(&defaults.section("sandbox")?)?.unwrap_or_default();
        let sub = defaults.section("subagents")?;
        let subagents = SubagentDefaults {
            archive_after_minutes: sub.number("archiveAfterMinutes")?.map_or(Some(60.0), |n| (n > 0.0).then_some(n)),
            model: sub.model("model")?,
            max_active: sub.number("maxActive")?.map_or(8, floor_u32),
        };
        let agent_list = read_agents(&agents)?;
        let default_agent = agent_list
            .iter()
            .find(|a| a.is_default)
            .or_else(|| agent_list.first())
            .map_or(DEFAULT_AGENT_ID, |a| a.id.as_str())
            .to_string();

        let queue = read_queue(&root.section("messages")?.section("queue")?)?;
        let models = read_catalog(&root.section("models")?.section("providers")?)?;

        let key_model = KeyModel::new(scope == Scope::Global, &main_key, &default_agent);
        Ok(Config {
            scope,
            store,
            main_key: key_model.main_key().to_string(),
            send_policy,
            max_ping_pong_turns,
            max_chain_turns,
            agent_to_agent,
            subagent_tools_allow,
            subagent_tools_deny,
            default_timeout_seconds,
            sandbox_visibility,
            subagents,
            agents: agent_list,
            queue,
            models,
            history_max_chars,
            outbox_max_attempts,
            outbox_backoff_ms,
            deprecated: Vec::new(),
            settings: Default::default(),
            key_model,
        })
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

    /// DECISIONS.md: the per-agent `sandbox.sessionToolsVisibility` wins over the default.
    pub fn visibility_for(&self, agent_id: &str) -> Visibility {
        self.agent(agent_id).and_then(|a| a.sandbox_visibility).unwrap_or(self.sandbox_visibility)
    }
}

// ---------------------------------------------------------------------------------------------
// Reading: every reader takes the full key path so that a refusal can name it.

type Map = serde_json::Map<String, Value>;

fn invalid(path: &str, what: &str) -> Error {
    Error::invalid_config(format!("invalid config: {path} {what}"))
}

fn join(path: &str, key: &str) -> String {
    if path.is_empty() {
        key.to_string()
    } else {
        format!("{path}.{key}")
    }
}

/// `null` counts as absent.
fn present(v: Option<&Value>) -> Option<&Value> {
    v.filter(|v| !v.is_null())
}

/// An object of the config (possibly absent) and where it sits.
struct Section<'a> {
    map: Option<&'a Map>,
    path: String,
}

impl<'a> Section<'a> {
    fn at(v: Option<&'a Value>, path: String) -> Result<Section<'a>> {
        match present(v) {
            None => Ok(Section { map: None, path }),
            Some(Value::Object(map)) => Ok(Section { map: Some(map), path }),
            Some(_) => Err(invalid(&path, "must be an object")),
        }
    }
    fn get(&self, key: &str) -> Option<&'a Value> {
        present(self.map.and_then(|m| m.get(key)))
    }
    fn path_of(&self, key: &str) -> String {
        join(&self.path, key)
    }
    fn bad(&self, key: &str, what: &str) -> Error {
        invalid(&self.path_of(key), what)
    }
    fn section(&self, key: &str) -> Result<Section<'a>> {
        Section::at(self.get(key), self.path_of(key))
    }
    fn string(&self, key: &str) -> Result<Option<&'a str>> {
        string_at(self.get(key), &self.path_of(key))
    }
    /// A string, trimmed and lower-cased.
    fn lowered(&self, key: &str) -> Result<Option<String>> {
        Ok(self.string(key)?.map(|s| js_trim(s).to_lowercase()))
    }
    /// A string, trimmed; None when blank.
    fn trimmed(&self, key: &str) -> Result<Option<String>> {
        Ok(self.string(key)?.map(js_trim).filter(|s| !s.is_empty()).map(str::to_string))
    }
    fn boolean(&self, key: &str) -> Result<Option<bool>> {
        match self.get(key) {
            None => Ok(None),
            Some(Value::Bool(b)) => Ok(Some(*b)),
            Some(_) => Err(self.bad(key, "must be a boolean")),
        }
    }
    fn number(&self, key: &str) -> Result<Option<f64>> {
        number_at(self.get(key), &self.path_of(key))
    }
    fn strings(&self, key: &str) -> Result<Option<Vec<String>>> {
        match self.get(key) {
            None => Ok(None),
            Some(Value::Array(items)) => items
                .iter()
                .map(|item| item.as_str().map(str::to_string))
                .collect::<Option<Vec<_>>>()
                .map(Some)
                .ok_or_else(|| self.bad(key, "must be an array of strings")),
            Some(_) => Err(self.bad(key, "must be an array of strings")),
        }
    }
    fn array(&self, key: &str) -> Result<&'a [Value]> {
        match self.get(key) {
            None => Ok(&[]),
            Some(Value::Array(items)) => Ok(items),
            Some(_) => Err(self.bad(key, "must be an array")),
        }
    }
    /// A model ref: a string, or `{primary: string}`; trimmed, None when blank.
    fn model(&self, key: &str) -> Result<Option<String>> {
        let path = self.path_of(key);
        let primary = match self.get(key) {
            None => return Ok(None),
            Some(Value::String(s)) => s.as_str(),
            Some(Value::Object(map)) => match string_at(present(map.get("primary")), &join(&path, "primary"))? {
                Some(s) => s,
                None => return Ok(None),
            },
            Some(_) => return Err(invalid(&path, r#"must be a string or an object with a string "primary""#)),
        };
        let primary = js_trim(primary);
        Ok((!primary.is_empty()).then(|| primary.to_string()))
    }
    /// The entries of an object-valued key, in config order (`null` values skipped).
    fn entries(&self, key: &str) -> Result<Vec<(&'a String, &'a Value, String)>> {
        Ok(self.section(key)?.entries_here())
    }
    /// The entries of this object, in config order (`null` values skipped).
    fn entries_here(&self) -> Vec<(&'a String, &'a Value, String)> {
        self.map.into_iter().flatten().filter(|(_, v)| !v.is_null()).map(|(k, v)| (k, v, self.path_of(k))).collect()
    }
}

fn string_at<'a>(v: Option<&'a Value>, path: &str) -> Result<Option<&'a str>> {
    match v {
        None => Ok(None),
        Some(Value::String(s)) => Ok(Some(s)),
        Some(_) => Err(invalid(path, "must be a string")),
    }
}

/// A finite, non-negative number.
pub(crate) fn number_at(v: Option<&Value>, path: &str) -> Result<Option<f64>> {
    match v {
        None => Ok(None),
        Some(Value::Number(n)) => match n.as_f64() {
            Some(f) if f.is_finite() && f >= 0.0 => Ok(Some(f)),
            _ => Err(invalid(path, "must be a non-negative number")),
        },
        Some(_) => Err(invalid(path, "must be a non-negative number")),
    }
}

/// Floors a finite non-negative number; `as` saturates, so huge values become the maximum.
pub(crate) fn floor_u64(n: f64) -> u64 {
    n.floor() as u64
}

pub(crate) fn floor_u32(n: f64) -> u32 {
    n.floor() as u32
}

fn read_main_key(session: &Section<'_>) -> Result<String> {
    let Some(raw) = session.string("mainKey")? else {
        return Ok(String::new());
    };
    let key = js_trim(raw);
    if key.chars().any(char::is_control) {
        return Err(session.bad("mainKey", "must not contain control characters"));
    }
    if key.len() > MAX_MAIN_KEY_LEN {
        return Err(session.bad("mainKey", &format!("must be at most {MAX_MAIN_KEY_LEN} bytes")));
    }
    Ok(key.to_string())
}

fn read_action(section: &Section<'_>, key: &str) -> Result<Option<PolicyAction>> {
    let bad = || section.bad(key, r#"must be "allow" or "deny""#);
    match section.get(key) {
        None => Ok(None),
        Some(Value::String(s)) => match js_trim(s).to_lowercase().as_str() {
            "allow" => Ok(Some(PolicyAction::Allow)),
            "deny" => Ok(Some(PolicyAction::Deny)),
            _ => Err(bad()),
        },
        Some(_) => Err(bad()),
    }
}

fn read_send_policy(policy: &Section<'_>) -> Result<Option<SendPolicyConfig>> {
    if policy.map.is_none() {
        return Ok(None);
    }
    let default = read_action(policy, "default")?.unwrap_or_default();
    let rules = policy
        .array("rules")?
        .iter()
        .enumerate()
        .map(|(i, rule)| read_rule(Section::at(Some(rule), format!("{}.rules[{i}]", policy.path))?))
        .collect::<Result<Vec<_>>>()?;
    Ok(Some(SendPolicyConfig { default, rules }))
}

fn read_rule(rule: Section<'_>) -> Result<SendPolicyRule> {
    if rule.map.is_none() {
        // a `null` rule is no rule at all, not a match-everything allow
        return Err(invalid(&rule.path, "must be an object"));
    }
    // Required, as the gateway's schema has it (it refuses a config with a rule without one).
    let action =
        read_action(&rule, "action")?.ok_or_else(|| rule.bad("action", r#"is required: "allow" or "deny""#))?;
    let matcher = rule.section("match")?;
    let channel = matcher.lowered("channel")?.filter(|c| !c.is_empty());
    let chat_type = match matcher.string("chatType")?.map(js_trim).filter(|t| !t.is_empty()) {
        None => None,
        Some(t) => Some(
            ChatType::normalize(t)
                .ok_or_else(|| matcher.bad("chatType", r#"must be one of "direct", "dm", "group", "channel""#))?,
        ),
    };
    let key_prefix = matcher.lowered("keyPrefix")?.filter(|p| !p.is_empty());
    Ok(SendPolicyRule { action, channel, chat_type, key_prefix })
}

fn read_visibility(section: &Section<'_>) -> Result<Option<Visibility>> {
    const KEY: &str = "sessionToolsVisibility";
    match section.lowered(KEY)?.as_deref() {
        None => Ok(None),
        Some("spawned") => Ok(Some(Visibility::Spawned)),
        Some("all") => Ok(Some(Visibility::All)),
        Some(_) => Err(section.bad(KEY, r#"must be "spawned" or "all""#)),
    }
}

fn read_agents(agents: &Section<'_>) -> Result<Vec<AgentConfig>> {
    agents
        .array("list")?
        .iter()
        .enumerate()
        .map(|(i, entry)| {
            let path = format!("{}[{i}]", agents.path_of("list"));
            let entry = Section::at(Some(entry), path)?;
            if entry.map.is_none() {
                return Err(invalid(&entry.path, "must be an object"));
            }
            let id = entry.string("id")?.ok_or_else(|| entry.bad("id", "must be a string"))?;
            let subagents = entry.section("subagents")?;
            Ok(AgentConfig {
                id: normalize_agent_id(id),
                name: entry.trimmed("name")?,
                is_default: entry.boolean("default")? == Some(true),
                allow_agents: subagents.strings("allowAgents")?.unwrap_or_default(),
                subagent_model: subagents.model("model")?,
                sandbox_visibility: read_visibility(&entry.section("sandbox")?)?,
            })
        })
        .collect()
}

fn read_queue(queue: &Section<'_>) -> Result<QueueConfig> {
    let by_channel = queue
        .entries("byChannel")?
        .into_iter()
        .map(|(channel, v, path)| {
            let mode = string_at(Some(v), &path)?.unwrap_or_default();
            Ok((js_trim(channel).to_lowercase(), js_trim(mode).to_string()))
        })
        .collect::<Result<_>>()?;
    let debounce_ms_by_channel = queue
        .entries("debounceMsByChannel")?
        .into_iter()
        .map(|(channel, v, path)| {
            let ms = number_at(Some(v), &path)?.map_or(0, floor_u64);
            Ok((js_trim(channel).to_lowercase(), ms))
        })
        .collect::<Result<_>>()?;
    Ok(QueueConfig {
        mode: queue.trimmed("mode")?,
        by_channel,
        debounce_ms: queue.number("debounceMs")?.map(floor_u64),
        debounce_ms_by_channel,
        cap: queue.number("cap")?.map(|n| floor_u32(n).max(1)),
        drop: queue.trimmed("drop")?,
    })
}

fn read_catalog(providers: &Section<'_>) -> Result<ModelCatalog> {
    let mut catalog = ModelCatalog::default();
    for (name, value, path) in providers.entries_here() {
        let provider = Section::at(Some(value), path)?;
        let models = provider
            .array("models")?
            .iter()
            .enumerate()
            .map(|(i, model)| {
                let model = Section::at(Some(model), format!("{}[{i}]", provider.path_of("models")))?;
                if model.map.is_none() {
                    return Err(invalid(&model.path, "must be an object"));
                }
                let id = model.trimmed("id")?.ok_or_else(|| model.bad("id", "must be a non-empty string"))?;
                let cost = model.section("cost")?;
                let cost = match cost.map {
                    None => None,
                    Some(_) => Some(ModelCost {
                        input: cost.number("input")?.unwrap_or(0.0),
                        output: cost.number("output")?.unwrap_or(0.0),
                        cache_read: cost.number("cacheRead")?.unwrap_or(0.0),
                        cache_write: cost.number("cacheWrite")?.unwrap_or(0.0),
                    }),
                };
                Ok(CatalogModel { id, cost })
            })
            .collect::<Result<Vec<_>>>()?;
        catalog.providers.push((name.clone(), models));
    }
    Ok(catalog)
}

#[cfg(test)]
#[path = "config_tests.rs"]
mod tests;
