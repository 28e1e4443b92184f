//! Matrix products over the local model's quantized weights (llama.cpp's Q4_K and Q6_K
//! blocks) with AVX-512 where the CPU has it, else with AVX2 and FMA: the local model
//! spends most of its time in them.
//!
//! candle's kernels (AVX2) take each row of the input on its own: a prompt of 80 tokens
//! unpacks every block of every weight 80 times, and reads the whole weight from memory
//! for each. Here each block of a weight row is unpacked once, into registers, for four
//! input rows at a time, while a few weight rows stay in the core's cache for all the
//! input's rows; with AVX-512 its products are taken 64 values per instruction, with AVX2
//! 32. The arithmetic is llama.cpp's: the input is quantized to 8 bits
//! per block of 256 (as `Q8_K`, the way candle does it), the integer sums are exact and
//! each block's sum is scaled in `f32`; only the order of the final `f32` additions
//! differs from candle's, which moves the result by rounding.
//!
//! One of this crate's two unsafe modules (with the encoder's matrix products): the SIMD
//! instructions are `unsafe` to call, and are called only after the CPU was checked for
//! them. Every load reads within a block whose bounds [`Kernel::matmul`] checks before
//! entering the unsafe code.

#![allow(unsafe_code)]

use half::f16;
use rayon::prelude::*;

/// Values per quantized block.
const QK: usize = 256;
const Q4K_BYTES: usize = 144;
const Q6K_BYTES: usize = 210;
/// Weight rows per task shared out among the threads.
const ROWS_PER_TASK: usize = 16;

/// The kinds of quantized block the kernels multiply, as the GGUF format names them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// `Q4_K`: 4-bit values with 6-bit scales and minimums, 144 bytes per 256 values.
    Q4K,
    /// `Q6_K`: 6-bit values with 8-bit scales, 210 bytes per 256 values.
    Q6K,
}

impl Kind {
    /// Bytes of one block of 256 values.
    pub fn block_bytes(self) -> usize {
        match self {
            Kind::Q4K => Q4K_BYTES,
            Kind::Q6K => Q6K_BYTES,
        }
    }
}

/// A quantized weight of `rows` × `cols` that this module multiplies: its blocks, row after
/// row, as the GGUF file holds them.
pub struct Kernel {
    kind: Kind,
    isa: Isa,
    rows: usize,
    cols: usize,
    data: Vec<u8>,
}

/// The instructions a kernel runs on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Isa {
    /// AVX-512 with its byte, word and neural-network instructions (Intel since Ice Lake,
    /// AMD since Zen 4).
    Avx512,
    /// AVX2 and FMA (Intel since Haswell, AMD since Zen).
    Avx2,
}

/// The best instructions of this CPU that the kernels run on, if any.
fn isa() -> Option<Isa> {
    #[cfg(target_arch = "x86_64")]
    {
        if std::arch::is_x86_feature_detected!("avx512f")
            && std::arch::is_x86_feature_detected!("avx512bw")
            && std::arch::is_x86_feature_detected!("avx512vnni")
        {
            return Some(Isa::Avx512);
        }
        if std::arch::is_x86_feature_detected!("avx2") && std::arch::is_x86_feature_detected!("fma")
        {
            return Some(Isa::Avx2);
        }
        None
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        None
    }
}

/// Whether this CPU runs the kernels: AVX-512 (F, BW and VNNI), or AVX2 and FMA.
pub fn available() -> bool {
    isa().is_some()
}

impl Kernel {
    /// The kernel of a weight of `rows` × `cols` held as blocks of `kind`, row after row
    /// (`data`, as the GGUF file holds them), on a CPU that runs it; `None` for another CPU,
    /// or a shape whose rows are not whole blocks or that `data` does not fill exactly.
    pub fn new(kind: Kind, rows: usize, cols: usize, data: Vec<u8>) -> Option<Kernel> {
        let isa = isa()?;
        if cols == 0 || !cols.is_multiple_of(QK) {
            return None;
        }
        if data.len() != rows * (cols / QK) * kind.block_bytes() {
            return None;
        }
        Some(Kernel {
            kind,
            isa,
            rows,
            cols,
            data,
        })
    }

    /// Rows of the weight (the width of a product).
    pub fn rows(&self) -> usize {
        self.rows
    }

