use super::*;
use crate::host::testing::FakeHost;
use crate::orchestrate::subagents::testkit::{requests_in, spawn, str_of, tmp_db, until};
use crate::orchestrate::tasks::testkit9::{open9 as open, open9_at as open_at};
use crate::store::pg::testdb;
use serde_json::json;
use tokio::sync::watch;

fn main_ctx() -> Value {
    json!({"agentSessionKey": "agent:main:main", "agentChannel": "whatsapp", "agentTo": "+1555"})
}

/// A host whose child runs wait until the gate opens; every other run answers `ok`.
fn gated_host() -> (Arc<FakeHost>, watch::Sender<bool>) {
    let (tx, rx) = watch::channel(false);
    let host = Arc::new(FakeHost::new(move |req| {
        let mut gate = rx.clone();
        Box::pin(async move {
            if req.options.lane == Lane::Subagent {
                let _ = gate.wait_for(|open| *open).await;
                return Ok(json!({"reply": "child done"}));
            }
            Ok(json!({"reply": "ok"}))
        })
    }));
    (host, tx)
}

async fn yield_(o: &Arc<Orchestrator>, params: Value, ctx: Value) -> Value {
    o.tool(crate::tools::Tool::SessionsYield, params, ctx, false).await.unwrap()
}

fn yields_of(o: &Orchestrator, key: &str) -> Vec<YieldRow> {
    o.engine().store().read(|db| db.open_yields_of(key)).unwrap()
}

