//! How feedback shapes a ranking: NEGATIVE halves a memory's score, VERY_NEGATIVE removes
//! it; POSITIVE changes nothing (a score stays a relevance, not a popularity).

use uuid::Uuid;

use super::ScoredMemory;
use crate::error::Result;
use crate::memory::Memory;
use crate::store::FeedbackKind;

/// Extra candidates a search fetches, at most, to refill what feedback demotes or removes.
pub const MAX_FEEDBACK_REFILL: usize = 100;

/// What NEGATIVE feedback multiplies a memory's search score by.
pub const NEGATIVE_FEEDBACK_FACTOR: f32 = 0.5;

impl Memory {
    /// How many extra candidates a search should fetch to refill what feedback removes.
    pub(crate) async fn feedback_refill(&self) -> Result<usize> {
        let flagged = self.inner.store.counters().await?.negative_feedback;
        Ok(usize::try_from(flagged)
            .unwrap_or(usize::MAX)
            .min(MAX_FEEDBACK_REFILL))
    }

    /// Applies feedback to ranked hits: VERY_NEGATIVE ones leave, NEGATIVE ones lose half
    /// their score; the order is then by score (stable), and `top_k` are kept.
    pub(crate) async fn apply_feedback(
        &self,
        hits: &mut Vec<ScoredMemory>,
        top_k: usize,
    ) -> Result<()> {
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
