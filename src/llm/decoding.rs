//! What the local language model providers share: the ChatML prompt, the tokenizer built
//! from the GGUF (`gguf.rs`), JSON-schema token masks, the sampler, the loop stop and the counters
//! ([`Core`]), run over the model arithmetic of a [`Backend`]: candle's
//! ([`LocalLlm`](super::LocalLlm)) or llama.cpp's (`LlamaCppLlm`, feature `llama`).

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;

use candle_core::quantized::gguf_file;
use tokenizers::Tokenizer;

use super::grammar::Grammars;
use super::lookup::{guess, Ahead, Guessing};
use super::{ChatRequest, ChatResponse, Usage};
use crate::error::{Error, Result};

/// Prompts longer than this many tokens are refused (422): the model's window is 32k, but
/// on two CPU cores a prompt this long already takes about a minute.
pub const MAX_PROMPT_TOKENS: usize = 4096;

/// Prompt prefixes kept read for reuse (see [`Prefixes`]): a few, such as extraction's and
/// reconciliation's instructions with their examples.
pub(super) const PREFIXES: usize = 5;

/// A prefix longer than this many tokens is not kept: each token read holds about
/// 56 KB of keys and values (28 layers, 2 key/value heads of 128 dimensions, f32).
pub(super) const MAX_PREFIX_TOKENS: usize = 1024;

/// A JSON reply whose last this many tokens were already written twice earlier in it is
/// looping (a small model at temperature 0 can list the same facts until its token
/// limit): it is stopped where the repetition began. A span this long covers more than
/// one fact or decision with its keys, and a third copy is asked for, so a reply that
/// repeats one fact once (and then goes on) is left alone.
const LOOP_SPAN: usize = 48;

/// How a local model decodes a call: by default under the schema, without prompt lookup.
#[derive(Debug, Clone, Copy)]
pub(super) struct Decoding {
    /// Replies with a JSON schema are decoded under it.
    pub(super) constrained: bool,
    /// Tokens the reply will likely copy from the prompt are read ahead (see [`guess`]).
    pub(super) lookup: bool,
}

impl Default for Decoding {
    fn default() -> Self {
        // Lookup saved passes but no time over the held-out extraction evaluation on
        // either provider, and rounding moved a few replies.
        Decoding {
            constrained: true,
            lookup: false,
        }
    }
}

/// What of a prompt a local model keeps read for later calls (see [`Core::run`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Keep {
    /// The end of its fixed part (its instructions and worked examples), kept among the
    /// [`PREFIXES`].
    pub(super) prefix: usize,
    /// The end of the note its last message asks about, before the question on that
    /// message's last line, when the request keeps it ([`ChatRequest::keep_note`]): kept
    /// apart from the prefixes (one at a time), so that the next question about the same
    /// note reads only itself.
    pub(super) note: Option<usize>,
}

/// What a local model provider needs besides the model's arithmetic: the tokenizer built
/// from the GGUF, the token masks of JSON schemas, the stop tokens and the counters. Shared
/// by the candle model and llama.cpp's (feature `llama`), which run the same loop
/// ([`Core::run`]) over a [`Backend`].
pub(super) struct Core {
    pub(super) tokenizer: Tokenizer,
    /// Token masks for replies that must follow a JSON schema.
    grammars: Grammars,
    stop: Vec<u32>,
    /// `<|im_end|>`, which ends each message.
    end_of_message: u32,
    pub(super) model_id: String,
    counters: Counters,
}

/// The model's arithmetic, as [`Core::run`] drives it through one call.
pub(super) trait Backend {
    /// Reads a prompt from its start, reusing what is kept of its first `keep.prefix` tokens
    /// (its instructions and examples) when an earlier call kept exactly those, and keeps
    /// them for later calls otherwise; the same for the first `keep.note` tokens, kept
    /// apart from the prefixes. It reads in the same pieces whatever is kept: the prefix,
    /// then the note, then the rest. Returns the scores of the next token, one per
    /// token of the vocabulary, and how many tokens were reused.
    fn read_prompt(&mut self, tokens: &[u32], keep: Option<Keep>) -> Result<(Vec<f32>, usize)>;

