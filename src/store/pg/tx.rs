//! One transaction on one pooled PostgreSQL connection, in as few round trips as the protocol
//! allows.
//!
//! Nothing is sent when a transaction starts: its opening text (`BEGIN`, for a write the
//! advisory write lock, and a read of the server's clock) waits and goes out in the same round
//! trip as its first statement, pipelined ahead of it on the connection; the server runs them in
//! order, so the statement runs inside the transaction, after the lock. Savepoint text of the
//! group-commit batch waits the same way. A transaction that never ran a statement sends
//! nothing, not even its end. The server's clock, read once at the start, gives the transaction's
//! `now` without another round trip (its reading plus the time elapsed here since: never ahead of
//! the server's clock). A statement that failed leaves the transaction unable to commit (the
//! server has aborted it) until the savepoint around it is rolled back, and a commit is then
//! refused rather than reported done. A connection handed back with its transaction still open
//! (a read's end, an error, a panic) is rolled back in the background before the pool sees it
//! again. Rows of a query may be streamed in bounded chunks. This module never decides what a
//! statement says.

use std::future::Future;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Mutex, OnceLock};
use std::time::Instant;

use futures_util::StreamExt;
use tokio_postgres::types::{ToSql, Type};
use tokio_postgres::SimpleQueryMessage;

use super::blocking::PgRuntime;
use super::{describe, dialect, PgStore, WRITE_LOCK};
use crate::error::{Error, Result};
use crate::store::value::Arg;

/// The server's time in ms since the epoch.
const SERVER_NOW: &str = "SELECT CAST(floor(extract(epoch from clock_timestamp()) * 1000) AS BIGINT)";
/// Rows of a streamed query held here at once.
pub(super) const STREAM_CHUNK: usize = 256;

/// What a transaction opens with.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum Begin {
    /// `READ COMMITTED`, holding the write lock until its end
    Write,
    /// a `REPEATABLE READ READ ONLY` snapshot, no lock
    Read,
}

impl Begin {
    fn text(self) -> &'static str {
        static WRITE: OnceLock<String> = OnceLock::new();
        static READ: OnceLock<String> = OnceLock::new();
        match self {
            Begin::Write => {
                WRITE.get_or_init(|| format!("BEGIN; SELECT pg_advisory_xact_lock({WRITE_LOCK}); {SERVER_NOW};"))
            }
            Begin::Read => {
                READ.get_or_init(|| format!("BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY; {SERVER_NOW};"))
            }
        }
    }
}

/// A connection taken from the pool; when dropped with a transaction open, the transaction is
/// rolled back in the background and the connection goes back to the pool after that (or is
/// closed, when even that fails).
pub struct PgConn<'s> {
    obj: Option<deadpool_postgres::Client>,
    rt: &'s PgRuntime,
    /// a `BEGIN` was sent and no end of it has been confirmed
    in_tx: AtomicBool,
}

impl<'s> PgConn<'s> {
    pub(super) fn new(obj: deadpool_postgres::Client, rt: &'s PgRuntime) -> PgConn<'s> {
        PgConn { obj: Some(obj), rt, in_tx: AtomicBool::new(false) }
    }

    fn client(&self) -> &deadpool_postgres::ClientWrapper {
        // Only `Drop` takes it.
        self.obj.as_deref().unwrap_or_else(|| unreachable!("a connection used after it was handed back"))
    }
}

impl Drop for PgConn<'_> {
    fn drop(&mut self) {
        let Some(obj) = self.obj.take() else { return };
        if *self.in_tx.get_mut() {
            drop(self.rt.0.spawn(async move {
                if obj.batch_execute("ROLLBACK").await.is_err() {
                    // never back into the pool in an unknown state
                    drop(deadpool_postgres::Object::take(obj));
                }
            }));
        }
    }
}

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum State {
    /// no transaction
    Idle,
    /// begun here, its opening text not sent yet
    Pending,
    /// its opening text was sent
    Open,
}

