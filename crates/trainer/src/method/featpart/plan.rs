//! The fetch plan: which iterations fetch, and tau* from eq. 20 (Alg. 1).
//!
//! Eq. 20 is clamped, floored and capped at `tau-max`; a decision is applied as it comes or never
//! above the tau before it (`TauRule`). Where the plan stands (the local iterations left before
//! the next fetch, the counts, every tau and decision so far) is part of a checkpoint.

use cache_quant::StateError;
use cache_quant::state::{StateReader, put_f64};
use serde::Serialize;

use crate::config::{Tau, TauRule};

/// Remark 1's terms, estimated in trial iterations before training (identical on every rank).
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub(crate) struct Estimates {
    /// B: input vertices of a worker's sampled batch, mean over trials and workers.
    pub sampled_vertices: f64,
    /// C: seconds of one iteration's forward and backward (the slowest worker's mean).
    pub compute_s: f64,
    /// Modeled seconds of one measured fetch on the topology (stands for B d / (K b)).
    pub fetch_s: f64,
    /// sigma_var: variance of the averaged local-column gradient over sampled batches.
    pub sigma_var: f64,
    /// sigma-hat_var: variance of the averaged full-feature gradient over sampled batches.
    pub sigma_hat: f64,
    /// sigma_bias: squared distance between the full-feature and local-column mean gradients.
    pub sigma_bias: f64,
    /// L_f: the secant estimate max ||delta g|| / ||delta w||.
    pub lipschitz: f64,
}

/// Both terms of eq. 20 at one fetch iteration and the tau they give.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub(crate) struct TauTerms {
    /// (1 - eta L_f) G / sigma_bias, clamped at 0: the convergence bound of eq. 12.
    pub convergence: f64,
    /// The square root of eq. 19, its radicand clamped at 0: the time trade-off.
    pub tradeoff: f64,
    /// min of the two, floored and capped.
    pub tau: usize,
}

/// The step size and the bias eq. 20 reads at one fetch: the learning rate and the trials'
/// sigma_bias, or what `--eq20-step` and `--bias-estimate` put in their place.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub(crate) struct Eq20Inputs {
    pub eta: f64,
    pub sigma_bias: f64,
}

/// Eq. 20 at a fetch iteration with loss `loss` and squared gradient norm `grad_sq` (of the
/// all-reduced full-feature gradient), step size and bias `inputs`, capped at `tau_max`. The
/// theory assumes SGD; under Adam either term can go negative, so both are clamped at 0.
pub(crate) fn tau_star(est: &Estimates, inputs: Eq20Inputs, loss: f64, grad_sq: f64, tau_max: usize) -> TauTerms {
    let Eq20Inputs { eta, sigma_bias } = inputs;
    let eta_l = eta * est.lipschitz;
    let clamp = |x: f64| if x.is_nan() { 0.0 } else { x.max(0.0) };
    // sigma_bias = 0 (every worker sees every column) puts no bound on tau.
    let convergence = clamp((1.0 - eta_l) * grad_sq / sigma_bias);
    let numerator = 2.0 / eta * loss + eta_l * est.sigma_hat + (eta_l - 1.0) * grad_sq;
    let denominator = est.compute_s * (sigma_bias + eta_l * est.sigma_var);
    let tradeoff = clamp(est.fetch_s * numerator / denominator).sqrt();
    let tau = convergence.min(tradeoff).min(tau_max as f64).floor() as usize;
    TauTerms { convergence, tradeoff, tau }
}

/// One fetch iteration's decision.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub(crate) struct Decision {
    /// Iteration index (0-based, over the whole run).
    pub iteration: usize,
    pub loss: f64,
    pub grad_sq: f64,
    /// The eta and sigma_bias eq. 20 read.
    #[serde(flatten)]
    pub inputs: Eq20Inputs,
    #[serde(flatten)]
    pub terms: TauTerms,
    /// The tau in force from this fetch: eq. 20's under `eq20`, at most the one before under
    /// `non-increasing`.
    pub applied: usize,
}

/// Which iterations fetch: a fetch, then tau local iterations, then a fetch, ... (Alg. 1).
#[derive(Debug)]
pub(crate) struct FetchPlan {
    tau: Tau,
    tau_max: usize,
    rule: TauRule,
    /// Local iterations left before the next fetch; `None`: the next iteration fetches.
    remaining: Option<usize>,
    iteration: usize,
    /// The tau in force at every iteration so far.
    taus: Vec<usize>,
    decisions: Vec<Decision>,
    fetches: usize,
    locals: usize,
}

