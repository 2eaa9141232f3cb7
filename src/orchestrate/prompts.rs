//! The texts the orchestration puts in front of agents: the agent-to-agent context blocks of
//! `sessions_send` (REFERENCE.md §5.4) with their skip tokens, the sub-agent's system prompt
//! (§6.3) and the completion trigger its requester receives (§6.5 steps 6–7).
//!
//! The §5.4 and §6.5 texts and the §6.3 headings and per-spawn lines are contract (agents already
//! depend on them) and are reproduced exactly; the §6.3 fixed sentences are our own wording
//! (DECISIONS.md, "Texts that are ours"). Optional values that are absent or empty drop their
//! line, as the reference's truthiness checks do. Pure string building.

use crate::js::{collapse_whitespace, js_trim};

/// A speaker answering this (trimmed) ends the reply-back loop.
pub const REPLY_SKIP: &str = "REPLY_SKIP";
/// The target answering this (trimmed) to the announce step posts nothing.
pub const ANNOUNCE_SKIP: &str = "ANNOUNCE_SKIP";
/// The user message of the announce step.
pub const ANNOUNCE_STEP_MESSAGE: &str = "Agent-to-agent announce step.";
/// Stands in for an empty sub-agent task in its system prompt.
pub const TASK_PLACEHOLDER: &str = "{{TASK_DESCRIPTION}}";

/// `true` when the trimmed reply is exactly `REPLY_SKIP` (case-sensitive).
pub fn is_reply_skip(text: &str) -> bool {
    js_trim(text) == REPLY_SKIP
}

/// `true` when the trimmed reply is exactly `ANNOUNCE_SKIP` (case-sensitive).
pub fn is_announce_skip(text: &str) -> bool {
    js_trim(text) == ANNOUNCE_SKIP
}

fn present(v: Option<&str>) -> Option<&str> {
    v.filter(|s| !s.is_empty())
}

fn requester_lines(lines: &mut Vec<String>, session: Option<&str>, channel: Option<&str>) {
    if let Some(s) = present(session) {
        lines.push(format!("Agent 1 (requester) session: {s}."));
    }
    if let Some(c) = present(channel) {
        lines.push(format!("Agent 1 (requester) channel: {c}."));
    }
}

fn target_lines(lines: &mut Vec<String>, display: &str, channel: Option<&str>) {
    lines.push(format!("Agent 2 (target) session: {display}."));
    if let Some(c) = present(channel) {
        lines.push(format!("Agent 2 (target) channel: {c}."));
    }
}

/// The extra system prompt of the primary `sessions_send` run on the target.
pub fn message_context(
    requester_session: Option<&str>,
    requester_channel: Option<&str>,
    target_display: &str,
) -> String {
    let mut lines = vec!["Agent-to-agent message context:".to_string()];
    requester_lines(&mut lines, requester_session, requester_channel);
    target_lines(&mut lines, target_display, None);
    lines.join("\n")
}

/// The extra system prompt of one reply-back turn (`turn` of `max`).
pub fn reply_step_context(
    current_is_requester: bool,
    turn: u32,
    max: u32,
    requester_session: Option<&str>,
    requester_channel: Option<&str>,
    target_display: &str,
    target_channel: Option<&str>,
) -> String {
    let current = if current_is_requester { "Agent 1 (requester)" } else { "Agent 2 (target)" };
    let mut lines = vec![
        "Agent-to-agent reply step:".to_string(),
        format!("Current agent: {current}."),
        format!("Turn {turn} of {max}."),
    ];
    requester_lines(&mut lines, requester_session, requester_channel);
    target_lines(&mut lines, target_display, target_channel);
    lines.push(format!("If you want to stop the ping-pong, reply exactly \"{REPLY_SKIP}\"."));
    lines.join("\n")
}

/// The extra system prompt of the announce step on the target; `original` is trimmed here.
pub fn announce_step_context(
    requester_session: Option<&str>,
    requester_channel: Option<&str>,
    target_display: &str,
    target_channel: Option<&str>,
    original: &str,
    round_one: Option<&str>,
    latest: Option<&str>,
) -> String {
    let mut lines = vec!["Agent-to-agent announce step:".to_string()];
    requester_lines(&mut lines, requester_session, requester_channel);
    target_lines(&mut lines, target_display, target_channel);
    lines.push(format!("Original request: {}", js_trim(original)));
    lines.push(match present(round_one) {
        Some(r) => format!("Round 1 reply: {r}"),
        None => "Round 1 reply: (not available).".to_string(),
    });
    lines.push(match present(latest) {
        Some(r) => format!("Latest reply: {r}"),
        None => "Latest reply: (not available).".to_string(),
    });
    lines.push(format!("If you want to remain silent, reply exactly \"{ANNOUNCE_SKIP}\"."));
    lines.push("Any other reply will be posted to the target channel.".to_string());
    lines.push("After this reply, the agent-to-agent conversation is over.".to_string());
    lines.join("\n")
}

