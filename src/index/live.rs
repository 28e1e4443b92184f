//! Which vector keys are live, when they expire, and their exact vectors.

use std::collections::HashMap;

use uuid::Uuid;

use super::mapped::MappedVectors;
use super::owners::OwnerKeys;
use crate::store::{StoredVector, VectorKey};

/// Which keys are live, when they expire, and their vectors.
#[derive(Default)]
pub(super) struct State {
    pub(super) bits: Vec<u64>,
    pub(super) expiring: HashMap<VectorKey, i64>,
    pub(super) live: usize,
    /// Live vectors, for exact ranking without a trip to the store.
    pub(super) arena: Arena,
    pub(super) max_key: VectorKey,
    /// The change-log cursor up to which the index reflects the store.
    pub(super) cursor: u64,
    /// The live key of each memory the index holds, hashed with foldhash (a seeded hash,
    /// faster than the standard library's SipHash: an open inserts every id).
    pub(super) ids: HashMap<Uuid, VectorKey, foldhash::fast::RandomState>,
    pub(super) points: usize,
    pub(super) unsaved: usize,
    /// The owners of each key, and the keys of each owner.
    pub(super) owners: OwnerKeys,
}

impl State {
    pub(super) fn is_live(&self, key: VectorKey, now: i64) -> bool {
        let (word, bit) = ((key / 64) as usize, key % 64);
        self.bits.get(word).is_some_and(|w| w & (1 << bit) != 0)
            && (self.expiring.is_empty() || self.expiring.get(&key).is_none_or(|&at| at > now))
    }

    /// Holds a stored vector: live, with its expiry, owners, memory and exact vector.
    pub(super) fn hold(&mut self, v: &StoredVector) {
        self.set(v.key, v.expires_at);
        self.owners.insert(v.key, &v.owners);
        self.arena.insert(v.key, &v.vector);
        self.ids.insert(v.id, v.key);
        self.max_key = self.max_key.max(v.key);
    }

    pub(super) fn set(&mut self, key: VectorKey, expires_at: Option<i64>) {
        let (word, bit) = ((key / 64) as usize, key % 64);
        if self.bits.len() <= word {
            self.bits.resize(word + 1, 0);
        }
        if let Some(w) = self.bits.get_mut(word) {
            if *w & (1 << bit) == 0 {
                self.live += 1;
            }
            *w |= 1 << bit;
        }
        if let Some(at) = expires_at {
            self.expiring.insert(key, at);
        }
    }

    /// Sets when a live key expires (`None`: never).
    pub(super) fn set_expiry(&mut self, key: VectorKey, expires_at: Option<i64>) {
        match expires_at {
            Some(at) => self.expiring.insert(key, at),
            None => self.expiring.remove(&key),
        };
    }

    pub(super) fn clear(&mut self, key: VectorKey) {
        let (word, bit) = ((key / 64) as usize, key % 64);
        if let Some(w) = self.bits.get_mut(word) {
            if *w & (1 << bit) != 0 {
                self.live -= 1;
            }
            *w &= !(1 << bit);
        }
        self.expiring.remove(&key);
        self.arena.remove(key);
        self.owners.remove(key);
    }

    /// Graph points a search may have to skip: retired, or live but expiring.
    pub(super) fn masked(&self) -> usize {
        self.points.saturating_sub(self.live) + self.expiring.len()
    }
}

/// The exact vector of each live key: those of the loaded generation through a memory map
/// (`mapped`), the rest in one flat heap buffer, slot per key; freed heap slots are reused.
///
/// Keys are issued densely by the store, so the slot of each key sits in a vector indexed
/// by key (4 bytes per key ever issued) rather than a hash map: a lookup is one load, which
/// matters when a search ranks thousands of vectors.
#[derive(Default)]
pub(super) struct Arena {
    pub(super) dimension: usize,
    /// `slots[key]`: 0 for none, `HEAP | i` for heap slot `i`, else mapped slot `n - 1`.
    slots: Vec<u32>,
    data: Vec<f32>,
    free: Vec<u32>,
    /// The loaded generation's vectors.
    mapped: Option<MappedVectors>,
}

