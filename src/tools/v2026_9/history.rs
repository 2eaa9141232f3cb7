//! `sessions_history` as OpenClaw 2026.9.6 answers it (OPENCLAW-2026.9.md §1.2): resolution
//! and the visibility rule, `offset` paging from the newest message (`offset`, `nextOffset`,
//! `hasMore`, `totalMessages`), the `messageId` anchor, credential redaction, the 4,000-unit
//! text cap, `details`/`usage`/`cost` stripped, the 80 KB cap (oldest dropped first, the
//! oversized-row placeholder), and `__openclaw: {seq, id}` on every message.
//!
//! A page reads O(limit) rows: the transcript's length is its last sequence number, a page is a
//! range of sequence numbers, and a `messageId` is found through the entry-id index. Sequence
//! numbers are shared with the transcript's non-message entries (compactions, model changes):
//! with such entries `totalMessages` counts them too and a page may hold fewer than `limit`.

use serde_json::{json, Map, Value};

use super::redact::redact;
use super::redact_rx::{configured_rules, Rule};
use super::{display_key, params, requester_agent, ToolInput};
use crate::engine::Engine;
use crate::entry;
use crate::error::Result;
use crate::keys;
use crate::policy::visibility::{self, Action, Target, Viewer};
use crate::store::windows::WindowMessage;
use crate::tools::history::strip_envelope;
use crate::tools::{refusal, thrown};

const TOOL: &str = "sessions_history";
const PLACEHOLDER: &str = "[sessions_history omitted: message too large]";
const MARKER: &str = "\n…(truncated)…";
/// A `sessionId` that is not the target session's transcript.
pub const SESSION_ID_MISMATCH: &str = "sessionId is not a transcript of this session";

/// Where the page comes from.
enum Window {
    /// `offset` messages skipped from the end (None: not asked for)
    Tail(Option<u64>),
    /// around the message with this id
    Around(String),
}

