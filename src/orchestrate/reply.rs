//! Reading an agent's reply out of its transcript (REFERENCE.md §5.7): the text of the latest
//! assistant message, with what the model wrote for itself removed — reasoning sections
//! (`<think>`…), `<final>` wrappers, tool-call markup that leaked into text (MiniMax XML,
//! downgraded `[Tool Call: …]` / `[Tool Result for ID …]` blocks) — and repeated paragraphs
//! collapsed. Used for ping-pong turns, the announce step and sub-agent findings.
//!
//! Pure: it is handed the messages (as `chat.history` returns them) and never reads the store.
//! The reference uses regular expressions; these are hand-written scanners with the same
//! matches. All patterns are ASCII, so byte offsets found by them are always char boundaries.

use serde_json::Value;

use crate::js::{is_js_space, js_trim};

/// `extractAssistantText` of the last non-`toolResult` message: it must be an assistant message
/// with array content; the sanitized non-blank `text` blocks are concatenated (no separator),
/// trimmed, and passed through the user-facing sanitizer. Nothing left → `None`.
pub fn latest_assistant_reply(messages: &[Value]) -> Option<String> {
    let last = messages.iter().rev().find(|m| m.get("role").and_then(Value::as_str) != Some("toolResult"))?;
    if last.get("role").and_then(Value::as_str) != Some("assistant") {
        return None;
    }
    let blocks = last.get("content")?.as_array()?;
    let mut joined = String::new();
    for block in blocks {
        if block.get("type").and_then(Value::as_str) != Some("text") {
            continue;
        }
        if let Some(text) = block.get("text").and_then(Value::as_str) {
            let sanitized = sanitize_text_block(text);
            if !js_trim(&sanitized).is_empty() {
                joined.push_str(&sanitized);
            }
        }
    }
    let joined = js_trim(&joined);
    if joined.is_empty() {
        None
    } else {
        Some(sanitize_user_facing(joined))
    }
}

/// `sanitizeTextContent`: MiniMax XML, then downgraded tool markers, then reasoning tags.
pub fn sanitize_text_block(text: &str) -> String {
    strip_reasoning_tags(&strip_downgraded_tool_text(&strip_minimax_tool_xml(text)))
}

/// The user-facing pass: `<final>` / `</final>` tags removed, then consecutive duplicate
/// paragraphs collapsed. (The reference also rewrites provider-error texts into canned
/// messages; that belongs to the gateway's error path and is not done here.)
pub fn sanitize_user_facing(text: &str) -> String {
    let stripped = strip_simple_final_tags(text);
    if js_trim(&stripped).is_empty() {
        return stripped;
    }
    collapse_duplicate_blocks(&stripped)
}

// ---------------------------------------------------------------------------------------------
// scanning helpers

/// First index ≥ `from` where `needle` (ASCII) occurs, ignoring ASCII case.
fn find_ci(hay: &str, needle: &str, from: usize) -> Option<usize> {
    let (h, n) = (hay.as_bytes(), needle.as_bytes());
    if n.is_empty() || from > h.len() || h.len() - from < n.len() {
        return None;
    }
    (from..=h.len() - n.len()).find(|&i| h[i..i + n.len()].eq_ignore_ascii_case(n))
}

fn starts_with_ci(hay: &str, at: usize, needle: &str) -> bool {
    hay.as_bytes().get(at..at + needle.len()).is_some_and(|s| s.eq_ignore_ascii_case(needle.as_bytes()))
}

/// A regex word character (`\w` without the `u` flag).
fn is_word_byte(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b == b'_'
}

/// Index after any JavaScript white space starting at `at`.
fn skip_js_space(s: &str, at: usize) -> usize {
    s[at..].char_indices().find(|&(_, c)| !is_js_space(c)).map_or(s.len(), |(i, _)| at + i)
}

/// Index of the first byte matching `pred` at or after `from`.
fn find_byte(s: &str, from: usize, pred: impl Fn(u8) -> bool) -> Option<usize> {
    s.as_bytes().get(from..)?.iter().position(|&b| pred(b)).map(|i| from + i)
}

