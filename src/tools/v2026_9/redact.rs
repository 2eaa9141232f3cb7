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

/// Secret-named keys whose assigned value is masked (`<key>: value`, `<key>=value`).
const SECRET_KEYS: &[&str] = &[
    "password",
    "passwd",
    "secret",
    "token",
    "api_key",
    "apikey",
    "api-key",
    "access_token",
    "refresh_token",
    "auth_token",
    "client_secret",
    "private_key",
];

fn is_word(c: char) -> bool {
    c.is_ascii_alphanumeric() || c == '_'
}

/// A masked copy of `text`, and whether anything was masked. `extra` are the configured
/// `logging.redactPatterns`, applied first as the gateway does.
pub fn redact(text: &str, extra: &[Rule]) -> (String, bool) {
    let mut out = apply_all(extra, text);
    if out.contains("-----BEGIN ") {
        out = pem(&out);
    }
    if out.contains('"') {
        out = json_fields(&out);
    }
    out = scan(&out);
    out = vendor_tokens(&out);
    let changed = out != text;
    (out, changed)
}

/// `-----BEGIN … PRIVATE KEY----- … -----END … PRIVATE KEY-----` → the markers around `…redacted…`.
fn pem(text: &str) -> String {
    let mut out = String::new();
    let mut rest = text;
    while let Some(b) = rest.find("-----BEGIN ") {
        let after = &rest[b..];
        let Some(head_end) = after[11..].find("-----").map(|i| i + 16) else { break };
        let head = &after[..head_end];
        if !head.ends_with("PRIVATE KEY-----") {
            out.push_str(&rest[..b + head_end]);
            rest = &rest[b + head_end..];
            continue;
        }
        let Some(end) = after[head_end..].find("-----END ") else { break };
        let tail = &after[head_end + end..];
        let Some(tail_end) = tail[9..].find("-----").map(|i| i + 14) else { break };
        out.push_str(&rest[..b]);
        out.push_str(head);
        out.push_str("\n…redacted…\n");
        out.push_str(&tail[..tail_end]);
        rest = &tail[tail_end..];
    }
    out.push_str(rest);
    out
}

/// `"apiKey": "<value>"` (any secret-named JSON field with a string value) → `"***"`.
fn json_fields(text: &str) -> String {
    const FIELDS: &[&str] = &[
        "apikey",
        "api_key",
        "api-key",
        "token",
        "accesstoken",
        "access_token",
        "refreshtoken",
        "refresh_token",
        "password",
        "passwd",
        "secret",
        "clientsecret",
        "client_secret",
        "privatekey",
        "private_key",
        "authorization",
        "cardnumber",
        "card_number",
        "cardcvc",
        "card_cvc",
        "cardcvv",
        "card_cvv",
        "cvc",
        "cvv",
        "securitycode",
        "security_code",
        "paymentcredential",
        "payment_credential",
        "sharedpaymenttoken",
        "shared_payment_token",
    ];
    let chars: Vec<char> = text.chars().collect();
    let mut out = String::with_capacity(text.len());
    let mut i = 0;
    while i < chars.len() {
        if chars[i] == '"' {
            let name_len = chars[i + 1..].iter().take_while(|c| **c != '"' && **c != '\n').count();
            let name: String = chars[i + 1..i + 1 + name_len].iter().collect::<String>().to_lowercase();
            let mut k = i + 1 + name_len + 1;
            if FIELDS.contains(&name.as_str()) && chars.get(k - 1) == Some(&'"') {
                k = skip_space(&chars, k);
                if chars.get(k) == Some(&':') {
                    k += 1;
                    k = skip_space(&chars, k);
                    if chars.get(k) == Some(&'"') {
                        let vlen = chars[k + 1..].iter().take_while(|c| **c != '"').count();
                        if chars.get(k + 1 + vlen) == Some(&'"') && vlen > 0 {
                            out.extend(&chars[i..=k]);
                            out.push_str("***\"");
                            i = k + 2 + vlen;
                            continue;
                        }
                    }
                }
            }
        }
        out.push(chars[i]);
        i += 1;
    }
    out
}

