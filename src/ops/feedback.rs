//! `feedback`: a quality signal on a memory (POSITIVE, NEGATIVE, VERY_NEGATIVE, with an
//! optional reason), and how it shapes search.
//!
//! POSITIVE changes nothing in ranking: a score stays a similarity, not a popularity.
//! NEGATIVE halves the memory's score in search and retrieve (after any reranker, before
//! the threshold). VERY_NEGATIVE leaves the memory out of search and retrieve; `get`, `list`
//! and exports still show it, and deleting it is how to erase it. Searches fetch one extra
//! candidate per memory with negative feedback (up to [`MAX_FEEDBACK_REFILL`]), so what is
//! demoted or left out is replaced by the next best memory.

use serde::{Deserialize, Serialize};
use uuid::Uuid;

use crate::error::{Error, Result};
use crate::memory::{Memory, MemoryId};
use crate::record::now;
use crate::store::{Feedback, FeedbackKind, Write, WriteBatch};

pub use crate::limits::MAX_FEEDBACK_REASON_BYTES;

pub use crate::retrieve::feedback::{MAX_FEEDBACK_REFILL, NEGATIVE_FEEDBACK_FACTOR};

/// What `feedback` returns: the feedback now stored, and the (zero) charge.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct FeedbackResult {
    /// The feedback now stored.
    #[serde(flatten)]
    pub feedback: Feedback,
    /// Credits this call used: feedback is free.
    pub credits_used: u64,
    /// Credits left.
    pub credits_remaining: u64,
}

impl Memory {
    /// Sets the feedback on a live memory, or clears it with `None` (the reason goes with
    /// it). Free of credits. A 404 for an unknown or deleted memory; a 413 for a reason over
    /// [`MAX_FEEDBACK_REASON_BYTES`].
    #[tracing::instrument(name = "feedback", target = "memlane", level = "info", skip_all, fields(project = self.inner.project.as_deref(), count = tracing::field::Empty, k = tracing::field::Empty))]
    pub async fn feedback(
        &self,
        id: impl Into<MemoryId>,
        feedback: Option<FeedbackKind>,
        reason: Option<&str>,
    ) -> Result<FeedbackResult> {
        let memory_id = id.into().parse()?;
        let reason = reason.map(str::trim).filter(|r| !r.is_empty());
        if let Some(r) = reason {
            if r.len() > MAX_FEEDBACK_REASON_BYTES {
                return Err(Error::too_large(
                    "feedback_reason",
                    format!(
                        "feedback_reason is {} bytes; the limit is {MAX_FEEDBACK_REASON_BYTES}",
                        r.len()
                    ),
                ));
            }
        }
        let record = Feedback {
            memory_id,
            feedback,
            feedback_reason: feedback.and(reason.map(str::to_string)),
            updated_at: Some(now()),
        };
        let batch = WriteBatch::new(vec![Write::Feedback(record.clone())], 0);
        let outcome = self.commit(batch).await?;
        Ok(FeedbackResult {
            feedback: record,
            credits_used: 0,
            credits_remaining: outcome.credits_remaining,
        })
    }

    /// The feedback on a live memory (`feedback: None` when there is none). A 404 for an
    /// unknown or deleted memory.
    #[tracing::instrument(name = "feedback_of", target = "memlane", level = "info", skip_all, fields(project = self.inner.project.as_deref(), count = tracing::field::Empty, k = tracing::field::Empty))]
    pub async fn feedback_of(&self, id: impl Into<MemoryId>) -> Result<Feedback> {
        let memory_id: Uuid = id.into().parse()?;
        self.get(memory_id).await?;
        Ok(self
            .inner
            .store
            .feedback(&[memory_id])
            .await?
            .pop()
            .unwrap_or(Feedback {
                memory_id,
                feedback: None,
                feedback_reason: None,
                updated_at: None,
            }))
    }
}
