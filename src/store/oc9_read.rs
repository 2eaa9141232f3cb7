//! Reading a database of a 2026.9 gateway state folder (OPENCLAW-2026.9.md §4): an agent's
//! `openclaw-agent.sqlite` or the global `state/openclaw.sqlite`, as rows for `migrate::sqlite9`
//! to map.
//!
//! It owns the read-only connection and the constant SELECTs; it never writes to the gateway's
//! files, never takes a write lock, and decides nothing about what a row means. A file with no
//! `-wal` beside it (or an empty one and no `-shm`) is opened `immutable` (no lock, no
//! `-wal`/`-shm` created: nothing in the folder changes); one with a `-wal` (a gateway has it
//! open, or stopped uncleanly) is opened read-only through its WAL, as any reader of a live
//! database. A `-wal` with content but no `-shm` (no connection has it open, since one always
//! has its `-shm`) would make SQLite create the `-shm` beside it, so that pair is read from a
//! private copy instead. Either way every read happens inside one read transaction, so what is
//! read is one consistent snapshot.

use std::path::Path;

use rusqlite::types::ValueRef;
use rusqlite::{Connection, OpenFlags};
use serde_json::{Map, Value};

/// A refusal or failure, as the reason a `skipped` entry gives.
pub type Why = String;

fn why(e: rusqlite::Error) -> Why {
    match e.sqlite_error_code() {
        Some(rusqlite::ErrorCode::NotADatabase) => "not a SQLite database (or its header is damaged)".into(),
        Some(rusqlite::ErrorCode::DatabaseCorrupt) => format!("the database is damaged: {e}"),
        _ => format!("cannot read it: {e}"),
    }
}

/// One stored transcript event: JSON text, or zstd-compressed JSON with its decoded length.
pub enum StoredEvent {
    Json(String),
    Zstd {
        bytes: Vec<u8>,
        utf8_len: Option<i64>,
    },
    /// neither column holds anything usable
    Empty,
}

/// A 2026.9 database opened read-only, inside one read transaction.
pub struct Oc9Db {
    conn: Connection,
    /// the private copy read instead of the gateway's pair, removed when this is dropped
    _copy: Option<PrivateCopy>,
}

/// A folder of ours holding a copy of a database and its `-wal`; removed on drop.
struct PrivateCopy(std::path::PathBuf);

impl Drop for PrivateCopy {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

impl PrivateCopy {
    /// Copies `db` and `wal` into a new private folder; the copy of `db` is the path to open.
    fn of(db: &Path, wal: &Path) -> Result<(PrivateCopy, std::path::PathBuf), Why> {
        let dir = std::env::temp_dir().join(format!("session-tools-read-{}", uuid::Uuid::new_v4()));
        std::fs::create_dir(&dir).map_err(|e| format!("cannot make a private copy to read it: {e}"))?;
        let guard = PrivateCopy(dir);
        let name = db.file_name().map_or_else(|| "db.sqlite".into(), |n| n.to_os_string());
        let target = guard.0.join(&name);
        let mut wal_name = name;
        wal_name.push("-wal");
        let copy = |from: &Path, to: &Path| {
            std::fs::copy(from, to).map(drop).map_err(|e| format!("cannot make a private copy to read it: {e}"))
        };
        copy(db, &target)?;
        copy(wal, &guard.0.join(wal_name))?;
        Ok((guard, target))
    }
}

/// Everything a row holds, by column name (NULLs left out; a BLOB becomes `null`).
fn row_object(row: &rusqlite::Row<'_>, names: &[String]) -> rusqlite::Result<Map<String, Value>> {
    let mut out = Map::new();
    for (i, name) in names.iter().enumerate() {
        let v = match row.get_ref(i)? {
            ValueRef::Null => continue,
            ValueRef::Integer(n) => Value::from(n),
            ValueRef::Real(f) => serde_json::Number::from_f64(f).map_or(Value::Null, Value::Number),
            ValueRef::Text(t) => Value::from(String::from_utf8_lossy(t).into_owned()),
            ValueRef::Blob(_) => Value::Null,
        };
        out.insert(name.clone(), v);
    }
    Ok(out)
}

impl Oc9Db {
    /// Opens `path` read-only and starts the read transaction; `Err` with a reason for a file that
    /// cannot be read as a SQLite database.
    pub fn open(path: &Path) -> Result<Oc9Db, Why> {
        let beside = |suffix: &str| {
            let mut p = path.as_os_str().to_owned();
            p.push(suffix);
            std::path::PathBuf::from(p)
        };
        // Live: a WAL with content, or one a connection has open (its -shm is there). An empty
        // WAL with no -shm holds nothing: the file alone is the database.
        let live = match std::fs::metadata(beside("-wal")) {
            Ok(m) if m.len() > 0 => true,
            Ok(_) => beside("-shm").exists(),
            Err(_) => false,
        };
        let (copy, path) = if live && !beside("-shm").exists() {
            let (guard, target) = PrivateCopy::of(path, &beside("-wal"))?;
            (Some(guard), target)
        } else {
            (None, path.to_path_buf())
        };
        // A URI, so the path is percent-encoded as SQLite expects of one.
        let mut uri = String::from("file:");
        for b in path.to_string_lossy().bytes() {
            if b.is_ascii_alphanumeric() || b"/-_.~".contains(&b) {
                uri.push(b as char);
            } else {
                uri.push_str(&format!("%{b:02X}"));
            }
        }
        uri.push_str(if live { "?mode=ro" } else { "?mode=ro&immutable=1" });
        let flags = OpenFlags::SQLITE_OPEN_READ_ONLY | OpenFlags::SQLITE_OPEN_URI | OpenFlags::SQLITE_OPEN_NO_MUTEX;
        let conn = Connection::open_with_flags(&uri, flags).map_err(why)?;
        conn.busy_timeout(std::time::Duration::from_secs(10)).map_err(why)?;
        conn.pragma_update(None, "query_only", true).map_err(why)?;
        conn.execute_batch("BEGIN DEFERRED").map_err(why)?;
        // The first read fixes the snapshot (and fails at once on a file that is not a database).
        conn.query_row("SELECT count(*) FROM sqlite_master", [], |r| r.get::<_, i64>(0)).map_err(why)?;
        Ok(Oc9Db { conn, _copy: copy })
    }