/// A statement ready to send: its rewritten text, its parameters' types, and its arguments in
/// `$n` order.
type Bound<'a> = (std::sync::Arc<dialect::Rewritten>, Vec<Type>, Vec<&'a (dyn ToSql + Sync)>);

/// One transaction at a time on a connection (see the module header).
pub struct PgTx<'c> {
    conn: &'c PgConn<'c>,
    begin: Begin,
    state: Mutex<State>,
    /// simple-query text sent ahead of the next statement (opening text, savepoint steps)
    pending: Mutex<String>,
    /// the server's clock read when the transaction opened, and when here it was read
    clock: Mutex<Option<(i64, Instant)>>,
    /// a statement found the connection closed
    broken: AtomicBool,
    /// why the server aborted the transaction (a statement failed), until rolled back
    failed: Mutex<Option<String>>,
    /// rows of a query are being read: no other statement can go before they are all in
    streaming: AtomicBool,
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

impl<'c> PgTx<'c> {
    /// A transaction on `conn`, opened lazily with `begin` (see the module header).
    pub fn new(conn: &'c PgConn<'c>, begin: Begin) -> PgTx<'c> {
        let tx = PgTx {
            conn,
            begin,
            state: Mutex::new(State::Idle),
            pending: Mutex::new(String::new()),
            clock: Mutex::new(None),
            broken: AtomicBool::new(false),
            failed: Mutex::new(None),
            streaming: AtomicBool::new(false),
        };
        tx.start();
        tx
    }

    pub(super) fn rt(&self) -> &'c PgRuntime {
        self.conn.rt
    }

    /// Opens the next transaction (lazily), if none is.
    fn start(&self) {
        let mut state = lock(&self.state);
        if *state == State::Idle {
            *state = State::Pending;
            lock(&self.pending).insert_str(0, self.begin.text());
        }
    }

    pub fn broken(&self) -> bool {
        self.broken.load(Ordering::Relaxed)
    }

    /// Why the transaction cannot commit, when a statement in it failed.
    pub fn failed(&self) -> Option<String> {
        lock(&self.failed).clone()
    }

    /// Runs `fut` (statements on this connection) in one round trip with the text waiting to go
    /// ahead of it; a failure of either is this call's error.
    pub(super) fn round<T, F>(&self, fut: F) -> Result<T>
    where
        T: Send,
        F: Future<Output = std::result::Result<T, tokio_postgres::Error>> + Send,
    {
        if self.streaming.load(Ordering::Relaxed) {
            return Err(Error::store("internal error: a statement was run while the rows of another were being read"));
        }
        self.start();
        let text = std::mem::take(&mut *lock(&self.pending));
        if text.is_empty() {
            return self.rt().block_on(fut).map_err(|e| self.fail(e));
        }
        let opening = {
            let mut state = lock(&self.state);
            let opening = *state == State::Pending;
            *state = State::Open;
            opening
        };
        if opening {
            self.conn.in_tx.store(true, Ordering::Relaxed);
        }
        let client = self.conn.client();
        let (pre, out) = self.rt().block_on(futures_util::future::join(client.simple_query(&text), fut));
        let read_at = Instant::now();
        match pre {
            Err(e) => Err(self.fail(e)),
            Ok(msgs) => {
                if opening {
                    *lock(&self.clock) = clock_of(&msgs).map(|ms| (ms, read_at));
                }
                out.map_err(|e| self.fail(e))
            }
        }
    }

    /// Sends what is waiting (the opening text at least), with no statement.
    fn flush(&self) -> Result<()> {
        self.round(async { Ok(()) })
    }

    /// The server's clock now, as this transaction reads it (see the module header).
    pub fn server_now(&self) -> Result<i64> {
        if let Some(ms) = self.clock_now() {
            return Ok(ms);
        }
        self.flush()?;
        self.clock_now().ok_or_else(|| Error::store("PostgreSQL did not tell its clock"))
    }

    fn clock_now(&self) -> Option<i64> {
        if *lock(&self.state) != State::Open {
            return None;
        }
        lock(&self.clock).map(|(ms, at)| ms.saturating_add(i64::try_from(at.elapsed().as_millis()).unwrap_or(0)))
    }

    pub(super) fn fail(&self, e: tokio_postgres::Error) -> Error {
        // closed, cut off, or ended by the server (a FATAL error ends the session, and with it
        // the transaction: nothing of it was committed)
        let ended = e.as_db_error().is_some_and(|db| matches!(db.severity(), "FATAL" | "PANIC"));
        if e.is_closed() || ended || e.as_db_error().is_none() && e.code().is_none() {
            self.broken.store(true, Ordering::Relaxed);
        }
        let why = describe(&e);
        if *lock(&self.state) == State::Open {
            lock(&self.failed).get_or_insert_with(|| why.clone());
        }
        Error::store(format!("postgres: {why}"))
    }

    /// A savepoint around what follows (sent with the next statement).
    pub fn savepoint(&self) {
        self.start();
        lock(&self.pending).push_str("SAVEPOINT job;");
    }

    /// Keeps what ran since [`savepoint`](Self::savepoint).
    pub fn release(&self) {
        let mut pending = lock(&self.pending);
        // nothing ran in it: neither is sent
        if !unsend_savepoint(&mut pending) {
            pending.push_str("RELEASE SAVEPOINT job;");
        }
    }

    /// Undoes what ran since [`savepoint`](Self::savepoint); the transaction can commit again.
    pub fn rollback_to(&self) {
        let mut pending = lock(&self.pending);
        if !unsend_savepoint(&mut pending) {
            pending.push_str("ROLLBACK TO SAVEPOINT job; RELEASE SAVEPOINT job;");
        }
        lock(&self.failed).take();
    }

    /// Commits, in one round trip with what is waiting; nothing is sent when no statement ran.
    /// A transaction a failed statement aborted is not committed: its error says why. Either
    /// way the next statement opens a new transaction.
    pub fn commit(&self) -> Result<()> {
        if let Some(why) = self.failed() {
            return Err(Error::store(format!("the write was rolled back: a statement in it failed: {why}")));
        }
        let mut state = lock(&self.state);
        let mut pending = lock(&self.pending);
        let was = std::mem::replace(&mut *state, State::Idle);
        let text = std::mem::take(&mut *pending);
        drop((state, pending));
        if was != State::Open {
            return Ok(());
        }
        let text = format!("{text}COMMIT");
        self.rt()
            .block_on(self.conn.client().batch_execute(&text))
            .map_err(|e| Error::store(format!("postgres: the commit failed: {}", describe(&e))))?;
        self.conn.in_tx.store(false, Ordering::Relaxed);
        Ok(())
    }

    /// The statement rewritten, the arguments' types, and the arguments in `$n` order.
    fn bind<'a>(&self, sql: &'static str, args: &'a [Arg<'a>], names: &[&str]) -> Result<Bound<'a>> {
        let rw = dialect::rewrite(sql);
        let ordered: Vec<&Arg<'_>> = if rw.names.is_empty() {
            args.iter().collect()
        } else {
            rw.names
                .iter()
                .map(|n| {
                    names.iter().position(|x| x == n).and_then(|i| args.get(i)).ok_or_else(|| {
                        Error::store(format!("internal error: the statement names {n} but nothing is bound to it"))
                    })
                })
                .collect::<Result<_>>()?
        };
        let types: Vec<Type> = ordered.iter().map(|a| a.ty().pg()).collect();
        let params = ordered.into_iter().map(|a| a as &(dyn ToSql + Sync)).collect();
        Ok((rw, types, params))
    }

    /// Every row of a query (prepared once per connection, with the arguments' types).
    pub(crate) fn query(
        &self,
        sql: &'static str,
        args: &[Arg<'_>],
        names: &[&str],
    ) -> Result<Vec<tokio_postgres::Row>> {
        let (rw, types, params) = self.bind(sql, args, names)?;
        let client = self.conn.client();
        self.round(async {
            let st = client.prepare_typed_cached(&rw.text, &types).await?;
            client.query(&st, &params).await
        })
    }

    /// Runs a statement; how many rows it changed.
    pub(crate) fn execute(&self, sql: &'static str, args: &[Arg<'_>], names: &[&str]) -> Result<usize> {
        let (rw, types, params) = self.bind(sql, args, names)?;
        let client = self.conn.client();
        let n = self.round(async {
            let st = client.prepare_typed_cached(&rw.text, &types).await?;
            client.execute(&st, &params).await
        })?;
        Ok(usize::try_from(n).unwrap_or(usize::MAX))
    }

    /// Calls `f` on each row of a query, in order, until it answers `false`; the rows come from
    /// the server [`STREAM_CHUNK`] at a time, so a large result is never held whole.
    pub(crate) fn each(
        &self,
        sql: &'static str,
        args: &[Arg<'_>],
        mut f: impl FnMut(&tokio_postgres::Row) -> Result<bool>,
    ) -> Result<()> {
        let (rw, types, params) = self.bind(sql, args, &[])?;
        let client = self.conn.client();
        let (mut stream, mut chunk) = self.round(async {
            let st = client.prepare_typed_cached(&rw.text, &types).await?;
            let mut stream = Box::pin(client.query_raw(&st, params.iter().copied()).await?);
            let chunk = next_chunk(stream.as_mut()).await?;
            Ok((stream, chunk))
        })?;
        if chunk.len() < STREAM_CHUNK {
            // all in: `f` may run statements of its own
            drop(stream);
            for row in &chunk {
                if !f(row)? {
                    break;
                }
            }
            return Ok(());
        }
        self.streaming.store(true, Ordering::Relaxed);
        let _done = Streaming(&self.streaming);
        loop {
            let last = chunk.len() < STREAM_CHUNK;
            for row in &chunk {
                if !f(row)? {
                    return Ok(());
                }
            }
            if last {
                return Ok(());
            }
            chunk = self.rt().block_on(next_chunk(stream.as_mut())).map_err(|e| self.fail(e))?;
        }
    }

    /// Runs `fut` with this transaction's connection, after what is waiting (for `COPY`).
    pub(super) fn with_client<T, F>(&self, fut: impl FnOnce(&'c deadpool_postgres::ClientWrapper) -> F) -> Result<T>
    where
        T: Send,
        F: Future<Output = std::result::Result<T, tokio_postgres::Error>> + Send,
    {
        self.round(fut(self.conn.client()))
    }
}

/// Clears the streaming mark however the reading ends.
struct Streaming<'a>(&'a AtomicBool);

impl Drop for Streaming<'_> {
    fn drop(&mut self) {
        self.0.store(false, Ordering::Relaxed);
    }
}

