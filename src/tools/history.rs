//! `sessions_history` (REFERENCE.md §4, DECISIONS.md #7): one session's transcript as the
//! model may see it: tool results left out unless asked for, channel envelopes stripped from
//! user messages, the 6 MiB cap, and the optional `maxChars` budget.

use serde_json::{json, Value};

use super::target::{resolve_reference, spawned_by_requester};
use super::{read_number, read_string, refusal, thrown, Requester, ToolContext};
use crate::engine::Engine;
use crate::entry;
use crate::error::Result;
use crate::policy::{a2a, sandbox};
use crate::store::transcripts::StoredMessage;

const TOOL: &str = "sessions_history";
/// The gateway's serialized-size cap on a history answer.
pub const MAX_HISTORY_BYTES: usize = 6 * 1024 * 1024;

fn answer(engine: &Engine, args: &Value, ctx: &ToolContext) -> Result<Answer> {
    let Some(input) = read_string(args, "sessionKey") else {
        return Ok(Answer::Payload(thrown(TOOL, "sessionKey required")));
    };
    let cfg = engine.config();
    let requester = match Requester::of(&cfg, ctx) {
        Ok(r) => r,
        Err(e) => return Ok(Answer::Payload(thrown(TOOL, e.message()))),
    };
    let restricted = sandbox::restrict_to_spawned(&cfg, ctx.sandboxed, requester.key.as_deref(), &requester.agent);
    let target = match resolve_reference(engine, &cfg, &input, &requester, restricted) {
        Ok(t) => t,
        Err(refused) => return refused.into_payload().map(Answer::Payload),
    };
    if restricted && !target.via_session_id && !spawned_by_requester(engine, &target.key, &requester)? {
        return Ok(Answer::Payload(refusal(
            "forbidden",
            format!("Session not visible from this sandboxed agent session: {input}"),
        )));
    }
    let target_agent = cfg.key_model().agent_id_of(&target.key);
    match a2a::check(&cfg.agent_to_agent, &requester.agent, &target_agent) {
        a2a::A2aDecision::Allowed => {}
        a2a::A2aDecision::Disabled => {
            return Ok(Answer::Payload(refusal(
                "forbidden",
                "Agent-to-agent history is disabled. Set tools.agentToAgent.enabled=true to allow cross-agent access.",
            )))
        }
        a2a::A2aDecision::Denied => {
            return Ok(Answer::Payload(refusal(
                "forbidden",
                "Agent-to-agent history denied by tools.agentToAgent.allow.",
            )))
        }
    }
    let limit = read_number(args, "limit").map(|v| v.floor().max(1.0));
    if let Some(l) = limit {
        if l > 1000.0 {
            return Ok(Answer::Payload(thrown(TOOL, "invalid chat.history params: at /limit: must be <= 1000")));
        }
    }
    let include_tools = args.get("includeTools").map(truthy).unwrap_or(false);
    let max_chars = read_number(args, "maxChars").map(|v| v.floor().max(1.0) as u64).or(cfg.history_max_chars);
    let limit = limit.map(|l| l as u32).unwrap_or(200);
    let page = engine.store().read(|db| {
        let Some(e) = db.session(&target.key)? else { return Ok(Default::default()) };
        match entry::str_field(&e, "sessionId") {
            Some(sid) => db.history_page(sid, limit, None),
            None => Ok(Default::default()),
        }
    })?;
    // Each message is serialised once: its text gives the sizes the caps count, and the answer
    // is those texts put together (perf3: three serialisations per message before).
    let mut messages: Vec<Shown> = Vec::with_capacity(page.messages.len());
    for m in page.messages {
        if !include_tools && m.role.as_deref() == Some("toolResult") {
            continue;
        }
        if let Some(text) = shown_text(m) {
            messages.push(Shown { text });
        }
    }
    let sizes: Vec<usize> = messages.iter().map(|m| m.text.len()).collect();
    messages.drain(..bytes_to_drop(&sizes, MAX_HISTORY_BYTES));
    let truncated = match max_chars {
        Some(max) => {
            let lens: Vec<u64> = messages.iter().map(|m| m.text.chars().count() as u64).collect();
            let drop = chars_to_drop(&lens, max);
            messages.drain(..drop);
            drop > 0
        }
        None => false,
    };
    Ok(Answer::Messages { session_key: target.display, messages, truncated })
}

/// A message as shown, as JSON text.
struct Shown {
    text: String,
}