/// `sessions_history` for the 2026.9 contract.
pub fn run(engine: &Engine, input: &ToolInput<'_>) -> Result<Value> {
    let args = input.args;
    let cfg = engine.config();
    let rules = cfg.rules();
    let km = cfg.key_model();
    let read = || -> std::result::Result<_, String> {
        let raw = params::string(args, "sessionKey", true)?.unwrap_or_default();
        let limit = params::positive_integer(args, "limit")?;
        let offset = params::non_negative_integer(args, "offset")?;
        params::positive_integer(args, "pendingBefore")?;
        let message_id = params::string(args, "messageId", false)?;
        let session_id = params::string(args, "sessionId", false)?;
        if session_id.is_some() && message_id.is_none() {
            return Err("sessionId requires messageId".into());
        }
        if limit.is_some_and(|l| l > u64::from(rules.history_max_limit)) {
            return Err(format!("invalid chat.history params: at /limit: must be <= {}", rules.history_max_limit));
        }
        let window = match message_id {
            Some(id) => Window::Around(id),
            None => Window::Tail(offset),
        };
        Ok((raw, limit.unwrap_or(u64::from(rules.history_default_limit)) as i64, window, session_id))
    };
    let (raw, limit, window, session_id) = match read() {
        Ok(v) => v,
        Err(msg) => return Ok(thrown(TOOL, msg)),
    };
    let include_tools = params::raw(args, "includeTools").is_some_and(truthy);
    let requester = input.requester(&cfg)?;
    let agent = requester_agent(&cfg, input.ctx, &requester);
    let viewer = Viewer::new(&cfg, input.ctx.sandboxed, requester.key.as_deref(), &agent);
    let raw = if raw == "current" { viewer.key.clone() } else { raw };

    // Resolution: a sessionId-shaped input is looked up (as a key first, then as an id).
    let not_found = || {
        if viewer.restrict_to_spawned {
            refusal("forbidden", format!("Session not visible from this sandboxed agent session: {raw}"))
        } else {
            refusal("error", format!("Session not found: {raw} (use the full sessionKey from sessions_list)"))
        }
    };
    let (key, display) = if keys::should_resolve_as_session_id(&raw) {
        let found = engine.store().read(|db| {
            if let Ok(candidates) = km.store_keys(&raw) {
                if let Some(r) = db.first_session(&candidates)? {
                    return Ok(Some(r.key));
                }
            }
            let rows = db.sessions_with_id(&raw, 64)?;
            Ok(rows
                .into_iter()
                .find(|r| !viewer.restrict_to_spawned || entry::str_field(&r.entry, "spawnedBy") == Some(&viewer.key))
                .map(|r| r.key))
        })?;
        match found {
            Some(k) => (k.clone(), display_key(&cfg, &k)),
            None => return Ok(not_found()),
        }
    } else {
        match km.resolve_for(&raw, &agent) {
            Ok(k) => (k, display_key(&cfg, &raw)),
            Err(e) => return Ok(refusal("error", e.message())),
        }
    };

    let stored = engine.store().read(|db| db.session(&key))?;
    if viewer.restrict_to_spawned && key != viewer.key {
        let spawned = stored.as_ref().and_then(|e| entry::str_field(e, "spawnedBy")) == Some(viewer.key.as_str());
        if !spawned {
            return Ok(refusal("forbidden", format!("Session not visible from this sandboxed agent session: {raw}")));
        }
    }
    let target_agent = visibility::target_agent(&cfg, &key);
    let field = |f: &str| stored.as_ref().and_then(|e| entry::str_field(e, f));
    let t = Target {
        key: &key,
        agent: &target_agent,
        owner_session_key: field("ownerSessionKey"),
        spawned_by: field("spawnedBy"),
        parent_session_key: field("parentSessionKey"),
    };
    if let Err(denial) = viewer.check(&t) {
        return Ok(refusal("forbidden", denial.text(Action::History, Some(&display))));
    }

    // `sessionId` names the transcript of `messageId`: only the session's own transcript is
    // read here (the engine keeps no earlier generations), never another session's
    let current = field("sessionId").map(str::to_string);
    if let Some(asked) = &session_id {
        if current.as_deref() != Some(asked.as_str()) {
            return Ok(refusal("error", format!("{SESSION_ID_MISMATCH}: {asked}")));
        }
    }
    let sid = current;
    let (stored_messages, total, anchor) = match &sid {
        None => (Vec::new(), 0, None),
        Some(sid) => engine.store().read(|db| {
            let total = db.last_seq(sid)?;
            match &window {
                Window::Tail(offset) => {
                    let skip = offset.unwrap_or(0).min(total as u64) as i64;
                    let last = total - skip;
                    Ok((db.messages_between(sid, (last - limit + 1).max(1), last)?, total, None))
                }
                Window::Around(id) => {
                    let seq = db.seq_of_message_id(sid, id)?;
                    let Some(seq) = seq else { return Ok((Vec::new(), total, None)) };
                    let before = limit / 2;
                    let first = (seq - before).max(1);
                    let last = (first + limit - 1).min(total);
                    Ok((db.messages_between(sid, first, last)?, total, Some(id.clone())))
                }
            }
        })?,
    };

    let extra = configured_rules(&cfg.history_redact_patterns);
    let mut content_truncated = false;
    let mut content_redacted = false;
    let mut items: Vec<Value> = Vec::with_capacity(stored_messages.len());
    for m in &stored_messages {
        if !include_tools && matches!(m.role.as_deref(), Some("toolResult") | Some("tool")) {
            continue;
        }
        let Some(mut v) = with_meta(m) else { continue };
        let (t, r) = sanitize(&mut v, rules.history_text_cap.unwrap_or(usize::MAX), &extra);
        content_truncated |= t;
        content_redacted |= r;
        items.push(v);
    }
    let selected = items.len();
    let budget = rules.history_max_bytes;
    let (mut kept, mut bytes) = match &anchor {
        Some(id) => around(items, id, budget),
        None => cap_oldest(items, budget),
    };
    let dropped = kept.len() < selected;
    let mut hard = false;
    if bytes > budget {
        hard = true;
        let last = kept.pop();
        let last_bytes = last.as_ref().map_or(2, |l| json_bytes(l) + 2);
        if last_bytes <= budget {
            kept = last.into_iter().collect();
            bytes = last_bytes;
        } else {
            let mut p = json!({"role": "assistant", "content": PLACEHOLDER});
            if let Some(meta) = last.as_ref().and_then(|l| l.get("__openclaw")) {
                p["__openclaw"] = meta.clone();
            }
            bytes = json_bytes(&p) + 2;
            kept = vec![p];
        }
    }
    let mut out = Map::new();
    out.insert("sessionKey".into(), Value::from(display));
    let first_seq = kept.iter().find_map(|m| m.get("__openclaw").and_then(|o| o.get("seq")).and_then(Value::as_i64));
    out.insert("messages".into(), Value::Array(kept));
    out.insert("truncated".into(), Value::Bool(dropped || content_truncated || hard));
    out.insert("droppedMessages".into(), Value::Bool(dropped || hard));
    out.insert("contentTruncated".into(), Value::Bool(content_truncated));
    out.insert("contentRedacted".into(), Value::Bool(content_redacted));
    out.insert("bytes".into(), Value::from(bytes));
    match window {
        Window::Around(_) => {
            out.insert("totalMessages".into(), Value::from(total));
        }
        Window::Tail(Some(offset)) => {
            let total = total as u64;
            let read_to = (offset + limit as u64).min(total);
            let next = match first_seq {
                Some(seq) => (offset + 1).max(read_to.min(total - seq as u64 + 1)),
                None => read_to.max(offset + 1),
            };
            let has_more = next < total;
            out.insert("offset".into(), Value::from(offset));
            if has_more {
                out.insert("nextOffset".into(), Value::from(next));
            }
            out.insert("hasMore".into(), Value::Bool(has_more));
            out.insert("totalMessages".into(), Value::from(total));
        }
        Window::Tail(None) => {}
    }
    Ok(Value::Object(out))
}

fn truthy(v: &Value) -> bool {
    match v {
        Value::Null => false,
        Value::Bool(b) => *b,
        Value::Number(n) => n.as_f64().is_some_and(|f| f != 0.0 && !f.is_nan()),
        Value::String(s) => !s.is_empty(),
        _ => true,
    }
}

