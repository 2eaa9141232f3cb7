//! Exporting the store into a 2026.9 state folder (API.md §5, `layout: '2026.9'`): the rollback
//! path for a 2026.9 user.
//!
//! The 2026.9 gateway refuses databases it did not create (a schema it cannot verify as its own),
//! so the export writes INTO a folder the gateway has initialised (its databases exist at agent
//! schema 23 / state schema 18): sessions as `session_nodes` (+ projections) and
//! `session_windows` rows, transcripts as `transcript_events` of generations that have none yet,
//! sub-agent runs and task rows not already there. The gateway validates and indexes the rows
//! itself when it next opens them. An agent whose database does not exist yet is reported, not
//! created; a path leading outside the folder is never opened.

use std::path::Path;

use serde_json::{Map, Value};

use super::read::{AGENT_DB, STATE_DB};
use super::{AGENT_SCHEMA, STATE_SCHEMA, WINDOWS_FIELD};
use crate::entry::{self, Entry};
use crate::error::{Error, Result};
use crate::keys::KeyModel;
use crate::migrate::export::ExportReport;
use crate::migrate::{inside, relative, Resolved, Skipped};
use crate::mirror;
use crate::params::snake_case;
use crate::store::oc9_write::{Oc9Writer, TASK_COLUMNS};
use crate::store::{Db, Store};

/// The values 2026.9 accepts in its checked columns (anything else is left NULL).
const STATUS: [&str; 5] = ["running", "done", "failed", "killed", "timeout"];
const CREATED_VIA: [&str; 8] = ["operator", "spawn", "channel", "cron", "talk", "run", "plugin", "internal"];
const ACTOR_TYPE: [&str; 3] = ["human", "agent", "system"];
const REASON: [&str; 8] = ["initial", "reset", "rollover", "fork", "rewind", "switch", "recovery", "compaction"];
const SCOPE: [&str; 4] = ["conversation", "shared-main", "group", "channel"];
const CHAT_TYPE: [&str; 3] = ["direct", "group", "channel"];
const HOOK_SOURCE: [&str; 2] = ["gmail", "webhook"];

fn one_of(v: Option<&Value>, allowed: &[&str]) -> Option<Value> {
    v.and_then(Value::as_str).filter(|s| allowed.contains(s)).map(Value::from)
}

fn time(v: Option<&Value>) -> Option<Value> {
    v.and_then(Value::as_f64).filter(|f| f.is_finite()).map(|f| Value::from(f.floor() as i64))
}

fn text(v: Option<&Value>) -> Option<Value> {
    v.and_then(Value::as_str).filter(|s| !s.trim().is_empty()).map(Value::from)
}

fn put(row: &mut Map<String, Value>, col: &str, v: Option<Value>) {
    if let Some(v) = v {
        row.insert(col.into(), v);
    }
}

