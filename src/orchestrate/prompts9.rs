//! The agent-to-agent texts of `sessions_send` under the 2026.9 contract: the context blocks of
//! the primary run, the reply steps and the announce step, and the one-way handoff of a
//! sub-agent target's reply. 2026.9 names the sessions by placeholder (`<REQUESTER_SESSION>`,
//! `<TARGET_SESSION>`), never by key, and its announce step says a reply is recorded rather than
//! posted. Pure string building; the skip tokens are `prompts`'.

use super::completion9::OUTCOME_INSTRUCTION;
use super::prompts::{ANNOUNCE_SKIP, REPLY_SKIP};

/// Who takes part, as the blocks name them.
#[derive(Debug, Clone, Copy, Default)]
pub struct Parties<'a> {
    /// whether the requester has a session key (its line is left out otherwise)
    pub requester_known: bool,
    pub requester_channel: Option<&'a str>,
    pub target_channel: Option<&'a str>,
}

fn present(v: Option<&str>) -> Option<&str> {
    v.filter(|s| !s.is_empty())
}

fn session_lines(p: &Parties<'_>) -> Vec<String> {
    let mut lines = Vec::new();
    if p.requester_known {
        lines.push("Agent 1 (requester) session: <REQUESTER_SESSION>.".to_owned());
    }
    if let Some(c) = present(p.requester_channel) {
        lines.push(format!("Agent 1 (requester) channel: {c}."));
    }
    lines.push("Agent 2 (target) session: <TARGET_SESSION>.".to_owned());
    if let Some(c) = present(p.target_channel) {
        lines.push(format!("Agent 2 (target) channel: {c}."));
    }
    lines
}

/// The extra system prompt of the primary run (no target channel line: 2026.9 passes none).
pub fn message_context(requester_known: bool, requester_channel: Option<&str>) -> String {
    let p = Parties { requester_known, requester_channel, target_channel: None };
    let mut lines = vec!["Agent-to-agent message context:".to_owned()];
    lines.extend(session_lines(&p));
    lines.join("\n")
}

/// The extra system prompt of reply step `turn` of `max`.
pub fn reply_step_context(current_is_requester: bool, turn: u32, max: u32, p: &Parties<'_>) -> String {
    let current = if current_is_requester { "Agent 1 (requester)" } else { "Agent 2 (target)" };
    let mut lines = vec![
        "Agent-to-agent reply step:".to_owned(),
        format!("Current agent: {current}."),
        format!("Turn {turn} of {max}."),
    ];
    lines.extend(session_lines(p));
    lines.push(format!("If you want to stop the ping-pong, reply exactly \"{REPLY_SKIP}\"."));
    lines.join("\n")
}

/// The extra system prompt of the announce step.
pub fn announce_step_context(p: &Parties<'_>, original: &str, round_one: Option<&str>, latest: Option<&str>) -> String {
    let mut lines = vec!["Agent-to-agent announce step:".to_owned()];
    lines.extend(session_lines(p));
    lines.push(format!("Original request: {original}"));
    lines.push(match present(round_one) {
        Some(r) => format!("Round 1 reply: {r}"),
        None => "Round 1 reply: (not available).".to_owned(),
    });
    lines.push(match present(latest) {
        Some(r) => format!("Latest reply: {r}"),
        None => "Latest reply: (not available).".to_owned(),
    });
    lines.push(format!("If you want to remain silent, reply exactly \"{ANNOUNCE_SKIP}\"."));
    lines.push(
        "Any other reply is recorded in the target session. External delivery is attempted only if the target has a delivery route."
            .to_owned(),
    );
    lines.push("After this reply, the agent-to-agent conversation is over.".to_owned());
    lines.join("\n")
}

/// The extra system prompt of the one-way handoff of a sub-agent target's reply.
pub fn one_way_context() -> String {
    format!(
        "A child session returned the result of your earlier sessions_send request. {OUTCOME_INSTRUCTION} This result is delivered once; your response will not be sent back to the child."
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sessions_are_named_by_placeholder_and_absent_lines_dropped() {
        assert_eq!(
            message_context(true, Some("whatsapp")),
            "Agent-to-agent message context:\nAgent 1 (requester) session: <REQUESTER_SESSION>.\nAgent 1 (requester) channel: whatsapp.\nAgent 2 (target) session: <TARGET_SESSION>."
        );
        assert_eq!(
            message_context(false, None),
            "Agent-to-agent message context:\nAgent 2 (target) session: <TARGET_SESSION>."
        );
        let p = Parties { requester_known: true, requester_channel: Some("whatsapp"), target_channel: Some("discord") };
        assert_eq!(
            reply_step_context(false, 2, 5, &p),
            "Agent-to-agent reply step:\nCurrent agent: Agent 2 (target).\nTurn 2 of 5.\nAgent 1 (requester) session: <REQUESTER_SESSION>.\nAgent 1 (requester) channel: whatsapp.\nAgent 2 (target) session: <TARGET_SESSION>.\nAgent 2 (target) channel: discord.\nIf you want to stop the ping-pong, reply exactly \"REPLY_SKIP\"."
        );
        let a = announce_step_context(&p, "Did it?", Some("yes"), None);
        assert!(a.ends_with("Original request: Did it?\nRound 1 reply: yes\nLatest reply: (not available).\nIf you want to remain silent, reply exactly \"ANNOUNCE_SKIP\".\nAny other reply is recorded in the target session. External delivery is attempted only if the target has a delivery route.\nAfter this reply, the agent-to-agent conversation is over."));
        assert!(one_way_context()
            .ends_with("This result is delivered once; your response will not be sent back to the child."));
    }
}
