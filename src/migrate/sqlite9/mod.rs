//! The 2026.9 gateway's SQLite state folder (OPENCLAW-2026.9.md §4): how its rows map onto the
//! store and back. `agents/<id>/agent/openclaw-agent.sqlite` (agent schema 23) holds the
//! sessions (`session_nodes`, `session_windows`) and transcripts (`transcript_events`);
//! `state/openclaw.sqlite` (state schema 18) the sub-agent runs and the task ledger.
//!
//! This module owns the mapping (which fields go where, what each word means) and nothing else:
//! SQL stays in `store::oc9_read` / `store::oc9_write`, the folder walk in [`read`], the writing
//! back in [`export`]. What the store keeps beyond a 2026.1 entry, and under which names, is
//! written down in /work/coord/notes/import9.md and docs (README "Moving in and out").

pub mod export;
pub mod read;

use serde_json::{Map, Value};

use crate::entry::Entry;
use crate::store::oc9_read::StoredEvent;
use crate::store::oc9_write::WINDOW_COLUMNS;
use crate::store::tasks::StoredTask;

/// The agent database schema this build reads and writes (`PRAGMA user_version`, 2026.9.6).
pub const AGENT_SCHEMA: i64 = 23;
/// The global state database schema this build reads and writes.
pub const STATE_SCHEMA: i64 = 18;
/// The largest event 2026.9 stores (compressed or not).
const MAX_EVENT_BYTES: usize = 4 * 1024 * 1024;

/// The entry field a session holds its generations under (ours, not a 2026.9 entry field).
pub const WINDOWS_FIELD: &str = "sessionWindows";

/// `snake_case` → `camelCase`.
pub fn camel(name: &str) -> String {
    let mut out = String::with_capacity(name.len());
    let mut up = false;
    for c in name.chars() {
        if c == '_' {
            up = true;
        } else if up {
            out.extend(c.to_uppercase());
            up = false;
        } else {
            out.push(c);
        }
    }
    out
}

fn text(row: &Map<String, Value>, col: &str) -> Option<Value> {
    row.get(col).and_then(Value::as_str).filter(|s| !s.trim().is_empty()).map(Value::from)
}

fn int(row: &Map<String, Value>, col: &str) -> Option<Value> {
    row.get(col).filter(|v| v.is_number()).cloned()
}

/// Projections of `session_nodes` that 2026.9 also keeps in the entry: (column, entry field,
/// is a time). The entry wins; a column fills a field the entry lacks.
const NODE_FIELDS: [(&str, &str, bool); 14] = [
    ("archived_at", "archivedAt", true),
    ("pinned_at", "pinnedAt", true),
    ("label", "label", false),
    ("display_name", "displayName", false),
    ("category", "category", false),
    ("icon", "icon", false),
    ("status", "status", false),
    ("created_at", "createdAt", true),
    ("created_via", "createdVia", false),
    ("spawned_by", "spawnedBy", false),
    ("project_id", "projectId", false),
    ("last_read_at", "lastReadAt", true),
    ("last_interaction_at", "lastInteractionAt", true),
    ("last_activity_at", "lastActivityAt", true),
];

