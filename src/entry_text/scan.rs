//! Whether a stored entry text is exactly what serde_json writes for the object it holds, and
//! where its top-level members are. Canonical means: no whitespace between tokens; strings with
//! only the escapes serde_json writes (`\"`, `\\`, `\b`, `\t`, `\n`, `\f`, `\r` and `\u00xx`,
//! lower-case, for the other control characters); numbers as it prints them back after a parse;
//! no member name twice in one object; at most [`MAX_DEPTH`] levels. A value of such a text,
//! copied as it is, is byte for byte what parsing the text and serialising it again writes.
//!
//! It owns this check and nothing else: it builds no value and never decides what a merge does
//! (`entry_text`). Anything it does not recognise is answered "not canonical" (the caller then
//! takes the parsing path), never guessed at.

/// Deepest nesting read (serde_json's own parser stops at 128).
pub const MAX_DEPTH: usize = 100;

/// A top-level member: its name as written between the quotes (canonical, so equal names are
/// equal slices) and its value's text.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Member<'a> {
    pub name: &'a str,
    pub value: &'a str,
}

/// The top-level members of `text`, in order, when `text` is a canonical JSON object.
pub fn canonical_members(text: &str) -> Option<Vec<Member<'_>>> {
    let mut s = Scanner { b: text.as_bytes(), i: 0 };
    let mut out: Vec<Member<'_>> = Vec::with_capacity(32);
    s.eat(b'{')?;
    if s.peek()? == b'}' {
        s.i += 1;
    } else {
        loop {
            let name = s.string()?;
            s.eat(b':')?;
            let start = s.i;
            s.value(1)?;
            let name = text.get(name)?;
            if out.iter().any(|m| m.name == name) {
                return None;
            }
            out.push(Member { name, value: text.get(start..s.i)? });
            match s.next()? {
                b',' => continue,
                b'}' => break,
                _ => return None,
            }
        }
    }
    (s.i == s.b.len()).then_some(out)
}

/// The member names of one nested object read so far, as ranges of the text: the first
/// [`Seen::FEW`] on the stack (an entry's objects have a handful), any more on the heap.
#[derive(Default)]
struct Seen {
    few: [(usize, usize); Seen::FEW],
    len: usize,
    more: Vec<(usize, usize)>,
}

impl Seen {
    const FEW: usize = 16;

    /// Adds `name` (a range of `b`); false when the object has that name already.
    fn add(&mut self, b: &[u8], name: std::ops::Range<usize>) -> bool {
        let this = b.get(name.clone());
        if self.few[..self.len].iter().chain(&self.more).any(|&(start, end)| b.get(start..end) == this) {
            return false;
        }
        if self.len < Self::FEW {
            self.few[self.len] = (name.start, name.end);
            self.len += 1;
        } else {
            self.more.push((name.start, name.end));
        }
        true
    }
}

struct Scanner<'a> {
    b: &'a [u8],
    i: usize,
}

impl Scanner<'_> {
    fn peek(&self) -> Option<u8> {
        self.b.get(self.i).copied()
    }

    fn next(&mut self) -> Option<u8> {
        let c = self.peek()?;
        self.i += 1;
        Some(c)
    }

    fn eat(&mut self, c: u8) -> Option<()> {
        (self.next()? == c).then_some(())
    }

    fn literal(&mut self, word: &[u8]) -> Option<()> {
        let end = self.i.checked_add(word.len())?;
        (self.b.get(self.i..end)? == word).then(|| self.i = end)
    }

    fn value(&mut self, depth: usize) -> Option<()> {
        if depth > MAX_DEPTH {
            return None;
        }
        match self.peek()? {
            b'{' => self.object(depth + 1),
            b'[' => self.array(depth + 1),
            b'"' => self.string().map(drop),
            b't' => self.literal(b"true"),
            b'f' => self.literal(b"false"),
            b'n' => self.literal(b"null"),
            b'-' | b'0'..=b'9' => self.number(),
            _ => None,
        }
    }

    fn object(&mut self, depth: usize) -> Option<()> {
        self.eat(b'{')?;
        if self.peek()? == b'}' {
            self.i += 1;
            return Some(());
        }
        let mut names = Seen::default();
        loop {
            let name = self.string()?;
            if !names.add(self.b, name) {
                return None;
            }
            self.eat(b':')?;
            self.value(depth)?;
            match self.next()? {
                b',' => continue,
                b'}' => return Some(()),
                _ => return None,
            }
        }
    }

    fn array(&mut self, depth: usize) -> Option<()> {
        self.eat(b'[')?;
        if self.peek()? == b']' {
            self.i += 1;
            return Some(());
        }
        loop {
            self.value(depth)?;
            match self.next()? {
                b',' => continue,
                b']' => return Some(()),
                _ => return None,
            }
        }
    }

    /// A canonical string; the range of its contents (between the quotes).
    fn string(&mut self) -> Option<std::ops::Range<usize>> {
        self.eat(b'"')?;
        let start = self.i;
        loop {
            // the run of plain bytes up to the next quote, escape or control character
            let plain = self.b.get(self.i..)?.iter().position(|&c| c == b'"' || c == b'\\' || c < 0x20)?;
            self.i += plain;
            match self.next()? {
                b'"' => return Some(start..self.i - 1),
                b'\\' => match self.next()? {
                    b'"' | b'\\' | b'b' | b't' | b'n' | b'f' | b'r' => {}
                    b'u' => {
                        let end = self.i.checked_add(4)?;
                        let hex = self.b.get(self.i..end)?;
                        self.i = end;
                        let digit = |c: u8| match c {
                            b'0'..=b'9' => Some(c - b'0'),
                            b'a'..=b'f' => Some(c - b'a' + 10),
                            _ => None,
                        };
                        if hex[0] != b'0' || hex[1] != b'0' {
                            return None;
                        }
                        let v = digit(hex[2])? * 16 + digit(hex[3])?;
                        // serde_json writes these with their short escapes, the others < 0x20 so
                        if v >= 0x20 || matches!(v, 0x08 | 0x09 | 0x0a | 0x0c | 0x0d) {
                            return None;
                        }
                    }
                    _ => return None,
                },
                c if c < 0x20 => return None,
                _ => {}
            }
        }
    }

    /// A number serde_json prints back as written: an integer without a leading zero that fits
    /// its integer types, or a float whose parse prints back the same text.
    fn number(&mut self) -> Option<()> {
        let start = self.i;
        while matches!(self.peek(), Some(b'-' | b'+' | b'.' | b'e' | b'E' | b'0'..=b'9')) {
            self.i += 1;
        }
        let text = std::str::from_utf8(self.b.get(start..self.i)?).ok()?;
        let (neg, digits) = match text.strip_prefix('-') {
            Some(d) => (true, d),
            None => (false, text),
        };
        let integer = !digits.is_empty() && digits.bytes().all(|c| c.is_ascii_digit());
        if integer {
            if (digits.len() > 1 && digits.starts_with('0')) || (neg && digits == "0") {
                return None;
            }
            // up to 18 digits fit both i64 and u64; longer ones are checked
            let fits =
                digits.len() <= 18 || if neg { text.parse::<i64>().is_ok() } else { text.parse::<u64>().is_ok() };
            return fits.then_some(());
        }
        let n: serde_json::Number = serde_json::from_str(text).ok()?;
        (serde_json::to_string(&n).ok()? == text).then_some(())
    }
}
