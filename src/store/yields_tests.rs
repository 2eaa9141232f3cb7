use super::*;
use crate::store::subagents::{AnnounceState, SubagentRun};
use crate::store::Store;

fn record(id: &str, ended: bool, announce: &str) -> SubagentRun {
    SubagentRun {
        run_id: id.into(),
        child_session_key: format!("agent:main:subagent:{id}"),
        requester_session_key: "agent:main:main".into(),
        requester_display_key: "main".into(),
        requester_origin: None,
        task: "t".into(),
        label: None,
        cleanup: "keep".into(),
        created_at: 1,
        started_at: Some(1),
        ended_at: ended.then_some(2),
        outcome: None,
        announce: AnnounceState { status: announce.into(), attempts: 0, idempotency_key: format!("k-{id}") },
        archive_at_ms: None,
        cleanup_completed_at: None,
    }
}

#[test]
fn a_child_is_undelivered_until_its_run_ended_and_its_outbox_item_is_final() {
    let s = Store::open(":memory:").unwrap();
    s.write(|db| {
        db.put_subagent_run(&record("running", false, "pending"))?;
        db.put_subagent_run(&record("ended-no-item", true, "pending"))?;
        db.put_subagent_run(&record("ended-item-pending", true, "pending"))?;
        db.put_subagent_run(&record("ended-item-final", true, "pending"))?;
        db.put_subagent_run(&record("settled", true, "delivered"))?;
        db.insert_outbox("k-ended-item-pending", "subagent_announce", None, &serde_json::json!({}), 0)?;
        db.insert_outbox("k-ended-item-final", "subagent_announce", None, &serde_json::json!({}), 0)?;
        Ok(())
    })
    .unwrap();
    let id = s.read(|db| db.outbox_item("k-ended-item-final")).unwrap().unwrap().id;
    s.write(|db| db.settle_outbox(id, "delivered", 1, 0, None, 0)).unwrap();
    let pending: Vec<(String, bool)> = s
        .read(|db| db.undelivered_children("agent:main:main"))
        .unwrap()
        .into_iter()
        .map(|c| (c.run_id, c.ended))
        .collect();
    assert_eq!(
        pending,
        [("running".into(), false), ("ended-no-item".into(), true), ("ended-item-pending".into(), true)]
    );
}

#[test]
fn a_yield_moves_only_from_the_status_it_is_in() {
    let s = Store::open(":memory:").unwrap();
    let y = YieldRow {
        yield_id: "y1".into(),
        session_key: "agent:main:main".into(),
        turn_run_id: None,
        message: "Turn yielded.".into(),
        acknowledgment: None,
        origin: Some(serde_json::json!({"channel": "discord"})),
        wait_for: "children".into(),
        children: vec!["r1".into(), "r2".into()],
        status: "waiting".into(),
        resume_run_id: None,
        created_at: 5,
        resumed_at: None,
    };
    s.write(|db| db.insert_yield(&y)).unwrap();
    assert_eq!(s.read(|db| db.open_yields_of("agent:main:main")).unwrap(), vec![y.clone()]);
    assert!(s.write(|db| db.move_yield("y1", "waiting", "resuming", Some("run-9"), None)).unwrap());
    assert!(!s.write(|db| db.move_yield("y1", "waiting", "resuming", Some("run-x"), None)).unwrap());
    assert!(s.write(|db| db.move_yield("y1", "resuming", "resumed", None, Some(7))).unwrap());
    let done = s.read(|db| db.yield_row("y1")).unwrap().unwrap();
    assert_eq!(
        (done.status.as_str(), done.resume_run_id.as_deref(), done.resumed_at),
        ("resumed", Some("run-9"), Some(7))
    );
    assert!(s.read(|db| db.open_yields()).unwrap().is_empty());
}
