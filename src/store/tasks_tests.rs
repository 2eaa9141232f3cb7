use super::*;
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

#[test]
fn tasks_round_trip_and_are_found_by_id_run_and_owner() {
    let s = Store::open(":memory:").unwrap();
    s.write(|db| {
        db.put_task_run(&task("t2", "r2", "agent:main:main", 20))?;
        db.put_task_run(&task("t1", "r1", "agent:main:main", 10))?;
        db.put_task_run(&task("t3", "r3", "agent:main:other", 5))
    })
    .unwrap();
    let ids: Vec<String> =
        s.read(|db| db.task_runs_for_owner("agent:main:main")).unwrap().into_iter().map(|t| t.task_id).collect();
    assert_eq!(ids, ["t1", "t2"]);
    let mut t = s.read(|db| db.task_run_by_run_id("r3")).unwrap().unwrap();
    assert_eq!(t.task_id, "t3");
    t.status = "cancelled".into();
    t.error = Some("Cancelled by operator.".into());
    s.write(|db| db.put_task_run(&t)).unwrap();
    assert_eq!(s.read(|db| db.task_run("t3")).unwrap(), Some(t));
    assert_eq!(s.read(|db| db.task_run("nope")).unwrap(), None);
}

#[test]
fn fields_this_build_does_not_know_are_kept() {
    let s = Store::open(":memory:").unwrap();
    let t = TaskRow::from_json(
        r#"{"taskId":"t9","runtime":"acp","ownerKey":"agent:main:main","status":"succeeded","createdAt":3,"scopeKind":"session","detail":{"x":1}}"#,
    )
    .unwrap();
    s.write(|db| db.put_task_run(&t)).unwrap();
    let back = s.read(|db| db.task_run("t9")).unwrap().unwrap();
    assert_eq!(back.extra["scopeKind"], "session");
    assert_eq!(back.to_json()["detail"], serde_json::json!({"x": 1}));
    assert_eq!(back.run_id, None);
}
