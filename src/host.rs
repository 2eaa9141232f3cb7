//! What the engine needs from outside (API.md §2): run one model turn in a session, deliver a
//! message to an external channel, hear about lifecycle events, and optionally steer a running
//! turn. The napi skin implements [`Host`] with the JS callbacks; `cargo test` drives the
//! orchestration with a fake host. Nothing here knows about napi.

use std::future::Future;
use std::pin::Pin;

use serde_json::{Map, Value};

/// A boxed future, as trait methods return them. The error is the callback's own text; empty
/// when it failed without one (see [`failure_text`]).
pub type HostFuture<T> = Pin<Box<dyn Future<Output = Result<T, String>> + Send + 'static>>;

/// The text to report for a failed callback: its own, or `<callback> failed without a message`
/// when it gave none. (A run that fails without a message keeps no error text, so that
/// `sessions_send` says `agent error` as the gateway does, REFERENCE.md §5.2.)
pub fn failure_text(error: String, callback: &str) -> String {
    if error.trim().is_empty() {
        format!("{callback} failed without a message")
    } else {
        error
    }
}

/// Which kind of run this is (API.md §2.1).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Lane {
    /// `sessions_send`'s primary run, its reply steps and its announce step
    Nested,
    /// a sub-agent's own run
    Subagent,
    /// a sub-agent's announce run on its requester (delivered)
    Announce,
}

impl Lane {
    pub fn as_str(self) -> &'static str {
        match self {
            Lane::Nested => "nested",
            Lane::Subagent => "subagent",
            Lane::Announce => "announce",
        }
    }
}

/// How a run is to be made: everything about it but which run and which session it is.
#[derive(Debug, Clone, PartialEq)]
pub struct RunOptions {
    pub extra_system_prompt: Option<String>,
    pub lane: Lane,
    pub deliver: bool,
    pub channel: Option<String>,
    pub to: Option<String>,
    pub account_id: Option<String>,
    pub thread_id: Option<String>,
    pub model: Option<String>,
    pub thinking: Option<String>,
    pub label: Option<String>,
    pub spawned_by: Option<String>,
    pub timeout_ms: u64,
    pub chain_id: String,
    /// 2026.9 `lightContext`: the child starts with a light bootstrap
    pub light_context: bool,
}

impl RunOptions {
    /// A run in `lane` with its timeout and chain, nothing else set.
    pub fn new(lane: Lane, timeout_ms: u64, chain_id: impl Into<String>) -> RunOptions {
        RunOptions {
            extra_system_prompt: None,
            lane,
            deliver: false,
            channel: None,
            to: None,
            account_id: None,
            thread_id: None,
            model: None,
            thinking: None,
            label: None,
            spawned_by: None,
            timeout_ms,
            chain_id: chain_id.into(),
            light_context: false,
        }
    }
}

/// One model run the engine asks the host for (`AgentRunRequest`).
#[derive(Debug, Clone, PartialEq)]
pub struct AgentRunRequest {
    pub run_id: String,
    pub idempotency_key: String,
    pub session_key: String,
    pub session_id: String,
    pub agent_id: String,
    pub message: String,
    pub options: RunOptions,
}

impl AgentRunRequest {
    /// The request as the JS callback receives it (camelCase keys, absent fields left out).
    pub fn to_json(&self) -> Value {
        let o = &self.options;
        let mut m = Map::new();
        let mut put = |k: &str, v: Option<Value>| {
            if let Some(v) = v {
                m.insert(k.into(), v);
            }
        };
        put("runId", Some(self.run_id.clone().into()));
        put("idempotencyKey", Some(self.idempotency_key.clone().into()));
        put("sessionKey", Some(self.session_key.clone().into()));
        put("sessionId", Some(self.session_id.clone().into()));
        put("agentId", Some(self.agent_id.clone().into()));
        put("message", Some(self.message.clone().into()));
        put("extraSystemPrompt", o.extra_system_prompt.clone().map(Value::from));
        put("lane", Some(o.lane.as_str().into()));
        put("deliver", Some(o.deliver.into()));
        put("channel", o.channel.clone().map(Value::from));
        put("to", o.to.clone().map(Value::from));
        put("accountId", o.account_id.clone().map(Value::from));
        put("threadId", o.thread_id.clone().map(Value::from));
        put("model", o.model.clone().map(Value::from));
        put("thinking", o.thinking.clone().map(Value::from));
        put("label", o.label.clone().map(Value::from));
        put("spawnedBy", o.spawned_by.clone().map(Value::from));
        put("timeoutMs", Some(o.timeout_ms.into()));
        put("chainId", Some(o.chain_id.clone().into()));
        put("lightContext", o.light_context.then_some(Value::Bool(true)));
        Value::Object(m)
    }
}