    /// Reads the tokens that follow, in one pass (one token written, or one and the tokens
    /// the schema forces after it); returns the scores of the next.
    fn read_tokens(&mut self, tokens: &[u32]) -> Result<Vec<f32>>;

    /// Reads the tokens that follow in one pass, as [`read_tokens`](Self::read_tokens)
    /// does, and keeps what [`scores_at`](Self::scores_at) needs.
    fn read_each(&mut self, tokens: &[u32]) -> Result<()>;

    /// The scores of the token after the `i`-th token of the last
    /// [`read_each`](Self::read_each), worked out only when asked for: most guesses are
    /// never needed.
    fn scores_at(&mut self, i: usize) -> Result<Vec<f32>>;

    /// Forgets the last `n` tokens read: guesses the model did not write.
    fn forget(&mut self, n: usize) -> Result<()>;
}

/// What the model has done since it was loaded; see [`LocalLlmStats`].
#[derive(Default)]
struct Counters {
    calls: AtomicU64,
    prompt_tokens: AtomicU64,
    reused_tokens: AtomicU64,
    written_tokens: AtomicU64,
    forced_tokens: AtomicU64,
    passes: AtomicU64,
    guessed: AtomicU64,
    guessed_right: AtomicU64,
    loops: AtomicU64,
}

/// What a [`LocalLlm`](super::LocalLlm) (or a `LlamaCppLlm`) has done since it was loaded,
/// over all its clones: for logs and metrics, and to see how much of its prompts the
/// prefix cache saves.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct LocalLlmStats {
    /// Calls the model began to read (a call cancelled while it waited its turn is not
    /// one).
    pub calls: u64,
    /// Prompt tokens of those calls.
    pub prompt_tokens: u64,
    /// Of those, the tokens not read again: an earlier call had read them (the shared
    /// start of a chat whose fixed part it kept).
    pub reused_tokens: u64,
    /// Tokens written, counted as each is written (so a call under way counts too).
    pub written_tokens: u64,
    /// Of those, the tokens a reply's JSON schema left no choice about (parts of keys,
    /// brackets, quotes). Most are read in one pass with the token before them, as a
    /// prompt is, rather than written one by one.
    pub forced_tokens: u64,
    /// Passes over the model while writing, after the prompt's: each reads the token just
    /// picked from the model's scores, with the tokens a schema forces after it and the
    /// tokens guessed to come next. Under a schema, and where guesses come true, there are
    /// fewer passes than tokens written.
    pub passes: u64,
    /// Tokens read ahead as guesses: what followed the last tokens written where they
    /// occur earlier in the reply or in the prompt's last message (prompt lookup; a fact
    /// mostly copies the user's words).
    pub guessed: u64,
    /// Of those, the tokens the model then wrote, each read without a pass of its own.
    /// Every token is still the model's pick from its own scores and a wrong guess is
    /// forgotten, but a pass of several tokens rounds a little differently from a pass
    /// of one, which can turn a near tie (2 of 32 held-out conversations on candle).
    pub guessed_right: u64,
    /// JSON replies stopped because they began to repeat themselves (the same facts
    /// listed over and over): each ends where the repetition began.
    pub loops: u64,
}

impl Counters {
    /// Counts tokens a schema forced that were read in the pass of the token before them
    /// (or with the prompt): written, forced, and no pass of their own.
    fn fast_forwarded(&self, tokens: usize) {
        self.forced_tokens
            .fetch_add(tokens as u64, Ordering::Relaxed);
        self.written_tokens
            .fetch_add(tokens as u64, Ordering::Relaxed);
    }
}

