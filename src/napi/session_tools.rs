//! The `SessionTools` class (API.md): every promise-returning method converts its arguments on
//! the JS thread, runs the engine on a blocking thread, and settles with the result or a JS
//! error carrying `code`. None throws synchronously, whatever its arguments.

use std::path::PathBuf;
use std::sync::Arc;

use napi::bindgen_prelude::*;
use napi::{Env, ValueType};
use serde_json::Value;

use super::error::js_error;
use super::gather;
use super::host::{Callbacks, JsHost};
use super::jobs::{
    after_turn_writes, call_tool, rejected, spawn_async, spawn_fast, spawn_fast_text, spawn_job, spawn_off_thread,
    to_text, tool_promise, FastJob, FastTextJob, Job,
};
use super::js::{aborted_reason, clear_pending, from_json_text, to_json, to_json_exact, to_json_later};
use super::lanes::{queue_segment, Lane, Lanes};
use crate::config::Config;
use crate::contract::Contract;
use crate::engine::Engine;
use crate::error::{Error as CoreError, Result as CoreResult};
use crate::mirror::MirrorDir;
use crate::orchestrate::Orchestrator;
use crate::tools::{self, Tool, ToolContext};

/// A JS value handed back as is (a promise made inside a plain JS function).
struct Raw(napi::sys::napi_value);

impl ToNapiValue for Raw {
    unsafe fn to_napi_value(_env: napi::sys::napi_env, val: Self) -> napi::Result<napi::sys::napi_value> {
        Ok(val.0)
    }
}

/// Options of `SessionTools.open`.
struct OpenOptions {
    path: String,
    config: Config,
    mirror_dir: MirrorDir,
    callbacks: Callbacks,
}

fn read_open_options(env: &Env, options: Option<Unknown<'_>>) -> CoreResult<OpenOptions> {
    let out = read_open_options_inner(env, options);
    if out.is_err() {
        clear_pending(env);
    }
    out
}

fn read_open_options_inner(env: &Env, options: Option<Unknown<'_>>) -> CoreResult<OpenOptions> {
    let bad = |m: String| CoreError::invalid_request(m);
    let Some(options) = options else { return Err(bad("open options required: { path | url, config? }".into())) };
    if options.get_type().map_err(|e| bad(e.reason.clone()))? != ValueType::Object {
        return Err(bad("open options must be an object: { path | url, config? }".into()));
    }
    let obj: Object =
        unsafe { Object::from_napi_value(env.raw(), options.raw()) }.map_err(|e| bad(e.reason.clone()))?;
    let get = |name: &str| -> CoreResult<Option<Unknown<'_>>> {
        let v: Unknown =
            obj.get_named_property(name).map_err(|e| bad(format!("cannot read options.{name}: {}", e.reason)))?;
        Ok(match v.get_type().map_err(|e| bad(e.reason.clone()))? {
            ValueType::Undefined => None,
            _ => Some(v),
        })
    };
    let path =
        match (to_json_exact(env, get("path")?, "options.path")?, to_json_exact(env, get("url")?, "options.url")?) {
            (Value::String(s), Value::Null) if crate::store::pg::is_url(&s) => {
                return Err(bad(
                    "invalid options.path: it is a SQLite file; give a postgres:// URL as options.url".into()
                ))
            }
            (Value::String(s), Value::Null) if !s.trim().is_empty() => s,
            (Value::Null, Value::String(u)) if crate::store::pg::is_url(&u) => u,
            (Value::Null, Value::Null) => {
                return Err(bad("options.path (a SQLite file) or options.url (a postgres:// URL) required".into()))
            }
            (Value::Null, _) => {
                return Err(bad("invalid options.url: must be a postgres:// or postgresql:// URL".into()))
            }
            (_, Value::Null) => return Err(bad("invalid options.path: must be a non-empty string".into())),
            _ => return Err(bad("give options.path (SQLite) or options.url (PostgreSQL), not both".into())),
        };
    let contract =
        Contract::from_option(&to_json_exact(env, get("contract")?, "options.contract")?, "options.contract")?;
    let config = crate::settings::effective_config(
        &to_json(env, get("config")?, "config")?,
        &to_json(env, get("settings")?, "settings")?,
        contract,
    )?;
    let mut functions = Vec::new();
    for name in
        ["runAgent", "deliver", "onEvent", "steer", "abortRun", "bindThread", "unbindThread", "stageAttachments"]
    {
        if let Some(v) = get(name)? {
            let t = v.get_type().map_err(|e| bad(e.reason.clone()))?;
            if t != ValueType::Function && t != ValueType::Null {
                return Err(bad(format!("invalid options.{name}: must be a function")));
            }
            functions.push((name, v));
        }
    }
    let callbacks = Callbacks::read(env, |name| functions.iter().find(|(n, _)| *n == name).map(|(_, v)| *v))
        .map_err(|e| bad(format!("cannot take the callbacks: {}", e.reason)))?;
    let mirror_dir = match get("mirrorDir")? {
        None => MirrorDir::Default,
        Some(v) => match to_json_exact(env, Some(v), "options.mirrorDir")? {
            Value::Null => MirrorDir::Off,
            Value::String(s) if !s.trim().is_empty() && !s.contains('\0') => MirrorDir::At(PathBuf::from(s)),
            _ => return Err(bad("invalid options.mirrorDir: must be a non-empty string or null".into())),
        },
    };
    Ok(OpenOptions { path, config, mirror_dir, callbacks })
}

