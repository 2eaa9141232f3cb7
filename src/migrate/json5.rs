//! A JSON5 reader for the gateway's `sessions.json` and `runs.json` (REFERENCE.md §2.2): comments,
//! trailing commas, single-quoted strings, unquoted keys, hexadecimal and `+`/`.`-led numbers,
//! line continuations. Plain JSON goes through `serde_json` first; only a file it refuses is read
//! here.
//!
//! The input is untrusted: nesting is bounded, every failure is an error naming the line, and
//! nothing panics. `Infinity` and `NaN` have no JSON form and read as `null`.

use serde_json::{Map, Number, Value};

/// Deepest nesting accepted (serde_json's own limit).
const MAX_DEPTH: usize = 128;

/// Parses a JSON5 document into a JSON value.
pub fn parse(text: &str) -> Result<Value, String> {
    let text = text.strip_prefix('\u{feff}').unwrap_or(text);
    if let Ok(v) = serde_json::from_str::<Value>(text) {
        return Ok(v);
    }
    let mut p = Parser { s: text.as_bytes(), src: text, i: 0 };
    p.skip_ws()?;
    let v = p.value(0)?;
    p.skip_ws()?;
    if p.i < p.s.len() {
        return Err(p.err("unexpected text after the value"));
    }
    Ok(v)
}

struct Parser<'a> {
    s: &'a [u8],
    src: &'a str,
    i: usize,
}

