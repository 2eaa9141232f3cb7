//! How a session appears in `sessions.list` (§2.7): the gateway row, the title and preview
//! text, dates.

use serde_json::{Map, Value};

use crate::entry::{self};
use crate::store::ListedRow;

/// A `sessions.list` row (§2.7), fields in the gateway's order; absent values left out.
pub(super) fn gateway_row(r: &ListedRow, extra: Option<(Option<String>, Option<String>)>) -> Value {
    let e = &r.entry;
    let mut m = Map::new();
    let key = r.key.as_str();
    let kind = crate::keys::gateway_kind(key, entry::str_field(e, "chatType"));
    m.insert("key".into(), Value::from(key));
    m.insert("kind".into(), Value::from(kind.as_str()));
    let copy = |m: &mut Map<String, Value>, name: &str| {
        if let Some(v) = e.get(name).filter(|v| !v.is_null()) {
            m.insert(name.into(), v.clone());
        }
    };
    copy(&mut m, "label");
    if let Some(d) = entry::display_name(key, e) {
        m.insert("displayName".into(), Value::from(d));
    }
    if let Some(c) = entry::row_channel(key, e) {
        m.insert("channel".into(), Value::from(c));
    }
    for f in ["subject", "groupChannel", "space", "chatType", "origin"] {
        copy(&mut m, f);
    }
    m.insert("updatedAt".into(), e.get("updatedAt").filter(|v| v.is_number()).cloned().unwrap_or(Value::Null));
    for f in [
        "sessionId",
        "systemSent",
        "abortedLastRun",
        "thinkingLevel",
        "verboseLevel",
        "reasoningLevel",
        "elevatedLevel",
        "sendPolicy",
        "inputTokens",
        "outputTokens",
    ] {
        copy(&mut m, f);
    }
    m.insert("totalTokens".into(), entry::total_tokens(e));
    for f in ["responseUsage", "modelProvider", "model", "contextTokens"] {
        copy(&mut m, f);
    }
    let dc = entry::delivery_context(e);
    if !dc.is_empty() {
        m.insert("deliveryContext".into(), dc.to_json());
    }
    let last = |m: &mut Map<String, Value>, name: &str, v: Option<String>| {
        if let Some(v) = v.or_else(|| entry::str_field(e, name).map(str::to_owned)) {
            m.insert(name.into(), Value::from(v));
        }
    };
    last(&mut m, "lastChannel", dc.channel.clone());
    last(&mut m, "lastTo", dc.to.clone());
    last(&mut m, "lastAccountId", dc.account_id.clone());
    if let Some((title, preview)) = extra {
        if let Some(t) = title {
            m.insert("derivedTitle".into(), Value::from(t));
        }
        if let Some(p) = preview {
            m.insert("lastMessagePreview".into(), Value::from(p));
        }
    }
    Value::Object(m)
}

/// The text of a message for titles and previews: string content, or the first non-empty
/// `text`/`input_text`/`output_text` block.
pub fn message_text(json: &str) -> Option<String> {
    let v: Value = serde_json::from_str(json).ok()?;
    let content = v.get("content")?;
    let text = match content {
        Value::String(s) => Some(s.clone()),
        Value::Array(blocks) => blocks.iter().find_map(|b| {
            let t = b.get("type").and_then(Value::as_str)?;
            if matches!(t, "text" | "input_text" | "output_text") {
                b.get("text").and_then(Value::as_str).filter(|s| !s.trim().is_empty()).map(str::to_owned)
            } else {
                None
            }
        }),
        _ => None,
    }?;
    // Trimmed, inner white space kept, as the gateway's preview shows it (the title collapses it).
    let trimmed = crate::js::js_trim(&text);
    (!trimmed.is_empty()).then(|| trimmed.to_owned())
}

/// The `path` the gateway's `sessions.list` reports: a fixed `session.store` file resolved (`~`
/// expanded, made absolute); a `{agentId}` template as written; without one `(multiple)` (the
/// per-agent stores).
pub fn gateway_store_path(cfg: &crate::config::Config) -> String {
    let Some(store) = cfg.store.as_deref() else { return "(multiple)".to_owned() };
    if store.contains("{agentId}") {
        return store.to_owned();
    }
    let home = std::env::var_os("HOME").map(std::path::PathBuf::from);
    let expanded = match (store.strip_prefix('~'), home) {
        (Some(rest), Some(home)) if rest.is_empty() || rest.starts_with('/') => home.join(rest.trim_start_matches('/')),
        _ => std::path::PathBuf::from(store),
    };
    let absolute = std::path::absolute(&expanded).unwrap_or(expanded);
    absolute.to_string_lossy().into_owned()
}

/// §2.7 derivedTitle from a first message: > 60 chars → cut to 59, at the last space when it
/// lies beyond 36 chars, then `…`.
pub(super) fn clip_title(t: &str) -> String {
    let chars: Vec<char> = t.chars().collect();
    if chars.len() <= 60 {
        return t.to_owned();
    }
    let cut: String = chars[..59].iter().collect();
    let cut = match cut.rfind(' ') {
        Some(i) if cut[..i].chars().count() > 36 => cut[..i].to_owned(),
        _ => cut,
    };
    format!("{cut}…")
}

/// `YYYY-MM-DD` (UTC) of an epoch-ms time.
pub(super) fn ymd(ms: i64) -> String {
    let days = ms.div_euclid(86_400_000);
    // civil-from-days (Howard Hinnant)
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let y = yoe + era * 400;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    let y = if m <= 2 { y + 1 } else { y };
    format!("{y:04}-{m:02}-{d:02}")
}
