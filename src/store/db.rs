//! [`Db`]: the handle one read or one write transaction gives the store's modules, with one
//! statement API for both backends (SQLite and PostgreSQL).
//!
//! Every statement is constant text written once, in the dialect both servers understand:
//! positional parameters `?1 …` or named ones `:name`, `ON CONFLICT … DO …` upserts, no
//! SQLite-only functions but `instr` and `rowid` (the PostgreSQL schema provides both). On
//! SQLite the text runs as is through the connection's statement cache; on PostgreSQL it is
//! rewritten once (`pg::dialect`) and prepared once per pooled connection, with the parameter
//! types taken from the arguments. Where the two need different text, a module picks it with
//! [`Db::dialect`]. This module runs statements; it never decides what they say.

use rusqlite::Connection;

use super::pg::PgTx;
use super::value::{Arg, Row, ToArg, Ty};
use crate::error::{Error, Result};

/// From this many rows on, [`Db::insert_rows`] sends them to PostgreSQL with one `COPY` (which
/// costs about three round trips) rather than one `INSERT` each.
const COPY_FROM_ROWS: usize = 4;

/// Which SQL the database speaks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Dialect {
    Sqlite,
    Postgres,
}

#[derive(Clone, Copy)]
enum Conn<'c> {
    Lite(&'c Connection),
    Pg(&'c PgTx<'c>),
}

/// A handle on the open database, for the statements of one read or one transaction.
pub struct Db<'c> {
    conn: Conn<'c>,
}

impl<'c> Db<'c> {
    pub(super) fn new(conn: &'c Connection) -> Self {
        Db { conn: Conn::Lite(conn) }
    }

    pub(super) fn pg(tx: &'c PgTx<'c>) -> Self {
        Db { conn: Conn::Pg(tx) }
    }

    pub fn dialect(&self) -> Dialect {
        match self.conn {
            Conn::Lite(_) => Dialect::Sqlite,
            Conn::Pg(_) => Dialect::Postgres,
        }
    }

