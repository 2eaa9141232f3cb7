//! Exports into a copy of `__test__/fixtures/openclaw-2026.9/initialised` (a folder the real
//! 2026.9.6 package initialised, no sessions), read back with the importer. That the package
//! itself opens, lists and appends to such an export is proved by
//! scripts/check-2026.9-export.mjs.

use std::fs;
use std::path::{Path, PathBuf};

use serde_json::Value;

use super::export::export_state_dir_2026_9;
use super::tests::{copy_dir, fixture_copy, import};
use crate::keys::KeyModel;

fn initialised_copy(tag: &str) -> PathBuf {
    let from = Path::new(env!("CARGO_MANIFEST_DIR")).join("__test__/fixtures/openclaw-2026.9/initialised");
    let d = crate::scratch::path(&format!("oc9-init-{tag}"));
    copy_dir(&from, &d);
    d
}

fn km() -> KeyModel {
    KeyModel::new(false, "main", "main")
}

#[test]
fn the_store_goes_back_into_an_initialised_folder_whole_and_once() {
    let src = fixture_copy("exp-src");
    let (st, _) = import(&src);
    let out = initialised_copy("exp");
    let r = export_state_dir_2026_9(&st, &km(), &out).unwrap();
    assert_eq!(r.skipped, Vec::new());
    assert_eq!((r.sessions, r.messages, r.runs, r.tasks), (20, 30, 2, 2));

    // What was exported reads back as what was imported.
    let (back, rb) = import(&out);
    assert_eq!(rb.skipped, Vec::new());
    assert_eq!((rb.sessions, rb.messages, rb.runs, rb.tasks), (20, 30, 2, 2));
    for key in ["agent:main:dashboard:review-api", "agent:research:dashboard:old-notes", "agent:main:main"] {
        let a = st.read(|db| db.session(key)).unwrap().unwrap();
        let b = back.read(|db| db.session(key)).unwrap().unwrap();
        assert_eq!(a, b, "{key}");
    }
    let sid = st.read(|db| db.session("agent:research:telegram:group:-1001234")).unwrap().unwrap()["sessionId"].clone();
    let sid = sid.as_str().unwrap();
    let a = st.read(|db| db.history_page(sid, 10, None)).unwrap();
    let b = back.read(|db| db.history_page(sid, 10, None)).unwrap();
    assert_eq!(
        a.messages.iter().map(|m| &m.json).collect::<Vec<_>>(),
        b.messages.iter().map(|m| &m.json).collect::<Vec<_>>()
    );
    let tasks: Vec<Value> =
        back.read(|db| db.all_tasks()).unwrap().iter().map(|t| serde_json::from_str(&t.record).unwrap()).collect();
    let orig: Vec<Value> =
        st.read(|db| db.all_tasks()).unwrap().iter().map(|t| serde_json::from_str(&t.record).unwrap()).collect();
    assert_eq!(tasks, orig);

    // Again: entries are rewritten, nothing is added twice.
    let again = export_state_dir_2026_9(&st, &km(), &out).unwrap();
    assert_eq!(again.skipped, Vec::new());
    assert_eq!((again.sessions, again.messages, again.runs, again.tasks), (20, 0, 0, 0));
    fs::remove_dir_all(&src).unwrap();
    fs::remove_dir_all(&out).unwrap();
}

#[test]
fn every_task_of_the_one_ledger_is_exported_ours_completed_as_2026_9_completes_its_own() {
    let src = fixture_copy("exp-ours");
    let (st, _) = import(&src);
    // a task the engine made for a run of its own, as `subagents` keeps it
    let ours = crate::store::tasks::TaskRow {
        task_id: "0c0c0c0c-0000-4000-8000-000000000001".into(),
        run_id: Some("run-ours".into()),
        runtime: "subagent".into(),
        owner_key: "agent:main:main".into(),
        requester_session_key: Some("agent:main:main".into()),
        child_session_key: Some("agent:main:subagent:ours".into()),
        agent_id: Some("main".into()),
        requester_agent_id: Some("main".into()),
        label: Some("ours".into()),
        task: Some("do it".into()),
        status: "succeeded".into(),
        delivery_status: Some("delivered".into()),
        created_at: 1_789_920_000_000,
        started_at: Some(1_789_920_000_000),
        ended_at: Some(1_789_920_060_000),
        last_event_at: Some(1_789_920_060_000),
        ..Default::default()
    };
    st.write(|db| db.put_task_run(&ours)).unwrap();
    let out = initialised_copy("exp-ours");
    // the folder's task_runs is the package's own STRICT table with its NOT NULL columns
    let r = export_state_dir_2026_9(&st, &km(), &out).unwrap();
    assert_eq!((r.tasks, r.skipped.len()), (3, 0));
    let db = rusqlite::Connection::open(out.join("state/openclaw.sqlite")).unwrap();
    let cols: (String, String, String, String, String, Option<String>, String) = db
        .query_row(
            "SELECT scope_kind, notify_policy, source_id, detail_json, terminal_outcome, task_kind, task
               FROM task_runs WHERE task_id = ?1",
            [&ours.task_id],
            |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?, r.get(4)?, r.get(5)?, r.get(6)?)),
        )
        .unwrap();
    assert_eq!(
        cols,
        (
            "session".into(),
            "done_only".into(),
            "run-ours".into(),
            r#"{"kind":"task_backing_instance","runtime":"subagent","generation":1}"#.into(),
            "succeeded".into(),
            None,
            "do it".into()
        )
    );
    // the imported ones went back column for column (what 2026.9 wrote, e.g. no task_kind)
    let (back, rb) = import(&out);
    assert_eq!(rb.tasks, 3);
    let imported = |s: &crate::store::Store| -> Vec<Value> {
        let tasks = s.read(|db| db.all_tasks()).unwrap();
        tasks.iter().filter(|t| t.task_id != ours.task_id).map(|t| serde_json::from_str(&t.record).unwrap()).collect()
    };
    assert_eq!(imported(&back), imported(&st));
    // ours comes back as the engine's task, the 2026.9 columns beside it
    let mine = back.read(|db| db.task_run(&ours.task_id)).unwrap().unwrap();
    assert_eq!(
        (mine.label.as_deref(), mine.task.as_deref(), mine.status.as_str()),
        (Some("ours"), Some("do it"), "succeeded")
    );
    assert_eq!(mine.extra["notifyPolicy"], "done_only");
    for d in [src, out] {
        fs::remove_dir_all(d).unwrap();
    }
}

