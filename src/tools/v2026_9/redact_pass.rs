//! One masking pass of 2026.9 history redaction, as the gateway applies each of its patterns:
//! every non-overlapping match, left to right over the text as the previous pass left it; the
//! last non-empty capture group is the secret (the whole match when there is none); a secret that
//! is already `***` stays; quotes and trailing delimiters around it are handled the gateway's
//! way (`Hinted`), or the value is masked as written (`Shell`, the environment and standalone
//! assignments, which also leave a `$NAME` reference to their own name alone).
//!
//! Also the pattern dialect: the gateway's patterns are JavaScript regular expressions; `js()`
//! turns ours, written in that notation, into the `regex` crate's (JavaScript's `\s`, an ASCII
//! `\b` and `\d`). Look-arounds and back-references have no place here: a pattern that needs one
//! is written without it plus an `accept` check on the match. Pure text in, text out.

use regex::{Captures, Regex, RegexBuilder, RegexSet, RegexSetBuilder};

use super::redact::mask;

/// JavaScript's `\s`, as the body of a character class.
const JS_SPACE: &str =
    r"\t\n\x0B\x0C\r \u{A0}\u{1680}\u{2000}-\u{200A}\u{2028}\u{2029}\u{202F}\u{205F}\u{3000}\u{FEFF}";

/// A pattern in JavaScript notation (`\s`, `\b`, `\d` as JavaScript reads them) for the `regex` crate.
pub(super) fn js(src: &str) -> String {
    let mut out = String::with_capacity(src.len() + 64);
    let mut in_class = false;
    let mut chars = src.chars();
    while let Some(c) = chars.next() {
        match c {
            '\\' => match chars.next() {
                Some('s') if in_class => out.push_str(JS_SPACE),
                Some('s') => {
                    out.push('[');
                    out.push_str(JS_SPACE);
                    out.push(']');
                }
                Some('b') if !in_class => out.push_str(r"(?-u:\b)"),
                Some('d') if in_class => out.push_str("0-9"),
                Some('d') => out.push_str("[0-9]"),
                Some(e) => {
                    out.push('\\');
                    out.push(e);
                }
                None => out.push('\\'),
            },
            '[' | ']' => {
                in_class = c == '[';
                out.push(c);
            }
            _ => out.push(c),
        }
    }
    out
}

/// Compiles a pattern written in JavaScript notation; `ci` = the gateway's `i` flag.
pub(super) fn compile(src: &str, ci: bool) -> Regex {
    RegexBuilder::new(&js(src))
        .case_insensitive(ci)
        .size_limit(1 << 24)
        .build()
        .unwrap_or_else(|e| panic!("built-in redaction pattern does not compile: {e}"))
}

/// How the secret of a match is replaced.
#[derive(Clone, Copy, PartialEq)]
pub(super) enum Masking {
    /// quotes and trailing delimiters taken off, the rest masked (`sk-abc…6789` / `***`)
    Hinted,
    /// the value masked as written; a `$NAME` / `${NAME}` reference to the assigned name stays
    Shell,
    /// as `Hinted`, but only up to a following `&name=` pair, which stays
    FormAware,
}

/// A check on a match beyond the regex (the gateway's look-arounds): None rejects the match at
/// this position (the search goes on one character later); otherwise where the match really
/// ends, which the gateway's backtracking can put before the end of the regex match (the secret
/// is cut there too).
pub(super) type Accept = fn(&str, &Captures) -> Option<usize>;

/// One compiled gateway pattern.
pub(super) struct Pass {
    re: Regex,
    ci: bool,
    masking: Masking,
    accept: Option<Accept>,
}

/// Passes applied in order; one set over all of them says which can match the current text at
/// all (it is asked again after each change, so skipping is exact).
pub(super) struct Passes {
    passes: Vec<Pass>,
    set: Option<RegexSet>,
}

