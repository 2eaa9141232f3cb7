//! The thinking-level vocabulary `sessions_spawn` accepts (REFERENCE.md §6.1 step 10): the many
//! spellings agents use (`think-hard`, `ultrathink`, `on`…) mapped to the five levels (six for
//! models with extra-high reasoning), and the error text listing the valid ones for a model.
//! Pure: the caller resolves the model and makes no RPC when this rejects a value.

use crate::js::js_trim;

/// A normalized thinking level, as passed on to the `agent` call.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ThinkingLevel {
    Off,
    Minimal,
    Low,
    Medium,
    High,
    XHigh,
}

impl ThinkingLevel {
    pub fn as_str(self) -> &'static str {
        match self {
            ThinkingLevel::Off => "off",
            ThinkingLevel::Minimal => "minimal",
            ThinkingLevel::Low => "low",
            ThinkingLevel::Medium => "medium",
            ThinkingLevel::High => "high",
            ThinkingLevel::XHigh => "xhigh",
        }
    }
}

/// `normalizeThinkLevel`: trimmed, case-insensitive; unknown or empty → none.
pub fn normalize_thinking(raw: &str) -> Option<ThinkingLevel> {
    let key = js_trim(raw).to_lowercase();
    let level = match key.as_str() {
        "off" => ThinkingLevel::Off,
        "on" | "enable" | "enabled" => ThinkingLevel::Low,
        "min" | "minimal" | "think" => ThinkingLevel::Minimal,
        "low" | "thinkhard" | "think-hard" | "think_hard" => ThinkingLevel::Low,
        "mid" | "med" | "medium" | "thinkharder" | "think-harder" | "harder" => ThinkingLevel::Medium,
        "high" | "ultra" | "ultrathink" | "thinkhardest" | "highest" | "max" => ThinkingLevel::High,
        "xhigh" | "x-high" | "x_high" => ThinkingLevel::XHigh,
        _ => return None,
    };
    Some(level)
}

/// Model refs (`provider/model`, lower-cased) whose models support `xhigh`.
const XHIGH_MODEL_REFS: [&str; 3] = ["openai/gpt-5.2", "openai-codex/gpt-5.2-codex", "openai-codex/gpt-5.1-codex"];

/// `splitModelRef`: trimmed; provider = text before the first `/` when both sides are non-empty.
fn split_model_ref(model_ref: &str) -> (Option<&str>, &str) {
    let trimmed = js_trim(model_ref);
    match trimmed.split_once('/') {
        Some((provider, model)) if !js_trim(provider).is_empty() && !js_trim(model).is_empty() => {
            (Some(js_trim(provider)), js_trim(model))
        }
        _ => (None, trimmed),
    }
}

/// Providers that only know thinking on/off (`zai`, also spelled `z.ai` / `z-ai`).
fn is_binary_thinking_provider(provider: &str) -> bool {
    matches!(provider.to_lowercase().as_str(), "zai" | "z.ai" | "z-ai")
}

/// Whether the model supports `xhigh`. Without a provider the bare model id is compared against
/// the ids of the listed refs.
pub fn supports_xhigh(model_ref: &str) -> bool {
    let (provider, model) = split_model_ref(model_ref);
    let model = model.to_lowercase();
    match provider {
        Some(p) => {
            let full = format!("{}/{}", p.to_lowercase(), model);
            XHIGH_MODEL_REFS.contains(&full.as_str())
        }
        None => {
            !model.is_empty() && XHIGH_MODEL_REFS.iter().any(|r| r.split_once('/').is_some_and(|(_, m)| m == model))
        }
    }
}

/// `formatThinkingLevels`: the levels valid for the resolved model (none resolved → the base five).
pub fn thinking_levels_hint(model_ref: Option<&str>) -> String {
    let model_ref = model_ref.unwrap_or("");
    match split_model_ref(model_ref) {
        (Some(p), _) if is_binary_thinking_provider(p) => "off, on".to_string(),
        _ if supports_xhigh(model_ref) => "off, minimal, low, medium, high, xhigh".to_string(),
        _ => "off, minimal, low, medium, high".to_string(),
    }
}

/// `Invalid thinking level "<raw>". Use one of: <levels>.` — `raw` as the caller received it.
pub fn invalid_thinking_error(raw: &str, model_ref: Option<&str>) -> String {
    format!("Invalid thinking level \"{raw}\". Use one of: {}.", thinking_levels_hint(model_ref))
}

/// Step 10 in one call: the level, or the error text to return as `{status: "error"}`.
pub fn resolve_thinking(raw: &str, model_ref: Option<&str>) -> Result<ThinkingLevel, String> {
    normalize_thinking(raw).ok_or_else(|| invalid_thinking_error(raw, model_ref))
}

#[cfg(test)]
mod tests {
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
}