const HEAP: u32 = 1 << 31;

impl Arena {
    /// An arena over a generation's mapped vectors: key `keys[i]` is vector `i`.
    pub(super) fn over(mapped: MappedVectors, keys: impl IntoIterator<Item = VectorKey>) -> Arena {
        let mut arena = Arena {
            dimension: mapped.dimension(),
            mapped: Some(mapped),
            ..Arena::default()
        };
        // Slots past 31 bits cannot be addressed; the state file's reader refuses them.
        for (i, key) in keys.into_iter().enumerate() {
            match u32::try_from(i + 1) {
                Ok(slot) if slot < HEAP => arena.set_slot(key, slot),
                _ => break,
            }
        }
        arena
    }

    fn slot(&self, key: VectorKey) -> u32 {
        usize::try_from(key)
            .ok()
            .and_then(|k| self.slots.get(k))
            .copied()
            .unwrap_or(0)
    }

    fn set_slot(&mut self, key: VectorKey, slot: u32) {
        let Ok(k) = usize::try_from(key) else {
            return;
        };
        if self.slots.len() <= k {
            self.slots.resize(k + 1, 0);
        }
        if let Some(s) = self.slots.get_mut(k) {
            *s = slot;
        }
    }

    pub(super) fn insert(&mut self, key: VectorKey, v: &[f32]) {
        self.dimension = v.len();
        let slot = match self.slot(key) {
            s if s & HEAP != 0 => s & !HEAP,
            _ => {
                let slot = self
                    .free
                    .pop()
                    .unwrap_or((self.data.len() / v.len().max(1)) as u32);
                self.set_slot(key, HEAP | slot);
                slot
            }
        };
        let at = slot as usize * v.len();
        if self.data.len() < at + v.len() {
            self.data.resize(at + v.len(), 0.0);
        }
        if let Some(dst) = self.data.get_mut(at..at + v.len()) {
            dst.copy_from_slice(v);
        }
    }

    pub(super) fn remove(&mut self, key: VectorKey) {
        let slot = self.slot(key);
        if slot & HEAP != 0 {
            self.free.push(slot & !HEAP);
        }
        if slot != 0 {
            self.set_slot(key, 0);
        }
    }

    pub(super) fn get(&self, key: VectorKey) -> Option<&[f32]> {
        match self.slot(key) {
            0 => None,
            s if s & HEAP != 0 => {
                let at = (s & !HEAP) as usize * self.dimension;
                self.data.get(at..at + self.dimension)
            }
            s => self.mapped.as_ref()?.get(s as usize - 1),
        }
    }

    /// Every key with a vector, in key order.
    pub(super) fn keys(&self) -> impl Iterator<Item = VectorKey> + '_ {
        self.slots
            .iter()
            .enumerate()
            .filter(|(_, s)| **s != 0)
            .map(|(k, _)| k as VectorKey)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn liveness_masks_and_expires() {
        let mut l = State::default();
        l.set(3, None);
        l.set(200, Some(100));
        assert!(l.is_live(3, 0) && l.is_live(200, 99));
        assert!(!l.is_live(200, 100) && !l.is_live(4, 0) && !l.is_live(10_000, 0));
        l.clear(3);
        assert!(!l.is_live(3, 0));
        assert_eq!(l.live, 1);
    }

    #[test]
    fn arena_reuses_slots() {
        let mut a = Arena::default();
        a.insert(1, &[1.0, 2.0]);
        a.insert(2, &[3.0, 4.0]);
        a.remove(1);
        a.insert(3, &[5.0, 6.0]);
        assert_eq!(a.get(3), Some(&[5.0, 6.0][..]));
        assert_eq!(a.get(2), Some(&[3.0, 4.0][..]));
        assert_eq!(a.get(1), None);
        assert_eq!(a.data.len(), 4);
        assert_eq!(a.keys().collect::<Vec<_>>(), vec![2, 3]);
    }
}