/// What `sessions_history` answers: a refusal or error payload, or the messages.
enum Answer {
    Payload(Value),
    Messages { session_key: String, messages: Vec<Shown>, truncated: bool },
}

/// `sessions_history` as a value (for the tool envelope and the orchestrator).
pub fn run(engine: &Engine, args: &Value, ctx: &ToolContext) -> Result<Value> {
    Ok(match answer(engine, args, ctx)? {
        Answer::Payload(v) => v,
        Answer::Messages { session_key, messages, truncated } => {
            let messages: Vec<Value> =
                messages.into_iter().filter_map(|m| serde_json::from_str(&m.text).ok()).collect();
            let mut out = json!({"sessionKey": session_key, "messages": messages});
            if truncated {
                out["truncated"] = Value::Bool(true);
            }
            out
        }
    })
}

/// `sessions_history` as JSON text, the messages' texts put together without a value tree in
/// between: what the napi skin hands to JS.
pub fn run_text(engine: &Engine, args: &Value, ctx: &ToolContext) -> Result<String> {
    match answer(engine, args, ctx)? {
        Answer::Payload(v) => Ok(v.to_string()),
        Answer::Messages { session_key, messages, truncated } => {
            let key = Value::String(session_key).to_string();
            let mut out =
                String::with_capacity(64 + key.len() + messages.iter().map(|m| m.text.len() + 1).sum::<usize>());
            out.push_str("{\"sessionKey\":");
            out.push_str(&key);
            out.push_str(",\"messages\":[");
            for (i, m) in messages.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                out.push_str(&m.text);
            }
            out.push(']');
            if truncated {
                out.push_str(",\"truncated\":true");
            }
            out.push('}');
            Ok(out)
        }
    }
}

fn truthy(v: &Value) -> bool {
    match v {
        Value::Null => false,
        Value::Bool(b) => *b,
        Value::Number(n) => n.as_f64().map(|f| f != 0.0 && !f.is_nan()).unwrap_or(false),
        Value::String(s) => !s.is_empty(),
        _ => true,
    }
}

fn json_len(v: &Value) -> usize {
    serde_json::to_string(v).map(|s| s.len()).unwrap_or(0)
}

/// §4.2: how many of the oldest messages (of these JSON sizes in bytes) to drop so that
/// `2 + Σ bytes + separators` fits in `max` (one stays).
fn bytes_to_drop(sizes: &[usize], max: usize) -> usize {
    let mut total: usize = 2 + sizes.iter().sum::<usize>() + sizes.len().saturating_sub(1);
    let mut drop = 0;
    while total > max && sizes.len() - drop > 1 {
        total -= sizes[drop] + 1;
        drop += 1;
    }
    drop
}

/// DECISIONS.md #7: how many of the oldest messages (of these JSON lengths in characters) to
/// drop so that the array's text fits in `max` characters (the newest always stays).
fn chars_to_drop(lens: &[u64], max: u64) -> usize {
    let mut total: u64 = 2 + lens.iter().sum::<u64>() + lens.len().saturating_sub(1) as u64;
    let mut drop = 0;
    while total > max && lens.len() - drop > 1 {
        total -= lens[drop] + 1;
        drop += 1;
    }
    drop
}

/// §4.2: drops the oldest messages while `2 + Σ bytes + separators` exceeds `max` (one stays).
pub fn cap_bytes(messages: &mut Vec<Value>, max: usize) {
    let sizes: Vec<usize> = messages.iter().map(json_len).collect();
    messages.drain(..bytes_to_drop(&sizes, max));
}

/// DECISIONS.md #7: drops the oldest messages while the JSON text of the array is longer than
/// `max` characters (the newest always stays); whether anything was dropped.
pub fn cap_chars(messages: &mut Vec<Value>, max: u64) -> bool {
    let lens: Vec<u64> =
        messages.iter().map(|m| serde_json::to_string(m).map(|s| s.chars().count() as u64).unwrap_or(0)).collect();
    let drop = chars_to_drop(&lens, max);
    messages.drain(..drop);
    drop > 0
}

const CHANNEL_LABELS: &[&str] = &[
    "WebChat",
    "WhatsApp",
    "Telegram",
    "Signal",
    "Slack",
    "Discord",
    "Google Chat",
    "iMessage",
    "Teams",
    "Matrix",
    "Zalo",
    "Zalo Personal",
    "BlueBubbles",
];

