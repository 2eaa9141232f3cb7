//! Which session a model's reference names (REFERENCE.md §1.6: a key, or a sessionId), and
//! whether a requester's child is meant; shared by `sessions_history` and `sessions_send`.
//! Reads through the store's typed methods only.

use super::{refusal, Checked, Refusal, Requester};
use crate::config::Config;
use crate::engine::Engine;
use crate::entry;
use crate::error::Result;
use crate::keys;

/// A session reference resolved for a requester (§1.6).
pub struct Resolved {
    pub key: String,
    pub display: String,
    pub via_session_id: bool,
}

/// §1.6 resolveSessionReference, with DECISIONS.md's requester-relative `main`. A refusal is
/// its payload.
pub fn resolve_reference(
    engine: &Engine,
    cfg: &Config,
    input: &str,
    requester: &Requester,
    restricted: bool,
) -> Checked<Resolved> {
    let km = cfg.key_model();
    let not_visible =
        || refusal("forbidden", format!("Session not visible from this sandboxed agent session: {input}"));
    if !keys::should_resolve_as_session_id(input) {
        let key = match km.resolve_for(input, &requester.agent) {
            Ok(k) => k,
            Err(e) => return Err(Refusal::Payload(refusal("error", e.message()))),
        };
        // Shown as given (a bare key stays bare, as the gateway echoes it), the caller's own main
        // session as `main` (DECISIONS.md).
        let shown = km.display(&key, &requester.agent);
        let display = if shown == keys::DEFAULT_MAIN_KEY { shown } else { crate::js::js_trim(input).to_owned() };
        return Ok(Resolved { display, key, via_session_id: false });
    }
    // First as a key …
    if let Ok(candidates) = km.store_keys(input) {
        if engine.store().read(|db| db.first_session(&candidates))?.is_some() {
            let key = candidates[0].clone();
            return Ok(Resolved { display: km.display(&key, &requester.agent), key, via_session_id: false });
        }
    }
    // … then as a sessionId.
    let rows = engine.store().read(|db| db.sessions_with_id(input, 64))?;
    let keys: Vec<String> = rows
        .into_iter()
        .filter(|r| {
            if restricted {
                r.key != "global"
                    && r.key != "unknown"
                    && entry::str_field(&r.entry, "spawnedBy") == requester.key.as_deref()
            } else {
                true
            }
        })
        .map(|r| r.key)
        .collect();
    match keys.as_slice() {
        [one] => Ok(Resolved { display: km.display(one, &requester.agent), key: one.clone(), via_session_id: true }),
        [] if restricted => Err(Refusal::Payload(not_visible())),
        [] => Err(Refusal::Payload(refusal("error", format!("No session found: {}", crate::error::clip(input))))),
        [a, b, ..] if !restricted => Err(Refusal::Payload(refusal(
            "error",
            format!("Multiple sessions found for sessionId: {input} ({a}, {b})"),
        ))),
        _ => Err(Refusal::Payload(not_visible())),
    }
}

/// Whether a key-mode target is one of the requester's children (§4.1 step 4).
pub fn spawned_by_requester(engine: &Engine, key: &str, requester: &Requester) -> Result<bool> {
    let Some(req) = &requester.key else { return Ok(false) };
    let e = engine.store().read(|db| db.session(key))?;
    Ok(e.as_ref().and_then(|e| entry::str_field(e, "spawnedBy")) == Some(req.as_str()))
}
