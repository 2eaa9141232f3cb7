//! The completion retry window of the 2026.9 contract: a completion that could not be delivered
//! is tried again after 15 s, doubling, at most 5 min apart, plus up to 20 % jitter, until 30 min
//! after the child's run ended; then it is *blocked*: kept visible (task `blocked`, delivery
//! `failed`) for 7 days. 25 blocked completions or more raise the backlog warning. The numbers
//! are the defaults of `session.outbox.completionRetry` (`firstMs`, `maxMs`, `expireMs`). Pure
//! arithmetic; the outbox applies it.

/// How completions are retried.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RetryWindow {
    pub first_ms: u64,
    pub max_ms: u64,
    pub expire_ms: u64,
}

impl Default for RetryWindow {
    fn default() -> Self {
        RetryWindow { first_ms: 15_000, max_ms: 300_000, expire_ms: 1_800_000 }
    }
}

/// The jitter share of a delay (2026.9: up to 20 % more).
pub const JITTER: f64 = 0.2;
/// How long a blocked completion stays visible.
pub const BLOCKED_RETENTION_MS: i64 = 7 * 24 * 60 * 60 * 1000;
/// Blocked completions from which the backlog warning is raised.
pub const BACKLOG_WARNING: u64 = 25;

impl RetryWindow {
    /// The wait after `tries` failed tries (≥ 1): `first · 2^(tries−1)` capped at `max`, plus
    /// `jitter` (0..1) × 20 % of it, capped at `max` again.
    pub fn delay_ms(&self, tries: u32, jitter: f64) -> u64 {
        let factor = 1u64.checked_shl(tries.saturating_sub(1)).unwrap_or(u64::MAX);
        let base = self.first_ms.saturating_mul(factor).min(self.max_ms);
        let extra = (base as f64 * JITTER * jitter.clamp(0.0, 1.0)).round() as u64;
        base.saturating_add(extra).min(self.max_ms)
    }

    /// When the next try is due, or `None` when the window (from `window_start`, the run's end)
    /// is over and the completion is blocked.
    pub fn next_attempt(&self, tries: u32, window_start: i64, now: i64, jitter: f64) -> Option<i64> {
        let deadline = window_start.saturating_add(self.expire_ms as i64);
        if now >= deadline {
            return None;
        }
        Some(now.saturating_add(self.delay_ms(tries, jitter) as i64).min(deadline))
    }
}

/// The task summary of a blocked completion (2026.9's words).
pub fn blocked_summary(reason: Option<&str>) -> String {
    match reason.map(|r| r.split_whitespace().collect::<Vec<_>>().join(" ")).filter(|r| !r.is_empty()) {
        Some(r) => {
            format!("Required completion delivery failed before reaching the requester: {}.", r.trim_end_matches('.'))
        }
        None => "Required completion delivery failed before reaching the requester.".to_owned(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn retries_start_at_15_s_double_and_stop_growing_at_5_min() {
        let w = RetryWindow::default();
        assert_eq!(
            [1, 2, 3, 4, 5, 6, 40].map(|n| w.delay_ms(n, 0.0)),
            [15_000, 30_000, 60_000, 120_000, 240_000, 300_000, 300_000]
        );
        assert_eq!(w.delay_ms(1, 1.0), 18_000, "at most 20 % more");
        assert_eq!(w.delay_ms(5, 1.0), 288_000);
        assert_eq!(w.delay_ms(6, 1.0), 300_000, "the jitter never passes the cap");
    }

    #[test]
    fn the_window_closes_30_min_after_the_run_ended() {
        let w = RetryWindow::default();
        assert_eq!(w.next_attempt(1, 0, 1_000, 0.0), Some(16_000));
        assert_eq!(w.next_attempt(9, 0, 1_700_000, 0.0), Some(1_800_000), "never past the deadline");
        assert_eq!(w.next_attempt(9, 0, 1_800_000, 0.0), None);
        let short = RetryWindow { first_ms: 10, max_ms: 40, expire_ms: 100 };
        assert_eq!(short.next_attempt(3, 50, 60, 0.0), Some(100));
        assert_eq!(short.next_attempt(3, 50, 150, 0.0), None);
    }

    #[test]
    fn the_config_defaults_are_the_gateways_window() {
        let d = RetryWindow::default();
        assert_eq!(crate::config::Config::default().completion_retry_ms, (d.first_ms, d.max_ms, d.expire_ms));
        let cfg = crate::config::Config::from_json(
            &serde_json::json!({"session": {"outbox": {"completionRetry": {"firstMs": 5, "expireMs": 60}}}}),
        )
        .unwrap();
        assert_eq!(cfg.completion_retry_ms, (5, 300_000, 60));
    }

    #[test]
    fn a_blocked_completion_says_why() {
        assert_eq!(
            blocked_summary(Some("requester  offline")),
            "Required completion delivery failed before reaching the requester: requester offline."
        );
        assert_eq!(blocked_summary(None), "Required completion delivery failed before reaching the requester.");
    }
}
