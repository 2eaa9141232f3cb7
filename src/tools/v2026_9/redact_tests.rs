//! Unit tests of 2026.9 history redaction, one per shape family; every expected text is what the
//! 2026.9.6 package's `redactToolPayloadText` returns for the input (the agreement test holds the
//! whole pipeline to the recorded fixture).

use super::*;
use crate::tools::v2026_9::redact_fields::fields;
use crate::tools::v2026_9::redact_rx::{configured_rules, VENDOR_COUNT};

const LONG: &str = "abcdefghijklmnopqrstuvwxyz012345";
const AWS_KEY: &str = "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY";

/// Each (input, expected) pair through the whole pipeline, with `{L}` / `{K}` standing for `LONG` / `AWS_KEY`.
fn check(cases: &[(&str, &str)]) {
    for (input, expected) in cases {
        let fill = |s: &str| s.replace("{L}", LONG).replace("{K}", AWS_KEY);
        let (input, expected) = (fill(input), fill(expected));
        let (out, changed) = redact(&input, &[]);
        assert_eq!(out, expected, "input {input:?}");
        assert_eq!(changed, input != expected, "input {input:?}");
    }
}

#[test]
fn the_pipeline_has_the_gateways_123_default_shapes_and_every_set_builds() {
    let (before, before_set) = fields().before_pem.shape();
    let (after, after_set) = fields().after_pem.shape();
    assert!(before_set && after_set);
    // the field shapes, PEM, the AWS field shape, the vendor tokens and the bare AWS key scanner
    assert_eq!(before + 1 + after + VENDOR_COUNT + 1, 123);
}

#[test]
fn tokens_keep_six_and_four_characters_and_short_values_are_starred() {
    check(&[
        ("my key is sk-abcdefghijklmnopqrstuvwxyz0123456789", "my key is sk-abc…6789"),
        ("password: hunter2hunter2", "password: ***"),
        ("token=abc123def456ghi789", "token=abc123…i789"),
        ("AKIAIOSFODNN7EXAMPLE", "AKIAIO…MPLE"),
        ("Authorization: Bearer eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxIn0.abcdefghijk", "Authorization: Bearer eyJhbG…hijk"),
        ("hello world", "hello world"),
    ]);
}

#[test]
fn lengths_count_utf16_units_and_never_cut_a_character_in_half() {
    assert_eq!(mask("😀secret😀value😀long😀enough"), "😀secr…ough");
    assert_eq!(mask("é".repeat(17).as_str()), "***");
    check(&[("token=😀secret😀value😀long😀enough", "token=😀secr…ough")]);
}

#[test]
fn quoted_and_config_style_assignments_are_masked_shape_after_shape() {
    check(&[
        // the quoted standalone shape masks, then the bare one masks its output again
        ("password='hunter2 with space'", "password=***'"),
        ("secret: 'my secret value'", "secret: '***'"),
        ("db.password = \"abc def\"", "db.password = \"***\""),
        ("passphrase = '{L}' tail", "passphrase = 'abcdef…2345' tail"),
        ("app.db-passwd = {L}", "app.db-passwd = abcdef…2345"),
        // config shapes are case-sensitive
        ("Password: '{L}'", "Password: '{L}'"),
    ]);
}

#[test]
fn environment_assignments_keep_references_to_their_own_name_and_unclosed_quotes() {
    check(&[
        ("OPENAI_API_KEY=$OPENAI_API_KEY", "OPENAI_API_KEY=$OPENAI_API_KEY"),
        ("MY_TOKEN=${OTHER}", "MY_TOKEN=***"),
        ("KEY=\"abc", "KEY=\"abc"),
        (r#"OPENAI_API_KEY=\"abcdefghijklmnopqrstuvwxyz\""#, r#"OPENAI_API_KEY=\"abcdef…wxyz\""#),
        (r#"STRIPE_CVV=\\"123\\""#, r#"STRIPE_CVV=\\"***\\""#),
        (r#"X_KEY=\"abcdefghijklmnopqrstuvwxyz\'"#, r#"X_KEY=\"abcdefghijklmnopqrstuvwxyz\'"#),
    ]);
}

#[test]
fn form_bodies_star_secret_pairs_and_url_queries_keep_six_and_four() {
    check(&[
        ("a=1&password=xyz&b=2", "a=1&password=***&b=2"),
        ("grant_type=password&password=xyz&client_secret={L}", "grant_type=password&password=***&client_secret=***"),
        ("body: \"user=a&pass=b\"", "body: \"user=a&pass=***\""),
        ("pass%77ord=secret&x=1", "pass%77ord=***&x=1"),
        ("curl -d \"user=a&password={L}\"", "curl -d \"user=a&password=***\""),
        ("https://x.example/cb?code={L}&state=1", "https://x.example/cb?code=abcdef…2345&state=1"),
        ("https://x.example/?query=abc&tokens=x", "https://x.example/?query=abc&tokens=x"),
    ]);
}

#[test]
fn authorization_headers_of_every_scheme_are_masked() {
    check(&[
        ("authorization=Bot short", "authorization=*** ***"),
        ("Authorization: Basically fine", "Authorization: Basically ***"),
        ("Authorization: Token {L}", "Authorization: Token abcdef…2345"),
        ("Proxy-Authorization: {L}", "Proxy-Authorization: abcdef…2345"),
        ("Authorization: Digest username=\"a\", response=\"b\"", "Authorization: Digest ***"),
        ("Authorization: Token ***", "Authorization: Token ***"),
        ("Authorization: [REDACTED] next", "Authorization: ***] next"),
        ("x-goog-api-key: {L}", "x-goog-api-key: abcdef…2345"),
        ("x-api-key={L}&next=1", "x-api-key=***&next=1"),
    ]);
}

#[test]
fn bare_aws_secret_keys_are_masked_outside_identifiers_data_and_public_urls() {
    check(&[
        ("key is {K} ok", "key is wJalrX…EKEY ok"),
        ("x_{K}", "x_{K}"),
        ("abcdef0123456789abcdef0123456789abcdef01", "abcdef0123456789abcdef0123456789abcdef01"),
        ("data:text/plain;base64,{K}", "data:text/plain;base64,{K}"),
        ("https://host.example/path/{K}", "https://host.example/path/{K}"),
        ("https://host.example:{K}@x/", "https://host.example:wJalrX…EKEY@x/"),
    ]);
}

#[test]
fn aws_secret_fields_and_json_fields_are_masked() {
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
    check(&[("{\"SecretAccessKey\": \"short\"}", "{\"SecretAccessKey\": \"***\"}")]);
}

#[test]
fn configured_literals_and_pem_keys_are_masked() {
    let rules = configured_rules(&["internal-[a-z]+-value".to_string(), "/code=(\\d+)/".to_string()]);
    let (out, hit) = redact("x internal-secret-value y code=12345", &rules);
    assert_eq!(out, "x intern…alue y code=***");
    assert!(hit);
    check(&[
        (
            "-----BEGIN RSA PRIVATE KEY-----\nMIIB\n-----END RSA PRIVATE KEY-----",
            "-----BEGIN RSA PRIVATE KEY-----\n…redacted…\n-----END RSA PRIVATE KEY-----",
        ),
        // found in any case, but only capitals get the marker lines
        ("-----begin rsa private key-----\nMIIB\n-----end rsa private key-----", "-----b…----"),
        ("-----BEGIN PRIVATE KEY-----\nunfinished", "-----BEGIN PRIVATE KEY-----\nunfinished"),
    ]);
}
