//! Saving the graph as checksummed generations, and loading the current one.
//!
//! Several handles and processes may share one index directory. A save dumps its graph into
//! a directory of its own, then, holding an exclusive lock on the directory's `LOCK` file,
//! names it as the next generation, points `CURRENT` at it and removes older generations;
//! a load reads `CURRENT` and its generation holding a shared lock. So two saves never
//! mix their files, and a generation is never removed while another process loads it.

use std::io::Write as _;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::path::{Path, PathBuf};

use hnsw_rs::hnswio::HnswIo;
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use super::graph::{GraphHolder, LoadedGraph};
use super::statefile::{self, Record, SavedState};
use super::{read_lock, write_lock, IndexParams, VectorIndex};

use crate::error::{Error, Result};
use crate::store::VectorKey;

#[derive(Debug, Serialize, Deserialize)]
struct Manifest {
    format: u32,
    store_id: String,
    dimension: usize,
    max_connections: usize,
    ef_construction: usize,
    max_key: VectorKey,
    /// The change-log cursor the graph reflects (0 in generations saved before it was
    /// recorded).
    #[serde(default)]
    cursor: u64,
    points: usize,
    basename: String,
    graph_sha256: String,
    data_sha256: String,
    /// The state file (`state.bin`), absent in generations saved before it existed.
    #[serde(default)]
    state: Option<statefile::Written>,
}

const STATE_FILE: &str = "state.bin";

/// Version of the saved index; 2: int8 graph; 3: every point linked (a graph of version 2
/// may hold one point no search reaches: one of the first two of a batch inserted into an
/// empty graph), so a graph of version 2 is rebuilt once.
const FORMAT: u32 = 3;

fn io_err(what: &str, path: &Path, e: std::io::Error) -> Error {
    Error::Storage {
        detail: format!("{what} {}", path.display()),
        source: Some(Box::new(e)),
    }
}

/// A generation as loaded.
pub(super) struct Loaded {
    pub(super) contents: Contents,
    pub(super) max_key: VectorKey,
    pub(super) cursor: u64,
    pub(super) points: usize,
}

pub(super) enum Contents {
    /// A generation with a state file: the index's state as saved, its checksum under way,
    /// and its graph to load (see [`load_graph`]).
    State(SavedState, statefile::Check, GraphFiles),
    /// A generation saved without a state file: its graph, loaded; the state comes from
    /// the store.
    Graph(GraphHolder),
}

/// A saved graph not yet read, with a shared lock on its directory, so that no save removes
/// it before it is read.
pub(super) struct GraphFiles {
    dir: PathBuf,
    gen_dir: PathBuf,
    basename: String,
    graph_sha256: String,
    data_sha256: String,
    points: usize,
    _lock: std::fs::File,
}

/// The directory's `LOCK` file, locked shared (loads) or exclusive (saves); unlocked when
/// dropped.
fn lock_dir(dir: &Path, exclusive: bool) -> Result<std::fs::File> {
    let path = dir.join("LOCK");
    let file = std::fs::OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .open(&path)
        .map_err(|e| io_err("cannot open", &path, e))?;
    if exclusive {
        file.lock()
    } else {
        file.lock_shared()
    }
    .map_err(|e| io_err("cannot lock", &path, e))?;
    Ok(file)
}

fn sha256_file(path: &Path) -> Result<String> {
    let mut file = std::fs::File::open(path).map_err(|e| io_err("cannot read", path, e))?;
    let mut hasher = Sha256::new();
    std::io::copy(&mut file, &mut hasher).map_err(|e| io_err("cannot read", path, e))?;
    Ok(hasher
        .finalize()
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect())
}