/// How a sub-agent run ended, as the announce flow knows it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SubagentOutcome {
    Ok,
    Timeout,
    Error(Option<String>),
    Unknown,
}

/// §6.5 step 6: the words after "just" in the trigger message.
pub fn status_label(outcome: &SubagentOutcome) -> String {
    match outcome {
        SubagentOutcome::Ok => "completed successfully".to_string(),
        SubagentOutcome::Timeout => "timed out".to_string(),
        SubagentOutcome::Error(err) => format!("failed: {}", present(err.as_deref()).unwrap_or("unknown error")),
        SubagentOutcome::Unknown => "finished with unknown status".to_string(),
    }
}

/// What the trigger calls the task: the label, else the task, else `background task`.
pub fn task_title<'a>(label: Option<&'a str>, task: Option<&'a str>) -> &'a str {
    present(label).or(present(task)).unwrap_or("background task")
}

/// §6.5 step 7: the message the requester agent receives when its sub-agent is done.
pub fn subagent_trigger(label_or_task: &str, status_label: &str, reply: Option<&str>, stats_line: &str) -> String {
    let title = if label_or_task.is_empty() { "background task" } else { label_or_task };
    [
        format!("A background task \"{title}\" just {status_label}."),
        String::new(),
        "Findings:".to_string(),
        present(reply).unwrap_or("(no output)").to_string(),
        String::new(),
        stats_line.to_string(),
        String::new(),
        "Summarize this naturally for the user. Keep it brief (1-2 sentences). Flow it into the conversation naturally."
            .to_string(),
        "Do not mention technical details like tokens, stats, or that this was a background task.".to_string(),
        "You can respond with NO_REPLY if no announcement is needed (e.g., internal task with no user-facing result)."
            .to_string(),
    ]
    .join("\n")
}

/// §6.3: the extra system prompt of a sub-agent. Headings, the task line and the session lines
/// follow the reference exactly; the fixed sentences are ours. Ends with an empty line.
pub fn subagent_system_prompt(
    task: &str,
    label: Option<&str>,
    requester_session: Option<&str>,
    requester_channel: Option<&str>,
    child_key: &str,
) -> String {
    let task = collapse_whitespace(task);
    let task = if task.is_empty() { TASK_PLACEHOLDER.to_string() } else { task };
    let mut lines: Vec<String> = [
        "# Subagent Context",
        "",
        "You are a **subagent**: the main agent started you to carry out one specific task.",
        "",
        "## Your Role",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    lines.push(format!("- You were created to handle: {task}"));
    lines.extend(
        [
            "- Your only job is to finish this task.",
            "- You are not the main agent; do not act as if you were.",
            "",
            "## Rules",
            "1. **Stay on task** - work on what you were given and nothing more",
            "2. **Finish the task** - your last message is passed back to the main agent automatically",
            "3. **Do not start things** - no heartbeats, no unprompted actions, no detours",
            "4. **Expect to be short-lived** - you may be shut down once the task is done, and that is expected",
            "",
            "## Output Format",
            "When you are done, your final reply should cover:",
            "- What you did or what you found",
            "- Details the main agent needs to know",
            "- Brevity, without leaving out anything useful",
            "",
            "## What You DON'T Do",
            "- NO talking with users (the main agent does that)",
            "- NO outside messages (email, posts, and so on) unless your task names a specific recipient or channel",
            "- NO scheduled jobs and no state that outlives you",
            "- NO posing as the main agent",
            "- Use the `message` tool only when told to reach a specific outside recipient; otherwise reply in plain text and let the main agent pass it on",
            "",
            "## Session Context",
        ]
        .iter()
        .map(|s| s.to_string()),
    );
    if let Some(l) = present(label) {
        lines.push(format!("- Label: {l}"));
    }
    if let Some(s) = present(requester_session) {
        lines.push(format!("- Requester session: {s}."));
    }
    if let Some(c) = present(requester_channel) {
        lines.push(format!("- Requester channel: {c}."));
    }
    lines.push(format!("- Your session: {child_key}."));
    lines.push(String::new());
    lines.join("\n")
}

#[cfg(test)]
#[path = "prompts_tests.rs"]
mod tests;