/// Token usage a run reports.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Usage {
    pub input: Option<f64>,
    pub output: Option<f64>,
    pub total: Option<f64>,
}

/// What a run produced (`AgentRunResult`).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct AgentRunResult {
    /// appended to the transcript in order
    pub messages: Vec<Value>,
    pub usage: Option<Usage>,
    pub model: Option<String>,
    pub provider: Option<String>,
}

impl AgentRunResult {
    /// Reads what the host callback returned: an object with `messages` (objects with a string
    /// `role`) or a `reply` string, optional `usage`, `model`, `provider`. A bare `reply` becomes
    /// one assistant text message. Anything else is an error naming what is wrong.
    pub fn from_json(v: &Value, now_ms: i64) -> Result<AgentRunResult, String> {
        let o = v.as_object().ok_or_else(|| "runAgent must resolve to an object".to_owned())?;
        let mut messages = Vec::new();
        match o.get("messages") {
            None | Some(Value::Null) => {
                if let Some(reply) = o.get("reply").filter(|r| !r.is_null()) {
                    let text = reply.as_str().ok_or_else(|| "runAgent result: reply must be a string".to_owned())?;
                    messages.push(serde_json::json!({
                        "role": "assistant",
                        "content": [{"type": "text", "text": text}],
                        "timestamp": now_ms,
                    }));
                }
            }
            Some(Value::Array(list)) => {
                for (i, m) in list.iter().enumerate() {
                    if !m.is_object() || m.get("role").and_then(Value::as_str).is_none() {
                        return Err(format!("runAgent result: messages[{i}] must be an object with a string role"));
                    }
                    messages.push(m.clone());
                }
            }
            Some(_) => return Err("runAgent result: messages must be an array".to_owned()),
        }
        let num =
            |u: &Map<String, Value>, k: &str| u.get(k).and_then(Value::as_f64).filter(|f| f.is_finite() && *f >= 0.0);
        let usage = match o.get("usage") {
            Some(Value::Object(u)) => {
                Some(Usage { input: num(u, "input"), output: num(u, "output"), total: num(u, "total") })
            }
            None | Some(Value::Null) => None,
            Some(_) => return Err("runAgent result: usage must be an object".to_owned()),
        };
        let text = |k: &str| -> Result<Option<String>, String> {
            match o.get(k) {
                None | Some(Value::Null) => Ok(None),
                Some(Value::String(s)) => Ok(Some(s.clone())),
                Some(_) => Err(format!("runAgent result: {k} must be a string")),
            }
        };
        Ok(AgentRunResult { messages, usage, model: text("model")?, provider: text("provider")? })
    }
}

/// A lifecycle event (API.md §2.3).
#[derive(Debug, Clone, PartialEq)]
pub struct Event {
    pub kind: &'static str,
    pub at: i64,
    pub run_id: Option<String>,
    pub session_key: Option<String>,
    pub details: Map<String, Value>,
}

impl Event {
    pub fn to_json(&self) -> Value {
        let mut m = Map::new();
        m.insert("type".into(), self.kind.into());
        m.insert("at".into(), self.at.into());
        if let Some(r) = &self.run_id {
            m.insert("runId".into(), r.clone().into());
        }
        if let Some(k) = &self.session_key {
            m.insert("sessionKey".into(), k.clone().into());
        }
        for (k, v) in &self.details {
            m.entry(k.clone()).or_insert_with(|| v.clone());
        }
        Value::Object(m)
    }
}

