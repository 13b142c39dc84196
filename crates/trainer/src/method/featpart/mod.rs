//! `featpart`: feature-only partition with the optimal fetch plan (seeds/001).
//!
//! Every worker holds the whole structure and a block of about d/K feature columns of every
//! vertex (`runner`, the runner of this data plan); the training vertices of each global batch are split disjointly over
//! the workers (data-parallel shares). A *fetch iteration* rebuilds the full rows of the
//! worker's sampled vertices from every worker (eq. 3: ids out, column blocks back); a *local
//! iteration* computes on its own columns with the others at zero (eq. 4). Gradients are
//! all-reduced every iteration. The [`plan`] fetches once, then runs tau local iterations,
//! then fetches again (Alg. 1): tau fixed, infinite, or `auto`, tau* of eq. 20 recomputed at
//! every fetch from the loss and all-reduced gradient there and Remark 1's estimates from
//! trial iterations before training (the runner's trials). By default sigma_bias is tracked as
//! a running maximum over the fetches (eq. 20 as printed, with the trials' sigma_bias, is
//! `--bias-estimate trials`); the optimizer's effective step in place of the learning rate is
//! an option ([`readings`]). The report gives the tau schedule, fetch
//! and local iteration counts, bytes per iteration and the modeled time to a target accuracy
//! ([`target`]).

pub(crate) mod plan;
pub(crate) mod readings;
pub(crate) mod rules;
pub(crate) mod runner;
pub(crate) mod settings;
pub(crate) mod target;

use super::{MethodDef, Parts};
use crate::config::{BiasEstimate, Eq20Step, FeatpartSettings, Tau, TauRule, TrainConfig};

/// How the columns are fetched: the fixed part of `[method.featpart]`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FetchSpec {
    pub tau: Tau,
    pub tau_max: usize,
    pub tau_rule: TauRule,
    pub bias_estimate: BiasEstimate,
    pub eq20_step: Eq20Step,
    /// Trial iterations before training (`auto` only).
    pub trials: usize,
}

impl FetchSpec {
    /// The spec `[method.featpart]` sets.
    pub(crate) fn of(s: &FeatpartSettings) -> Self {
        Self {
            tau: s.tau,
            tau_max: s.tau_max,
            tau_rule: s.tau_rule,
            bias_estimate: s.bias_estimate,
            eq20_step: s.eq20_step,
            trials: s.trials,
        }
    }
}

/// The `featpart` method.
pub(crate) struct Def;

impl MethodDef for Def {
    fn name(&self) -> &str {
        "featpart"
    }

    fn parts(&self, config: &TrainConfig) -> Parts {
        Parts::own_sampled(config, runner::RUNNER)
    }
}
