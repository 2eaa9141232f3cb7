//! What an import reports (API.md §5.1): the counts it added, by layout, what it left out
//! (`skipped`) and which entries met on one key (`merged`). Plain data; the import decides.

use std::collections::BTreeMap;

use serde_json::Value;

use super::Skipped;

/// The state folder layouts an import reads.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Layout {
    /// `sessions.json` files with JSONL transcripts, `subagents/runs.json` (2026.1)
    Json,
    /// per-agent `openclaw-agent.sqlite` and the global `state/openclaw.sqlite` (2026.9)
    Sqlite,
}

impl Layout {
    pub fn name(self) -> &'static str {
        match self {
            Layout::Json => "2026.1",
            Layout::Sqlite => "2026.9",
        }
    }
}

/// What an import added from one layout.
#[derive(Debug, Default, Clone, PartialEq)]
pub struct LayoutCounts {
    pub sessions: u64,
    pub messages: u64,
    pub runs: u64,
    pub tasks: u64,
}

/// What an import added, and what it left out.
#[derive(Debug, Default, Clone, PartialEq)]
pub struct ImportReport {
    pub sessions: u64,
    pub messages: u64,
    pub runs: u64,
    /// 2026.9 task ledger rows
    pub tasks: u64,
    pub skipped: Vec<Skipped>,
    pub merged: Vec<Merged>,
    /// the layouts found, each with what it added
    pub layouts: BTreeMap<Layout, LayoutCounts>,
}

/// An entry that landed on a key another entry of the folder also landed on: dropped for the
/// newer one (the gateway's rule), or, under `session.scope: "global"`, kept under a key of its
/// own agent (`kept_as`), so that no agent's main session becomes unreachable.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Merged {
    /// the store file, relative to the folder
    pub file: String,
    /// its key as the file has it
    pub key: String,
    pub session_id: String,
    /// the key it landed on
    pub into: String,
    /// where it is kept instead, when it is
    pub kept_as: Option<String>,
}

impl ImportReport {
    pub fn to_json(&self) -> Value {
        let merged = self.merged.iter().map(|m| {
            let mut o = serde_json::json!({"file": m.file, "key": m.key, "sessionId": m.session_id, "into": m.into});
            if let Some(k) = &m.kept_as {
                o["keptAs"] = Value::from(k.clone());
            }
            o
        });
        let layouts = self.layouts.iter().map(|(l, c)| {
            serde_json::json!({"layout": l.name(), "sessions": c.sessions, "messages": c.messages, "runs": c.runs, "tasks": c.tasks})
        });
        serde_json::json!({
            "sessions": self.sessions,
            "messages": self.messages,
            "runs": self.runs,
            "tasks": self.tasks,
            "layouts": layouts.collect::<Vec<_>>(),
            "skipped": self.skipped.iter().map(Skipped::to_json).collect::<Vec<_>>(),
            "merged": merged.collect::<Vec<_>>(),
        })
    }

    /// Counts what `layout` added (and notes that it was found).
    pub fn add(&mut self, layout: Layout, sessions: u64, messages: u64, runs: u64, tasks: u64) {
        let c = self.layouts.entry(layout).or_default();
        c.sessions += sessions;
        c.messages += messages;
        c.runs += runs;
        c.tasks += tasks;
        self.sessions += sessions;
        self.messages += messages;
        self.runs += runs;
        self.tasks += tasks;
    }
}
