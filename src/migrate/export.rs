//! Exporting the store as a gateway state folder (REFERENCE.md §2.1, §2.2, §2.6, §6.6):
//! `agents/<id>/sessions/sessions.json` (2-space JSON, no trailing newline), one version-3 JSONL
//! transcript per session id beside it (the mirror's line format), and
//! `subagents/runs.json` version 2. Files get mode 0600, folders 0700.
//!
//! Nothing is written outside the folder given: agent ids are normalised ids, a session id that
//! is not a plain file name gets no transcript (reported), and a folder or file that is a
//! symbolic link is refused. The whole export reads one snapshot of the store.

use std::collections::{BTreeMap, HashMap};
use std::fs;
use std::io::{BufWriter, Write};
use std::path::Path;

use serde_json::{Map, Value};

use super::{encode_uri_component, relative, topic_of, Skipped};
use crate::entry::{self, Entry};
use crate::error::{Error, Result};
use crate::keys::{parse_agent_key, KeyModel};
use crate::mirror;
use crate::store::Store;

/// What an export wrote.
#[derive(Debug, Default, Clone, PartialEq)]
pub struct ExportReport {
    pub sessions: u64,
    pub messages: u64,
    pub runs: u64,
    /// 2026.9 task ledger rows (`layout: '2026.9'` only)
    pub tasks: u64,
    pub files: u64,
    pub skipped: Vec<Skipped>,
}

impl ExportReport {
    pub fn to_json(&self) -> Value {
        serde_json::json!({
            "sessions": self.sessions,
            "messages": self.messages,
            "runs": self.runs,
            "tasks": self.tasks,
            "files": self.files,
            "skipped": self.skipped.iter().map(Skipped::to_json).collect::<Vec<_>>(),
        })
    }
}

fn io_err(path: &Path, e: std::io::Error) -> Error {
    Error::store(format!("cannot export to {}: {e}", path.display()))
}

/// Creates `dir` (and its parents) with mode 0700, refusing a symbolic link on the way below
/// `root`.
fn make_dir(root: &Path, dir: &Path) -> Result<()> {
    let outside = || Error::store(format!("cannot export to {}: it leads outside the export folder", dir.display()));
    let rel = dir.strip_prefix(root).map_err(|_| outside())?;
    // One level at a time, each checked before the next is made: a link to a folder outside the
    // export folder is never followed, not even to create an empty folder through it.
    let mut b = fs::DirBuilder::new();
    #[cfg(unix)]
    {
        use std::os::unix::fs::DirBuilderExt;
        b.mode(0o700);
    }
    let mut cur = root.to_path_buf();
    for part in rel.components() {
        cur.push(part);
        match fs::symlink_metadata(&cur) {
            Ok(m) if m.is_dir() => {}
            Ok(_) => match fs::canonicalize(&cur) {
                Ok(real) if real.starts_with(root) && real.is_dir() => {}
                _ => return Err(outside()),
            },
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => b.create(&cur).map_err(|e| io_err(&cur, e))?,
            Err(e) => return Err(io_err(&cur, e)),
        }
    }
    Ok(())
}

/// Opens a file for writing with mode 0600, replacing it; a symbolic link is refused.
fn create_file(path: &Path) -> Result<BufWriter<fs::File>> {
    if fs::symlink_metadata(path).map(|m| m.file_type().is_symlink()).unwrap_or(false) {
        return Err(Error::store(format!("cannot export to {}: it is a symbolic link", path.display())));
    }
    let mut opts = fs::OpenOptions::new();
    opts.write(true).create(true).truncate(true);
    #[cfg(unix)]
    {
        use std::os::unix::fs::OpenOptionsExt;
        opts.mode(0o600);
    }
    let f = opts.open(path).map_err(|e| io_err(path, e))?;
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        f.set_permissions(fs::Permissions::from_mode(0o600)).map_err(|e| io_err(path, e))?;
    }
    Ok(BufWriter::with_capacity(1 << 16, f))
}

fn write_all(path: &Path, text: &str) -> Result<()> {
    let mut w = create_file(path)?;
    w.write_all(text.as_bytes()).and_then(|_| w.flush()).map_err(|e| io_err(path, e))
}

/// A registry record as the gateway keeps it (§6.4): our record plus `cleanupHandled` (the
/// announce was handed over, whatever came of it). `announce` stays, so that importing the
/// folder back restores it exactly; the gateway keeps fields it does not know.
fn gateway_run(record: &str) -> Option<Value> {
    let mut r: Map<String, Value> = serde_json::from_str(record).ok()?;
    let status = r.get("announce").and_then(|a| a.get("status")).and_then(Value::as_str).unwrap_or("pending");
    r.insert("cleanupHandled".into(), Value::Bool(status != "pending"));
    Some(Value::Object(r))
}

/// Every stored entry by agent, in key order; keys outside any agent (`global`, `unknown`) go to
/// the default agent.
pub(super) fn sessions_by_agent(
    db: &crate::store::Db<'_>,
    km: &KeyModel,
) -> Result<BTreeMap<String, Vec<(String, Entry)>>> {
    let mut by_agent: BTreeMap<String, Vec<(String, Entry)>> = BTreeMap::new();
    db.all_sessions(|key, json| {
        let entry: Entry = serde_json::from_str(&json)
            .map_err(|e| Error::store(format!("the stored entry of {key} is not valid JSON: {e}")))?;
        let agent = parse_agent_key(&key).map_or_else(|| km.default_agent().to_owned(), |k| k.agent_id);
        by_agent.entry(agent).or_default().push((key, entry));
        Ok(())
    })?;
    Ok(by_agent)
}

