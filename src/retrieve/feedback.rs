//! How feedback shapes a ranking: NEGATIVE halves a memory's score, VERY_NEGATIVE removes
//! it; POSITIVE changes nothing (a score stays a relevance, not a popularity).

use uuid::Uuid;

use super::ScoredMemory;
use crate::error::{Error, Result};
use crate::memory::Memory;
use crate::store::FeedbackKind;

/// Extra candidates a search fetches, at most, to refill what feedback demotes or removes.
pub const MAX_FEEDBACK_REFILL: usize = 100;

/// What NEGATIVE feedback multiplies a memory's search score by.
pub const NEGATIVE_FEEDBACK_FACTOR: f32 = 0.5;

impl Memory {
    /// How many extra candidates a search should fetch to refill what feedback removes.
    pub(crate) async fn feedback_refill(&self) -> Result<usize> {
        let flagged = self.negative_feedback().await?;
        Ok(usize::try_from(flagged)
            .unwrap_or(usize::MAX)
            .min(MAX_FEEDBACK_REFILL))
    }

    /// How many memories have negative feedback: read from the store once per change of
    /// its change token.
    async fn negative_feedback(&self) -> Result<u64> {
        let seen = || {
            self.inner
                .negative_seen
                .lock()
                .map_err(|_| Error::internal("feedback count lock poisoned"))
        };
        let token = self.inner.store.change_token();
        if let (Some(token), Some((at, flagged))) = (token, *seen()?) {
            if at == token {
                return Ok(flagged);
            }
        }
        let flagged = self.inner.store.counters().await?.negative_feedback;
        if let Some(token) = token {
            *seen()? = Some((token, flagged));
        }
        Ok(flagged)
    }

    /// Applies feedback to ranked hits: VERY_NEGATIVE ones leave, NEGATIVE ones lose half
    /// their score; the order is then by score (stable), and `top_k` are kept.
    pub(crate) async fn apply_feedback(
        &self,
        hits: &mut Vec<ScoredMemory>,
        top_k: usize,
    ) -> Result<()> {
        if self.negative_feedback().await? == 0 {
            // Only negative feedback moves a hit.
            hits.truncate(top_k);
            return Ok(());
        }
        let ids: Vec<Uuid> = hits.iter().map(|h| h.record.id).collect();
        let given = self.inner.store.feedback(&ids).await?;
        if given.iter().any(|f| f.feedback.is_some()) {
            let kind = |id: Uuid| {
                given
                    .iter()
                    .find(|f| f.memory_id == id)
                    .and_then(|f| f.feedback)
            };
            hits.retain(|h| kind(h.record.id) != Some(FeedbackKind::VeryNegative));
            for hit in hits.iter_mut() {
                if kind(hit.record.id) == Some(FeedbackKind::Negative) {
                    hit.score *= NEGATIVE_FEEDBACK_FACTOR;
                }
            }
            hits.sort_by(|a, b| b.score.total_cmp(&a.score));
        }
        hits.truncate(top_k);
        Ok(())
    }
}
