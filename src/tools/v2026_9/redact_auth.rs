//! The gateway's first step of 2026.9 history redaction: the parameters of an `Authorization` /
//! `Proxy-Authorization` header (`Digest username="a", response="…"`, `AWS4-HMAC-SHA256
//! Credential=…, SignedHeaders=…, Signature=…`, `Hawk id="…", mac="…"`, or any credential shaped
//! `name=value`) become one `***`, from the first parameter to the end of the last value. Header
//! names, schemes and white space are read as the gateway reads them, serialized forms included
//! (`\"Authorization\"`, `\n` / `\t` written out with backslashes). Pure text in, text out; works
//! on bytes, cutting only at ASCII delimiters.

use std::sync::OnceLock;

use regex::Regex;

use super::redact_fields::{value_space, HEADER_START, Q, SCHEME};
use super::redact_pass::compile;

fn header() -> &'static Regex {
    static HEADER: OnceLock<Regex> = OnceLock::new();
    HEADER.get_or_init(|| {
        let (opt, req) = (value_space(false), value_space(true));
        compile(&format!(r"{HEADER_START}(?:Proxy-)?Authorization{Q}[ \t]*[:=]{opt}{Q}({SCHEME}){req}"), true)
    })
}

fn is_token(c: u8) -> bool {
    c.is_ascii_alphanumeric() || b"!#$%&'*+.^_`|~-".contains(&c)
}

/// The end of a run of `c`-bytes starting at `at` (at most `max` of them).
fn run_of(b: &[u8], at: usize, c: u8, max: usize) -> usize {
    at + b[at.min(b.len())..].iter().take(max).take_while(|x| **x == c).count()
}

fn skip_blanks(b: &[u8], at: usize) -> usize {
    at + b[at.min(b.len())..].iter().take_while(|c| **c == b' ' || **c == b'\t').count()
}

/// After a written-out tab (`\t` with one to 64 backslashes).
fn written_tab(b: &[u8], at: usize) -> Option<usize> {
    let s = run_of(b, at, b'\\', 64);
    (s > at && b.get(s) == Some(&b't')).then_some(s + 1)
}

/// After a written-out line break (`\n` or `\r\n`, with backslashes).
fn written_break(b: &[u8], at: usize) -> Option<usize> {
    let s = run_of(b, at, b'\\', 64);
    match b.get(s) {
        _ if s == at => None,
        Some(b'n') => Some(s + 1),
        Some(b'r') => {
            let t = run_of(b, s + 1, b'\\', 64);
            (t > s + 1 && b.get(t) == Some(&b'n')).then_some(t + 1)
        }
        _ => None,
    }
}

/// Blanks, written tabs, and line breaks that continue the header (an indented next line).
fn skip_space(b: &[u8], at: usize) -> usize {
    let mut k = at;
    loop {
        k = skip_blanks(b, k);
        if let Some(t) = written_tab(b, k) {
            k = t;
            continue;
        }
        let brk = match (b.get(k), b.get(k + 1)) {
            (Some(b'\r'), Some(b'\n')) => Some(k + 2),
            (Some(b'\n'), _) => Some(k + 1),
            _ => written_break(b, k),
        };
        match brk {
            Some(e) if matches!(b.get(e), Some(b' ') | Some(b'\t')) || written_tab(b, e).is_some() => k = e,
            _ => return k,
        }
    }
}

/// A parameter name at `at`: its end.
fn param_name(b: &[u8], at: usize) -> Option<usize> {
    let n = b[at.min(b.len())..].iter().take_while(|c| is_token(**c)).count();
    (n > 0).then_some(at + n)
}

/// Whether a parameter name at `at` is followed by `=` (and not `==`).
fn is_assignment(b: &[u8], at: usize) -> bool {
    param_name(b, at).is_some_and(|end| {
        let eq = skip_space(b, end);
        b.get(eq) == Some(&b'=') && b.get(eq + 1) != Some(&b'=')
    })
}