fn resumes(host: &FakeHost) -> Vec<crate::host::AgentRunRequest> {
    host.requests().into_iter().filter(|r| r.message.contains("[Context: The previous turn ended")).collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_refusals_have_the_gateways_texts() {
    let (host, _gate) = gated_host();
    let o = open(json!({}), host).await;
    assert_eq!(
        yield_(&o, json!({"waitFor": "children"}), main_ctx()).await,
        json!({"status": "error", "error": "waitFor must be \"message\" when provided."})
    );
    assert_eq!(yield_(&o, json!({}), json!({})).await, json!({"status": "error", "error": "No session context"}));
    assert_eq!(
        yield_(&o, json!({}), json!({"agentSessionKey": "agent:main:cron:nightly"})).await["error"],
        json!(CRON_UNSUPPORTED)
    );
    assert_eq!(yield_(&o, json!({}), main_ctx()).await, json!({"status": "error", "error": NO_CLAIM}));
    // a sub-agent with nothing pending may still wait for a message, and only when it says so
    let sub = json!({"agentSessionKey": "agent:main:subagent:abc"});
    assert_eq!(yield_(&o, json!({}), sub.clone()).await["error"], json!(NO_CLAIM));
    assert_eq!(yield_(&o, json!({"waitFor": "message"}), sub).await, json!({"status": "yielded"}));
    assert_eq!(yields_of(&o, "agent:main:subagent:abc")[0].wait_for, "message");
    let mut deferred = main_ctx();
    deferred["hasUnobservedAsyncToolResults"] = json!(true);
    assert_eq!(yield_(&o, json!({}), deferred).await, json!({"status": "deferred", "message": DEFERRED}));
    o.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_yield_resumes_the_requester_once_every_claimed_child_has_delivered() {
    a_yield_resumes_the_requester_once_every_claimed_child_has_delivered_at(":memory:").await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_yield_resumes_the_requester_once_every_claimed_child_has_delivered_on_postgres() {
    a_yield_resumes_the_requester_once_every_claimed_child_has_delivered_at(&testdb::fresh_url()).await
}

async fn a_yield_resumes_the_requester_once_every_claimed_child_has_delivered_at(db: &str) {
    let (host, gate) = gated_host();
    let o = open_at(db, json!({}), host.clone()).await;
    let a = spawn(&o, json!({"task": "first", "label": "one"}), main_ctx()).await;
    let b = spawn(&o, json!({"task": "second"}), main_ctx()).await;
    assert_eq!(str_of(&a, "status"), "accepted");
    let out = yield_(&o, json!({"message": "check both results", "acknowledgment": "On it."}), main_ctx()).await;
    assert_eq!(out, json!({"status": "yielded", "acknowledgment": "On it."}));
    let y = &yields_of(&o, "agent:main:main")[0];
    assert_eq!(y.children, vec![str_of(&a, "runId"), str_of(&b, "runId")]);
    assert_eq!((y.status.as_str(), y.wait_for.as_str()), ("waiting", "children"));
    assert!(resumes(&host).is_empty());

    gate.send(true).unwrap();
    until("the resume run", || !resumes(&host).is_empty()).await;
    // both completions reached the requester before it was resumed, each on its own
    let announces = requests_in(&host, Lane::Announce);
    let resume_at = announces.iter().position(|r| r.message.contains("[Context:")).unwrap();
    assert_eq!(resume_at, 2, "two completion turns, then the resume");
    let r = &resumes(&host)[0];
    assert_eq!(r.session_key, "agent:main:main");
    assert_eq!(r.message, resume_text("check both results"));
    assert_eq!((r.options.channel.as_deref(), r.options.deliver), (Some("whatsapp"), true));
    until("the yield is resumed", || yields_of(&o, "agent:main:main").is_empty()).await;
    assert_eq!(resumes(&host).len(), 1, "resumed once");
    o.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_second_yield_with_nothing_new_is_already_pending_and_lists_the_children() {
    let (host, _gate) = gated_host();
    let o = open(json!({}), host.clone()).await;
    let a = spawn(&o, json!({"task": "dig", "label": "digger"}), main_ctx()).await;
    assert_eq!(yield_(&o, json!({}), main_ctx()).await["status"], "yielded");
    let out = yield_(&o, json!({}), main_ctx()).await;
    assert_eq!(out["status"], "already_pending");
    let child = str_of(&a, "childSessionKey");
    let p = &out["pendingChildren"][0];
    assert_eq!(
        (p["runId"].as_str(), p["state"].as_str(), p["wakeArmed"].as_bool()),
        (Some(str_of(&a, "runId").as_str()), Some("running"), Some(true))
    );
    assert_eq!(p["label"], "digger");
    let started = crate::mirror::iso(p["startedAt"].as_i64().unwrap());
    assert_eq!(
        out["message"].as_str().unwrap(),
        format!("An earlier turn of this session already yielded for 1 child session whose completion is still pending: digger ({child}), running, started {started}. Their completion will arrive in this session as a later turn; do not re-spawn, re-send, or poll to wake them. This turn owns no new claim, so no yield is needed: end this turn normally.")
    );
    assert_eq!(yields_of(&o, "agent:main:main").len(), 1, "no second yield recorded");
    o.close().await;
}

#[test]
fn paused_children_are_described_apart() {
    let c = |state: &'static str, label: Option<&str>| ChildView {
        run_id: "r".into(),
        child_session_key: "agent:main:subagent:x".into(),
        label: label.map(str::to_owned),
        started_at: None,
        state,
        wake_armed: false,
    };
    assert_eq!(
        pending_message(&[c("paused", None), c("completing", Some("l"))]),
        "An earlier turn of this session already spawned 1 child session whose completion is still pending: l (agent:main:subagent:x), completing. Their completion will arrive in this session as a later turn; do not re-spawn, re-send, or poll to wake them. 1 child session spawned by an earlier turn of this session is paused by its own sessions_yield and will not complete until an incoming continuation arrives: agent:main:subagent:x, paused. Send that continuation with sessions_send if this session owns it; otherwise the work stays waiting. This turn owns no new claim, so no yield is needed: end this turn normally."
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_yield_survives_a_restart_and_the_next_open_resumes_it() {
    a_yield_survives_a_restart_and_the_next_open_resumes_it_at(&tmp_db()).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_yield_survives_a_restart_and_the_next_open_resumes_it_on_postgres() {
    a_yield_survives_a_restart_and_the_next_open_resumes_it_at(&testdb::fresh_url()).await
}

async fn a_yield_survives_a_restart_and_the_next_open_resumes_it_at(db: &str) {
    let (host, _gate) = gated_host();
    let first = open_at(db, json!({}), host.clone()).await;
    let a = spawn(&first, json!({"task": "long job"}), main_ctx()).await;
    assert_eq!(yield_(&first, json!({"message": "carry on"}), main_ctx()).await["status"], "yielded");
    first.close().await;

    // the next process: the child was interrupted, its completion is delivered, then the resume
    let (host2, _gate2) = gated_host();
    let second = open_at(db, json!({}), host2.clone()).await;
    until("the resume after reopen", || !resumes(&host2).is_empty()).await;
    assert_eq!(resumes(&host2)[0].message, resume_text("carry on"));
    let completion = requests_in(&host2, Lane::Announce);
    assert!(completion[0].message.contains("long job"), "the interrupted child's completion came first");
    // the record learns of the delivery on a task of its own, beside the yield's check
    let run = str_of(&a, "runId");
    until("the child's record says delivered", || {
        crate::orchestrate::subagents::testkit::record(&second, &run).is_some_and(|r| r.announce.status == "delivered")
    })
    .await;
    until("resumed", || yields_of(&second, "agent:main:main").is_empty()).await;
    second.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_resume_cut_short_by_a_restart_is_run_again_by_the_next_open() {
    a_resume_cut_short_by_a_restart_is_run_again_by_the_next_open_at(&tmp_db()).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_resume_cut_short_by_a_restart_is_run_again_by_the_next_open_on_postgres() {
    a_resume_cut_short_by_a_restart_is_run_again_by_the_next_open_at(&testdb::fresh_url()).await
}

async fn a_resume_cut_short_by_a_restart_is_run_again_by_the_next_open_at(db: &str) {
    // the resume turn never answers in the first process
    let host = Arc::new(FakeHost::new(|req| {
        Box::pin(async move {
            if req.message.contains("[Context:") {
                std::future::pending::<()>().await;
            }
            Ok(json!({"reply": "ok"}))
        })
    }));
    let first = open_at(db, json!({}), host.clone()).await;
    spawn(&first, json!({"task": "quick"}), main_ctx()).await;
    let _ = yield_(&first, json!({}), main_ctx()).await;
    until("the first resume starts", || !resumes(&host).is_empty()).await;
    first.close().await;

    let host2 = Arc::new(FakeHost::replying("ok"));
    let second = open_at(db, json!({}), host2.clone()).await;
    until("the resume is run again", || !resumes(&host2).is_empty()).await;
    let (r1, r2) = (&resumes(&host)[0], &resumes(&host2)[0]);
    assert_eq!(r1.idempotency_key, r2.idempotency_key, "one idempotency key for both tries");
    until("resumed", || yields_of(&second, "agent:main:main").is_empty()).await;
    second.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_turn_claims_only_the_children_it_spawned() {
    let (host, _gate) = gated_host();
    let o = open(json!({}), host).await;
    let turn = |id: &str| {
        let mut c = main_ctx();
        c["runId"] = json!(id);
        c
    };
    let a = spawn(&o, json!({"task": "first", "label": "one"}), turn("turn-a")).await;
    let b = spawn(&o, json!({"task": "second"}), turn("turn-b")).await;
    assert_eq!(yield_(&o, json!({}), turn("turn-b")).await, json!({"status": "yielded"}));
    assert_eq!(
        yields_of(&o, "agent:main:main")[0].children,
        vec![str_of(&b, "runId")],
        "turn b claims its own child only"
    );
    // a turn that spawned nothing owns no claim: the others' children are already pending
    let pending = yield_(&o, json!({}), turn("turn-c")).await;
    assert_eq!(pending["status"], "already_pending");
    let listed: Vec<&str> =
        pending["pendingChildren"].as_array().unwrap().iter().filter_map(|c| c["runId"].as_str()).collect();
    assert_eq!(listed, [str_of(&a, "runId"), str_of(&b, "runId")]);
    assert!(pending["message"]
        .as_str()
        .unwrap()
        .starts_with("An earlier turn of this session already yielded for 2 child sessions"));
    assert_eq!(yield_(&o, json!({}), turn("turn-a")).await, json!({"status": "yielded"}));
    assert_eq!(yields_of(&o, "agent:main:main").len(), 2);
    o.close().await;
}

/// From now on the store refuses a write that records a run on a yield already `resuming`:
/// the second of the two writes that used to move a yield to `resuming` and then record its
/// run. A store opening between them saw the yield `resuming` without a run and resumed it
/// again (the two-gateway soak's duplicate `yield-resume:` announces); this holds that moment.
fn hold_resume_records(db: &str) {
    let db = db.to_owned();
    std::thread::spawn(move || hold_resume_records_now(&db)).join().unwrap();
}

fn hold_resume_records_now(db: &str) {
    const RAISE: &str = "CREATE TRIGGER hold_resume_records BEFORE UPDATE ON yields
         WHEN OLD.status = 'resuming' AND NEW.status = 'resuming'
         BEGIN SELECT RAISE(ABORT, 'held by the test'); END;";
    match db.split_once("schema=") {
        Some((_, schema)) => testdb::exec(&format!(
            "CREATE FUNCTION {schema}.hold_resume_records() RETURNS trigger LANGUAGE plpgsql AS
               $$ BEGIN RAISE EXCEPTION 'held by the test'; END $$;
             CREATE TRIGGER hold_resume_records BEFORE UPDATE ON {schema}.yields FOR EACH ROW
               WHEN (OLD.status = 'resuming' AND NEW.status = 'resuming')
               EXECUTE FUNCTION {schema}.hold_resume_records();"
        )),
        None => rusqlite::Connection::open(db).unwrap().execute_batch(RAISE).unwrap(),
    }
}

/// A host whose resume turns never answer; every other run answers `ok`.
fn stalled_resumes() -> Arc<FakeHost> {
    Arc::new(FakeHost::new(|req| {
        Box::pin(async move {
            if req.message.contains("[Context:") {
                std::future::pending::<()>().await;
            }
            Ok(json!({"reply": "ok"}))
        })
    }))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_store_opening_while_another_resumes_a_yield_leaves_the_resume_to_it() {
    a_store_opening_while_another_resumes_a_yield_leaves_the_resume_to_it_at(&tmp_db()).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_store_opening_while_another_resumes_a_yield_leaves_the_resume_to_it_on_postgres() {
    a_store_opening_while_another_resumes_a_yield_leaves_the_resume_to_it_at(&testdb::fresh_url()).await
}

async fn a_store_opening_while_another_resumes_a_yield_leaves_the_resume_to_it_at(db: &str) {
    let host = stalled_resumes();
    let first = open_at(db, json!({}), host.clone()).await;
    hold_resume_records(db);
    spawn(&first, json!({"task": "quick"}), main_ctx()).await;
    assert_eq!(yield_(&first, json!({}), main_ctx()).await["status"], "yielded");
    until("the first store's resume starts", || !resumes(&host).is_empty()).await;
    let resume_run = resumes(&host)[0].run_id.clone();

    // another store (another gateway on the same database) opens while that run goes on
    let host2 = stalled_resumes();
    let second = open_at(db, json!({}), host2.clone()).await;
    let y = yields_of(&second, "agent:main:main").remove(0);
    assert_eq!((y.status.as_str(), y.resume_run_id.as_deref()), ("resuming", Some(resume_run.as_str())));
    // its open recorded no resume run of its own: the newest run going on the session is the first's
    let going = second.engine().store().read(|db| db.running_on("agent:main:main")).unwrap();
    assert_eq!(going.map(|(id, _)| id), Some(resume_run));
    assert!(resumes(&host2).is_empty());
    second.close().await;
    first.close().await;
}
