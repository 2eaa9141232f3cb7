//! The lanes of one `SessionTools`: where a short store job goes when it cannot run inline.
//! Writes go to the store's group-commit writer (concurrent writes share one transaction);
//! reads go to one reader thread (the store has one read connection, so more threads would only
//! wait for it). Either way the promise is settled through the completion port, with no
//! threadsafe function or event-loop wake-up of its own. A turn's queued jobs (native calls, and
//! segments of calls gathered in JS: `gather.rs`) are flushed at its end; a burst goes to the
//! writer on a turn of the event loop of its own.
//!
//! The reader thread also takes the tool reads that never run inline (filtered lists, long
//! histories): the store has one read connection, so they would wait for it on any thread, and
//! on tokio's workers (`block_in_place`) each one woke a thread to take the worker's place: about
//! 2 involuntary switches of the process a call against 0.25-0.5 here, and 1% of calls held the
//! JS thread about 1 ms at the call instead of 0.1 ms (a 200-row filtered list, 200 calls a
//! round, issue 17). Import, export and async work (the orchestration) do not come here.

use std::cell::{Cell, RefCell};
use std::collections::VecDeque;
use std::sync::mpsc::{self, Sender};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use napi::bindgen_prelude::*;
use napi::Env;

use super::cache::{self, Cached};
use super::port::{self, Ticket};
use crate::engine::Engine;
use crate::error::{Error as CoreError, ErrorCode, Result as CoreResult};
use crate::store::{GroupJob, GroupWriter, Store};

/// A short job answering JSON text (a write may run twice: see `store::group`).
pub type LaneJob = Box<dyn FnMut(&Engine) -> CoreResult<String> + Send + 'static>;
/// A short job that may run inline, and run again elsewhere if it would have waited.
pub type FastTextJob = Arc<dyn Fn(&Engine) -> CoreResult<String> + Send + Sync + 'static>;

/// Most jobs of one turn of JS code run inline on the JS thread (the rest go to their lane), so
/// a burst holds the event loop for a bounded time.
const INLINE_MAX: usize = 16;

/// Which lane a job takes.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum Lane {
    Read,
    Write,
}

struct EngineRef(Arc<Engine>);
impl AsRef<Store> for EngineRef {
    fn as_ref(&self) -> &Store {
        self.0.store()
    }
}

type ReadTask = Box<dyn FnOnce() + Send + 'static>;

pub struct Lanes {
    engine: Arc<Engine>,
    writer: GroupWriter,
    reader: Mutex<Option<Sender<ReadTask>>>,
}

impl Lanes {
    pub fn start(engine: Arc<Engine>) -> CoreResult<Lanes> {
        let writer = GroupWriter::start(Arc::new(EngineRef(engine.clone())))?;
        let (tx, rx) = mpsc::channel::<ReadTask>();
        std::thread::Builder::new()
            .name("session-tools-reader".into())
            .spawn(move || {
                while let Ok(task) = rx.recv() {
                    task();
                }
            })
            .map_err(|e| CoreError::store(format!("cannot start the reader thread: {e}")))?;
        Ok(Lanes { engine, writer, reader: Mutex::new(Some(tx)) })
    }

    pub fn engine(&self) -> &Arc<Engine> {
        &self.engine
    }

    /// Runs `job` on its lane with a promise of its own.
    pub fn submit<'env>(
        &self,
        env: &'env Env,
        lane: Lane,
        job: LaneJob,
    ) -> napi::Result<PromiseRaw<'env, Unknown<'env>>> {
        let (ticket, promise) = port::promise(env)?;
        self.submit_ticket(lane, job, ticket);
        Ok(promise)
    }

    /// Runs `job` on its lane; the promise settles on the JS thread once its outcome holds (for a
    /// write: once the transaction that holds it has committed).
    fn submit_ticket(&self, lane: Lane, job: LaneJob, ticket: Ticket) {
        match lane {
            Lane::Write => {
                let job: GroupJob = Box::new(self.guarded(job));
                self.writer.submit(job, Box::new(move |out| ticket.complete(out)))
            }
            Lane::Read => {
                let mut run = self.guarded(job);
                let task: ReadTask = Box::new(move || ticket.complete(run()));
                let sent = match &*self.reader.lock().unwrap_or_else(|p| p.into_inner()) {
                    Some(tx) => tx.send(task).map_err(|e| e.0),
                    None => Err(task),
                };
                if let Err(task) = sent {
                    // no reader thread any more: run it here rather than never
                    task();
                }
            }
        }
    }

    /// `job` on this lane's engine: refused once the store is closed, a panic an error.
    fn guarded(&self, mut job: LaneJob) -> impl FnMut() -> CoreResult<String> + Send + 'static {
        let engine = self.engine.clone();
        move || -> CoreResult<String> {
            if engine.store().is_closed() {
                return Err(CoreError::closed());
            }
            std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| job(&engine)))
                .unwrap_or_else(|_| Err(internal_error()))
        }
    }
}

