//! `sessions_list` (REFERENCE.md §3, SESSION_TOOLS.md, DECISIONS.md): the sessions the caller
//! may see, newest first. Kind and cross-agent filters apply before the limit, so a listing
//! returns up to `limit` matching rows.

use serde_json::{json, Map, Value};

use super::{read_number, read_string_list, Requester, ToolContext};
use crate::config::Config;
use crate::engine::Engine;
use crate::entry;
use crate::error::Result;
use crate::keys::SessionKind;
use crate::policy::{a2a, sandbox};
use crate::store::{ListFilter, ListedRow};

/// Rows returned when the model gives no `limit`.
pub const DEFAULT_LIMIT: u32 = 200;
/// Most rows one call returns.
pub const MAX_LIMIT: u32 = 1000;
/// Most messages per row.
pub const MAX_MESSAGE_LIMIT: u32 = 20;

fn floor_at_least_one(v: f64) -> u64 {
    v.floor().max(1.0).min(u32::MAX as f64) as u64
}

pub fn run(engine: &Engine, args: &Value, ctx: &ToolContext) -> Result<Value> {
    let cfg = engine.config();
    let km = cfg.key_model();
    let requester = Requester::of(&cfg, ctx)?;
    let restricted = sandbox::restrict_to_spawned(&cfg, ctx.sandboxed, requester.key.as_deref(), &requester.agent);
    let kinds: Option<Vec<SessionKind>> = read_string_list(args, "kinds")
        .map(|k| k.iter().filter_map(|s| SessionKind::parse(s)).collect::<Vec<_>>())
        .filter(|k| !k.is_empty());
    let limit =
        read_number(args, "limit").map(floor_at_least_one).unwrap_or(DEFAULT_LIMIT as u64).min(MAX_LIMIT as u64) as u32;
    let active = read_number(args, "activeMinutes").map(floor_at_least_one);
    let message_limit =
        read_number(args, "messageLimit").map(|v| v.floor().clamp(0.0, MAX_MESSAGE_LIMIT as f64) as u32).unwrap_or(0);

    let rows = engine.store().read(|db| {
        // Cross-agent rows the a2a policy does not admit are left out (§3.1 step 6b). The two
        // common configurations need no look at the store: disabled admits the requester's own
        // agent only; enabled with no allow list (or `*`) admits every agent.
        let a2a_cfg = &cfg.agent_to_agent;
        let open = a2a_cfg.enabled && a2a_cfg.allow.iter().all(|p| p.trim() == "*");
        let allowed: Option<Vec<String>> = if !a2a_cfg.enabled {
            Some(vec![requester.agent.clone()])
        } else if open {
            None
        } else {
            let mut agents: Vec<String> = db.stored_agents()?;
            agents.push(km.default_agent().to_owned());
            agents.sort();
            agents.dedup();
            Some(
                agents
                    .into_iter()
                    .filter(|a| a2a::check(a2a_cfg, &requester.agent, a) == a2a::A2aDecision::Allowed)
                    .collect(),
            )
        };
        let filter = ListFilter {
            include_global: !restricted && km.is_global_scope(),
            include_unknown: false,
            spawned_by: if restricted { requester.key.clone() } else { None },
            active_since: active.map(|m| entry::now_ms().saturating_sub((m as i64).saturating_mul(60_000))),
            limit: Some(limit),
            kinds: kinds.clone(),
            agents: allowed,
            main_key: km.main_key().to_owned(),
            global_scope: km.is_global_scope(),
            default_agent: km.default_agent().to_owned(),
            ..ListFilter::default()
        };
        let rows = db.list(&filter)?;
        let mut out = Vec::with_capacity(rows.len());
        for r in rows {
            let messages = if message_limit > 0 {
                let sid = entry::str_field(&r.entry, "sessionId").unwrap_or_default();
                let page = db.history_page(sid, message_limit, None)?;
                let mut msgs = Vec::new();
                for m in page.messages.into_iter().filter(|m| m.role.as_deref() != Some("toolResult")) {
                    if let Ok(v) = serde_json::from_str::<Value>(&m.json) {
                        msgs.push(v);
                    }
                }
                Some(msgs)
            } else {
                None
            };
            out.push((r, messages));
        }
        Ok(out)
    })?;
    let sessions: Vec<Value> =
        rows.into_iter().map(|(r, messages)| row(engine, &cfg, &r, &requester, messages)).collect();
    Ok(json!({"count": sessions.len(), "sessions": sessions}))
}