async fn next_chunk(
    mut stream: std::pin::Pin<&mut tokio_postgres::RowStream>,
) -> std::result::Result<Vec<tokio_postgres::Row>, tokio_postgres::Error> {
    let mut chunk = Vec::with_capacity(STREAM_CHUNK);
    while chunk.len() < STREAM_CHUNK {
        match stream.next().await {
            Some(row) => chunk.push(row?),
            None => break,
        }
    }
    Ok(chunk)
}

/// Takes back a `SAVEPOINT` not sent yet, the last statement waiting; whether there was one.
fn unsend_savepoint(pending: &mut String) -> bool {
    const SP: &str = "SAVEPOINT job;";
    let whole = pending.strip_suffix(SP).is_some_and(|rest| rest.is_empty() || rest.ends_with(';'));
    if whole {
        pending.truncate(pending.len() - SP.len());
    }
    whole
}

/// The clock reading of an opening text: its last row's first value.
fn clock_of(msgs: &[SimpleQueryMessage]) -> Option<i64> {
    msgs.iter().rev().find_map(|m| match m {
        SimpleQueryMessage::Row(r) => r.get(0).and_then(|v| v.parse().ok()),
        _ => None,
    })
}

impl PgStore {
    /// A connection from the pool (see [`PgConn`]).
    pub(super) fn conn(&self) -> Result<PgConn<'_>> {
        Ok(PgConn::new(self.client()?, &self.rt))
    }
}