impl Drop for Lanes {
    fn drop(&mut self) {
        self.writer.stop();
        self.reader.lock().unwrap_or_else(|p| p.into_inner()).take();
    }
}

/// A job waiting for the end of the current synchronous turn of JS code.
struct Queued {
    lanes: Arc<Lanes>,
    lane: Lane,
    job: FastTextJob,
    ticket: Ticket,
    /// false for a job too long to run on the JS thread (it goes to the writer in its place)
    inline: bool,
}

/// A place in the turn: a job, or a segment of calls gathered in JS (`gather.rs`), read when
/// the turn is flushed.
enum Entry {
    Job(Queued),
    Segment(Arc<Lanes>, u32),
}

/// A place in a flushed turn: a job, or the calls of a segment from its place `from` on, not
/// read from JS yet.
enum Staged {
    Job(Queued),
    Segment(Arc<Lanes>, u32, u32),
}

/// The jobs of `taken` (segment `id` of `lanes`), in order, each with its ticket, onto `out`.
fn expand_segment(env: &Env, lanes: &Arc<Lanes>, id: u32, taken: super::gather::Taken, out: &mut Vec<Queued>) {
    for (job, index) in taken.jobs() {
        match port::gathered(env, id, index) {
            Ok(ticket) => out.push(Queued { lanes: lanes.clone(), lane: Lane::Write, job, ticket, inline: true }),
            Err(_) => super::js::clear_pending(env),
        }
    }
}

/// The jobs of a turn's entries, in order, each with its ticket (segments read whole).
fn expand(env: &Env, entries: Vec<Entry>) -> Vec<Queued> {
    let mut queued = Vec::with_capacity(entries.len());
    for e in entries {
        match e {
            Entry::Job(q) => queued.push(q),
            Entry::Segment(lanes, id) => {
                let taken = super::gather::take(env, id, 0, u32::MAX);
                expand_segment(env, &lanes, id, taken, &mut queued)
            }
        }
    }
    queued
}

/// Calls of a burst's segment read from JS (their arguments' JSON made) at a time.
const SPILL_SLICE: u32 = 64;
/// Time a turn of the event loop spends handing a burst on; the rest waits for the next turn.
const SPILL_BUDGET: Duration = Duration::from_micros(500);

thread_local! {
    /// This turn's writes (and the reads that came after them), in call order.
    static TURN: RefCell<Vec<Entry>> = const { RefCell::new(Vec::new()) };
    /// The turn's last entry is a gathered segment still taking calls.
    static SEGMENT_OPEN: Cell<bool> = const { Cell::new(false) };
    /// A burst's jobs (and those of later turns, behind them) waiting for their own turn of the
    /// event loop to go to the writer.
    static BURST: RefCell<VecDeque<Staged>> = const { RefCell::new(VecDeque::new()) };
}

/// The burst on the next turn of the event loop (`setImmediate`).
fn schedule_spill(env: &Env) -> napi::Result<()> {
    cache::schedule(env, Cached::Spill, "sessionToolsSpill", Cached::SetImmediate, spill_turn)
}

/// One turn's share of the waiting burst to the writer, in order: a segment's calls are read
/// from JS (their JSON made) a slice at a time, until [`SPILL_BUDGET`] is spent; the rest on
/// the next turn.
fn spill_turn(env: &Env) {
    let deadline = Instant::now() + SPILL_BUDGET;
    while spill_next(env) {
        if Instant::now() >= deadline {
            if schedule_spill(env).is_ok() {
                return;
            }
            // no `setImmediate`: hand the rest on now rather than never
            super::js::clear_pending(env);
            while spill_next(env) {}
            return;
        }
    }
}

