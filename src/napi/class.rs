//! The `SessionTools` class (API.md): every promise-returning method converts its arguments on
//! the JS thread, runs the engine on a blocking thread, and settles with the result or a JS
//! error carrying `code`. None throws synchronously, whatever its arguments.

use std::path::PathBuf;
use std::sync::Arc;

use napi::bindgen_prelude::*;
use napi::{Env, ValueType};
use serde_json::Value;

use super::host::{Callbacks, JsHost};
use super::js::{from_json_text, js_error, to_json, to_json_exact};
use super::lanes::{self, FastTextJob, Lane, Lanes};
use crate::config::Config;
use crate::engine::Engine;
use crate::error::{Error as CoreError, ErrorCode, Result as CoreResult};
use crate::orchestrate::Orchestrator;
use crate::store::Store;
use crate::tools::{self, ToolContext};

type Job = Box<dyn FnOnce(&Engine) -> CoreResult<Value> + Send + 'static>;

/// A JS value handed back as is (a promise made inside a plain JS function).
struct Raw(napi::sys::napi_value);

impl ToNapiValue for Raw {
    unsafe fn to_napi_value(_env: napi::sys::napi_env, val: Self) -> napi::Result<napi::sys::napi_value> {
        Ok(val.0)
    }
}

/// Runs a job on a blocking thread; the promise settles on the JS thread.
fn spawn<'env>(
    env: &'env Env,
    engine: Option<Arc<Engine>>,
    job: CoreResult<Job>,
) -> napi::Result<PromiseRaw<'env, Unknown<'env>>> {
    spawn_text(env, engine, job.map(|j| -> TextJob { Box::new(move |e: &Engine| to_text(&j(e)?)) }))
}

/// A job answering JSON text.
type TextJob = Box<dyn FnOnce(&Engine) -> CoreResult<String> + Send + 'static>;

/// Runs a job on a worker; the promise settles on the JS thread.
fn spawn_text<'env>(
    env: &'env Env,
    engine: Option<Arc<Engine>>,
    job: CoreResult<TextJob>,
) -> napi::Result<PromiseRaw<'env, Unknown<'env>>> {
    env.spawn_future_with_callback(
        async move {
            let work = move || -> CoreResult<String> {
                let job = job?;
                let engine = engine.ok_or_else(CoreError::closed)?;
                if engine.store().is_closed() {
                    return Err(CoreError::closed());
                }
                job(&engine)
            };
            // The job is short SQL: run it on this worker (tokio moves its other tasks away while
            // it blocks) rather than handing it to a blocking thread and back. A panic is caught.
            let out = tokio::task::block_in_place(|| std::panic::catch_unwind(std::panic::AssertUnwindSafe(work)));
            Ok(out.unwrap_or_else(|_| Err(internal_error())))
        },
        |env, r: CoreResult<String>| match r {
            Ok(text) => from_json_text(env, &text),
            Err(e) => Err(js_error(env, &e)),
        },
    )
}

fn rejected<'env>(env: &'env Env, e: CoreError) -> napi::Result<PromiseRaw<'env, Unknown<'env>>> {
    spawn(env, None, Err(e))
}

/// A store job that may run inline (bounded work, at most one write).
type FastJob = Arc<dyn Fn(&Engine) -> CoreResult<Value> + Send + Sync + 'static>;

fn to_text(v: &Value) -> CoreResult<String> {
    serde_json::to_string(v).map_err(|e| CoreError::store(format!("cannot encode the result: {e}")))
}

/// A rejection made on the JS thread (an `Error` with `code`).
fn rejected_now<'env>(env: &'env Env, e: &CoreError) -> napi::Result<PromiseRaw<'env, Unknown<'env>>> {
    let mut obj = env.create_error(napi::Error::new(Status::GenericFailure, e.message()))?;
    obj.set_named_property("code", e.code().as_str())?;
    PromiseRaw::reject(env, obj.to_unknown())
}

/// Runs a short, bounded store job inline on the JS thread when it can go at once (no other
/// thread holds the connection, no other process the write lock), with no thread hop: a read
/// at once (the promise is settled before this returns), a write at the end of this turn of JS
/// code, together with the turn's other writes in one transaction (`lanes::queue`). When it
/// would have waited, or is part of a larger burst, it goes to its lane (reads to the reader
/// thread, writes to the group-commit writer), so the JS thread never waits on a lock.
fn spawn_fast<'env>(
    env: &'env Env,
    lanes: &Arc<Lanes>,
    lane: Lane,
    job: CoreResult<FastJob>,
) -> napi::Result<PromiseRaw<'env, Unknown<'env>>> {
    spawn_fast_text(env, lanes, lane, job.map(|j| -> FastTextJob { Arc::new(move |e: &Engine| to_text(&j(e)?)) }))
}

