//! The engine: the store, the current config and the mirror folder, and the gateway's session
//! methods over them (`sessions.list|resolve|patch|reset|delete`, `chat.history`, the send
//! policy and `/send`), with the gateway's validations and texts (REFERENCE.md §2.5, §2.7,
//! §4.2, §7).
//!
//! Every method here blocks (it runs SQL); async callers run it on a blocking thread. It knows
//! nothing of napi: parameters arrive as JSON values and results leave as JSON values.

use std::path::PathBuf;
use std::sync::{Arc, RwLock};

use serde_json::{json, Map, Value};

use crate::config::{Config, PolicyAction};
use crate::entry::{self, Entry};
use crate::error::{Error, Result};
use crate::params::Params;
use crate::policy::send::{parse_send_command, resolve_send_policy, PolicySubject, SendCommand, SendOverride};
use crate::store::{HistoryPage, ListFilter, ListedRow, Store};

/// Most messages one `appendMessages` call may carry.
pub const MAX_APPEND: usize = 10_000;
/// Largest JSON text of one message.
pub const MAX_MESSAGE_BYTES: usize = 32 * 1024 * 1024;

pub struct Engine {
    store: Store,
    config: RwLock<Arc<Config>>,
    mirror_dir: Option<PathBuf>,
}

fn obj(v: &Value, what: &str) -> Result<Entry> {
    match v {
        Value::Object(o) => Ok(o.clone()),
        _ => Err(Error::invalid_request(format!("{what} must be an object"))),
    }
}

fn key_arg(v: &Value) -> Result<&str> {
    match v {
        Value::String(s) => Ok(s),
        Value::Null => Err(Error::invalid_request("key required")),
        _ => Err(Error::invalid_request("invalid key: must be a string")),
    }
}

/// A folder argument: a non-empty string without NUL characters.
fn dir_arg(v: &Value) -> Result<PathBuf> {
    match v {
        Value::String(s) if !s.trim().is_empty() && !s.contains('\0') => Ok(PathBuf::from(s)),
        Value::String(s) if s.contains('\0') => Err(Error::invalid_request("invalid dir: contains a NUL character")),
        Value::Null => Err(Error::invalid_request("dir required")),
        _ => Err(Error::invalid_request("invalid dir: must be a non-empty string")),
    }
}

impl Engine {
    pub fn new(store: Store, config: Config, mirror_dir: Option<PathBuf>) -> Engine {
        Engine { store, config: RwLock::new(Arc::new(config)), mirror_dir }
    }

    pub fn store(&self) -> &Store {
        &self.store
    }

    pub fn config(&self) -> Arc<Config> {
        self.config.read().unwrap_or_else(|p| p.into_inner()).clone()
    }

    pub fn set_config(&self, config: Config) {
        *self.config.write().unwrap_or_else(|p| p.into_inner()) = Arc::new(config);
    }

    pub fn mirror_dir(&self) -> Option<&std::path::Path> {
        self.mirror_dir.as_deref()
    }

    /// Best-effort transcript path of a session (DECISIONS.md: the JSONL mirror; else the
    /// entry's own `sessionFile`).
    pub fn transcript_path(&self, entry: &Entry) -> Option<String> {
        let sid = entry::str_field(entry, "sessionId")?;
        match &self.mirror_dir {
            Some(dir) => crate::mirror::file_for(dir, sid).map(|p| p.to_string_lossy().into_owned()),
            None => entry::str_field(entry, "sessionFile").map(str::to_owned),
        }
    }

    fn canonical(&self, raw: &str) -> Result<String> {
        self.config().key_model().canonical(raw)
    }

    // ---- entries -----------------------------------------------------------------------

    /// `getSession(key)`: the entry under the canonical key (§2.9: the canonical key only).
    pub fn get_session(&self, key: &Value) -> Result<Option<Entry>> {
        let key = self.canonical(key_arg(key)?)?;
        self.store.read(|db| db.session(&key))
    }