impl Core {
    /// The shared parts of a Qwen2-style ChatML instruct model, from its GGUF metadata.
    pub(super) fn from_gguf(
        metadata: &HashMap<String, gguf_file::Value>,
        model_id: &str,
    ) -> std::result::Result<Core, String> {
        let (tokenizer, tokenizer_json) = super::gguf::tokenizer_from_gguf(metadata)?;
        let end_of_message = tokenizer
            .token_to_id("<|im_end|>")
            .ok_or("its vocabulary has no <|im_end|>: not a ChatML instruct model")?;
        let stop: Vec<u32> = std::iter::once(end_of_message)
            .chain(tokenizer.token_to_id("<|endoftext|>"))
            .collect();
        let grammars = Grammars::new(&tokenizer_json, &tokenizer, end_of_message)?;
        Ok(Core {
            tokenizer,
            grammars,
            stop,
            end_of_message,
            model_id: model_id.to_owned(),
            counters: Counters::default(),
        })
    }

    pub(super) fn stats(&self) -> LocalLlmStats {
        let c = &self.counters;
        LocalLlmStats {
            calls: c.calls.load(Ordering::Relaxed),
            prompt_tokens: c.prompt_tokens.load(Ordering::Relaxed),
            reused_tokens: c.reused_tokens.load(Ordering::Relaxed),
            written_tokens: c.written_tokens.load(Ordering::Relaxed),
            forced_tokens: c.forced_tokens.load(Ordering::Relaxed),
            passes: c.passes.load(Ordering::Relaxed),
            guessed: c.guessed.load(Ordering::Relaxed),
            guessed_right: c.guessed_right.load(Ordering::Relaxed),
            loops: c.loops.load(Ordering::Relaxed),
        }
    }

    /// What a chat's prompt (`tokens`; `before` is the prompt's text before its last
    /// message's) keeps for reuse (see [`Keep`]): nothing unless it opens with a system
    /// message and has something after what it keeps. The prefix ends through a message's
    /// `<|im_end|>`; the note of a request that keeps one ([`ChatRequest::keep_note`])
    /// through the last line break of its last message, when the tokens up to there are
    /// the same alone as in the prompt.
    fn keep(&self, request: &ChatRequest, before: &str, tokens: &[u32]) -> Result<Option<Keep>> {
        let messages = &request.messages;
        if messages.first().is_none_or(|m| m.role != "system") {
            return Ok(None);
        }
        let Some(prefix) = tokens
            .iter()
            .enumerate()
            .filter(|&(_, &t)| t == self.end_of_message)
            .nth(messages.len().saturating_sub(2))
            .map(|(i, _)| i + 1)
            .filter(|&end| end <= MAX_PREFIX_TOKENS && end < tokens.len())
        else {
            return Ok(None);
        };
        let last = messages.last().map_or("", |m| m.content.as_str());
        let note = match last.rfind('\n') {
            Some(at) if request.keep_note && messages.len() >= 2 => {
                let head = format!("{before}{}", &last[..=at]);
                let head = self
                    .tokenizer
                    .encode(head.as_str(), false)
                    .map_err(|e| Error::internal(format!("tokenizer failed: {e}")))?;
                let head = head.get_ids();
                (head.len() > prefix && head.len() < tokens.len() && tokens.starts_with(head))
                    .then_some(head.len())
            }
            _ => None,
        };
        Ok(Some(Keep { prefix, note }))
    }

