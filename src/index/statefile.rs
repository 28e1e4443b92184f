//! The state file of a saved generation: which memories the index holds, under which keys,
//! when they expire, and their exact vectors. With it an open needs neither a pass over the
//! store nor the vectors in the heap: the records are read, the vectors mapped (see
//! `mapped`), and only the change log since the generation's cursor is replayed.
//!
//! Layout, in the writer's byte order (recorded in the header, and a reader of another
//! order rejects the file):
//! - a header of 64 bytes: magic `MLSTATE1`, the byte-order mark `0x0102_0304` as u32, the
//!   dimension as u32, the record count as u64, zeros;
//! - one record of 32 bytes per live memory, by key: key u64, memory id (16 bytes), expiry
//!   in microseconds as i64 (`i64::MIN`: none);
//! - the vectors, `dimension` f32 each, in the records' order.
//!
//! The manifest holds the file's length and CRC-32, checked on every load.

use std::fs::File;
use std::io::{self, BufWriter, Read, Write};
use std::path::Path;

use uuid::Uuid;

use super::mapped::MappedVectors;
use crate::store::VectorKey;

const MAGIC: &[u8; 8] = b"MLSTATE1";
const BOM: u32 = 0x0102_0304;
const HEADER: usize = 64;
const RECORD: usize = 32;

/// One live memory of the index.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(super) struct Record {
    pub(super) key: VectorKey,
    pub(super) id: Uuid,
    pub(super) expires_at: Option<i64>,
}

/// A state file as read: its records, and their vectors mapped in the same order.
#[derive(Debug)]
pub(super) struct SavedState {
    pub(super) records: Vec<Record>,
    /// `None` when there are no records.
    pub(super) vectors: Option<MappedVectors>,
}

/// What the manifest records of a state file.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub(super) struct Written {
    pub(super) count: usize,
    pub(super) bytes: u64,
    pub(super) crc32: u32,
}

struct Counting<W> {
    inner: W,
    crc: crc32fast::Hasher,
    bytes: u64,
}

impl<W: Write> Write for Counting<W> {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        let n = self.inner.write(buf)?;
        let written = buf.get(..n).unwrap_or(buf);
        self.crc.update(written);
        self.bytes += n as u64;
        Ok(n)
    }

    fn flush(&mut self) -> io::Result<()> {
        self.inner.flush()
    }
}

fn invalid(what: impl Into<String>) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidData, what.into())
}

/// Writes the records (sorted by key here) and their vectors to a new file at `path`, synced.
/// Every record's vector must be at hand, of `dimension` values.
pub(super) fn write<'v>(
    path: &Path,
    dimension: usize,
    mut records: Vec<Record>,
    vector: impl Fn(VectorKey) -> Option<&'v [f32]>,
) -> io::Result<Written> {
    records.sort_unstable_by_key(|r| r.key);
    let file = File::create(path)?;
    let mut out = Counting {
        inner: BufWriter::with_capacity(1 << 20, file),
        crc: crc32fast::Hasher::new(),
        bytes: 0,
    };
    let mut header = [0u8; HEADER];
    header[..8].copy_from_slice(MAGIC);
    header[8..12].copy_from_slice(&BOM.to_ne_bytes());
    let dim = u32::try_from(dimension).map_err(|_| invalid("dimension too large"))?;
    header[12..16].copy_from_slice(&dim.to_ne_bytes());
    header[16..24].copy_from_slice(&(records.len() as u64).to_ne_bytes());
    out.write_all(&header)?;
    for r in &records {
        let mut rec = [0u8; RECORD];
        rec[..8].copy_from_slice(&r.key.to_ne_bytes());
        rec[8..24].copy_from_slice(r.id.as_bytes());
        rec[24..].copy_from_slice(&r.expires_at.unwrap_or(i64::MIN).to_ne_bytes());
        out.write_all(&rec)?;
    }
    let mut bytes = Vec::with_capacity(dimension * 4);
    for r in &records {
        let v = vector(r.key)
            .filter(|v| v.len() == dimension)
            .ok_or_else(|| invalid(format!("no vector of {dimension} values for key {}", r.key)))?;
        bytes.clear();
        for x in v {
            bytes.extend_from_slice(&x.to_ne_bytes());
        }
        out.write_all(&bytes)?;
    }
    out.flush()?;
    let Counting { inner, crc, bytes } = out;
    let file = inner.into_inner().map_err(|e| e.into_error())?;
    file.sync_all()?;
    Ok(Written {
        count: records.len(),
        bytes,
        crc32: crc.finalize(),
    })
}

