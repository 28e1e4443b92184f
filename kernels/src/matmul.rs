//! Matrix products for the BERT encoder, on the `gemm` crate's kernels (AVX2/FMA, AVX-512 or
//! NEON, chosen at run time), on one thread or shared out over a small team of threads.
//!
//! One of this crate's two unsafe modules (with the local model's quantized kernels):
//! `gemm` takes raw pointers and strides. [`matmul`] checks every
//! shape and stride against the slices it is given before calling it, so a wrong shape is an
//! error and never a read or write outside a slice; a part of a product handed to another
//! thread is a disjoint range of the destination's columns, waited for before `matmul`
//! returns (or unwinds).

#![allow(unsafe_code)]

/// A matrix read from a slice: element `(r, c)` is `data[r * rs + c * cs]`.
#[derive(Clone, Copy)]
pub struct Mat<'a> {
    /// The elements, and possibly more.
    pub data: &'a [f32],
    /// Rows of the matrix.
    pub rows: usize,
    /// Columns of the matrix.
    pub cols: usize,
    /// Stride from a row to the next.
    pub rs: usize,
    /// Stride from a column to the next.
    pub cs: usize,
}

/// A row-major matrix written into a slice: element `(r, c)` is `data[r * rs + c]`.
pub struct MatMut<'a> {
    /// The elements, and possibly more.
    pub data: &'a mut [f32],
    /// Rows of the matrix.
    pub rows: usize,
    /// Columns of the matrix.
    pub cols: usize,
    /// Stride from a row to the next (at least `cols` when there are two rows or more).
    pub rs: usize,
}

/// The index one past the last element a matrix of this shape reaches, if it fits `len`.
fn reach(rows: usize, cols: usize, rs: usize, cs: usize, len: usize) -> Option<usize> {
    if rows == 0 || cols == 0 {
        return Some(0);
    }
    let last = (rows - 1)
        .checked_mul(rs)?
        .checked_add((cols - 1).checked_mul(cs)?)?;
    (last < len).then_some(last + 1)
}

/// `dst = scale · lhs · rhs`, or `dst += scale · lhs · rhs` when `accumulate`; on the
/// calling thread, or with its columns shared out over a [`Team`].
pub fn matmul(
    dst: MatMut<'_>,
    lhs: Mat<'_>,
    rhs: Mat<'_>,
    scale: f32,
    accumulate: bool,
    team: Option<&Team>,
) -> Result<(), String> {
    let (m, n, k) = (dst.rows, dst.cols, lhs.cols);
    if lhs.rows != m || rhs.cols != n || rhs.rows != k {
        return Err(format!(
            "matrix shapes do not chain: {m}x{n} = {}x{} * {}x{}",
            lhs.rows, lhs.cols, rhs.rows, rhs.cols
        ));
    }
    // Rows of the destination may not overlap, or one element would be written twice.
    if m > 1 && dst.rs < n {
        return Err(format!(
            "destination rows of {n} overlap at stride {}",
            dst.rs
        ));
    }
    let fits = reach(m, n, dst.rs, 1, dst.data.len()).is_some()
        && reach(m, k, lhs.rs, lhs.cs, lhs.data.len()).is_some()
        && reach(k, n, rhs.rs, rhs.cs, rhs.data.len()).is_some();
    let strides = [dst.rs, lhs.rs, lhs.cs, rhs.rs, rhs.cs];
    if !fits || strides.iter().any(|&s| isize::try_from(s).is_err()) {
        return Err(format!("a {m}x{n}x{k} product does not fit its buffers"));
    }
    if m == 0 || n == 0 {
        return Ok(());
    }
    if k == 0 {
        if !accumulate {
            for row in dst.data.chunks_mut(dst.rs.max(1)).take(m) {
                row.iter_mut().take(n).for_each(|v| *v = 0.0);
            }
        }
        return Ok(());
    }
    // The strides were checked to fit `isize` just above.
    let s = |v: usize| v as isize;
    let whole = Job {
        m,
        n,
        k,
        dst: dst.data.as_mut_ptr(),
        dst_rs: s(dst.rs),
        lhs: lhs.data.as_ptr(),
        lhs_cs: s(lhs.cs),
        lhs_rs: s(lhs.rs),
        rhs: rhs.data.as_ptr(),
        rhs_cs: s(rhs.cs),
        rhs_rs: s(rhs.rs),
        scale,
        accumulate,
    };
    // Columns in parts of whole vectors (16 lanes), one part per thread of the team.
    let parts = team
        .map_or(1, |t| t.slots.len() + 1)
        .min(n.div_ceil(LANES))
        .max(1);
    let width = n.div_ceil(parts).div_ceil(LANES) * LANES;
    // Empty (no allocation) unless parts are handed out: most products run alone.
    let mut waits = Waits(Vec::new());
    if let Some(team) = team {
        for (i, slot) in team.slots.iter().enumerate().take(parts - 1) {
            let from = (i + 1) * width;
            if from >= n {
                break;
            }
            waits
                .0
                .push(slot.post(whole.columns(from, n.min(from + width))));
        }
    }
    // SAFETY: every element `gemm` reads or writes lies inside the slices: `reach` checked
    // the last element of each matrix against its slice's length, with non-negative strides;
    // the destination's rows do not overlap (checked above) and the destination is borrowed
    // mutably, so it cannot alias `lhs` or `rhs`. The parts are disjoint column ranges of
    // the destination, so no element is written by two threads, and `waits` waits for every
    // part handed out — also when this thread unwinds — before the borrows end.
    unsafe { whole.columns(0, n.min(width)).run() };
    drop(waits);
    Ok(())
}