/// The entry of a `session_nodes` row (rule (a) of the notes): `entry_json` as written, the
/// node's projections where the entry lacks them, `owner` (kept only in columns), and the
/// session's generations under [`WINDOWS_FIELD`].
pub fn entry_from_node(node: &Map<String, Value>, windows: Vec<Value>) -> Result<Entry, String> {
    let raw = node.get("entry_json").and_then(Value::as_str).unwrap_or("");
    let mut e: Entry = match serde_json::from_str::<Value>(raw) {
        Ok(Value::Object(m)) => m,
        _ => return Err("its entry_json is not a JSON object".into()),
    };
    if e.get("sessionId").and_then(Value::as_str).is_none_or(|s| s.trim().is_empty()) {
        if let Some(sid) = text(node, "current_session_id") {
            e.insert("sessionId".into(), sid);
        }
    }
    if !e.get("updatedAt").is_some_and(Value::is_number) {
        if let Some(t) = int(node, "updated_at") {
            e.insert("updatedAt".into(), t);
        }
    }
    for (col, field, time) in NODE_FIELDS {
        if e.get(field).is_some_and(|v| !v.is_null()) {
            continue;
        }
        if let Some(v) = if time { int(node, col) } else { text(node, col) } {
            e.insert(field.into(), v);
        }
    }
    if !e.contains_key("parentSessionKey") {
        let spawned = node.get("spawned_by");
        if let Some(p) = text(node, "parent_session_key").filter(|p| Some(p) != spawned) {
            e.insert("parentSessionKey".into(), p);
        }
    }
    if !e.contains_key("createdActor") {
        if let (Some(t), Some(id)) = (text(node, "created_actor_type"), text(node, "created_actor_id")) {
            e.insert("createdActor".into(), serde_json::json!({"type": t, "id": id}));
        }
    }
    if !e.contains_key("forkSource") {
        let mut f = Map::new();
        for (col, field) in [
            ("fork_source_session_key", "sessionKey"),
            ("fork_source_session_id", "sessionId"),
            ("fork_source_entry_id", "entryId"),
        ] {
            if let Some(v) = text(node, col) {
                f.insert(field.into(), v);
            }
        }
        if !f.is_empty() {
            e.insert("forkSource".into(), Value::Object(f));
        }
    }
    if let (Some(t), Some(id)) = (text(node, "owner_actor_type"), text(node, "owner_actor_id")) {
        let mut owner = Map::new();
        owner.insert("actor".into(), serde_json::json!({"type": t, "id": id}));
        if let (Some(bt), Some(bid)) = (text(node, "owner_assigned_by_type"), text(node, "owner_assigned_by_id")) {
            owner.insert("assignedBy".into(), serde_json::json!({"type": bt, "id": bid}));
        }
        if let Some(at) = int(node, "owner_assigned_at") {
            owner.insert("assignedAt".into(), at);
        }
        e.insert("owner".into(), Value::Object(owner));
    }
    // Where the transcript lives means nothing once it is in the store.
    e.remove("sessionFile");
    if !windows.is_empty() {
        e.insert(WINDOWS_FIELD.into(), Value::Array(windows));
    }
    Ok(e)
}

/// A `session_windows` row as kept in the entry: camelCase names, NULLs left out.
pub fn window_json(row: &Map<String, Value>) -> Value {
    let mut out = Map::new();
    // the columns an export writes back, less the key (the entry already has it)
    for col in WINDOW_COLUMNS.into_iter().filter(|c| *c != "session_key") {
        if let Some(v) = row.get(col).filter(|v| !v.is_null()) {
            if col == "acp_owned" {
                if v.as_i64() == Some(1) {
                    out.insert("acpOwned".into(), Value::Bool(true));
                }
                continue;
            }
            out.insert(camel(col), v.clone());
        }
    }
    Value::Object(out)
}

/// The JSON text of a stored event: as is, or zstd-decoded (bounded by 2026.9's own limit and
/// the length the row declares).
pub fn event_text(ev: StoredEvent) -> Result<String, String> {
    match ev {
        StoredEvent::Json(t) => Ok(t),
        StoredEvent::Empty => Err("the event holds neither JSON nor compressed data".into()),
        StoredEvent::Zstd { bytes, utf8_len } => {
            let cap = utf8_len.and_then(|n| usize::try_from(n).ok()).filter(|n| *n <= MAX_EVENT_BYTES);
            let cap = cap.unwrap_or(MAX_EVENT_BYTES);
            let out =
                zstd::bulk::decompress(&bytes, cap).map_err(|e| format!("its zstd data cannot be decoded: {e}"))?;
            if utf8_len.is_some_and(|n| n as usize != out.len()) {
                return Err("its zstd data decodes to a different length than the row says".into());
            }
            String::from_utf8(out).map_err(|_| "its zstd data is not UTF-8 text".into())
        }
    }
}

/// The `announce.status` of API.md §4 for a 2026.9 `delivery.status`.
fn announce_status(delivery: Option<&str>) -> &'static str {
    match delivery {
        Some("delivered") => "delivered",
        Some("failed") => "failed",
        Some("not_required" | "discarded") => "skipped",
        _ => "pending",
    }
}

