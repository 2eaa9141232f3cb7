//! The PostgreSQL backend: a bounded pool of connections to the server a `postgres://` URL
//! names, the transactions the store's [`Db`](super::Db) statements run in, and the schema
//! migrations.
//!
//! The rest of the engine is synchronous and runs store calls on blocking threads; this module
//! owns a small tokio runtime that drives the connections and blocks the calling thread on each
//! round trip. A write transaction first takes one transaction-scoped advisory lock, so writes
//! are serialised across every process and host on the database exactly as SQLite serialises
//! them on one file (the engine's read-check-write rules stay one transaction each); reads run
//! in `REPEATABLE READ READ ONLY` snapshots and never wait for writers. How a transaction saves
//! round trips is `tx`'s; how concurrent writes share one is `batch`'s. A connection the server
//! dropped (a restart) is replaced on the next call; a write that failed before its commit was
//! sent is tried again once on a fresh connection. This module never decides what a statement
//! says.

mod batch;
#[cfg(test)]
mod batch_tests;
mod blocking;
#[cfg(test)]
mod blocking_tests;
mod copy;
pub mod dialect;
mod lease;
mod listen;
pub mod schema;
#[cfg(test)]
pub mod testdb;
#[cfg(test)]
mod tests;
mod tls;
#[cfg(test)]
mod tls_tests;
mod tx;

use std::mem::ManuallyDrop;
use std::str::FromStr;
use std::time::Duration;

use deadpool_postgres::{Manager, ManagerConfig, Pool, RecyclingMethod};
use tokio_postgres::types::ToSql;

pub use listen::Waker;
pub use tx::PgTx;

use self::blocking::PgRuntime;
use self::tx::Begin;
use super::Db;
use crate::error::{Error, Result};

/// The advisory lock every write transaction holds (an arbitrary constant: "sess" "tool").
const WRITE_LOCK: i64 = 0x7365_7373_746f_6f6c;
/// The advisory lock a migration holds, so two processes opening a new database migrate once.
const MIGRATE_LOCK: i64 = 0x7365_7373_6d69_6772;
/// Connections a store keeps at most, unless the URL says `pool_max_size`.
pub const DEFAULT_POOL_SIZE: usize = 8;
/// How long a call waits for a free connection, or for a new one to be made.
const POOL_WAIT: Duration = Duration::from_secs(10);
const CONNECT_TIMEOUT: Duration = Duration::from_secs(5);
/// Tries of a write whose connection broke before its commit was sent.
const WRITE_TRIES: u32 = 2;

/// Whether `s` names a PostgreSQL server rather than a SQLite file.
pub fn is_url(s: &str) -> bool {
    s.starts_with("postgres://") || s.starts_with("postgresql://")
}

/// An open PostgreSQL store.
pub struct PgStore {
    /// `postgres://user@host:port/db`, without the password: for messages.
    shown: String,
    pool: Pool,
    /// Taken apart by hand in `Drop`.
    rt: ManuallyDrop<PgRuntime>,
    /// the connection that hears of new outbox items (started by the first [`PgStore::on_notify`])
    listener: listen::Listener,
    /// the connection that renews leases outside the write lock (made by the first renewal)
    lease: lease::LeaseConn,
}

impl Drop for PgStore {
    fn drop(&mut self) {
        self.pool.close();
        self.listener.stop();
        // The store may be dropped on an async task: a runtime cannot block there, so its
        // threads are told to stop and left to do so.
        // SAFETY: `rt` is taken once, here, and never used after.
        let rt = unsafe { ManuallyDrop::take(&mut self.rt) };
        rt.0.shutdown_background();
    }
}

impl PgStore {
    /// Connects to the server `url` names (checking that it answers), and brings the schema up
    /// to date. A URL that does not parse, a server that cannot be reached, or a schema holding
    /// tables of the same names that are not ours is a `STORE_ERROR` naming the server.
    pub fn open(url: &str) -> Result<PgStore> {
        let parsed = ParsedUrl::parse(url)?;
        let mut config = tokio_postgres::Config::from_str(&parsed.url)
            .map_err(|e| Error::store(format!("cannot open the store: the PostgreSQL URL does not parse: {e}")))?;
        if config.get_connect_timeout().is_none() {
            config.connect_timeout(CONNECT_TIMEOUT);
        }
        if let Some(schema) = &parsed.schema {
            let options = match config.get_options() {
                Some(o) => format!("{o} -c search_path={schema}"),
                None => format!("-c search_path={schema}"),
            };
            config.options(options);
        }
        if config.get_application_name().is_none() {
            config.application_name("session-tools");
        }
        let shown = show(&config);
        let tls = tls::connector(parsed.root_cert.as_deref()).map_err(|e| open_error(&shown, e))?;
        let listener = listen::Listener::new(config.clone(), tls.clone());
        let lease = lease::LeaseConn::new(config.clone(), tls.clone());
        let manager = Manager::from_config(config, tls, ManagerConfig { recycling_method: RecyclingMethod::Fast });
        let rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .thread_name("session-tools-pg")
            .enable_all()
            .build()
            .map_err(|e| open_error(&shown, e))?;
        let pool = Pool::builder(manager)
            .max_size(parsed.pool_size)
            .runtime(deadpool_postgres::Runtime::Tokio1)
            .wait_timeout(Some(POOL_WAIT))
            .create_timeout(Some(POOL_WAIT))
            .recycle_timeout(Some(POOL_WAIT))
            .build()
            .map_err(|e| open_error(&shown, e))?;
        let store = PgStore { shown, pool, rt: ManuallyDrop::new(PgRuntime(rt)), listener, lease };
        store.migrate(parsed.schema.as_deref())?;
        Ok(store)
    }

