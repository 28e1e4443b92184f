//! Which vector keys are live, when they expire, and their exact vectors.

use std::collections::HashMap;

use uuid::Uuid;

use crate::store::VectorKey;

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
    /// The live key of each memory the index holds.
    pub(super) ids: HashMap<Uuid, VectorKey>,
    pub(super) points: usize,
    pub(super) unsaved: usize,
}

impl State {
    pub(super) fn is_live(&self, key: VectorKey, now: i64) -> bool {
        let (word, bit) = ((key / 64) as usize, key % 64);
        self.bits.get(word).is_some_and(|w| w & (1 << bit) != 0)
            && (self.expiring.is_empty() || self.expiring.get(&key).is_none_or(|&at| at > now))
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
    }

    /// Graph points a search may have to skip: retired, or live but expiring.
    pub(super) fn masked(&self) -> usize {
        self.points.saturating_sub(self.live) + self.expiring.len()
    }
}

/// Vectors in one flat buffer, slot per key; freed slots are reused.
#[derive(Default)]
pub(super) struct Arena {
    pub(super) dimension: usize,
    pub(super) slots: HashMap<VectorKey, usize>,
    pub(super) data: Vec<f32>,
    pub(super) free: Vec<usize>,
}

impl Arena {
    pub(super) fn insert(&mut self, key: VectorKey, v: &[f32]) {
        self.dimension = v.len();
        let slot = match self.slots.get(&key) {
            Some(&slot) => slot,
            None => {
                let slot = self.free.pop().unwrap_or(self.data.len() / v.len().max(1));
                self.slots.insert(key, slot);
                slot
            }
        };
        let at = slot * v.len();
        if self.data.len() < at + v.len() {
            self.data.resize(at + v.len(), 0.0);
        }
        if let Some(dst) = self.data.get_mut(at..at + v.len()) {
            dst.copy_from_slice(v);
        }
    }

    pub(super) fn remove(&mut self, key: VectorKey) {
        if let Some(slot) = self.slots.remove(&key) {
            self.free.push(slot);
        }
    }

    pub(super) fn get(&self, key: VectorKey) -> Option<&[f32]> {
        let slot = *self.slots.get(&key)?;
        self.data
            .get(slot * self.dimension..(slot + 1) * self.dimension)
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
    }
}
