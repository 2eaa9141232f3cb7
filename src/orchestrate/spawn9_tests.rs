//! `sessions_spawn` under the 2026.9 contract over a fake host.
use std::sync::Arc;

use serde_json::{json, Value};
use tokio::sync::watch;

use crate::host::testing::FakeHost;
use crate::host::Lane;
use crate::orchestrate::subagents::testkit::{spawn, str_of};
use crate::orchestrate::tasks::testkit9::open9;
use crate::tools::spawn9;

fn main_ctx() -> Value {
    json!({"agentSessionKey": "agent:main:main"})
}

/// Child runs wait for the gate.
fn gated() -> (Arc<FakeHost>, watch::Sender<bool>) {
    let (tx, rx) = watch::channel(false);
    let host = Arc::new(FakeHost::new(move |req| {
        let mut gate = rx.clone();
        Box::pin(async move {
            if req.options.lane == Lane::Subagent {
                let _ = gate.wait_for(|o| *o).await;
            }
            Ok(json!({"reply": "done"}))
        })
    }));
    (host, tx)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_accepted_spawn_has_the_2026_9_fields_and_the_child_its_lineage() {
    let (host, _gate) = gated();
    let o = open9(json!({}), host).await;
    let out = spawn(&o, json!({"task": "dig", "taskName": "dig-1"}), main_ctx()).await;
    let keys: Vec<&str> = out.as_object().unwrap().keys().map(String::as_str).collect();
    assert_eq!(
        keys,
        ["status", "childSessionKey", "runId", "mode", "expectsCompletionMessage", "context", "taskName", "note"]
    );
    assert_eq!(
        (out["mode"].as_str(), out["context"].as_str(), out["note"].as_str()),
        (Some("run"), Some("isolated"), Some(spawn9::COMPLETION_NOTE))
    );
    let child = o.engine().get_session(&json!(str_of(&out, "childSessionKey"))).unwrap().unwrap();
    assert_eq!((child["spawnDepth"].as_u64(), child["subagentRole"].as_str()), (Some(1), Some("orchestrator")));
    o.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_2026_9_refusals_have_their_texts() {
    let (host, _gate) = gated();
    let cfg = json!({"agents": {"defaults": {"subagents": {"maxSpawnDepth": 2, "maxChildrenPerAgent": 1}}}});
    let o = open9(cfg, host.clone()).await;
    let err = |v: &Value| v["error"].as_str().unwrap_or_default().to_owned();
    assert_eq!(
        err(&spawn(&o, json!({"task": "t", "channel": "discord"}), main_ctx()).await),
        "sessions_spawn does not support \"channel\"; remove channel-delivery parameters."
    );
    assert_eq!(
        err(&spawn(&o, json!({"task": "t", "timeoutSeconds": 9}), main_ctx()).await),
        "sessions_spawn does not support \"timeoutSeconds\". Use \"runTimeoutSeconds\" for a per-run timeout."
    );
    assert_eq!(
        spawn(&o, json!({"task": "t", "taskName": "all"}), main_ctx()).await,
        json!({"status": "error", "error": "Invalid taskName \"all\". Reserved subagent targets cannot be used as taskName values."})
    );
    assert!(host.requests().is_empty(), "no refusal ran anything");

    // a sub-agent may spawn under 2026.9 while its depth is under maxSpawnDepth
    let first = spawn(&o, json!({"task": "level one"}), main_ctx()).await;
    assert_eq!(first["status"], "accepted");
    assert_eq!(
        spawn(&o, json!({"task": "second"}), main_ctx()).await,
        json!({"status": "forbidden", "error": "sessions_spawn has reached max active children for this session (1/1; agents.defaults.subagents.maxChildrenPerAgent)."})
    );
    let child_ctx = json!({"agentSessionKey": str_of(&first, "childSessionKey")});
    let nested = spawn(&o, json!({"task": "level two"}), child_ctx).await;
    assert_eq!(nested["status"], "accepted", "{nested}");
    let leaf = o.engine().get_session(&json!(str_of(&nested, "childSessionKey"))).unwrap().unwrap();
    assert_eq!((leaf["spawnDepth"].as_u64(), leaf["subagentRole"].as_str()), (Some(2), Some("leaf")));
    let leaf_ctx = json!({"agentSessionKey": str_of(&nested, "childSessionKey")});
    assert_eq!(
        spawn(&o, json!({"task": "level three"}), leaf_ctx).await,
        json!({"status": "forbidden", "error": "sessions_spawn is not allowed at this depth (current depth: 2, max: 2; agents.defaults.subagents.maxSpawnDepth)."})
    );
    o.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_target_agent_follows_the_2026_9_allow_agents_fallback() {
    let (host, _gate) = gated();
    let cfg = json!({"agents": {
        "ownership": "explicit",
        "defaults": {"subagents": {"allowAgents": ["ops"]}},
        "entries": {"main": {"default": true}, "ops": {}, "qa": {}},
    }});
    let o = open9(cfg, host).await;
    assert_eq!(spawn(&o, json!({"task": "t", "agentId": "ops"}), main_ctx()).await["status"], "accepted");
    assert_eq!(
        spawn(&o, json!({"task": "t", "agentId": "qa"}), main_ctx()).await,
        json!({"status": "forbidden", "error": "agentId is not allowed for sessions_spawn (allowed: ops)", "role": "qa"})
    );
    o.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn require_agent_id_wants_an_explicit_agent_the_agents_own_setting_first() {
    let (host, _gate) = gated();
    let cfg = json!({"agents": {
        "ownership": "explicit",
        "defaults": {"subagents": {"requireAgentId": true, "allowAgents": ["*"]}},
        "entries": {"main": {"default": true}, "ops": {"subagents": {"requireAgentId": false}}},
    }});
    let o = open9(cfg, host).await;
    assert_eq!(
        spawn(&o, json!({"task": "t"}), main_ctx()).await,
        json!({"status": "forbidden", "error": spawn9::REQUIRE_AGENT_ID})
    );
    assert_eq!(spawn(&o, json!({"task": "t", "agentId": "main"}), main_ctx()).await["status"], "accepted");
    let ops = json!({"agentSessionKey": "agent:ops:main"});
    assert_eq!(spawn(&o, json!({"task": "t"}), ops).await["status"], "accepted", "ops opts out");
    o.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_forked_child_starts_with_the_requesters_transcript_and_only_as_its_agent() {
    let (host, _gate) = gated();
    let cfg = json!({"agents": {"ownership": "explicit", "defaults": {"subagents": {"allowAgents": ["*"]}},
                     "entries": {"main": {"default": true}, "ops": {}}}});
    let o = open9(cfg, host).await;
    o.engine()
        .append_messages(
            &json!("agent:main:main"),
            &json!([{"role": "user", "content": "the plan"}, {"role": "assistant", "content": "ok"}]),
        )
        .unwrap();
    let out = spawn(&o, json!({"task": "carry on", "context": "fork"}), main_ctx()).await;
    assert_eq!(out["context"], "fork");
    let child = json!(str_of(&out, "childSessionKey"));
    let history = || o.engine().chat_history(&child, &json!({"limit": 10})).unwrap().2.messages;
    // the task arrives when the child's run starts
    crate::orchestrate::subagents::testkit::until("the task message", || history().len() == 3).await;
    let texts: Vec<String> = history().iter().map(|m| m.json.clone()).collect();
    assert!(texts[0].contains("the plan") && texts[1].contains("\"ok\""), "{texts:?}");
    assert!(texts.last().unwrap().contains("carry on"), "then the task");
    // a fork to another agent: an error result naming the child, whose entry is gone again
    let cross = spawn(&o, json!({"task": "t", "context": "fork", "agentId": "ops"}), main_ctx()).await;
    assert_eq!((cross["status"].as_str(), cross["error"].as_str()), (Some("error"), Some(spawn9::FORK_SAME_AGENT)));
    assert_eq!(cross["role"], "ops", "{cross}");
    let child = str_of(&cross, "childSessionKey");
    assert!(child.starts_with("agent:ops:subagent:"), "{cross}");
    assert!(o.engine().get_session(&json!(child)).unwrap().is_none(), "the child entry is discarded");
    o.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_child_is_offered_the_tools_of_its_depth() {
    let (host, _gate) = gated();
    let o = open9(json!({"agents": {"defaults": {"subagents": {"maxSpawnDepth": 2}}}}), host).await;
    let names = |key: &str| -> Vec<&'static str> {
        let ctx = crate::tools::ToolContext::from_json(&json!({"agentSessionKey": key})).unwrap();
        crate::tools::available(o.engine(), &ctx).into_iter().map(|t| t.name()).collect()
    };
    assert_eq!(names("agent:main:main").len(), 7);
    let first = spawn(&o, json!({"task": "one"}), main_ctx()).await;
    let child = str_of(&first, "childSessionKey");
    assert_eq!(names(&child), ["sessions_list", "sessions_history", "sessions_spawn", "sessions_yield", "subagents"]);
    let second = spawn(&o, json!({"task": "two"}), json!({"agentSessionKey": child})).await;
    assert_eq!(names(&str_of(&second, "childSessionKey")), ["sessions_yield"], "a leaf");
    o.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_child_that_expects_no_completion_ends_cleaned_up_without_a_handoff() {
    let host = Arc::new(FakeHost::replying("done"));
    let o = open9(json!({}), host.clone()).await;
    let out = spawn(&o, json!({"task": "fire and forget", "expectsCompletionMessage": false}), main_ctx()).await;
    assert_eq!(out["expectsCompletionMessage"], false);
    assert_eq!(out["note"], spawn9::COMPLETION_NOTE_QUIET, "the quiet note");
    let run = str_of(&out, "runId");
    crate::orchestrate::subagents::testkit::until("cleaned up", || {
        crate::orchestrate::subagents::testkit::record(&o, &run).is_some_and(|r| r.cleanup_completed_at.is_some())
    })
    .await;
    let rec = crate::orchestrate::subagents::testkit::record(&o, &run).unwrap();
    assert_eq!((rec.announce.status.as_str(), rec.outcome.map(|x| x.status)), ("skipped", Some("ok".to_owned())));
    assert!(crate::orchestrate::subagents::testkit::requests_in(&host, Lane::Announce).is_empty());
    o.close().await;
}