/// When it cannot run inline, the job goes to its lane (a write to the group-commit writer).
fn spawn_fast_text<'env>(
    env: &'env Env,
    lanes: &Arc<Lanes>,
    lane: Lane,
    job: CoreResult<FastTextJob>,
) -> napi::Result<PromiseRaw<'env, Unknown<'env>>> {
    let engine = lanes.engine();
    let job = match job {
        Ok(j) => j,
        Err(e) => return rejected_now(env, &e),
    };
    if engine.store().is_closed() {
        return rejected_now(env, &CoreError::closed());
    }
    // Writes wait for the end of this turn of JS code and run together; a read behind them.
    if lane == Lane::Write || lanes::turn_has_writes() {
        return lanes::queue(env, lanes, lane, job);
    }
    if !take_inline_turn(env) {
        return lanes.submit(env, lane, Box::new(move |e: &Engine| job(e)));
    }
    let out = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| crate::store::inline(|| job(engine))));
    match out {
        Ok(Err(e)) if crate::store::is_would_block(&e) => {}
        Ok(Ok(text)) => return PromiseRaw::resolve(env, from_json_text(env, &text)?),
        Ok(Err(e)) => return rejected_now(env, &e),
        Err(_) => return rejected_now(env, &internal_error()),
    }
    lanes.submit(env, lane, Box::new(move |e: &Engine| job(e)))
}

thread_local! {
    /// Whether the current synchronous run of JS code has had its inline job already.
    static INLINE_TURN_TAKEN: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
}

/// One inline job per synchronous run of JS code: a caller that awaits each call gets every
/// call inline, while a burst (many calls started in one go, `Promise.all` of writes) has its
/// first call inline and the rest on the worker, so a burst never holds the event loop for more
/// than one short job. The turn is given back by a microtask, which runs once the current
/// synchronous code has finished.
fn take_inline_turn(env: &Env) -> bool {
    if INLINE_TURN_TAKEN.with(|t| t.replace(true)) {
        return false;
    }
    let queued = (|| -> napi::Result<()> {
        let reset = env.create_function_from_closure::<(), (), _>("inlineTurn", |_| {
            INLINE_TURN_TAKEN.with(|t| t.set(false));
            Ok(())
        })?;
        let global = env.get_global()?;
        let queue: Function<Unknown, Unknown> = global.get_named_property("queueMicrotask")?;
        queue.call(reset.to_unknown())?;
        Ok(())
    })();
    if queued.is_err() {
        super::js::clear_pending(env);
        // without a way to give the turn back, stay on the worker path from now on
        return false;
    }
    true
}

fn internal_error() -> CoreError {
    CoreError::new(ErrorCode::StoreError, "internal error: the operation failed unexpectedly (a bug; please report it)")
}

/// Runs async work (model runs, waits) on the runtime; a panic inside becomes a
/// `STORE_ERROR` rejection, not a crash.
fn spawn_async<'env, F>(env: &'env Env, work: CoreResult<F>) -> napi::Result<PromiseRaw<'env, Unknown<'env>>>
where
    F: std::future::Future<Output = CoreResult<Value>> + Send + 'static,
{
    env.spawn_future_with_callback(
        async move {
            let fut = match work {
                Ok(f) => f,
                Err(e) => return Ok(Err(e)),
            };
            let out = tokio::spawn(fut).await.unwrap_or_else(|_| Err(internal_error()));
            Ok(out.and_then(|v| {
                serde_json::to_string(&v).map_err(|e| CoreError::store(format!("cannot encode the result: {e}")))
            }))
        },
        |env, r: CoreResult<String>| match r {
            Ok(text) => from_json_text(env, &text),
            Err(e) => Err(js_error(env, &e)),
        },
    )
}

/// Options of `SessionTools.open`.
struct OpenOptions {
    path: String,
    config: Config,
    mirror_dir: Option<PathBuf>,
    callbacks: Callbacks,
}