/// The `session_nodes` row of an entry: `entry_json` without what 2026.9 keeps elsewhere
/// (generations, owner), and the projections its entry writer derives.
pub fn node_row(key: &str, e: &Entry) -> Map<String, Value> {
    let mut stored = e.clone();
    stored.remove(WINDOWS_FIELD);
    let owner = stored.remove("owner");
    let mut row = Map::new();
    row.insert("session_key".into(), Value::from(key));
    row.insert("current_session_id".into(), Value::from(entry::str_field(e, "sessionId").unwrap_or_default()));
    row.insert("entry_json".into(), Value::Object(stored).to_string().into());
    row.insert("updated_at".into(), Value::from(entry::updated_at(e)));
    put(&mut row, "status", one_of(e.get("status"), &STATUS));
    put(&mut row, "created_at", time(e.get("createdAt")));
    put(&mut row, "created_via", one_of(e.get("createdVia"), &CREATED_VIA));
    let actor = e.get("createdActor");
    if let Some(t) = one_of(actor.and_then(|a| a.get("type")), &ACTOR_TYPE) {
        row.insert("created_actor_type".into(), t);
        put(&mut row, "created_actor_id", text(actor.and_then(|a| a.get("id"))));
    }
    if let Some(o) = owner.as_ref().and_then(Value::as_object) {
        let a = o.get("actor");
        put(&mut row, "owner_actor_type", text(a.and_then(|a| a.get("type"))));
        put(&mut row, "owner_actor_id", text(a.and_then(|a| a.get("id"))));
        let by = o.get("assignedBy");
        put(&mut row, "owner_assigned_by_type", text(by.and_then(|a| a.get("type"))));
        put(&mut row, "owner_assigned_by_id", text(by.and_then(|a| a.get("id"))));
        put(&mut row, "owner_assigned_at", time(o.get("assignedAt")));
    }
    put(&mut row, "project_id", text(e.get("projectId")));
    put(&mut row, "parent_session_key", text(e.get("parentSessionKey")).or_else(|| text(e.get("spawnedBy"))));
    put(&mut row, "spawned_by", text(e.get("spawnedBy")));
    let fork = e.get("forkSource");
    put(&mut row, "fork_source_session_key", text(fork.and_then(|f| f.get("sessionKey"))));
    put(&mut row, "fork_source_session_id", text(fork.and_then(|f| f.get("sessionId"))));
    put(&mut row, "fork_source_entry_id", text(fork.and_then(|f| f.get("entryId"))));
    for (col, field) in
        [("label", "label"), ("display_name", "displayName"), ("category", "category"), ("icon", "icon")]
    {
        put(&mut row, col, text(e.get(field)));
    }
    for (col, field) in [
        ("pinned_at", "pinnedAt"),
        ("archived_at", "archivedAt"),
        ("last_read_at", "lastReadAt"),
        ("last_interaction_at", "lastInteractionAt"),
        ("last_activity_at", "lastActivityAt"),
    ] {
        put(&mut row, col, time(e.get(field)));
    }
    row
}

/// The `session_windows` rows of an entry: its kept generations, and one for its current
/// session id when none was kept.
pub fn window_rows(key: &str, e: &Entry) -> Vec<Map<String, Value>> {
    let sid = entry::str_field(e, "sessionId").unwrap_or_default();
    let created = time(e.get("createdAt")).unwrap_or_else(|| Value::from(entry::updated_at(e)));
    let mut out = Vec::new();
    let kept = e.get(WINDOWS_FIELD).and_then(Value::as_array).cloned().unwrap_or_default();
    let mut windows: Vec<Map<String, Value>> = kept.into_iter().filter_map(|w| w.as_object().cloned()).collect();
    if !windows.iter().any(|w| w.get("sessionId").and_then(Value::as_str) == Some(sid)) {
        let mut w = Map::new();
        w.insert("sessionId".into(), Value::from(sid));
        for (field, from) in [
            ("chatType", "chatType"),
            ("model", "model"),
            ("modelProvider", "modelProvider"),
            ("displayName", "displayName"),
        ] {
            if let Some(v) = e.get(from) {
                w.insert(field.into(), v.clone());
            }
        }
        windows.push(w);
    }
    for w in windows {
        let Some(id) = text(w.get("sessionId")) else { continue };
        let mut row = Map::new();
        row.insert("session_id".into(), id);
        row.insert("session_key".into(), Value::from(key));
        row.insert(
            "session_scope".into(),
            one_of(w.get("sessionScope"), &SCOPE).unwrap_or_else(|| Value::from("conversation")),
        );
        row.insert("created_at".into(), time(w.get("createdAt")).unwrap_or_else(|| created.clone()));
        row.insert("updated_at".into(), time(w.get("updatedAt")).unwrap_or_else(|| Value::from(entry::updated_at(e))));
        put(&mut row, "reason", one_of(w.get("reason"), &REASON));
        put(&mut row, "status", one_of(w.get("status"), &STATUS));
        put(&mut row, "chat_type", one_of(w.get("chatType"), &CHAT_TYPE));
        put(&mut row, "hook_external_content_source", one_of(w.get("hookExternalContentSource"), &HOOK_SOURCE));
        put(&mut row, "started_at", time(w.get("startedAt")));
        put(&mut row, "ended_at", time(w.get("endedAt")));
        for field in [
            "previousSessionId",
            "channel",
            "accountId",
            "modelProvider",
            "model",
            "agentHarnessId",
            "parentSessionKey",
            "spawnedBy",
            "displayName",
            "pluginOwnerId",
        ] {
            put(&mut row, &snake_case(field), text(w.get(field)));
        }
        row.insert("acp_owned".into(), Value::from(i64::from(w.get("acpOwned") == Some(&Value::Bool(true)))));
        out.push(row);
    }
    out
}

