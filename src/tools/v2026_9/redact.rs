//! Credential masking of the 2026.9 `sessions_history` (always on): vendor tokens found by
//! their prefix, JWTs and other dotted tokens, `Bearer` and `Authorization` credentials,
//! secret-named assignments (`password: …`, `token=…`, `OPENAI_API_KEY=…`, `--api-key …`,
//! `"apiKey": "…"`, `aws_secret_access_key = …`), URL passwords and PEM private keys, plus the configured `logging.redactPatterns` (regular expressions). A
//! masked value keeps its first 6 and last 4 characters (`sk-abc…6789`); one shorter than 18
//! becomes `***`.
//!
//! The assignment, header, URL and PEM shapes are a hand-written scanner; the gateway's vendor
//! token shapes and the configured patterns are regular expressions (`redact_rx`).
//! `src/agreement_test.rs` compares the whole with the package's own `redactToolPayloadText`
//! on the texts `scripts/oc96-fixture.mjs` recorded. Pure text in, text out.

/// Values shorter than this are masked whole.
const MIN_LENGTH: usize = 18;
const KEEP_START: usize = 6;
const KEEP_END: usize = 4;

use std::sync::OnceLock;

use regex::Regex;

use super::redact_auth::auth_params;
use super::redact_aws::aws_secret_keys;
use super::redact_fields::fields;
use super::redact_form::{form_bodies, query_values};
use super::redact_pass::{pem_block, split_value};
#[cfg(test)]
use super::redact_rx::configured_rules;
use super::redact_rx::{apply_all, vendor_tokens, Rule};

/// `sk-abc…6789`, or `***` for a short value.
pub fn mask(token: &str) -> String {
    let chars: Vec<char> = token.chars().collect();
    if chars.len() < MIN_LENGTH {
        return "***".to_string();
    }
    let start: String = chars[..KEEP_START].iter().collect();
    let end: String = chars[chars.len() - KEEP_END..].iter().collect();
    format!("{start}…{end}")
}

/// A masked copy of `text`, and whether anything was masked. `extra` are the configured
/// `logging.redactPatterns`, applied before the built-in shapes as the gateway does.
pub fn redact(text: &str, extra: &[Rule]) -> (String, bool) {
    let mut out = form_bodies(&query_values(&auth_params(text)));
    out = apply_all(extra, &out);
    for pass in &fields().before_pem {
        out = pass.apply(&out);
    }
    out = pem(&out);
    for pass in &fields().after_pem {
        out = pass.apply(&out);
    }
    out = vendor_tokens(&out);
    out = aws_secret_keys(&out);
    let changed = out != text;
    (out, changed)
}

/// A found block as the gateway replaces it: marker lines around `…redacted…` when it says
/// `PRIVATE KEY-----` in capitals, otherwise like any other secret.
fn pem_or_mask(block: &str) -> String {
    if block.contains("PRIVATE KEY-----") {
        pem_block(block)
    } else {
        let (maskable, suffix) = split_value(block);
        format!("{}{suffix}", mask(maskable))
    }
}

/// `-----BEGIN … PRIVATE KEY----- … -----END … PRIVATE KEY-----` (letters in any case) → its
/// first and last lines around `…redacted…`. A BEGIN without an END stays.
fn pem(text: &str) -> String {
    static MARKER: OnceLock<Regex> = OnceLock::new();
    let marker = MARKER.get_or_init(|| {
        Regex::new(r"-----(?i-u:(BEGIN|END) [a-z ]*PRIVATE KEY)-----").expect("the PEM marker compiles")
    });
    let mut out = String::new();
    let mut copied = 0;
    let mut open: Option<(usize, usize)> = None;
    let mut at = 0;
    // the five closing dashes of one marker may open the next
    while let Some(m) = marker.captures_at(text, at) {
        let whole = m.get(0).expect("group 0 always participates");
        at = whole.end() - 5;
        let begin = m[1].eq_ignore_ascii_case("begin");
        match open {
            None if begin && whole.start() >= copied => open = Some((whole.start(), whole.end())),
            Some((start, head_end)) if !begin && whole.start() > head_end => {
                out.push_str(&text[copied..start]);
                out.push_str(&pem_or_mask(&text[start..whole.end()]));
                copied = whole.end();
                open = None;
            }
            _ => {}
        }
    }
    out.push_str(&text[copied..]);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tokens_keep_six_and_four_characters_and_short_values_are_starred() {
        let (out, hit) = redact("my key is sk-abcdefghijklmnopqrstuvwxyz0123456789", &[]);
        assert_eq!(out, "my key is sk-abc…6789");
        assert!(hit);
        assert_eq!(redact("password: hunter2hunter2", &[]).0, "password: ***");
        assert_eq!(redact("token=abc123def456ghi789", &[]).0, "token=abc123…i789");
        assert_eq!(redact("AKIAIOSFODNN7EXAMPLE", &[]).0, "AKIAIO…MPLE");
        assert_eq!(
            redact("Authorization: Bearer eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxIn0.abcdefghijk", &[]).0,
            "Authorization: Bearer eyJhbG…hijk"
        );
        assert_eq!(redact("hello world", &[]), ("hello world".to_string(), false));
    }

    #[test]
    fn escaped_quote_environment_values_and_aws_secret_fields_are_masked() {
        assert_eq!(
            redact(r#"OPENAI_API_KEY=\"abcdefghijklmnopqrstuvwxyz\""#, &[]).0,
            r#"OPENAI_API_KEY=\"abcdef…wxyz\""#
        );
        assert_eq!(redact(r#"STRIPE_CVV=\\"123\\""#, &[]).0, r#"STRIPE_CVV=\\"***\\""#);
        let unclosed = r#"X_KEY=\"abcdefghijklmnopqrstuvwxyz\'"#;
        assert_eq!(redact(unclosed, &[]), (unclosed.to_string(), false));
        let v = "abcdefghij0123456789abcdefghij0123456789";
        assert_eq!(redact(&format!("aws_secret_access_key = '{v}'"), &[]).0, "aws_secret_access_key = 'abcdef…6789'");
        assert_eq!(redact(&format!("{{SecretAccessKey:{v}}}"), &[]).0, "{SecretAccessKey:abcdef…6789}");
        for miss in [
            format!("aws_secret_access_key = {v}a"),
            format!("xaws_secret_access_key={v}"),
            format!("awsSecretAccessKey: '{v}\""),
        ] {
            assert_eq!(redact(&miss, &[]), (miss.clone(), false));
        }
    }

    #[test]
    fn configured_literals_and_pem_keys_are_masked() {
        let rules = configured_rules(&["internal-[a-z]+-value".to_string(), "/code=(\\d+)/".to_string()]);
        let (out, hit) = redact("x internal-secret-value y code=12345", &rules);
        assert_eq!(out, "x intern…alue y code=***");
        assert!(hit);
        let pem = "-----BEGIN RSA PRIVATE KEY-----\nMIIB\n-----END RSA PRIVATE KEY-----";
        assert_eq!(redact(pem, &[]).0, "-----BEGIN RSA PRIVATE KEY-----\n…redacted…\n-----END RSA PRIVATE KEY-----");
    }
}

#[cfg(test)]
mod probe_tmp {
    #[test]
    fn probe_tmp() {
        let Ok(text) = std::fs::read_to_string("/tmp/r3/in.txt") else { return };
        for l in text.lines().filter(|l| !l.is_empty()) {
            let t: String = serde_json::from_str(l).unwrap();
            println!("{l}  =>  {}", serde_json::to_string(&super::redact(&t, &[]).0).unwrap());
        }
    }
}
