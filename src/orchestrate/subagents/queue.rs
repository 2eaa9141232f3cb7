//! The per-requester announce queue's data and settings (§6.8): the modes (steer, followup,
//! collect, interrupt), the cap with its drop policy, a queued item, and the overflow summary.
//! Pure data: what is done with a queue is `drain`'s.

use std::collections::VecDeque;
use std::time::Instant;

use serde_json::Value;
use tokio::sync::oneshot;

use crate::config::Config;
use crate::entry::{self, DeliveryContext, Entry};
use crate::js::collapse_whitespace;
use crate::orchestrate::outbox::Attempt;

/// The queue mode of §6.8, normalized.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum QueueMode {
    Steer,
    SteerBacklog,
    Interrupt,
    Followup,
    Collect,
}

pub(super) fn normalize_mode(raw: &str) -> Option<QueueMode> {
    Some(match raw.trim().to_lowercase().as_str() {
        "queue" | "queued" | "steer" | "steering" => QueueMode::Steer,
        "interrupt" | "interrupts" | "abort" => QueueMode::Interrupt,
        "followup" | "follow-ups" | "followups" => QueueMode::Followup,
        "collect" | "coalesce" => QueueMode::Collect,
        "steer+backlog" | "steer-backlog" | "steer_backlog" => QueueMode::SteerBacklog,
        _ => return None,
    })
}

/// What to do when the cap is reached.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DropPolicy {
    Old,
    New,
    Summarize,
}

pub(super) fn normalize_drop(raw: &str) -> Option<DropPolicy> {
    Some(match raw.trim().to_lowercase().as_str() {
        "old" | "oldest" => DropPolicy::Old,
        "new" | "newest" => DropPolicy::New,
        "summarize" | "summary" => DropPolicy::Summarize,
        _ => return None,
    })
}

/// The requester's queue settings (§6.8).
#[derive(Debug, Clone, PartialEq)]
pub struct QueueSettings {
    pub mode: QueueMode,
    pub debounce_ms: u64,
    pub cap: usize,
    pub drop: DropPolicy,
}

/// §6.8: the entry's own settings, then the config's per-channel and general ones, then the
/// defaults (collect, 1000 ms, 20, summarize).
pub fn queue_settings(cfg: &Config, entry: &Entry) -> QueueSettings {
    let channel =
        entry::text_field(entry, "channel").or(entry::text_field(entry, "lastChannel")).map(str::to_lowercase);
    let q = &cfg.queue;
    let by_channel = |m: &std::collections::BTreeMap<String, String>| channel.as_ref().and_then(|c| m.get(c)).cloned();
    let mode = [entry::text_field(entry, "queueMode").map(str::to_owned), by_channel(&q.by_channel), q.mode.clone()]
        .into_iter()
        .flatten()
        .find_map(|m| normalize_mode(&m))
        .unwrap_or(QueueMode::Collect);
    let number = |k: &str| entry.get(k).and_then(Value::as_f64).filter(|f| f.is_finite() && *f >= 0.0);
    let debounce_ms = number("queueDebounceMs")
        .map(|f| f.floor() as u64)
        .or_else(|| channel.as_ref().and_then(|c| q.debounce_ms_by_channel.get(c)).copied())
        .or(q.debounce_ms)
        .unwrap_or(1000);
    let cap =
        number("queueCap").map(|f| f.floor().max(1.0) as usize).or(q.cap.map(|c| c.max(1) as usize)).unwrap_or(20);
    let drop = [entry::text_field(entry, "queueDrop").map(str::to_owned), q.drop.clone()]
        .into_iter()
        .flatten()
        .find_map(|d| normalize_drop(&d))
        .unwrap_or(DropPolicy::Summarize);
    QueueSettings { mode, debounce_ms, cap, drop }
}
pub(super) struct QueueItem {
    pub(super) prompt: String,
    pub(super) summary_line: String,
    pub(super) origin: DeliveryContext,
    pub(super) origin_key: Option<String>,
    /// the announce idempotency key
    pub(super) key: String,
    pub(super) child_key: String,
    pub(super) chain: String,
    pub(super) done: Option<oneshot::Sender<Attempt>>,
}

impl QueueItem {
    pub(super) fn finish(&mut self, a: Attempt) {
        if let Some(tx) = self.done.take() {
            let _ = tx.send(a);
        }
    }
}

pub(super) struct AnnounceQueue {
    pub(super) settings: QueueSettings,
    pub(super) items: VecDeque<QueueItem>,
    pub(super) last_enqueued: Instant,
    pub(super) dropped: usize,
    pub(super) summary_lines: Vec<String>,
}

pub(super) fn origin_key(o: &DeliveryContext) -> Option<String> {
    match (&o.channel, &o.to) {
        (Some(c), Some(t)) => Some(format!(
            "{c}|{t}|{}|{}",
            o.account_id.clone().unwrap_or_default(),
            thread_text(&o.thread_id).unwrap_or_default()
        )),
        _ => None,
    }
}

pub(super) fn summary_line(text: &str) -> String {
    let line = collapse_whitespace(text);
    if line.chars().count() > 160 {
        let cut: String = line.chars().take(159).collect();
        format!("{}…", cut.trim_end())
    } else {
        line
    }
}

/// `[Queue overflow] Dropped <n> announce(s) due to cap.` with the summary lines.
pub fn overflow_summary(dropped: usize, lines: &[String]) -> String {
    let noun = if dropped == 1 { "announce" } else { "announces" };
    let mut out = vec![format!("[Queue overflow] Dropped {dropped} {noun} due to cap.")];
    if !lines.is_empty() {
        out.push("Summary:".to_owned());
        out.extend(lines.iter().map(|l| format!("- {l}")));
    }
    out.join("\n")
}

pub fn thread_text(v: &Option<Value>) -> Option<String> {
    match v {
        Some(Value::String(s)) if !s.is_empty() => Some(s.clone()),
        Some(Value::Number(n)) => Some(n.to_string()),
        _ => None,
    }
}
