//! Input feature preprocessing.

use ndarray::{Array2, Axis};
use rayon::prelude::*;

use crate::config::FeatureNorm;

/// Applies `norm` to `features` in place.
pub fn normalize(features: &mut Array2<f32>, norm: FeatureNorm) {
    match norm {
        FeatureNorm::None => {}
        FeatureNorm::Row => row_normalize(features),
    }
}

/// Divides each row by its L1 norm, like PyG's `NormalizeFeatures` on non-negative features;
/// rows that sum to zero are left as they are (all zeros) instead of becoming NaN.
pub fn row_normalize(features: &mut Array2<f32>) {
    features.axis_iter_mut(Axis(0)).into_par_iter().for_each(|mut row| {
        let l1: f32 = row.iter().map(|v| v.abs()).sum();
        if l1 > 0.0 {
            row.mapv_inplace(|v| v / l1);
        }
    });
}

#[cfg(test)]
mod tests {
    use super::*;
    use ndarray::array;

    #[test]
    fn rows_sum_to_one_and_zero_rows_stay_zero() {
        let mut x = array![[1.0f32, 3.0, 0.0], [0.0, 0.0, 0.0], [2.0, -2.0, 4.0]];
        row_normalize(&mut x);
        assert_eq!(x, array![[0.25f32, 0.75, 0.0], [0.0, 0.0, 0.0], [0.25, -0.25, 0.5]]);
    }

    #[test]
    fn none_leaves_features_untouched() {
        let mut x = array![[1.0f32, 3.0], [5.0, 7.0]];
        let before = x.clone();
        normalize(&mut x, FeatureNorm::None);
        assert_eq!(x, before);
    }
}
