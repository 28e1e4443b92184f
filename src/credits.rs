//! What each operation costs, per project.

use serde::{Deserialize, Serialize};

/// Store metadata key of a project's prices.
pub(crate) const META_PRICES: &str = "project.prices";

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
