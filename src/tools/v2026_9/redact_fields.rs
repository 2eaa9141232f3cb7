//! 31 of the gateway's 32 default "field" shapes of 2026.9 history redaction, in its order:
//! environment assignments (plain and with escaped quotes), secret-named JSON fields, quoted
//! secret fields, command-line flags, `Authorization` / `Proxy-Authorization` (every scheme) and
//! other credential headers, bare `Bearer` tokens, URL passwords, a form body's first pair,
//! standalone and config-style assignments (quoted, bare, direct, prefixed, namespaced), then,
//! after the PEM step (the 32nd, `redact`'s own), AWS secret-access-key fields. Each runs over the
//! text the previous one left (`redact_pass`), so a value masked by one shape can be masked again
//! by a later one, exactly as the gateway does. Compiled once; never allocates a regex per call.
//! Patterns are ours in the gateway's notation, with its back-references spelled out and its
//! look-arounds as `accept` checks.

use std::sync::OnceLock;

use regex::Captures;

use super::redact_pass::{compile, Masking, Pass, Passes};

const PAYMENT_ENV: &str = r"CARD[_-]?NUMBER|CARD[_-]?CVC|CARD[_-]?CVV|CVC|CVV|SECURITY[_-]?CODE|PAYMENT[_-]?CREDENTIAL|SHARED[_-]?PAYMENT[_-]?TOKEN";
const PAYMENT_QUERY: &str = r"card[-_]?number|card[-_]?cvc|card[-_]?cvv|cvc|cvv|security[-_]?code|payment[-_]?credential|shared[-_]?payment[-_]?token";
const PAYMENT_JSON: &str = r"cardNumber|card_number|cardCvc|card_cvc|cardCvv|card_cvv|cvc|cvv|securityCode|security_code|paymentCredential|payment_credential|sharedPaymentToken|shared_payment_token";
/// The AWS secret-access-key field names.
const AWS_FIELD: &str = r"aws[-_]?secret[-_]?access[-_]?key|awsSecretAccessKey|SecretAccessKey";

/// Optional quote, possibly escaped (`\"`), around a header name or value.
pub(super) const Q: &str = r#"(?:\\{1,64}["']|["']|)"#;
/// `Q` before an `Authorization` scheme: a plain `'` is left to the scheme itself (see `auth_scheme`).
const Q_SCHEME: &str = r#"(?:\\{1,64}["']|"|)"#;
const TAB: &str = r"\\{1,64}t";
const CREDENTIAL: &str = r#"(?:\[REDACTED\]|[^\s\\"',;&#?<>)}\]]+)"#;
pub(super) const SCHEME: &str = r"[A-Za-z0-9!#$%&'*+.^_`|~-]+";
pub(super) const HEADER_START: &str = r"(^|[^A-Za-z0-9_-]|\\{1,64}[rn])";
const LOG_HEADER_START: &str = r"(^|[^A-Za-z0-9_?&-]|\\{1,64}[rn])";
const CREDENTIAL_HEADERS: &str = "x-goog-api-key|api-key|apikey|x-api-token|x-access-token";
const GATEWAY_HEADERS: &str = "X-OpenClaw-Token|x-pomerium-jwt-assertion|X-Api-Key|X-Auth-Token";

fn indent() -> String {
    format!(r"(?:[ \t]+|{TAB})")
}

/// White space between a header's separator and its value: optional, or (`required`) at least one.
pub(super) fn value_space(required: bool) -> String {
    let i = indent();
    let last = if required { r"[ \t]+" } else { r"[ \t]*" };
    format!(r"(?:[ \t]*\r?\n{i}|[ \t]*\\{{1,64}}r\\{{1,64}}n{i}|[ \t]*\\{{1,64}}n{i}|[ \t]*{TAB}[ \t]*|{last})")
}

/// The older, looser white space of the `Bearer` / `Basic` / `Bot` shapes.
fn legacy_space() -> String {
    format!(
        r"(?:[ \t\r\n]*|[ \t]*\\{{1,64}}r\\{{1,64}}n(?:[ \t]*|{TAB})|[ \t]*\\{{1,64}}n(?:[ \t]*|{TAB})|[ \t]*{TAB}[ \t]*)"
    )
}

/// One value between the same quote, for each of `quotes` (the gateway's back-reference, spelled
/// out): `body` with `{q}` standing for the quote, `close` before the closing quote.
fn quoted(quotes: &str, body: &str, close: &str) -> String {
    let alts: Vec<String> =
        quotes.chars().map(|q| format!("{q}({}){close}{q}", body.replace("{q}", &q.to_string()))).collect();
    format!("(?:{})", alts.join("|"))
}