    /// `PRAGMA user_version`.
    pub fn user_version(&self) -> Result<i64, Why> {
        self.conn.query_row("PRAGMA user_version", [], |r| r.get(0)).map_err(why)
    }

    /// The `role` of the `schema_meta` row (`agent` or `global`), when the table has one.
    pub fn role(&self) -> Result<Option<String>, Why> {
        if !self.has_table("schema_meta")? {
            return Ok(None);
        }
        let mut st = self.conn.prepare("SELECT role FROM schema_meta ORDER BY meta_key LIMIT 1").map_err(why)?;
        let mut rows = st.query([]).map_err(why)?;
        match rows.next().map_err(why)? {
            Some(r) => Ok(r.get::<_, Option<String>>(0).map_err(why)?),
            None => Ok(None),
        }
    }

    pub fn has_table(&self, name: &str) -> Result<bool, Why> {
        let n: i64 = self
            .conn
            .query_row("SELECT count(*) FROM sqlite_master WHERE type = 'table' AND name = ?1", [name], |r| r.get(0))
            .map_err(why)?;
        Ok(n > 0)
    }

    /// `PRAGMA quick_check`: `Err` naming the first problem of a damaged file.
    pub fn quick_check(&self) -> Result<(), Why> {
        let first: String = self.conn.query_row("PRAGMA quick_check(1)", [], |r| r.get(0)).map_err(why)?;
        if first == "ok" {
            Ok(())
        } else {
            Err(format!("the database is damaged: {first}"))
        }
    }

    fn each_object(&self, query: &'static str, mut f: impl FnMut(Map<String, Value>)) -> Result<(), Why> {
        let mut st = self.conn.prepare(query).map_err(why)?;
        let names: Vec<String> = st.column_names().map(str::to_owned).collect();
        let mut rows = st.query([]).map_err(why)?;
        while let Some(r) = rows.next().map_err(why)? {
            f(row_object(r, &names).map_err(why)?);
        }
        Ok(())
    }

    /// Every `session_nodes` row, all columns, by key.
    pub fn session_nodes(&self, f: impl FnMut(Map<String, Value>)) -> Result<(), Why> {
        self.each_object("SELECT * FROM session_nodes ORDER BY session_key", f)
    }

    /// Every `session_windows` row, all columns, oldest first per key.
    pub fn session_windows(&self, f: impl FnMut(Map<String, Value>)) -> Result<(), Why> {
        self.each_object("SELECT * FROM session_windows ORDER BY session_key, created_at, session_id", f)
    }

    /// Every `subagent_runs` row (global database).
    pub fn subagent_runs(&self, f: impl FnMut(Map<String, Value>)) -> Result<(), Why> {
        self.each_object("SELECT * FROM subagent_runs ORDER BY created_at, run_id", f)
    }

    /// Every `task_runs` row with its `task_delivery_state` (as `ds_requester_origin_json`,
    /// `ds_last_notified_event_at`), global database.
    pub fn task_runs(&self, f: impl FnMut(Map<String, Value>)) -> Result<(), Why> {
        if self.has_table("task_delivery_state")? {
            self.each_object(
                "SELECT t.*, d.requester_origin_json AS ds_requester_origin_json,
                        d.last_notified_event_at AS ds_last_notified_event_at
                 FROM task_runs t LEFT JOIN task_delivery_state d ON d.task_id = t.task_id
                 ORDER BY t.created_at, t.task_id",
                f,
            )
        } else {
            self.each_object("SELECT * FROM task_runs ORDER BY created_at, task_id", f)
        }
    }

    /// The events of one transcript generation, in `seq` order.
    pub fn transcript_events(&self, session_id: &str, mut f: impl FnMut(i64, StoredEvent)) -> Result<(), Why> {
        let mut st = self
            .conn
            .prepare_cached(
                "SELECT seq, event_json, event_zstd, event_utf8_bytes FROM transcript_events
                 WHERE session_id = ?1 ORDER BY seq",
            )
            .map_err(why)?;
        let mut rows = st.query([session_id]).map_err(why)?;
        while let Some(r) = rows.next().map_err(why)? {
            let seq: i64 = r.get(0).map_err(why)?;
            let ev = match (r.get_ref(1).map_err(why)?, r.get_ref(2).map_err(why)?) {
                (ValueRef::Text(t), _) => StoredEvent::Json(String::from_utf8_lossy(t).into_owned()),
                (_, ValueRef::Blob(b)) => {
                    StoredEvent::Zstd { bytes: b.to_vec(), utf8_len: r.get::<_, Option<i64>>(3).map_err(why)? }
                }
                _ => StoredEvent::Empty,
            };
            f(seq, ev);
        }
        Ok(())
    }
}

impl Drop for Oc9Db {
    fn drop(&mut self) {
        let _ = self.conn.execute_batch("ROLLBACK");
    }
}
