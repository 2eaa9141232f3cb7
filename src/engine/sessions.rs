//! The gateway's `sessions.*` methods (REFERENCE.md §2.5, §2.7): list, resolve, patch, reset,
//! delete, with their validations and texts; and who may see which session in `resolve`.

use super::*;

use serde_json::{json, Map, Value};

use crate::config::Config;
use crate::entry::{self, Entry};
use crate::error::{Error, Result};
use crate::params::Params;
use crate::store::{ListFilter, ListedRow};

impl Engine {
    /// `sessions.list` (§2.7): the pipeline in SQL, rows for the kept sessions only.
    pub fn list_sessions(&self, params: &Value) -> Result<Value> {
        let cfg = self.config();
        let km = cfg.key_model();
        let mut p = Params::new(
            "sessions.list",
            params,
            &[
                "limit",
                "activeMinutes",
                "includeGlobal",
                "includeUnknown",
                "includeDerivedTitles",
                "includeLastMessage",
                "label",
                "spawnedBy",
                "agentId",
                "search",
            ],
        )?;
        let limit = p.int("limit", 1, i64::from(u32::MAX));
        let active = p.int("activeMinutes", 1, i64::MAX / 120_000);
        let include_global = p.bool("includeGlobal").unwrap_or(false);
        let include_unknown = p.bool("includeUnknown").unwrap_or(false);
        let titles = p.bool("includeDerivedTitles").unwrap_or(false);
        let last = p.bool("includeLastMessage").unwrap_or(false);
        let label = p.string("label", 1, entry::MAX_LABEL_LEN).map(|s| s.trim().to_owned());
        let spawned_by = p.string("spawnedBy", 1, usize::MAX).map(str::to_owned);
        let agent_id = p.string("agentId", 1, usize::MAX).map(crate::keys::normalize_agent_id);
        let search = p.string("search", 0, usize::MAX).map(|s| s.trim().to_lowercase()).filter(|s| !s.is_empty());
        p.finish()?;
        let now = entry::now_ms();
        let filter = ListFilter {
            include_global,
            include_unknown,
            agent_id,
            spawned_by,
            label,
            search,
            active_since: active.map(|m| now - m * 60_000),
            limit: limit.map(|l| l as u32),
            kinds: None,
            agents: cfg.listed_agents(),
            main_key: km.main_key().to_owned(),
            global_scope: km.is_global_scope(),
            default_agent: km.default_agent().to_owned(),
        };
        let rows = self.store.read(|db| {
            let rows = db.list(&filter)?;
            let mut out = Vec::with_capacity(rows.len());
            for r in rows {
                let extra = if titles || last { Some(self.title_and_preview(db, &r, titles, last)?) } else { None };
                out.push(gateway_row(&r, extra));
            }
            Ok(out)
        })?;
        Ok(json!({"ts": now, "path": super::rows::gateway_store_path(&cfg), "count": rows.len(), "sessions": rows}))
    }

    /// `derivedTitle` and `lastMessagePreview` of a row (§2.7), reading at most 10 + 20 messages.
    pub fn title_and_preview(
        &self,
        db: &crate::store::Db<'_>,
        r: &ListedRow,
        titles: bool,
        last: bool,
    ) -> Result<(Option<String>, Option<String>)> {
        let sid = entry::str_field(&r.entry, "sessionId").unwrap_or_default();
        let mut title = None;
        if titles {
            title = entry::text_field(&r.entry, "displayName")
                .or_else(|| entry::text_field(&r.entry, "subject"))
                .map(str::to_owned);
            if title.is_none() {
                let first = db.first_messages(sid, 10)?;
                title = first
                    .iter()
                    .filter(|m| m.role.as_deref() == Some("user"))
                    .find_map(|m| message_text(&m.json))
                    .map(|t| clip_title(&crate::js::collapse_whitespace(&t)));
            }
            if title.is_none() {
                let short: String = sid.chars().take(8).collect();
                let at = entry::updated_at(&r.entry);
                title = Some(if at > 0 { format!("{short} ({})", ymd(at)) } else { short });
            }
        }
        let mut preview = None;
        if last {
            let page = db.history_page(sid, 20, None)?;
            preview = page
                .messages
                .iter()
                .rev()
                .filter(|m| matches!(m.role.as_deref(), Some("user") | Some("assistant")))
                .find_map(|m| message_text(&m.json));
        }
        Ok((title, preview))
    }