/// Whether another `Authorization:` / `Proxy-Authorization=` header starts at `at`.
fn auth_header_start(b: &[u8], at: usize) -> bool {
    let prev = at.checked_sub(1).map(|i| b[i]);
    // `\n` / `\r` written out with backslashes also separate headers
    let written_break = matches!(prev, Some(b'n' | b'r'))
        && at >= 2
        && b[..at - 1].iter().rev().take(64).take_while(|c| **c == b'\\').count() > 0;
    if !written_break && prev.is_some_and(|c| c.is_ascii_alphanumeric() || c == b'_' || c == b'-') {
        return false;
    }
    let name = &b[at..(at + 19).min(b.len())];
    let len = if name.eq_ignore_ascii_case(b"proxy-authorization") {
        19
    } else if name.len() >= 13 && name[..13].eq_ignore_ascii_case(b"authorization") {
        13
    } else {
        return false;
    };
    let mut k = at + len;
    let s = run_of(b, k, b'\\', 64);
    if matches!(b.get(s), Some(b'"' | b'\'')) {
        k = s + 1;
    } else if s > k {
        return false;
    }
    k = skip_blanks(b, k);
    matches!(b.get(k), Some(b':' | b'='))
}

fn ends_field(c: u8) -> bool {
    matches!(c, b'\r' | b'\n' | b';')
}

/// The start of the next `name=` parameter from `from`, or None where the header ends.
fn next_param(b: &[u8], from: usize) -> Option<usize> {
    let mut k = from;
    loop {
        k = skip_space(b, k);
        if (k > from && auth_header_start(b, k)) || k >= b.len() || ends_field(b[k]) {
            return None;
        }
        if b[k] == b',' {
            k += 1;
            continue;
        }
        if is_assignment(b, k) {
            return Some(k);
        }
        while k < b.len() {
            let s = skip_space(b, k);
            if s > k {
                k = s;
                continue;
            }
            if k > from && auth_header_start(b, k) {
                return None;
            }
            let c = b[k];
            if ends_field(c) {
                return None;
            }
            k += 1;
            if c == b',' {
                break;
            }
        }
    }
}

/// Where the header's field ends from `from` (a line end, `;`, a quote, a closing bracket, another header).
fn field_end(b: &[u8], from: usize) -> usize {
    let mut k = from;
    while k < b.len() {
        let s = skip_space(b, k);
        if s > k {
            k = s;
            continue;
        }
        if (k > from && auth_header_start(b, k)) || ends_field(b[k]) || b"\\\"'}]".contains(&b[k]) {
            break;
        }
        k += 1;
    }
    k
}

/// How a parameter's value is read.
#[derive(Clone, Copy, PartialEq)]
enum ValueShape {
    Token,
    /// AWS `Credential=AKIA…/date/region/service/aws4_request`
    Scope,
    /// `SignedHeaders=host;x-amz-date`
    HeaderList,
}

/// The end of the value at `at`, or None when there is none.
fn param_value(b: &[u8], at: usize, shape: ValueShape) -> Option<usize> {
    let slashes = run_of(b, at, b'\\', usize::MAX) - at;
    let escaped = slashes > 0 && b.get(at + slashes) == Some(&b'"');
    let quote = b.get(at).copied().filter(|c| *c == b'"' || *c == b'\'');
    if quote.is_some() || escaped {
        let mut k = at + if escaped { slashes + 1 } else { 1 };
        while k < b.len() {
            match b[k] {
                b'\r' | b'\n' => {
                    let s = skip_space(b, k);
                    if s == k {
                        break;
                    }
                    k = s;
                }
                b'\\' if escaped => {
                    let end = run_of(b, k + 1, b'\\', usize::MAX);
                    if b.get(end) == Some(&b'"') {
                        if (end - k) % (2 * (slashes + 1)) == slashes {
                            return Some(end + 1);
                        }
                        k = end + 1;
                    } else {
                        k = end;
                    }
                }
                b'\\' if k + 1 < b.len() => k += 2,
                c if !escaped && Some(c) == quote => return Some(k + 1),
                _ => k += 1,
            }
        }
        return (k > at + 1).then_some(k);
    }
    let run = |extra: &[u8], from: usize| {
        from + b[from.min(b.len())..].iter().take_while(|c| is_token(**c) || extra.contains(c)).count()
    };
    match shape {
        ValueShape::HeaderList => {
            let mut end = at;
            loop {
                let start = end + usize::from(b.get(end) == Some(&b':'));
                let next = run(b"", start);
                if next == start {
                    break;
                }
                end = next;
                if b.get(end) != Some(&b';') {
                    break;
                }
                end += 1;
            }
            // a trailing `;` is not part of the list
            if end > at && b[end - 1] == b';' {
                end -= 1;
            }
            (end > at && matches!(b.get(end), None | Some(b',' | b' ' | b'\t' | b'\r' | b'\n'))).then_some(end)
        }
        _ => {
            let end = run(if shape == ValueShape::Scope { b":/" } else { b"" }, at);
            (end > at).then_some(end)
        }
    }
}