/// A `subagent_runs` row as a registry record on its way to `import::run_row`: the payload with
/// every 2026.9 field kept, the key columns where the payload lacks them, and the API.md §4
/// fields (`startedAt`, `endedAt`, `outcome`, `announce`) derived from `execution`/`delivery`.
pub fn run_record(row: &Map<String, Value>) -> Result<Value, String> {
    let raw = row.get("payload_json").and_then(Value::as_str).unwrap_or("{}");
    let Ok(Value::Object(mut r)) = serde_json::from_str::<Value>(raw) else {
        return Err("its payload_json is not a JSON object".into());
    };
    for (col, field) in [
        ("run_id", "runId"),
        ("child_session_key", "childSessionKey"),
        ("requester_session_key", "requesterSessionKey"),
        ("controller_session_key", "controllerSessionKey"),
        ("created_at", "createdAt"),
    ] {
        if !r.contains_key(field) {
            if let Some(v) = row.get(col).filter(|v| !v.is_null()) {
                r.insert(field.into(), v.clone());
            }
        }
    }
    let exec = r.get("execution").and_then(Value::as_object).cloned().unwrap_or_default();
    if let Some(t) = exec.get("startedAt").filter(|v| v.is_number()) {
        r.entry("startedAt").or_insert_with(|| t.clone());
    }
    if exec.get("status").and_then(Value::as_str) == Some("terminal") {
        let ended = exec.get("endedAt").or_else(|| exec.get("outcome").and_then(|o| o.get("endedAt")));
        if let Some(t) = ended.filter(|v| v.is_number()) {
            r.entry("endedAt").or_insert_with(|| t.clone());
        }
        if let Some(Value::Object(o)) = exec.get("outcome") {
            let status = o
                .get("status")
                .and_then(Value::as_str)
                .filter(|s| matches!(*s, "ok" | "error" | "timeout"))
                .unwrap_or("unknown");
            let mut out = serde_json::json!({ "status": status });
            if let Some(err) = o.get("error").filter(|v| v.is_string()) {
                out["error"] = err.clone();
            }
            r.entry("outcome").or_insert(out);
        }
    }
    if !r.contains_key("announce") {
        let delivery = r.get("delivery").and_then(|d| d.get("status")).and_then(Value::as_str);
        let attempts = r.get("delivery").and_then(|d| d.get("attemptCount")).and_then(Value::as_u64).unwrap_or(0);
        let id = r.get("runId").and_then(Value::as_str).unwrap_or_default().to_owned();
        r.insert(
            "announce".into(),
            serde_json::json!({"status": announce_status(delivery), "attempts": attempts, "idempotencyKey": format!("import:{id}")}),
        );
    }
    Ok(Value::Object(r))
}

/// A `task_runs` row (with its delivery state) as stored: the filter columns and the whole row
/// as camelCase JSON (`detail` parsed from `detail_json`, `deliveryState` from the joined row).
pub fn task_row(row: &Map<String, Value>) -> Result<StoredTask, String> {
    let s = |c: &str| row.get(c).and_then(Value::as_str).map(str::to_owned);
    let task_id = s("task_id").filter(|t| !t.is_empty()).ok_or("a task row without a task_id")?;
    let mut record = Map::new();
    let mut delivery = Map::new();
    for (col, v) in row {
        match col.as_str() {
            "detail_json" => {
                let parsed = v.as_str().and_then(|t| serde_json::from_str::<Value>(t).ok());
                record.insert("detail".into(), parsed.unwrap_or_else(|| v.clone()));
            }
            "ds_requester_origin_json" => {
                let parsed = v.as_str().and_then(|t| serde_json::from_str::<Value>(t).ok());
                delivery.insert("requesterOrigin".into(), parsed.unwrap_or_else(|| v.clone()));
            }
            "ds_last_notified_event_at" => {
                delivery.insert("lastNotifiedEventAt".into(), v.clone());
            }
            other => {
                record.insert(camel(other), v.clone());
            }
        }
    }
    if !delivery.is_empty() {
        record.insert("deliveryState".into(), Value::Object(delivery));
    }
    let n = |c: &str| row.get(c).and_then(Value::as_i64);
    Ok(StoredTask {
        run_id: s("run_id"),
        runtime: s("runtime").unwrap_or_default(),
        status: s("status").unwrap_or_default(),
        delivery_status: s("delivery_status"),
        owner_key: s("owner_key").unwrap_or_default(),
        requester_session_key: s("requester_session_key"),
        child_session_key: s("child_session_key"),
        agent_id: s("agent_id"),
        created_at: n("created_at").unwrap_or(0),
        ended_at: n("ended_at"),
        record: Value::Object(record).to_string(),
        task_id,
    })
}

#[cfg(test)]
mod export_tests;
#[cfg(test)]
mod tests;
