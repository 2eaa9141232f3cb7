//! `sessions.patch` field by field (§2.5): the label check, the vocabularies and applying a
//! patch to an entry.

use super::*;

use serde_json::{Map, Value};

use crate::config::Config;
use crate::entry::{self, Entry};
use crate::error::{Error, Result};

/// §2.7 label validation.
pub fn check_label(v: &Value) -> Result<String> {
    let s = v.as_str().ok_or_else(|| Error::invalid_request("invalid label: must be a string"))?;
    let t = s.trim();
    if t.is_empty() {
        return Err(Error::invalid_request("invalid label: empty"));
    }
    if t.chars().count() > entry::MAX_LABEL_LEN {
        return Err(Error::invalid_request(format!("invalid label: too long (max {})", entry::MAX_LABEL_LEN)));
    }
    Ok(t.to_owned())
}

pub(super) const THINKING_LEVELS: &[&str] = &["off", "minimal", "low", "medium", "high", "xhigh"];

pub(super) fn vocab(field: &str, v: &Value, allowed: &[&str], hint: &str) -> Result<String> {
    let s = v.as_str().map(|s| s.trim().to_lowercase()).unwrap_or_default();
    if allowed.contains(&s.as_str()) {
        Ok(s)
    } else {
        Err(Error::invalid_request(format!("invalid {field} (use {hint})")))
    }
}

/// Applies the fields of a `sessions.patch` to `e` (§2.7), inside the write transaction.
pub(super) fn apply_patch(
    cfg: &Config,
    db: &crate::store::Db<'_>,
    key: &str,
    e: &mut Entry,
    o: &Map<String, Value>,
) -> Result<()> {
    let set = |e: &mut Entry, name: &str, v: Option<Value>| match v {
        Some(v) => {
            e.insert(name.into(), v);
        }
        None => {
            e.shift_remove(name);
        }
    };
    if let Some(v) = o.get("spawnedBy") {
        let existing = entry::str_field(e, "spawnedBy").map(str::to_owned);
        if v.is_null() {
            if existing.is_some() {
                return Err(Error::invalid_request("spawnedBy cannot be cleared once set"));
            }
        } else {
            let s = v.as_str().ok_or_else(|| Error::invalid_request("invalid spawnedBy: must be a string"))?.trim();
            if s.is_empty() {
                return Err(Error::invalid_request("invalid spawnedBy: empty"));
            }
            if !crate::keys::is_subagent_key(key) {
                return Err(Error::invalid_request("spawnedBy is only supported for subagent:* sessions"));
            }
            if let Some(prev) = existing {
                if prev != s && prev != canonical_spawned_by(cfg, key, s)? {
                    return Err(Error::invalid_request("spawnedBy cannot be changed once set"));
                }
            }
            let canonical = canonical_spawned_by(cfg, key, s)?;
            set(e, "spawnedBy", Some(Value::from(canonical)));
        }
    }
    if let Some(v) = o.get("label") {
        if v.is_null() {
            set(e, "label", None);
        } else {
            let label = check_label(v)?;
            let agent = crate::keys::parse_agent_key(key).map(|k| k.agent_id);
            if db.label_holder(&label, agent.as_deref(), key)?.is_some() {
                return Err(Error::invalid_request(format!("label already in use: {label}")));
            }
            set(e, "label", Some(Value::from(label)));
        }
    }
    if let Some(v) = o.get("thinkingLevel") {
        if v.is_null() {
            set(e, "thinkingLevel", None);
        } else {
            let lvl = vocab("thinkingLevel", v, THINKING_LEVELS, &THINKING_LEVELS.join("|"))?;
            set(e, "thinkingLevel", (lvl != "off").then(|| Value::from(lvl)));
        }
    }
    let simple: &[(&str, &[&str], &str, Option<&str>)] = &[
        ("verboseLevel", &["on", "off", "full"], "\"on\"|\"off\"", None),
        ("reasoningLevel", &["on", "off", "stream"], "\"on\"|\"off\"|\"stream\"", Some("off")),
        ("elevatedLevel", &["on", "off", "ask", "full"], "\"on\"|\"off\"|\"ask\"|\"full\"", None),
        ("execHost", &["sandbox", "gateway", "node"], "\"sandbox\"|\"gateway\"|\"node\"", None),
        ("execSecurity", &["deny", "allowlist", "full"], "\"deny\"|\"allowlist\"|\"full\"", None),
        ("execAsk", &["off", "on-miss", "always"], "\"off\"|\"on-miss\"|\"always\"", None),
        ("groupActivation", &["mention", "always"], "\"mention\"|\"always\"", None),
        ("sendPolicy", &["allow", "deny"], "\"allow\"|\"deny\"", None),
    ];
    for (field, allowed, hint, clears) in simple {
        if let Some(v) = o.get(*field) {
            if v.is_null() {
                set(e, field, None);
            } else {
                let s = vocab(field, v, allowed, hint)?;
                set(e, field, (Some(s.as_str()) != *clears).then(|| Value::from(s)));
            }
        }
    }
    if let Some(v) = o.get("responseUsage") {
        if v.is_null() {
            set(e, "responseUsage", None);
        } else {
            let s = vocab("responseUsage", v, &["on", "off", "tokens", "full"], "\"on\"|\"off\"|\"tokens\"|\"full\"")?;
            let s = if s == "on" { "tokens".to_owned() } else { s };
            set(e, "responseUsage", (s != "off").then(|| Value::from(s)));
        }
    }
    if let Some(v) = o.get("execNode") {
        if v.is_null() {
            set(e, "execNode", None);
        } else {
            let s = v.as_str().map(str::trim).filter(|s| !s.is_empty());
            let s = s.ok_or_else(|| Error::invalid_request("invalid execNode: empty"))?;
            set(e, "execNode", Some(Value::from(s)));
        }
    }
    if let Some(v) = o.get("model") {
        if v.is_null() {
            set(e, "providerOverride", None);
            set(e, "modelOverride", None);
        } else {
            let raw = v.as_str().map(str::trim).unwrap_or("");
            let resolved = cfg
                .models
                .resolve(raw)
                .filter(|_| !raw.is_empty())
                .ok_or_else(|| Error::invalid_request(format!("invalid model: {}", crate::error::clip(raw))))?;
            set(e, "providerOverride", resolved.provider.map(Value::from));
            set(e, "modelOverride", Some(Value::from(resolved.model)));
        }
        for f in ["authProfileOverride", "authProfileOverrideSource", "authProfileOverrideCompactionCount"] {
            set(e, f, None);
        }
    }
    Ok(())
}
