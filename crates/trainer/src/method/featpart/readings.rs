//! Two readings of eq. 20's inputs other than the trials' (see docs/methods/featpart.md):
//! sigma_bias as the running maximum Theorem 1 defines ([`RunningBias`]), and the optimizer's
//! effective step in place of the learning rate ([`EffectiveStep`]).

use cache_quant::StateError;
use cache_quant::state::{StateReader, put_f32s, put_f64};

/// sigma_bias as the largest of the trials' estimate at w_1 and the estimates at every fetch
/// iteration so far, each by the trials' definition on that iteration's one batch.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) struct RunningBias {
    max: f64,
}

impl RunningBias {
    /// Starts from the trials' estimate.
    pub(crate) fn new(trials: f64) -> Self {
        Self { max: trials }
    }

    /// Takes in a fetch iteration's all-reduced full-feature and own-column gradients of the
    /// same batch; returns the maximum so far.
    pub(crate) fn observe(&mut self, full: &[f32], local: &[f32]) -> f64 {
        self.max = self.max.max(sigma_bias(&[full], &[local]));
        self.max
    }

    pub(crate) fn current(&self) -> f64 {
        self.max
    }
}

/// The optimizer's effective step size: sum ||delta w|| over sum ||g|| of the steps since the
/// last fetch decision. For SGD without momentum it is the learning rate.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct EffectiveStep {
    /// The parameters after the last step.
    params: Vec<f32>,
    /// ||g|| of the step in progress (its gradient after the all-reduce).
    grad_norm: f64,
    /// Sums of ||delta w|| and of ||g|| over the steps since the last [`EffectiveStep::take`].
    moved: f64,
    pushed: f64,
}

impl EffectiveStep {
    /// Starts at `params`, before any step.
    pub(crate) fn new(params: &[f32]) -> Self {
        Self { params: params.to_vec(), grad_norm: 0.0, moved: 0.0, pushed: 0.0 }
    }

    /// The gradient the coming step applies.
    pub(crate) fn gradient(&mut self, grads: &[f32]) {
        self.grad_norm = grads.iter().map(|g| f64::from(*g).powi(2)).sum::<f64>().sqrt();
    }

    /// The parameters after the step whose gradient [`EffectiveStep::gradient`] took.
    pub(crate) fn stepped(&mut self, params: &[f32]) {
        self.moved += sq_dist(params, &self.params).sqrt();
        self.pushed += self.grad_norm;
        self.params.copy_from_slice(params);
    }

    /// The effective step since the last call (`lr` where no step with a gradient was taken:
    /// the first fetch), and starts the next span.
    pub(crate) fn take(&mut self, lr: f64) -> f64 {
        let eta = if self.pushed > 0.0 { self.moved / self.pushed } else { lr };
        (self.moved, self.pushed) = (0.0, 0.0);
        eta
    }

    pub(crate) fn save_state(&self, out: &mut Vec<u8>) {
        put_f32s(out, &self.params);
        for v in [self.grad_norm, self.moved, self.pushed] {
            put_f64(out, v);
        }
    }

    pub(crate) fn restore(r: &mut StateReader<'_>) -> Result<Self, StateError> {
        Ok(Self {
            params: r.f32s("the parameters after the last step")?,
            grad_norm: r.f64("the step's gradient norm")?,
            moved: r.f64("the distance moved since the last fetch")?,
            pushed: r.f64("the gradient norms since the last fetch")?,
        })
    }
}

/// sigma_bias from averaged full-feature gradients `full` and own-column gradients `local` of
/// the same batches: the squared distance of their means. The trials give it their batches at
/// w_1; `--bias-estimate running-max` gives it the one batch of a fetch iteration.
pub(crate) fn sigma_bias<V: AsRef<[f32]>>(full: &[V], local: &[V]) -> f64 {
    sq_dist(&mean(full), &mean(local))
}

/// The element-wise mean of `vectors`.
pub(crate) fn mean<V: AsRef<[f32]>>(vectors: &[V]) -> Vec<f32> {
    let mut out = vec![0.0f64; vectors.first().map_or(0, |v| v.as_ref().len())];
    for v in vectors {
        for (o, x) in out.iter_mut().zip(v.as_ref()) {
            *o += f64::from(*x);
        }
    }
    out.iter().map(|s| (s / vectors.len() as f64) as f32).collect()
}

/// The squared Euclidean distance of `a` and `b`.
pub(crate) fn sq_dist(a: &[f32], b: &[f32]) -> f64 {
    a.iter().zip(b).map(|(x, y)| f64::from(x - y).powi(2)).sum()
}

