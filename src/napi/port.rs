//! The completion port: how the results of store jobs run off the JS thread (the group-commit
//! writer, the reader lane) come back to it.
//!
//! napi's own futures create a threadsafe function, an environment cleanup hook and a wake-up of
//! the event loop for every call: about 70–120 µs of the JS thread per call in a burst. Here one
//! threadsafe function per JS environment, created once, carries every result: a job's
//! [`Ticket`] sends its outcome (JSON text or an error) through a channel (the JS thread never
//! waits on a lock a job thread holds), the first outcome of an empty queue wakes the loop, and the JS thread settles the queued promises, at most [`CHUNK`] per turn of
//! the event loop (the rest on the next one, through `setImmediate`), so a burst of results
//! never holds the loop for long. While promises are pending the port keeps Node alive; idle, it
//! does not.
//!
//! It decides nothing: what runs where is the caller's choice.

use std::cell::{Cell, RefCell};
use std::ffi::c_void;
use std::ptr;
use std::rc::Rc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{self, Receiver, Sender};
use std::sync::{Arc, Mutex};

use napi::bindgen_prelude::*;
use napi::{sys, Env};

use super::cache::{self, Cached};
use super::chunked::{answer_from_text, SPLIT_BYTES};
use super::error::error_value;
use crate::error::{Error as CoreError, Result as CoreResult};

/// Most promises settled in one turn of the event loop.
const CHUNK: usize = 64;

/// The promise a ticket settles: one made here (a `napi_deferred`, used only on the JS thread),
/// or one a call gathered in JS made (`gather.rs`: its segment and place in it).
#[derive(Clone, Copy)]
enum Target {
    Deferred(usize),
    Gathered(u32, u32),
}

/// A settled job: its promise and its outcome.
struct Done {
    target: Target,
    out: CoreResult<String>,
}

/// The part the job threads share. Outcomes go through a channel (no lock the JS thread could
/// wait on while a job thread holding it is off the CPU); the lock guards only the threadsafe
/// function, taken by a job thread to wake the loop (once per drained queue) and by teardown.
struct Shared {
    tx: Sender<Done>,
    /// the loop was woken (or a `setImmediate` is queued) and has not drained yet
    woken: AtomicBool,
    /// `None` once the environment is being torn down
    tsfn: Mutex<Option<usize>>,
}

/// Handed to a job: settles its promise once, from any thread.
pub struct Ticket {
    shared: Arc<Shared>,
    target: Target,
}

impl Ticket {
    /// Settles the promise now; on the JS thread only.
    pub fn settle_now(self, env: &Env, out: CoreResult<String>) {
        settle(env, Done { target: self.target, out });
        if let Some(local) = PORT.with(|p| p.borrow().clone()) {
            local.pending.set(local.pending.get().saturating_sub(1));
            if local.pending.get() == 0 {
                // SAFETY: on the JS thread; idle, the port does not keep Node alive.
                unsafe { sys::napi_unref_threadsafe_function(env.raw(), local.tsfn) };
            }
        }
    }

    /// Settles the promise from any thread, through the port.
    pub fn complete(self, out: CoreResult<String>) {
        if self.shared.tx.send(Done { target: self.target, out }).is_err() {
            return; // the environment is gone
        }
        if !self.shared.woken.swap(true, Ordering::SeqCst) {
            let tsfn = self.shared.tsfn.lock().unwrap_or_else(|p| p.into_inner());
            if let Some(tsfn) = *tsfn {
                // SAFETY: the function is alive while `tsfn` is set (the teardown hook clears it
                // under this lock before Node finalizes it).
                unsafe {
                    sys::napi_call_threadsafe_function(
                        tsfn as sys::napi_threadsafe_function,
                        ptr::null_mut(),
                        sys::ThreadsafeFunctionCallMode::nonblocking,
                    );
                }
            }
        }
    }
}