/// One output row (§3.1), keys in the reference's order; only values of the expected JSON type.
fn row(engine: &Engine, cfg: &Config, r: &ListedRow, requester: &Requester, messages: Option<Vec<Value>>) -> Value {
    let km = cfg.key_model();
    let e = &r.entry;
    let group = matches!(entry::str_field(e, "chatType").map(str::trim), Some("group") | Some("channel"));
    let kind = km.classify_kind(&r.key, group);
    let mut m = Map::new();
    m.insert("key".into(), Value::from(km.display(&r.key, &requester.agent)));
    m.insert("kind".into(), Value::from(kind.as_str()));
    let channel = km.derive_channel(&r.key, kind, entry::str_field(e, "channel"), entry::str_field(e, "lastChannel"));
    m.insert("channel".into(), Value::from(channel));
    let s = |m: &mut Map<String, Value>, out: &str, v: Option<String>| {
        if let Some(v) = v {
            m.insert(out.into(), Value::from(v));
        }
    };
    s(&mut m, "label", entry::str_field(e, "label").map(str::to_owned));
    s(&mut m, "displayName", entry::display_name(&r.key, e));
    let dc = entry::delivery_context(e);
    if dc.channel.is_some() || dc.to.is_some() || dc.account_id.is_some() {
        let mut d = Map::new();
        for (k, v) in [("channel", &dc.channel), ("to", &dc.to), ("accountId", &dc.account_id)] {
            if let Some(v) = v {
                d.insert(k.into(), Value::from(v.clone()));
            }
        }
        m.insert("deliveryContext".into(), Value::Object(d));
    }
    if let Some(u) = e.get("updatedAt").filter(|v| v.is_number()) {
        m.insert("updatedAt".into(), u.clone());
    }
    s(&mut m, "sessionId", entry::str_field(e, "sessionId").map(str::to_owned));
    s(&mut m, "model", entry::str_field(e, "model").map(str::to_owned));
    if let Some(v) = e.get("contextTokens").filter(|v| v.is_number()) {
        m.insert("contextTokens".into(), v.clone());
    }
    // the gateway row's total: the stored one, else input + output (§2.7)
    m.insert("totalTokens".into(), entry::total_tokens(e));
    s(&mut m, "thinkingLevel", entry::str_field(e, "thinkingLevel").map(str::to_owned));
    s(&mut m, "verboseLevel", entry::str_field(e, "verboseLevel").map(str::to_owned));
    for f in ["systemSent", "abortedLastRun"] {
        if let Some(v) = e.get(f).filter(|v| v.is_boolean()) {
            m.insert(f.into(), v.clone());
        }
    }
    s(&mut m, "sendPolicy", entry::str_field(e, "sendPolicy").map(str::to_owned));
    s(&mut m, "lastChannel", dc.channel.clone().or_else(|| entry::str_field(e, "lastChannel").map(str::to_owned)));
    s(&mut m, "lastTo", dc.to.clone().or_else(|| entry::str_field(e, "lastTo").map(str::to_owned)));
    s(
        &mut m,
        "lastAccountId",
        dc.account_id.clone().or_else(|| entry::str_field(e, "lastAccountId").map(str::to_owned)),
    );
    s(&mut m, "transcriptPath", engine.transcript_path(e));
    if let Some(msgs) = messages {
        m.insert("messages".into(), Value::Array(msgs));
    }
    Value::Object(m)
}
