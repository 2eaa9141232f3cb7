//! The import's walk over a 2026.9 state folder: which databases it opens, what makes it leave
//! one out (a `skipped` entry naming the reason; a database is read whole or not at all), and
//! how their rows become candidates for the shared import (`migrate::import`).
//!
//! It opens every file through `store::oc9_read` (read-only, one snapshot each) and never
//! follows a path out of the folder.

use std::collections::{HashMap, HashSet};
use std::path::Path;

use serde_json::{Map, Value};

use super::{
    entry_from_node, event_text, run_record, task_row, window_json, AGENT_SCHEMA, STATE_SCHEMA, WINDOWS_FIELD,
};
use crate::entry;
use crate::error::Result;
use crate::keys::normalize_agent_id;
use crate::migrate::import::{run_row, Candidate, Entries, Importer, Layout};
use crate::migrate::{inside, jsonl, relative, Resolved};
use crate::store::oc9_read::{Oc9Db, Why};
use crate::store::Store;

/// The agent database of an agent folder, relative to it.
pub const AGENT_DB: &str = "agent/openclaw-agent.sqlite";
/// The global database, relative to the state folder.
pub const STATE_DB: &str = "state/openclaw.sqlite";

/// Opens a database of the folder after checking where it leads, its role and its schema
/// version; `Err` with the reason to report.
fn open_checked(
    root: &Path,
    path: &Path,
    role: &str,
    version: i64,
    tables: &[&str],
) -> std::result::Result<Option<Oc9Db>, Why> {
    let real = match inside(root, path) {
        Resolved::Missing => return Ok(None),
        Resolved::Outside => return Err("it leads outside the state folder; not read".into()),
        Resolved::Inside(real) => real,
    };
    if !real.is_file() {
        return Err("not a file".into());
    }
    let db = Oc9Db::open(&real)?;
    if let Some(found) = db.role()?.filter(|r| r != role) {
        return Err(format!("a 2026.9 database of role {found}, not {role}; not read"));
    }
    let found = db.user_version()?;
    if found != version {
        return Err(format!(
            "{role} database schema {found}: this build reads schema {version} (OpenClaw 2026.9.6); nothing was read from it"
        ));
    }
    db.quick_check()?;
    for t in tables {
        if !db.has_table(t)? {
            return Err(format!("it has no {t} table; not read"));
        }
    }
    Ok(Some(db))
}

