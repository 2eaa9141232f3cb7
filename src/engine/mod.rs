//! The engine: the store, the current config and the mirror folder, and the gateway's session
//! methods over them (`sessions.list|resolve|patch|reset|delete`, `chat.history`, the send
//! policy and `/send`), with the gateway's validations and texts (REFERENCE.md §2.5, §2.7,
//! §4.2, §7).
//!
//! Every method here blocks (it runs SQL); async callers run it on a blocking thread. It knows
//! nothing of napi: parameters arrive as JSON values and results leave as JSON values.
//!
//! Here: the engine's state, entries, `chat.history`, import/export and stats; `sessions`
//! (`sessions.*`), `patch` (patch fields), `rows` (the list row), `send_policy` (§7).

mod memo;
mod patch;
mod rows;
mod send_policy;
mod sessions;

use std::path::PathBuf;
use std::sync::{Arc, RwLock};

use serde_json::{json, Map, Value};

use crate::config::Config;
use crate::entry::{self, Entry};
use crate::error::{Error, Result};
use crate::params::Params;
use crate::store::{Db, HistoryPage, Store};

pub use memo::RowMemo;
pub use patch::check_label;
use patch::*;
pub use rows::message_text;
use rows::*;
pub use send_policy::decide;
pub use sessions::canonical_spawned_by;

/// Most messages one `appendMessages` call may carry.
pub const MAX_APPEND: usize = 10_000;
/// Largest JSON text of one message.
pub const MAX_MESSAGE_BYTES: usize = 32 * 1024 * 1024;
/// Largest JSON text of an `appendMessages` call's messages that may be appended on the JS
/// thread (`store::inline`); a larger one goes to the store's writer thread at once. Appending
/// costs about 16 µs a message of 250 bytes (10,000 of them held the event loop 165 ms inline,
/// issue 17), so this is about a millisecond.
pub const INLINE_APPEND_BYTES: usize = 16 * 1024;

/// Whether an append whose messages' JSON text is `bytes` long may run inline.
pub fn append_may_run_inline(bytes: usize) -> bool {
    bytes <= INLINE_APPEND_BYTES
}

pub struct Engine {
    store: Store,
    config: RwLock<Arc<Config>>,
    mirror_dir: Option<PathBuf>,
    /// the mirror files appended to last, kept open
    mirror_files: crate::mirror::Kept,
    /// told of each committed `appendMessages` (the orchestration's session watches)
    append_observer: std::sync::OnceLock<AppendObserver>,
    /// `sessions_list` rows rendered, by stored text (`memo.rs`)
    list_rows: RowMemo,
}