/// Hands the burst's next job, or the next slice of its next segment, to the writer; whether
/// more is waiting.
fn spill_next(env: &Env) -> bool {
    let Some(next) = BURST.with(|b| b.borrow_mut().pop_front()) else { return false };
    match next {
        Staged::Job(q) => spill(q),
        Staged::Segment(lanes, id, from) => {
            let taken = super::gather::take(env, id, from, SPILL_SLICE);
            let n = taken.len() as u32;
            let mut queued = Vec::with_capacity(n as usize);
            expand_segment(env, &lanes, id, taken, &mut queued);
            if n == SPILL_SLICE {
                // the rest of the segment stays first in line
                BURST.with(|b| b.borrow_mut().push_front(Staged::Segment(lanes, id, from + n)));
            }
            for q in queued {
                spill(q);
            }
        }
    }
    BURST.with(|b| !b.borrow().is_empty())
}

/// Whether the current turn has writes waiting: a read then waits behind them.
pub fn turn_has_writes() -> bool {
    TURN.with(|t| !t.borrow().is_empty())
}

/// Queues segment `id` of calls gathered in JS for `lanes`'s store: its calls run, at the end
/// of this turn, in its place among the turn's other jobs. An error when the end of the turn
/// cannot be reached (the calls then take the native path).
pub fn queue_segment(env: &Env, lanes: &Arc<Lanes>, id: u32) -> napi::Result<()> {
    let first = push(Entry::Segment(lanes.clone(), id));
    if first {
        if let Err(e) = schedule_flush(env) {
            super::js::clear_pending(env);
            TURN.with(|t| t.borrow_mut().clear());
            return Err(e);
        }
    }
    SEGMENT_OPEN.with(|s| s.set(true));
    Ok(())
}

/// Adds an entry to this turn; whether it is the first.
fn push(entry: Entry) -> bool {
    TURN.with(|t| {
        let mut t = t.borrow_mut();
        if t.capacity() == 0 {
            t.reserve(64);
        }
        t.push(entry);
        t.len() == 1
    })
}

/// Queues a job for the end of this synchronous turn of JS code (a microtask): a write, or a
/// read that came after a write of the same turn. The writes of a turn run together: up to
/// [`INLINE_MAX`] of them in one transaction on the JS thread when the store is free at once,
/// else (more of them, or the store busy) in the group-commit writer. A job queued with
/// `inline` false runs in the writer, in its place: the turn's writes before it run first, and
/// every job after it follows it there.
pub fn queue<'env>(
    env: &'env Env,
    lanes: &Arc<Lanes>,
    lane: Lane,
    job: FastTextJob,
    inline: bool,
) -> napi::Result<PromiseRaw<'env, Unknown<'env>>> {
    let (ticket, promise) = port::promise(env)?;
    if SEGMENT_OPEN.with(|s| s.replace(false)) {
        // a gathered call after this one must not run before it
        super::gather::seal(env);
    }
    let first = push(Entry::Job(Queued { lanes: lanes.clone(), lane, job, ticket, inline }));
    if first {
        if let Err(e) = schedule_flush(env) {
            super::js::clear_pending(env);
            // without a microtask, run the turn's jobs off the thread now
            let _ = e;
            for q in TURN.with(|t| std::mem::take(&mut *t.borrow_mut())) {
                if let Entry::Job(q) = q {
                    let job = q.job.clone();
                    q.lanes.submit_ticket(q.lane, Box::new(move |e: &Engine| job(e)), q.ticket);
                }
            }
        }
    }
    Ok(promise)
}

fn schedule_flush(env: &Env) -> napi::Result<()> {
    cache::schedule(env, Cached::Flush, "sessionToolsFlush", Cached::QueueMicrotask, flush)
}

