use super::*;
use std::sync::{OnceLock, Weak};

use serde_json::{json, Value};

use crate::host::testing::FakeHost;
use crate::host::Lane;
use crate::orchestrate::subagents::testkit::{requests_in, spawn, str_of, tmp_db, until};
use crate::orchestrate::tasks::testkit9::open9_at;
use crate::store::pg::testdb;
use crate::tools::{send9, Tool};

const MAIN: &str = "agent:main:main";

fn main_ctx() -> Value {
    json!({"agentSessionKey": MAIN, "agentChannel": "whatsapp", "agentTo": "+1555"})
}

type Cell = Arc<OnceLock<Weak<Orchestrator>>>;

/// A host whose child runs, on their task, wait in `sessions_yield` for a message; a child run
/// on a continuation answers `final answer`; every other run answers `ok`.
fn pausing_host() -> (Arc<FakeHost>, Cell) {
    let cell: Cell = Arc::default();
    let c = cell.clone();
    let host = Arc::new(FakeHost::new(move |req| {
        let orch = c.get().and_then(Weak::upgrade);
        Box::pin(async move {
            if req.options.lane != Lane::Subagent {
                return Ok(json!({"reply": "ok"}));
            }
            if req.message.contains("continue") {
                return Ok(json!({"reply": "final answer"}));
            }
            let orch = orch.ok_or("the store is gone")?;
            let ctx = json!({"agentSessionKey": req.session_key, "runId": req.run_id});
            let out = orch
                .tool(Tool::SessionsYield, json!({"waitFor": "message"}), ctx, false)
                .await
                .map_err(|e| e.message().to_owned())?;
            assert_eq!(out["status"], "yielded", "{out}");
            Ok(json!({"reply": "waiting for input"}))
        })
    }));
    (host, cell)
}

async fn open_pausing(db: &str) -> (Arc<Orchestrator>, Arc<FakeHost>, Cell) {
    let (host, cell) = pausing_host();
    let o = open9_at(db, json!({}), host.clone()).await;
    let _ = cell.set(Arc::downgrade(&o));
    (o, host, cell)
}

async fn send(o: &Arc<Orchestrator>, params: Value, ctx: Value) -> Value {
    o.tool(Tool::SessionsSend, params, ctx, false).await.unwrap()
}

async fn subagents(o: &Arc<Orchestrator>, params: Value, ctx: Value) -> Value {
    o.tool(Tool::Subagents, params, ctx, false).await.unwrap()
}

fn paused(o: &Orchestrator, child: &str) -> Option<SubagentRun> {
    o.engine().store().read(|db| pause::paused_of(db, child)).unwrap()
}

fn completions(host: &FakeHost) -> Vec<crate::host::AgentRunRequest> {
    requests_in(host, Lane::Announce).into_iter().filter(|r| r.session_key == MAIN).collect()
}

/// Spawns a child and waits until it is paused: (child key, first run id, task id).
async fn spawn_paused(o: &Arc<Orchestrator>) -> (String, String, String) {
    spawn_paused_by(o, main_ctx()).await
}

