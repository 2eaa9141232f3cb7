//! The merge on the stored text against the parsing path, over generated stored entries (as
//! serde_json writes them, and as other writers might: spacing, other escapes, other number
//! forms, a name twice) and generated patches: whenever `merge_text` answers, its text is byte
//! for byte `entry::merge` serialised and its fields are the merged entry's.

use proptest::prelude::*;
use serde_json::{json, Map, Value};

use super::*;
use crate::entry::{self, Entry};

const WANTED: [&str; 8] =
    ["displayName", "channel", "subject", "groupChannel", "space", "label", "origin", "sessionId"];

fn obj(v: Value) -> Entry {
    match v {
        Value::Object(m) => m,
        _ => Map::new(),
    }
}

fn wanted_of(e: &Entry) -> Entry {
    WANTED.iter().filter_map(|w| e.get(*w).map(|v| ((*w).to_owned(), v.clone()))).collect()
}

/// What the parsing path stores and answers for `stored` + `patch`: the text, `updatedAt`, the
/// wanted fields of the merged entry and of the stored one.
fn parsed_path(stored: &str, patch: &Entry, now: i64) -> Option<(String, i64, Entry, Entry)> {
    let existing: Entry = serde_json::from_str(stored).ok()?;
    let merged = entry::merge(Some(&existing), patch, now);
    Some((serde_json::to_string(&merged).ok()?, entry::updated_at(&merged), wanted_of(&merged), wanted_of(&existing)))
}

/// The text as the parsing path makes it; the wanted fields when the merge set one, else none,
/// and then the stored entry's are the merged entry's.
fn check(stored: &str, patch: &Entry, now: i64) -> Option<Merged> {
    let fast = merge_text(stored, patch, now, &WANTED);
    if let Some(m) = &fast {
        let (text, updated, fields, before) =
            parsed_path(stored, patch, now).expect("a text merge_text read is valid JSON");
        assert_eq!(m.text, text, "stored {stored}\npatch {patch:?}");
        assert_eq!(m.updated_at, updated, "stored {stored}\npatch {patch:?}");
        match &m.fields {
            Some(f) => assert_eq!(*f, fields, "stored {stored}\npatch {patch:?}"),
            None => assert_eq!(before, fields, "fields unchanged: stored {stored}\npatch {patch:?}"),
        }
    }
    fast
}

fn scalar() -> impl Strategy<Value = Value> {
    prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::from),
        any::<i64>().prop_map(Value::from),
        any::<u64>().prop_map(Value::from),
        (-1e6f64..1e6).prop_map(Value::from),
        prop::sample::select(vec![0.1, 1.5, -0.0, 1e21, 1e-7, 123456789.125, 5e-324, 1.7976931348623157e308])
            .prop_map(Value::from),
        "[a-z +#:]{0,8}".prop_map(Value::from),
        prop::sample::select(vec![
            " Telegram ",
            "imsg",
            "gchat",
            "",
            "é\u{1}\"\\/\n\t\u{7f}",
            "\u{2028}😀",
            "+15551234"
        ])
        .prop_map(Value::from),
    ]
}

fn value() -> impl Strategy<Value = Value> {
    scalar().prop_recursive(3, 16, 4, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..4).prop_map(Value::Array),
            prop::collection::vec((name(), inner), 0..4).prop_map(|kv| Value::Object(kv.into_iter().collect())),
        ]
    })
}

fn name() -> impl Strategy<Value = String> {
    prop::sample::select(vec![
        "sessionId",
        "updatedAt",
        "channel",
        "lastChannel",
        "lastTo",
        "lastAccountId",
        "lastThreadId",
        "deliveryContext",
        "origin",
        "displayName",
        "subject",
        "groupChannel",
        "space",
        "label",
        "chatType",
        "inputTokens",
        "outputTokens",
        "skillsSnapshot",
        "provider",
        "lastProvider",
        "room",
        "to",
        "accountId",
        "threadId",
        "é",
        "a\"b",
        "ctl\u{1f}",
        "",
    ])
    .prop_map(str::to_owned)
}

/// A route object (`deliveryContext`) with members of any type.
fn route() -> impl Strategy<Value = Value> {
    (prop::option::of(scalar()), prop::option::of(scalar()), prop::option::of(scalar()), prop::option::of(scalar()))
        .prop_map(|(c, t, a, th)| {
            let mut m = Map::new();
            for (k, v) in [("channel", c), ("to", t), ("accountId", a), ("threadId", th)] {
                if let Some(v) = v {
                    m.insert(k.into(), v);
                }
            }
            Value::Object(m)
        })
}

