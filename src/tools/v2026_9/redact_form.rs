//! The gateway's two assignment steps that run before any pattern in 2026.9 history redaction:
//! URL query parameters (`?token=…&code=…`, a secret-named parameter's value masked keeping 6
//! and 4 characters) and form bodies (`a=1&password=…&client_secret=…`, a secret-named pair's
//! value starred), including pairs after `body:` / `form=` and pairs whose name is
//! percent-encoded or padded with invisible characters (`pass%77ord=`, `pass+word=`). A name is
//! secret by the gateway's lists once decoded, folded to lower case with `-` read as `_`. Pure
//! text in, text out.

use std::sync::OnceLock;

use regex::{Captures, Regex};

use super::redact::mask;
use super::redact_pass::{compile, split_value};

/// Characters the gateway treats as padding inside a form name (and `+`).
const INVISIBLE: &str = r"\p{C}\u{A0}\u{1680}\u{2000}-\u{200A}\u{202F}\u{205F}\u{3000}\u{115F}\u{1160}\u{3164}\u{FFA0}";

/// Names secret in a URL query (after decoding and folding).
const QUERY_NAMES: &[&str] = &[
    "token",
    "key",
    "api_key",
    "apikey",
    "secret",
    "access_token",
    "auth_token",
    "password",
    "pass",
    "passwd",
    "auth",
    "jwt",
    "session",
    "id_token",
    "code",
    "client_secret",
    "app_secret",
    "hook_token",
    "refresh_token",
    "signature",
    "x_amz_signature",
    "x_amz_security_token",
    "private_key",
    "credential",
    "authorization",
    "sig",
    "x_api_key",
    "x_access_token",
    "x_auth_token",
];

/// Further names secret in a form body.
const BODY_NAMES: &[&str] = &[
    "awssecretaccesskey",
    "aws_secret_access_key",
    "secretaccesskey",
    "card_number",
    "card_cvc",
    "card_cvv",
    "cvc",
    "cvv",
    "security_code",
    "payment_credential",
    "shared_payment_token",
];

struct Forms {
    separators: Regex,
    obfuscation: Regex,
    percent: Regex,
    whole_body: Regex,
    body_in_text: Regex,
    encoded_pair: Regex,
    context_pair: Regex,
    query_pair: Regex,
    scoped_token: Regex,
}

