//! The project's prices and the charges of calls that write nothing else.

use crate::credits::{Prices, META_PRICES};
use crate::error::{Error, Result};
use crate::memory::Memory;

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
