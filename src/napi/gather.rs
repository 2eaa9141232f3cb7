//! Writes gathered in JS (issue 17 target 4: a burst of 1,000 calls must not hold the event
//! loop). When the module loads, `upsertSession` and `appendMessages` on the class's prototype
//! are replaced by small JS functions that read the call's arguments at once (`JSON.stringify`,
//! as the native methods do), make the call's promise in JS and append the call to the current
//! segment: a text of the turn's calls (`u` or `a`, the key's JSON, a newline, the argument's
//! JSON, a newline; JSON text holds no raw newline). The segment crosses into Rust once, when the
//! turn's writes are flushed (`lanes::flush`), and its calls become ordinary queued writes whose
//! tickets settle the JS promises (`port`). Per call the JS thread pays no napi crossing: about
//! 0.4 µs against 2.2 µs for the native method. A turn's first write still takes the native
//! method (a segment costs a few crossings more, which a lone awaited call would pay for
//! nothing); only the writes after it in the same run of JS code are gathered.
//!
//! The first call of a segment opens it through the native `upsertSession` called with a token
//! only this script holds, which queues the segment's place among the turn's writes; a native
//! write or read queued after it seals it (the next gathered call opens another), so calls keep
//! their order. Anything unusual (a key that is not a string, an argument that is not an object,
//! one JSON cannot carry, a `this` that is not an open store, an append too large to run inline:
//! `engine::INLINE_APPEND_BYTES`) goes to the native method, which answers exactly as before.
//!
//! It owns the script, the segment text and its reading; it never decides where a job runs
//! (`lanes`) and never touches the store itself.

use std::ops::Range;
use std::sync::Arc;

use napi::bindgen_prelude::*;
use napi::{Env, ValueType};

use super::cache::{self, Cached};
use super::error::error_value;
use super::jobs::to_text;
use super::js::{clear_pending, parse_text};
use super::lanes::FastTextJob;
use crate::engine::Engine;
use crate::error::Result as CoreResult;

/// The script, run once per JS environment: the segments, the wrappers' maker (`install`) and
/// what the native side calls (`take`, `seal`, `settle`). Globals are read once, when it runs.
const GATHER_JS: &str = r#"(function () {
  'use strict';
  const stringify = JSON.stringify, parse = JSON.parse, NewPromise = Promise, define = Object.defineProperty;
  const keys = Object.keys, isArray = Array.isArray;
  const queueMicrotask = globalThis.queueMicrotask;
  const token = Object.freeze({});
  const segments = new Map();
  let current = null, currentThis = null, lastId = 0, resolveNext, rejectNext, armed = false;
  function executor(resolve, reject) { resolveNext = resolve; rejectNext = reject; }
  function disarm() { armed = false; }
  // the argument as it is now: a copy when it is a plain record of strings, numbers, booleans
  // and nulls (its JSON text is made when the segment is read), else its JSON text; undefined
  // when JSON cannot carry it
  function read(arg) {
    if (!isArray(arg) && typeof arg.toJSON !== 'function') {
      const names = keys(arg), copy = {};
      let flat = true;
      for (let k = 0; k < names.length; k++) {
        const name = names[k], v = arg[name], t = typeof v;
        if (name === '__proto__' || !(t === 'string' || t === 'number' || t === 'boolean' || t === 'undefined' || v === null)) { flat = false; break; }
        copy[name] = v;
      }
      if (flat) return copy;
    }
    let text;
    try { text = stringify(arg); } catch (e) { return undefined; }
    return typeof text === 'string' ? text : 'null';
  }
  function wrap(proto, name, tag, open) {
    const native = proto[name];
    if (typeof native !== 'function' || typeof open !== 'function') return;
    const gathered = function (key, arg) {
      if (typeof key !== 'string' || arg === null || typeof arg !== 'object') return native.call(this, key, arg);
      // a turn's first write takes the native path (an awaited call pays no segment); the
      // calls after it in the same run of JS code are gathered
      if (!armed) { armed = true; queueMicrotask(disarm); return native.call(this, key, arg); }
      const value = read(arg);
      if (value === undefined) return native.call(this, key, arg);
      // a large append never runs on this thread: the native method sends it to the writer
      if (tag === 'a' && typeof value === 'string' && value.length > INLINE_APPEND_BYTES) return native.call(this, key, arg);
      let seg = current;
      if (seg === null || currentThis !== this) {
        const id = lastId = lastId >= 0x7fffffff ? 1 : lastId + 1;
        try { open.call(this, token, id); } catch (e) { return native.call(this, key, arg); }
        seg = { calls: [], resolve: [], reject: [], left: -1 };
        segments.set(id, seg);
        current = seg;
        currentThis = this;
      }
      seg.calls.push(tag, key, value);
      const promise = new NewPromise(executor);
      seg.resolve.push(resolveNext);
      seg.reject.push(rejectNext);
      return promise;
    };
    define(gathered, 'name', { value: name });
    define(gathered, 'length', { value: native.length });
    proto[name] = gathered;
  }
  return {
    token: token,
    install: function (proto) {
      const open = proto.upsertSession;
      wrap(proto, 'upsertSession', 'u', open);
      wrap(proto, 'appendMessages', 'a', open);
    },
    size: function (id) {
      const seg = segments.get(id);
      return seg === undefined || seg.calls === null ? 0 : seg.resolve.length;
    },
    take: function (id, from, max) {
      const seg = segments.get(id);
      if (seg === undefined || seg.calls === null) return '';
      if (seg === current) { current = null; currentThis = null; }
      const calls = seg.calls, count = seg.resolve.length, end = count - from < max ? count : from + max;
      if (seg.left < 0) seg.left = count;
      let text = '';
      for (let k = from; k < end; k++) {
        const value = calls[3 * k + 2];
        text += calls[3 * k] + stringify(calls[3 * k + 1]) + '\n' + (typeof value === 'string' ? value : stringify(value)) + '\n';
        calls[3 * k + 1] = calls[3 * k + 2] = undefined;
      }
      if (end >= count) seg.calls = null;
      if (seg.left === 0) segments.delete(id);
      return text;
    },
    seal: function () { current = null; currentThis = null; },
    settle: settle,
    settleMany: function (text) {
      const all = parse(text), ids = all.s, places = all.i, values = all.v;
      for (let k = 0; k < values.length; k++) settle(ids[k], places[k], true, values[k]);
    },
  };
  function settle(id, index, ok, value) {
    const seg = segments.get(id);
    if (seg === undefined) return;
    const f = ok ? seg.resolve[index] : seg.reject[index];
    if (f === undefined) return;
    seg.resolve[index] = undefined;
    seg.reject[index] = undefined;
    if (--seg.left === 0) segments.delete(id);
    f(value);
  }
})()"#;

