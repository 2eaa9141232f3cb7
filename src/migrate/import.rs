//! Importing a gateway state folder (REFERENCE.md §2.8): the per-agent and legacy
//! `sessions.json` stores, their transcripts, and the sub-agent registry.
//!
//! Keys are canonicalised per [`KeyModel::import_canonical`]; two entries landing on one key keep
//! the one with the larger `updatedAt` (on a tie, the one that already had the canonical key);
//! an entry already in the store is replaced only by a newer one. A transcript's entries (its
//! messages and the entries that are not messages, with their ids and parent links) are matched
//! against those already stored for its session id, entry by entry (by id, or by content for an
//! entry without one): when the stored ones begin the file, only the rest is added (so a second
//! import adds nothing); when the file begins the stored ones (messages appended here since),
//! nothing changes; otherwise the gateway rewrote the file (a compaction, a branch) and the
//! stored transcript is replaced by what the file now holds. The writes go in batches of
//! transactions, so a large folder neither holds the store for long nor keeps much in memory.

use std::collections::{HashMap, HashSet};
use std::path::{Path, PathBuf};

use serde_json::{Map, Value};

use super::resync::{stored_lines, sync_plan, Sync};
use super::{encode_uri_component, inside, json5, jsonl, relative, topic_of, Resolved, Skipped};
use crate::entry::{self, Entry, MAX_SESSION_ID_LEN};
use crate::error::{Error, Result};
use crate::keys::{normalize_agent_id, parse_agent_key, KeyModel};
use crate::mirror::is_safe_file_id;
use crate::store::bulk::SubagentRunRow;
use crate::store::transcripts::NewEntry;
use crate::store::Store;

pub use super::report::{ImportReport, Layout, LayoutCounts, Merged};

/// A transcript's entries as read.
pub(super) type Entries = Vec<NewEntry>;

/// A batch is written once it holds this many entries …
const BATCH_MESSAGES: usize = 50_000;
/// … or this many sessions.
const BATCH_SESSIONS: usize = 2_000;

/// One entry read from a store file, on its way in.
pub(super) struct Candidate {
    pub(super) key: String,
    /// the key as the store file has it
    pub(super) raw_key: String,
    pub(super) entry: Entry,
    pub(super) updated: i64,
    /// `updatedAt` was missing and became the import's "now": never newer than a stored entry,
    /// so that importing again changes nothing
    pub(super) updated_missing: bool,
    /// the raw key already was the canonical one (wins a tie)
    pub(super) was_canonical: bool,
    /// a legacy direct chat key (may become the main entry, §2.8)
    pub(super) legacy_direct: bool,
    pub(super) agent: String,
    /// folder of the store file it came from
    pub(super) store_dir: PathBuf,
    /// the store file, relative to the state folder
    pub(super) store_rel: String,
    pub(super) session_file: Option<String>,
    /// the 2026.9 agent database it came from (an index into `Importer::dbs`), `None` for 2026.1
    pub(super) db: Option<usize>,
}

pub(super) struct Importer<'a> {
    pub(super) root: PathBuf,
    pub(super) km: &'a KeyModel,
    mirror_dir: Option<&'a Path>,
    pub(super) now: i64,
    pub(super) report: ImportReport,
    /// the 2026.9 agent databases being read (each inside its read transaction)
    pub(super) dbs: Vec<crate::store::oc9_read::Oc9Db>,
}

/// One session of a batch: the candidate, its transcript, and (2026.9) the transcripts of its
/// other generations by session id.
type BatchItem = (usize, Option<Entries>, Vec<(String, Entries)>);

