//! The host callbacks of `open` (API.md §2) as a [`Host`]: `runAgent`, `deliver`, `onEvent`,
//! `steer`, `abortRun`, `bindThread`, `unbindThread` and `stageAttachments`, held as *weak* threadsafe functions (an idle store never keeps Node alive) and
//! called with `call_async_catch`, so a throw, a rejection, a non-object result or a callback
//! that never settles ends as an error or a timeout and never crashes the process.
//!
//! Values cross as JSON text through the engine's `JSON.parse`/`JSON.stringify`, as everywhere
//! at this boundary. A callback may return a value, a promise or any thenable.

use std::sync::{Arc, Mutex};

use napi::bindgen_prelude::*;
use napi::threadsafe_function::ThreadsafeFunction;
use napi::{Env, ValueType};
use serde_json::Value;
use tokio::sync::{mpsc, oneshot};

use super::js::{clear_pending, from_json_text, to_json};
use crate::host::{AgentRunRequest, Event, Host, HostFuture};

/// One argument, made on the JS thread from JSON.
pub struct JsonArg(Value);

impl JsonArg {
    pub fn new(v: Value) -> JsonArg {
        JsonArg(v)
    }
}

impl ToNapiValue for JsonArg {
    unsafe fn to_napi_value(env: napi::sys::napi_env, val: Self) -> napi::Result<napi::sys::napi_value> {
        let env = Env::from_raw(env);
        Ok(from_json_text(&env, &val.0.to_string())?.raw())
    }
}

/// What a callback returned: a value at once, or a thenable that settles later.
pub enum Reply {
    Now(std::result::Result<Value, String>),
    Later(oneshot::Receiver<std::result::Result<Value, String>>),
}

impl Reply {
    async fn settle(self) -> std::result::Result<Value, String> {
        match self {
            Reply::Now(r) => r,
            Reply::Later(rx) => rx.await.unwrap_or_else(|_| Err("the callback's promise was dropped".to_owned())),
        }
    }
}

/// The text of a rejection or a throw: an Error's message, a string as is, else the value as
/// JSON.
fn describe(env: &Env, v: Unknown<'_>) -> String {
    let text = (|| -> Option<String> {
        match v.get_type().ok()? {
            ValueType::Undefined | ValueType::Null => None,
            ValueType::String => unsafe { String::from_napi_value(env.raw(), v.raw()) }.ok(),
            ValueType::Object => {
                let o: Object = unsafe { Object::from_napi_value(env.raw(), v.raw()) }.ok()?;
                let msg: Option<Unknown> = o.get("message").ok().flatten();
                match msg {
                    Some(m) if m.get_type().ok()? == ValueType::String => {
                        unsafe { String::from_napi_value(env.raw(), m.raw()) }.ok()
                    }
                    _ => to_json(env, Some(v), "value")
                        .ok()
                        .map(|j| format!("rejected with {}", crate::error::clip(&j.to_string()))),
                }
            }
            _ => to_json(env, Some(v), "value").ok().map(|j| format!("rejected with {j}")),
        }
    })();
    clear_pending(env);
    // Empty when it gave none: the core decides what that reads as (`host::failure_text`).
    text.filter(|t| !t.trim().is_empty()).unwrap_or_default()
}

fn thenable<'e>(env: &'e Env, v: &Unknown<'e>) -> Option<(Object<'e>, Function<'e, Unknown<'e>, Unknown<'e>>)> {
    let t = v.get_type().ok()?;
    if t != ValueType::Object && t != ValueType::Function {
        return None;
    }
    let o: Object = unsafe { Object::from_napi_value(env.raw(), v.raw()) }.ok()?;
    let then: Unknown = o.get("then").ok().flatten()?;
    if then.get_type().ok()? != ValueType::Function {
        clear_pending(env);
        return None;
    }
    let f = unsafe { Function::<Unknown, Unknown>::from_napi_value(env.raw(), then.raw()) }.ok()?;
    Some((o, f))
}