/// f32 lanes of the widest vectors (AVX-512): the width parts of a product's columns are cut to.
const LANES: usize = 16;

/// One product, or a range of its columns, as raw parts for `gemm`.
#[derive(Clone, Copy)]
struct Job {
    m: usize,
    n: usize,
    k: usize,
    dst: *mut f32,
    dst_rs: isize,
    lhs: *const f32,
    lhs_cs: isize,
    lhs_rs: isize,
    rhs: *const f32,
    rhs_cs: isize,
    rhs_rs: isize,
    scale: f32,
    accumulate: bool,
}

// SAFETY: a job's pointers are only followed while the thread that made it waits for it
// (see `matmul`), so sending one to a team's thread shares nothing beyond that wait.
unsafe impl Send for Job {}

impl Job {
    /// Columns `from..to` of the product (`from < to <= n`).
    fn columns(self, from: usize, to: usize) -> Job {
        Job {
            n: to - from,
            dst: self.dst.wrapping_add(from),
            rhs: self.rhs.wrapping_offset(from as isize * self.rhs_cs),
            ..self
        }
    }

    /// Runs the product on the calling thread.
    ///
    /// # Safety
    /// The pointers must address matrices of the job's shape and strides, the destination
    /// written by no other thread meanwhile.
    unsafe fn run(self) {
        gemm::gemm(
            self.m,
            self.n,
            self.k,
            self.dst,
            1,
            self.dst_rs,
            self.accumulate,
            self.lhs,
            self.lhs_cs,
            self.lhs_rs,
            self.rhs,
            self.rhs_cs,
            self.rhs_rs,
            1.0,
            self.scale,
            false,
            false,
            false,
            gemm::Parallelism::None,
        );
    }
}

/// Threads that take a share of the columns of every product, kept for the life of a
/// model (their `gemm` packing buffers with them) and used by one pass at a time.
///
/// Between products a team's threads wait by spinning for a short while, then sleep: the
/// steps between two products of a pass (attention, normalisation) are short, so they are
/// usually still spinning when the next product comes, and handing it over costs no system
/// call (rayon's pool, which `gemm` would otherwise use, yields to the kernel in a loop
/// while it waits).
pub struct Team {
    slots: Vec<std::sync::Arc<Slot>>,
    threads: Vec<std::thread::JoinHandle<()>>,
}

impl Team {
    /// A team of up to `helpers` threads (fewer if the system will not start them).
    pub fn new(helpers: usize) -> Team {
        let mut team = Team {
            slots: Vec::new(),
            threads: Vec::new(),
        };
        for _ in 0..helpers {
            let slot = std::sync::Arc::new(Slot::default());
            let serving = std::sync::Arc::clone(&slot);
            let spawned = std::thread::Builder::new()
                .name("memlane-embed".into())
                .spawn(move || serving.serve());
            match spawned {
                Ok(handle) => {
                    let _ = slot.thread.set(handle.thread().clone());
                    team.slots.push(slot);
                    team.threads.push(handle);
                }
                Err(_) => break,
            }
        }
        team
    }

    /// Lets the team's threads sleep at once instead of spinning for a next product: called
    /// when a pass ends, so that they leave the cores to whatever runs next.
    pub fn rest(&self) {
        for slot in &self.slots {
            slot.resting
                .store(true, std::sync::atomic::Ordering::Release);
        }
    }

    /// How many threads besides the caller's.
    #[cfg(test)]
    pub fn helpers(&self) -> usize {
        self.slots.len()
    }
}

