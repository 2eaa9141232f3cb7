//! Agreement with the real OpenClaw 2026.9.6 package on generated inputs: the decisions it made
//! (recorded by `scripts/oc96-fixture.mjs` into `__test__/fixtures/oc96-2026.9.json`) against
//! ours, for key classification, session visibility (with the sandbox clamp) and credential
//! redaction (default shapes and configured `logging.redactPatterns`). Every case must agree.

use serde_json::Value;

use crate::config::Config;
use crate::contract::Contract;
use crate::keys9::{self, KeyShape};
use crate::policy::visibility::{is_incognito_key, Action, Target, Viewer};
use crate::tools::v2026_9::redact::redact;
use crate::tools::v2026_9::redact_rx::{configured, configured_rules};

fn fixture() -> Value {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/__test__/fixtures/oc96-2026.9.json");
    let text = std::fs::read_to_string(path).expect("the fixture is in the repo");
    serde_json::from_str(&text).expect("the fixture is JSON")
}

fn s<'a>(v: &'a Value, f: &str) -> Option<&'a str> {
    v.get(f).and_then(Value::as_str)
}

#[test]
fn key_classification_agrees_with_the_package_on_every_case() {
    let f = fixture();
    let cases = f["keys"].as_array().unwrap();
    let mut wrong = Vec::new();
    for c in cases {
        let k = s(c, "k").unwrap();
        let shape = match keys9::shape(k) {
            KeyShape::Missing => "missing",
            KeyShape::Agent => "agent",
            KeyShape::MalformedAgent => "malformed_agent",
            KeyShape::LegacyOrAlias => "legacy_or_alias",
        };
        let agent = keys9::agent_of(k, "main");
        let ours = (is_incognito_key(k), keys9::is_subagent(k), keys9::is_acp(k), shape, agent.as_deref());
        let theirs = (
            c["incognito"].as_bool().unwrap(),
            c["subagent"].as_bool().unwrap(),
            c["acp"].as_bool().unwrap(),
            s(c, "shape").unwrap(),
            s(c, "agentId"),
        );
        if ours != theirs {
            wrong.push(format!("{k:?}: ours {ours:?}, theirs {theirs:?}"));
        }
    }
    assert!(wrong.is_empty(), "{} of {} keys disagree:\n{}", wrong.len(), cases.len(), wrong.join("\n"));
}

#[test]
fn visibility_agrees_with_the_package_on_every_case() {
    let f = fixture();
    let cases = f["visibility"].as_array().unwrap();
    let mut wrong = Vec::new();
    for c in cases {
        let cfg = Config::from_json_for(&c["cfg"], Contract::V2026_9).expect("the fixture's config is valid");
        let requester = s(c, "requester").unwrap();
        let agent = keys9::parse(requester).unwrap().agent_id;
        let viewer = Viewer::new(&cfg, c["sandboxed"].as_bool().unwrap(), Some(requester), &agent);
        let row = &c["row"];
        let key = s(row, "key").unwrap();
        let t = Target {
            key,
            agent: s(row, "agentId").unwrap(),
            owner_session_key: s(row, "ownerSessionKey"),
            spawned_by: s(row, "spawnedBy"),
            parent_session_key: s(row, "parentSessionKey"),
        };
        let action = match s(c, "action").unwrap() {
            "list" => Action::List,
            "history" => Action::History,
            "send" => Action::Send,
            _ => Action::Status,
        };
        let ours = (viewer.mode.as_str(), viewer.check(&t).err().map(|d| d.text(action, Some(key))));
        let theirs = (s(c, "visibility").unwrap(), s(c, "error").map(str::to_string));
        if ours != theirs {
            wrong.push(format!("{}: ours {ours:?}, theirs {theirs:?}", c));
        }
    }
    assert!(
        wrong.is_empty(),
        "{} of {} cases disagree:\n{}",
        wrong.len(),
        cases.len(),
        wrong[..wrong.len().min(5)].join("\n")
    );
}

#[test]
fn redaction_agrees_with_the_package_on_every_case() {
    let f = fixture();
    let cases = f["redaction"].as_array().unwrap();
    let mut wrong = Vec::new();
    for c in cases {
        let (t, theirs) = (s(c, "t").unwrap(), s(c, "out").unwrap());
        let (ours, _) = redact(t, &[]);
        if ours != theirs {
            wrong.push(format!("{t:?}: ours {ours:?}, theirs {theirs:?}"));
        }
    }
    let rate = 1.0 - wrong.len() as f64 / cases.len() as f64;
    eprintln!("redaction agreement: {}/{} = {:.1}%", cases.len() - wrong.len(), cases.len(), rate * 100.0);
    for w in wrong.iter().take(400) {
        eprintln!("  {w}");
    }
    assert!(wrong.is_empty(), "redaction agreement {rate:.3}: {} of {} texts differ", wrong.len(), cases.len());
}

#[test]
fn configured_patterns_mask_as_the_package_does() {
    let f = fixture();
    let cases = f["redactionConfigured"].as_array().unwrap();
    let mut wrong = Vec::new();
    for c in cases {
        let patterns: Vec<String> = serde_json::from_value(c["patterns"].clone()).unwrap();
        for p in &patterns {
            assert!(configured(p).is_ok(), "{p:?} is refused");
        }
        let (t, theirs) = (s(c, "t").unwrap(), s(c, "out").unwrap());
        let (ours, _) = redact(t, &configured_rules(&patterns));
        if ours != theirs {
            wrong.push(format!("{patterns:?} {t:?}: ours {ours:?}, theirs {theirs:?}"));
        }
    }
    assert!(wrong.is_empty(), "{} of {} cases differ:\n{}", wrong.len(), cases.len(), wrong.join("\n"));
}
