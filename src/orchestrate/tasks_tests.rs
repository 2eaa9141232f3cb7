use super::*;
use crate::host::testing::FakeHost;
use crate::host::Lane;
use crate::orchestrate::subagents::testkit::{record, requests_in, spawn, str_of, tmp_db, until};
use crate::orchestrate::tasks::testkit9::{open9 as open, open9_at as open_at};
use crate::store::pg::testdb;
use crate::store::subagents::AnnounceState;
use serde_json::json;
use tokio::sync::watch;

fn main_ctx() -> Value {
    json!({"agentSessionKey": "agent:main:main"})
}

/// A host whose child runs wait for the gate unless their task says `quick`.
fn gated_host() -> (Arc<FakeHost>, watch::Sender<bool>) {
    let (tx, rx) = watch::channel(false);
    let host = Arc::new(FakeHost::new(move |req| {
        let mut gate = rx.clone();
        Box::pin(async move {
            if req.options.lane == Lane::Subagent && !req.message.contains("quick") {
                let _ = gate.wait_for(|open| *open).await;
            }
            Ok(json!({"reply": "done"}))
        })
    }));
    (host, tx)
}

async fn tool(o: &Arc<Orchestrator>, params: Value, ctx: Value) -> Value {
    o.tool(crate::tools::Tool::Subagents, params, ctx, false).await.unwrap()
}

