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