impl VectorIndex {
    /// Writes the graph as a new generation and points `CURRENT` at it. The caller holds the
    /// engine's write gate, so no insert runs concurrently. Blocking.
    pub(crate) fn save(&self) -> Result<()> {
        let Some(dir) = &self.dir else {
            return Ok(());
        };
        // A graph still loading holds nothing to save yet.
        self.wait_for_graph()?;
        // No insert while the graph is dumped: its points, keys and cursor stay together.
        let _inserting = super::mutex(&self.inserting)?;
        if read_lock(&self.graph)?.is_loading() {
            tracing::warn!("vector index not saved: its graph could not be loaded");
            return Ok(());
        }
        let (max_key, points) = {
            let s = read_lock(&self.state)?;
            (s.max_key, s.points)
        };
        if points == 0 {
            // Nothing to dump; an empty index is rebuilt for free on open.
            let current = dir.join("CURRENT");
            if current.exists() {
                let _lock = lock_dir(dir, true)?;
                std::fs::remove_file(&current).map_err(|e| io_err("cannot remove", &current, e))?;
            }
            return Ok(());
        }
        std::fs::create_dir_all(dir).map_err(|e| io_err("cannot create", dir, e))?;
        let tmp = dir.join(format!("g-new.tmp-{}", uuid::Uuid::new_v4().simple()));
        std::fs::create_dir_all(&tmp).map_err(|e| io_err("cannot create", &tmp, e))?;
        let basename = {
            let graph = read_lock(&self.graph)?;
            let dumped = catch_unwind(AssertUnwindSafe(|| {
                graph.with(|g| memlane_kernels::graph::dump(g, &tmp, "graph"))
            }));
            match dumped {
                Ok(Some(Ok(name))) => name,
                Ok(Some(Err(e))) => return Err(Error::internal(format!("index dump failed: {e}"))),
                Ok(None) => return Err(Error::internal("index graph not loaded")),
                Err(_) => return Err(Error::internal("index dump panicked")),
            }
        };
        // The state goes with the graph. Records and cursor are read together: the cursor
        // never runs ahead of the records (it moves only after a change is installed), so
        // a load that replays the log from it ends where the store is.
        let state_path = tmp.join(STATE_FILE);
        let (state, cursor) = {
            let s = read_lock(&self.state)?;
            let records = s
                .ids
                .iter()
                .map(|(id, key)| Record {
                    key: *key,
                    id: *id,
                    expires_at: s.expiring.get(key).copied(),
                })
                .collect();
            let written = statefile::write(
                &state_path,
                self.dimension,
                records,
                |key| s.arena.get(key),
                |key| s.owners.of(key),
            )
            .map_err(|e| io_err("cannot write", &state_path, e))?;
            (written, s.cursor)
        };
        let graph_file = tmp.join(format!("{basename}.hnsw.graph"));
        let data_file = tmp.join(format!("{basename}.hnsw.data"));
        for f in [&graph_file, &data_file] {
            sync_file(f)?;
        }
        let manifest = Manifest {
            format: FORMAT,
            store_id: self.store_id.clone(),
            dimension: self.dimension,
            max_connections: self.params.max_connections,
            ef_construction: self.params.ef_construction,
            max_key,
            cursor,
            points,
            basename,
            graph_sha256: sha256_file(&graph_file)?,
            data_sha256: sha256_file(&data_file)?,
            state: Some(state),
        };
        let manifest_json = serde_json::to_vec_pretty(&manifest)
            .map_err(|e| Error::internal(format!("cannot serialise the index manifest: {e}")))?;
        write_synced(&tmp.join("manifest.json"), &manifest_json)?;
        let _lock = lock_dir(dir, true)?;
        let name = format!("g-{}", next_generation(dir));
        let final_dir = dir.join(&name);
        std::fs::rename(&tmp, &final_dir).map_err(|e| io_err("cannot rename", &tmp, e))?;
        let current_tmp = dir.join(format!("CURRENT.tmp-{}", uuid::Uuid::new_v4().simple()));
        write_synced(&current_tmp, name.as_bytes())?;
        std::fs::rename(&current_tmp, dir.join("CURRENT"))
            .map_err(|e| io_err("cannot rename", &current_tmp, e))?;
        sync_dir(dir);
        // Older generations are garbage now, and so are temporary directories a crash left
        // behind (an hour old: younger ones may be another handle's save in progress).
        // Failing to remove them costs only disk.
        if let Ok(entries) = std::fs::read_dir(dir) {
            for entry in entries.flatten() {
                let n = entry.file_name().to_string_lossy().into_owned();
                let stale_tmp = n.contains(".tmp-")
                    && entry
                        .metadata()
                        .and_then(|m| m.modified())
                        .ok()
                        .and_then(|t| t.elapsed().ok())
                        .is_some_and(|age| age.as_secs() > 3600);
                let ours = n.starts_with("g-") || n.starts_with("CURRENT.tmp-");
                if ours && n != name && (!n.contains(".tmp-") || stale_tmp) {
                    let _ = std::fs::remove_dir_all(entry.path());
                }
            }
        }
        write_lock(&self.state)?.unsaved = 0;
        Ok(())
    }
}