fn read_open_options(env: &Env, options: Option<Unknown<'_>>) -> CoreResult<OpenOptions> {
    let out = read_open_options_inner(env, options);
    if out.is_err() {
        super::js::clear_pending(env);
    }
    out
}

fn read_open_options_inner(env: &Env, options: Option<Unknown<'_>>) -> CoreResult<OpenOptions> {
    let bad = |m: String| CoreError::invalid_request(m);
    let Some(options) = options else { return Err(bad("open options required: { path, config? }".into())) };
    if options.get_type().map_err(|e| bad(e.reason.clone()))? != ValueType::Object {
        return Err(bad("open options must be an object: { path, config? }".into()));
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
    let path = match to_json_exact(env, get("path")?, "options.path")? {
        Value::String(s) if !s.trim().is_empty() => s,
        Value::Null => return Err(bad("options.path required".into())),
        _ => return Err(bad("invalid options.path: must be a non-empty string".into())),
    };
    let config = Config::from_json(&to_json(env, get("config")?, "config")?)?;
    let mut functions = Vec::new();
    for name in ["runAgent", "deliver", "onEvent", "steer"] {
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
        None => (path != ":memory:").then(|| {
            let p = PathBuf::from(&path);
            p.parent().map(|d| d.join("transcripts")).unwrap_or_else(|| PathBuf::from("transcripts"))
        }),
        Some(v) => match to_json_exact(env, Some(v), "options.mirrorDir")? {
            Value::Null => None,
            Value::String(s) if !s.trim().is_empty() && !s.contains('\0') => Some(PathBuf::from(s)),
            _ => return Err(bad("invalid options.mirrorDir: must be a non-empty string or null".into())),
        },
    };
    Ok(OpenOptions { path, config, mirror_dir, callbacks })
}

/// The session store, the send-policy engine and the session tools, opened on one SQLite file.
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
                let (path, config, mirror_dir) = (o.path, o.config, o.mirror_dir);
                let out = tokio::task::spawn_blocking(move || -> CoreResult<Engine> {
                    let store = Store::open(&path)?;
                    Ok(Engine::new(store, config, mirror_dir))
                })
                .await;
                let engine = match out
                    .unwrap_or_else(|_| Err(CoreError::store("internal error: opening the store failed unexpectedly")))
                {
                    Ok(e) => Arc::new(e),
                    Err(e) => return Ok(Err(e)),
                };
                let lanes = match Lanes::start(engine.clone()) {
                    Ok(l) => Arc::new(l),
                    Err(e) => return Ok(Err(e)),
                };
                let orch = Orchestrator::new(engine, Arc::new(JsHost::new(o.callbacks)));
                if let Err(e) = orch.start().await {
                    orch.close().await;
                    return Ok(Err(e));
                }
                Ok(Ok((orch, lanes)))
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
        ts_return_type = "Promise<{ calls: number; totalMs: number; perCallUs: number }>"
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
                super::host::call(&tsfn, super::host::JsonArg::new(req.clone()), "fn")
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
    #[napi(ts_args_type = "config: GatewayConfig | null | undefined")]
    pub fn set_config(&self, env: &Env, config: Option<Unknown<'_>>) -> napi::Result<()> {
        let cfg = to_json(env, config, "config")
            .map_err(|e| CoreError::invalid_config(e.message().to_owned()))
            .and_then(|v| Config::from_json(&v));
        match cfg {
            Ok(c) => {
                self.engine.set_config(c);
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
    #[napi(ts_args_type = "runId: string, options?: { timeoutMs?: number }", ts_return_type = "Promise<WaitRunResult>")]
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
        self.run1(env, requester_key, "requesterKey", move |_e, k| {
            let key = match k {
                Value::Null => None,
                Value::String(s) => Some(s.as_str()),
                _ => return Err(CoreError::invalid_request("invalid requesterKey: must be a string")),
            };
            crate::orchestrate::subagents::list(&orch, key).map(Value::Array)
        })
    }

    /// The path the store was opened with.
    #[napi(getter)]
    pub fn path(&self) -> String {
        self.engine.store().path().to_owned()
    }

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

    #[napi(ts_args_type = "key: string, patch: Partial<SessionEntry>", ts_return_type = "Promise<SessionEntry>")]
    pub fn upsert_session<'env>(
        &self,
        env: &'env Env,
        key: Option<Unknown<'env>>,
        patch: Option<Unknown<'env>>,
    ) -> napi::Result<PromiseRaw<'env, Unknown<'env>>> {
        self.fast2(env, Lane::Write, key, "key", patch, "patch", move |e: &Engine, k: &Value, p: &Value| {
            Ok(Value::Object(e.upsert_session(k, p)?))
        })
    }

    #[napi(
        ts_args_type = "params: SessionsPatchParams",
        ts_return_type = "Promise<{ ok: true; key: string; entry: SessionEntry }>"
    )]
    pub fn patch_session<'env>(
        &self,
        env: &'env Env,
        params: Option<Unknown<'env>>,
    ) -> napi::Result<PromiseRaw<'env, Unknown<'env>>> {
        self.run1(env, params, "params", |e, p| e.patch_session(p))
    }

    #[napi(ts_args_type = "params: SessionsResolveParams", ts_return_type = "Promise<{ ok: true; key: string }>")]
    pub fn resolve_session<'env>(
        &self,
        env: &'env Env,
        params: Option<Unknown<'env>>,
    ) -> napi::Result<PromiseRaw<'env, Unknown<'env>>> {
        self.run1(env, params, "params", |e, p| e.resolve_session(p))
    }

    #[napi(ts_args_type = "params?: SessionsListParams", ts_return_type = "Promise<SessionsListResult>")]
    pub fn list_sessions<'env>(
        &self,
        env: &'env Env,
        params: Option<Unknown<'env>>,
    ) -> napi::Result<PromiseRaw<'env, Unknown<'env>>> {
        self.run1(env, params, "params", |e, p| e.list_sessions(p))
    }

    #[napi(
        ts_args_type = "key: string, options?: { deleteTranscript?: boolean }",
        ts_return_type = "Promise<{ ok: true; key: string; deleted: boolean }>"
    )]
    pub fn delete_session<'env>(
        &self,
        env: &'env Env,
        key: Option<Unknown<'env>>,
        options: Option<Unknown<'env>>,
    ) -> napi::Result<PromiseRaw<'env, Unknown<'env>>> {
        let args = to_json(env, key, "key").and_then(|k| Ok((k, to_json(env, options, "options")?)));
        let orch = self.orch.clone();
        spawn_async(env, args.map(|(k, o)| async move { orch.delete_session(k, o).await }))
    }

    #[napi(ts_args_type = "key: string", ts_return_type = "Promise<{ ok: true; key: string; entry: SessionEntry }>")]
    pub fn reset_session<'env>(
        &self,
        env: &'env Env,
        key: Option<Unknown<'env>>,
    ) -> napi::Result<PromiseRaw<'env, Unknown<'env>>> {
        self.run1(env, key, "key", |e, k| e.reset_session(k))
    }

    #[napi(
        ts_args_type = "key: string, messages: TranscriptMessage[]",
        ts_return_type = "Promise<{ sessionKey: string; sessionId: string; appended: number }>"
    )]
    pub fn append_messages<'env>(
        &self,
        env: &'env Env,
        key: Option<Unknown<'env>>,
        messages: Option<Unknown<'env>>,
    ) -> napi::Result<PromiseRaw<'env, Unknown<'env>>> {
        self.fast2(env, Lane::Write, key, "key", messages, "messages", move |e: &Engine, k: &Value, m: &Value| {
            e.append_messages(k, m)
        })
    }

    #[napi(
        ts_args_type = "key: string, options?: { limit?: number; before?: number }",
        ts_return_type = "Promise<ChatHistoryResult>"
    )]
    pub fn chat_history<'env>(
        &self,
        env: &'env Env,
        key: Option<Unknown<'env>>,
        options: Option<Unknown<'env>>,
    ) -> napi::Result<PromiseRaw<'env, Unknown<'env>>> {
        self.fast2(env, Lane::Read, key, "key", options, "options", |e, k, o| e.chat_history_json(k, o))
    }

    #[napi(
        ts_args_type = "params: { sessionKey: string; channel?: string; chatType?: string }",
        ts_return_type = "Promise<'allow' | 'deny'>"
    )]
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

    #[napi(
        ts_args_type = "params: { sessionKey: string; text: string; isOwner: boolean }",
        ts_return_type = "Promise<{ handled: boolean; reply?: string }>"
    )]
    pub fn handle_send_command<'env>(
        &self,
        env: &'env Env,
        params: Option<Unknown<'env>>,
    ) -> napi::Result<PromiseRaw<'env, Unknown<'env>>> {
        self.run1(env, params, "params", |e, p| e.handle_send_command(p))
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
    #[napi(ts_args_type = "dir: string", ts_return_type = "Promise<ExportReport>")]
    pub fn export_state_dir<'env>(
        &self,
        env: &'env Env,
        dir: Option<Unknown<'env>>,
    ) -> napi::Result<PromiseRaw<'env, Unknown<'env>>> {
        self.run1(env, dir, "dir", |e, d| e.export_state_dir(d))
    }

    /// Counts of what the store holds, and its size.
    #[napi(ts_return_type = "Promise<StoreStats>")]
    pub fn stats<'env>(&self, env: &'env Env) -> napi::Result<PromiseRaw<'env, Unknown<'env>>> {
        self.run(env, Ok(Box::new(|e: &Engine| e.stats())))
    }

    /// `sessions_list`
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
        call_tool(env, &self.orch, &self.lanes, "sessions_list", params, ctx, false)
    }

    /// `sessions_history`
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
        call_tool(env, &self.orch, &self.lanes, "sessions_history", params, ctx, false)
    }

    /// `sessions_send`
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
        call_tool(env, &self.orch, &self.lanes, "sessions_send", params, ctx, false)
    }

    /// `sessions_spawn`
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
        call_tool(env, &self.orch, &self.lanes, "sessions_spawn", params, ctx, false)
    }

    /// `agents_list`
    #[napi(ts_args_type = "ctx?: ToolContext", ts_return_type = "Promise<AgentsListResult>")]
    pub fn agents_list<'env>(
        &self,
        env: &'env Env,
        ctx: Option<Unknown<'env>>,
    ) -> napi::Result<PromiseRaw<'env, Unknown<'env>>> {
        call_tool(env, &self.orch, &self.lanes, "agents_list", None, ctx, false)
    }

    /// The tool definitions for a caller (sub-agents get none of the session tools).
    #[napi(ts_args_type = "ctx?: ToolContext", ts_return_type = "ToolDefinition[]")]
    pub fn tool_definitions<'env>(&self, env: &'env Env, ctx: Option<Unknown<'env>>) -> napi::Result<Unknown<'env>> {
        let ctx = to_json(env, ctx, "ctx").and_then(|c| ToolContext::from_json(&c)).map_err(|e| js_error(env, &e))?;
        let defs = Value::Array(tools::definitions(&ctx));
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
        let name = match to_json(env, name, "name") {
            Ok(Value::String(s)) if tools::TOOL_NAMES.contains(&s.as_str()) => s,
            Ok(Value::String(s)) => {
                return rejected(env, CoreError::invalid_request(format!("unknown tool: {}", crate::error::clip(&s))))
            }
            Ok(_) => return rejected(env, CoreError::invalid_request("invalid name: must be a tool name string")),
            Err(e) => return rejected(env, e),
        };
        call_tool(env, &self.orch, &self.lanes, &name, args, ctx, true)
    }

    /// The gateway's tool objects: `{ name, label, description, parameters, execute }`.
    #[napi(ts_args_type = "ctx?: ToolContext", ts_return_type = "SessionTool[]")]
    pub fn create_tools<'env>(&self, env: &'env Env, ctx: Option<Unknown<'env>>) -> napi::Result<Unknown<'env>> {
        let ctx_json = to_json(env, ctx, "ctx").map_err(|e| js_error(env, &e))?;
        let parsed = ToolContext::from_json(&ctx_json).map_err(|e| js_error(env, &e))?;
        let defs = tools::definitions(&parsed);
        let mut arr = env.create_array(defs.len() as u32)?;
        for (i, def) in defs.into_iter().enumerate() {
            let name = def.get("name").and_then(Value::as_str).unwrap_or_default().to_owned();
            let obj_val = from_json_text(env, &def.to_string())?;
            let mut obj: Object = unsafe { Object::from_napi_value(env.raw(), obj_val.raw()) }?;
            let orch = self.orch.clone();
            let lanes = self.lanes.clone();
            let ctx_json = ctx_json.clone();
            let execute = env.create_function_from_closure::<Unknown, Raw, _>("execute", move |call| {
                let args: Option<Unknown> = call.get::<Unknown>(1).ok();
                let env = &*call.env;
                // What the model sent is never a reason to reject: unconvertible args read as `{}`.
                let args = to_json(env, args, "args").unwrap_or(Value::Null);
                let promise = tool_promise(env, &orch, &lanes, &name, args, ctx_json.clone(), true)?;
                Ok(Raw(promise.raw()))
            })?;
            obj.set_named_property("execute", execute)?;
            arr.set(i as u32, obj)?;
        }
        Ok(arr.to_unknown())
    }
}