    /// The SQLite connection, for what only SQLite has (`PRAGMA`s, the WAL); on PostgreSQL a
    /// `STORE_ERROR` naming `what`.
    pub(super) fn lite(&self, what: &str) -> Result<&'c Connection> {
        match self.conn {
            Conn::Lite(c) => Ok(c),
            Conn::Pg(_) => Err(Error::store(format!("{what} is not available on a PostgreSQL store"))),
        }
    }

    /// Runs a statement that returns no rows; the number of rows it changed.
    pub fn exec(&self, sql: &'static str, args: &[&dyn ToArg]) -> Result<usize> {
        let args = to_args(args);
        match self.conn {
            Conn::Lite(c) => {
                let mut st = c.prepare_cached(sql).map_err(super::sql)?;
                st.execute(rusqlite::params_from_iter(args.iter())).map_err(super::sql)
            }
            Conn::Pg(tx) => tx.execute(sql, &args, &[]),
        }
    }

    /// As [`exec`](Self::exec), with named arguments.
    pub fn exec_named(&self, sql: &'static str, args: &[(&str, &dyn ToArg)]) -> Result<usize> {
        let (names, args) = to_named(args);
        match self.conn {
            Conn::Lite(c) => {
                let mut st = c.prepare_cached(sql).map_err(super::sql)?;
                st.execute(lite_named(&names, &args).as_slice()).map_err(super::sql)
            }
            Conn::Pg(tx) => tx.execute(sql, &args, &names),
        }
    }

    /// The first row of a query, read by `f`; `None` when there is none.
    pub fn row<T>(
        &self,
        sql: &'static str,
        args: &[&dyn ToArg],
        f: impl FnOnce(&Row<'_>) -> Result<T>,
    ) -> Result<Option<T>> {
        let mut f = Some(f);
        let mut out = None;
        self.each(sql, args, |r| {
            if let Some(f) = f.take() {
                out = Some(f(r)?);
            }
            Ok(false)
        })?;
        Ok(out)
    }

    /// Every row of a query, each read by `f`.
    pub fn rows<T>(
        &self,
        sql: &'static str,
        args: &[&dyn ToArg],
        mut f: impl FnMut(&Row<'_>) -> Result<T>,
    ) -> Result<Vec<T>> {
        let mut out = Vec::new();
        self.each(sql, args, |r| {
            out.push(f(r)?);
            Ok(true)
        })?;
        Ok(out)
    }

    /// As [`rows`](Self::rows), with named arguments.
    pub fn rows_named<T>(
        &self,
        sql: &'static str,
        args: &[(&str, &dyn ToArg)],
        mut f: impl FnMut(&Row<'_>) -> Result<T>,
    ) -> Result<Vec<T>> {
        let mut out = Vec::new();
        self.each_named(sql, args, |r| {
            out.push(f(r)?);
            Ok(true)
        })?;
        Ok(out)
    }

    /// As [`each`](Self::each), with named arguments (on PostgreSQL the rows come whole).
    pub fn each_named(
        &self,
        sql: &'static str,
        args: &[(&str, &dyn ToArg)],
        mut f: impl FnMut(&Row<'_>) -> Result<bool>,
    ) -> Result<()> {
        let (names, args) = to_named(args);
        match self.conn {
            Conn::Lite(c) => {
                let mut st = c.prepare_cached(sql).map_err(super::sql)?;
                let mut rows = st.query(lite_named(&names, &args).as_slice()).map_err(super::sql)?;
                while let Some(r) = rows.next().map_err(super::sql)? {
                    if !f(&Row::Lite(r))? {
                        break;
                    }
                }
            }
            Conn::Pg(tx) => {
                for r in tx.query(sql, &args, &names)? {
                    if !f(&Row::Pg(&r))? {
                        break;
                    }
                }
            }
        }
        Ok(())
    }

    /// Calls `f` on each row of a query, in order, until it answers `false`. On PostgreSQL a
    /// large result comes in bounded chunks (never held whole), and `f` must not run statements
    /// of its own while it does (that is refused with an internal error).
    pub fn each(
        &self,
        sql: &'static str,
        args: &[&dyn ToArg],
        mut f: impl FnMut(&Row<'_>) -> Result<bool>,
    ) -> Result<()> {
        let args = to_args(args);
        match self.conn {
            Conn::Lite(c) => {
                let mut st = c.prepare_cached(sql).map_err(super::sql)?;
                let mut rows = st.query(rusqlite::params_from_iter(args.iter())).map_err(super::sql)?;
                while let Some(r) = rows.next().map_err(super::sql)? {
                    if !f(&Row::Lite(r))? {
                        break;
                    }
                }
            }
            Conn::Pg(tx) => tx.each(sql, &args, |r| f(&Row::Pg(r)))?,
        }
        Ok(())
    }

    /// Adds many rows to one table: `args` holds `types.len()` values a row, in column order.
    /// `insert` (an `INSERT … VALUES (?1, …)` of one row) runs once per row: on SQLite always
    /// (in-process, cheap), on PostgreSQL for a few rows (a round trip each); more rows go to
    /// PostgreSQL with `copy` (`COPY t (…) FROM STDIN (FORMAT binary)` naming the same columns)
    /// in one stream. How many rows were added.
    pub fn insert_rows(&self, insert: &'static str, copy: &'static str, types: &[Ty], args: &[Arg<'_>]) -> Result<u64> {
        let rows = args.chunks(types.len().max(1));
        match self.conn {
            Conn::Lite(c) => {
                let mut st = c.prepare_cached(insert).map_err(super::sql)?;
                let mut n = 0u64;
                for row in rows {
                    n += st.execute(rusqlite::params_from_iter(row.iter())).map_err(super::sql)? as u64;
                }
                Ok(n)
            }
            Conn::Pg(tx) if rows.len() < COPY_FROM_ROWS => {
                let mut n = 0u64;
                for row in rows {
                    n += tx.execute(insert, row, &[])? as u64;
                }
                Ok(n)
            }
            Conn::Pg(tx) => tx.copy_in(copy, types, args),
        }
    }

    /// The database server's clock (ms since the epoch) as this transaction reads it, on
    /// PostgreSQL; `None` on SQLite.
    pub(super) fn server_clock_ms(&self) -> Result<Option<i64>> {
        match self.conn {
            Conn::Lite(_) => Ok(None),
            Conn::Pg(tx) => tx.server_now().map(Some),
        }
    }

    /// The integer in the first column of the first row (a `count(*)`), never below 0; 0 when
    /// there is no row or it is NULL.
    pub fn count(&self, sql: &'static str, args: &[&dyn ToArg]) -> Result<u64> {
        let n = self.row(sql, args, |r| r.get::<Option<i64>>(0))?.flatten().unwrap_or(0);
        Ok(n.max(0) as u64)
    }
}

fn to_args<'a>(args: &'a [&'a dyn ToArg]) -> Vec<Arg<'a>> {
    args.iter().map(|a| a.to_arg()).collect()
}

fn to_named<'a>(args: &'a [(&'a str, &'a dyn ToArg)]) -> (Vec<&'a str>, Vec<Arg<'a>>) {
    args.iter().map(|(n, a)| (*n, a.to_arg())).unzip()
}

fn lite_named<'a>(names: &[&'a str], args: &'a [Arg<'a>]) -> Vec<(&'a str, &'a dyn rusqlite::ToSql)> {
    names.iter().zip(args.iter()).map(|(n, a)| (*n, a as &dyn rusqlite::ToSql)).collect()
}

impl<'c> Db<'c> {
    /// The SQLite connection, for the statements of modules not yet written for both
    /// backends; on PostgreSQL a `STORE_ERROR`.
    pub(super) fn conn(&self) -> Result<&'c Connection> {
        self.lite("this operation")
    }
}
