//! The minimum and maximum of a block of values, as the sequential folds
//! `fold(+inf, f32::min)` and `fold(-inf, f32::max)` give them, at the speed of a lane-parallel
//! reduction.
//!
//! `f32::min` skips NaNs, so the folds give the least and greatest non-NaN value (`+inf` and
//! `-inf` when there is none) in any order, with one exception: `-0.0` and `0.0` compare equal,
//! and which of the two a fold keeps depends on the order. Eight lanes reduce the values in
//! another order; where a lane-parallel result is a zero, the sequential fold runs again, so
//! the bits are the fold's in every case.

/// Lanes of the parallel reduction.
const LANES: usize = 8;

/// `(min, max)` of `values` by the sequential folds' rules (see the module docs).
pub fn bounds(values: &[f32]) -> (f32, f32) {
    let (mut lo, mut hi) = ([f32::INFINITY; LANES], [f32::NEG_INFINITY; LANES]);
    let chunks = values.chunks_exact(LANES);
    let rest = chunks.remainder();
    for chunk in chunks {
        for k in 0..LANES {
            lo[k] = lo[k].min(chunk[k]);
            hi[k] = hi[k].max(chunk[k]);
        }
    }
    for (k, &v) in rest.iter().enumerate() {
        lo[k] = lo[k].min(v);
        hi[k] = hi[k].max(v);
    }
    let lo = lo.into_iter().fold(f32::INFINITY, f32::min);
    let hi = hi.into_iter().fold(f32::NEG_INFINITY, f32::max);
    let sequential = |fold: fn(f32, f32) -> f32, start: f32| values.iter().copied().fold(start, fold);
    let lo = if lo == 0.0 { sequential(f32::min, f32::INFINITY) } else { lo };
    let hi = if hi == 0.0 { sequential(f32::max, f32::NEG_INFINITY) } else { hi };
    (lo, hi)
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;

    fn folds(values: &[f32]) -> (u32, u32) {
        let lo = values.iter().copied().fold(f32::INFINITY, f32::min);
        let hi = values.iter().copied().fold(f32::NEG_INFINITY, f32::max);
        (lo.to_bits(), hi.to_bits())
    }

    #[test]
    fn signed_zeros_nans_and_empty_blocks_follow_the_folds() {
        for values in [
            vec![],
            vec![f32::NAN; 11],
            vec![0.0, -0.0, 1.0],
            vec![-0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, -0.0],
            vec![3.0, f32::NAN, -2.0, f32::INFINITY, 0.5, -0.0, 0.0, 7.0, f32::NEG_INFINITY],
        ] {
            let (lo, hi) = bounds(&values);
            assert_eq!((lo.to_bits(), hi.to_bits()), folds(&values), "{values:?}");
        }
    }

    proptest! {
        /// Any block, zeros of both signs and NaNs among small values included, gives the
        /// folds' bits.
        #[test]
        fn bounds_are_the_sequential_folds(
            raw in prop::collection::vec(prop_oneof![-3i8..3, Just(i8::MIN), Just(i8::MAX)], 0..40),
        ) {
            let values: Vec<f32> = raw
                .iter()
                .map(|&i| match i {
                    i8::MIN => f32::NAN,
                    i8::MAX => -0.0,
                    i => f32::from(i) * 0.5,
                })
                .collect();
            let (lo, hi) = bounds(&values);
            prop_assert_eq!((lo.to_bits(), hi.to_bits()), folds(&values));
        }
    }
}