impl FromNapiValue for Reply {
    unsafe fn from_napi_value(raw_env: napi::sys::napi_env, raw: napi::sys::napi_value) -> napi::Result<Self> {
        let env = Env::from_raw(raw_env);
        let v = unsafe { Unknown::from_napi_value(raw_env, raw) }?;
        let Some((obj, then)) = thenable(&env, &v) else {
            return Ok(Reply::Now(to_json(&env, Some(v), "the callback's result").map_err(|e| e.message().to_owned())));
        };
        let (tx, rx) = oneshot::channel();
        let tx = Arc::new(Mutex::new(Some(tx)));
        let (tx_ok, tx_err) = (tx.clone(), tx.clone());
        let send = |slot: &Arc<Mutex<Option<oneshot::Sender<_>>>>, r| {
            if let Some(s) = slot.lock().unwrap_or_else(|p| p.into_inner()).take() {
                let _ = s.send(r);
            }
        };
        let on_ok = env.create_function_from_closure::<Unknown, (), _>("onFulfilled", move |ctx| {
            let env = &*ctx.env;
            let v: Option<Unknown> = ctx.get::<Unknown>(0).ok();
            send(&tx_ok, to_json(env, v, "the callback's result").map_err(|e| e.message().to_owned()));
            Ok(())
        })?;
        let on_err = env.create_function_from_closure::<Unknown, (), _>("onRejected", move |ctx| {
            let env = &*ctx.env;
            let text = match ctx.get::<Unknown>(0) {
                Ok(v) => describe(env, v),
                Err(_) => "the callback's promise was rejected".to_owned(),
            };
            send(&tx_err, Err(text));
            Ok(())
        })?;
        let args = FnArgs::from((on_ok.to_unknown(), on_err.to_unknown()));
        let then = unsafe { Function::<FnArgs<(Unknown, Unknown)>, Unknown>::from_napi_value(raw_env, then.raw()) }?;
        if let Err(e) = then.apply(obj, args) {
            clear_pending(&env);
            send(&tx, Err(format!("the callback's then() threw: {}", e.reason)));
        }
        Ok(Reply::Later(rx))
    }
}

pub type Callback<A> = ThreadsafeFunction<A, Reply, A, Status, false, true>;
type SteerArgs = FnArgs<(String, String)>;

/// Keeps the Node process alive while the store has work in progress (runs, announce
/// attempts, a send's background flow) and lets it exit when idle. A threadsafe function over a
/// no-op is ref'd and unref'd on the JS thread, where those calls must happen: a change of
/// state queues a call that compares the count of work in progress with the current state.
pub struct KeepAlive {
    tsfn: ThreadsafeFunction<bool, (), bool, Status, false, true>,
    count: Arc<std::sync::atomic::AtomicUsize>,
}

/// How long the count must stay at zero before the process is let go (covers the short gaps
/// between the steps of one flow).
const IDLE_GRACE_MS: u64 = 50;

impl KeepAlive {
    fn new(env: &Env) -> napi::Result<KeepAlive> {
        use std::sync::atomic::{AtomicBool, AtomicPtr, AtomicUsize, Ordering};
        let count = Arc::new(AtomicUsize::new(0));
        let raw: Arc<AtomicPtr<napi::sys::napi_threadsafe_function__>> = Arc::default();
        let reffed = Arc::new(AtomicBool::new(false));
        let noop = env.create_function_from_closure::<bool, (), _>("keepAlive", |_| Ok(()))?;
        let (c, r, rf) = (count.clone(), raw.clone(), reffed.clone());
        let tsfn = noop.build_threadsafe_function::<bool>().callee_handled::<false>().weak::<true>().build_callback(
            move |ctx: napi::threadsafe_function::ThreadsafeCallContext<bool>| {
                let want = c.load(Ordering::SeqCst) > 0;
                let handle = r.load(Ordering::SeqCst);
                if !handle.is_null() && want != rf.load(Ordering::SeqCst) {
                    // SAFETY: on the JS thread (this callback), with the live handle of this
                    // threadsafe function.
                    unsafe {
                        if want {
                            napi::sys::napi_ref_threadsafe_function(ctx.env.raw(), handle);
                        } else {
                            napi::sys::napi_unref_threadsafe_function(ctx.env.raw(), handle);
                        }
                    }
                    rf.store(want, Ordering::SeqCst);
                }
                Ok(true)
            },
        )?;
        raw.store(tsfn.raw(), Ordering::SeqCst);
        Ok(KeepAlive { tsfn, count })
    }

    fn nudge(&self) {
        let _ = self.tsfn.call(true, napi::threadsafe_function::ThreadsafeFunctionCallMode::NonBlocking);
    }
}