fn forms() -> &'static Forms {
    static FORMS: OnceLock<Forms> = OnceLock::new();
    FORMS.get_or_init(|| {
        let key = format!(
            r"[{INVISIBLE}+]*(?:[A-Za-z_]|%[0-9A-Fa-f]{{2}})(?:[A-Za-z0-9_.-]|%[0-9A-Fa-f]{{2}}|[{INVISIBLE}+])*"
        );
        let value = r"[^&\s<>]*";
        let pair = format!("{key}={value}");
        Forms {
            separators: compile(r"[\p{C}\p{Z}\u{115F}\u{1160}\u{3164}\u{FFA0}+]", false),
            obfuscation: compile(&format!("[{INVISIBLE}+]"), false),
            percent: compile("%[0-9A-Fa-f]{2}", false),
            whole_body: compile(&format!("^{pair}(?:&{pair})+$"), false),
            body_in_text: compile(&format!(r#"(^|[\s:({{\[,="'`])({pair}(?:&{pair})+)"#), false),
            encoded_pair: compile(&format!(r#"(^|[\s:({{\[,="'`&])({key})=({value})"#), false),
            context_pair: compile(
                &format!(r#"(\b(?:body|form(?:[-_\s]?body)?)\s*[:=]\s*(["'`]?))({key})=({value})(["'`]?)"#),
                true,
            ),
            query_pair: compile(&format!(r"([?&])({key})=([^&#\s<>]*)"), false),
            scoped_token: compile("(?:^|_)token(?:_[a-f0-9]{16,})?$", false),
        }
    })
}

/// `decodeURIComponent`: `%XX` sequences as UTF-8; None when one is malformed.
fn decode_component(s: &str) -> Option<String> {
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        if b[i] == b'%' {
            let hex = s.get(i + 1..i + 3)?;
            out.push(u8::from_str_radix(hex, 16).ok().filter(|_| hex.bytes().all(|c| c.is_ascii_hexdigit()))?);
            i += 3;
        } else {
            out.push(b[i]);
            i += 1;
        }
    }
    String::from_utf8(out).ok()
}

fn fold(name: &str) -> String {
    name.trim().to_lowercase().replace('-', "_")
}

/// Whether a query or form name is secret.
fn is_secret_name(f: &Forms, name: &str) -> bool {
    let strip = |s: &str| f.separators.replace_all(s, "").into_owned();
    // as a URL query name: decoded until stable (at most 8 times); undecodable `%` counts as secret
    let mut current = strip(name);
    let mut unresolved = current.contains('%');
    for _ in 0..=8 {
        match decode_component(&current).map(|d| strip(&d)) {
            None => break,
            Some(d) if d == current => {
                unresolved = false;
                break;
            }
            Some(d) => {
                unresolved = d.contains('%');
                current = d;
            }
        }
    }
    let query = fold(&current);
    if unresolved || QUERY_NAMES.contains(&query.as_str()) || f.scoped_token.is_match(&query) {
        return true;
    }
    // as a form name: decoded once
    let stripped = strip(name);
    let body = decode_component(&stripped).map_or_else(|| stripped.clone(), |d| strip(&d));
    let body = body.to_lowercase().replace('-', "_");
    QUERY_NAMES.contains(&body.as_str()) || BODY_NAMES.contains(&body.as_str())
}

/// Where a pair's value is replaced: the value less what stays after it (closing quote, closers).
fn value_span(value_start: usize, token: &str) -> (usize, usize, String) {
    let (maskable, suffix) = split_value(token);
    (value_start, value_start + token.len() - suffix.len(), maskable.to_string())
}

/// Which pairs a pass looks at.
#[derive(Clone, Copy, PartialEq)]
enum Kind {
    Query,
    Encoded,
    Context,
    Body,
}

/// Masks the secret pairs of one kind: query values keep 6 and 4 characters, the others become `***`.
fn assignments(f: &Forms, text: &str, kind: Kind) -> String {
    let skip = match kind {
        Kind::Query => !text.contains('?'),
        Kind::Encoded => !text.contains('%') && !f.obfuscation.is_match(text),
        Kind::Context => !text.contains('=') && !text.contains(':'),
        Kind::Body => false,
    };
    if skip {
        return text.to_string();
    }
    let mut spans = Vec::new();
    let mut visit = |name: &str, value_start: usize, token: &str| {
        if kind == Kind::Encoded && !f.percent.is_match(name) && !f.obfuscation.is_match(name) {
            return;
        }
        if is_secret_name(f, name) {
            spans.push(value_span(value_start, token));
        }
    };
    if kind == Kind::Body {
        let mut at = 0;
        for pair in text.split('&') {
            if let Some(eq) = pair.find('=') {
                visit(&pair[..eq], at + eq + 1, &pair[eq + 1..]);
            }
            at += pair.len() + 1;
        }
    } else {
        let (re, name) = match kind {
            Kind::Query => (&f.query_pair, 2),
            Kind::Encoded => (&f.encoded_pair, 2),
            _ => (&f.context_pair, 3),
        };
        for caps in re.captures_iter(text) {
            let (n, v) = (caps.get(name), caps.get(name + 1));
            if let (Some(n), Some(v)) = (n, v) {
                visit(n.as_str(), v.start(), v.as_str());
            }
        }
    }
    let mut out = String::with_capacity(text.len());
    let mut copied = 0;
    for (start, end, maskable) in spans {
        out.push_str(&text[copied..start]);
        out.push_str(&if kind == Kind::Query { mask(&maskable) } else { "***".to_string() });
        copied = end;
    }
    out.push_str(&text[copied..]);
    out
}

/// The URL-query step.
pub(super) fn query_values(text: &str) -> String {
    assignments(forms(), text, Kind::Query)
}

/// The form-body step, line by line.
pub(super) fn form_bodies(text: &str) -> String {
    if !text.contains('=') {
        return text.to_string();
    }
    let f = forms();
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(i) = rest.find(['\r', '\n']) {
        out.push_str(&form_line(f, &rest[..i]));
        let brk = if rest[i..].starts_with("\r\n") { 2 } else { 1 };
        out.push_str(&rest[i..i + brk]);
        rest = &rest[i + brk..];
    }
    out.push_str(&form_line(f, rest));
    out
}

fn form_line(f: &Forms, line: &str) -> String {
    if line.is_empty() {
        return String::new();
    }
    let pairs = |s: &str| assignments(f, &assignments(f, s, Kind::Encoded), Kind::Context);
    let line = pairs(line);
    if !line.contains('&') {
        return line;
    }
    if f.whole_body.is_match(&line) {
        return assignments(f, &line, Kind::Body);
    }
    let bodies = f.body_in_text.replace_all(&line, |caps: &Captures| {
        let body = &caps[2];
        format!("{}{}", &caps[1], assignments(f, body, Kind::Body))
    });
    pairs(&bodies)
}