/// The session store, the send-policy engine and the session tools, opened on one SQLite file or
/// a PostgreSQL database.
#[napi]
pub struct SessionTools {
    engine: Arc<Engine>,
    orch: Arc<Orchestrator>,
    lanes: Arc<Lanes>,
}

#[napi]
impl SessionTools {
    /// Opens (creating when missing) the store at `options.path` (`':memory:'` for a throwaway
    /// store) with the gateway's `options.config`.
    #[napi(ts_args_type = "options: OpenOptions", ts_return_type = "Promise<SessionTools>")]
    pub fn open<'env>(env: &'env Env, options: Option<Unknown<'env>>) -> napi::Result<PromiseRaw<'env, SessionTools>> {
        let opts = read_open_options(env, options);
        env.spawn_future_with_callback(
            async move {
                let o = match opts {
                    Ok(o) => o,
                    Err(e) => return Ok(Err(e)),
                };
                let host = Arc::new(JsHost::new(o.callbacks));
                let orch = match Orchestrator::open(o.path, o.config, o.mirror_dir, host).await {
                    Ok(orch) => orch,
                    Err(e) => return Ok(Err(e)),
                };
                match Lanes::start(orch.engine().clone()) {
                    Ok(lanes) => Ok(Ok((orch, Arc::new(lanes)))),
                    Err(e) => {
                        orch.close().await;
                        Ok(Err(e))
                    }
                }
            },
            |env, r: CoreResult<(Arc<Orchestrator>, Arc<Lanes>)>| match r {
                Ok((orch, lanes)) => Ok(SessionTools { engine: orch.engine().clone(), orch, lanes }),
                Err(e) => Err(js_error(env, &e)),
            },
        )
    }

