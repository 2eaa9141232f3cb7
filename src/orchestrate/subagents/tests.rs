//! The sub-agent registry end to end over a fake host (REFERENCE.md §6.4–§6.8 scenarios).

use std::sync::Arc;
use std::time::Duration;

use serde_json::{json, Value};

use super::announce::build_trigger;
use super::testkit::*;
use super::*;
use crate::config::Config;
use crate::host::Lane;
use crate::store::pg::testdb;
use std::sync::atomic::Ordering;

// ---- P12–P15: the two runs, their lanes, routes and the cleanup ----------------------------

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn p12_p13_a_child_run_then_one_delivered_announce_on_the_requester_and_delete_cleanup() {
    p12_p13_a_child_run_then_one_delivered_announce_on_the_requester_and_delete_cleanup_at(":memory:").await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn p12_p13_a_child_run_then_one_delivered_announce_on_the_requester_and_delete_cleanup_on_postgres() {
    p12_p13_a_child_run_then_one_delivered_announce_on_the_requester_and_delete_cleanup_at(&testdb::fresh_url()).await
}

async fn p12_p13_a_child_run_then_one_delivered_announce_on_the_requester_and_delete_cleanup_at(db: &str) {
    let host = replying_host();
    let o = open_at(db, json!({}), host.clone()).await;
    let out = spawn(
        &o,
        json!({"task": "count the stars", "cleanup": "delete"}),
        json!({"agentSessionKey": "discord:group:req", "agentChannel": "discord"}),
    )
    .await;
    assert_eq!(out["status"], "accepted", "{out}");
    let (child, run_id) = (str_of(&out, "childSessionKey"), str_of(&out, "runId"));
    until("the record is removed by the delete cleanup", || record(&o, &run_id).is_none()).await;
    let reqs = host.requests();
    assert_eq!(reqs.len(), 2, "{reqs:?}");
    let (c, a) = (&reqs[0], &reqs[1]);
    assert_eq!((c.session_key.as_str(), c.options.lane, c.options.deliver), (child.as_str(), Lane::Subagent, false));
    assert_eq!(c.options.channel.as_deref(), Some("discord"));
    assert_eq!(c.message, "count the stars");
    assert_eq!(
        (a.session_key.as_str(), a.options.lane, a.options.deliver),
        ("agent:main:discord:group:req", Lane::Announce, true)
    );
    assert!(a.message.contains("background task"), "{}", a.message);
    assert!(a.message.contains("child says hi"));
    assert_eq!(a.options.channel.as_deref(), Some("discord"));
    assert!(host.deliveries().is_empty(), "no direct send");
    assert_eq!(o.engine().get_session(&json!(child)).unwrap(), None, "the child session is deleted");
    let (_, sid, page) = o.engine().chat_history(&json!(child), &Value::Null).unwrap();
    assert!(sid.is_none() && page.messages.is_empty());
    // the announce run's incoming message names the child as its source
    let (_, _, page) = o.engine().chat_history(&json!("agent:main:discord:group:req"), &Value::Null).unwrap();
    let first: Value = serde_json::from_str(&page.messages[0].json).unwrap();
    assert_eq!(first["provenance"]["kind"], "announce");
    assert_eq!(first["provenance"]["sourceSessionKey"], json!(child));
    assert!(host.event_kinds().contains(&"subagent.announced"));
    // announced once
    tokio::time::sleep(Duration::from_millis(100)).await;
    assert_eq!(host.requests().len(), 2);
    o.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn p14_the_label_titles_the_trigger_is_patched_back_and_the_announce_goes_to_main() {
    let host = replying_host();
    let o = open(json!({}), host.clone()).await;
    let out = spawn(&o, json!({"task": "t", "label": "my-task"}), json!({"agentSessionKey": "main"})).await;
    let (child, run_id) = (str_of(&out, "childSessionKey"), str_of(&out, "runId"));
    until("announced", || announced(&o, &run_id)).await;
    until("cleanup done", || record(&o, &run_id).is_some_and(|r| r.cleanup_completed_at.is_some())).await;
    let a = requests_in(&host, Lane::Announce);
    assert_eq!(a[0].session_key, "agent:main:main");
    assert!(a[0].message.starts_with("A background task \"my-task\" just completed successfully."), "{}", a[0].message);
    assert_eq!(o.engine().get_session(&json!(child)).unwrap().unwrap()["label"], "my-task");
    let rec = record(&o, &run_id).unwrap();
    assert_eq!((rec.label.as_deref(), rec.requester_display_key.as_str()), (Some("my-task"), "main"));
    o.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn p15_p25_the_requester_origin_routes_the_direct_announce() {
    let host = replying_host();
    let o = open(json!({}), host.clone()).await;
    let out = spawn(
        &o,
        json!({"task": "t"}),
        json!({"agentSessionKey": "main", "agentChannel": " whatsapp ", "agentAccountId": " acct-987 ", "agentTo": "+1555", "agentThreadId": 42}),
    )
    .await;
    let run_id = str_of(&out, "runId");
    until("announced", || announced(&o, &run_id)).await;
    let a = &requests_in(&host, Lane::Announce)[0];
    assert_eq!(
        (
            a.options.channel.as_deref(),
            a.options.account_id.as_deref(),
            a.options.to.as_deref(),
            a.options.thread_id.as_deref()
        ),
        (Some("whatsapp"), Some("acct-987"), Some("+1555"), Some("42"))
    );
    assert!(a.options.deliver);
    let rec = record(&o, &run_id).unwrap();
    assert_eq!(
        rec.requester_origin,
        Some(json!({"channel": "whatsapp", "to": "+1555", "accountId": "acct-987", "threadId": 42}))
    );
    o.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn p15_without_an_origin_the_requester_entry_route_is_used() {
    let host = replying_host();
    let o = open(json!({}), host.clone()).await;
    o.engine()
        .upsert_session(&json!("main"), &json!({"lastChannel": "whatsapp", "lastTo": "+1", "lastAccountId": "kev"}))
        .unwrap();
    let out = spawn(&o, json!({"task": "t"}), json!({"agentSessionKey": "main"})).await;
    let run_id = str_of(&out, "runId");
    until("announced", || announced(&o, &run_id)).await;
    let a = &requests_in(&host, Lane::Announce)[0];
    assert_eq!((a.options.channel.as_deref(), a.options.account_id.as_deref()), (Some("whatsapp"), Some("kev")));
    o.close().await;
}

// ---- P20, P21, P27: the trigger and its stats line ---------------------------------------

async fn trigger_for(config: Value, outcome: Option<RunOutcome>, child_entry: Value, reply: Option<&str>) -> String {
    let o = open(config, replying_host()).await;
    let child = "agent:main:subagent:fixed";
    o.engine().upsert_session(&json!(child), &child_entry).unwrap();
    if let Some(text) = reply {
        o.engine()
            .append_messages(
                &json!(child),
                &json!([{"role": "assistant", "content": [{"type": "text", "text": text}]}]),
            )
            .unwrap();
    }
    let rec = SubagentRun {
        run_id: "r".into(),
        child_session_key: child.into(),
        requester_session_key: "agent:main:main".into(),
        requester_display_key: "main".into(),
        requester_origin: None,
        task: "dig".into(),
        label: None,
        cleanup: "keep".into(),
        created_at: 1_000,
        started_at: Some(1_000),
        ended_at: Some(66_000),
        outcome,
        announce: AnnounceState { status: "pending".into(), attempts: 0, idempotency_key: "k".into() },
        archive_at_ms: None,
        cleanup_completed_at: None,
        pause_reason: None,
        task_run_id: None,
        run_timeout_seconds: None,
    };
    let t = build_trigger(&o, &rec).await.unwrap();
    o.close().await;
    t
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn p20_a_failed_child_trigger_has_the_error_the_findings_and_the_stats() {
    let t = trigger_for(
        json!({}),
        Some(RunOutcome { status: "error".into(), error: Some("boom".into()) }),
        json!({}),
        Some("partial findings"),
    )
    .await;
    assert!(
        t.starts_with("A background task \"dig\" just failed: boom.\n\nFindings:\npartial findings\n\nStats: "),
        "{t}"
    );
    assert!(t.ends_with("(e.g., internal task with no user-facing result)."));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn p21_ok_unknown_and_no_output() {
    let ok = trigger_for(json!({}), Some(RunOutcome { status: "ok".into(), error: None }), json!({}), None).await;
    assert!(ok.contains("just completed successfully.") && ok.contains("Findings:\n(no output)\n"), "{ok}");
    let unknown = trigger_for(json!({}), None, json!({}), Some("x")).await;
    assert!(unknown.contains("just finished with unknown status."));
    let timeout =
        trigger_for(json!({}), Some(RunOutcome { status: "timeout".into(), error: None }), json!({}), None).await;
    assert!(timeout.contains("just timed out."));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn p27_the_stats_line_reads_usage_and_cost_from_the_child_entry() {
    let config = json!({"models": {"providers": {"anthropic": {"models": [{"id": "claude", "cost": {"input": 3, "output": 15}}]}}}});
    let t = trigger_for(
        config,
        Some(RunOutcome { status: "ok".into(), error: None }),
        json!({"inputTokens": 10_000, "outputTokens": 2_345, "model": "claude", "modelProvider": "anthropic"}),
        None,
    )
    .await;
    let stats = t.lines().find(|l| l.starts_with("Stats: ")).unwrap();
    assert!(
        stats.starts_with("Stats: runtime 1m5s \u{2022} tokens 12.3k (in 10.0k / out 2.3k) \u{2022} est $0.07 \u{2022} sessionKey agent:main:subagent:fixed \u{2022} sessionId "),
        "{stats}"
    );
    let none = trigger_for(json!({}), None, json!({}), None).await;
    assert!(none.contains("\u{2022} tokens n/a \u{2022}"), "{none}");
}

// ---- P22–P24: steer and queue ----------------------------------------------------------------

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn p22_steer_mode_injects_the_trigger_and_starts_no_announce_run() {
    let host = Arc::new(
        FakeHost::new(|_| Box::pin(async { Ok(json!({"reply": "child says hi"})) }))
            .with_steer(|_, _| Box::pin(async { Ok(true) })),
    );
    let o = open(json!({}), host.clone()).await;
    o.engine().upsert_session(&json!("main"), &json!({"queueMode": "steer"})).unwrap();
    let out = spawn(&o, json!({"task": "t"}), json!({"agentSessionKey": "main"})).await;
    let run_id = str_of(&out, "runId");
    until("announced", || announced(&o, &run_id)).await;
    let steers = host.steers.lock().unwrap().clone();
    assert_eq!(steers.len(), 1);
    assert_eq!(steers[0].0, "agent:main:main");
    assert!(steers[0].1.contains("child says hi"));
    assert!(requests_in(&host, Lane::Announce).is_empty());
    o.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_host_without_steer_gets_the_direct_announce_in_steer_mode() {
    let host = replying_host();
    let o = open(json!({}), host.clone()).await;
    o.engine().upsert_session(&json!("main"), &json!({"queueMode": "steer"})).unwrap();
    let out = spawn(&o, json!({"task": "t"}), json!({"agentSessionKey": "main"})).await;
    until("announced", || announced(&o, &str_of(&out, "runId"))).await;
    assert!(host.steers.lock().unwrap().is_empty());
    assert_eq!(requests_in(&host, Lane::Announce).len(), 1);
    o.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_steer_the_host_declines_falls_back_to_the_direct_announce() {
    let host = Arc::new(
        FakeHost::new(|_| Box::pin(async { Ok(json!({"reply": "r"})) }))
            .with_steer(|_, _| Box::pin(async { Ok(false) })),
    );
    let o = open(json!({}), host.clone()).await;
    o.engine().upsert_session(&json!("main"), &json!({"queueMode": "steer-backlog"})).unwrap();
    let out = spawn(&o, json!({"task": "t"}), json!({"agentSessionKey": "main"})).await;
    until("announced", || announced(&o, &str_of(&out, "runId"))).await;
    assert_eq!(host.steers.lock().unwrap().len(), 1);
    assert_eq!(requests_in(&host, Lane::Announce).len(), 1);
    o.close().await;
}

#[test]
fn queue_settings_come_from_the_entry_then_the_channel_then_the_config_then_defaults() {
    let entry = |v: Value| v.as_object().cloned().unwrap();
    let cfg = Config::from_json(&json!({"messages": {"queue": {
        "mode": "followup", "byChannel": {"whatsapp": "steer+backlog"}, "debounceMs": 500,
        "debounceMsByChannel": {"whatsapp": 50}, "cap": 3, "drop": "new"
    }}}))
    .unwrap();
    assert_eq!(
        queue_settings(&Config::default(), &entry(json!({}))),
        QueueSettings { mode: QueueMode::Collect, debounce_ms: 1000, cap: 20, drop: DropPolicy::Summarize }
    );
    assert_eq!(
        queue_settings(&cfg, &entry(json!({"lastChannel": "WhatsApp"}))),
        QueueSettings { mode: QueueMode::SteerBacklog, debounce_ms: 50, cap: 3, drop: DropPolicy::New }
    );
    assert_eq!(
        queue_settings(
            &cfg,
            &entry(json!({"queueMode": "Interrupt", "queueDebounceMs": 0, "queueCap": 0, "queueDrop": "oldest"}))
        ),
        QueueSettings { mode: QueueMode::Interrupt, debounce_ms: 0, cap: 1, drop: DropPolicy::Old }
    );
    assert_eq!(queue_settings(&cfg, &entry(json!({"queueMode": "bogus"}))).mode, QueueMode::Followup);
}

#[test]
fn the_overflow_summary_counts_and_lists_what_was_dropped() {
    assert_eq!(overflow_summary(1, &[]), "[Queue overflow] Dropped 1 announce due to cap.");
    assert_eq!(
        overflow_summary(2, &["a".into(), "b".into()]),
        "[Queue overflow] Dropped 2 announces due to cap.\nSummary:\n- a\n- b"
    );
    let long = summary_line(&format!("  many   words {}", "x".repeat(300)));
    assert_eq!(long.chars().count(), 160);
    assert!(long.starts_with("many words x") && long.ends_with('…'));
}

#[test]
fn archive_time_keeps_fractions_of_a_minute() {
    let cfg = |m: Value| {
        Config::from_json(&json!({"agents": {"defaults": {"subagents": {"archiveAfterMinutes": m}}}})).unwrap()
    };
    assert_eq!(archive_after_ms(&cfg(json!(0.01))), Some(600));
    assert_eq!(archive_after_ms(&cfg(json!(1))), Some(60_000));
    assert_eq!(archive_after_ms(&cfg(json!(0))), None);
    assert_eq!(archive_after_ms(&Config::default()), Some(3_600_000));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn p23_collect_mode_queues_behind_the_active_run_and_routes_by_the_entry() {
    let (open_gate, gate) = tokio::sync::watch::channel(false);
    let host = gated_host(gate);
    let o = open(json!({}), host.clone()).await;
    o.engine()
        .upsert_session(
            &json!("main"),
            &json!({"queueMode": "collect", "queueDebounceMs": 0, "lastChannel": "whatsapp", "lastTo": "+1555", "lastAccountId": "kev"}),
        )
        .unwrap();
    busy_run(&o, "agent:main:main");
    let out = spawn(&o, json!({"task": "t1"}), json!({"agentSessionKey": "main", "agentChannel": "discord"})).await;
    let run_id = str_of(&out, "runId");
    until("the child ended", || record(&o, &run_id).is_some_and(|r| r.ended_at.is_some())).await;
    tokio::time::sleep(Duration::from_millis(100)).await;
    assert!(requests_in(&host, Lane::Announce).is_empty(), "queued while the requester is busy");
    open_gate.send(true).unwrap();
    until("announced", || announced(&o, &run_id)).await;
    let a = requests_in(&host, Lane::Announce);
    assert_eq!(a.len(), 1);
    assert_eq!(
        (a[0].options.channel.as_deref(), a[0].options.to.as_deref(), a[0].options.account_id.as_deref()),
        (Some("whatsapp"), Some("+1555"), Some("kev"))
    );
    assert!(
        a[0].message.starts_with(&format!("{QUEUED_TITLE}\n\n---\nQueued #1\nA background task \"t1\"")),
        "{}",
        a[0].message
    );
    o.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn p24_collect_mode_sends_announces_of_different_origins_separately() {
    let (open_gate, gate) = tokio::sync::watch::channel(false);
    let host = gated_host(gate);
    let o = open(json!({"messages": {"queue": {"mode": "collect", "debounceMs": 80}}}), host.clone()).await;
    o.engine().upsert_session(&json!("main"), &json!({})).unwrap();
    busy_run(&o, "agent:main:main");
    let mut ids = Vec::new();
    for acct in ["acct-a", "acct-b"] {
        let ctx =
            json!({"agentSessionKey": "main", "agentChannel": "whatsapp", "agentTo": "+1", "agentAccountId": acct});
        ids.push(str_of(&spawn(&o, json!({"task": acct}), ctx).await, "runId"));
    }
    until("both children ended", || ids.iter().all(|id| record(&o, id).is_some_and(|r| r.ended_at.is_some()))).await;
    tokio::time::sleep(Duration::from_millis(100)).await;
    open_gate.send(true).unwrap();
    until("both announced", || ids.iter().all(|id| announced(&o, id))).await;
    let mut accts: Vec<String> =
        requests_in(&host, Lane::Announce).iter().filter_map(|r| r.options.account_id.clone()).collect();
    accts.sort();
    assert_eq!(accts, ["acct-a", "acct-b"]);
    o.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_overflowing_queue_records_the_dropped_announce_and_sends_the_summary_too() {
    let (open_gate, gate) = tokio::sync::watch::channel(false);
    let host = gated_host(gate);
    let config = json!({"messages": {"queue": {"mode": "followup", "debounceMs": 0, "cap": 1, "drop": "summarize"}}});
    let o = open(config, host.clone()).await;
    o.engine().upsert_session(&json!("main"), &json!({})).unwrap();
    busy_run(&o, "agent:main:main");
    let first = str_of(&spawn(&o, json!({"task": "first"}), json!({"agentSessionKey": "main"})).await, "runId");
    until("first queued", || lock(&o.subagents().queues).get("agent:main:main").is_some_and(|q| q.items.len() == 1))
        .await;
    let second = str_of(&spawn(&o, json!({"task": "second"}), json!({"agentSessionKey": "main"})).await, "runId");
    until("the first is dropped", || record(&o, &first).is_some_and(|r| r.announce.status == "failed")).await;
    open_gate.send(true).unwrap();
    until("the second announced", || announced(&o, &second)).await;
    let msgs: Vec<String> = requests_in(&host, Lane::Announce).into_iter().map(|r| r.message).collect();
    assert_eq!(msgs.len(), 2, "{msgs:?}");
    assert_eq!(msgs[0], "[Queue overflow] Dropped 1 announce due to cap.\nSummary:\n- first");
    assert!(msgs[1].starts_with("A background task \"second\""), "the next item keeps its own text");
    let failed: Vec<_> = host.events().into_iter().filter(|e| e.kind == "delivery.failed").collect();
    assert_eq!(failed.len(), 1);
    assert!(failed[0].details["error"].as_str().unwrap().starts_with("dropped: "));
    o.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_requester_whose_send_policy_denies_gets_no_announce_run() {
    let host = replying_host();
    let o = open(json!({}), host.clone()).await;
    o.engine().upsert_session(&json!("main"), &json!({"sendPolicy": "deny"})).unwrap();
    let out = spawn(&o, json!({"task": "t"}), json!({"agentSessionKey": "main"})).await;
    let run_id = str_of(&out, "runId");
    until("skipped", || record(&o, &run_id).is_some_and(|r| r.announce.status == "skipped")).await;
    assert!(requests_in(&host, Lane::Announce).is_empty());
    let ev = host.events().into_iter().find(|e| e.kind == "delivery.blocked").unwrap();
    assert_eq!(ev.details["reason"], "send blocked by session policy");
    o.close().await;
}

// ---- DECISIONS: retries, timeout, requester deletion ----------------------------------------

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_announce_that_fails_twice_is_tried_three_times_under_one_key() {
    let tries = Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let t2 = tries.clone();
    let host = Arc::new(FakeHost::new(move |req| {
        let n = if req.options.lane == Lane::Announce { t2.fetch_add(1, Ordering::SeqCst) + 1 } else { 0 };
        Box::pin(async move {
            if (1..=2).contains(&n) {
                Err(format!("requester busy {n}"))
            } else {
                Ok(json!({"reply": "fine"}))
            }
        })
    }));
    let o = open(json!({"session": {"outbox": {"backoffMs": 10}}}), host.clone()).await;
    let out = spawn(&o, json!({"task": "t"}), json!({"agentSessionKey": "main"})).await;
    let run_id = str_of(&out, "runId");
    until("announced", || announced(&o, &run_id)).await;
    let rec = record(&o, &run_id).unwrap();
    assert_eq!(rec.announce.attempts, 3);
    assert_eq!(tries.load(Ordering::SeqCst), 3);
    let keys: Vec<String> = requests_in(&host, Lane::Announce).into_iter().map(|r| r.idempotency_key).collect();
    assert_eq!(keys, vec![rec.announce.idempotency_key.clone(); 3], "the host sees one key for every try");
    let items = o.engine().store().read(|db| db.outbox_items()).unwrap();
    assert_eq!(items.len(), 1);
    assert_eq!(
        (items[0].idempotency_key.as_str(), items[0].status.as_str()),
        (rec.announce.idempotency_key.as_str(), "delivered")
    );
    let failed = host.events().into_iter().filter(|e| e.kind == "delivery.failed").count();
    assert_eq!(failed, 2);
    o.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_child_that_outlives_its_time_limit_is_announced_as_timed_out() {
    let host = Arc::new(FakeHost::new(|req| {
        Box::pin(async move {
            if req.options.lane == Lane::Subagent {
                tokio::time::sleep(Duration::from_secs(4)).await;
            }
            Ok(json!({"reply": "ok"}))
        })
    }));
    let o = open(json!({}), host.clone()).await;
    let out = spawn(&o, json!({"task": "slow", "runTimeoutSeconds": 1}), json!({"agentSessionKey": "main"})).await;
    let run_id = str_of(&out, "runId");
    until("announced", || announced(&o, &run_id)).await;
    assert_eq!(record(&o, &run_id).unwrap().outcome, Some(RunOutcome { status: "timeout".into(), error: None }));
    assert!(requests_in(&host, Lane::Announce)[0].message.starts_with("A background task \"slow\" just timed out."));
    o.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn deleting_the_requester_stops_its_running_children_without_an_announce() {
    let (_open_gate, gate) = tokio::sync::watch::channel(false);
    let host = Arc::new(FakeHost::new(move |_| {
        let mut gate = gate.clone();
        Box::pin(async move {
            let _ = gate.wait_for(|open| *open).await;
            Ok(json!({"reply": "late"}))
        })
    }));
    let o = open(json!({}), host.clone()).await;
    let ctx = json!({"agentSessionKey": "agent:main:work"});
    let run_id = str_of(&spawn(&o, json!({"task": "t"}), ctx.clone()).await, "runId");
    let other = str_of(&spawn(&o, json!({"task": "t"}), json!({"agentSessionKey": "main"})).await, "runId");
    o.engine().delete_session(&json!("agent:main:work"), &Value::Null).unwrap();
    on_session_deleted(&o, "work").await.unwrap();
    let rec = record(&o, &run_id).unwrap();
    assert_eq!(rec.outcome, Some(RunOutcome { status: "error".into(), error: Some(REQUESTER_DELETED.into()) }));
    assert_eq!(rec.announce.status, "skipped");
    assert!(rec.cleanup_completed_at.is_some());
    let w = o.wait_run(&run_id, 5_000).await.unwrap();
    assert_eq!((w["status"].as_str(), w["error"].as_str()), (Some("error"), Some(REQUESTER_DELETED)));
    tokio::time::sleep(Duration::from_millis(100)).await;
    assert!(requests_in(&host, Lane::Announce).is_empty());
    assert!(o.engine().store().read(|db| db.outbox_items()).unwrap().is_empty());
    assert!(record(&o, &other).unwrap().ended_at.is_none(), "another requester's child runs on");
    o.close().await;
}

// ---- P26 and DECISIONS: archiving ------------------------------------------------------------

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn p26_archiving_counts_from_the_end_after_the_announce_and_never_while_running() {
    let (open_gate, gate) = tokio::sync::watch::channel(false);
    let host = Arc::new(FakeHost::new(move |req| {
        let mut gate = gate.clone();
        Box::pin(async move {
            if req.options.lane == Lane::Subagent {
                let _ = gate.wait_for(|open| *open).await;
            }
            Ok(json!({"reply": "done"}))
        })
    }));
    // 0.01 min = 600 ms
    let o = open(json!({"agents": {"defaults": {"subagents": {"archiveAfterMinutes": 0.01}}}}), host.clone()).await;
    let out = spawn(&o, json!({"task": "t"}), json!({"agentSessionKey": "main"})).await;
    let (child, run_id) = (str_of(&out, "childSessionKey"), str_of(&out, "runId"));
    tokio::time::sleep(Duration::from_millis(900)).await;
    let rec = record(&o, &run_id).expect("a running child is never archived");
    assert_eq!(rec.archive_at_ms, None);
    open_gate.send(true).unwrap();
    until("announced", || announced(&o, &run_id)).await;
    until("archive time set", || record(&o, &run_id).is_none_or(|r| r.archive_at_ms.is_some())).await;
    if let Some(rec) = record(&o, &run_id) {
        let (ended, at) = (rec.ended_at.unwrap(), rec.archive_at_ms.unwrap());
        assert_eq!(at - ended, 600, "counted from the run's end");
    }
    until("archived", || record(&o, &run_id).is_none()).await;
    assert_eq!(o.engine().get_session(&json!(child)).unwrap(), None);
    // the event follows the record's removal: wait for it rather than race it
    until("the archived event", || host.events().iter().any(|e| e.kind == "subagent.archived")).await;
    let ev = host.events().into_iter().find(|e| e.kind == "subagent.archived").unwrap();
    assert_eq!(ev.details["childSessionKey"], json!(child));
    o.close().await;
}
