//! Time to a target accuracy by the paper's rule: the first evaluation at or above the target
//! that starts 30 consecutive iterations whose accuracy variance is below 1e-4. Halo evaluates
//! once per epoch, so the window is the evaluations that cover 30 iterations (at least
//! [`MIN_EVALUATIONS`]).

use serde::Serialize;

use crate::report::EpochRecord;

/// Consecutive iterations the accuracy must stay steady over.
pub(crate) const WINDOW_ITERATIONS: usize = 30;
/// The fewest evaluations a window holds (a variance of one or two values says little).
pub(crate) const MIN_EVALUATIONS: usize = 3;
/// The largest variance of a steady window.
pub(crate) const MAX_VARIANCE: f64 = 1e-4;

/// Where the target was reached.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub(crate) struct TargetHit {
    pub epoch: usize,
    /// Modeled seconds up to and including that epoch, plus the time spent before training.
    pub modeled_s: f64,
    /// Training wall seconds (this machine) up to that epoch.
    pub wall_s: f64,
}

/// The evaluations (one per epoch) a window of [`WINDOW_ITERATIONS`] spans at
/// `iterations_per_epoch`.
pub(crate) fn window(iterations_per_epoch: usize) -> usize {
    WINDOW_ITERATIONS.div_ceil(iterations_per_epoch.max(1)).max(MIN_EVALUATIONS)
}

/// The first epoch whose test accuracy is at least `target` and starts a steady window of
/// `window` evaluations, with the modeled time to it (`before_s` added: work before the first
/// epoch, e.g. trials).
pub(crate) fn time_to_target(epochs: &[EpochRecord], target: f64, window: usize, before_s: f64) -> Option<TargetHit> {
    let accs: Vec<f64> = epochs.iter().map(|e| e.test_acc).collect();
    let hit = (0..accs.len().saturating_sub(window - 1))
        .find(|&i| accs[i] >= target && variance(&accs[i..i + window]) < MAX_VARIANCE)?;
    let upto = &epochs[..=hit];
    Some(TargetHit {
        epoch: epochs[hit].epoch,
        modeled_s: before_s + upto.iter().map(|e| e.modeled_epoch_s).sum::<f64>(),
        wall_s: upto.iter().map(|e| e.wall_s).sum(),
    })
}

/// Population variance.
fn variance(values: &[f64]) -> f64 {
    let mean = values.iter().sum::<f64>() / values.len() as f64;
    values.iter().map(|v| (v - mean).powi(2)).sum::<f64>() / values.len() as f64
}

#[cfg(test)]
mod tests {
    use super::*;

    fn epochs(accs: &[f64]) -> Vec<EpochRecord> {
        accs.iter()
            .enumerate()
            .map(|(i, &acc)| EpochRecord {
                epoch: i + 1,
                loss: 1.0,
                train_acc: acc,
                val_acc: acc,
                test_acc: acc,
                wall_s: 1.0,
                eval_s: 0.1,
                eval_epoch: None,
                compute_s: 0.4,
                bytes_intra: 0,
                bytes_inter: 0,
                messages: 0,
                modeled_comm_s: 0.1,
                bytes_by_phase: Default::default(),
                modeled_epoch_s: 0.5,
                method: None,
                device: None,
            })
            .collect()
    }

    #[test]
    fn the_target_counts_once_the_accuracy_holds_steady_from_there() {
        // A spike to 0.8 at epoch 3 drops back; from epoch 6 on the accuracy holds at 0.8.
        // Two iterations per epoch: 15 evaluations cover 30 iterations.
        let w = window(2);
        assert_eq!((w, window(7), window(100)), (15, 5, MIN_EVALUATIONS));
        let mut accs = vec![0.5, 0.6, 0.8, 0.6, 0.7];
        accs.extend(std::iter::repeat_n(0.8, w));
        let hit = time_to_target(&epochs(&accs), 0.79, w, 2.0).unwrap();
        assert_eq!(hit, TargetHit { epoch: 6, modeled_s: 2.0 + 6.0 * 0.5, wall_s: 6.0 });
        assert_eq!(time_to_target(&epochs(&accs), 0.81, w, 0.0), None, "never reached");
        assert_eq!(time_to_target(&epochs(&accs[..w]), 0.79, w, 0.0), None, "no full window after it");
        let noisy: Vec<f64> = (0..40).map(|i| if i % 2 == 0 { 0.9 } else { 0.85 }).collect();
        assert_eq!(time_to_target(&epochs(&noisy), 0.8, w, 0.0), None, "variance 6.25e-4 is not steady");
    }
}