/// One left-to-right pass for vendor tokens, `Bearer` credentials and secret assignments.
fn scan(text: &str) -> String {
    let chars: Vec<char> = text.chars().collect();
    let mut out = String::with_capacity(text.len());
    let mut i = 0;
    while i < chars.len() {
        if let Some((keep, end)) = match_at(&chars, i) {
            out.extend(&chars[i..i + keep]);
            let token: String = chars[i + keep..end].iter().collect();
            let name: String = chars[i..i + keep].iter().take_while(|c| is_word(**c)).collect();
            // a payment credential is starred whatever its length
            let payment = ENV_SECRET_ENDINGS[5..].iter().any(|e| name.ends_with(e));
            out.push_str(&if payment { "***".to_string() } else { mask(&token) });
            i = end;
        } else {
            out.push(chars[i]);
            i += 1;
        }
    }
    out
}

fn starts_with(chars: &[char], at: usize, s: &str) -> bool {
    s.chars().enumerate().all(|(k, c)| chars.get(at + k) == Some(&c))
}

fn starts_with_ci(chars: &[char], at: usize, s: &str) -> bool {
    s.chars().enumerate().all(|(k, c)| chars.get(at + k).is_some_and(|x| x.eq_ignore_ascii_case(&c)))
}

/// How a secret environment name ends; from the sixth on, payment credentials.
const ENV_SECRET_ENDINGS: &[&str] = &[
    "KEY",
    "TOKEN",
    "SECRET",
    "PASSWORD",
    "PASSWD",
    "CARD_NUMBER",
    "CARDNUMBER",
    "CARD_CVC",
    "CARDCVC",
    "CARD_CVV",
    "CARDCVV",
    "CVC",
    "CVV",
    "SECURITY_CODE",
    "SECURITYCODE",
    "PAYMENT_CREDENTIAL",
    "PAYMENTCREDENTIAL",
    "SHARED_PAYMENT_TOKEN",
    "SHAREDPAYMENTTOKEN",
];

/// `NAME_KEY=value` style environment assignments (an upper-case name ending in `KEY`,
/// `TOKEN`, `SECRET`, `PASSWORD` or `PASSWD`), the value optionally quoted.
fn env_assignment(chars: &[char], i: usize, prev: Option<char>) -> Option<(usize, usize)> {
    if prev.is_some_and(is_word) {
        return None;
    }
    let name = chars[i..].iter().take_while(|c| c.is_ascii_uppercase() || c.is_ascii_digit() || **c == '_').count();
    let word: String = chars[i..i + name].iter().collect();
    let secret = ENV_SECRET_ENDINGS.iter().any(|s| word.ends_with(s));
    if name == 0 || !secret || chars.get(i + name).is_some_and(|c| is_word(*c)) {
        return None;
    }
    let mut k = i + name;
    k = after_separator(chars, k)?;
    if chars.get(k) == Some(&'\\') {
        return escaped_quoted_value(chars, i, k);
    }
    let quote = chars.get(k).filter(|c| **c == '"' || **c == '\'').copied();
    if quote.is_some() {
        k += 1;
    }
    let len = chars[k..].iter().take_while(|c| !c.is_whitespace() && !"\"'\\".contains(**c)).count();
    (len > 0).then_some((k - i, k + len))
}

/// `\\"value\\"` after an environment name (a quote escaped by one or more backslashes, the same
/// quote closing after one or more backslashes): the value between them.
fn escaped_quoted_value(chars: &[char], i: usize, at: usize) -> Option<(usize, usize)> {
    let slashes = |from: usize| chars[from..].iter().take_while(|c| **c == '\\').count();
    let mut k = at + slashes(at);
    let quote = chars.get(k).copied().filter(|c| *c == '"' || *c == '\'')?;
    k += 1;
    let len = chars[k..].iter().take_while(|c| !c.is_whitespace() && !"\"'\\".contains(**c)).count();
    let close = k + len;
    let n = slashes(close);
    (len > 0 && n > 0 && chars.get(close + n) == Some(&quote)).then_some((k - i, close))
}

