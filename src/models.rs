//! Where local model files live.

use std::io::Read;
use std::path::{Path, PathBuf};

use sha2::{Digest, Sha256};

use crate::progress::{report, OnProgress, Task};

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

/// The SHA-256 of a file, in hex, reporting the bytes read as [`Task::VerifyModel`].
#[allow(dead_code)] // unused when no local model feature is on
pub(crate) fn sha256_of(path: &Path, progress: Option<&OnProgress>) -> std::io::Result<String> {
    let mut file = std::fs::File::open(path)?;
    let total = file.metadata()?.len();
    let mut hasher = Sha256::new();
    let mut buf = vec![0u8; 1 << 22];
    let mut done = 0u64;
    report(progress, Task::VerifyModel, 0, total);
    loop {
        let n = file.read(&mut buf)?;
        if n == 0 {
            break;
        }
        hasher.update(&buf[..n]);
        done += n as u64;
        // About one report per 64 MiB.
        if done % (1 << 26) < n as u64 {
            report(progress, Task::VerifyModel, done, total);
        }
    }
    report(progress, Task::VerifyModel, total, total);
    Ok(hasher
        .finalize()
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect())
}