/// Replaces the gathered methods on `SessionTools.prototype` (from the module's exports); when
/// anything is missing the native methods stay, and the module loads all the same. Called by
/// the module's load hook (`napi::on_load`).
#[cfg_attr(test, allow(dead_code))] // its caller, the load hook, is registered outside tests only
pub fn install(exports: &Object, env: &Env) -> napi::Result<()> {
    let installed = (|| -> napi::Result<()> {
        let class: Unknown = exports.get_named_property("SessionTools")?;
        if class.get_type()? != ValueType::Function {
            return Err(napi::Error::new(Status::InvalidArg, "no SessionTools class"));
        }
        // SAFETY: a function of this environment (an object with properties).
        let class = unsafe { Object::from_napi_value(env.raw(), class.raw()) }?;
        let proto: Unknown = class.get_named_property("prototype")?;
        let install: Function<Unknown, Unknown> = api(env)?.get_named_property("install")?;
        install.call(proto)?;
        Ok(())
    })();
    if installed.is_err() {
        clear_pending(env);
    }
    Ok(())
}

/// The script's object for this environment (run the first time).
fn api<'env>(env: &'env Env) -> napi::Result<Object<'env>> {
    let script = GATHER_JS.replace("INLINE_APPEND_BYTES", &crate::engine::INLINE_APPEND_BYTES.to_string());
    let api = cache::function(env, Cached::Gather, |env| env.run_script::<_, Unknown>(&script))?;
    // SAFETY: the cached value is the object the script returns.
    unsafe { Object::from_napi_value(env.raw(), api.raw()) }
}

fn member<'env>(env: &'env Env, which: Cached, name: &str) -> napi::Result<Unknown<'env>> {
    cache::function(env, which, |env| api(env)?.get_named_property::<Unknown>(name))
}