impl Parser<'_> {
    fn err(&self, what: &str) -> String {
        let line = 1 + self.s[..self.i.min(self.s.len())].iter().filter(|&&b| b == b'\n').count();
        format!("invalid JSON5 at line {line}: {what}")
    }

    fn peek(&self) -> Option<u8> {
        self.s.get(self.i).copied()
    }

    fn skip_ws(&mut self) -> Result<(), String> {
        loop {
            match self.peek() {
                Some(b' ' | b'\t' | b'\n' | b'\r' | 0x0b | 0x0c) => self.i += 1,
                Some(b'/') if self.s.get(self.i + 1) == Some(&b'/') => {
                    while let Some(b) = self.peek() {
                        if b == b'\n' {
                            break;
                        }
                        self.i += 1;
                    }
                }
                Some(b'/') if self.s.get(self.i + 1) == Some(&b'*') => {
                    let start = self.i;
                    self.i += 2;
                    loop {
                        match self.peek() {
                            None => {
                                self.i = start;
                                return Err(self.err("unterminated comment"));
                            }
                            Some(b'*') if self.s.get(self.i + 1) == Some(&b'/') => {
                                self.i += 2;
                                break;
                            }
                            _ => self.i += 1,
                        }
                    }
                }
                Some(b) if b >= 0x80 => {
                    // Unicode white space (NBSP, BOM, line/paragraph separators, …).
                    let c = self.src[self.i..].chars().next().unwrap_or('\0');
                    if c.is_whitespace() || c == '\u{feff}' {
                        self.i += c.len_utf8();
                    } else {
                        return Ok(());
                    }
                }
                _ => return Ok(()),
            }
        }
    }

    fn value(&mut self, depth: usize) -> Result<Value, String> {
        if depth > MAX_DEPTH {
            return Err(self.err("nested too deeply"));
        }
        match self.peek() {
            None => Err(self.err("unexpected end of input")),
            Some(b'{') => self.object(depth),
            Some(b'[') => self.array(depth),
            Some(q @ (b'"' | b'\'')) => self.string(q).map(Value::String),
            Some(b'-' | b'+' | b'.' | b'0'..=b'9') => self.number(),
            Some(_) => {
                let word = self.ident()?;
                match word.as_str() {
                    "true" => Ok(Value::Bool(true)),
                    "false" => Ok(Value::Bool(false)),
                    "null" | "Infinity" | "NaN" => Ok(Value::Null),
                    _ => Err(self.err(&format!("unexpected word {word:?}"))),
                }
            }
        }
    }

    fn object(&mut self, depth: usize) -> Result<Value, String> {
        self.i += 1;
        let mut map = Map::new();
        loop {
            self.skip_ws()?;
            match self.peek() {
                Some(b'}') => {
                    self.i += 1;
                    return Ok(Value::Object(map));
                }
                None => return Err(self.err("unterminated object")),
                _ => {}
            }
            let key = match self.peek() {
                Some(q @ (b'"' | b'\'')) => self.string(q)?,
                _ => self.ident()?,
            };
            self.skip_ws()?;
            if self.peek() != Some(b':') {
                return Err(self.err("expected ':' after a key"));
            }
            self.i += 1;
            self.skip_ws()?;
            let v = self.value(depth + 1)?;
            map.insert(key, v);
            self.skip_ws()?;
            match self.peek() {
                Some(b',') => self.i += 1,
                Some(b'}') => {}
                _ => return Err(self.err("expected ',' or '}'")),
            }
        }
    }

    fn array(&mut self, depth: usize) -> Result<Value, String> {
        self.i += 1;
        let mut out = Vec::new();
        loop {
            self.skip_ws()?;
            match self.peek() {
                Some(b']') => {
                    self.i += 1;
                    return Ok(Value::Array(out));
                }
                None => return Err(self.err("unterminated array")),
                _ => {}
            }
            out.push(self.value(depth + 1)?);
            self.skip_ws()?;
            match self.peek() {
                Some(b',') => self.i += 1,
                Some(b']') => {}
                _ => return Err(self.err("expected ',' or ']'")),
            }
        }
    }

    /// An unquoted key or word: ECMAScript identifier characters (letters, digits, `_`, `$`).
    fn ident(&mut self) -> Result<String, String> {
        let start = self.i;
        let rest = &self.src[start..];
        let len = rest
            .char_indices()
            .find(|&(_, c)| !(c.is_alphanumeric() || c == '_' || c == '$'))
            .map_or(rest.len(), |(off, _)| off);
        if len == 0 {
            return Err(self.err("expected a value or a key"));
        }
        self.i = start + len;
        Ok(rest[..len].to_owned())
    }

    fn hex(&mut self, n: usize) -> Result<u32, String> {
        let h = self.src.get(self.i..self.i + n).ok_or_else(|| self.err("truncated escape"))?;
        let v = u32::from_str_radix(h, 16).map_err(|_| self.err("bad hexadecimal escape"))?;
        self.i += n;
        Ok(v)
    }

    fn string(&mut self, quote: u8) -> Result<String, String> {
        self.i += 1;
        let mut out = String::new();
        loop {
            let start = self.i;
            while let Some(b) = self.peek() {
                if b == quote || b == b'\\' || b == b'\n' || b == b'\r' {
                    break;
                }
                self.i += 1;
            }
            out.push_str(&self.src[start..self.i]);
            match self.peek() {
                None | Some(b'\n' | b'\r') => return Err(self.err("unterminated string")),
                Some(b) if b == quote => {
                    self.i += 1;
                    return Ok(out);
                }
                _ => {}
            }
            // a backslash
            self.i += 1;
            let Some(c) = self.src[self.i..].chars().next() else { return Err(self.err("unterminated string")) };
            self.i += c.len_utf8();
            match c {
                'n' => out.push('\n'),
                't' => out.push('\t'),
                'r' => out.push('\r'),
                'b' => out.push('\u{8}'),
                'f' => out.push('\u{c}'),
                'v' => out.push('\u{b}'),
                '0' => out.push('\0'),
                'x' => {
                    let v = self.hex(2)?;
                    out.push(char::from_u32(v).unwrap_or('\u{fffd}'));
                }
                'u' => {
                    let hi = self.hex(4)?;
                    let ch = if (0xd800..0xdc00).contains(&hi) && self.src[self.i..].starts_with("\\u") {
                        let save = self.i;
                        self.i += 2;
                        let lo = self.hex(4)?;
                        if (0xdc00..0xe000).contains(&lo) {
                            char::from_u32(0x10000 + ((hi - 0xd800) << 10) + (lo - 0xdc00))
                        } else {
                            self.i = save;
                            None
                        }
                    } else {
                        char::from_u32(hi)
                    };
                    out.push(ch.unwrap_or('\u{fffd}'));
                }
                '\r' => {
                    if self.peek() == Some(b'\n') {
                        self.i += 1;
                    }
                }
                '\n' | '\u{2028}' | '\u{2029}' => {}
                other => out.push(other),
            }
        }
    }

    fn number(&mut self) -> Result<Value, String> {
        let start = self.i;
        let mut negative = false;
        if let Some(sign @ (b'+' | b'-')) = self.peek() {
            negative = sign == b'-';
            self.i += 1;
        }
        let rest = &self.src[self.i..];
        if rest.starts_with("Infinity") {
            self.i += "Infinity".len();
            return Ok(Value::Null);
        }
        if rest.starts_with("NaN") {
            self.i += 3;
            return Ok(Value::Null);
        }
        if rest.starts_with("0x") || rest.starts_with("0X") {
            self.i += 2;
            let h = self.i;
            while self.peek().is_some_and(|b| b.is_ascii_hexdigit()) {
                self.i += 1;
            }
            let v = u64::from_str_radix(&self.src[h..self.i], 16).map_err(|_| self.err("bad hexadecimal number"))?;
            return Ok(if negative {
                i64::try_from(v).map(|v| Value::from(-v)).unwrap_or_else(|_| Value::from(-(v as f64)))
            } else {
                Value::from(v)
            });
        }
        while self.peek().is_some_and(|b| b.is_ascii_digit() || matches!(b, b'.' | b'e' | b'E' | b'+' | b'-')) {
            self.i += 1;
        }
        let text = self.src[start..self.i].trim_start_matches('+');
        if let Ok(i) = text.parse::<i64>() {
            return Ok(Value::from(i));
        }
        let f: f64 = text.parse().map_err(|_| self.err(&format!("bad number {text:?}")))?;
        Ok(Number::from_f64(f).map(Value::Number).unwrap_or(Value::Null))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn plain_json_reads_as_json() {
        assert_eq!(parse(r#"{"a": [1, 2.5, "x", null, true]}"#).unwrap(), json!({"a": [1, 2.5, "x", null, true]}));
    }

    #[test]
    fn the_json5_quirks_the_gateway_tolerates_read() {
        let text = "\u{feff}// header comment\n{\n  /* block\n comment */ unquoted: 'single \\'quoted\\'',\n  \"trailing\": [1, 2, ],\n  $id_2: +5, hex: 0x1F, half: .5, neg: -0x10, big: 1e3,\n  multi: 'a\\\nb', esc: \"\\u00e9\\x41\\t\", inf: Infinity,\n}\n";
        let v = parse(text).unwrap();
        assert_eq!(
            v,
            json!({"unquoted": "single 'quoted'", "trailing": [1, 2], "$id_2": 5, "hex": 31, "half": 0.5,
                   "neg": -16, "big": 1000.0, "multi": "ab", "esc": "éA\t", "inf": null})
        );
    }

    #[test]
    fn broken_input_is_an_error_naming_the_line_never_a_panic() {
        for bad in ["{", "{a: }", "[1,,]", "{'a' 1}", "'open", "/* never closed", "{a: 1} x", "", "{\n\n  a: nope }"] {
            let e = parse(bad).unwrap_err();
            assert!(e.contains("line"), "{bad:?}: {e}");
        }
        assert!(parse("{\n\n  a: nope }").unwrap_err().contains("line 3"));
        assert!(parse(&"[".repeat(100_000)).is_err());
        assert!(parse("\"\\ud800\"").is_ok());
    }
}
#[cfg(test)]
mod float_tests {
    /// Found by the property test: serde_json's default float reading is off by one unit in the
    /// last place for some values; with `float_roundtrip` every float reads back exactly, in
    /// imported files as in everything the addon stores.
    #[test]
    fn floats_read_back_exactly() {
        for text in ["-1.789413479731321e-90", "0.30000000000000004", "1.7976931348623157e308", "5e-324"] {
            let want: f64 = text.parse().unwrap();
            let v = super::parse(&format!(r#"{{"n": {text}}}"#)).unwrap();
            assert_eq!(v["n"].as_f64(), Some(want), "{text}");
            let v5 = super::parse(&format!("{{n: {text},}}")).unwrap();
            assert_eq!(v5["n"].as_f64(), Some(want), "{text} (JSON5)");
            let stored: serde_json::Value = serde_json::from_str(&format!("[{text}]")).unwrap();
            assert_eq!(stored[0].as_f64(), Some(want), "{text} (serde_json)");
        }
    }
}