    /// `upsertSession(key, patch)`: the merge rule of §2.5 in one transaction.
    pub fn upsert_session(&self, key: &Value, patch: &Value) -> Result<Entry> {
        let key = self.canonical(key_arg(key)?)?;
        let mut patch = obj(patch, "patch")?;
        entry::check_patch(&patch)?;
        if let Some(raw) = patch.get("spawnedBy").and_then(Value::as_str) {
            let parent = canonical_spawned_by(&self.config(), &key, raw)?;
            patch.insert("spawnedBy".into(), Value::from(parent));
        }
        let now = entry::now_ms();
        self.store.write(|db| {
            let existing = db.session(&key)?;
            let merged = entry::merge(existing.as_ref(), &patch, now);
            db.put_session(&key, &merged)?;
            Ok(merged)
        })
    }

    /// `appendMessages(key, messages)`: appends to the session's transcript, creating the
    /// session when missing; `updatedAt` moves to now.
    pub fn append_messages(&self, key: &Value, messages: &Value) -> Result<Value> {
        let key = self.canonical(key_arg(key)?)?;
        let list = messages.as_array().ok_or_else(|| Error::invalid_request("messages must be an array"))?;
        if list.len() > MAX_APPEND {
            return Err(Error::invalid_request(format!(
                "too many messages in one call: {} (max {MAX_APPEND})",
                list.len()
            )));
        }
        let mut rows = Vec::with_capacity(list.len());
        for (i, m) in list.iter().enumerate() {
            let role = m.get("role").and_then(Value::as_str);
            if !m.is_object() || role.is_none() {
                return Err(Error::invalid_request(format!(
                    "invalid message at index {i}: must be an object with a string role"
                )));
            }
            let text = serde_json::to_string(m)
                .map_err(|e| Error::invalid_request(format!("invalid message at index {i}: {e}")))?;
            if text.len() > MAX_MESSAGE_BYTES {
                return Err(Error::invalid_request(format!(
                    "invalid message at index {i}: larger than {MAX_MESSAGE_BYTES} bytes"
                )));
            }
            rows.push((role.map(str::to_owned), text));
        }
        let now = entry::now_ms();
        let (sid, _) = self.store.write_then(
            |db| {
                let existing = db.session(&key)?;
                let entry = entry::merge(existing.as_ref(), &Map::new(), now);
                let sid = entry::str_field(&entry, "sessionId").unwrap_or_default().to_owned();
                db.put_session(&key, &entry)?;
                let first = db.append_messages(&sid, &rows)?;
                Ok((sid, first))
            },
            |(sid, first)| {
                if let Some(dir) = &self.mirror_dir {
                    // After the commit, inside the writer lock: the file's lines keep the rows'
                    // order and never hold what was rolled back. A failed mirror write never
                    // fails the append: SQLite is the source of truth.
                    let texts: Vec<String> = rows.iter().map(|(_, t)| t.clone()).collect();
                    let _ = crate::mirror::append(dir, sid, *first, &texts, now);
                }
            },
        )?;
        Ok(json!({"sessionKey": key, "sessionId": sid, "appended": rows.len()}))
    }

    /// `chatHistory(key, {limit?, before?})`: a page of the transcript, O(limit) rows.
    pub fn chat_history(&self, key: &Value, opts: &Value) -> Result<(String, Option<String>, HistoryPage)> {
        let key = self.canonical(key_arg(key)?)?;
        let mut p = Params::new("chat.history", opts, &["limit", "before"])?;
        let limit = p.int("limit", 1, 1000).unwrap_or(200) as u32;
        let before = p.int("before", 1, i64::MAX);
        p.finish()?;
        self.store.read(|db| {
            let Some(e) = db.session(&key)? else {
                return Ok((key.clone(), None, HistoryPage::default()));
            };
            let sid = entry::str_field(&e, "sessionId").map(str::to_owned);
            let page = match &sid {
                Some(sid) => db.history_page(sid, limit, before)?,
                None => HistoryPage::default(),
            };
            Ok((key.clone(), sid, page))
        })
    }

