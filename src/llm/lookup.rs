//! Prompt lookup (off by default; see `LocalLlm::prompt_lookup`): which tokens to guess
//! a reply writes next, from where its last tokens occur earlier, and how many, from how
//! the last guesses went. `Core::run` (in `decoding.rs`) reads the guesses ahead and
//! checks them against the model's picks.

/// Most tokens guessed ahead in one pass (see [`guess`]): with the token just written,
/// two tiles.
const GUESS_TOKENS: usize = 7;

/// Tokens a pass reads at a small cost over one: the CPU kernels multiply up to four
/// tokens by each block of a weight they unpack (see `memlane_kernels::quantized`; measured here, four
/// tokens take 1.7 times one token's time), so a pass of five unpacks every block twice,
/// as a pass of eight does.
const PASS_TILE: usize = 4;

/// Fewest tokens just written that must occur together earlier for a guess: one token
/// recurs too often to say what follows.
const GUESS_MATCH: usize = 2;

/// Most tokens just written that are looked for earlier.
const GUESS_LONGEST_MATCH: usize = 4;

/// Tokens guessed and read ahead in the last pass, not yet all written.
#[derive(Default)]
pub(super) struct Ahead {
    pub(super) tokens: Vec<u32>,
    /// Where the first of them is in that pass's read (the scores after each follow it).
    pub(super) at: usize,
    /// How many of them the model has written so far.
    pub(super) right: usize,
}

/// How boldly to guess, learnt from how the last guesses went: more tokens after a run of
/// them came true (a copied phrase goes on), fewer and on longer evidence after the first
/// was wrong (free text), where each token read for nothing costs about a fifth of a pass.
pub(super) struct Guessing {
    /// Tokens to guess.
    size: usize,
    /// Tokens just written that must occur earlier.
    pub(super) need: usize,
}

impl Guessing {
    pub(super) fn new() -> Self {
        Guessing {
            size: PASS_TILE - 1,
            need: GUESS_MATCH,
        }
    }

    /// How many tokens to guess in a pass that reads `rest` tokens besides: `size`, less
    /// what would begin a tile the pass would not fill (none when `rest` fills its own).
    pub(super) fn fitted(&self, rest: usize) -> usize {
        let pass = rest + self.size;
        if pass <= PASS_TILE {
            return self.size;
        }
        (pass / PASS_TILE * PASS_TILE).saturating_sub(rest)
    }

    /// Learns from a pass that guessed `guessed` tokens of which the first `right` came
    /// true.
    pub(super) fn learn(&mut self, guessed: usize, right: usize) {
        if right == guessed {
            self.size = (self.size * 2).min(GUESS_TOKENS);
            self.need = GUESS_MATCH;
        } else if right == 0 {
            self.size = (self.size / 2).max(1);
            self.need = (self.need + 1).min(GUESS_LONGEST_MATCH);
        } else {
            self.size = (right + 1).min(GUESS_TOKENS);
            self.need = GUESS_MATCH;
        }
    }
}

/// The tokens a reply will likely write next, guessed as a person reading along would:
/// where its last few tokens (at least `need`) occur earlier, in the reply or in `prompt`
/// (the question; the latest occurrence, of the longest such run up to
/// [`GUESS_LONGEST_MATCH`] tokens), what followed them there, at most `max` tokens. A fact
/// copies the user's words, an update the fact's. Empty when there is no such run.
pub(super) fn guess<'a>(prompt: &'a [u32], reply: &'a [u32], need: usize, max: usize) -> &'a [u32] {
    let n = reply.len();
    for len in (need.max(1)..=GUESS_LONGEST_MATCH.min(n)).rev() {
        let tail = &reply[n - len..];
        // In the reply before its tail, latest first; then in the prompt, latest first.
        let found = (0..n - len)
            .rev()
            .find(|&i| &reply[i..i + len] == tail)
            .map(|i| &reply[i + len..])
            .or_else(|| {
                (0..=prompt.len().saturating_sub(len))
                    .rev()
                    .find(|&i| prompt.get(i..i + len) == Some(tail))
                    .map(|i| &prompt[i + len..])
            });
        if let Some(next) = found.filter(|next| !next.is_empty()) {
            return &next[..next.len().min(max)];
        }
    }
    &[]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_guess_is_what_followed_the_longest_latest_earlier_run_of_the_last_tokens() {
        let prompt = [1, 2, 3, 4, 5, 6, 7, 8, 9];
        // The last two tokens occur in the prompt: what followed them, at most `max`.
        assert_eq!(guess(&prompt, &[9, 9, 3, 4], 2, 3), &[5, 6, 7]);
        assert_eq!(guess(&prompt, &[9, 9, 3, 4], 2, 8), &[5, 6, 7, 8, 9]);
        // One token is too little to go on, and a run found nowhere guesses nothing.
        assert!(guess(&prompt, &[3], 2, 8).is_empty());
        assert!(guess(&prompt, &[4, 3], 2, 8).is_empty());
        // A run at the prompt's very end has nothing after it.
        assert!(guess(&prompt, &[8, 9], 2, 8).is_empty());
        // The longest run that occurs wins over a later, shorter one.
        let prompt = [5, 1, 2, 8, 0, 1, 2, 9];
        assert_eq!(guess(&prompt, &[5, 1, 2], 2, 8), &[8, 0, 1, 2, 9]);
        assert_eq!(guess(&prompt, &[6, 1, 2], 2, 8), &[9]);
        // Asked for longer evidence, a run of two is not enough.
        assert!(guess(&prompt, &[9, 9, 3, 4], 3, 8).is_empty());
        // The reply itself comes before the prompt: it is the latest text.
        assert_eq!(
            guess(&[3, 4, 5], &[3, 4, 10, 11, 3, 4], 2, 8),
            &[10, 11, 3, 4]
        );
    }

    #[test]
    fn guesses_grow_while_they_come_true_and_shrink_on_longer_evidence_when_not() {
        let mut g = Guessing::new();
        assert_eq!((g.size, g.need), (3, GUESS_MATCH));
        g.learn(3, 3);
        assert_eq!((g.size, g.need), (6, GUESS_MATCH));
        g.learn(6, 6);
        assert_eq!(g.size, GUESS_TOKENS);
        // Partly right: one more than came true.
        g.learn(7, 3);
        assert_eq!((g.size, g.need), (4, GUESS_MATCH));
        // Wrong from the first: half as many, on a longer run, down to one on the longest.
        for (size, need) in [(2, 3), (1, 4), (1, 4)] {
            g.learn(g.size, 0);
            assert_eq!((g.size, g.need), (size, need));
        }
        // Right again: back to a run of two.
        g.learn(1, 1);
        assert_eq!((g.size, g.need), (2, GUESS_MATCH));
    }

    #[test]
    fn a_pass_reads_whole_tiles_of_tokens_where_it_can() {
        let mut g = Guessing::new();
        // Three guesses after the token written: one tile.
        assert_eq!(g.fitted(1), 3);
        // After it and two forced tokens, one guess fills the tile.
        assert_eq!(g.fitted(3), 1);
        // Seven: two tiles; six would begin a second tile it does not fill.
        g.size = 7;
        assert_eq!(g.fitted(1), 7);
        g.size = 6;
        assert_eq!(g.fitted(1), 3);
        // Past a tile, down to whole tiles.
        assert_eq!(g.fitted(2), 6);
        assert_eq!(g.fitted(9), 3);
        // Where the tokens to read fill their tile, nothing is guessed.
        g.size = 2;
        assert_eq!(g.fitted(4), 0);
    }
}