/// Runs this turn's queued jobs, in call order (see [`queue`]).
fn flush(env: &Env) {
    let entries = TURN.with(|t| std::mem::take(&mut *t.borrow_mut()));
    SEGMENT_OPEN.with(|s| s.set(false));
    let waiting = BURST.with(|b| !b.borrow().is_empty());
    let writes: usize = if waiting {
        0 // behind the burst anyway
    } else {
        entries
            .iter()
            .map(|e| match e {
                Entry::Job(q) => usize::from(q.lane == Lane::Write),
                Entry::Segment(_, id) => super::gather::size(env, *id),
            })
            .sum()
    };
    if waiting || writes > INLINE_MAX {
        // a burst (or a turn after a burst that has not gone yet, so it stays behind it): every
        // job to the writer, in call order, on turns of the event loop of their own, so the
        // turn that started it is held neither by a batch run here (perf, issue 17: the first
        // 16 of a burst of 1,000 added about 1 ms to it) nor by making the calls' JSON (the
        // gathered calls of a plain record copy it and leave its JSON for then) and handing
        // 1,000 jobs on. Its segments end here: a later gathered call opens another.
        if entries.iter().any(|e| matches!(e, Entry::Segment(..))) {
            super::gather::seal(env);
        }
        BURST.with(|b| {
            b.borrow_mut().extend(entries.into_iter().map(|e| match e {
                Entry::Job(q) => Staged::Job(q),
                Entry::Segment(lanes, id) => Staged::Segment(lanes, id, 0),
            }))
        });
        if !waiting && schedule_spill(env).is_err() {
            super::js::clear_pending(env);
            while spill_next(env) {}
        }
        return;
    }
    let queued = expand(env, entries);
    let mut budget = INLINE_MAX;
    // once a job went to a lane, every later one follows it there, so none overtakes it
    let mut spilled = false;
    let mut writes: Vec<Queued> = Vec::new();
    for q in queued {
        if spilled || budget == 0 {
            // the writes gathered so far run first (inline or on the writer), then this one
            if !writes.is_empty() {
                run_writes(env, std::mem::take(&mut writes));
            }
            spilled = true;
            spill(q);
            continue;
        }
        if !q.inline {
            if !writes.is_empty() {
                run_writes(env, std::mem::take(&mut writes));
            }
            spilled = true;
            spill(q);
            continue;
        }
        if q.lane == Lane::Write && writes.last().is_none_or(|w| Arc::ptr_eq(&w.lanes, &q.lanes)) {
            budget -= 1;
            writes.push(q);
            continue;
        }
        spilled = !run_writes(env, std::mem::take(&mut writes));
        if spilled {
            spill(q);
            continue;
        }
        if q.lane == Lane::Write {
            budget -= 1;
            writes.push(q);
            continue;
        }
        budget -= 1;
        let engine = q.lanes.engine.clone();
        let job = q.job.clone();
        let out = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| crate::store::inline(|| job(&engine))));
        match out {
            Ok(Err(e)) if crate::store::is_would_block(&e) => spill(q),
            Ok(out) => q.ticket.settle_now(env, out),
            Err(_) => q.ticket.settle_now(env, Err(internal_error())),
        }
    }
    if !writes.is_empty() {
        run_writes(env, writes);
    }
}

fn internal_error() -> CoreError {
    CoreError::new(ErrorCode::StoreError, "internal error: the operation failed unexpectedly (a bug; please report it)")
}

/// To its lane, after what is already there; a read that follows writes sent to the writer
/// goes to the writer too (it reads inside the batch), so it sees them.
fn spill(q: Queued) {
    let job = q.job.clone();
    q.lanes.submit_ticket(Lane::Write, Box::new(move |e: &Engine| job(e)), q.ticket);
}

/// The writes of one store in one inline transaction; whether they ran (else they went to the
/// writer, and the caller must keep later jobs behind them).
fn run_writes(env: &Env, writes: Vec<Queued>) -> bool {
    let Some(first) = writes.first() else { return true };
    let lanes = first.lanes.clone();
    let engine = lanes.engine.clone();
    let jobs: Vec<GroupJob> = writes
        .iter()
        .map(|q| {
            let (job, engine) = (q.job.clone(), engine.clone());
            Box::new(move || job(&engine)) as GroupJob
        })
        .collect();
    match engine.store().try_run_inline(jobs) {
        Ok(outs) => {
            let mut later = false;
            let mut settled = Vec::with_capacity(outs.len());
            for (q, out) in writes.into_iter().zip(outs) {
                match out {
                    // it wrote nothing: it runs again on the writer, as every later one
                    Err(e) if crate::store::is_would_block(&e) || later => {
                        let _ = e;
                        later = true;
                        spill(q);
                    }
                    out => settled.push((q.ticket, out)),
                }
            }
            port::settle_now_all(env, settled);
            !later
        }
        Err(_) => {
            for q in writes {
                spill(q);
            }
            false
        }
    }
}