    /// `x` (`m` rows of as many values as the weight has columns) times the weight's
    /// transpose: `m` rows of [`Kernel::rows`] values.
    pub fn matmul(&self, x: &[f32], m: usize) -> Result<Vec<f32>, String> {
        let (n, k) = (self.rows, self.cols);
        if x.len() != m * k {
            return Err(format!(
                "{} input values for {m} rows of the weight's {k} columns",
                x.len()
            ));
        }
        if m == 0 {
            return Ok(Vec::new());
        }
        let blocks = k / QK;
        let input = Q8::quantize(x, m, k);
        let row_bytes = blocks * self.kind.block_bytes();
        let mut transposed = vec![0f32; n * m];
        transposed
            .par_chunks_mut(ROWS_PER_TASK * m)
            .enumerate()
            .for_each(|(task, out)| {
                // Up to four input rows at a time, over the task's weight rows: both stay in
                // the core's first-level cache while they are multiplied, and each block of
                // a weight row is unpacked once per tile. A pass of two or three tokens (a
                // token written and guesses read ahead) takes them in one tile.
                let mut i = 0;
                while i < m {
                    let tile = (m - i).min(4);
                    for (r, out) in out.chunks_mut(m).enumerate() {
                        let row = task * ROWS_PER_TASK + r;
                        let weight = &self.data[row * row_bytes..(row + 1) * row_bytes];
                        let out = &mut out[i..i + tile];
                        match tile {
                            4 => out.copy_from_slice(&self.dot::<4>(weight, &input, i)),
                            3 => out.copy_from_slice(&self.dot::<3>(weight, &input, i)),
                            2 => out.copy_from_slice(&self.dot::<2>(weight, &input, i)),
                            _ => out.copy_from_slice(&self.dot::<1>(weight, &input, i)),
                        }
                    }
                    i += tile;
                }
            });
        if m == 1 {
            return Ok(transposed);
        }
        let mut out = vec![0f32; m * n];
        for (row, column) in transposed.chunks(m).enumerate() {
            for (i, value) in column.iter().enumerate() {
                out[i * n + row] = *value;
            }
        }
        Ok(out)
    }

    /// One weight row (its blocks) times input rows `first..first + R`.
    fn dot<const R: usize>(&self, weight: &[u8], input: &Q8, first: usize) -> [f32; R] {
        let blocks = self.cols / QK;
        assert!(weight.len() == blocks * self.kind.block_bytes() && first + R <= input.rows);
        assert!(input.blocks == blocks);
        #[cfg(target_arch = "x86_64")]
        {
            // SAFETY: a `Kernel` exists only where `isa()` found its instructions; the row
            // and the input rows were checked to hold `blocks` whole blocks each.
            unsafe {
                match (self.isa, self.kind) {
                    (Isa::Avx512, Kind::Q4K) => x86::q4k::<R>(weight, input, first),
                    (Isa::Avx512, Kind::Q6K) => x86::q6k::<R>(weight, input, first),
                    (Isa::Avx2, Kind::Q4K) => x86::q4k_avx2::<R>(weight, input, first),
                    (Isa::Avx2, Kind::Q6K) => x86::q6k_avx2::<R>(weight, input, first),
                }
            }
        }
        #[cfg(not(target_arch = "x86_64"))]
        {
            unreachable!("no kernel is built off x86-64")
        }
    }
}

/// Input rows quantized as llama.cpp's `Q8_K`: per block of 256 values, a scale `d` and
/// 256 signed bytes, with the sums of each 16 of them.
struct Q8 {
    rows: usize,
    blocks: usize,
    d: Vec<f32>,
    qs: Vec<i8>,
    sums: Vec<i16>,
}

impl Q8 {
    /// candle's quantization (and llama.cpp's, up to rounding ties): the value of largest
    /// magnitude maps to -128.
    fn quantize(x: &[f32], m: usize, k: usize) -> Q8 {
        let blocks = k / QK;
        let mut q = Q8 {
            rows: m,
            blocks,
            d: vec![0.0; m * blocks],
            qs: vec![0; m * k],
            sums: vec![0; m * blocks * 16],
        };
        for (b, values) in x.chunks_exact(QK).enumerate() {
            let (mut max, mut amax) = (0f32, 0f32);
            for &v in values {
                if amax < v.abs() {
                    amax = v.abs();
                    max = v;
                }
            }
            if amax == 0.0 {
                continue;
            }
            let iscale = -128f32 / max;
            let qs = &mut q.qs[b * QK..(b + 1) * QK];
            for (out, &v) in qs.iter_mut().zip(values) {
                *out = (iscale * v).round().min(127.0) as i8;
            }
            for (sum, sixteen) in q.sums[b * 16..(b + 1) * 16]
                .iter_mut()
                .zip(qs.chunks_exact(16))
            {
                *sum = sixteen.iter().map(|&v| v as i16).sum();
            }
            q.d[b] = 1.0 / iscale;
        }
        q
    }
}

