//! The task ledger on both backends: rows round trip whole, are found by id, run and owner in
//! creation order, count blocked completions within their retention, and survive a restart.

use super::*;
use crate::store::pg::testdb;
use crate::store::subagents::tests::reopenable_urls;
use crate::store::Store;

fn task(id: &str, run: &str, owner: &str, created: i64) -> TaskRow {
    TaskRow {
        task_id: id.into(),
        run_id: Some(run.into()),
        runtime: "subagent".into(),
        owner_key: owner.into(),
        status: "running".into(),
        delivery_status: Some("pending".into()),
        created_at: created,
        ..TaskRow::default()
    }
}

fn ids(v: Vec<TaskRow>) -> Vec<String> {
    v.into_iter().map(|t| t.task_id).collect()
}

#[test]
fn tasks_round_trip_and_are_found_by_id_run_and_owner() {
    for s in testdb::stores() {
        let on = format!("{:?}", s.dialect());
        s.write(|db| {
            db.put_task_run(&task("t2", "r2", "agent:main:main", 20))?;
            db.put_task_run(&task("t1", "r1", "agent:main:main", 10))?;
            db.put_task_run(&task("t3", "r3", "agent:main:other", 5))
        })
        .unwrap();
        assert_eq!(ids(s.read(|db| db.task_runs_for_owner("agent:main:main")).unwrap()), ["t1", "t2"], "{on}");
        let mut t = s.read(|db| db.task_run_by_run_id("r3")).unwrap().unwrap();
        assert_eq!(t.task_id, "t3", "{on}");
        t.status = "cancelled".into();
        t.error = Some("Cancelled by operator.".into());
        s.write(|db| db.put_task_run(&t)).unwrap();
        assert_eq!(s.read(|db| db.task_run("t3")).unwrap(), Some(t), "{on}");
        assert_eq!(s.read(|db| db.task_run("nope")).unwrap(), None, "{on}");
        assert_eq!(s.read(|db| db.task_run_by_run_id("nope")).unwrap(), None, "{on}");
    }
}

#[test]
fn a_replaced_task_keeps_its_place_among_equal_creation_times() {
    for s in testdb::stores() {
        let on = format!("{:?}", s.dialect());
        s.write(|db| {
            for id in ["c", "a", "b"] {
                db.put_task_run(&task(id, "r", "agent:main:main", 1))?;
            }
            Ok(())
        })
        .unwrap();
        let a = TaskRow { status: "succeeded".into(), ..task("a", "r", "agent:main:main", 1) };
        s.write(|db| db.put_task_run(&a)).unwrap();
        assert_eq!(ids(s.read(|db| db.task_runs_for_owner("agent:main:main")).unwrap()), ["c", "a", "b"], "{on}");
        assert_eq!(s.read(|db| db.task_run_by_run_id("r")).unwrap().map(|t| t.task_id), Some("c".into()), "{on}");
        assert_eq!(s.read(|db| db.task_run("a")).unwrap().map(|t| t.status), Some("succeeded".into()), "{on}");
    }
}

#[test]
fn fields_this_build_does_not_know_are_kept() {
    for s in testdb::stores() {
        let on = format!("{:?}", s.dialect());
        let t = TaskRow::from_json(
            r#"{"taskId":"t9","runtime":"acp","ownerKey":"agent:main:main","status":"succeeded","createdAt":3,"scopeKind":"session","detail":{"x":1}}"#,
        )
        .unwrap();
        s.write(|db| db.put_task_run(&t)).unwrap();
        let back = s.read(|db| db.task_run("t9")).unwrap().unwrap();
        assert_eq!(back.extra["scopeKind"], "session", "{on}");
        assert_eq!(back.to_json()["detail"], serde_json::json!({"x": 1}), "{on}");
        assert_eq!(back.run_id, None, "{on}");
    }
}

#[test]
fn blocked_completions_count_until_their_cleanup_time() {
    for s in testdb::stores() {
        let on = format!("{:?}", s.dialect());
        let blocked = |id: &str, cleanup: serde_json::Value| {
            let mut t = TaskRow { terminal_outcome: Some("blocked".into()), ..task(id, id, "agent:main:main", 1) };
            if !cleanup.is_null() {
                t.extra.insert("cleanupAfter".into(), cleanup);
            }
            t
        };
        s.write(|db| {
            db.put_task_run(&blocked("kept", serde_json::json!(100)))?;
            db.put_task_run(&blocked("float", serde_json::json!(150.5)))?;
            db.put_task_run(&blocked("forever", serde_json::Value::Null))?;
            db.put_task_run(&blocked("odd", serde_json::json!("later")))?;
            db.put_task_run(&TaskRow { terminal_outcome: Some("succeeded".into()), ..task("ok", "ok", "o", 1) })
        })
        .unwrap();
        assert_eq!(s.read(|db| db.blocked_task_count(99)).unwrap(), 4, "{on}");
        assert_eq!(s.read(|db| db.blocked_task_count(100)).unwrap(), 3, "{on}");
        assert_eq!(s.read(|db| db.blocked_task_count(150)).unwrap(), 3, "{on}");
        assert_eq!(s.read(|db| db.blocked_task_count(151)).unwrap(), 2, "{on}");
    }
}

