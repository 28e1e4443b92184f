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
//! - the vectors, `dimension` f32 each, in the records' order;
//! - the owners (files of magic `MLSTATE2`; `MLSTATE1` files end with the vectors): the
//!   number of distinct owner sets as u32; each set as its user, agent, app and run id,
//!   each a u32 length (`u32::MAX`: none) and that many UTF-8 bytes; then one u32 per
//!   record, in the records' order: the index of its owner set.
//!
//! The manifest holds the file's length and CRC-32, checked on every load (the vectors'
//! part is summed on threads of their own while the rest of the file is read and restored,
//! and an open waits for it before it trusts what it read).

use std::fs::File;
use std::io::{self, BufWriter, Read, Seek, SeekFrom, Write};
use std::path::Path;

use std::collections::HashMap;

use uuid::Uuid;

use super::mapped::MappedVectors;
use crate::record::Owners;
use crate::store::VectorKey;

const MAGIC: &[u8; 8] = b"MLSTATE2";
/// Files written before the owners were kept: read, but without owners.
const MAGIC_V1: &[u8; 8] = b"MLSTATE1";
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
    /// The distinct owner sets, and each record's (an index into them, in the records'
    /// order); `None` in a file written before owners were kept.
    pub(super) owners: Option<(Vec<Owners>, Vec<u32>)>,
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

/// Writes the records (sorted by key here), their vectors and their owners to a new file at
/// `path`, synced. Every record's vector must be at hand, of `dimension` values, and its
/// owners too.
pub(super) fn write<'v>(
    path: &Path,
    dimension: usize,
    mut records: Vec<Record>,
    vector: impl Fn(VectorKey) -> Option<&'v [f32]>,
    owners: impl Fn(VectorKey) -> Option<&'v Owners>,
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
    let mut sets: Vec<&Owners> = Vec::new();
    let mut set_ids: HashMap<&Owners, u32> = HashMap::new();
    let mut of_record = Vec::with_capacity(records.len());
    for r in &records {
        let o = owners(r.key).ok_or_else(|| invalid(format!("no owners for key {}", r.key)))?;
        let id = *set_ids.entry(o).or_insert_with(|| {
            sets.push(o);
            sets.len() as u32 - 1
        });
        of_record.push(id);
    }
    out.write_all(&(sets.len() as u32).to_ne_bytes())?;
    for o in sets {
        for id in [&o.user_id, &o.agent_id, &o.app_id, &o.run_id] {
            match id {
                Some(id) => {
                    let len = u32::try_from(id.len())
                        .ok()
                        .filter(|l| *l != u32::MAX)
                        .ok_or_else(|| invalid("owner id too long"))?;
                    out.write_all(&len.to_ne_bytes())?;
                    out.write_all(id.as_bytes())?;
                }
                None => out.write_all(&u32::MAX.to_ne_bytes())?,
            }
        }
    }
    let mut bytes = Vec::with_capacity(of_record.len() * 4);
    for id in of_record {
        bytes.extend_from_slice(&id.to_ne_bytes());
    }
    out.write_all(&bytes)?;
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

/// Reads the state file at `path` if it is what the manifest recorded (length, count) and
/// of this `dimension`; its vectors are mapped, not read into the heap. Its CRC-32 comes
/// back still being summed, beside it: what was read is not to be trusted until
/// [`Check::wait`] says the file is exactly the one the manifest recorded.
pub(super) fn read(
    path: &Path,
    dimension: usize,
    expected: &Written,
) -> io::Result<(SavedState, Check)> {
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
    // The header, records and owners are kept; the vectors only pass through the checksum,
    // summed on threads of their own while the rest is read and restored.
    let mut head = vec![0u8; head_len];
    file.read_exact(&mut head)?;
    let mut head_crc = crc32fast::Hasher::new();
    head_crc.update(&head);
    let vector_bytes = expected
        .count
        .checked_mul(dimension)
        .and_then(|n| n.checked_mul(4))
        .filter(|n| (head_len as u64).saturating_add(*n as u64) <= expected.bytes)
        .ok_or_else(|| invalid("state file length does not match its count"))?;
    let vectors_crc = VectorSum::start(path, head_len as u64, vector_bytes)?;
    file.seek(SeekFrom::Start(head_len as u64 + vector_bytes as u64))?;
    let mut tail = Vec::new();
    file.read_to_end(&mut tail)?;
    let mut tail_crc = crc32fast::Hasher::new();
    tail_crc.update(&tail);
    let check = Check {
        head: head_crc,
        vectors: vectors_crc,
        tail: tail_crc,
        expected: expected.crc32,
    };
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
    let with_owners = match head.get(..8) {
        Some(m) if m == MAGIC.as_slice() => true,
        Some(m) if m == MAGIC_V1.as_slice() => false,
        _ => return Err(invalid("not a state file")),
    };
    if u32_at(8) != BOM {
        return Err(invalid("not a state file of this byte order"));
    }
    if u32_at(12) as usize != dimension || u64_at(16) as usize != expected.count {
        return Err(invalid("state file dimension or count differs"));
    }
    let owners = match with_owners {
        true => Some(read_owners(&tail, expected.count)?),
        false if tail.is_empty() => None,
        false => return Err(invalid("state file length does not match its count")),
    };
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
    Ok((
        SavedState {
            records,
            vectors,
            owners,
        },
        check,
    ))
}

