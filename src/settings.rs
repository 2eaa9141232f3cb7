//! Our own settings, the ones the gateway's config has no place for (its schema refuses a file
//! that carries them): `contract` (the gateway we answer as), `history.maxChars`,
//! `outbox.maxAttempts`, `outbox.backoffMs`, `agentToAgent.maxChainTurns` and
//! `ownership.leaseMs`. They come from `SessionTools.open({ …, settings })` and
//! `setConfig(config, settings)`; the gateway config stays exactly what the gateway accepts.
//!
//! For one release the old places in the gateway config (`session.history`, `session.outbox`,
//! `session.agentToAgent.maxChainTurns`) are still read, a setting given here winning, and each
//! one found is listed so that the orchestrator can emit `config.deprecated`. This module reads
//! and checks; it never emits, and never touches the gateway keys it does not own.

use serde_json::{Map, Value};

use crate::config::{floor_u32, floor_u64, number_at, Config};
use crate::contract::Contract;
use crate::error::{Error, Result};

/// The settings as given (`None`: not given).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Settings {
    /// `contract`: `'2026.1'` or `'2026.9'` (None: the one in force, else 2026.1)
    pub contract: Option<Contract>,
    /// `history.maxChars`: the default `maxChars` of `sessions_history`
    pub history_max_chars: Option<u64>,
    /// `outbox.maxAttempts` (min 1)
    pub outbox_max_attempts: Option<u32>,
    /// `outbox.backoffMs`
    pub outbox_backoff_ms: Option<u64>,
    /// `agentToAgent.maxChainTurns`
    pub max_chain_turns: Option<u32>,
    /// `ownership.leaseMs` (clamped to `owner::MIN_LEASE_MS..=owner::MAX_LEASE_MS`)
    pub lease_ms: Option<u64>,
    /// `outbox.completionRetry.{firstMs, maxMs, expireMs}` (2026.9 completions)
    pub completion_retry_ms: (Option<u64>, Option<u64>, Option<u64>),
}

/// A key of the gateway config that moved to the settings: where it was, where it goes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Deprecated {
    pub key: &'static str,
    pub moved_to: &'static str,
}

const MOVED: [Deprecated; 3] = [
    Deprecated { key: "session.history", moved_to: "settings.history" },
    Deprecated { key: "session.outbox", moved_to: "settings.outbox" },
    Deprecated { key: "session.agentToAgent.maxChainTurns", moved_to: "settings.agentToAgent.maxChainTurns" },
];

fn refused(path: &str, what: &str) -> Error {
    Error::invalid_config(format!("invalid settings: {path} {what}"))
}

/// An object of the settings (`None` when absent or null), every key of it one of `known`.
fn object<'a>(v: Option<&'a Value>, path: &str, known: &[&str]) -> Result<Option<&'a Map<String, Value>>> {
    match v {
        None | Some(Value::Null) => Ok(None),
        Some(Value::Object(m)) => {
            if let Some(k) = m.keys().find(|k| !known.contains(&k.as_str())) {
                let what = format!("is not a setting (known here: {})", known.join(", "));
                return Err(refused(&format!("{path}.{k}"), &what));
            }
            Ok(Some(m))
        }
        Some(_) => Err(refused(path, "must be an object")),
    }
}

fn number(m: Option<&Map<String, Value>>, path: &str, key: &str) -> Result<Option<f64>> {
    let v = m.and_then(|m| m.get(key)).filter(|v| !v.is_null());
    number_at(v, &format!("{path}.{key}"))
        .map_err(|_| refused(&format!("{path}.{key}"), "must be a non-negative number"))
}