/// The callbacks given to `open`, made threadsafe on the JS thread.
pub struct Callbacks {
    run_agent: Option<Callback<JsonArg>>,
    deliver: Option<Callback<JsonArg>>,
    on_event: Option<Callback<JsonArg>>,
    steer: Option<Callback<SteerArgs>>,
    abort_run: Option<Callback<SteerArgs>>,
    bind_thread: Option<Callback<JsonArg>>,
    unbind_thread: Option<Callback<JsonArg>>,
    stage_attachments: Option<Callback<JsonArg>>,
    keep_alive: Option<KeepAlive>,
}

pub fn weak<A: 'static + JsValuesTupleIntoVec>(env: &Env, f: Unknown<'_>) -> napi::Result<Callback<A>> {
    let f = unsafe { Function::<A, Reply>::from_napi_value(env.raw(), f.raw()) }?;
    f.build_threadsafe_function::<A>().callee_handled::<false>().weak::<true>().build()
}

impl Callbacks {
    /// Reads the callbacks (functions; `null`/absent: none). Must run on the JS thread.
    pub fn read<'e>(env: &Env, get: impl Fn(&str) -> Option<Unknown<'e>>) -> napi::Result<Callbacks> {
        let mut c = Callbacks {
            run_agent: None,
            deliver: None,
            on_event: None,
            steer: None,
            abort_run: None,
            bind_thread: None,
            unbind_thread: None,
            stage_attachments: None,
            keep_alive: Some(KeepAlive::new(env)?),
        };
        let func = |name: &str| get(name).filter(|v| v.get_type().ok() == Some(ValueType::Function));
        if let Some(f) = func("runAgent") {
            c.run_agent = Some(weak(env, f)?);
        }
        if let Some(f) = func("deliver") {
            c.deliver = Some(weak(env, f)?);
        }
        if let Some(f) = func("onEvent") {
            c.on_event = Some(weak(env, f)?);
        }
        if let Some(f) = func("steer") {
            c.steer = Some(weak(env, f)?);
        }
        if let Some(f) = func("abortRun") {
            c.abort_run = Some(weak(env, f)?);
        }
        if let Some(f) = func("bindThread") {
            c.bind_thread = Some(weak(env, f)?);
        }
        if let Some(f) = func("unbindThread") {
            c.unbind_thread = Some(weak(env, f)?);
        }
        if let Some(f) = func("stageAttachments") {
            c.stage_attachments = Some(weak(env, f)?);
        }
        Ok(c)
    }
}

/// The JS callbacks as the engine's [`Host`].
pub struct JsHost {
    run_agent: Option<Arc<Callback<JsonArg>>>,
    deliver: Option<Arc<Callback<JsonArg>>>,
    steer: Option<Arc<Callback<SteerArgs>>>,
    abort_run: Option<Arc<Callback<SteerArgs>>>,
    bind_thread: Option<Arc<Callback<JsonArg>>>,
    unbind_thread: Option<Arc<Callback<JsonArg>>>,
    stage_attachments: Option<Arc<Callback<JsonArg>>>,
    events: Option<mpsc::UnboundedSender<Value>>,
    keep_alive: Option<Arc<KeepAlive>>,
    closed: std::sync::atomic::AtomicBool,
}

pub async fn call<A: 'static + JsValuesTupleIntoVec>(f: &Callback<A>, arg: A) -> std::result::Result<Value, String> {
    match f.call_async_catch(arg).await {
        Ok(reply) => reply.settle().await,
        Err(e) => Err(e.reason.clone()),
    }
}

impl JsHost {
    /// Must be called inside the tokio runtime: events are forwarded in order by one task.
    pub fn new(c: Callbacks) -> JsHost {
        let events = c.on_event.map(|f| {
            let (tx, mut rx) = mpsc::unbounded_channel::<Value>();
            tokio::spawn(async move {
                while let Some(ev) = rx.recv().await {
                    // a throwing or rejecting onEvent is ignored (API.md §2.3)
                    let _ = call(&f, JsonArg(ev)).await;
                }
            });
            tx
        });
        JsHost {
            run_agent: c.run_agent.map(Arc::new),
            deliver: c.deliver.map(Arc::new),
            steer: c.steer.map(Arc::new),
            abort_run: c.abort_run.map(Arc::new),
            bind_thread: c.bind_thread.map(Arc::new),
            unbind_thread: c.unbind_thread.map(Arc::new),
            stage_attachments: c.stage_attachments.map(Arc::new),
            events,
            keep_alive: c.keep_alive.map(Arc::new),
            closed: std::sync::atomic::AtomicBool::new(false),
        }
    }
}

