//! The gateway's last default redaction shape for 2026.9 history: a bare AWS secret access key,
//! i.e. a run of exactly 40 characters of `A-Za-z0-9/+=` holding an upper-case letter, a
//! lower-case letter, a digit or `/+=`, and a character outside hex. A run glued to `_` or to a
//! longer run, inside a `;base64,` data run, or inside a public URL (no `user@`, a numeric port or
//! none) is left alone; a 40-character credential right before `@` (`…/<secret>@host`,
//! `host:<secret>@`) is masked. Scanned once, left to right, one white-space-delimited stretch at
//! a time. Pure text in, text out.

use super::redact::mask;

const RUN: usize = 40;

fn is_value(c: char) -> bool {
    c.is_ascii_alphanumeric() || "/+=".contains(c)
}

/// JavaScript's `\s`.
pub(super) fn is_js_space(c: char) -> bool {
    matches!(c, '\t' | '\n' | '\u{B}' | '\u{C}' | '\r' | ' ' | '\u{A0}' | '\u{1680}' | '\u{2028}' | '\u{2029}')
        || matches!(c, '\u{2000}'..='\u{200A}' | '\u{202F}' | '\u{205F}' | '\u{3000}' | '\u{FEFF}')
}

/// The 40 characters look like a secret rather than a word, a number or a hex digest.
fn is_secret_shaped(run: &[char]) -> bool {
    run.iter().any(char::is_ascii_uppercase)
        && run.iter().any(char::is_ascii_lowercase)
        && run.iter().any(|c| c.is_ascii_digit() || "/+=".contains(*c))
        && run.iter().any(|c| matches!(c, 'G'..='Z' | 'g'..='z' | '/' | '+' | '='))
}

/// Cheap test before the scan: some run of at least 40 value characters.
fn could_hold_one(text: &str) -> bool {
    let mut run = 0;
    text.bytes().any(|c| {
        run = if is_value(char::from(c)) { run + 1 } else { 0 };
        run >= RUN
    })
}

/// What the scan knows about the URL it is in (positions are character indexes).
struct Url {
    start: usize,
    end: usize,
    authority_end: Option<usize>,
    port_start: Option<usize>,
    port_valid: bool,
    has_at: bool,
    query_or_fragment: bool,
    closing: Option<char>,
    closing_escapes: usize,
}

impl Url {
    /// No credentials in it: no `@`, and a numeric port if any.
    fn is_public(&self) -> bool {
        let authority_end = self.authority_end.unwrap_or(self.end);
        !self.has_at && self.port_valid && self.port_start.is_none_or(|p| authority_end > p + 1)
    }
}

struct Run {
    start: usize,
    end: usize,
    origin: usize,
    url: Option<usize>,
}

/// The text with every bare AWS secret access key masked.
pub(super) fn aws_secret_keys(text: &str) -> String {
    if !could_hold_one(text) {
        return text.to_string();
    }
    let chars: Vec<char> = text.chars().collect();
    let hits = scan(&chars);
    if hits.is_empty() {
        return text.to_string();
    }
    let mut out = String::with_capacity(text.len());
    let mut copied = 0;
    for (start, end) in hits {
        out.extend(&chars[copied..start]);
        out.push_str(&mask(&chars[start..end].iter().collect::<String>()));
        copied = end;
    }
    out.extend(&chars[copied..]);
    out
}