/// A Q4_K block's eight 6-bit scales and eight 6-bit minimums, unpacked (llama.cpp's
/// `get_scale_min_k4`, four at a time).
#[inline(always)]
fn q4k_scales(packed: &[u8]) -> ([u8; 8], [u8; 8]) {
    let word =
        |i: usize| u32::from_le_bytes([packed[i], packed[i + 1], packed[i + 2], packed[i + 3]]);
    let (a, b, c) = (word(0), word(4), word(8));
    // Scales 0–3 are the low 6 bits of bytes 0–3; minimums 0–3 of bytes 4–7. Scales 4–7
    // are the low nibbles of bytes 8–11 under the top 2 bits of bytes 0–3; minimums 4–7
    // the high nibbles under the top 2 bits of bytes 4–7.
    let scales_low = a & 0x3f3f3f3f;
    let mins_low = b & 0x3f3f3f3f;
    let scales_high = (c & 0x0f0f0f0f) | (((a >> 6) & 0x03030303) << 4);
    let mins_high = ((c >> 4) & 0x0f0f0f0f) | (((b >> 6) & 0x03030303) << 4);
    let mut scales = [0u8; 8];
    let mut mins = [0u8; 8];
    scales[..4].copy_from_slice(&scales_low.to_le_bytes());
    scales[4..].copy_from_slice(&scales_high.to_le_bytes());
    mins[..4].copy_from_slice(&mins_low.to_le_bytes());
    mins[4..].copy_from_slice(&mins_high.to_le_bytes());
    (scales, mins)
}

#[inline(always)]
fn f16_at(bytes: &[u8], at: usize) -> f32 {
    f16::from_le_bytes([bytes[at], bytes[at + 1]]).to_f32()
}

#[cfg(target_arch = "x86_64")]
mod x86 {
    use std::arch::x86_64::*;

    use super::{f16_at, q4k_scales, Q4K_BYTES, Q6K_BYTES, Q8, QK};

    /// Index vectors that spread 16-bit lanes `first..first + groups` of a vector over 32
    /// lanes, each repeated `32 / groups` times: for Q4_K, each 64 values' two scales; for
    /// Q6_K, their four.
    const fn spreads(groups: usize) -> [[i16; 32]; 4] {
        let mut out = [[0i16; 32]; 4];
        let mut j = 0;
        while j < 4 {
            let mut i = 0;
            while i < 32 {
                out[j][i] = (j * groups + i / (32 / groups)) as i16;
                i += 1;
            }
            j += 1;
        }
        out
    }
    const Q4K_SPREADS: [[i16; 32]; 4] = spreads(2);
    const Q6K_SPREADS: [[i16; 32]; 4] = spreads(4);

    #[inline]
    #[target_feature(enable = "avx512f")]
    fn load_spreads(spreads: &[[i16; 32]; 4]) -> [__m512i; 4] {
        // SAFETY: each is 64 readable bytes.
        spreads.map(|lanes| unsafe { _mm512_loadu_si512(lanes.as_ptr().cast()) })
    }

    /// The sum of one block's four 64-value products, each weighted by its scales.
    ///
    /// # Safety
    /// The CPU has AVX-512 F, BW and VNNI; `y` points at 256 readable bytes.
    #[inline]
    #[target_feature(enable = "avx512f,avx512bw,avx512vnni")]
    unsafe fn block_sum(q: &[__m512i; 4], scales: &[__m512i; 4], y: *const i8) -> __m512i {
        let mut sum = _mm512_setzero_si512();
        for j in 0..4 {
            let y = _mm512_loadu_si512(y.add(64 * j).cast());
            // Weights (unsigned, at most 63) times inputs, in pairs: 16-bit sums that fit.
            let products = _mm512_maddubs_epi16(q[j], y);
            sum = _mm512_dpwssd_epi32(sum, products, scales[j]);
        }
        sum
    }