/// The `delivery.status` of 2026.9 for an API.md §4 `announce.status`.
fn delivery_status(announce: Option<&str>) -> &'static str {
    match announce {
        Some("delivered") => "delivered",
        Some("failed") => "failed",
        Some("skipped") => "not_required",
        _ => "pending",
    }
}

/// The `subagent_runs` row of a registry record: a run imported from 2026.9 goes back with its
/// payload as it was; one of ours gets the nested `execution`/`completion`/`delivery` records
/// 2026.9 requires, derived from its API.md §4 fields.
pub fn run_row(record: &str) -> Option<Map<String, Value>> {
    let mut r: Map<String, Value> = serde_json::from_str(record).ok()?;
    let key = |r: &Map<String, Value>, f: &str| r.get(f).and_then(Value::as_str).map(str::to_owned);
    if !r.contains_key("execution") {
        let ended = r.get("endedAt").filter(|v| v.is_number()).cloned();
        let mut exec = Map::new();
        exec.insert("status".into(), Value::from(if ended.is_some() { "terminal" } else { "running" }));
        put(&mut exec, "startedAt", r.get("startedAt").filter(|v| v.is_number()).cloned());
        if let Some(t) = ended {
            exec.insert("endedAt".into(), t.clone());
            let status = r.get("outcome").and_then(|o| o.get("status")).and_then(Value::as_str).unwrap_or("ok");
            exec.insert("outcome".into(), serde_json::json!({"status": status, "endedAt": t}));
        }
        r.insert("execution".into(), Value::Object(exec));
        r.entry("completion").or_insert_with(|| serde_json::json!({"required": false}));
        let status = delivery_status(r.get("announce").and_then(|a| a.get("status")).and_then(Value::as_str));
        r.entry("delivery").or_insert_with(|| serde_json::json!({ "status": status }));
    }
    let mut row = Map::new();
    row.insert("run_id".into(), Value::from(key(&r, "runId")?));
    row.insert("child_session_key".into(), Value::from(key(&r, "childSessionKey")?));
    row.insert("requester_session_key".into(), Value::from(key(&r, "requesterSessionKey")?));
    put(&mut row, "controller_session_key", key(&r, "controllerSessionKey").map(Value::from));
    row.insert("created_at".into(), time(r.get("createdAt")).unwrap_or(Value::from(0)));
    row.insert("payload_json".into(), Value::Object(r).to_string().into());
    Some(row)
}

/// The `task_runs` row (and delivery state) of a stored task: an imported 2026.9 row column for
/// column as read; a task of ours (no `notifyPolicy`), which lacks what only 2026.9 records,
/// completed as 2026.9 completes a task it creates ([`complete_2026_9`]).
pub fn task_columns(record: &str) -> Option<Map<String, Value>> {
    let r: Map<String, Value> = serde_json::from_str(record).ok()?;
    let mut row = Map::new();
    for col in TASK_COLUMNS {
        if col == "detail_json" {
            put(&mut row, col, r.get("detail").filter(|v| !v.is_null()).map(|d| Value::from(d.to_string())));
        } else {
            put(&mut row, col, r.get(&super::camel(col)).filter(|v| !v.is_null()).cloned());
        }
    }
    if let Some(ds) = r.get("deliveryState").and_then(Value::as_object) {
        put(&mut row, "requester_origin_json", ds.get("requesterOrigin").map(|o| Value::from(o.to_string())));
        put(&mut row, "last_notified_event_at", time(ds.get("lastNotifiedEventAt")));
    }
    // every 2026.9 row has a notify policy (a NOT NULL column); a task of ours never has one
    if !r.contains_key("notifyPolicy") {
        complete_2026_9(&mut row);
    }
    Some(row)
}

