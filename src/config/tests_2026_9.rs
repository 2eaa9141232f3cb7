//! Tests of the config as the 2026.9 contract reads it.
use super::*;
use crate::error::ErrorCode;
use serde_json::json;

fn cfg9(v: Value) -> Config {
    Config::from_json_for(&v, Contract::V2026_9).expect("valid config")
}
fn refused9(v: Value) -> String {
    let e = Config::from_json_for(&v, Contract::V2026_9).expect_err("expected INVALID_CONFIG");
    assert_eq!(e.code(), ErrorCode::InvalidConfig);
    e.message().to_string()
}

#[test]
fn agents_entries_are_the_roster_keyed_by_id() {
    let c = cfg9(json!({"agents": {"ownership": "explicit", "entries": {
        "Main": {"name": "Main bot", "model": "anthropic/claude"},
        "research": {"subagents": {"allowAgents": ["main"]}}
    }}}));
    let ids: Vec<&str> = c.agents.iter().map(|a| a.id.as_str()).collect();
    assert_eq!(ids, ["main", "research"]);
    assert_eq!(c.agents[0].model.as_deref(), Some("anthropic/claude"));
    assert!(c.agents_ownership_explicit);
    assert_eq!(c.default_agent_id(), "main");
}

#[test]
fn agents_entries_win_over_a_legacy_list_and_the_list_still_reads_alone() {
    let c = cfg9(json!({"agents": {"entries": {"ops": {}}, "list": [{"id": "other"}]}}));
    assert_eq!(c.agents.len(), 1);
    assert_eq!(c.agents[0].id, "ops");
    let legacy = cfg9(json!({"agents": {"list": [{"id": "a", "default": true}, {"id": "b"}]}}));
    assert_eq!(legacy.default_agent_id(), "a");
}

#[test]
fn a_multi_agent_roster_needs_explicit_ownership_or_a_default() {
    let msg = refused9(json!({"agents": {"entries": {"a": {}, "b": {}}}}));
    assert!(msg.starts_with("invalid config: agents.ownership must be \"explicit\""), "{msg}");
    cfg9(json!({"agents": {"entries": {"a": {"default": true}, "b": {}}}}));
    let bad = refused9(json!({"agents": {"ownership": "implicit", "entries": {"a": {}}}}));
    assert_eq!(bad, "invalid config: agents.ownership must be \"explicit\"");
}

#[test]
fn max_ping_pong_turns_is_a_constant_five_under_2026_9() {
    let c = cfg9(json!({"session": {"agentToAgent": {"maxPingPongTurns": 1}}}));
    assert_eq!(c.max_ping_pong_turns, 5);
    let old = Config::from_json(&json!({"session": {"agentToAgent": {"maxPingPongTurns": 1}}})).unwrap();
    assert_eq!(old.max_ping_pong_turns, 1);
    assert_eq!(c.ping_pong_turns_for(Some("agent:main:cron:nightly")), 0, "a cron requester gets no ping-pong");
    assert_eq!(c.ping_pong_turns_for(Some("agent:main:main")), 5);
    assert_eq!(old.ping_pong_turns_for(Some("agent:main:cron:nightly")), 1);
}

#[test]
fn agent_to_agent_is_on_unless_literally_false() {
    assert!(cfg9(Value::Null).agent_to_agent.enabled);
    assert!(cfg9(json!({"tools": {"agentToAgent": {"enabled": true}}})).agent_to_agent.enabled);
    assert!(!cfg9(json!({"tools": {"agentToAgent": {"enabled": false}}})).agent_to_agent.enabled);
    assert!(!Config::from_json(&Value::Null).unwrap().agent_to_agent.enabled, "2026.1 is off by default");
    let msg = refused9(json!({"tools": {"agentToAgent": {"enabled": "no"}}}));
    assert_eq!(msg, "invalid config: tools.agentToAgent.enabled must be a boolean");
}

