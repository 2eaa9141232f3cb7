//! Where an agent-to-agent announce is delivered when the key itself names a chat
//! (REFERENCE.md §5.6 `fromKey`, with DECISIONS.md's thread rule): `agent:main:discord:group:dev`
//! → `{channel: discord, to: channel:dev}`. Only the core chat-channel list is known here;
//! channel plugins' own normalizers and the session-lookup fallback belong to the flow, which
//! calls this first. Pure string parsing: never touches the store or the host.

use crate::js::js_trim;

/// A key-derived delivery route. `thread_id` is the `:topic:<x>` / `:thread:<x>` suffix of the
/// key (digits or not), passed on to delivery.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AnnounceTarget {
    pub channel: String,
    pub to: String,
    pub thread_id: Option<String>,
}

/// The core chat channels, in the reference's order.
pub const CORE_CHANNELS: [&str; 7] = ["telegram", "whatsapp", "discord", "googlechat", "slack", "signal", "imessage"];

/// `normalizeChatChannelId`: trimmed, lower-cased, aliases resolved; none unless a core channel.
pub fn normalize_core_channel(raw: &str) -> Option<&'static str> {
    let lowered = js_trim(raw).to_lowercase();
    let resolved = match lowered.as_str() {
        "imsg" => "imessage",
        "google-chat" | "gchat" => "googlechat",
        other => other,
    };
    CORE_CHANNELS.iter().copied().find(|c| *c == resolved)
}

/// Split a trailing `:topic:<x>` (checked first) or `:thread:<x>` off `rest`; `x` is the last
/// `:`-separated segment and must be non-blank, and something must precede the marker.
fn split_thread(rest: &str) -> (&str, Option<&str>) {
    for marker in [":topic:", ":thread:"] {
        if let Some((head, tail)) = rest.rsplit_once(':') {
            if let Some(id) = head.strip_suffix(&marker[..marker.len() - 1]) {
                if !js_trim(tail).is_empty() && !id.is_empty() {
                    return (id, Some(js_trim(tail)));
                }
            }
        }
    }
    (rest, None)
}

/// `fromKey`: the announce target a session key names, if it is a group or channel key.
pub fn from_key(key: &str) -> Option<AnnounceTarget> {
    let raw_parts: Vec<&str> = key.split(':').filter(|p| !p.is_empty()).collect();
    let parts = if raw_parts.len() >= 3 && raw_parts[0] == "agent" { &raw_parts[2..] } else { &raw_parts[..] };
    let [channel_raw, kind, rest @ ..] = parts else {
        return None;
    };
    if rest.is_empty() || (*kind != "group" && *kind != "channel") {
        return None;
    }
    let rest = rest.join(":");
    let (id, thread_id) = split_thread(&rest);
    let id = js_trim(id);
    if id.is_empty() {
        return None;
    }
    let core = normalize_core_channel(channel_raw);
    let to = match core {
        None => id.to_string(),
        Some("discord" | "slack") => format!("channel:{id}"),
        Some(_) if *kind == "channel" => format!("channel:{id}"),
        Some(_) => format!("group:{id}"),
    };
    let channel = core.map_or_else(|| channel_raw.to_lowercase(), str::to_string);
    Some(AnnounceTarget { channel, to, thread_id: thread_id.map(str::to_string) })
}

#[cfg(test)]
#[path = "announce_target_tests.rs"]
mod tests;
