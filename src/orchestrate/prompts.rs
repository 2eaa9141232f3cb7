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
mod tests {
    use super::*;

    #[test]
    fn message_context_lists_requester_lines_only_when_known() {
        assert_eq!(
            message_context(Some("agent:main:main"), Some("discord"), "agent:ops:main"),
            "Agent-to-agent message context:\nAgent 1 (requester) session: agent:main:main.\n\
             Agent 1 (requester) channel: discord.\nAgent 2 (target) session: agent:ops:main."
        );
        assert_eq!(
            message_context(None, Some(""), "main"),
            "Agent-to-agent message context:\nAgent 2 (target) session: main."
        );
    }

    #[test]
    fn reply_step_context_names_the_speaker_and_turn() {
        assert_eq!(
            reply_step_context(true, 1, 2, Some("main"), None, "agent:ops:main", Some("unknown")),
            "Agent-to-agent reply step:\nCurrent agent: Agent 1 (requester).\nTurn 1 of 2.\n\
             Agent 1 (requester) session: main.\nAgent 2 (target) session: agent:ops:main.\n\
             Agent 2 (target) channel: unknown.\nIf you want to stop the ping-pong, reply exactly \"REPLY_SKIP\"."
        );
        let target_turn = reply_step_context(false, 2, 5, None, None, "t", None);
        assert!(target_turn.starts_with("Agent-to-agent reply step:\nCurrent agent: Agent 2 (target).\nTurn 2 of 5.\n"));
        assert!(!target_turn.contains("channel"));
    }

    #[test]
    fn announce_step_context_trims_the_request_and_marks_missing_replies() {
        assert_eq!(
            announce_step_context(Some("main"), Some("telegram"), "agent:ops:main", Some("discord"), "  hi ✨\n", Some("r1"), Some("r2")),
            "Agent-to-agent announce step:\nAgent 1 (requester) session: main.\nAgent 1 (requester) channel: telegram.\n\
             Agent 2 (target) session: agent:ops:main.\nAgent 2 (target) channel: discord.\nOriginal request: hi ✨\n\
             Round 1 reply: r1\nLatest reply: r2\nIf you want to remain silent, reply exactly \"ANNOUNCE_SKIP\".\n\
             Any other reply will be posted to the target channel.\n\
             After this reply, the agent-to-agent conversation is over."
        );
        let missing = announce_step_context(None, None, "t", None, "", None, Some(""));
        assert!(
            missing.contains("\nOriginal request: \nRound 1 reply: (not available).\nLatest reply: (not available).\n")
        );
    }

    #[test]
    fn skip_tokens_match_trimmed_exact_and_case_sensitive() {
        assert!(is_reply_skip("  REPLY_SKIP \n"));
        assert!(!is_reply_skip("REPLY_SKIP now"));
        assert!(!is_reply_skip("reply_skip"));
        assert!(!is_reply_skip(""));
        assert!(is_announce_skip("\u{3000}ANNOUNCE_SKIP\t"));
        assert!(!is_announce_skip("ANNOUNCE_SKIP."));
        assert_eq!(ANNOUNCE_STEP_MESSAGE, "Agent-to-agent announce step.");
    }

    #[test]
    fn p20_error_outcome_trigger_has_failure_findings_and_stats() {
        let label = status_label(&SubagentOutcome::Error(Some("boom".into())));
        let text = subagent_trigger(
            task_title(None, Some("crunch numbers")),
            &label,
            Some("partial result"),
            "Stats: runtime 2s",
        );
        assert_eq!(
            text,
            "A background task \"crunch numbers\" just failed: boom.\n\nFindings:\npartial result\n\nStats: runtime 2s\n\n\
             Summarize this naturally for the user. Keep it brief (1-2 sentences). Flow it into the conversation naturally.\n\
             Do not mention technical details like tokens, stats, or that this was a background task.\n\
             You can respond with NO_REPLY if no announcement is needed (e.g., internal task with no user-facing result)."
        );
    }

