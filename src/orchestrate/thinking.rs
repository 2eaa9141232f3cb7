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
#[path = "thinking_tests.rs"]
mod tests;
