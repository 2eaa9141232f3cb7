//! The lease at work in a real Orchestrator on a file, with an injected clock and host
//! identities: the work of an owner on another host is left alone while its lease lives and
//! taken over (its run ended, its child announced once, its pending announce delivered) once it
//! expires; a dead process on this host is taken over at once; a live owner that renews keeps
//! its work; a clean close frees its claims at once; a lapsed lease is reported. The cases that
//! move no clock also run on PostgreSQL (where leases are read against the server's clock).

use std::sync::atomic::{AtomicI64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use serde_json::{json, Value};

use super::*;
use crate::entry;
use crate::host::testing::FakeHost;
use crate::host::Lane;
use crate::orchestrate::outbox::A2A_ANNOUNCE;
use crate::orchestrate::subagents::testkit::{record, requests_in, tmp_db, until};
use crate::orchestrate::subagents::SubagentRun;
use crate::owner::{Clock, Here, Lease};
use crate::store::pg::testdb;
use crate::store::runs::RunRecord;
use crate::store::Store;

const LEASE_MS: i64 = 30_000;
const DEAD_PID: u32 = 4_000_000_000;

fn here(host: &str, pid: u32) -> Here {
    Here { host_id: host.into(), host_name: host.into(), pid, pid_running: |p| p != DEAD_PID }
}

/// A clock that stands still unless moved, starting now (so items recorded on the system clock
/// are due on it).
fn clock() -> (Arc<AtomicI64>, Clock) {
    let at = Arc::new(AtomicI64::new(entry::now_ms()));
    let c = at.clone();
    (at, Arc::new(move || c.load(Ordering::SeqCst)))
}

async fn open_as(path: &str, lease: Lease, host: Arc<FakeHost>) -> Arc<Orchestrator> {
    let config = crate::config::Config::from_json(&json!({"session": {"outbox": {"backoffMs": 10}}})).unwrap();
    let engine = crate::engine::Engine::new(Store::open(path).unwrap(), config, None);
    let o = Orchestrator::with_lease(Arc::new(engine), host, lease);
    o.start().await.unwrap();
    o
}

fn replying() -> Arc<FakeHost> {
    Arc::new(FakeHost::replying("ok"))
}

/// Leaves on `path` the work of an owner that stopped without a word: a child run `child` still
/// marked running (with its sub-agent record, announce pending) and an agent-to-agent announce
/// `a2a-key` it had claimed.
fn gone_owner_left_work(path: &str, gone: &Lease) {
    let store = Store::open(path).unwrap();
    let rec: SubagentRun = serde_json::from_value(json!({
        "runId": "child",
        "childSessionKey": "agent:main:subagent:child",
        "requesterSessionKey": "agent:main:main",
        "requesterDisplayKey": "main",
        "task": "index the logs",
        "cleanup": "keep",
        "createdAt": 1_000,
        "startedAt": 1_000,
        "announce": {"status": "pending", "attempts": 0, "idempotencyKey": "child-key"},
    }))
    .unwrap();
    let run = RunRecord {
        run_id: "child".into(),
        session_key: "agent:main:subagent:child".into(),
        lane: "subagent".into(),
        chain_id: Some("chain".into()),
        status: "running".into(),
        started_at: Some(1_000),
        ended_at: None,
        error: None,
    };
    let payload = json!({"channel": "discord", "to": "channel:dev", "message": "hi", "idempotencyKey": "a2a-key",
                         "sessionKey": "agent:main:discord:group:dev", "kind": A2A_ANNOUNCE});
    store
        .write(|db| {
            gone.acquire(db, LEASE_MS as u64)?;
            db.put_subagent_run(&rec)?;
            db.insert_run(&run, gone.id())?;
            db.insert_outbox("a2a-key", A2A_ANNOUNCE, Some("agent:main:discord:group:dev"), &payload, 0)?;
            let claimed = db.claim_outbox(gone.id(), [Some(A2A_ANNOUNCE), None], gone.now(db)?, 15 * 60_000, 8)?;
            assert_eq!(claimed.len(), 1);
            Ok(())
        })
        .unwrap();
    store.close();
}

fn run_status(o: &Orchestrator, id: &str) -> String {
    o.engine().store().read(|db| db.run(id)).unwrap().unwrap().status
}

fn outbox_status(o: &Orchestrator, key: &str) -> String {
    o.engine().store().read(|db| db.outbox_item(key)).unwrap().unwrap().status
}

/// Everything the gone owner left was taken over by `o`: its run ended interrupted, its child
/// announced once, its claimed announce delivered once.
async fn assert_taken_over_by(o: &Orchestrator, host: &FakeHost) {
    until("announced and delivered", || {
        record(o, "child").is_some_and(|r| r.announce.status == "delivered")
            && outbox_status(o, "a2a-key") == "delivered"
    })
    .await;
    let rec = record(o, "child").unwrap();
    assert_eq!(rec.outcome.unwrap().error.as_deref(), Some(crate::orchestrate::runs::INTERRUPTED));
    assert_eq!(run_status(o, "child"), "error");
    assert_eq!(requests_in(host, Lane::Announce).len(), 1);
    assert_eq!(host.deliveries().len(), 1);
    assert_eq!(host.deliveries()[0]["idempotencyKey"], "a2a-key");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_gone_owner_on_another_host_is_taken_over_only_once_its_lease_expires() {
    let path = tmp_db();
    let (t, clock) = clock();
    let gone = Lease::new(here("host-a", DEAD_PID), clock.clone());
    gone_owner_left_work(&path, &gone);
    let host = replying();
    let o = open_as(&path, Lease::new(here("host-b", 2), clock), host.clone()).await;
    // its pid means nothing here: the lease is live, so nothing is touched
    tokio::time::sleep(Duration::from_millis(300)).await;
    t.fetch_add(LEASE_MS - 1, Ordering::SeqCst);
    let found = o.take_over().await.unwrap();
    assert!(found.renewed && found.reaped.is_empty() && found.ended.is_empty(), "{found:?}");
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert_eq!(run_status(&o, "child"), "running");
    assert!(record(&o, "child").unwrap().ended_at.is_none());
    assert_eq!(outbox_status(&o, "a2a-key"), "pending");
    assert!(host.requests().is_empty() && host.deliveries().is_empty());

    t.fetch_add(1, Ordering::SeqCst);
    let found = o.take_over().await.unwrap();
    assert_eq!((found.reaped, found.ended), (vec![gone.id().to_owned()], vec!["child".to_owned()]));
    assert_taken_over_by(&o, &host).await;
    assert_eq!(o.take_over().await.unwrap().ended.len(), 0, "taken over once");
    o.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_dead_process_on_this_host_is_taken_over_by_the_next_open_at_once() {
    a_dead_process_on_this_host_is_taken_over_by_the_next_open_at_once_at(&tmp_db()).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_dead_process_on_this_host_is_taken_over_by_the_next_open_at_once_on_postgres() {
    a_dead_process_on_this_host_is_taken_over_by_the_next_open_at_once_at(&testdb::fresh_url()).await;
}

async fn a_dead_process_on_this_host_is_taken_over_by_the_next_open_at_once_at(path: &str) {
    let (_t, clock) = clock();
    gone_owner_left_work(path, &Lease::new(here("host-a", DEAD_PID), clock.clone()));
    let host = replying();
    let o = open_as(path, Lease::new(here("host-a", 2), clock), host.clone()).await;
    assert_taken_over_by(&o, &host).await;
    o.close().await;
}

/// A host whose child runs never end and whose other runs answer `ok`.
fn children_hang() -> Arc<FakeHost> {
    Arc::new(FakeHost::new(|req| {
        Box::pin(async move {
            if req.options.lane == Lane::Subagent {
                std::future::pending::<()>().await;
            }
            Ok(json!({"reply": "ok"}))
        })
    }))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_live_owner_that_renews_keeps_its_work_and_learns_when_its_lease_lapsed() {
    let path = tmp_db();
    let (t, clock) = clock();
    let (h1, h2) = (children_hang(), replying());
    let o1 = open_as(&path, Lease::new(here("host-a", 1), clock.clone()), h1.clone()).await;
    let o2 = open_as(&path, Lease::new(here("host-b", 2), clock), h2.clone()).await;
    let out = o1
        .tool(crate::tools::Tool::SessionsSpawn, json!({"task": "t"}), json!({"agentSessionKey": "main"}), false)
        .await
        .unwrap();
    let run_id = out["runId"].as_str().unwrap().to_owned();
    until("the child started", || !requests_in(&h1, Lane::Subagent).is_empty()).await;
    // three lease lengths pass, o1 renewing every two thirds of one
    for _ in 0..4 {
        t.fetch_add(LEASE_MS * 2 / 3, Ordering::SeqCst);
        assert!(o1.take_over().await.unwrap().renewed);
        assert!(o2.take_over().await.unwrap().ended.is_empty());
    }
    assert_eq!(run_status(&o2, &run_id), "running");
    assert!(requests_in(&h2, Lane::Announce).is_empty());
    // o1 stalls past its lease: o2 takes its run over and announces it
    t.fetch_add(LEASE_MS, Ordering::SeqCst);
    assert_eq!(o2.take_over().await.unwrap().ended, std::slice::from_ref(&run_id));
    until("announced", || record(&o2, &run_id).is_some_and(|r| r.announce.status == "delivered")).await;
    let announces = requests_in(&h1, Lane::Announce).len() + requests_in(&h2, Lane::Announce).len();
    assert_eq!(announces, 1, "announced once, by whichever store claimed it");
    // o1 comes back: told its lease had lapsed, and holds again from then on
    let back = o1.take_over().await.unwrap();
    assert!(!back.renewed);
    let lapsed = h1.events().into_iter().any(|e| {
        e.kind == "store.error" && e.details["error"].as_str().is_some_and(|m| m.contains("lease had lapsed"))
    });
    assert!(lapsed, "o1 reports the lapse");
    assert_eq!(o2.take_over().await.unwrap().reaped, Vec::<String>::new());
    o1.close().await;
    o2.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_clean_close_frees_the_claims_at_once() {
    a_clean_close_frees_the_claims_at_once_at(&tmp_db()).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_clean_close_frees_the_claims_at_once_on_postgres() {
    a_clean_close_frees_the_claims_at_once_at(&testdb::fresh_url()).await;
}

async fn a_clean_close_frees_the_claims_at_once_at(path: &str) {
    let (_t, clock) = clock();
    let stuck = Arc::new(FakeHost::replying("ok").with_deliver(|_| Box::pin(std::future::pending())));
    let o1 = open_as(path, Lease::new(here("host-a", 1), clock.clone()), stuck.clone()).await;
    let payload = json!({"channel": "discord", "to": "channel:dev", "message": "hi", "idempotencyKey": "k",
                         "sessionKey": "agent:main:discord:group:dev", "kind": A2A_ANNOUNCE});
    o1.outbox().enqueue("k", A2A_ANNOUNCE, Some("agent:main:discord:group:dev"), &payload).unwrap();
    until("the attempt is in flight", || !stuck.deliveries().is_empty()).await;
    o1.close().await;
    let host = replying();
    let o2 = open_as(path, Lease::new(here("host-b", 2), clock), host.clone()).await;
    until("delivered by the other store", || outbox_status(&o2, "k") == "delivered").await;
    assert_eq!(host.deliveries().len(), 1);
    let owners: Vec<Value> =
        o2.engine().store().read(|db| db.owners()).unwrap().into_iter().map(|o| json!(o.owner_id)).collect();
    assert_eq!(owners, [json!(o2.lease().id())], "o1's lease is gone");
    o2.close().await;
}

/// A host whose resume turns (after `sessions_yield`) never answer.
fn resumes_hang() -> Arc<FakeHost> {
    Arc::new(FakeHost::new(|req| {
        Box::pin(async move {
            if req.message.contains("[Context:") {
                std::future::pending::<()>().await;
            }
            Ok(json!({"reply": "ok"}))
        })
    }))
}

async fn open9_as(path: &str, lease: Lease, host: Arc<FakeHost>) -> Arc<Orchestrator> {
    let json = json!({"session": {"outbox": {"backoffMs": 10}}});
    let config = crate::config::Config::from_json_for(&json, crate::contract::Contract::V2026_9).unwrap();
    let engine = crate::engine::Engine::new(Store::open(path).unwrap(), config, None);
    let o = Orchestrator::with_lease(Arc::new(engine), host, lease);
    o.start().await.unwrap();
    o
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_resume_a_gone_owner_cut_short_is_resumed_by_the_store_that_takes_over() {
    let path = tmp_db();
    let (t, clock) = clock();
    let (h1, h2) = (resumes_hang(), replying());
    let o1 = open9_as(&path, Lease::new(here("host-a", 1), clock.clone()), h1.clone()).await;
    let o2 = open9_as(&path, Lease::new(here("host-b", 2), clock), h2.clone()).await;
    let main = json!({"agentSessionKey": "agent:main:main"});
    o1.tool(crate::tools::Tool::SessionsSpawn, json!({"task": "t"}), main.clone(), false).await.unwrap();
    let out = o1.tool(crate::tools::Tool::SessionsYield, json!({}), main, false).await.unwrap();
    assert_eq!(out["status"], "yielded");
    let resumes = |h: &FakeHost| -> Vec<String> {
        h.requests().into_iter().filter(|r| r.message.contains("[Context:")).map(|r| r.idempotency_key).collect()
    };
    until("o1 resumes the yield", || !resumes(&h1).is_empty()).await;
    // o1 stops without a word: o2 takes its runs over once its lease has expired, the resume
    // run among them, and resumes the yield again under the same key (not waiting for an open)
    t.fetch_add(LEASE_MS + 1, Ordering::SeqCst);
    assert!(!o2.take_over().await.unwrap().ended.is_empty());
    until("o2 resumes the yield again", || !resumes(&h2).is_empty()).await;
    assert_eq!(resumes(&h2), resumes(&h1));
    until("resumed", || o2.engine().store().read(|db| db.open_yields()).unwrap().is_empty()).await;
    o2.close().await;
    o1.close().await;
}