#[test]
fn tools_sessions_visibility_reads_self_tree_agent_all_and_refuses_the_rest() {
    for (raw, want) in [
        ("self", SessionVisibility::SelfOnly),
        (" Tree ", SessionVisibility::Tree),
        ("agent", SessionVisibility::Agent),
        ("ALL", SessionVisibility::All),
    ] {
        assert_eq!(cfg9(json!({"tools": {"sessions": {"visibility": raw}}})).session_visibility, want);
    }
    assert_eq!(cfg9(Value::Null).session_visibility, SessionVisibility::All);
    let msg = refused9(json!({"tools": {"sessions": {"visibility": "spawned"}}}));
    assert_eq!(msg, r#"invalid config: tools.sessions.visibility must be one of "self", "tree", "agent", "all""#);
}

#[test]
fn subagent_limits_have_the_2026_9_defaults_and_ranges() {
    let c = cfg9(Value::Null);
    assert_eq!(c.subagents.max_spawn_depth, 5);
    assert_eq!(c.subagents.max_children_per_agent, 5);
    assert_eq!(c.subagents.max_concurrent, 8);
    let set = cfg9(
        json!({"agents": {"defaults": {"subagents": {"maxSpawnDepth": 2, "maxChildrenPerAgent": 20, "maxConcurrent": 1}}}}),
    );
    assert_eq!(
        (set.subagents.max_spawn_depth, set.subagents.max_children_per_agent, set.subagents.max_concurrent),
        (2, 20, 1)
    );
    assert_eq!(
        refused9(json!({"agents": {"defaults": {"subagents": {"maxSpawnDepth": 6}}}})),
        "invalid config: agents.defaults.subagents.maxSpawnDepth must be an integer from 1 to 5"
    );
    assert_eq!(
        refused9(json!({"agents": {"defaults": {"subagents": {"maxChildrenPerAgent": 0}}}})),
        "invalid config: agents.defaults.subagents.maxChildrenPerAgent must be an integer from 1 to 20"
    );
    assert_eq!(
        refused9(json!({"agents": {"defaults": {"subagents": {"maxConcurrent": 1.5}}}})),
        "invalid config: agents.defaults.subagents.maxConcurrent must be an integer from 1 to 4294967295"
    );
}

#[test]
fn the_contract_travels_in_the_config() {
    assert_eq!(Config::default().contract, Contract::V2026_1);
    assert_eq!(cfg9(Value::Null).contract, Contract::V2026_9);
    assert_eq!(cfg9(Value::Null).rules().list_default_limit, 100);
}

#[test]
fn sandbox_modes_are_read_per_agent_over_the_defaults_and_checked() {
    let c = cfg9(json!({"agents": {
        "ownership": "explicit",
        "defaults": {"sandbox": {"mode": "non-main"}},
        "entries": {"main": {}, "box": {"sandbox": {"mode": "ALL"}}},
    }}));
    assert_eq!((c.sandbox_mode_for("main"), c.sandbox_mode_for("box")), (SandboxMode::NonMain, SandboxMode::All));
    assert_eq!(cfg9(json!({})).sandbox_mode_for("main"), SandboxMode::Off);
    assert_eq!(
        refused9(json!({"agents": {"defaults": {"sandbox": {"mode": "some"}}}})),
        r#"invalid config: agents.defaults.sandbox.mode must be "off", "non-main" or "all""#
    );
    // 2026.1 does not read it
    assert_eq!(
        Config::from_json(&json!({"agents": {"defaults": {"sandbox": {"mode": "some"}}}})).unwrap().sandbox_mode,
        SandboxMode::Off
    );
}

#[test]
fn spawn_attachments_are_off_by_default_and_their_limits_floored() {
    assert_eq!(cfg9(json!({})).spawn_attachments, AttachmentLimits::default());
    let c = cfg9(
        json!({"tools": {"sessions_spawn": {"attachments": {"enabled": true, "maxFiles": 2.7, "maxFileBytes": 10}}}}),
    );
    let a = c.spawn_attachments;
    assert_eq!((a.enabled, a.max_files, a.max_file_bytes, a.max_total_bytes), (true, 2, 10, 5 * 1024 * 1024));
    assert!(refused9(json!({"tools": {"sessions_spawn": {"attachments": {"maxFiles": -1}}}})).contains("maxFiles"));
}
