//! How a call from JS is scheduled: a short store job inline on the JS thread when it is
//! bounded and can go at once, else on its lane (`lanes`); async work (model runs, waits) and the
//! long jobs of import and export on the runtime.
//! Every promise settles with the result or a JS error (`error.rs`); a panic becomes a
//! `STORE_ERROR` rejection. Which tool call is bounded is the `Tool`'s to say, not this file's.

use std::sync::Arc;

use napi::bindgen_prelude::*;
use napi::Env;
use serde_json::Value;

use super::cache::{self, Cached};
use super::chunked::answer_from_text;
use super::error::{error_value, js_error};
use super::js::{clear_pending, to_json};
use super::lanes::{self, Lane, Lanes};
use crate::engine::Engine;
use crate::error::{Error as CoreError, ErrorCode, Result as CoreResult};
use crate::orchestrate::Orchestrator;
use crate::tools::{self, Tool};

pub type Job = Box<dyn FnOnce(&Engine) -> CoreResult<Value> + Send + 'static>;

/// Runs a job on a blocking thread; the promise settles on the JS thread.
pub fn spawn_job<'env>(
    env: &'env Env,
    engine: Option<Arc<Engine>>,
    job: CoreResult<Job>,
) -> napi::Result<PromiseRaw<'env, Unknown<'env>>> {
    spawn_text(env, engine, job.map(|j| -> TextJob { Box::new(move |e: &Engine| to_text(&j(e)?)) }))
}

/// A job answering JSON text.
pub type TextJob = Box<dyn FnOnce(&Engine) -> CoreResult<String> + Send + 'static>;

/// Runs a job on a worker; the promise settles on the JS thread.
pub fn spawn_text<'env>(
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
            // The job (an engine call that is not a tool's short read: a patch, a listing of the
            // engine's API, an import or export) runs on this worker (tokio moves its other tasks
            // away while it blocks) rather than on a blocking thread and back. A panic is caught.
            let out = tokio::task::block_in_place(|| std::panic::catch_unwind(std::panic::AssertUnwindSafe(work)));
            Ok(out.unwrap_or_else(|_| Err(internal_error())))
        },
        |env, r: CoreResult<String>| match r {
            Ok(text) => answer_from_text(env, &text),
            Err(e) => Err(js_error(env, &e)),
        },
    )
}

pub fn rejected<'env>(env: &'env Env, e: CoreError) -> napi::Result<PromiseRaw<'env, Unknown<'env>>> {
    spawn_job(env, None, Err(e))
}

/// A store job that may run inline (bounded work, at most one write).
pub type FastJob = Arc<dyn Fn(&Engine) -> CoreResult<Value> + Send + Sync + 'static>;
pub use super::lanes::FastTextJob;

pub fn to_text(v: &Value) -> CoreResult<String> {
    serde_json::to_string(v).map_err(|e| CoreError::store(format!("cannot encode the result: {e}")))
}

/// A rejection made on the JS thread (an `Error` with `code`).
pub fn rejected_now<'env>(env: &'env Env, e: &CoreError) -> napi::Result<PromiseRaw<'env, Unknown<'env>>> {
    PromiseRaw::reject(env, error_value(env, e)?)
}

/// Runs a short, bounded store job inline on the JS thread when it can go at once (no other
/// thread holds the connection, no other process the write lock), with no thread hop: a read
/// at once (the promise is settled before this returns), a write at the end of this turn of JS
/// code, together with the turn's other writes in one transaction (`lanes::queue`). When it
/// would have waited, or is part of a larger burst, it goes to its lane (reads to the reader
/// thread, writes to the group-commit writer), so the JS thread never waits on a lock.
pub fn spawn_fast<'env>(
    env: &'env Env,
    lanes: &Arc<Lanes>,
    lane: Lane,
    job: CoreResult<FastJob>,
) -> napi::Result<PromiseRaw<'env, Unknown<'env>>> {
    spawn_fast_text(env, lanes, lane, job.map(|j| -> FastTextJob { Arc::new(move |e: &Engine| to_text(&j(e)?)) }))
}

pub fn spawn_fast_text<'env>(
    env: &'env Env,
    lanes: &Arc<Lanes>,
    lane: Lane,
    job: CoreResult<FastTextJob>,
) -> napi::Result<PromiseRaw<'env, Unknown<'env>>> {
    let job = match job {
        Ok(j) => j,
        Err(e) => return rejected_now(env, &e),
    };
    let engine = lanes.engine();
    if engine.store().is_closed() {
        return rejected_now(env, &CoreError::closed());
    }
    // Writes wait for the end of this turn of JS code and run together; a read behind them.
    if lane == Lane::Write || lanes::turn_has_writes() {
        return lanes::queue(env, lanes, lane, job, true);
    }
    if !take_inline_turn(env) {
        return lanes.submit(env, lane, Box::new(move |e: &Engine| job(e)));
    }
    let out = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| crate::store::inline(|| job(engine))));
    match out {
        Ok(Err(e)) if crate::store::is_would_block(&e) => {}
        Ok(Ok(text)) => return PromiseRaw::resolve(env, answer_from_text(env, &text)?),
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
pub fn take_inline_turn(env: &Env) -> bool {
    if INLINE_TURN_TAKEN.with(|t| t.replace(true)) {
        return false;
    }
    let give_back = |_: &Env| INLINE_TURN_TAKEN.with(|t| t.set(false));
    if cache::schedule(env, Cached::InlineTurn, "inlineTurn", Cached::QueueMicrotask, give_back).is_err() {
        clear_pending(env);
        // without a way to give the turn back, stay on the worker path from now on
        return false;
    }
    true
}

pub fn internal_error() -> CoreError {
    CoreError::new(ErrorCode::StoreError, "internal error: the operation failed unexpectedly (a bug; please report it)")
}

/// Runs async work (model runs, waits) on the runtime; a panic inside becomes a
/// `STORE_ERROR` rejection, not a crash.
pub fn spawn_async<'env, F>(env: &'env Env, work: CoreResult<F>) -> napi::Result<PromiseRaw<'env, Unknown<'env>>>
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
            Ok(text) => answer_from_text(env, &text),
            Err(e) => Err(js_error(env, &e)),
        },
    )
}