/// Whether `v` is the script's token: the call is the opening of a segment.
pub fn is_token(env: &Env, v: &Unknown<'_>) -> bool {
    if v.get_type().ok() != Some(ValueType::Object) {
        return false;
    }
    let Ok(token) = member(env, Cached::GatherToken, "token") else {
        clear_pending(env);
        return false;
    };
    let mut same = false;
    // SAFETY: two values of this environment, on its thread.
    let status = unsafe { napi::sys::napi_strict_equals(env.raw(), v.raw(), token.raw(), &mut same) };
    status == napi::sys::Status::napi_ok && same
}

/// The segment's id given with the token.
pub fn segment_id(v: Option<Unknown<'_>>) -> Option<u32> {
    let v = v?;
    if v.get_type().ok()? != ValueType::Number {
        return None;
    }
    let n = v.coerce_to_number().ok()?.get_uint32().ok()?;
    (n > 0).then_some(n)
}

/// Calls the script's `name` with `args`.
fn call<'env>(
    env: &'env Env,
    which: Cached,
    name: &str,
    args: &[napi::sys::napi_value],
) -> napi::Result<Unknown<'env>> {
    let f = member(env, which, name)?;
    let mut out = std::ptr::null_mut();
    let mut undefined = std::ptr::null_mut();
    // SAFETY: plain napi calls on the JS thread, with values of this environment.
    let status = unsafe {
        napi::sys::napi_get_undefined(env.raw(), &mut undefined);
        napi::sys::napi_call_function(env.raw(), undefined, f.raw(), args.len(), args.as_ptr(), &mut out)
    };
    if status != napi::sys::Status::napi_ok {
        clear_pending(env);
        return Err(napi::Error::new(Status::GenericFailure, format!("the gathered calls' {name} failed")));
    }
    // SAFETY: a value of this environment.
    unsafe { Unknown::from_napi_value(env.raw(), out) }
}

/// Ends the open segment: a native write or read came after it (the next gathered call opens
/// another, behind it).
pub fn seal(env: &Env) {
    let _ = call(env, Cached::GatherSeal, "seal", &[]);
}

/// How many calls segment `id` holds (0 once it has been read whole).
pub fn size(env: &Env, id: u32) -> usize {
    let n = (|| -> napi::Result<u32> {
        let id = env.create_uint32(id)?;
        let n = call(env, Cached::GatherSize, "size", &[id.raw()])?;
        n.coerce_to_number()?.get_uint32()
    })();
    n.unwrap_or_else(|_| {
        clear_pending(env);
        0
    }) as usize
}

/// The calls `from..from + max` of segment `id`, taken from JS (which forgets them; the first
/// take also ends the segment: a later gathered call opens another), in call order.
pub fn take(env: &Env, id: u32, from: u32, max: u32) -> Taken {
    let text = (|| -> napi::Result<String> {
        let args = [env.create_uint32(id)?.raw(), env.create_uint32(from)?.raw(), env.create_uint32(max)?.raw()];
        let text = call(env, Cached::GatherTake, "take", &args)?;
        // SAFETY: `take` answers a string.
        unsafe { String::from_napi_value(env.raw(), text.raw()) }
    })();
    let text: Arc<str> = text
        .unwrap_or_else(|_| {
            clear_pending(env);
            String::new()
        })
        .into();
    let calls = calls(&text);
    Taken { text, calls, first: from }
}

/// A segment's calls, read from its text.
pub struct Taken {
    text: Arc<str>,
    calls: Vec<Call>,
    /// the place of the first call in its segment
    first: u32,
}

impl Taken {
    pub fn len(&self) -> usize {
        self.calls.len()
    }

    /// Each call's job and its place in the segment, in call order.
    pub fn jobs(self) -> impl Iterator<Item = (FastTextJob, u32)> {
        let (text, first) = (self.text, self.first);
        self.calls.into_iter().enumerate().map(move |(i, c)| {
            let text = text.clone();
            let job: FastTextJob = Arc::new(move |e: &Engine| c.run(e, &text));
            (job, first + i as u32)
        })
    }
}

/// One gathered call: which method, and where its key and argument are in the segment's text.
#[derive(Debug, Clone, PartialEq)]
pub struct Call {
    pub method: Method,
    pub key: Range<usize>,
    pub arg: Range<usize>,
}

#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Method {
    Upsert,
    Append,
}

impl Call {
    fn run(&self, e: &Engine, text: &str) -> CoreResult<String> {
        let key = parse_text(&text[self.key.clone()], "key", true)?;
        match self.method {
            Method::Upsert => e.upsert_session_text(&key, &parse_text(&text[self.arg.clone()], "patch", true)?),
            Method::Append => {
                to_text(&e.append_messages(&key, &parse_text(&text[self.arg.clone()], "messages", true)?)?)
            }
        }
    }
}