/// The host: what the engine calls out to. Every method must be safe to call from any thread;
/// a failing call is an `Err` with the failure's message, never a panic.
pub trait Host: Send + Sync + 'static {
    /// Runs one model turn; the `Err` text becomes the run's error.
    fn run_agent(&self, req: AgentRunRequest) -> HostFuture<Value>;
    /// Whether a `runAgent` callback is configured at all.
    fn can_run(&self) -> bool;
    /// Lifecycle events; failures are ignored.
    fn emit(&self, event: Event);
    /// Posts a message to an external channel (API.md §2.2): `{channel, to, accountId?,
    /// threadId?, message, idempotencyKey, sessionKey, kind}`. `Err` is a failed attempt.
    fn deliver(&self, _msg: Value) -> HostFuture<()> {
        Box::pin(async { Err("no deliver callback is configured".to_owned()) })
    }
    /// Whether a `deliver` callback is configured at all.
    fn can_deliver(&self) -> bool {
        false
    }
    /// Injects `text` into the active run of `session_key` (API.md §2.4): `Ok(true)` when the
    /// host did; `Ok(false)` (or no callback) means the caller queues instead.
    fn steer(&self, _session_key: String, _text: String) -> HostFuture<bool> {
        Box::pin(async { Ok(false) })
    }
    /// Whether a `steer` callback is configured at all.
    fn can_steer(&self) -> bool {
        false
    }
    /// Asks the host to stop the model turn of run `run_id` (a cancelled sub-agent, 2026.9
    /// `subagents cancel`): `Ok(true)` when it did. The engine has already ended the run.
    fn abort_run(&self, _run_id: String, _reason: String) -> HostFuture<bool> {
        Box::pin(async { Ok(false) })
    }
    /// Whether an `abortRun` callback is configured at all.
    fn can_abort(&self) -> bool {
        false
    }
    /// Binds a new sub-agent session to a channel thread (2026.9 `sessions_spawn` with
    /// `thread: true`; API.md §2.6): `req` is `{childSessionKey, agentId, label?, mode,
    /// requesterSessionKey, requester: {channel, to?, accountId?, threadId?}}`; the answer is the
    /// bound conversation `{channel, to, accountId?, threadId?}`, `{error}` to refuse with that
    /// text, or `null` when no thread could be bound. `Err` is a failed bind.
    fn bind_thread(&self, _req: Value) -> HostFuture<Value> {
        Box::pin(async { Ok(Value::Null) })
    }
    /// Whether a `bindThread` callback is configured at all.
    fn can_bind_thread(&self) -> bool {
        false
    }
    /// Releases the thread binding `bindThread` made for a child whose spawn then failed (2026.9
    /// deletes the provisional child session, which unbinds it; API.md §2.6): `req` is
    /// `{targetSessionKey, reason: "session-delete"}`. The answer is ignored; `Err` is logged as
    /// an event.
    fn unbind_thread(&self, _req: Value) -> HostFuture<Value> {
        Box::pin(async { Ok(Value::Null) })
    }
    /// Stages a spawn's attachments where the child can read them (2026.9 `sessions_spawn`
    /// `attachments`; API.md §2.7): `req` is `{childSessionKey, agentId, attachmentId, sandboxed,
    /// files: [{name, mimeType, bytes, sha256, contentBase64}]}`; the answer is `{dir}`, the
    /// directory the child sees them under. `Err` is a failed staging.
    fn stage_attachments(&self, _req: Value) -> HostFuture<Value> {
        Box::pin(async { Err("no stageAttachments callback is configured".to_owned()) })
    }
    /// Whether a `stageAttachments` callback is configured at all.
    fn can_stage_attachments(&self) -> bool {
        false
    }
    /// Work started (`true`) or ended (`false`): while any is in progress the host keeps its
    /// process alive; an idle store never does.
    fn busy(&self, _on: bool) {}
    /// The store is closing: nothing it still has in progress keeps the process alive.
    fn idle(&self) {}
}

/// A scriptable host for `cargo test`: the orchestration runs against it as against the JS
/// callbacks. Every request, delivery, steer and event is recorded.
#[cfg(test)]
pub mod testing {
    use super::*;
    use std::sync::Mutex;

