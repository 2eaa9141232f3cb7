//! The sub-agent registry on both backends: records round trip in registration order with their
//! derived columns, survive a restart, and read back in the API shape.

use super::*;
use crate::store::pg::testdb;
use crate::store::Store;

/// Two locations a store can be closed and reopened at: a new SQLite file and a new
/// PostgreSQL schema (for the restart cases of the registry, task and yield tests).
pub(crate) fn reopenable_urls() -> [String; 2] {
    let dir = crate::scratch::path("runs");
    [dir.join("store.db").to_string_lossy().into_owned(), testdb::fresh_url()]
}

fn ids(v: Vec<SubagentRun>) -> Vec<String> {
    v.into_iter().map(|r| r.run_id).collect()
}

fn record(id: &str, requester: &str, created: i64) -> SubagentRun {
    SubagentRun {
        run_id: id.into(),
        child_session_key: format!("agent:main:subagent:{id}"),
        requester_session_key: requester.into(),
        requester_display_key: "main".into(),
        requester_origin: None,
        task: "t".into(),
        label: None,
        cleanup: "keep".into(),
        created_at: created,
        started_at: Some(created),
        ended_at: None,
        outcome: None,
        announce: AnnounceState { status: "pending".into(), attempts: 0, idempotency_key: format!("k-{id}") },
        archive_at_ms: None,
        cleanup_completed_at: None,
        pause_reason: None,
        task_run_id: None,
        run_timeout_seconds: None,
    }
}

#[test]
fn records_round_trip_in_created_order_with_derived_columns() {
    for s in testdb::stores() {
        let on = format!("{:?}", s.dialect());
        let mut b = record("b", "agent:main:main", 20);
        s.write(|db| {
            db.put_subagent_run(&b)?;
            db.put_subagent_run(&record("a", "agent:main:main", 10))?;
            db.put_subagent_run(&record("c", "agent:main:other", 5))
        })
        .unwrap();
        assert_eq!(ids(s.read(|db| db.subagent_runs(None)).unwrap()), ["c", "a", "b"], "{on}");
        assert_eq!(ids(s.read(|db| db.subagent_runs(Some("agent:main:main"))).unwrap()), ["a", "b"], "{on}");
        assert_eq!(ids(s.read(|db| db.running_subagent_runs("agent:main:main")).unwrap()), ["a", "b"], "{on}");
        assert_eq!(s.read(|db| db.running_subagent_count("agent:main:main")).unwrap(), 2, "{on}");
        assert_eq!(s.read(|db| db.next_subagent_archive()).unwrap(), None, "{on}");
        b.ended_at = Some(30);
        b.archive_at_ms = Some(40);
        s.write(|db| db.put_subagent_run(&b)).unwrap();
        assert_eq!(s.read(|db| db.running_subagent_count("agent:main:main")).unwrap(), 1, "{on}");
        assert_eq!(ids(s.read(|db| db.running_subagent_runs("agent:main:main")).unwrap()), ["a"], "{on}");
        assert_eq!(s.read(|db| db.next_subagent_archive()).unwrap(), Some(40), "{on}");
        assert!(s.read(|db| db.due_subagent_archives(39)).unwrap().is_empty(), "{on}");
        assert_eq!(ids(s.read(|db| db.due_subagent_archives(40)).unwrap()), ["b"], "{on}");
        assert_eq!(s.read(|db| db.subagent_run("b")).unwrap(), Some(b.clone()), "{on}");
        assert!(s.write(|db| db.delete_subagent_run("b")).unwrap(), "{on}");
        assert!(!s.write(|db| db.delete_subagent_run("b")).unwrap(), "{on}");
        assert_eq!(s.read(|db| db.subagent_run("b")).unwrap(), None, "{on}");
    }
}