fn next_generation(dir: &Path) -> u64 {
    std::fs::read_dir(dir)
        .map(|entries| {
            entries
                .flatten()
                .filter_map(|e| {
                    let n = e.file_name().to_string_lossy().into_owned();
                    n.strip_prefix("g-")?
                        .trim_end_matches(".tmp")
                        .parse::<u64>()
                        .ok()
                })
                .max()
                .unwrap_or(0)
        })
        .unwrap_or(0)
        + 1
}

fn write_synced(path: &Path, bytes: &[u8]) -> Result<()> {
    let mut f = std::fs::File::create(path).map_err(|e| io_err("cannot create", path, e))?;
    f.write_all(bytes)
        .map_err(|e| io_err("cannot write", path, e))?;
    f.sync_all().map_err(|e| io_err("cannot sync", path, e))
}

fn sync_file(path: &Path) -> Result<()> {
    std::fs::File::open(path)
        .and_then(|f| f.sync_all())
        .map_err(|e| io_err("cannot sync", path, e))
}

fn sync_dir(dir: &Path) {
    // Best effort: not every platform can fsync a directory.
    if let Ok(d) = std::fs::File::open(dir) {
        let _ = d.sync_all();
    }
}

/// Loads the current generation if every check passes; `None` means "rebuild". A generation
/// with a state file comes back with its state read and its graph still on disk.
pub(super) fn load(
    dir: &Path,
    store_id: &str,
    dimension: usize,
    params: &IndexParams,
) -> Option<Loaded> {
    if !dir.join("CURRENT").exists() {
        return None;
    }
    // Held until the generation is read (its graph too): no save removes it meanwhile.
    let lock = match lock_dir(dir, false) {
        Ok(lock) => lock,
        Err(e) => {
            tracing::warn!(error = %e, "vector index not loaded; rebuilding from the store");
            return None;
        }
    };
    let name = std::fs::read_to_string(dir.join("CURRENT")).ok()?;
    let gen_dir = dir.join(name.trim());
    let manifest: Manifest =
        serde_json::from_slice(&std::fs::read(gen_dir.join("manifest.json")).ok()?).ok()?;
    if manifest.format != FORMAT
        || manifest.store_id != store_id
        || manifest.dimension != dimension
        || manifest.max_connections != params.max_connections
        || manifest.ef_construction != params.ef_construction
    {
        reject(
            dir,
            "it was saved by another version of memlane, or for another store, model or \
             parameters",
        );
        return None;
    }
    let files = GraphFiles {
        dir: dir.to_path_buf(),
        gen_dir,
        basename: manifest.basename,
        graph_sha256: manifest.graph_sha256,
        data_sha256: manifest.data_sha256,
        points: manifest.points,
        _lock: lock,
    };
    let contents = match &manifest.state {
        Some(written) => {
            let path = files.gen_dir.join(STATE_FILE);
            match statefile::read(&path, dimension, written) {
                Ok((state, check)) if state.owners.is_some() => {
                    Contents::State(state, check, files)
                }
                // A state file written before owners were kept: the graph is loaded now and
                // the state read from the store, once; the next save writes owners.
                Ok(_) => Contents::Graph(GraphHolder::Loaded(load_graph(files)?)),
                Err(e) => {
                    reject(dir, &format!("its state file is unreadable: {e}"));
                    return None;
                }
            }
        }
        None => Contents::Graph(GraphHolder::Loaded(load_graph(files)?)),
    };
    Some(Loaded {
        contents,
        max_key: manifest.max_key,
        cursor: manifest.cursor,
        points: manifest.points,
    })
}