    /// `postgres://user@host:port/db`, without the password.
    pub fn shown(&self) -> &str {
        &self.shown
    }

    /// Closes the pool: connections in use close when they are returned; afterwards every call
    /// fails.
    pub fn close(&self) {
        self.listener.stop();
        self.lease.close();
        self.pool.close();
    }

    /// Renews `owner_id`'s lease to `length_ms` from the server's now, without the write lock
    /// and outside the pool (see `lease`); `false` when the owner has no row.
    pub fn renew_owner(&self, owner_id: &str, length_ms: i64) -> Result<bool> {
        if self.pool.is_closed() {
            return Err(Error::closed());
        }
        self.rt
            .block_on(self.lease.renew(owner_id, length_ms))
            .map_err(|why| Error::store(format!("cannot renew the lease at {}: {why}", self.shown)))
    }

    /// Calls `waker` whenever an outbox item is recorded in this store's schema, by any process
    /// (see `listen`).
    pub fn on_notify(&self, waker: Waker) {
        self.listener.add(&self.rt.0, waker);
    }

    pub fn is_closed(&self) -> bool {
        self.pool.is_closed()
    }

    fn client(&self) -> Result<deadpool_postgres::Client> {
        if self.pool.is_closed() {
            return Err(Error::closed());
        }
        self.rt.block_on(self.pool.get()).map_err(|e| match e {
            deadpool_postgres::PoolError::Closed => Error::closed(),
            e => Error::store(format!("cannot reach PostgreSQL at {}: {}", self.shown, with_causes(&e))),
        })
    }