/// The checksum of a state file, its vectors' part still being summed (see [`read`]).
#[derive(Debug)]
pub(super) struct Check {
    head: crc32fast::Hasher,
    vectors: VectorSum,
    tail: crc32fast::Hasher,
    expected: u32,
}

impl Check {
    /// Waits for the vectors' sum, then compares the file's with the manifest's.
    pub(super) fn wait(self) -> io::Result<()> {
        let mut crc = self.head;
        crc.combine(&self.vectors.wait()?);
        crc.combine(&self.tail);
        if crc.finalize() != self.expected {
            return Err(invalid("state file checksum mismatch"));
        }
        Ok(())
    }
}

/// The CRC-32 of the vectors' part of a state file: at a million memories, 1.5 GB to read,
/// which takes longer than everything else an open does. It is summed in parts, one per
/// core (at most [`MAX_PARTS`]), each on a thread of its own (or at once, where no thread
/// can be started), while the records are restored; the parts' sums are combined in order.
#[derive(Debug)]
struct VectorSum {
    parts: Vec<PartSum>,
}

#[derive(Debug)]
enum PartSum {
    Summing(std::thread::JoinHandle<io::Result<crc32fast::Hasher>>),
    Summed(crc32fast::Hasher),
}

/// Vectors' parts shorter than this are not split further: a thread costs more than it
/// saves.
const MIN_PART: usize = 16 << 20;

/// The most parts a sum is split into: each holds a file handle and a buffer of
/// [`SUM_CHUNK`], and a few cores already read faster than memory can deliver.
const MAX_PARTS: usize = 8;

/// What each read of a sum takes.
const SUM_CHUNK: usize = 4 << 20;

impl VectorSum {
    fn start(path: &Path, offset: u64, len: usize) -> io::Result<VectorSum> {
        let threads = std::thread::available_parallelism().map_or(1, usize::from);
        let parts = threads.min(MAX_PARTS).min(len / MIN_PART).max(1);
        Self::in_parts(path, offset, len, parts)
    }

    /// Sums `len` bytes from `offset` in `parts` parts of (nearly) equal length.
    fn in_parts(path: &Path, offset: u64, len: usize, parts: usize) -> io::Result<VectorSum> {
        let mut summing = Vec::with_capacity(parts);
        // Bounds in u64: `len * parts` may not fit a 32-bit usize.
        let bound = |part: usize| (len as u64 * part as u64 / parts as u64) as usize;
        for part in 0..parts {
            let (from, to) = (bound(part), bound(part + 1));
            let at = offset + from as u64;
            // A handle of its own: the reader's moves on to the owners meanwhile.
            let file = File::open(path)?;
            let spawned = std::thread::Builder::new()
                .name("memlane-index-check".into())
                .spawn(move || sum(file, at, to - from));
            summing.push(match spawned {
                Ok(handle) => PartSum::Summing(handle),
                Err(_) => PartSum::Summed(sum(File::open(path)?, at, to - from)?),
            });
        }
        Ok(VectorSum { parts: summing })
    }

    fn wait(self) -> io::Result<crc32fast::Hasher> {
        let mut crc = crc32fast::Hasher::new();
        for part in self.parts {
            let summed = match part {
                PartSum::Summing(handle) => handle
                    .join()
                    .map_err(|_| invalid("state file check failed"))??,
                PartSum::Summed(summed) => summed,
            };
            crc.combine(&summed);
        }
        Ok(crc)
    }
}

