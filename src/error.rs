//! The crate's one error type.
//!
//! Every variant maps to an HTTP-style status ([`Error::status`]) and a `detail` string a
//! person can act on ([`Error::detail`]), so a host can expose memlane over any transport
//! unchanged: `serde_json::to_string(&err.body())` is the spec's `{"detail": …}`.

use serde::Serialize;
use uuid::Uuid;

/// A `Result` whose error defaults to memlane's [`Error`].
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// Everything that can go wrong in memlane.
///
/// The variant decides the status; the fields carry what the `detail` message needs.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// 400: the request is malformed (a bad field, value, filter or parameter).
    #[error("{detail}")]
    InvalidInput {
        /// What is wrong and how to fix it.
        detail: String,
    },
    /// 401: the caller could not be authenticated.
    #[error("{detail}")]
    Unauthorized {
        /// Why the credentials were refused.
        detail: String,
    },
    /// 402: the project's credit balance cannot pay for the operation.
    #[error("insufficient credits: this operation costs {needed} credits but only {remaining} remain; top up the balance and retry")]
    InsufficientCredits {
        /// Credits the operation needs.
        needed: u64,
        /// Credits left in the balance.
        remaining: u64,
    },
    /// 403: the caller may not perform this operation.
    #[error("{detail}")]
    Forbidden {
        /// Why the operation is not allowed.
        detail: String,
    },
    /// 404: no (live) memory has this id.
    #[error("memory {id} not found (it may never have existed or may have been deleted)")]
    NotFound {
        /// The id that was asked for.
        id: Uuid,
    },
    /// 404: no project, API key or other named resource has this id.
    #[error("{detail}")]
    Unknown {
        /// What was asked for and not found.
        detail: String,
    },
    /// 409: the operation conflicts with the state of the memory (for example, it is immutable).
    #[error("{detail}")]
    Conflict {
        /// What conflicts.
        detail: String,
    },
    /// 413: the request exceeds a documented size limit.
    #[error("{detail}")]
    TooLarge {
        /// Which limit was exceeded.
        detail: String,
    },
    /// 422: the request is well-formed but cannot be processed as given.
    #[error("{detail}")]
    Unprocessable {
        /// Why it cannot be processed.
        detail: String,
    },
    /// 422: a vector does not have the dimension the store or index was built with.
    #[error("vector dimension mismatch: expected {expected}, got {actual}; use the embedder the store was created with")]
    DimensionMismatch {
        /// The dimension the store uses.
        expected: usize,
        /// The dimension that was given.
        actual: usize,
    },
    /// 429: a rate limit was hit.
    #[error("{detail}")]
    RateLimited {
        /// Which limit, and when to retry.
        detail: String,
    },
    /// 503: a required component (a model file, for example) is not available.
    #[error("{detail}")]
    Unavailable {
        /// What is missing and how to provide it.
        detail: String,
    },
    /// 502: a model provider failed.
    #[error("{detail}")]
    Provider {
        /// What the provider reported.
        detail: String,
        /// Whether retrying the same call may succeed.
        transient: bool,
    },
    /// 500: the storage backend failed.
    #[error("storage error: {detail}")]
    Storage {
        /// What failed.
        detail: String,
        /// The underlying error, if any.
        #[source]
        source: Option<Box<dyn std::error::Error + Send + Sync>>,
    },
    /// 500: an internal invariant was broken. This is a bug in memlane; please report it.
    #[error("internal error: {detail}")]
    Internal {
        /// What went wrong.
        detail: String,
    },
}

/// The serialisable body of an error response: `{"detail": "…"}`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, serde::Deserialize)]
pub struct ErrorBody {
    /// A human-readable message.
    pub detail: String,
}

