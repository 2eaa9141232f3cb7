//! Indexed answers made into JS values (`tools::indexed`): the rows an environment has parsed
//! are kept by their stamp, and a row it has kept is copied instead of parsed again (issue 17:
//! V8's `JSON.parse` of a 50-row listing was half of a `sessions_list` call; copying its
//! parsed rows takes about a twentieth of that). Every caller gets its own copy, never the
//! kept value, so a caller that changes what it got changes nothing for the next one, and the
//! value is the one `JSON.parse` of the plain answer gives (plain objects and arrays, the same
//! members in the same order, `__proto__` an own member as `JSON.parse` makes it).
//!
//! It owns the kept rows of each environment and their bound; it decides nothing about what a
//! row says or which answers are indexed.

use napi::bindgen_prelude::*;
use napi::Env;

use super::cache::{self, Cached};

/// Rows kept per environment (about the memo's own bound, `engine::memo`); past it the kept
/// rows start over.
const KEPT_ROWS: usize = 4096;
/// Row shapes (member names in order) given a copier of their own; rows of other shapes are
/// copied member by member.
const SHAPES: usize = 64;

/// `rows(text)`: the value of an indexed answer. Globals are read once, when it is made.
///
/// A row is kept the second time it comes (the first time it is only noted), so that a listing
/// whose rows all changed since the last one is parsed in one go, as a plain answer is (a row
/// parsed apart and copied to be kept costs about three times its share of one parse).
/// A kept row is copied by a function made for its shape, an object literal of its members
/// (rows of a listing take a handful of shapes; a literal is about five times as fast as a
/// spread, whose cache gives up past four shapes). A shape with a `__proto__` member (a literal
/// would set the prototype), past [`SHAPES`], or where functions cannot be made from text
/// (`--disallow-code-generation-from-strings`) is copied by `copy`.
const ROWS_JS: &str = r#"(function () {
  'use strict';
  const parse = JSON.parse, stringify = JSON.stringify, isArray = Array.isArray, keys = Object.keys;
  const own = Object.getOwnPropertyDescriptor, Fn = Function;
  const kept = new Map(), copiers = new Map(), ONCE = {};
  function copy(v) {
    if (isArray(v)) {
      const a = [];
      for (let i = 0; i < v.length; i++) { const x = v[i]; a.push(typeof x === 'object' && x !== null ? copy(x) : x); }
      return a;
    }
    // a spread makes own data members, `__proto__` too, in the same order
    const o = { ...v };
    for (const k in o) { const x = o[k]; if (typeof x === 'object' && x !== null) o[k] = copy(x); }
    return o;
  }
  function copier(row) {
    if (isArray(row)) return copy;
    const names = keys(row), shape = names.join('\u0000');
    let f = copiers.get(shape);
    if (f !== undefined) return f;
    f = copy;
    if (copiers.size < SHAPES && !names.includes('__proto__')) {
      const members = names.map(function (k) {
        const q = stringify(k), x = row[k];
        return typeof x === 'object' && x !== null ? q + ': c(v[' + q + '])' : q + ': v[' + q + ']';
      });
      try { f = new Fn('c', 'return function (v) { return { ' + members.join(', ') + ' }; };')(copy); } catch (e) { f = copy; }
    }
    copiers.set(shape, f);
    return f;
  }
  // a row seen once is only noted: a row is kept (and copied to keep it) the second time it
  // comes, so that a listing whose rows all changed costs one parse, as a plain answer does
  function note(stamp, row) {
    if (stamp === 0 || typeof row !== 'object' || row === null) return;
    const k = kept.get(stamp);
    if (k === undefined) {
      if (kept.size >= KEPT) kept.clear();
      kept.set(stamp, ONCE);
    } else if (k === ONCE) {
      const c = copier(row);
      kept.set(stamp, { v: c(row), c: c });
    }
  }
  function within(out, path) {
    let list = out;
    for (let k = 0; k < path.length; k++) list = own(list, path[k]).value;
    if (!isArray(list)) throw new Error('an indexed answer whose rows are not an array');
    return list;
  }
  // nothing kept: the answer in one parse, as a plain one
  function whole(text, cut, path, spans) {
    const out = parse(text.slice(0, cut)), list = within(out, path), n = spans.length;
    if (list.length * 3 !== n) throw new Error('an indexed answer whose rows are not its array');
    for (let i = 0, j = 0; i < n; i += 3, j++) note(spans[i], list[j]);
    return out;
  }
  function assemble(text, cut, path, spans) {
    const n = spans.length;
    const out = parse(text.slice(0, spans[1]) + text.slice(spans[n - 1], cut)), list = within(out, path);
    if (list.length !== 0) throw new Error('an indexed answer whose rows are not its array');
    for (let i = 0; i < n; i += 3) {
      const k = spans[i] === 0 ? undefined : kept.get(spans[i]);
      if (k !== undefined && k !== ONCE) { list.push(k.c(k.v)); continue; }
      const row = parse(text.slice(spans[i + 1], spans[i + 2]));
      note(spans[i], row);
      list.push(row);
    }
    return out;
  }
  function anyKept(spans) {
    for (let i = 0; i < spans.length; i += 3) {
      const k = spans[i] === 0 ? undefined : kept.get(spans[i]);
      if (k !== undefined && k !== ONCE) return true;
    }
    return false;
  }
  return function rows(text) {
    const end = text.length - 1, cut = text.lastIndexOf('\u0000', end - 1);
    const index = parse(text.slice(cut + 1, end));
    return anyKept(index[1]) ? assemble(text, cut, index[0], index[1]) : whole(text, cut, index[0], index[1]);
  };
})()"#;

/// The value of the indexed answer `text` (its JSON answer not past the size parsed in one go).
pub fn from_indexed<'env>(env: &'env Env, text: &str) -> napi::Result<Unknown<'env>> {
    let rows = cache::function(env, Cached::Rows, |env| {
        env.run_script::<_, Unknown>(
            ROWS_JS.replace("KEPT", &KEPT_ROWS.to_string()).replace("SHAPES", &SHAPES.to_string()),
        )
    })?;
    // SAFETY: the cached value is the function the script above returns.
    let rows: Function<'env, Unknown, Unknown> = unsafe { Function::from_napi_value(env.raw(), rows.raw()) }?;
    rows.call(super::js::string_of(env, text)?.to_unknown())
}
