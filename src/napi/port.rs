//! The completion port: how the results of store jobs run off the JS thread (the group-commit
//! writer, the reader lane) come back to it.
//!
//! napi's own futures create a threadsafe function, an environment cleanup hook and a wake-up of
//! the event loop for every call: about 70–120 µs of the JS thread per call in a burst. Here one
//! wake-up per JS environment (`wake.rs`, a libuv handle of our own), made once, carries every
//! result: a job's [`Ticket`] sends its outcome (JSON text or an error) through a channel (the
//! JS thread never waits on a lock a job thread holds), the first outcome of an empty queue
//! wakes the loop, and the JS thread settles the queued promises for at most [`TURN_BUDGET`] of
//! one turn of the event loop, a slice of [`SLICE`] at a time (the rest on the next turn, after
//! the timers), so a burst of results never holds the loop for long. While promises are pending
//! the port keeps Node alive; idle, it does not.
//!
//! It decides nothing: what runs where is the caller's choice.

use std::cell::{Cell, RefCell};
use std::ptr;
use std::rc::Rc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{self, Receiver, Sender};
use std::sync::Arc;
use std::time::{Duration, Instant};

use napi::bindgen_prelude::*;
use napi::{sys, Env};

use super::chunked::{answer_from_text, SPLIT_BYTES};
use super::error::error_value;
use super::wake::{Wake, Waker};
use crate::error::{Error as CoreError, Result as CoreResult};

/// Promises settled together (the answers of gathered calls with one `JSON.parse`), between two
/// looks at the clock.
const SLICE: usize = 16;

/// Settling done in one turn of the event loop; past it the rest waits for the next turn. Well
/// under the 1 ms of `monitorEventLoopDelay`'s resolution, so that a turn that settles answers
/// and the caller's own code after it stay within 2 ms (issue 17 target 4).
const TURN_BUDGET: Duration = Duration::from_micros(500);

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

/// The part the job threads share: outcomes go through a channel, and the loop is woken through
/// the port's own handle (no lock the JS thread takes: see `wake.rs`).
struct Shared {
    tx: Sender<Done>,
    /// the loop was woken (or the JS thread asked for another turn) and has not drained yet
    woken: AtomicBool,
    waker: Arc<Waker>,
}

/// Handed to a job: settles its promise once, from any thread.
pub struct Ticket {
    shared: Arc<Shared>,
    target: Target,
}

impl Ticket {
    /// Settles the promise now; on the JS thread only.
    pub fn settle_now(self, env: &Env, out: CoreResult<String>) {
        settle_now_all(env, vec![(self, out)]);
    }

    /// Settles the promise from any thread, through the port.
    pub fn complete(self, out: CoreResult<String>) {
        if self.shared.tx.send(Done { target: self.target, out }).is_err() {
            return; // the environment is gone
        }
        if !self.shared.woken.swap(true, Ordering::SeqCst) {
            self.shared.waker.wake();
        }
    }
}

/// Settles the promises of `done` now, in order, on the JS thread only: the answers of gathered
/// calls that succeeded one run of them after another, with one `JSON.parse` per run, as the
/// port settles what comes back from the job threads (issue 17: an inline transaction's 8
/// gathered upserts were settled with 8 parses and 16 crossings).
pub fn settle_now_all(env: &Env, done: Vec<(Ticket, CoreResult<String>)>) {
    let batch: Vec<Done> = done.into_iter().map(|(t, out)| Done { target: t.target, out }).collect();
    let Some(local) = PORT.with(|p| p.borrow().clone()) else {
        for d in batch {
            settle(env, d);
        }
        return;
    };
    settle_all(env, &local, batch);
    if local.pending.get() == 0 {
        // idle, the port does not keep Node alive
        local.wake.keep_alive(false);
    }
}

/// The port of the current JS thread's environment.
struct Local {
    shared: Arc<Shared>,
    rx: Receiver<Done>,
    wake: Wake,
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
    let wake = Wake::open(env, drain, forget)?;
    let (tx, rx) = mpsc::channel();
    let shared = Arc::new(Shared { tx, woken: AtomicBool::new(false), waker: wake.waker() });
    let local = Rc::new(Local { shared, rx, wake, pending: Cell::new(0) });
    PORT.with(|p| *p.borrow_mut() = Some(local.clone()));
    Ok(local)
}

/// The environment is going: its outcomes are dropped (no promise can be settled any more).
fn forget() {
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
    Ok((ticket(&local, Target::Deferred(deferred as usize)), PromiseRaw::new(env.raw(), promise)))
}

/// The ticket of the promise a gathered call made in JS: place `index` of segment `segment`.
pub fn gathered(env: &Env, segment: u32, index: u32) -> napi::Result<Ticket> {
    let local = port(env)?;
    Ok(ticket(&local, Target::Gathered(segment, index)))
}

fn ticket(local: &Local, target: Target) -> Ticket {
    if local.pending.replace(local.pending.get() + 1) == 0 {
        // keeps Node alive while a promise is pending
        local.wake.keep_alive(true);
    }
    Ticket { shared: local.shared.clone(), target }
}

/// Settles queued promises, a slice at a time, until the queue is empty or the turn's budget is
/// spent (then asks for another turn).
fn drain(env: &Env) {
    let Some(local) = PORT.with(|p| p.borrow().clone()) else { return };
    let deadline = Instant::now() + TURN_BUDGET;
    loop {
        let mut batch: Vec<Done> = local.rx.try_iter().take(SLICE).collect();
        let mut last = false;
        if batch.len() < SLICE {
            // nothing left: the next outcome wakes the loop again; one sent before this store
            // saw the flag still set and did not, so look once more
            local.shared.woken.store(false, Ordering::SeqCst);
            match local.rx.try_recv() {
                // a job thread has woken the loop meanwhile: the rest on that wake-up
                Ok(d) if local.shared.woken.swap(true, Ordering::SeqCst) => {
                    batch.push(d);
                    last = true;
                }
                Ok(d) => batch.push(d),
                Err(_) => last = true,
            }
        }
        settle_all(env, &local, batch);
        if last {
            break;
        }
        if Instant::now() >= deadline {
            // the rest on the next turn (`woken` stays set: no job thread wakes the loop)
            local.wake.again();
            break;
        }
    }
    if local.pending.get() == 0 {
        local.wake.keep_alive(false);
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