#[test]
fn a_folder_the_gateway_has_not_initialised_is_refused_and_a_missing_agent_reported() {
    let src = fixture_copy("exp-src2");
    let (st, _) = import(&src);
    let empty = crate::scratch::path("oc9-empty");
    fs::create_dir_all(&empty).unwrap();
    let err = export_state_dir_2026_9(&st, &km(), &empty).unwrap_err();
    assert!(err.message().contains("start the 2026.9 gateway once"), "{}", err.message());
    assert_eq!(fs::read_dir(&empty).unwrap().count(), 0, "nothing created");

    let out = initialised_copy("exp-partial");
    fs::remove_dir_all(out.join("agents/research")).unwrap();
    let r = export_state_dir_2026_9(&st, &km(), &out).unwrap();
    assert_eq!(r.skipped.len(), 1);
    assert_eq!(r.skipped[0].file, "agents/research/agent/openclaw-agent.sqlite");
    assert!(r.skipped[0].reason.contains("6 sessions not exported"), "{}", r.skipped[0].reason);
    assert_eq!(r.sessions, 14);
    assert!(!out.join("agents/research").exists());
    for d in [src, empty, out] {
        fs::remove_dir_all(d).unwrap();
    }
}

/// Sessions by key, transcript lines by session id, run records, task records.
type Dump = (Vec<(String, String)>, Vec<(String, Vec<String>)>, Vec<String>, Vec<String>);

fn dump(st: &crate::store::Store) -> Dump {
    st.read(|db| {
        let mut sessions = Vec::new();
        db.all_sessions(|k, j| {
            sessions.push((k, j));
            Ok(())
        })?;
        let mut transcripts = Vec::new();
        for (_, j) in &sessions {
            let e: Value = serde_json::from_str(j).unwrap();
            let sid = e["sessionId"].as_str().unwrap_or_default().to_owned();
            let mut lines = Vec::new();
            db.each_entry(&sid, |x| {
                lines.push(crate::mirror::entry_line(&x, 0));
                Ok(())
            })?;
            transcripts.push((sid, lines));
        }
        let runs = db.all_subagent_runs()?.into_iter().map(|r| r.record).collect();
        let tasks = db.all_tasks()?.into_iter().map(|t| t.record).collect();
        Ok((sessions, transcripts, runs, tasks))
    })
    .unwrap()
}

#[test]
fn the_fixture_moves_through_postgres_as_through_sqlite_in_both_layouts() {
    let src = fixture_copy("pg-src");
    let live = Path::new("/srv/gateway/state");
    let mut outcomes = Vec::new();
    for st in crate::store::pg::testdb::stores() {
        let d = st.dialect();
        let r = crate::migrate::import_state_dir(&st, &km(), None, &src, 1_800_000_000_000).unwrap();
        assert_eq!((r.sessions, r.messages, r.runs, r.tasks), (20, 30, 2, 2), "{d:?}");
        let json = crate::scratch::path("oc9-pg-json");
        let ex1 = crate::migrate::export_state_dir(&st, &km(), &json, Some(live)).unwrap();
        let out = initialised_copy("pg-exp");
        let ex9 = export_state_dir_2026_9(&st, &km(), &out).unwrap();
        assert_eq!((ex9.sessions, ex9.messages, ex9.runs, ex9.tasks), (20, 30, 2, 2), "{d:?}");
        let (back, _) = import(&out);
        let files = crate::migrate::snapshot(&json);
        outcomes.push((r, ex1, ex9, dump(&st), dump(&back), files));
        fs::remove_dir_all(&json).unwrap();
        fs::remove_dir_all(&out).unwrap();
    }
    let (lite, pg) = (&outcomes[0], &outcomes[1]);
    assert_eq!(pg.0, lite.0, "the import reports");
    assert_eq!((&pg.1, &pg.2), (&lite.1, &lite.2), "the export reports");
    assert_eq!(pg.3, lite.3, "the stores");
    assert_eq!(pg.4, lite.4, "the 2026.9 exports, read back");
    assert_eq!(pg.5, lite.5, "the 2026.1 exports, byte for byte");
    fs::remove_dir_all(&src).unwrap();
}