/// The CRC-32 of `len` bytes of `file` from `offset`.
fn sum(mut file: File, offset: u64, len: usize) -> io::Result<crc32fast::Hasher> {
    file.seek(SeekFrom::Start(offset))?;
    let mut crc = crc32fast::Hasher::new();
    let mut buf = vec![0u8; SUM_CHUNK.min(len.max(1))];
    let mut left = len;
    while left > 0 {
        let n = file.read(&mut buf[..left.min(SUM_CHUNK)])?;
        if n == 0 {
            return Err(invalid("state file shorter than its vectors"));
        }
        crc.update(buf.get(..n).unwrap_or(&buf));
        left -= n;
    }
    Ok(crc)
}

/// The owner section of a state file: the sets, and each of `count` records' set.
fn read_owners(bytes: &[u8], count: usize) -> io::Result<(Vec<Owners>, Vec<u32>)> {
    let mut at = 0usize;
    let mut take = |n: usize| -> io::Result<&[u8]> {
        let taken = at
            .checked_add(n)
            .and_then(|end| bytes.get(at..end))
            .ok_or_else(|| invalid("state file owner section is cut short"))?;
        at += n;
        Ok(taken)
    };
    fn number(b: &[u8]) -> u32 {
        let mut n = [0u8; 4];
        n.copy_from_slice(b.get(..4).unwrap_or(&[0; 4]));
        u32::from_ne_bytes(n)
    }
    let sets = number(take(4)?) as usize;
    if sets > count.max(1) {
        return Err(invalid("state file has more owner sets than records"));
    }
    let mut owners = Vec::with_capacity(sets);
    for _ in 0..sets {
        let mut ids: [Option<String>; 4] = Default::default();
        for id in &mut ids {
            let len = number(take(4)?);
            if len != u32::MAX {
                let text = std::str::from_utf8(take(len as usize)?)
                    .map_err(|_| invalid("state file owner id is not UTF-8"))?;
                *id = Some(text.to_owned());
            }
        }
        let [user_id, agent_id, app_id, run_id] = ids;
        owners.push(Owners {
            user_id,
            agent_id,
            app_id,
            run_id,
        });
    }
    let mut of_record = Vec::with_capacity(count);
    for _ in 0..count {
        let set = number(take(4)?);
        if set as usize >= owners.len() {
            return Err(invalid("state file record names no owner set"));
        }
        of_record.push(set);
    }
    if take(1).is_ok() {
        return Err(invalid("state file length does not match its count"));
    }
    Ok((owners, of_record))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// [`read`], and its checksum waited for.
    fn read_checked(path: &Path, dimension: usize, written: &Written) -> io::Result<SavedState> {
        let (state, check) = read(path, dimension, written)?;
        check.wait()?;
        Ok(state)
    }

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

    /// A sum in parts is the sum of the whole, for parts of any length (from an odd offset,
    /// of an odd length, across the reads' chunks), and a change in any part changes it.
    #[test]
    fn the_vectors_summed_in_parts_sum_as_the_whole() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("bytes");
        let bytes: Vec<u8> = (0..SUM_CHUNK * 2 + 1001)
            .map(|i| (i * 7919 % 251) as u8)
            .collect();
        std::fs::write(&path, &bytes).unwrap();
        let (offset, len) = (13, bytes.len() - 13 - 7);
        let whole = crc32fast::hash(&bytes[offset..offset + len]);
        let summed = |path: &Path, parts: usize| {
            VectorSum::in_parts(path, offset as u64, len, parts)
                .unwrap()
                .wait()
                .unwrap()
                .finalize()
        };
        let mut checked = 0;
        for parts in [1, 2, 3, 5] {
            assert_eq!(summed(&path, parts), whole, "{parts} parts");
            // One byte changed in each part (its middle) changes the sum.
            for part in 0..parts {
                let mut changed = bytes.clone();
                changed[offset + len * (2 * part + 1) / (2 * parts)] ^= 0x40;
                let other = dir.path().join("changed");
                std::fs::write(&other, &changed).unwrap();
                let expected = crc32fast::hash(&changed[offset..offset + len]);
                assert_ne!(expected, whole);
                assert_eq!(summed(&other, parts), expected, "part {part} of {parts}");
                checked += 1;
            }
        }
        assert_eq!(checked, 11);
        // A file shorter than the part it should hold is an error, not a sum.
        let short = dir.path().join("short");
        std::fs::write(&short, &bytes[..offset + len / 2]).unwrap();
        assert!(VectorSum::in_parts(&short, offset as u64, len, 2)
            .unwrap()
            .wait()
            .is_err());
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
        let owners: Vec<Owners> = (0..3)
            .map(|i| Owners {
                user_id: Some(format!("user {i}")),
                run_id: (i == 1).then(|| "run".to_owned()),
                ..Owners::default()
            })
            .collect();
        let owners_of = |key: VectorKey| owners.get(key as usize / 3 % 3);
        let written = write(&path, 3, recs.clone(), by_key, owners_of).unwrap();
        assert_eq!(written.count, 50);
        let state = read_checked(&path, 3, &written).unwrap();
        let mut sorted = recs.clone();
        sorted.sort_by_key(|r| r.key);
        assert_eq!(state.records, sorted, "records come back by key");
        let (sets, of_record) = state.owners.as_ref().unwrap();
        assert_eq!(sets.len(), 3, "each owner set once");
        for (r, set) in state.records.iter().zip(of_record) {
            assert_eq!(
                Some(&sets[*set as usize]),
                owners_of(r.key),
                "owners of {}",
                r.key
            );
        }
        let mapped = state.vectors.as_ref().unwrap();
        for (slot, r) in state.records.iter().enumerate() {
            assert_eq!(mapped.get(slot), by_key(r.key), "vector of key {}", r.key);
        }
        assert_eq!(mapped.get(50), None);
        // The map must not outlive the file as written (see `mapped`).
        drop(state);

        // Wrong dimension, wrong count, a flipped byte, a truncated file: all refused.
        assert!(read_checked(&path, 4, &written).is_err());
        let wrong_count = Written {
            count: 49,
            ..written
        };
        assert!(read_checked(&path, 3, &wrong_count).is_err());
        let mut bytes = std::fs::read(&path).unwrap();
        // A byte of a record, of a vector and of the owners: each is caught, the vector's
        // by the sum taken beside the read.
        let vector = HEADER + 50 * RECORD + 7;
        let mut flips = 0;
        for at in [HEADER + 3, vector, bytes.len() - 1] {
            bytes[at] ^= 1;
            std::fs::write(&path, &bytes).unwrap();
            assert!(
                read_checked(&path, 3, &written).is_err(),
                "a flipped byte at {at} is caught"
            );
            bytes[at] ^= 1;
            flips += 1;
        }
        assert_eq!(flips, 3);
        std::fs::write(&path, &bytes).unwrap();
        assert!(read_checked(&path, 3, &written).is_ok());
        let last = bytes.len() - 1;
        bytes.truncate(last);
        std::fs::write(&path, &bytes).unwrap();
        assert!(
            read_checked(&path, 3, &written).is_err(),
            "a short file is caught"
        );
    }

    #[test]
    fn a_record_without_its_vector_is_an_error_not_a_short_file() {
        let dir = tempfile::tempdir().unwrap();
        let (recs, _) = records(3);
        let owners = Owners::default();
        let err = write(
            &dir.path().join("s"),
            3,
            recs.clone(),
            |_| None,
            |_| Some(&owners),
        );
        assert_eq!(err.unwrap_err().kind(), io::ErrorKind::InvalidData);
        let v = [0.0f32; 3];
        let err = write(&dir.path().join("s"), 3, recs, |_| Some(&v[..]), |_| None);
        assert_eq!(err.unwrap_err().kind(), io::ErrorKind::InvalidData);
    }

    /// A file written before owners were kept reads back without them.
    #[test]
    fn a_file_without_owners_reads_back_without_them() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("state.bin");
        let (recs, vecs) = records(4);
        let owners = Owners::default();
        let by_key = |key: VectorKey| {
            recs.iter()
                .position(|r| r.key == key)
                .map(|i| vecs[i].as_slice())
        };
        write(&path, 3, recs.clone(), by_key, |_| Some(&owners)).unwrap();
        // The same file as the earlier format wrote it: its magic, and no owner section.
        let mut bytes = std::fs::read(&path).unwrap();
        bytes.truncate(HEADER + 4 * RECORD + 4 * 3 * 4);
        bytes[..8].copy_from_slice(MAGIC_V1);
        std::fs::write(&path, &bytes).unwrap();
        let written = Written {
            count: 4,
            bytes: bytes.len() as u64,
            crc32: crc32fast::hash(&bytes),
        };
        let state = read_checked(&path, 3, &written).unwrap();
        assert_eq!(state.records.len(), 4);
        assert!(state.owners.is_none());
    }
}
