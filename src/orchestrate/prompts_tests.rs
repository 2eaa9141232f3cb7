//! Tests of `prompts`.

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
        announce_step_context(
            Some("main"),
            Some("telegram"),
            "agent:ops:main",
            Some("discord"),
            "  hi ✨\n",
            Some("r1"),
            Some("r2")
        ),
        "Agent-to-agent announce step:\nAgent 1 (requester) session: main.\nAgent 1 (requester) channel: telegram.\n\
         Agent 2 (target) session: agent:ops:main.\nAgent 2 (target) channel: discord.\nOriginal request: hi ✨\n\
         Round 1 reply: r1\nLatest reply: r2\nIf you want to remain silent, reply exactly \"ANNOUNCE_SKIP\".\n\
         Any other reply will be posted to the target channel.\n\
         After this reply, the agent-to-agent conversation is over."
    );
    let missing = announce_step_context(None, None, "t", None, "", None, Some(""));
    assert!(missing.contains("\nOriginal request: \nRound 1 reply: (not available).\nLatest reply: (not available).\n"));
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
    let text =
        subagent_trigger(task_title(None, Some("crunch numbers")), &label, Some("partial result"), "Stats: runtime 2s");
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