fn scan(chars: &[char]) -> Vec<(usize, usize)> {
    let at = |i: usize| chars.get(i).copied();
    let mut hits = Vec::new();
    let mut urls: Vec<Url> = Vec::new();
    let mut url: Option<usize> = None;
    let mut run_start: Option<usize> = None;
    let mut scheme_start: Option<usize> = None;
    let mut backslashes = 0;
    let mut runs: Vec<Run> = Vec::new();
    for index in 0..=chars.len() {
        let c = at(index);
        let escapes = backslashes;
        backslashes = if c == Some('\\') { backslashes + 1 } else { 0 };
        if c.is_some_and(is_value) {
            run_start.get_or_insert(index);
        } else if let Some(origin) = run_start.take() {
            if index - origin == RUN {
                runs.push(Run { start: origin, end: index, origin, url });
            } else if index - origin > RUN && c == Some('@') && at(index - RUN - 1) == Some('/') {
                runs.push(Run { start: index - RUN, end: index, origin, url });
            }
        }
        let Some(c) = c.filter(|c| !is_js_space(*c)) else {
            if let Some(u) = url {
                urls[u].end = urls[u].end.min(index);
            }
            for run in runs.drain(..) {
                if keeps(chars, &run, run.url.map(|u| &urls[u])) {
                    continue;
                }
                if is_secret_shaped(&chars[run.start..run.end]) {
                    hits.push((run.start, run.end));
                }
            }
            scheme_start = None;
            url = None;
            continue;
        };
        if let Some(u) = url.filter(|u| index >= urls[*u].start) {
            let ctx = &mut urls[u];
            if Some(c) == ctx.closing && escapes == ctx.closing_escapes {
                ctx.end = ctx.end.min(index);
                url = None;
            } else {
                if "?#\"'<>`|()[]{}".contains(c) {
                    ctx.end = ctx.end.min(index);
                }
                ctx.query_or_fragment |= c == '?' || c == '#';
                if ctx.authority_end.is_none() {
                    ctx.has_at |= c == '@';
                    if "/?#".contains(c) {
                        ctx.authority_end = Some(index);
                    } else if index < ctx.end {
                        if c == ':' {
                            ctx.port_valid &= ctx.port_start.is_none();
                            ctx.port_start = Some(index);
                        } else if ctx.port_start.is_some() && !c.is_ascii_digit() {
                            ctx.port_valid = false;
                        }
                    }
                }
            }
        }
        if c.is_ascii_alphanumeric() || "+.-".contains(c) {
            scheme_start.get_or_insert(index);
            continue;
        }
        let may_open = url.is_none_or(|u| index >= urls[u].end && !urls[u].query_or_fragment);
        let scheme = scheme_start.take().filter(|s| chars[*s].is_ascii_alphabetic());
        if let (true, ':', Some(s)) = (may_open, c, scheme) {
            if at(index + 1) == Some('/') && at(index + 2) == Some('/') {
                let opening = s.checked_sub(1).map(|o| chars[o]);
                let closing_escapes =
                    s.checked_sub(1).map_or(0, |o| chars[..o].iter().rev().take_while(|c| **c == '\\').count());
                urls.push(Url {
                    start: index + 3,
                    end: chars.len(),
                    authority_end: None,
                    port_start: None,
                    port_valid: true,
                    has_at: false,
                    query_or_fragment: false,
                    closing: opening.and_then(closer),
                    closing_escapes,
                });
                url = Some(urls.len() - 1);
            }
        }
    }
    hits
}

fn closer(open: char) -> Option<char> {
    let i = "\"'`<([{".find(open)?;
    "\"'`>)]}".chars().nth(i)
}

/// Whether a 40-character run stays as it is.
fn keeps(chars: &[char], run: &Run, url: Option<&Url>) -> bool {
    let before = run.start.checked_sub(1).map(|i| chars[i]);
    let after = chars.get(run.end).copied();
    let slash_credential = run.start != run.origin;
    let glued = !slash_credential && before.is_some_and(|b| b == '_' || is_value(b));
    let base64 = run.origin >= 8 && chars[run.origin - 8..run.origin].iter().collect::<String>() == ";base64,";
    let in_public_url = url.is_some_and(|u| {
        let port_credential = u.port_start.is_some_and(|p| {
            run.origin == p + 1 && u.authority_end.is_some_and(|a| a > run.origin && run.end > a) && after == Some('@')
        });
        u.is_public() && !port_credential && run.start >= u.start && run.end <= u.end
    });
    glued || after == Some('_') || base64 || in_public_url
}