fn reject(dir: &Path, why: &str) {
    tracing::warn!(dir = %dir.display(), "vector index not loaded ({why}); rebuilding");
}

impl GraphFiles {
    /// Gives up the generation whose state file failed its checksum after it was read.
    pub(super) fn reject_state(self, e: &std::io::Error) {
        reject(&self.dir, &format!("its state file is unreadable: {e}"));
    }
}

/// Reads a saved graph if its files match their checksums and manifest. Slow on large
/// graphs (hnsw_rs rebuilds every point and link: 12 to 22 s at a million memories on two
/// cores).
pub(super) fn load_graph(files: GraphFiles) -> Option<LoadedGraph> {
    let graph_file = files.gen_dir.join(format!("{}.hnsw.graph", files.basename));
    let data_file = files.gen_dir.join(format!("{}.hnsw.data", files.basename));
    if sha256_file(&graph_file).ok()? != files.graph_sha256
        || sha256_file(&data_file).ok()? != files.data_sha256
    {
        reject(&files.dir, "its files do not match their checksums");
        return None;
    }
    let io = HnswIo::new(&files.gen_dir, &files.basename);
    let loaded = catch_unwind(AssertUnwindSafe(|| {
        LoadedGraph::try_new(io, memlane_kernels::graph::load)
    }));
    let graph = match loaded {
        Ok(Ok(g)) => g,
        _ => {
            reject(&files.dir, "hnsw_rs could not read it");
            return None;
        }
    };
    let points = graph.with_dependent(|_, g| memlane_kernels::graph::points(g));
    if points != files.points {
        reject(&files.dir, "its point count disagrees with its manifest");
        return None;
    }
    Some(graph)
}

#[cfg(test)]
mod tests {
    use super::super::unit;
    use super::*;
    use crate::store::{apply, MemStore, NewMemory, Write, WriteBatch};

    fn writes(range: std::ops::Range<usize>, dim: usize) -> Vec<Write> {
        range
            .map(|i| {
                let mut r = crate::record::MemoryRecord {
                    id: uuid::Uuid::new_v4(),
                    memory: format!("m{i}"),
                    owners: Default::default(),
                    metadata: Default::default(),
                    categories: vec![],
                    immutable: false,
                    expiration_date: None,
                    created_at: crate::record::now(),
                    updated_at: crate::record::now(),
                    hash: String::new(),
                    context: None,
                    valid_from: crate::record::now(),
                    valid_until: None,
                    superseded_by: None,
                };
                r.owners.user_id = Some("u".into());
                Write::Insert(NewMemory::new(r, unit(i, dim), vec![]))
            })
            .collect()
    }

    /// The index of `store` saved in `dir` (store id "s"), opened as `Memory` opens it.
    async fn open_in(
        store: &MemStore,
        dim: usize,
        params: IndexParams,
        dir: &Path,
    ) -> Result<std::sync::Arc<VectorIndex>> {
        VectorIndex::open(store, dim, params, Some(dir.into()), "s".into(), None).await
    }

    /// Dimension of the helpers' vectors.
    const DIM: usize = 16;

    /// A store of 30 memories of [`DIM`] dimensions whose index was opened, saved in a new
    /// directory and closed.
    async fn saved() -> (tempfile::TempDir, MemStore) {
        let dir = tempfile::tempdir().unwrap();
        let store = MemStore::new();
        apply(&store, WriteBatch::new(writes(0..30, DIM), 0))
            .await
            .unwrap();
        let index = open_in(&store, DIM, IndexParams::default(), dir.path())
            .await
            .unwrap();
        index.save().unwrap();
        drop(index);
        (dir, store)
    }

