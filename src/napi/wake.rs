//! The completion port's wake-up of the event loop: a libuv `uv_async_t` of our own per JS
//! environment, in place of a napi threadsafe function.
//!
//! A threadsafe function's queue sits behind a lock that the JS thread takes on every wake-up
//! while job threads take it to post: in a burst the JS thread was seen waiting on it (8.5% of
//! its samples, issue 17). Here a job thread wakes the loop with `uv_async_send` (an atomic flag
//! and a write to the loop's eventfd) and the JS thread reads nothing but the port's channel: it
//! never takes a lock. The wake-up runs on the loop's poll phase inside a handle scope and a
//! callback scope of its own (so promise reactions and `process.nextTick` run once it returns, as
//! after any JS callback), and the JS thread can ask for a wake-up of its own to continue on the
//! next turn of the loop, after the timers.
//!
//! Lifetime: the handle is closed by an asynchronous environment cleanup hook (the main
//! thread's exit and a worker's alike); from that moment job threads no longer reach it (the
//! handle sits behind a lock only they and the hook take) and its memory is freed by libuv's
//! close callback, which also tells Node the hook is done. Idle, the handle does not keep Node
//! alive (`keep_alive`).
//!
//! It owns the handle and its lifetime; what a wake-up does is the port's (`port.rs`).

use std::alloc::{self, Layout};
use std::ffi::{c_int, c_void};
use std::ptr;
use std::sync::{Arc, Mutex};

use napi::bindgen_prelude::*;
use napi::{sys, Env};

type UvCallback = unsafe extern "C" fn(handle: *mut c_void);

// libuv, exported by the Node binary that loads the addon (as napi's own functions are).
extern "C" {
    fn uv_handle_size(kind: c_int) -> usize;
    fn uv_async_init(event_loop: *mut sys::uv_loop_s, handle: *mut c_void, cb: Option<UvCallback>) -> c_int;
    fn uv_async_send(handle: *mut c_void) -> c_int;
    fn uv_close(handle: *mut c_void, cb: Option<UvCallback>);
    fn uv_ref(handle: *mut c_void);
    fn uv_unref(handle: *mut c_void);
    fn uv_handle_set_data(handle: *mut c_void, data: *mut c_void);
    fn uv_handle_get_data(handle: *const c_void) -> *mut c_void;
}

/// `UV_ASYNC` in libuv's `uv_handle_type`.
const UV_ASYNC: c_int = 1;

/// The handle, as job threads hold it.
#[derive(Clone, Copy)]
struct Handle(*mut c_void);
// SAFETY: libuv allows `uv_async_send` from any thread; the pointer is used for nothing else
// off the JS thread, and only while the lock in `Waker` says the handle is open.
unsafe impl Send for Handle {}

/// The job threads' side: wakes the environment's loop, or does nothing once it is gone.
pub struct Waker {
    handle: Mutex<Option<Handle>>,
}

impl Waker {
    /// Wakes the loop (several wake-ups before it runs are one); `false` once the environment
    /// is being torn down.
    pub fn wake(&self) -> bool {
        let handle = self.handle.lock().unwrap_or_else(|p| p.into_inner());
        let Some(h) = *handle else { return false };
        // SAFETY: the handle is open while it is set (the cleanup hook clears it under this
        // lock before closing it).
        unsafe { uv_async_send(h.0) };
        true
    }
}

/// What the handle's callbacks need, owned by the handle (its data) until its close callback.
struct Context {
    env: sys::napi_env,
    on_wake: fn(&Env),
    on_teardown: fn(),
    async_context: sys::napi_async_context,
    waker: Arc<Waker>,
    layout: Layout,
    remove: sys::napi_async_cleanup_hook_handle,
}

/// The JS thread's side: the open handle of this environment.
pub struct Wake {
    handle: *mut c_void,
    waker: Arc<Waker>,
}

