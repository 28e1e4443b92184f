//! PostgreSQL's errors as the crate's: what a caller may retry, and what it may not.

use crate::error::Error;

/// A PostgreSQL error as the crate's. A lost or refused connection, or a server shutting
/// down, is [`Error::Unreachable`]; a transaction the server rolled back for a conflict or
/// a lack of resources (serialisation failure, deadlock, too many connections) is a
/// transient [`Error::Unavailable`]: both 503s a caller retries. The rest is a 500.
pub(crate) fn pg_err(e: tokio_postgres::Error) -> Error {
    enum Kind {
        Unreachable,
        Busy,
        Failed,
    }
    let kind = match e.as_db_error() {
        Some(db) => {
            let code = db.code().code();
            if code.starts_with("08") || code.starts_with("57P") {
                Kind::Unreachable
            } else if matches!(code, "40001" | "40P01" | "53300" | "53400") {
                Kind::Busy
            } else {
                Kind::Failed
            }
        }
        // No answer from the server: the connection closed or failed. Anything else (a
        // value the client could not encode, say) is not worth retrying.
        None if e.is_closed() || caused_by_io(&e) => Kind::Unreachable,
        None => Kind::Failed,
    };
    match kind {
        Kind::Unreachable => Error::unreachable(
            format!(
                "the PostgreSQL server cannot serve the call now ({e}); nothing was written \
                 by a call that failed this way: retry it"
            ),
            e,
        ),
        Kind::Busy => Error::Unavailable {
            detail: format!(
                "the PostgreSQL server rolled the call back ({e}); nothing was written: \
                 retry it"
            ),
        },
        Kind::Failed => {
            let detail = match e.as_db_error() {
                Some(db) => format!(
                    "PostgreSQL failed: {} (SQLSTATE {})",
                    db.message(),
                    db.code().code()
                ),
                None => format!("PostgreSQL failed: {e}"),
            };
            Error::storage(detail, e)
        }
    }
}

/// Whether an input/output error is among the causes of `e`.
fn caused_by_io(e: &(dyn std::error::Error + 'static)) -> bool {
    let mut cause = e.source();
    while let Some(c) = cause {
        if c.is::<std::io::Error>() {
            return true;
        }
        cause = c.source();
    }
    false
}

pub(crate) fn pool_err(e: deadpool_postgres::PoolError) -> Error {
    match e {
        deadpool_postgres::PoolError::Backend(e) => pg_err(e),
        other => Error::Unreachable {
            detail: format!("no connection to the PostgreSQL server ({other}): retry"),
            source: None,
        },
    }
}

pub(super) fn corrupt(what: &str) -> Error {
    Error::Storage {
        detail: format!("the database holds a malformed {what}"),
        source: None,
    }
}
