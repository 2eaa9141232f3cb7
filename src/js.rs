//! JavaScript-compatible text and number primitives, used by keys, policies and the
//! orchestration texts: what `\s` and `trim` match, and how `Math.round` and
//! `Number.prototype.toFixed` turn a number into text. The reference works with these, so
//! matching them keeps our keys, titles and texts identical to its own.
//! Pure functions over `&str`/`f64`; nothing here knows about sessions.

/// `String.prototype.trim`: the ends lose what JavaScript counts as white space.
pub fn js_trim(s: &str) -> &str {
    s.trim_matches(is_js_space)
}

/// A character JavaScript's `\s` (and `trim`) treats as white space: Unicode `White_Space`
/// without U+0085, plus U+FEFF.
pub fn is_js_space(c: char) -> bool {
    (c.is_whitespace() && c != '\u{85}') || c == '\u{FEFF}'
}

/// A character the gateway strips from prompt data (`sanitizeForPromptLiteral`): Unicode
/// control (`Cc`) and format (`Cf`) characters, and the line and paragraph separators.
pub fn is_prompt_unsafe(c: char) -> bool {
    c.is_control()
        || matches!(
            c,
            '\u{2028}'
                | '\u{2029}'
                | '\u{ad}'
                | '\u{600}'..='\u{605}'
                | '\u{61c}'
                | '\u{6dd}'
                | '\u{70f}'
                | '\u{890}'..='\u{891}'
                | '\u{8e2}'
                | '\u{180e}'
                | '\u{200b}'..='\u{200f}'
                | '\u{202a}'..='\u{202e}'
                | '\u{2060}'..='\u{2064}'
                | '\u{2066}'..='\u{206f}'
                | '\u{feff}'
                | '\u{fff9}'..='\u{fffb}'
                | '\u{110bd}'
                | '\u{110cd}'
                | '\u{13430}'..='\u{1343f}'
                | '\u{1bca0}'..='\u{1bca3}'
                | '\u{1d173}'..='\u{1d17a}'
                | '\u{e0001}'
                | '\u{e0020}'..='\u{e007f}'
        )
}

/// `s.replace(/\s+/g, " ").trim()`: every run of white space becomes one space, ends trimmed.
pub fn collapse_whitespace(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    let mut pending_space = false;
    for c in s.chars() {
        if is_js_space(c) {
            pending_space = !out.is_empty();
        } else {
            if pending_space {
                out.push(' ');
                pending_space = false;
            }
            out.push(c);
        }
    }
    out
}

/// `Math.round`: halves go towards +∞ (`-2.5` → `-2`), non-finite values pass through.
pub fn js_round(x: f64) -> f64 {
    if !x.is_finite() {
        return x;
    }
    let floor = x.floor();
    if x - floor >= 0.5 {
        floor + 1.0
    } else {
        floor
    }
}

/// `String(n)` for an integral `f64` as `Math.round` produces it (`-0` prints as `0`).
pub fn js_integer_string(x: f64) -> String {
    if x == 0.0 {
        "0".to_string()
    } else if x.is_finite() && x.abs() < 1e21 {
        format!("{x:.0}")
    } else if x.is_nan() {
        "NaN".to_string()
    } else if x.is_infinite() {
        if x > 0.0 { "Infinity" } else { "-Infinity" }.to_string()
    } else {
        format!("{x:e}")
    }
}

/// `x.toFixed(digits)`: rounds the exact binary value of `x` to `digits` decimals, an exact tie
/// going to the larger magnitude (Rust's `{:.N}` would round a tie to even: `0.25` → `0.2`,
/// where JavaScript gives `0.3`). A decimal literal is not a tie: `2.345` is stored as
/// 2.34500000000000019…, so it gives `2.35`, while `12.345` (stored as 12.34500000000000063…)
/// gives `12.3` at one decimal. Values ≥ 1e21 and non-finite values print as `String(x)`.
pub fn to_fixed(x: f64, digits: usize) -> String {
    if !x.is_finite() || x.abs() >= 1e21 {
        return js_integer_string(x);
    }
    // Every finite f64 has a finite decimal expansion of at most 1074 fractional digits; ask for
    // all of them so that the rounding below sees the exact value.
    let exact = format!("{:.1100}", x.abs());
    let (int_part, frac_part) = exact.split_once('.').unwrap_or((exact.as_str(), ""));
    let mut digits_kept: Vec<u8> = int_part.bytes().chain(frac_part.bytes().take(digits)).map(|b| b - b'0').collect();
    let round_up = frac_part.as_bytes().get(digits).is_some_and(|&b| b >= b'5');
    if round_up {
        let mut i = digits_kept.len();
        loop {
            if i == 0 {
                digits_kept.insert(0, 1);
                break;
            }
            i -= 1;
            if digits_kept[i] == 9 {
                digits_kept[i] = 0;
            } else {
                digits_kept[i] += 1;
                break;
            }
        }
    }
    let int_len = digits_kept.len() - digits;
    let mut out = String::with_capacity(digits_kept.len() + 2);
    if x < 0.0 {
        out.push('-');
    }
    for (i, d) in digits_kept.iter().enumerate() {
        if i == int_len {
            out.push('.');
        }
        out.push(char::from(b'0' + d));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn collapse_whitespace_joins_runs_of_any_js_space_and_trims() {
        assert_eq!(collapse_whitespace("  a \t\n b\u{3000}c\u{FEFF} "), "a b c");
        assert_eq!(collapse_whitespace(""), "");
        assert_eq!(collapse_whitespace(" \n\t "), "");
        assert_eq!(collapse_whitespace("naïve\u{85}x"), "naïve\u{85}x");
    }

    #[test]
    fn js_round_sends_halves_towards_positive_infinity() {
        assert_eq!(js_round(2.5), 3.0);
        assert_eq!(js_round(-2.5), -2.0);
        assert_eq!(js_round(0.49999999999999994), 0.0);
        assert_eq!(js_integer_string(js_round(-0.4)), "0");
        assert_eq!(js_integer_string(js_round(999.5)), "1000");
    }

    #[test]
    fn to_fixed_rounds_true_ties_away_from_zero_like_javascript() {
        assert_eq!(to_fixed(0.25, 1), "0.3");
        assert_eq!(to_fixed(0.125, 2), "0.13");
        assert_eq!(to_fixed(2.5, 0), "3");
        assert_eq!(to_fixed(-0.25, 1), "-0.3");
    }

    #[test]
    fn to_fixed_uses_the_exact_binary_value_not_the_decimal_literal() {
        // 2.345 is stored as 2.345000000000000195…, 1.005 as 1.00499999999999989…
        assert_eq!(to_fixed(2.345, 2), "2.35");
        assert_eq!(to_fixed(1.005, 2), "1.00");
    }

    #[test]
    fn to_fixed_carries_and_pads() {
        assert_eq!(to_fixed(9.96, 1), "10.0");
        assert_eq!(to_fixed(99.999, 2), "100.00");
        assert_eq!(to_fixed(0.0, 4), "0.0000");
        assert_eq!(to_fixed(12.345, 1), "12.3");
        assert_eq!(to_fixed(0.065175, 2), "0.07");
        assert_eq!(to_fixed(-0.0001, 2), "-0.00");
        assert_eq!(to_fixed(-0.0, 2), "0.00");
        assert_eq!(to_fixed(f64::NAN, 2), "NaN");
    }
}