    /// Runs a chat on `backend`, stopping before its next step once `cancelled` is set.
    pub(super) fn run(
        &self,
        backend: &mut dyn Backend,
        request: &ChatRequest,
        decoding: Decoding,
        cancelled: &AtomicBool,
    ) -> Result<ChatResponse> {
        let stopped = || {
            cancelled
                .load(Ordering::Relaxed)
                .then(|| Error::provider("the local model call was cancelled", true))
        };
        if let Some(e) = stopped() {
            return Err(e);
        }
        let mut prompt = String::new();
        // Where the last message's text starts in the prompt.
        let mut last_at = 0;
        for m in &request.messages {
            let role = match m.role.as_str() {
                "system" | "assistant" => m.role.as_str(),
                _ => "user",
            };
            prompt.push_str(&format!("<|im_start|>{role}\n"));
            last_at = prompt.len();
            prompt.push_str(&format!("{}<|im_end|>\n", m.content));
        }
        prompt.push_str("<|im_start|>assistant\n");
        // In JSON mode the reply is started for the model (`{"`, one token in Qwen's
        // vocabulary, so the model continues with a key): small models then write the
        // object instead of an introduction to it. A reply with a schema is also decoded
        // under it, from that start where the schema allows it.
        let mut matcher = match &request.schema {
            Some(schema) if decoding.constrained => {
                Some(self.grammars.matcher(schema).map_err(Error::invalid)?)
            }
            _ => None,
        };
        let mut prefill = if request.json { "{\"" } else { "" };
        if let Some(m) = matcher.as_mut() {
            let ids = self
                .tokenizer
                .encode(prefill, false)
                .map_err(|e| Error::internal(format!("tokenizer failed: {e}")))?
                .get_ids()
                .to_vec();
            if m.validate_tokens(&ids).ok() == Some(ids.len()) {
                m.consume_tokens(&ids).map_err(grammar_err)?;
            } else {
                prefill = "";
            }
        }
        prompt.push_str(prefill);
        let encoding = self
            .tokenizer
            .encode(prompt.as_str(), false)
            .map_err(|e| Error::internal(format!("tokenizer failed: {e}")))?;
        let tokens = encoding.get_ids().to_vec();
        if tokens.len() > MAX_PROMPT_TOKENS {
            return Err(Error::Unprocessable {
                detail: format!(
                    "the prompt is {} tokens; the local model takes at most {MAX_PROMPT_TOKENS}: \
                     send fewer or shorter messages",
                    tokens.len()
                ),
            });
        }
        // A chat that opens with a system message keeps for reuse everything before its last
        // message (the instructions, and any worked examples after them), through that
        // message's `<|im_end|>`. Control tokens are split out before the text is, so those
        // tokens are the same whatever follows. A request that keeps its note keeps the last
        // message's text before its question apart.
        let keep = self.keep(request, &prompt[..last_at], &tokens)?;
        let mut sampler = Sampler::new(request.temperature);
        let counters = &self.counters;
        counters.calls.fetch_add(1, Ordering::Relaxed);
        counters
            .prompt_tokens
            .fetch_add(tokens.len() as u64, Ordering::Relaxed);
        // What the schema forces at the reply's start (its first key) is read with the
        // prompt.
        let prompt_tokens = tokens.len();
        let mut generated: Vec<u32> = Vec::new();
        let mut read = tokens;
        if let Some(m) = matcher.as_mut() {
            let mut forced = m.consume_ff_tokens();
            forced.truncate(request.max_tokens as usize);
            counters.fast_forwarded(forced.len());
            read.extend_from_slice(&forced);
            generated = forced;
        }
        let (mut scores, start) = backend.read_prompt(&read, keep)?;
        counters
            .reused_tokens
            .fetch_add(start as u64, Ordering::Relaxed);
        // Guesses come from the reply and the question (the last message), not from
        // instructions and worked examples, which a reply does not copy.
        let prompt_read = read;
        let mut ahead = Ahead::default();
        let mut guessing = Guessing::new();
        while generated.len() < request.max_tokens as usize
            && !matcher.as_ref().is_some_and(|m| m.is_stopped())
        {
            if let Some(e) = stopped() {
                return Err(e);
            }
            // Under a schema the model chooses among the tokens it allows: its own choice
            // whenever that is one of them, so a reply that would have been valid anyway
            // comes out the same.
            let next = match matcher.as_mut() {
                None => sampler.pick(&scores),
                Some(m) => {
                    let allowed = m.compute_mask().map_err(grammar_err)?;
                    if allowed.num_set() == 1 {
                        counters.forced_tokens.fetch_add(1, Ordering::Relaxed);
                    }
                    let next = sample_allowed(
                        &mut sampler,
                        std::mem::take(&mut scores),
                        &allowed,
                        request,
                    )?;
                    if !self.stop.contains(&next) {
                        m.consume_token(next).map_err(grammar_err)?;
                    }
                    next
                }
            };
            if self.stop.contains(&next) {
                break;
            }
            generated.push(next);
            counters.written_tokens.fetch_add(1, Ordering::Relaxed);
            if request.json {
                if let Some(start) = loop_start(&generated, LOOP_SPAN) {
                    // The reply ends where it began to repeat itself; its complete part is
                    // read as a cut-off reply is (see `recover_json`).
                    tracing::debug!(
                        written = generated.len(),
                        kept = start,
                        "local model reply stopped in a loop"
                    );
                    counters.loops.fetch_add(1, Ordering::Relaxed);
                    generated.truncate(start);
                    break;
                }
            }
            // What the schema forces next (the keys and punctuation between values) is read
            // with the token just written, in one pass, as a prompt is read: on two cores
            // that is about twice as fast per token as writing them one by one.
            let mut step = vec![next];
            if let Some(m) = matcher.as_mut() {
                let budget = (request.max_tokens as usize).saturating_sub(generated.len());
                let mut forced = m.consume_ff_tokens();
                // Never more than the reply's budget: cut there, the reply ends as one that
                // ran out of tokens does.
                let cut = forced.len() > budget;
                forced.truncate(budget);
                counters.fast_forwarded(forced.len());
                generated.extend_from_slice(&forced);
                if cut {
                    break;
                }
                step.extend(forced);
            }
            if matcher.as_ref().is_some_and(|m| m.is_stopped()) {
                // The reply is complete: nothing may follow, so nothing more is read.
                break;
            }
            // What was guessed right is read already: the scores after it are that read's.
            let mut done = 0;
            while done < step.len() && ahead.tokens.get(ahead.right) == Some(&step[done]) {
                scores = backend.scores_at(ahead.at + ahead.right)?;
                ahead.right += 1;
                done += 1;
            }
            counters
                .guessed_right
                .fetch_add(done as u64, Ordering::Relaxed);
            let left = ahead.tokens.len() - ahead.right;
            if left > 0 && done < step.len() {
                // A wrong guess: it and the guesses after it are forgotten.
                backend.forget(left)?;
            } else if left > 0 {
                continue;
            }
            if !ahead.tokens.is_empty() {
                guessing.learn(ahead.tokens.len(), ahead.right);
                ahead = Ahead::default();
            }
            let rest = &step[done..];
            let guessed = if decoding.lookup {
                guess(
                    &prompt_read[keep.map_or(0, |k| k.prefix)..prompt_tokens],
                    &generated,
                    guessing.need,
                    guessing.fitted(rest.len()),
                )
            } else {
                &[]
            };
            if rest.is_empty() && guessed.is_empty() {
                continue;
            }
            counters.passes.fetch_add(1, Ordering::Relaxed);
            if guessed.is_empty() {
                scores = backend.read_tokens(rest)?;
                continue;
            }
            counters
                .guessed
                .fetch_add(guessed.len() as u64, Ordering::Relaxed);
            let mut tokens = rest.to_vec();
            tokens.extend_from_slice(guessed);
            backend.read_each(&tokens)?;
            if !rest.is_empty() {
                scores = backend.scores_at(rest.len() - 1)?;
            }
            ahead = Ahead {
                tokens: guessed.to_vec(),
                at: rest.len(),
                right: 0,
            };
        }

        tracing::debug!(
            prompt = prompt_tokens,
            reused = start,
            generated = generated.len(),
            "local model call"
        );
        let text = self
            .tokenizer
            .decode(&generated, true)
            .map_err(|e| Error::internal(format!("tokenizer failed to decode: {e}")))?;
        Ok(ChatResponse::new(
            format!("{prefill}{text}"),
            Usage {
                prompt_tokens: prompt_tokens as u64,
                completion_tokens: generated.len() as u64,
            },
            self.model_id.clone(),
        ))
    }
}