fn field() -> impl Strategy<Value = (String, Value)> {
    prop_oneof![
        4 => (name(), value()),
        1 => route().prop_map(|r| ("deliveryContext".to_owned(), r)),
        1 => route().prop_map(|r| ("origin".to_owned(), r)),
    ]
}

/// A stored entry: mostly with a string `sessionId` and `updatedAt` first, as the store writes.
fn stored_entry() -> impl Strategy<Value = Entry> {
    (
        prop::option::weighted(0.9, "[0-9a-f-]{1,12}"),
        prop::option::weighted(0.9, scalar()),
        prop::collection::vec(field(), 0..12),
    )
        .prop_map(|(sid, updated, fields)| {
            let mut e = Map::new();
            if let Some(s) = sid {
                e.insert("sessionId".into(), Value::from(s));
            }
            if let Some(u) = updated {
                e.insert("updatedAt".into(), u);
            }
            for (k, v) in fields {
                e.insert(k, v);
            }
            e
        })
}

fn patch() -> impl Strategy<Value = Entry> {
    prop::collection::vec(field(), 0..6).prop_map(|f| f.into_iter().collect())
}

/// How a text another writer stored may differ from serde_json's.
#[derive(Debug, Clone, Copy)]
enum Spelling {
    Canonical,
    Spaced,
    SlashEscaped,
    UnicodeEscaped,
    NumberForms,
    NameTwice,
}

fn spell(e: &Entry, how: Spelling) -> String {
    let canonical = serde_json::to_string(e).unwrap_or_default();
    match how {
        Spelling::Canonical => canonical,
        Spelling::Spaced => serde_json::to_string_pretty(e).unwrap_or_default(),
        Spelling::SlashEscaped => canonical.replace('/', "\\/"),
        Spelling::UnicodeEscaped => canonical.replace('é', "\\u00e9").replace('a', "\\u0061"),
        Spelling::NumberForms => canonical.replace(":0,", ":0.0,").replace(":1", ":1e0").replace(":-", ":-0"),
        Spelling::NameTwice => canonical.replacen('{', "{\"label\":\"x\",", 1),
    }
}

fn spelling() -> impl Strategy<Value = Spelling> {
    prop_oneof![
        6 => Just(Spelling::Canonical),
        1 => Just(Spelling::Spaced),
        1 => Just(Spelling::SlashEscaped),
        1 => Just(Spelling::UnicodeEscaped),
        1 => Just(Spelling::NumberForms),
        1 => Just(Spelling::NameTwice),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 4096, ..ProptestConfig::default() })]

    #[test]
    fn merging_on_the_text_writes_what_the_parsing_path_writes(
        e in stored_entry(),
        p in patch(),
        how in spelling(),
        now in prop_oneof![Just(0i64), Just(1_764_000_000_000i64), any::<i64>()],
    ) {
        let stored = spell(&e, how);
        check(&stored, &p, now);
    }

    #[test]
    fn a_canonical_text_with_its_ids_is_merged_on_the_text(e in stored_entry(), p in patch()) {
        let stored = serde_json::to_string(&e).unwrap_or_default();
        let handled = e.get("sessionId").is_some_and(Value::is_string)
            && e.contains_key("updatedAt")
            && !p.contains_key("sessionId")
            && !LEGACY.iter().any(|f| e.contains_key(*f) || p.contains_key(*f));
        prop_assert_eq!(check(&stored, &p, 1_764_000_000_000).is_some(), handled);
    }
}

#[test]
fn the_bench_upsert_is_merged_on_the_text() {
    let stored = json!({
        "sessionId": "0b9c", "updatedAt": 1_763_000_000_000i64, "systemSent": true, "chatType": "direct",
        "lastChannel": "whatsapp", "lastTo": "+15550000001", "lastAccountId": "default",
        "deliveryContext": {"channel": "whatsapp", "to": "+15550000001", "accountId": "default"},
        "origin": {"label": "User 1", "provider": "whatsapp"}, "inputTokens": 5,
    });
    let stored = serde_json::to_string(&stored).unwrap_or_default();
    let p = obj(json!({"lastChannel": "telegram", "lastTo": "+15551001", "inputTokens": 101, "outputTokens": 50}));
    let m = check(&stored, &p, 1_764_000_000_000).map(|m| m.text);
    assert_eq!(
        m.as_deref(),
        Some(concat!(
            r#"{"sessionId":"0b9c","updatedAt":1764000000000,"systemSent":true,"chatType":"direct","#,
            r#""lastChannel":"telegram","lastTo":"+15551001","lastAccountId":"default","#,
            r#""deliveryContext":{"channel":"telegram","to":"+15551001","accountId":"default"},"#,
            r#""origin":{"label":"User 1","provider":"whatsapp"},"inputTokens":101,"outputTokens":50}"#
        ))
    );
}