impl Passes {
    pub fn new(passes: Vec<Pass>) -> Passes {
        let sources =
            passes.iter().map(|p| if p.ci { format!("(?i:{})", p.re.as_str()) } else { p.re.as_str().to_string() });
        let set = RegexSetBuilder::new(sources).size_limit(1 << 26).dfa_size_limit(1 << 24).build().ok();
        Passes { passes, set }
    }

    /// How many passes, and whether the set over them was built.
    #[cfg(test)]
    pub fn shape(&self) -> (usize, bool) {
        (self.passes.len(), self.set.is_some())
    }

    pub fn apply(&self, text: &str) -> String {
        let Some(set) = &self.set else {
            return self.passes.iter().fold(text.to_string(), |out, pass| pass.apply(&out));
        };
        let mut out = text.to_string();
        let mut hits = set.matches(&out);
        for (i, pass) in self.passes.iter().enumerate() {
            if !hits.matched(i) {
                continue;
            }
            let next = pass.apply(&out);
            if next != out {
                out = next;
                hits = set.matches(&out);
            }
        }
        out
    }
}

impl Pass {
    pub fn new(src: &str, ci: bool, masking: Masking, accept: Option<Accept>) -> Pass {
        Pass { re: compile(src, ci), ci, masking, accept }
    }

    /// The text with every match of this pass masked.
    pub fn apply(&self, text: &str) -> String {
        let mut out = String::new();
        let mut copied = 0;
        let mut at = 0;
        while at <= text.len() {
            let Some(caps) = self.re.captures_at(text, at) else { break };
            let whole = caps.get(0).expect("group 0 always participates");
            let Some(end) = self.accept.map_or(Some(whole.end()), |ok| ok(text, &caps)) else {
                at = next_char(text, whole.start());
                continue;
            };
            at = if end == whole.start() { next_char(text, end) } else { end };
            let Some((start, end, replacement)) = self.edit(text, &caps, end) else { continue };
            out.push_str(&text[copied..start]);
            out.push_str(&replacement);
            copied = end;
        }
        if copied == 0 {
            // nothing replaced (every replacement ends past 0)
            return text.to_string();
        }
        out.push_str(&text[copied..]);
        out
    }

    /// The replacement for one match: (start, end, text), or None when it stays as it is.
    fn edit(&self, text: &str, caps: &Captures, end: usize) -> Option<(usize, usize, String)> {
        let whole = &text[caps.get(0)?.start()..end];
        if whole.contains("PRIVATE KEY-----") {
            return Some((end - whole.len(), end, pem_block(whole)));
        }
        let group = (1..caps.len()).rev().filter_map(|g| caps.get(g)).find(|m| m.start() < end && !m.is_empty());
        let (start, stop) = group.map_or((end - whole.len(), end), |m| (m.start(), m.end().min(end)));
        let token = &text[start..stop];
        if token == "***" {
            return None;
        }
        let (value, pairs) = match self.masking {
            Masking::FormAware => split_at_form_pair(token),
            _ => (token, ""),
        };
        let (maskable, suffix) = split_value(value);
        if maskable == "***" {
            return None;
        }
        let replacement = if self.masking == Masking::Shell {
            if is_own_reference(whole, token) || is_empty_expansion_tail(token) {
                return None;
            }
            mask(token)
        } else {
            format!("{}{suffix}{pairs}", mask(maskable))
        };
        Some((start, stop, replacement))
    }
}

pub(super) fn next_char(text: &str, i: usize) -> usize {
    i + text[i..].chars().next().map_or(1, char::len_utf8)
}

/// A private-key block caught inside another match: its first and last lines around `…redacted…`.
pub(super) fn pem_block(block: &str) -> String {
    let lines: Vec<&str> =
        block.split('\n').map(|l| l.strip_suffix('\r').unwrap_or(l)).filter(|l| !l.is_empty()).collect();
    match lines.as_slice() {
        [first, .., last] => format!("{first}\n…redacted…\n{last}"),
        _ => "***".to_string(),
    }
}