/// The shapes in the gateway's order, split around the PEM step (which `redact` runs between).
pub(super) struct Fields {
    pub before_pem: Passes,
    pub after_pem: Passes,
}

pub(super) fn fields() -> &'static Fields {
    static FIELDS: OnceLock<Fields> = OnceLock::new();
    FIELDS.get_or_init(build)
}

fn build() -> Fields {
    use Masking::{FormAware, Hinted, Shell};
    let env_name = format!(r"\b[A-Z0-9_]*(?:KEY|TOKEN|SECRET|PASSWORD|PASSWD|{PAYMENT_ENV})\b\s*[=:]\s*");
    let json_secret = format!(
        r#""(?:apiKey|api_key|apiToken|api_token|bearerToken|bearer_token|token|secret|password|passwd|{AWS_FIELD}|credential|authorization|proxy-authorization|cookie|set-cookie|x-api-key|x-auth-token|accessToken|access_token|refreshToken|refresh_token|idToken|id_token|authToken|auth_token|clientSecret|client_secret|privateKey|private_key|secret_value|raw_secret|secret_input|key_material)"\s*:\s*"([^"]+)""#
    );
    let cli_keys = format!(
        r"{AWS_FIELD}|api[-_]?key|hook[-_]?token|access[-_]?token|refresh[-_]?token|id[-_]?token|token|secret|password|passwd|credential|private[-_]?key|client[-_]?secret|{PAYMENT_QUERY}"
    );
    let (opt, req, legacy) = (value_space(false), value_space(true), legacy_space());
    let auth = |name: &str, scheme: &str| format!(r"{name}{Q}[ \t]*[:=]{legacy}{Q}{scheme}{req}({CREDENTIAL})");
    let header =
        |name: &str, q_value: &str, tail: &str| format!(r"{HEADER_START}{name}{Q}[ \t]*[:=]{opt}{q_value}{tail}");
    let opaque_tail = format!(r"({CREDENTIAL})[ \t]*");
    let scheme_tail = format!(r"({SCHEME}){req}({CREDENTIAL})");
    let form_keys = format!(
        r"access[-_]?token|auth[-_]?token|hook[-_]?token|refresh[-_]?token|id[-_]?token|api[-_]?key|apikey|client[-_]?secret|app[-_]?secret|private[-_]?key|{AWS_FIELD}|credential|authorization|token|key|secret|password|pass|passwd|auth|jwt|session|code|signature|x[-_]?amz[-_]?(?:signature|security[-_]?token)|app[-_]?secret|credential|{PAYMENT_QUERY}"
    );
    let standalone_keys = format!(
        r"access_token|refresh_token|id_token|auth[-_]?token|hook[-_]?token|api[-_]?key|client[-_]?secret|app[-_]?secret|private[-_]?key|authorization|jwt|token|secret|password|pass|passwd|credential|{PAYMENT_QUERY}"
    );
    let config_keys = format!(
        r"access[-_]?token|refresh[-_]?token|id[-_]?token|auth[-_]?token|hook[-_]?token|api[-_]?(?:key|secret)|client[-_]?secret|app[-_]?secret|private[-_]?key|secret[-_]?key|key[-_]?material|authorization|jwt|token|secret|password|passphrase|pass|passwd|credential|{PAYMENT_QUERY}"
    );
    let config_quoted_keys = format!(
        r"access[-_]?token|refresh[-_]?token|id[-_]?token|auth[-_]?token|hook[-_]?token|api[-_]?(?:key|secret)|secret[-_]?key|key[-_]?material|authorization|jwt|token|secret|password|passphrase|pass|passwd|{PAYMENT_QUERY}"
    );
    let direct_keys = r"access-token|refresh-token|id-token|auth-token|hook-token|api[-_]?(?:key|secret)|secret[-_]?key|key[-_]?material|passphrase";
    let prefixed = r"[a-z0-9][a-z0-9._-]{0,79}[-_](?:password|passphrase|pass|passwd)";
    let namespaced = format!(r"[a-z0-9_.-]{{1,80}}\.(?:{config_keys})");
    let config_value = r#"([^\s#"'`<>]+)"#;
    let any_quoted = quoted("\"'`", r"[^{q}\r\n]+", "");
    let before_pem = vec![
        Pass::new(&format!(r#"{env_name}(?:{}|([^\s"'\\]+))"#, quoted("\"'", r#"[^\s"'\\]+"#, "")), false, Shell, None),
        Pass::new(&format!(r#"{env_name}\\+{}"#, quoted("\"'", r#"[^\s"'\\]+"#, r"\\+")), false, Shell, None),
        Pass::new(&json_secret, true, Hinted, None),
        Pass::new(&format!(r#""(?:{PAYMENT_JSON})"\s*:\s*"([^"]+)""#), true, Hinted, None),
        Pass::new(
            &format!(
                r#"(^|[\s,{{])["']?(?:api[-_]key|access[-_]token|refresh[-_]token|id[-_]token|authToken|auth[-_]token|clientSecret|client[-_]secret|appSecret|app[-_]secret|private[-_]key|credential|authorization|secret[-_]value|raw[-_]secret|secret[-_]input|key[-_]material)["']?\s*[:=]\s*{}"#,
                quoted("\"'", r#"[^"'\r\n]+"#, "")
            ),
            true,
            Hinted,
            None,
        ),
        Pass::new(
            &format!(
                r#"(^|[\s,{{])["']?(?:authorization|proxy-authorization|cookie|set-cookie|x-api-key|x-auth-token)["']?\s*[:=]\s*{}"#,
                quoted("\"'", r#"[^"'\r\n]+"#, "")
            ),
            true,
            Hinted,
            None,
        ),
        Pass::new(&format!(r#"--(?:{cli_keys})=([^\s"']+)"#), true, Hinted, None),
        Pass::new(
            &format!(r#"--(?:{cli_keys})\s+((?:{}|([^\s"']+)))"#, quoted("\"'", r#"[^\s"']+"#, "")),
            true,
            Hinted,
            Some(cli_value_is_not_a_conjunction),
        ),
        Pass::new(&auth("Authorization", "Bearer"), true, Hinted, None),
        Pass::new(&auth("Authorization", "Basic"), true, Hinted, None),
        Pass::new(&auth("Authorization", "Bot"), true, Hinted, None),
        Pass::new(&header("Proxy-Authorization", Q, &format!(r"{SCHEME}{req}({CREDENTIAL})")), true, Hinted, None),
        Pass::new(&header("Proxy-Authorization", Q, &opaque_tail), true, Hinted, Some(ends_header_value)),
        Pass::new(&header("Authorization", Q_SCHEME, &scheme_tail), true, Hinted, Some(auth_scheme)),
        Pass::new(&header("Authorization", Q, &opaque_tail), true, Hinted, Some(auth_opaque)),
        Pass::new(
            &format!(r#"{LOG_HEADER_START}(?:{CREDENTIAL_HEADERS}){Q}[ \t]*:{opt}{Q}([^\s\\"',;]+)"#),
            true,
            Hinted,
            None,
        ),
        Pass::new(
            &format!(r#"{LOG_HEADER_START}(?:{CREDENTIAL_HEADERS}){Q}[ \t]*={opt}{Q}([^\s\\"',;]+)"#),
            true,
            FormAware,
            None,
        ),
        Pass::new(&format!(r#"{LOG_HEADER_START}(?:{GATEWAY_HEADERS})\s*:\s*([^\s"',;]+)"#), true, Hinted, None),
        Pass::new(&format!(r#"{LOG_HEADER_START}(?:{GATEWAY_HEADERS})\s*=\s*([^\s"',;]+)"#), true, FormAware, None),
        Pass::new(r"\bBearer\s+([-A-Za-z0-9._~+/=]{18,})", true, Hinted, None),
        Pass::new(r"\b(?:https?|wss?|ftp)://[^/\s:@]*:([^/\s@]+)@", true, Hinted, None),
        Pass::new(
            r"\b(?:postgres(?:ql)?|mysql|mongodb(?:\+srv)?|rediss?|amqps?)://[^:\s/@]*:([^@\s]+)@",
            true,
            Hinted,
            None,
        ),
        Pass::new(&format!(r"(^|[\s,;])(?:{form_keys})=([^&\s]+)"), true, Hinted, Some(followed_by_form_pair)),
        Pass::new(&format!(r#"(^|[\s,;({{\["])(?:{standalone_keys})={any_quoted}"#), true, Shell, None),
        Pass::new(&format!(r#"(^|[\s,;({{\["])(?:{standalone_keys})=(["'`]?[^\s&#"'`<>]+)"#), true, Shell, None),
        Pass::new(
            &format!(
                r"(^|[\s,{{])(?:(?:{config_quoted_keys})(?:\s*:\s*|\s+=\s*|=\s*)|{prefixed}\s*[:=]\s*|{namespaced}\s*[:=]\s*){any_quoted}"
            ),
            false,
            Hinted,
            None,
        ),
        Pass::new(&format!(r"(^|[\s,{{])(?:{config_keys})(?:\s*:\s*|\s+=\s*|=\s+){config_value}"), false, Hinted, None),
        Pass::new(&format!(r"(^|[\s,{{])(?:{direct_keys})={config_value}"), false, Hinted, None),
        Pass::new(&format!(r"(^|[\s,{{]){prefixed}\s*[:=]\s*{config_value}"), false, Hinted, None),
        Pass::new(&format!(r"(^|[\s,{{]){namespaced}\s*[:=]\s*{config_value}"), false, Hinted, None),
    ];
    let after_pem = vec![Pass::new(
        &format!(
            r#"(^|[\s,{{])["']?(?:{AWS_FIELD})["']?\s*[:=]\s*(?:{}|([A-Za-z0-9/+=]{{40}}))"#,
            quoted("\"'", r"[A-Za-z0-9/+=]{40}", "")
        ),
        true,
        Hinted,
        Some(aws_value_ends),
    )];
    Fields { before_pem: Passes::new(before_pem), after_pem: Passes::new(after_pem) }
}

/// The last group that took part in the match.
fn last_group<'t>(caps: &Captures<'t>) -> Option<regex::Match<'t>> {
    (1..caps.len()).rev().find_map(|g| caps.get(g))
}

fn match_end(caps: &Captures) -> usize {
    caps.get(0).map_or(0, |m| m.end())
}

/// `--token or --other`: `or` / `and` before another flag is not a value.
fn cli_value_is_not_a_conjunction(text: &str, caps: &Captures) -> Option<usize> {
    static CONJUNCTION: OnceLock<regex::Regex> = OnceLock::new();
    let re = CONJUNCTION.get_or_init(|| compile(r"^(?:or|and)\b\s+--", true));
    caps.get(1).is_none_or(|v| !re.is_match(&text[v.start()..])).then(|| match_end(caps))
}

/// After a header value: optional quote, then the end, a closer, or a line break that does not
/// continue the header.
fn ends_value_at(text: &str, at: usize) -> bool {
    static END: OnceLock<regex::Regex> = OnceLock::new();
    let re = END.get_or_init(|| compile(r#"^(?:\\{1,64}["']|["']|)(?:$|[,;)}\]]|\r?\n(?:$|[^ \t]))"#, false));
    re.is_match(&text[at..])
}

/// A header value that must end the header; `[REDACTED]` followed by more text ends at its `]`
/// instead (the gateway's second reading of it), so `[REDACTED` is masked.
fn ends_header_value(text: &str, caps: &Captures) -> Option<usize> {
    if ends_value_at(text, match_end(caps)) {
        return Some(match_end(caps));
    }
    let v = last_group(caps)?;
    v.as_str().eq_ignore_ascii_case("[REDACTED]").then_some(v.end() - 1)
}

fn is_plain_scheme(s: &str) -> bool {
    ["bearer", "basic", "bot"].iter().any(|w| s.eq_ignore_ascii_case(w))
}

/// `Authorization: <scheme> <credential>` for schemes other than Bearer, Basic and Bot.
fn auth_scheme(_text: &str, caps: &Captures) -> Option<usize> {
    caps.get(2).is_none_or(|s| !is_plain_scheme(s.as_str())).then(|| match_end(caps))
}

/// `Authorization: <credential>` alone, unless that credential is a plain scheme word followed by white space.
fn auth_opaque(text: &str, caps: &Captures) -> Option<usize> {
    static REQUIRED_SPACE: OnceLock<regex::Regex> = OnceLock::new();
    let re = REQUIRED_SPACE.get_or_init(|| compile(&format!("^{}", value_space(true)), false));
    let v = last_group(caps)?;
    if is_plain_scheme(v.as_str()) && re.is_match(&text[v.end()..]) {
        return None;
    }
    ends_header_value(text, caps)
}

/// A form body's first pair counts only when another `&name=` pair follows.
fn followed_by_form_pair(text: &str, caps: &Captures) -> Option<usize> {
    let rest = &text.as_bytes()[match_end(caps)..];
    let pair = rest.first() == Some(&b'&')
        && rest.get(1).is_some_and(|c| c.is_ascii_alphabetic() || *c == b'_')
        && rest[2..].iter().find(|c| !(c.is_ascii_alphanumeric() || b"_.-".contains(c))) == Some(&b'=');
    pair.then(|| match_end(caps))
}

/// An AWS secret is exactly 40 characters: not followed by another of its characters.
fn aws_value_ends(text: &str, caps: &Captures) -> Option<usize> {
    let end = last_group(caps).map_or(text.len(), |m| m.end());
    let more = text[end..].chars().next().is_some_and(|c| c.is_ascii_alphanumeric() || "/+=".contains(c));
    (!more).then(|| match_end(caps))
}