/// The parameter ranges of every `Authorization` header in `text`.
fn param_ranges(text: &str) -> Vec<(usize, usize)> {
    let b = text.as_bytes();
    let mut ranges = Vec::new();
    for caps in header().captures_iter(text) {
        let (Some(whole), Some(scheme)) = (caps.get(0), caps.get(2)) else { continue };
        let scheme = scheme.as_str().to_ascii_lowercase();
        let start = whole.end();
        let mut k = start;
        let mut end = start;
        if !is_assignment(b, k) {
            let takes_params = scheme == "digest" || scheme == "hawk" || scheme.starts_with("aws4-");
            if b.get(skip_space(b, k)) != Some(&b',') && !takes_params {
                continue;
            }
            let Some(first) = next_param(b, k) else { continue };
            k = first;
        }
        while let Some(name_end) = param_name(b, k) {
            let name = text[k..name_end].to_ascii_lowercase();
            k = skip_space(b, name_end);
            if b.get(k) != Some(&b'=') {
                break;
            }
            k = skip_space(b, k + 1);
            let shape = match name.as_str() {
                "credential" if scheme.starts_with("aws4-") => ValueShape::Scope,
                "signedheaders" => ValueShape::HeaderList,
                _ => ValueShape::Token,
            };
            let Some(value_end) = param_value(b, k, shape) else {
                match next_param(b, k) {
                    Some(n) => {
                        k = n;
                        continue;
                    }
                    None => {
                        end = end.max(field_end(b, k));
                        break;
                    }
                }
            };
            end = value_end;
            let sep = skip_space(b, value_end);
            if b.get(sep) != Some(&b',') {
                if b.get(sep).is_some_and(|c| !ends_field(*c) && !b"\\\"'}]".contains(c)) {
                    if let Some(n) = next_param(b, sep) {
                        k = n;
                        continue;
                    }
                    end = end.max(field_end(b, sep));
                }
                break;
            }
            let Some(n) = next_param(b, sep + 1) else { break };
            k = n;
        }
        if end > start {
            ranges.push((start, end));
        }
    }
    ranges
}

/// The text with the parameters of every `Authorization` header replaced by `***`.
pub(super) fn auth_params(text: &str) -> String {
    static NAME: OnceLock<Regex> = OnceLock::new();
    let name = NAME.get_or_init(|| Regex::new("(?i-u:authorization)").expect("a literal compiles"));
    if !name.is_match(text) {
        return text.to_string();
    }
    let mut merged: Vec<(usize, usize)> = Vec::new();
    for (s, e) in param_ranges(text) {
        match merged.last_mut() {
            Some(last) if s <= last.1 => last.1 = last.1.max(e),
            _ => merged.push((s, e)),
        }
    }
    if merged.is_empty() {
        return text.to_string();
    }
    let mut out = String::with_capacity(text.len());
    let mut copied = 0;
    for (s, e) in merged {
        out.push_str(&text[copied..s]);
        out.push_str("***");
        copied = e;
    }
    out.push_str(&text[copied..]);
    out
}
