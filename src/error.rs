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
        /// The request field that is wrong, when the error is about one ([`Error::field`]).
        field: Option<String>,
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
        /// The request field that is too large, when the limit is one field's
        /// ([`Error::field`]).
        field: Option<String>,
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
    /// 503: the call needs a component this memory was not given (a language model, an
    /// embedder). Retrying will not help; configuring one will.
    #[error("{detail}")]
    NotConfigured {
        /// What is missing and how to configure it.
        detail: String,
    },
    /// 503: a model file is missing, unreadable, or not the pinned one (its SHA-256
    /// differs), and could not be fetched.
    #[error("{detail}")]
    ModelFile {
        /// Which file, and the ways to provide it.
        detail: String,
    },
    /// 503: a server the store needs (PostgreSQL) cannot be reached, or the connection was
    /// lost. Retrying may succeed.
    #[error("{detail}")]
    Unreachable {
        /// Which server, and what happened.
        detail: String,
        /// The underlying error, if any.
        #[source]
        source: Option<Box<dyn std::error::Error + Send + Sync>>,
    },
    /// 503: a component is not available for now (the store is being re-embedded, the
    /// database server is busy): retrying later may succeed.
    #[error("{detail}")]
    Unavailable {
        /// What is unavailable and what to do.
        detail: String,
    },
    /// 502: a model provider failed.
    #[error("{detail}")]
    Provider {
        /// What the provider reported.
        detail: String,
        /// Whether retrying the same call may succeed.
        transient: bool,
        /// What kind of failure it was.
        failure: ProviderFailure,
        /// The provider client's own error, if any.
        #[source]
        source: Option<Box<dyn std::error::Error + Send + Sync>>,
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

/// How a model provider failed ([`Error::Provider`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum ProviderFailure {
    /// The provider could not be reached, or the connection failed or timed out.
    Unreachable,
    /// The provider asked to slow down (429, not an exhausted quota).
    RateLimited,
    /// The provider refused or rejected the request as it was made: a key, a model name or
    /// route, an exhausted quota, a request it does not take (another 4xx).
    Refused,
    /// Anything else: a server error, a reply that could not be read or kept breaking the
    /// answer's rules, a call cancelled.
    Failed,
}

