//! A Qwen2 forward pass over a quantized GGUF, on candle's tensors, with the key/value cache
//! held by the caller: the weights are shared and immutable, and what one call has read
//! (its cache) is its own, so a prompt's prefix can be kept and reused.
//!
//! Speed: every matmul stays quantized, batched over the rows it is given (measured here
//! with one 8960 × 1536 Q4_K matrix, 256 rows: 138 ms quantized with AVX2, 214 ms
//! dequantized to f32). On a CPU with AVX-512 VNNI the Q4_K and Q6_K products run on
//! `memlane_kernels::quantized`, which unpack each weight block once for four rows; elsewhere on
//! candle's, which use AVX2 and FMA only when the build targets them
//! (`target-cpu=x86-64-v3`, set in `.cargo/config.toml`). Attention reads each key/value
//! head once for all its query heads, and the cache appends in place: in a long context,
//! copying keys and values was a large part of writing a token.

use std::sync::Arc;

use candle_core::quantized::{gguf_file, GgmlDType, QMatMul, QTensor};
use candle_core::{DType, Device, IndexOp, Module, Result, Tensor};

use crate::progress::{report, OnProgress, Task};
use memlane_kernels::quantized::{Kernel, Kind};

/// A quantized weight, multiplied by memlane's kernels where the CPU runs them, else by
/// candle's.
enum Weight {
    Kernel(Kernel),
    Candle(QMatMul),
}

/// The kernel of a 2-D Q4_K or Q6_K weight, on a CPU that runs the kernels; `None`
/// otherwise (candle's kernels then do the work).
fn kernel(weight: &QTensor) -> Option<Kernel> {
    let kind = match weight.dtype() {
        GgmlDType::Q4K => Kind::Q4K,
        GgmlDType::Q6K => Kind::Q6K,
        _ => return None,
    };
    if !memlane_kernels::quantized::available() {
        return None;
    }
    let (rows, cols) = weight.shape().dims2().ok()?;
    Kernel::new(kind, rows, cols, weight.data().ok()?.into_owned())
}

/// A linear layer over a quantized weight, with an optional bias.
struct Linear {
    weight: Weight,
    bias: Option<Tensor>,
}

impl Linear {
    fn new(weight: QTensor, bias: Option<Tensor>) -> Result<Self> {
        let weight = match kernel(&weight) {
            Some(kernel) => Weight::Kernel(kernel),
            None => Weight::Candle(QMatMul::from_qtensor(weight)?),
        };
        Ok(Linear { weight, bias })
    }

    fn forward(&self, x: &Tensor) -> Result<Tensor> {
        let y = match &self.weight {
            Weight::Candle(weight) => weight.forward(x)?,
            Weight::Kernel(kernel) => {
                let dims = x.dims().to_vec();
                let Some((_, outer)) = dims.split_last() else {
                    candle_core::bail!("a layer's input needs a width");
                };
                let m: usize = outer.iter().product();
                let values: Vec<f32> = x.flatten_all()?.to_vec1()?;
                let mut shape = outer.to_vec();
                shape.push(kernel.rows());
                let product = kernel.matmul(&values, m).map_err(candle_core::Error::Msg)?;
                Tensor::from_vec(product, shape, x.device())?
            }
        };
        match &self.bias {
            Some(b) => y.broadcast_add(b),
            None => Ok(y),
        }
    }
}

struct Layer {
    q: Linear,
    k: Linear,
    v: Linear,
    o: Linear,
    gate: Linear,
    up: Linear,
    down: Linear,
    attention_norm: Tensor,
    ffn_norm: Tensor,
}

/// The model's weights and shape; immutable, shared by every call.
pub(crate) struct Qwen2 {
    embeddings: Tensor,
    layers: Vec<Layer>,
    norm: Tensor,
    output: Linear,
    cos: Tensor,
    sin: Tensor,
    heads: usize,
    kv_heads: usize,
    head_dim: usize,
    eps: f32,
    context: usize,
}

/// What a call has read so far: every layer's keys and values. Cloning shares them, and a
/// read never writes into keys and values another cache shares (it copies them first), so
/// a clone is a snapshot that later reads of either copy leave unchanged.
#[derive(Clone)]
pub(crate) struct Cache {
    layers: Vec<Option<Arc<Kv>>>,
    /// Tokens read.
    pub(crate) len: usize,
}