fn is_aws_value(c: char) -> bool {
    c.is_ascii_alphanumeric() || "/+=".contains(c)
}

/// `aws_secret_access_key = <40 characters>` (also `awsSecretAccessKey`, `SecretAccessKey`, the
/// name or the value optionally quoted): exactly 40 characters of `A-Za-z0-9/+=`, the same
/// quote closing the value when it opens with one.
fn aws_secret_field(chars: &[char], i: usize, prev: Option<char>) -> Option<(usize, usize)> {
    if prev.is_some_and(|c| !c.is_whitespace() && c != ',' && c != '{') {
        return None;
    }
    let quote = |k: usize| chars.get(k).is_some_and(|c| *c == '"' || *c == '\'');
    let sep = |k: usize| usize::from(chars.get(k).is_some_and(|c| *c == '-' || *c == '_'));
    let mut k = i + usize::from(quote(i));
    if starts_with_ci(chars, k, "secretaccesskey") {
        k += 15;
    } else {
        if !starts_with_ci(chars, k, "aws") {
            return None;
        }
        k += 3;
        for part in ["secret", "access", "key"] {
            k += sep(k);
            if !starts_with_ci(chars, k, part) {
                return None;
            }
            k += part.len();
        }
    }
    k += usize::from(quote(k));
    k = after_separator(chars, k)?;
    let open = chars.get(k).copied().filter(|_| quote(k));
    k += usize::from(open.is_some());
    let len = chars[k.min(chars.len())..].iter().take_while(|c| is_aws_value(**c)).count();
    let closed = open.is_none_or(|q| chars.get(k + 40) == Some(&q));
    (len == 40 && closed).then_some((k - i, k + 40))
}

/// `--api-key <value>`, `--token=<value>` and the like.
fn cli_flag(chars: &[char], i: usize) -> Option<(usize, usize)> {
    if !starts_with(chars, i, "--") {
        return None;
    }
    let flag = ["api-key", "apikey", "token", "password", "secret", "access-token", "auth-token", "client-secret"]
        .into_iter()
        .find(|f| starts_with_ci(chars, i + 2, f))?;
    let mut k = i + 2 + flag.len();
    match chars.get(k) {
        Some('=') => k += 1,
        Some(c) if c.is_whitespace() => {
            k = skip_space(chars, k);
        }
        _ => return None,
    }
    let len = chars[k..].iter().take_while(|c| !c.is_whitespace() && !"\"'".contains(**c)).count();
    (len > 0).then_some((k - i, k + len))
}

/// `Authorization: Bearer|Basic|Bot <credential>`: the credential whatever its length (up to a blank,
/// quote, `,`, `;`, `?`, `&` or `#`).
fn authorization_header(chars: &[char], i: usize, prev: Option<char>) -> Option<(usize, usize)> {
    if prev.is_some_and(is_word) || !starts_with_ci(chars, i, "authorization") {
        return None;
    }
    let mut k = i + 13;
    while chars.get(k).is_some_and(|c| *c == ' ' || *c == '\t') {
        k += 1;
    }
    if !matches!(chars.get(k), Some(':') | Some('=')) {
        return None;
    }
    k += 1;
    k = skip_space(chars, k);
    let scheme = ["Bearer", "Basic", "Bot"].into_iter().find(|s| starts_with(chars, k, s))?;
    k += scheme.len();
    let ws = chars[k..].iter().take_while(|c| c.is_whitespace()).count();
    if ws == 0 {
        return None;
    }
    k += ws;
    let len = chars[k..].iter().take_while(|c| !c.is_whitespace() && !"\"'`,;?&#".contains(**c)).count();
    (len > 0).then_some((k - i, k + len))
}

