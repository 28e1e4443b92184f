//! What each operation costs, per project.

use serde::{Deserialize, Serialize};

use crate::error::{Error, Result};
use crate::memory::Memory;

/// Store metadata key of a project's prices.
const META_PRICES: &str = "project.prices";

/// The price of each operation in credits, per project. Deleting is always free, so that
/// erasure is never blocked by an empty balance; so are reads, feedback and imports.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct Prices {
    /// Per memory stored: by `add` (verbatim or extracted) and by `extract` with `store`.
    pub add: u64,
    /// Per memory changed: by `update`, by an `add` that reconciles a fact into an existing
    /// memory, and per cluster `consolidate` merges.
    pub update: u64,
    /// Per call that runs the language model (`add` with inference, `extract`), whatever
    /// it then stores: the model's own cost.
    pub inference: u64,
}

impl Default for Prices {
    /// 1 credit per memory stored or changed; model calls included.
    fn default() -> Self {
        Prices {
            add: 1,
            update: 1,
            inference: 0,
        }
    }
}

impl Memory {
    /// The project's prices ([`Prices::default`] until set).
    pub async fn prices(&self) -> Result<Prices> {
        match self.inner.store.meta(META_PRICES).await? {
            None => Ok(Prices::default()),
            Some(text) => serde_json::from_str(&text)
                .map_err(|e| Error::internal(format!("the stored prices are unreadable: {e}"))),
        }
    }

    /// Sets the project's prices; calls made from now on pay them.
    pub async fn set_prices(&self, prices: Prices) -> Result<()> {
        let text = serde_json::to_string(&prices)
            .map_err(|e| Error::internal(format!("prices do not serialise: {e}")))?;
        crate::memory::set_meta(&*self.inner.store, META_PRICES, &text).await
    }

    /// Charges `credits` with no other write (a model call that stored nothing) and
    /// returns the balance left; a 402 changes nothing.
    pub(crate) async fn charge(&self, credits: u64) -> Result<u64> {
        if credits == 0 {
            return self.credits().await;
        }
        let batch = crate::store::WriteBatch::new(Vec::new(), credits);
        Ok(crate::store::apply(&*self.inner.store, batch)
            .await?
            .credits_remaining)
    }

    /// A 402 before a model call the balance could not pay for, so that no model time is
    /// spent on a call that will be refused. The charge itself happens with the writes.
    pub(crate) async fn check_affordable(&self, credits: u64) -> Result<()> {
        if credits == 0 {
            return Ok(());
        }
        let remaining = self.credits().await?;
        if remaining < credits {
            return Err(Error::InsufficientCredits {
                needed: credits,
                remaining,
            });
        }
        Ok(())
    }
}
