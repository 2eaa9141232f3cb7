//! `sessions_spawn` (REFERENCE.md §6.1–§6.3, DECISIONS.md #5): the tool, which checks, builds
//! and starts a sub-agent run and registers it.
//!
//! Every refusal comes before anything is written or run: a sub-agent requester, an agent the
//! allow list does not name, a model outside the catalog, an unknown thinking level, too many
//! running children, an over-long label. Then the child's entry is written (`spawnedBy`,
//! `label`, `model`), its run started in the `subagent` lane, and the run registered; the
//! registry (`subagents`) takes it from there.

use std::sync::Arc;

use serde_json::{json, Map, Value};

use super::runs::{Admission, ChildCap, Provenance, RunSpec};
use super::{blocking, prompts, subagents, thinking, Orchestrator};
use crate::entry::{self, DeliveryContext};
use crate::error::{Error, Result};
use crate::host::{Lane, RunOptions};
use crate::keys::{is_subagent_key, normalize_agent_id};
use crate::policy::subagents::SpawnAllowlist;
use crate::tools::{read_number, read_string, refusal, Requester, ToolContext};

/// `sessions_spawn is not allowed from sub-agent sessions`
pub const FROM_SUBAGENT: &str = "sessions_spawn is not allowed from sub-agent sessions";

