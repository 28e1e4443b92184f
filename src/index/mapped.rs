//! Exact vectors of a saved generation, read through a memory map.
//!
//! At a million memories the exact f32 vectors take 1.5 GB; holding them all in the heap
//! made every open read them from SQLite and kept them resident. A saved generation keeps
//! them in its state file instead, and the index maps that file: a search reads the pages
//! of the vectors it ranks, and the kernel keeps or drops the rest like any file cache.
//!
//! One of the crate's two unsafe modules (with the FTS5 function; the encoder's matrix
//! products and the local model's kernels are in `memlane-kernels`). The
//! contract `memmap2` asks for: the file is not changed while mapped. State files are
//! written once into a temporary directory, synced and renamed into place, and nothing
//! writes them again; a later save of any process writes a new generation and only unlinks
//! old ones, which leaves an existing mapping intact. A user who truncates the file by hand
//! while a process maps it would crash that process with SIGBUS, as with any mapped file.
#![allow(unsafe_code)]

use std::fs::File;
use std::io;

use memmap2::{Mmap, MmapOptions};

/// `count` vectors of `dimension` native-endian f32, one after another, from `offset`.
pub(super) struct MappedVectors {
    map: Mmap,
    offset: usize,
    count: usize,
    dimension: usize,
}

impl std::fmt::Debug for MappedVectors {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MappedVectors")
            .field("count", &self.count)
            .field("dimension", &self.dimension)
            .finish_non_exhaustive()
    }
}

impl MappedVectors {
    /// Maps the vectors of a state file. The file must hold them all, and `offset` must be
    /// a multiple of 4 (the map starts on a page boundary, so every vector is then aligned).
    pub(super) fn map(
        file: &File,
        offset: usize,
        count: usize,
        dimension: usize,
    ) -> io::Result<MappedVectors> {
        let bad = |what: &str| io::Error::new(io::ErrorKind::InvalidData, what.to_owned());
        let end = count
            .checked_mul(dimension)
            .and_then(|n| n.checked_mul(4))
            .and_then(|n| n.checked_add(offset))
            .ok_or_else(|| bad("vector section too large"))?;
        if !offset.is_multiple_of(std::mem::align_of::<f32>()) {
            return Err(bad("vector section not aligned"));
        }
        if (file.metadata()?.len() as usize) < end {
            return Err(bad("state file shorter than its vectors"));
        }
        if end == 0 {
            // An empty file cannot be mapped; there is nothing to read either.
            return Err(bad("nothing to map"));
        }
        // SAFETY: the file is immutable once written (see the module docs) and at least
        // `end` bytes long, as checked above.
        let map = unsafe { MmapOptions::new().len(end).map(file)? };
        Ok(MappedVectors {
            map,
            offset,
            count,
            dimension,
        })
    }

    /// Vector `slot`, or `None` past the end.
    pub(super) fn get(&self, slot: usize) -> Option<&[f32]> {
        if slot >= self.count {
            return None;
        }
        let start = self.offset + slot * self.dimension * 4;
        let bytes = self.map.get(start..start + self.dimension * 4)?;
        let ptr = bytes.as_ptr();
        if !ptr.cast::<f32>().is_aligned() {
            return None;
        }
        // SAFETY: `bytes` is in bounds of the map, holds exactly `dimension` f32s, is aligned
        // for f32 (checked), every bit pattern is a valid f32, and the slice borrows `self`,
        // which owns the map.
        Some(unsafe { std::slice::from_raw_parts(ptr.cast::<f32>(), self.dimension) })
    }

    pub(super) fn dimension(&self) -> usize {
        self.dimension
    }
}