impl FetchPlan {
    pub(crate) fn new(tau: Tau, tau_max: usize, rule: TauRule) -> Self {
        let remaining = match tau {
            Tau::Never => Some(usize::MAX),
            Tau::Auto | Tau::Fixed(_) => None,
        };
        Self {
            tau,
            tau_max,
            rule,
            remaining,
            iteration: 0,
            taus: Vec::new(),
            decisions: Vec::new(),
            fetches: 0,
            locals: 0,
        }
    }

    /// Whether the coming iteration fetches; advances the plan by one iteration.
    pub(crate) fn next_fetches(&mut self) -> bool {
        let fetch = self.remaining.is_none();
        // The local iterations left after this one; none left means the next one fetches.
        let left = match self.remaining {
            None => self.current_tau(),
            Some(n) => n.saturating_sub(1),
        };
        self.remaining = (left > 0).then_some(left);
        if fetch {
            self.fetches += 1;
        } else {
            self.locals += 1;
        }
        self.taus.push(self.current_tau());
        self.iteration += 1;
        fetch
    }

    /// Whether the plan decides tau after each fetch (`auto`).
    pub(crate) fn adaptive(&self) -> bool {
        self.tau == Tau::Auto
    }

    /// Sets tau after the fetch iteration just taken, from eq. 20 (`auto` only).
    pub(crate) fn decide(&mut self, est: &Estimates, inputs: Eq20Inputs, loss: f64, grad_sq: f64) {
        let terms = tau_star(est, inputs, loss, grad_sq, self.tau_max);
        let applied = match (self.rule, self.decisions.last()) {
            (TauRule::NonIncreasing, Some(before)) => terms.tau.min(before.applied),
            _ => terms.tau,
        };
        self.decisions.push(Decision { iteration: self.iteration - 1, loss, grad_sq, inputs, terms, applied });
        self.remaining = (applied > 0).then_some(applied);
        if let Some(last) = self.taus.last_mut() {
            *last = applied;
        }
    }

    /// The tau in force: the last decision under `auto`, else the fixed one (`usize::MAX`
    /// for never).
    fn current_tau(&self) -> usize {
        match self.tau {
            Tau::Auto => self.decisions.last().map_or(0, |d| d.applied),
            Tau::Fixed(n) => n,
            Tau::Never => usize::MAX,
        }
    }

    pub(crate) fn fetches(&self) -> usize {
        self.fetches
    }

    pub(crate) fn locals(&self) -> usize {
        self.locals
    }

    pub(crate) fn decisions(&self) -> &[Decision] {
        &self.decisions
    }

    /// The tau in force per iteration.
    pub(crate) fn taus(&self) -> &[usize] {
        &self.taus
    }

    /// Appends where the plan stands (the local iterations left before the next fetch, the
    /// counts, every tau and decision so far) for a checkpoint: a checkpoint can fall inside a
    /// tau cycle, and `non-increasing` reads the decision before.
    pub(crate) fn save_state(&self, out: &mut Vec<u8>) {
        out.push(self.remaining.is_some() as u8);
        put_usize(out, self.remaining.unwrap_or(0));
        for n in [self.iteration, self.fetches, self.locals, self.taus.len()] {
            put_usize(out, n);
        }
        self.taus.iter().for_each(|&t| put_usize(out, t));
        put_usize(out, self.decisions.len());
        for d in &self.decisions {
            put_usize(out, d.iteration);
            for v in [d.loss, d.grad_sq, d.inputs.eta, d.inputs.sigma_bias, d.terms.convergence, d.terms.tradeoff] {
                put_f64(out, v);
            }
            put_usize(out, d.terms.tau);
            put_usize(out, d.applied);
        }
    }