/// The calls of a segment's text, in order (a malformed tail is dropped: the script writes it).
pub fn calls(text: &str) -> Vec<Call> {
    let b = text.as_bytes();
    let mut out = Vec::new();
    let mut i = 0;
    while i < b.len() {
        let method = match b[i] {
            b'u' => Method::Upsert,
            b'a' => Method::Append,
            _ => break,
        };
        let Some(k) = memchr::memchr(b'\n', &b[i + 1..]) else { break };
        let key = i + 1..i + 1 + k;
        let Some(a) = memchr::memchr(b'\n', &b[key.end + 1..]) else { break };
        let arg = key.end + 1..key.end + 1 + a;
        i = arg.end + 1;
        out.push(Call { method, key, arg });
    }
    out
}

/// Settles the gathered call `index` of segment `id` with its outcome.
pub fn settle(env: &Env, id: u32, index: u32, out: CoreResult<String>) {
    let done = (|| -> napi::Result<()> {
        let (ok, value) = match out {
            Ok(text) => match super::chunked::answer_from_text(env, &text) {
                Ok(v) => (true, v),
                Err(e) => {
                    clear_pending(env);
                    let e = crate::error::Error::store(format!("cannot read the result: {}", e.reason));
                    (false, error_value(env, &e)?)
                }
            },
            Err(e) => (false, error_value(env, &e)?),
        };
        // SAFETY: a value of this environment, on its thread.
        let ok = unsafe { <bool as ToNapiValue>::to_napi_value(env.raw(), ok)? };
        let args = [env.create_uint32(id)?.raw(), env.create_uint32(index)?.raw(), ok, value.raw()];
        call(env, Cached::GatherSettle, "settle", &args)?;
        Ok(())
    })();
    if done.is_err() {
        clear_pending(env);
    }
}

/// Settles several gathered calls that succeeded, in order, with one `JSON.parse` of their
/// answers together (`(segment, place, answer)`, each answer small: see `chunked`); whether it
/// could (else the caller settles them one by one).
pub fn settle_many(env: &Env, done: &[(u32, u32, String)]) -> bool {
    let mut text = String::with_capacity(done.iter().map(|d| d.2.len() + 24).sum::<usize>() + 16);
    let list = |text: &mut String, f: &dyn Fn(&(u32, u32, String)) -> u32| {
        for (k, d) in done.iter().enumerate() {
            if k > 0 {
                text.push(',');
            }
            text.push_str(&f(d).to_string());
        }
    };
    text.push_str("{\"s\":[");
    list(&mut text, &|d| d.0);
    text.push_str("],\"i\":[");
    list(&mut text, &|d| d.1);
    text.push_str("],\"v\":[");
    for (k, d) in done.iter().enumerate() {
        if k > 0 {
            text.push(',');
        }
        text.push_str(&d.2);
    }
    text.push_str("]}");
    let settled = (|| -> napi::Result<()> {
        let s = if text.is_ascii() { env.create_string_latin1(text.as_bytes())? } else { env.create_string(&text)? };
        call(env, Cached::GatherSettleMany, "settleMany", &[s.raw()])?;
        Ok(())
    })();
    settled.is_ok()
}

#[cfg(test)]
mod tests {
    use super::{calls, Call, Method};

    #[test]
    fn a_segment_reads_back_as_its_calls_in_order() {
        let text = "u\"agent:main:a\"\n{\"label\":\"x\\ny\"}\na\"k\"\n[{\"role\":\"user\"}]\n";
        let got = calls(text);
        assert_eq!(got.len(), 2);
        assert_eq!(got[0], Call { method: Method::Upsert, key: 1..15, arg: 16..32 });
        assert_eq!(&text[got[0].key.clone()], "\"agent:main:a\"");
        assert_eq!(&text[got[0].arg.clone()], "{\"label\":\"x\\ny\"}");
        assert_eq!(got[1].method, Method::Append);
        assert_eq!(&text[got[1].key.clone()], "\"k\"");
        assert_eq!(&text[got[1].arg.clone()], "[{\"role\":\"user\"}]");
        assert!(calls("").is_empty());
        assert_eq!(calls("u\"k\"\n{}").len(), 0, "an unfinished call is dropped");
        assert_eq!(calls("x\"k\"\n{}\n").len(), 0, "an unknown method ends the reading");
    }
}