    /// Runs `f` in one write transaction (holding the write lock), committed when `f` returns
    /// `Ok`, rolled back otherwise. Inside a group-commit batch on this thread, use
    /// [`write_then`](Self::write_then) (see `batch`).
    pub fn write<T>(&self, mut f: impl FnMut(&Db<'_>) -> Result<T>) -> Result<T> {
        let mut attempt = 0;
        loop {
            attempt += 1;
            let conn = self.conn()?;
            let tx = PgTx::new(&conn, Begin::Write);
            let out = f(&Db::pg(&tx));
            match out {
                Ok(v) => return tx.commit().map(|()| v),
                Err(e) => {
                    if !(tx.broken() && attempt < WRITE_TRIES) {
                        return Err(e);
                    }
                }
            }
        }
    }

    /// Runs `f` in one read-only snapshot (inside a batch on this thread: in the batch's
    /// transaction).
    pub fn read<T>(&self, f: impl FnOnce(&Db<'_>) -> Result<T>) -> Result<T> {
        if self.in_batch() {
            return self.read_in_batch(f);
        }
        let conn = self.conn()?;
        let tx = PgTx::new(&conn, Begin::Read);
        f(&Db::pg(&tx))
    }

    /// Checks that the schema is empty or ours and runs the migrations it lacks, under the
    /// migration lock.
    fn migrate(&self, schema: Option<&str>) -> Result<()> {
        let mut client = self.client().map_err(|e| open_error(&self.shown, e.message()))?;
        let tx = self.rt.block_on(client.transaction()).map_err(|e| open_error(&self.shown, describe(&e)))?;
        let run = |sql: &str, args: &[&(dyn ToSql + Sync)]| -> Result<Vec<tokio_postgres::Row>> {
            self.rt.block_on(tx.query(sql, args)).map_err(|e| open_error(&self.shown, describe(&e)))
        };
        run("SELECT pg_advisory_xact_lock($1)", &[&MIGRATE_LOCK])?;
        if let Some(schema) = schema {
            // The name was checked to be a plain identifier (ParsedUrl::parse).
            self.rt
                .block_on(tx.batch_execute(&format!("CREATE SCHEMA IF NOT EXISTS {schema}")))
                .map_err(|e| open_error(&self.shown, describe(&e)))?;
        }
        let ours = run("SELECT to_regclass('session_tools_meta') IS NOT NULL", &[])?
            .first()
            .map(|r| r.get::<_, bool>(0))
            .unwrap_or(false);
        let version: i64 = if ours {
            run("SELECT value FROM session_tools_meta WHERE key = 'schema_version'", &[])?
                .first()
                .and_then(|r| r.get::<_, String>(0).parse().ok())
                .unwrap_or(0)
        } else {
            let names: Vec<String> = schema::TABLES.iter().map(|t| (*t).to_owned()).collect();
            let clash = run(
                "SELECT count(*) FROM information_schema.tables WHERE table_schema = current_schema() AND table_name = ANY($1)",
                &[&names],
            )?
            .first()
            .map(|r| r.get::<_, i64>(0))
            .unwrap_or(0);
            if clash > 0 {
                return Err(open_error(&self.shown, "its schema holds tables that are not a session-tools store"));
            }
            0
        };
        if version > schema::LATEST {
            return Err(open_error(
                &self.shown,
                format!(
                    "it was written by a newer session-tools (schema {version}, this build knows {})",
                    schema::LATEST
                ),
            ));
        }
        for (i, sql) in schema::MIGRATIONS.iter().enumerate().skip(version.max(0) as usize) {
            self.rt
                .block_on(tx.batch_execute(sql))
                .map_err(|e| open_error(&self.shown, format!("migration {} failed: {}", i + 1, describe(&e))))?;
        }
        if version < schema::LATEST {
            run(
                "INSERT INTO session_tools_meta (key, value) VALUES ('schema_version', $1)
                 ON CONFLICT (key) DO UPDATE SET value = excluded.value",
                &[&schema::LATEST.to_string()],
            )?;
        }
        self.rt.block_on(tx.commit()).map_err(|e| open_error(&self.shown, describe(&e)))
    }
}

/// A URL with our own parameters taken out (`pool_max_size`, `sslrootcert`, `schema`) and the `sslmode`s
/// the client does not name (`verify-ca`, `verify-full`: certificates are always verified)
/// mapped to `require`.
struct ParsedUrl {
    url: String,
    pool_size: usize,
    root_cert: Option<String>,
    /// `schema=…`: the PostgreSQL schema the store's tables live in (created when missing)
    schema: Option<String>,
}

impl ParsedUrl {
    fn parse(url: &str) -> Result<ParsedUrl> {
        let bad = |why: String| Error::store(format!("cannot open the store: the PostgreSQL URL {why}"));
        let (base, query) = match url.split_once('?') {
            Some((b, q)) => (b, q),
            None => (url, ""),
        };
        let mut kept = Vec::new();
        let mut pool_size = DEFAULT_POOL_SIZE;
        let mut root_cert = None;
        let mut schema = None;
        for pair in query.split('&').filter(|p| !p.is_empty()) {
            let (k, v) = pair.split_once('=').unwrap_or((pair, ""));
            match k {
                "pool_max_size" => {
                    pool_size = v.parse::<usize>().ok().filter(|n| (1..=1000).contains(n)).ok_or_else(|| {
                        bad(format!("has pool_max_size={v}: it must be a whole number from 1 to 1000"))
                    })?;
                }
                "sslrootcert" => root_cert = Some(percent_decode(v)),
                "schema" => {
                    let ok = v.len() <= 63
                        && v.bytes().next().is_some_and(|c| c.is_ascii_lowercase() || c == b'_')
                        && v.bytes().all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == b'_');
                    if !ok {
                        return Err(bad(format!(
                            "has schema={v}: a schema name is 1 to 63 lower-case letters, digits and _, not starting with a digit"
                        )));
                    }
                    schema = Some(v.to_owned());
                }
                "sslmode" if v == "verify-ca" || v == "verify-full" => kept.push("sslmode=require".to_owned()),
                _ => kept.push(pair.to_owned()),
            }
        }
        let url = if kept.is_empty() { base.to_owned() } else { format!("{base}?{}", kept.join("&")) };
        Ok(ParsedUrl { url, pool_size, root_cert, schema })
    }
}

fn percent_decode(s: &str) -> String {
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        if b[i] == b'%' && i + 2 < b.len() {
            if let Ok(v) = u8::from_str_radix(&s[i + 1..i + 3], 16) {
                out.push(v);
                i += 3;
                continue;
            }
        }
        out.push(b[i]);
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

fn show(c: &tokio_postgres::Config) -> String {
    let host = match c.get_hosts().first() {
        Some(tokio_postgres::config::Host::Tcp(h)) => h.clone(),
        Some(tokio_postgres::config::Host::Unix(p)) => p.display().to_string(),
        None => "localhost".to_owned(),
    };
    let port = c.get_ports().first().copied().unwrap_or(5432);
    format!("postgres://{}@{host}:{port}/{}", c.get_user().unwrap_or(""), c.get_dbname().unwrap_or(""))
}

pub(super) fn describe(e: &tokio_postgres::Error) -> String {
    match e.as_db_error() {
        Some(db) => format!("{} ({})", db.message(), db.code().code()),
        None => with_causes(e),
    }
}

/// An error and the chain of errors under it ("error performing TLS handshake: invalid peer
/// certificate: UnknownIssuer"), each said once.
fn with_causes(e: &dyn std::error::Error) -> String {
    let mut out = e.to_string();
    let mut next = e.source();
    while let Some(cause) = next {
        let text = cause.to_string();
        if !out.contains(&text) {
            out.push_str(": ");
            out.push_str(&text);
        }
        next = cause.source();
    }
    out
}

fn open_error(shown: &str, why: impl std::fmt::Display) -> Error {
    Error::store(format!("cannot open the store at {shown}: {why}"))
}