/// Exports `store` as a gateway state folder at `dir` (API.md §5). `state_dir` is where the
/// folder will be used from when it is moved into place (default: `dir` itself): each session's
/// `sessionFile` is written as an absolute path below it, as the gateway records it on every
/// entry (its `sessions.list` titles and previews, and a topic's runs, find the transcript only
/// through it; the 2026.1 gateway opens it as given, so a relative one would be read against its
/// working directory).
pub fn export_state_dir(store: &Store, km: &KeyModel, dir: &Path, state_dir: Option<&Path>) -> Result<ExportReport> {
    let mut b = fs::DirBuilder::new();
    b.recursive(true);
    #[cfg(unix)]
    {
        use std::os::unix::fs::DirBuilderExt;
        b.mode(0o700);
    }
    b.create(dir).map_err(|e| io_err(dir, e))?;
    let root = fs::canonicalize(dir).map_err(|e| io_err(dir, e))?;
    let target = state_dir.map_or_else(|| root.clone(), Path::to_path_buf);
    let mut report = ExportReport::default();
    store.read(|db| {
        let by_agent = sessions_by_agent(db, km)?;
        for (agent, entries) in by_agent {
            let sessions_dir = root.join("agents").join(&agent).join("sessions");
            make_dir(&root, &sessions_dir)?;
            let target_sessions = target.join("agents").join(&agent).join("sessions");
            // the transcript file written for each session id (one per id, shared by its keys)
            let mut written: HashMap<String, String> = HashMap::new();
            let mut store_obj = Map::new();
            for (key, mut e) in entries {
                e.remove("sessionFile");
                let sid = entry::str_field(&e, "sessionId").unwrap_or_default().to_owned();
                let name = match topic_of(&key) {
                    Some(t) => format!("{sid}-topic-{}.jsonl", encode_uri_component(t)),
                    None => format!("{sid}.jsonl"),
                };
                if !mirror::is_safe_file_id(&sid) {
                    if db.entry_count(&sid)? > 0 {
                        report.skipped.push(Skipped {
                            file: relative(&root, &sessions_dir.join("sessions.json")),
                            line: None,
                            reason: format!(
                                "entry {}: its sessionId is not a plain file name; transcript not written",
                                crate::error::clip(&key)
                            ),
                        });
                    }
                } else if !written.contains_key(&sid) {
                    if let Some(n) = write_transcript(db, &sessions_dir.join(&name), &sid, entry::updated_at(&e))? {
                        written.insert(sid.clone(), name);
                        report.files += 1;
                        report.messages += n;
                    }
                }
                // As the gateway records it on every entry: its `sessions.list` (titles, previews)
                // and a topic's runs find the transcript only through `sessionFile`.
                if let Some(file) = written.get(&sid) {
                    let path = target_sessions.join(file).to_string_lossy().into_owned();
                    e.insert("sessionFile".into(), Value::from(path));
                }
                store_obj.insert(key, Value::Object(e));
                report.sessions += 1;
            }
            let text = serde_json::to_string_pretty(&Value::Object(store_obj))
                .map_err(|e| Error::store(format!("cannot encode sessions.json: {e}")))?;
            write_all(&sessions_dir.join("sessions.json"), &text)?;
            report.files += 1;
        }
        let runs = db.all_subagent_runs()?;
        if !runs.is_empty() {
            let mut map = Map::new();
            for r in &runs {
                if let Some(v) = gateway_run(&r.record) {
                    map.insert(r.run_id.clone(), v);
                }
            }
            report.runs = map.len() as u64;
            let sub = root.join("subagents");
            make_dir(&root, &sub)?;
            let doc = serde_json::json!({"version": 2, "runs": Value::Object(map)});
            let mut text = serde_json::to_string_pretty(&doc)
                .map_err(|e| Error::store(format!("cannot encode runs.json: {e}")))?;
            text.push('\n');
            write_all(&sub.join("runs.json"), &text)?;
            report.files += 1;
        }
        Ok(())
    })?;
    Ok(report)
}

/// Writes the transcript of `sid` (header first) when it has entries: every entry in order,
/// messages and the others, with their ids and parent links. How many messages it wrote;
/// `None` when the transcript is empty (no file).
fn write_transcript(db: &crate::store::Db<'_>, file: &Path, sid: &str, updated: i64) -> Result<Option<u64>> {
    if db.entry_count(sid)? == 0 {
        return Ok(None);
    }
    let mut w = create_file(file)?;
    let mut line = mirror::header_line(sid, updated);
    line.push('\n');
    w.write_all(line.as_bytes()).map_err(|e| io_err(file, e))?;
    let mut n = 0u64;
    db.each_entry(sid, |e| {
        n += u64::from(e.body.is_message());
        let mut line = mirror::entry_line(&e, updated);
        line.push('\n');
        w.write_all(line.as_bytes()).map_err(|e| io_err(file, e))
    })?;
    w.flush().map_err(|e| io_err(file, e))?;
    Ok(Some(n))
}
