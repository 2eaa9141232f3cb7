//! Large answers materialised in JS over several turns of the event loop (issue 17 target 4:
//! no call holds the loop more than 2 ms). An answer's JSON text past [`SPLIT_BYTES`] that is
//! an object with a large array member (a listing's `sessions`, a history's `messages`, also
//! inside a wrapped answer's `details`) is cut into the object with that array empty and pieces
//! of its elements; the
//! object is parsed at once, the pieces a few per turn (at most [`TURN_BUDGET_MS`] of parsing
//! per turn, all large answers of the environment sharing one queue), and the promise resolves
//! with the same value a single `JSON.parse` would give. Anything else is parsed in one go.
//!
//! It owns the cutting and the queue; it never changes a value (the pieces are the text's own
//! bytes) and decides nothing about which call runs where.

use napi::bindgen_prelude::*;
use napi::Env;

use super::cache::{self, Cached};
use super::js::{clear_pending, from_json_text};

/// Answers up to this size are parsed in one go (V8 parses them in well under a millisecond).
pub const SPLIT_BYTES: usize = 96 * 1024;
/// Elements are grouped into pieces of about this many bytes (one piece is one `JSON.parse`).
pub const PIECE_BYTES: usize = 16 * 1024;
/// Parsing done per turn of the event loop, for all large answers together.
const TURN_BUDGET_MS: f64 = 1.0;

/// The shared queue: `materialise(head, path, pieces)` returns a promise of the whole value.
/// Globals are read once, when it is made, so a caller's later reassignment of `JSON.parse`
/// or `setImmediate` does not change it.
const MATERIALISE_JS: &str = r#"(function () {
  'use strict';
  const parse = JSON.parse, later = setImmediate, own = Object.getOwnPropertyDescriptor;
  const now = performance.now.bind(performance);
  const queue = [];
  let scheduled = false;
  function run() {
    scheduled = false;
    const end = now() + BUDGET;
    while (queue.length > 0) {
      const job = queue[0];
      try {
        const part = parse(job.pieces[job.next]);
        job.pieces[job.next++] = undefined;
        for (let k = 0; k < part.length; k++) job.list.push(part[k]);
        if (job.next === job.pieces.length) { queue.shift(); job.resolve(job.out); }
      } catch (e) { queue.shift(); job.reject(e); }
      if (now() >= end) break;
    }
    if (queue.length > 0) { scheduled = true; later(run); }
  }
  return function materialise(head, path, pieces) {
    return new Promise(function (resolve, reject) {
      const out = parse(head);
      let list = out;
      for (let k = 0; k < path.length; k++) list = own(list, path[k]).value;
      queue.push({ out: out, list: list, pieces: pieces, next: 0, resolve: resolve, reject: reject });
      if (!scheduled) { scheduled = true; later(run); }
    });
  };
})()"#;

/// An answer's JSON text as a JS value: parsed at once when small (or not cut-able), else a
/// promise of the same value, materialised over several turns. Only for values that resolve a
/// promise (a promise resolved with a promise takes its value).
pub fn answer_from_text<'env>(env: &'env Env, text: &str) -> napi::Result<Unknown<'env>> {
    // an indexed answer (`rows.rs`): its rows kept by stamp; a large one as any large answer
    let text = match crate::tools::indexed::split(text) {
        Some((_, answer)) if answer.len() > SPLIT_BYTES => answer,
        Some(_) => return super::rows::from_indexed(env, text),
        None => text,
    };
    if text.len() <= SPLIT_BYTES {
        return from_json_text(env, text);
    }
    let Some(split) = split(text, PIECE_BYTES) else { return from_json_text(env, text) };
    // Without the queue (a global it reads is missing), the answer is parsed whole, as before.
    queue_pieces(env, &split).or_else(|_| {
        clear_pending(env);
        from_json_text(env, text)
    })
}

/// Hands the pieces to the queue; its promise.
fn queue_pieces<'env>(env: &'env Env, split: &Split) -> napi::Result<Unknown<'env>> {
    let materialise = cache::function(env, Cached::Materialise, |env| {
        env.run_script::<_, Unknown>(MATERIALISE_JS.replace("BUDGET", &TURN_BUDGET_MS.to_string()))
    })?;
    // SAFETY: the cached value is the function the script above returns.
    let materialise: Function<'env, FnArgs<(Unknown, Unknown, Unknown)>, Unknown> =
        unsafe { Function::from_napi_value(env.raw(), materialise.raw()) }?;
    let mut pieces = env.create_array(split.pieces.len() as u32)?;
    for (i, p) in split.pieces.iter().enumerate() {
        pieces.set(i as u32, env.create_string(p)?)?;
    }
    let mut path = env.create_array(split.path.len() as u32)?;
    for (i, k) in split.path.iter().enumerate() {
        path.set(i as u32, env.create_string(k)?)?;
    }
    let head = env.create_string(&split.head)?.to_unknown();
    materialise.call((head, path.to_unknown(), pieces.to_unknown()).into())
}

/// A JSON object text cut at its largest array member.
#[derive(Debug, PartialEq)]
pub struct Split {
    /// the object with that member's array empty
    pub head: String,
    /// the names leading to the member, from the top (`["sessions"]`, `["details", "sessions"]`)
    pub path: Vec<String>,
    /// the array's elements in order, a run of them per piece, each piece a JSON array text
    pub pieces: Vec<String>,
}

