//! The values that cross a statement's boundary, for either backend: what the store's modules
//! bind ([`Arg`], made with [`args!`](crate::args) or [`named!`](crate::named)) and what they
//! read back from a result row ([`Row::get`]).
//!
//! One set of Rust types for both databases: an argument knows its SQL type even when it is
//! NULL (PostgreSQL prepares a statement with typed parameters; SQLite ignores the type), and
//! reading a column converts between the integer widths and booleans the two servers answer
//! with (`count(*)` is 64-bit on both, `length()` is 32-bit on PostgreSQL, a flag column is an
//! integer on SQLite). This module never builds SQL and never decides what a value means.

use bytes::BytesMut;
use tokio_postgres::types::{to_sql_checked, IsNull, ToSql, Type};

use crate::error::{Error, Result};

/// The SQL type of an argument, kept when it is NULL.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Ty {
    Int,
    Real,
    Text,
    Blob,
    Bool,
}

impl Ty {
    pub(crate) fn pg(self) -> Type {
        match self {
            Ty::Int => Type::INT8,
            Ty::Real => Type::FLOAT8,
            Ty::Text => Type::TEXT,
            Ty::Blob => Type::BYTEA,
            Ty::Bool => Type::BOOL,
        }
    }
}

/// One bound argument. A `Bool` is a predicate (`… OR :flag`); a flag stored in a column is
/// bound as an `Int` 0/1 so that both schemas keep it an integer.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Arg<'a> {
    Null(Ty),
    Int(i64),
    Real(f64),
    Text(&'a str),
    Blob(&'a [u8]),
    Bool(bool),
}

impl Arg<'_> {
    pub fn ty(&self) -> Ty {
        match self {
            Arg::Null(t) => *t,
            Arg::Int(_) => Ty::Int,
            Arg::Real(_) => Ty::Real,
            Arg::Text(_) => Ty::Text,
            Arg::Blob(_) => Ty::Blob,
            Arg::Bool(_) => Ty::Bool,
        }
    }
}

/// A Rust value that can be bound: integers, floats, strings, bytes, booleans, and `Option`s of
/// them (NULL of the inner type).
pub trait ToArg {
    fn to_arg(&self) -> Arg<'_>;
}

/// The SQL type of a Rust type, for the NULL of an `Option` of it.
pub trait Typed {
    const TY: Ty;
}

macro_rules! int_arg {
    ($($t:ty),*) => {$(
        impl ToArg for $t {
            fn to_arg(&self) -> Arg<'_> {
                Arg::Int(i64::try_from(*self).unwrap_or(i64::MAX))
            }
        }
        impl Typed for $t {
            const TY: Ty = Ty::Int;
        }
    )*};
}
int_arg!(i64, i32, u32, u64, usize, u8, u16, i16);

impl ToArg for f64 {
    fn to_arg(&self) -> Arg<'_> {
        Arg::Real(*self)
    }
}
impl Typed for f64 {
    const TY: Ty = Ty::Real;
}
impl ToArg for bool {
    fn to_arg(&self) -> Arg<'_> {
        Arg::Bool(*self)
    }
}
impl Typed for bool {
    const TY: Ty = Ty::Bool;
}
impl ToArg for str {
    fn to_arg(&self) -> Arg<'_> {
        Arg::Text(self)
    }
}
impl Typed for str {
    const TY: Ty = Ty::Text;
}
impl ToArg for String {
    fn to_arg(&self) -> Arg<'_> {
        Arg::Text(self)
    }
}
impl Typed for String {
    const TY: Ty = Ty::Text;
}
impl ToArg for [u8] {
    fn to_arg(&self) -> Arg<'_> {
        Arg::Blob(self)
    }
}
impl Typed for [u8] {
    const TY: Ty = Ty::Blob;
}
impl ToArg for Vec<u8> {
    fn to_arg(&self) -> Arg<'_> {
        Arg::Blob(self)
    }
}
impl Typed for Vec<u8> {
    const TY: Ty = Ty::Blob;
}
impl<T: ToArg + Typed + ?Sized> ToArg for &T {
    fn to_arg(&self) -> Arg<'_> {
        (**self).to_arg()
    }
}
impl<T: Typed + ?Sized> Typed for &T {
    const TY: Ty = T::TY;
}
impl<T: ToArg + Typed> ToArg for Option<T> {
    fn to_arg(&self) -> Arg<'_> {
        match self {
            Some(v) => v.to_arg(),
            None => Arg::Null(T::TY),
        }
    }
}
impl<T: Typed> Typed for Option<T> {
    const TY: Ty = T::TY;
}
impl ToArg for Arg<'_> {
    fn to_arg(&self) -> Arg<'_> {
        *self
    }
}

