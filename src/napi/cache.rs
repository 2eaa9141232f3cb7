//! The JS functions the skin calls on every call (`JSON.parse`, `JSON.stringify`,
//! `queueMicrotask`) and its own microtask callbacks, looked up or made once per JS environment
//! and kept by reference: a call no longer reads them off the global object, nor makes a new
//! function each time (perf3: about 2% of a short call).
//!
//! It decides nothing; what is called when is the caller's choice.

use std::cell::RefCell;
use std::ptr;

use napi::bindgen_prelude::*;
use napi::{sys, Env};

/// A function kept for the environment of the current thread.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum Cached {
    JsonParse,
    JsonStringify,
    QueueMicrotask,
    SetImmediate,
    /// `jobs.rs`: gives the inline turn back
    InlineTurn,
    /// `lanes.rs`: runs the turn's queued writes
    Flush,
    /// `lanes.rs`: hands a burst's writes to the writer
    Spill,
    /// `chunked.rs`: materialises a large answer over several turns
    Materialise,
    /// `rows.rs`: makes an indexed answer's value, keeping its rows
    Rows,
    /// `gather.rs`: the script's object, its token and the functions the skin calls
    Gather,
    GatherToken,
    GatherTake,
    GatherSize,
    GatherSeal,
    GatherSettle,
    GatherSettleMany,
}

/// The environment the references belong to, and the references.
type Refs = (usize, Vec<(Cached, usize)>);

thread_local! {
    static REFS: RefCell<Refs> = const { RefCell::new((0, Vec::new())) };
}

/// The function `which` of this environment: made by `make` the first time, then kept (a
/// strong reference, for the environment's life).
pub fn function<'env>(
    env: &'env Env,
    which: Cached,
    make: impl FnOnce(&'env Env) -> napi::Result<Unknown<'env>>,
) -> napi::Result<Unknown<'env>> {
    let id = env.raw() as usize;
    let kept = REFS.with(|r| {
        let mut r = r.borrow_mut();
        if r.0 != id {
            // another environment on this thread (the old one is gone): start afresh
            *r = (id, Vec::new());
        }
        r.1.iter().find(|(w, _)| *w == which).map(|(_, reference)| *reference)
    });
    if let Some(reference) = kept {
        let mut value = ptr::null_mut();
        // SAFETY: a reference made in this environment, on its thread.
        let status = unsafe { sys::napi_get_reference_value(env.raw(), reference as sys::napi_ref, &mut value) };
        if status == sys::Status::napi_ok && !value.is_null() {
            // SAFETY: a value of this environment.
            return unsafe { Unknown::from_napi_value(env.raw(), value) };
        }
    }
    let made = make(env)?;
    let mut reference = ptr::null_mut();
    // SAFETY: a value of this environment, on its thread.
    if unsafe { sys::napi_create_reference(env.raw(), made.raw(), 1, &mut reference) } == sys::Status::napi_ok {
        REFS.with(|r| r.borrow_mut().1.push((which, reference as usize)));
    }
    Ok(made)
}

/// Calls `run` later, through the global `on` (`QueueMicrotask` or `SetImmediate`): the skin's
/// own callback `which` (named `name` in JS), made once per environment.
pub fn schedule(env: &Env, which: Cached, name: &'static str, on: Cached, run: fn(&Env)) -> napi::Result<()> {
    let f = function(env, which, |env| {
        let f = env.create_function_from_closure::<(), (), _>(name, move |ctx| {
            run(ctx.env);
            Ok(())
        })?;
        Ok(f.to_unknown())
    })?;
    global_function(env, on)?.call(f)?;
    Ok(())
}

/// A property of the global object (`queueMicrotask`, `setImmediate`) or of `JSON`.
pub fn global_function<'env>(
    env: &'env Env,
    which: Cached,
) -> napi::Result<Function<'env, Unknown<'env>, Unknown<'env>>> {
    let f = function(env, which, |env| {
        let global = env.get_global()?;
        match which {
            Cached::JsonParse | Cached::JsonStringify => {
                let json: Object = global.get_named_property("JSON")?;
                json.get_named_property(if which == Cached::JsonParse { "parse" } else { "stringify" })
            }
            Cached::SetImmediate => global.get_named_property("setImmediate"),
            _ => global.get_named_property("queueMicrotask"),
        }
    })?;
    // SAFETY: a function value of this environment.
    unsafe { Function::from_napi_value(env.raw(), f.raw()) }
}