/// Reads the state file at `path` if it is exactly what the manifest recorded (length,
/// CRC-32, count) and of this `dimension`; its vectors are mapped, not read into the heap.
pub(super) fn read(path: &Path, dimension: usize, expected: &Written) -> io::Result<SavedState> {
    let mut file = File::open(path)?;
    if file.metadata()?.len() != expected.bytes {
        return Err(invalid("state file length differs from its manifest"));
    }
    // The arena addresses mapped vectors with 31 bits.
    if expected.count >= 1 << 31 {
        return Err(invalid(
            "state file holds more vectors than an index can map",
        ));
    }
    let head_len = expected
        .count
        .checked_mul(RECORD)
        .and_then(|n| n.checked_add(HEADER))
        .filter(|n| (*n as u64) <= expected.bytes)
        .ok_or_else(|| invalid("state file record count out of range"))?;
    // The header and records are kept; the vectors only pass through the checksum.
    let mut head = vec![0u8; head_len];
    file.read_exact(&mut head)?;
    let mut crc = crc32fast::Hasher::new();
    crc.update(&head);
    let mut buf = vec![0u8; 4 << 20];
    loop {
        let n = file.read(&mut buf)?;
        if n == 0 {
            break;
        }
        crc.update(buf.get(..n).unwrap_or(&buf));
    }
    if crc.finalize() != expected.crc32 {
        return Err(invalid("state file checksum mismatch"));
    }
    let u32_at = |at: usize| -> u32 {
        let mut b = [0u8; 4];
        b.copy_from_slice(head.get(at..at + 4).unwrap_or(&[0; 4]));
        u32::from_ne_bytes(b)
    };
    let u64_at = |at: usize| -> u64 {
        let mut b = [0u8; 8];
        b.copy_from_slice(head.get(at..at + 8).unwrap_or(&[0; 8]));
        u64::from_ne_bytes(b)
    };
    if head.get(..8) != Some(MAGIC.as_slice()) || u32_at(8) != BOM {
        return Err(invalid("not a state file of this byte order"));
    }
    if u32_at(12) as usize != dimension || u64_at(16) as usize != expected.count {
        return Err(invalid("state file dimension or count differs"));
    }
    let vector_bytes = (expected.count * dimension * 4) as u64;
    if head_len as u64 + vector_bytes != expected.bytes {
        return Err(invalid("state file length does not match its count"));
    }
    let mut records = Vec::with_capacity(expected.count);
    for i in 0..expected.count {
        let at = HEADER + i * RECORD;
        let mut id = [0u8; 16];
        id.copy_from_slice(head.get(at + 8..at + 24).unwrap_or(&[0; 16]));
        let expiry = u64_at(at + 24) as i64;
        records.push(Record {
            key: u64_at(at),
            id: Uuid::from_bytes(id),
            expires_at: (expiry != i64::MIN).then_some(expiry),
        });
    }
    let vectors = if expected.count == 0 {
        None
    } else {
        Some(MappedVectors::map(
            &file,
            head_len,
            expected.count,
            dimension,
        )?)
    };
    Ok(SavedState { records, vectors })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn records(n: usize) -> (Vec<Record>, Vec<Vec<f32>>) {
        let records = (0..n)
            .map(|i| Record {
                key: (n - i) as VectorKey * 3,
                id: Uuid::from_u128(i as u128 + 7),
                expires_at: (i % 2 == 0).then_some(i as i64 * 1000 - 5),
            })
            .collect();
        let vectors = (0..n)
            .map(|i| vec![i as f32, -(i as f32) / 3.0, 0.25])
            .collect();
        (records, vectors)
    }

    #[test]
    fn a_state_file_reads_back_as_written_and_rejects_any_change() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("state.bin");
        let (recs, vecs) = records(50);
        let by_key = |key: VectorKey| {
            recs.iter()
                .position(|r| r.key == key)
                .map(|i| vecs[i].as_slice())
        };
        let written = write(&path, 3, recs.clone(), by_key).unwrap();
        assert_eq!(written.count, 50);
        let state = read(&path, 3, &written).unwrap();
        let mut sorted = recs.clone();
        sorted.sort_by_key(|r| r.key);
        assert_eq!(state.records, sorted, "records come back by key");
        let mapped = state.vectors.as_ref().unwrap();
        for (slot, r) in state.records.iter().enumerate() {
            assert_eq!(mapped.get(slot), by_key(r.key), "vector of key {}", r.key);
        }
        assert_eq!(mapped.get(50), None);
        // The map must not outlive the file as written (see `mapped`).
        drop(state);

        // Wrong dimension, wrong count, a flipped byte, a truncated file: all refused.
        assert!(read(&path, 4, &written).is_err());
        let wrong_count = Written {
            count: 49,
            ..written
        };
        assert!(read(&path, 3, &wrong_count).is_err());
        let mut bytes = std::fs::read(&path).unwrap();
        let last = bytes.len() - 1;
        bytes[last] ^= 1;
        std::fs::write(&path, &bytes).unwrap();
        assert!(
            read(&path, 3, &written).is_err(),
            "a flipped byte is caught"
        );
        bytes.truncate(last);
        std::fs::write(&path, &bytes).unwrap();
        assert!(read(&path, 3, &written).is_err(), "a short file is caught");
    }

    #[test]
    fn a_record_without_its_vector_is_an_error_not_a_short_file() {
        let dir = tempfile::tempdir().unwrap();
        let (recs, _) = records(3);
        let err = write(&dir.path().join("s"), 3, recs, |_| None).unwrap_err();
        assert_eq!(err.kind(), io::ErrorKind::InvalidData);
    }
}