#[test]
fn the_ledger_survives_a_restart() {
    for url in reopenable_urls() {
        let s = Store::open(&url).unwrap();
        let t = TaskRow { label: Some("job".into()), ..task("t1", "r1", "agent:main:main", 4) };
        s.write(|db| db.put_task_run(&t)).unwrap();
        s.close();
        let again = Store::open(&url).unwrap();
        assert_eq!(again.read(|db| db.task_run("t1")).unwrap(), Some(t.clone()), "{url}");
        assert_eq!(again.read(|db| db.task_runs_for_owner("agent:main:main")).unwrap(), vec![t], "{url}");
    }
}

fn stored(id: &str, run: &str, created: i64) -> StoredTask {
    StoredTask {
        task_id: id.into(),
        run_id: Some(run.into()),
        runtime: "subagent".into(),
        status: "succeeded".into(),
        delivery_status: Some("delivered".into()),
        owner_key: "agent:main:main".into(),
        requester_session_key: None,
        child_session_key: None,
        agent_id: None,
        created_at: created,
        ended_at: Some(created + 1),
        // spaces and a null: what was read is kept byte for byte
        record: format!(
            "{{\"taskId\": \"{id}\", \"runId\":\"{run}\",\"runtime\":\"subagent\",\"ownerKey\":\"agent:main:main\",\"status\":\"succeeded\",\"createdAt\":{created},\"error\":null}}"
        ),
    }
}

#[test]
fn an_imported_task_is_added_once_kept_as_read_and_read_as_any_other() {
    for st in testdb::stores() {
        let on = format!("{:?}", st.dialect());
        let one = StoredTask { status: "running".into(), ended_at: None, ..stored("t1", "r1", 5) };
        assert!(st.write(|db| db.insert_task_if_absent(&one)).unwrap(), "{on}");
        let changed = StoredTask { status: "lost".into(), ..one.clone() };
        assert!(!st.write(|db| db.insert_task_if_absent(&changed)).unwrap(), "{on}");
        assert_eq!(st.read(|db| db.all_tasks()).unwrap(), vec![one.clone()], "{on}");
        // the engine reads it by id, run and owner
        let t = st.read(|db| db.task_run_by_run_id("r1")).unwrap().unwrap();
        assert_eq!((t.task_id.as_str(), t.error.as_deref()), ("t1", None), "{on}");
        assert_eq!(ids(st.read(|db| db.task_runs_for_owner("agent:main:main")).unwrap()), ["t1"], "{on}");
        // once the engine writes the task, its record is the engine's; an import again leaves it
        st.write(|db| db.put_task_run(&TaskRow { status: "succeeded".into(), ..t.clone() })).unwrap();
        assert!(!st.write(|db| db.insert_task_if_absent(&one)).unwrap(), "{on}");
        let now = st.read(|db| db.all_tasks()).unwrap();
        assert_eq!(now[0].status, "succeeded", "{on}");
        assert_eq!(TaskRow::from_json(&now[0].record).map(|t| t.status), Some("succeeded".into()), "{on}");
    }
}

#[test]
fn every_task_comes_back_by_time_then_id_and_survives_a_restart() {
    for url in reopenable_urls() {
        let st = Store::open(&url).unwrap();
        st.write(|db| {
            for r in [stored("b", "r", 2), stored("c", "r", 1), stored("a", "r", 2)] {
                db.insert_task_if_absent(&r)?;
            }
            db.put_task_run(&task("d", "q", "agent:main:main", 3))
        })
        .unwrap();
        st.close();
        let st = Store::open(&url).unwrap();
        let all = st.read(|db| db.all_tasks()).unwrap();
        assert_eq!(all.iter().map(|t| t.task_id.as_str()).collect::<Vec<_>>(), ["c", "a", "b", "d"], "{url}");
        assert_eq!(all[0], stored("c", "r", 1), "{url}");
        assert_eq!(TaskRow::from_json(&all[3].record), Some(task("d", "q", "agent:main:main", 3)), "{url}");
    }
}
