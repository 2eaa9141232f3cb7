//! Tests of `reply`.

use super::*;
use serde_json::json;

fn assistant(blocks: &[&str]) -> Value {
    let content: Vec<Value> = blocks.iter().map(|t| json!({"type": "text", "text": t})).collect();
    json!({"role": "assistant", "content": content})
}

#[test]
fn d23_think_section_is_removed_and_blocks_join_without_separator() {
    let messages = [assistant(&["Hi ", "<think>secret</think>there"])];
    assert_eq!(latest_assistant_reply(&messages).as_deref(), Some("Hi there"));
}

#[test]
fn d23_minimax_xml_and_tool_call_markers_are_removed() {
    let minimax = "Done.<minimax:tool_call><invoke name=\"search\"><parameter name=\"q\">x</parameter></invoke></minimax:tool_call>";
    let marker = "[Tool Call: foo (ID: 1)]\nArguments: {\"a\": [1, {\"b\": \"]\"}]}\nAll good.";
    let messages = [assistant(&[minimax, " ", marker])];
    assert_eq!(latest_assistant_reply(&messages).as_deref(), Some("Done.All good."));
}

#[test]
fn tool_results_and_string_content_and_other_roles() {
    let result = json!({"role": "toolResult", "content": [{"type": "text", "text": "tool output"}]});
    assert_eq!(latest_assistant_reply(&[assistant(&["answer"]), result.clone()]).as_deref(), Some("answer"));
    assert_eq!(latest_assistant_reply(&[json!({"role": "assistant", "content": "plain string"})]), None);
    assert_eq!(latest_assistant_reply(&[assistant(&["old"]), json!({"role": "user", "content": []})]), None);
    assert_eq!(latest_assistant_reply(&[]), None);
    assert_eq!(latest_assistant_reply(&[result]), None);
    assert_eq!(latest_assistant_reply(&[json!("not an object")]), None);
}

#[test]
fn non_text_blocks_and_blank_results_give_no_reply() {
    let m = json!({"role": "assistant", "content": [
        {"type": "toolCall", "name": "x"}, {"type": "text", "text": 5}, {"type": "text", "text": "<think>only</think>  "}
    ]});
    assert_eq!(latest_assistant_reply(&[m]), None);
    assert_eq!(latest_assistant_reply(&[assistant(&["", "  \n"])]), None);
}

#[test]
fn unicode_text_survives_sanitizing_and_tagged_blocks_are_trimmed() {
    let messages = [assistant(&["<thinking>💭 hmm</thinking> Grüße 🌍 ", "<final>日本語</final>", " ünï "])];
    assert_eq!(latest_assistant_reply(&messages).as_deref(), Some("Grüße 🌍日本語 ünï"));
}

#[test]
fn reasoning_tags_variants() {
    assert_eq!(strip_reasoning_tags("a<THOUGHT x=1>b</thought >c"), "ac");
    assert_eq!(strip_reasoning_tags("a < antthinking >b< / antthinking>c"), "a c");
    assert_eq!(strip_reasoning_tags("keep <think>unclosed rest"), "keep");
    assert_eq!(strip_reasoning_tags("stray</think> close"), "stray close");
    assert_eq!(strip_reasoning_tags("<final>  yes  </final>"), "yes");
    assert_eq!(strip_reasoning_tags("  <thinker> is not a tag  "), "  <thinker> is not a tag  ");
    assert_eq!(strip_reasoning_tags("  no tags  "), "  no tags  ");
    assert_eq!(strip_reasoning_tags(""), "");
}

#[test]
fn minimax_stripping_needs_the_minimax_mention() {
    let plain = "<invoke name=\"x\">y</invoke> text";
    assert_eq!(strip_minimax_tool_xml(plain), plain);
    let tagged = "A<invoke>1</invoke>B<INVOKE a>2</Invoke>C</MINIMAX:TOOL_CALL><invoked>";
    assert_eq!(strip_minimax_tool_xml(tagged), "ABC<invoked>");
    assert_eq!(
        strip_minimax_tool_xml("minimax:tool_call <invoke x> never closed"),
        "minimax:tool_call <invoke x> never closed"
    );
}

#[test]
fn tool_call_marker_payload_shapes() {
    assert_eq!(strip_downgraded_tool_text("[Tool Call: a (ID: 1)]\nArguments: \"s]\\\"x\"\nafter"), "after");
    assert_eq!(strip_downgraded_tool_text("before\n[Tool Call: a (ID: 1)]\nArguments: k=v\nafter"), "before\nafter");
    assert_eq!(strip_downgraded_tool_text("x [tool call: a (ID: 2)] y"), "x y");
    // an unterminated payload is left in place
    assert_eq!(strip_downgraded_tool_text("[Tool Call: a (ID: 1)] Arguments: {\"open\": 1"), "{\"open\": 1");
    assert_eq!(strip_downgraded_tool_text("  [Tool Call without close"), "[Tool Call without close");
    assert_eq!(strip_downgraded_tool_text("  nothing here  "), "  nothing here  ");
}

#[test]
fn tool_result_blocks_run_to_the_next_tool_marker_or_the_end() {
    let text = "Start\n[Tool Result for ID 1]\nline one\nline two\n\n[Tool Result for ID 2] x\nEnd?\n\n";
    assert_eq!(strip_downgraded_tool_text(text), "Start");
    // call markers go first, so a result block then swallows the text after a later call
    let text = "Intro\n[Tool Result for ID 9]\nout\n[Tool Call: f (ID: 3)]\nArguments: {}\nreply";
    assert_eq!(strip_downgraded_tool_text(text), "Intro");
    assert_eq!(strip_downgraded_tool_text("[TOOL RESULT FOR ID 1] r\n\n[Tool x] kept"), "[Tool x] kept");
}

#[test]
fn user_facing_pass_strips_final_and_collapses_repeated_paragraphs() {
    assert_eq!(sanitize_user_facing("Same  text\n\nSame text\n\n\nOther"), "Same  text\n\nOther");
    assert_eq!(sanitize_user_facing("A\n\nB\n\nA"), "A\n\nB\n\nA");
    assert_eq!(sanitize_user_facing("< final >x</final >"), "x");
    assert_eq!(sanitize_user_facing("<final a=1>x"), "<final a=1>x");
    assert_eq!(collapse_duplicate_blocks(" one "), " one ");
}
