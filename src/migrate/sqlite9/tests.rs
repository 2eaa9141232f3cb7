//! The 2026.9 mapping, and imports of the committed fixture folder
//! (`__test__/fixtures/openclaw-2026.9`, written by the real 2026.9.6 package; the expected
//! values below are what that package's own readers return for it, see its README).

use std::collections::BTreeMap;
use std::fs;
use std::path::{Path, PathBuf};

use serde_json::json;

use super::*;
use crate::keys::KeyModel;
use crate::migrate::{import_state_dir, snapshot};
use crate::store::Store;

fn fixture() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("__test__/fixtures/openclaw-2026.9/state")
}

pub(super) fn copy_dir(from: &Path, to: &Path) {
    fs::create_dir_all(to).unwrap();
    for e in fs::read_dir(from).unwrap() {
        let e = e.unwrap();
        let p = e.path();
        if p.is_dir() {
            copy_dir(&p, &to.join(e.file_name()));
        } else {
            fs::copy(&p, to.join(e.file_name())).unwrap();
        }
    }
}

/// A private copy of the fixture folder.
pub(super) fn fixture_copy(tag: &str) -> PathBuf {
    let d = crate::scratch::path(&format!("oc9-{tag}"));
    copy_dir(&fixture(), &d);
    d
}

pub(super) fn import(dir: &Path) -> (Store, crate::migrate::ImportReport) {
    let st = Store::open(":memory:").unwrap();
    let km = KeyModel::new(false, "main", "main");
    let r = import_state_dir(&st, &km, None, dir, 1_800_000_000_000).unwrap();
    (st, r)
}

#[test]
fn names_convert_between_the_column_and_field_styles() {
    assert_eq!(camel("owner_assigned_by_type"), "ownerAssignedByType");
    assert_eq!(crate::params::snake_case("ownerAssignedByType"), "owner_assigned_by_type");
}

#[test]
fn a_node_becomes_its_entry_with_the_facts_only_its_columns_hold() {
    let node = json!({
        "session_key": "agent:main:dashboard:x",
        "current_session_id": "sid-1",
        "entry_json": "{\"sessionId\":\"sid-1\",\"updatedAt\":10,\"label\":\"From entry\"}",
        "updated_at": 10,
        "label": "From column",
        "archived_at": 7,
        "created_actor_type": "human",
        "created_actor_id": "owner",
        "owner_actor_type": "human",
        "owner_actor_id": "ada",
        "owner_assigned_by_type": "agent",
        "owner_assigned_by_id": "agent:main:main",
        "owner_assigned_at": 9,
        "parent_session_key": "agent:main:main",
    });
    let windows = vec![window_json(
        json!({"session_id": "sid-0", "session_scope": "conversation", "created_at": 1, "acp_owned": 0})
            .as_object()
            .unwrap(),
    )];
    let e = entry_from_node(node.as_object().unwrap(), windows).unwrap();
    assert_eq!(e["label"], "From entry", "the entry wins over its projection");
    assert_eq!(e["archivedAt"], 7);
    assert_eq!(e["createdActor"], json!({"type": "human", "id": "owner"}));
    assert_eq!(
        e["owner"],
        json!({"actor": {"type": "human", "id": "ada"}, "assignedBy": {"type": "agent", "id": "agent:main:main"}, "assignedAt": 9})
    );
    assert_eq!(e["parentSessionKey"], "agent:main:main");
    assert_eq!(e[WINDOWS_FIELD], json!([{"sessionId": "sid-0", "sessionScope": "conversation", "createdAt": 1}]));

    let bad = json!({"session_key": "k", "entry_json": "[1]"});
    assert!(entry_from_node(bad.as_object().unwrap(), Vec::new()).is_err());
}