/// Positional arguments (`?1`, `?2`, … in the statement): `args![key, now, label]`.
#[macro_export]
macro_rules! args {
    () => { &[] as &[&dyn $crate::store::ToArg] };
    ($($e:expr),+ $(,)?) => { &[$(&$e as &dyn $crate::store::ToArg),+] as &[&dyn $crate::store::ToArg] };
}

/// Named arguments (`:name` in the statement): `named![":key" => key, ":limit" => n]`.
#[macro_export]
macro_rules! named {
    ($($n:literal => $e:expr),+ $(,)?) => {
        &[$(($n, &$e as &dyn $crate::store::ToArg)),+] as &[(&str, &dyn $crate::store::ToArg)]
    };
}

impl rusqlite::ToSql for Arg<'_> {
    fn to_sql(&self) -> rusqlite::Result<rusqlite::types::ToSqlOutput<'_>> {
        use rusqlite::types::{ToSqlOutput, ValueRef};
        Ok(ToSqlOutput::Borrowed(match self {
            Arg::Null(_) => ValueRef::Null,
            Arg::Int(i) => ValueRef::Integer(*i),
            Arg::Real(f) => ValueRef::Real(*f),
            Arg::Text(s) => ValueRef::Text(s.as_bytes()),
            Arg::Blob(b) => ValueRef::Blob(b),
            Arg::Bool(b) => ValueRef::Integer(i64::from(*b)),
        }))
    }
}

impl ToSql for Arg<'_> {
    fn to_sql(
        &self,
        ty: &Type,
        out: &mut BytesMut,
    ) -> std::result::Result<IsNull, Box<dyn std::error::Error + Sync + Send>> {
        match self {
            Arg::Null(_) => Ok(IsNull::Yes),
            Arg::Int(i) => match *ty {
                Type::INT4 => i32::try_from(*i)?.to_sql(ty, out),
                Type::INT2 => i16::try_from(*i)?.to_sql(ty, out),
                Type::FLOAT8 => (*i as f64).to_sql(ty, out),
                _ => i.to_sql(ty, out),
            },
            Arg::Real(f) => f.to_sql(ty, out),
            Arg::Text(s) => s.to_sql(ty, out),
            Arg::Blob(b) => b.to_sql(ty, out),
            Arg::Bool(b) => match *ty {
                Type::INT8 => i64::from(*b).to_sql(ty, out),
                _ => b.to_sql(ty, out),
            },
        }
    }

    fn accepts(_: &Type) -> bool {
        true
    }

    to_sql_checked!();
}

/// One result row, from either backend.
pub enum Row<'r> {
    Lite(&'r rusqlite::Row<'r>),
    Pg(&'r tokio_postgres::Row),
}

impl Row<'_> {
    /// Column `i` (from 0) as `T`; a NULL, a type that does not convert, or a missing column is
    /// a `STORE_ERROR` naming the column.
    pub fn get<T: FromCol>(&self, i: usize) -> Result<T> {
        match self {
            Row::Lite(r) => T::lite(r, i).map_err(|e| col_error(i, e)),
            Row::Pg(r) => T::pg(r, i).map_err(|e| col_error(i, e)),
        }
    }

    /// Column `i` as text borrowed from the row (no copy), handed to `f`; errors as [`Row::get`].
    pub fn with_text<T>(&self, i: usize, f: impl FnOnce(&str) -> Result<T>) -> Result<T> {
        let text = match self {
            Row::Lite(r) => r.get_ref(i).map_err(|e| col_error(i, e))?.as_str().map_err(|e| col_error(i, e))?,
            Row::Pg(r) => r.try_get::<_, &str>(i).map_err(|e| col_error(i, e))?,
        };
        f(text)
    }
}

fn col_error(i: usize, e: impl std::fmt::Display) -> Error {
    Error::store(format!("column {i} of a stored row: {e}"))
}

type BoxError = Box<dyn std::error::Error + Sync + Send>;