/// One layer's keys and values, `(1, kv_heads, capacity, head_dim)` each: the first `len`
/// tokens of its cache, then room for more, so that writing a token appends to them in
/// place rather than copying them all.
struct Kv {
    k: Tensor,
    v: Tensor,
}

/// Room left after the tokens read when keys and values are copied into a new buffer.
const KV_ROOM: usize = 128;

impl Cache {
    /// The cache of the first `len` tokens read (all of them if `len` is more). It shares
    /// this one's keys and values until it reads more.
    pub(crate) fn prefix(&self, len: usize) -> Cache {
        Cache {
            layers: self.layers.clone(),
            len: len.min(self.len),
        }
    }

    /// Forgets the last `n` tokens read (all of them if `n` is more): the next read
    /// writes over their keys and values.
    pub(crate) fn forget(&mut self, n: usize) {
        self.len = self.len.saturating_sub(n);
    }
}

/// Appends the keys and values of `m` tokens (`(1, kv_heads, m, head_dim)`) after the
/// `pos` a layer holds, and returns the keys and values of all `pos + m`. They are written
/// in place when this cache alone holds the layer's buffer and it has room; otherwise into
/// a new buffer, with the first `pos` tokens copied and room for [`KV_ROOM`] more.
fn append(
    slot: &mut Option<Arc<Kv>>,
    pos: usize,
    k: &Tensor,
    v: &Tensor,
) -> Result<(Tensor, Tensor)> {
    let total = pos + k.dim(2)?;
    let room = match slot.as_mut().and_then(Arc::get_mut) {
        Some(kv) => kv.k.dim(2)? >= total,
        None => false,
    };
    let kv = match slot {
        Some(kv) if room => kv,
        _ => {
            let (b, heads, _, dim) = k.dims4()?;
            let empty = Tensor::zeros((b, heads, KV_ROOM, dim), k.dtype(), k.device())?;
            // Appended in place later, so contiguous (a concatenation of a part of a
            // buffer may come out transposed).
            let grown = |old: Option<&Tensor>, new: &Tensor| match old {
                Some(old) if pos > 0 => {
                    Tensor::cat(&[&old.narrow(2, 0, pos)?, new, &empty], 2)?.contiguous()
                }
                _ => Tensor::cat(&[new, &empty], 2)?.contiguous(),
            };
            let old = slot.as_deref();
            let fresh = Kv {
                k: grown(old.map(|kv| &kv.k), k)?,
                v: grown(old.map(|kv| &kv.v), v)?,
            };
            let read = (fresh.k.narrow(2, 0, total)?, fresh.v.narrow(2, 0, total)?);
            *slot = Some(Arc::new(fresh));
            return Ok(read);
        }
    };
    kv.k.slice_set(&k.contiguous()?, 2, pos)?;
    kv.v.slice_set(&v.contiguous()?, 2, pos)?;
    Ok((kv.k.narrow(2, 0, total)?, kv.v.narrow(2, 0, total)?))
}