/// Where `tokens` began to repeat itself, if its last `span` tokens were already written
/// twice before: the start of the second copy, traced back as far as it matches the first.
fn loop_start(tokens: &[u32], span: usize) -> Option<usize> {
    let n = tokens.len();
    if span == 0 || n <= span {
        return None;
    }
    let tail = &tokens[n - span..];
    let mut copies = (0..n - span)
        .rev()
        .filter(|&i| &tokens[i..i + span] == tail);
    // The latest earlier copy (it may overlap the last one): the shortest cycle.
    let earlier = copies.next()?;
    copies.next()?;
    let (mut first, mut second) = (earlier, n - span);
    while first > 0 && tokens[first - 1] == tokens[second - 1] {
        first -= 1;
        second -= 1;
    }
    Some(second)
}

fn grammar_err(e: impl std::fmt::Display) -> Error {
    Error::provider(format!("constrained decoding failed: {e}"), false)
}

/// The next token among those `allowed`: the most likely at temperature 0, else sampled
/// from the model's distribution renormalised over them.
fn sample_allowed(
    sampler: &mut Sampler,
    mut scores: Vec<f32>,
    allowed: &llguidance::toktrie::SimpleVob,
    request: &ChatRequest,
) -> Result<u32> {
    let mut best: Option<(usize, f32)> = None;
    for (i, score) in scores.iter_mut().enumerate() {
        if i < allowed.len() && allowed.is_allowed(i as u32) {
            if best.is_none_or(|(_, b)| *score > b) {
                best = Some((i, *score));
            }
        } else {
            *score = f32::NEG_INFINITY;
        }
    }
    let Some((best, _)) = best else {
        return Err(Error::provider(
            "constrained decoding left no token to choose: the reply's JSON schema \
                     cannot be completed",
            false,
        ));
    };
    if request.temperature <= 0.0 {
        return Ok(best as u32);
    }
    Ok(sampler.pick(&scores))
}

