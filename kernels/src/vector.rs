//! Products of vectors: what a search computes once per candidate it looks at.

/// The dot product of two vectors of `f32` (of the shorter's length), in eight lanes the
/// compiler vectorises.
pub fn dot(a: &[f32], b: &[f32]) -> f32 {
    let mut acc = [0.0f32; 8];
    let (ca, ra) = a.as_chunks::<8>();
    let (cb, rb) = b.as_chunks::<8>();
    for (x, y) in ca.iter().zip(cb) {
        for i in 0..8 {
            acc[i] += x[i] * y[i];
        }
    }
    let tail: f32 = ra.iter().zip(rb).map(|(x, y)| x * y).sum();
    acc.iter().sum::<f32>() + tail
}

/// The dot product of two vectors of `i8` (of the shorter's length), summed exactly.
pub fn dot_i8(a: &[i8], b: &[i8]) -> i32 {
    a.iter()
        .zip(b)
        .map(|(x, y)| i32::from(*x) * i32::from(*y))
        .sum()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn products_equal_the_definition_past_the_lanes_and_in_the_tail() {
        let mut checked = 0;
        for len in [0, 1, 7, 8, 9, 17, 384] {
            let a: Vec<f32> = (0..len).map(|i| (i as f32 * 0.37).sin()).collect();
            let b: Vec<f32> = (0..len).map(|i| (i as f32 * 0.11).cos()).collect();
            let expected: f64 = a.iter().zip(&b).map(|(x, y)| f64::from(x * y)).sum();
            assert!((f64::from(dot(&a, &b)) - expected).abs() < 1e-4, "{len}");
            let a: Vec<i8> = (0..len).map(|i| (i * 37 % 255) as u8 as i8).collect();
            let b: Vec<i8> = (0..len).map(|i| (i * 11 % 255) as u8 as i8).collect();
            let expected: i32 = a.iter().zip(&b).map(|(x, y)| *x as i32 * *y as i32).sum();
            assert_eq!(dot_i8(&a, &b), expected, "{len}");
            checked += 1;
        }
        assert_eq!(checked, 7);
    }
}