/// The stored message with `__openclaw: {seq, id}` (its entry id); user envelopes stripped.
fn with_meta(m: &WindowMessage) -> Option<Value> {
    let mut v: Value = serde_json::from_str(&m.json).ok()?;
    let obj = v.as_object_mut()?;
    let id = m.id.clone();
    let mut meta = obj.get("__openclaw").and_then(Value::as_object).cloned().unwrap_or_default();
    meta.insert("seq".into(), Value::from(m.seq));
    meta.insert("id".into(), Value::from(id));
    obj.insert("__openclaw".into(), Value::Object(meta));
    if m.role.as_deref() == Some("user") {
        if let Some(Value::String(s)) = obj.get_mut("content") {
            *s = strip_envelope(s);
        } else if let Some(Value::Array(blocks)) = obj.get_mut("content") {
            for b in blocks.iter_mut().filter(|b| b.get("type").and_then(Value::as_str) == Some("text")) {
                if let Some(Value::String(s)) = b.get_mut("text") {
                    *s = strip_envelope(s);
                }
            }
        }
    }
    Some(v)
}

/// Redacts, then caps one text at `cap` UTF-16 units (marker appended); (truncated, redacted).
fn cap_text(s: &mut String, cap: usize, extra: &[Rule]) -> (bool, bool) {
    let (masked, redacted) = redact(s, extra);
    let units: Vec<u16> = masked.encode_utf16().collect();
    if units.len() <= cap {
        *s = masked;
        return (false, redacted);
    }
    let mut end = cap;
    if end > 0 && (0xD800..0xDC00).contains(&units[end - 1]) {
        end -= 1;
    }
    *s = format!("{}{MARKER}", String::from_utf16_lossy(&units[..end]));
    (true, redacted)
}

/// Strips `details`/`usage`/`cost` and caps every text of a message; (truncated, redacted).
fn sanitize(m: &mut Value, cap: usize, extra: &[Rule]) -> (bool, bool) {
    let Some(obj) = m.as_object_mut() else { return (false, false) };
    let mut truncated = false;
    let mut redacted = false;
    for f in ["details", "usage", "cost"] {
        truncated |= obj.remove(f).is_some();
    }
    let mut apply = |s: &mut String| {
        let (t, r) = cap_text(s, cap, extra);
        truncated |= t;
        redacted |= r;
    };
    match obj.get_mut("content") {
        Some(Value::String(s)) => apply(s),
        Some(Value::Array(blocks)) => {
            for b in blocks.iter_mut().filter_map(Value::as_object_mut) {
                let thinking = b.get("type").and_then(Value::as_str) == Some("thinking");
                for f in ["text", "partialJson"] {
                    if let Some(Value::String(s)) = b.get_mut(f) {
                        apply(s);
                    }
                }
                if thinking {
                    if let Some(Value::String(s)) = b.get_mut("thinking") {
                        apply(s);
                    }
                }
            }
        }
        _ => {}
    }
    if let Some(Value::String(s)) = obj.get_mut("text") {
        apply(s);
    }
    (truncated, redacted)
}

fn json_bytes(v: &Value) -> usize {
    serde_json::to_string(v).map(|s| s.len()).unwrap_or(0)
}

/// Drops the oldest while the JSON array is over `max` bytes (one stays); (kept, bytes).
fn cap_oldest(items: Vec<Value>, max: usize) -> (Vec<Value>, usize) {
    if items.is_empty() {
        return (items, 2);
    }
    let sizes: Vec<usize> = items.iter().map(json_bytes).collect();
    let mut bytes = 2 + sizes.iter().sum::<usize>() + sizes.len() - 1;
    let mut start = 0;
    while bytes > max && start < items.len() - 1 {
        bytes -= sizes[start] + 1;
        start += 1;
    }
    (items.into_iter().skip(start).collect(), bytes)
}

fn meta_id(m: &Value) -> Option<&str> {
    m.get("__openclaw").and_then(|o| o.get("id")).and_then(Value::as_str)
}

/// Grows the window from the anchor, one older and one newer at a time, while it fits.
fn around(items: Vec<Value>, id: &str, max: usize) -> (Vec<Value>, usize) {
    let anchor = items.iter().position(|m| meta_id(m) == Some(id));
    let Some(anchor) = anchor else { return cap_oldest(items, max) };
    let size = |i: usize| json_bytes(&items[i]) + 1;
    let (mut start, mut end) = (anchor, anchor + 1);
    let mut bytes = json_bytes(&items[anchor]) + 2;
    let (mut older, mut newer) = (start > 0, end < items.len());
    while older || newer {
        if older {
            if bytes + size(start - 1) <= max {
                start -= 1;
                bytes += size(start);
            } else {
                older = false;
            }
        }
        older &= start > 0;
        if newer {
            if bytes + size(end) <= max {
                bytes += size(end);
                end += 1;
            } else {
                newer = false;
            }
        }
        newer &= end < items.len();
    }
    (items.into_iter().skip(start).take(end - start).collect(), bytes)
}