    /// Diagnostic: calls `fn` `calls` times (1–100 000, default 1 000), one after another,
    /// through the same machinery as the host callbacks (a threadsafe function called from the
    /// runtime, a JSON request in, its value or promise awaited), and reports the mean round
    /// trip. For the benchmark; it touches no store.
    #[napi(
        ts_args_type = "fn: (req: unknown) => unknown, calls?: number",
        ts_return_type = "Promise<MeasureCallbackResult>"
    )]
    pub fn measure_callback<'env>(
        env: &'env Env,
        f: Option<Unknown<'env>>,
        calls: Option<Unknown<'env>>,
    ) -> napi::Result<PromiseRaw<'env, Unknown<'env>>> {
        let calls = match to_json(env, calls, "calls") {
            Ok(Value::Null) => Ok(1000),
            Ok(v) => match v.as_f64() {
                Some(n) if (1.0..=100_000.0).contains(&n) => Ok(n as u64),
                _ => Err(CoreError::invalid_request("invalid calls: must be a number from 1 to 100000")),
            },
            Err(e) => Err(e),
        };
        let tsfn = match f {
            Some(f) if f.get_type().ok() == Some(ValueType::Function) => {
                super::host::weak::<super::host::JsonArg>(env, f)
                    .map_err(|e| CoreError::invalid_request(format!("invalid fn: {}", e.reason)))
            }
            _ => Err(CoreError::invalid_request("invalid fn: must be a function")),
        };
        let work = calls.and_then(|n| Ok((n, tsfn?))).map(|(n, tsfn)| async move {
            let req = serde_json::json!({"runId": "bench", "sessionKey": "agent:main:main", "message": "ping"});
            let start = std::time::Instant::now();
            for _ in 0..n {
                super::host::call(&tsfn, super::host::JsonArg::new(req.clone()))
                    .await
                    .map_err(CoreError::invalid_request)?;
            }
            let total = start.elapsed().as_secs_f64() * 1000.0;
            Ok(serde_json::json!({"calls": n, "totalMs": total, "perCallUs": total * 1000.0 / n as f64}))
        });
        spawn_async(env, work)
    }

    /// Swaps the config (same validation as `open`); throws `INVALID_CONFIG` and keeps the old
    /// config on error.
    #[napi(ts_args_type = "config: GatewayConfig | null | undefined, settings?: Settings")]
    pub fn set_config(
        &self,
        env: &Env,
        config: Option<Unknown<'_>>,
        settings: Option<Unknown<'_>>,
    ) -> napi::Result<()> {
        let given = |v: Option<Unknown<'_>>, what| {
            to_json(env, v, what).map_err(|e| CoreError::invalid_config(e.message().to_owned()))
        };
        let settings = settings.filter(|s| s.get_type().is_ok_and(|t| t != ValueType::Undefined));
        let cfg = given(config, "config").and_then(|c| {
            let s = settings.map(|s| given(Some(s), "settings")).transpose()?;
            crate::settings::next_config(&self.engine.config(), &c, s.as_ref())
        });
        match cfg {
            Ok(c) => {
                self.orch.set_config(c);
                Ok(())
            }
            Err(e) => Err(js_error(env, &e)),
        }
    }

    /// Closes the store without waiting for model runs: runs in flight are recorded as
    /// interrupted (the next open announces them) and what their callbacks return later is
    /// dropped. Afterwards every method rejects with `CLOSED`. Idempotent.
    #[napi(ts_return_type = "Promise<void>")]
    pub fn close<'env>(&self, env: &'env Env) -> napi::Result<PromiseRaw<'env, ()>> {
        let orch = self.orch.clone();
        env.spawn_future_with_callback(
            async move {
                orch.close().await;
                Ok(())
            },
            |_env, ()| Ok(()),
        )
    }

    /// `agent.wait`: how a run ended, or `timeout` when it has not within `timeoutMs`
    /// (default 30 000; the run goes on).
    #[napi(ts_args_type = "runId: string, options?: WaitRunOptions", ts_return_type = "Promise<WaitRunResult>")]
    pub fn wait_run<'env>(
        &self,
        env: &'env Env,
        run_id: Option<Unknown<'env>>,
        options: Option<Unknown<'env>>,
    ) -> napi::Result<PromiseRaw<'env, Unknown<'env>>> {
        let args = to_json(env, run_id, "runId").and_then(|r| Ok((r, to_json(env, options, "options")?)));
        let orch = self.orch.clone();
        spawn_async(env, args.map(|(r, o)| async move { orch.wait_run_json(&r, &o).await }))
    }

    /// The sub-agent runs, all or those of one requester session.
    #[napi(ts_args_type = "requesterKey?: string", ts_return_type = "Promise<SubagentRun[]>")]
    pub fn list_subagent_runs<'env>(
        &self,
        env: &'env Env,
        requester_key: Option<Unknown<'env>>,
    ) -> napi::Result<PromiseRaw<'env, Unknown<'env>>> {
        let orch = self.orch.clone();
        self.run1(env, requester_key, "requesterKey", move |_e, k| crate::orchestrate::subagents::list_json(&orch, k))
    }

    /// 2026.9: the watcher's turn took in its `session.changed` notices about `targetKeys`.
    #[napi(
        ts_args_type = "watcherKey: string, targetKeys: string[]",
        ts_return_type = "Promise<{ acknowledged: number; followUps: number }>"
    )]
    pub fn acknowledge_watch_notices<'env>(
        &self,
        env: &'env Env,
        watcher_key: Option<Unknown<'env>>,
        target_keys: Option<Unknown<'env>>,
    ) -> napi::Result<PromiseRaw<'env, Unknown<'env>>> {
        let orch = self.orch.clone();
        self.fast2(env, Lane::Write, (watcher_key, "watcherKey"), (target_keys, "targetKeys"), move |_e, w, t| {
            crate::orchestrate::watch::acknowledge(&orch, w, t)
        })
    }

    /// The path the store was opened with.
    #[napi(getter)]
    pub fn path(&self) -> String {
        self.engine.store().path().to_owned()
    }

    /// The entry stored under the canonical form of `key`, or `null`.
    #[napi(ts_args_type = "key: string", ts_return_type = "Promise<SessionEntry | null>")]
    pub fn get_session<'env>(
        &self,
        env: &'env Env,
        key: Option<Unknown<'env>>,
    ) -> napi::Result<PromiseRaw<'env, Unknown<'env>>> {
        let key = to_json(env, key, "key");
        spawn_fast(
            env,
            &self.lanes,
            Lane::Read,
            key.map(|k| -> FastJob {
                Arc::new(move |e: &Engine| Ok(e.get_session(&k)?.map(Value::Object).unwrap_or(Value::Null)))
            }),
        )
    }

    /// Creates or updates the entry under `key` with the gateway's merge rule (the patch's fields
    /// over the stored ones); the merged entry.
    #[napi(ts_args_type = "key: string, patch: Partial<SessionEntry>", ts_return_type = "Promise<SessionEntry>")]
    pub fn upsert_session<'env>(
        &self,
        env: &'env Env,
        key: Option<Unknown<'env>>,
        patch: Option<Unknown<'env>>,
    ) -> napi::Result<PromiseRaw<'env, Unknown<'env>>> {
        if key.as_ref().is_some_and(|k| gather::is_token(env, k)) {
            return self.open_segment(env, patch);
        }
        let args = to_json(env, key, "key").and_then(|k| Ok((k, to_json_later(env, patch, "patch")?)));
        let job =
            args.map(|(k, p)| -> FastTextJob { Arc::new(move |e: &Engine| e.upsert_session_text(&k, &p.value()?)) });
        spawn_fast_text(env, &self.lanes, Lane::Write, job)
    }

    /// `sessions.patch`: validates and applies a patch (label, levels, send policy, model, …).
    #[napi(ts_args_type = "params: SessionsPatchParams", ts_return_type = "Promise<SessionEntryResult>")]
    pub fn patch_session<'env>(
        &self,
        env: &'env Env,
        params: Option<Unknown<'env>>,
    ) -> napi::Result<PromiseRaw<'env, Unknown<'env>>> {
        self.in_order1(env, Lane::Write, (params, "params"), |e: &Engine, p: &Value| e.patch_session(p))
    }

    /// `sessions.resolve`: the key a `key`, `sessionId` or `label` names.
    #[napi(ts_args_type = "params: SessionsResolveParams", ts_return_type = "Promise<SessionsResolveResult>")]
    pub fn resolve_session<'env>(
        &self,
        env: &'env Env,
        params: Option<Unknown<'env>>,
    ) -> napi::Result<PromiseRaw<'env, Unknown<'env>>> {
        self.in_order1(env, Lane::Read, (params, "params"), |e: &Engine, p: &Value| e.resolve_session(p))
    }

    /// `sessions.list`: the sessions, filtered and ordered as the gateway does.
    #[napi(ts_args_type = "params?: SessionsListParams", ts_return_type = "Promise<SessionsListResult>")]
    pub fn list_sessions<'env>(
        &self,
        env: &'env Env,
        params: Option<Unknown<'env>>,
    ) -> napi::Result<PromiseRaw<'env, Unknown<'env>>> {
        self.in_order1(env, Lane::Read, (params, "params"), |e: &Engine, p: &Value| e.list_sessions(p))
    }

    /// `sessions.delete`: removes a session (not the main one) and, unless `deleteTranscript` is
    /// false, its transcript; its running sub-agents are stopped.
    #[napi(
        ts_args_type = "key: string, options?: DeleteSessionOptions",
        ts_return_type = "Promise<DeleteSessionResult>"
    )]
    pub fn delete_session<'env>(
        &self,
        env: &'env Env,
        key: Option<Unknown<'env>>,
        options: Option<Unknown<'env>>,
    ) -> napi::Result<PromiseRaw<'env, Unknown<'env>>> {
        let args = to_json(env, key, "key").and_then(|k| Ok((k, to_json(env, options, "options")?)));
        let orch = self.orch.clone();
        after_turn_writes(env, &self.lanes, move |env| {
            spawn_async(env, args.map(|(k, o)| async move { orch.delete_session(k, o).await }))
        })
    }

    /// `sessions.reset`: starts the session under `key` afresh (a new session id).
    #[napi(ts_args_type = "key: string", ts_return_type = "Promise<SessionEntryResult>")]
    pub fn reset_session<'env>(
        &self,
        env: &'env Env,
        key: Option<Unknown<'env>>,
    ) -> napi::Result<PromiseRaw<'env, Unknown<'env>>> {
        self.in_order1(env, Lane::Write, (key, "key"), |e: &Engine, k: &Value| e.reset_session(k))
    }

    /// Appends transcript messages to the session under `key` (created when missing).
    #[napi(
        ts_args_type = "key: string, messages: TranscriptMessage[]",
        ts_return_type = "Promise<AppendMessagesResult>"
    )]
    pub fn append_messages<'env>(
        &self,
        env: &'env Env,
        key: Option<Unknown<'env>>,
        messages: Option<Unknown<'env>>,
    ) -> napi::Result<PromiseRaw<'env, Unknown<'env>>> {
        let args = to_json(env, key, "key").and_then(|k| Ok((k, to_json_later(env, messages, "messages")?)));
        let inline = args.as_ref().map_or(true, |(_, m)| crate::engine::append_may_run_inline(m.text_len()));
        let job = args.map(|(k, m)| -> FastJob { Arc::new(move |e: &Engine| e.append_messages(&k, &m.value()?)) });
        match job {
            Ok(job) if !inline => {
                spawn_off_thread(env, &self.lanes, Lane::Write, Arc::new(move |e: &Engine| to_text(&job(e)?)))
            }
            job => spawn_fast(env, &self.lanes, Lane::Write, job),
        }
    }

    /// `chat.history`: a page of the transcript, oldest first: the last `limit` messages
    /// (default 200), or those before the cursor `before`.
    #[napi(ts_args_type = "key: string, options?: ChatHistoryOptions", ts_return_type = "Promise<ChatHistoryResult>")]
    pub fn chat_history<'env>(
        &self,
        env: &'env Env,
        key: Option<Unknown<'env>>,
        options: Option<Unknown<'env>>,
    ) -> napi::Result<PromiseRaw<'env, Unknown<'env>>> {
        self.fast2(env, Lane::Read, (key, "key"), (options, "options"), |e, k, o| e.chat_history_json(k, o))
    }

    /// The send policy of a session (`'allow'` or `'deny'`): its own override, else the
    /// configured rules; a store that cannot be read denies.
    #[napi(ts_args_type = "params: ResolveSendPolicyParams", ts_return_type = "Promise<'allow' | 'deny'>")]
    pub fn resolve_send_policy<'env>(
        &self,
        env: &'env Env,
        params: Option<Unknown<'env>>,
    ) -> napi::Result<PromiseRaw<'env, Unknown<'env>>> {
        let p = to_json(env, params, "params");
        spawn_fast(
            env,
            &self.lanes,
            Lane::Read,
            p.map(|p| -> FastJob { Arc::new(move |e: &Engine| Ok(Value::from(e.resolve_send_policy(&p)?.as_str()))) }),
        )
    }

    /// The `/send` chat command: `handled: false` when `text` is not one; else the reply to
    /// show (an owner's command sets the session's send policy).
    #[napi(ts_args_type = "params: SendCommandParams", ts_return_type = "Promise<SendCommandResult>")]
    pub fn handle_send_command<'env>(
        &self,
        env: &'env Env,
        params: Option<Unknown<'env>>,
    ) -> napi::Result<PromiseRaw<'env, Unknown<'env>>> {
        self.in_order1(env, Lane::Write, (params, "params"), |e: &Engine, p: &Value| e.handle_send_command(p))
    }

    /// Reads a gateway state folder into the store (API.md §5).
    #[napi(ts_args_type = "dir: string", ts_return_type = "Promise<ImportReport>")]
    pub fn import_state_dir<'env>(
        &self,
        env: &'env Env,
        dir: Option<Unknown<'env>>,
    ) -> napi::Result<PromiseRaw<'env, Unknown<'env>>> {
        self.run1(env, dir, "dir", |e, d| e.import_state_dir(d))
    }

    /// Writes the store as a gateway state folder (API.md §5).
    #[napi(ts_args_type = "dir: string, options?: ExportOptions", ts_return_type = "Promise<ExportReport>")]
    pub fn export_state_dir<'env>(
        &self,
        env: &'env Env,
        dir: Option<Unknown<'env>>,
        options: Option<Unknown<'env>>,
    ) -> napi::Result<PromiseRaw<'env, Unknown<'env>>> {
        let args = to_json(env, dir, "dir").and_then(|d| Ok((d, to_json(env, options, "options")?)));
        self.run(env, args.map(|(d, o)| -> Job { Box::new(move |e: &Engine| e.export_state_dir(&d, &o)) }))
    }

    /// Counts of what the store holds, and its size.
    #[napi(ts_return_type = "Promise<StoreStats>")]
    pub fn stats<'env>(&self, env: &'env Env) -> napi::Result<PromiseRaw<'env, Unknown<'env>>> {
        spawn_off_thread(env, &self.lanes, Lane::Read, Arc::new(|e: &Engine| to_text(&e.stats()?)))
    }

    /// The `sessions_list` tool: the payload the model sees.
    #[napi(
        ts_args_type = "params?: SessionsListToolParams, ctx?: ToolContext",
        ts_return_type = "Promise<SessionsListToolResult>"
    )]
    pub fn sessions_list<'env>(
        &self,
        env: &'env Env,
        params: Option<Unknown<'env>>,
        ctx: Option<Unknown<'env>>,
    ) -> napi::Result<PromiseRaw<'env, Unknown<'env>>> {
        call_tool(env, &self.orch, &self.lanes, Tool::SessionsList, params, ctx, false)
    }

    /// The `sessions_history` tool: the payload the model sees.
    #[napi(
        ts_args_type = "params: SessionsHistoryToolParams, ctx?: ToolContext",
        ts_return_type = "Promise<SessionsHistoryToolResult>"
    )]
    pub fn sessions_history<'env>(
        &self,
        env: &'env Env,
        params: Option<Unknown<'env>>,
        ctx: Option<Unknown<'env>>,
    ) -> napi::Result<PromiseRaw<'env, Unknown<'env>>> {
        call_tool(env, &self.orch, &self.lanes, Tool::SessionsHistory, params, ctx, false)
    }

    /// The `sessions_send` tool: the payload the model sees (`accepted`, `ok`, `timeout`, `error`, `forbidden`).
    #[napi(
        ts_args_type = "params: SessionsSendParams, ctx?: ToolContext",
        ts_return_type = "Promise<SessionsSendResult>"
    )]
    pub fn sessions_send<'env>(
        &self,
        env: &'env Env,
        params: Option<Unknown<'env>>,
        ctx: Option<Unknown<'env>>,
    ) -> napi::Result<PromiseRaw<'env, Unknown<'env>>> {
        call_tool(env, &self.orch, &self.lanes, Tool::SessionsSend, params, ctx, false)
    }

    /// The `sessions_spawn` tool: the payload the model sees (`accepted`, `error`, `forbidden`).
    #[napi(
        ts_args_type = "params: SessionsSpawnParams, ctx?: ToolContext",
        ts_return_type = "Promise<SessionsSpawnResult>"
    )]
    pub fn sessions_spawn<'env>(
        &self,
        env: &'env Env,
        params: Option<Unknown<'env>>,
        ctx: Option<Unknown<'env>>,
    ) -> napi::Result<PromiseRaw<'env, Unknown<'env>>> {
        call_tool(env, &self.orch, &self.lanes, Tool::SessionsSpawn, params, ctx, false)
    }

    /// The `agents_list` tool: the agent ids this caller may spawn.
    #[napi(ts_args_type = "ctx?: ToolContext", ts_return_type = "Promise<AgentsListResult>")]
    pub fn agents_list<'env>(
        &self,
        env: &'env Env,
        ctx: Option<Unknown<'env>>,
    ) -> napi::Result<PromiseRaw<'env, Unknown<'env>>> {
        call_tool(env, &self.orch, &self.lanes, Tool::AgentsList, None, ctx, false)
    }

    /// The tool definitions for a caller (sub-agents get none of the session tools).
    #[napi(ts_args_type = "ctx?: ToolContext", ts_return_type = "ToolDefinition[]")]
    pub fn tool_definitions<'env>(&self, env: &'env Env, ctx: Option<Unknown<'env>>) -> napi::Result<Unknown<'env>> {
        let ctx = to_json(env, ctx, "ctx").and_then(|c| ToolContext::from_json(&c)).map_err(|e| js_error(env, &e))?;
        let defs = Value::Array(tools::definitions_for(&self.engine, &ctx));
        from_json_text(env, &defs.to_string())
    }

    /// Runs a tool by name: `{ content: [{ type: 'text', text }], details }`.
    #[napi(ts_args_type = "name: string, args: unknown, ctx?: ToolContext", ts_return_type = "Promise<ToolResult>")]
    pub fn execute_tool<'env>(
        &self,
        env: &'env Env,
        name: Option<Unknown<'env>>,
        args: Option<Unknown<'env>>,
        ctx: Option<Unknown<'env>>,
    ) -> napi::Result<PromiseRaw<'env, Unknown<'env>>> {
        let tool = match to_json(env, name, "name").and_then(|v| Tool::from_json(&v)) {
            Ok(tool) => tool,
            Err(e) => return rejected(env, e),
        };
        call_tool(env, &self.orch, &self.lanes, tool, args, ctx, true)
    }

    /// The gateway's tool objects: `{ name, label, description, parameters, execute }`.
    #[napi(ts_args_type = "ctx?: ToolContext", ts_return_type = "SessionTool[]")]
    pub fn create_tools<'env>(&self, env: &'env Env, ctx: Option<Unknown<'env>>) -> napi::Result<Unknown<'env>> {
        let ctx_json = to_json(env, ctx, "ctx").map_err(|e| js_error(env, &e))?;
        let parsed = ToolContext::from_json(&ctx_json).map_err(|e| js_error(env, &e))?;
        let config = self.engine.config();
        let rules = config.rules();
        let offered = tools::available(&self.engine, &parsed);
        let mut arr = env.create_array(offered.len() as u32)?;
        for (i, tool) in offered.into_iter().enumerate() {
            let obj_val = from_json_text(env, &tools::definition_for(rules, tool).to_string())?;
            let mut obj: Object = unsafe { Object::from_napi_value(env.raw(), obj_val.raw()) }?;
            let orch = self.orch.clone();
            let lanes = self.lanes.clone();
            let ctx_json = ctx_json.clone();
            let execute = env.create_function_from_closure::<Unknown, Raw, _>("execute", move |call| {
                let args: Option<Unknown> = call.get::<Unknown>(1).ok();
                let env = &*call.env;
                // A call whose signal is already aborted does nothing and rejects with its reason.
                if let Some(reason) = aborted_reason(env, call.get::<Unknown>(2).ok()) {
                    return Ok(Raw(PromiseRaw::<Unknown>::reject(env, reason)?.raw()));
                }
                // What the model sent is never a reason to reject: unconvertible args read as `{}`.
                let args = to_json(env, args, "args").unwrap_or(Value::Null);
                let promise = tool_promise(env, &orch, &lanes, tool, args, ctx_json.clone(), true)?;
                Ok(Raw(promise.raw()))
            })?;
            obj.set_named_property("execute", execute)?;
            arr.set(i as u32, obj)?;
        }
        Ok(arr.to_unknown())
    }
}