/// A Rust type a column can be read as.
pub trait FromCol: Sized {
    fn lite(r: &rusqlite::Row<'_>, i: usize) -> rusqlite::Result<Self>;
    fn pg(r: &tokio_postgres::Row, i: usize) -> std::result::Result<Self, BoxError>;
}

fn pg_ty(r: &tokio_postgres::Row, i: usize) -> std::result::Result<Type, BoxError> {
    Ok(r.columns().get(i).ok_or_else(|| format!("no column {i}"))?.type_().clone())
}

fn pg_int(r: &tokio_postgres::Row, i: usize) -> std::result::Result<Option<i64>, BoxError> {
    Ok(match pg_ty(r, i)? {
        Type::INT2 => r.try_get::<_, Option<i16>>(i)?.map(i64::from),
        Type::INT4 => r.try_get::<_, Option<i32>>(i)?.map(i64::from),
        Type::BOOL => r.try_get::<_, Option<bool>>(i)?.map(i64::from),
        Type::FLOAT8 => r.try_get::<_, Option<f64>>(i)?.map(|f| f as i64),
        _ => r.try_get::<_, Option<i64>>(i)?,
    })
}

fn pg_real(r: &tokio_postgres::Row, i: usize) -> std::result::Result<Option<f64>, BoxError> {
    Ok(match pg_ty(r, i)? {
        Type::FLOAT4 => r.try_get::<_, Option<f32>>(i)?.map(f64::from),
        Type::FLOAT8 => r.try_get::<_, Option<f64>>(i)?,
        _ => pg_int(r, i)?.map(|n| n as f64),
    })
}

fn not_null<T>(v: Option<T>) -> std::result::Result<T, BoxError> {
    v.ok_or_else(|| "unexpected NULL".into())
}

macro_rules! from_int {
    ($($t:ty),*) => {$(
        impl FromCol for $t {
            fn lite(r: &rusqlite::Row<'_>, i: usize) -> rusqlite::Result<Self> {
                r.get(i)
            }
            fn pg(r: &tokio_postgres::Row, i: usize) -> std::result::Result<Self, BoxError> {
                Ok(<$t>::try_from(not_null(pg_int(r, i)?)?)?)
            }
        }
        impl FromCol for Option<$t> {
            fn lite(r: &rusqlite::Row<'_>, i: usize) -> rusqlite::Result<Self> {
                r.get(i)
            }
            fn pg(r: &tokio_postgres::Row, i: usize) -> std::result::Result<Self, BoxError> {
                pg_int(r, i)?.map(<$t>::try_from).transpose().map_err(Into::into)
            }
        }
    )*};
}
from_int!(i64, i32, u32);

impl FromCol for bool {
    fn lite(r: &rusqlite::Row<'_>, i: usize) -> rusqlite::Result<Self> {
        r.get(i)
    }
    fn pg(r: &tokio_postgres::Row, i: usize) -> std::result::Result<Self, BoxError> {
        Ok(not_null(pg_int(r, i)?)? != 0)
    }
}

impl FromCol for f64 {
    fn lite(r: &rusqlite::Row<'_>, i: usize) -> rusqlite::Result<Self> {
        r.get(i)
    }
    fn pg(r: &tokio_postgres::Row, i: usize) -> std::result::Result<Self, BoxError> {
        not_null(pg_real(r, i)?)
    }
}

impl FromCol for Option<f64> {
    fn lite(r: &rusqlite::Row<'_>, i: usize) -> rusqlite::Result<Self> {
        r.get(i)
    }
    fn pg(r: &tokio_postgres::Row, i: usize) -> std::result::Result<Self, BoxError> {
        pg_real(r, i)
    }
}

impl FromCol for String {
    fn lite(r: &rusqlite::Row<'_>, i: usize) -> rusqlite::Result<Self> {
        r.get(i)
    }
    fn pg(r: &tokio_postgres::Row, i: usize) -> std::result::Result<Self, BoxError> {
        Ok(r.try_get(i)?)
    }
}

impl FromCol for Option<String> {
    fn lite(r: &rusqlite::Row<'_>, i: usize) -> rusqlite::Result<Self> {
        r.get(i)
    }
    fn pg(r: &tokio_postgres::Row, i: usize) -> std::result::Result<Self, BoxError> {
        Ok(r.try_get(i)?)
    }
}

impl FromCol for Vec<u8> {
    fn lite(r: &rusqlite::Row<'_>, i: usize) -> rusqlite::Result<Self> {
        r.get(i)
    }
    fn pg(r: &tokio_postgres::Row, i: usize) -> std::result::Result<Self, BoxError> {
        Ok(r.try_get(i)?)
    }
}

impl FromCol for Option<Vec<u8>> {
    fn lite(r: &rusqlite::Row<'_>, i: usize) -> rusqlite::Result<Self> {
        r.get(i)
    }
    fn pg(r: &tokio_postgres::Row, i: usize) -> std::result::Result<Self, BoxError> {
        Ok(r.try_get(i)?)
    }
}
