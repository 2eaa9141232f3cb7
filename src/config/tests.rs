//! Tests of `config`, kept beside it so the module itself reads top to bottom.
use super::*;
use crate::error::ErrorCode;
use serde_json::json;

fn cfg(v: Value) -> Config {
    Config::from_json(&v).expect("valid config")
}
/// The refusal message, after checking it is INVALID_CONFIG with the usual prefix.
fn refused(v: Value) -> String {
    let e = Config::from_json(&v).expect_err("expected INVALID_CONFIG");
    assert_eq!(e.code(), ErrorCode::InvalidConfig);
    assert!(e.message().starts_with("invalid config: "), "{}", e.message());
    e.message().to_string()
}

// ---- the empty config ------------------------------------------------------------------

#[test]
fn null_config_gives_every_default() {
    let c = cfg(Value::Null);
    assert_eq!(c.scope, Scope::PerSender);
    assert_eq!(c.main_key, "main");
    assert_eq!(c.send_policy, None);
    assert_eq!(c.max_ping_pong_turns, 5);
    assert_eq!(c.max_chain_turns, 20);
    assert_eq!(c.agent_to_agent, AgentToAgentConfig::default());
    assert_eq!(c.subagent_tools_allow, None);
    assert!(c.subagent_tools_deny.is_empty());
    assert_eq!(c.default_timeout_seconds, 600);
    assert_eq!(c.sandbox_visibility, Visibility::Spawned);
    assert_eq!(c.subagents, SubagentDefaults::default());
    assert!(c.agents.is_empty());
    assert_eq!(c.queue, QueueConfig::default());
    assert!(c.models.is_empty());
    assert_eq!(c.history_max_chars, None);
    assert_eq!(c.outbox_max_attempts, 5);
    assert_eq!(c.outbox_backoff_ms, 1000);
    assert_eq!(c.default_agent_id(), "main");
}

#[test]
fn empty_object_equals_null_and_default() {
    assert_eq!(cfg(json!({})), Config::default());
    assert_eq!(cfg(json!({"session": null, "agents": {"defaults": null}})), Config::default());
}

#[test]
fn unknown_keys_are_ignored() {
    let c = cfg(json!({"gateway": {"port": 1}, "session": {"store": "~/x", "foo": [1]}}));
    assert_eq!(c, Config { store: Some("~/x".into()), ..Config::default() });
}

#[test]
fn a_non_object_config_is_refused() {
    for v in [json!([]), json!("x"), json!(3), json!(true)] {
        assert_eq!(refused(v), "invalid config: the config must be an object");
    }
}

#[test]
fn a_non_object_section_is_refused_naming_its_path() {
    assert_eq!(refused(json!({"session": 1})), "invalid config: session must be an object");
    assert_eq!(refused(json!({"tools": {"agentToAgent": []}})), "invalid config: tools.agentToAgent must be an object");
    assert_eq!(
        refused(json!({"agents": {"defaults": {"sandbox": "all"}}})),
        "invalid config: agents.defaults.sandbox must be an object"
    );
}

// ---- session.scope / mainKey -----------------------------------------------------------

#[test]
fn scope_global_and_per_sender_are_read() {
    let c = cfg(json!({"session": {"scope": " Global "}}));
    assert_eq!(c.scope, Scope::Global);
    assert!(c.key_model().is_global_scope());
    assert_eq!(cfg(json!({"session": {"scope": "per-sender"}})).scope, Scope::PerSender);
}

#[test]
fn an_unknown_scope_is_refused() {
    assert_eq!(
        refused(json!({"session": {"scope": "per-peer"}})),
        r#"invalid config: session.scope must be "per-sender" or "global""#
    );
    assert_eq!(refused(json!({"session": {"scope": 1}})), "invalid config: session.scope must be a string");
}

#[test]
fn main_key_is_trimmed_and_lowercased_and_blank_is_main() {
    let c = cfg(json!({"session": {"mainKey": " Work "}}));
    assert_eq!(c.main_key, "work");
    assert_eq!(c.key_model().main_key(), "work");
    assert_eq!(cfg(json!({"session": {"mainKey": "  "}})).main_key, "main");
}

