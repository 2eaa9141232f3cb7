//! The regular-expression half of 2026.9 history redaction: the gateway's vendor-token shapes
//! (compiled once, case-insensitive as the gateway applies them) and the configured
//! `logging.redactPatterns` (checked at config time, compiled with a size limit). A match keeps
//! its text around the last non-empty capture group, which is masked (or the whole match when
//! there is no group). Never allocates a regex per call for the built-in set.

use std::sync::OnceLock;

use regex::{Regex, RegexBuilder, RegexSet, RegexSetBuilder};

use super::redact::mask;

/// Compiled size cap for one configured pattern (the regex crate is linear-time; this bounds
/// memory and compile time).
const CONFIGURED_SIZE_LIMIT: usize = 1 << 20;
/// Longest configured pattern accepted.
const CONFIGURED_MAX_LEN: usize = 2_000;

/// What must hold just before a token beyond the regex itself.
#[derive(Clone, Copy, PartialEq)]
enum Guard {
    None,
    /// not inside a `;base64,` data run (the gateway's look-behind)
    NotBase64,
}

/// The token shapes the 2026.9.6 gateway masks by default, in its order. `B` = a boundary
/// group `(^|[^A-Za-z0-9])`, `I` = `(^|[^A-Za-z0-9_])`.
const VENDOR: &[(&str, Guard)] = &[
    (r"(?-u:\b)(sk-[A-Za-z0-9_-]{8,})(?-u:\b)", Guard::None),
    (r"(ghp_[A-Za-z0-9]{10,})", Guard::None),
    (r"(github_pat_[A-Za-z0-9_]{10,})", Guard::None),
    (r"(gho_[A-Za-z0-9]{10,})", Guard::None),
    (r"(ghu_[A-Za-z0-9]{10,})", Guard::None),
    (r"(ghs_[A-Za-z0-9]{10,})", Guard::None),
    (r"(ghr_[A-Za-z0-9]{10,})", Guard::None),
    (r"(glpat-[A-Za-z0-9._=\-]{20,})", Guard::None),
    (r"(gloas-(?:[A-Fa-f0-9]{65,}|[A-Za-z0-9_-]{64}|[A-Fa-f0-9]{32,}))", Guard::None),
    (r"(gldt-[A-Za-z0-9_-]{20,})", Guard::None),
    (r"(glcbt-[A-Za-z0-9]{1,5}_[A-Za-z0-9_-]{20,})", Guard::None),
    (r"(glptt-[A-Za-z0-9_-]{40,})", Guard::None),
    (r"(glft-(?:[A-Za-z0-9_-]{20,}|[a-h0-9]+-[0-9]+_))", Guard::None),
    (r"(glimt-[A-Za-z0-9_-]{25,})", Guard::None),
    (r"(glagent-[A-Za-z0-9_-]{50,})", Guard::None),
    (r"(glwt-[A-Za-z0-9_-]{20,})", Guard::None),
    (r"(glsoat-[A-Za-z0-9_-]{20,})", Guard::None),
    (r"(glffct-[A-Za-z0-9_-]{20,})", Guard::None),
    (r"(glrt-[A-Za-z0-9._-]{20,})", Guard::None),
    (r"(glrtr?-[A-Za-z0-9_-]{27,300}\.[0-9a-z]{2}\.[0-9a-z]{9})", Guard::None),
    (r"(GR1348941[A-Za-z0-9_-]{20,})", Guard::None),
    (r"(_gitlab_session=[A-Za-z0-9%._-]{20,})", Guard::None),
    (r"(xox[baprs]-[A-Za-z0-9-]{10,})", Guard::None),
    (r"(xapp-[A-Za-z0-9-]{10,})", Guard::None),
    (
        r"(https://hooks\.slack\.com/(?:services/T[A-Z0-9]+/B[A-Z0-9]+|workflows/T[A-Z0-9]+/A[A-Z0-9]+/[0-9]{17,19})/[A-Za-z0-9]{20,})",
        Guard::None,
    ),
    (r"(https://discord(?:app)?\.com/api/webhooks/[0-9]{17,20}/[A-Za-z0-9_-]{60,})", Guard::None),
    (
        r"discord[^\u{2028}\u{2029}]{0,40}?(?-u:\b)([A-Za-z0-9_-]{24}\.[A-Za-z0-9_-]{6}\.[A-Za-z0-9_-]{27})(?-u:\b)",
        Guard::None,
    ),
    (r"(gsk_[A-Za-z0-9_-]{10,})", Guard::None),
    (r"(AIza[0-9A-Za-z\-_]{20,})", Guard::None),
    (r"(ya29\.[0-9A-Za-z_\-./+=]{10,})", Guard::None),
    (r"(1//0[0-9A-Za-z_\-./+=]{10,})", Guard::None),
    (r"(eyJ[A-Za-z0-9_-]{10,}\.[A-Za-z0-9_-]{10,}\.[A-Za-z0-9_-]{10,})", Guard::None),
    (r"(pplx-[A-Za-z0-9_-]{10,})", Guard::None),
    (r"(fal_[A-Za-z0-9_-]{10,})", Guard::None),
    (r"(^|[^A-Za-z0-9_])(fc-[A-Za-z0-9]{10,})", Guard::None),
    (r"(bb_live_[A-Za-z0-9_-]{10,})", Guard::None),
    (r"(^|[^A-Za-z0-9])(gAAAA[A-Za-z0-9_=-]{20,})", Guard::NotBase64),
    (r"(sk_live_[A-Za-z0-9]{10,})", Guard::None),
    (r"(sk_test_[A-Za-z0-9]{10,})", Guard::None),
    (r"(rk_live_[A-Za-z0-9]{10,})", Guard::None),
    (r"(SG\.[A-Za-z0-9_-]{10,}\.[A-Za-z0-9_-]{10,})", Guard::None),
    (r"(npm_[A-Za-z0-9]{10,})", Guard::None),
    (r"(pypi-[A-Za-z0-9_-]{10,})", Guard::None),
    (r"(dop_v1_[A-Za-z0-9]{10,})", Guard::None),
    (r"(doo_v1_[A-Za-z0-9]{10,})", Guard::None),
    (r"(dor_v1_[A-Za-z0-9]{10,})", Guard::None),
    (r"(dp\.(?:ct|pt|sa|scim|audit)\.[A-Za-z0-9]{40,44})", Guard::None),
    (r"(dp\.st\.[A-Za-z0-9]{40,44})", Guard::None),
    (r"(dp\.st\.[a-z0-9_-]{2,35}\.[A-Za-z0-9]{40,44})", Guard::None),
    (r"(dckr_(?:pat|oat)_[A-Za-z0-9_-]{27,32})", Guard::None),
    (r"(bkua_[a-z0-9]{40})", Guard::None),
    (r"(CCIPAT_[A-Za-z0-9]{22}_[A-Fa-f0-9]{40})", Guard::None),
    (r"(sbp_[a-z0-9]{40})", Guard::None),
    (r"(^|[^A-Za-z0-9])(dapi[0-9a-f]{32}(?:-\d)?)", Guard::NotBase64),
    (r"(dd[pw]_[A-Za-z0-9]{36})", Guard::None),
    (r"(glsa_[A-Za-z0-9_]{41})", Guard::None),
    (r"(glc_eyJ[A-Za-z0-9+/=]{60,160})", Guard::None),
    (r"(nfp_[A-Za-z0-9_]{36})", Guard::None),
    (r"(CFPAT-[A-Za-z0-9_\-]{40,})", Guard::None),
    (r"(^|[^A-Za-z0-9])(ATCTT3xFfG[A-Za-z0-9+/=_-]+=[A-Za-z0-9]{8})", Guard::NotBase64),
    (r"(^|[^A-Za-z0-9])(ATATT[A-Za-z0-9+/=_-]+=[A-Za-z0-9]{8})", Guard::NotBase64),
    (r"(^|[^A-Za-z0-9])(ATBB[A-Za-z0-9_=.-]{16,})", Guard::NotBase64),
    (r"(BBDC-[A-Za-z0-9+/@_-]{40,50})", Guard::None),
    (r"(HRKU-AA[A-Za-z0-9_-]{20,})", Guard::None),
    (r"(pat-(?:eu|na)1-[A-Za-z0-9]{8}\-[A-Za-z0-9]{4}\-[A-Za-z0-9]{4}\-[A-Za-z0-9]{4}\-[A-Za-z0-9]{12})", Guard::None),
    (r"(apify_api_[A-Za-z0-9\-]{20,})", Guard::None),
    (r"(FlyV1 fm\d+_[A-Za-z0-9+/=,_-]{100,})", Guard::None),
    (r"(fio-u-[A-Za-z0-9_-]{40,})", Guard::None),
    (r"(^|[^A-Za-z0-9_])(am_[A-Za-z0-9_-]{10,})", Guard::None),
    (r"(^|[^A-Za-z0-9_])(sk_[A-Za-z0-9_]{10,})", Guard::None),
    (r"(tvly-[A-Za-z0-9]{10,})", Guard::None),
    (r"(exa_[A-Za-z0-9]{10,})", Guard::None),
    (r"(syt_[A-Za-z0-9]{10,})", Guard::None),
    (r"(retaindb_[A-Za-z0-9]{10,})", Guard::None),
    (r"(hsk-[A-Za-z0-9]{10,})", Guard::None),
    (r"(mem0_[A-Za-z0-9]{10,})", Guard::None),
    (r"(brv_[A-Za-z0-9]{10,})", Guard::None),
    (r"(xai-[A-Za-z0-9]{30,})", Guard::None),
    (r"(^|[^A-Za-z0-9_])(fw-[A-Za-z0-9]{30,})", Guard::None),
    (r"(^|[^A-Za-z0-9_])(fw_[A-Za-z0-9]{30,})", Guard::None),
    (r"(^|[^A-Za-z0-9_])(fpk_[A-Za-z0-9]{30,})", Guard::None),
    (r"(^|[^A-Za-z0-9])(AKIA[A-Z0-9]{16})", Guard::NotBase64),
    (r"(^|[^A-Za-z0-9])(ASIA[A-Z0-9]{16})", Guard::NotBase64),
    (r"(AKID[A-Za-z0-9]{10,})", Guard::None),
    (r"(LTAI[A-Za-z0-9]{10,})", Guard::None),
    (r"(hf_[A-Za-z0-9]{10,})", Guard::None),
    (r"(api_org_[A-Za-z0-9]{20,})", Guard::None),
    (r"(r8_[A-Za-z0-9]{10,})", Guard::None),
    (r"(?-u:\b)bot([0-9]{6,}:[A-Za-z0-9_-]{20,})(?-u:\b)", Guard::None),
    (r"(?-u:\b)([0-9]{6,}:[A-Za-z0-9_-]{20,})(?-u:\b)", Guard::None),
];

