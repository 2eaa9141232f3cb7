//! The run list of `subagents` `list` (2026.9 `buildSubagentList`): the caller's children, the
//! latest run per child session, split into `active` (still running) and `recent` (ended
//! within `recentMinutes`), each with a numbered display line, and the `text` that joins them.
//! Reads only; nothing here changes a record.

use serde_json::{json, Map, Value};

use crate::entry::{self, Entry};
use crate::error::Result;
use crate::store::subagents::SubagentRun;
use crate::store::Db;

/// The list as the tool returns it.
pub struct RunView {
    pub total: usize,
    pub active: Vec<Value>,
    pub recent: Vec<Value>,
    pub text: String,
}

/// A one-line string cut to `max` UTF-16 units, `...` marking the cut.
pub fn truncate_line(value: &str, max: usize) -> String {
    let trimmed = value.trim_end();
    if trimmed.encode_utf16().count() <= max {
        return trimmed.to_owned();
    }
    if max <= 3 {
        return "...".chars().take(max).collect();
    }
    let mut out = String::new();
    let mut units = 0;
    for c in trimmed.chars() {
        if units + c.len_utf16() > max - 3 {
            break;
        }
        units += c.len_utf16();
        out.push(c);
    }
    format!("{}...", out.trim_end())
}

/// `formatDurationCompact`: `500ms`, `45s`, `2m5s`, `1h30m`, `3d4h` (the two largest units from
/// the first that is not zero, a trailing zero dropped); `None` for 0 or less.
pub fn compact_duration(ms: i64) -> Option<String> {
    if ms <= 0 {
        return None;
    }
    if ms < 1000 {
        return Some(format!("{ms}ms"));
    }
    let secs = (ms as f64 / 1000.0).round() as i64;
    let parts = [(secs / 86_400, "d"), (secs / 3600 % 24, "h"), (secs / 60 % 60, "m"), (secs % 60, "s")];
    let first = parts.iter().position(|(v, _)| *v > 0)?;
    let mut out = format!("{}{}", parts[first].0, parts[first].1);
    if let Some((v, u)) = parts.get(first + 1) {
        if *v > 0 {
            out.push_str(&format!("{v}{u}"));
        }
    }
    Some(out)
}

/// `formatCompactTokenCount` as the list uses it (trailing `.0` trimmed; thousands without a
/// decimal from 10k).
pub fn token_short(n: f64) -> Option<String> {
    if !n.is_finite() || n <= 0.0 {
        return None;
    }
    let n = n.floor();
    let trim = |s: String| s.strip_suffix(".0").map(str::to_owned).unwrap_or(s);
    if n < 1e3 {
        return Some(format!("{}", n as i64));
    }
    if n < 1e6 {
        let digits = if n >= 1e4 { 0 } else { 1 };
        let k = format!("{:.*}", digits, n / 1e3);
        if k.parse::<f64>().unwrap_or(1e3) < 1e3 {
            return Some(format!("{}k", trim(k)));
        }
    }
    Some(format!("{}m", trim(format!("{:.1}", n / 1e6))))
}

fn usage_text(entry: &Entry) -> String {
    let num = |k: &str| entry.get(k).and_then(Value::as_f64).filter(|f| f.is_finite()).unwrap_or(0.0);
    let (input, output) = (num("inputTokens"), num("outputTokens"));
    let total = input + output;
    if total <= 0.0 {
        return String::new();
    }
    format!(
        "tokens {} (in {} / out {})",
        token_short(total).unwrap_or_default(),
        token_short(input).unwrap_or_else(|| "0".into()),
        token_short(output).unwrap_or_else(|| "0".into())
    )
}

/// `provider/model` of the child's entry (`model` as given when it has a `/`), if any.
fn model_ref(entry: &Entry) -> Option<String> {
    let model = entry::text_field(entry, "model").map(str::trim).filter(|s| !s.is_empty());
    let provider = entry::text_field(entry, "modelProvider").map(str::trim).filter(|s| !s.is_empty());
    match (model, provider) {
        (Some(m), _) if m.contains('/') => Some(m.to_owned()),
        (Some(m), Some(p)) => Some(format!("{p}/{m}")),
        (Some(m), None) => Some(m.to_owned()),
        (None, Some(p)) => Some(p.to_owned()),
        (None, None) => None,
    }
}

fn model_display(entry: &Entry) -> String {
    match model_ref(entry) {
        None => "model n/a".to_owned(),
        Some(r) => match r.rfind('/') {
            Some(i) if i + 1 < r.len() => r[i + 1..].to_owned(),
            _ => r,
        },
    }
}

/// `running`, `done`, `failed`, `timeout` or `killed` (a cancelled run, or one stopped with its
/// ancestor; records cancelled before they were marked `killed` say `Cancelled by operator.`),
/// with the children still pending under it.
fn display_status(rec: &SubagentRun, pending: usize) -> String {
    let waiting = format!("waiting on {pending} {}", if pending == 1 { "child" } else { "children" });
    // 2026.9: a child paused in its own `sessions_yield`
    if super::subagents::pause::is_paused(rec) {
        return if pending == 0 { "waiting for external continuation".to_owned() } else { waiting };
    }
    let status = match (rec.ended_at, rec.outcome.as_ref()) {
        (None, _) => "running",
        (Some(_), Some(o))
            if matches!(o.error.as_deref(), Some(super::tasks::CANCELLED | super::subagents::cascade::KILLED)) =>
        {
            "killed"
        }
        (Some(_), Some(o)) if o.status == "error" => "failed",
        (Some(_), Some(o)) if o.status == "timeout" => "timeout",
        _ => "done",
    };
    if pending == 0 {
        return status.to_owned();
    }
    if status == "running" || status == "done" {
        format!("active ({waiting})")
    } else {
        format!("{status} ({waiting})")
    }
}

