//! `sessions_send` end to end over a fake host (REFERENCE.md §5 scenarios D1–D22): the
//! primary run, its parameters, policies, timeouts and the ping-pong steps.

use super::testkit::*;
use super::*;
use crate::host::testing::FakeHost;
use std::time::Duration;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn d1_fire_and_forget_is_accepted_and_the_flow_makes_four_nested_webchat_runs() {
    let (orch, host) = open(two_turns(), ping_pong_host("initial")).await;
    let out =
        send(&orch, json!({"sessionKey": "main", "message": "ping", "timeoutSeconds": 0}), discord_requester()).await;
    assert_eq!(keys_of(&out), ["runId", "status", "sessionKey", "delivery"]);
    assert_eq!(out["status"], "accepted");
    assert_eq!(out["sessionKey"], "main");
    assert_eq!(out["delivery"], json!({"status": "pending", "mode": "announce"}));
    flows_end(&host, 1).await;
    let reqs = host.requests();
    assert_eq!(out["runId"], reqs[0].run_id.as_str(), "runId is the primary run's id");
    assert_eq!(kinds(&host), [Kind::Primary, Kind::RequesterTurn, Kind::TargetTurn, Kind::Announce]);
    let sessions: Vec<&str> = reqs.iter().map(|r| r.session_key.as_str()).collect();
    assert_eq!(sessions, ["agent:main:main", "agent:main:discord:group:req", "agent:main:main", "agent:main:main"]);
    for r in &reqs {
        assert_eq!(
            (r.options.lane, r.options.channel.as_deref(), r.options.deliver),
            (Lane::Nested, Some("webchat"), false)
        );
        assert_eq!(r.options.chain_id, reqs[0].options.chain_id);
    }
    // a fire-and-forget primary runs with the agents' default timeout
    assert_eq!(reqs[0].options.timeout_ms, 600_000);
    assert!(host.deliveries().is_empty());
    assert_eq!(count(&host, "a2a.turn"), 2);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn d2_wait_mode_returns_the_reply_and_the_flow_shows_all_three_prompts() {
    let (orch, host) = open(two_turns(), ping_pong_host("done")).await;
    let out =
        send(&orch, json!({"sessionKey": "main", "message": " ping ", "timeoutSeconds": 1}), discord_requester()).await;
    assert_eq!(keys_of(&out), ["runId", "status", "reply", "sessionKey", "delivery"]);
    assert_eq!(
        (out["status"].as_str(), out["reply"].as_str(), out["sessionKey"].as_str()),
        (Some("ok"), Some("done"), Some("main"))
    );
    assert_eq!(out["delivery"], json!({"status": "pending", "mode": "announce"}));
    flows_end(&host, 1).await;
    let reqs = host.requests();
    assert_eq!(reqs.len(), 4);
    assert_eq!(reqs[0].message, "ping", "the message is trimmed");
    assert_eq!(reqs[0].options.timeout_ms, 1000);
    assert_eq!(
        reqs[0].options.extra_system_prompt.as_deref(),
        Some(
            "Agent-to-agent message context:\nAgent 1 (requester) session: discord:group:req.\n\
             Agent 1 (requester) channel: discord.\nAgent 2 (target) session: main."
        )
    );
    assert_eq!(
        reqs[1].options.extra_system_prompt.as_deref(),
        Some(
            "Agent-to-agent reply step:\nCurrent agent: Agent 1 (requester).\nTurn 1 of 2.\n\
             Agent 1 (requester) session: discord:group:req.\nAgent 1 (requester) channel: discord.\n\
             Agent 2 (target) session: main.\nAgent 2 (target) channel: unknown.\n\
             If you want to stop the ping-pong, reply exactly \"REPLY_SKIP\"."
        )
    );
    assert_eq!((reqs[1].message.as_str(), reqs[2].message.as_str()), ("done", "pong"));
    assert!(reqs[2].options.extra_system_prompt.as_deref().unwrap_or_default().contains("Turn 2 of 2."));
    assert_eq!(reqs[3].message, "Agent-to-agent announce step.");
    assert_eq!(
        reqs[3].options.extra_system_prompt.as_deref(),
        Some(
            "Agent-to-agent announce step:\nAgent 1 (requester) session: discord:group:req.\n\
             Agent 1 (requester) channel: discord.\nAgent 2 (target) session: main.\n\
             Agent 2 (target) channel: unknown.\nOriginal request: ping\nRound 1 reply: done\n\
             Latest reply: pong\nIf you want to remain silent, reply exactly \"ANNOUNCE_SKIP\".\n\
             Any other reply will be posted to the target channel.\n\
             After this reply, the agent-to-agent conversation is over."
        )
    );
    // each run's incoming message names the other side as its source
    let (_, _, page) = orch.engine().chat_history(&json!("agent:main:discord:group:req"), &Value::Null).unwrap();
    let first: Value = serde_json::from_str(&page.messages[0].json).unwrap();
    assert_eq!(first["provenance"]["kind"], "inter_session");
    assert_eq!(first["provenance"]["sourceSessionKey"], "agent:main:main");
    let (_, _, page) = orch.engine().chat_history(&json!("agent:main:main"), &Value::Null).unwrap();
    let first: Value = serde_json::from_str(&page.messages[0].json).unwrap();
    assert_eq!(first["provenance"]["sourceSessionKey"], "agent:main:discord:group:req");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn d3_a_group_target_gets_its_announce_delivered_to_its_channel() {
    let host = scripted(|k, _| {
        Ok(match k {
            Kind::Primary => "initial",
            Kind::RequesterTurn => "pong-1",
            Kind::TargetTurn => "pong-2",
            _ => "announce now",
        }
        .to_owned())
    });
    let (orch, host) = open(two_turns(), host).await;
    let out = send(&orch, json!({"sessionKey": "discord:group:target", "message": "hi"}), discord_requester()).await;
    assert_eq!(out["status"], "ok");
    assert_eq!(out["reply"], "initial");
    // echoed as given, as the gateway echoes a key it did not look up (issue 12)
    assert_eq!(out["sessionKey"], "discord:group:target");
    flows_end(&host, 1).await;
    assert_eq!(kinds(&host), [Kind::Primary, Kind::RequesterTurn, Kind::TargetTurn, Kind::Announce]);
    let announce = &host.requests()[3];
    let ctx = announce.options.extra_system_prompt.clone().unwrap_or_default();
    assert!(ctx.contains("Agent 2 (target) channel: discord.\n") && ctx.contains("Latest reply: pong-2"), "{ctx}");
    eventually("the announce is delivered", || count(&host, "delivery.sent") == 1).await;
    let d = host.deliveries();
    assert_eq!(d.len(), 1);
    assert_eq!(keys_of(&d[0]), ["channel", "to", "message", "idempotencyKey", "sessionKey", "kind"]);
    assert_eq!(
        (&d[0]["channel"], &d[0]["to"], &d[0]["message"], &d[0]["sessionKey"], &d[0]["kind"]),
        (
            &json!("discord"),
            &json!("channel:target"),
            &json!("announce now"),
            &json!("agent:main:discord:group:target"),
            &json!("a2a_announce")
        )
    );
    assert!(is_uuid(&d[0]["idempotencyKey"]));
    let queued = host.events().into_iter().find(|e| e.kind == "a2a.announce").unwrap();
    assert_eq!(queued.details["status"], "queued");
    assert_eq!(queued.details["idempotencyKey"], d[0]["idempotencyKey"]);
}

/// D4: the requester's first turn says `REPLY_SKIP`; the announce step answers `announce`. The
/// orchestrator is returned too: the announce is delivered by its outbox worker after `a2a.end`,
/// and a dropped orchestrator stops that worker (as a closed store would).
async fn d4_case(announce: &'static str) -> (Arc<Orchestrator>, Arc<FakeHost>) {
    let host = scripted(move |k, _| {
        Ok(match k {
            Kind::Primary => "initial",
            Kind::RequesterTurn => "  REPLY_SKIP \n",
            Kind::TargetTurn => "never asked",
            _ => announce,
        }
        .to_owned())
    });
    let (orch, host) = open(Value::Null, host).await;
    let out = send(&orch, json!({"sessionKey": "discord:group:target", "message": "hi"}), discord_requester()).await;
    assert_eq!(out["status"], "ok");
    flows_end(&host, 1).await;
    assert_eq!(kinds(&host), [Kind::Primary, Kind::RequesterTurn, Kind::Announce]);
    (orch, host)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn d4_reply_skip_ends_the_loop_announce_skip_posts_nothing_other_replies_post_trimmed() {
    let (_orch, host) = d4_case("ANNOUNCE_SKIP").await;
    let skipped = host.events().into_iter().find(|e| e.kind == "a2a.announce").unwrap();
    assert_eq!(skipped.details["status"], "skipped");
    assert!(host.deliveries().is_empty());

    let (_orch, host) = d4_case("  hello ").await;
    eventually("the announce is delivered", || host.deliveries().len() == 1).await;
    assert_eq!(host.deliveries()[0]["message"], "hello");
    // "REPLY_SKIP now" is not a skip
    assert!(!prompts::is_reply_skip("REPLY_SKIP now"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn d5_d6_d7_t2_target_parameter_errors() {
    let (orch, host) = open(Value::Null, FakeHost::replying("x")).await;
    let both = send(&orch, json!({"sessionKey": "main", "label": "w", "message": "m"}), Value::Null).await;
    assert_eq!(keys_of(&both), ["runId", "status", "error"]);
    assert_eq!((&both["status"], &both["error"]), (&json!("error"), &json!(BOTH_GIVEN)));
    assert!(is_uuid(&both["runId"]));
    let neither = send(&orch, json!({"message": "m", "label": "  "}), Value::Null).await;
    assert_eq!(neither["error"], NONE_GIVEN);
    let unknown = send(&orch, json!({"label": "nobody", "message": "m"}), Value::Null).await;
    assert_eq!(
        (&unknown["status"], &unknown["error"]),
        (&json!("error"), &json!("No session found with label: nobody"))
    );
    for params in [
        json!({"sessionKey": "main"}),
        json!({"sessionKey": "main", "message": "   "}),
        json!({"sessionKey": "main", "message": 5}),
    ] {
        let out = send(&orch, params, Value::Null).await;
        assert_eq!(out, json!({"status": "error", "tool": "sessions_send", "error": "message required"}));
    }
    assert!(host.requests().is_empty());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn d8_a_label_resolves_to_its_session() {
    let (orch, host) = open(Value::Null, FakeHost::replying("labeled response")).await;
    orch.engine().patch_session(&json!({"key": "test-labeled-session", "label": "my-test-worker"})).unwrap();
    let out = send(&orch, json!({"label": "my-test-worker", "message": "hi", "timeoutSeconds": 5}), Value::Null).await;
    assert_eq!(out["status"], "ok");
    assert_eq!(out["reply"], "labeled response");
    assert_eq!(out["sessionKey"], "agent:main:test-labeled-session");
    flows_end(&host, 1).await;
    // no requester: no requester lines, no reply-back loop, only the announce step
    assert_eq!(kinds(&host), [Kind::Primary, Kind::Announce]);
    assert_eq!(
        host.requests()[0].options.extra_system_prompt.as_deref(),
        Some("Agent-to-agent message context:\nAgent 2 (target) session: agent:main:test-labeled-session.")
    );
    assert_eq!(count(&host, "a2a.turn"), 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn d9_cross_agent_sends_follow_the_agent_to_agent_policy_and_make_no_run() {
    let requester = json!({"agentSessionKey": "agent:main:main"});
    let (orch, host) = open(Value::Null, FakeHost::replying("x")).await;
    let out = send(&orch, json!({"sessionKey": "agent:other:main", "message": "m"}), requester.clone()).await;
    assert_eq!(keys_of(&out), ["runId", "status", "error", "sessionKey"]);
    assert_eq!(
        (&out["status"], &out["error"], &out["sessionKey"]),
        (&json!("forbidden"), &json!(A2A_DISABLED), &json!("agent:other:main"))
    );
    let by_label = send(&orch, json!({"label": "w", "agentId": "other", "message": "m"}), requester.clone()).await;
    assert_eq!((&by_label["status"], &by_label["error"]), (&json!("forbidden"), &json!(A2A_DISABLED)));
    assert!(host.requests().is_empty());

    let cfg = json!({"tools": {"agentToAgent": {"enabled": true, "allow": ["main"]}}});
    let (orch, host) = open(cfg, FakeHost::replying("x")).await;
    let out = send(&orch, json!({"sessionKey": "agent:other:main", "message": "m"}), requester.clone()).await;
    assert_eq!((&out["status"], &out["error"]), (&json!("forbidden"), &json!(A2A_DENIED)));
    assert!(host.requests().is_empty());

    let cfg = json!({"tools": {"agentToAgent": {"enabled": true}}});
    let (orch, host) = open(cfg, FakeHost::replying("x")).await;
    let out =
        send(&orch, json!({"sessionKey": "agent:other:main", "message": "m", "timeoutSeconds": 0}), requester).await;
    assert_eq!(out["status"], "accepted");
    eventually("the primary runs", || !host.requests().is_empty()).await;
    assert_eq!(host.requests()[0].session_key, "agent:other:main");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn d10_x3_a_sandboxed_requester_reaches_only_its_children() {
    let sandboxed = json!({"agentSessionKey": "agent:main:main", "sandboxed": true});
    let (orch, host) = open(Value::Null, FakeHost::replying("child here")).await;
    let out = send(&orch, json!({"label": "w", "agentId": "other", "message": "m"}), sandboxed.clone()).await;
    assert_eq!((&out["status"], &out["error"]), (&json!("forbidden"), &json!(SANDBOX_LABEL_LOOKUP)));
    let out = send(&orch, json!({"sessionKey": "agent:main:stranger", "message": "m"}), sandboxed.clone()).await;
    assert_eq!(
        (&out["status"], &out["error"], &out["sessionKey"]),
        (
            &json!("forbidden"),
            &json!("Session not visible from this sandboxed agent session: agent:main:stranger"),
            &json!("agent:main:stranger")
        )
    );
    orch.engine().patch_session(&json!({"key": "agent:main:stranger", "label": "w"})).unwrap();
    let out = send(&orch, json!({"label": "w", "message": "m"}), sandboxed.clone()).await;
    assert_eq!(out["error"], "Session not visible from this sandboxed agent session: label=w");
    let out = send(&orch, json!({"sessionKey": "no-such-id", "message": "m"}), sandboxed.clone()).await;
    assert_eq!(out["error"], "Session not visible from this sandboxed agent session: no-such-id");
    assert!(host.requests().is_empty());

    orch.engine()
        .patch_session(&json!({"key": "agent:main:subagent:kid", "label": "kid", "spawnedBy": "agent:main:main"}))
        .unwrap();
    let out = send(&orch, json!({"label": "kid", "message": "m", "timeoutSeconds": 5}), sandboxed.clone()).await;
    assert_eq!((&out["status"], &out["reply"]), (&json!("ok"), &json!("child here")));
    let out =
        send(&orch, json!({"sessionKey": "agent:main:subagent:kid", "message": "m", "timeoutSeconds": 5}), sandboxed)
            .await;
    assert_eq!(out["status"], "ok");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn d11_a_failed_run_is_an_error_with_its_message_or_agent_error_and_starts_no_flow() {
    let host = FakeHost::new(|req| {
        let err = if req.message == "silent" { String::new() } else { "model down".to_owned() };
        Box::pin(async move { Err(err) })
    });
    let (orch, host) = open(Value::Null, host).await;
    let out = send(&orch, json!({"sessionKey": "discord:group:t", "message": "silent"}), discord_requester()).await;
    assert_eq!(keys_of(&out), ["runId", "status", "error", "sessionKey"]);
    assert_eq!((&out["status"], &out["error"]), (&json!("error"), &json!("agent error")));
    let out = send(&orch, json!({"sessionKey": "discord:group:t", "message": "loud"}), discord_requester()).await;
    assert_eq!((&out["status"], &out["error"]), (&json!("error"), &json!("model down")));
    tokio::time::sleep(Duration::from_millis(100)).await;
    assert_eq!(host.requests().len(), 2);
    assert_eq!(count(&host, "a2a.end"), 0, "no flow after an error");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn d11_a_run_that_outlives_its_wait_and_its_timeout_is_a_timeout_with_no_flow() {
    let host = FakeHost::new(|_| {
        Box::pin(async {
            tokio::time::sleep(Duration::from_millis(3000)).await;
            Ok(json!({"reply": "too late"}))
        })
    });
    // the wait ends at timeoutSeconds (1 s); the run may go on to the agents' default
    // timeout (2 s here), which it outlives too
    let (orch, host) = open(json!({"agents": {"defaults": {"timeoutSeconds": 2}}}), host).await;
    let out =
        send(&orch, json!({"sessionKey": "discord:group:t", "message": "m", "timeoutSeconds": 1}), discord_requester())
            .await;
    assert_eq!(out["status"], "timeout");
    assert_eq!(out["sessionKey"], "discord:group:t");
    // the run is aborted at the default timeout and never replied: nothing follows
    eventually("the run is aborted", || count(&host, "run.timeout") == 1).await;
    tokio::time::sleep(Duration::from_millis(200)).await;
    assert_eq!(host.requests().len(), 1);
    assert!(host.deliveries().is_empty());
    for end in host.events().into_iter().filter(|e| e.kind == "a2a.end") {
        assert_eq!(end.details["reason"], "no reply");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn d13_a_target_whose_policy_denies_gets_no_run() {
    let (orch, host) = open(Value::Null, FakeHost::replying("x")).await;
    orch.engine().upsert_session(&json!("agent:main:quiet"), &json!({"sendPolicy": "deny"})).unwrap();
    let out = send(&orch, json!({"sessionKey": "agent:main:quiet", "message": "m"}), discord_requester()).await;
    assert_eq!(keys_of(&out), ["runId", "status", "error", "sessionKey"]);
    assert_eq!(
        (&out["status"], &out["error"], &out["sessionKey"]),
        (&json!("error"), &json!(SEND_BLOCKED), &json!("agent:main:quiet"))
    );
    assert!(host.requests().is_empty());
    assert_eq!(count(&host, "send.blocked"), 1);

    let cfg = json!({"session": {"sendPolicy": {"rules": [{"action": "deny", "match": {"keyPrefix": "cron:"}}]}}});
    let (orch, host) = open(cfg, FakeHost::replying("x")).await;
    let out = send(&orch, json!({"sessionKey": "cron:job-1", "message": "m", "timeoutSeconds": 0}), Value::Null).await;
    assert_eq!(out["error"], SEND_BLOCKED);
    assert!(host.requests().is_empty());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn d15_max_ping_pong_turns_bounds_the_reply_steps() {
    let chatty = || scripted(|k, _| Ok(if k == Kind::Announce { "ANNOUNCE_SKIP" } else { "more" }.to_owned()));
    for (turns, expected) in [(json!(5), 5), (Value::Null, 5), (json!(2), 2), (json!(0), 0)] {
        let (orch, host) = open(json!({"session": {"agentToAgent": {"maxPingPongTurns": turns}}}), chatty()).await;
        let out = send(
            &orch,
            json!({"sessionKey": "agent:main:t", "message": "m", "timeoutSeconds": 0}),
            discord_requester(),
        )
        .await;
        assert_eq!(out["status"], "accepted");
        flows_end(&host, 1).await;
        let steps = kinds(&host).iter().filter(|k| matches!(k, Kind::RequesterTurn | Kind::TargetTurn)).count();
        assert_eq!(steps, expected, "maxPingPongTurns {turns}");
        assert_eq!(kinds(&host).last(), Some(&Kind::Announce));
        if expected > 0 {
            let last = &host.requests()[expected];
            let ctx = last.options.extra_system_prompt.clone().unwrap_or_default();
            assert!(ctx.contains(&format!("Turn {expected} of {expected}.")), "{ctx}");
        }
    }
}

#[test]
fn d16_timeouts_are_floored_clamped_and_default_to_30_seconds() {
    let t = |v: Value| Timing::of(&json!({ "timeoutSeconds": v }));
    assert_eq!(t(json!(0)), Timing { timeout_seconds: 0, timeout_ms: 0, announce_timeout_ms: 30_000 });
    assert_eq!(t(json!(1.9)), Timing { timeout_seconds: 1, timeout_ms: 1000, announce_timeout_ms: 1000 });
    assert_eq!(Timing::of(&json!({})).timeout_ms, 30_000);
    assert_eq!(t(json!("10")).timeout_ms, 30_000, "strings are ignored");
    assert_eq!(t(json!(-5)).timeout_seconds, 0);
    assert_eq!(t(json!(1e300)).timeout_ms, u64::MAX);
    assert_eq!(t(json!(0)).step_wait_ms(), 30_000);
    assert_eq!(t(json!(120)).step_wait_ms(), 60_000);
    assert_eq!(t(json!(5)).step_wait_ms(), 5_000);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn d16_the_primary_runs_with_the_send_timeout_or_the_agents_default() {
    let cfg =
        json!({"agents": {"defaults": {"timeoutSeconds": 42}}, "session": {"agentToAgent": {"maxPingPongTurns": 0}}});
    let (orch, host) = open(cfg, FakeHost::replying("ANNOUNCE_SKIP")).await;
    send(&orch, json!({"sessionKey": "agent:main:t", "message": "m", "timeoutSeconds": 1.9}), Value::Null).await;
    send(&orch, json!({"sessionKey": "agent:main:t", "message": "m", "timeoutSeconds": 0}), Value::Null).await;
    flows_end(&host, 2).await;
    let primaries: Vec<u64> =
        host.requests().iter().filter(|r| kind(r) == Kind::Primary).map(|r| r.options.timeout_ms).collect();
    assert_eq!(primaries, [1000, 42_000]);
    let announces: Vec<u64> =
        host.requests().iter().filter(|r| kind(r) == Kind::Announce).map(|r| r.options.timeout_ms).collect();
    assert_eq!(announces, [42_000, 42_000]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn d14_a_run_that_ends_before_the_wait_begins_is_ok_and_huge_timeouts_are_fine() {
    let (orch, host) = open(Value::Null, FakeHost::replying("pong")).await;
    for timeout in [json!(30), json!(1e300)] {
        let out =
            send(&orch, json!({"sessionKey": "main", "message": "ping", "timeoutSeconds": timeout}), Value::Null).await;
        assert_eq!((&out["status"], &out["reply"], &out["sessionKey"]), (&json!("ok"), &json!("pong"), &json!("main")));
    }
    flows_end(&host, 2).await;
    let primary = &host.requests()[0];
    assert_eq!((primary.options.lane, primary.session_key.as_str()), (Lane::Nested, "agent:main:main"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_reply_step_into_a_denied_session_ends_the_loop_and_the_announce_still_runs() {
    let host = scripted(|k, _| Ok(if k == Kind::Announce { "summary" } else { "more" }.to_owned()));
    let (orch, host) = open(Value::Null, host).await;
    orch.engine().upsert_session(&json!("discord:group:req"), &json!({"sendPolicy": "deny"})).unwrap();
    let out = send(&orch, json!({"sessionKey": "discord:group:t", "message": "m"}), discord_requester()).await;
    assert_eq!(out["status"], "ok");
    flows_end(&host, 1).await;
    assert_eq!(kinds(&host), [Kind::Primary, Kind::Announce]);
    let turn = host.events().into_iter().find(|e| e.kind == "a2a.turn").unwrap();
    assert_eq!(turn.details["status"], "blocked");
    let blocked = host.events().into_iter().find(|e| e.kind == "send.blocked").unwrap();
    assert_eq!(blocked.session_key.as_deref(), Some("agent:main:discord:group:req"));
    eventually("the announce is delivered", || host.deliveries().len() == 1).await;
    assert_eq!(host.deliveries()[0]["message"], "summary");
}

#[test]
fn a_runs_reply_is_read_from_its_own_messages() {
    let incoming =
        |run: &str| json!({"role": "user", "content": [{"type": "text", "text": "q"}], "provenance": {"runId": run}});
    let said = |t: &str| json!({"role": "assistant", "content": [{"type": "text", "text": t}]});
    let msgs = vec![incoming("r1"), said("first"), incoming("r2"), said("second")];
    assert_eq!(reply::latest_assistant_reply(run_messages(&msgs, "r1")).as_deref(), Some("first"));
    assert_eq!(reply::latest_assistant_reply(run_messages(&msgs, "r2")).as_deref(), Some("second"));
    // a later run that has only just begun hides nothing
    let msgs = vec![incoming("r1"), said("first"), incoming("r2")];
    assert_eq!(reply::latest_assistant_reply(run_messages(&msgs, "r1")).as_deref(), Some("first"));
    assert_eq!(reply::latest_assistant_reply(run_messages(&msgs, "r2")), None);
    // an incoming message out of reach: the session's latest reply, as the reference reads it
    assert_eq!(reply::latest_assistant_reply(run_messages(&msgs[1..2], "r0")).as_deref(), Some("first"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn d17_a_session_id_targets_its_session() {
    let (orch, host) = open(Value::Null, FakeHost::replying("ANNOUNCE_SKIP")).await;
    orch.engine().upsert_session(&json!("agent:main:discord:channel:123"), &json!({"sessionId": "sess-send"})).unwrap();
    let out = send(&orch, json!({"sessionKey": "sess-send", "message": "m", "timeoutSeconds": 0}), Value::Null).await;
    assert_eq!(out["status"], "accepted");
    assert_eq!(out["sessionKey"], "agent:main:discord:channel:123");
    eventually("the primary runs", || !host.requests().is_empty()).await;
    assert_eq!(host.requests()[0].session_key, "agent:main:discord:channel:123");
    let missing = send(&orch, json!({"sessionKey": "no-such-id", "message": "m"}), Value::Null).await;
    assert_eq!(keys_of(&missing), ["runId", "status", "error"]);
    assert_eq!((&missing["status"], &missing["error"]), (&json!("error"), &json!("No session found: no-such-id")));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn d21_d22_no_reply_steps_to_oneself_or_with_zero_turns() {
    let (orch, host) = open(Value::Null, ping_pong_host("initial")).await;
    let out =
        send(&orch, json!({"sessionKey": "main", "message": "m"}), json!({"agentSessionKey": "agent:main:main"})).await;
    assert_eq!(out["status"], "ok");
    flows_end(&host, 1).await;
    assert_eq!(kinds(&host), [Kind::Primary, Kind::Announce]);

    let cfg = json!({"session": {"agentToAgent": {"maxPingPongTurns": 0}}});
    let (orch, host) = open(cfg, ping_pong_host("initial")).await;
    let out = send(&orch, json!({"sessionKey": "main", "message": "m"}), discord_requester()).await;
    assert_eq!(out["status"], "ok");
    flows_end(&host, 1).await;
    assert_eq!(kinds(&host), [Kind::Primary, Kind::Announce]);
}