/// Picks each next token from the model's scores: the most likely at temperature 0, else
/// one drawn from their softmax at that temperature, with a fixed seed (a request gives
/// the same reply each time).
struct Sampler {
    temperature: f32,
    state: u64,
}

impl Sampler {
    fn new(temperature: f32) -> Self {
        Sampler {
            temperature,
            state: 299_792_458,
        }
    }

    fn pick(&mut self, scores: &[f32]) -> u32 {
        let best = scores
            .iter()
            .enumerate()
            .fold((0, f32::NEG_INFINITY), |(bi, bs), (i, &s)| {
                if s > bs {
                    (i, s)
                } else {
                    (bi, bs)
                }
            });
        if self.temperature <= 0.0 || !best.1.is_finite() {
            return best.0 as u32;
        }
        let t = f64::from(self.temperature);
        let weight = |s: f32| match s.is_finite() {
            true => ((f64::from(s) - f64::from(best.1)) / t).exp(),
            false => 0.0,
        };
        let total: f64 = scores.iter().map(|&s| weight(s)).sum();
        let mut target = self.uniform() * total;
        for (i, &s) in scores.iter().enumerate() {
            target -= weight(s);
            if target < 0.0 {
                return i as u32;
            }
        }
        best.0 as u32
    }

    /// A uniform draw in [0, 1) (xorshift64*).
    fn uniform(&mut self) -> f64 {
        self.state ^= self.state >> 12;
        self.state ^= self.state << 25;
        self.state ^= self.state >> 27;
        let x = self.state.wrapping_mul(0x2545_f491_4f6c_dd1d);
        (x >> 11) as f64 / (1u64 << 53) as f64
    }
}

