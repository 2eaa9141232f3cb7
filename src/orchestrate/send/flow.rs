//! The agent-to-agent flow after a send's primary run (§5.5): the reply-back loop between
//! requester and target, then the announce step, whose reply goes to the outbox. Its failures
//! become events, never errors.

use super::route::announce_route;
use super::*;
use std::sync::Arc;

use serde_json::{json, Map, Value};

use crate::error::{Error, Result};
use crate::host::{Lane, RunOptions};
use crate::js::js_trim;
use crate::orchestrate::outbox::A2A_ANNOUNCE;
use crate::orchestrate::runs::{Provenance, RunSnapshot, RunSpec, RunStatus};
use crate::orchestrate::state::Orchestrator;
use crate::orchestrate::task::blocking;
use crate::orchestrate::{prompts, prompts9};

pub(super) enum Primary {
    /// read already (wait mode): `None` when the run left no reply
    Reply(Option<String>),
    /// wait for the run (fire-and-forget), at most the step wait
    Wait(String),
    /// wait for the run however long it takes (after a `timeout` result, DECISIONS.md #1)
    UntilEnd(String),
}
/// One run of the flow (a reply step or the announce step) and what came of it.
pub(super) struct Step {
    run_id: Option<String>,
    /// ok | error | timeout | chain_limit | blocked
    status: &'static str,
    /// the run's reply, when it ended ok and left one
    reply: Option<String>,
}

/// The agent-to-agent flow after the primary run (§5.5): the reply-back loop between requester
/// and target, then the announce step on the target, whose reply goes to the outbox.
pub(super) struct Flow {
    pub(super) orch: Arc<Orchestrator>,
    pub(super) target_key: String,
    pub(super) target_display: String,
    /// the original message (trimmed)
    pub(super) message: String,
    pub(super) timing: Timing,
    pub(super) max_turns: u32,
    pub(super) max_chain_turns: u32,
    /// the run timeout of the flow's runs (agents.defaults.timeoutSeconds)
    pub(super) run_timeout_ms: u64,
    /// canonical
    pub(super) requester_key: Option<String>,
    /// as the caller gave it (prompt lines)
    pub(super) requester_raw: Option<String>,
    pub(super) requester_channel: Option<String>,
    pub(super) chain_id: String,
}

impl Flow {
    /// Runs the flow to its end; failures are reported as events (`a2a.error`), never returned.
    /// `a2a.end` closes every flow, with the reason it stopped.
    pub(super) async fn run(self, primary: Primary) {
        let (reason, error) = match self.go(primary).await {
            Ok(reason) => (reason, None),
            Err(e) => ("failed", Some(e.message().to_owned())),
        };
        let key = Some(self.target_key.as_str());
        if let Some(error) = &error {
            self.orch.emit("a2a.error", None, key, json!({ "error": error }));
        }
        self.orch.emit("a2a.end", None, key, json!({ "reason": reason, "chainId": self.chain_id }));
    }

    /// The primary run's reply: as read already, or once the run ended ok.
    pub(super) async fn primary_reply(&self, primary: Primary) -> Result<Option<String>> {
        let engine = self.orch.engine().clone();
        Ok(match primary {
            Primary::Reply(reply) => reply,
            Primary::Wait(run_id) => {
                let snap = self.orch.runs().wait(&engine, &run_id, self.timing.step_wait_ms()).await?;
                self.reply_if_ok(&snap, &self.target_key).await?
            }
            Primary::UntilEnd(run_id) => {
                let snap = self.until_end(&run_id).await?;
                self.reply_if_ok(&snap, &self.target_key).await?
            }
        })
    }

    /// Whether the 2026.9 texts and skip tokens apply (every non-deliverable token ends the flow).
    fn v9(&self) -> bool {
        self.orch.engine().config().contract == crate::contract::Contract::V2026_9
    }