/// The tool: the payload the model sees.
pub async fn run(orch: &Arc<Orchestrator>, params: &Value, ctx: &ToolContext) -> Result<Value> {
    let cfg = orch.engine().config();
    let km = cfg.key_model();
    // 1. task, label, cleanup
    let task = read_string(params, "task").ok_or_else(|| Error::invalid_request("task required"))?;
    let label = read_string(params, "label");
    let cleanup = match params.get("cleanup").and_then(Value::as_str).map(str::trim) {
        Some("delete") => "delete",
        _ => "keep",
    };
    // 2. the requester's route
    let text = |v: &Option<String>| v.clone().map(Value::from);
    let origin = DeliveryContext::from_parts(
        text(&ctx.agent_channel).as_ref(),
        text(&ctx.agent_to).as_ref(),
        text(&ctx.agent_account_id).as_ref(),
        ctx.agent_thread_id.as_ref(),
    );
    // 3. the run's time limit
    let run_timeout_secs = read_number(params, "runTimeoutSeconds")
        .or_else(|| read_number(params, "timeoutSeconds"))
        .map_or(0, |n| n.floor().max(0.0) as u64);
    // 4. not from a sub-agent
    let requester = Requester::of(&cfg, ctx)?;
    let raw_is_subagent = ctx.agent_session_key.as_deref().is_some_and(is_subagent_key);
    if raw_is_subagent || requester.key.as_deref().is_some_and(is_subagent_key) {
        return Ok(refusal("forbidden", FROM_SUBAGENT));
    }
    // 5–6. requester and target
    let requester_key = requester.key_or_main(&cfg);
    let requester_agent =
        normalize_agent_id(ctx.requester_agent_id_override.as_deref().unwrap_or(&km.agent_id_of(&requester_key)));
    let display_key = km.display(&requester_key, &requester_agent);
    let target_agent =
        read_string(params, "agentId").map_or_else(|| requester_agent.clone(), |a| normalize_agent_id(&a));
    // 7. the allow list
    let allowlist = SpawnAllowlist::for_agent(&cfg, &requester_agent);
    if !allowlist.allows(&requester_agent, &target_agent) {
        return Ok(refusal("forbidden", allowlist.refusal()));
    }
    // 9. the model (DECISIONS.md: outside the catalog is an error)
    let model = read_string(params, "model")
        .or_else(|| cfg.agent(&target_agent).and_then(|a| a.subagent_model.clone()))
        .or_else(|| cfg.subagents.model.clone());
    if let Some(m) = &model {
        if cfg.models.resolve(m).is_none() {
            return Ok(refusal("error", format!("invalid model: {m}")));
        }
    }
    // 10. thinking
    let thinking = match params.get("thinking").and_then(Value::as_str) {
        Some(raw) if !crate::js::js_trim(raw).is_empty() => match thinking::resolve_thinking(raw, model.as_deref()) {
            Ok(level) => Some(level.as_str().to_owned()),
            Err(text) => return Ok(refusal("error", text)),
        },
        _ => None,
    };
    // DECISIONS.md #5: at most maxActive running children per requester. The check and the
    // registration below are one step for this store: concurrent spawns wait here, so each one
    // counts the children registered before it.
    let _gate = orch.subagents().spawn_gate.lock().await;
    let (o, k) = (orch.clone(), requester_key.clone());
    let active = blocking(move || subagents::running_count(&o, &k)).await?;
    if active >= u64::from(cfg.subagents.max_active) {
        return Ok(refusal("forbidden", format!("Too many active sub-agents ({active}); wait for one to finish.")));
    }
    if !orch.host().can_run() {
        return Ok(refusal("error", "no runAgent callback is configured"));
    }
    // 8. the child
    let child_key = format!("agent:{target_agent}:subagent:{}", uuid::Uuid::new_v4());
    // §6.2: the agent call's schema refuses labels over 64 characters
    if let Some(l) = &label {
        if l.chars().count() > entry::MAX_LABEL_LEN {
            return Ok(json!({
                "status": "error",
                "error": format!("invalid agent params: at /label: must NOT have more than {} characters", entry::MAX_LABEL_LEN),
                "childSessionKey": child_key,
            }));
        }
    }
    // 11. the child's entry: who spawned it, its label, its model
    let mut patch = Map::new();
    patch.insert("spawnedBy".into(), Value::from(requester_key.clone()));
    if let Some(l) = &label {
        patch.insert("label".into(), Value::from(l.clone()));
    }
    if let Some(m) = &model {
        patch.insert("model".into(), Value::from(m.clone()));
    }
    let (e, ck) = (orch.engine().clone(), child_key.clone());
    if let Err(err) = blocking(move || e.upsert_session(&Value::from(ck), &Value::Object(patch))).await {
        if matches!(err.code(), crate::error::ErrorCode::Closed) {
            return Err(err);
        }
        return Ok(json!({"status": "error", "error": err.message(), "childSessionKey": child_key}));
    }
    // 12. the child's system prompt
    let system_prompt = prompts::subagent_system_prompt(
        &task,
        label.as_deref(),
        ctx.agent_session_key.as_deref(),
        origin.channel.as_deref(),
        &child_key,
    );
    // 13. the child's run, in the requester's chain
    let (e, r, run_id, k) = (orch.engine().clone(), orch.runs().clone(), ctx.run_id.clone(), requester_key.clone());
    let chain =
        blocking(move || r.chain_of(&e, run_id.as_deref(), Some(&k))).await?.unwrap_or_else(super::new_chain_id);
    let timeout_ms =
        if run_timeout_secs > 0 { run_timeout_secs } else { cfg.default_timeout_seconds }.saturating_mul(1000);
    let options = RunOptions {
        extra_system_prompt: Some(system_prompt),
        channel: origin.channel.clone(),
        model: model.clone(),
        thinking,
        label: label.clone(),
        spawned_by: Some(requester_key.clone()),
        ..RunOptions::new(Lane::Subagent, timeout_ms, chain)
    };
    let spec = RunSpec {
        session_key: child_key.clone(),
        message: task.clone(),
        provenance: Provenance { kind: "subagent_task", source_session_key: Some(requester_key.clone()) },
        options,
        chain_limit: Some(cfg.max_chain_turns),
    };
    // The maxActive check again, in the same write as the run is recorded: the one above does
    // not see children another store on this file is spawning at the same moment.
    let cap = ChildCap { requester_key: requester_key.clone(), max_active: cfg.subagents.max_active };
    let (e, h, r) = (orch.engine().clone(), orch.host().clone(), orch.runs().clone());
    let refused = match blocking(move || r.start_capped(e, h, spec, &cap)).await? {
        Admission::Started(run_id) => Ok(run_id),
        Admission::ChainFull => Err(format!("Agent-to-agent chain limit reached ({} turns).", cfg.max_chain_turns)),
        Admission::TooManyChildren(n) => Err(format!("Too many active sub-agents ({n}); wait for one to finish.")),
    };
    let run_id = match refused {
        Ok(run_id) => run_id,
        Err(text) => {
            // refused: the child entry written above goes again
            let (e, ck) = (orch.engine().clone(), child_key.clone());
            let _ = blocking(move || e.delete_session(&Value::from(ck), &json!({"deleteTranscript": true}))).await;
            return Ok(refusal("forbidden", text));
        }
    };
    // 14. register
    let now = entry::now_ms();
    let record = subagents::SubagentRun {
        run_id: run_id.clone(),
        child_session_key: child_key.clone(),
        requester_session_key: requester_key,
        requester_display_key: display_key,
        requester_origin: (!origin.is_empty()).then(|| origin.to_json()),
        task,
        label,
        cleanup: cleanup.to_owned(),
        created_at: now,
        started_at: Some(now),
        ended_at: None,
        outcome: None,
        announce: subagents::AnnounceState {
            status: "pending".into(),
            attempts: 0,
            idempotency_key: uuid::Uuid::new_v4().to_string(),
        },
        archive_at_ms: None,
        cleanup_completed_at: None,
    };
    subagents::register(orch, record).await?;
    // 15.
    let mut out = Map::new();
    out.insert("status".into(), "accepted".into());
    out.insert("childSessionKey".into(), child_key.into());
    out.insert("runId".into(), run_id.into());
    if model.is_some() {
        out.insert("modelApplied".into(), true.into());
    }
    Ok(Value::Object(out))
}

#[cfg(test)]
mod tests {
    use super::super::subagents::testkit::*;
    use super::*;
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
        until("the chained child run", || requests_in(&host, Lane::Subagent).iter().any(|r| r.message == "in chain"))
            .await;
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
        let (open_gate, gate) = tokio::sync::watch::channel(false);
        let host = Arc::new(FakeHost::new(move |_| {
            let mut gate = gate.clone();
            Box::pin(async move {
                let _ = gate.wait_for(|open| *open).await;
                Ok(json!({"reply": "done"}))
            })
        }));
        let o = open(json!({"agents": {"defaults": {"subagents": {"maxActive": 2}}}}), host.clone()).await;
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
        let path = tmp_db();
        let config = json!({"agents": {"defaults": {"subagents": {"maxActive": 3}}}});
        let hosts: Vec<_> = (0..2).map(|_| Arc::new(FakeHost::new(|_| Box::pin(std::future::pending())))).collect();
        let a = open_at(&path, config.clone(), hosts[0].clone()).await;
        let b = open_at(&path, config, hosts[1].clone()).await;
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
        let out = o.tool("sessions_spawn", json!({"task": "t"}), main_ctx(), false).await.unwrap();
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
}