async fn spawn_paused_by(o: &Arc<Orchestrator>, ctx: Value) -> (String, String, String) {
    let out = spawn(o, json!({"task": "investigate", "label": "scout"}), ctx.clone()).await;
    let (child, run) = (str_of(&out, "childSessionKey"), str_of(&out, "runId"));
    until("the child is paused", || paused(o, &child).is_some()).await;
    let list = subagents(o, json!({}), ctx).await;
    let task = list["tasks"][0].clone();
    assert_eq!((task["status"].as_str(), task["execution"]["state"].as_str()), (Some("running"), Some("waiting")));
    assert_eq!(task["execution"]["wait"], json!({"kind": "external"}));
    assert!(list["text"].as_str().unwrap().contains("waiting for external continuation"), "{list}");
    (child, run, str_of(&task, "taskId"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_paused_child_is_resumed_by_its_owner_and_completes_once() {
    resumed_once_at(":memory:").await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_paused_child_is_resumed_by_its_owner_and_completes_once_on_postgres() {
    resumed_once_at(&testdb::fresh_url()).await
}

async fn resumed_once_at(db: &str) {
    let (o, host, _cell) = open_pausing(db).await;
    let (child, first_run, task_id) = spawn_paused(&o).await;
    // held back: nothing handed to the requester, the task still running
    tokio::time::sleep(std::time::Duration::from_millis(200)).await;
    assert!(completions(&host).is_empty(), "a paused child is not announced");
    let rec = paused(&o, &child).unwrap();
    assert_eq!((rec.run_id.as_str(), rec.pause_reason.as_deref()), (first_run.as_str(), Some(pause::YIELD_PAUSE)));
    assert!(host.events().iter().any(|e| e.kind == "subagent.paused"));

    let out = send(&o, json!({"sessionKey": child, "message": "continue with B", "mode": "resume"}), main_ctx()).await;
    let run = str_of(&out, "runId");
    assert_eq!(
        out,
        json!({"status": "accepted", "mode": "resume", "runId": run, "taskRunId": first_run,
               "sessionKey": child, "completion": "task"})
    );
    assert_ne!(run, first_run);
    until("the completion reaches the requester", || !completions(&host).is_empty()).await;
    let handoff = &completions(&host)[0];
    assert!(handoff.message.contains("final answer"), "{}", handoff.message);
    let resumed = requests_in(&host, Lane::Subagent).into_iter().find(|r| r.run_id == run).unwrap();
    assert!(resumed.message.contains("[Inter-session message]") && resumed.message.contains("continue with B"));
    // the same task, now finished; the record moved to the new run
    until("the task completes", || {
        let rec = o.engine().store().read(|db| db.subagent_run(&run)).unwrap();
        rec.is_some_and(|r| r.announce.status == "delivered")
    })
    .await;
    let list = subagents(&o, json!({}), main_ctx()).await;
    assert_eq!(list["taskTotal"], 1, "{list}");
    assert_eq!(
        (list["tasks"][0]["taskId"].as_str(), list["tasks"][0]["status"].as_str()),
        (Some(task_id.as_str()), Some("completed"))
    );
    assert!(o.engine().store().read(|db| db.subagent_run(&first_run)).unwrap().is_none());
    // nothing is paused any more: a second resume is refused
    let again = send(&o, json!({"sessionKey": child, "message": "continue", "mode": "resume"}), main_ctx()).await;
    assert_eq!((again["status"].as_str(), again["error"].as_str()), (Some("error"), Some(send9::RESUME_NEEDS_PAUSED)));
    tokio::time::sleep(std::time::Duration::from_millis(200)).await;
    assert_eq!(completions(&host).len(), 1, "announced exactly once");
    o.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_send_without_mode_resumes_a_paused_child_of_the_caller_only() {
    let (o, host, _cell) = open_pausing(":memory:").await;
    let (child, first_run, _) = spawn_paused(&o).await;
    // another session may not resume it, neither explicitly nor by a plain send
    let other = json!({"agentSessionKey": "agent:main:other"});
    let refused = send(&o, json!({"sessionKey": child, "message": "continue", "mode": "resume"}), other.clone()).await;
    assert_eq!(refused["error"], send9::RESUME_NOT_CONTROLLER);
    assert!(paused(&o, &child).is_some());
    // the owner's plain send (even a waited one) is the resume
    let out = send(&o, json!({"sessionKey": child, "message": "continue", "timeoutSeconds": 5}), main_ctx()).await;
    assert_eq!((out["mode"].as_str(), out["taskRunId"].as_str()), (Some("resume"), Some(first_run.as_str())), "{out}");
    until("the completion", || completions(&host).len() == 1).await;
    o.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_paused_child_can_be_cancelled_and_is_never_announced() {
    let (o, host, _cell) = open_pausing(":memory:").await;
    let (child, _, task_id) = spawn_paused(&o).await;
    let out = subagents(&o, json!({"action": "cancel", "taskId": task_id}), main_ctx()).await;
    assert_eq!(out["status"], "cancelled", "{out}");
    assert!(paused(&o, &child).is_none());
    let again = send(&o, json!({"sessionKey": child, "message": "continue", "mode": "resume"}), main_ctx()).await;
    assert_eq!(again["error"], send9::RESUME_NEEDS_PAUSED);
    tokio::time::sleep(std::time::Duration::from_millis(200)).await;
    assert!(completions(&host).is_empty());
    o.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_pause_survives_a_restart_and_resumes_after_it() {
    let path = tmp_db();
    let (o, _host, _cell) = open_pausing(&path).await;
    let (child, first_run, task_id) = spawn_paused(&o).await;
    o.close().await;
    drop(o);

    let (o, host, _cell) = open_pausing(&path).await;
    tokio::time::sleep(std::time::Duration::from_millis(200)).await;
    assert!(completions(&host).is_empty(), "recovery does not announce a paused child");
    assert_eq!(paused(&o, &child).map(|r| r.run_id), Some(first_run.clone()));
    let out = send(&o, json!({"sessionKey": child, "message": "continue", "mode": "resume"}), main_ctx()).await;
    assert_eq!(out["taskRunId"], json!(first_run), "{out}");
    until("the completion after the restart", || completions(&host).len() == 1).await;
    let list = subagents(&o, json!({}), main_ctx()).await;
    assert_eq!(list["tasks"][0]["taskId"], json!(task_id));
    o.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_child_that_hands_nothing_over_cannot_be_resumed() {
    let (o, _host, _cell) = open_pausing(":memory:").await;
    let out = spawn(&o, json!({"task": "quiet", "expectsCompletionMessage": false}), main_ctx()).await;
    let child = str_of(&out, "childSessionKey");
    until("the child is paused", || paused(&o, &child).is_some()).await;
    let refused = send(&o, json!({"sessionKey": child, "message": "continue", "mode": "resume"}), main_ctx()).await;
    assert_eq!(refused["error"], send9::RESUME_NO_COMPLETION);
    // and a plain send is an ordinary send, not a resume
    let plain = send(&o, json!({"sessionKey": child, "message": "continue", "timeoutSeconds": 0}), main_ctx()).await;
    assert_eq!(plain["status"], "accepted");
    assert!(plain.get("mode").is_none(), "{plain}");
    o.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_paused_child_is_no_active_child_and_stops_with_its_requester() {
    let (host, cell) = pausing_host();
    let cfg = json!({"agents": {"defaults": {"subagents": {"maxChildrenPerAgent": 1}}}});
    let o = open9_at(":memory:", cfg, host.clone()).await;
    let _ = cell.set(Arc::downgrade(&o));
    let work = json!({"agentSessionKey": "agent:main:work"});
    let (child, first_run, _) = spawn_paused_by(&o, work.clone()).await;
    // 2026.9 counts a paused child (its run ended) as no active child
    let next = spawn(&o, json!({"task": "another"}), work).await;
    assert_eq!(next["status"], "accepted", "{next}");
    let second = str_of(&next, "childSessionKey");
    until("the second child is paused", || paused(&o, &second).is_some()).await;
    // the requester's deletion stops its paused children unannounced
    o.engine().upsert_session(&json!("agent:main:work"), &json!({})).unwrap();
    let deleted = o.delete_session(json!("agent:main:work"), json!({})).await.unwrap();
    assert_eq!(deleted["deleted"], true, "{deleted}");
    until("the paused children are stopped", || paused(&o, &child).is_none() && paused(&o, &second).is_none()).await;
    let rec = o.engine().store().read(|db| db.subagent_run(&first_run)).unwrap().unwrap();
    assert_eq!((rec.announce.status.as_str(), rec.pause_reason.as_deref()), ("skipped", None));
    assert_eq!(rec.outcome.and_then(|o| o.error).as_deref(), Some(REQUESTER_DELETED));
    tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    assert!(requests_in(&host, Lane::Announce).is_empty());
    o.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_resumed_run_keeps_the_childs_own_run_timeout() {
    let (o, host, _cell) = open_pausing(":memory:").await;
    for (params, want_ms) in [
        (json!({"task": "investigate", "runTimeoutSeconds": 42}), 42_000),
        (json!({"task": "investigate"}), o.engine().config().default_timeout_seconds * 1000),
    ] {
        let out = spawn(&o, params, main_ctx()).await;
        let child = str_of(&out, "childSessionKey");
        until("the child is paused", || paused(&o, &child).is_some()).await;
        let out = send(&o, json!({"sessionKey": child, "message": "continue", "mode": "resume"}), main_ctx()).await;
        let run = str_of(&out, "runId");
        until("the resumed run", || requests_in(&host, Lane::Subagent).iter().any(|r| r.run_id == run)).await;
        let resumed = requests_in(&host, Lane::Subagent).into_iter().find(|r| r.run_id == run).unwrap();
        assert_eq!(resumed.options.timeout_ms, want_ms);
    }
    o.close().await;
}
