//! Session watches under the 2026.9 contract: `sessions_send` with `watch: true` makes the
//! requester a watcher of the target, and when a human writes in a session (a `user` message
//! appended without `provenance`), each of its watchers (and the session's owner, its
//! `spawnedBy` or `parentSessionKey`) is told with event `session.changed`, carrying the
//! gateway's notice text. The host queues that text for the watcher's next turn and wakes it,
//! as the gateway does with its system events; a sub-agent watcher is not woken. When the
//! watcher's turn takes the notice in, the host acknowledges it ([`acknowledge`]). The cursors
//! are `store::watches`'; nothing here runs a model.

use std::sync::Arc;

use serde_json::{json, Value};

use super::state::Orchestrator;
use super::task::blocking;
use crate::contract::Contract;
use crate::entry;
use crate::error::{Error, ErrorCode, Result};
use crate::store::watches::WatchNotice;

/// The most targets one acknowledgement names.
const MAX_ACK_TARGETS: usize = 100;
use crate::keys;

/// The notice a watcher is given: the gateway's text.
pub fn notice_text(target: &str, last_seen: i64) -> String {
    format!(
        "Session \"{target}\" changed (other actor). Reconcile before acting: session_status sessionKey \"{target}\" changesSince {last_seen}."
    )
}

/// `watched` of a `sessions_send` result: absent unless `watch` was asked for; `true` when the
/// requester (an agent session, not the target itself) now watches the target.
pub async fn register(
    orch: &Arc<Orchestrator>,
    requested: bool,
    requester: Option<&str>,
    target: &str,
) -> Result<Option<bool>> {
    if !requested {
        return Ok(None);
    }
    let Some(watcher) = requester.filter(|w| *w != target && keys::parse_agent_key(w).is_some()) else {
        return Ok(Some(false));
    };
    let (e, w, t) = (orch.engine().clone(), watcher.to_owned(), target.to_owned());
    match blocking(move || e.store().write(|db| db.watch_session(&w, &t, entry::now_ms()))).await {
        Ok(()) => Ok(Some(true)),
        Err(err) if err.code() == ErrorCode::Closed => Err(err),
        Err(_) => Ok(Some(false)),
    }
}

/// A message a human wrote: a `user` message the engine did not make (no `provenance`).
fn is_human(message: &Value) -> bool {
    message.get("role").and_then(Value::as_str) == Some("user") && message.get("provenance").is_none()
}

/// Watches the store's appends for human messages (called once, from `start`).
pub fn install(orch: &Arc<Orchestrator>) {
    let Ok(handle) = tokio::runtime::Handle::try_current() else { return };
    let weak = Arc::downgrade(orch);
    orch.engine().observe_appends(Box::new(move |key: &str, messages: &[Value]| {
        if !messages.iter().any(is_human) {
            return;
        }
        let Some(o) = weak.upgrade() else { return };
        if o.engine().config().contract != Contract::V2026_9 {
            return;
        }
        let key = key.to_owned();
        handle.spawn(async move { notify(&o, key).await });
    }));
}

/// A human wrote in `key`: its watchers are told.
async fn notify(orch: &Arc<Orchestrator>, key: String) {
    let e = orch.engine().clone();
    let recorded = blocking(move || {
        let store = e.store();
        let (owner, watched) = store.read(|db| {
            let entry = db.session(&key)?;
            let owner = entry.as_ref().and_then(|en| {
                entry::str_field(en, "spawnedBy")
                    .or_else(|| entry::str_field(en, "parentSessionKey"))
                    .map(str::to_owned)
            });
            Ok((owner, db.is_watched(&key)?))
        })?;
        let owner = owner.filter(|o| keys::parse_agent_key(o).is_some());
        if owner.is_none() && !watched {
            return Ok(Vec::new());
        }
        store.write(|db| db.record_session_change(&key, owner.as_deref(), None, entry::now_ms()))
    })
    .await;
    let notices = match recorded {
        Ok(n) => n,
        Err(err) => {
            if err.code() != ErrorCode::Closed {
                orch.emit("store.error", None, None, json!({"error": err.message()}));
            }
            return;
        }
    };
    for n in notices.into_iter().filter(|n| keys::parse_agent_key(&n.watcher_key).is_some()) {
        emit_notice(orch, &n);
    }
}

/// Event `session.changed` for one notice.
fn emit_notice(orch: &Orchestrator, n: &WatchNotice) {
    orch.emit(
        "session.changed",
        None,
        Some(&n.watcher_key),
        json!({
            "targetSessionKey": n.target_key,
            "sequence": n.sequence,
            "lastSeenSequence": n.last_seen,
            "text": notice_text(&n.target_key, n.last_seen),
            "wake": !keys::is_subagent_key(&n.watcher_key),
        }),
    );
}

/// `acknowledgeWatchNotices(watcherKey, targetKeys)`: the watcher's turn took in its notices
/// about these targets (the host drained them from the watcher's queue, as the gateway's turn
/// drains its system events). Each cursor moves to the change its notice reported; a change
/// recorded since is told again at once (`session.changed`, the gateway's follow-up). Answers
/// `{acknowledged, followUps}`. Blocks on one write.
pub fn acknowledge(orch: &Orchestrator, watcher: &Value, targets: &Value) -> Result<Value> {
    let Some(watcher) = watcher.as_str() else {
        return Err(Error::invalid_request("invalid watcherKey: must be a string"));
    };
    let list = match targets {
        Value::Array(a) if a.len() <= MAX_ACK_TARGETS => a,
        Value::Array(_) => return Err(Error::invalid_request("invalid targetKeys: at most 100 keys")),
        _ => return Err(Error::invalid_request("invalid targetKeys: must be an array of strings")),
    };
    let km = orch.engine().config().key_model().clone();
    let watcher = km.canonical(watcher)?;
    let mut keys_ = Vec::with_capacity(list.len());
    for t in list {
        let Some(t) = t.as_str() else {
            return Err(Error::invalid_request("invalid targetKeys: must be an array of strings"));
        };
        keys_.push(km.canonical(t)?);
    }
    let (moved, follow) =
        orch.engine().store().write(|db| db.acknowledge_session_notices(&watcher, &keys_, entry::now_ms()))?;
    for n in &follow {
        emit_notice(orch, n);
    }
    Ok(json!({"acknowledged": moved, "followUps": follow.len()}))
}

/// A deleted session's watches go with it.
pub async fn forget(orch: &Arc<Orchestrator>, key: &str) -> Result<()> {
    let (e, k) = (orch.engine().clone(), key.to_owned());
    blocking(move || e.store().write(|db| db.forget_session_watches(&k))).await
}

#[cfg(test)]
#[path = "watch_tests.rs"]
mod tests;