#[test]
fn an_event_is_read_as_json_or_zstd_and_a_bad_one_is_refused() {
    let text = "{\"type\":\"message\",\"message\":{\"role\":\"user\",\"content\":\"x\"}}";
    let packed = zstd::bulk::compress(text.as_bytes(), 1).unwrap();
    let ev = crate::store::oc9_read::StoredEvent::Zstd { bytes: packed.clone(), utf8_len: Some(text.len() as i64) };
    assert_eq!(event_text(ev).unwrap(), text);
    let wrong_len = crate::store::oc9_read::StoredEvent::Zstd { bytes: packed, utf8_len: Some(3) };
    assert!(event_text(wrong_len).is_err());
    let junk = crate::store::oc9_read::StoredEvent::Zstd { bytes: vec![1, 2, 3], utf8_len: Some(3) };
    assert!(event_text(junk).unwrap_err().contains("zstd"));
}

#[test]
fn a_run_keeps_its_2026_9_payload_and_gains_the_registry_fields() {
    let row = json!({
        "run_id": "r1", "child_session_key": "agent:main:subagent:c", "requester_session_key": "agent:main:main", "created_at": 5,
        "payload_json": "{\"runId\":\"r1\",\"task\":\"t\",\"execution\":{\"status\":\"terminal\",\"startedAt\":6,\"endedAt\":8,\"outcome\":{\"status\":\"ok\",\"endedAt\":8}},\"delivery\":{\"status\":\"delivered\",\"attemptCount\":1}}"
    });
    let r = run_record(row.as_object().unwrap()).unwrap();
    assert_eq!(r["childSessionKey"], "agent:main:subagent:c");
    assert_eq!((r["startedAt"].clone(), r["endedAt"].clone()), (json!(6), json!(8)));
    assert_eq!(r["outcome"], json!({"status": "ok"}));
    assert_eq!(r["announce"]["status"], "delivered");
    assert_eq!(r["execution"]["status"], "terminal", "the 2026.9 fields stay");
}

#[test]
fn the_fixture_imports_whole_once_and_the_folder_is_left_byte_identical() {
    let dir = fixture_copy("whole");
    let before = snapshot(&dir);
    let (st, r) = import(&dir);
    assert_eq!(r.skipped, Vec::new());
    assert_eq!((r.sessions, r.messages, r.runs, r.tasks), (20, 30, 2, 2));
    let layouts: Vec<&str> = r.layouts.keys().map(|l| l.name()).collect();
    assert_eq!(layouts, ["2026.9"]);
    assert_eq!(snapshot(&dir), before, "no file changed, none added");

    let pinned = st.read(|db| db.session("agent:main:dashboard:review-api")).unwrap().unwrap();
    assert_eq!(pinned["pinnedAt"], 1_789_899_000_000i64);
    assert_eq!(pinned["category"], "Reviews");
    assert_eq!(pinned[WINDOWS_FIELD].as_array().unwrap().len(), 1);
    let archived = st.read(|db| db.session("agent:research:dashboard:old-notes")).unwrap().unwrap();
    assert!(archived["archivedAt"].is_number());
    // The long message the gateway stored compressed.
    let sid = st.read(|db| db.session("agent:research:telegram:group:-1001234")).unwrap().unwrap()["sessionId"].clone();
    let page = st.read(|db| db.history_page(sid.as_str().unwrap(), 10, None)).unwrap();
    assert_eq!(page.messages.len(), 3);
    assert!(page.messages.last().unwrap().json.contains("paper-399 on write-ahead logging"));
    // the imported tasks are in the one ledger, as the engine reads it
    let tasks = st.read(|db| db.task_runs_for_owner("agent:main:main")).unwrap();
    assert_eq!(tasks.len(), 2);
    assert_eq!(tasks[0].extra["deliveryState"]["requesterOrigin"]["channel"], "telegram");
    assert_eq!(tasks[0].label.as_deref(), Some("Summarise error logs"));

    let km = KeyModel::new(false, "main", "main");
    let again = import_state_dir(&st, &km, None, &dir, 1_800_000_000_000).unwrap();
    assert_eq!((again.sessions, again.messages, again.runs, again.tasks), (0, 0, 0, 0));
    fs::remove_dir_all(&dir).unwrap();
}

fn set_user_version(db: &Path, v: i64) {
    let c = rusqlite::Connection::open(db).unwrap();
    c.pragma_update(None, "user_version", v).unwrap();
}