impl SessionTools {
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

    /// A method of two JSON arguments, a bounded job of at most one write, which may run inline.
    fn fast2<'env>(
        &self,
        env: &'env Env,
        lane: Lane,
        a: Option<Unknown<'env>>,
        a_name: &str,
        b: Option<Unknown<'env>>,
        b_name: &str,
        f: impl Fn(&Engine, &Value, &Value) -> CoreResult<Value> + Send + Sync + 'static,
    ) -> napi::Result<PromiseRaw<'env, Unknown<'env>>> {
        let args = to_json(env, a, a_name).and_then(|a| Ok((a, to_json(env, b, b_name)?)));
        spawn_fast(env, &self.lanes, lane, args.map(|(a, b)| -> FastJob { Arc::new(move |e: &Engine| f(e, &a, &b)) }))
    }

    fn run<'env>(&self, env: &'env Env, job: CoreResult<Job>) -> napi::Result<PromiseRaw<'env, Unknown<'env>>> {
        spawn(env, Some(self.engine.clone()), job)
    }
}

/// A tool call from JS: the store-only tools run as short blocking jobs, the orchestrated
/// ones (`sessions_send`, `sessions_spawn`) as async work.
fn call_tool<'env>(
    env: &'env Env,
    orch: &Arc<Orchestrator>,
    lanes: &Arc<Lanes>,
    name: &str,
    params: Option<Unknown<'env>>,
    ctx: Option<Unknown<'env>>,
    wrap: bool,
) -> napi::Result<PromiseRaw<'env, Unknown<'env>>> {
    // What the model sent is never a reason to reject: unconvertible params read as `{}`.
    let params = to_json(env, params, "params").unwrap_or(Value::Null);
    match to_json(env, ctx, "ctx") {
        Ok(ctx) => tool_promise(env, orch, lanes, name, params, ctx, wrap),
        Err(e) => rejected(env, e),
    }
}