impl Drop for Team {
    fn drop(&mut self) {
        for slot in &self.slots {
            slot.stop.store(true, std::sync::atomic::Ordering::Release);
            if let Some(t) = slot.thread.get() {
                t.unpark();
            }
        }
        for handle in self.threads.drain(..) {
            let _ = handle.join();
        }
    }
}

/// How long a team's thread spins for the next product before it sleeps.
const SPIN: std::time::Duration = std::time::Duration::from_micros(300);

/// How long the thread that handed out parts spins for them before it sleeps.
const WAIT_SPIN: std::time::Duration = std::time::Duration::from_micros(30);

/// One team thread's mailbox.
#[derive(Default)]
struct Slot {
    /// The posted job, and the thread to wake when it is done.
    job: std::sync::Mutex<Option<(Job, std::thread::Thread)>>,
    /// Jobs posted so far, and finished so far.
    posted: std::sync::atomic::AtomicU64,
    done: std::sync::atomic::AtomicU64,
    stop: std::sync::atomic::AtomicBool,
    /// Set between passes: wait asleep, not spinning.
    resting: std::sync::atomic::AtomicBool,
    thread: std::sync::OnceLock<std::thread::Thread>,
}

impl Slot {
    /// Hands `job` to the slot's thread; the returned wait ends when it is done.
    fn post(&self, job: Job) -> Wait<'_> {
        use std::sync::atomic::Ordering;
        if let Ok(mut slot) = self.job.lock() {
            *slot = Some((job, std::thread::current()));
        }
        self.resting.store(false, Ordering::Release);
        let id = self.posted.fetch_add(1, Ordering::AcqRel) + 1;
        if let Some(t) = self.thread.get() {
            t.unpark();
        }
        Wait { slot: self, id }
    }

    /// The thread's loop: runs each posted job, until stopped.
    fn serve(&self) {
        use std::sync::atomic::Ordering;
        let mut seen = 0;
        loop {
            let since = std::time::Instant::now();
            let mut spins = 0u32;
            while self.posted.load(Ordering::Acquire) == seen {
                if self.stop.load(Ordering::Acquire) {
                    return;
                }
                spins = spins.wrapping_add(1);
                let resting = self.resting.load(Ordering::Acquire);
                if !resting && (!spins.is_multiple_of(64) || since.elapsed() < SPIN) {
                    std::hint::spin_loop();
                } else {
                    // `post` unparks after posting, so a job posted meanwhile is not missed.
                    std::thread::park();
                }
            }
            seen = self.posted.load(Ordering::Acquire);
            let posted = self.job.lock().ok().and_then(|mut j| j.take());
            if let Some((job, _)) = &posted {
                // SAFETY: the poster made the job from checked slices and waits for `done`
                // before those borrows end (see `matmul`).
                unsafe { job.run() };
            }
            self.done.store(seen, Ordering::Release);
            if let Some((_, poster)) = posted {
                poster.unpark();
            }
        }
    }
}

/// The wait for one posted part.
struct Wait<'a> {
    slot: &'a Slot,
    id: u64,
}

/// Waits for every part in it when dropped, also while unwinding.
struct Waits<'a>(Vec<Wait<'a>>);