impl Qwen2 {
    /// Loads a qwen2-architecture GGUF.
    pub(crate) fn from_gguf<R: std::io::Seek + std::io::Read>(
        content: &gguf_file::Content,
        reader: &mut R,
        device: &Device,
        progress: Option<&OnProgress>,
    ) -> Result<Self> {
        let meta = |key: &str| {
            content
                .metadata
                .get(key)
                .ok_or_else(|| candle_core::Error::Msg(format!("no {key} in the GGUF metadata")))
        };
        let heads = meta("qwen2.attention.head_count")?.to_u32()? as usize;
        let kv_heads = meta("qwen2.attention.head_count_kv")?.to_u32()? as usize;
        let width = meta("qwen2.embedding_length")?.to_u32()? as usize;
        let context = meta("qwen2.context_length")?.to_u32()? as usize;
        let blocks = meta("qwen2.block_count")?.to_u32()? as usize;
        let eps = meta("qwen2.attention.layer_norm_rms_epsilon")?.to_f32()?;
        let rope_base = meta("qwen2.rope.freq_base")
            .and_then(|v| v.to_f32())
            .unwrap_or(10_000.0);
        if heads == 0
            || kv_heads == 0
            || !heads.is_multiple_of(kv_heads)
            || !width.is_multiple_of(heads)
        {
            return Err(candle_core::Error::Msg(format!(
                "unsupported attention shape: {heads} heads, {kv_heads} key/value heads, width {width}"
            )));
        }
        let head_dim = width / heads;
        let mut tensor = |name: &str| content.tensor(reader, name, device);
        let embeddings = tensor("token_embd.weight")?.dequantize(device)?;
        let norm = tensor("output_norm.weight")?.dequantize(device)?;
        // Small models tie the output head to the embeddings.
        let output = match tensor("output.weight") {
            Ok(w) => w,
            Err(_) => tensor("token_embd.weight")?,
        };
        let output = Linear::new(output, None)?;
        let mut layers = Vec::with_capacity(blocks);
        for i in 0..blocks {
            report(progress, Task::LoadModel, i as u64, blocks as u64);
            let mut get = |part: &str| tensor(&format!("blk.{i}.{part}"));
            let linear = |w: QTensor, b: Option<QTensor>| -> Result<Linear> {
                Linear::new(w, b.map(|b| b.dequantize(device)).transpose()?)
            };
            layers.push(Layer {
                q: linear(get("attn_q.weight")?, Some(get("attn_q.bias")?))?,
                k: linear(get("attn_k.weight")?, Some(get("attn_k.bias")?))?,
                v: linear(get("attn_v.weight")?, Some(get("attn_v.bias")?))?,
                o: linear(get("attn_output.weight")?, None)?,
                gate: linear(get("ffn_gate.weight")?, None)?,
                up: linear(get("ffn_up.weight")?, None)?,
                down: linear(get("ffn_down.weight")?, None)?,
                attention_norm: get("attn_norm.weight")?.dequantize(device)?,
                ffn_norm: get("ffn_norm.weight")?.dequantize(device)?,
            });
        }
        report(progress, Task::LoadModel, blocks as u64, blocks as u64);
        // Rotary embeddings: one angle per position and pair of dimensions.
        let inverse: Vec<f32> = (0..head_dim)
            .step_by(2)
            .map(|i| 1.0 / rope_base.powf(i as f32 / head_dim as f32))
            .collect();
        let inverse = Tensor::new(inverse.as_slice(), device)?;
        let angles = Tensor::arange(0, context as u32, device)?
            .to_dtype(DType::F32)?
            .reshape((context, 1))?
            .matmul(&inverse.reshape((1, head_dim / 2))?)?;
        Ok(Qwen2 {
            embeddings,
            layers,
            norm,
            output,
            cos: angles.cos()?,
            sin: angles.sin()?,
            heads,
            kv_heads,
            head_dim,
            eps,
            context,
        })
    }

    /// An empty cache.
    pub(crate) fn cache(&self) -> Cache {
        Cache {
            layers: vec![None; self.layers.len()],
            len: 0,
        }
    }

    /// Reads `tokens` after what `cache` holds, and returns the logits of the next token.
    pub(crate) fn forward(&self, tokens: &[u32], cache: &mut Cache) -> Result<Tensor> {
        let x = self.hidden(tokens, cache)?;
        self.logits_at(&x, tokens.len() - 1)
    }

    /// The logits of the token after the `i`-th of the `hidden` states [`hidden`](Self::hidden)
    /// returned.
    pub(crate) fn logits_at(&self, hidden: &Tensor, i: usize) -> Result<Tensor> {
        self.output.forward(&hidden.i((.., i, ..))?)?.squeeze(0)
    }

