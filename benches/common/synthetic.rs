//! The synthetic vectors of the search and scale benches: 1,000 random centres with noise
//! in 384 dimensions, closer to real sentence embeddings than uniform noise. Vector `i` is
//! the same in every run and every bench.

/// Dimensions of every synthetic vector.
pub const DIM: usize = 384;
/// Centres the vectors are drawn around.
pub const CENTRES: usize = 1_000;

/// Deterministic pseudo-random numbers (xorshift), so every run sees the same data.
pub struct Rng(u64);

impl Rng {
    pub fn new(seed: u64) -> Self {
        Rng(seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1)
    }

    pub fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }

    /// Roughly normal, by the sum of four uniforms.
    pub fn gauss(&mut self) -> f32 {
        (0..4)
            .map(|_| (self.next() % 10_000) as f32 / 10_000.0)
            .sum::<f32>()
            - 2.0
    }
}

pub fn normalise(mut v: Vec<f32>) -> Vec<f32> {
    let n = v.iter().map(|x| x * x).sum::<f32>().sqrt();
    v.iter_mut().for_each(|x| *x /= n);
    v
}

/// Vector `i`: a random centre plus noise.
pub fn vector(i: usize) -> Vec<f32> {
    let mut rng = Rng::new(i as u64 + 1);
    let centre = (rng.next() % CENTRES as u64) as usize;
    let mut c = Rng::new(1_000_000_007 + centre as u64);
    normalise((0..DIM).map(|_| c.gauss() + 0.6 * rng.gauss()).collect())
}