impl Drop for Waits<'_> {
    fn drop(&mut self) {
        use std::sync::atomic::Ordering;
        for wait in &self.0 {
            // A short spin (the other part usually ends with this one), then asleep until
            // the part's thread wakes this one, so that a core is not held waiting.
            let since = std::time::Instant::now();
            while wait.slot.done.load(Ordering::Acquire) < wait.id {
                if since.elapsed() < WAIT_SPIN {
                    std::hint::spin_loop();
                } else {
                    std::thread::park_timeout(std::time::Duration::from_millis(1));
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The product by definition, one element at a time.
    fn naive(lhs: Mat<'_>, rhs: Mat<'_>) -> Vec<f32> {
        let mut out = vec![0.0; lhs.rows * rhs.cols];
        for r in 0..lhs.rows {
            for c in 0..rhs.cols {
                out[r * rhs.cols + c] = (0..lhs.cols)
                    .map(|i| lhs.data[r * lhs.rs + i * lhs.cs] * rhs.data[i * rhs.rs + c * rhs.cs])
                    .sum();
            }
        }
        out
    }

    #[test]
    fn products_match_the_definition_for_strided_and_transposed_operands() {
        let a: Vec<f32> = (0..7 * 5).map(|i| (i as f32 * 0.37).sin()).collect();
        let b: Vec<f32> = (0..5 * 9).map(|i| (i as f32 * 0.11).cos()).collect();
        // a as 7x5 row-major; b read transposed (9x5 stored, used as 5x9).
        let lhs = Mat {
            data: &a,
            rows: 7,
            cols: 5,
            rs: 5,
            cs: 1,
        };
        let rhs = Mat {
            data: &b,
            rows: 5,
            cols: 9,
            rs: 1,
            cs: 5,
        };
        let want = naive(lhs, rhs);
        let mut got = vec![1.0; 7 * 9];
        let dst = MatMut {
            data: &mut got,
            rows: 7,
            cols: 9,
            rs: 9,
        };
        matmul(dst, lhs, rhs, 1.0, false, None).unwrap();
        for (g, w) in got.iter().zip(&want) {
            assert!((g - w).abs() < 1e-5, "{g} vs {w}");
        }
        // Accumulating with a scale adds to what is there.
        let dst = MatMut {
            data: &mut got,
            rows: 7,
            cols: 9,
            rs: 9,
        };
        matmul(dst, lhs, rhs, 0.5, true, None).unwrap();
        for (g, w) in got.iter().zip(&want) {
            assert!((g - 1.5 * w).abs() < 1e-5, "{g} vs {}", 1.5 * w);
        }
    }

    #[test]
    fn products_shared_over_a_team_equal_the_definition() {
        let mut checked = 0;
        // Column counts below, at and across the 16-lane parts, and uneven splits.
        for (m, k, n) in [(3, 5, 7), (7, 9, 16), (5, 33, 47), (21, 64, 384), (2, 3, 1)] {
            let a: Vec<f32> = (0..m * k).map(|i| (i as f32 * 0.37).sin()).collect();
            let b: Vec<f32> = (0..k * n).map(|i| (i as f32 * 0.11).cos()).collect();
            let lhs = Mat {
                data: &a,
                rows: m,
                cols: k,
                rs: k,
                cs: 1,
            };
            // b read transposed: stored n x k, used as k x n.
            let rhs = Mat {
                data: &b,
                rows: k,
                cols: n,
                rs: 1,
                cs: k,
            };
            let want = naive(lhs, rhs);
            for helpers in [1, 2, 3] {
                let mut got = vec![1.0; m * n];
                let team = Team::new(helpers);
                assert_eq!(team.helpers(), helpers, "team threads did not start");
                // Many products through one team, as a pass makes them, with pauses long
                // enough for its threads to fall asleep between some of them.
                for round in 0..20 {
                    if round % 7 == 6 {
                        std::thread::sleep(std::time::Duration::from_millis(2));
                    }
                    let dst = MatMut {
                        data: &mut got,
                        rows: m,
                        cols: n,
                        rs: n,
                    };
                    matmul(dst, lhs, rhs, 1.0, round > 0, Some(&team)).unwrap();
                }
                drop(team);
                for (g, w) in got.iter().zip(&want) {
                    assert!(
                        (g - 20.0 * w).abs() < 1e-3,
                        "{m}x{k}x{n} on {helpers}: {g} vs {}",
                        20.0 * w
                    );
                }
                checked += 1;
            }
        }
        assert_eq!(checked, 15);
    }

    #[test]
    fn shapes_that_do_not_fit_are_errors() {
        let a = vec![0.0f32; 12];
        let mut d = vec![0.0f32; 16];
        let lhs = Mat {
            data: &a,
            rows: 4,
            cols: 3,
            rs: 3,
            cs: 1,
        };
        let long = Mat {
            data: &a,
            rows: 3,
            cols: 5,
            rs: 5,
            cs: 1,
        };
        fn dst(d: &mut [f32]) -> MatMut<'_> {
            MatMut {
                data: d,
                rows: 4,
                cols: 4,
                rs: 4,
            }
        }
        let wide = Mat {
            data: &a,
            rows: 3,
            cols: 4,
            rs: 4,
            cs: 1,
        };
        assert!(matmul(dst(&mut d), lhs, wide, 1.0, false, None).is_ok());
        assert!(
            matmul(dst(&mut d), lhs, long, 1.0, false, None).is_err(),
            "5 columns into 4"
        );
        let past = Mat {
            data: &a,
            rows: 3,
            cols: 4,
            rs: 5,
            cs: 1,
        };
        assert!(
            matmul(dst(&mut d), lhs, past, 1.0, false, None).is_err(),
            "reads past the end"
        );
        let overlap = MatMut {
            data: &mut d,
            rows: 4,
            cols: 4,
            rs: 2,
        };
        assert!(
            matmul(overlap, lhs, wide, 1.0, false, None).is_err(),
            "rows overlap"
        );
    }
}