    /// `sessions.resolve` (§2.7): exactly one of key, sessionId, label.
    pub fn resolve_session(&self, params: &Value) -> Result<Value> {
        let cfg = self.config();
        let mut p = Params::new(
            "sessions.resolve",
            params,
            &["key", "sessionId", "label", "agentId", "spawnedBy", "includeGlobal", "includeUnknown"],
        )?;
        let key = p.string("key", 1, usize::MAX);
        let session_id = p.string("sessionId", 1, usize::MAX);
        let label_raw = p.raw("label").filter(|v| !v.is_null()).cloned();
        let agent_id = p.string("agentId", 1, usize::MAX).map(crate::keys::normalize_agent_id);
        let spawned_by = p.string("spawnedBy", 1, usize::MAX).map(str::to_owned);
        let include_global = p.bool("includeGlobal").unwrap_or(false);
        let include_unknown = p.bool("includeUnknown").unwrap_or(false);
        p.finish()?;
        let given = [key.is_some(), session_id.is_some(), label_raw.is_some()].iter().filter(|b| **b).count();
        if given > 1 {
            return Err(Error::invalid_request("Provide either key, sessionId, or label (not multiple)"));
        }
        if given == 0 {
            return Err(Error::invalid_request("Either key, sessionId, or label is required"));
        }
        if let Some(raw) = key {
            let km = cfg.key_model();
            let candidates = km.store_keys(raw)?;
            let canonical = candidates.first().cloned().unwrap_or_default();
            let found = self.store.read(|db| db.first_session(&candidates))?;
            return match found {
                Some(_) => Ok(json!({"ok": true, "key": canonical})),
                None => Err(Error::invalid_request(format!("No session found: {}", crate::error::clip(raw.trim())))),
            };
        }
        if let Some(id) = session_id {
            let id = id.trim();
            let rows = self.store.read(|db| db.sessions_with_id(id, 64))?;
            let keys: Vec<String> = rows
                .into_iter()
                .filter(|r| {
                    visible_in_resolve(r, include_global, include_unknown, agent_id.as_deref(), spawned_by.as_deref())
                })
                .map(|r| r.key)
                .collect();
            return match keys.len() {
                0 => Err(Error::invalid_request(format!("No session found: {}", crate::error::clip(id)))),
                1 => Ok(json!({"ok": true, "key": keys[0]})),
                _ => Err(Error::invalid_request(format!(
                    "Multiple sessions found for sessionId: {id} ({})",
                    keys.iter().take(2).cloned().collect::<Vec<_>>().join(", ")
                ))),
            };
        }
        let label = check_label(label_raw.as_ref().unwrap_or(&Value::Null))?;
        let km = cfg.key_model();
        let filter = ListFilter {
            include_global,
            include_unknown,
            agent_id,
            spawned_by,
            label: Some(label.clone()),
            limit: Some(2),
            main_key: km.main_key().to_owned(),
            global_scope: km.is_global_scope(),
            default_agent: km.default_agent().to_owned(),
            ..ListFilter::default()
        };
        let rows = self.store.read(|db| db.list(&filter))?;
        match rows.len() {
            0 => Err(Error::invalid_request(format!("No session found with label: {label}"))),
            1 => Ok(json!({"ok": true, "key": rows[0].key})),
            _ => Err(Error::invalid_request(format!(
                "Multiple sessions found with label: {label} ({}, {})",
                rows[0].key, rows[1].key
            ))),
        }
    }

    /// `sessions.patch` (§2.7).
    pub fn patch_session(&self, params: &Value) -> Result<Value> {
        let cfg = self.config();
        let o = params
            .as_object()
            .ok_or_else(|| Error::invalid_request("invalid sessions.patch params: at root: must be object"))?;
        const FIELDS: &[&str] = &[
            "key",
            "spawnedBy",
            "label",
            "thinkingLevel",
            "verboseLevel",
            "reasoningLevel",
            "responseUsage",
            "elevatedLevel",
            "execHost",
            "execSecurity",
            "execAsk",
            "execNode",
            "groupActivation",
            "model",
            "sendPolicy",
        ];
        let mut p = Params::new("sessions.patch", params, FIELDS)?;
        let raw_key = p.string("key", 1, usize::MAX);
        p.finish()?;
        let raw_key = raw_key.ok_or_else(|| {
            Error::invalid_request("invalid sessions.patch params: at root: must have required property 'key'")
        })?;
        let km = cfg.key_model();
        let candidates = km.store_keys(raw_key)?;
        let key = candidates.first().cloned().unwrap_or_default();
        let now = entry::now_ms();
        let o = o.clone();
        let cfg2 = cfg.clone();
        let entry = self.store.write(move |db| {
            let found = db.first_session(&candidates)?;
            let mut e = match found {
                Some(r) if r.key != key => {
                    db.delete_session(&r.key)?;
                    r.entry
                }
                Some(r) => r.entry,
                None => entry::merge(None, &Map::new(), now),
            };
            apply_patch(&cfg2, db, &key, &mut e, &o)?;
            let e = entry::merge(Some(&e), &Map::new(), now);
            db.put_session(&key, &e)?;
            Ok(e)
        })?;
        Ok(json!({"ok": true, "key": entry_key(&entry, &cfg, raw_key)?, "entry": entry}))
    }