impl Importer<'_> {
    pub(super) fn skip(&mut self, file: &str, line: Option<usize>, reason: impl Into<String>) {
        self.report.skipped.push(Skipped { file: file.to_owned(), line, reason: reason.into() });
    }

    /// Reads a file of the folder (refusing one that resolves outside it); `None` when it is
    /// absent or unreadable (the latter reported).
    fn read_bytes(&mut self, path: &Path) -> Option<(PathBuf, Vec<u8>)> {
        let rel = relative(&self.root, path);
        let real = match inside(&self.root, path) {
            Resolved::Inside(real) => real,
            Resolved::Missing => return None,
            Resolved::Outside => {
                self.skip(&rel, None, "it leads outside the state folder");
                return None;
            }
        };
        if !real.is_file() {
            self.skip(&rel, None, "not a file");
            return None;
        }
        match std::fs::read(&real) {
            Ok(bytes) => Some((real, bytes)),
            Err(e) => {
                self.skip(&rel, None, format!("cannot read it: {e}"));
                None
            }
        }
    }

    /// [`Importer::read_bytes`] for a file that must be UTF-8 text as a whole.
    fn read_file(&mut self, path: &Path) -> Option<(PathBuf, String)> {
        let (real, bytes) = self.read_bytes(path)?;
        match String::from_utf8(bytes) {
            Ok(text) => Some((real, text)),
            Err(_) => {
                self.skip(&relative(&self.root, path), None, "not UTF-8 text");
                None
            }
        }
    }

    /// Under `session.scope: "global"` the gateway keeps one `global` entry per agent store and
    /// resolves `global` to the default agent's; here there is one key space, so another
    /// agent's entry that lands on `global` is kept under `agent:<id>:global` (a key that
    /// stays itself, so it can be found) instead of displacing the default agent's.
    fn own_global_key(&self, key: &str, agent: &str, legacy: bool) -> Option<String> {
        if !self.km.is_global_scope() || key != "global" || legacy || agent == self.km.default_agent() {
            return None;
        }
        [format!("agent:{agent}:global"), format!("agent:{agent}:global-session")]
            .into_iter()
            .find(|k| self.km.canonical(k).is_ok_and(|c| c == *k))
    }

    /// The store files: the legacy single store, then every agent's, agents in name order.
    fn store_files(&self) -> Vec<(PathBuf, String)> {
        let mut out = vec![(self.root.join("sessions").join("sessions.json"), self.km.default_agent().to_owned())];
        let mut agents: Vec<(String, PathBuf)> = std::fs::read_dir(self.root.join("agents"))
            .map(|rd| {
                rd.filter_map(|e| e.ok())
                    .filter(|e| e.file_type().map(|t| t.is_dir()).unwrap_or(false))
                    .map(|e| (e.file_name().to_string_lossy().into_owned(), e.path()))
                    .collect()
            })
            .unwrap_or_default();
        agents.sort();
        for (name, path) in agents {
            out.push((path.join("sessions").join("sessions.json"), normalize_agent_id(&name)));
        }
        out
    }

    /// Reads one store file; `legacy` for the pre-multi-agent single store.
    fn read_store(
        &mut self,
        path: &Path,
        agent: &str,
        legacy: bool,
        into: &mut Vec<Candidate>,
        index: &mut HashMap<String, usize>,
    ) {
        let Some((real, text)) = self.read_file(path) else { return };
        let rel = relative(&self.root, path);
        let parsed = match json5::parse(&text) {
            Ok(v) => v,
            Err(e) => return self.skip(&rel, None, e),
        };
        let Value::Object(map) = parsed else {
            return self.skip(&rel, None, "not a JSON object of session entries");
        };
        let store_dir = real.parent().map(Path::to_path_buf).unwrap_or_else(|| self.root.clone());
        for (raw_key, value) in map {
            let what = format!("entry {}", crate::error::clip(&raw_key));
            let Value::Object(mut e) = value else {
                self.skip(&rel, None, format!("{what}: not an object"));
                continue;
            };
            match e.get("sessionId").and_then(Value::as_str) {
                Some(s)
                    if !s.trim().is_empty() && s.len() <= MAX_SESSION_ID_LEN && !s.chars().any(char::is_control) => {}
                _ => {
                    self.skip(&rel, None, format!("{what}: no usable sessionId"));
                    continue;
                }
            }
            let mut key = match self.km.import_canonical(&raw_key, agent) {
                Ok(k) => k,
                Err(err) => {
                    self.skip(&rel, None, format!("{what}: {}", err.message()));
                    continue;
                }
            };
            if let Some(own) = self.own_global_key(&key, agent, legacy) {
                let session_id = entry::str_field(&e, "sessionId").unwrap_or_default().to_owned();
                self.report.merged.push(Merged {
                    file: rel.clone(),
                    key: raw_key.clone(),
                    session_id,
                    into: key,
                    kept_as: Some(own.clone()),
                });
                key = own;
            }
            entry::migrate_legacy_fields(&mut e);
            let updated_missing = !e.get("updatedAt").and_then(Value::as_f64).is_some_and(f64::is_finite);
            let updated = match e.get("updatedAt").and_then(Value::as_f64).filter(|f| f.is_finite()) {
                Some(f) => f.floor() as i64,
                None => {
                    e.insert("updatedAt".into(), Value::from(self.now));
                    self.now
                }
            };
            // The transcript moves into the store; its old location means nothing there.
            let session_file = e
                .remove("sessionFile")
                .and_then(|v| v.as_str().map(str::trim).filter(|s| !s.is_empty()).map(str::to_owned));
            if let Some(parent) = e.get("spawnedBy").and_then(Value::as_str).filter(|s| !s.trim().is_empty()) {
                if let Ok(p) = self.km.import_canonical(parent, agent) {
                    e.insert("spawnedBy".into(), Value::from(p));
                }
            }
            let trimmed = raw_key.trim();
            let lower = trimmed.to_lowercase();
            let legacy_direct = legacy
                && parse_agent_key(trimmed).is_none()
                && !matches!(lower.as_str(), "global" | "unknown")
                && lower != self.km.main_key()
                && lower != "main"
                && !lower.starts_with("subagent:")
                && !lower.contains("group:")
                && !lower.contains(":channel:")
                && !lower.contains("@g.us");
            let c = Candidate {
                raw_key: raw_key.clone(),
                was_canonical: trimmed == key,
                key,
                entry: e,
                updated,
                updated_missing,
                legacy_direct,
                agent: agent.to_owned(),
                store_dir: store_dir.clone(),
                store_rel: rel.clone(),
                session_file,
                db: None,
            };
            self.offer(c, into, index);
        }
    }

    /// Adds a candidate, or keeps the one already under its key when that one wins (the larger
    /// `updatedAt`, on a tie the one that already had the canonical key); the loser is reported
    /// in `merged`.
    pub(super) fn offer(&mut self, c: Candidate, into: &mut Vec<Candidate>, index: &mut HashMap<String, usize>) {
        match index.get(&c.key) {
            None => {
                index.insert(c.key.clone(), into.len());
                into.push(c);
            }
            Some(&at) => {
                let old = &into[at];
                let wins =
                    c.updated > old.updated || (c.updated == old.updated && (c.was_canonical || !old.was_canonical));
                let loser = if wins { old } else { &c };
                self.report.merged.push(Merged {
                    file: loser.store_rel.clone(),
                    key: loser.raw_key.clone(),
                    session_id: entry::str_field(&loser.entry, "sessionId").unwrap_or_default().to_owned(),
                    into: loser.key.clone(),
                    kept_as: None,
                });
                if wins {
                    into[at] = c;
                }
            }
        }
    }

    /// The transcript file of an entry: its `sessionFile` (inside the folder only), the topic
    /// file, then `<sessionId>.jsonl` beside its store.
    fn transcript_file(&mut self, c: &Candidate, sid: &str) -> Option<PathBuf> {
        if let Some(sf) = &c.session_file {
            let p = Path::new(sf);
            let p = if p.is_absolute() { p.to_path_buf() } else { c.store_dir.join(p) };
            // A path that climbs with `..` is refused whatever it lands on.
            let climbs = Path::new(sf).components().any(|c| c == std::path::Component::ParentDir);
            let resolved = if climbs { Resolved::Outside } else { inside(&self.root, &p) };
            match resolved {
                Resolved::Inside(real) if real.is_file() => return Some(real),
                Resolved::Outside => {
                    let why = format!(
                        "entry {}: sessionFile {} leads outside the state folder; not read",
                        crate::error::clip(&c.key),
                        crate::error::clip(sf)
                    );
                    self.skip(&c.store_rel.clone(), None, why);
                }
                _ => {}
            }
        }
        if !is_safe_file_id(sid) {
            return None;
        }
        let mut names = Vec::new();
        if let Some(t) = topic_of(&c.key) {
            names.push(format!("{sid}-topic-{}.jsonl", encode_uri_component(t)));
        }
        names.push(format!("{sid}.jsonl"));
        for name in names {
            match inside(&self.root, &c.store_dir.join(&name)) {
                Resolved::Inside(real) if real.is_file() => return Some(real),
                Resolved::Outside => self.skip(
                    &relative(&self.root, &c.store_dir.join(&name)),
                    None,
                    "it leads outside the state folder",
                ),
                _ => {}
            }
        }
        None
    }

    fn read_transcript(&mut self, file: &Path) -> Entries {
        let Some((real, bytes)) = self.read_bytes(file) else { return Vec::new() };
        let rel = relative(&self.root, &real);
        let t = jsonl::read(&bytes);
        for (line, reason) in t.bad_lines {
            self.skip(&rel, Some(line), reason);
        }
        t.entries
    }

    /// §2.8: when an agent has no main entry, the most recent direct entry of the legacy single
    /// store becomes it too (copied, so nothing is lost under its own key).
    fn adopt_main_entries(&self, cands: &mut Vec<Candidate>, index: &mut HashMap<String, usize>) {
        let mut best: HashMap<String, usize> = HashMap::new();
        for (i, c) in cands.iter().enumerate() {
            if c.legacy_direct {
                let slot = best.entry(c.agent.clone()).or_insert(i);
                if cands[*slot].updated < c.updated {
                    *slot = i;
                }
            }
        }
        let mut picks: Vec<(String, usize)> = best.into_iter().collect();
        picks.sort();
        for (agent, i) in picks {
            let main = self.km.main_session_key_of(&agent);
            if index.contains_key(&main) {
                continue;
            }
            let src = &cands[i];
            let copy = Candidate {
                key: main.clone(),
                raw_key: src.raw_key.clone(),
                entry: src.entry.clone(),
                updated: src.updated,
                updated_missing: src.updated_missing,
                was_canonical: false,
                legacy_direct: false,
                agent: src.agent.clone(),
                store_dir: src.store_dir.clone(),
                store_rel: src.store_rel.clone(),
                session_file: src.session_file.clone(),
                db: src.db,
            };
            index.insert(main, cands.len());
            cands.push(copy);
        }
    }

    /// Writes one batch of entries with their transcripts in one transaction.
    fn write_batch(&mut self, store: &Store, batch: &[BatchItem], cands: &[Candidate]) -> Result<()> {
        let (mirror_dir, now) = (self.mirror_dir, self.now);
        let counts = store.write(|db| {
            let mut counts: HashMap<Layout, (u64, u64)> = HashMap::new();
            // Brings the stored transcript of `sid` in step with `entries`; the messages it added.
            let sync = |sid: &str, entries: &Entries| -> Result<u64> {
                let (replace, added) = match sync_plan(db, sid, entries)? {
                    Sync::Nothing => return Ok(0),
                    Sync::Append(from) => (false, &entries[from..]),
                    Sync::Replace => (true, &entries[..]),
                };
                let at = if replace { db.replace_transcript(sid, added)? } else { db.append_entries(sid, added)? };
                if let Some(dir) = mirror_dir {
                    // As appendMessages does: inside the transaction, for the rows' order;
                    // a failed mirror write fails nothing (SQLite is the source of truth).
                    let lines = stored_lines(&at, added, now);
                    let _ = crate::mirror::write_lines(dir, sid, &lines, now, replace);
                }
                Ok(added.iter().filter(|e| e.body.is_message()).count() as u64)
            };
            for (i, transcript, generations) in batch {
                let c = &cands[*i];
                let layout = if c.db.is_some() { Layout::Sqlite } else { Layout::Json };
                let (sessions, messages) = counts.entry(layout).or_default();
                for (sid, entries) in generations {
                    *messages += sync(sid, entries)?;
                }
                let sid = entry::str_field(&c.entry, "sessionId").unwrap_or_default();
                let stored_sid = match db.session(&c.key)? {
                    Some(existing) if c.updated_missing || entry::updated_at(&existing) >= c.updated => {
                        entry::str_field(&existing, "sessionId").unwrap_or_default().to_owned()
                    }
                    _ => {
                        db.put_session(&c.key, &c.entry)?;
                        *sessions += 1;
                        sid.to_owned()
                    }
                };
                // Only the transcript of the entry the store keeps; only what it lacks.
                let Some(entries) = transcript else { continue };
                if stored_sid != sid {
                    continue;
                }
                *messages += sync(sid, entries)?;
            }
            Ok(counts)
        })?;
        for (layout, (sessions, messages)) in counts {
            self.report.add(layout, sessions, messages, 0, 0);
        }
        Ok(())
    }

    fn import_runs(&mut self, store: &Store) -> Result<()> {
        let path = self.root.join("subagents").join("runs.json");
        let Some((_, text)) = self.read_file(&path) else { return Ok(()) };
        let rel = relative(&self.root, &path);
        let parsed = match json5::parse(&text) {
            Ok(v) => v,
            Err(e) => {
                self.skip(&rel, None, e);
                return Ok(());
            }
        };
        let version = parsed.get("version").and_then(Value::as_i64);
        if version != Some(1) && version != Some(2) {
            self.skip(&rel, None, "not a sub-agent registry of version 1 or 2");
            return Ok(());
        }
        let records: Vec<Value> = match parsed.get("runs") {
            Some(Value::Object(m)) => m.values().cloned().collect(),
            Some(Value::Array(a)) => a.clone(),
            _ => Vec::new(),
        };
        let mut rows = Vec::new();
        for r in records {
            match run_row(&r, version == Some(1), self.km, self.now) {
                Ok(row) => rows.push(row),
                Err(why) => self.skip(&rel, None, why),
            }
        }
        let added = store.write(|db| {
            let mut n = 0u64;
            for row in &rows {
                n += u64::from(db.insert_subagent_run_if_absent(row)?);
            }
            Ok(n)
        })?;
        self.report.add(Layout::Json, 0, 0, added, 0);
        Ok(())
    }
}

