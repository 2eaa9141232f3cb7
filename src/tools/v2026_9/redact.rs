//! Credential masking of the 2026.9 `sessions_history` (always on): the order of the gateway's
//! steps, the mask itself and the PEM step. A masked value keeps its first 6 and last 4
//! characters (`sk-abc…6789`); one shorter than 18 becomes `***`.
//!
//! The steps, each over the text the previous one left (so one step can mask what another
//! already masked, as the gateway's do): `Authorization` parameters (`redact_auth`), URL query
//! values and form bodies (`redact_form`), the configured `logging.redactPatterns`, the 31
//! assignment / header / URL shapes (`redact_fields`), PEM private keys (here), AWS secret fields,
//! the 90 vendor-token shapes (`redact_rx`) and bare AWS secret keys (`redact_aws`): the
//! gateway's 123 default shapes. `src/agreement_test.rs` compares the whole with the package's own
//! `redactToolPayloadText` on the texts `scripts/oc96-fixture.mjs` recorded. Pure text in, text out.

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
use super::redact_rx::{apply_all, vendor_tokens, Rule};

/// `sk-abc…6789`, or `***` for a short value. Lengths count UTF-16 units, as the gateway's do;
/// a character that would be cut in half is left out.
pub fn mask(token: &str) -> String {
    if token.encode_utf16().count() < MIN_LENGTH {
        return "***".to_string();
    }
    let within = |budget: usize, chars: &mut dyn Iterator<Item = char>| {
        let mut used = 0;
        let mut kept = Vec::new();
        for c in chars {
            used += c.len_utf16();
            if used > budget {
                break;
            }
            kept.push(c);
        }
        kept
    };
    let start: String = within(KEEP_START, &mut token.chars()).into_iter().collect();
    let end: String = within(KEEP_END, &mut token.chars().rev()).into_iter().rev().collect();
    format!("{start}…{end}")
}

/// A masked copy of `text`, and whether anything was masked. `extra` are the configured
/// `logging.redactPatterns`, applied before the built-in shapes as the gateway does.
pub fn redact(text: &str, extra: &[Rule]) -> (String, bool) {
    let mut out = form_bodies(&query_values(&auth_params(text)));
    out = apply_all(extra, &out);
    out = fields().before_pem.apply(&out);
    out = pem(&out);
    out = fields().after_pem.apply(&out);
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
#[path = "redact_tests.rs"]
mod tests;
