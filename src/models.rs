//! Where local model files live.

use std::path::PathBuf;

/// The model cache: `$MEMLANE_MODELS_DIR`, else `${XDG_CACHE_HOME:-$HOME/.cache}/memlane/models`
/// (where `scripts/fetch-models.sh` installs them).
#[allow(dead_code)] // unused when no local model feature is on
pub(crate) fn cache_dir() -> PathBuf {
    std::env::var_os("MEMLANE_MODELS_DIR")
        .map(PathBuf::from)
        .or_else(|| {
            std::env::var_os("XDG_CACHE_HOME").map(|x| PathBuf::from(x).join("memlane/models"))
        })
        .or_else(|| {
            std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".cache/memlane/models"))
        })
        .unwrap_or_else(|| PathBuf::from(".memlane/models"))
}