/// Told of committed appends: the canonical key and the messages. Must not block.
pub type AppendObserver = Box<dyn Fn(&str, &[Value]) + Send + Sync>;

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
        Engine {
            store,
            config: RwLock::new(Arc::new(config)),
            mirror_dir,
            mirror_files: Default::default(),
            append_observer: Default::default(),
            list_rows: RowMemo::default(),
        }
    }

    /// Sets the one observer of committed appends (a second call is ignored).
    pub fn observe_appends(&self, observer: AppendObserver) {
        let _ = self.append_observer.set(observer);
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

    /// The rows `sessions_list` rendered, remembered by their stored text.
    pub fn list_rows(&self) -> &RowMemo {
        &self.list_rows
    }

    /// Closes the store, and the mirror files kept open. Idempotent.
    pub fn close(&self) {
        self.store.close();
        self.mirror_files.close();
    }

    pub fn mirror_dir(&self) -> Option<&std::path::Path> {
        self.mirror_dir.as_deref()
    }

    /// Best-effort transcript path of a session (DECISIONS.md: the JSONL mirror; else the
    /// entry's own `sessionFile`).
    pub fn transcript_path<E: entry::RowFields + ?Sized>(&self, entry: &E) -> Option<String> {
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
        self.upsert(key, patch, |db, key, old, merged| db.put_session_over(key, old, merged)).map(|(e, ())| e)
    }

    /// As [`upsert_session`](Self::upsert_session), answering the merged entry as JSON text:
    /// the text just stored, so the entry is serialised once.
    /// A patch that names no field a column is made from is merged on the stored text
    /// (`entry_text`: the same text, without parsing the stored entry into a map and writing it
    /// all again); any other, or a text that path does not handle, is merged parsed.
    pub fn upsert_session_text(&self, key: &Value, patch: &Value) -> Result<String> {
        let (key, patch) = self.upsert_args(key, patch)?;
        let now = entry::now_ms();
        let on_text = !patch.keys().any(|k| crate::store::sessions::feeds_columns(k));
        self.store.write(|db| {
            let stored = db.session_text(&key)?;
            if let Some(text) = stored.as_deref().filter(|_| on_text) {
                let merged = crate::entry_text::merge_text(text, &patch, now, &crate::store::sessions::SEARCH_SOURCES);
                if let Some(m) = merged {
                    if db.put_merged_text(&key, m.updated_at, m.fields.as_ref(), &m.text)? {
                        return Ok(m.text);
                    }
                }
            }
            let existing = stored.map(|t| crate::store::sessions::parse_entry(&key, &t)).transpose()?;
            let merged = entry::merge(existing.as_ref(), &patch, now);
            db.put_session_over_text(&key, existing.as_ref(), &merged)
        })
    }

    /// An upsert's canonical key and checked patch (`spawnedBy` made canonical).
    fn upsert_args(&self, key: &Value, patch: &Value) -> Result<(String, Entry)> {
        let key = self.canonical(key_arg(key)?)?;
        let mut patch = obj(patch, "patch")?;
        entry::check_patch(&patch)?;
        if let Some(raw) = patch.get("spawnedBy").and_then(Value::as_str) {
            let parent = canonical_spawned_by(&self.config(), &key, raw)?;
            patch.insert("spawnedBy".into(), Value::from(parent));
        }
        Ok((key, patch))
    }

    fn upsert<T>(
        &self,
        key: &Value,
        patch: &Value,
        put: impl Fn(&Db<'_>, &str, Option<&Entry>, &Entry) -> Result<T>,
    ) -> Result<(Entry, T)> {
        let (key, patch) = self.upsert_args(key, patch)?;
        let now = entry::now_ms();
        self.store.write(|db| {
            let existing = db.session(&key)?;
            let merged = entry::merge(existing.as_ref(), &patch, now);
            let out = put(db, &key, existing.as_ref(), &merged)?;
            Ok((merged, out))
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
                db.put_session_over(&key, existing.as_ref(), &entry)?;
                let first = db.append_messages(&sid, &rows)?;
                Ok((sid, first))
            },
            |(sid, first)| {
                if let Some(dir) = &self.mirror_dir {
                    // After the commit, inside the writer lock: the file's lines keep the rows'
                    // order and never hold what was rolled back. A failed mirror write never
                    // fails the append: SQLite is the source of truth.
                    let texts: Vec<String> = rows.iter().map(|(_, t)| t.clone()).collect();
                    let _ = crate::mirror::append(dir, &self.mirror_files, sid, first, &texts, now);
                }
            },
        )?;
        if let Some(observe) = self.append_observer.get() {
            observe(&key, list);
        }
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

    /// `exportStateDir(dir, {layout?, stateDir?})`: `{layout, sessions, messages, runs, tasks, files,
    /// skipped}` written. `layout` `'2026.1'` (the default) writes `sessions.json` + JSONL
    /// (`stateDir`: the absolute path the folder will be used from once moved into place);
    /// `'2026.9'` writes into the SQLite databases of a folder the 2026.9 gateway has initialised.
    pub fn export_state_dir(&self, dir: &Value, opts: &Value) -> Result<Value> {
        let dir = dir_arg(dir)?;
        let mut p = Params::new("exportStateDir", opts, &["stateDir", "layout"])?;
        let state_dir = p.string("stateDir", 1, 4096).map(PathBuf::from);
        let layout = p.string("layout", 1, 16);
        p.finish()?;
        let layout = match layout {
            None | Some("2026.1") => "2026.1",
            Some("2026.9") => "2026.9",
            Some(_) => return Err(Error::invalid_request("invalid layout: must be '2026.1' or '2026.9'")),
        };
        if let Some(d) =
            state_dir.as_ref().filter(|d| !d.is_absolute() || d.as_os_str().to_string_lossy().contains('\0'))
        {
            return Err(Error::invalid_request(format!(
                "invalid stateDir: must be an absolute path ({} is not)",
                crate::error::clip(&d.to_string_lossy())
            )));
        }
        let cfg = self.config();
        let report = if layout == "2026.9" {
            crate::migrate::export_state_dir_2026_9(&self.store, cfg.key_model(), &dir)?
        } else {
            crate::migrate::export_state_dir(&self.store, cfg.key_model(), &dir, state_dir.as_deref())?
        };
        let mut out = report.to_json();
        out["layout"] = Value::from(layout);
        Ok(out)
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
}

#[cfg(test)]
mod tests;
