//! Migrations from a store written by an earlier build, on both backends: the two task tables
//! of schema 11 (`task_runs_2026_9`, `task_runs`) become one, rows of both kept, a task id in
//! both keeping its `task_runs` row, the imported record text unchanged.

use super::MIGRATIONS;
use crate::args;
use crate::store::pg::{schema as pg_schema, testdb};
use crate::store::tasks::StoredTask;
use crate::store::Store;

/// The place of the migration that merges the task tables (its index in a list of migrations).
fn merge_at(list: &[&str]) -> usize {
    list.iter().position(|m| m.contains("DROP TABLE IF EXISTS task_runs_2026_9")).expect("the merge migration")
}

/// Rows of the old table ("imported") and of the live one ("ours"), `both` in each.
const OLD_ROWS: &str = r#"
    INSERT INTO task_runs_2026_9 (task_id, run_id, runtime, status, delivery_status, owner_key,
        requester_session_key, child_session_key, agent_id, created_at, ended_at, record) VALUES
      ('imp', 'r-imp', 'subagent', 'succeeded', 'delivered', 'agent:main:main', 'agent:main:main',
       'agent:main:subagent:imp', 'main', 5, 6,
       '{"taskId":"imp",  "runId":"r-imp","runtime":"subagent","ownerKey":"agent:main:main","status":"succeeded","notifyPolicy":"done_only","createdAt":5,"label":null}'),
      ('both', 'r-both', 'subagent', 'running', 'pending', 'agent:main:main', NULL, NULL, NULL, 3, NULL,
       '{"taskId":"both","runtime":"subagent","ownerKey":"agent:main:main","status":"running","createdAt":3}'),
      ('cron', NULL, 'cron', 'lost', 'not_applicable', 'system:cron', NULL, NULL, NULL, 1, 2,
       '{"taskId":"cron","runtime":"cron","ownerKey":"system:cron","status":"lost","createdAt":1}');
    INSERT INTO task_runs (task_id, run_id, runtime, status, delivery_status, owner_key,
        requester_session_key, child_session_key, agent_id, created_at, ended_at, record) VALUES
      ('ours', 'r-ours', 'subagent', 'running', 'pending', 'agent:main:main', 'agent:main:main', NULL, NULL, 4, NULL,
       '{"taskId":"ours","runId":"r-ours","runtime":"subagent","ownerKey":"agent:main:main","status":"running","createdAt":4}'),
      ('both', 'r-both', 'subagent', 'succeeded', 'delivered', 'agent:main:main', NULL, NULL, NULL, 3, 9,
       '{"taskId":"both","runtime":"subagent","ownerKey":"agent:main:main","status":"succeeded","createdAt":3,"endedAt":9}');
"#;

fn check_merged(st: &Store, on: &str) {
    let all = st.read(|db| db.all_tasks()).unwrap();
    let ids: Vec<&str> = all.iter().map(|t| t.task_id.as_str()).collect();
    assert_eq!(ids, ["cron", "both", "ours", "imp"], "{on}");
    let imp = &all[3];
    assert_eq!(
        imp,
        &StoredTask {
            task_id: "imp".into(),
            run_id: Some("r-imp".into()),
            runtime: "subagent".into(),
            status: "succeeded".into(),
            delivery_status: Some("delivered".into()),
            owner_key: "agent:main:main".into(),
            requester_session_key: Some("agent:main:main".into()),
            child_session_key: Some("agent:main:subagent:imp".into()),
            agent_id: Some("main".into()),
            created_at: 5,
            ended_at: Some(6),
            record: r#"{"taskId":"imp",  "runId":"r-imp","runtime":"subagent","ownerKey":"agent:main:main","status":"succeeded","notifyPolicy":"done_only","createdAt":5,"label":null}"#.into(),
        },
        "{on}: the imported row as it was, its record byte for byte"
    );
    // a task id in both tables keeps the live ledger's row
    let both = st.read(|db| db.task_run("both")).unwrap().unwrap();
    assert_eq!((both.status.as_str(), both.ended_at), ("succeeded", Some(9)), "{on}");
    // the engine finds imported tasks by run and owner like its own
    assert_eq!(st.read(|db| db.task_run_by_run_id("r-imp")).unwrap().map(|t| t.task_id), Some("imp".into()), "{on}");
    let owned: Vec<String> =
        st.read(|db| db.task_runs_for_owner("agent:main:main")).unwrap().into_iter().map(|t| t.task_id).collect();
    assert_eq!(owned, ["both", "ours", "imp"], "{on}");
    // the old table is gone
    assert!(st.read(|db| db.count("SELECT count(*) FROM task_runs_2026_9", args![])).is_err(), "{on}");
}

#[test]
fn a_sqlite_store_with_rows_in_both_task_tables_keeps_them_all_in_one() {
    let dir = crate::scratch::path("merge-tasks");
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("store.db");
    {
        let conn = rusqlite::Connection::open(&path).unwrap();
        let at = merge_at(MIGRATIONS);
        for m in &MIGRATIONS[..at] {
            conn.execute_batch(m).unwrap();
        }
        conn.pragma_update(None, "application_id", super::APPLICATION_ID).unwrap();
        conn.pragma_update(None, "user_version", at as i64).unwrap();
        conn.execute_batch(OLD_ROWS).unwrap();
    }
    let st = Store::open(path.to_str().unwrap()).unwrap();
    check_merged(&st, "sqlite");
    st.close();
    // opened again, nothing runs twice
    let st = Store::open(path.to_str().unwrap()).unwrap();
    assert_eq!(st.read(|db| db.all_tasks()).unwrap().len(), 4);
    st.close();
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn a_postgres_store_with_rows_in_both_task_tables_keeps_them_all_in_one() {
    let url = testdb::fresh_url();
    let schema = url.rsplit("schema=").next().expect("schema").to_owned();
    let at = merge_at(pg_schema::MIGRATIONS);
    let mut setup = format!("CREATE SCHEMA {schema}; SET search_path TO {schema};");
    for m in &pg_schema::MIGRATIONS[..at] {
        setup.push_str(m);
    }
    setup.push_str(&format!("INSERT INTO session_tools_meta (key, value) VALUES ('schema_version', '{at}');"));
    setup.push_str(OLD_ROWS);
    testdb::exec(&setup);
    let st = Store::open(&url).unwrap();
    check_merged(&st, "postgres");
    st.close();
    let st = Store::open(&url).unwrap();
    assert_eq!(st.read(|db| db.all_tasks()).unwrap().len(), 4);
}