impl Settings {
    /// Reads `settings` (`null`/absent: none given). A key that is not a setting, a section
    /// that is not an object, or a value that is not a finite non-negative number is
    /// `INVALID_CONFIG` naming the key, e.g. `invalid settings: settings.outbox.backoffMs must be
    /// a non-negative number`.
    pub fn from_json(v: &Value) -> Result<Settings> {
        let root = object(Some(v), "settings", &["contract", "history", "outbox", "agentToAgent", "ownership"])?;
        let contract = match root.and_then(|r| r.get("contract")) {
            Some(c) => Contract::from_option(c, "settings.contract")?,
            None => None,
        };
        let section =
            |key: &str, known: &[&str]| object(root.and_then(|r| r.get(key)), &format!("settings.{key}"), known);
        let history = section("history", &["maxChars"])?;
        let outbox = section("outbox", &["maxAttempts", "backoffMs", "completionRetry"])?;
        let retry = object(
            outbox.and_then(|o| o.get("completionRetry")),
            "settings.outbox.completionRetry",
            &["firstMs", "maxMs", "expireMs"],
        )?;
        let retry_ms = |k: &str| number(retry, "settings.outbox.completionRetry", k).map(|n| n.map(floor_u64));
        let a2a = section("agentToAgent", &["maxChainTurns"])?;
        let ownership = section("ownership", &["leaseMs"])?;
        Ok(Settings {
            contract,
            history_max_chars: number(history, "settings.history", "maxChars")?.map(floor_u64),
            outbox_max_attempts: number(outbox, "settings.outbox", "maxAttempts")?.map(|n| floor_u32(n).max(1)),
            outbox_backoff_ms: number(outbox, "settings.outbox", "backoffMs")?.map(floor_u64),
            max_chain_turns: number(a2a, "settings.agentToAgent", "maxChainTurns")?.map(floor_u32),
            lease_ms: number(ownership, "settings.ownership", "leaseMs")?
                .map(|n| floor_u64(n).clamp(crate::owner::MIN_LEASE_MS, crate::owner::MAX_LEASE_MS)),
            completion_retry_ms: (retry_ms("firstMs")?, retry_ms("maxMs")?, retry_ms("expireMs")?),
        })
    }
}

/// The keys of the gateway config `config` that moved to the settings and are still there.
pub fn deprecated_in(config: &Value) -> Vec<Deprecated> {
    MOVED
        .iter()
        .filter(|d| {
            let mut at = Some(config);
            for part in d.key.split('.') {
                at = at.and_then(|v| v.get(part));
            }
            at.is_some_and(|v| !v.is_null())
        })
        .copied()
        .collect()
}

/// The config the engine runs with: the gateway config `config` and our `settings`, a setting
/// winning over its deprecated place in the gateway config; the settings and the deprecated
/// keys found are kept on it (`Config::settings`, `Config::deprecated`). `contract` is
/// `open`'s own `contract` option; given with a different `settings.contract` it is refused.
pub fn effective_config(config: &Value, settings: &Value, contract: Option<Contract>) -> Result<Config> {
    let mut s = Settings::from_json(settings)?;
    match (contract, s.contract) {
        (Some(a), Some(b)) if a != b => {
            return Err(Error::invalid_config("invalid settings: options.contract and settings.contract differ"))
        }
        (Some(a), _) => s.contract = Some(a),
        _ => {}
    }
    let contract = s.contract.unwrap_or_default();
    with_settings(config, s, contract)
}

/// `setConfig(config, settings?)`: the settings given, or without them the ones in force; the
/// contract in force stays unless the settings name one.
pub fn next_config(current: &Config, config: &Value, settings: Option<&Value>) -> Result<Config> {
    let s = match settings {
        Some(v) => Settings::from_json(v)?,
        None => current.settings.clone(),
    };
    let contract = s.contract.unwrap_or(current.contract);
    with_settings(config, s, contract)
}

fn with_settings(config: &Value, s: Settings, contract: Contract) -> Result<Config> {
    let mut c = Config::from_json_for(config, contract)?;
    if let Some(v) = s.history_max_chars {
        c.history_max_chars = Some(v);
    }
    if let Some(v) = s.outbox_max_attempts {
        c.outbox_max_attempts = v;
    }
    if let Some(v) = s.outbox_backoff_ms {
        c.outbox_backoff_ms = v;
    }
    if let Some(v) = s.max_chain_turns {
        c.max_chain_turns = v;
    }
    let (first, max, expire) = s.completion_retry_ms;
    let current = c.completion_retry_ms;
    c.completion_retry_ms = (first.unwrap_or(current.0), max.unwrap_or(current.1), expire.unwrap_or(current.2));
    c.deprecated = deprecated_in(config);
    c.settings = s;
    Ok(c)
}

#[cfg(test)]
#[path = "settings_tests.rs"]
mod tests;
