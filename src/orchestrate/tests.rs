//! The outbox worker driven by a real Orchestrator: retries, the attempt cap, a denied session, recovery by the next open, claims;
//! on SQLite and on PostgreSQL.

use super::outbox::{OutboxRow, A2A_ANNOUNCE, SUBAGENT_ANNOUNCE};
use super::Orchestrator;
use crate::config::Config;
use crate::engine::Engine;
use crate::host::testing::FakeHost;
use crate::store::Store;
use serde_json::{json, Value};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

fn temp_db() -> String {
    let dir = crate::scratch::path("orch");
    dir.join("s.db").to_string_lossy().into_owned()
}

/// A new database of each backend: a SQLite file and a PostgreSQL schema.
fn places() -> [String; 2] {
    [temp_db(), crate::store::pg::testdb::fresh_url()]
}

fn open(path: &str, cfg: serde_json::Value, host: Arc<FakeHost>) -> Arc<Orchestrator> {
    let engine = Engine::new(Store::open(path).unwrap(), Config::from_json(&cfg).unwrap(), None);
    Orchestrator::new(Arc::new(engine), host)
}

fn payload(key: &str) -> Value {
    json!({"channel": "discord", "to": "channel:dev", "message": "hi", "idempotencyKey": key,
           "sessionKey": "agent:main:discord:group:dev", "kind": "a2a_announce"})
}

