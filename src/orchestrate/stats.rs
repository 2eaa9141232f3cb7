//! The stats line appended to a sub-agent's completion announce (REFERENCE.md §6.7): runtime,
//! token usage, estimated cost and where the child's session lives, e.g.
//! `Stats: runtime 1m5s • tokens 12.3k (in 10.0k / out 2.3k) • est $0.07 • sessionKey …`.
//! Pure formatting: reading the child's entry (and retrying until usage shows up) is the
//! caller's job; this module never touches the store.

use crate::js::{js_integer_string, js_round, to_fixed};

/// What the stats line is built from; every field but the session key may be unknown.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct RunStats<'a> {
    /// run start and end, epoch milliseconds
    pub started_at: Option<f64>,
    pub ended_at: Option<f64>,
    /// the child entry's `totalTokens`, `inputTokens`, `outputTokens`
    pub total_tokens: Option<f64>,
    pub input_tokens: Option<f64>,
    pub output_tokens: Option<f64>,
    /// the model's price, per million tokens, when the config's cost table has it
    pub cost: Option<ModelCost>,
    pub session_key: &'a str,
    pub session_id: Option<&'a str>,
    pub transcript_path: Option<&'a str>,
}

/// `models.providers[p].models[id].cost`: USD per million input / output tokens.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ModelCost {
    pub input: f64,
    pub output: f64,
}

/// Run time `ended − started`, clamped at 0; unknown unless both ends are known.
pub fn runtime_ms(started_at: Option<f64>, ended_at: Option<f64>) -> Option<f64> {
    match (started_at, ended_at) {
        (Some(s), Some(e)) => Some((e - s).max(0.0)),
        _ => None,
    }
}

/// `formatDurationShort`: whole seconds (rounded); ≥ 1 h → `<h>h<m>m`, ≥ 1 min → `<m>m<s>s`, else
/// `<s>s`. Zero, negative, non-finite or unknown → `n/a`.
pub fn format_duration_ms(ms: Option<f64>) -> String {
    let ms = match ms {
        Some(ms) if ms.is_finite() && ms > 0.0 => ms,
        _ => return "n/a".to_string(),
    };
    let total_seconds = js_round(ms / 1000.0);
    let hours = (total_seconds / 3600.0).floor();
    let minutes = ((total_seconds % 3600.0) / 60.0).floor();
    let seconds = total_seconds % 60.0;
    if hours > 0.0 {
        format!("{}h{}m", js_integer_string(hours), js_integer_string(minutes))
    } else if minutes > 0.0 {
        format!("{}m{}s", js_integer_string(minutes), js_integer_string(seconds))
    } else {
        format!("{}s", js_integer_string(seconds))
    }
}

/// `formatTokenCount`: 0, unknown or non-finite → `0`; ≥ 1 000 000 → one decimal + `m`;
/// ≥ 1 000 → one decimal + `k`; else the rounded integer.
pub fn format_tokens(value: Option<f64>) -> String {
    let value = match value {
        Some(v) if v.is_finite() && v != 0.0 => v,
        _ => return "0".to_string(),
    };
    if value >= 1_000_000.0 {
        format!("{}m", to_fixed(value / 1_000_000.0, 1))
    } else if value >= 1_000.0 {
        format!("{}k", to_fixed(value / 1_000.0, 1))
    } else {
        js_integer_string(js_round(value))
    }
}

/// `formatUsd`: `$X.XX` from 0.01 up, `$X.XXXX` below (so 0 → `$0.0000`); non-finite → none.
pub fn format_usd(value: f64) -> Option<String> {
    if !value.is_finite() {
        None
    } else if value >= 0.01 {
        Some(format!("${}", to_fixed(value, 2)))
    } else {
        Some(format!("${}", to_fixed(value, 4)))
    }
}

/// Estimated cost in USD: `(in·cost.input + out·cost.output) / 1e6`, when the price and both
/// counts are known.
pub fn estimate_cost(input: Option<f64>, output: Option<f64>, cost: Option<ModelCost>) -> Option<f64> {
    let (input, output, cost) = (input?, output?, cost?);
    Some((input * cost.input + output * cost.output) / 1_000_000.0)
}

/// The whole line: `Stats: ` + parts joined by ` • `.
pub fn stats_line(stats: &RunStats<'_>) -> String {
    let mut parts = Vec::with_capacity(6);
    parts.push(format!("runtime {}", format_duration_ms(runtime_ms(stats.started_at, stats.ended_at))));
    let total = stats.total_tokens.or(match (stats.input_tokens, stats.output_tokens) {
        (Some(i), Some(o)) => Some(i + o),
        _ => None,
    });
    match total {
        Some(total) => {
            let side = |v: Option<f64>| if v.is_some() { format_tokens(v) } else { "n/a".to_string() };
            parts.push(format!(
                "tokens {} (in {} / out {})",
                format_tokens(Some(total)),
                side(stats.input_tokens),
                side(stats.output_tokens)
            ));
        }
        None => parts.push("tokens n/a".to_string()),
    }
    if let Some(usd) = estimate_cost(stats.input_tokens, stats.output_tokens, stats.cost).and_then(format_usd) {
        parts.push(format!("est {usd}"));
    }
    parts.push(format!("sessionKey {}", stats.session_key));
    if let Some(id) = stats.session_id.filter(|s| !s.is_empty()) {
        parts.push(format!("sessionId {id}"));
    }
    if let Some(path) = stats.transcript_path.filter(|s| !s.is_empty()) {
        parts.push(format!("transcript {path}"));
    }
    format!("Stats: {}", parts.join(" \u{2022} "))
}

#[cfg(test)]
#[path = "stats_tests.rs"]
mod tests;