/// Fills the columns 2026.9 requires or derives when it creates a task, where the row has none:
/// `scope_kind` (`session` when there is
/// a requester session, else `system`), `delivery_status` (`not_applicable` for a system task,
/// else `pending`), `notify_policy` (`silent` when delivery does not apply, else `done_only`),
/// `task` (empty), `terminal_outcome` `succeeded` for a succeeded task, and for a sub-agent
/// task its `source_id` (the run id) and `detail_json` (the backing of the run's first
/// generation).
fn complete_2026_9(row: &mut Map<String, Value>) {
    let has = |row: &Map<String, Value>, col: &str| row.get(col).is_some_and(|v| !v.is_null());
    let text_of = |row: &Map<String, Value>, col: &str| row.get(col).and_then(Value::as_str).map(str::to_owned);
    if !has(row, "scope_kind") {
        let session = text_of(row, "requester_session_key").is_some_and(|k| !k.trim().is_empty());
        row.insert("scope_kind".into(), Value::from(if session { "session" } else { "system" }));
    }
    if !has(row, "delivery_status") {
        let system = text_of(row, "scope_kind").as_deref() == Some("system");
        row.insert("delivery_status".into(), Value::from(if system { "not_applicable" } else { "pending" }));
    }
    if !has(row, "notify_policy") {
        let silent = text_of(row, "delivery_status").as_deref() == Some("not_applicable");
        row.insert("notify_policy".into(), Value::from(if silent { "silent" } else { "done_only" }));
    }
    if !has(row, "task") {
        row.insert("task".into(), Value::from(""));
    }
    if !has(row, "terminal_outcome") && text_of(row, "status").as_deref() == Some("succeeded") {
        row.insert("terminal_outcome".into(), Value::from("succeeded"));
    }
    if text_of(row, "runtime").as_deref() == Some("subagent") {
        if let (false, Some(run)) = (has(row, "source_id"), text_of(row, "run_id")) {
            row.insert("source_id".into(), Value::from(run));
        }
        if !has(row, "detail_json") {
            let backing = serde_json::json!({"kind": "task_backing_instance", "runtime": "subagent", "generation": 1});
            row.insert("detail_json".into(), Value::from(backing.to_string()));
        }
    }
}

/// The transcript of one generation as events: a version-4 header, then every stored entry in
/// order with its id and parent link (the mirror's line of it); how many messages it wrote.
fn write_events(w: &Oc9Writer, db: &Db<'_>, sid: &str, created: i64) -> Result<u64> {
    let store_err = |why: String| Error::store(format!("cannot export transcript {sid}: {why}"));
    let header =
        serde_json::json!({"type": "session", "version": 4, "id": sid, "timestamp": mirror::iso(created), "cwd": ""});
    w.put_event(sid, 0, &header.to_string(), created).map_err(store_err)?;
    let (mut n, mut messages) = (0i64, 0u64);
    db.each_entry(sid, |e| {
        n += 1;
        messages += u64::from(e.body.is_message());
        let line = mirror::entry_line(&e, created);
        let ts = serde_json::from_str::<Value>(&line)
            .ok()
            .and_then(|v| v.get("message").and_then(|m| m.get("timestamp")).and_then(Value::as_f64))
            .filter(|f| f.is_finite())
            .map_or(created, |f| f as i64);
        w.put_event(sid, n, &line, ts).map_err(store_err)
    })?;
    Ok(messages)
}