const CLOSERS: &str = "\"'`,;)}]";

/// A value as the gateway masks it: (the part masked, what stays after it). A value opening with
/// a quote loses that quote; the matching closing quote and what follows it stay when only
/// closers follow; otherwise trailing closers stay.
pub(super) fn split_value(token: &str) -> (&str, &str) {
    let trailing = |s: &str| s.len() - s.trim_end_matches(|c| CLOSERS.contains(c)).len();
    if let Some(q) = token.chars().next().filter(|c| "\"'`".contains(*c)) {
        if let Some(close) = token.rfind(q).filter(|i| *i > 0) {
            let suffix = &token[close + 1..];
            if suffix.chars().all(|c| CLOSERS.contains(c)) {
                return (&token[1..close], suffix);
            }
        }
        let rest = &token[1..];
        let t = trailing(rest);
        return if t > 0 && t < rest.len() { rest.split_at(rest.len() - t) } else { (rest, "") };
    }
    let t = trailing(token);
    if t > 0 && t < token.len() {
        token.split_at(token.len() - t)
    } else {
        (token, "")
    }
}

/// `secret&next=…` → (`secret`, `&next=…`): the first `&name=` ends the credential.
fn split_at_form_pair(token: &str) -> (&str, &str) {
    let b = token.as_bytes();
    let at = (0..b.len()).find(|&i| {
        b[i] == b'&' && b.get(i + 1).is_some_and(|c| c.is_ascii_alphabetic() || *c == b'_') && {
            let name = b[i + 2..].iter().take_while(|c| c.is_ascii_alphanumeric() || b"_.-".contains(c)).count();
            b.get(i + 2 + name) == Some(&b'=')
        }
    });
    at.map_or((token, ""), |i| token.split_at(i))
}

fn is_env_name(s: &str) -> bool {
    let mut c = s.chars();
    c.next().is_some_and(|f| f.is_ascii_uppercase() || f == '_')
        && c.all(|x| x.is_ascii_uppercase() || x.is_ascii_digit() || x == '_')
}

/// `NAME=$NAME`, `NAME=${NAME}`, `NAME=${NAME:-}` and the like: a reference, not a secret. The
/// name is the first upper-case word of the match followed by `=` or `:`.
fn is_own_reference(matched: &str, token: &str) -> bool {
    let b = matched.as_bytes();
    let word = |c: u8| c.is_ascii_alphanumeric() || c == b'_';
    let mut i = 0;
    while i < b.len() {
        if word(b[i]) && (i == 0 || !word(b[i - 1])) {
            let end = i + b[i..].iter().take_while(|c| word(**c)).count();
            let name = &matched[i..end];
            let sep = end + b[end..].iter().take_while(|c| c.is_ascii_whitespace()).count();
            if is_env_name(name) && matches!(b.get(sep), Some(b'=') | Some(b':')) {
                return is_reference_to(name, token);
            }
            i = end;
        } else {
            i += 1;
        }
    }
    false
}

fn is_reference_to(name: &str, token: &str) -> bool {
    if let Some(bare) = token.strip_prefix('$').filter(|t| !t.starts_with('{')) {
        return bare == name;
    }
    let Some(inner) = token.strip_prefix("${").and_then(|t| t.strip_suffix('}')) else { return false };
    let (var, op) = inner.split_at(inner.find(':').unwrap_or(inner.len()));
    is_env_name(var) && var == name && (op.is_empty() || (op.len() == 2 && "-=?+".contains(&op[1..])))
}

/// `-}` and the like: the tail of an empty `${NAME:-}` expansion.
fn is_empty_expansion_tail(token: &str) -> bool {
    let b = token.as_bytes();
    b.len() == 2 && b"-=?+".contains(&b[0]) && b[1] == b'}'
}
