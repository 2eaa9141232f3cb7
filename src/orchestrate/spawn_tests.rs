//! Tests of `spawn`.

use super::super::subagents::testkit::*;
use super::*;
use crate::store::pg::testdb;
use std::time::Duration;

fn main_ctx() -> Value {
    json!({"agentSessionKey": "main"})
}

fn allow(list: Value) -> Value {
    json!({"agents": {"list": [{"id": "main", "subagents": {"allowAgents": list}}, {"id": "beta"}]}})
}

/// No run reached the host and nothing was registered.
async fn nothing_spawned(o: &Arc<Orchestrator>, host: &FakeHost) {
    tokio::time::sleep(Duration::from_millis(50)).await;
    assert!(host.requests().is_empty(), "{:?}", host.requests());
    assert!(subagents::list(o, None).unwrap().is_empty());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn p1_an_allowed_agent_gets_a_child_under_it_and_the_result_keys_are_in_order() {
    let host = replying_host();
    let o = open(allow(json!(["beta"])), host.clone()).await;
    let out = spawn(&o, json!({"task": "t", "agentId": "beta"}), main_ctx()).await;
    let keys: Vec<&str> = out.as_object().unwrap().keys().map(String::as_str).collect();
    assert_eq!(keys, ["status", "childSessionKey", "runId"]);
    assert_eq!(out["status"], "accepted");
    let child = str_of(&out, "childSessionKey");
    assert!(child.starts_with("agent:beta:subagent:"), "{child}");
    assert!(uuid::Uuid::parse_str(&child["agent:beta:subagent:".len()..]).is_ok());
    o.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn p2_a_star_allows_any_agent() {
    let o = open(allow(json!([" * "])), replying_host()).await;
    let out = spawn(&o, json!({"task": "t", "agentId": "zeta"}), main_ctx()).await;
    assert!(str_of(&out, "childSessionKey").starts_with("agent:zeta:subagent:"), "{out}");
    o.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn p3_p5_an_agent_outside_the_allow_list_is_forbidden_and_nothing_runs() {
    let host = replying_host();
    let o = open(json!({}), host.clone()).await;
    let out = spawn(&o, json!({"task": "t", "agentId": "beta"}), main_ctx()).await;
    assert_eq!(
        out,
        json!({"status": "forbidden", "error": "agentId is not allowed for sessions_spawn (allowed: none)"})
    );
    nothing_spawned(&o, &host).await;
    o.close().await;
    let host = replying_host();
    let o = open(allow(json!(["alpha", "Alpha", ""])), host.clone()).await;
    let out = spawn(&o, json!({"task": "t", "agentId": "beta"}), main_ctx()).await;
    assert_eq!(out["error"], "agentId is not allowed for sessions_spawn (allowed: alpha)");
    nothing_spawned(&o, &host).await;
    o.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn p4_allow_entries_and_the_target_are_normalized() {
    let o = open(allow(json!(["Research"])), replying_host()).await;
    let out = spawn(&o, json!({"task": "t", "agentId": "research"}), main_ctx()).await;
    assert!(str_of(&out, "childSessionKey").starts_with("agent:research:subagent:"), "{out}");
    o.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn p6_a_sub_agent_may_not_spawn() {
    let host = replying_host();
    let o = open(json!({}), host.clone()).await;
    for key in ["agent:main:subagent:x", "subagent:y"] {
        let out = spawn(&o, json!({"task": "t"}), json!({"agentSessionKey": key})).await;
        assert_eq!(out, json!({"status": "forbidden", "error": FROM_SUBAGENT}));
    }
    nothing_spawned(&o, &host).await;
    o.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_missing_task_is_the_tool_error_task_required() {
    let host = replying_host();
    let o = open(json!({}), host.clone()).await;
    for params in [json!({}), json!({"task": "   "}), json!({"task": 5}), json!(null)] {
        let out = spawn(&o, params, main_ctx()).await;
        assert_eq!(out, json!({"status": "error", "tool": "sessions_spawn", "error": "task required"}));
    }
    nothing_spawned(&o, &host).await;
    o.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn p7_the_model_is_written_on_the_child_before_its_run_and_reported_applied() {
    let host = replying_host();
    let o = open(json!({}), host.clone()).await;
    let out = spawn(&o, json!({"task": "t", "model": "claude-haiku-4-5"}), main_ctx()).await;
    assert_eq!(out["modelApplied"], true);
    let child = str_of(&out, "childSessionKey");
    until("the child run", || !host.requests().is_empty()).await;
    let req = &host.requests()[0];
    assert_eq!(req.options.model.as_deref(), Some("claude-haiku-4-5"));
    let e = o.engine().get_session(&json!(child)).unwrap().unwrap();
    assert_eq!(e["spawnedBy"], "agent:main:main");
    o.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn p8_amended_a_model_outside_the_catalog_is_an_error_and_nothing_is_spawned() {
    let catalog = json!({"models": {"providers": {"anthropic": {"models": [{"id": "claude-haiku-4-5"}]}}}});
    let host = replying_host();
    let o = open(catalog, host.clone()).await;
    let out = spawn(&o, json!({"task": "t", "model": "bad-model"}), main_ctx()).await;
    assert_eq!(out, json!({"status": "error", "error": "invalid model: bad-model"}));
    nothing_spawned(&o, &host).await;
    for good in ["claude-haiku-4-5", "anthropic/claude-haiku-4-5"] {
        let out = spawn(&o, json!({"task": "t", "model": good}), main_ctx()).await;
        assert_eq!(out["status"], "accepted", "{good}: {out}");
    }
    o.close().await;
    // no catalog: every ref is valid
    let o = open(json!({}), replying_host()).await;
    assert_eq!(spawn(&o, json!({"task": "t", "model": "bad-model"}), main_ctx()).await["status"], "accepted");
    o.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn p9_the_target_agents_sub_agent_model_wins_over_the_default() {
    let config = json!({"agents": {
        "defaults": {"subagents": {"model": "minimax/MiniMax-M2.1"}},
        "list": [{"id": "main"}, {"id": "research", "subagents": {"model": "opencode/claude"}}]
    }});
    let host = replying_host();
    let o = open(config, host.clone()).await;
    let a = spawn(&o, json!({"task": "t"}), main_ctx()).await;
    let b = spawn(&o, json!({"task": "t"}), json!({"agentSessionKey": "agent:research:main"})).await;
    let model = |out: &Value| {
        o.engine().get_session(&out["childSessionKey"]).unwrap().unwrap()["model"].as_str().map(str::to_owned)
    };
    assert_eq!(model(&a).as_deref(), Some("minimax/MiniMax-M2.1"));
    assert_eq!(model(&b).as_deref(), Some("opencode/claude"));
    assert!(str_of(&b, "childSessionKey").starts_with("agent:research:subagent:"));
    o.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn p10_thinking_is_normalized_and_an_unknown_level_is_an_error_before_anything_runs() {
    let host = replying_host();
    let o = open(json!({}), host.clone()).await;
    let out = spawn(&o, json!({"task": "t", "thinking": "banana"}), main_ctx()).await;
    assert_eq!(
        out,
        json!({"status": "error", "error": "Invalid thinking level \"banana\". Use one of: off, minimal, low, medium, high."})
    );
    nothing_spawned(&o, &host).await;
    spawn(&o, json!({"task": "t", "thinking": "ULTRATHINK"}), main_ctx()).await;
    until("the child run", || !host.requests().is_empty()).await;
    assert_eq!(host.requests()[0].options.thinking.as_deref(), Some("high"));
    o.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn p11_the_run_timeout_and_its_legacy_alias_set_the_childs_time_limit() {
    let host = replying_host();
    let o = open(json!({"agents": {"defaults": {"timeoutSeconds": 90}}}), host.clone()).await;
    for params in [
        json!({"task": "a", "timeoutSeconds": 2}),
        json!({"task": "b", "runTimeoutSeconds": 1.7, "timeoutSeconds": 2}),
        json!({"task": "c", "runTimeoutSeconds": 0}),
        json!({"task": "d", "runTimeoutSeconds": -5}),
    ] {
        spawn(&o, params, main_ctx()).await;
    }
    until("four child runs", || requests_in(&host, Lane::Subagent).len() == 4).await;
    let mut got: Vec<(String, u64)> =
        requests_in(&host, Lane::Subagent).into_iter().map(|r| (r.message, r.options.timeout_ms)).collect();
    got.sort();
    assert_eq!(got, [("a".into(), 2_000), ("b".into(), 1_000), ("c".into(), 90_000), ("d".into(), 90_000)]);
    o.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_child_run_carries_its_prompt_label_provenance_and_the_requesters_chain() {
    let host = replying_host();
    let o = open(json!({}), host.clone()).await;
    let ctx = json!({"agentSessionKey": "main", "agentChannel": "telegram"});
    let out = spawn(&o, json!({"task": "  sum   it up ", "label": "summary", "cleanup": "nonsense"}), ctx).await;
    let child = str_of(&out, "childSessionKey");
    until("the child run", || !host.requests().is_empty()).await;
    let req = &host.requests()[0];
    assert_eq!(req.message, "sum   it up");
    let prompt = req.options.extra_system_prompt.clone().unwrap();
    assert!(prompt.starts_with("# Subagent Context\n"));
    assert!(prompt.contains("- You were created to handle: sum it up\n"));
    assert!(prompt.contains(&format!(
        "- Label: summary\n- Requester session: main.\n- Requester channel: telegram.\n- Your session: {child}.\n"
    )));
    assert_eq!(
        (req.options.label.as_deref(), req.options.spawned_by.as_deref(), req.options.channel.as_deref()),
        (Some("summary"), Some("agent:main:main"), Some("telegram"))
    );
    let (_, _, page) = o.engine().chat_history(&json!(child), &Value::Null).unwrap();
    let first: Value = serde_json::from_str(&page.messages[0].json).unwrap();
    assert_eq!(first["provenance"]["kind"], "subagent_task");
    assert_eq!(first["provenance"]["sourceSessionKey"], "agent:main:main");
    let rec = &subagents::list(&o, Some("main")).unwrap()[0];
    assert_eq!((rec["cleanup"].as_str(), rec["task"].as_str()), (Some("keep"), Some("sum   it up")));
    // a spawn made during a run joins that run's chain
    let parent = o
        .runs()
        .start(
            o.engine().clone(),
            o.host().clone(),
            RunSpec {
                session_key: "agent:main:main".into(),
                message: "go".into(),
                provenance: Provenance { kind: "inter_session", source_session_key: None },
                options: RunOptions::new(Lane::Nested, 30_000, "chain-x"),
                chain_limit: None,
            },
        )
        .unwrap()
        .unwrap();
    spawn(&o, json!({"task": "in chain"}), json!({"agentSessionKey": "main", "runId": parent})).await;
    until("the chained child run", || requests_in(&host, Lane::Subagent).iter().any(|r| r.message == "in chain")).await;
    let chained = requests_in(&host, Lane::Subagent).into_iter().find(|r| r.message == "in chain").unwrap();
    assert_eq!(chained.options.chain_id, "chain-x");
    o.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_spawn_past_the_chain_budget_is_forbidden_and_leaves_no_child() {
    let host = replying_host();
    let o = open(json!({"session": {"agentToAgent": {"maxChainTurns": 1}}}), host.clone()).await;
    let parent = o
        .runs()
        .start(
            o.engine().clone(),
            o.host().clone(),
            RunSpec {
                session_key: "agent:main:main".into(),
                message: "go".into(),
                provenance: Provenance { kind: "inter_session", source_session_key: None },
                options: RunOptions::new(Lane::Nested, 30_000, "full-chain"),
                chain_limit: None,
            },
        )
        .unwrap()
        .unwrap();
    let out = spawn(&o, json!({"task": "t"}), json!({"agentSessionKey": "main", "runId": parent})).await;
    assert_eq!(out, json!({"status": "forbidden", "error": "Agent-to-agent chain limit reached (1 turns)."}));
    assert!(subagents::list(&o, None).unwrap().is_empty());
    let children = o.engine().list_sessions(&json!({"spawnedBy": "agent:main:main"})).unwrap();
    assert_eq!(children["count"], 0, "{children}");
    o.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn max_active_caps_the_running_children_of_one_requester() {
    max_active_caps_the_running_children_of_one_requester_at(":memory:").await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn max_active_caps_the_running_children_of_one_requester_on_postgres() {
    max_active_caps_the_running_children_of_one_requester_at(&testdb::fresh_url()).await
}

async fn max_active_caps_the_running_children_of_one_requester_at(db: &str) {
    let (open_gate, gate) = tokio::sync::watch::channel(false);
    let host = Arc::new(FakeHost::new(move |_| {
        let mut gate = gate.clone();
        Box::pin(async move {
            let _ = gate.wait_for(|open| *open).await;
            Ok(json!({"reply": "done"}))
        })
    }));
    let o = open_at(db, json!({"agents": {"defaults": {"subagents": {"maxActive": 2}}}}), host.clone()).await;
    let a = spawn(&o, json!({"task": "a"}), main_ctx()).await;
    spawn(&o, json!({"task": "b"}), main_ctx()).await;
    let third = spawn(&o, json!({"task": "c"}), main_ctx()).await;
    assert_eq!(
        third,
        json!({"status": "forbidden", "error": "Too many active sub-agents (2); wait for one to finish."})
    );
    // another requester has its own budget
    assert_eq!(
        spawn(&o, json!({"task": "d"}), json!({"agentSessionKey": "agent:main:other"})).await["status"],
        "accepted"
    );
    until("three child runs", || requests_in(&host, Lane::Subagent).len() == 3).await;
    open_gate.send(true).unwrap();
    let run_id = str_of(&a, "runId");
    until("a child ended", || record(&o, &run_id).is_some_and(|r| r.ended_at.is_some())).await;
    until("room again", || subagents::running_count(&o, "agent:main:main").unwrap() < 2).await;
    assert_eq!(spawn(&o, json!({"task": "e"}), main_ctx()).await["status"], "accepted");
    o.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn concurrent_spawns_cannot_get_past_max_active() {
    let host = Arc::new(FakeHost::new(|_| Box::pin(std::future::pending())));
    let o = open(json!({"agents": {"defaults": {"subagents": {"maxActive": 3}}}}), host.clone()).await;
    let calls: Vec<_> = (0..12)
        .map(|i| {
            let o = o.clone();
            tokio::spawn(async move { spawn(&o, json!({"task": format!("t{i}")}), main_ctx()).await })
        })
        .collect();
    let mut accepted = 0;
    for c in calls {
        let out = c.await.unwrap();
        if out["status"] == "accepted" {
            accepted += 1;
        } else {
            assert_eq!(out["status"], "forbidden", "{out}");
        }
    }
    assert_eq!(accepted, 3);
    assert_eq!(subagents::list(&o, Some("agent:main:main")).unwrap().len(), 3);
    o.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn concurrent_spawns_from_two_stores_on_one_file_cannot_get_past_max_active() {
    concurrent_spawns_from_two_stores_on_one_file_cannot_get_past_max_active_at(&tmp_db()).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn concurrent_spawns_from_two_stores_on_one_file_cannot_get_past_max_active_on_postgres() {
    concurrent_spawns_from_two_stores_on_one_file_cannot_get_past_max_active_at(&testdb::fresh_url()).await
}

async fn concurrent_spawns_from_two_stores_on_one_file_cannot_get_past_max_active_at(db: &str) {
    let config = json!({"agents": {"defaults": {"subagents": {"maxActive": 3}}}});
    let hosts: Vec<_> = (0..2).map(|_| Arc::new(FakeHost::new(|_| Box::pin(std::future::pending())))).collect();
    let a = open_at(db, config.clone(), hosts[0].clone()).await;
    let b = open_at(db, config, hosts[1].clone()).await;
    let calls: Vec<_> = (0..16)
        .map(|i| {
            let o = if i % 2 == 0 { a.clone() } else { b.clone() };
            tokio::spawn(async move { spawn(&o, json!({"task": format!("t{i}")}), main_ctx()).await })
        })
        .collect();
    let mut accepted = 0;
    for c in calls {
        let out = c.await.unwrap();
        if out["status"] == "accepted" {
            accepted += 1;
        } else {
            assert_eq!(out["status"], "forbidden", "{out}");
            assert!(str_of(&out, "error").starts_with("Too many active sub-agents ("), "{out}");
        }
    }
    assert_eq!(accepted, 3);
    // each accepted child's run reaches the host on a task of its own, a moment after the answer
    until("the three runs reach the hosts", || hosts.iter().map(|h| h.requests().len()).sum::<usize>() >= 3).await;
    assert_eq!(hosts.iter().map(|h| h.requests().len()).sum::<usize>(), 3);
    assert_eq!(subagents::list(&a, Some("agent:main:main")).unwrap().len(), 3);
    // every refused spawn took its child entry away again
    let children = a.engine().list_sessions(&json!({"spawnedBy": "agent:main:main"})).unwrap();
    assert_eq!(children["count"], 3, "{children}");
    a.close().await;
    b.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_label_over_64_characters_fails_like_the_agent_schema() {
    let host = replying_host();
    let o = open(json!({}), host.clone()).await;
    let out = spawn(&o, json!({"task": "t", "label": "x".repeat(65)}), main_ctx()).await;
    assert_eq!(out["status"], "error");
    assert!(str_of(&out, "error").starts_with("invalid agent params: "), "{out}");
    assert!(str_of(&out, "childSessionKey").starts_with("agent:main:subagent:"));
    nothing_spawned(&o, &host).await;
    o.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_a_run_agent_callback_nothing_is_spawned() {
    struct NoRun;
    impl crate::host::Host for NoRun {
        fn run_agent(&self, _req: crate::host::AgentRunRequest) -> crate::host::HostFuture<Value> {
            Box::pin(async { Err("unreachable".to_owned()) })
        }
        fn can_run(&self) -> bool {
            false
        }
        fn emit(&self, _event: crate::host::Event) {}
    }
    let engine = crate::engine::Engine::new(
        crate::store::Store::open(":memory:").unwrap(),
        crate::config::Config::default(),
        None,
    );
    let o = Orchestrator::new(Arc::new(engine), Arc::new(NoRun));
    o.start().await.unwrap();
    let out = o.tool(crate::tools::Tool::SessionsSpawn, json!({"task": "t"}), main_ctx(), false).await.unwrap();
    assert_eq!(out, json!({"status": "error", "error": "no runAgent callback is configured"}));
    assert!(subagents::list(&o, None).unwrap().is_empty());
    o.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn global_scope_without_a_requester_key_registers_global_shown_as_main() {
    let o = open(json!({"session": {"scope": "global"}}), replying_host()).await;
    let out = spawn(&o, json!({"task": "t"}), Value::Null).await;
    let rec = record(&o, &str_of(&out, "runId")).unwrap();
    assert_eq!((rec.requester_session_key.as_str(), rec.requester_display_key.as_str()), ("global", "main"));
    o.close().await;
}