#[test]
fn equal_created_times_keep_registration_order_and_an_update_keeps_its_place() {
    for s in testdb::stores() {
        let on = format!("{:?}", s.dialect());
        s.write(|db| {
            for id in ["z", "y", "x", "w"] {
                db.put_subagent_run(&record(id, "agent:main:main", 7))?;
            }
            Ok(())
        })
        .unwrap();
        let mut y = record("y", "agent:main:main", 7);
        y.task = "again".into();
        s.write(|db| db.put_subagent_run(&y)).unwrap();
        assert_eq!(ids(s.read(|db| db.subagent_runs(None)).unwrap()), ["z", "y", "x", "w"], "{on}");
        assert_eq!(s.read(|db| db.subagent_run("y")).unwrap().map(|r| r.task), Some("again".into()), "{on}");
    }
}

#[test]
fn a_child_started_but_not_registered_yet_counts_as_running() {
    for s in testdb::stores() {
        let on = format!("{:?}", s.dialect());
        let child = "agent:main:subagent:late";
        s.write(|db| {
            let e = serde_json::json!({"sessionId": "s-late", "updatedAt": 1, "spawnedBy": "agent:main:main"});
            db.put_session(child, &serde_json::from_value(e).unwrap())?;
            db.put_subagent_run(&record("a", "agent:main:main", 1))
        })
        .unwrap();
        let run = crate::store::runs::RunRecord {
            run_id: "late-run".into(),
            session_key: child.into(),
            lane: "subagent".into(),
            chain_id: None,
            status: "running".into(),
            started_at: Some(1),
            ended_at: None,
            error: None,
        };
        s.write(|db| db.insert_run(&run, "owner-1")).unwrap();
        assert_eq!(s.read(|db| db.running_subagent_count("agent:main:main")).unwrap(), 2, "{on}");
        assert_eq!(s.read(|db| db.running_subagent_count("agent:main:other")).unwrap(), 0, "{on}");
    }
}

#[test]
fn the_registry_survives_a_restart() {
    for url in reopenable_urls() {
        let s = Store::open(&url).unwrap();
        let mut a = record("a", "agent:main:main", 1);
        a.ended_at = Some(2);
        a.archive_at_ms = Some(9);
        s.write(|db| {
            db.put_subagent_run(&a)?;
            db.put_subagent_run(&record("b", "agent:main:main", 1))
        })
        .unwrap();
        s.close();
        let again = Store::open(&url).unwrap();
        assert_eq!(ids(again.read(|db| db.subagent_runs(None)).unwrap()), ["a", "b"], "{url}");
        assert_eq!(again.read(|db| db.subagent_run("a")).unwrap(), Some(a), "{url}");
        assert_eq!(again.read(|db| db.running_subagent_count("agent:main:main")).unwrap(), 1, "{url}");
        assert_eq!(again.read(|db| db.next_subagent_archive()).unwrap(), Some(9), "{url}");
    }
}

#[test]
fn the_json_is_the_api_shape_and_absent_fields_are_left_out() {
    let v = record("a", "agent:main:main", 1).to_json();
    let keys: Vec<&str> = v.as_object().unwrap().keys().map(String::as_str).collect();
    assert_eq!(
        keys,
        [
            "runId",
            "childSessionKey",
            "requesterSessionKey",
            "requesterDisplayKey",
            "task",
            "cleanup",
            "createdAt",
            "startedAt",
            "announce"
        ]
    );
    assert_eq!(v["announce"], serde_json::json!({"status": "pending", "attempts": 0, "idempotencyKey": "k-a"}));
}