// ---------------------------------------------------------------------------------------------
// MiniMax tool-call XML

/// When the text mentions `minimax:tool_call`: remove `<invoke …>…</invoke>` blocks (shortest
/// match) and any `<minimax:tool_call>` / `</minimax:tool_call>` tag, case-insensitively.
pub fn strip_minimax_tool_xml(text: &str) -> String {
    if find_ci(text, "minimax:tool_call", 0).is_none() {
        return text.to_string();
    }
    let mut out = String::with_capacity(text.len());
    let mut cursor = 0;
    let mut search = 0;
    while let Some(p) = find_ci(text, "<invoke", search) {
        let after = p + "<invoke".len();
        if text.as_bytes().get(after).is_some_and(|&b| is_word_byte(b)) {
            search = p + 1;
            continue;
        }
        let Some(gt) = find_byte(text, after, |b| b == b'>') else { break };
        let Some(close) = find_ci(text, "</invoke>", gt + 1) else { break };
        out.push_str(&text[cursor..p]);
        cursor = close + "</invoke>".len();
        search = cursor;
    }
    out.push_str(&text[cursor..]);
    remove_all_ci(&remove_all_ci(&out, "</minimax:tool_call>"), "<minimax:tool_call>")
}

fn remove_all_ci(text: &str, needle: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut cursor = 0;
    while let Some(p) = find_ci(text, needle, cursor) {
        out.push_str(&text[cursor..p]);
        cursor = p + needle.len();
    }
    out.push_str(&text[cursor..]);
    out
}

// ---------------------------------------------------------------------------------------------
// downgraded tool calls / results

/// When the text contains `[Tool Call` or `[Tool Result` (any case): remove each
/// `[Tool Call: … (ID: …)]` marker with the `Arguments:` payload that follows it (a JSON
/// object/array/string, else the rest of the line), then each `[Tool Result for ID …]` block up
/// to the next `[Tool ` marker or the end; the result is trimmed.
pub fn strip_downgraded_tool_text(text: &str) -> String {
    if find_ci(text, "[tool call", 0).is_none() && find_ci(text, "[tool result", 0).is_none() {
        return text.to_string();
    }
    let cleaned = strip_tool_call_markers(text);
    let cleaned = strip_tool_result_blocks(&cleaned);
    js_trim(&cleaned).to_string()
}

fn strip_tool_call_markers(input: &str) -> String {
    let b = input.as_bytes();
    let at = |i: usize| b.get(i).copied();
    let mut result = String::with_capacity(input.len());
    let mut cursor = 0;
    let mut search = 0;
    while let Some(start) = find_ci(input, "[tool call:", search) {
        let Some(close) = find_byte(input, start + "[tool call:".len(), |c| c == b']') else { break };
        search = close + 1;
        if start < cursor {
            continue;
        }
        result.push_str(&input[cursor..start]);
        let mut i = close + 1;
        while matches!(at(i), Some(b' ' | b'\t')) {
            i += 1;
        }
        if at(i) == Some(b'\r') {
            i += 1;
            if at(i) == Some(b'\n') {
                i += 1;
            }
        } else if at(i) == Some(b'\n') {
            i += 1;
        }
        while matches!(at(i), Some(b' ' | b'\t')) {
            i += 1;
        }
        if starts_with_ci(input, i, "arguments") {
            i += "arguments".len();
            if at(i) == Some(b':') {
                i += 1;
            }
            if at(i) == Some(b' ') {
                i += 1;
            }
            if let Some(end) = consume_jsonish(b, i) {
                i = end;
            }
        }
        let result_at_line_start = result.is_empty() || result.ends_with('\n') || result.ends_with('\r');
        if matches!(at(i), Some(b'\n' | b'\r')) && result_at_line_start {
            if at(i) == Some(b'\r') {
                i += 1;
            }
            if at(i) == Some(b'\n') {
                i += 1;
            }
        }
        cursor = i;
        search = search.max(cursor);
    }
    result.push_str(&input[cursor..]);
    result
}