#[test]
fn the_search_fields_are_answered_only_when_the_merge_sets_one() {
    let stored = r#"{"sessionId":"s","updatedAt":1,"label":"Ops","origin":{"label":"Ann"},"lastTo":"+1"}"#;
    let counters = check(stored, &obj(json!({"inputTokens": 3, "lastTo": "+2"})), 5).expect("merged");
    assert_eq!(counters.fields, None);
    assert_eq!(counters.updated_at, 5);
    let renamed = check(stored, &obj(json!({"label": "Dev"})), 5).expect("merged");
    let fields = renamed.fields.expect("the label is a search field");
    assert_eq!(fields.get("label"), Some(&json!("Dev")));
    assert_eq!(fields.get("origin"), Some(&json!({"label": "Ann"})));
}

#[test]
fn a_nested_object_with_many_names_is_checked_for_a_name_twice() {
    let p = obj(json!({"inputTokens": 1}));
    let names: Vec<String> = (0..40).map(|i| format!(r#""n{i}":{i}"#)).collect();
    let many = format!(r#"{{"sessionId":"s","updatedAt":1,"a":{{{}}}}}"#, names.join(","));
    assert!(check(&many, &p, 5).is_some(), "40 names, each once");
    for at in [3, 17, 39] {
        let twice = format!(r#"{{"sessionId":"s","updatedAt":1,"a":{{{},"n{at}":0}}}}"#, names.join(","));
        assert!(check(&twice, &p, 5).is_none(), "n{at} twice");
    }
}

#[test]
fn texts_another_writer_spelled_take_the_parsing_path() {
    let p = obj(json!({"inputTokens": 1}));
    for stored in [
        r#"{ "sessionId":"s","updatedAt":1}"#,
        r#"{"sessionId":"s","updatedAt":1,"a":"x\/y"}"#,
        r#"{"sessionId":"s","updatedAt":1,"a":"\u00e9"}"#,
        r#"{"sessionId":"s","updatedAt":1,"a":"\u001F"}"#,
        r#"{"sessionId":"s","updatedAt":1,"a":"\u0009"}"#,
        r#"{"sessionId":"s","updatedAt":1e3}"#,
        r#"{"sessionId":"s","updatedAt":-0}"#,
        r#"{"sessionId":"s","updatedAt":012}"#,
        r#"{"sessionId":"s","updatedAt":99999999999999999999}"#,
        r#"{"sessionId":"s","updatedAt":1,"a":{"b":1,"b":2}}"#,
        r#"{"sessionId":"s","updatedAt":1,"updatedAt":2}"#,
        r#"{"sessionId":"s","updatedAt":1} "#,
        r#"{"sessionId":"s","updatedAt":1,"room":"r1"}"#,
        r#"{"sessionId":5,"updatedAt":1}"#,
        r#"{"updatedAt":1}"#,
        r#"{"sessionId":"s"}"#,
        r#"[1]"#,
        r#"{"sessionId":"s","updatedAt":1,"a":tru}"#,
    ] {
        assert!(check(stored, &p, 5).is_none(), "{stored}");
    }
    let deep = format!(r#"{{"sessionId":"s","updatedAt":1,"a":{}1{}}}"#, "[".repeat(120), "]".repeat(120));
    assert!(check(&deep, &p, 5).is_none());
    // spelled as serde_json spells them, escapes and numbers are copied as they are
    for stored in [
        r#"{"sessionId":"s","updatedAt":1,"a":"\u001f\n\"\\é😀","d":18446744073709551615}"#,
        r#"{"sessionId":"s","updatedAt":1.0}"#,
        r#"{"sessionId":"s","updatedAt":1.5,"a":[],"b":{},"c":[{"x":null}],"d":-9223372036854775808}"#,
    ] {
        assert!(check(stored, &p, 5).is_some(), "{stored}");
    }
    // floats at the edges: copied when serde_json prints them back as written, else parsed
    check(r#"{"sessionId":"s","updatedAt":1,"b":-0.0,"c":1e21,"d":5e-324}"#, &p, 5);
}
