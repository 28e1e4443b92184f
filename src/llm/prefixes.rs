//! Prompt prefixes a local model has already read, kept for reuse.
//!
//! Calls often begin with the same instructions (consolidation's merge, a caller's own
//! system message, memlane's extraction and reconciliation prompts with their worked
//! examples), and on a CPU reading them again costs as much as reading the conversation
//! after them. The model keeps what it read of each recent chat's fixed part (everything
//! before its last message: its key/value cache) and starts a call from the longest prefix
//! it shares with one of them, so a call reads only what is new.

/// The caches of recently read prefixes, keyed by their tokens; the most recently used
/// last. Generic over the cache so that its rules are tested without a model.
pub(crate) struct Prefixes<C> {
    entries: Vec<(Vec<u32>, C)>,
    capacity: usize,
}

impl<C> Prefixes<C> {
    /// Keeps at most `capacity` prefixes.
    pub(crate) fn new(capacity: usize) -> Self {
        Prefixes {
            entries: Vec::new(),
            capacity,
        }
    }

    /// The kept prefix that shares the most leading tokens with `tokens`, with how many it
    /// shares (at least one), now the most recently used.
    pub(crate) fn longest(&mut self, tokens: &[u32]) -> Option<(usize, &C)> {
        let (at, shared) = self
            .entries
            .iter()
            .enumerate()
            .map(|(i, (kept, _))| (i, shared_len(kept, tokens)))
            .filter(|&(_, shared)| shared > 0)
            .max_by_key(|&(i, shared)| (shared, i))?;
        let entry = self.entries.remove(at);
        self.entries.push(entry);
        self.entries.last().map(|(_, cache)| (shared, cache))
    }

    /// Keeps `cache` as what was read of `tokens`: it replaces a prefix of the same tokens,
    /// and the least recently used goes when there are more than the capacity. Returns the
    /// caches no longer kept.
    pub(crate) fn keep(&mut self, tokens: Vec<u32>, cache: C) -> Vec<C> {
        let mut gone = Vec::new();
        let mut i = 0;
        while i < self.entries.len() {
            if self.entries[i].0 == tokens {
                gone.push(self.entries.remove(i).1);
            } else {
                i += 1;
            }
        }
        self.entries.push((tokens, cache));
        if self.entries.len() > self.capacity {
            let excess = self.entries.len() - self.capacity;
            gone.extend(self.entries.drain(..excess).map(|(_, cache)| cache));
        }
        gone
    }
}

/// How many leading tokens `a` and `b` share.
fn shared_len(a: &[u32], b: &[u32]) -> usize {
    a.iter().zip(b).take_while(|(x, y)| x == y).count()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_longest_shared_prefix_wins_and_sharing_nothing_finds_nothing() {
        let mut p = Prefixes::new(4);
        p.keep(vec![1, 2, 3, 4], "a");
        p.keep(vec![1, 2, 9], "b");
        p.keep(vec![7, 8], "c");
        assert_eq!(p.longest(&[1, 2, 3, 5, 6]), Some((3, &"a")));
        assert_eq!(p.longest(&[1, 2, 9, 9]), Some((3, &"b")));
        // A prompt shorter than a kept prefix shares all of itself.
        assert_eq!(p.longest(&[7]), Some((1, &"c")));
        assert_eq!(p.longest(&[5, 1, 2]), None);
        assert_eq!(p.longest(&[]), None);
    }

    #[test]
    fn the_least_recently_used_prefix_goes_first_and_the_same_tokens_are_kept_once() {
        let mut p = Prefixes::new(2);
        p.keep(vec![1], "one");
        p.keep(vec![2], "two");
        // Using "one" makes "two" the least recently used.
        assert_eq!(p.longest(&[1, 0]), Some((1, &"one")));
        assert_eq!(p.keep(vec![3], "three"), vec!["two"]);
        assert_eq!(p.longest(&[2]), None);
        assert_eq!(p.longest(&[1]), Some((1, &"one")));
        assert_eq!(p.longest(&[3]), Some((1, &"three")));
        // The same tokens again replace their entry rather than take a second slot.
        assert_eq!(p.keep(vec![3], "three again"), vec!["three"]);
        assert_eq!(p.keep(vec![3], "three once more"), vec!["three again"]);
        assert_eq!(p.entries.len(), 2);
        assert_eq!(p.longest(&[3]), Some((1, &"three once more")));
        assert_eq!(p.longest(&[1]), Some((1, &"one")));
    }
}