#[test]
fn bad_databases_are_skipped_with_their_reason_and_the_rest_is_imported() {
    let dir = fixture_copy("bad");
    // A newer agent schema, a truncated global database, an agent folder without a database,
    // and an agent whose database is a link leading outside the folder.
    set_user_version(&dir.join("agents/main/agent/openclaw-agent.sqlite"), 24);
    let state = dir.join("state/openclaw.sqlite");
    let bytes = fs::read(&state).unwrap();
    fs::write(&state, &bytes[..8192]).unwrap();
    fs::create_dir_all(dir.join("agents/empty/agent")).unwrap();
    let outside = crate::scratch::path("oc9-outside");
    fs::create_dir_all(&outside).unwrap();
    fs::copy(dir.join("agents/research/agent/openclaw-agent.sqlite"), outside.join("x.sqlite")).unwrap();
    fs::create_dir_all(dir.join("agents/linked/agent")).unwrap();
    std::os::unix::fs::symlink(outside.join("x.sqlite"), dir.join("agents/linked/agent/openclaw-agent.sqlite"))
        .unwrap();
    let before = snapshot(&dir);

    let (_, r) = import(&dir);
    let by_file: BTreeMap<&str, &str> = r.skipped.iter().map(|s| (s.file.as_str(), s.reason.as_str())).collect();
    assert!(by_file["agents/main/agent/openclaw-agent.sqlite"].contains("schema 24"), "{by_file:?}");
    assert!(by_file["agents/linked/agent/openclaw-agent.sqlite"].contains("outside the state folder"));
    assert!(by_file["agents/empty"].contains("neither"));
    assert!(by_file.contains_key("state/openclaw.sqlite"), "{by_file:?}");
    assert_eq!(r.skipped.len(), 4);
    assert_eq!((r.sessions, r.messages, r.runs), (6, 6, 0), "the research agent only");
    assert_eq!(snapshot(&dir), before);
    fs::remove_dir_all(&dir).unwrap();
    fs::remove_dir_all(&outside).unwrap();
}