impl Importer<'_> {
    /// The agent folders, in name order: (folder name, path).
    fn agent_folders(&self) -> Vec<(String, std::path::PathBuf)> {
        let mut agents: Vec<(String, std::path::PathBuf)> = std::fs::read_dir(self.root.join("agents"))
            .map(|rd| {
                rd.filter_map(|e| e.ok())
                    .filter(|e| e.path().is_dir())
                    .map(|e| (e.file_name().to_string_lossy().into_owned(), e.path()))
                    .collect()
            })
            .unwrap_or_default();
        agents.sort();
        agents
    }

    /// Reads every agent database of the folder into candidates.
    pub(in crate::migrate) fn read_agent_databases(
        &mut self,
        cands: &mut Vec<Candidate>,
        index: &mut HashMap<String, usize>,
    ) {
        for (name, folder) in self.agent_folders() {
            let path = folder.join(AGENT_DB);
            let rel = relative(&self.root, &path);
            let tables = ["session_nodes", "session_windows", "transcript_events"];
            let db = match open_checked(&self.root, &path, "agent", AGENT_SCHEMA, &tables) {
                Ok(Some(db)) => db,
                Ok(None) => {
                    if !folder.join("sessions").join("sessions.json").exists() {
                        self.skip(
                            &relative(&self.root, &folder),
                            None,
                            "an agent folder with neither a 2026.9 database (agent/openclaw-agent.sqlite) nor a sessions.json; nothing to read",
                        );
                    }
                    continue;
                }
                Err(why) => {
                    self.skip(&rel, None, why);
                    continue;
                }
            };
            self.report.layouts.entry(Layout::Sqlite).or_default();
            let agent = normalize_agent_id(&name);
            match self.node_candidates(&db, &agent, &folder, &rel) {
                Ok(found) => {
                    let at = self.dbs.len();
                    self.dbs.push(db);
                    for mut c in found {
                        c.db = Some(at);
                        self.offer(c, cands, index);
                    }
                }
                Err(why) => self.skip(&rel, None, format!("{why}; nothing was read from it")),
            }
        }
    }

    /// The candidates of one agent database (all or, on a read failure, none).
    fn node_candidates(
        &mut self,
        db: &Oc9Db,
        agent: &str,
        folder: &Path,
        rel: &str,
    ) -> std::result::Result<Vec<Candidate>, Why> {
        let mut windows: HashMap<String, Vec<Value>> = HashMap::new();
        db.session_windows(|row| {
            if let Some(key) = row.get("session_key").and_then(Value::as_str) {
                windows.entry(key.to_owned()).or_default().push(window_json(&row));
            }
        })?;
        let mut nodes: Vec<Map<String, Value>> = Vec::new();
        db.session_nodes(|row| nodes.push(row))?;
        let mut out = Vec::with_capacity(nodes.len());
        for node in nodes {
            let raw_key = node.get("session_key").and_then(Value::as_str).unwrap_or_default().to_owned();
            let what = format!("session {}", crate::error::clip(&raw_key));
            let mut e = match entry_from_node(&node, windows.remove(&raw_key).unwrap_or_default()) {
                Ok(e) => e,
                Err(why) => {
                    self.skip(rel, None, format!("{what}: {why}"));
                    continue;
                }
            };
            match e.get("sessionId").and_then(Value::as_str) {
                Some(s)
                    if !s.trim().is_empty()
                        && s.len() <= entry::MAX_SESSION_ID_LEN
                        && !s.chars().any(char::is_control) => {}
                _ => {
                    self.skip(rel, None, format!("{what}: no usable sessionId"));
                    continue;
                }
            }
            let key = match self.km.import_canonical(&raw_key, agent) {
                Ok(k) => k,
                Err(err) => {
                    self.skip(rel, None, format!("{what}: {}", err.message()));
                    continue;
                }
            };
            if let Some(parent) = e.get("spawnedBy").and_then(Value::as_str).filter(|s| !s.trim().is_empty()) {
                if let Ok(p) = self.km.import_canonical(parent, agent) {
                    e.insert("spawnedBy".into(), Value::from(p));
                }
            }
            let updated = e.get("updatedAt").and_then(Value::as_f64).filter(|f| f.is_finite());
            let updated_missing = updated.is_none();
            if updated_missing {
                e.insert("updatedAt".into(), Value::from(self.now));
            }
            out.push(Candidate {
                was_canonical: raw_key.trim() == key,
                key,
                entry: e,
                updated: updated.map_or(self.now, |f| f.floor() as i64),
                updated_missing,
                legacy_direct: false,
                raw_key: raw_key.clone(),
                agent: agent.to_owned(),
                store_dir: folder.to_path_buf(),
                store_rel: rel.to_owned(),
                session_file: None,
                db: None,
            });
        }
        Ok(out)
    }

    /// The entries of one generation's events, its header left out (a bad event reported and
    /// left out).
    fn generation_entries(&mut self, db: usize, rel: &str, sid: &str) -> std::result::Result<Entries, Why> {
        let mut events = Vec::new();
        self.dbs[db].transcript_events(sid, |seq, ev| events.push((seq, ev)))?;
        let mut out = Vec::with_capacity(events.len());
        for (seq, ev) in events {
            let what = format!("transcript {} event {seq}", crate::error::clip(sid));
            let parsed = event_text(ev)
                .and_then(|t| serde_json::from_str::<Value>(&t).map_err(|e| format!("not valid JSON: {e}")));
            match parsed {
                Ok(Value::Object(obj)) if obj.get("type").and_then(Value::as_str) == Some("session") => {}
                Ok(Value::Object(obj)) => match jsonl::entry_of(obj, 4) {
                    Ok(e) => out.push(e),
                    Err(why) => self.skip(rel, None, format!("{what}: {why}")),
                },
                Ok(_) => self.skip(rel, None, format!("{what}: not a JSON object")),
                Err(why) => self.skip(rel, None, format!("{what}: {why}")),
            }
        }
        Ok(out)
    }

    /// The transcripts of a 2026.9 candidate: its current generation's, and those of its other
    /// generations by session id (each session id read once per import).
    pub(in crate::migrate) fn database_transcripts(
        &mut self,
        db: usize,
        c: &Candidate,
        read_sids: &mut HashSet<String>,
    ) -> (Option<Entries>, Vec<(String, Entries)>) {
        let current = entry::str_field(&c.entry, "sessionId").unwrap_or_default().to_owned();
        let mut sids = vec![current.clone()];
        if let Some(Value::Array(ws)) = c.entry.get(WINDOWS_FIELD) {
            sids.extend(ws.iter().filter_map(|w| w.get("sessionId").and_then(Value::as_str)).map(str::to_owned));
        }
        let (mut transcript, mut generations) = (None, Vec::new());
        for sid in sids {
            if !read_sids.insert(sid.clone()) {
                continue;
            }
            match self.generation_entries(db, &c.store_rel, &sid) {
                Ok(m) if sid == current => transcript = Some(m),
                Ok(m) => generations.push((sid, m)),
                Err(why) => self.skip(&c.store_rel, None, format!("transcript {}: {why}", crate::error::clip(&sid))),
            }
        }
        (transcript, generations)
    }

    /// Imports the sub-agent runs and task rows of the global database.
    pub(in crate::migrate) fn import_database_runs(&mut self, store: &Store) -> Result<()> {
        let path = self.root.join(STATE_DB);
        let rel = relative(&self.root, &path);
        let db = match open_checked(&self.root, &path, "global", STATE_SCHEMA, &["subagent_runs", "task_runs"]) {
            Ok(Some(db)) => db,
            Ok(None) => return Ok(()),
            Err(why) => {
                self.skip(&rel, None, why);
                return Ok(());
            }
        };
        self.report.layouts.entry(Layout::Sqlite).or_default();
        let (mut runs, mut tasks) = (Vec::new(), Vec::new());
        let read = db.subagent_runs(|r| runs.push(r)).and_then(|()| db.task_runs(|t| tasks.push(t)));
        if let Err(why) = read {
            self.skip(&rel, None, format!("{why}; nothing was read from it"));
            return Ok(());
        }
        let mut run_rows = Vec::new();
        for r in &runs {
            match run_record(r).and_then(|v| run_row(&v, false, self.km, self.now)) {
                Ok(row) => run_rows.push(row),
                Err(why) => {
                    let id = r.get("run_id").and_then(Value::as_str).unwrap_or_default();
                    self.skip(&rel, None, format!("run {}: {why}", crate::error::clip(id)));
                }
            }
        }
        let mut task_rows = Vec::new();
        for t in &tasks {
            match task_row(t) {
                Ok(row) => task_rows.push(row),
                Err(why) => self.skip(&rel, None, why),
            }
        }
        let (runs_added, tasks_added) = store.write(|w| {
            let (mut r, mut t) = (0u64, 0u64);
            for row in &run_rows {
                r += u64::from(w.insert_subagent_run_if_absent(row)?);
            }
            for row in &task_rows {
                t += u64::from(w.insert_task_if_absent(row)?);
            }
            Ok((r, t))
        })?;
        self.report.add(Layout::Sqlite, 0, 0, runs_added, tasks_added);
        Ok(())
    }
}