    fn is_skip(&self, reply: &str, token_2026_1: fn(&str) -> bool) -> bool {
        if self.v9() {
            crate::tools::send9::is_non_deliverable(reply)
        } else {
            token_2026_1(reply)
        }
    }

    async fn go(&self, primary: Primary) -> Result<&'static str> {
        let engine = self.orch.engine().clone();
        let round_one = self.primary_reply(primary).await?;
        let Some(round_one) = round_one else { return Ok("no reply") };
        if self.v9() && crate::tools::send9::is_non_deliverable(&round_one) {
            return Ok("no reply");
        }

        let (e, internal, display) = (engine.clone(), self.target_key.clone(), self.target_display.clone());
        let route = blocking(move || Ok(announce_route(&e, &internal, &display))).await?;
        let target_channel = route.as_ref().map_or("unknown", |r| r.channel.as_str()).to_owned();

        let mut latest = round_one.clone();
        let requester = self.requester_key.clone().filter(|k| *k != self.target_key);
        if let (Some(requester_key), true) = (requester, self.max_turns > 0) {
            let mut incoming = round_one.clone();
            let mut requester_speaks = true;
            for turn in 1..=self.max_turns {
                let (speaker, listener) = if requester_speaks {
                    (requester_key.clone(), self.target_key.clone())
                } else {
                    (self.target_key.clone(), requester_key.clone())
                };
                let context = if self.v9() {
                    prompts9::reply_step_context(
                        requester_speaks,
                        turn,
                        self.max_turns,
                        &self.parties9(&target_channel),
                    )
                } else {
                    prompts::reply_step_context(
                        requester_speaks,
                        turn,
                        self.max_turns,
                        self.requester_raw.as_deref(),
                        self.requester_channel.as_deref(),
                        &self.target_display,
                        Some(&target_channel),
                    )
                };
                let step = self.step(&speaker, incoming.clone(), context, Some(listener)).await?;
                let skipped = step.reply.as_deref().is_none_or(|r| self.is_skip(r, prompts::is_reply_skip));
                self.orch.emit(
                    "a2a.turn",
                    step.run_id.as_deref(),
                    Some(&speaker),
                    json!({
                        "turn": turn,
                        "maxTurns": self.max_turns,
                        "speaker": if requester_speaks { "requester" } else { "target" },
                        "status": step.status,
                        "skipped": skipped,
                    }),
                );
                match step.reply {
                    Some(reply) if !skipped => {
                        latest = reply.clone();
                        incoming = reply;
                        requester_speaks = !requester_speaks;
                    }
                    _ => break,
                }
            }
        }

