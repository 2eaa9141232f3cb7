//! A cancel or a requester's deletion stops the whole tree under the stopped child (2026.9).

use super::*;
use crate::host::testing::FakeHost;
use crate::host::Lane;
use crate::orchestrate::subagents::testkit::{record, requests_in, spawn, str_of, tmp_db, until};
use crate::orchestrate::tasks::testkit9::open9_at as open_at;
use crate::orchestrate::tasks::{Cancel, CANCELLED};
use crate::store::pg::testdb;
use serde_json::{json, Value};
use tokio::sync::watch;

const MAIN: &str = "agent:main:main";

fn ctx(key: &str) -> Value {
    json!({"agentSessionKey": key})
}

/// A host whose child runs wait: those whose task says `race` for the second gate, those that
/// say `quick` not at all, every other one for the first gate. Other runs answer `ok`.
fn gated_host() -> (Arc<FakeHost>, watch::Sender<bool>, watch::Sender<bool>) {
    let (tx, rx) = watch::channel(false);
    let (tx2, rx2) = watch::channel(false);
    let host = Arc::new(FakeHost::new(move |req| {
        let (mut gate, mut race) = (rx.clone(), rx2.clone());
        Box::pin(async move {
            if req.options.lane == Lane::Subagent {
                if req.message.contains("race") {
                    let _ = race.wait_for(|open| *open).await;
                } else if !req.message.contains("quick") {
                    let _ = gate.wait_for(|open| *open).await;
                }
            }
            Ok(json!({"reply": "done"}))
        })
    }));
    (host, tx, tx2)
}

async fn subagents(o: &Arc<Orchestrator>, params: Value, caller: &str) -> Value {
    o.tool(crate::tools::Tool::Subagents, params, ctx(caller), false).await.unwrap()
}

/// Spawns `task` from `caller`: (child session key, run id).
async fn child(o: &Arc<Orchestrator>, caller: &str, task: &str) -> (String, String) {
    let out = spawn(o, json!({"task": task}), ctx(caller)).await;
    assert_eq!(out["status"], "accepted", "{out}");
    (str_of(&out, "childSessionKey"), str_of(&out, "runId"))
}

async fn task_id(o: &Arc<Orchestrator>, owner: &str, run: &str) -> String {
    subagents(o, json!({}), owner).await;
    o.engine().store().read(|db| db.task_run_by_run_id(run)).unwrap().unwrap().task_id
}

fn task(o: &Orchestrator, run: &str) -> crate::store::tasks::TaskRow {
    o.engine().store().read(|db| db.task_run_by_run_id(run)).unwrap().unwrap()
}

/// The write of a cancel of task `id` (child run `run`), made now, as the tool makes it.
fn cancel_write(o: &Orchestrator, id: &str, run: &str) -> Cancel {
    let now = crate::entry::now_ms();
    o.engine()
        .store()
        .write(|db| crate::orchestrate::tasks::cancel_in(db, id, run, now, &|k: &str| k.to_owned()))
        .unwrap()
}

fn run_ids(stopped: &[Stopped]) -> Vec<&str> {
    stopped.iter().map(|(r, _)| r.run_id.as_str()).collect()
}

fn assert_killed(o: &Orchestrator, run: &str) {
    let rec = record(o, run).unwrap();
    assert_eq!(rec.outcome, Some(RunOutcome { status: "error".into(), error: Some(KILLED.into()) }), "{run}");
    assert_eq!(rec.announce.status, "skipped", "{run}");
    assert_eq!(rec.pause_reason, None, "{run}");
    let t = task(o, run);
    assert_eq!((t.status.as_str(), t.error.as_deref()), ("cancelled", Some(KILLED_TASK)), "{run}");
}