    /// Reads `tokens` after what `cache` holds, and returns their final hidden states,
    /// `(1, tokens, width)`, from which [`logits_at`](Self::logits_at) works out the
    /// logits after any of them.
    pub(crate) fn hidden(&self, tokens: &[u32], cache: &mut Cache) -> Result<Tensor> {
        let (pos, m) = (cache.len, tokens.len());
        if m == 0 || pos + m > self.context {
            return Err(candle_core::Error::Msg(format!(
                "{m} tokens after {pos} do not fit the model's window of {}",
                self.context
            )));
        }
        let device = self.embeddings.device();
        let ids = Tensor::new(tokens, device)?;
        let mut x = self.embeddings.index_select(&ids, 0)?.unsqueeze(0)?;
        let mask = if m > 1 {
            Some(causal_mask(pos, m, device)?)
        } else {
            None
        };
        let (cos, sin) = (self.cos.narrow(0, pos, m)?, self.sin.narrow(0, pos, m)?);
        for (layer, slot) in self.layers.iter().zip(cache.layers.iter_mut()) {
            let h = candle_nn::ops::rms_norm(&x, &layer.attention_norm, self.eps)?;
            let h = self.attention(layer, &h, slot, pos, mask.as_ref(), (&cos, &sin))?;
            x = (x + h)?;
            let h = candle_nn::ops::rms_norm(&x, &layer.ffn_norm, self.eps)?;
            let h = (candle_nn::ops::silu(&layer.gate.forward(&h)?)? * layer.up.forward(&h)?)?;
            x = (x + layer.down.forward(&h)?)?;
        }
        cache.len = pos + m;
        candle_nn::ops::rms_norm(&x, &self.norm, self.eps)
    }

    fn attention(
        &self,
        layer: &Layer,
        x: &Tensor,
        slot: &mut Option<Arc<Kv>>,
        pos: usize,
        mask: Option<&Tensor>,
        (cos, sin): (&Tensor, &Tensor),
    ) -> Result<Tensor> {
        let (b, m, width) = x.dims3()?;
        let split = |t: Tensor, heads: usize| -> Result<Tensor> {
            t.reshape((b, m, heads, self.head_dim))?
                .transpose(1, 2)?
                .contiguous()
        };
        let q = split(layer.q.forward(x)?, self.heads)?;
        let k = split(layer.k.forward(x)?, self.kv_heads)?;
        let v = split(layer.v.forward(x)?, self.kv_heads)?;
        let q = candle_nn::rotary_emb::rope(&q, cos, sin)?;
        let k = candle_nn::rotary_emb::rope(&k, cos, sin)?;
        let (k, v) = append(slot, pos, &k, &v)?;
        let y = grouped_attention(&q, &k, &v, mask)?
            .transpose(1, 2)?
            .reshape((b, m, width))?;
        layer.o.forward(&y)
    }
}

/// The additive mask of `m` new tokens after `pos` cached ones: 0 where a token may attend
/// (itself and everything before), minus infinity after it.
fn causal_mask(pos: usize, m: usize, device: &Device) -> Result<Tensor> {
    let total = pos + m;
    let values: Vec<f32> = (0..m)
        .flat_map(|i| (0..total).map(move |j| if j > pos + i { f32::NEG_INFINITY } else { 0.0 }))
        .collect();
    Tensor::from_vec(values, (m, total), device)
}