    type RunFn = Box<dyn Fn(AgentRunRequest) -> HostFuture<Value> + Send + Sync>;
    type DeliverFn = Box<dyn Fn(Value) -> HostFuture<()> + Send + Sync>;
    type SteerFn = Box<dyn Fn(String, String) -> HostFuture<bool> + Send + Sync>;
    type JsonFn = Box<dyn Fn(Value) -> HostFuture<Value> + Send + Sync>;

    pub struct FakeHost {
        run: RunFn,
        deliver: Option<DeliverFn>,
        steer: Option<SteerFn>,
        bind_thread: Option<JsonFn>,
        stage: Option<JsonFn>,
        /// `bindThread`, `unbindThread` and `stageAttachments` requests, in order
        pub binds: Mutex<Vec<Value>>,
        pub unbinds: Mutex<Vec<Value>>,
        pub stagings: Mutex<Vec<Value>>,
        pub requests: Mutex<Vec<AgentRunRequest>>,
        pub deliveries: Mutex<Vec<Value>>,
        pub steers: Mutex<Vec<(String, String)>>,
        pub aborts: Mutex<Vec<(String, String)>>,
        pub events: Mutex<Vec<Event>>,
    }

    fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
        m.lock().unwrap_or_else(|p| p.into_inner())
    }

    impl FakeHost {
        /// A host whose `runAgent` is `run`; no deliver, no steer.
        pub fn new(run: impl Fn(AgentRunRequest) -> HostFuture<Value> + Send + Sync + 'static) -> FakeHost {
            FakeHost {
                run: Box::new(run),
                deliver: None,
                steer: None,
                bind_thread: None,
                stage: None,
                binds: Mutex::default(),
                unbinds: Mutex::default(),
                stagings: Mutex::default(),
                requests: Mutex::default(),
                deliveries: Mutex::default(),
                steers: Mutex::default(),
                aborts: Mutex::default(),
                events: Mutex::default(),
            }
        }
        /// A host that answers every run at once with `reply`.
        pub fn replying(reply: &str) -> FakeHost {
            let reply = reply.to_owned();
            FakeHost::new(move |_| {
                let r = reply.clone();
                Box::pin(async move { Ok(serde_json::json!({ "reply": r })) })
            })
        }
        pub fn with_deliver(mut self, f: impl Fn(Value) -> HostFuture<()> + Send + Sync + 'static) -> FakeHost {
            self.deliver = Some(Box::new(f));
            self
        }
        pub fn with_steer(
            mut self,
            f: impl Fn(String, String) -> HostFuture<bool> + Send + Sync + 'static,
        ) -> FakeHost {
            self.steer = Some(Box::new(f));
            self
        }
        pub fn with_bind_thread(mut self, f: impl Fn(Value) -> HostFuture<Value> + Send + Sync + 'static) -> FakeHost {
            self.bind_thread = Some(Box::new(f));
            self
        }
        pub fn with_stage(mut self, f: impl Fn(Value) -> HostFuture<Value> + Send + Sync + 'static) -> FakeHost {
            self.stage = Some(Box::new(f));
            self
        }
        pub fn requests(&self) -> Vec<AgentRunRequest> {
            lock(&self.requests).clone()
        }
        pub fn deliveries(&self) -> Vec<Value> {
            lock(&self.deliveries).clone()
        }
        pub fn events(&self) -> Vec<Event> {
            lock(&self.events).clone()
        }
        pub fn event_kinds(&self) -> Vec<&'static str> {
            lock(&self.events).iter().map(|e| e.kind).collect()
        }
    }

    impl Host for FakeHost {
        fn run_agent(&self, req: AgentRunRequest) -> HostFuture<Value> {
            lock(&self.requests).push(req.clone());
            (self.run)(req)
        }
        fn can_run(&self) -> bool {
            true
        }
        fn emit(&self, event: Event) {
            lock(&self.events).push(event);
        }
        fn deliver(&self, msg: Value) -> HostFuture<()> {
            lock(&self.deliveries).push(msg.clone());
            match &self.deliver {
                Some(f) => f(msg),
                None => Box::pin(async { Ok(()) }),
            }
        }
        fn can_deliver(&self) -> bool {
            true
        }
        fn steer(&self, session_key: String, text: String) -> HostFuture<bool> {
            lock(&self.steers).push((session_key.clone(), text.clone()));
            match &self.steer {
                Some(f) => f(session_key, text),
                None => Box::pin(async { Ok(false) }),
            }
        }
        fn can_steer(&self) -> bool {
            self.steer.is_some()
        }
        fn abort_run(&self, run_id: String, reason: String) -> HostFuture<bool> {
            lock(&self.aborts).push((run_id, reason));
            Box::pin(async { Ok(true) })
        }
        fn can_abort(&self) -> bool {
            true
        }
        fn bind_thread(&self, req: Value) -> HostFuture<Value> {
            lock(&self.binds).push(req.clone());
            match &self.bind_thread {
                Some(f) => f(req),
                None => Box::pin(async { Ok(Value::Null) }),
            }
        }
        fn can_bind_thread(&self) -> bool {
            self.bind_thread.is_some()
        }
        fn unbind_thread(&self, req: Value) -> HostFuture<Value> {
            lock(&self.unbinds).push(req);
            Box::pin(async { Ok(Value::Null) })
        }
        fn stage_attachments(&self, req: Value) -> HostFuture<Value> {
            lock(&self.stagings).push(req.clone());
            match &self.stage {
                Some(f) => f(req),
                None => Box::pin(async { Err("no stageAttachments callback is configured".to_owned()) }),
            }
        }
        fn can_stage_attachments(&self) -> bool {
            self.stage.is_some()
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_bare_reply_becomes_one_assistant_text_message() {
        let r =
            AgentRunResult::from_json(&json!({"reply": "pong", "usage": {"input": 3, "output": 4}, "model": "m"}), 7)
                .unwrap();
        assert_eq!(
            r.messages,
            vec![json!({"role": "assistant", "content": [{"type": "text", "text": "pong"}], "timestamp": 7})]
        );
        assert_eq!(r.usage, Some(Usage { input: Some(3.0), output: Some(4.0), total: None }));
        assert_eq!(r.model.as_deref(), Some("m"));
    }

    #[test]
    fn messages_win_over_reply_and_must_carry_a_role() {
        let r =
            AgentRunResult::from_json(&json!({"messages": [{"role": "assistant", "content": []}], "reply": "x"}), 0)
                .unwrap();
        assert_eq!(r.messages.len(), 1);
        assert!(AgentRunResult::from_json(&json!({"messages": [{"content": "no role"}]}), 0)
            .unwrap_err()
            .contains("messages[0]"));
        assert!(AgentRunResult::from_json(&json!({"messages": "x"}), 0).is_err());
    }

    #[test]
    fn a_result_that_is_not_an_object_is_an_error() {
        for v in [json!(null), json!(5), json!("text"), json!([1])] {
            assert_eq!(AgentRunResult::from_json(&v, 0).unwrap_err(), "runAgent must resolve to an object");
        }
        assert!(AgentRunResult::from_json(&json!({"reply": 5}), 0).is_err());
        assert!(AgentRunResult::from_json(&json!({"usage": 5}), 0).is_err());
        assert!(AgentRunResult::from_json(&json!({"model": 5}), 0).is_err());
    }

    #[test]
    fn requests_serialise_with_camel_case_keys_and_no_absent_fields() {
        let req = AgentRunRequest {
            run_id: "r".into(),
            idempotency_key: "i".into(),
            session_key: "agent:main:main".into(),
            session_id: "s".into(),
            agent_id: "main".into(),
            message: "hi".into(),
            options: RunOptions { channel: Some("webchat".into()), ..RunOptions::new(Lane::Nested, 30_000, "c") },
        };
        let v = req.to_json();
        assert_eq!(v["lane"], "nested");
        assert_eq!(v["timeoutMs"], 30_000);
        assert!(v.get("extraSystemPrompt").is_none());
        let keys: Vec<_> = v.as_object().unwrap().keys().cloned().collect();
        assert_eq!(&keys[..3], ["runId", "idempotencyKey", "sessionKey"]);
    }
}
