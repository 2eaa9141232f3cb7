//! `sessions_send` flows past the primary run over a fake host: a reply after the wait timed
//! out, the chain budget across agents, and the announce's delivery (its policy, retries, thread
//! and route).

use super::route::{announce_route, Route};
use super::testkit::*;
use super::*;
use crate::host::testing::FakeHost;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Mutex, OnceLock, Weak};
use std::time::Duration;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_late_reply_after_timeout_still_gets_its_reply_back_and_announce() {
    // The target session is busy for 1.7 s, so the primary (queued behind) outlives the 1 s
    // wait but not its own timeout, which starts when it runs.
    let host = FakeHost::new(|req| {
        let k = kind(&req);
        Box::pin(async move {
            let reply = match k {
                Kind::Other => {
                    tokio::time::sleep(Duration::from_millis(1700)).await;
                    "busy work done"
                }
                Kind::Primary => "late answer",
                Kind::RequesterTurn => "thanks",
                Kind::TargetTurn => "REPLY_SKIP",
                Kind::Announce => "announcing late",
            };
            Ok(json!({ "reply": reply }))
        })
    });
    let (orch, host) = open(two_turns(), host).await;
    let busy = RunSpec {
        session_key: "agent:main:discord:group:slow".into(),
        message: "busy".into(),
        provenance: Provenance { kind: "inter_session", source_session_key: None },
        options: RunOptions::new(Lane::Nested, 10_000, "other-chain"),
        chain_limit: None,
    };
    orch.runs().start(orch.engine().clone(), orch.host().clone(), busy).unwrap().unwrap();
    let out = send(
        &orch,
        json!({"sessionKey": "discord:group:slow", "message": "m", "timeoutSeconds": 1}),
        discord_requester(),
    )
    .await;
    assert_eq!(keys_of(&out), ["runId", "status", "sessionKey"]);
    assert_eq!(out["status"], "timeout");
    flows_end(&host, 1).await;
    assert_eq!(kinds(&host), [Kind::Other, Kind::Primary, Kind::RequesterTurn, Kind::TargetTurn, Kind::Announce]);
    let announce = &host.requests()[4];
    assert!(announce.options.extra_system_prompt.as_deref().unwrap_or_default().contains("Round 1 reply: late answer"));
    eventually("the late announce is delivered", || host.deliveries().len() == 1).await;
    assert_eq!(host.deliveries()[0]["message"], "announcing late");
    assert_eq!(host.deliveries()[0]["to"], "channel:slow");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_chain_budget_holds_across_three_agents_pinging_each_other() {
    const MAX: usize = 5;
    let cell: Arc<OnceLock<Weak<Orchestrator>>> = Arc::default();
    let results: Arc<Mutex<Vec<Value>>> = Arc::default();
    let (c, r) = (cell.clone(), results.clone());
    let host = FakeHost::new(move |req| {
        let (orch, results) = (c.get().and_then(Weak::upgrade), r.clone());
        let k = kind(&req);
        Box::pin(async move {
            if k != Kind::Primary {
                return Ok(json!({"reply": "ANNOUNCE_SKIP"}));
            }
            let next = match req.session_key.as_str() {
                "agent:main:a" => "agent:main:b",
                "agent:main:b" => "agent:main:c",
                _ => "agent:main:a",
            };
            let orch = orch.ok_or("the store is gone")?;
            let ctx = json!({"agentSessionKey": req.session_key, "runId": req.run_id});
            let params = json!({"sessionKey": next, "message": "pass it on", "timeoutSeconds": 0});
            let out = orch
                .tool(crate::tools::Tool::SessionsSend, params, ctx, false)
                .await
                .map_err(|e| e.message().to_owned())?;
            results.lock().unwrap_or_else(|p| p.into_inner()).push(out);
            Ok(json!({"reply": "passed"}))
        })
    });
    let cfg = json!({"session": {"agentToAgent": {"maxPingPongTurns": 0, "maxChainTurns": MAX}}});
    let (orch, host) = open(cfg, host).await;
    let _ = cell.set(Arc::downgrade(&orch));
    let first = send(
        &orch,
        json!({"sessionKey": "agent:main:b", "message": "start", "timeoutSeconds": 0}),
        json!({"agentSessionKey": "agent:main:a"}),
    )
    .await;
    assert_eq!(first["status"], "accepted");
    let limit = chain_limit_text(MAX as u32);
    let forbidden = || {
        results
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .iter()
            .any(|o| o["status"] == "forbidden" && o["error"] == limit.as_str())
    };
    eventually("a send is refused for the chain limit", forbidden).await;
    // every flow has ended: the first one and one per accepted nested send
    let accepted =
        || results.lock().unwrap_or_else(|p| p.into_inner()).iter().filter(|o| o["status"] == "accepted").count();
    eventually("every flow ends", || count(&host, "a2a.end") > accepted()).await;
    let reqs = host.requests();
    let chain = reqs[0].options.chain_id.clone();
    assert!(reqs.iter().all(|r| r.options.chain_id == chain), "nested sends join the chain");
    assert_eq!(reqs.len(), MAX, "the chain holds exactly maxChainTurns runs");
    assert_eq!(limit, "Agent-to-agent chain limit reached (5 turns).");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_reply_back_loop_that_reaches_the_chain_budget_stops_and_skips_the_announce() {
    let cfg = json!({"session": {"agentToAgent": {"maxChainTurns": 3}}});
    let chatty = scripted(|_, _| Ok("more".to_owned()));
    let (orch, host) = open(cfg, chatty).await;
    let out = send(&orch, json!({"sessionKey": "discord:group:t", "message": "m"}), discord_requester()).await;
    assert_eq!(out["status"], "ok");
    flows_end(&host, 1).await;
    assert_eq!(kinds(&host), [Kind::Primary, Kind::RequesterTurn, Kind::TargetTurn]);
    let turns: Vec<Value> =
        host.events().into_iter().filter(|e| e.kind == "a2a.turn").map(|e| e.details["status"].clone()).collect();
    assert_eq!(turns, [json!("ok"), json!("ok"), json!("chain_limit")]);
    let announce = host.events().into_iter().find(|e| e.kind == "a2a.announce").unwrap();
    assert_eq!(announce.details, *json!({"status": "skipped", "reason": "chain_limit"}).as_object().unwrap());
    assert!(host.deliveries().is_empty());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_announce_to_a_target_denied_after_the_primary_is_blocked_at_delivery() {
    let cell: Arc<OnceLock<Weak<Orchestrator>>> = Arc::default();
    let c = cell.clone();
    let host = scripted(move |k, req| {
        if k == Kind::Announce {
            // the owner turns sending off while the announce step runs
            let orch = c.get().and_then(Weak::upgrade).ok_or("gone")?;
            orch.engine()
                .upsert_session(&json!(req.session_key), &json!({"sendPolicy": "deny"}))
                .map_err(|e| e.to_string())?;
            return Ok("announce now".to_owned());
        }
        Ok("REPLY_SKIP".to_owned())
    });
    let (orch, host) = open(Value::Null, host).await;
    let _ = cell.set(Arc::downgrade(&orch));
    let out = send(&orch, json!({"sessionKey": "discord:group:t", "message": "m"}), discord_requester()).await;
    assert_eq!(out["status"], "ok");
    eventually("the delivery is blocked", || count(&host, "delivery.blocked") == 1).await;
    assert!(host.deliveries().is_empty());
    let blocked = host.events().into_iter().find(|e| e.kind == "delivery.blocked").unwrap();
    assert_eq!(blocked.session_key.as_deref(), Some("agent:main:discord:group:t"));
    assert_eq!(blocked.details["reason"], SEND_BLOCKED);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_delivery_that_fails_twice_is_tried_three_times_with_one_idempotency_key() {
    let tries = Arc::new(AtomicUsize::new(0));
    let t = tries.clone();
    let host = scripted(|k, _| Ok(if k == Kind::Announce { "posted" } else { "REPLY_SKIP" }.to_owned())).with_deliver(
        move |_| {
            let n = t.fetch_add(1, Ordering::SeqCst);
            Box::pin(async move {
                if n < 2 {
                    Err("channel down".to_owned())
                } else {
                    Ok(())
                }
            })
        },
    );
    let cfg = json!({"session": {"outbox": {"backoffMs": 10}}});
    let (orch, host) = open(cfg, host).await;
    let out = send(&orch, json!({"sessionKey": "discord:group:t", "message": "m"}), discord_requester()).await;
    assert_eq!(out["status"], "ok");
    eventually("the third try succeeds", || count(&host, "delivery.sent") == 1).await;
    let d = host.deliveries();
    assert_eq!(d.len(), 3);
    assert!(d.iter().all(|x| x["idempotencyKey"] == d[0]["idempotencyKey"]));
    assert_eq!(count(&host, "delivery.failed"), 2);
    assert_eq!(tries.load(Ordering::SeqCst), 3);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_thread_in_the_target_key_is_passed_as_thread_id() {
    let host = scripted(|k, _| Ok(if k == Kind::Announce { "in thread" } else { "REPLY_SKIP" }.to_owned()));
    let (orch, host) = open(Value::Null, host).await;
    let key = "agent:main:slack:channel:c1:thread:1700000000.123";
    let out = send(&orch, json!({"sessionKey": key, "message": "m"}), discord_requester()).await;
    assert_eq!(out["sessionKey"], key);
    eventually("the announce is delivered", || host.deliveries().len() == 1).await;
    let d = &host.deliveries()[0];
    assert_eq!(keys_of(d), ["channel", "to", "threadId", "message", "idempotencyKey", "sessionKey", "kind"]);
    assert_eq!(
        (&d["channel"], &d["to"], &d["threadId"]),
        (&json!("slack"), &json!("channel:c1"), &json!("1700000000.123"))
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn d19_whatsapp_and_direct_targets_take_the_stored_route() {
    let (orch, _host) = open(Value::Null, FakeHost::replying("x")).await;
    let e = orch.engine().clone();
    let wa = "agent:main:whatsapp:group:123@g.us";
    e.upsert_session(
        &json!(wa),
        &json!({"deliveryContext": {"channel": "whatsapp", "to": "123@g.us", "accountId": "work"}}),
    )
    .unwrap();
    let route = announce_route(&e, wa, wa).unwrap();
    assert_eq!(
        route,
        Route { channel: "whatsapp".into(), to: "123@g.us".into(), account_id: Some("work".into()), thread_id: None }
    );
    // without a stored route, the key's own
    let bare = announce_route(&e, "agent:main:whatsapp:group:999@g.us", "agent:main:whatsapp:group:999@g.us").unwrap();
    assert_eq!((bare.channel.as_str(), bare.to.as_str()), ("whatsapp", "group:999@g.us"));
    // a direct session: its last route, thread included
    e.upsert_session(&json!("agent:main:main"), &json!({"lastChannel": "telegram", "lastTo": "42", "lastThreadId": 7}))
        .unwrap();
    let direct = announce_route(&e, "agent:main:main", "main").unwrap();
    assert_eq!(
        direct,
        Route { channel: "telegram".into(), to: "42".into(), account_id: None, thread_id: Some("7".into()) }
    );
    // a discord key needs no lookup, whatever is stored
    e.upsert_session(&json!("agent:main:discord:group:dev"), &json!({"lastChannel": "telegram", "lastTo": "1"}))
        .unwrap();
    let dev = announce_route(&e, "agent:main:discord:group:dev", "agent:main:discord:group:dev").unwrap();
    assert_eq!((dev.channel.as_str(), dev.to.as_str()), ("discord", "channel:dev"));
    assert_eq!(announce_route(&e, "agent:main:nowhere", "agent:main:nowhere"), None);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_announce_for_a_direct_session_goes_to_its_last_route() {
    let host = scripted(|k, _| Ok(if k == Kind::Announce { "to the chat" } else { "REPLY_SKIP" }.to_owned()));
    let (orch, host) = open(Value::Null, host).await;
    orch.engine()
        .upsert_session(
            &json!("agent:main:main"),
            &json!({"lastChannel": "telegram", "lastTo": "42", "lastAccountId": "bot"}),
        )
        .unwrap();
    let out =
        send(&orch, json!({"sessionKey": "main", "message": "m", "timeoutSeconds": 0}), discord_requester()).await;
    assert_eq!(out["status"], "accepted");
    eventually("the announce is delivered", || host.deliveries().len() == 1).await;
    let d = &host.deliveries()[0];
    assert_eq!((&d["channel"], &d["to"], &d["accountId"]), (&json!("telegram"), &json!("42"), &json!("bot")));
    assert_eq!(d["sessionKey"], "agent:main:main");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_target_that_leaves_no_reply_ends_the_flow_quietly() {
    let host = FakeHost::new(|_| {
        Box::pin(async { Ok(json!({"messages": [{"role": "assistant", "content": "plain string"}]})) })
    });
    let (orch, host) = open(Value::Null, host).await;
    let out = send(&orch, json!({"sessionKey": "discord:group:t", "message": "m"}), discord_requester()).await;
    assert_eq!(keys_of(&out), ["runId", "status", "sessionKey", "delivery"]);
    assert_eq!(out["status"], "ok");
    flows_end(&host, 1).await;
    assert_eq!(host.requests().len(), 1);
}