/// How many default vendor-token shapes are compiled.
pub const VENDOR_COUNT: usize = VENDOR.len();

/// One compiled pattern with its extra guard.
pub struct Rule {
    re: Regex,
    guard: Guard,
}

/// The compiled vendor shapes, and one set over all of them that says which can match at all.
struct Vendor {
    rules: Vec<Rule>,
    set: Option<RegexSet>,
}

fn vendor() -> &'static Vendor {
    static VENDOR_RULES: OnceLock<Vendor> = OnceLock::new();
    VENDOR_RULES.get_or_init(|| {
        let rules: Vec<Rule> = VENDOR
            .iter()
            .filter_map(|(src, guard)| {
                let re = RegexBuilder::new(src).case_insensitive(true).build().ok()?;
                Some(Rule { re, guard: *guard })
            })
            .collect();
        let set = RegexSetBuilder::new(rules.iter().map(|r| r.re.as_str())).case_insensitive(true).build().ok();
        Vendor { rules, set }
    })
}

/// Applies every default vendor-token shape, one after another as the gateway does. The set
/// pass skips the shapes absent from the current text (it is re-run after each change, so the
/// result is the same as applying every shape in turn).
pub fn vendor_tokens(text: &str) -> String {
    let v = vendor();
    let Some(set) = &v.set else {
        return v.rules.iter().fold(text.to_string(), |out, rule| apply(rule, &out));
    };
    let mut out = text.to_string();
    let mut hits = set.matches(&out);
    for (i, rule) in v.rules.iter().enumerate() {
        if !hits.matched(i) {
            continue;
        }
        let next = apply(rule, &out);
        if next != out {
            out = next;
            hits = set.matches(&out);
        }
    }
    out
}