    #[test]
    fn p21_status_labels_and_no_output() {
        assert_eq!(status_label(&SubagentOutcome::Ok), "completed successfully");
        assert_eq!(status_label(&SubagentOutcome::Unknown), "finished with unknown status");
        assert_eq!(status_label(&SubagentOutcome::Timeout), "timed out");
        assert_eq!(status_label(&SubagentOutcome::Error(None)), "failed: unknown error");
        assert_eq!(status_label(&SubagentOutcome::Error(Some(String::new()))), "failed: unknown error");
        let text = subagent_trigger("job", "completed successfully", None, "Stats: x");
        assert!(text.contains("\"job\" just completed successfully.\n\nFindings:\n(no output)\n\nStats: x\n"));
        assert!(subagent_trigger("job", "timed out", Some(""), "s").contains("Findings:\n(no output)\n"));
    }

    #[test]
    fn task_title_prefers_label_then_task_then_a_default() {
        assert_eq!(task_title(Some("nightly"), Some("do it")), "nightly");
        assert_eq!(task_title(Some(""), Some("do it")), "do it");
        assert_eq!(task_title(None, None), "background task");
        assert!(subagent_trigger("", "timed out", None, "s")
            .starts_with("A background task \"background task\" just timed out."));
    }

    #[test]
    fn subagent_prompt_structure_and_dynamic_lines() {
        let prompt = subagent_system_prompt(
            "  sum\n the\t numbers ",
            Some("calc"),
            Some("agent:main:main"),
            Some("discord"),
            "agent:main:subagent:42",
        );
        let lines: Vec<&str> = prompt.split('\n').collect();
        let headings: Vec<&str> = lines.iter().copied().filter(|l| l.starts_with('#')).collect();
        assert_eq!(
            headings,
            [
                "# Subagent Context",
                "## Your Role",
                "## Rules",
                "## Output Format",
                "## What You DON'T Do",
                "## Session Context"
            ]
        );
        assert_eq!(lines.len(), 34);
        assert_eq!(lines[5], "- You were created to handle: sum the numbers");
        assert_eq!(
            lines[lines.len() - 6..],
            [
                "## Session Context",
                "- Label: calc",
                "- Requester session: agent:main:main.",
                "- Requester channel: discord.",
                "- Your session: agent:main:subagent:42.",
                ""
            ]
        );
        assert!(prompt.ends_with(".\n"));
        // counts of the fixed parts: 2 role bullets, 4 numbered rules, 3 output bullets, 5 don'ts
        let section = |h: &str| -> Vec<&str> {
            let start = lines.iter().position(|l| *l == h).unwrap_or(0) + 1;
            lines[start..].iter().copied().take_while(|l| !l.is_empty()).collect()
        };
        assert_eq!(section("## Your Role").len(), 3);
        assert_eq!(section("## Rules").iter().filter(|l| l.contains(". **")).count(), 4);
        assert_eq!(section("## Output Format").iter().filter(|l| l.starts_with("- ")).count(), 3);
        assert_eq!(section("## What You DON'T Do").len(), 5);
    }

    #[test]
    fn subagent_prompt_empty_task_uses_placeholder_and_omits_absent_lines() {
        let prompt = subagent_system_prompt(" \n\t ", None, Some(""), None, "agent:ops:subagent:x");
        assert!(prompt.contains("- You were created to handle: {{TASK_DESCRIPTION}}\n"));
        assert!(prompt.ends_with("## Session Context\n- Your session: agent:ops:subagent:x.\n"));
        assert!(!prompt.contains("- Label:"));
        assert!(!prompt.contains("Requester"));
    }

    #[test]
    fn subagent_prompt_keeps_unicode_task_text() {
        let prompt = subagent_system_prompt("résumé\u{3000}für 👩‍💻", None, None, None, "k");
        assert!(prompt.contains("- You were created to handle: résumé für 👩‍💻\n"));
    }
}
