//! Prompt prefixes a local model has already read, kept for reuse.
//!
//! Calls often begin with the same instructions (consolidation's merge, a caller's own
//! system message, memlane's extraction and reconciliation prompts with their worked
//! examples), and on a CPU reading them again costs as much as reading the conversation
//! after them. The model keeps what it read of each recent chat's fixed part (everything
//! before its last message: its key/value cache), and a call whose fixed part is one of
//! them reads only its last message.
//!
//! One more part is kept apart from them: the note of a request that keeps one
//! (`ChatRequest::keep_note`: its last message's text before the question on its last
//! line; the second look asks two questions of one memory and one fact so), so that the
//! next question about it reads only itself.
//!
//! Only a whole kept part is reused, never a shared start of one: a prefix read in other
//! pieces, or beside other tokens, rounds differently, and a reply would then depend on
//! which calls came before it rather than on its prompt alone. So a prompt is read in the
//! same pieces whatever is kept: its fixed part, its note, the rest.

/// The caches of recently read prefixes, keyed by their tokens; the most recently used
/// last. Generic over the cache so that its rules are tested without a model.
pub(crate) struct Prefixes<C> {
    entries: Vec<(Vec<u32>, C)>,
    capacity: usize,
    /// The one note kept (see the module's documentation), apart from the prefixes so
    /// that it never takes one's place.
    note: Option<(Vec<u32>, C)>,
}

impl<C> Prefixes<C> {
    /// Keeps at most `capacity` prefixes.
    pub(crate) fn new(capacity: usize) -> Self {
        Prefixes {
            entries: Vec::new(),
            capacity,
            note: None,
        }
    }

    /// What was kept of exactly `tokens`, now the most recently used.
    pub(crate) fn get(&mut self, tokens: &[u32]) -> Option<&C> {
        let at = self.entries.iter().position(|(kept, _)| kept == tokens)?;
        let entry = self.entries.remove(at);
        self.entries.push(entry);
        self.entries.last().map(|(_, cache)| cache)
    }

    /// What was kept of exactly `tokens` as the note.
    pub(crate) fn get_note(&self, tokens: &[u32]) -> Option<&C> {
        self.note
            .as_ref()
            .filter(|(kept, _)| kept == tokens)
            .map(|(_, cache)| cache)
    }

    /// Keeps `cache` as what was read of `tokens`, the note, in place of the one
    /// kept before; returns that one's cache.
    pub(crate) fn keep_note(&mut self, tokens: Vec<u32>, cache: C) -> Option<C> {
        self.note.replace((tokens, cache)).map(|(_, cache)| cache)
    }

    /// Forgets the note kept when `which` holds for its cache (one a call is about
    /// to read over); returns whether it did.
    #[cfg(any(feature = "llama", test))]
    pub(crate) fn forget_note(&mut self, which: impl Fn(&C) -> bool) -> bool {
        let gone = self.note.as_ref().is_some_and(|(_, cache)| which(cache));
        if gone {
            self.note = None;
        }
        gone
    }

    /// Takes out the least recently used prefix's cache when `capacity` are kept, to make
    /// room for one more.
    #[cfg(any(feature = "llama", test))]
    pub(crate) fn make_room(&mut self) -> Option<C> {
        (self.entries.len() >= self.capacity && !self.entries.is_empty())
            .then(|| self.entries.remove(0).1)
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_a_whole_kept_prefix_is_found() {
        let mut p = Prefixes::new(4);
        p.keep(vec![1, 2, 3, 4], "a");
        p.keep(vec![1, 2, 9], "b");
        assert_eq!(p.get(&[1, 2, 3, 4]), Some(&"a"));
        assert_eq!(p.get(&[1, 2, 9]), Some(&"b"));
        // A shared start, a longer or a shorter prompt: none is the kept prefix.
        assert_eq!(p.get(&[1, 2, 3]), None);
        assert_eq!(p.get(&[1, 2, 3, 4, 5]), None);
        assert_eq!(p.get(&[]), None);
    }

    #[test]
    fn the_least_recently_used_prefix_goes_first_and_the_same_tokens_are_kept_once() {
        let mut p = Prefixes::new(2);
        p.keep(vec![1], "one");
        p.keep(vec![2], "two");
        // Using "one" makes "two" the least recently used.
        assert_eq!(p.get(&[1]), Some(&"one"));
        assert_eq!(p.keep(vec![3], "three"), vec!["two"]);
        assert_eq!(p.get(&[2]), None);
        assert_eq!(p.get(&[1]), Some(&"one"));
        assert_eq!(p.get(&[3]), Some(&"three"));
        // The same tokens again replace their entry rather than take a second slot.
        assert_eq!(p.keep(vec![3], "three again"), vec!["three"]);
        assert_eq!(p.keep(vec![3], "three once more"), vec!["three again"]);
        assert_eq!(p.entries.len(), 2);
        assert_eq!(p.get(&[3]), Some(&"three once more"));
        assert_eq!(p.get(&[1]), Some(&"one"));
        // Room is made, when full, by taking out the least recently used ("three").
        assert_eq!(p.make_room(), Some("three once more"));
        assert_eq!(p.make_room(), None);
        assert_eq!(p.keep(vec![4], "four"), Vec::<&str>::new());
        assert_eq!(p.get(&[3]), None);
    }

    #[test]
    fn the_note_is_kept_apart_one_at_a_time() {
        let mut p = Prefixes::new(1);
        p.keep(vec![1, 2], "prefix");
        assert_eq!(p.keep_note(vec![1, 2, 3], "pair"), None);
        // It takes no prefix's place, and is found only by its own tokens.
        assert_eq!(p.get(&[1, 2]), Some(&"prefix"));
        assert_eq!(p.get(&[1, 2, 3]), None);
        assert_eq!(p.get_note(&[1, 2, 3]), Some(&"pair"));
        assert_eq!(p.get_note(&[1, 2]), None);
        assert_eq!(p.get_note(&[1, 2, 4]), None);
        // A new note replaces the last.
        assert_eq!(p.keep_note(vec![1, 2, 4], "other pair"), Some("pair"));
        assert_eq!(p.get_note(&[1, 2, 3]), None);
        assert_eq!(p.get_note(&[1, 2, 4]), Some(&"other pair"));
        // It is forgotten only when it is the cache named.
        assert!(!p.forget_note(|c| *c == "pair"));
        assert!(p.forget_note(|c| *c == "other pair"));
        assert_eq!(p.get_note(&[1, 2, 4]), None);
        assert_eq!(p.get(&[1, 2]), Some(&"prefix"));
    }
}