    /// Horizontal sum of eight `f32`.
    #[inline]
    #[target_feature(enable = "avx2")]
    fn sum8(v: __m256) -> f32 {
        let v = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
        let v = _mm_add_ps(v, _mm_movehl_ps(v, v));
        let v = _mm_add_ss(v, _mm_movehdup_ps(v));
        _mm_cvtss_f32(v)
    }

    /// Adds one weight block's products with input block `at` to a row's sums: the block's
    /// 64-value products weighted by their scales, times `d` (and the input's scale), into
    /// `acc`; the input's sums of 16 weighted by `weights` (Q4_K's minimums, Q6_K's
    /// scales), times `c`, into `acc16`.
    ///
    /// # Safety
    /// The CPU has AVX-512 F, BW and VNNI; `at` is a block of `input`.
    #[inline]
    #[target_feature(enable = "avx512f,avx512bw,avx512vnni,avx2,fma")]
    #[allow(clippy::too_many_arguments)]
    unsafe fn accumulate(
        q: &[__m512i; 4],
        s: &[__m512i; 4],
        input: &Q8,
        at: usize,
        (d, c): (f32, f32),
        weights: __m256i,
        (acc, acc16): (&mut __m512, &mut __m256),
    ) {
        let yd = input.d[at];
        let sum = block_sum(q, s, input.qs.as_ptr().add(at * QK));
        *acc = _mm512_fmadd_ps(_mm512_cvtepi32_ps(sum), _mm512_set1_ps(d * yd), *acc);
        let sums = _mm256_loadu_si256(input.sums.as_ptr().add(at * 16).cast());
        let weighted = _mm256_madd_epi16(sums, weights);
        *acc16 = _mm256_fmadd_ps(_mm256_cvtepi32_ps(weighted), _mm256_set1_ps(c * yd), *acc16);
    }

    /// Each row's total.
    #[inline]
    #[target_feature(enable = "avx512f,avx2")]
    fn finish<const R: usize>(acc: &[__m512; R], acc16: &[__m256; R]) -> [f32; R] {
        std::array::from_fn(|r| _mm512_reduce_add_ps(acc[r]) + sum8(acc16[r]))
    }

    /// A Q4_K weight row times `R` input rows from `first`.
    ///
    /// # Safety
    /// The CPU has AVX-512 F, BW and VNNI; `weight` holds `input.blocks` Q4_K blocks and
    /// `first + R <= input.rows`.
    #[target_feature(enable = "avx512f,avx512bw,avx512vnni,avx2,fma")]
    pub(super) unsafe fn q4k<const R: usize>(weight: &[u8], input: &Q8, first: usize) -> [f32; R] {
        let nibble = _mm256_set1_epi8(0x0F);
        let spreads = load_spreads(&Q4K_SPREADS);
        // Each minimum twice: it weighs two sums of 16 inputs.
        let pairs = _mm_setr_epi8(0, 0, 1, 1, 2, 2, 3, 3, 4, 4, 5, 5, 6, 6, 7, 7);
        let mut acc = [_mm512_setzero_ps(); R];
        let mut acc_min = [_mm256_setzero_ps(); R];
        for (b, block) in weight.chunks_exact(Q4K_BYTES).enumerate() {
            let d = f16_at(block, 0);
            let dmin = f16_at(block, 2);
            let (scales, mins) = q4k_scales(&block[4..16]);
            let scales = _mm512_cvtepu8_epi16(_mm256_castsi128_si256(_mm_loadl_epi64(
                scales.as_ptr().cast(),
            )));
            let mins = _mm256_cvtepu8_epi16(_mm_shuffle_epi8(
                _mm_loadl_epi64(mins.as_ptr().cast()),
                pairs,
            ));
            let mut q = [_mm512_setzero_si512(); 4];
            let mut s = [_mm512_setzero_si512(); 4];
            for j in 0..4 {
                // 32 bytes: the low nibbles are values 64j..64j+32, the high ones the next 32.
                let bits = _mm256_loadu_si256(block.as_ptr().add(16 + 32 * j).cast());
                let low = _mm256_and_si256(bits, nibble);
                let high = _mm256_and_si256(_mm256_srli_epi16(bits, 4), nibble);
                q[j] = _mm512_inserti64x4(_mm512_castsi256_si512(low), high, 1);
                s[j] = _mm512_permutexvar_epi16(spreads[j], scales);
            }
            for r in 0..R {
                let at = (first + r) * input.blocks + b;
                let (a, m) = (&mut acc[r], &mut acc_min[r]);
                accumulate(&q, &s, input, at, (d, -dmin), mins, (a, m));
            }
        }
        finish(&acc, &acc_min)
    }