/// Starts `start` at once or, when this turn of JS code has writes waiting, once they are done,
/// so that it sees them: for the work that runs on the runtime (the orchestrated tools,
/// `deleteSession`, import and export) and so cannot take a place in the turn's queue. A mark
/// (a read that does nothing) takes that place, and its promise starts the work. Writes issued
/// after it in the same turn do not wait for it.
pub fn after_turn_writes<'env>(
    env: &'env Env,
    lanes: &Arc<Lanes>,
    start: impl FnOnce(&Env) -> napi::Result<PromiseRaw<'_, Unknown<'_>>> + 'static,
) -> napi::Result<PromiseRaw<'env, Unknown<'env>>> {
    if !lanes::turn_has_writes() {
        return start(env);
    }
    let mark: FastTextJob = Arc::new(|_: &Engine| Ok("null".to_owned()));
    let marked = lanes::queue(env, lanes, Lane::Read, mark, true)?;
    let chained = marked.then(move |ctx: CallbackContext<Unknown>| {
        let work = start(&ctx.env)?;
        // the then-promise takes on the work's promise
        Ok(PromiseRaw::<Unknown>::new(ctx.env.raw(), work.raw()))
    })?;
    Ok(PromiseRaw::new(env.raw(), chained.raw()))
}

/// A tool call from JS: the store-only tools run as short blocking jobs (inline when
/// [`Tool::is_bounded`]), the orchestrated ones ([`Tool::is_orchestrated`]) as async work.
pub fn call_tool<'env>(
    env: &'env Env,
    orch: &Arc<Orchestrator>,
    lanes: &Arc<Lanes>,
    tool: Tool,
    params: Option<Unknown<'env>>,
    ctx: Option<Unknown<'env>>,
    wrap: bool,
) -> napi::Result<PromiseRaw<'env, Unknown<'env>>> {
    // What the model sent is never a reason to reject: unconvertible params read as `{}`.
    let params = to_json(env, params, "params").unwrap_or(Value::Null);
    match to_json(env, ctx, "ctx") {
        Ok(ctx) => tool_promise(env, orch, lanes, tool, params, ctx, wrap),
        Err(e) => rejected(env, e),
    }
}

pub fn tool_promise<'env>(
    env: &'env Env,
    orch: &Arc<Orchestrator>,
    lanes: &Arc<Lanes>,
    tool: Tool,
    params: Value,
    ctx: Value,
    wrap: bool,
) -> napi::Result<PromiseRaw<'env, Unknown<'env>>> {
    if tool.is_orchestrated() {
        let orch = orch.clone();
        return after_turn_writes(env, lanes, move |env| {
            spawn_async(env, Ok(async move { orch.tool(tool, params, ctx, wrap).await }))
        });
    }
    if tool.is_bounded(&params) {
        if !wrap {
            let job: FastTextJob = Arc::new(move |e: &Engine| tools::run_wire(e, tool, &params, &ctx));
            return spawn_fast_text(env, lanes, Lane::Read, Ok(job));
        }
        let job: FastJob = Arc::new(move |e: &Engine| tools::run(e, tool, &params, &ctx, wrap));
        return spawn_fast(env, lanes, Lane::Read, Ok(job));
    }
    // a read too long to run inline (a filtered list, a long history)
    if !wrap {
        return spawn_off_thread(
            env,
            lanes,
            Lane::Read,
            Arc::new(move |e: &Engine| tools::run_wire(e, tool, &params, &ctx)),
        );
    }
    spawn_off_thread(
        env,
        lanes,
        Lane::Read,
        Arc::new(move |e: &Engine| to_text(&tools::run(e, tool, &params, &ctx, wrap)?)),
    )
}

/// A job too long to run on the JS thread (a filtered list, a large append): on its lane, in
/// call order. A write, or a read while this turn of JS code has writes waiting, is queued behind
/// the turn's writes (the read then sees them); any other read goes to the reader at once.
pub fn spawn_off_thread<'env>(
    env: &'env Env,
    lanes: &Arc<Lanes>,
    lane: Lane,
    job: FastTextJob,
) -> napi::Result<PromiseRaw<'env, Unknown<'env>>> {
    if lane == Lane::Write || lanes::turn_has_writes() {
        return lanes::queue(env, lanes, lane, job, false);
    }
    lanes.submit(env, lane, Box::new(move |e: &Engine| job(e)))
}