/// Polls `f` every 10 ms for up to 20 s (generous: a reached state ends the wait at once).
async fn until<T>(mut f: impl FnMut() -> Option<T>) -> T {
    let deadline = std::time::Instant::now() + Duration::from_secs(20);
    loop {
        if let Some(v) = f() {
            return v;
        }
        assert!(std::time::Instant::now() < deadline, "condition not reached within 20 s");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

fn item(orch: &Orchestrator, key: &str) -> OutboxRow {
    orch.engine.store().read(|db| db.outbox_item(key)).unwrap().unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failing_delivery_is_retried_with_backoff_and_one_key_until_it_succeeds() {
    for place in places() {
        a_failing_delivery_is_retried_with_backoff_and_one_key_until_it_succeeds_at(&place).await;
    }
}

async fn a_failing_delivery_is_retried_with_backoff_and_one_key_until_it_succeeds_at(place: &str) {
    let tries = Arc::new(AtomicUsize::new(0));
    let t = tries.clone();
    let host = Arc::new(FakeHost::replying("x").with_deliver(move |_| {
        let n = t.fetch_add(1, Ordering::SeqCst);
        Box::pin(async move {
            if n < 2 {
                Err(format!("channel down {n}"))
            } else {
                Ok(())
            }
        })
    }));
    let cfg = json!({"session": {"outbox": {"backoffMs": 20}}});
    let orch = open(place, cfg, host.clone());
    orch.start().await.unwrap();
    assert!(orch.outbox.enqueue("k1", A2A_ANNOUNCE, Some("agent:main:discord:group:dev"), &payload("k1")).unwrap());
    // recording it again adds nothing
    assert!(!orch.outbox.enqueue("k1", A2A_ANNOUNCE, Some("agent:main:discord:group:dev"), &payload("k1")).unwrap());
    until(|| (item(&orch, "k1").status == "delivered").then_some(())).await;
    let row = item(&orch, "k1");
    assert_eq!(row.attempts, 3);
    let keys: Vec<Value> = host.deliveries().iter().map(|d| d["idempotencyKey"].clone()).collect();
    assert_eq!(keys, vec![json!("k1"); 3]);
    let failed: Vec<_> = host.events().into_iter().filter(|e| e.kind == "delivery.failed").collect();
    assert_eq!(failed.len(), 2);
    assert_eq!(failed[0].details["final"], json!(false));
    assert_eq!(host.event_kinds().iter().filter(|k| **k == "delivery.sent").count(), 1);
    orch.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tries_stop_at_max_attempts_and_a_denied_session_is_skipped_without_a_call() {
    for place in places() {
        tries_stop_at_max_attempts_and_a_denied_session_is_skipped_without_a_call_at(&place).await;
    }
}

async fn tries_stop_at_max_attempts_and_a_denied_session_is_skipped_without_a_call_at(place: &str) {
    let host = Arc::new(FakeHost::replying("x").with_deliver(|_| Box::pin(async { Err("always down".to_owned()) })));
    let cfg = json!({"session": {"outbox": {"backoffMs": 1, "maxAttempts": 3}}});
    let orch = open(place, cfg, host.clone());
    orch.start().await.unwrap();
    orch.outbox.enqueue("k2", A2A_ANNOUNCE, Some("agent:main:discord:group:dev"), &payload("k2")).unwrap();
    until(|| (item(&orch, "k2").status == "failed").then_some(())).await;
    assert_eq!(item(&orch, "k2").attempts, 3);
    assert_eq!(item(&orch, "k2").last_error.as_deref(), Some("always down"));
    // the event follows the commit that recorded the outcome: wait for it, not only for the row
    let last =
        until(|| host.events().into_iter().rfind(|e| e.kind == "delivery.failed" && e.details["attempt"] == json!(3)))
            .await;
    assert_eq!(last.details["final"], json!(true));

    orch.engine.upsert_session(&json!("agent:main:quiet"), &json!({"sendPolicy": "deny"})).unwrap();
    let before = host.deliveries().len();
    orch.outbox.enqueue("k3", A2A_ANNOUNCE, Some("agent:main:quiet"), &payload("k3")).unwrap();
    until(|| (item(&orch, "k3").status == "skipped").then_some(())).await;
    assert_eq!(host.deliveries().len(), before, "a denied delivery is not made");
    assert!(host.event_kinds().contains(&"delivery.blocked"));
    orch.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_item_left_pending_by_a_closed_store_is_delivered_by_the_next_open_with_the_same_key() {
    for place in places() {
        an_item_left_pending_by_a_closed_store_is_delivered_by_the_next_open_with_the_same_key_at(&place).await;
    }
}

async fn an_item_left_pending_by_a_closed_store_is_delivered_by_the_next_open_with_the_same_key_at(path: &str) {
    let down = Arc::new(FakeHost::replying("x").with_deliver(|_| Box::pin(async { Err("not yet".to_owned()) })));
    let cfg = json!({"session": {"outbox": {"backoffMs": 60000}}});
    let first = open(path, cfg.clone(), down.clone());
    first.start().await.unwrap();
    first.outbox.enqueue("k4", A2A_ANNOUNCE, Some("agent:main:discord:group:dev"), &payload("k4")).unwrap();
    until(|| (item(&first, "k4").attempts == 1).then_some(())).await;
    first.close().await;

    let up = Arc::new(FakeHost::replying("x"));
    let second = open(path, json!({"session": {"outbox": {"backoffMs": 1}}}), up.clone());
    // due in a minute by the first store's backoff: make it due now, as if the minute passed
    second
        .engine
        .store()
        .write(|db| db.settle_outbox(item(&second, "k4").id, "pending", 1, 0, Some("not yet"), 0))
        .unwrap();
    second.start().await.unwrap();
    until(|| (item(&second, "k4").status == "delivered").then_some(())).await;
    assert_eq!(up.deliveries()[0]["idempotencyKey"], "k4");
    assert_eq!(item(&second, "k4").attempts, 2);
    second.close().await;
}

#[test]
fn only_the_kinds_a_store_can_attempt_are_claimed_and_a_live_owners_claim_is_left_alone() {
    const K: [Option<&str>; 2] = [Some(A2A_ANNOUNCE), None];
    for store in crate::store::pg::testdb::stores() {
        let on = store.dialect();
        let (a, b) = (crate::owner::Lease::detect(), crate::owner::Lease::detect());
        store.write(|db| db.insert_outbox("k", A2A_ANNOUNCE, None, &json!({}), 0)).unwrap();
        store.write(|db| a.acquire(db, 60_000)).unwrap();
        let other_kind =
            store.write(|db| db.claim_outbox(a.id(), [None, Some(SUBAGENT_ANNOUNCE)], a.now(db)?, 1000, 8)).unwrap();
        assert!(other_kind.is_empty(), "{on:?}: only the kinds a process can attempt are claimed");
        assert_eq!(store.write(|db| db.claim_outbox(a.id(), K, a.now(db)?, 1000, 8)).unwrap().len(), 1, "{on:?}");
        let live = store.write(|db| db.claim_outbox(b.id(), K, b.now(db)?, 1000, 8)).unwrap();
        assert!(live.is_empty(), "{on:?}: a live claim");
        store.write(|db| a.release(db)).unwrap();
        let freed = store.write(|db| db.claim_outbox(b.id(), K, b.now(db)?, 1000, 8)).unwrap();
        assert_eq!(freed.len(), 1, "{on:?}: released");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_attempt_whose_outcome_could_not_be_written_is_recorded_once_the_store_answers_again() {
    let (gate, rx) = tokio::sync::watch::channel(false);
    let host = Arc::new(FakeHost::replying("x").with_deliver(move |_| {
        let mut gate = rx.clone();
        Box::pin(async move {
            let _ = gate.wait_for(|open| *open).await;
            Ok(())
        })
    }));
    let orch = open(&temp_db(), json!({}), host.clone());
    orch.start().await.unwrap();
    orch.outbox.enqueue("k9", A2A_ANNOUNCE, Some("agent:main:discord:group:dev"), &payload("k9")).unwrap();
    until(|| (!host.deliveries().is_empty()).then_some(())).await;
    // the delivery succeeds while the store refuses every write: its outcome cannot be recorded
    orch.engine().store().inject_fault(Some(crate::store::Fault::ReadOnly)).unwrap();
    gate.send(true).unwrap();
    until(|| host.events().iter().any(|e| e.kind == "store.error").then_some(())).await;
    orch.engine().store().inject_fault(None).unwrap();
    // left claimed by this live store, nobody would try it again before the attempt deadline
    until(|| (item(&orch, "k9").status == "delivered").then_some(())).await;
    assert_eq!(host.deliveries().len(), 1);
    orch.close().await;
}