fn tool_promise<'env>(
    env: &'env Env,
    orch: &Arc<Orchestrator>,
    lanes: &Arc<Lanes>,
    name: &str,
    params: Value,
    ctx: Value,
    wrap: bool,
) -> napi::Result<PromiseRaw<'env, Unknown<'env>>> {
    let name = name.to_owned();
    if name == "sessions_send" || name == "sessions_spawn" {
        let orch = orch.clone();
        return spawn_async(env, Ok(async move { orch.tool(&name, params, ctx, wrap).await }));
    }
    if inline_tool(&name, &params) {
        if !wrap {
            let job: FastTextJob = Arc::new(move |e: &Engine| tools::run_text(e, &name, &params, &ctx));
            return spawn_fast_text(env, lanes, Lane::Read, Ok(job));
        }
        let job: FastJob = Arc::new(move |e: &Engine| tools::run(e, &name, &params, &ctx, wrap));
        return spawn_fast(env, lanes, Lane::Read, Ok(job));
    }
    if !wrap {
        let job: TextJob = Box::new(move |e: &Engine| tools::run_text(e, &name, &params, &ctx));
        return spawn_text(env, Some(orch.engine().clone()), Ok(job));
    }
    let job: Job = Box::new(move |e: &Engine| tools::run(e, &name, &params, &ctx, wrap));
    spawn(env, Some(orch.engine().clone()), Ok(job))
}

/// Whether a read tool call is bounded enough to run inline: `agents_list`; `sessions_history`
/// (it reads O(limit) rows, at most 1000); `sessions_list` with a small `limit` and none of the
/// filters that may walk many rows (`kinds`, `activeMinutes`) and no message previews.
fn inline_tool(name: &str, params: &Value) -> bool {
    match name {
        "agents_list" | "sessions_history" => true,
        "sessions_list" => {
            let small = params.get("limit").and_then(Value::as_f64).map(|l| l <= 100.0).unwrap_or(false);
            let walks =
                ["kinds", "activeMinutes"].iter().any(|k| params.get(*k).map(|v| !v.is_null()).unwrap_or(false));
            let previews = params.get("messageLimit").and_then(Value::as_f64).map(|m| m > 0.0).unwrap_or(false);
            small && !walks && !previews
        }
        _ => false,
    }
}
