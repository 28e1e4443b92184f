//! Matrix products for the BERT encoder, on the `gemm` crate's kernels (AVX2/FMA, AVX-512 or
//! NEON, chosen at run time).
//!
//! One of the crate's three unsafe modules (the others register an FTS5 function and map
//! the index's saved vectors): `gemm` takes raw pointers and strides. [`matmul`] checks every
//! shape and stride against the slices it is given before calling it, so a wrong shape is an
//! error and never a read or write outside a slice.

#![allow(unsafe_code)]

/// A matrix read from a slice: element `(r, c)` is `data[r * rs + c * cs]`.
#[derive(Clone, Copy)]
pub(super) struct Mat<'a> {
    pub data: &'a [f32],
    pub rows: usize,
    pub cols: usize,
    pub rs: usize,
    pub cs: usize,
}

/// A row-major matrix written into a slice: element `(r, c)` is `data[r * rs + c]`.
pub(super) struct MatMut<'a> {
    pub data: &'a mut [f32],
    pub rows: usize,
    pub cols: usize,
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

/// `dst = scale · lhs · rhs`, or `dst += scale · lhs · rhs` when `accumulate`; on one thread,
/// or spread over `threads` by `gemm`'s own pool.
pub(super) fn matmul(
    dst: MatMut<'_>,
    lhs: Mat<'_>,
    rhs: Mat<'_>,
    scale: f32,
    accumulate: bool,
    threads: usize,
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
    let parallelism = if threads > 1 {
        gemm::Parallelism::Rayon(threads)
    } else {
        gemm::Parallelism::None
    };
    // The strides were checked to fit `isize` just above.
    let s = |v: usize| v as isize;
    // SAFETY: every element `gemm` reads or writes lies inside the slices: `reach` checked
    // the last element of each matrix against its slice's length, with non-negative strides;
    // the destination's rows do not overlap (checked above) and the destination is borrowed
    // mutably, so it cannot alias `lhs` or `rhs`.
    unsafe {
        gemm::gemm(
            m,
            n,
            k,
            dst.data.as_mut_ptr(),
            1,
            s(dst.rs),
            accumulate,
            lhs.data.as_ptr(),
            s(lhs.cs),
            s(lhs.rs),
            rhs.data.as_ptr(),
            s(rhs.cs),
            s(rhs.rs),
            1.0,
            scale,
            false,
            false,
            false,
            parallelism,
        );
    }
    Ok(())
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
        matmul(dst, lhs, rhs, 1.0, false, 1).unwrap();
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
        matmul(dst, lhs, rhs, 0.5, true, 2).unwrap();
        for (g, w) in got.iter().zip(&want) {
            assert!((g - 1.5 * w).abs() < 1e-5, "{g} vs {}", 1.5 * w);
        }
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
        assert!(matmul(dst(&mut d), lhs, wide, 1.0, false, 1).is_ok());
        assert!(
            matmul(dst(&mut d), lhs, long, 1.0, false, 1).is_err(),
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
            matmul(dst(&mut d), lhs, past, 1.0, false, 1).is_err(),
            "reads past the end"
        );
        let overlap = MatMut {
            data: &mut d,
            rows: 4,
            cols: 4,
            rs: 2,
        };
        assert!(
            matmul(overlap, lhs, wide, 1.0, false, 1).is_err(),
            "rows overlap"
        );
    }
}