/// End of a JSON-ish payload starting at `start` (after blanks and newlines): a balanced
/// `{…}`/`[…]` (strings respected), a `"…"` string, or the rest of the line. `None` when the
/// input ends first.
fn consume_jsonish(b: &[u8], start: usize) -> Option<usize> {
    let mut i = start;
    while matches!(b.get(i), Some(b' ' | b'\t' | b'\n' | b'\r')) {
        i += 1;
    }
    let first = *b.get(i)?;
    match first {
        b'{' | b'[' => {
            let (mut depth, mut in_string, mut escape) = (0i64, false, false);
            for (j, &c) in b.iter().enumerate().skip(i) {
                if in_string {
                    if escape {
                        escape = false;
                    } else if c == b'\\' {
                        escape = true;
                    } else if c == b'"' {
                        in_string = false;
                    }
                    continue;
                }
                match c {
                    b'"' => in_string = true,
                    b'{' | b'[' => depth += 1,
                    b'}' | b']' => {
                        depth -= 1;
                        if depth == 0 {
                            return Some(j + 1);
                        }
                    }
                    _ => {}
                }
            }
            None
        }
        b'"' => {
            let mut escape = false;
            for (j, &c) in b.iter().enumerate().skip(i + 1) {
                if escape {
                    escape = false;
                } else if c == b'\\' {
                    escape = true;
                } else if c == b'"' {
                    return Some(j + 1);
                }
            }
            None
        }
        _ => Some(b[i..].iter().position(|&c| c == b'\n' || c == b'\r').map_or(b.len(), |p| i + p)),
    }
}

/// `/\[Tool Result for ID[^\]]*\]\n?[\s\S]*?(?=\n*\[Tool |\n*$)/gi` → removed.
fn strip_tool_result_blocks(input: &str) -> String {
    let b = input.as_bytes();
    let mut out = String::with_capacity(input.len());
    let mut cursor = 0;
    while let Some(start) = find_ci(input, "[tool result for id", cursor) {
        let Some(close) = find_byte(input, start + "[tool result for id".len(), |c| c == b']') else { break };
        let mut body = close + 1;
        if b.get(body) == Some(&b'\n') {
            body += 1;
        }
        let end = (body..=b.len())
            .find(|&e| {
                let after_newlines = find_byte(input, e, |c| c != b'\n').unwrap_or(b.len());
                after_newlines == b.len() || starts_with_ci(input, after_newlines, "[tool ")
            })
            .unwrap_or(b.len());
        out.push_str(&input[cursor..start]);
        cursor = end;
    }
    out.push_str(&input[cursor..]);
    out
}

// ---------------------------------------------------------------------------------------------
// reasoning and <final> tags

const THINKING_NAMES: [&str; 4] = ["antthinking", "thinking", "thought", "think"];

/// A tag `<\s*(\/?)\s*NAME\b[^<>]*>` at byte `at` (which must hold `<`): whether it closes, and
/// where it ends. With `need_end` false only the part through the name is required.
fn match_tag(s: &str, at: usize, names: &[&str], need_end: bool) -> Option<(bool, usize)> {
    if s.as_bytes().get(at) != Some(&b'<') {
        return None;
    }
    let mut i = skip_js_space(s, at + 1);
    let closing = s.as_bytes().get(i) == Some(&b'/');
    if closing {
        i = skip_js_space(s, i + 1);
    }
    let name_end = names.iter().find_map(|n| {
        let end = i + n.len();
        (starts_with_ci(s, i, n) && !s.as_bytes().get(end).is_some_and(|&b| is_word_byte(b))).then_some(end)
    })?;
    if !need_end {
        return Some((closing, name_end));
    }
    let gt = find_byte(s, name_end, |b| b == b'<' || b == b'>')?;
    (s.as_bytes()[gt] == b'>').then_some((closing, gt + 1))
}