fn aborted(host: &FakeHost) -> Vec<String> {
    host.aborts.lock().unwrap().iter().map(|(run, _)| run.clone()).collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cancel_stops_the_childs_whole_tree_and_nothing_wakes_after_a_reopen() {
    a_cancel_stops_the_childs_whole_tree_at(&tmp_db()).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cancel_stops_the_childs_whole_tree_and_nothing_wakes_after_a_reopen_on_postgres() {
    a_cancel_stops_the_childs_whole_tree_at(&testdb::fresh_url()).await
}

async fn a_cancel_stops_the_childs_whole_tree_at(db: &str) {
    let (host, gate, _race) = gated_host();
    let o = open_at(db, json!({}), host.clone()).await;
    // main → a → (b live, with c live under it; q finished, its completion on its way to a)
    let (a, a_run) = child(&o, MAIN, "orchestrate").await;
    let (b, b_run) = child(&o, &a, "bravo-task").await;
    let (_, c_run) = child(&o, &b, "charlie-task").await;
    let (_, q_run) = child(&o, &a, "quick look").await;
    until("q ended", || record(&o, &q_run).is_some_and(|r| r.ended_at.is_some())).await;
    // b waits in its own yield for c
    let y = o.tool(crate::tools::Tool::SessionsYield, json!({"message": "go on"}), ctx(&b), false).await.unwrap();
    assert_eq!(y["status"], "yielded", "{y}");

    let id = task_id(&o, MAIN, &a_run).await;
    let out = subagents(&o, json!({"action": "cancel", "taskId": id}), MAIN).await;
    assert_eq!(out, json!({"status": "cancelled", "taskId": id, "found": true, "cancelled": true}));
    let rec = record(&o, &a_run).unwrap();
    // as 2026.9: `killed` on the run, the operator's words on the task
    assert_eq!(rec.outcome.and_then(|x| x.error).as_deref(), Some(crate::orchestrate::subagents::cascade::KILLED));
    assert_killed(&o, &b_run);
    assert_killed(&o, &c_run);
    let q = record(&o, &q_run).unwrap();
    assert_eq!(q.outcome.unwrap().status, "ok", "a finished descendant keeps its end");
    assert_ne!(q.announce.status, "skipped", "and its completion");
    until("the host was asked to stop all three", || aborted(&host).len() == 3).await;
    let mut stopped = aborted(&host);
    stopped.sort();
    let mut want = vec![a_run.clone(), b_run.clone(), c_run.clone()];
    want.sort();
    assert_eq!(stopped, want);
    assert!(o.engine().store().read(|db| db.open_yields_of(&b)).unwrap().is_empty(), "b's yield is closed");
    let cascaded: Vec<_> = host
        .events()
        .into_iter()
        .filter(|e| e.kind == "subagent.cancelled" && e.details.get("cascadeOf") == Some(&json!(a_run)))
        .filter_map(|e| e.run_id)
        .collect();
    assert_eq!(cascaded.len(), 2);
    assert!(cascaded.contains(&b_run) && cascaded.contains(&c_run));
    // the stopped turns return late: nothing is announced, nothing resumed
    gate.send(true).unwrap();
    tokio::time::sleep(std::time::Duration::from_millis(200)).await;
    let announced: Vec<String> = requests_in(&host, Lane::Announce).into_iter().map(|r| r.message).collect();
    assert!(announced.iter().all(|m| !m.contains("bravo-task") && !m.contains("charlie-task")), "{announced:?}");
    assert!(!host.requests().iter().any(|r| r.message.contains("go on")), "b is never woken");
    // q's completion still reaches a's session (2026.9 discards no finished descendant's)
    until("q delivered", || record(&o, &q_run).is_some_and(|r| r.announce.status == "delivered")).await;
    let listed = subagents(&o, json!({}), MAIN).await;
    let c_task = task(&o, &c_run).task_id;
    let shown = listed["tasks"].as_array().unwrap().iter().find(|t| t["taskId"] == c_task.as_str()).unwrap().clone();
    assert_eq!((shown["status"].as_str(), shown["error"].as_str()), (Some("cancelled"), Some(KILLED_TASK)));
    let from_b = subagents(&o, json!({}), &b).await;
    assert_eq!(from_b["recent"][0]["status"], "killed", "{from_b}");
    o.close().await;

    let host2 = Arc::new(FakeHost::replying("ok"));
    let o2 = open_at(db, json!({}), host2.clone()).await;
    tokio::time::sleep(std::time::Duration::from_millis(200)).await;
    let again: Vec<(String, String)> = host2.requests().into_iter().map(|r| (r.session_key, r.message)).collect();
    assert!(again.is_empty(), "nothing announced or resumed after a reopen: {again:?}");
    assert_killed(&o2, &b_run);
    assert_killed(&o2, &c_run);
    assert_eq!(
        subagents(&o2, json!({"action": "cancel", "taskId": c_task}), MAIN).await["reason"],
        "Task is already terminal."
    );
    o2.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn deleting_the_requester_stops_its_childrens_trees() {
    deleting_the_requester_stops_its_childrens_trees_at(&tmp_db()).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn deleting_the_requester_stops_its_childrens_trees_on_postgres() {
    deleting_the_requester_stops_its_childrens_trees_at(&testdb::fresh_url()).await
}

async fn deleting_the_requester_stops_its_childrens_trees_at(db: &str) {
    let (host, gate, _race) = gated_host();
    let o = open_at(db, json!({}), host.clone()).await;
    let work = "agent:main:work";
    o.engine().upsert_session(&json!(work), &json!({})).unwrap();
    let (a, a_run) = child(&o, work, "orchestrate").await;
    let (b, b_run) = child(&o, &a, "work").await;
    let (_, c_run) = child(&o, &b, "dig").await;
    let (_, other) = child(&o, MAIN, "unrelated").await;
    // e ended before the deletion, its child f still runs
    let (e, e_run) = child(&o, work, "quick end").await;
    until("e ended", || record(&o, &e_run).is_some_and(|r| r.ended_at.is_some())).await;
    let (_, f_run) = child(&o, &e, "foxtrot-task").await;
    let out = o.delete_session(json!(work), json!({})).await.unwrap();
    assert_eq!(out["deleted"], true);
    let rec = record(&o, &a_run).unwrap();
    assert_eq!(rec.outcome.and_then(|x| x.error).as_deref(), Some(REQUESTER_DELETED));
    assert_killed(&o, &b_run);
    assert_killed(&o, &c_run);
    assert_killed(&o, &f_run);
    assert_eq!(record(&o, &e_run).unwrap().outcome.unwrap().status, "ok", "e keeps its end");
    // the deleted requester's child a too, as 2026.9 aborts every run it stops
    until("the host was asked to stop a, b, c and f", || aborted(&host).len() == 4).await;
    let mut stopped = aborted(&host);
    stopped.sort();
    let mut expected = vec![a_run.clone(), b_run.clone(), c_run.clone(), f_run.clone()];
    expected.sort();
    assert_eq!(stopped, expected);
    let reasons: Vec<Value> = host
        .events()
        .into_iter()
        .filter(|e| e.kind == "subagent.cancelled")
        .map(|e| e.details.get("reason").cloned().unwrap_or_default())
        .collect();
    assert_eq!(reasons, vec![json!(REQUESTER_DELETED); 3]);
    assert!(record(&o, &other).unwrap().ended_at.is_none(), "another requester's child runs on");
    gate.send(true).unwrap();
    until("the unrelated child delivered", || record(&o, &other).is_some_and(|r| r.announce.status == "delivered"))
        .await;
    let announced: Vec<String> = requests_in(&host, Lane::Announce).into_iter().map(|r| r.message).collect();
    assert!(announced.iter().any(|m| m.contains("unrelated")), "{announced:?}");
    assert!(!announced.iter().any(|m| m.contains("foxtrot-task") || m.contains("orchestrate")), "{announced:?}");
    // e's completion (e ended before the deletion) is announced by this store before it closes:
    // one still pending at the close is the next open's to deliver, rightly
    until("e's completion delivered", || record(&o, &e_run).is_some_and(|r| r.announce.status == "delivered")).await;
    let announced: Vec<String> = requests_in(&host, Lane::Announce).into_iter().map(|r| r.message).collect();
    assert_eq!(announced.iter().filter(|m| m.contains("quick end")).count(), 1, "{announced:?}");
    o.close().await;

    let host2 = Arc::new(FakeHost::replying("ok"));
    let o2 = open_at(db, json!({}), host2.clone()).await;
    tokio::time::sleep(std::time::Duration::from_millis(200)).await;
    let asked: Vec<(Lane, String, String)> =
        host2.requests().into_iter().map(|r| (r.options.lane, r.session_key, r.message)).collect();
    assert!(asked.is_empty(), "nothing announced after a reopen: {asked:?}");
    assert_killed(&o2, &c_run);
    o2.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_grandchild_that_finishes_first_keeps_its_completion() {
    a_grandchild_that_finishes_first_keeps_its_completion_at(":memory:").await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_grandchild_that_finishes_first_keeps_its_completion_on_postgres() {
    a_grandchild_that_finishes_first_keeps_its_completion_at(&testdb::fresh_url()).await
}

async fn a_grandchild_that_finishes_first_keeps_its_completion_at(db: &str) {
    let (host, _gate, race) = gated_host();
    let o = open_at(db, json!({}), host.clone()).await;
    let (a, a_run) = child(&o, MAIN, "orchestrate").await;
    let (_, early) = child(&o, &a, "race early").await;
    let (_, late) = child(&o, &a, "slow").await;
    let id = task_id(&o, MAIN, &a_run).await;
    // the early grandchild's end commits before the cancel's write
    race.send(true).unwrap();
    until("the early end is recorded", || record(&o, &early).is_some_and(|r| r.ended_at.is_some())).await;
    let stopped = cancel_write(&o, &id, &a_run);
    let Cancel::Stopped(stopped) = stopped else { panic!("the child was live: {stopped:?}") };
    assert_eq!(run_ids(&stopped), vec![late.as_str()], "only the live grandchild is stopped");
    let e = record(&o, &early).unwrap();
    assert_eq!(e.outcome.unwrap().status, "ok");
    assert_ne!(e.announce.status, "skipped", "the completion that committed first stands");
    assert_killed(&o, &late);
    // the late one's run ending now finds its record ended: nothing to announce
    o.runs().abort(&late, CANCELLED);
    tokio::time::sleep(std::time::Duration::from_millis(200)).await;
    assert_eq!(record(&o, &late).unwrap().announce.status, "skipped");
    let announced: Vec<String> = requests_in(&host, Lane::Announce).into_iter().map(|r| r.message).collect();
    assert!(announced.iter().all(|m| !m.contains("slow")), "{announced:?}");
    o.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_child_that_ends_while_its_cancel_runs_keeps_its_completion_but_its_tree_stops() {
    a_child_that_ends_while_its_cancel_runs_keeps_its_completion_but_its_tree_stops_at(":memory:").await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_child_that_ends_while_its_cancel_runs_keeps_its_completion_but_its_tree_stops_on_postgres() {
    a_child_that_ends_while_its_cancel_runs_keeps_its_completion_but_its_tree_stops_at(&testdb::fresh_url()).await
}

async fn a_child_that_ends_while_its_cancel_runs_keeps_its_completion_but_its_tree_stops_at(db: &str) {
    let (host, _gate, race) = gated_host();
    let o = open_at(db, json!({}), host.clone()).await;
    let (a, a_run) = child(&o, MAIN, "race orchestrate").await;
    let (_, late) = child(&o, &a, "slow").await;
    let id = task_id(&o, MAIN, &a_run).await;
    // the child's own end commits after the tree was read, before the cancel's write
    race.send(true).unwrap();
    until("the child's end is recorded", || record(&o, &a_run).is_some_and(|r| r.ended_at.is_some())).await;
    let done = cancel_write(&o, &id, &a_run);
    let Cancel::RunEnded(stopped) = done else { panic!("the child had ended: {done:?}") };
    assert_eq!(run_ids(&stopped), vec![late.as_str()], "its live grandchild is stopped all the same, as 2026.9");
    assert_killed(&o, &late);
    let rec = record(&o, &a_run).unwrap();
    assert_eq!(rec.outcome.unwrap().status, "ok", "the completion that committed first stands");
    assert_ne!(rec.announce.status, "skipped");
    assert_ne!(task(&o, &a_run).status, "cancelled");
    o.close().await;
}