    /// Rewrites the manifest of the generation `CURRENT` names in `dir`.
    fn edit_manifest(dir: &Path, edit: impl FnOnce(&mut serde_json::Value)) {
        let current = std::fs::read_to_string(dir.join("CURRENT")).unwrap();
        let path = dir.join(current.trim()).join("manifest.json");
        let mut manifest: serde_json::Value =
            serde_json::from_slice(&std::fs::read(&path).unwrap()).unwrap();
        edit(&mut manifest);
        std::fs::write(&path, serde_json::to_vec(&manifest).unwrap()).unwrap();
    }

    /// While a saved graph loads, searches rank exactly from the state, and writes meanwhile
    /// reach the graph when it is swapped in; a graph that could not be loaded is rebuilt
    /// from the state's vectors.
    #[tokio::test]
    async fn searches_stay_exact_and_whole_while_the_graph_is_out() {
        let store = MemStore::new();
        let dim = 16;
        apply(&store, WriteBatch::new(writes(0..60, dim), 0))
            .await
            .unwrap();
        let index = VectorIndex::open(&store, dim, IndexParams::default(), None, "s".into(), None)
            .await
            .unwrap();
        *index.graph.write().unwrap() = GraphHolder::Loading;
        assert!(!index.graph_ready().unwrap());
        apply(&store, WriteBatch::new(writes(60..70, dim), 0))
            .await
            .unwrap();
        index.refresh(&store).await.unwrap();
        for i in 0..70 {
            let hits = index.search(&unit(i, dim), 3, 0, None).unwrap();
            assert_eq!(hits[0].0, i as u64 + 1, "query {i} while loading: {hits:?}");
            assert!((hits[0].1 - 1.0).abs() < 1e-4, "query {i}: {hits:?}");
        }
        index.install_loaded(None).unwrap();
        assert!(index.graph_ready().unwrap());
        assert_eq!(index.state.read().unwrap().points, 70);
        for i in 0..70 {
            let hits = index.search(&unit(i, dim), 1, 0, None).unwrap();
            assert_eq!(
                hits[0].0,
                i as u64 + 1,
                "query {i} after the swap: {hits:?}"
            );
        }
    }

    #[tokio::test]
    async fn insert_after_load_keeps_keys_and_vectors_together() {
        let (dir, store) = saved().await;
        let (dim, params) = (DIM, IndexParams::default());
        apply(&store, WriteBatch::new(writes(30..35, dim), 0))
            .await
            .unwrap();
        let index = open_in(&store, dim, params, dir.path()).await.unwrap();
        index.wait_for_graph().unwrap();
        assert!(matches!(
            *index.graph.read().unwrap(),
            GraphHolder::Loaded(_)
        ));
        for i in 0..35 {
            let hits = index.search(&unit(i, dim), 1, 0, None).unwrap();
            assert_eq!(hits[0].0, i as u64 + 1, "query {i}: {hits:?}");
            assert!((hits[0].1 - 1.0).abs() < 1e-4, "query {i}: {hits:?}");
        }
    }

    /// The keys of owner `u`, as the index lists them.
    fn keys_of_u(index: &VectorIndex) -> Vec<VectorKey> {
        index
            .owner_keys(&[(crate::filter::OwnerField::User, "u")])
            .unwrap()
    }

    /// A saved state lists each owner's keys; one written before owners were kept opens
    /// with its graph and the store's owners, and the next save keeps them.
    #[tokio::test]
    async fn owners_are_saved_and_a_state_without_them_takes_them_from_the_store() {
        let (dir, store) = saved().await;
        let all: Vec<VectorKey> = (1..=30).collect();
        let index = open_in(&store, DIM, IndexParams::default(), dir.path())
            .await
            .unwrap();
        assert_eq!(
            keys_of_u(&index),
            all,
            "owners come back from the state file"
        );
        index.wait_for_graph().unwrap();
        drop(index);

        // The state file as the earlier format wrote it: its magic, no owner section.
        let current = std::fs::read_to_string(dir.path().join("CURRENT")).unwrap();
        let path = dir.path().join(current.trim()).join(STATE_FILE);
        let mut bytes = std::fs::read(&path).unwrap();
        bytes.truncate(64 + 30 * 32 + 30 * DIM * 4);
        bytes[..8].copy_from_slice(b"MLSTATE1");
        std::fs::write(&path, &bytes).unwrap();
        let (len, crc) = (bytes.len(), crc32fast::hash(&bytes));
        edit_manifest(dir.path(), |manifest| {
            manifest["state"]["bytes"] = len.into();
            manifest["state"]["crc32"] = crc.into();
        });
        let index = open_in(&store, DIM, IndexParams::default(), dir.path())
            .await
            .unwrap();
        assert!(
            index.graph_ready().unwrap(),
            "the graph came in with the open"
        );
        assert_eq!(keys_of_u(&index), all, "owners come from the store");
        index.save().unwrap();
        drop(index);
        let index = open_in(&store, DIM, IndexParams::default(), dir.path())
            .await
            .unwrap();
        assert_eq!(keys_of_u(&index), all, "the next save wrote them");
        index.wait_for_graph().unwrap();
    }

