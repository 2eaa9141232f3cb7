//! Tests of `stats`.

use super::*;

const CHILD: &str = "agent:main:subagent:0f1e";

fn p27() -> RunStats<'static> {
    RunStats {
        started_at: Some(1_000.0),
        ended_at: Some(66_000.0),
        input_tokens: Some(10_000.0),
        output_tokens: Some(2_345.0),
        cost: Some(ModelCost { input: 3.0, output: 15.0 }),
        session_key: CHILD,
        ..RunStats::default()
    }
}

#[test]
fn p27_usage_without_total_runtime_65s_and_cost_3_15_per_million() {
    assert_eq!(
        stats_line(&p27()),
        "Stats: runtime 1m5s • tokens 12.3k (in 10.0k / out 2.3k) • est $0.07 • sessionKey agent:main:subagent:0f1e"
    );
}

#[test]
fn p27_cost_below_a_cent_shows_four_decimals() {
    // 0.004 USD: 1 000 input tokens at 4 per million
    let stats = RunStats {
        input_tokens: Some(1_000.0),
        output_tokens: Some(0.0),
        cost: Some(ModelCost { input: 4.0, output: 0.0 }),
        ..p27()
    };
    assert!(stats_line(&stats).contains(" • est $0.0040 • "));
    assert_eq!(format_usd(0.0), Some("$0.0000".to_string()));
    assert_eq!(format_usd(f64::INFINITY), None);
}

#[test]
fn p27_no_usage_gives_tokens_na_and_no_cost() {
    let stats = RunStats { input_tokens: None, output_tokens: None, ..p27() };
    assert_eq!(stats_line(&stats), "Stats: runtime 1m5s • tokens n/a • sessionKey agent:main:subagent:0f1e");
}

#[test]
fn p27_no_times_gives_runtime_na() {
    let stats = RunStats { started_at: None, ..p27() };
    assert!(stats_line(&stats).starts_with("Stats: runtime n/a • tokens"));
}

#[test]
fn total_tokens_wins_and_a_missing_side_reads_na() {
    let stats = RunStats { total_tokens: Some(500.0), input_tokens: None, output_tokens: Some(0.0), ..p27() };
    assert!(stats_line(&stats).contains("tokens 500 (in n/a / out 0)"));
}

#[test]
fn session_id_and_transcript_are_appended_when_known() {
    let stats = RunStats { session_id: Some("s-1"), transcript_path: Some("/st/s-1.jsonl"), ..p27() };
    assert!(stats_line(&stats)
        .ends_with(" • sessionKey agent:main:subagent:0f1e • sessionId s-1 • transcript /st/s-1.jsonl"));
    let empty = RunStats { session_id: Some(""), transcript_path: Some(""), ..p27() };
    assert!(stats_line(&empty).ends_with("sessionKey agent:main:subagent:0f1e"));
}

#[test]
fn duration_rounds_to_seconds_and_picks_the_two_largest_units() {
    assert_eq!(format_duration_ms(Some(65_000.0)), "1m5s");
    assert_eq!(format_duration_ms(Some(3_600_000.0 + 125_000.0)), "1h2m");
    assert_eq!(format_duration_ms(Some(1_499.0)), "1s");
    assert_eq!(format_duration_ms(Some(59_500.0)), "1m0s");
    assert_eq!(format_duration_ms(Some(400.0)), "0s");
    assert_eq!(format_duration_ms(Some(0.0)), "n/a");
    assert_eq!(format_duration_ms(None), "n/a");
    assert_eq!(format_duration_ms(Some(f64::NAN)), "n/a");
}

#[test]
fn runtime_is_clamped_at_zero_when_the_clock_went_backwards() {
    assert_eq!(runtime_ms(Some(10.0), Some(5.0)), Some(0.0));
    assert_eq!(runtime_ms(None, Some(5.0)), None);
}

#[test]
fn token_counts_use_k_and_m_with_javascript_tofixed_rounding() {
    assert_eq!(format_tokens(None), "0");
    assert_eq!(format_tokens(Some(0.0)), "0");
    assert_eq!(format_tokens(Some(f64::NAN)), "0");
    assert_eq!(format_tokens(Some(999.4)), "999");
    assert_eq!(format_tokens(Some(999.5)), "1000");
    assert_eq!(format_tokens(Some(1_000.0)), "1.0k");
    assert_eq!(format_tokens(Some(2_345.0)), "2.3k");
    // 2.35 is stored as 2.35000000000000008882 → rounds up, as toFixed does
    assert_eq!(format_tokens(Some(2_350.0)), "2.4k");
    assert_eq!(format_tokens(Some(12_345.0)), "12.3k");
    assert_eq!(format_tokens(Some(999_999.0)), "1000.0k");
    assert_eq!(format_tokens(Some(1_250_000.0)), "1.3m");
}
