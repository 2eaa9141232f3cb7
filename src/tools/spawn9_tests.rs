//! Tests of `sessions_spawn` under the 2026.9 contract: refused parameters, task names, limits.

use super::*;
use serde_json::json;

#[test]
fn channel_delivery_and_timeout_parameters_are_refused_with_the_gateways_texts() {
    let msg = |v: Value| check_unsupported(&v).unwrap_err().message().to_owned();
    assert_eq!(
        msg(json!({"task": "t", "channel": "x"})),
        "sessions_spawn does not support \"channel\"; remove channel-delivery parameters."
    );
    assert_eq!(
        msg(json!({"task": "t", "reply_to": 1})),
        "sessions_spawn does not support \"reply_to\"; remove channel-delivery parameters."
    );
    assert_eq!(
        msg(json!({"task": "t", "timeoutSeconds": 5})),
        "sessions_spawn does not support \"timeoutSeconds\". Use \"runTimeoutSeconds\" for a per-run timeout."
    );
    assert_eq!(msg(json!({"task": "t", "completionTarget": "user"})), COMPLETION_TARGET_VALUES);
    assert!(check_unsupported(&json!({"task": "t", "runTimeoutSeconds": 5, "completionTarget": "parent"})).is_ok());
}

#[test]
fn task_names_follow_the_pattern_and_avoid_reserved_words() {
    assert_eq!(task_name(&json!({})), Ok(None));
    assert_eq!(task_name(&json!({"taskName": "  "})), Ok(None));
    assert_eq!(task_name(&json!({"taskName": "fix-bug_2"})), Ok(Some("fix-bug_2".into())));
    assert_eq!(
        task_name(&json!({"taskName": "Fix"})),
        Err("Invalid taskName \"Fix\". Use 1-64 chars matching [a-z][a-z0-9_-]*.".into())
    );
    assert!(task_name(&json!({"taskName": format!("a{}", "b".repeat(64))})).is_err());
    assert_eq!(
        task_name(&json!({"taskName": "last"})),
        Err("Invalid taskName \"last\". Reserved subagent targets cannot be used as taskName values.".into())
    );
}

#[test]
fn admission_refusals_name_the_numbers_and_the_config_keys() {
    assert_eq!(depth_refusal(4, 5), None);
    assert_eq!(
        depth_refusal(5, 5).unwrap(),
        "sessions_spawn is not allowed at this depth (current depth: 5, max: 5; agents.defaults.subagents.maxSpawnDepth)."
    );
    assert_eq!(children_refusal(4, 5), None);
    assert_eq!(
        children_refusal(5, 5).unwrap(),
        "sessions_spawn has reached max active children for this session (5/5; agents.defaults.subagents.maxChildrenPerAgent)."
    );
}

#[test]
fn the_target_policy_falls_back_from_the_agents_list_to_the_requester_alone() {
    let configured = vec!["main".to_owned(), "ops".to_owned(), "qa".to_owned()];
    assert_eq!(target_refusal("main", "main", false, None, &configured), None);
    assert_eq!(
        target_refusal("main", "ops", true, None, &configured).unwrap(),
        "agentId is not allowed for sessions_spawn (allowed: main)"
    );
    let star = vec!["*".to_owned()];
    assert_eq!(target_refusal("main", "ops", true, Some(&star), &configured), None);
    assert_eq!(
        target_refusal("main", "ghost", true, Some(&star), &configured).unwrap(),
        "agentId \"ghost\" is not in the configured agent registry (allowed: main, ops, qa)"
    );
    let listed = vec!["qa".to_owned(), "gone".to_owned()];
    assert_eq!(target_refusal("main", "qa", true, Some(&listed), &configured), None);
    assert_eq!(
        target_refusal("main", "gone", true, Some(&listed), &configured).unwrap(),
        "agentId \"gone\" is not in the configured agent registry (allowed: qa)"
    );
    assert_eq!(
        target_refusal("main", "ops", true, Some(&[]), &configured).unwrap(),
        "agentId is not allowed for sessions_spawn (allowed: none)"
    );
}

#[test]
fn a_sandboxed_or_required_sandbox_needs_a_sandboxed_child() {
    assert_eq!(sandbox_refusal(false, false, false), None);
    assert_eq!(sandbox_refusal(true, true, false), None);
    assert_eq!(sandbox_refusal(true, false, false), Some(SANDBOXED_TO_UNSANDBOXED));
    assert_eq!(sandbox_refusal(false, false, true), Some(REQUIRE_NEEDS_SANDBOX));
}