    /// `chatHistory` as the JS API answers it: `{sessionKey, sessionId?, messages, nextBefore?}`.
    pub fn chat_history_json(&self, key: &Value, opts: &Value) -> Result<Value> {
        let (key, sid, page) = self.chat_history(key, opts)?;
        let mut out = Map::new();
        out.insert("sessionKey".into(), Value::from(key));
        if let Some(sid) = sid {
            out.insert("sessionId".into(), Value::from(sid));
        }
        let mut msgs = Vec::with_capacity(page.messages.len());
        for m in page.messages {
            let v = serde_json::from_str::<Value>(&m.json)
                .map_err(|e| Error::store(format!("a stored message is not valid JSON: {e}")))?;
            msgs.push(v);
        }
        out.insert("messages".into(), Value::Array(msgs));
        if let Some(b) = page.next_before {
            out.insert("nextBefore".into(), Value::from(b));
        }
        Ok(Value::Object(out))
    }

    // ---- moving in and out (API.md §5) ----------------------------------------------------

    /// `importStateDir(dir)`: `{sessions, messages, runs, skipped}` added by this import.
    pub fn import_state_dir(&self, dir: &Value) -> Result<Value> {
        let dir = dir_arg(dir)?;
        let cfg = self.config();
        let report = crate::migrate::import_state_dir(
            &self.store,
            cfg.key_model(),
            self.mirror_dir.as_deref(),
            &dir,
            entry::now_ms(),
        )?;
        Ok(report.to_json())
    }

    /// `exportStateDir(dir)`: `{sessions, messages, runs, files, skipped}` written.
    pub fn export_state_dir(&self, dir: &Value) -> Result<Value> {
        let dir = dir_arg(dir)?;
        let cfg = self.config();
        Ok(crate::migrate::export_state_dir(&self.store, cfg.key_model(), &dir)?.to_json())
    }

    /// `stats()`: `{sessions, messages, runs, outboxPending, dbBytes}` (`runs`: sub-agent
    /// registry records).
    pub fn stats(&self) -> Result<Value> {
        let s = self.store.read(|db| db.stats())?;
        Ok(json!({
            "sessions": s.sessions,
            "messages": s.messages,
            "runs": s.subagent_runs,
            "outboxPending": s.outbox_pending,
            "dbBytes": s.db_bytes,
        }))
    }

    // ---- sessions.* ---------------------------------------------------------------------

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
            agents: None,
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
        Ok(json!({"ts": now, "path": self.store.path(), "count": rows.len(), "sessions": rows}))
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
                    .map(|t| clip_title(&t));
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

    // ---- send policy ---------------------------------------------------------------------

    /// `resolveSendPolicy({sessionKey, channel?, chatType?})` (§7.1). A store that cannot be read
    /// denies (DECISIONS.md #6).
    pub fn resolve_send_policy(&self, params: &Value) -> Result<PolicyAction> {
        let mut p = Params::new("resolveSendPolicy", params, &["sessionKey", "channel", "chatType"])?;
        let raw = p.string("sessionKey", 1, usize::MAX);
        let channel = p.string("channel", 0, usize::MAX).map(str::to_owned);
        let chat_type = p.string("chatType", 0, usize::MAX).map(str::to_owned);
        p.finish()?;
        let raw = raw.ok_or_else(|| Error::invalid_request("sessionKey required"))?;
        let cfg = self.config();
        let key = cfg.key_model().canonical(raw)?;
        let entry = match self.store.read(|db| db.session(&key)) {
            Ok(e) => e,
            Err(e) if e.code() == crate::error::ErrorCode::Closed => return Err(e),
            Err(_) => return Ok(PolicyAction::Deny),
        };
        Ok(decide(&cfg, entry.as_ref(), raw.trim(), &key, channel.as_deref(), chat_type.as_deref()))
    }

