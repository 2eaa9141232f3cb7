//! The one rewrite a statement needs to run on PostgreSQL: SQLite's parameter markers (`?1`,
//! `?`, `:name`) become PostgreSQL's (`$1` …), outside string literals, quoted identifiers,
//! comments and `::` casts. Each constant statement is rewritten once per process and kept.
//! Nothing else in the text changes: a statement that needs other SQL on PostgreSQL says so
//! where it is written (`Db::dialect`).

use std::collections::HashMap;
use std::sync::{Arc, Mutex, OnceLock};

/// A statement rewritten for PostgreSQL: its text, and for named parameters the name bound to
/// each `$n` (in order; empty for positional statements).
#[derive(Debug)]
pub struct Rewritten {
    pub text: String,
    pub names: Vec<String>,
}

/// The rewrite of `sql`, computed on first use and kept for the life of the process (the
/// statements are the engine's own constants, so the table is bounded).
pub fn rewrite(sql: &'static str) -> Arc<Rewritten> {
    static CACHE: OnceLock<Mutex<HashMap<&'static str, Arc<Rewritten>>>> = OnceLock::new();
    let cache = CACHE.get_or_init(Default::default);
    if let Some(r) = cache.lock().unwrap_or_else(|p| p.into_inner()).get(sql) {
        return r.clone();
    }
    let r = Arc::new(translate(sql));
    cache.lock().unwrap_or_else(|p| p.into_inner()).insert(sql, r.clone());
    r
}

/// The rewrite itself (see the module header).
pub fn translate(sql: &str) -> Rewritten {
    let b = sql.as_bytes();
    let mut text = String::with_capacity(sql.len() + 8);
    let mut names: Vec<String> = Vec::new();
    let mut next_positional = 0usize;
    let mut i = 0;
    let mut copied = 0;
    while i < b.len() {
        match b[i] {
            q @ (b'\'' | b'"') => {
                i += 1;
                while i < b.len() {
                    if b[i] == q {
                        if b.get(i + 1) == Some(&q) {
                            i += 2;
                            continue;
                        }
                        break;
                    }
                    i += 1;
                }
                i += 1;
            }
            b'-' if b.get(i + 1) == Some(&b'-') => {
                while i < b.len() && b[i] != b'\n' {
                    i += 1;
                }
            }
            b':' if b.get(i + 1) == Some(&b':') => i += 2,
            b':' if b.get(i + 1).is_some_and(|c| c.is_ascii_alphabetic() || *c == b'_') => {
                let start = i;
                i += 1;
                while i < b.len() && (b[i].is_ascii_alphanumeric() || b[i] == b'_') {
                    i += 1;
                }
                let name = &sql[start..i];
                let n = match names.iter().position(|x| x == name) {
                    Some(p) => p + 1,
                    None => {
                        names.push(name.to_owned());
                        names.len()
                    }
                };
                text.push_str(&sql[copied..start]);
                text.push_str(&format!("${n}"));
                copied = i;
            }
            b'?' => {
                let start = i;
                i += 1;
                while i < b.len() && b[i].is_ascii_digit() {
                    i += 1;
                }
                let n = if i > start + 1 {
                    sql[start + 1..i].parse::<usize>().unwrap_or(0)
                } else {
                    next_positional += 1;
                    next_positional
                };
                text.push_str(&sql[copied..start]);
                text.push_str(&format!("${n}"));
                copied = i;
            }
            _ => i += 1,
        }
    }
    text.push_str(&sql[copied.min(sql.len())..]);
    Rewritten { text, names }
}

#[cfg(test)]
mod tests {
    use super::translate;

    #[test]
    fn positional_markers_become_dollar_numbers() {
        assert_eq!(
            translate("SELECT a FROM t WHERE k = ?1 AND n > ?2 OR m = ?1").text,
            "SELECT a FROM t WHERE k = $1 AND n > $2 OR m = $1"
        );
        assert_eq!(translate("VALUES (?, ?, ?)").text, "VALUES ($1, $2, $3)");
    }

    #[test]
    fn named_markers_are_numbered_in_first_use_order() {
        let r = translate("WHERE (:a IS NULL OR x = :a) AND y < :limit_2");
        assert_eq!(r.text, "WHERE ($1 IS NULL OR x = $1) AND y < $2");
        assert_eq!(r.names, [":a", ":limit_2"]);
    }

    #[test]
    fn literals_identifiers_comments_and_casts_are_left_alone() {
        let r = translate("SELECT 'a:b ?1 it''s', \"c:d\", x::text -- why? :no\n FROM t WHERE k = :k");
        assert_eq!(r.text, "SELECT 'a:b ?1 it''s', \"c:d\", x::text -- why? :no\n FROM t WHERE k = $1");
        assert_eq!(r.names, [":k"]);
    }
}
