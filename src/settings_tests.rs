//! Tests of the engine settings: where each is read from and which place wins.

use serde_json::json;

use super::*;

#[test]
fn settings_are_read_and_win_over_their_deprecated_places() {
    let config = json!({"session": {"history": {"maxChars": 10}, "outbox": {"maxAttempts": 2}, "agentToAgent": {"maxChainTurns": 3}}});
    let settings = json!({"history": {"maxChars": 99}, "agentToAgent": {"maxChainTurns": 7.9}});
    let c = effective_config(&config, &settings, None).unwrap();
    assert_eq!(
        (c.history_max_chars, c.max_chain_turns, c.outbox_max_attempts, c.outbox_backoff_ms),
        (Some(99), 7, 2, 1000)
    );
    let keys: Vec<&str> = c.deprecated.iter().map(|d| d.key).collect();
    assert_eq!(keys, ["session.history", "session.outbox", "session.agentToAgent.maxChainTurns"]);
    // without settings the old places still work, for one release
    let old = effective_config(&config, &Value::Null, None).unwrap();
    assert_eq!((old.history_max_chars, old.max_chain_turns), (Some(10), 3));
    // a gateway config without them is not deprecated in anything
    assert!(effective_config(&json!({"session": {"agentToAgent": {"maxPingPongTurns": 2}}}), &settings, None)
        .unwrap()
        .deprecated
        .is_empty());
}

#[test]
fn a_bad_setting_is_invalid_config_naming_the_key() {
    let err = |v: Value| Settings::from_json(&v).unwrap_err();
    let e = err(json!({"outbox": {"backoffMs": -1}}));
    assert_eq!(e.code(), crate::error::ErrorCode::InvalidConfig);
    assert_eq!(e.message(), "invalid settings: settings.outbox.backoffMs must be a non-negative number");
    assert!(err(json!({"histroy": {}})).message().contains("settings.histroy is not a setting"));
    assert!(err(json!({"history": {"max": 1}})).message().contains("settings.history.max is not a setting"));
    assert_eq!(err(json!({"history": 5})).message(), "invalid settings: settings.history must be an object");
    assert_eq!(err(json!([1])).message(), "invalid settings: settings must be an object");
    assert_eq!(Settings::from_json(&json!({"outbox": {"maxAttempts": 0}})).unwrap().outbox_max_attempts, Some(1));
}

#[test]
fn set_config_without_settings_keeps_the_ones_in_force() {
    let first = effective_config(&Value::Null, &json!({"agentToAgent": {"maxChainTurns": 4}}), None).unwrap();
    let next = next_config(&first, &json!({"session": {"mainKey": "work"}}), None).unwrap();
    assert_eq!((next.max_chain_turns, next.main_key.as_str()), (4, "work"));
    let reset = next_config(&first, &Value::Null, Some(&Value::Null)).unwrap();
    assert_eq!(reset.max_chain_turns, 20);
}

#[test]
fn the_lease_length_defaults_to_30_s_and_is_clamped_to_a_second_through_a_day() {
    let length = |c: Config| crate::owner::lease_ms(&c);
    let lease = |v: Value| length(effective_config(&Value::Null, &json!({"ownership": {"leaseMs": v}}), None).unwrap());
    assert_eq!(length(effective_config(&Value::Null, &Value::Null, None).unwrap()), 30_000);
    assert_eq!(lease(json!(4500.7)), 4500);
    assert_eq!(lease(json!(10)), 1000);
    assert_eq!(lease(json!(1e18)), 86_400_000);
    let e = Settings::from_json(&json!({"ownership": {"leaseMs": "30s"}})).unwrap_err();
    assert_eq!(e.message(), "invalid settings: settings.ownership.leaseMs must be a non-negative number");
    // not a gateway key: the gateway config's session.ownership is ignored like any unknown key
    let c = effective_config(&json!({"session": {"ownership": {"leaseMs": 5000}}}), &Value::Null, None).unwrap();
    assert_eq!(length(c), 30_000);
}