        let context = if self.v9() {
            prompts9::announce_step_context(
                &self.parties9(&target_channel),
                &self.message,
                Some(&round_one),
                Some(&latest),
            )
        } else {
            prompts::announce_step_context(
                self.requester_raw.as_deref(),
                self.requester_channel.as_deref(),
                &self.target_display,
                Some(&target_channel),
                &self.message,
                Some(&round_one),
                Some(&latest),
            )
        };
        let step = self
            .step(&self.target_key, prompts::ANNOUNCE_STEP_MESSAGE.to_owned(), context, self.requester_key.clone())
            .await?;
        let key = Some(self.target_key.as_str());
        let skip = |reason: &str| json!({ "status": "skipped", "reason": reason });
        if step.status != "ok" {
            self.orch.emit("a2a.announce", step.run_id.as_deref(), key, skip(step.status));
            return Ok("announce step did not complete");
        }
        let text = step.reply.as_deref().map(js_trim).unwrap_or_default().to_owned();
        if text.is_empty() || self.is_skip(&text, prompts::is_announce_skip) {
            let reason = if text.is_empty() { "no reply" } else { prompts::ANNOUNCE_SKIP };
            self.orch.emit("a2a.announce", step.run_id.as_deref(), key, skip(reason));
            return Ok("announce skipped");
        }
        let Some(route) = route else {
            self.orch.emit("a2a.announce", step.run_id.as_deref(), key, skip("no announce target"));
            return Ok("no announce target");
        };
        let idempotency_key = new_id();
        let mut item = Map::new();
        item.insert("channel".into(), route.channel.clone().into());
        item.insert("to".into(), route.to.clone().into());
        if let Some(a) = &route.account_id {
            item.insert("accountId".into(), a.clone().into());
        }
        if let Some(t) = &route.thread_id {
            item.insert("threadId".into(), t.clone().into());
        }
        item.insert("message".into(), text.into());
        item.insert("idempotencyKey".into(), idempotency_key.clone().into());
        item.insert("sessionKey".into(), self.target_key.clone().into());
        item.insert("kind".into(), A2A_ANNOUNCE.into());
        let item = Value::Object(item);
        let (outbox, ik, sk) = (self.orch.outbox().clone(), idempotency_key.clone(), self.target_key.clone());
        blocking(move || outbox.enqueue(&ik, A2A_ANNOUNCE, Some(&sk), &item)).await?;
        self.orch.emit(
            "a2a.announce",
            step.run_id.as_deref(),
            key,
            json!({
                "status": "queued",
                "idempotencyKey": idempotency_key,
                "channel": route.channel,
                "to": route.to,
            }),
        );
        Ok("announced")
    }

    fn parties9<'a>(&'a self, target_channel: &'a str) -> prompts9::Parties<'a> {
        prompts9::Parties {
            requester_known: self.requester_key.is_some(),
            requester_channel: self.requester_channel.as_deref(),
            target_channel: Some(target_channel),
        }
    }

    /// Waits until a run has ended, however long (it ends at the latest at its own timeout),
    /// unless the store closes or the run is unknown.
    async fn until_end(&self, run_id: &str) -> Result<RunSnapshot> {
        let engine = self.orch.engine().clone();
        loop {
            let snap = self.orch.runs().wait(&engine, run_id, MAX_STEP_WAIT_MS).await?;
            if ended(&snap) || snap.status != RunStatus::Timeout || snap.started_at.is_none() {
                return Ok(snap);
            }
            if self.orch.runs().is_closed() {
                return Err(Error::closed());
            }
        }
    }

    /// The run's reply when it ended ok.
    async fn reply_if_ok(&self, snap: &RunSnapshot, session_key: &str) -> Result<Option<String>> {
        if snap.status != RunStatus::Ok {
            return Ok(None);
        }
        latest_reply(self.orch.engine(), session_key, &snap.run_id).await
    }

    /// One run of the flow on `session_key` (§5.5 step 6): started in the chain (unless its
    /// budget is used up or the session's policy denies it), waited for at most the step wait,
    /// its reply read when it ended ok.
    async fn step(&self, session_key: &str, message: String, context: String, source: Option<String>) -> Result<Step> {
        let spec = RunSpec {
            session_key: session_key.to_owned(),
            message,
            provenance: Provenance { kind: "inter_session", source_session_key: source },
            options: RunOptions {
                extra_system_prompt: Some(context),
                channel: Some(WEBCHAT.to_owned()),
                ..RunOptions::new(Lane::Nested, self.run_timeout_ms, self.chain_id.clone())
            },
            chain_limit: Some(self.max_chain_turns),
        };
        let run_id = match start_checked(&self.orch, spec).await? {
            Started::Run(id) => id,
            Started::ChainFull => return Ok(Step { run_id: None, status: "chain_limit", reply: None }),
            Started::Blocked => return Ok(Step { run_id: None, status: "blocked", reply: None }),
        };
        let snap = self.orch.runs().wait(self.orch.engine(), &run_id, self.timing.step_wait_ms()).await?;
        let status = match snap.status {
            RunStatus::Ok => "ok",
            RunStatus::Error => "error",
            RunStatus::Timeout | RunStatus::Running => "timeout",
        };
        let reply = self.reply_if_ok(&snap, session_key).await?;
        Ok(Step { run_id: Some(run_id), status, reply })
    }
}