/// Sets its flag when dropped: the future of a call, dropped before the call on the
/// blocking pool ends, tells it to stop.
pub(super) struct CancelOnDrop(pub(super) Arc<AtomicBool>);

impl Drop for CancelOnDrop {
    fn drop(&mut self) {
        self.0.store(true, Ordering::Relaxed);
    }
}

#[cfg(test)]
mod tests {
    use super::{loop_start, Sampler};

    #[test]
    fn greedy_picks_the_highest_score_and_sampling_follows_the_softmax() {
        let mut greedy = Sampler::new(0.0);
        assert_eq!(greedy.pick(&[0.5, 2.0, f32::NAN, 1.9]), 1);
        assert_eq!(greedy.pick(&[f32::NEG_INFINITY; 3]), 0);
        // At temperature 1, scores 0 and ln 3 are drawn one time in four and three in
        // four; a masked (-inf) token never is.
        let mut sampler = Sampler::new(1.0);
        let scores = [0.0, 3f32.ln(), f32::NEG_INFINITY];
        let mut counts = [0u32; 3];
        for _ in 0..4000 {
            counts[sampler.pick(&scores) as usize] += 1;
        }
        assert_eq!(counts[2], 0);
        assert!((2880..=3120).contains(&counts[1]), "{counts:?}");
        // A fixed seed: the same draws each time.
        let mut again = Sampler::new(1.0);
        let first: Vec<u32> = (0..50).map(|_| again.pick(&scores)).collect();
        let mut once_more = Sampler::new(1.0);
        assert_eq!(
            first,
            (0..50).map(|_| once_more.pick(&scores)).collect::<Vec<_>>()
        );
    }

    #[test]
    fn a_loop_is_cut_where_its_second_copy_begins() {
        // A reply that states 1..=5, then repeats 3, 4, 5 over and over.
        let mut tokens: Vec<u32> = vec![1, 2, 3, 4, 5];
        let mut cut = None;
        for step in 0..30 {
            tokens.push([3, 4, 5][step % 3]);
            if let Some(at) = loop_start(&tokens, 4) {
                cut = Some((tokens.len(), at));
                break;
            }
        }
        // Seen once the last four tokens were written twice before, after
        // 1 2 3 4 5 3 4 5 3 4 5 3; cut where the second copy of 3 4 5 begins, keeping one.
        assert_eq!(cut, Some((12, 5)));
        assert_eq!(&tokens[..5], &[1, 2, 3, 4, 5]);
        // A cycle as short as one token is one too.
        assert_eq!(loop_start(&[9, 7, 7, 7, 7, 7], 3), Some(2));
    }

    #[test]
    fn one_repeat_is_not_a_loop() {
        // A fact written twice, then the reply goes on: not stopped.
        let fact = [10, 11, 12, 13];
        let tokens: Vec<u32> = [&[1, 2][..], &fact, &fact, &[3, 4]].concat();
        for end in 0..=tokens.len() {
            assert_eq!(loop_start(&tokens[..end], 4), None, "{:?}", &tokens[..end]);
        }
    }

    #[test]
    fn text_that_does_not_repeat_a_whole_span_is_not_a_loop() {
        // Repeats shorter than the span (keys and brackets between facts) are not loops.
        let tokens: Vec<u32> = (0..40).flat_map(|fact| [100, 101, 102, fact]).collect();
        assert_eq!(loop_start(&tokens, 4), None);
        assert_eq!(loop_start(&tokens, 5), None);
        assert_eq!(loop_start(&[1, 2, 3], 3), None);
        assert_eq!(loop_start(&[], 3), None);
        assert_eq!(loop_start(&[1, 1, 1], 0), None);
    }
}