impl Wake {
    /// Opens the wake-up of `env`'s loop: `on_wake` runs on the JS thread after a wake-up,
    /// `on_teardown` when the environment goes (before the handle is closed). Not keeping Node
    /// alive until told.
    pub fn open(env: &Env, on_wake: fn(&Env), on_teardown: fn()) -> napi::Result<Wake> {
        let fail =
            |what: &str| napi::Error::new(Status::GenericFailure, format!("cannot {what} for the completion port"));
        let mut event_loop = ptr::null_mut();
        // SAFETY: on the JS thread with a live env.
        if unsafe { sys::napi_get_uv_event_loop(env.raw(), &mut event_loop) } != sys::Status::napi_ok
            || event_loop.is_null()
        {
            return Err(fail("find the event loop"));
        }
        let name = env.create_string("session-tools")?;
        let mut async_context = ptr::null_mut();
        // SAFETY: on the JS thread; a null resource makes Node create one.
        if unsafe { sys::napi_async_init(env.raw(), ptr::null_mut(), name.raw(), &mut async_context) }
            != sys::Status::napi_ok
        {
            return Err(fail("make an async context"));
        }
        let destroy = |async_context| {
            // SAFETY: made above on this thread, destroyed once.
            unsafe { sys::napi_async_destroy(env.raw(), async_context) };
        };
        // SAFETY: asks libuv the size of its own handle type.
        let size = unsafe { uv_handle_size(UV_ASYNC) };
        let Ok(layout) = Layout::from_size_align(size.max(1), 16) else {
            destroy(async_context);
            return Err(fail("size the handle"));
        };
        // SAFETY: a non-zero size.
        let handle = unsafe { alloc::alloc_zeroed(layout) } as *mut c_void;
        if handle.is_null() {
            destroy(async_context);
            return Err(fail("allocate the handle"));
        }
        // SAFETY: fresh zeroed memory of libuv's size for the handle, on the loop's thread.
        if unsafe { uv_async_init(event_loop, handle, Some(on_async)) } != 0 {
            // SAFETY: never registered with libuv: ours to free.
            unsafe { alloc::dealloc(handle as *mut u8, layout) };
            destroy(async_context);
            return Err(fail("open the wake-up"));
        }
        let waker = Arc::new(Waker { handle: Mutex::new(Some(Handle(handle))) });
        let context = Box::into_raw(Box::new(Context {
            env: env.raw(),
            on_wake,
            on_teardown,
            async_context,
            waker: waker.clone(),
            layout,
            remove: ptr::null_mut(),
        }));
        // SAFETY: on the JS thread; the context lives until the close callback frees it.
        unsafe {
            uv_handle_set_data(handle, context as *mut c_void);
            uv_unref(handle);
            let status = sys::napi_add_async_cleanup_hook(env.raw(), Some(teardown), handle, &mut (*context).remove);
            if status != sys::Status::napi_ok {
                // without the hook nothing would close it: close it now
                *waker.handle.lock().unwrap_or_else(|p| p.into_inner()) = None;
                destroy(async_context);
                (*context).remove = ptr::null_mut();
                uv_close(handle, Some(closed));
                return Err(fail("register the cleanup"));
            }
        }
        Ok(Wake { handle, waker })
    }

    /// The job threads' side of it.
    pub fn waker(&self) -> Arc<Waker> {
        self.waker.clone()
    }

    /// Asks for `on_wake` again, on the next turn of the loop (after its timers); on the JS
    /// thread, before the teardown.
    pub fn again(&self) {
        // SAFETY: the handle is open until the cleanup hook, which runs on this thread and
        // drops the port (and this) first.
        unsafe { uv_async_send(self.handle) };
    }

    /// Whether the handle keeps Node alive (while promises are pending); on the JS thread.
    pub fn keep_alive(&self, yes: bool) {
        // SAFETY: as in `again`.
        unsafe {
            if yes {
                uv_ref(self.handle)
            } else {
                uv_unref(self.handle)
            }
        }
    }
}

unsafe extern "C" fn on_async(handle: *mut c_void) {
    // SAFETY: the data is the context, alive until the close callback (which runs after any
    // pending callback of the handle).
    let context = unsafe { &*(uv_handle_get_data(handle) as *const Context) };
    let env = context.env;
    let mut scope = ptr::null_mut();
    // SAFETY: on the JS thread, outside any other napi call: the scopes a JS callback has.
    unsafe {
        if sys::napi_open_handle_scope(env, &mut scope) != sys::Status::napi_ok {
            return;
        }
        let mut resource = ptr::null_mut();
        let mut callback_scope = ptr::null_mut();
        let opened = sys::napi_create_object(env, &mut resource) == sys::Status::napi_ok
            && sys::napi_open_callback_scope(env, resource, context.async_context, &mut callback_scope)
                == sys::Status::napi_ok;
        if opened {
            let env_ref = Env::from_raw(env);
            let _ = std::panic::catch_unwind(|| (context.on_wake)(&env_ref));
            super::js::clear_pending(&env_ref);
            // runs the promise reactions and ticks the callback queued
            sys::napi_close_callback_scope(env, callback_scope);
        }
        super::js::clear_pending(&Env::from_raw(env));
        sys::napi_close_handle_scope(env, scope);
    }
}

unsafe extern "C" fn teardown(_remove: sys::napi_async_cleanup_hook_handle, handle: *mut c_void) {
    // SAFETY: the handle given at registration, open until here; its data is the context.
    unsafe {
        let context = &*(uv_handle_get_data(handle) as *const Context);
        let _ = std::panic::catch_unwind(context.on_teardown);
        *context.waker.handle.lock().unwrap_or_else(|p| p.into_inner()) = None;
        sys::napi_async_destroy(context.env, context.async_context);
        uv_close(handle, Some(closed));
    }
}

unsafe extern "C" fn closed(handle: *mut c_void) {
    // SAFETY: libuv is done with the handle: the context and the memory are ours to free.
    unsafe {
        let context = Box::from_raw(uv_handle_get_data(handle) as *mut Context);
        if !context.remove.is_null() {
            // tells Node this environment's cleanup may go on
            sys::napi_remove_async_cleanup_hook(context.remove);
        }
        alloc::dealloc(handle as *mut u8, context.layout);
    }
}