/// The port of the current JS thread's environment.
struct Local {
    shared: Arc<Shared>,
    rx: Receiver<Done>,
    tsfn: sys::napi_threadsafe_function,
    /// promises not settled yet
    pending: Cell<usize>,
}

thread_local! {
    static PORT: RefCell<Option<Rc<Local>>> = const { RefCell::new(None) };
}

fn port(env: &Env) -> napi::Result<Rc<Local>> {
    if let Some(p) = PORT.with(|p| p.borrow().clone()) {
        return Ok(p);
    }
    let (tx, rx) = mpsc::channel();
    let shared = Arc::new(Shared { tx, woken: AtomicBool::new(false), tsfn: Mutex::new(None) });
    let name = env.create_string("session-tools")?;
    let mut tsfn = ptr::null_mut();
    let context = Arc::into_raw(shared.clone()) as *mut c_void;
    // SAFETY: plain napi calls on the JS thread; `context` is an owned `Arc` reclaimed by the
    // teardown hook.
    unsafe {
        let status = sys::napi_create_threadsafe_function(
            env.raw(),
            ptr::null_mut(),
            ptr::null_mut(),
            name.raw(),
            0,
            1,
            ptr::null_mut(),
            None,
            context,
            Some(call_js),
            &mut tsfn,
        );
        if status != sys::Status::napi_ok {
            drop(Arc::from_raw(context as *const Shared));
            return Err(napi::Error::new(Status::GenericFailure, "cannot create the completion port"));
        }
        sys::napi_unref_threadsafe_function(env.raw(), tsfn);
        sys::napi_add_env_cleanup_hook(env.raw(), Some(teardown), context);
    }
    *shared.tsfn.lock().unwrap_or_else(|p| p.into_inner()) = Some(tsfn as usize);
    let local = Rc::new(Local { shared, rx, tsfn, pending: Cell::new(0) });
    PORT.with(|p| *p.borrow_mut() = Some(local.clone()));
    Ok(local)
}

unsafe extern "C" fn teardown(arg: *mut c_void) {
    // SAFETY: `arg` is the `Arc` given at creation, reclaimed once here.
    let shared = unsafe { Arc::from_raw(arg as *const Shared) };
    *shared.tsfn.lock().unwrap_or_else(|p| p.into_inner()) = None;
    PORT.with(|p| p.borrow_mut().take());
}

/// A new promise and the ticket that settles it.
pub fn promise<'env>(env: &'env Env) -> napi::Result<(Ticket, PromiseRaw<'env, Unknown<'env>>)> {
    let local = port(env)?;
    let mut deferred = ptr::null_mut();
    let mut promise = ptr::null_mut();
    // SAFETY: on the JS thread with a live env.
    let status = unsafe { sys::napi_create_promise(env.raw(), &mut deferred, &mut promise) };
    if status != sys::Status::napi_ok {
        return Err(napi::Error::new(Status::GenericFailure, "cannot create a promise"));
    }
    Ok((ticket(env, &local, Target::Deferred(deferred as usize)), PromiseRaw::new(env.raw(), promise)))
}

/// The ticket of the promise a gathered call made in JS: place `index` of segment `segment`.
pub fn gathered(env: &Env, segment: u32, index: u32) -> napi::Result<Ticket> {
    let local = port(env)?;
    Ok(ticket(env, &local, Target::Gathered(segment, index)))
}

fn ticket(env: &Env, local: &Local, target: Target) -> Ticket {
    if local.pending.replace(local.pending.get() + 1) == 0 {
        // SAFETY: on the JS thread; keeps Node alive while a promise is pending.
        unsafe { sys::napi_ref_threadsafe_function(env.raw(), local.tsfn) };
    }
    Ticket { shared: local.shared.clone(), target }
}

unsafe extern "C" fn call_js(env: sys::napi_env, _js_cb: sys::napi_value, _context: *mut c_void, _data: *mut c_void) {
    if env.is_null() {
        return; // the environment is going away
    }
    drain(&Env::from_raw(env));
}

