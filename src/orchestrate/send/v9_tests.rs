//! Tests of `sessions_send` under the 2026.9 contract end to end, with the fake host.

use std::sync::Arc;

use serde_json::{json, Value};

use crate::host::testing::FakeHost;
use crate::host::AgentRunRequest;
use crate::orchestrate::subagents::testkit::until;
use crate::orchestrate::tasks::testkit9::open9;
use crate::orchestrate::Orchestrator;
use crate::tools::send9;
use crate::tools::Tool;

const REQ: &str = "agent:main:main";
const DEV: &str = "agent:main:discord:group:dev";

fn ctx() -> Value {
    json!({"agentSessionKey": REQ, "agentChannel": "whatsapp"})
}

async fn send(o: &Arc<Orchestrator>, params: Value, ctx: Value) -> Value {
    o.tool(Tool::SessionsSend, params, ctx, false).await.unwrap()
}

/// A host: the target answers `reply`, everyone else `REPLY_SKIP` (the ping-pong stops at once).
fn host(reply: &'static str) -> Arc<FakeHost> {
    Arc::new(FakeHost::new(move |req: AgentRunRequest| {
        Box::pin(async move {
            if req.session_key == REQ {
                return Ok(json!({"reply": "REPLY_SKIP"}));
            }
            if reply.is_empty() {
                return Ok(json!({"messages": []}));
            }
            Ok(json!({"reply": reply}))
        })
    }))
}

