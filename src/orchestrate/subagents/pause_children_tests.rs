//! A sub-agent that yields for its own children (2026.9): paused when its run ends, woken when
//! they have delivered by a turn that adopts its task, and announced once with that turn's
//! reply; also when they deliver before its run's end is recorded, across a close and reopen
//! and a takeover, cancelled while paused, timed out while yielded, and resumed by hand.

use super::*;
use std::sync::atomic::{AtomicI64, Ordering};
use std::sync::{OnceLock, Weak};
use std::time::Duration;

use serde_json::{json, Value};
use tokio::sync::watch;

use crate::host::testing::FakeHost;
use crate::host::{AgentRunRequest, Lane};
use crate::orchestrate::subagents::testkit::{requests_in, spawn, str_of, until};
use crate::orchestrate::tasks::testkit9::open9_at;
use crate::orchestrate::yields::resume_text;
use crate::owner::{Clock, Here, Lease};
use crate::store::pg::testdb;
use crate::store::subagents::tests::reopenable_urls;
use crate::store::Store;
use crate::tools::Tool;

const MAIN: &str = "agent:main:main";
/// The orchestrator's private yield message.
const WAKE: &str = "merge the findings";
/// The owner's message resuming the paused orchestrator by hand.
const BY_HAND: &str = "go on without them";

fn main_ctx() -> Value {
    json!({"agentSessionKey": MAIN, "agentChannel": "whatsapp", "agentTo": "+1555"})
}

type Cell = Arc<OnceLock<Weak<Orchestrator>>>;

/// How the host behaves.
#[derive(Clone)]
struct Plan {
    /// grandchildren answer once it is open
    diggers: watch::Receiver<bool>,
    /// the orchestrator's first turn ends (after its yield) once it is open
    first_turn: watch::Receiver<bool>,
    /// the woken turn never answers (its store is about to go away)
    woken_hangs: bool,
    /// the first turn runs past this many ms after its yield (a timeout test)
    linger_ms: u64,
    /// completions steer the requester's live run (delivered while it runs)
    steers: bool,
    /// the turn resumed by hand answers once it is open
    by_hand: watch::Receiver<bool>,
}

impl Plan {
    fn open() -> Plan {
        Plan {
            diggers: watch::channel(true).1,
            first_turn: watch::channel(true).1,
            woken_hangs: false,
            linger_ms: 0,
            steers: false,
            by_hand: watch::channel(true).1,
        }
    }
}

/// A host: the orchestrator child (task `orchestrate`) spawns `dig A` and `dig B` and yields for
/// them; a grandchild answers `found`; the orchestrator's woken turn answers `combined report`,
/// its turn resumed by hand (`BY_HAND`) `resumed by hand`; every other run `ok`.
fn host_for(plan: Plan) -> (Arc<FakeHost>, Cell) {
    let cell: Cell = Arc::default();
    let c = cell.clone();
    let steers = plan.steers;
    let host = FakeHost::new(move |req| {
        let (orch, mut plan) = (c.get().and_then(Weak::upgrade), plan.clone());
        Box::pin(async move {
            if req.options.lane != Lane::Subagent {
                return Ok(json!({"reply": "ok"}));
            }
            if req.message.starts_with("dig") {
                let _ = plan.diggers.wait_for(|o| *o).await;
                return Ok(json!({"reply": "found"}));
            }
            if req.message.contains(BY_HAND) {
                let _ = plan.by_hand.wait_for(|o| *o).await;
                return Ok(json!({"reply": "resumed by hand"}));
            }
            if req.message == resume_text(WAKE) {
                if plan.woken_hangs {
                    std::future::pending::<()>().await;
                }
                return Ok(json!({"reply": "combined report"}));
            }
            let orch = orch.ok_or("the store is gone")?;
            let ctx = json!({"agentSessionKey": req.session_key, "runId": req.run_id});
            for task in ["dig A", "dig B"] {
                let out = orch.tool(Tool::SessionsSpawn, json!({"task": task}), ctx.clone(), false).await;
                let out = out.map_err(|e| e.message().to_owned())?;
                assert_eq!(out["status"], "accepted", "{out}");
            }
            let out = orch.tool(Tool::SessionsYield, json!({"message": WAKE}), ctx, false).await;
            assert_eq!(out.map_err(|e| e.message().to_owned())?["status"], "yielded");
            let _ = plan.first_turn.wait_for(|o| *o).await;
            tokio::time::sleep(Duration::from_millis(plan.linger_ms)).await;
            Ok(json!({"reply": "waiting for my children"}))
        })
    });
    let host = if steers { host.with_steer(|_, _| Box::pin(async { Ok(true) })) } else { host };
    (Arc::new(host), cell)
}