    /// `handleSendCommand({sessionKey, text, isOwner})` (§7.3).
    pub fn handle_send_command(&self, params: &Value) -> Result<Value> {
        let mut p = Params::new("handleSendCommand", params, &["sessionKey", "text", "isOwner"])?;
        let raw = p.string("sessionKey", 1, usize::MAX);
        let text = p.string("text", 0, usize::MAX).unwrap_or("");
        let is_owner = p.bool("isOwner").unwrap_or(false);
        p.finish()?;
        let Some(cmd) = parse_send_command(text) else {
            return Ok(json!({"handled": false}));
        };
        if !is_owner {
            return Ok(json!({"handled": true}));
        }
        let mode = match cmd {
            SendCommand::Usage => return Ok(json!({"handled": true, "reply": "⚙️ Usage: /send on|off|inherit"})),
            SendCommand::Set(m) => m,
        };
        let raw = raw.ok_or_else(|| Error::invalid_request("sessionKey required"))?;
        let key = self.canonical(raw)?;
        let now = entry::now_ms();
        self.store.write(|db| {
            let mut e = db.session(&key)?.unwrap_or_else(|| entry::merge(None, &Map::new(), now));
            match mode {
                SendOverride::Inherit => {
                    e.shift_remove("sendPolicy");
                }
                SendOverride::Allow => {
                    e.insert("sendPolicy".into(), Value::from("allow"));
                }
                SendOverride::Deny => {
                    e.insert("sendPolicy".into(), Value::from("deny"));
                }
            }
            e.insert("updatedAt".into(), Value::from(now.max(entry::updated_at(&e))));
            let e = entry::merge(Some(&e), &Map::new(), now);
            db.put_session(&key, &e)
        })?;
        Ok(json!({"handled": true, "reply": format!("⚙️ Send policy set to {}.", mode.reply_word())}))
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

/// The send-policy decision for a stored entry (or none).
pub fn decide(
    cfg: &Config,
    entry: Option<&Entry>,
    key_as_given: &str,
    canonical: &str,
    channel: Option<&str>,
    chat_type: Option<&str>,
) -> PolicyAction {
    let subject = match entry {
        Some(e) => PolicySubject {
            send_policy: entry::str_field(e, "sendPolicy"),
            channel: entry::str_field(e, "channel"),
            last_channel: entry::str_field(e, "lastChannel"),
            chat_type: entry::str_field(e, "chatType"),
        },
        None => PolicySubject::default(),
    };
    resolve_send_policy(cfg.send_policy.as_ref(), subject, key_as_given, canonical, channel, chat_type)
}

fn entry_key(_e: &Entry, cfg: &Config, raw: &str) -> Result<String> {
    cfg.key_model().canonical(raw)
}

fn visible_in_resolve(
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

const THINKING_LEVELS: &[&str] = &["off", "minimal", "low", "medium", "high", "xhigh"];

fn vocab(field: &str, v: &Value, allowed: &[&str], hint: &str) -> Result<String> {
    let s = v.as_str().map(|s| s.trim().to_lowercase()).unwrap_or_default();
    if allowed.contains(&s.as_str()) {
        Ok(s)
    } else {
        Err(Error::invalid_request(format!("invalid {field} (use {hint})")))
    }
}

/// Applies the fields of a `sessions.patch` to `e` (§2.7), inside the write transaction.
fn apply_patch(
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

/// A `sessions.list` row (§2.7), fields in the gateway's order; absent values left out.
fn gateway_row(r: &ListedRow, extra: Option<(Option<String>, Option<String>)>) -> Value {
    let e = &r.entry;
    let mut m = Map::new();
    let key = r.key.as_str();
    let kind = crate::keys::gateway_kind(key, entry::str_field(e, "chatType"));
    m.insert("key".into(), Value::from(key));
    m.insert("kind".into(), Value::from(kind.as_str()));
    let copy = |m: &mut Map<String, Value>, name: &str| {
        if let Some(v) = e.get(name).filter(|v| !v.is_null()) {
            m.insert(name.into(), v.clone());
        }
    };
    copy(&mut m, "label");
    if let Some(d) = entry::display_name(key, e) {
        m.insert("displayName".into(), Value::from(d));
    }
    if let Some(c) = entry::row_channel(key, e) {
        m.insert("channel".into(), Value::from(c));
    }
    for f in ["subject", "groupChannel", "space", "chatType", "origin"] {
        copy(&mut m, f);
    }
    m.insert("updatedAt".into(), e.get("updatedAt").filter(|v| v.is_number()).cloned().unwrap_or(Value::Null));
    for f in [
        "sessionId",
        "systemSent",
        "abortedLastRun",
        "thinkingLevel",
        "verboseLevel",
        "reasoningLevel",
        "elevatedLevel",
        "sendPolicy",
        "inputTokens",
        "outputTokens",
    ] {
        copy(&mut m, f);
    }
    m.insert("totalTokens".into(), entry::total_tokens(e));
    for f in ["responseUsage", "modelProvider", "model", "contextTokens"] {
        copy(&mut m, f);
    }
    let dc = entry::delivery_context(e);
    if !dc.is_empty() {
        m.insert("deliveryContext".into(), dc.to_json());
    }
    let last = |m: &mut Map<String, Value>, name: &str, v: Option<String>| {
        if let Some(v) = v.or_else(|| entry::str_field(e, name).map(str::to_owned)) {
            m.insert(name.into(), Value::from(v));
        }
    };
    last(&mut m, "lastChannel", dc.channel.clone());
    last(&mut m, "lastTo", dc.to.clone());
    last(&mut m, "lastAccountId", dc.account_id.clone());
    if let Some((title, preview)) = extra {
        if let Some(t) = title {
            m.insert("derivedTitle".into(), Value::from(t));
        }
        if let Some(p) = preview {
            m.insert("lastMessagePreview".into(), Value::from(p));
        }
    }
    Value::Object(m)
}

/// The text of a message for titles and previews: string content, or the first non-empty
/// `text`/`input_text`/`output_text` block.
pub fn message_text(json: &str) -> Option<String> {
    let v: Value = serde_json::from_str(json).ok()?;
    let content = v.get("content")?;
    let text = match content {
        Value::String(s) => Some(s.clone()),
        Value::Array(blocks) => blocks.iter().find_map(|b| {
            let t = b.get("type").and_then(Value::as_str)?;
            if matches!(t, "text" | "input_text" | "output_text") {
                b.get("text").and_then(Value::as_str).filter(|s| !s.trim().is_empty()).map(str::to_owned)
            } else {
                None
            }
        }),
        _ => None,
    }?;
    let collapsed = crate::js::collapse_whitespace(&text);
    (!collapsed.is_empty()).then_some(collapsed)
}

/// §2.7 derivedTitle from a first message: > 60 chars → cut to 59, at the last space when it
/// lies beyond 36 chars, then `…`.
fn clip_title(t: &str) -> String {
    let chars: Vec<char> = t.chars().collect();
    if chars.len() <= 60 {
        return t.to_owned();
    }
    let cut: String = chars[..59].iter().collect();
    let cut = match cut.rfind(' ') {
        Some(i) if cut[..i].chars().count() > 36 => cut[..i].to_owned(),
        _ => cut,
    };
    format!("{cut}…")
}

/// `YYYY-MM-DD` (UTC) of an epoch-ms time.
fn ymd(ms: i64) -> String {
    let days = ms.div_euclid(86_400_000);
    // civil-from-days (Howard Hinnant)
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let y = yoe + era * 400;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    let y = if m <= 2 { y + 1 } else { y };
    format!("{y:04}-{m:02}-{d:02}")
}

#[cfg(test)]
#[path = "engine_tests.rs"]
mod tests;
