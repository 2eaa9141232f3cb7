//! Tests of `thinking`.

use super::*;

#[test]
fn p10_high_is_passed_on_as_high() {
    assert_eq!(resolve_thinking("high", None).map(ThinkingLevel::as_str), Ok("high"));
}

#[test]
fn p10_banana_is_an_invalid_thinking_level() {
    let err = resolve_thinking("banana", Some("anthropic/claude-opus-4")).unwrap_err();
    assert_eq!(err, "Invalid thinking level \"banana\". Use one of: off, minimal, low, medium, high.");
}

#[test]
fn every_alias_maps_to_its_level_case_insensitively() {
    use ThinkingLevel::*;
    let cases = [
        ("off", Off),
        ("ON", Low),
        ("Enable", Low),
        ("enabled", Low),
        ("min", Minimal),
        ("minimal", Minimal),
        ("think", Minimal),
        ("low", Low),
        ("ThinkHard", Low),
        ("think-hard", Low),
        ("think_hard", Low),
        ("mid", Medium),
        ("med", Medium),
        ("medium", Medium),
        ("thinkharder", Medium),
        ("think-harder", Medium),
        ("harder", Medium),
        ("HIGH", High),
        ("ultra", High),
        ("ultrathink", High),
        ("thinkhardest", High),
        ("highest", High),
        ("max", High),
        ("xhigh", XHigh),
        ("x-high", XHigh),
        ("X_HIGH", XHigh),
        ("  medium\n", Medium),
    ];
    for (raw, level) in cases {
        assert_eq!(normalize_thinking(raw), Some(level), "{raw}");
    }
}

#[test]
fn empty_and_unknown_values_do_not_normalize() {
    assert_eq!(normalize_thinking(""), None);
    assert_eq!(normalize_thinking("   "), None);
    assert_eq!(normalize_thinking("think harder"), None);
    assert_eq!(normalize_thinking("hìgh"), None);
}

#[test]
fn xhigh_models_list_the_sixth_level() {
    for model in ["openai/gpt-5.2", "openai-codex/gpt-5.2-codex", "OpenAI-Codex/GPT-5.1-Codex", "gpt-5.2"] {
        assert_eq!(
            invalid_thinking_error("x", Some(model)),
            "Invalid thinking level \"x\". Use one of: off, minimal, low, medium, high, xhigh.",
            "{model}"
        );
    }
    assert!(!supports_xhigh("openai/gpt-5.1"));
    assert!(!supports_xhigh("anthropic/gpt-5.2"));
    assert!(!supports_xhigh(""));
}

#[test]
fn zai_provider_only_offers_off_and_on() {
    assert_eq!(
        invalid_thinking_error("max2", Some("zai/glm-4.7")),
        "Invalid thinking level \"max2\". Use one of: off, on."
    );
    assert_eq!(thinking_levels_hint(Some("Z.AI/glm-4.7")), "off, on");
    // a bare model id named zai is not the provider
    assert_eq!(thinking_levels_hint(Some("zai")), "off, minimal, low, medium, high");
}

#[test]
fn the_raw_value_is_quoted_as_given() {
    assert_eq!(
        invalid_thinking_error(" Ünï ", None),
        "Invalid thinking level \" Ünï \". Use one of: off, minimal, low, medium, high."
    );
}
