//! Tests of the chunked crossing: the cut of a large answer puts back together to the same value.

use proptest::prelude::*;
use serde_json::{json, Value};

use super::split;

/// The value the pieces put back together give (what the JS queue builds).
fn rejoin(s: &super::Split) -> Value {
    let mut out: Value = serde_json::from_str(&s.head).expect("head");
    let mut all = Vec::new();
    for p in &s.pieces {
        let part: Vec<Value> = serde_json::from_str(p).expect("piece");
        assert!(!part.is_empty(), "an empty piece");
        all.extend(part);
    }
    let mut at = &mut out;
    for k in &s.path {
        at = at.get_mut(k.as_str()).expect("path");
    }
    *at = Value::Array(all);
    out
}

fn same_after_split(text: &str, piece: usize) -> super::Split {
    let s = split(text, piece).unwrap_or_else(|| panic!("not split: {text}"));
    let whole: Value = serde_json::from_str(text).expect("text");
    assert_eq!(rejoin(&s), whole, "{text}");
    // key order of the top level is kept
    let keys = |v: &Value| v.as_object().map(|o| o.keys().cloned().collect::<Vec<_>>()).unwrap_or_default();
    assert_eq!(keys(&serde_json::from_str(&s.head).expect("head")), keys(&whole));
    s
}

#[test]
fn a_listing_splits_into_pieces_that_rejoin_to_the_same_value() {
    let rows: Vec<Value> = (0..200)
        .map(|i| json!({"key": format!("agent:main:k{i}"), "label": "a \"quoted\" [x] {y}, \\ back", "n": i, "f": 1.5e300, "t": [true, null, {"z": []}]}))
        .collect();
    let text = json!({"count": 200, "sessions": rows}).to_string();
    let s = same_after_split(&text, 1024);
    assert_eq!(s.path, ["sessions"]);
    assert!(s.pieces.len() > 10);
    assert!(s.pieces.iter().all(|p| p.len() <= 1024 + 2 || !p[1..p.len() - 1].contains("},{")));
    assert_eq!(s.head, r#"{"count":200,"sessions":[]}"#);
}

#[test]
fn odd_texts_split_or_are_left_whole() {
    // escaped and non-ASCII keys and values, whitespace, a trailing member after the array
    let text = "{ \"se\\\"ss\" : 1 , \"m\u{e9}ssages\\u0041\" : [ \"\u{1F600} [\" , {\"a\":\"]\\\\\"} , 12 , -0.5e-3 , [[], {}] , \"\\u005d\" ] , \"truncated\" : true }";
    let s = same_after_split(text, 4);
    assert_eq!(s.path, ["m\u{e9}ssagesA"]);
    // the largest of several arrays is the one cut
    let text = json!({"a": [1, 2], "b": ["x".repeat(50), "y".repeat(50)], "c": []}).to_string();
    assert_eq!(same_after_split(&text, 10).path, ["b"]);
    // one element larger than a piece makes a piece of its own
    let text = json!({"messages": ["z".repeat(5000), 1, 2]}).to_string();
    let s = same_after_split(&text, 100);
    assert_eq!(s.pieces.len(), 2);
    // inside a wrapped answer: the largest array is found through objects, not arrays
    let rows: Vec<Value> = (0..50).map(|i| json!({"k": i, "deep": [[1, 2], [3]]})).collect();
    let wrapped = json!({"content": [{"type": "text", "text": "t"}], "details": {"count": 50, "sessions": rows}});
    let s = same_after_split(&wrapped.to_string(), 64);
    assert_eq!(s.path, ["details", "sessions"]);
    assert_eq!(s.head, r#"{"content":[{"type":"text","text":"t"}],"details":{"count":50,"sessions":[]}}"#);
    // a `__proto__` member stays a plain member
    same_after_split(&json!({"__proto__": ["p".repeat(300), "q"]}).to_string(), 100);
}

#[test]
fn texts_it_does_not_expect_are_left_whole() {
    for text in [
        "[1,2,3]",
        "\"text\"",
        "{}",
        "{\"a\":1}",
        // the array fits in one piece
        "{\"a\":[1,2,3]}",
        // a member named twice: JSON.parse keeps the last, the cut could pick the first
        "{\"a\":[\"xxxxxxxxxxxxxxxxxxxxxx\"],\"a\":[1]}",
        "{\"d\":{\"a\":[\"xxxxxxxxxxxxxxxxxxxxxx\"],\"a\":[1]}}",
        // not JSON, or cut short
        "{\"a\":[\"xxxxxxxxxxxxxxxxxxxxxx\",}",
        "{\"a\":[\"xxxxxxxxxxxxxxxxxxxxxx\"",
        "{\"a\":[\"xxxxxxxxxxxxxxxxxxxxxx\"]} x",
        "{\"a\" [\"xxxxxxxxxxxxxxxxxxxxxx\"]}",
        "{\"a\":[\"xxxxxxxxxxxxxxxxxxxxxx\\\"]}",
        "",
    ] {
        assert_eq!(split(text, 8), None, "{text}");
    }
}

proptest! {
    #[test]
    fn any_object_with_a_large_array_rejoins_to_itself(
        items in proptest::collection::vec(prop_oneof![
            any::<String>().prop_map(Value::from),
            any::<i64>().prop_map(Value::from),
            any::<bool>().prop_map(Value::from),
            any::<(String, String)>().prop_map(|(k, v)| json!({ k: [v, null] })),
        ], 1..60),
        before in any::<String>(),
        piece in 1usize..200,
    ) {
        let text = json!({"before": before, "items": items, "after": {"x": [1]}, "in": {"more": items.clone()}}).to_string();
        let pretty = serde_json::to_string_pretty(&serde_json::from_str::<Value>(&text).unwrap()).unwrap();
        for t in [text, pretty] {
            if let Some(s) = split(&t, piece) {
                prop_assert_eq!(rejoin(&s), serde_json::from_str::<Value>(&t).unwrap());
            }
        }
    }
}