/// Attention of `q` (`(batch, heads, m, dim)`) over `k` and `v` (`(batch, kv_heads, total,
/// dim)`), where query head `h` reads key/value head `h / (heads / kv_heads)` (grouped query
/// attention), under an additive `(m, total)` mask. The query heads of one key/value head
/// are taken as one taller matrix, so the keys and values are never copied per query head
/// (which cost more than the rest of a written token's attention in a long context).
fn grouped_attention(q: &Tensor, k: &Tensor, v: &Tensor, mask: Option<&Tensor>) -> Result<Tensor> {
    let (b, heads, m, dim) = q.dims4()?;
    let kv_heads = k.dim(1)?;
    let groups = heads / kv_heads;
    let q = q.reshape((b, kv_heads, groups * m, dim))?;
    let scores = (q.matmul(&k.t()?)? / (dim as f64).sqrt())?;
    let scores = match mask {
        Some(mask) => {
            let total = scores.dim(3)?;
            scores
                .reshape((b, kv_heads, groups, m, total))?
                .broadcast_add(mask)?
                .reshape((b, kv_heads, groups * m, total))?
        }
        None => scores,
    };
    let weights = candle_nn::ops::softmax_last_dim(&scores)?;
    weights.matmul(v)?.reshape((b, heads, m, dim))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The kernels give candle's products, up to the order of `f32` additions, for both
    /// block kinds, for one input row and for many (tiles of four and the rows left over).
    #[test]
    fn products_match_candles() {
        if !memlane_kernels::quantized::available() {
            eprintln!("this CPU lacks AVX-512 VNNI: the kernels are not used here");
            return;
        }
        let device = Device::Cpu;
        let mut checked = 0;
        for dtype in [GgmlDType::Q4K, GgmlDType::Q6K] {
            let (n, k) = (37, 3 * 256);
            let w = Tensor::randn(0f32, 1.0, (n, k), &device).unwrap();
            let w = QTensor::quantize(&w, dtype).unwrap();
            let kernel = kernel(&w).expect("a kernel for this weight");
            let candle = QMatMul::from_qtensor(w).unwrap();
            // Every tile (one to four input rows) and tiles after a full one.
            for m in [1, 2, 3, 4, 6, 7] {
                // Inputs with an offset, so that the minimums and offsets matter.
                let x = (Tensor::randn(0f32, 1.0, (m, k), &device).unwrap() + 0.5).unwrap();
                let expected: Vec<f32> = candle
                    .forward(&x)
                    .unwrap()
                    .flatten_all()
                    .unwrap()
                    .to_vec1()
                    .unwrap();
                let got = kernel
                    .matmul(&x.flatten_all().unwrap().to_vec1().unwrap(), m)
                    .unwrap();
                assert_eq!(got.len(), m * n);
                // The minimums' part and the rest nearly cancel (terms of hundreds for
                // results of units): rounding moves results by about 1e-4.
                for (i, (a, b)) in got.iter().zip(&expected).enumerate() {
                    assert!(
                        (a - b).abs() <= 1e-3 * (1.0 + b.abs()),
                        "{dtype:?}, {m} rows, value {i}: {a} against candle's {b}"
                    );
                }
                checked += 1;
            }
        }
        assert_eq!(checked, 12);
    }

    #[test]
    fn other_kinds_and_shapes_are_left_to_candle() {
        let device = Device::Cpu;
        let w = Tensor::randn(0f32, 1.0, (4, 2 * 256), &device).unwrap();
        let q8 = QTensor::quantize(&w, GgmlDType::Q8_0).unwrap();
        assert!(kernel(&q8).is_none());
        let q4 = QTensor::quantize(&w, GgmlDType::Q4K).unwrap();
        assert_eq!(
            kernel(&q4).is_some(),
            memlane_kernels::quantized::available()
        );
        if let Some(kernel) = kernel(&q4) {
            // An input of the wrong width is an error, not a read out of bounds.
            assert!(kernel.matmul(&[0.0; 256], 1).is_err());
        }
    }

    /// Grouped attention equals attention with each key/value head copied out for the
    /// query heads that share it, with and without a mask.
    #[test]
    fn each_query_head_reads_the_key_value_head_of_its_group() {
        let device = Device::Cpu;
        let (heads, kv_heads, dim, pos, m) = (6, 2, 4, 3, 2);
        let groups = heads / kv_heads;
        let q = Tensor::randn(0f32, 1.0, (1, heads, m, dim), &device).unwrap();
        let k = Tensor::randn(0f32, 1.0, (1, kv_heads, pos + m, dim), &device).unwrap();
        let v = Tensor::randn(0f32, 1.0, (1, kv_heads, pos + m, dim), &device).unwrap();
        let repeat = |x: &Tensor| {
            x.unsqueeze(2)
                .unwrap()
                .expand((1, kv_heads, groups, pos + m, dim))
                .unwrap()
                .reshape((1, heads, pos + m, dim))
                .unwrap()
        };
        let mask = causal_mask(pos, m, &device).unwrap();
        let mut checked = 0;
        for mask in [None, Some(&mask)] {
            let scores =
                (q.matmul(&repeat(&k).t().unwrap()).unwrap() / (dim as f64).sqrt()).unwrap();
            let scores = match mask {
                Some(mask) => scores.broadcast_add(mask).unwrap(),
                None => scores,
            };
            let weights = candle_nn::ops::softmax_last_dim(&scores).unwrap();
            let expected: Vec<f32> = weights
                .matmul(&repeat(&v))
                .unwrap()
                .flatten_all()
                .unwrap()
                .to_vec1()
                .unwrap();
            let got: Vec<f32> = grouped_attention(&q, &k, &v, mask)
                .unwrap()
                .flatten_all()
                .unwrap()
                .to_vec1()
                .unwrap();
            assert_eq!(got.len(), expected.len());
            for (a, b) in got.iter().zip(&expected) {
                assert!((a - b).abs() < 1e-5, "{a} against {b}");
            }
            checked += 1;
        }
        assert_eq!(checked, 2);
    }

    /// Appending writes in place only into keys and values no other cache shares: a
    /// snapshot (a clone, a shorter prefix) keeps what it held while both read on.
    #[test]
    fn a_snapshot_is_unchanged_by_later_reads_of_either_copy() {
        let device = Device::Cpu;
        // Two heads, so that a part of a buffer is not contiguous; the second is read.
        let token = |x: f32| Tensor::full(x, (1, 2, 1, 2), &device).unwrap();
        let values = |t: &Tensor| -> Vec<f32> {
            t.i((0, 1))
                .unwrap()
                .flatten_all()
                .unwrap()
                .to_vec1()
                .unwrap()
        };
        let mut slot = None;
        for (pos, x) in [1.0, 2.0, 3.0].into_iter().enumerate() {
            append(&mut slot, pos, &token(x), &token(-x)).unwrap();
        }
        // Which buffer a slot holds (its address: holding a clone would share it).
        let buffer = |slot: &Option<Arc<Kv>>| Arc::as_ptr(slot.as_ref().unwrap());
        // Three tokens went into one buffer, written in place.
        let first = buffer(&slot);
        let (k, v) = append(&mut slot, 3, &token(4.0), &token(-4.0)).unwrap();
        assert_eq!(buffer(&slot), first);
        assert_eq!(values(&k), [1., 1., 2., 2., 3., 3., 4., 4.]);
        assert_eq!(values(&v), [-1., -1., -2., -2., -3., -3., -4., -4.]);

        // A snapshot of two tokens, and the original, each read a different third token.
        let mut snapshot = slot.clone();
        let (k, _) = append(&mut snapshot, 2, &token(9.0), &token(-9.0)).unwrap();
        assert_eq!(values(&k), [1., 1., 2., 2., 9., 9.]);
        assert_ne!(buffer(&snapshot), first);
        let (k, _) = append(&mut slot, 4, &token(5.0), &token(-5.0)).unwrap();
        assert_eq!(values(&k), [1., 1., 2., 2., 3., 3., 4., 4., 5., 5.]);
        // The snapshot, now alone with its copy, writes into it in place.
        let copy = buffer(&snapshot);
        let (k, _) = append(&mut snapshot, 3, &token(8.0), &token(-8.0)).unwrap();
        assert_eq!(values(&k), [1., 1., 2., 2., 9., 9., 8., 8.]);
        assert_eq!(buffer(&snapshot), copy);

        // Past the buffer's room, a new one holds every token so far.
        let mut pos = 5;
        while pos < 5 + KV_ROOM + 3 {
            append(&mut slot, pos, &token(pos as f32), &token(0.0)).unwrap();
            pos += 1;
        }
        let (k, _) = append(&mut slot, pos, &token(0.5), &token(0.0)).unwrap();
        let k = values(&k);
        assert_eq!(k.len(), 2 * (pos + 1));
        assert_eq!(&k[..10], [1., 1., 2., 2., 3., 3., 4., 4., 5., 5.]);
        assert_eq!(k[2 * pos], 0.5);
    }

    #[test]
    fn the_mask_lets_each_new_token_see_itself_and_everything_before() {
        let mask = causal_mask(2, 3, &Device::Cpu).unwrap();
        let rows: Vec<Vec<f32>> = mask.to_vec2().unwrap();
        let inf = f32::NEG_INFINITY;
        assert_eq!(
            rows,
            vec![
                vec![0.0, 0.0, 0.0, inf, inf],
                vec![0.0, 0.0, 0.0, 0.0, inf],
                vec![0.0, 0.0, 0.0, 0.0, 0.0],
            ]
        );
    }
}