/// Every match of a tag pattern, left to right, non-overlapping: (start, end, closing).
fn tag_matches(s: &str, names: &[&str]) -> Vec<(usize, usize, bool)> {
    let mut found = Vec::new();
    let mut i = 0;
    while let Some(p) = find_byte(s, i, |b| b == b'<') {
        match match_tag(s, p, names, true) {
            Some((closing, end)) => {
                found.push((p, end, closing));
                i = end;
            }
            None => i = p + 1,
        }
    }
    found
}

/// `stripThinkingTagsFromText` (strict mode): when a reasoning or `<final>` tag appears, remove
/// `<final …>` tags, remove each `<think>`/`<thinking>`/`<thought>`/`<antthinking>` section (an
/// unclosed one runs to the end; a stray closing tag is dropped), and trim. Otherwise the text
/// is returned untouched. Tags inside code spans are not treated specially.
pub fn strip_reasoning_tags(text: &str) -> String {
    let quick_names = ["antthinking", "thinking", "thought", "think", "final"];
    let has_tag =
        (0..text.len()).any(|i| text.as_bytes()[i] == b'<' && match_tag(text, i, &quick_names, false).is_some());
    if !has_tag {
        return text.to_string();
    }
    let mut cleaned = String::with_capacity(text.len());
    let mut cursor = 0;
    for (start, end, _) in tag_matches(text, &["final"]) {
        cleaned.push_str(&text[cursor..start]);
        cursor = end;
    }
    cleaned.push_str(&text[cursor..]);

    let mut result = String::with_capacity(cleaned.len());
    let mut last = 0;
    let mut in_thinking = false;
    for (start, end, closing) in tag_matches(&cleaned, &THINKING_NAMES) {
        if !in_thinking {
            result.push_str(&cleaned[last..start]);
            in_thinking = !closing;
        } else if closing {
            in_thinking = false;
        }
        last = end;
    }
    if !in_thinking {
        result.push_str(&cleaned[last..]);
    }
    js_trim(&result).to_string()
}

/// `/<\s*\/?\s*final\s*>/gi` → removed (no attributes allowed, unlike the reasoning pass).
fn strip_simple_final_tags(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut cursor = 0;
    let mut i = 0;
    while let Some(p) = find_byte(text, i, |b| b == b'<') {
        let mut j = skip_js_space(text, p + 1);
        if text.as_bytes().get(j) == Some(&b'/') {
            j = skip_js_space(text, j + 1);
        }
        if starts_with_ci(text, j, "final") {
            let k = skip_js_space(text, j + "final".len());
            if text.as_bytes().get(k) == Some(&b'>') {
                out.push_str(&text[cursor..p]);
                cursor = k + 1;
                i = cursor;
                continue;
            }
        }
        i = p + 1;
    }
    out.push_str(&text[cursor..]);
    out
}

/// `collapseConsecutiveDuplicateBlocks`: split the trimmed text on blank-line runs (`\n{2,}`);
/// a paragraph equal to the one before (after trimming and collapsing white space) is dropped.
/// When nothing is dropped the text comes back unchanged; otherwise paragraphs are trimmed and
/// re-joined with `\n\n`.
pub fn collapse_duplicate_blocks(text: &str) -> String {
    let trimmed = js_trim(text);
    if trimmed.is_empty() {
        return text.to_string();
    }
    let mut blocks = Vec::new();
    let mut rest = trimmed;
    while let Some(p) = rest.find("\n\n") {
        blocks.push(&rest[..p]);
        let after = &rest[p..];
        rest = after.trim_start_matches('\n');
    }
    blocks.push(rest);
    if blocks.len() < 2 {
        return text.to_string();
    }
    let mut kept: Vec<&str> = Vec::with_capacity(blocks.len());
    let mut last_normalized: Option<String> = None;
    for block in &blocks {
        let normalized = crate::js::collapse_whitespace(block);
        if last_normalized.as_deref().is_some_and(|l| !l.is_empty() && l == normalized) {
            continue;
        }
        kept.push(js_trim(block));
        last_normalized = Some(normalized);
    }
    if kept.len() == blocks.len() {
        text.to_string()
    } else {
        kept.join("\n\n")
    }
}

#[cfg(test)]
#[path = "reply_tests.rs"]
mod tests;
