//! `session.*` and `messages.queue.*`: scope, the send policy and its rules, and the queue
//! settings, read and validated. Reads only these sections; decides nothing about a send.

use std::collections::BTreeMap;

use serde_json::Value;

use super::read::{floor_u32, floor_u64, invalid, number_at, string_at, Section};
use super::MAX_MAIN_KEY_LEN;
use crate::error::Result;
use crate::keys::js_trim;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Scope {
    #[default]
    PerSender,
    Global,
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
    /// required (the gateway's schema refuses a rule without one); outside allow|deny is refused
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

pub(super) fn read_main_key(session: &Section<'_>) -> Result<String> {
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

pub(super) fn read_send_policy(policy: &Section<'_>) -> Result<Option<SendPolicyConfig>> {
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

pub(super) fn read_queue(queue: &Section<'_>) -> Result<QueueConfig> {
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