/// Builds the view from the caller's records at `now`, reading the children's sessions and
/// their pending descendants in `db` (the caller's transaction, so the view and the tasks shown
/// beside it are one snapshot).
pub fn run_view(db: &Db<'_>, runs: Vec<SubagentRun>, now: i64, recent_minutes: i64) -> Result<RunView> {
    // the latest run per child session, newest first
    let mut runs = runs;
    runs.sort_by_key(|r| std::cmp::Reverse(r.started_at.unwrap_or(r.created_at)));
    let mut seen = std::collections::HashSet::new();
    runs.retain(|r| seen.insert(r.child_session_key.clone()));
    let total = runs.len();
    let cutoff = now - recent_minutes * 60_000;
    let mut enriched = Vec::new();
    for r in runs {
        let pending = db.undelivered_children(&r.child_session_key)?.len();
        let active = r.ended_at.is_none() || pending > 0;
        if !active && r.ended_at.is_none_or(|t| t < cutoff) {
            continue;
        }
        let entry = db.session(&r.child_session_key)?.unwrap_or_default();
        enriched.push((r, entry, pending, active));
    }
    let mut index = 0;
    let (mut active, mut recent) = (Vec::new(), Vec::new());
    // 2026.9 numbers the active runs first, then the recent ones
    for want_active in [true, false] {
        for (r, entry, pending, is_active) in enriched.iter().filter(|x| x.3 == want_active) {
            index += 1;
            let started = r.started_at.unwrap_or(r.created_at);
            let runtime_ms = if *is_active { now - started } else { r.ended_at.unwrap_or(now) - started };
            let runtime = compact_duration(runtime_ms).unwrap_or_else(|| "n/a".to_owned());
            let label_src = r
                .label
                .as_deref()
                .filter(|s| !s.trim().is_empty())
                .unwrap_or(if r.task.trim().is_empty() { "subagent" } else { r.task.as_str() });
            let label = truncate_line(label_src.trim(), 48);
            let task = truncate_line(r.task.trim(), 72);
            let status = display_status(r, *pending);
            let usage = usage_text(entry);
            let line = format!(
                "{index}. {label} ({}, {runtime}{}) {status}{}",
                model_display(entry),
                if usage.is_empty() { String::new() } else { format!(", {usage}") },
                if task.to_lowercase() != label.to_lowercase() { format!(" - {task}") } else { String::new() }
            );
            let mut m = Map::new();
            m.insert("index".into(), index.into());
            m.insert("line".into(), line.into());
            m.insert("runId".into(), r.run_id.clone().into());
            m.insert("sessionKey".into(), r.child_session_key.clone().into());
            m.insert("label".into(), label.into());
            m.insert("task".into(), task.into());
            m.insert("status".into(), status.into());
            m.insert("deliveryStatus".into(), super::tasks::ledger_status(r).1.into());
            m.insert("pendingDescendants".into(), (*pending).into());
            m.insert("runtime".into(), runtime.into());
            m.insert("runtimeMs".into(), runtime_ms.max(0).into());
            if let Some(model) = model_ref(entry) {
                m.insert("model".into(), model.into());
            }
            let tokens = ["inputTokens", "outputTokens"]
                .iter()
                .filter_map(|k| entry.get(*k).and_then(Value::as_f64))
                .sum::<f64>();
            if tokens > 0.0 {
                m.insert("totalTokens".into(), json!(tokens));
            }
            m.insert("startedAt".into(), started.into());
            if let Some(end) = r.ended_at {
                m.insert("endedAt".into(), end.into());
            }
            if *is_active {
                active.push(Value::Object(m));
            } else {
                recent.push(Value::Object(m));
            }
        }
    }
    let lines = |v: &[Value]| -> Vec<String> {
        if v.is_empty() {
            vec!["(none)".to_owned()]
        } else {
            v.iter().filter_map(|x| x["line"].as_str().map(str::to_owned)).collect()
        }
    };
    let mut text = vec!["active subagents:".to_owned()];
    text.extend(lines(&active));
    text.push(String::new());
    text.push(format!("recent (last {recent_minutes}m):"));
    text.extend(lines(&recent));
    Ok(RunView { total, active, recent, text: text.join("\n") })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations_are_compact_with_two_units_at_most() {
        assert_eq!(compact_duration(0), None);
        assert_eq!(compact_duration(500).as_deref(), Some("500ms"));
        assert_eq!(compact_duration(45_000).as_deref(), Some("45s"));
        assert_eq!(compact_duration(125_000).as_deref(), Some("2m5s"));
        assert_eq!(compact_duration(60_000).as_deref(), Some("1m"));
        assert_eq!(compact_duration(5_400_000).as_deref(), Some("1h30m"));
    }

    #[test]
    fn tokens_and_lines_are_shortened_as_the_gateway_does() {
        assert_eq!(token_short(999.0).as_deref(), Some("999"));
        assert_eq!(token_short(1_500.0).as_deref(), Some("1.5k"));
        assert_eq!(token_short(2_000.0).as_deref(), Some("2k"));
        assert_eq!(token_short(12_345.0).as_deref(), Some("12k"));
        assert_eq!(token_short(2_500_000.0).as_deref(), Some("2.5m"));
        assert_eq!(truncate_line("short", 10), "short");
        assert_eq!(truncate_line("abcdefghijkl", 10), "abcdefg...");
    }
}