#[test]
fn main_key_of_wrong_type_or_with_control_chars_or_too_long_is_refused() {
    assert_eq!(refused(json!({"session": {"mainKey": 5}})), "invalid config: session.mainKey must be a string");
    assert_eq!(
        refused(json!({"session": {"mainKey": "a\u{0}b"}})),
        "invalid config: session.mainKey must not contain control characters"
    );
    let long = "k".repeat(MAX_MAIN_KEY_LEN + 1);
    assert!(refused(json!({"session": {"mainKey": long}})).contains("session.mainKey must be at most"));
}

// ---- session.sendPolicy ----------------------------------------------------------------

#[test]
fn send_policy_rules_are_normalized() {
    let c = cfg(json!({"session": {"sendPolicy": {
        "default": " DENY ",
        "rules": [
            {"action": "deny", "match": {"channel": " Discord ", "chatType": "DM", "keyPrefix": " Cron: "}},
            {"action": "allow", "match": {"channel": "  ", "keyPrefix": ""}},
            {"action": "Allow"}
        ]
    }}}));
    let p = c.send_policy.expect("configured");
    assert_eq!(p.default, PolicyAction::Deny);
    assert_eq!(
        p.rules,
        vec![
            SendPolicyRule {
                action: PolicyAction::Deny,
                channel: Some("discord".into()),
                chat_type: Some(ChatType::Direct),
                key_prefix: Some("cron:".into()),
            },
            SendPolicyRule::default(),
            SendPolicyRule::default(),
        ]
    );
}

#[test]
fn a_rule_without_action_is_refused_as_the_gateway_refuses_it() {
    // issue 12: the gateway's schema requires `action`; a config it refuses is refused here too
    assert_eq!(
        refused(json!({"session": {"sendPolicy": {"rules": [{"match": {"channel": "x"}}]}}})),
        r#"invalid config: session.sendPolicy.rules[0].action is required: "allow" or "deny""#
    );
}