/// Settles up to [`CHUNK`] queued promises; asks for another turn when more are queued.
fn drain(env: &Env) {
    let Some(local) = PORT.with(|p| p.borrow().clone()) else { return };
    let mut batch: Vec<Done> = local.rx.try_iter().take(CHUNK).collect();
    let mut more = batch.len() == CHUNK;
    if !more {
        // nothing left: the next outcome wakes the loop again; one sent before this store saw
        // the flag still set and did not, so look once more
        local.shared.woken.store(false, Ordering::SeqCst);
        if let Ok(d) = local.rx.try_recv() {
            batch.push(d);
            // the rest on the next turn, unless a job thread has woken the loop meanwhile
            more = !local.shared.woken.swap(true, Ordering::SeqCst);
        }
    }
    settle_all(env, &local, batch);
    if more && again(env).is_err() {
        // no `setImmediate`: settle the rest now rather than never
        super::js::clear_pending(env);
        loop {
            let rest: Vec<Done> = local.rx.try_iter().collect();
            if rest.is_empty() {
                break;
            }
            settle_all(env, &local, rest);
        }
        local.shared.woken.store(false, Ordering::SeqCst);
    }
    if local.pending.get() == 0 {
        // SAFETY: on the JS thread; idle, the port does not keep Node alive.
        unsafe { sys::napi_unref_threadsafe_function(env.raw(), local.tsfn) };
    }
}

/// Settles `batch` in order: the answers of gathered calls that succeeded, one run of them
/// after another, with one `JSON.parse` per run (`gather::settle_many`), the rest one by one.
fn settle_all(env: &Env, local: &Local, batch: Vec<Done>) {
    let mut run: Vec<(u32, u32, String)> = Vec::new();
    let flush_run = |run: &mut Vec<(u32, u32, String)>| {
        if run.is_empty() || super::gather::settle_many(env, run) {
            run.clear();
            return;
        }
        super::js::clear_pending(env);
        for (segment, index, text) in run.drain(..) {
            settle(env, Done { target: Target::Gathered(segment, index), out: Ok(text) });
        }
    };
    for d in batch {
        match d {
            Done { target: Target::Gathered(segment, index), out: Ok(text) } if text.len() <= SPLIT_BYTES => {
                run.push((segment, index, text))
            }
            other => {
                flush_run(&mut run);
                settle(env, other);
            }
        }
        local.pending.set(local.pending.get().saturating_sub(1));
    }
    flush_run(&mut run);
}

/// The rest of the queue on the next turn of the event loop.
fn again(env: &Env) -> napi::Result<()> {
    cache::schedule(env, Cached::Drain, "sessionToolsDrain", Cached::SetImmediate, drain)
}

fn settle(env: &Env, d: Done) {
    let deferred = match d.target {
        Target::Deferred(deferred) => deferred as sys::napi_deferred,
        Target::Gathered(segment, index) => return super::gather::settle(env, segment, index, d.out),
    };
    let value = match d.out {
        Ok(text) => {
            answer_from_text(env, &text).map_err(|e| CoreError::store(format!("cannot read the result: {}", e.reason)))
        }
        Err(e) => Err(e),
    };
    // SAFETY: each deferred is settled exactly once, on the JS thread.
    unsafe {
        match value {
            Ok(v) => {
                sys::napi_resolve_deferred(env.raw(), deferred, v.raw());
            }
            Err(e) => {
                super::js::clear_pending(env);
                let raw = error_value(env, &e).map(|v| v.raw()).unwrap_or_else(|_| {
                    super::js::clear_pending(env);
                    let mut undefined = ptr::null_mut();
                    sys::napi_get_undefined(env.raw(), &mut undefined);
                    undefined
                });
                sys::napi_reject_deferred(env.raw(), deferred, raw);
            }
        }
    }
}
