//! The sub-agent registry across a close and a reopen, and between stores (REFERENCE.md
//! §6.4–§6.8 P16–P19, DECISIONS #3): children and announces cut short are finished by the next
//! open, imported records resumed, and a child or an announce settled once across stores.

use std::sync::Arc;
use std::time::Duration;

use serde_json::{json, Value};

use super::testkit::*;
use super::*;
use crate::host::{AgentRunRequest, Lane};
use crate::orchestrate::runs::INTERRUPTED;
use crate::store::pg::testdb;

// ---- P16–P19, DECISIONS #3: restart recovery, for real on a file ------------------------------

/// A host whose runs in `lane` never finish.
fn hanging_in(lane: Lane) -> Arc<FakeHost> {
    Arc::new(FakeHost::new(move |req| {
        Box::pin(async move {
            if req.options.lane == lane {
                std::future::pending::<()>().await;
            }
            Ok(json!({"reply": "child says hi"}))
        })
    }))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn p16_a_child_in_flight_when_the_store_closed_ends_interrupted_and_is_announced_on_the_next_open() {
    p16_a_child_in_flight_when_the_store_closed_ends_interrupted_and_is_announced_on_the_next_open_at(&tmp_db()).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn p16_a_child_in_flight_when_the_store_closed_ends_interrupted_and_is_announced_on_the_next_open_on_postgres() {
    p16_a_child_in_flight_when_the_store_closed_ends_interrupted_and_is_announced_on_the_next_open_at(
        &testdb::fresh_url(),
    )
    .await
}

async fn p16_a_child_in_flight_when_the_store_closed_ends_interrupted_and_is_announced_on_the_next_open_at(db: &str) {
    let first = hanging_in(Lane::Subagent);
    let o1 = open_at(db, json!({}), first.clone()).await;
    let ctx = json!({"agentSessionKey": "main", "agentChannel": " whatsapp ", "agentAccountId": " acct-main "});
    let out = spawn(&o1, json!({"task": "long job"}), ctx).await;
    let run_id = str_of(&out, "runId");
    until("the child run started", || !requests_in(&first, Lane::Subagent).is_empty()).await;
    o1.close().await;
    assert!(requests_in(&first, Lane::Announce).is_empty());

    let second = replying_host();
    let o2 = open_at(db, json!({}), second.clone()).await;
    until("announced by the next open", || announced(&o2, &run_id)).await;
    let rec = record(&o2, &run_id).unwrap();
    assert_eq!(rec.outcome, Some(RunOutcome { status: "error".into(), error: Some(INTERRUPTED.into()) }));
    assert_eq!(rec.requester_origin, Some(json!({"channel": "whatsapp", "accountId": "acct-main"})));
    let a = requests_in(&second, Lane::Announce);
    assert_eq!(a.len(), 1);
    assert!(a[0].message.contains(&format!("just failed: {INTERRUPTED}.")), "{}", a[0].message);
    assert_eq!(
        (a[0].options.channel.as_deref(), a[0].options.account_id.as_deref()),
        (Some("whatsapp"), Some("acct-main"))
    );
    let w = o2.wait_run(&run_id, 0).await.unwrap();
    assert_eq!((w["status"].as_str(), w["error"].as_str()), (Some("error"), Some(INTERRUPTED)));
    o2.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn p19_an_announce_cut_short_by_close_is_retried_by_the_next_open_with_the_same_key() {
    p19_an_announce_cut_short_by_close_is_retried_by_the_next_open_with_the_same_key_at(&tmp_db()).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn p19_an_announce_cut_short_by_close_is_retried_by_the_next_open_with_the_same_key_on_postgres() {
    p19_an_announce_cut_short_by_close_is_retried_by_the_next_open_with_the_same_key_at(&testdb::fresh_url()).await
}

async fn p19_an_announce_cut_short_by_close_is_retried_by_the_next_open_with_the_same_key_at(db: &str) {
    let first = hanging_in(Lane::Announce);
    let o1 = open_at(db, json!({}), first.clone()).await;
    let run_id = str_of(&spawn(&o1, json!({"task": "t"}), json!({"agentSessionKey": "main"})).await, "runId");
    until("the announce run started", || !requests_in(&first, Lane::Announce).is_empty()).await;
    let key = record(&o1, &run_id).unwrap().announce.idempotency_key;
    o1.close().await;

    let second = replying_host();
    let o2 = open_at(db, json!({}), second.clone()).await;
    until("announced by the next open", || announced(&o2, &run_id)).await;
    let rec = record(&o2, &run_id).unwrap();
    assert_eq!(rec.announce.idempotency_key, key);
    assert_eq!(rec.outcome, Some(RunOutcome { status: "ok".into(), error: None }));
    let items = o2.engine().store().read(|db| db.outbox_items()).unwrap();
    assert_eq!(items.len(), 1);
    assert_eq!(items[0].idempotency_key, key);
    let tries: Vec<String> = requests_in(&first, Lane::Announce)
        .into_iter()
        .chain(requests_in(&second, Lane::Announce))
        .map(|r| r.idempotency_key)
        .collect();
    assert_eq!(tries, [key.clone(), key], "the host sees the same key before and after the restart");
    assert_eq!(requests_in(&second, Lane::Subagent).len(), 0, "the child is not run again");
    o2.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn p19_a_failed_try_before_close_counts_and_the_next_open_delivers() {
    let path = tmp_db();
    let first = Arc::new(FakeHost::new(|req| {
        Box::pin(async move {
            match req.options.lane {
                Lane::Announce => Err("requester offline".to_owned()),
                _ => Ok(json!({"reply": "child says hi"})),
            }
        })
    }));
    let config = json!({"session": {"outbox": {"backoffMs": 800}}});
    let o1 = open_at(&path, config.clone(), first.clone()).await;
    let run_id = str_of(&spawn(&o1, json!({"task": "t"}), json!({"agentSessionKey": "main"})).await, "runId");
    until("one failed try", || {
        o1.engine().store().read(|db| db.outbox_items()).unwrap().first().is_some_and(|i| i.attempts == 1)
    })
    .await;
    o1.close().await;
    let o2 = open_at(&path, config, replying_host()).await;
    until("announced and cleaned up by the next open", || {
        record(&o2, &run_id).is_some_and(|r| r.announce.status == "delivered" && r.cleanup_completed_at.is_some())
    })
    .await;
    assert_eq!(record(&o2, &run_id).unwrap().announce.attempts, 2);
    o2.close().await;
}

fn imported(run_id: &str, ended: Option<i64>, status: &str) -> SubagentRun {
    SubagentRun {
        run_id: run_id.into(),
        child_session_key: format!("agent:main:subagent:{run_id}"),
        requester_session_key: "agent:main:main".into(),
        requester_display_key: "main".into(),
        requester_origin: Some(json!({"channel": "whatsapp", "accountId": "acct-main"})),
        task: format!("task {run_id}"),
        label: None,
        cleanup: "keep".into(),
        created_at: 1_000,
        started_at: Some(1_000),
        ended_at: ended,
        outcome: ended.map(|_| RunOutcome { status: "ok".into(), error: None }),
        announce: AnnounceState { status: status.into(), attempts: 0, idempotency_key: format!("key-{run_id}") },
        // the reference's registration-based archive time, long past
        archive_at_ms: Some(2_000),
        cleanup_completed_at: (status != "pending").then_some(3_000),
        pause_reason: None,
        task_run_id: None,
        run_timeout_seconds: None,
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn p17_imported_records_in_flight_ended_and_settled_are_each_resumed_correctly() {
    let path = tmp_db();
    {
        let store = crate::store::Store::open(&path).unwrap();
        store
            .write(|db| {
                db.put_subagent_run(&imported("inflight", None, "pending"))?;
                db.put_subagent_run(&imported("ended", Some(5_000), "pending"))?;
                db.put_subagent_run(&imported("settled", Some(5_000), "delivered"))?;
                // a run of a process that was killed (its pid is gone) is still marked running
                db.put_subagent_run(&imported("killed", None, "pending"))?;
                let run = crate::store::runs::RunRecord {
                    run_id: "killed".into(),
                    session_key: "agent:main:subagent:killed".into(),
                    lane: "subagent".into(),
                    chain_id: Some("c".into()),
                    status: "running".into(),
                    started_at: Some(1_000),
                    ended_at: None,
                    error: None,
                };
                db.insert_run(&run, "4294967295:dead")
            })
            .unwrap();
        store.close();
    }
    let host = replying_host();
    let o =
        open_at(&path, json!({"agents": {"defaults": {"subagents": {"archiveAfterMinutes": 0}}}}), host.clone()).await;
    until("the unannounced records announced", || ["inflight", "ended", "killed"].iter().all(|id| announced(&o, id)))
        .await;
    let killed = record(&o, "killed").unwrap();
    assert_eq!(killed.outcome, Some(RunOutcome { status: "error".into(), error: Some(INTERRUPTED.into()) }));
    let inflight = record(&o, "inflight").unwrap();
    assert_eq!(inflight.outcome, Some(RunOutcome { status: "error".into(), error: Some(INTERRUPTED.into()) }));
    assert_eq!(record(&o, "ended").unwrap().outcome, Some(RunOutcome { status: "ok".into(), error: None }));
    let msgs: Vec<String> = requests_in(&host, Lane::Announce).into_iter().map(|r| r.message).collect();
    assert_eq!(msgs.len(), 3, "the settled record is not announced again: {msgs:?}");
    assert!(msgs.iter().any(|m| m.starts_with("A background task \"task ended\" just completed successfully.")));
    // the settled record's archive time had come: archived; the others lost the
    // registration-based time (archiving is off here, so they keep their records)
    until("the settled record is archived", || record(&o, "settled").is_none()).await;
    assert_eq!(record(&o, "ended").unwrap().archive_at_ms, None);
    assert_eq!(record(&o, "inflight").unwrap().archive_at_ms, None);
    o.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn list_filters_by_the_canonical_requester_in_created_order() {
    let o = open(json!({}), replying_host()).await;
    let a = str_of(&spawn(&o, json!({"task": "a"}), json!({"agentSessionKey": "main"})).await, "runId");
    let b = str_of(&spawn(&o, json!({"task": "b"}), json!({"agentSessionKey": "agent:main:other"})).await, "runId");
    let c = str_of(&spawn(&o, json!({"task": "c"}), json!({"agentSessionKey": "agent:main:main"})).await, "runId");
    let ids = |v: Vec<Value>| v.iter().map(|r| str_of(r, "runId")).collect::<Vec<_>>();
    assert_eq!(ids(list(&o, Some("main")).unwrap()), [a.clone(), c.clone()]);
    assert_eq!(ids(list(&o, None).unwrap()).len(), 3);
    assert_eq!(ids(list(&o, Some("other")).unwrap()), [b]);
    let first = &list(&o, Some("main")).unwrap()[0];
    assert_eq!(first["requesterSessionKey"], "agent:main:main");
    assert!(first["announce"]["idempotencyKey"].is_string());
    o.close().await;
}

// ---- settling an announce another store already settled ------------------------------------

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_settled_announce_settled_again_by_another_store_emits_subagent_announced_once() {
    let path = tmp_db();
    let host = replying_host();
    let a = open_at(&path, json!({}), host.clone()).await;
    let out =
        spawn(&a, json!({"task": "count", "cleanup": "keep"}), json!({"agentSessionKey": "agent:main:main"})).await;
    let run_id = str_of(&out, "runId");
    until("the announce is delivered", || announced(&a, &run_id)).await;
    let count = |h: &FakeHost| h.event_kinds().iter().filter(|k| **k == "subagent.announced").count();
    until("the announce is reported", || count(&host) == 1).await;
    // a second store on the same file (another process, as far as the record knows) settles it
    // again, as its open-time resume does when it read the record just before the first settled
    let other = replying_host();
    let b = open_at(&path, json!({}), other.clone()).await;
    super::cleanup::settle(&b, &run_id, "delivered", 1).await;
    super::cleanup::settle(&a, &run_id, "delivered", 1).await;
    assert_eq!((count(&host), count(&other)), (1, 0), "only the store that moved it from pending reports it");
    assert!(announced(&a, &run_id));
}

/// A host whose child runs wait until the gate opens; every other run answers `ok`.
fn gated_children(gate: tokio::sync::watch::Receiver<bool>) -> Arc<FakeHost> {
    Arc::new(FakeHost::new(move |req: AgentRunRequest| {
        let mut gate = gate.clone();
        Box::pin(async move {
            if req.options.lane == Lane::Subagent {
                let _ = gate.wait_for(|open| *open).await;
            }
            Ok(json!({"reply": "ok"}))
        })
    }))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_store_opening_leaves_a_child_a_live_store_just_ended_to_that_store() {
    a_store_opening_leaves_a_child_a_live_store_just_ended_to_that_store_at(&tmp_db()).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_store_opening_leaves_a_child_a_live_store_just_ended_to_that_store_on_postgres() {
    a_store_opening_leaves_a_child_a_live_store_just_ended_to_that_store_at(&testdb::fresh_url()).await
}

async fn a_store_opening_leaves_a_child_a_live_store_just_ended_to_that_store_at(db: &str) {
    let (gate, rx) = tokio::sync::watch::channel(false);
    let host = gated_children(rx);
    let a = open_at(db, json!({}), host.clone()).await;
    let out =
        spawn(&a, json!({"task": "count", "cleanup": "keep"}), json!({"agentSessionKey": "agent:main:main"})).await;
    let run_id = str_of(&out, "runId");
    // the moment between the live store's two writes: its run is recorded as ended, its
    // record not yet
    let ended = a.engine().store().write(|db| db.finish_run(&run_id, "ok", crate::entry::now_ms(), None)).unwrap();
    assert!(ended);

    // another store (another gateway on the database) opens then: the child is not its business
    let other = replying_host();
    let b = open_at(db, json!({}), other.clone()).await;
    assert_eq!(record(&b, &run_id).and_then(|r| r.ended_at), None, "the opening store ended the record itself");

    // the live store's completion wait ends it and it is announced once
    gate.send(true).unwrap();
    until("the announce is delivered", || announced(&a, &run_id)).await;
    let announces = requests_in(&host, Lane::Announce).len() + requests_in(&other, Lane::Announce).len();
    assert_eq!(announces, 1);
    b.close().await;
    a.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_wait_for_another_stores_run_sees_its_end_soon_after_it_ends() {
    a_wait_for_another_stores_run_sees_its_end_soon_after_it_ends_at(&tmp_db()).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_wait_for_another_stores_run_sees_its_end_soon_after_it_ends_on_postgres() {
    a_wait_for_another_stores_run_sees_its_end_soon_after_it_ends_at(&testdb::fresh_url()).await
}

/// An announce queued behind its requester's active run waits for that run to end; when the run
/// is another store's (another gateway's, or a killed one's that the takeover ends), the wait
/// used to sleep its whole 60 s slice before reading the store again.
async fn a_wait_for_another_stores_run_sees_its_end_soon_after_it_ends_at(db: &str) {
    let (gate, rx) = tokio::sync::watch::channel(false);
    let a = open_at(db, json!({}), gated_host(rx)).await;
    let b = open_at(db, json!({}), replying_host()).await;
    let run = busy_run(&a, "agent:main:main");
    let (runs, engine, id) = (b.runs().clone(), b.engine().clone(), run.clone());
    let waiting = tokio::spawn(async move { runs.wait(&engine, &id, WAIT_SLICE_MS).await });
    tokio::time::sleep(Duration::from_millis(100)).await;
    gate.send(true).unwrap();
    until("the other store's wait has the run's end", || waiting.is_finished()).await;
    let snap = waiting.await.unwrap().unwrap();
    assert_eq!((snap.run_id.as_str(), snap.status), (run.as_str(), crate::orchestrate::runs::RunStatus::Ok));
    b.close().await;
    a.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_completion_whose_write_failed_is_recorded_once_the_store_answers_again() {
    let (gate, rx) = tokio::sync::watch::channel(false);
    let host = gated_children(rx);
    let o = open_at(&tmp_db(), json!({}), host.clone()).await;
    let out =
        spawn(&o, json!({"task": "count", "cleanup": "keep"}), json!({"agentSessionKey": "agent:main:main"})).await;
    let run_id = str_of(&out, "runId");
    // every write fails while the child ends: its run's end, then its record's
    o.engine().store().inject_fault(Some(crate::store::Fault::ReadOnly)).unwrap();
    gate.send(true).unwrap();
    let failed =
        || host.events().iter().filter(|e| e.kind == "store.error" && e.run_id.as_deref() == Some(&run_id)).count();
    until("the completion's write failed", || failed() >= 2).await;
    o.engine().store().inject_fault(None).unwrap();
    // no other store will record it while this one lives: it tries again itself
    until("the child is announced", || announced(&o, &run_id)).await;
    assert_eq!(requests_in(&host, Lane::Announce).len(), 1);
    o.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_run_whose_end_could_not_be_written_is_recorded_once_the_store_answers_again() {
    let (gate, rx) = tokio::sync::watch::channel(false);
    let host = gated_host(rx);
    let o = open_at(&tmp_db(), json!({}), host.clone()).await;
    let run = busy_run(&o, "agent:main:main");
    until("the run started", || !host.requests().is_empty()).await;
    o.engine().store().inject_fault(Some(crate::store::Fault::ReadOnly)).unwrap();
    gate.send(true).unwrap();
    let failed = || host.events().iter().any(|e| e.kind == "store.error" && e.run_id.as_deref() == Some(&run));
    until("the run's end could not be written", failed).await;
    o.engine().store().inject_fault(None).unwrap();
    // left `running`, it would hold the session (announces queue behind it) until the close
    let ended = || o.engine().store().read(|db| db.run(&run)).unwrap().is_some_and(|r| r.status != "running");
    until("the run's end is recorded", ended).await;
    o.close().await;
}