/// What kind of error an [`Error`] is, for a caller to match on: one kind per situation a
/// caller handles differently. [`Error::kind`] gives it; the status and the detail stay.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum ErrorKind {
    /// 400: malformed input.
    InvalidInput,
    /// 401: an API key missing, malformed, unknown or revoked.
    Unauthorized,
    /// 402: the credit balance cannot pay.
    PaymentRequired,
    /// 403: not allowed on this project.
    Forbidden,
    /// 404: no such memory, project or key.
    NotFound,
    /// 409: the state of the memory or store conflicts (immutable, changed by another
    /// writer, another embedding model).
    Conflict,
    /// 413: over a size limit.
    TooLarge,
    /// 422: well-formed but cannot be processed (a vector of the wrong dimension).
    Unprocessable,
    /// 429: a rate limit of memlane's.
    RateLimited,
    /// 503: a language model or embedder the call needs is not configured.
    NotConfigured,
    /// 503: a model file is missing or corrupt.
    ModelFile,
    /// 503: the store's server cannot be reached.
    Unreachable,
    /// 503: something else is unavailable for now.
    Unavailable,
    /// 502: the model provider could not be reached.
    ProviderUnreachable,
    /// 502: the model provider asked to slow down.
    ProviderRateLimited,
    /// 502: the model provider refused or rejected the request (key, model, quota, another
    /// 4xx).
    ProviderRefused,
    /// 502: the model provider failed otherwise.
    ProviderFailed,
    /// 500: the storage backend failed.
    Storage,
    /// 500: a bug in memlane.
    Internal,
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
            Error::NotConfigured { .. }
            | Error::ModelFile { .. }
            | Error::Unreachable { .. }
            | Error::Unavailable { .. } => 503,
        }
    }

    /// What kind of error this is, to match on (see [`ErrorKind`]).
    pub fn kind(&self) -> ErrorKind {
        match self {
            Error::InvalidInput { .. } => ErrorKind::InvalidInput,
            Error::Unauthorized { .. } => ErrorKind::Unauthorized,
            Error::InsufficientCredits { .. } => ErrorKind::PaymentRequired,
            Error::Forbidden { .. } => ErrorKind::Forbidden,
            Error::NotFound { .. } | Error::Unknown { .. } => ErrorKind::NotFound,
            Error::Conflict { .. } => ErrorKind::Conflict,
            Error::TooLarge { .. } => ErrorKind::TooLarge,
            Error::Unprocessable { .. } | Error::DimensionMismatch { .. } => {
                ErrorKind::Unprocessable
            }
            Error::RateLimited { .. } => ErrorKind::RateLimited,
            Error::NotConfigured { .. } => ErrorKind::NotConfigured,
            Error::ModelFile { .. } => ErrorKind::ModelFile,
            Error::Unreachable { .. } => ErrorKind::Unreachable,
            Error::Unavailable { .. } => ErrorKind::Unavailable,
            Error::Provider { failure, .. } => match failure {
                ProviderFailure::Unreachable => ErrorKind::ProviderUnreachable,
                ProviderFailure::RateLimited => ErrorKind::ProviderRateLimited,
                ProviderFailure::Refused => ErrorKind::ProviderRefused,
                ProviderFailure::Failed => ErrorKind::ProviderFailed,
            },
            Error::Storage { .. } => ErrorKind::Storage,
            Error::Internal { .. } => ErrorKind::Internal,
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
            Error::RateLimited { .. } | Error::Unreachable { .. } | Error::Unavailable { .. } => {
                true
            }
            Error::Provider { transient, .. } => *transient,
            _ => false,
        }
    }

    /// A 400 with the given detail, about the request as a whole (no one field).
    pub fn invalid(detail: impl Into<String>) -> Self {
        Error::InvalidInput {
            field: None,
            detail: detail.into(),
        }
    }

    /// A 400 about one request field, named as the service's requests name it.
    pub fn invalid_field(field: impl Into<String>, detail: impl Into<String>) -> Self {
        Error::InvalidInput {
            field: Some(field.into()),
            detail: detail.into(),
        }
    }

    /// A 413 about one request field that exceeds its documented limit.
    pub fn too_large(field: impl Into<String>, detail: impl Into<String>) -> Self {
        Error::TooLarge {
            field: Some(field.into()),
            detail: detail.into(),
        }
    }

    /// The request field a 400 or 413 is about, as the service's requests name it:
    /// `"top_k"`, `"threshold"`, `"filters"`, `"metadata"`, `"user_id"`, a message's
    /// `"messages[2].content"` or `"messages[2].role"`. `None` for other errors and for a
    /// request that is wrong as a whole (no owner given, nothing to update), so that a
    /// caller can point at the input without reading the `detail`.
    pub fn field(&self) -> Option<&str> {
        match self {
            Error::InvalidInput { field, .. } | Error::TooLarge { field, .. } => field.as_deref(),
            _ => None,
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
            Error::InvalidInput { field, detail } => Error::InvalidInput {
                field,
                detail: format!("{what}: {detail}"),
            },
            Error::TooLarge { field, detail } => Error::TooLarge {
                field,
                detail: format!("{what}: {detail}"),
            },
            Error::Unprocessable { detail } => Error::Unprocessable {
                detail: format!("{what}: {detail}"),
            },
            other => other,
        }
    }

    /// A 502 of a provider that failed ([`ProviderFailure::Failed`]), with no source.
    pub fn provider(detail: impl Into<String>, transient: bool) -> Self {
        Error::Provider {
            detail: detail.into(),
            transient,
            failure: ProviderFailure::Failed,
            source: None,
        }
    }

    /// A 503 of a server that cannot be reached, wrapping its source.
    pub fn unreachable(
        detail: impl Into<String>,
        source: impl std::error::Error + Send + Sync + 'static,
    ) -> Self {
        Error::Unreachable {
            detail: detail.into(),
            source: Some(Box::new(source)),
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
            (Error::too_large("messages", "big"), 413),
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
            (Error::provider("down", true), 502),
            (
                Error::Provider {
                    detail: "slow down".into(),
                    transient: true,
                    failure: ProviderFailure::RateLimited,
                    source: None,
                },
                502,
            ),
            (
                Error::NotConfigured {
                    detail: "no model".into(),
                },
                503,
            ),
            (
                Error::ModelFile {
                    detail: "model missing".into(),
                },
                503,
            ),
            (
                Error::Unreachable {
                    detail: "no server".into(),
                    source: None,
                },
                503,
            ),
            (
                Error::Unavailable {
                    detail: "re-embedding".into(),
                },
                503,
            ),
        ];
        let mut kinds = std::collections::HashSet::new();
        for (err, status) in cases {
            assert_eq!(err.status(), status, "{err:?}");
            assert!(kinds.insert(err.kind()), "two cases of {:?}", err.kind());
            let json = serde_json::to_value(&err).unwrap_or_default();
            assert_eq!(json["detail"], serde_json::Value::String(err.detail()));
            assert!(!err.detail().is_empty());
        }
    }

    /// A kind says what to do: retry a server that cannot be reached, never a missing
    /// configuration or model file.
    #[test]
    fn kinds_say_whether_to_retry() {
        let not_configured = Error::NotConfigured { detail: "x".into() };
        let model_file = Error::ModelFile { detail: "x".into() };
        let unreachable = Error::unreachable("x", std::io::Error::other("refused"));
        assert!(!not_configured.is_transient() && !model_file.is_transient());
        assert!(unreachable.is_transient());
        assert_eq!(unreachable.kind(), ErrorKind::Unreachable);
        let source = std::error::Error::source(&unreachable).map(|e| e.to_string());
        assert_eq!(source.as_deref(), Some("refused"));
    }

    #[test]
    fn not_found_detail_names_the_id() {
        let id = Uuid::new_v4();
        assert!(Error::NotFound { id }.detail().contains(&id.to_string()));
    }
}