#[test]
fn y6_amended_an_invalid_action_fails_closed() {
    let bad = json!({"session": {"sendPolicy": {"rules": [
        {"action": "deny"}, {"action": "block"}
    ]}}});
    assert_eq!(refused(bad), r#"invalid config: session.sendPolicy.rules[1].action must be "allow" or "deny""#);
    assert_eq!(
        refused(json!({"session": {"sendPolicy": {"rules": [{"action": false}]}}})),
        r#"invalid config: session.sendPolicy.rules[0].action must be "allow" or "deny""#
    );
}

#[test]
fn an_invalid_default_action_is_refused() {
    assert_eq!(
        refused(json!({"session": {"sendPolicy": {"default": "maybe"}}})),
        r#"invalid config: session.sendPolicy.default must be "allow" or "deny""#
    );
}

#[test]
fn an_invalid_chat_type_is_refused() {
    assert_eq!(
        refused(json!({"session": {"sendPolicy": {"rules": [{"action": "deny", "match": {"chatType": "thread"}}]}}})),
        r#"invalid config: session.sendPolicy.rules[0].match.chatType must be one of "direct", "dm", "group", "channel""#
    );
}

#[test]
fn malformed_rules_are_refused() {
    assert_eq!(
        refused(json!({"session": {"sendPolicy": {"rules": {"action": "deny"}}}})),
        "invalid config: session.sendPolicy.rules must be an array"
    );
    assert_eq!(
        refused(json!({"session": {"sendPolicy": {"rules": ["deny"]}}})),
        "invalid config: session.sendPolicy.rules[0] must be an object"
    );
    assert_eq!(
        refused(json!({"session": {"sendPolicy": {"rules": [null]}}})),
        "invalid config: session.sendPolicy.rules[0] must be an object"
    );
    assert_eq!(
        refused(json!({"session": {"sendPolicy": {"rules": [{"action": "deny", "match": "discord"}]}}})),
        "invalid config: session.sendPolicy.rules[0].match must be an object"
    );
    assert_eq!(
        refused(json!({"session": {"sendPolicy": {"rules": [{"action": "deny", "match": {"keyPrefix": 1}}]}}})),
        "invalid config: session.sendPolicy.rules[0].match.keyPrefix must be a string"
    );
}

#[test]
fn a_send_policy_that_is_not_an_object_is_refused() {
    assert_eq!(
        refused(json!({"session": {"sendPolicy": "deny"}})),
        "invalid config: session.sendPolicy must be an object"
    );
}

#[test]
fn an_empty_send_policy_object_is_configured_and_allows_by_default() {
    let p = cfg(json!({"session": {"sendPolicy": {}}})).send_policy.expect("configured");
    assert_eq!(p, SendPolicyConfig::default());
    assert_eq!(cfg(json!({"session": {"sendPolicy": null}})).send_policy, None);
}

// ---- session.agentToAgent --------------------------------------------------------------

#[test]
fn max_ping_pong_turns_is_a_whole_number_from_0_to_5_as_the_gateway_schema_has_it() {
    let turns = |v: Value| cfg(json!({"session": {"agentToAgent": {"maxPingPongTurns": v}}})).max_ping_pong_turns;
    assert_eq!(turns(json!(0)), 0);
    assert_eq!(turns(json!(5)), 5);
    assert_eq!(turns(json!(2.0)), 2);
    assert_eq!(turns(Value::Null), 5);
    // issue 12: the gateway refuses these configs (its run time would clamp, D15); so do we
    for v in [json!(9), json!(2.7), json!(1e300)] {
        assert_eq!(
            refused(json!({"session": {"agentToAgent": {"maxPingPongTurns": v}}})),
            "invalid config: session.agentToAgent.maxPingPongTurns must be a whole number from 0 to 5"
        );
    }
}

#[test]
fn d15_amended_a_negative_ping_pong_count_is_refused() {
    assert_eq!(
        refused(json!({"session": {"agentToAgent": {"maxPingPongTurns": -1}}})),
        "invalid config: session.agentToAgent.maxPingPongTurns must be a non-negative number"
    );
    assert_eq!(
        refused(json!({"session": {"agentToAgent": {"maxPingPongTurns": "3"}}})),
        "invalid config: session.agentToAgent.maxPingPongTurns must be a non-negative number"
    );
}

#[test]
fn max_chain_turns_is_read_and_floored() {
    let c = cfg(json!({"session": {"agentToAgent": {"maxChainTurns": 7.9}}}));
    assert_eq!(c.max_chain_turns, 7);
    assert!(refused(json!({"session": {"agentToAgent": {"maxChainTurns": -0.5}}}))
        .contains("session.agentToAgent.maxChainTurns"));
}

#[test]
fn negative_zero_counts_as_zero() {
    let c = cfg(json!({"session": {"agentToAgent": {"maxPingPongTurns": -0.0}}}));
    assert_eq!(c.max_ping_pong_turns, 0);
}

// ---- session.history / session.outbox --------------------------------------------------

#[test]
fn history_and_outbox_settings_are_read() {
    let c = cfg(json!({"session": {
        "history": {"maxChars": 1000.9},
        "outbox": {"maxAttempts": 0, "backoffMs": 250.5}
    }}));
    assert_eq!(c.history_max_chars, Some(1000));
    assert_eq!(c.outbox_max_attempts, 1);
    assert_eq!(c.outbox_backoff_ms, 250);
}

#[test]
fn negative_outbox_and_history_numbers_are_refused() {
    assert!(refused(json!({"session": {"outbox": {"backoffMs": -1}}})).contains("session.outbox.backoffMs"));
    assert!(refused(json!({"session": {"outbox": {"maxAttempts": -3}}})).contains("session.outbox.maxAttempts"));
    assert!(refused(json!({"session": {"history": {"maxChars": "10"}}})).contains("session.history.maxChars"));
}

// ---- tools.agentToAgent / tools.subagents ----------------------------------------------

#[test]
fn agent_to_agent_is_enabled_only_by_literal_true() {
    let c = cfg(json!({"tools": {"agentToAgent": {"enabled": true, "allow": [" ma* ", "ops"]}}}));
    assert!(c.agent_to_agent.enabled);
    assert_eq!(c.agent_to_agent.allow, vec![" ma* ", "ops"]);
    assert!(!cfg(json!({"tools": {"agentToAgent": {"enabled": false}}})).agent_to_agent.enabled);
    assert!(!cfg(json!({"tools": {"agentToAgent": {"enabled": null}}})).agent_to_agent.enabled);
}

#[test]
fn a_non_boolean_enabled_is_refused() {
    for v in [json!("true"), json!(1), json!({})] {
        assert_eq!(
            refused(json!({"tools": {"agentToAgent": {"enabled": v}}})),
            "invalid config: tools.agentToAgent.enabled must be a boolean"
        );
    }
}

#[test]
fn a_non_array_or_non_string_allow_list_is_refused() {
    for v in [json!("main"), json!(["main", 1]), json!([null]), json!({"0": "a"})] {
        assert_eq!(
            refused(json!({"tools": {"agentToAgent": {"allow": v}}})),
            "invalid config: tools.agentToAgent.allow must be an array of strings"
        );
    }
}

#[test]
fn subagent_tool_lists_are_read() {
    let c = cfg(json!({"tools": {"subagents": {"tools": {"allow": ["read"], "deny": ["exec"]}}}}));
    assert_eq!(c.subagent_tools_allow, Some(vec!["read".to_string()]));
    assert_eq!(c.subagent_tools_deny, vec!["exec"]);
    assert_eq!(
        refused(json!({"tools": {"subagents": {"tools": {"deny": "exec"}}}})),
        "invalid config: tools.subagents.tools.deny must be an array of strings"
    );
}

// ---- agents.defaults -------------------------------------------------------------------

#[test]
fn timeout_seconds_is_floored_with_a_minimum_of_one() {
    let t = |v: Value| cfg(json!({"agents": {"defaults": {"timeoutSeconds": v}}})).default_timeout_seconds;
    assert_eq!(t(json!(90.9)), 90);
    assert_eq!(t(json!(0)), 1);
    assert_eq!(t(json!(0.2)), 1);
    assert!(refused(json!({"agents": {"defaults": {"timeoutSeconds": -5}}}))
        .contains("agents.defaults.timeoutSeconds must be a non-negative number"));
}

#[test]
fn sandbox_visibility_default_is_read_and_validated() {
    let c = cfg(json!({"agents": {"defaults": {"sandbox": {"sessionToolsVisibility": "ALL"}}}}));
    assert_eq!(c.sandbox_visibility, Visibility::All);
    assert_eq!(
        refused(json!({"agents": {"defaults": {"sandbox": {"sessionToolsVisibility": "none"}}}})),
        r#"invalid config: agents.defaults.sandbox.sessionToolsVisibility must be "spawned" or "all""#
    );
}

#[test]
fn archive_after_minutes_zero_disables_and_fractions_are_kept() {
    let a = |v: Value| {
        cfg(json!({"agents": {"defaults": {"subagents": {"archiveAfterMinutes": v}}}})).subagents.archive_after_minutes
    };
    assert_eq!(a(json!(0)), None);
    assert_eq!(a(json!(0.01)), Some(0.01));
    assert_eq!(a(json!(5)), Some(5.0));
    assert_eq!(a(Value::Null), Some(60.0));
    assert!(refused(json!({"agents": {"defaults": {"subagents": {"archiveAfterMinutes": -1}}}}))
        .contains("agents.defaults.subagents.archiveAfterMinutes"));
}

#[test]
fn subagent_model_is_a_string_or_primary() {
    let m = |v: Value| cfg(json!({"agents": {"defaults": {"subagents": {"model": v}}}})).subagents.model;
    assert_eq!(m(json!(" minimax/MiniMax-M2.1 ")), Some("minimax/MiniMax-M2.1".into()));
    assert_eq!(m(json!({"primary": "openai/gpt-5", "fallbacks": []})), Some("openai/gpt-5".into()));
    assert_eq!(m(json!("  ")), None);
    assert_eq!(m(json!({})), None);
}

#[test]
fn a_malformed_subagent_model_is_refused() {
    assert_eq!(
        refused(json!({"agents": {"defaults": {"subagents": {"model": 3}}}})),
        r#"invalid config: agents.defaults.subagents.model must be a string or an object with a string "primary""#
    );
    assert_eq!(
        refused(json!({"agents": {"defaults": {"subagents": {"model": {"primary": 3}}}}})),
        "invalid config: agents.defaults.subagents.model.primary must be a string"
    );
}

#[test]
fn max_active_is_read_and_floored() {
    let c = cfg(json!({"agents": {"defaults": {"subagents": {"maxActive": 3.5}}}}));
    assert_eq!(c.subagents.max_active, 3);
    assert!(refused(json!({"agents": {"defaults": {"subagents": {"maxActive": true}}}}))
        .contains("agents.defaults.subagents.maxActive"));
}

// ---- agents.list -----------------------------------------------------------------------

#[test]
fn agent_entries_are_read_and_normalized() {
    let c = cfg(json!({"agents": {"list": [{
        "id": " Research ",
        "name": "  Research Bot  ",
        "default": true,
        "subagents": {"allowAgents": ["Coder", "*"], "model": {"primary": "opencode/claude"}},
        "sandbox": {"sessionToolsVisibility": "all"}
    }]}}));
    assert_eq!(
        c.agents,
        vec![AgentConfig {
            id: "research".into(),
            name: Some("Research Bot".into()),
            is_default: true,
            allow_agents: vec!["Coder".into(), "*".into()],
            allow_agents_set: true,
            subagent_model: Some("opencode/claude".into()),
            sandbox_visibility: Some(Visibility::All),
            ..AgentConfig::default()
        }]
    );
}

#[test]
fn a_blank_name_is_none() {
    let c = cfg(json!({"agents": {"list": [{"id": "a", "name": "   "}]}}));
    assert_eq!(c.agents[0].name, None);
}

#[test]
fn default_agent_is_the_first_marked_default() {
    let c = cfg(json!({"agents": {"list": [
        {"id": "a"}, {"id": "B", "default": true}, {"id": "c", "default": true}
    ]}}));
    assert_eq!(c.default_agent_id(), "b");
    assert_eq!(c.key_model().default_agent(), "b");
    assert_eq!(c.key_model().main_session_key(), "agent:b:main");
}

#[test]
fn default_agent_is_the_first_entry_when_none_is_marked() {
    let c = cfg(json!({"agents": {"list": [{"id": "Ops"}, {"id": "b", "default": false}]}}));
    assert_eq!(c.default_agent_id(), "ops");
}

#[test]
fn default_agent_is_main_without_a_list() {
    assert_eq!(cfg(json!({"agents": {"list": []}})).default_agent_id(), "main");
}

#[test]
fn malformed_agent_entries_are_refused() {
    assert_eq!(refused(json!({"agents": {"list": {"id": "a"}}})), "invalid config: agents.list must be an array");
    assert_eq!(refused(json!({"agents": {"list": ["a"]}})), "invalid config: agents.list[0] must be an object");
    assert_eq!(
        refused(json!({"agents": {"list": [{"id": "a"}, {}]}})),
        "invalid config: agents.list[1].id must be a string"
    );
    assert_eq!(
        refused(json!({"agents": {"list": [{"id": "a", "default": "yes"}]}})),
        "invalid config: agents.list[0].default must be a boolean"
    );
    assert_eq!(
        refused(json!({"agents": {"list": [{"id": "a", "subagents": {"allowAgents": "b"}}]}})),
        "invalid config: agents.list[0].subagents.allowAgents must be an array of strings"
    );
    assert_eq!(
        refused(json!({"agents": {"list": [{"id": "a", "sandbox": {"sessionToolsVisibility": 1}}]}})),
        "invalid config: agents.list[0].sandbox.sessionToolsVisibility must be a string"
    );
    assert_eq!(
        refused(json!({"agents": {"list": [{"id": "a", "name": 7}]}})),
        "invalid config: agents.list[0].name must be a string"
    );
}

#[test]
fn agent_lookup_normalizes_the_id() {
    let c = cfg(json!({"agents": {"list": [{"id": "research"}]}}));
    assert!(c.agent(" Research ").is_some());
    assert!(c.agent("coder").is_none());
}

#[test]
fn per_agent_visibility_wins_over_the_default() {
    let c = cfg(json!({"agents": {
        "defaults": {"sandbox": {"sessionToolsVisibility": "all"}},
        "list": [{"id": "locked", "sandbox": {"sessionToolsVisibility": "spawned"}}, {"id": "open"}]
    }}));
    assert_eq!(c.visibility_for("locked"), Visibility::Spawned);
    assert_eq!(c.visibility_for("open"), Visibility::All);
    assert_eq!(c.visibility_for("unlisted"), Visibility::All);
}

// ---- messages.queue --------------------------------------------------------------------

#[test]
fn queue_settings_are_read_with_lowercased_channel_keys() {
    let c = cfg(json!({"messages": {"queue": {
        "mode": " collect ", "byChannel": {"Discord": "steer", "slack": null},
        "debounceMs": 80.5, "debounceMsByChannel": {" WhatsApp ": 0},
        "cap": 0.4, "drop": "old"
    }}}));
    let q = c.queue;
    assert_eq!(q.mode.as_deref(), Some("collect"));
    assert_eq!(q.by_channel.get("discord").map(String::as_str), Some("steer"));
    assert_eq!(q.by_channel.len(), 1);
    assert_eq!(q.debounce_ms, Some(80));
    assert_eq!(q.debounce_ms_by_channel.get("whatsapp"), Some(&0));
    assert_eq!(q.cap, Some(1));
    assert_eq!(q.drop.as_deref(), Some("old"));
}

#[test]
fn malformed_queue_values_are_refused_naming_the_channel() {
    assert_eq!(
        refused(json!({"messages": {"queue": {"byChannel": {"discord": 1}}}})),
        "invalid config: messages.queue.byChannel.discord must be a string"
    );
    assert_eq!(
        refused(json!({"messages": {"queue": {"debounceMsByChannel": {"slack": -1}}}})),
        "invalid config: messages.queue.debounceMsByChannel.slack must be a non-negative number"
    );
    assert!(refused(json!({"messages": {"queue": {"cap": -2}}})).contains("messages.queue.cap"));
    assert!(refused(json!({"messages": {"queue": {"mode": ["steer"]}}})).contains("messages.queue.mode"));
}

// ---- models.providers ------------------------------------------------------------------

fn catalog() -> ModelCatalog {
    cfg(json!({"models": {"providers": {
        "anthropic": {"baseUrl": "x", "models": [
            {"id": "claude-haiku-4-5", "cost": {"input": 1, "output": 5}},
            {"id": "shared"}
        ]},
        "openrouter": {"models": [{"id": "meta-llama/Llama-3"}, {"id": "shared"}]},
        "empty": {}
    }}}))
    .models
}

#[test]
fn the_catalog_keeps_config_order_and_fills_missing_costs_with_zero() {
    let c = catalog();
    assert!(!c.is_empty());
    let names: Vec<&str> = c.providers.iter().map(|(n, _)| n.as_str()).collect();
    assert_eq!(names, ["anthropic", "openrouter", "empty"]);
    assert_eq!(
        c.cost("anthropic", "claude-haiku-4-5"),
        Some(&ModelCost { input: 1.0, output: 5.0, cache_read: 0.0, cache_write: 0.0 })
    );
    assert_eq!(c.cost("anthropic", "shared"), None);
    assert_eq!(c.cost("nobody", "shared"), None);
}

#[test]
fn provider_slash_id_resolves_when_listed_under_that_provider() {
    let c = catalog();
    let want = ModelRef { provider: Some("anthropic".into()), model: "claude-haiku-4-5".into() };
    assert_eq!(c.resolve(" anthropic/claude-haiku-4-5 "), Some(want.clone()));
    assert_eq!(c.resolve("Anthropic/claude-haiku-4-5"), Some(want));
    assert_eq!(c.resolve("openrouter/claude-haiku-4-5"), None);
}

#[test]
fn a_bare_id_resolves_to_the_first_provider_listing_it() {
    let c = catalog();
    assert_eq!(c.resolve("shared"), Some(ModelRef { provider: Some("anthropic".into()), model: "shared".into() }));
    assert_eq!(
        c.resolve("meta-llama/Llama-3"),
        Some(ModelRef { provider: Some("openrouter".into()), model: "meta-llama/Llama-3".into() })
    );
    assert_eq!(c.resolve("bad-model"), None);
    assert_eq!(c.resolve("   "), None);
}

#[test]
fn with_no_catalog_every_non_empty_ref_is_valid() {
    let c = ModelCatalog::default();
    assert!(c.is_empty());
    assert_eq!(
        c.resolve("minimax/MiniMax-M2.1"),
        Some(ModelRef { provider: Some("minimax".into()), model: "MiniMax-M2.1".into() })
    );
    assert_eq!(c.resolve("gpt-5"), Some(ModelRef { provider: None, model: "gpt-5".into() }));
    assert_eq!(c.resolve("/x"), Some(ModelRef { provider: None, model: "/x".into() }));
    assert_eq!(c.resolve(""), None);
}

#[test]
fn providers_without_models_make_an_empty_catalog() {
    let c = cfg(json!({"models": {"providers": {"a": {"models": []}, "b": {}}}}));
    assert!(c.models.is_empty());
}

#[test]
fn malformed_catalog_entries_are_refused() {
    assert_eq!(
        refused(json!({"models": {"providers": {"a": {"models": {}}}}})),
        "invalid config: models.providers.a.models must be an array"
    );
    assert_eq!(
        refused(json!({"models": {"providers": {"a": {"models": [{"name": "x"}]}}}})),
        "invalid config: models.providers.a.models[0].id must be a non-empty string"
    );
    assert_eq!(
        refused(json!({"models": {"providers": {"a": {"models": [{"id": "x", "cost": {"input": -1}}]}}}})),
        "invalid config: models.providers.a.models[0].cost.input must be a non-negative number"
    );
    assert_eq!(
        refused(json!({"models": {"providers": {"a": 1}}})),
        "invalid config: models.providers.a must be an object"
    );
}

#[test]
fn chat_type_normalization_follows_the_reference() {
    assert_eq!(ChatType::normalize(" DM "), Some(ChatType::Direct));
    assert_eq!(ChatType::normalize("direct"), Some(ChatType::Direct));
    assert_eq!(ChatType::normalize("Group"), Some(ChatType::Group));
    assert_eq!(ChatType::normalize("channel"), Some(ChatType::Channel));
    assert_eq!(ChatType::normalize("thread"), None);
}

#[test]
fn deeply_nested_junk_under_unknown_keys_is_harmless() {
    let mut v = json!(1);
    for _ in 0..100 {
        v = json!({"x": [v]});
    }
    assert_eq!(cfg(json!({"plugins": v})), Config::default());
}

#[test]
fn odd_unicode_in_ids_and_names_is_kept_safely() {
    let c = cfg(json!({"agents": {"list": [{"id": "Ünïcødé 🤖", "name": "\u{202E}evil"}]}}));
    assert_eq!(c.agents[0].id, "n-c-d");
    assert_eq!(c.agents[0].name.as_deref(), Some("\u{202E}evil"));
}

#[test]
fn redact_patterns_are_regular_expressions_checked_at_config_time() {
    let c = cfg(json!({"logging": {"redactPatterns": ["acct-[0-9]+", "/tok=(\\d+)/i", ""]}}));
    assert_eq!(c.history_redact_patterns.len(), 3);
    let m = refused(json!({"logging": {"redactPatterns": ["ok", "pw(?=x)"]}}));
    assert!(
        m.starts_with("invalid config: logging.redactPatterns \"pw(?=x)\" is not a supported regular expression"),
        "{m}"
    );
}