/// The largest array found so far: its names, its brackets' positions and its elements.
type Found<'t> = Option<(Vec<&'t str>, usize, usize, Vec<(usize, usize)>)>;

/// Cuts `text` (a JSON object) at its largest array member, found through members that are
/// objects (a wrapped answer's `details.sessions`), when that array is larger than
/// `piece_bytes`; `None` when it has none, an object on the way names a member twice, or the
/// text is not the JSON this scanner expects (the caller then parses it whole, as before).
pub fn split(text: &str, piece_bytes: usize) -> Option<Split> {
    let b = text.as_bytes();
    let start = ws(b, 0);
    let mut best: Found<'_> = None;
    let end = scan_object(text, start, &mut Vec::new(), &mut best)?;
    if ws(b, end) != b.len() {
        return None;
    }
    let (path, open, close, elements) = best?;
    if close - open <= piece_bytes || elements.is_empty() {
        return None;
    }
    let mut pieces = Vec::new();
    let mut first = 0;
    while first < elements.len() {
        let start = elements[first].0;
        let mut last = first;
        while last + 1 < elements.len() && elements[last + 1].1 - start <= piece_bytes {
            last += 1;
        }
        let body = &text[start..elements[last].1];
        let mut piece = String::with_capacity(body.len() + 2);
        piece.push('[');
        piece.push_str(body);
        piece.push(']');
        pieces.push(piece);
        first = last + 1;
    }
    let head = format!("{}{}", &text[..=open], &text[close..]);
    let path = path.iter().map(|k| serde_json::from_str(k).ok()).collect::<Option<Vec<String>>>()?;
    Some(Split { head, path, pieces })
}

/// Scans the object opening at `i` (its members' names kept on `path`, as JSON text), keeping
/// the largest array reached through objects in `best`; the end of the object.
fn scan_object<'t>(text: &'t str, mut i: usize, path: &mut Vec<&'t str>, best: &mut Found<'t>) -> Option<usize> {
    let b = text.as_bytes();
    if b.get(i) != Some(&b'{') || path.len() > 64 {
        return None;
    }
    i = ws(b, i + 1);
    if b.get(i) == Some(&b'}') {
        return Some(i + 1);
    }
    let mut names: Vec<&str> = Vec::new();
    loop {
        let name_end = skip_string(b, i)?;
        let name = &text[i..name_end];
        if names.contains(&name) {
            return None;
        }
        names.push(name);
        i = ws(b, name_end);
        if b.get(i) != Some(&b':') {
            return None;
        }
        i = ws(b, i + 1);
        path.push(name);
        match b.get(i)? {
            b'[' => {
                let (close, elements) = array_elements(b, i)?;
                if best.as_ref().map(|(_, o, c, _)| c - o).unwrap_or(0) < close - i {
                    *best = Some((path.clone(), i, close, elements));
                }
                i = close + 1;
            }
            b'{' => i = scan_object(text, i, path, best)?,
            _ => i = skip_value(b, i)?,
        }
        path.pop();
        i = ws(b, i);
        match b.get(i)? {
            b',' => i = ws(b, i + 1),
            b'}' => return Some(i + 1),
            _ => return None,
        }
    }
}

fn ws(b: &[u8], mut i: usize) -> usize {
    while matches!(b.get(i), Some(b' ' | b'\n' | b'\r' | b'\t')) {
        i += 1;
    }
    i
}

/// The end (one past the closing quote) of the string starting at `i`.
fn skip_string(b: &[u8], i: usize) -> Option<usize> {
    if b.get(i) != Some(&b'"') {
        return None;
    }
    let mut j = i + 1;
    loop {
        j += memchr::memchr2(b'"', b'\\', b.get(j..)?)?;
        if b[j] == b'\\' {
            j += 2;
        } else {
            return Some(j + 1);
        }
    }
}

/// The end of the value starting at `i` (a string, an object or array, a number or literal).
fn skip_value(b: &[u8], mut i: usize) -> Option<usize> {
    match b.get(i)? {
        b'"' => skip_string(b, i),
        b'{' | b'[' => {
            let mut depth = 0usize;
            loop {
                match b.get(i)? {
                    b'"' => {
                        i = skip_string(b, i)?;
                        continue;
                    }
                    b'{' | b'[' => depth += 1,
                    b'}' | b']' => {
                        depth = depth.checked_sub(1)?;
                        if depth == 0 {
                            return Some(i + 1);
                        }
                    }
                    _ => {}
                }
                i += 1;
            }
        }
        _ => {
            let start = i;
            while let Some(c) = b.get(i) {
                if matches!(c, b',' | b']' | b'}' | b' ' | b'\n' | b'\r' | b'\t') {
                    break;
                }
                i += 1;
            }
            (i > start).then_some(i)
        }
    }
}

/// The closing bracket of the array opening at `open`, and its elements' ranges.
fn array_elements(b: &[u8], open: usize) -> Option<(usize, Vec<(usize, usize)>)> {
    let mut out = Vec::new();
    let mut i = ws(b, open + 1);
    if b.get(i) == Some(&b']') {
        return Some((i, out));
    }
    loop {
        let end = skip_value(b, i)?;
        out.push((i, end));
        i = ws(b, end);
        match b.get(i)? {
            b',' => i = ws(b, i + 1),
            b']' => return Some((i, out)),
            _ => return None,
        }
    }
}

#[cfg(test)]
#[path = "chunked_tests.rs"]
mod tests;