/// Compiles one `logging.redactPatterns` entry as the gateway reads it: `/source/flags` takes
/// its flags (`i`, `m`, `s`; `g`, `u`, `y` change nothing here), a bare source is
/// case-insensitive. A blank entry is None. The error names why it cannot be used.
pub fn configured(raw: &str) -> Result<Option<Rule>, String> {
    if raw.trim().is_empty() {
        return Ok(None);
    }
    if raw.len() > CONFIGURED_MAX_LEN {
        return Err(format!("is longer than {CONFIGURED_MAX_LEN} characters"));
    }
    let (source, flags) = match literal_form(raw) {
        Some((s, f)) => (s, f),
        None => (raw, "gi"),
    };
    let re = RegexBuilder::new(source)
        .case_insensitive(flags.contains('i'))
        .multi_line(flags.contains('m'))
        .dot_matches_new_line(flags.contains('s'))
        .size_limit(CONFIGURED_SIZE_LIMIT)
        .dfa_size_limit(CONFIGURED_SIZE_LIMIT)
        .build()
        .map_err(|e| match e {
            regex::Error::CompiledTooBig(_) => "is too large once compiled".to_string(),
            other => {
                format!("is not a supported regular expression: {}", other.to_string().lines().last().unwrap_or(""))
            }
        })?;
    Ok(Some(Rule { re, guard: Guard::None }))
}