#[test]
fn unreadable_records_are_skipped_and_a_missing_announce_gets_a_stable_key() {
    assert_eq!(SubagentRun::from_json("not json"), None);
    assert_eq!(SubagentRun::from_json("[1]"), None);
    assert_eq!(SubagentRun::from_json(r#"{"runId": 5}"#), None);
    let r = SubagentRun::from_json(
        r#"{"runId":"r1","childSessionKey":"c","requesterSessionKey":"q","requesterDisplayKey":"q","endedAt":9}"#,
    )
    .unwrap();
    assert_eq!(r.announce.idempotency_key, "subagent-announce:r1");
    let f = SubagentRun::from_json(
        r#"{"runId":"r2","childSessionKey":"c","requesterSessionKey":"q","requesterDisplayKey":"q","createdAt":1.7e12,"endedAt":5.9,"startedAt":"x","announce":{"status":"pending","attempts":2.0,"idempotencyKey":"k"}}"#,
    )
    .unwrap();
    assert_eq!((f.created_at, f.ended_at, f.started_at, f.announce.attempts), (1_700_000_000_000, Some(5), None, 2));
    assert_eq!((r.cleanup.as_str(), r.ended_at), ("keep", Some(9)));
}

#[test]
fn the_run_timeout_reads_from_old_rows_and_from_numbers_as_javascript_writes_them() {
    let with = |t: &str| {
        let text =
            format!(r#"{{"runId":"r","childSessionKey":"c","requesterSessionKey":"q","requesterDisplayKey":"q"{t}}}"#);
        SubagentRun::from_json(&text).unwrap().run_timeout_seconds
    };
    assert_eq!(with(""), None, "a row written before the field reads as the default");
    assert_eq!(with(r#","runTimeoutSeconds":30"#), Some(30));
    assert_eq!(with(r#","runTimeoutSeconds":12.9"#), Some(12));
    assert_eq!(with(r#","runTimeoutSeconds":-1"#), None);
    assert_eq!(with(r#","runTimeoutSeconds":"x""#), None);
    let mut r = record("a", "agent:main:main", 1);
    r.run_timeout_seconds = Some(30);
    assert_eq!(r.to_json()["runTimeoutSeconds"], 30);
    assert_eq!(SubagentRun::from_json(&r.to_json().to_string()), Some(r));
}

/// Finding a child session's records (a paused child) reads `subagent_runs_by_child` on both
/// backends, never the whole table (on SQLite in registration order, without a sort).
#[test]
fn the_records_of_a_child_session_are_read_through_its_index() {
    let [sqlite, pg] = testdb::stores();
    let plan = sqlite
        .read(|db| {
            let mut st =
                db.conn()?.prepare(&format!("EXPLAIN QUERY PLAN {RUNS_OF_CHILD}")).map_err(crate::store::sql)?;
            let rows = st.query_map(["c"], |r| r.get::<_, String>(3)).map_err(crate::store::sql)?;
            rows.collect::<rusqlite::Result<Vec<_>>>().map_err(crate::store::sql)
        })
        .unwrap()
        .join("\n");
    assert!(plan.contains("USING INDEX subagent_runs_by_child"), "{plan}");
    assert!(!plan.contains("TEMP B-TREE"), "{plan}");

    pg.write(|db| {
        for i in 0..2000 {
            let mut r = record(&format!("r{i}"), "agent:main:main", i);
            r.child_session_key = format!("agent:main:subagent:c{}", i % 400);
            db.put_subagent_run(&r)?;
        }
        db.exec("ANALYZE subagent_runs", crate::args![])?;
        Ok(())
    })
    .unwrap();
    let plan = crate::store::transcripts::tests::pg_generic_plan(
        &pg,
        "PREPARE p (text) AS SELECT record FROM subagent_runs WHERE child_key = $1 ORDER BY rowid",
        "EXPLAIN EXECUTE p('agent:main:subagent:c7')",
    );
    // (the planner may sort the few rows a bitmap scan of the index finds, by cost)
    assert!(plan.contains("on subagent_runs_by_child"), "{plan}");
    assert!(!plan.contains("Seq Scan"), "{plan}");
    assert_eq!(
        RUNS_OF_CHILD.replace("?1", "$1"),
        "SELECT record FROM subagent_runs WHERE child_key = $1 ORDER BY rowid"
    );
}