#[cfg(test)]
mod tests {
    use gnn_core::{Adam, Optimizer, Sgd};

    use super::*;

    #[test]
    fn the_running_bias_starts_at_the_trials_and_never_decreases() {
        let mut bias = RunningBias::new(0.5);
        assert_eq!(bias.current(), 0.5, "no fetch yet: the trials' estimate");
        // Squared distances 2, 0.25, 8, 0: the maximum so far each time.
        let pairs: [(&[f32], &[f32]); 4] = [
            (&[1.0, 2.0], &[0.0, 1.0]),
            (&[0.5, 0.0], &[0.0, 0.0]),
            (&[2.0, 2.0], &[0.0, 0.0]),
            (&[1.0, 1.0], &[1.0, 1.0]),
        ];
        let seen: Vec<f64> = pairs.iter().map(|(g, l)| bias.observe(g, l)).collect();
        assert_eq!(seen, [2.0, 2.0, 8.0, 8.0]);
        assert!(seen.windows(2).all(|w| w[1] >= w[0]));
        // The trials' definition on one batch gives the same number.
        let mut fresh = RunningBias::new(0.0);
        assert_eq!(fresh.observe(pairs[0].0, pairs[0].1), sigma_bias(&[pairs[0].0], &[pairs[0].1]));
    }

    /// Runs `optimizer` for `steps` steps on gradients that vary, feeding [`EffectiveStep`] as
    /// the featpart hooks do; returns the effective step over them.
    fn effective(optimizer: &mut dyn Optimizer, steps: usize) -> f64 {
        let mut params = vec![1.0f32, -2.0, 0.5];
        let mut eff = EffectiveStep::new(&params);
        assert_eq!(eff.take(0.3), 0.3, "no step yet: the learning rate");
        for t in 1..=steps {
            let grads = [0.5 * t as f32, -0.25, 0.1 / t as f32];
            eff.gradient(&grads);
            optimizer.step(&mut params, &grads).unwrap();
            eff.stepped(&params);
        }
        eff.take(0.3)
    }

    #[test]
    fn the_effective_step_is_the_learning_rate_for_sgd_and_not_for_adam() {
        for steps in [1, 4] {
            let eta = effective(&mut Sgd::new(0.01, 0.0, 0.0), steps);
            assert!((eta - 0.01).abs() < 1e-6, "{steps} SGD steps: {eta}");
        }
        // Adam's first step moves every weight by lr whatever the gradient: ||delta w|| =
        // lr sqrt(3), so eta = lr sqrt(3) / ||g||.
        let eta = effective(&mut Adam::new(0.01, 0.0), 1);
        let g = (0.25f64 + 0.0625 + 0.01).sqrt();
        assert!((eta - 0.01 * 3f64.sqrt() / g).abs() < 1e-6, "{eta}");
        // take() starts a new span: with no step since, the learning rate again.
        let mut eff = EffectiveStep::new(&[0.0]);
        eff.gradient(&[2.0]);
        eff.stepped(&[-0.2]);
        assert!((eff.take(1.0) - 0.1).abs() < 1e-6);
        assert_eq!(eff.take(1.0), 1.0);
    }

    #[test]
    fn the_effective_step_round_trips_its_state() {
        let mut eff = EffectiveStep::new(&[0.0, 1.0]);
        eff.gradient(&[2.0, 0.0]);
        eff.stepped(&[-0.2, 1.0]);
        eff.gradient(&[1.0, 1.0]);
        let mut bytes = Vec::new();
        eff.save_state(&mut bytes);
        let mut r = StateReader::new("effective step", &bytes);
        assert_eq!(EffectiveStep::restore(&mut r).unwrap(), eff);
        r.finish().unwrap();
    }

    #[test]
    fn sigma_bias_is_the_squared_distance_of_the_mean_gradients() {
        let full = [vec![1.0f32, 2.0], vec![3.0, 0.0]];
        let local = [vec![0.0f32, 1.0], vec![0.0, 1.0]];
        // Means (2, 1) and (0, 1).
        assert!((sigma_bias(&full, &local) - 4.0).abs() < 1e-12);
        // One batch: the squared distance of its two gradients.
        let (g, g_own): (&[f32], &[f32]) = (&[1.0, 2.0], &[0.0, 1.0]);
        assert!((sigma_bias(&[g], &[g_own]) - 2.0).abs() < 1e-12);
    }
}