/// `/source/flags` with flags from `gimsuy`.
fn literal_form(raw: &str) -> Option<(&str, &str)> {
    let body = raw.strip_prefix('/')?;
    let slash = body.rfind('/')?;
    let (source, flags) = (&body[..slash], &body[slash + 1..]);
    (!source.is_empty() && flags.chars().all(|c| "gimsuy".contains(c))).then_some((source, flags))
}

/// The usable rules of a configured list (the config refused the unusable ones already).
pub fn configured_rules(patterns: &[String]) -> Vec<Rule> {
    patterns.iter().filter_map(|p| configured(p).ok().flatten()).collect()
}

/// Applies configured rules in order.
pub fn apply_all(rules: &[Rule], text: &str) -> String {
    let mut out = text.to_string();
    for rule in rules {
        out = apply(rule, &out);
    }
    out
}

/// Masks every match of one rule, left to right, never overlapping.
fn apply(rule: &Rule, text: &str) -> String {
    let mut out = String::new();
    let mut copied = 0;
    let mut at = 0;
    while at <= text.len() {
        let Some(caps) = rule.re.captures_at(text, at) else { break };
        let whole = caps.get(0).expect("group 0 always participates");
        let secret = (1..caps.len()).rev().filter_map(|g| caps.get(g)).find(|m| !m.is_empty()).unwrap_or(whole);
        if whole.is_empty() || (rule.guard == Guard::NotBase64 && in_base64(&text[..secret.start()])) {
            at = next_char(text, whole.start());
            continue;
        }
        out.push_str(&text[copied..secret.start()]);
        out.push_str(&mask(secret.as_str()));
        out.push_str(&text[secret.end()..whole.end()]);
        copied = whole.end();
        at = whole.end();
    }
    if copied == 0 {
        return text.to_string();
    }
    out.push_str(&text[copied..]);
    out
}

fn next_char(text: &str, i: usize) -> usize {
    i + text[i..].chars().next().map_or(1, char::len_utf8)
}

/// Whether `before` ends inside a `;base64,` data run.
fn in_base64(before: &str) -> bool {
    let run = before.trim_end_matches(|c: char| c.is_ascii_alphanumeric() || "+/=".contains(c));
    run.len() >= 8 && run.as_bytes()[run.len() - 8..].eq_ignore_ascii_case(b";base64,")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_vendor_shape_compiles_and_the_set_builds() {
        let v = vendor();
        assert_eq!(v.rules.len(), VENDOR_COUNT);
        assert!(v.set.as_ref().is_some_and(|s| s.len() == VENDOR_COUNT));
    }

    #[test]
    fn configured_patterns_the_engine_cannot_apply_are_refused_with_the_reason() {
        assert!(configured("  ").unwrap().is_none());
        assert!(configured("/tok=(\\d+)/gi").unwrap().is_some());
        let look = configured("secret(?=x)").err().expect("look-ahead is refused");
        assert!(look.starts_with("is not a supported regular expression"), "{look}");
        assert!(configured("(a)\\1").is_err());
        assert_eq!(configured("\\w{1000}{1000}").err().as_deref(), Some("is too large once compiled"));
        assert!(configured(&"a".repeat(CONFIGURED_MAX_LEN + 1)).is_err());
    }

    #[test]
    fn base64_runs_and_glued_prefixes_are_left_alone() {
        let key = "AKIAIOSFODNN7EXAMPLE";
        assert_eq!(vendor_tokens(&format!("id {key}")), "id AKIAIO…MPLE");
        assert_eq!(vendor_tokens(&format!("x{key}")), format!("x{key}"));
        let data = format!("data:a;base64,QUJD/{key}");
        assert_eq!(vendor_tokens(&data), data);
    }
}