    /// `sessions.reset` (§2.7).
    pub fn reset_session(&self, key: &Value) -> Result<Value> {
        let cfg = self.config();
        let candidates = cfg.key_model().store_keys(key_arg(key)?)?;
        let key = candidates.first().cloned().unwrap_or_default();
        let now = entry::now_ms();
        let e = self.store.write(|db| {
            let found = db.first_session(&candidates)?;
            if let Some(r) = &found {
                if r.key != key {
                    db.delete_session(&r.key)?;
                }
            }
            let e = entry::reset(found.as_ref().map(|r| &r.entry), now);
            db.put_session(&key, &e)?;
            Ok(e)
        })?;
        Ok(json!({"ok": true, "key": key, "entry": e}))
    }

    /// `sessions.delete` (§2.7, DECISIONS.md: every stored form of the key goes).
    pub fn delete_session(&self, key: &Value, opts: &Value) -> Result<Value> {
        let cfg = self.config();
        let mut p = Params::new("sessions.delete", opts, &["deleteTranscript"])?;
        let delete_transcript = p.bool("deleteTranscript").unwrap_or(true);
        p.finish()?;
        let km = cfg.key_model();
        let candidates = km.store_keys(key_arg(key)?)?;
        let key = candidates.first().cloned().unwrap_or_default();
        if key == km.main_session_key() {
            return Err(Error::invalid_request(format!("Cannot delete the main session ({key}).")));
        }
        let deleted = self.store.write(|db| {
            let mut deleted = false;
            for (i, k) in candidates.iter().enumerate() {
                let Some(e) = db.session(k)? else { continue };
                db.delete_session(k)?;
                deleted |= i == 0;
                if delete_transcript {
                    if let Some(sid) = entry::str_field(&e, "sessionId") {
                        if !db.session_id_in_use(sid)? {
                            db.delete_transcript(sid)?;
                            if let Some(dir) = &self.mirror_dir {
                                let _ = crate::mirror::archive(dir, sid, entry::now_ms());
                            }
                        }
                    }
                }
            }
            Ok(deleted)
        })?;
        Ok(json!({"ok": true, "key": key, "deleted": deleted}))
    }
}

/// A parent key as stored in `spawnedBy`: canonical, a bare key taken as one of the child's
/// agent (the gateway's combined view prefixes bare values with the store's agent, §2.7).
pub fn canonical_spawned_by(cfg: &Config, child_key: &str, raw: &str) -> Result<String> {
    let km = cfg.key_model();
    let raw = km.check_raw(raw, "spawnedBy")?;
    if crate::keys::parse_agent_key(raw).is_some() || raw == "global" || raw == "unknown" {
        return km.canonical(raw);
    }
    km.resolve_for(&format!("agent:{}:{raw}", km.agent_id_of(child_key)), &km.agent_id_of(child_key))
}

pub(super) fn entry_key(_e: &Entry, cfg: &Config, raw: &str) -> Result<String> {
    cfg.key_model().canonical(raw)
}

pub(super) fn visible_in_resolve(
    r: &ListedRow,
    include_global: bool,
    include_unknown: bool,
    agent: Option<&str>,
    spawned_by: Option<&str>,
) -> bool {
    let special = r.key == "global" || r.key == "unknown";
    if r.key == "global" && (!include_global || spawned_by.is_some() || agent.is_some()) {
        return false;
    }
    if r.key == "unknown" && (!include_unknown || spawned_by.is_some() || agent.is_some()) {
        return false;
    }
    if let Some(a) = agent {
        match crate::keys::parse_agent_key(&r.key) {
            Some(k) if k.agent_id == a && !special => {}
            _ => return false,
        }
    }
    if let Some(s) = spawned_by {
        if entry::str_field(&r.entry, "spawnedBy") != Some(s) {
            return false;
        }
    }
    true
}
