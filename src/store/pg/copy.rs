//! Many rows into one table in one go on PostgreSQL: a binary `COPY … FROM STDIN` inside the
//! transaction, the server's fastest way in (one statement and one stream of rows, instead of a
//! round trip per row). It sends what the store's modules hand it; it never builds SQL from
//! values, and never decides what is written.

use std::pin::pin;

use tokio_postgres::binary_copy::BinaryCopyInWriter;
use tokio_postgres::types::ToSql;

use super::PgTx;
use crate::error::{Error, Result};
use crate::store::value::{Arg, Ty};

impl PgTx<'_> {
    /// Runs `copy` (`COPY t (a, b, …) FROM STDIN (FORMAT binary)`, constant text) with the rows
    /// of `args`, `types.len()` values a row in column order; how many rows the server took.
    pub(crate) fn copy_in(&self, copy: &'static str, types: &[Ty], args: &[Arg<'_>]) -> Result<u64> {
        let width = types.len();
        if width == 0 || !args.len().is_multiple_of(width) {
            return Err(Error::store("internal error: a COPY was given rows of the wrong width"));
        }
        if args.chunks(width).any(|row| row.iter().zip(types).any(|(a, t)| !matches!(a, Arg::Null(_)) && a.ty() != *t))
        {
            return Err(Error::store("internal error: a COPY was given a value of the wrong type"));
        }
        let pg_types: Vec<_> = types.iter().map(|t| t.pg()).collect();
        self.with_client(|client| async move {
            let st = client.prepare_cached(copy).await?;
            let sink = client.copy_in(&st).await?;
            let mut writer = pin!(BinaryCopyInWriter::new(sink, &pg_types));
            for row in args.chunks(width) {
                let values: Vec<&(dyn ToSql + Sync)> = row.iter().map(|a| a as &(dyn ToSql + Sync)).collect();
                writer.as_mut().write(&values).await?;
            }
            writer.as_mut().finish().await
        })
    }
}