/// A registry record of `runs.json` (§6.4, §6.6) as a `subagent_runs` row holding the API.md §4
/// `SubagentRun`: v1 fields migrated, keys canonicalised, `announce` derived from the cleanup
/// state (kept as is when the record already has a valid one, as our export writes), unknown
/// fields kept.
pub(super) fn run_row(v: &Value, v1: bool, km: &KeyModel, now: i64) -> std::result::Result<SubagentRunRow, String> {
    let Value::Object(src) = v else { return Err("a run record that is not an object".into()) };
    let Some(run_id) = src.get("runId").and_then(Value::as_str).filter(|s| !s.is_empty()) else {
        return Err("a run record without a runId".into());
    };
    let what = format!("run {}", crate::error::clip(run_id));
    let mut r: Map<String, Value> = src.clone();
    if v1 {
        if let Some(t) = r.remove("announceCompletedAt").filter(Value::is_number) {
            r.insert("cleanupCompletedAt".into(), t);
        }
        let handled = r.remove("announceHandled");
        if !r.get("cleanupHandled").is_some_and(Value::is_boolean) {
            let h = match handled.filter(|h| !h.is_null()).or_else(|| r.get("cleanupCompletedAt").cloned()) {
                Some(Value::Bool(b)) => b,
                Some(Value::Number(n)) => n.as_f64().is_some_and(|f| f != 0.0),
                Some(Value::String(s)) => !s.is_empty(),
                Some(Value::Null) | None => false,
                Some(_) => true,
            };
            r.insert("cleanupHandled".into(), Value::Bool(h));
        }
        let channel = r.remove("requesterChannel");
        let account = r.remove("requesterAccountId");
        if !r.contains_key("requesterOrigin") {
            let ctx = entry::DeliveryContext::from_parts(channel.as_ref(), None, account.as_ref(), None);
            if !ctx.is_empty() {
                r.insert("requesterOrigin".into(), ctx.to_json());
            }
        }
    }
    let key = |name: &str| -> std::result::Result<String, String> {
        let raw = r.get(name).and_then(Value::as_str).ok_or_else(|| format!("{what}: no {name}"))?;
        let agent = km.agent_id_of(raw);
        km.import_canonical(raw, &agent).map_err(|e| format!("{what}: {name}: {}", e.message()))
    };
    let child = key("childSessionKey")?;
    let requester = key("requesterSessionKey")?;
    r.insert("childSessionKey".into(), Value::from(child.clone()));
    r.insert("requesterSessionKey".into(), Value::from(requester.clone()));
    if !r.get("requesterDisplayKey").is_some_and(Value::is_string) {
        r.insert("requesterDisplayKey".into(), Value::from(requester.clone()));
    }
    if !r.get("task").is_some_and(Value::is_string) {
        r.insert("task".into(), Value::from(""));
    }
    if !matches!(r.get("cleanup").and_then(Value::as_str), Some("keep" | "delete")) {
        r.insert("cleanup".into(), Value::from("keep"));
    }
    let ms =
        |r: &Map<String, Value>, name: &str| r.get(name).and_then(Value::as_f64).filter(|f| f.is_finite() && *f > 0.0);
    if ms(&r, "createdAt").is_none() {
        let created = ms(&r, "startedAt").map_or(now, |f| f as i64);
        r.insert("createdAt".into(), Value::from(created));
    }
    let ended = ms(&r, "endedAt").is_some();
    let handled = r.remove("cleanupHandled").is_some_and(|h| h == Value::Bool(true));
    let valid_announce = r.get("announce").and_then(Value::as_object).is_some_and(|a| {
        matches!(a.get("status").and_then(Value::as_str), Some("pending" | "delivered" | "failed" | "skipped"))
            && a.get("attempts").is_some_and(Value::is_u64)
            && a.get("idempotencyKey").is_some_and(Value::is_string)
    });
    if !valid_announce {
        let status = if ms(&r, "cleanupCompletedAt").is_some() || handled { "delivered" } else { "pending" };
        r.insert(
            "announce".into(),
            serde_json::json!({"status": status, "attempts": 0, "idempotencyKey": format!("import:{run_id}")}),
        );
    }
    let announce_status =
        r.get("announce").and_then(|a| a.get("status")).and_then(Value::as_str).unwrap_or("pending").to_owned();
    let archive_at = ms(&r, "archiveAtMs").map(|f| f as i64);
    Ok(SubagentRunRow {
        run_id: run_id.to_owned(),
        requester_key: requester,
        child_key: child,
        ended,
        announce_status,
        archive_at,
        record: Value::Object(r).to_string(),
    })
}