/// `scheme://user:<password>@` for web (http(s), ws(s), ftp) and database URLs.
fn url_password(chars: &[char], i: usize, prev: Option<char>) -> Option<(usize, usize)> {
    if prev.is_some_and(is_word) {
        return None;
    }
    const WEB: &[&str] = &["https://", "http://", "wss://", "ws://", "ftp://"];
    const DB: &[&str] = &[
        "postgresql://",
        "postgres://",
        "mysql://",
        "mongodb+srv://",
        "mongodb://",
        "rediss://",
        "redis://",
        "amqps://",
        "amqp://",
    ];
    let (scheme, db) = match WEB.iter().find(|s| starts_with_ci(chars, i, s)) {
        Some(s) => (*s, false),
        None => (*DB.iter().find(|s| starts_with_ci(chars, i, s))?, true),
    };
    let mut k = i + scheme.len();
    while chars.get(k).is_some_and(|c| !matches!(c, '/' | ':' | '@') && !c.is_whitespace()) {
        k += 1;
    }
    if chars.get(k) != Some(&':') {
        return None;
    }
    k += 1;
    let len = chars[k..].iter().take_while(|c| **c != '@' && (db || **c != '/') && !c.is_whitespace()).count();
    (len > 0 && chars.get(k + len) == Some(&'@')).then_some((k - i, k + len))
}

/// A credential starting at `i`: how many characters of the match stay (`Bearer `, `token=`)
/// and where the masked value ends.
fn match_at(chars: &[char], i: usize) -> Option<(usize, usize)> {
    let prev = i.checked_sub(1).map(|p| chars[p]);
    if prev.is_some_and(is_word) && !starts_with(chars, i, "--") {
        return None;
    }
    if let Some(hit) = env_assignment(chars, i, prev) {
        return Some(hit);
    }
    if let Some(hit) = aws_secret_field(chars, i, prev) {
        return Some(hit);
    }
    if let Some(hit) = cli_flag(chars, i) {
        return Some(hit);
    }
    if let Some(hit) = authorization_header(chars, i, prev) {
        return Some(hit);
    }
    if let Some(hit) = url_password(chars, i, prev) {
        return Some(hit);
    }
    if starts_with(chars, i, "Bearer") && !prev.is_some_and(is_word) {
        let mut start = i + 6;
        let ws = chars[start..].iter().take_while(|c| c.is_whitespace()).count();
        if ws > 0 {
            start += ws;
            let bearer = |c: char| c.is_ascii_alphanumeric() || "-._~+/=".contains(c);
            let len = chars[start..].iter().take_while(|c| bearer(**c)).count();
            if len >= 18 {
                return Some((start - i, start + len));
            }
        }
    }
    if !prev.is_some_and(is_word) {
        for key in SECRET_KEYS {
            if !starts_with_ci(chars, i, key) {
                continue;
            }
            let mut k = i + key.len();
            while chars.get(k).is_some_and(|c| *c == ' ' || *c == '\t') {
                k += 1;
            }
            if !matches!(chars.get(k), Some(':') | Some('=')) {
                continue;
            }
            k += 1;
            while chars.get(k).is_some_and(|c| *c == ' ' || *c == '\t') {
                k += 1;
            }
            let len = chars[k..].iter().take_while(|c| !c.is_whitespace() && !"\"'`<>#&,;".contains(**c)).count();
            if len > 0 {
                return Some((k - i, k + len));
            }
        }
    }
    None
}

/// The first position at or after `k` that is not white space.
fn skip_space(chars: &[char], mut k: usize) -> usize {
    while chars.get(k).is_some_and(|c| c.is_whitespace()) {
        k += 1;
    }
    k
}

/// After a name at `k`: optional white space, `=` or `:`, optional white space; the position of
/// the value, or `None` when there is no separator.
fn after_separator(chars: &[char], k: usize) -> Option<usize> {
    let k = skip_space(chars, k);
    matches!(chars.get(k), Some('=') | Some(':')).then(|| skip_space(chars, k + 1))
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