/// One JSON-in, JSON-out callback; `absent` when none is configured.
fn json_call(f: Option<Arc<Callback<JsonArg>>>, req: Value, absent: Value) -> HostFuture<Value> {
    Box::pin(async move {
        match f {
            Some(f) => call(&f, JsonArg(req)).await,
            None => Ok(absent),
        }
    })
}

impl Host for JsHost {
    fn run_agent(&self, req: AgentRunRequest) -> HostFuture<Value> {
        let f = self.run_agent.clone();
        Box::pin(async move {
            let f = f.ok_or_else(|| "no runAgent callback is configured".to_owned())?;
            call(&f, JsonArg(req.to_json())).await
        })
    }
    fn can_run(&self) -> bool {
        self.run_agent.is_some()
    }
    fn emit(&self, event: Event) {
        if let Some(tx) = &self.events {
            let _ = tx.send(event.to_json());
        }
    }
    fn deliver(&self, msg: Value) -> HostFuture<()> {
        let f = self.deliver.clone();
        Box::pin(async move {
            let f = f.ok_or_else(|| "no deliver callback is configured".to_owned())?;
            call(&f, JsonArg(msg)).await.map(|_| ())
        })
    }
    fn can_deliver(&self) -> bool {
        self.deliver.is_some()
    }
    fn steer(&self, session_key: String, text: String) -> HostFuture<bool> {
        let f = self.steer.clone();
        Box::pin(async move {
            let Some(f) = f else { return Ok(false) };
            Ok(call(&f, FnArgs::from((session_key, text))).await? == Value::Bool(true))
        })
    }
    fn can_steer(&self) -> bool {
        self.steer.is_some()
    }
    fn abort_run(&self, run_id: String, reason: String) -> HostFuture<bool> {
        let f = self.abort_run.clone();
        Box::pin(async move {
            let Some(f) = f else { return Ok(false) };
            Ok(call(&f, FnArgs::from((run_id, reason))).await? == Value::Bool(true))
        })
    }
    fn can_abort(&self) -> bool {
        self.abort_run.is_some()
    }
    fn bind_thread(&self, req: Value) -> HostFuture<Value> {
        json_call(self.bind_thread.clone(), req, Value::Null)
    }
    fn can_bind_thread(&self) -> bool {
        self.bind_thread.is_some()
    }
    fn unbind_thread(&self, req: Value) -> HostFuture<Value> {
        json_call(self.unbind_thread.clone(), req, Value::Null)
    }
    fn stage_attachments(&self, req: Value) -> HostFuture<Value> {
        json_call(self.stage_attachments.clone(), req, Value::Null)
    }
    fn can_stage_attachments(&self) -> bool {
        self.stage_attachments.is_some()
    }
    fn busy(&self, on: bool) {
        use std::sync::atomic::Ordering;
        let Some(k) = &self.keep_alive else { return };
        if on {
            if k.count.fetch_add(1, Ordering::SeqCst) == 0 && !self.closed.load(Ordering::SeqCst) {
                k.nudge();
            }
            return;
        }
        let was = k.count.fetch_update(Ordering::SeqCst, Ordering::SeqCst, |n| Some(n.saturating_sub(1))).unwrap_or(0);
        if was == 1 {
            let later = k.clone();
            // let go only when the count stays at zero a moment (the gaps inside one flow)
            let settle = async move {
                tokio::time::sleep(std::time::Duration::from_millis(IDLE_GRACE_MS)).await;
                if later.count.load(Ordering::SeqCst) == 0 {
                    later.nudge();
                }
            };
            match tokio::runtime::Handle::try_current() {
                Ok(h) => {
                    h.spawn(settle);
                }
                Err(_) => k.nudge(),
            }
        }
    }
    fn idle(&self) {
        use std::sync::atomic::Ordering;
        self.closed.store(true, Ordering::SeqCst);
        if let Some(k) = &self.keep_alive {
            k.count.store(0, Ordering::SeqCst);
            k.nudge();
        }
    }
}