async fn open_with(db: &str, plan: Plan) -> (Arc<Orchestrator>, Arc<FakeHost>) {
    let config = if plan.steers { json!({"messages": {"queue": {"mode": "steer"}}}) } else { json!({}) };
    let (host, cell) = host_for(plan);
    let o = open9_at(db, config, host.clone()).await;
    let _ = cell.set(Arc::downgrade(&o));
    (o, host)
}

/// Spawns the orchestrator child: (child key, its first run id).
async fn spawn_orchestrator(o: &Arc<Orchestrator>) -> (String, String) {
    let out = spawn(o, json!({"task": "orchestrate", "label": "lead", "runTimeoutSeconds": 77}), main_ctx()).await;
    (str_of(&out, "childSessionKey"), str_of(&out, "runId"))
}

fn paused(o: &Orchestrator, child: &str) -> Option<SubagentRun> {
    o.engine().store().read(|db| pause::paused_of(db, child)).unwrap()
}

fn completions(host: &FakeHost) -> Vec<AgentRunRequest> {
    requests_in(host, Lane::Announce).into_iter().filter(|r| r.session_key == MAIN).collect()
}

fn woken(host: &FakeHost, child: &str) -> Vec<AgentRunRequest> {
    host.requests().into_iter().filter(|r| r.session_key == child && r.message == resume_text(WAKE)).collect()
}

async fn subagents(o: &Arc<Orchestrator>) -> Value {
    o.tool(Tool::Subagents, json!({}), main_ctx(), false).await.unwrap()
}