#[test]
fn a_file_that_is_not_a_database_is_skipped() {
    let dir = fixture_copy("junk");
    fs::write(dir.join("agents/main/agent/openclaw-agent.sqlite"), b"not a database at all, just text".repeat(200))
        .unwrap();
    let (_, r) = import(&dir);
    assert_eq!(r.skipped.len(), 1);
    assert!(r.skipped[0].reason.contains("not a SQLite database"), "{:?}", r.skipped);
    assert_eq!(r.sessions, 6);
    fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn a_live_database_is_read_as_one_snapshot_through_its_wal() {
    let dir = fixture_copy("live");
    let db = dir.join("agents/research/agent/openclaw-agent.sqlite");
    let writer = rusqlite::Connection::open(&db).unwrap();
    writer.pragma_update(None, "journal_mode", "WAL").unwrap();
    writer.pragma_update(None, "wal_autocheckpoint", 0).unwrap();
    // A committed change still only in the WAL, then a write in progress: the first is read,
    // the second is not.
    writer.execute("UPDATE session_nodes SET entry_json = json_set(entry_json, '$.label', 'renamed') WHERE session_key = 'agent:research:main'", []).unwrap();
    writer
        .execute_batch(
            "BEGIN IMMEDIATE; DELETE FROM session_nodes WHERE session_key = 'agent:research:cron:weekly-papers';",
        )
        .unwrap();
    let (st, r) = import(&dir);
    assert_eq!(r.skipped, Vec::new());
    assert_eq!(r.sessions, 20);
    let e = st.read(|d| d.session("agent:research:main")).unwrap().unwrap();
    assert_eq!(e["label"], "renamed");
    writer.execute_batch("ROLLBACK").unwrap();
    drop(writer);
    fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn events_that_are_not_messages_and_branches_are_kept_with_their_links() {
    let dir = fixture_copy("branches");
    let db = dir.join("agents/main/agent/openclaw-agent.sqlite");
    let key = "agent:main:discord:group:dev";
    let sid: String = {
        let c = rusqlite::Connection::open(&db).unwrap();
        let sid: String = c
            .query_row("SELECT current_session_id FROM session_nodes WHERE session_key = ?1", [key], |r| r.get(0))
            .unwrap();
        let ids: Vec<String> = c
            .prepare("SELECT json_extract(event_json, '$.id') FROM transcript_events WHERE session_id = ?1 AND seq > 0 ORDER BY seq")
            .unwrap()
            .query_map([&sid], |r| r.get(0))
            .unwrap()
            .map(Result::unwrap)
            .collect();
        assert_eq!(ids.len(), 4);
        let change = json!({"type": "model_change", "id": "mc-1", "parentId": ids[3], "timestamp": "2026-09-20T14:00:00.000Z", "provider": "openai", "modelId": "gpt-5"});
        let branch = json!({"type": "message", "id": "br-1", "parentId": ids[1], "timestamp": "2026-09-20T14:00:01.000Z",
            "message": {"role": "user", "content": [{"type": "text", "text": "a branch from the first answer"}], "timestamp": 1}});
        for (seq, ev) in [(5, change), (6, branch)] {
            c.execute(
                "INSERT INTO transcript_events (session_id, seq, event_json, created_at) VALUES (?1, ?2, ?3, 0)",
                rusqlite::params![sid, seq, ev.to_string()],
            )
            .unwrap();
        }
        sid
    };
    let (st, r) = import(&dir);
    assert_eq!(r.skipped, Vec::new());
    assert_eq!(r.messages, 31, "the branch message counts, the model change does not");
    let mut entries = Vec::new();
    st.read(|d| {
        d.each_entry(&sid, |e| {
            entries.push((e.id.clone(), e.parent_id.clone(), e.body.is_message()));
            Ok(())
        })
    })
    .unwrap();
    assert_eq!(entries.len(), 6);
    assert_eq!(entries[4], ("mc-1".to_string(), Some(entries[3].0.clone()), false));
    assert_eq!(entries[5], ("br-1".to_string(), Some(entries[1].0.clone()), true));
    let again = import_state_dir(&st, &KeyModel::new(false, "main", "main"), None, &dir, 1_800_000_000_000).unwrap();
    assert_eq!(again.messages, 0);
    fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn an_empty_wal_left_behind_is_read_past_without_creating_anything() {
    let dir = fixture_copy("emptywal");
    fs::write(dir.join("agents/main/agent/openclaw-agent.sqlite-wal"), b"").unwrap();
    let before = snapshot(&dir);
    let (_, r) = import(&dir);
    assert_eq!((r.sessions, r.skipped.len()), (20, 0));
    assert_eq!(snapshot(&dir), before, "no -shm created");
    fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn a_wal_with_content_but_no_shm_is_read_from_a_private_copy_and_the_folder_is_untouched() {
    // a gateway that stopped with its last writes still in the WAL, copied without its -shm
    let live = crate::scratch::path("oc9-wal");
    let dir = crate::scratch::path("oc9-noshm");
    fs::create_dir_all(&live).unwrap();
    fs::create_dir_all(&dir).unwrap();
    let db = live.join("openclaw-agent.sqlite");
    let c = rusqlite::Connection::open(&db).unwrap();
    c.pragma_update(None, "journal_mode", "WAL").unwrap();
    c.pragma_update(None, "wal_autocheckpoint", 0).unwrap();
    c.execute_batch("CREATE TABLE only_in_the_wal (x INTEGER); INSERT INTO only_in_the_wal VALUES (1);").unwrap();
    for name in ["openclaw-agent.sqlite", "openclaw-agent.sqlite-wal"] {
        fs::copy(live.join(name), dir.join(name)).unwrap();
    }
    drop(c);
    assert!(fs::metadata(dir.join("openclaw-agent.sqlite-wal")).unwrap().len() > 0);
    let before = snapshot(&dir);
    let read = crate::store::oc9_read::Oc9Db::open(&dir.join("openclaw-agent.sqlite")).unwrap();
    assert!(read.has_table("only_in_the_wal").unwrap(), "what is only in the WAL is read");
    drop(read);
    assert_eq!(snapshot(&dir), before, "no -shm created, nothing changed");
    fs::remove_dir_all(&live).unwrap();
    fs::remove_dir_all(&dir).unwrap();
}