/// Imports the gateway state folder `dir` into `store` (API.md §5); the messages it adds are
/// also written to the JSONL mirror in `mirror_dir`, as appended messages are (DECISIONS.md #8).
pub fn import_state_dir(
    store: &Store,
    km: &KeyModel,
    mirror_dir: Option<&Path>,
    dir: &Path,
    now: i64,
) -> Result<ImportReport> {
    let root = std::fs::canonicalize(dir).map_err(|e| Error::store(format!("cannot import {}: {e}", dir.display())))?;
    if !root.is_dir() {
        return Err(Error::store(format!("cannot import {}: not a folder", dir.display())));
    }
    let mut imp = Importer { root, km, mirror_dir, now, report: ImportReport::default(), dbs: Vec::new() };
    let mut cands = Vec::new();
    let mut index = HashMap::new();
    for (i, (path, agent)) in imp.store_files().into_iter().enumerate() {
        if path.exists() {
            imp.report.layouts.entry(Layout::Json).or_default();
        }
        imp.read_store(&path, &agent, i == 0, &mut cands, &mut index);
    }
    imp.read_agent_databases(&mut cands, &mut index);
    imp.adopt_main_entries(&mut cands, &mut index);

    // A transcript is read once per session id, for the first entry that names it.
    let mut read_sids: HashSet<String> = HashSet::new();
    let mut batch = Vec::new();
    let mut batch_messages = 0usize;
    for i in 0..cands.len() {
        let sid = entry::str_field(&cands[i].entry, "sessionId").unwrap_or_default().to_owned();
        let (transcript, generations) = match cands[i].db {
            Some(db) => imp.database_transcripts(db, &cands[i], &mut read_sids),
            None if read_sids.insert(sid.clone()) => {
                (imp.transcript_file(&cands[i], &sid).map(|f| imp.read_transcript(&f)), Vec::new())
            }
            None => (None, Vec::new()),
        };
        batch_messages += transcript.as_ref().map_or(0, Vec::len);
        batch_messages += generations.iter().map(|(_, m)| m.len()).sum::<usize>();
        batch.push((i, transcript, generations));
        if batch_messages >= BATCH_MESSAGES || batch.len() >= BATCH_SESSIONS {
            imp.write_batch(store, &batch, &cands)?;
            batch.clear();
            batch_messages = 0;
        }
    }
    if !batch.is_empty() {
        imp.write_batch(store, &batch, &cands)?;
    }
    imp.import_runs(store)?;
    imp.import_database_runs(store)?;
    Ok(imp.report)
}