fn keys(v: &Value) -> Vec<String> {
    v.as_object().unwrap().keys().cloned().collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_waited_send_answers_ok_with_its_run_id_and_the_message_is_annotated() {
    let h = host("deploy done");
    let o = open9(json!({}), h.clone()).await;
    let out = send(&o, json!({"sessionKey": DEV, "message": "Did deploy 42 finish?"}), ctx()).await;
    assert_eq!(keys(&out), ["runId", "sessionKey", "status", "delivery", "reply"]);
    assert_eq!((out["status"].as_str(), out["reply"].as_str()), (Some("ok"), Some("deploy done")));
    assert_eq!(out["delivery"], json!({"status": "pending", "mode": "announce"}));
    let first = &h.requests()[0];
    assert_eq!(first.run_id, out["runId"].as_str().unwrap());
    assert!(first.message.starts_with("[Inter-session message] sourceSession=agent:main:main sourceChannel=whatsapp sourceTool=sessions_send isUser=false\n"));
    assert!(first.message.ends_with("\nDid deploy 42 finish?"));
    assert_eq!(
        first.options.extra_system_prompt.as_deref(),
        Some("Agent-to-agent message context:\nAgent 1 (requester) session: <REQUESTER_SESSION>.\nAgent 1 (requester) channel: whatsapp.\nAgent 2 (target) session: <TARGET_SESSION>.")
    );
    o.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn no_reply_error_and_fire_and_forget_have_their_2026_9_shapes() {
    let o = open9(json!({}), host("")).await;
    let out = send(&o, json!({"sessionKey": DEV, "message": "hi"}), ctx()).await;
    assert_eq!(keys(&out), ["runId", "sessionKey", "status", "message"]);
    assert_eq!(out["message"], send9::NO_REPLY_MESSAGE);
    let fire = send(&o, json!({"sessionKey": DEV, "message": "hi", "timeoutSeconds": 0, "watch": true}), ctx()).await;
    assert_eq!(keys(&fire), ["runId", "status", "sessionKey", "targetDisposition", "delivery", "watched"]);
    assert_eq!((fire["status"].as_str(), fire["targetDisposition"].as_str()), (Some("accepted"), Some("queued")));
    assert_eq!(fire["watched"], true, "the requester now watches the target");
    o.close().await;

    let failing = Arc::new(FakeHost::new(|_| Box::pin(async { Err("model exploded".to_owned()) })));
    let o = open9(json!({}), failing).await;
    let out = send(&o, json!({"sessionKey": DEV, "message": "hi"}), ctx()).await;
    assert_eq!(keys(&out), ["runId", "status", "error", "sentBeforeError", "sessionKey"]);
    assert_eq!((out["status"].as_str(), out["error"].as_str()), (Some("error"), Some("model exploded")));
    o.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_wait_that_runs_out_is_accepted_and_the_late_reply_still_gets_its_flow() {
    let h = Arc::new(FakeHost::new(|req: AgentRunRequest| {
        Box::pin(async move {
            if req.session_key == DEV
                && req.options.extra_system_prompt.as_deref().unwrap_or("").starts_with("Agent-to-agent message")
            {
                tokio::time::sleep(std::time::Duration::from_millis(1500)).await;
                return Ok(json!({"reply": "late"}));
            }
            Ok(json!({"reply": "REPLY_SKIP"}))
        })
    }));
    let o = open9(json!({}), h.clone()).await;
    let out = send(&o, json!({"sessionKey": DEV, "message": "slow one", "timeoutSeconds": 1}), ctx()).await;
    assert_eq!((out["status"].as_str(), out["targetDisposition"].as_str()), (Some("accepted"), Some("queued")));
    assert_eq!(out["delivery"]["status"], "pending");
    // the late reply reaches the requester's reply step
    until("the reply step", || h.requests().iter().any(|r| r.session_key == REQ && r.message == "late")).await;
    o.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_2026_9_refusals_have_their_texts() {
    let h = host("x");
    let o = open9(json!({}), h.clone()).await;
    let err = |v: &Value| v["error"].as_str().unwrap_or_default().to_owned();
    assert_eq!(err(&send(&o, json!({"sessionKey": REQ, "message": "me"}), ctx()).await), send9::SELF_TARGET);
    let thread = send(&o, json!({"sessionKey": "agent:main:discord:channel:1:thread:2", "message": "t"}), ctx()).await;
    assert_eq!(err(&thread), send9::THREAD_TARGET);
    assert!(thread["runId"].is_string());
    let resume = send(&o, json!({"sessionKey": DEV, "message": "r", "mode": "resume"}), json!({})).await;
    assert_eq!((resume["status"].as_str(), err(&resume)), (Some("forbidden"), send9::RESUME_NEEDS_CALLER.to_owned()));
    let missing = send(&o, json!({"sessionKey": DEV, "message": "r", "mode": "resume"}), ctx()).await;
    assert_eq!(err(&missing), send9::MISSING_SESSION);
    o.engine().upsert_session(&json!(DEV), &json!({})).unwrap();
    let not_paused = send(&o, json!({"sessionKey": DEV, "message": "r", "mode": "resume"}), ctx()).await;
    assert_eq!(
        (not_paused["status"].as_str(), err(&not_paused), not_paused["sessionKey"].as_str()),
        (Some("error"), send9::RESUME_NEEDS_PAUSED.to_owned(), Some(DEV))
    );
    o.engine().upsert_session(&json!(DEV), &json!({"archivedAt": 5})).unwrap();
    let archived = send(&o, json!({"sessionKey": DEV, "message": "r", "mode": "resume"}), ctx()).await;
    assert_eq!(err(&archived), send9::RESUME_NEEDS_CHILD);
    let waited = o
        .tool(
            Tool::SessionsSend,
            json!({"sessionKey": DEV, "message": "r", "mode": "resume", "watch": true}),
            ctx(),
            false,
        )
        .await;
    assert_eq!(err(&waited.unwrap()), send9::RESUME_ADMISSION_ONLY);
    assert_eq!(
        err(&send(&o, json!({"agentId": "ghost", "message": "m"}), ctx()).await),
        "Agent \"ghost\" not found. Run openclaw agents list to see configured agents."
    );
    assert_eq!(
        err(&send(&o, json!({"message": "m", "mode": "shout", "sessionKey": DEV}), ctx()).await),
        send9::BAD_MODE
    );
    assert_eq!(
        err(&send(&o, json!({"sessionKey": "agent:main:nobody", "message": "n", "mode": "notify"}), ctx()).await),
        send9::MISSING_SESSION
    );
    assert!(h.requests().is_empty(), "no refusal started a run");
    o.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_agent_id_alone_targets_that_agents_main_session_created_on_demand() {
    let h = host("from ops");
    let cfg = json!({"agents": {"ownership": "explicit", "entries": {"main": {"default": true}, "ops": {}}}});
    let o = open9(cfg, h.clone()).await;
    let out = send(&o, json!({"agentId": "ops", "message": "status?"}), ctx()).await;
    assert_eq!(out["status"], "ok", "{out}");
    assert_eq!(h.requests()[0].session_key, "agent:ops:main");
    assert!(o.engine().get_session(&json!("agent:ops:main")).unwrap().is_some());
    o.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn notify_queues_for_the_next_turn_and_steer_goes_through_the_host() {
    let h = host("x");
    let o = open9(json!({}), h.clone()).await;
    o.engine().upsert_session(&json!(DEV), &json!({})).unwrap();
    let q = send(&o, json!({"sessionKey": DEV, "message": "fyi", "mode": "notify"}), ctx()).await;
    assert_eq!(keys(&q), ["status", "sessionKey", "notificationId", "durability", "runStarted"]);
    assert_eq!((q["durability"].as_str(), q["runStarted"].as_bool()), (Some("process"), Some(false)));
    let (_, _, page) = o.engine().chat_history(&json!(DEV), &json!({"limit": 5})).unwrap();
    assert_eq!(page.messages.len(), 1);
    assert!(page.messages[0].json.contains("fyi") && page.messages[0].json.contains("inter_session"));
    assert!(h.requests().is_empty(), "notify starts no run");
    let no_steer = send(&o, json!({"sessionKey": DEV, "message": "now", "mode": "steer"}), ctx()).await;
    assert_eq!(no_steer["error"], send9::NO_ACTIVE_RUN);
    o.close().await;

    let steering = Arc::new(FakeHost::replying("x").with_steer(|_, _| Box::pin(async { Ok(true) })));
    let o = open9(json!({}), steering.clone()).await;
    o.engine().upsert_session(&json!(DEV), &json!({})).unwrap();
    let s = send(&o, json!({"sessionKey": DEV, "message": "now", "mode": "steer", "timeoutSeconds": 30}), ctx()).await;
    assert_eq!((s["status"].as_str(), s["targetDisposition"].as_str()), (Some("accepted"), Some("steered")));
    assert_eq!(s["delivery"]["status"], "skipped");
    let steers = steering.steers.lock().unwrap().clone();
    assert_eq!(steers[0].0, DEV);
    assert!(steers[0].1.ends_with("\nnow"));
    o.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_sub_agent_target_answers_once_and_a_sub_agent_requester_gets_no_flow() {
    let child = "agent:main:subagent:abc";
    let h = Arc::new(FakeHost::new(move |req: AgentRunRequest| {
        Box::pin(async move { Ok(json!({"reply": if req.session_key == child { "child result" } else { "noted" }})) })
    }));
    let o = open9(json!({}), h.clone()).await;
    let out = send(&o, json!({"sessionKey": child, "message": "go", "timeoutSeconds": 0}), ctx()).await;
    assert_eq!(out["delivery"]["status"], "pending");
    until("the one-way handoff", || h.requests().iter().any(|r| r.session_key == REQ)).await;
    tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    let on_requester: Vec<_> = h.requests().into_iter().filter(|r| r.session_key == REQ).collect();
    assert_eq!(on_requester.len(), 1, "once, no ping-pong");
    assert_eq!(on_requester[0].message, "child result");
    assert!(on_requester[0]
        .options
        .extra_system_prompt
        .as_deref()
        .unwrap()
        .starts_with("A child session returned the result"));
    assert!(h.requests().iter().all(|r| r.message != "Agent-to-agent announce step."), "no announce step");
    // a waited send to a sub-agent: the reply comes back in the result, nothing is handed over
    let waited = send(&o, json!({"sessionKey": child, "message": "again"}), ctx()).await;
    assert_eq!((waited["status"].as_str(), waited["delivery"]["status"].as_str()), (Some("ok"), Some("skipped")));
    o.close().await;

    let h = host("x");
    let o = open9(json!({}), h.clone()).await;
    let sub = json!({"agentSessionKey": "agent:main:subagent:me"});
    let out = send(&o, json!({"sessionKey": DEV, "message": "m"}), sub).await;
    assert_eq!(out["delivery"]["status"], "skipped");
    assert!(h.requests()[0].options.extra_system_prompt.is_none(), "no agent-to-agent context for a sub-agent");
    tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    assert_eq!(h.requests().len(), 1, "no reply steps, no announce");
    o.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_peer_flow_uses_the_2026_9_blocks_five_turns_and_every_skip_token() {
    let h = Arc::new(FakeHost::new(|req: AgentRunRequest| {
        Box::pin(async move {
            let prompt = req.options.extra_system_prompt.clone().unwrap_or_default();
            let reply = if prompt.starts_with("Agent-to-agent announce step:") {
                "HEARTBEAT_OK"
            } else if req.session_key == REQ {
                "NO_REPLY"
            } else {
                "initial"
            };
            Ok(json!({"reply": reply}))
        })
    }));
    let o = open9(json!({}), h.clone()).await;
    let out = send(&o, json!({"sessionKey": DEV, "message": "hello"}), ctx()).await;
    assert_eq!(out["status"], "ok");
    until("the announce step", || h.requests().iter().any(|r| r.message == "Agent-to-agent announce step.")).await;
    let reqs = h.requests();
    let step = reqs.iter().find(|r| r.session_key == REQ).unwrap();
    assert!(step.options.extra_system_prompt.as_deref().unwrap().starts_with(
        "Agent-to-agent reply step:\nCurrent agent: Agent 1 (requester).\nTurn 1 of 5.\nAgent 1 (requester) session: <REQUESTER_SESSION>."
    ));
    assert_eq!(reqs.iter().filter(|r| r.session_key == REQ).count(), 1, "NO_REPLY ends the ping-pong");
    let announce = reqs.iter().find(|r| r.message == "Agent-to-agent announce step.").unwrap();
    assert!(announce
        .options
        .extra_system_prompt
        .as_deref()
        .unwrap()
        .contains("Any other reply is recorded in the target session. External delivery is attempted only if the target has a delivery route."));
    tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    assert!(h.deliveries().is_empty(), "HEARTBEAT_OK is never delivered");
    o.close().await;
}