    /// A state file whose vectors were damaged after it was written is given up when its
    /// checksum, summed beside the open, disagrees: the index comes from the store, and
    /// ranks with the stored vectors, not the damaged ones.
    #[tokio::test]
    async fn a_state_file_with_a_damaged_vector_is_rebuilt_from_the_store() {
        let (dir, store) = saved().await;
        let current = std::fs::read_to_string(dir.path().join("CURRENT")).unwrap();
        let path = dir.path().join(current.trim()).join(STATE_FILE);
        let mut bytes = std::fs::read(&path).unwrap();
        // The last byte (sign and exponent) of the first value of key 6's vector.
        let slot = 5;
        bytes[64 + 30 * 32 + slot * DIM * 4 + 3] ^= 0x40;
        std::fs::write(&path, &bytes).unwrap();
        let index = open_in(&store, DIM, IndexParams::default(), dir.path())
            .await
            .unwrap();
        assert_eq!(index.vectors(&[6]).unwrap(), vec![(6, unit(slot, DIM))]);
        assert_eq!(index.live_count().unwrap(), 30);
        index.wait_for_graph().unwrap();
    }

    /// A generation saved in an earlier format is not loaded: the graph is rebuilt from
    /// the store, whole.
    #[tokio::test]
    async fn a_generation_of_an_earlier_format_is_rebuilt() {
        let (dir, store) = saved().await;
        let (dim, params) = (DIM, IndexParams::default());
        edit_manifest(dir.path(), |manifest| {
            manifest["format"] = (FORMAT - 1).into()
        });

        let index = open_in(&store, dim, params, dir.path()).await.unwrap();
        index.wait_for_graph().unwrap();
        assert!(matches!(
            *index.graph.read().unwrap(),
            GraphHolder::Fresh(_)
        ));
        for i in 0..30 {
            let hits = index.search(&unit(i, dim), 1, 0, None).unwrap();
            assert_eq!(hits[0].0, i as u64 + 1, "query {i}: {hits:?}");
        }
    }

    /// A generation saved before state files existed opens with its graph loaded and its
    /// state read from the store; live vectors its graph lacks (here: a manifest claiming
    /// keys its graph never got) are inserted from that state.
    #[tokio::test]
    async fn a_generation_without_a_state_file_opens_from_the_store_and_fills_its_graph() {
        let (dir, store) = saved().await;
        let (dim, params) = (DIM, IndexParams::default());
        apply(&store, WriteBatch::new(writes(30..35, dim), 0))
            .await
            .unwrap();
        edit_manifest(dir.path(), |manifest| {
            let obj = manifest.as_object_mut().unwrap();
            assert!(obj.remove("state").is_some());
            obj.insert("max_key".into(), 35.into());
        });

        let index = open_in(&store, dim, params, dir.path()).await.unwrap();
        assert!(matches!(
            *index.graph.read().unwrap(),
            GraphHolder::Loaded(_)
        ));
        assert_eq!(index.state.read().unwrap().points, 35);
        for i in 0..35 {
            let hits = index.search(&unit(i, dim), 1, 0, None).unwrap();
            assert_eq!(hits[0].0, i as u64 + 1, "query {i}: {hits:?}");
        }
    }
}
