//! `sessions_send` `watch` under 2026.9 over a fake host: the `watched` answer, and the
//! `session.changed` notices when a human writes in a watched (or owned) session.
use std::sync::Arc;

use serde_json::{json, Value};

use crate::host::testing::FakeHost;
use crate::orchestrate::subagents::testkit::until;
use crate::orchestrate::tasks::testkit9::open9;
use crate::orchestrate::Orchestrator;
use crate::tools::Tool;

const REQ: &str = "agent:main:main";
const DM: &str = "agent:main:whatsapp:dm:+1555";

async fn send(o: &Arc<Orchestrator>, params: Value, ctx: Value) -> Value {
    o.tool(Tool::SessionsSend, params, ctx, false).await.unwrap()
}

fn notices(h: &FakeHost) -> Vec<(Option<String>, Value)> {
    h.events()
        .into_iter()
        .filter(|e| e.kind == "session.changed")
        .map(|e| (e.session_key, Value::Object(e.details)))
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_watched_session_tells_its_watcher_when_a_human_writes_there() {
    let h = Arc::new(FakeHost::replying("ok"));
    let o = open9(json!({}), h.clone()).await;
    let ctx = json!({"agentSessionKey": REQ});
    let out =
        send(&o, json!({"sessionKey": DM, "message": "keep an eye", "timeoutSeconds": 0, "watch": true}), ctx).await;
    assert_eq!(out["watched"], true, "{out}");
    // the engine's own messages (with provenance) and assistant messages are no change
    o.engine()
        .append_messages(&json!(DM), &json!([{"role": "assistant", "content": "hello"}, {"role": "user", "content": "x", "provenance": {"kind": "inter_session"}}]))
        .unwrap();
    o.engine().append_messages(&json!(DM), &json!([{"role": "user", "content": "a human writes"}])).unwrap();
    until("a notice", || !notices(&h).is_empty()).await;
    let (watcher, details) = notices(&h).remove(0);
    assert_eq!(watcher.as_deref(), Some(REQ));
    assert_eq!(
        details,
        json!({"targetSessionKey": DM, "sequence": 1, "lastSeenSequence": 0, "wake": true,
               "text": format!("Session \"{DM}\" changed (other actor). Reconcile before acting: session_status sessionKey \"{DM}\" changesSince 0.")})
    );
    assert_eq!(notices(&h).len(), 1, "one notice for one human message");
    // a deleted target is watched no more
    o.delete_session(json!(DM), json!({})).await.unwrap();
    assert!(!o.engine().store().read(|db| db.is_watched(DM)).unwrap());
    o.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn watched_is_false_without_an_agent_requester_and_absent_unless_asked() {
    let h = Arc::new(FakeHost::replying("ok"));
    let o = open9(json!({}), h).await;
    let fire = |ctx: Value, watch: bool| {
        let o = o.clone();
        async move { send(&o, json!({"sessionKey": DM, "message": "m", "timeoutSeconds": 0, "watch": watch}), ctx).await }
    };
    assert_eq!(fire(json!({}), true).await["watched"], false, "no requester session");
    assert_eq!(fire(json!({"agentSessionKey": DM}), true).await["watched"], false, "the target itself");
    assert!(fire(json!({"agentSessionKey": REQ}), false).await.get("watched").is_none());
    o.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_owner_of_a_session_hears_of_human_messages_there_without_a_watch() {
    let h = Arc::new(FakeHost::replying("ok"));
    let o = open9(json!({}), h.clone()).await;
    let child = "agent:main:subagent:c1";
    o.engine().upsert_session(&json!(child), &json!({"spawnedBy": REQ})).unwrap();
    o.engine().append_messages(&json!(child), &json!([{"role": "user", "content": "a human steps in"}])).unwrap();
    until("a notice", || !notices(&h).is_empty()).await;
    let (watcher, details) = notices(&h).remove(0);
    assert_eq!((watcher.as_deref(), details["targetSessionKey"].as_str()), (Some(REQ), Some(child)));
    // a sub-agent watcher is told but not woken
    o.engine().upsert_session(&json!("agent:main:subagent:c2"), &json!({"spawnedBy": child})).unwrap();
    o.engine().append_messages(&json!("agent:main:subagent:c2"), &json!([{"role": "user", "content": "hi"}])).unwrap();
    until("the second notice", || notices(&h).len() == 2).await;
    assert_eq!(notices(&h)[1].1["wake"], false);
    o.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_acknowledged_notice_moves_the_cursor_and_a_change_in_between_is_told_again() {
    let h = Arc::new(FakeHost::replying("ok"));
    let o = open9(json!({}), h.clone()).await;
    let ctx = json!({"agentSessionKey": REQ});
    send(&o, json!({"sessionKey": DM, "message": "watch", "timeoutSeconds": 0, "watch": true}), ctx).await;
    let human =
        |text: &str| o.engine().append_messages(&json!(DM), &json!([{"role": "user", "content": text}])).unwrap();
    human("one");
    until("the first notice", || notices(&h).len() == 1).await;
    human("two");
    until("the second notice", || notices(&h).len() == 2).await;
    // unacknowledged, the second notice still reports the first change
    assert_eq!(
        (notices(&h)[1].1["sequence"].clone(), notices(&h)[1].1["lastSeenSequence"].clone()),
        (json!(2), json!(0))
    );
    // the watcher's turn took the first notice in: the cursor moves to change 1 and change 2,
    // recorded since, is told again at once
    let ack = super::acknowledge(&o, &json!(REQ), &json!([DM, DM, "agent:main:unwatched"])).unwrap();
    assert_eq!(ack, json!({"acknowledged": 1, "followUps": 1}));
    let (watcher, follow) = notices(&h).remove(2);
    assert_eq!(watcher.as_deref(), Some(REQ));
    assert_eq!((follow["sequence"].clone(), follow["lastSeenSequence"].clone()), (json!(2), json!(1)));
    assert!(follow["text"].as_str().unwrap().ends_with("changesSince 1."));
    // acknowledging the follow-up catches the watcher up: nothing more to tell
    assert_eq!(super::acknowledge(&o, &json!(REQ), &json!([DM])).unwrap(), json!({"acknowledged": 1, "followUps": 0}));
    human("three");
    until("a notice from the new cursor", || notices(&h).len() == 4).await;
    assert_eq!(notices(&h)[3].1["lastSeenSequence"], 2);
    // what the host passes is checked
    let bad = |w: Value, t: Value| super::acknowledge(&o, &w, &t).unwrap_err().code();
    assert_eq!(bad(json!(5), json!([])), crate::error::ErrorCode::InvalidRequest);
    assert_eq!(bad(json!(REQ), json!("x")), crate::error::ErrorCode::InvalidRequest);
    assert_eq!(bad(json!(REQ), json!([1])), crate::error::ErrorCode::InvalidRequest);
    o.close().await;
}