fn has_timestamp(h: &str) -> bool {
    let b = h.as_bytes();
    let d = |i: usize| b.get(i).map(u8::is_ascii_digit).unwrap_or(false);
    (0..b.len()).any(|i| {
        (0..4).all(|k| d(i + k))
            && b.get(i + 4) == Some(&b'-')
            && d(i + 5)
            && d(i + 6)
            && b.get(i + 7) == Some(&b'-')
            && d(i + 8)
            && d(i + 9)
            && matches!(b.get(i + 10), Some(b'T') | Some(b' '))
            && d(i + 11)
            && d(i + 12)
            && b.get(i + 13) == Some(&b':')
            && d(i + 14)
            && d(i + 15)
            && (b.get(i + 10) == Some(&b' ') || b.get(i + 16) == Some(&b'Z'))
    })
}

/// §4.2 envelope stripping for one text.
pub fn strip_envelope(text: &str) -> String {
    let mut rest = text;
    if let Some(body) = text.strip_prefix('[') {
        if let Some(end) = body.find("] ") {
            let header = &body[..end];
            let channel =
                CHANNEL_LABELS.iter().any(|l| header.strip_prefix(l).map(|r| r.starts_with(' ')).unwrap_or(false));
            if !header.contains('[') && (has_timestamp(header) || channel) {
                rest = &body[end + 2..];
            }
        }
    }
    let lines: Vec<&str> = rest
        .split('\n')
        .filter(|l| {
            let t = l.trim();
            !(t.starts_with("[message_id:") && t.ends_with(']'))
        })
        .collect();
    lines.join("\n")
}

/// As [`shown`], as JSON text. A message that stripping leaves as it is (not a user message,
/// or one with no `[` opening a text nor a `[message_id:` line) is its stored text, checked as
/// JSON but not rebuilt: the store writes every message as `serde_json` text, which a parse
/// and a new serialisation would give back byte for byte (listfast: the parse and the
/// serialisation were most of a history read's own time).
pub fn shown_text(m: StoredMessage) -> Option<String> {
    let text = m.json.as_str();
    let may_strip = m.role.as_deref() == Some("user") && (text.contains("\"[") || text.contains("[message_id:"));
    if !may_strip {
        serde_json::from_str::<serde::de::IgnoredAny>(text).ok()?;
        return Some(m.json);
    }
    serde_json::to_string(&shown(&m)?).ok()
}

/// A stored message as a tool shows it to a model: parsed, with a user message's channel
/// envelope stripped (§4.2); `None` when it is not valid JSON.
pub fn shown(m: &StoredMessage) -> Option<Value> {
    let mut v = serde_json::from_str::<Value>(&m.json).ok()?;
    if m.role.as_deref() == Some("user") {
        strip_user_envelope(&mut v);
    }
    Some(v)
}

fn strip_user_envelope(m: &mut Value) {
    match m.get_mut("content") {
        Some(Value::String(s)) => *s = strip_envelope(s),
        Some(Value::Array(blocks)) => {
            for b in blocks {
                if b.get("type").and_then(Value::as_str) == Some("text") {
                    if let Some(Value::String(s)) = b.get_mut("text") {
                        *s = strip_envelope(s);
                    }
                }
            }
        }
        _ => {
            if let Some(Value::String(s)) = m.get_mut("text") {
                *s = strip_envelope(s);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn h7_envelopes_and_message_id_lines_are_stripped() {
        assert_eq!(strip_envelope("[WhatsApp 2026-01-24 13:36] yolo\n[message_id: 7b8b]"), "yolo");
        assert_eq!(strip_envelope("[2026-01-24T13:36Z] hi"), "hi");
        assert_eq!(strip_envelope("keep [message_id: 123] inline"), "keep [message_id: 123] inline");
        assert_eq!(strip_envelope("[not a header] text"), "[not a header] text");
    }

    #[test]
    fn s33_the_byte_cap_drops_the_oldest() {
        let mut m = vec![json!("a"), json!("b"), json!("c")];
        cap_bytes(&mut m, 10);
        assert_eq!(m, vec![json!("b"), json!("c")]);
        let mut one = vec![json!("x".repeat(100))];
        cap_bytes(&mut one, 10);
        assert_eq!(one.len(), 1);
    }

    #[test]
    fn the_char_budget_keeps_the_newest_and_reports_truncation() {
        let mut m = vec![json!("aaaa"), json!("bbbb"), json!("cc")];
        // ["bbbb","cc"] is 13 characters long; the whole array is 20
        assert!(cap_chars(&mut m, 13));
        assert_eq!(m, vec![json!("bbbb"), json!("cc")]);
        let mut n = vec![json!("a")];
        assert!(!cap_chars(&mut n, 1));
    }
}