impl SessionTools {
    /// Opens a segment of calls gathered in JS (`gather.rs`); a throw sends the call that
    /// opens it down the native path.
    fn open_segment<'env>(
        &self,
        env: &'env Env,
        id: Option<Unknown<'env>>,
    ) -> napi::Result<PromiseRaw<'env, Unknown<'env>>> {
        let Some(id) = gather::segment_id(id) else {
            return Err(napi::Error::new(Status::InvalidArg, "invalid segment"));
        };
        if self.engine.store().is_closed() {
            return Err(napi::Error::new(Status::GenericFailure, "closed"));
        }
        queue_segment(env, &self.lanes, id)?;
        // SAFETY: `undefined` of this environment.
        let undefined =
            unsafe { Unknown::from_napi_value(env.raw(), <() as ToNapiValue>::to_napi_value(env.raw(), ())?)? };
        PromiseRaw::resolve(env, undefined)
    }

    /// A method of one JSON argument that keeps its place among the turn's writes. `Lane::Read`:
    /// a read too long to run on the JS thread (`jobs::spawn_off_thread`). `Lane::Write`: a
    /// write of one bounded transaction with no effect outside the store, queued with the turn's
    /// writes and run with them (inline when the store can take it at once).
    fn in_order1<'env>(
        &self,
        env: &'env Env,
        lane: Lane,
        (a, a_name): (Option<Unknown<'env>>, &str),
        f: impl Fn(&Engine, &Value) -> CoreResult<Value> + Send + Sync + 'static,
    ) -> napi::Result<PromiseRaw<'env, Unknown<'env>>> {
        let a = match to_json(env, a, a_name) {
            Ok(a) => a,
            Err(e) => return rejected(env, e),
        };
        match lane {
            Lane::Read => {
                spawn_off_thread(env, &self.lanes, Lane::Read, Arc::new(move |e: &Engine| to_text(&f(e, &a)?)))
            }
            Lane::Write => spawn_fast(env, &self.lanes, Lane::Write, Ok(Arc::new(move |e: &Engine| f(e, &a)))),
        }
    }

    /// A method of one JSON argument.
    fn run1<'env>(
        &self,
        env: &'env Env,
        a: Option<Unknown<'env>>,
        a_name: &str,
        f: impl FnOnce(&Engine, &Value) -> CoreResult<Value> + Send + 'static,
    ) -> napi::Result<PromiseRaw<'env, Unknown<'env>>> {
        let job = to_json(env, a, a_name).map(|a| -> Job { Box::new(move |e: &Engine| f(e, &a)) });
        self.run(env, job)
    }

    /// A method of two JSON arguments (each with its name), a bounded job of at most one write,
    /// which may run inline; `lane` says whether it writes.
    fn fast2<'env>(
        &self,
        env: &'env Env,
        lane: Lane,
        (a, a_name): (Option<Unknown<'env>>, &str),
        (b, b_name): (Option<Unknown<'env>>, &str),
        f: impl Fn(&Engine, &Value, &Value) -> CoreResult<Value> + Send + Sync + 'static,
    ) -> napi::Result<PromiseRaw<'env, Unknown<'env>>> {
        let args = to_json(env, a, a_name).and_then(|a| Ok((a, to_json(env, b, b_name)?)));
        spawn_fast(env, &self.lanes, lane, args.map(|(a, b)| -> FastJob { Arc::new(move |e: &Engine| f(e, &a, &b)) }))
    }

    /// A long job on the runtime (import, export, the registry's listing), once the turn's
    /// earlier writes are done.
    fn run<'env>(&self, env: &'env Env, job: CoreResult<Job>) -> napi::Result<PromiseRaw<'env, Unknown<'env>>> {
        let engine = self.engine.clone();
        after_turn_writes(env, &self.lanes, move |env| spawn_job(env, Some(engine), job))
    }
}