    /// Puts back what [`FetchPlan::save_state`] wrote, into a plan made with the same settings.
    pub(crate) fn restore_state(&mut self, r: &mut StateReader<'_>) -> Result<(), StateError> {
        let waiting = r.u8("whether local iterations are left")? != 0;
        let left = usize_of(r, "local iterations left")?;
        self.remaining = waiting.then_some(left);
        self.iteration = usize_of(r, "iterations")?;
        self.fetches = usize_of(r, "fetch iterations")?;
        self.locals = usize_of(r, "local iterations")?;
        let taus = usize_of(r, "taus")?;
        // Pushed one by one: a corrupt count runs out of bytes, it does not allocate.
        self.taus.clear();
        for _ in 0..taus {
            self.taus.push(usize_of(r, "a tau")?);
        }
        let decisions = usize_of(r, "decisions")?;
        self.decisions.clear();
        for _ in 0..decisions {
            let iteration = usize_of(r, "a decision's iteration")?;
            let (loss, grad_sq) = (r.f64("a decision's loss")?, r.f64("a decision's gradient")?);
            let inputs = Eq20Inputs { eta: r.f64("a decision's eta")?, sigma_bias: r.f64("a decision's sigma_bias")? };
            let (convergence, tradeoff) = (r.f64("a convergence term")?, r.f64("a trade-off term")?);
            let terms = TauTerms { convergence, tradeoff, tau: usize_of(r, "a decision's tau")? };
            let applied = usize_of(r, "an applied tau")?;
            self.decisions.push(Decision { iteration, loss, grad_sq, inputs, terms, applied });
        }
        if self.fetches + self.locals != self.iteration || self.taus.len() != self.iteration {
            return Err(StateError(format!(
                "the fetch plan: {} fetch and {} local iterations, {} taus, for {} iterations",
                self.fetches,
                self.locals,
                self.taus.len(),
                self.iteration
            )));
        }
        Ok(())
    }
}

/// Appends a count as a little-endian `u64`.
pub(crate) fn put_usize(out: &mut Vec<u8>, n: usize) {
    out.extend((n as u64).to_le_bytes());
}

/// Reads what [`put_usize`] wrote.
pub(crate) fn usize_of(r: &mut StateReader<'_>, field: &str) -> Result<usize, StateError> {
    let n = r.u64(field)?;
    usize::try_from(n).map_err(|_| StateError(format!("{field}: {n} does not fit this machine's usize")))
}