    /// A Q6_K weight row times `R` input rows from `first`.
    ///
    /// # Safety
    /// As for [`q4k`], with Q6_K blocks.
    #[target_feature(enable = "avx512f,avx512bw,avx512vnni,avx2,fma")]
    pub(super) unsafe fn q6k<const R: usize>(weight: &[u8], input: &Q8, first: usize) -> [f32; R] {
        let nibble = _mm256_set1_epi8(0x0F);
        let two = _mm256_set1_epi8(0x03);
        let spreads = load_spreads(&Q6K_SPREADS);
        let mut acc = [_mm512_setzero_ps(); R];
        let mut acc_offset = [_mm256_setzero_ps(); R];
        for (b, block) in weight.chunks_exact(Q6K_BYTES).enumerate() {
            let (ql, qh) = (block.as_ptr(), block.as_ptr().add(128));
            let scales16 = _mm256_cvtepi8_epi16(_mm_loadu_si128(block.as_ptr().add(192).cast()));
            let scales = _mm512_castsi256_si512(scales16);
            let d = f16_at(block, 208);
            let mut q = [_mm512_setzero_si512(); 4];
            let mut s = [_mm512_setzero_si512(); 4];
            for half in 0..2 {
                let a = _mm256_loadu_si256(ql.add(64 * half).cast());
                let b = _mm256_loadu_si256(ql.add(64 * half + 32).cast());
                let h = _mm256_loadu_si256(qh.add(32 * half).cast());
                // Values are 4 low bits from `ql` and 2 high bits from `qh`, stored plus 32.
                let h0 = _mm256_slli_epi16(_mm256_and_si256(h, two), 4);
                let h2 = _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(h, 2), two), 4);
                let h4 = _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(h, 4), two), 4);
                let h6 = _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(h, 6), two), 4);
                let v0 = _mm256_or_si256(_mm256_and_si256(a, nibble), h0);
                let v1 = _mm256_or_si256(_mm256_and_si256(b, nibble), h2);
                let v2 = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(a, 4), nibble), h4);
                let v3 = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(b, 4), nibble), h6);
                q[2 * half] = _mm512_inserti64x4(_mm512_castsi256_si512(v0), v1, 1);
                q[2 * half + 1] = _mm512_inserti64x4(_mm512_castsi256_si512(v2), v3, 1);
            }
            for j in 0..4 {
                s[j] = _mm512_permutexvar_epi16(spreads[j], scales);
            }
            for r in 0..R {
                let at = (first + r) * input.blocks + b;
                let (a, o) = (&mut acc[r], &mut acc_offset[r]);
                // The stored values are 32 more than the weights: take 32 × each scale ×
                // its 16 inputs' sum back off.
                accumulate(&q, &s, input, at, (d, -32.0 * d), scales16, (a, o));
            }
        }
        finish(&acc, &acc_offset)
    }

    /// The sum of one block's eight 32-value products, each weighted by its scales (16-bit
    /// lanes, one per pair of values): AVX2's counterpart of [`block_sum`].
    ///
    /// # Safety
    /// The CPU has AVX2; `y` points at 256 readable bytes.
    #[inline]
    #[target_feature(enable = "avx2")]
    unsafe fn block_sum_avx2(q: &[__m256i; 8], scales: &[__m256i; 8], y: *const i8) -> __m256i {
        let mut sum = _mm256_setzero_si256();
        for k in 0..8 {
            let y = _mm256_loadu_si256(y.add(32 * k).cast());
            // Weights (unsigned, at most 63) times inputs, in pairs: 16-bit sums that fit;
            // times their scales, in pairs again: 32-bit sums.
            let products = _mm256_maddubs_epi16(q[k], y);
            sum = _mm256_add_epi32(sum, _mm256_madd_epi16(products, scales[k]));
        }
        sum
    }

    /// [`accumulate`] with AVX2.
    ///
    /// # Safety
    /// The CPU has AVX2 and FMA; `at` is a block of `input`.
    #[inline]
    #[target_feature(enable = "avx2,fma")]
    #[allow(clippy::too_many_arguments)]
    unsafe fn accumulate_avx2(
        q: &[__m256i; 8],
        s: &[__m256i; 8],
        input: &Q8,
        at: usize,
        (d, c): (f32, f32),
        weights: __m256i,
        (acc, acc16): (&mut __m256, &mut __m256),
    ) {
        let yd = input.d[at];
        let sum = block_sum_avx2(q, s, input.qs.as_ptr().add(at * QK));
        *acc = _mm256_fmadd_ps(_mm256_cvtepi32_ps(sum), _mm256_set1_ps(d * yd), *acc);
        let sums = _mm256_loadu_si256(input.sums.as_ptr().add(at * 16).cast());
        let weighted = _mm256_madd_epi16(sums, weights);
        *acc16 = _mm256_fmadd_ps(_mm256_cvtepi32_ps(weighted), _mm256_set1_ps(c * yd), *acc16);
    }

    /// [`q4k`] with AVX2 and FMA: each block unpacked into eight vectors of 32 values, in
    /// order, each with the scale of its 32.
    ///
    /// # Safety
    /// The CPU has AVX2 and FMA; `weight` holds `input.blocks` Q4_K blocks and
    /// `first + R <= input.rows`.
    #[target_feature(enable = "avx2,fma")]
    pub(super) unsafe fn q4k_avx2<const R: usize>(
        weight: &[u8],
        input: &Q8,
        first: usize,
    ) -> [f32; R] {
        let nibble = _mm256_set1_epi8(0x0F);
        // Each minimum twice: it weighs two sums of 16 inputs.
        let pairs = _mm_setr_epi8(0, 0, 1, 1, 2, 2, 3, 3, 4, 4, 5, 5, 6, 6, 7, 7);
        let mut acc = [_mm256_setzero_ps(); R];
        let mut acc_min = [_mm256_setzero_ps(); R];
        for (b, block) in weight.chunks_exact(Q4K_BYTES).enumerate() {
            let d = f16_at(block, 0);
            let dmin = f16_at(block, 2);
            let (scales, mins) = q4k_scales(&block[4..16]);
            let mins = _mm256_cvtepu8_epi16(_mm_shuffle_epi8(
                _mm_loadl_epi64(mins.as_ptr().cast()),
                pairs,
            ));
            let mut q = [_mm256_setzero_si256(); 8];
            let mut s = [_mm256_setzero_si256(); 8];
            for j in 0..4 {
                // 32 bytes: the low nibbles are values 64j..64j+32, the high ones the next 32.
                let bits = _mm256_loadu_si256(block.as_ptr().add(16 + 32 * j).cast());
                q[2 * j] = _mm256_and_si256(bits, nibble);
                q[2 * j + 1] = _mm256_and_si256(_mm256_srli_epi16(bits, 4), nibble);
                s[2 * j] = _mm256_set1_epi16(i16::from(scales[2 * j]));
                s[2 * j + 1] = _mm256_set1_epi16(i16::from(scales[2 * j + 1]));
            }
            for r in 0..R {
                let at = (first + r) * input.blocks + b;
                let (a, m) = (&mut acc[r], &mut acc_min[r]);
                accumulate_avx2(&q, &s, input, at, (d, -dmin), mins, (a, m));
            }
        }
        std::array::from_fn(|r| sum8(acc[r]) + sum8(acc_min[r]))
    }

    /// [`q6k`] with AVX2 and FMA: each block unpacked into eight vectors of 32 values, in
    /// order, each with the scales of its two 16.
    ///
    /// # Safety
    /// As for [`q4k_avx2`], with Q6_K blocks.
    #[target_feature(enable = "avx2,fma")]
    pub(super) unsafe fn q6k_avx2<const R: usize>(
        weight: &[u8],
        input: &Q8,
        first: usize,
    ) -> [f32; R] {
        let nibble = _mm256_set1_epi8(0x0F);
        let two = _mm256_set1_epi8(0x03);
        let mut acc = [_mm256_setzero_ps(); R];
        let mut acc_offset = [_mm256_setzero_ps(); R];
        for (b, block) in weight.chunks_exact(Q6K_BYTES).enumerate() {
            let (ql, qh) = (block.as_ptr(), block.as_ptr().add(128));
            let scales16 = _mm256_cvtepi8_epi16(_mm_loadu_si128(block.as_ptr().add(192).cast()));
            let scale = |i: usize| i16::from(block[192 + i] as i8);
            let d = f16_at(block, 208);
            let mut q = [_mm256_setzero_si256(); 8];
            let mut s = [_mm256_setzero_si256(); 8];
            for half in 0..2 {
                let a = _mm256_loadu_si256(ql.add(64 * half).cast());
                let b = _mm256_loadu_si256(ql.add(64 * half + 32).cast());
                let h = _mm256_loadu_si256(qh.add(32 * half).cast());
                // Values are 4 low bits from `ql` and 2 high bits from `qh`, stored plus 32.
                let h0 = _mm256_slli_epi16(_mm256_and_si256(h, two), 4);
                let h2 = _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(h, 2), two), 4);
                let h4 = _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(h, 4), two), 4);
                let h6 = _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(h, 6), two), 4);
                q[4 * half] = _mm256_or_si256(_mm256_and_si256(a, nibble), h0);
                q[4 * half + 1] = _mm256_or_si256(_mm256_and_si256(b, nibble), h2);
                q[4 * half + 2] =
                    _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(a, 4), nibble), h4);
                q[4 * half + 3] =
                    _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(b, 4), nibble), h6);
            }
            for (k, s) in s.iter_mut().enumerate() {
                // Pairs 0..8 of values 32k.. are the 16 of scale 2k, pairs 8..16 of 2k + 1.
                *s = _mm256_set_m128i(
                    _mm_set1_epi16(scale(2 * k + 1)),
                    _mm_set1_epi16(scale(2 * k)),
                );
            }
            for r in 0..R {
                let at = (first + r) * input.blocks + b;
                let (a, o) = (&mut acc[r], &mut acc_offset[r]);
                // The stored values are 32 more than the weights: take 32 × each scale ×
                // its 16 inputs' sum back off.
                accumulate_avx2(&q, &s, input, at, (d, -32.0 * d), scales16, (a, o));
            }
        }
        std::array::from_fn(|r| sum8(acc[r]) + sum8(acc_offset[r]))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The word-wise unpacking of Q4_K's scales is llama.cpp's `get_scale_min_k4`.
    #[test]
    fn q4k_scales_unpack_as_llama_cpp_does() {
        let mut checked = 0;
        for seed in 0u32..64 {
            let packed: Vec<u8> = (0..12u32)
                .map(|i| (seed.wrapping_mul(2654435761).wrapping_add(i * 97)).rotate_left(i) as u8)
                .collect();
            let (scales, mins) = q4k_scales(&packed);
            for j in 0..8 {
                let (scale, min) = if j < 4 {
                    (packed[j] & 63, packed[j + 4] & 63)
                } else {
                    (
                        (packed[j + 4] & 0xF) | ((packed[j - 4] >> 6) << 4),
                        (packed[j + 4] >> 4) | ((packed[j] >> 6) << 4),
                    )
                };
                assert_eq!((scales[j], mins[j]), (scale, min), "{packed:?}, {j}");
                checked += 1;
            }
        }
        assert_eq!(checked, 64 * 8);
    }

    #[test]
    fn shapes_that_are_not_whole_blocks_have_no_kernel_and_a_wrong_input_is_an_error() {
        let data = vec![0u8; 4 * 2 * Q4K_BYTES];
        // Columns that are not whole blocks, and data that does not fill the shape.
        assert!(Kernel::new(Kind::Q4K, 4, 2 * QK + 1, data.clone()).is_none());
        assert!(Kernel::new(Kind::Q4K, 5, 2 * QK, data.clone()).is_none());
        assert!(Kernel::new(Kind::Q6K, 4, 2 * QK, data.clone()).is_none());
        let kernel = Kernel::new(Kind::Q4K, 4, 2 * QK, data);
        assert_eq!(kernel.is_some(), available());
        if let Some(kernel) = kernel {
            // An input of the wrong width is an error, not a read out of bounds.
            assert!(kernel.matmul(&[0.0; QK], 1).is_err());
            assert_eq!(kernel.matmul(&[0.0; 2 * QK], 1).unwrap(), vec![0.0; 4]);
        }
    }
}
