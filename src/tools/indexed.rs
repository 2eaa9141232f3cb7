//! Indexed answers: a tool's JSON answer together with where each element of its one array of
//! rows lies and which rendering it is, so that the JS side keeps the rows it has parsed and
//! parses only the new ones (issue 17: V8's `JSON.parse` of a `sessions_list` answer was half
//! of the call, its rows mostly the same from one call to the next).
//!
//! On the wire an indexed answer is answer + `\0` + index + `\0` (the index after the answer, so
//! that the answer is not copied to make it). The answer is the JSON text the tool gives,
//! unchanged. The index is JSON, `[path, [stamp, start, end, …]]`: `path` names the array
//! (member names from the answer's top), and each row gives its stamp and its place in the
//! answer, in UTF-16 code units (JS string offsets). The rows are the array's elements, all of
//! them, in order. A stamp names one rendered text for the life of the process (the memo gives a
//! stamp once, to one text: `engine::memo`); 0 is a row not to keep. JSON text never holds a
//! raw NUL (in a string it is escaped), so a plain answer is never mistaken for an indexed one.
//!
//! It owns the format, building and splitting; it decides neither what a row says nor how JS
//! makes its value (`napi::rows`).

/// The largest stamp JS reads exactly (2^53 - 1); a larger one crosses as 0 (not kept).
const MAX_SAFE_STAMP: u64 = (1 << 53) - 1;

/// The rows of an answer's array as they are written into its body.
#[derive(Debug, Default, Clone, PartialEq)]
pub struct RowIndex {
    /// (stamp, start, end) in UTF-16 units from the body's start
    rows: Vec<(u64, usize, usize)>,
    /// the body's bytes and UTF-16 units accounted for so far
    bytes: usize,
    units: usize,
}

impl RowIndex {
    /// Notes the row `body[start..]`, just written (what lies between the last row and `start`,
    /// a separator, is counted too).
    pub fn push(&mut self, stamp: u64, body: &[u8], start: usize) {
        let before = units(body.get(self.bytes..start).unwrap_or_default());
        let row = units(body.get(start..).unwrap_or_default());
        let from = self.units + before;
        self.rows.push((stamp, from, from + row));
        self.units = from + row;
        self.bytes = body.len();
    }

    pub fn len(&self) -> usize {
        self.rows.len()
    }

    pub fn is_empty(&self) -> bool {
        self.rows.is_empty()
    }

    /// The indexed answer: `answer` is the JSON text whose array `path` holds the rows, the
    /// body they were written into starting `prefix` bytes into it (an ASCII prefix).
    pub fn wire(&self, path: &[&str], prefix: usize, answer: String) -> String {
        let mut out = answer;
        out.reserve(24 * self.rows.len() + 32);
        out.push_str("\0[");
        // the names are ours (static member names): JSON strings as serde writes them
        let names = serde_json::to_string(path).unwrap_or_else(|_| "[]".into());
        out.push_str(&names);
        out.push_str(",[");
        let mut n = itoa::Buffer::new();
        for (i, (stamp, start, end)) in self.rows.iter().enumerate() {
            if i > 0 {
                out.push(',');
            }
            out.push_str(n.format(if *stamp > MAX_SAFE_STAMP { 0 } else { *stamp }));
            out.push(',');
            out.push_str(n.format(start + prefix));
            out.push(',');
            out.push_str(n.format(end + prefix));
        }
        out.push_str("]]\0");
        out
    }
}

/// An indexed answer's index and answer; `None` for a plain answer.
pub fn split(text: &str) -> Option<(&str, &str)> {
    let body = text.strip_suffix('\0')?;
    let cut = memchr::memrchr(0, body.as_bytes())?;
    Some((&body[cut + 1..], &body[..cut]))
}

/// The UTF-16 code units of `bytes`, UTF-8 text (a row's, or a separator).
fn units(bytes: &[u8]) -> usize {
    if bytes.is_ascii() {
        return bytes.len();
    }
    // four-byte sequences are two units; every other character one
    bytes.iter().filter(|&&b| (b & 0xC0) != 0x80).map(|&b| if b >= 0xF0 { 2 } else { 1 }).sum()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// What JS does with an indexed answer, in Rust: the head with the array emptied, and each
    /// row's text, cut at the UTF-16 offsets.
    fn read(wire: &str) -> (String, Vec<(u64, String)>) {
        let (index, answer) = split(wire).expect("indexed");
        let index: serde_json::Value = serde_json::from_str(index).expect("index is JSON");
        let spans: Vec<u64> = index[1].as_array().expect("spans").iter().map(|v| v.as_u64().expect("number")).collect();
        let units: Vec<u16> = answer.encode_utf16().collect();
        let cut = |a: u64, b: u64| String::from_utf16(&units[a as usize..b as usize]).expect("whole characters");
        let head = cut(0, spans[1]) + &cut(spans[spans.len() - 1], units.len() as u64);
        let rows = spans.chunks(3).map(|s| (s[0], cut(s[1], s[2]))).collect();
        (head, rows)
    }

    #[test]
    fn an_indexed_answer_gives_back_the_head_and_each_row_at_utf16_offsets() {
        let rows = [r#"{"k":"a"}"#, r#"{"k":"é😀ü"}"#, r#"{"k":"漢"}"#];
        let mut body = Vec::new();
        let mut index = RowIndex::default();
        for (i, r) in rows.iter().enumerate() {
            if i > 0 {
                body.push(b',');
            }
            let start = body.len();
            body.extend_from_slice(r.as_bytes());
            index.push(i as u64 + 7, &body, start);
        }
        let prefix = r#"{"count":3,"sessions":["#;
        let answer = format!("{prefix}{}]}}", String::from_utf8(body).expect("utf8"));
        let wire = index.wire(&["sessions"], prefix.len(), answer.clone());
        assert!(wire.starts_with(&answer) && wire.contains("\0[[\"sessions\"],[7,"), "{wire}");
        let (head, got) = read(&wire);
        assert_eq!(head, r#"{"count":3,"sessions":[]}"#);
        let want: Vec<(u64, String)> = rows.iter().enumerate().map(|(i, r)| (i as u64 + 7, r.to_string())).collect();
        assert_eq!(got, want);
        assert_eq!(split(&wire).map(|(_, a)| a), Some(answer.as_str()));
    }

    #[test]
    fn a_plain_answer_is_not_indexed_and_large_stamps_cross_as_zero() {
        assert_eq!(split(r#"{"count":0,"sessions":[]}"#), None);
        assert_eq!(split(""), None);
        let mut index = RowIndex::default();
        index.push(u64::MAX, b"{}", 0);
        let wire = index.wire(&["sessions"], 1, "[{}]".into());
        assert_eq!(split(&wire), Some((r#"[["sessions"],[0,1,3]]"#, "[{}]")));
    }

    #[test]
    fn units_count_utf16_code_units() {
        for s in ["", "abc", "é", "😀", "a😀é漢z"] {
            assert_eq!(units(s.as_bytes()), s.encode_utf16().count(), "{s}");
        }
    }
}
