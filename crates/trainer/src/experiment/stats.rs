//! Summary statistics over seeds: mean, standard error of the mean, paired differences, ratios.
//!
//! Seeds are few (three to ten), so the standard error uses the sample standard deviation
//! (n - 1 in the denominator) and is undefined for a single seed rather than zero.

use serde::Serialize;

/// A mean over seeds with its standard error.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Estimate {
    /// Arithmetic mean.
    pub mean: f64,
    /// Sample standard deviation over sqrt(n); `None` (JSON `null`) for a single value.
    pub stderr: Option<f64>,
}

impl Estimate {
    /// The mean and standard error of `values`; `None` when there are none.
    pub fn of(values: &[f64]) -> Option<Self> {
        let n = values.len() as f64;
        let mean = mean(values)?;
        let stderr = (values.len() > 1).then(|| {
            let sum_sq: f64 = values.iter().map(|v| (v - mean) * (v - mean)).sum();
            (sum_sq / (n - 1.0)).sqrt() / n.sqrt()
        });
        Some(Self { mean, stderr })
    }
}

/// Arithmetic mean; `None` when `values` is empty.
pub fn mean(values: &[f64]) -> Option<f64> {
    (!values.is_empty()).then(|| values.iter().sum::<f64>() / values.len() as f64)
}

/// `variant - baseline` for every seed the two have in common, in the order of `variant`.
///
/// Pairing by seed removes the variance the seed contributes to both runs (initialisation,
/// dropout, partition ties), which is what makes a small difference measurable with few seeds.
pub fn paired_differences(variant: &[(u64, f64)], baseline: &[(u64, f64)]) -> Vec<(u64, f64)> {
    variant
        .iter()
        .filter_map(|&(seed, v)| baseline.iter().find(|&&(s, _)| s == seed).map(|&(_, b)| (seed, v - b)))
        .collect()
}

/// `numerator / denominator`, or `None` when the quotient is not a finite number (a zero baseline).
pub fn ratio(numerator: f64, denominator: f64) -> Option<f64> {
    Some(numerator / denominator).filter(|r| r.is_finite())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn close(a: f64, b: f64) -> bool {
        (a - b).abs() < 1e-12
    }

    #[test]
    fn estimate_uses_the_sample_standard_deviation() {
        let e = Estimate::of(&[1.0, 2.0, 3.0, 4.0]).unwrap();
        assert_eq!(e.mean, 2.5);
        // Sample variance 5/3, so the standard error is sqrt(5/3) / 2.
        assert!(close(e.stderr.unwrap(), (5.0f64 / 3.0).sqrt() / 2.0), "{e:?}");
    }

    #[test]
    fn constant_values_have_zero_error_and_one_value_has_none() {
        assert_eq!(Estimate::of(&[0.75; 3]), Some(Estimate { mean: 0.75, stderr: Some(0.0) }));
        assert_eq!(Estimate::of(&[0.5]), Some(Estimate { mean: 0.5, stderr: None }));
        assert_eq!(Estimate::of(&[]), None);
        assert_eq!(mean(&[]), None);
    }

    #[test]
    fn paired_differences_match_seeds_whatever_their_order() {
        let variant = [(2, 0.80), (0, 0.70), (1, 0.75), (9, 0.5)];
        let baseline = [(0, 0.60), (1, 0.75), (2, 0.90)];
        let diffs = paired_differences(&variant, &baseline);
        let seeds: Vec<u64> = diffs.iter().map(|d| d.0).collect();
        assert_eq!(seeds, [2, 0, 1], "seed 9 has no baseline run");
        for ((_, got), want) in diffs.iter().zip([-0.10, 0.10, 0.0]) {
            assert!(close(*got, want), "{diffs:?}");
        }
    }

    #[test]
    fn pairing_removes_the_shared_seed_effect() {
        // Both variants swing by seed; the variant is always 0.01 better. Unpaired, the
        // difference of means carries the seed spread; paired, the error is zero.
        let baseline = [(0, 0.70), (1, 0.80), (2, 0.60)];
        let variant: Vec<(u64, f64)> = baseline.iter().map(|&(s, b)| (s, b + 0.01)).collect();
        let diffs: Vec<f64> = paired_differences(&variant, &baseline).iter().map(|d| d.1).collect();
        let e = Estimate::of(&diffs).unwrap();
        assert!(close(e.mean, 0.01) && e.stderr.unwrap() < 1e-12, "{e:?}");
        let spread = Estimate::of(&baseline.map(|b| b.1)).unwrap().stderr.unwrap();
        assert!(spread > 0.05, "{spread}");
    }

    #[test]
    fn ratio_of_zero_baseline_is_undefined() {
        assert_eq!(ratio(3.0, 4.0), Some(0.75));
        assert_eq!(ratio(0.0, 5.0), Some(0.0));
        assert_eq!(ratio(1.0, 0.0), None);
        assert_eq!(ratio(0.0, 0.0), None);
    }
}