/// Opens a database of the export folder for writing, after checking where it leads.
fn open_target(root: &Path, path: &Path, role: &str, version: i64) -> std::result::Result<Oc9Writer, String> {
    match inside(root, path) {
        Resolved::Inside(real) => Oc9Writer::open(&real, role, version),
        Resolved::Outside => Err("it leads outside the export folder; not written".into()),
        Resolved::Missing => Err(format!(
            "it does not exist: start the 2026.9 gateway once with this state folder (OPENCLAW_STATE_DIR) so that it creates its {role} database, then export again"
        )),
    }
}

/// Exports `store` into the 2026.9 state folder `dir`, which the 2026.9 gateway has initialised.
pub fn export_state_dir_2026_9(store: &Store, km: &KeyModel, dir: &Path) -> Result<ExportReport> {
    let root =
        std::fs::canonicalize(dir).map_err(|e| Error::store(format!("cannot export to {}: {e}", dir.display())))?;
    let state = root.join(STATE_DB);
    let global = open_target(&root, &state, "global", STATE_SCHEMA)
        .map_err(|why| Error::store(format!("cannot export to {}: {}: {why}", dir.display(), STATE_DB)))?;
    let mut report = ExportReport::default();
    let skip = |report: &mut ExportReport, file: String, reason: String| {
        report.skipped.push(Skipped { file, line: None, reason });
    };
    store.read(|db| {
        let by_agent = crate::migrate::export::sessions_by_agent(db, km)?;
        for (agent, entries) in by_agent {
            let path = root.join("agents").join(&agent).join(AGENT_DB);
            let rel = relative(&root, &path);
            let w = match open_target(&root, &path, "agent", AGENT_SCHEMA) {
                Ok(w) => w,
                Err(why) => {
                    skip(&mut report, rel, format!("{why} ({} sessions not exported)", entries.len()));
                    continue;
                }
            };
            let agent_err = |why: String| Error::store(format!("cannot export to {rel}: {why}"));
            let (mut sessions, mut messages) = (0u64, 0u64);
            for (key, e) in &entries {
                w.put_node(&node_row(key, e)).map_err(agent_err)?;
                for row in window_rows(key, e) {
                    w.put_window(&row).map_err(agent_err)?;
                    let sid = row.get("session_id").and_then(Value::as_str).unwrap_or_default();
                    let have = db.entry_count(sid)?;
                    if have == 0 {
                        continue;
                    }
                    match w.event_count(sid).map_err(agent_err)? {
                        0 => {
                            let created = row.get("created_at").and_then(Value::as_i64).unwrap_or(0);
                            messages += write_events(&w, db, sid, created)?;
                        }
                        n if n == have + 1 => {}
                        n => skip(
                            &mut report,
                            rel.clone(),
                            format!("transcript {sid}: the folder already holds {n} events for it; left as it was"),
                        ),
                    }
                }
                sessions += 1;
            }
            w.commit().map_err(agent_err)?;
            report.sessions += sessions;
            report.messages += messages;
            report.files += 1;
        }
        let global_err = |why: String| Error::store(format!("cannot export to {STATE_DB}: {why}"));
        for r in db.all_subagent_runs()? {
            match run_row(&r.record) {
                Some(row) => report.runs += u64::from(global.put_run(&row).map_err(global_err)?),
                None => skip(&mut report, STATE_DB.into(), format!("run {}: its record cannot be written", r.run_id)),
            }
        }
        for t in db.all_tasks()? {
            if let Some(row) = task_columns(&t.record) {
                report.tasks += u64::from(global.put_task(&row).map_err(global_err)?);
            }
        }
        Ok(())
    })?;
    global.commit().map_err(|why| Error::store(format!("cannot export to {STATE_DB}: {why}")))?;
    report.files += 1;
    Ok(report)
}
