//! Persisted yields and the undelivered-children query on both backends, and across a restart.

use super::*;
use crate::store::pg::testdb;
use crate::store::subagents::tests::reopenable_urls;
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
        pause_reason: None,
        task_run_id: None,
        run_timeout_seconds: None,
    }
}

fn waiting(id: &str, created: i64) -> YieldRow {
    YieldRow {
        yield_id: id.into(),
        session_key: "agent:main:main".into(),
        turn_run_id: None,
        message: "Turn yielded.".into(),
        acknowledgment: None,
        origin: Some(serde_json::json!({"channel": "discord"})),
        wait_for: "children".into(),
        children: vec!["r1".into(), "r2".into()],
        status: "waiting".into(),
        resume_run_id: None,
        created_at: created,
        resumed_at: None,
    }
}

#[test]
fn a_child_is_undelivered_until_its_run_ended_and_its_outbox_item_is_final() {
    for s in testdb::stores() {
        let on = format!("{:?}", s.dialect());
        s.write(|db| {
            db.put_subagent_run(&record("running", false, "pending"))?;
            db.put_subagent_run(&record("ended-no-item", true, "pending"))?;
            db.put_subagent_run(&record("ended-item-pending", true, "pending"))?;
            db.put_subagent_run(&record("ended-item-final", true, "pending"))?;
            db.put_subagent_run(&record("settled", true, "delivered"))?;
            db.put_subagent_run(&record("skipped", false, "skipped"))?;
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
            [("running".into(), false), ("ended-no-item".into(), true), ("ended-item-pending".into(), true)],
            "{on}"
        );
        assert!(s.read(|db| db.undelivered_children("agent:main:other")).unwrap().is_empty(), "{on}");
    }
}

#[test]
fn a_yield_moves_only_from_the_status_it_is_in() {
    for s in testdb::stores() {
        let on = format!("{:?}", s.dialect());
        let y = waiting("y1", 5);
        s.write(|db| db.insert_yield(&y)).unwrap();
        assert_eq!(s.read(|db| db.open_yields_of("agent:main:main")).unwrap(), vec![y.clone()], "{on}");
        assert!(s.write(|db| db.move_yield("y1", "waiting", "resuming", Some("run-9"), None)).unwrap(), "{on}");
        assert!(!s.write(|db| db.move_yield("y1", "waiting", "resuming", Some("run-x"), None)).unwrap(), "{on}");
        assert!(s.write(|db| db.move_yield("y1", "resuming", "resumed", None, Some(7))).unwrap(), "{on}");
        let done = s.read(|db| db.yield_row("y1")).unwrap().unwrap();
        assert_eq!(
            (done.status.as_str(), done.resume_run_id.as_deref(), done.resumed_at),
            ("resumed", Some("run-9"), Some(7)),
            "{on}"
        );
        assert!(s.read(|db| db.open_yields()).unwrap().is_empty(), "{on}");
        assert_eq!(s.read(|db| db.yield_row("nope")).unwrap(), None, "{on}");
    }
}

#[test]
fn open_yields_come_oldest_first_in_insertion_order_and_survive_a_restart() {
    for url in reopenable_urls() {
        let s = Store::open(&url).unwrap();
        s.write(|db| {
            for (id, at) in [("yc", 2), ("yb", 1), ("ya", 2)] {
                db.insert_yield(&waiting(id, at))?;
            }
            db.insert_yield(&YieldRow { session_key: "agent:main:other".into(), ..waiting("yo", 0) })
        })
        .unwrap();
        s.close();
        let again = Store::open(&url).unwrap();
        let ids = |v: Vec<YieldRow>| v.into_iter().map(|y| y.yield_id).collect::<Vec<_>>();
        assert_eq!(ids(again.read(|db| db.open_yields()).unwrap()), ["yo", "yb", "yc", "ya"], "{url}");
        assert_eq!(ids(again.read(|db| db.open_yields_of("agent:main:main")).unwrap()), ["yb", "yc", "ya"], "{url}");
        assert_eq!(again.read(|db| db.yield_row("ya")).unwrap(), Some(waiting("ya", 2)), "{url}");
    }
}