impl Error {
    /// The HTTP-style status code this error maps to.
    pub fn status(&self) -> u16 {
        match self {
            Error::InvalidInput { .. } => 400,
            Error::Unauthorized { .. } => 401,
            Error::InsufficientCredits { .. } => 402,
            Error::Forbidden { .. } => 403,
            Error::NotFound { .. } | Error::Unknown { .. } => 404,
            Error::Conflict { .. } => 409,
            Error::TooLarge { .. } => 413,
            Error::Unprocessable { .. } | Error::DimensionMismatch { .. } => 422,
            Error::RateLimited { .. } => 429,
            Error::Storage { .. } | Error::Internal { .. } => 500,
            Error::Provider { .. } => 502,
            Error::Unavailable { .. } => 503,
        }
    }

    /// The human-readable `detail` message.
    pub fn detail(&self) -> String {
        self.to_string()
    }

    /// The error as the spec's response body.
    pub fn body(&self) -> ErrorBody {
        ErrorBody {
            detail: self.detail(),
        }
    }

    /// Whether retrying the same call unchanged may succeed.
    pub fn is_transient(&self) -> bool {
        match self {
            Error::RateLimited { .. } | Error::Unavailable { .. } => true,
            Error::Provider { transient, .. } => *transient,
            _ => false,
        }
    }

    /// A 400 with the given detail.
    pub fn invalid(detail: impl Into<String>) -> Self {
        Error::InvalidInput {
            detail: detail.into(),
        }
    }

    /// A 500 storage error wrapping its source.
    pub fn storage(
        detail: impl Into<String>,
        source: impl std::error::Error + Send + Sync + 'static,
    ) -> Self {
        Error::Storage {
            detail: detail.into(),
            source: Some(Box::new(source)),
        }
    }

    /// The same error with `what: ` before its detail (for a bad request; other errors
    /// are returned as they are), so that an error in one item of a batch names the item.
    pub(crate) fn about(self, what: &str) -> Self {
        match self {
            Error::InvalidInput { detail } => Error::InvalidInput {
                detail: format!("{what}: {detail}"),
            },
            Error::TooLarge { detail } => Error::TooLarge {
                detail: format!("{what}: {detail}"),
            },
            Error::Unprocessable { detail } => Error::Unprocessable {
                detail: format!("{what}: {detail}"),
            },
            other => other,
        }
    }

    /// A 500 for a broken internal invariant.
    pub fn internal(detail: impl Into<String>) -> Self {
        Error::Internal {
            detail: detail.into(),
        }
    }
}

impl Serialize for Error {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        self.body().serialize(serializer)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_variant_has_a_status_and_serialises_as_detail() {
        let id = Uuid::nil();
        let cases: Vec<(Error, u16)> = vec![
            (Error::invalid("bad top_k"), 400),
            (
                Error::Unauthorized {
                    detail: "no key".into(),
                },
                401,
            ),
            (
                Error::InsufficientCredits {
                    needed: 2,
                    remaining: 1,
                },
                402,
            ),
            (
                Error::Forbidden {
                    detail: "no".into(),
                },
                403,
            ),
            (Error::NotFound { id }, 404),
            (
                Error::Conflict {
                    detail: "immutable".into(),
                },
                409,
            ),
            (
                Error::TooLarge {
                    detail: "big".into(),
                },
                413,
            ),
            (
                Error::DimensionMismatch {
                    expected: 384,
                    actual: 3,
                },
                422,
            ),
            (
                Error::RateLimited {
                    detail: "slow down".into(),
                },
                429,
            ),
            (Error::internal("bug"), 500),
            (
                Error::Provider {
                    detail: "down".into(),
                    transient: true,
                },
                502,
            ),
            (
                Error::Unavailable {
                    detail: "model missing".into(),
                },
                503,
            ),
        ];
        for (err, status) in cases {
            assert_eq!(err.status(), status, "{err:?}");
            let json = serde_json::to_value(&err).unwrap_or_default();
            assert_eq!(json["detail"], serde_json::Value::String(err.detail()));
            assert!(!err.detail().is_empty());
        }
    }

    #[test]
    fn not_found_detail_names_the_id() {
        let id = Uuid::new_v4();
        assert!(Error::NotFound { id }.detail().contains(&id.to_string()));
    }
}