fn task_of_run<'a>(list: &'a Value, run_id: &str, o: &Orchestrator) -> &'a Value {
    let id = o.engine().store().read(|db| db.task_run_by_run_id(run_id)).unwrap().unwrap().task_id;
    list["tasks"].as_array().unwrap().iter().find(|t| t["taskId"] == id.as_str()).unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn list_shows_the_callers_runs_and_tasks_with_stable_ids_and_the_text() {
    list_shows_the_callers_runs_and_tasks_with_stable_ids_and_the_text_at(":memory:").await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn list_shows_the_callers_runs_and_tasks_with_stable_ids_and_the_text_on_postgres() {
    list_shows_the_callers_runs_and_tasks_with_stable_ids_and_the_text_at(&testdb::fresh_url()).await
}

async fn list_shows_the_callers_runs_and_tasks_with_stable_ids_and_the_text_at(db: &str) {
    let (host, _gate) = gated_host();
    let o = open_at(db, json!({}), host.clone()).await;
    let slow = spawn(&o, json!({"task": "index the repo", "label": "indexer"}), main_ctx()).await;
    let quick = spawn(&o, json!({"task": "quick check"}), main_ctx()).await;
    let quick_run = str_of(&quick, "runId");
    until("the quick child delivered", || {
        record(&o, &quick_run).map(|r| r.announce.status == "delivered").unwrap_or(false)
    })
    .await;
    let list = tool(&o, json!({}), main_ctx()).await;
    assert_eq!(list["status"], "ok");
    assert_eq!(list["action"], "list");
    assert_eq!(list["requesterSessionKey"], "agent:main:main");
    assert_eq!(list["callerSessionKey"], "agent:main:main");
    assert_eq!(list["callerIsSubagent"], false);
    assert_eq!((list["total"].as_u64(), list["taskTotal"].as_u64()), (Some(2), Some(2)));
    let s = task_of_run(&list, &str_of(&slow, "runId"), &o);
    assert_eq!((s["status"].as_str(), s["deliveryStatus"].as_str()), (Some("running"), Some("pending")));
    assert_eq!((s["runtime"].as_str(), s["label"].as_str()), (Some("subagent"), Some("indexer")));
    let q = task_of_run(&list, &quick_run, &o);
    assert_eq!((q["status"].as_str(), q["deliveryStatus"].as_str()), (Some("completed"), Some("delivered")));
    assert_eq!(list["active"][0]["sessionKey"], str_of(&slow, "childSessionKey").as_str());
    assert_eq!(list["active"][0]["status"], "running");
    assert_eq!(list["recent"][0]["status"], "done");
    let text = list["text"].as_str().unwrap();
    assert!(text.starts_with("active subagents:\n1. indexer (model n/a, "), "{text}");
    assert!(text.contains(") running - index the repo\n\nrecent (last 30m):\n2. quick check (model n/a, "), "{text}");
    // the ids do not change from one read to the next
    let again = tool(&o, json!({"recentMinutes": 5000}), main_ctx()).await;
    assert_eq!(again["tasks"].as_array().unwrap().len(), 2);
    for t in list["tasks"].as_array().unwrap() {
        assert!(again["tasks"].as_array().unwrap().iter().any(|a| a["taskId"] == t["taskId"]));
    }
    assert!(again["text"].as_str().unwrap().contains("recent (last 1440m):"), "recentMinutes is clamped to a day");
    o.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_parameters_are_read_as_the_gateway_reads_them() {
    let (host, _gate) = gated_host();
    let o = open(json!({}), host).await;
    let err = |v: Value| v["error"].as_str().unwrap_or_default().to_owned();
    assert_eq!(
        tool(&o, json!({"action": "kill"}), main_ctx()).await,
        json!({"status": "error", "error": "Unsupported action."})
    );
    assert_eq!(err(tool(&o, json!({"action": "wait"}), main_ctx()).await), "taskIds required");
    let many: Vec<String> = (0..33).map(|i| format!("t{i}")).collect();
    assert_eq!(
        err(tool(&o, json!({"action": "wait", "taskIds": many}), main_ctx()).await),
        "subagents wait supports at most 32 taskIds."
    );
    assert_eq!(err(tool(&o, json!({"action": "cancel"}), main_ctx()).await), "taskId required");
    assert_eq!(
        err(tool(&o, json!({"recentMinutes": 0}), main_ctx()).await),
        "recentMinutes must be a positive integer"
    );
    assert_eq!(
        err(tool(&o, json!({"action": "wait", "taskIds": ["x"], "timeoutSeconds": -1}), main_ctx()).await),
        "timeoutSeconds must be a non-negative integer"
    );
    o.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn wait_answers_completed_unavailable_or_timeout_and_a_timeout_cancels_nothing() {
    let (host, gate) = gated_host();
    let o = open(json!({}), host).await;
    let child = spawn(&o, json!({"task": "slow"}), main_ctx()).await;
    let run = str_of(&child, "runId");
    let list = tool(&o, json!({}), main_ctx()).await;
    let id = task_of_run(&list, &run, &o)["taskId"].as_str().unwrap().to_owned();

    let t = tool(&o, json!({"action": "wait", "taskIds": [id], "timeoutSeconds": 0}), main_ctx()).await;
    assert_eq!(t["reason"], "timeout");
    assert_eq!((t["completed"].clone(), t["attention"].clone()), (json!([]), json!([])));
    assert_eq!(t["tasks"][0]["status"], "running");
    assert!(record(&o, &run).unwrap().ended_at.is_none(), "a timeout cancels nothing");

    let u = tool(&o, json!({"action": "wait", "taskIds": [id, "nope"], "timeoutSeconds": 0}), main_ctx()).await;
    assert_eq!((u["reason"].as_str(), u["unavailable"].clone()), (Some("unavailable"), json!(["nope"])));

    let waiter = {
        let (o, id) = (o.clone(), id.clone());
        tokio::spawn(async move {
            tool(&o, json!({"action": "wait", "taskIds": [id], "timeoutSeconds": 30}), main_ctx()).await
        })
    };
    tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    gate.send(true).unwrap();
    let done = waiter.await.unwrap();
    assert_eq!(done["reason"], "completed");
    assert_eq!(done["completed"], json!([id]));
    assert_eq!(done["tasks"][0]["status"], "completed");
    o.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cancel_stops_the_run_records_it_cancelled_and_never_announces_it() {
    cancel_stops_the_run_records_it_cancelled_and_never_announces_it_at(":memory:").await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cancel_stops_the_run_records_it_cancelled_and_never_announces_it_on_postgres() {
    cancel_stops_the_run_records_it_cancelled_and_never_announces_it_at(&testdb::fresh_url()).await
}

async fn cancel_stops_the_run_records_it_cancelled_and_never_announces_it_at(db: &str) {
    let (host, gate) = gated_host();
    let o = open_at(db, json!({}), host.clone()).await;
    let child = spawn(&o, json!({"task": "slow"}), main_ctx()).await;
    let run = str_of(&child, "runId");
    let list = tool(&o, json!({}), main_ctx()).await;
    let id = task_of_run(&list, &run, &o)["taskId"].as_str().unwrap().to_owned();

    let other =
        tool(&o, json!({"action": "cancel", "taskId": id}), json!({"agentSessionKey": "agent:main:other"})).await;
    assert_eq!(other, json!({"status": "forbidden", "error": "Task outside session tree."}));

    let out = tool(&o, json!({"action": "cancel", "taskId": id}), main_ctx()).await;
    assert_eq!(out, json!({"status": "cancelled", "taskId": id, "found": true, "cancelled": true}));
    until("the host was asked to stop the turn", || !host.aborts.lock().unwrap().is_empty()).await;
    assert_eq!(host.aborts.lock().unwrap()[0], (run.clone(), CANCELLED.to_owned()));
    let rec = record(&o, &run).unwrap();
    // as 2026.9: `killed` on the run, the operator's words on the task
    assert_eq!(
        rec.outcome.as_ref().and_then(|x| x.error.as_deref()),
        Some(crate::orchestrate::subagents::cascade::KILLED)
    );
    assert_eq!(rec.announce.status, "skipped");
    assert!(o.host().can_run());
    until("the run ended", || {
        o.engine().store().read(|db| db.run(&run)).unwrap().map(|r| r.status != "running").unwrap_or(false)
    })
    .await;
    gate.send(true).unwrap();
    tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    assert!(requests_in(&host, Lane::Announce).is_empty(), "a cancelled task is never announced");

    let again = tool(&o, json!({"action": "cancel", "taskId": id}), main_ctx()).await;
    assert_eq!(
        again,
        json!({"status": "error", "taskId": id, "found": true, "cancelled": false, "reason": "Task is already terminal."})
    );
    let listed = tool(&o, json!({}), main_ctx()).await;
    let t = task_of_run(&listed, &run, &o);
    assert_eq!((t["status"].as_str(), t["error"].as_str()), (Some("cancelled"), Some(CANCELLED)));
    assert_eq!(listed["recent"][0]["status"], "killed");
    o.close().await;
}

/// A record of `child` run by `requester`, still running.
fn running_record(requester: &str, child: &str, run: &str) -> SubagentRun {
    SubagentRun {
        run_id: run.into(),
        child_session_key: child.into(),
        requester_session_key: requester.into(),
        requester_display_key: requester.into(),
        requester_origin: None,
        task: format!("task of {run}"),
        label: None,
        cleanup: "keep".into(),
        created_at: entry::now_ms(),
        started_at: Some(entry::now_ms()),
        ended_at: None,
        outcome: None,
        announce: AnnounceState { status: "pending".into(), attempts: 0, idempotency_key: format!("k-{run}") },
        archive_at_ms: None,
        cleanup_completed_at: None,
        pause_reason: None,
        task_run_id: None,
        run_timeout_seconds: None,
    }
}

/// A record of `child` run by `requester`, still running, registered directly.
fn put_child(o: &Orchestrator, requester: &str, child: &str, run: &str) {
    let rec = running_record(requester, child, run);
    o.engine().upsert_session(&json!(child), &json!({"spawnedBy": requester})).unwrap();
    o.engine().store().write(|db| db.put_subagent_run(&rec)).unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_leaf_may_cancel_only_its_own_children_and_an_orchestrator_its_whole_tree() {
    a_leaf_may_cancel_only_its_own_children_and_an_orchestrator_its_whole_tree_at(":memory:").await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_leaf_may_cancel_only_its_own_children_and_an_orchestrator_its_whole_tree_on_postgres() {
    a_leaf_may_cancel_only_its_own_children_and_an_orchestrator_its_whole_tree_at(&testdb::fresh_url()).await
}

async fn a_leaf_may_cancel_only_its_own_children_and_an_orchestrator_its_whole_tree_at(db: &str) {
    let (host, _gate) = gated_host();
    let o = open_at(db, json!({}), host).await;
    // main → d1 → … → d5: d5 is at the default max depth (5), a leaf
    let mut parent = "agent:main:main".to_owned();
    for i in 1..=5 {
        let key = format!("agent:main:subagent:d{i}");
        put_child(&o, &parent, &key, &format!("run-d{i}"));
        parent = key;
    }
    put_child(&o, "agent:main:subagent:d5", "agent:main:subagent:c1", "run-c1");
    put_child(&o, "agent:main:subagent:c1", "agent:main:subagent:c2", "run-c2");
    let leaf = json!({"agentSessionKey": "agent:main:subagent:d5"});
    let list = tool(&o, json!({}), leaf.clone()).await;
    assert_eq!(list["callerIsSubagent"], true);
    assert_eq!(list["taskTotal"], 2, "its child and its child's child");
    let grandchild = task_of_run(&list, "run-c2", &o)["taskId"].as_str().unwrap().to_owned();
    let own = task_of_run(&list, "run-c1", &o)["taskId"].as_str().unwrap().to_owned();
    assert_eq!(
        tool(&o, json!({"action": "cancel", "taskId": grandchild}), leaf.clone()).await,
        json!({"status": "forbidden", "error": "Leaf subagents cannot cancel other sessions."})
    );
    // d4 is an orchestrator: its grandchildren's grandchild is in its tree
    let d4 = json!({"agentSessionKey": "agent:main:subagent:d4"});
    assert_eq!(tool(&o, json!({"action": "cancel", "taskId": grandchild}), d4).await["status"], "cancelled");
    assert_eq!(tool(&o, json!({"action": "cancel", "taskId": own}), leaf).await["status"], "cancelled");
    o.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn task_ids_and_a_cancel_in_flight_survive_a_restart() {
    task_ids_and_a_cancel_in_flight_survive_a_restart_at(&tmp_db()).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn task_ids_and_a_cancel_in_flight_survive_a_restart_on_postgres() {
    task_ids_and_a_cancel_in_flight_survive_a_restart_at(&testdb::fresh_url()).await
}

async fn task_ids_and_a_cancel_in_flight_survive_a_restart_at(db: &str) {
    let (host, _gate) = gated_host();
    let first = open_at(db, json!({}), host).await;
    let child = spawn(&first, json!({"task": "slow"}), main_ctx()).await;
    let keep = spawn(&first, json!({"task": "slow too"}), main_ctx()).await;
    let run = str_of(&child, "runId");
    let list = tool(&first, json!({}), main_ctx()).await;
    let id = task_of_run(&list, &run, &first)["taskId"].as_str().unwrap().to_owned();
    let kept_id = task_of_run(&list, &str_of(&keep, "runId"), &first)["taskId"].as_str().unwrap().to_owned();
    assert_eq!(tool(&first, json!({"action": "cancel", "taskId": id}), main_ctx()).await["status"], "cancelled");
    first.close().await;

    let host2 = Arc::new(FakeHost::replying("ok"));
    let second = open_at(db, json!({}), host2.clone()).await;
    // the other child was interrupted and is announced; the cancelled one is not
    let kept_run = str_of(&keep, "runId");
    until("the interrupted child is announced", || {
        record(&second, &kept_run).map(|r| r.announce.status == "delivered").unwrap_or(false)
    })
    .await;
    let announced: Vec<String> = requests_in(&host2, Lane::Announce).into_iter().map(|r| r.message).collect();
    assert_eq!(announced.len(), 1);
    assert!(announced[0].contains("slow too"));
    let list = tool(&second, json!({}), main_ctx()).await;
    let t = task_of_run(&list, &run, &second);
    assert_eq!((t["taskId"].as_str(), t["status"].as_str()), (Some(id.as_str()), Some("cancelled")));
    let k = task_of_run(&list, &kept_run, &second);
    assert_eq!((k["taskId"].as_str(), k["status"].as_str()), (Some(kept_id.as_str()), Some("failed")));
    second.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cancelling_the_last_claimed_child_resumes_a_yield() {
    cancelling_the_last_claimed_child_resumes_a_yield_at(":memory:").await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cancelling_the_last_claimed_child_resumes_a_yield_on_postgres() {
    cancelling_the_last_claimed_child_resumes_a_yield_at(&testdb::fresh_url()).await
}

async fn cancelling_the_last_claimed_child_resumes_a_yield_at(db: &str) {
    let (host, _gate) = gated_host();
    let o = open_at(db, json!({}), host.clone()).await;
    let child = spawn(&o, json!({"task": "slow"}), main_ctx()).await;
    assert_eq!(
        o.tool(crate::tools::Tool::SessionsYield, json!({"message": "go on"}), main_ctx(), false).await.unwrap()
            ["status"],
        "yielded"
    );
    let list = tool(&o, json!({}), main_ctx()).await;
    let id = task_of_run(&list, &str_of(&child, "runId"), &o)["taskId"].as_str().unwrap().to_owned();
    tool(&o, json!({"action": "cancel", "taskId": id}), main_ctx()).await;
    until("the resume", || host.requests().iter().any(|r| r.message == yields::resume_text("go on"))).await;
    o.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn under_the_2026_1_contract_the_new_tools_do_not_exist() {
    let (host, _gate) = gated_host();
    let o = crate::orchestrate::subagents::testkit::open(json!({}), host).await;
    for name in [crate::tools::Tool::Subagents, crate::tools::Tool::SessionsYield] {
        let err = o.tool(name, json!({}), main_ctx(), false).await.unwrap_err();
        assert_eq!(err.message(), format!("unknown tool: {}", name.name()));
    }
    o.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_completion_that_cannot_be_delivered_leaves_its_task_blocked_and_wait_asks_for_attention() {
    // the child answers, every delivery to the requester fails, one try allowed
    let host = Arc::new(FakeHost::new(|req| {
        Box::pin(async move {
            match req.options.lane {
                Lane::Announce => Err("requester offline".to_owned()),
                _ => Ok(json!({"reply": "done"})),
            }
        })
    }));
    let window = json!({"firstMs": 1, "maxMs": 5, "expireMs": 50});
    let o = open(json!({"session": {"outbox": {"completionRetry": window}}}), host).await;
    let child = spawn(&o, json!({"task": "quick"}), main_ctx()).await;
    let run = str_of(&child, "runId");
    until("the completion failed", || record(&o, &run).map(|r| r.announce.status == "failed").unwrap_or(false)).await;
    let list = tool(&o, json!({}), main_ctx()).await;
    let t = task_of_run(&list, &run, &o);
    assert_eq!((t["status"].as_str(), t["deliveryStatus"].as_str()), (Some("blocked"), Some("failed")));
    assert_eq!(t["terminalOutcome"], "blocked");
    assert_eq!(
        t["terminalSummary"],
        "Required completion delivery failed before reaching the requester: requester offline."
    );
    let id = t["taskId"].as_str().unwrap().to_owned();
    let w = tool(&o, json!({"action": "wait", "taskIds": [id], "timeoutSeconds": 0}), main_ctx()).await;
    assert_eq!((w["reason"].as_str(), w["attention"].clone()), (Some("attention"), json!([id])));
    let row = o.engine().store().read(|db| db.task_run(&id)).unwrap().unwrap();
    let until_ms = row.extra["cleanupAfter"].as_i64().unwrap();
    assert_eq!(until_ms, record(&o, &run).unwrap().ended_at.unwrap() + 7 * 24 * 3_600_000, "kept 7 days");
    o.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_backlog_warning_is_raised_from_25_blocked_completions() {
    let (host, _gate) = gated_host();
    let o = open(json!({}), host.clone()).await;
    let future = entry::now_ms() + 60_000;
    let blocked = |i: usize| {
        let mut t = TaskRow {
            task_id: format!("b{i}"),
            runtime: "subagent".into(),
            owner_key: "agent:main:main".into(),
            status: "succeeded".into(),
            terminal_outcome: Some("blocked".into()),
            ..TaskRow::default()
        };
        t.extra.insert("cleanupAfter".into(), future.into());
        t
    };
    let warnings = |h: &FakeHost| h.events().into_iter().filter(|e| e.kind == "delivery.backlog").collect::<Vec<_>>();
    o.engine().store().write(|db| (0..24).try_for_each(|i| db.put_task_run(&blocked(i)))).unwrap();
    completion_settled(&o, "r-24", "failed").await;
    assert!(warnings(&host).is_empty(), "24 is under the threshold");
    o.engine().store().write(|db| db.put_task_run(&blocked(24))).unwrap();
    completion_settled(&o, "r-25", "failed").await;
    let w = warnings(&host);
    assert_eq!(w.len(), 1);
    assert_eq!(
        (w[0].details["suspendedCount"].as_u64(), w[0].details["warningThreshold"].as_u64()),
        (Some(25), Some(25))
    );
    o.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tasks_imported_from_a_2026_9_folder_keep_their_ids_in_the_live_ledger() {
    let (host, _gate) = gated_host();
    let o = open(json!({}), host).await;
    let imported = |id: &str, run: &str, status: &str| {
        crate::store::tasks::StoredTask {
        task_id: id.into(),
        run_id: Some(run.into()),
        runtime: "subagent".into(),
        status: status.into(),
        delivery_status: Some("delivered".into()),
        owner_key: "agent:main:main".into(),
        requester_session_key: Some("agent:main:main".into()),
        child_session_key: Some(format!("agent:main:subagent:{run}")),
        agent_id: Some("main".into()),
        created_at: 1,
        ended_at: Some(2),
        record: json!({"taskId": id, "runId": run, "runtime": "subagent", "ownerKey": "agent:main:main", "scopeKind": "session",
                       "status": status, "deliveryStatus": "delivered", "createdAt": 1, "label": "old work",
                       "childSessionKey": format!("agent:main:subagent:{run}")})
        .to_string(),
    }
    };
    o.engine()
        .store()
        .write(|db| {
            db.insert_task_if_absent(&imported("imp-1", "run-old", "succeeded"))?;
            db.insert_task_if_absent(&imported("imp-2", "run-live", "running"))
        })
        .unwrap();
    // the registry knows run-live (imported too): its task keeps the imported id
    put_child(&o, "agent:main:main", "agent:main:subagent:run-live", "run-live");
    let list = tool(&o, json!({"recentMinutes": 1440}), main_ctx()).await;
    let ids: Vec<&str> = list["tasks"].as_array().unwrap().iter().map(|t| t["taskId"].as_str().unwrap()).collect();
    assert!(ids.contains(&"imp-2"), "{ids:?}");
    assert_eq!(ids.len(), 1, "the ended imported task is older than recentMinutes; the live one is listed");
    assert_eq!(o.engine().store().read(|db| db.task_run("imp-1")).unwrap().unwrap().label.as_deref(), Some("old work"));
    assert_eq!(o.engine().store().read(|db| db.task_run_by_run_id("run-live")).unwrap().unwrap().task_id, "imp-2");
    o.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_task_reports_its_execution_running_waiting_on_its_children_then_finished() {
    let (host, gate) = gated_host();
    let o = open(json!({}), host).await;
    let child = spawn(&o, json!({"task": "orchestrate", "label": "lead"}), main_ctx()).await;
    let (child_run, child_key) = (str_of(&child, "runId"), str_of(&child, "childSessionKey"));
    let list = tool(&o, json!({}), main_ctx()).await;
    let keys: Vec<&String> = task_of_run(&list, &child_run, &o).as_object().unwrap().keys().collect();
    assert_eq!(keys, ["taskId", "runtime", "deliveryStatus", "execution", "status", "label"]);
    assert_eq!(task_of_run(&list, &child_run, &o)["execution"], json!({"state": "running"}));
    // the child spawns a grandchild and yields on it while its own run is still live
    let child_ctx = json!({"agentSessionKey": child_key});
    let grand = spawn(&o, json!({"task": "dig", "label": "digger"}), child_ctx.clone()).await;
    let y = o.tool(crate::tools::Tool::SessionsYield, json!({}), child_ctx, false).await.unwrap();
    assert_eq!(y["status"], "yielded");
    assert!(!str_of(&grand, "runId").is_empty());
    // 2026.9: running while its run is live; `waiting` once that run has ended and paused it
    // (subagents/pause_tests.rs)
    let list = tool(&o, json!({}), main_ctx()).await;
    let task_id = str_of(task_of_run(&list, &child_run, &o), "taskId");
    assert_eq!(task_of_run(&list, &child_run, &o)["execution"], json!({"state": "running"}));
    gate.send(true).unwrap();
    until("its task is terminal", || {
        o.engine().store().read(|db| db.task_run(&task_id)).unwrap().is_some_and(|t| t.status != "running")
    })
    .await;
    let list = tool(&o, json!({}), main_ctx()).await;
    let task = list["tasks"].as_array().unwrap().iter().find(|t| t["taskId"] == task_id.as_str()).unwrap();
    assert_eq!(task["execution"], json!({"state": "finished"}));
    o.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_completion_that_commits_before_the_cancel_stands_and_the_cancel_is_refused() {
    a_completion_that_commits_before_the_cancel_stands_and_the_cancel_is_refused_at(":memory:").await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_completion_that_commits_before_the_cancel_stands_and_the_cancel_is_refused_on_postgres() {
    a_completion_that_commits_before_the_cancel_stands_and_the_cancel_is_refused_at(&testdb::fresh_url()).await
}

/// The soak's PostgreSQL case, in a fixed order: the cancel read the task row while the child
/// ran; the child's completion (here, or in another process) committed; then the cancel's write.
async fn a_completion_that_commits_before_the_cancel_stands_and_the_cancel_is_refused_at(db: &str) {
    let (child_gate, child_rx) = watch::channel(false);
    let (announce_gate, announce_rx) = watch::channel(false);
    let host = Arc::new(FakeHost::new(move |req| {
        let (mut child, mut announce) = (child_rx.clone(), announce_rx.clone());
        Box::pin(async move {
            match req.options.lane {
                Lane::Subagent => drop(child.wait_for(|open| *open).await),
                Lane::Announce => drop(announce.wait_for(|open| *open).await),
                Lane::Nested => {}
            }
            Ok(json!({"reply": "done"}))
        })
    }));
    let o = open_at(db, json!({}), host.clone()).await;
    let run = str_of(&spawn(&o, json!({"task": "slow"}), main_ctx()).await, "runId");
    let list = tool(&o, json!({}), main_ctx()).await;
    let id = task_of_run(&list, &run, &o)["taskId"].as_str().unwrap().to_owned();
    assert_eq!(task_of_run(&list, &run, &o)["status"], "running");

    child_gate.send(true).unwrap();
    until("the completion is recorded", || record(&o, &run).is_some_and(|r| r.ended_at.is_some())).await;
    let now = crate::entry::now_ms();
    let cancelled = o.engine().store().write(|db| cancel_in(db, &id, &run, now, &|k: &str| k.to_owned())).unwrap();
    assert!(
        matches!(&cancelled, Cancel::RunEnded(stopped) if stopped.is_empty()),
        "the cancel must see the completion that committed first: {cancelled:?}"
    );
    let rec = record(&o, &run).unwrap();
    assert_eq!((rec.outcome.unwrap().status.as_str(), rec.announce.status.as_str()), ("ok", "pending"));

    announce_gate.send(true).unwrap();
    until("the completion is delivered", || record(&o, &run).is_some_and(|r| r.announce.status == "delivered")).await;
    assert_eq!(requests_in(&host, Lane::Announce).len(), 1);
    let again = tool(&o, json!({"action": "cancel", "taskId": id}), main_ctx()).await;
    assert_eq!(again["reason"], "Task is already terminal.");
    o.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_2026_9_folders_tasks_are_the_ledgers_own_listed_waited_on_and_cancelled_and_kept_as_read() {
    let o = open(json!({}), Arc::new(FakeHost::replying("ok"))).await;
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("__test__/fixtures/openclaw-2026.9/state");
    let km = crate::keys::KeyModel::new(false, "main", "main");
    let r = crate::migrate::import_state_dir(o.engine().store(), &km, None, &dir, 1_800_000_000_000).unwrap();
    assert_eq!((r.runs, r.tasks), (2, 2));
    let (done, going) = ("cdbb029c-ca52-4603-9c38-e209b6f990de", "cfaaefba-3c98-4daa-bca2-126dc1b7e094");
    let before = o.engine().store().read(|db| db.all_tasks()).unwrap();
    let list = tool(&o, json!({"recentMinutes": 1440}), main_ctx()).await;
    let shown: Vec<&str> = list["tasks"].as_array().unwrap().iter().map(|t| t["taskId"].as_str().unwrap()).collect();
    assert_eq!(shown, [going], "the running imported task is in main's tree, with its 2026.9 id");
    assert_eq!(list["tasks"][0]["progressSummary"], "searching");
    // reading them brought nothing to change: the imported records stay byte for byte
    assert_eq!(o.engine().store().read(|db| db.all_tasks()).unwrap(), before);
    // the finished one is past its retention (`cleanupAfter`), as it would be in 2026.9
    let wait = tool(&o, json!({"action": "wait", "taskIds": [done], "timeoutSeconds": 0}), main_ctx()).await;
    assert_eq!((&wait["reason"], &wait["unavailable"][0]), (&json!("unavailable"), &json!(done)), "{wait}");
    let wait = tool(&o, json!({"action": "wait", "taskIds": [going], "timeoutSeconds": 0}), main_ctx()).await;
    assert_eq!(wait["reason"], "timeout", "{wait}");
    let gone = tool(&o, json!({"action": "cancel", "taskId": done}), main_ctx()).await;
    assert_eq!(gone["error"], OUTSIDE_TREE, "{gone}");
    let outside =
        tool(&o, json!({"action": "cancel", "taskId": going}), json!({"agentSessionKey": "agent:main:other"})).await;
    assert_eq!(outside["error"], OUTSIDE_TREE, "{outside}");
    let cancelled = tool(&o, json!({"action": "cancel", "taskId": going}), main_ctx()).await;
    assert_eq!((&cancelled["status"], &cancelled["cancelled"]), (&json!("cancelled"), &json!(true)), "{cancelled}");
    assert_eq!(o.engine().store().read(|db| db.task_run(going)).unwrap().unwrap().status, "cancelled");
    o.close().await;
}

#[test]
fn a_cancel_that_finds_its_task_ended_meanwhile_says_how_it_ended() {
    let ended = |status: &str, error: Option<&str>| {
        let mut r = running_record("agent:main:main", "agent:main:subagent:x", "run-x");
        r.ended_at = Some(1);
        r.outcome = Some(RunOutcome { status: status.into(), error: error.map(Into::into) });
        r
    };
    let task = |status: &str| TaskRow { status: status.into(), ..TaskRow::default() };
    let running = task("running");
    let says = |t: &TaskRow, r: &SubagentRun| ended_meanwhile(Some(t), Some(r));
    assert_eq!(says(&running, &ended("ok", None)), "Subagent completed while cancellation was in progress.");
    assert_eq!(
        says(&running, &ended("error", Some("boom"))),
        "Subagent became failed while cancellation was in progress."
    );
    assert_eq!(
        says(&running, &ended("timeout", None)),
        "Subagent became timed_out while cancellation was in progress."
    );
    // another cancel (or a cascade) committed first: the task row says so, whatever the record
    let other_cancel = ended("error", Some(CANCELLED));
    assert_eq!(says(&task("cancelled"), &other_cancel), "Subagent was cancelled while cancellation was in progress.");
    // nothing ended after all (the rows are gone): the plain refusal
    let live = running_record("agent:main:main", "agent:main:subagent:x", "run-x");
    assert_eq!(ended_meanwhile(Some(&running), Some(&live)), ALREADY_TERMINAL);
    assert_eq!(ended_meanwhile(None, None), ALREADY_TERMINAL);
}
