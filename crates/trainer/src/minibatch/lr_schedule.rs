//! The learning rate of each step: the scaled rate of [`crate::config::LrScaling`], reached by
//! a linear warm-up from the rate as given over the first `lr-warmup-epochs` epochs. Goyal et
//! al. pair the linear scaling rule with such a warm-up because a large rate early in training,
//! when the weights move fast, can lose accuracy the rate does not win back.

/// The rates a worker's steps use (see the module docs).
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) struct LrSchedule {
    /// The rate as configured, where a warm-up starts.
    base: f32,
    /// The rate after scaling for the workers, where a warm-up ends.
    scaled: f32,
    warmup_epochs: usize,
}

impl LrSchedule {
    pub(crate) fn new(base: f32, scaled: f32, warmup_epochs: usize) -> Self {
        Self { base, scaled, warmup_epochs }
    }

    /// The rate after scaling and warm-up.
    pub(crate) fn scaled(&self) -> f32 {
        self.scaled
    }

    /// The rate of 0-based `step` of `steps` in the 1-based `epoch`: it rises by equal amounts
    /// per step from `base` at the first step, whatever the steps per epoch, and is `scaled`
    /// (exactly, not interpolated) from epoch `warmup_epochs + 1` on.
    pub(crate) fn at(&self, epoch: usize, step: usize, steps: usize) -> f32 {
        let done = epoch.saturating_sub(1);
        if done >= self.warmup_epochs {
            return self.scaled;
        }
        let progress = (done as f64 + step as f64 / steps.max(1) as f64) / self.warmup_epochs as f64;
        (self.base as f64 + (self.scaled as f64 - self.base as f64) * progress) as f32
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn no_warmup_is_the_scaled_rate_at_every_step() {
        let s = LrSchedule::new(0.01, 0.04, 0);
        for (epoch, step) in [(1, 0), (1, 3), (2, 0), (100, 9)] {
            assert_eq!(s.at(epoch, step, 10).to_bits(), 0.04f32.to_bits());
        }
    }

    #[test]
    fn warmup_rises_linearly_per_step_then_holds() {
        // 2 epochs of 4 steps: 8 equal increments of (0.08 - 0.01) / 8 from 0.01.
        let s = LrSchedule::new(0.01, 0.08, 2);
        let rates: Vec<f32> = (1..=3).flat_map(|e| (0..4).map(move |t| s.at(e, t, 4))).collect();
        let expected = [0.01, 0.01875, 0.0275, 0.03625, 0.045, 0.05375, 0.0625, 0.07125, 0.08, 0.08, 0.08, 0.08];
        for (got, want) in rates.iter().zip(expected) {
            assert!((got - want).abs() < 1e-7, "{rates:?}");
        }
        assert_eq!(s.at(3, 0, 4), 0.08);
        assert_eq!(s.scaled(), 0.08);
    }

    #[test]
    fn warmup_without_scaling_keeps_the_rate() {
        let s = LrSchedule::new(0.01, 0.01, 5);
        assert!((1..=6).all(|e| (0..7).all(|t| s.at(e, t, 7) == 0.01)));
    }
}
