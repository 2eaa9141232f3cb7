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
    let d = std::env::temp_dir().join(format!("st-oc9-init-{tag}-{}", uuid::Uuid::new_v4()));
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
        back.read(|db| db.all_tasks9()).unwrap().iter().map(|t| serde_json::from_str(&t.record).unwrap()).collect();
    let orig: Vec<Value> =
        st.read(|db| db.all_tasks9()).unwrap().iter().map(|t| serde_json::from_str(&t.record).unwrap()).collect();
    assert_eq!(tasks, orig);

    // Again: entries are rewritten, nothing is added twice.
    let again = export_state_dir_2026_9(&st, &km(), &out).unwrap();
    assert_eq!(again.skipped, Vec::new());
    assert_eq!((again.sessions, again.messages, again.runs, again.tasks), (20, 0, 0, 0));
    fs::remove_dir_all(&src).unwrap();
    fs::remove_dir_all(&out).unwrap();
}

#[test]
fn a_folder_the_gateway_has_not_initialised_is_refused_and_a_missing_agent_reported() {
    let src = fixture_copy("exp-src2");
    let (st, _) = import(&src);
    let empty = std::env::temp_dir().join(format!("st-oc9-empty-{}", uuid::Uuid::new_v4()));
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