/// The one completion reaches the requester with the woken turn's reply, and the task that
/// `task_id` named is completed under the woken run; nothing more arrives.
async fn completes_once(o: &Arc<Orchestrator>, host: &FakeHost, child: &str, first_run: &str) {
    until("the completion reaches the requester", || !completions(host).is_empty()).await;
    let handoff = &completions(host)[0];
    assert!(handoff.message.contains("combined report"), "{}", handoff.message);
    let turns = woken(host, child);
    assert_eq!(turns.len(), 1, "woken once");
    let rec = o.engine().store().read(|db| db.subagent_run(&turns[0].run_id)).unwrap().unwrap();
    assert_eq!(rec.task_run_id.as_deref(), Some(first_run), "the woken run adopted the task");
    assert!(o.engine().store().read(|db| db.subagent_run(first_run)).unwrap().is_none());
    until("the task completes", || {
        let t = o.engine().store().read(|db| db.task_run_by_run_id(&turns[0].run_id)).unwrap();
        t.is_some_and(|t| t.status == "succeeded")
    })
    .await;
    tokio::time::sleep(Duration::from_millis(200)).await;
    assert_eq!(completions(host).len(), 1, "announced exactly once");
    assert_eq!(woken(host, child).len(), 1, "woken once");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_child_yielding_for_its_children_is_paused_then_woken_and_completes_once() {
    paused_then_woken_at(":memory:").await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_child_yielding_for_its_children_is_paused_then_woken_and_completes_once_on_postgres() {
    paused_then_woken_at(&testdb::fresh_url()).await
}

async fn paused_then_woken_at(db: &str) {
    let (diggers, gate) = watch::channel(false);
    let (o, host) = open_with(db, Plan { diggers: gate, ..Plan::open() }).await;
    let (child, first_run) = spawn_orchestrator(&o).await;
    until("the orchestrator is paused", || paused(&o, &child).is_some()).await;
    let rec = paused(&o, &child).unwrap();
    assert_eq!((rec.run_id.as_str(), rec.run_timeout_seconds), (first_run.as_str(), Some(77)));
    // held: its task runs on, waiting on its two children, as 2026.9's `subagents` shows it
    let list = subagents(&o).await;
    let task = list["tasks"].as_array().unwrap().iter().find(|t| t["label"] == "lead").unwrap().clone();
    assert_eq!((task["status"].as_str(), task["execution"]["state"].as_str()), (Some("running"), Some("waiting")));
    assert_eq!(
        (task["execution"]["wait"]["kind"].as_str(), task["execution"]["wait"]["pendingCount"].as_u64()),
        (Some("children"), Some(2))
    );
    assert!(list["text"].as_str().unwrap().contains(") waiting on 2 children - orchestrate"), "{list}");
    tokio::time::sleep(Duration::from_millis(100)).await;
    assert!(completions(&host).is_empty(), "a paused child is not announced");
    assert!(woken(&host, &child).is_empty());

    diggers.send(true).unwrap();
    completes_once(&o, &host, &child, &first_run).await;
    // the woken turn is the child's: its lane, its requester, its own run timeout
    let w = &woken(&host, &child)[0];
    assert_eq!((w.options.lane, w.options.timeout_ms), (Lane::Subagent, 77_000));
    assert_eq!(w.options.spawned_by.as_deref(), Some(MAIN));
    let task_id = str_of(&task, "taskId");
    let list = subagents(&o).await;
    let done = list["tasks"].as_array().unwrap().iter().find(|t| t["taskId"] == task_id.as_str()).unwrap();
    assert_eq!(done["status"], "completed", "{list}");
    assert!(host.events().iter().any(|e| e.kind == "subagent.resumed"));
    o.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn children_that_finish_before_the_childs_run_ends_wake_it_once_after_it() {
    children_first_at(":memory:", false).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn children_that_finish_before_the_childs_run_ends_wake_it_once_after_it_on_postgres() {
    children_first_at(&testdb::fresh_url(), false).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn children_delivered_before_the_childs_run_ends_wake_it_once_after_it() {
    children_first_at(":memory:", true).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn children_delivered_before_the_childs_run_ends_wake_it_once_after_it_on_postgres() {
    children_first_at(&testdb::fresh_url(), true).await
}

/// The grandchildren end while the child's first run goes on, after its yield; `steers`: their
/// completions are delivered then too (steered into that run), else they are queued behind it
/// and race with the recording of its end.
async fn children_first_at(db: &str, steers: bool) {
    let (first_turn, gate) = watch::channel(false);
    let (diggers, dig_gate) = watch::channel(false);
    let (o, host) = open_with(db, Plan { first_turn: gate, diggers: dig_gate, steers, ..Plan::open() }).await;
    let (child, first_run) = spawn_orchestrator(&o).await;
    // held until the yield is recorded: a grandchild that ended before it (a slow yield call,
    // as under a loaded CI) would leave nothing to look at yet
    until("the orchestrator has yielded", || {
        !o.engine().store().read(|db| db.open_yields_of(&child)).unwrap().is_empty()
    })
    .await;
    diggers.send(true).unwrap();
    until("the grandchildren have ended", || {
        let recs = o.engine().store().read(|db| db.subagent_runs(Some(&child))).unwrap();
        recs.len() == 2 && recs.iter().all(|r| r.ended_at.is_some())
    })
    .await;
    if steers {
        until("the grandchildren have delivered", || {
            o.engine().store().read(|db| db.undelivered_children(&child)).unwrap().is_empty()
        })
        .await;
    }
    let y = o.engine().store().read(|db| db.open_yields_of(&child)).unwrap();
    assert_eq!((y.len(), y[0].status.as_str()), (1, "waiting"), "the yield waits for the run to end");
    crate::orchestrate::yields::check(&o, &child).await;
    tokio::time::sleep(Duration::from_millis(100)).await;
    assert!(woken(&host, &child).is_empty(), "nothing is woken beside the live run");
    assert!(paused(&o, &child).is_none());
    first_turn.send(true).unwrap();
    completes_once(&o, &host, &child, &first_run).await;
    o.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_paused_orchestrator_survives_a_close_and_the_next_open_wakes_it_once() {
    for db in reopenable_urls() {
        let (diggers, gate) = watch::channel(false);
        let (o, host) = open_with(&db, Plan { diggers: gate, ..Plan::open() }).await;
        let (child, first_run) = spawn_orchestrator(&o).await;
        until("the orchestrator is paused", || paused(&o, &child).is_some()).await;
        o.close().await;
        drop(o);
        assert!(completions(&host).is_empty());
        drop(diggers);

        // the next open: the grandchildren cut short are delivered as such, the orchestrator
        // is still paused until then, then woken once and announced once
        let (o, host) = open_with(&db, Plan::open()).await;
        completes_once(&o, &host, &child, &first_run).await;
        o.close().await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_paused_orchestrator_cancelled_is_never_woken_nor_announced() {
    let (diggers, gate) = watch::channel(false);
    let (o, host) = open_with(":memory:", Plan { diggers: gate, ..Plan::open() }).await;
    let (child, _) = spawn_orchestrator(&o).await;
    until("the orchestrator is paused", || paused(&o, &child).is_some()).await;
    let list = subagents(&o).await;
    let task = list["tasks"].as_array().unwrap().iter().find(|t| t["label"] == "lead").unwrap().clone();
    let out = o.tool(Tool::Subagents, json!({"action": "cancel", "taskId": task["taskId"]}), main_ctx(), false).await;
    assert_eq!(out.unwrap()["status"], "cancelled");
    assert!(paused(&o, &child).is_none());
    assert!(o.engine().store().read(|db| db.open_yields_of(&child)).unwrap().is_empty(), "its yield is closed");
    diggers.send(true).unwrap();
    until("the grandchildren have delivered", || {
        o.engine().store().read(|db| db.undelivered_children(&child)).unwrap().is_empty()
    })
    .await;
    tokio::time::sleep(Duration::from_millis(200)).await;
    assert!(woken(&host, &child).is_empty(), "a cancelled child is not woken");
    assert!(completions(&host).is_empty(), "nor announced");
    o.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_orchestrator_whose_run_times_out_in_its_yield_is_announced_as_timed_out_not_paused() {
    let plan = Plan { linger_ms: 3_000, ..Plan::open() };
    let (o, host) = open_with(":memory:", plan).await;
    let out = spawn(&o, json!({"task": "orchestrate", "runTimeoutSeconds": 1}), main_ctx()).await;
    let (child, run) = (str_of(&out, "childSessionKey"), str_of(&out, "runId"));
    until("the completion", || !completions(&host).is_empty()).await;
    let rec = o.engine().store().read(|db| db.subagent_run(&run)).unwrap().unwrap();
    assert_eq!((rec.pause_reason, rec.outcome.map(|o| o.status)), (None, Some("timeout".to_owned())));
    assert!(paused(&o, &child).is_none());
    tokio::time::sleep(Duration::from_millis(200)).await;
    assert_eq!(completions(&host).len(), 1);
    o.close().await;
}

/// A lease on a clock that stands still unless moved, for a process that is alive.
fn lease_on(host: &str, at: &Arc<AtomicI64>) -> Lease {
    let c = at.clone();
    let clock: Clock = Arc::new(move || c.load(Ordering::SeqCst));
    Lease::new(Here { host_id: host.into(), host_name: host.into(), pid: 1, pid_running: |_| true }, clock)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_woken_turn_a_gone_owner_cut_short_is_woken_again_by_the_store_that_takes_over() {
    let path = crate::orchestrate::subagents::testkit::tmp_db();
    let at = Arc::new(AtomicI64::new(crate::entry::now_ms()));
    let cfg = crate::config::Config::from_json_for(&json!({}), crate::contract::Contract::V2026_9).unwrap();
    let open_as = |lease: Lease, plan: Plan| {
        let (host, cell) = host_for(plan);
        let engine = crate::engine::Engine::new(Store::open(&path).unwrap(), cfg.clone(), None);
        let o = Orchestrator::with_lease(Arc::new(engine), host.clone(), lease);
        let _ = cell.set(Arc::downgrade(&o));
        (o, host)
    };
    let (o1, h1) = open_as(lease_on("host-a", &at), Plan { woken_hangs: true, ..Plan::open() });
    o1.start().await.unwrap();
    let (o2, h2) = open_as(lease_on("host-b", &at), Plan::open());
    o2.start().await.unwrap();
    let (child, first_run) = spawn_orchestrator(&o1).await;
    until("o1 wakes the orchestrator", || !woken(&h1, &child).is_empty()).await;
    // o1 stops without a word: o2 takes the woken run over, pauses the child again and wakes
    // it anew, under the same key; the one completion is the new turn's
    at.fetch_add(60_000, Ordering::SeqCst);
    assert!(!o2.take_over().await.unwrap().ended.is_empty());
    until("o2 wakes it again", || !woken(&h2, &child).is_empty()).await;
    assert_eq!(woken(&h2, &child)[0].idempotency_key, woken(&h1, &child)[0].idempotency_key);
    until("the completion", || !completions(&h2).is_empty() || !completions(&h1).is_empty()).await;
    let all: Vec<AgentRunRequest> = completions(&h1).into_iter().chain(completions(&h2)).collect();
    assert!(all[0].message.contains("combined report"), "{}", all[0].message);
    let rec = o2.engine().store().read(|db| db.subagent_run(&woken(&h2, &child)[0].run_id)).unwrap().unwrap();
    assert_eq!(rec.task_run_id.as_deref(), Some(first_run.as_str()));
    tokio::time::sleep(Duration::from_millis(200)).await;
    assert_eq!(completions(&h1).len() + completions(&h2).len(), 1, "announced exactly once");
    o2.close().await;
    o1.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_paused_orchestrator_stops_with_its_requester_and_is_never_woken() {
    let (diggers, gate) = watch::channel(false);
    let (o, host) = open_with(":memory:", Plan { diggers: gate, ..Plan::open() }).await;
    let work = json!({"agentSessionKey": "agent:main:work"});
    let out = spawn(&o, json!({"task": "orchestrate"}), work).await;
    let (child, run) = (str_of(&out, "childSessionKey"), str_of(&out, "runId"));
    until("the orchestrator is paused", || paused(&o, &child).is_some()).await;
    o.engine().upsert_session(&json!("agent:main:work"), &json!({})).unwrap();
    let deleted = o.delete_session(json!("agent:main:work"), json!({})).await.unwrap();
    assert_eq!(deleted["deleted"], true, "{deleted}");
    until("the paused orchestrator is stopped", || paused(&o, &child).is_none()).await;
    let rec = o.engine().store().read(|db| db.subagent_run(&run)).unwrap().unwrap();
    assert_eq!(rec.outcome.and_then(|o| o.error).as_deref(), Some(REQUESTER_DELETED));
    until("its yield is closed", || o.engine().store().read(|db| db.open_yields_of(&child)).unwrap().is_empty()).await;
    diggers.send(true).unwrap();
    until("the grandchildren have delivered", || {
        o.engine().store().read(|db| db.undelivered_children(&child)).unwrap().is_empty()
    })
    .await;
    tokio::time::sleep(Duration::from_millis(200)).await;
    assert!(woken(&host, &child).is_empty(), "a stopped child is not woken");
    assert!(requests_in(&host, Lane::Announce).iter().all(|r| r.session_key != "agent:main:work"));
    o.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_woken_turn_cut_short_by_a_close_is_woken_again_by_the_next_open_and_completes_once() {
    for db in reopenable_urls() {
        let (o, h1) = open_with(&db, Plan { woken_hangs: true, ..Plan::open() }).await;
        let (child, first_run) = spawn_orchestrator(&o).await;
        until("the orchestrator is woken", || !woken(&h1, &child).is_empty()).await;
        o.close().await;
        drop(o);

        let (o, h2) = open_with(&db, Plan::open()).await;
        completes_once(&o, &h2, &child, &first_run).await;
        assert_eq!(woken(&h2, &child)[0].idempotency_key, woken(&h1, &child)[0].idempotency_key);
        assert!(completions(&h1).is_empty());
        o.close().await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_child_resumed_by_hand_while_its_children_run_completes_with_that_turn() {
    resumed_by_hand_at(":memory:", false).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_child_resumed_by_hand_while_its_children_run_completes_with_that_turn_on_postgres() {
    resumed_by_hand_at(&testdb::fresh_url(), false).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn children_delivered_during_a_turn_resumed_by_hand_settle_its_earlier_yield() {
    resumed_by_hand_at(":memory:", true).await
}

/// As in 2026.9 the pause belongs to the run that yielded: the owner resumes the paused
/// orchestrator by hand, that turn ends without yielding, and the child completes with it, once.
/// The yield its first run made still waits for the grandchildren: their delivery after that
/// turn wakes the child's session; delivered during it (`during`, steered in), the yield is
/// settled without a wake. Nothing more reaches the requester.
async fn resumed_by_hand_at(db: &str, during: bool) {
    let (diggers, gate) = watch::channel(false);
    let (by_hand, hand_gate) = watch::channel(false);
    // delivered during the turn: their completions steer it (as `children_first_at`)
    let (o, host) = open_with(db, Plan { diggers: gate, by_hand: hand_gate, steers: during, ..Plan::open() }).await;
    let (child, first_run) = spawn_orchestrator(&o).await;
    until("the orchestrator is paused", || paused(&o, &child).is_some()).await;

    let params = json!({"sessionKey": child, "message": BY_HAND, "mode": "resume"});
    let out = o.tool(Tool::SessionsSend, params, main_ctx(), false).await.unwrap();
    assert_eq!(
        (out["status"].as_str(), out["taskRunId"].as_str()),
        (Some("accepted"), Some(first_run.as_str())),
        "{out}"
    );
    if during {
        diggers.send(true).unwrap();
        until("the grandchildren have delivered", || {
            o.engine().store().read(|db| db.undelivered_children(&child)).unwrap().is_empty()
        })
        .await;
        assert!(woken(&host, &child).is_empty(), "not woken while the turn resumed by hand runs");
    }
    by_hand.send(true).unwrap();
    until("the turn resumed by hand is announced", || !completions(&host).is_empty()).await;
    assert!(completions(&host)[0].message.contains("resumed by hand"), "{}", completions(&host)[0].message);
    assert!(paused(&o, &child).is_none(), "not paused again by its earlier run's yield");
    if during {
        // the children delivered into that turn: its earlier yield is settled without a wake
        until("the earlier yield is settled", || {
            o.engine().store().read(|db| db.open_yields_of(&child)).unwrap().is_empty()
        })
        .await;
        tokio::time::sleep(Duration::from_millis(200)).await;
        assert!(woken(&host, &child).is_empty());
        assert_eq!(completions(&host).len(), 1, "the requester is told once");
        return o.close().await;
    }

    diggers.send(true).unwrap();
    until("the grandchildren's delivery wakes the child's session", || !woken(&host, &child).is_empty()).await;
    until("the woken turn ends", || {
        let run = woken(&host, &child)[0].run_id.clone();
        o.engine().store().read(|db| db.run(&run)).unwrap().is_some_and(|r| r.status != "running")
    })
    .await;
    tokio::time::sleep(Duration::from_millis(200)).await;
    assert_eq!(completions(&host).len(), 1, "the requester is told once");
    let task = subagents(&o).await["tasks"].as_array().unwrap().iter().find(|t| t["label"] == "lead").cloned();
    assert_eq!(task.map(|t| t["status"].clone()), Some(json!("completed")));
    o.close().await;
}