/// The median of `values` (the lower middle for an even count); `None` when empty.
pub(crate) fn median(values: &[usize]) -> Option<usize> {
    let mut sorted = values.to_vec();
    sorted.sort_unstable();
    sorted.get(sorted.len().saturating_sub(1) / 2).copied()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn estimates() -> Estimates {
        Estimates {
            sampled_vertices: 100.0,
            compute_s: 0.01,
            fetch_s: 0.04,
            sigma_var: 0.5,
            sigma_hat: 0.4,
            sigma_bias: 0.2,
            lipschitz: 10.0,
        }
    }

    /// Eq. 20's inputs as printed: step `eta`, the trials' sigma_bias.
    fn lr(eta: f64) -> Eq20Inputs {
        Eq20Inputs { eta, sigma_bias: estimates().sigma_bias }
    }

    #[test]
    fn eq_20_takes_the_smaller_term_floored_and_capped() {
        let est = estimates();
        let t = tau_star(&est, lr(0.01), 1.0, 2.0, 100);
        // (1 - 0.1) * 2 / 0.2 = 9; sqrt(0.04 (200 + 0.04 - 1.8) / (0.01 (0.2 + 0.05))) = 56.3...
        assert!((t.convergence - 9.0).abs() < 1e-9, "{t:?}");
        let radicand: f64 = 0.04 * (200.0 + 0.1 * 0.4 + (0.1 - 1.0) * 2.0) / (0.01 * (0.2 + 0.1 * 0.5));
        assert!((t.tradeoff - radicand.sqrt()).abs() < 1e-9, "{t:?}");
        assert_eq!(t.tau, 9);
        assert_eq!(tau_star(&est, lr(0.01), 1.0, 2.0, 4).tau, 4, "capped");
        // eta L_f > 1 makes the convergence term negative: clamped to 0, so fetch every time.
        let steep = Estimates { lipschitz: 500.0, ..est };
        let t = tau_star(&steep, lr(0.01), 1.0, 2.0, 100);
        assert_eq!((t.convergence, t.tau), (0.0, 0));
        // A smaller gradient (later in training) gives a smaller tau.
        assert!(tau_star(&est, lr(0.01), 1.0, 0.5, 100).tau < tau_star(&est, lr(0.01), 1.0, 2.0, 100).tau);
    }

    #[test]
    fn eq_20_reads_the_eta_and_sigma_bias_it_is_given() {
        let est = estimates();
        // A bias twice the trials' halves the convergence term: (1 - 0.1) * 2 / 0.4 = 4.5.
        let t = tau_star(&est, Eq20Inputs { eta: 0.01, sigma_bias: 0.4 }, 1.0, 2.0, 100);
        assert!((t.convergence - 4.5).abs() < 1e-9, "{t:?}");
        // eta = 0.05: eta L_f = 0.5, so (1 - 0.5) * 2 / 0.2 = 5, and the radicand's 2 L / eta is 40.
        let t = tau_star(&est, lr(0.05), 1.0, 2.0, 100);
        assert!((t.convergence - 5.0).abs() < 1e-9, "{t:?}");
        let radicand: f64 = 0.04 * (40.0 + 0.5 * 0.4 + (0.5 - 1.0) * 2.0) / (0.01 * (0.2 + 0.5 * 0.5));
        assert!((t.tradeoff - radicand.sqrt()).abs() < 1e-9, "{t:?}");
        // The schedule records what each decision read; a plan restored from its state reads
        // them back.
        let mut plan = FetchPlan::new(Tau::Auto, 32, TauRule::Eq20);
        assert!(plan.next_fetches());
        plan.decide(&est, Eq20Inputs { eta: 0.05, sigma_bias: 0.4 }, 1.0, 2.0);
        assert_eq!(plan.decisions()[0].inputs, Eq20Inputs { eta: 0.05, sigma_bias: 0.4 });
        let mut bytes = Vec::new();
        plan.save_state(&mut bytes);
        let mut back = FetchPlan::new(Tau::Auto, 32, TauRule::Eq20);
        back.restore_state(&mut StateReader::new("plan", &bytes)).unwrap();
        assert_eq!(back.decisions(), plan.decisions());
    }

    #[test]
    fn fixed_plans_fetch_every_tau_plus_one_iterations() {
        let pattern = |tau: Tau, n: usize| {
            let mut plan = FetchPlan::new(tau, 32, TauRule::Eq20);
            (0..n).map(|_| plan.next_fetches()).collect::<Vec<_>>()
        };
        assert_eq!(pattern(Tau::Fixed(0), 3), [true, true, true]);
        assert_eq!(pattern(Tau::Fixed(2), 7), [true, false, false, true, false, false, true]);
        assert_eq!(pattern(Tau::Never, 3), [false, false, false]);
    }

    #[test]
    fn auto_follows_each_decision() {
        let mut plan = FetchPlan::new(Tau::Auto, 32, TauRule::Eq20);
        assert!(plan.next_fetches());
        plan.decide(&estimates(), lr(0.01), 1.0, 2.0);
        let taken: Vec<bool> = (0..10).map(|_| plan.next_fetches()).collect();
        assert_eq!(taken, [false; 9].iter().copied().chain([true]).collect::<Vec<_>>());
        plan.decide(&Estimates { lipschitz: 500.0, ..estimates() }, lr(0.01), 1.0, 2.0);
        assert!(plan.next_fetches(), "tau 0: the next iteration fetches again");
        assert_eq!((plan.fetches(), plan.locals()), (3, 9));
        assert_eq!(plan.taus()[..3], [9, 9, 9]);
        assert_eq!(plan.decisions().len(), 2);
        assert_eq!(median(&[5, 1, 3, 2]), Some(2));
        assert_eq!(median(&[]), None);
    }

    #[test]
    fn non_increasing_keeps_each_tau_at_most_the_one_before() {
        // Gradients growing then shrinking: eq. 20 gives 4, 9, 13, 2 (convergence term 4.5 G).
        let grads = [1.0, 2.0, 3.0, 0.5];
        let applied = |rule| {
            let mut plan = FetchPlan::new(Tau::Auto, 32, rule);
            for g in grads {
                while !plan.next_fetches() {}
                plan.decide(&estimates(), lr(0.01), 1.0, g);
            }
            let eq20: Vec<usize> = plan.decisions().iter().map(|d| d.terms.tau).collect();
            (eq20, plan.decisions().iter().map(|d| d.applied).collect::<Vec<_>>())
        };
        assert_eq!(applied(TauRule::Eq20), (vec![4, 9, 13, 2], vec![4, 9, 13, 2]));
        assert_eq!(applied(TauRule::NonIncreasing), (vec![4, 9, 13, 2], vec![4, 4, 4, 2]));
    }
}
