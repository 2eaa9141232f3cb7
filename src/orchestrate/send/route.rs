//! Where an agent-to-agent announce is delivered (§5.6, `resolveAnnounceTarget`): the route the
//! target's key names, or its stored delivery context.

use serde_json::Value;

use crate::engine::Engine;
use crate::entry::DeliveryContext;
use crate::orchestrate::announce_target;

/// Where an announce is delivered (§5.6 with DECISIONS.md's thread rule).
#[derive(Debug, Clone, PartialEq)]
pub(super) struct Route {
    pub(super) channel: String,
    pub(super) to: String,
    pub(super) account_id: Option<String>,
    pub(super) thread_id: Option<String>,
}

/// `resolveAnnounceTarget`: the route the key names, unless none does or its channel prefers
/// the session lookup (WhatsApp); then the target's stored route (`deliveryContext` over the
/// `last*` fields) when it has a channel and a recipient; else the key's route, if any.
pub(super) fn announce_route(engine: &Engine, internal_key: &str, display_key: &str) -> Option<Route> {
    let from_key = announce_target::from_key(internal_key).or_else(|| announce_target::from_key(display_key));
    let fallback = from_key.map(|t| Route { channel: t.channel, to: t.to, account_id: None, thread_id: t.thread_id });
    if let Some(route) = &fallback {
        if route.channel != "whatsapp" {
            return fallback;
        }
    }
    let stored = engine.store().read(|db| db.session(internal_key)).ok().flatten();
    if let Some(e) = stored {
        let ctx = DeliveryContext::of_object(e.get("deliveryContext")).overlay(DeliveryContext::from_parts(
            e.get("lastChannel"),
            e.get("lastTo"),
            e.get("lastAccountId"),
            e.get("lastThreadId"),
        ));
        if let (Some(channel), Some(to)) = (ctx.channel, ctx.to) {
            let thread_id = match ctx.thread_id {
                Some(Value::String(s)) => Some(s),
                Some(Value::Number(n)) => Some(n.to_string()),
                _ => None,
            };
            // a stored route without a thread keeps the one the key names
            let thread_id = thread_id.or_else(|| fallback.as_ref().and_then(|f| f.thread_id.clone()));
            return Some(Route { channel, to, account_id: ctx.account_id, thread_id });
        }
    }
    fallback
}
