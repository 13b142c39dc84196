//! The runner of feature columns (featpart's [`crate::method::OwnRunner`]): data-parallel
//! mini-batch training whose workers each hold the whole structure and one block of feature
//! columns ([`shard`]), and build a batch's input rows from their own columns or fetch the
//! others as the method's [`FetchSpec`] plans it. Before training, `tau = auto` runs trial
//! iterations ([`trials`]) for Remark 1's estimates.
//!
//! Wire format: a fetch sends the requested vertex ids (`u32`, little-endian) to every worker
//! and gets back their column blocks of those rows (`f32`, little-endian), under the ledger
//! phases [`shard::FETCH_IDS`] and [`shard::FETCH_COLUMNS`].

mod shard;
#[cfg(test)]
mod tests;
mod trials;

use cache_quant::StateError;
use cache_quant::state::{StateReader, put_f64};
use comm_hierarchy::Communicator;
use graph_partition::Dataset;
use graph_partition::sample::MiniBatch;
use ndarray::Array2;
use serde_json::{Value, json};

use self::shard::ColumnShard;
use self::trials::{TrialCost, Trials};
use super::FetchSpec;
use crate::config::{BiasEstimate, Eq20Step, Tau, TrainConfig};
use crate::error::{DistError, TrainError};
use crate::harness::{Cluster, CommClock};
use crate::method::featpart::plan::{Eq20Inputs, Estimates, FetchPlan, median, put_usize, usize_of};
use crate::method::featpart::readings::{EffectiveStep, RunningBias};
use crate::method::featpart::target;
use crate::method::{OwnRunner, Sampling};
use crate::minibatch::data_parallel::{self, AllReduce, HooksFactory, WorkerHooks};
use crate::minibatch::trainer::{BatchTrainer, OwnColumns, StepHooks, StepRows};
use crate::report::{EpochRecord, Report};
use crate::train_loop::EpochObserver;

/// Ledger phase of the loss all-reduced at fetch iterations of `tau = auto` (eq. 20 reads it).
const FETCH_LOSS: &str = "fetch/loss";
/// Ledger phase of the own-column gradient all-reduced at fetch iterations of
/// `--bias-estimate running-max`.
const BIAS_GRADS: &str = "bias/grads";

/// Builds every worker's [`ColumnHooks`].
pub(crate) struct ColumnFactory {
    spec: FetchSpec,
    target_acc: Option<f64>,
}

/// Feature columns and their runner: the data-parallel runner with the columns' hooks.
pub(crate) const RUNNER: OwnRunner = OwnRunner { holds: "feature columns", partition_keys: &[], run };

/// Trains featpart's run of `cluster` on `sampling`'s batches, as `[method.featpart]` plans its
/// fetches.
fn run(
    cluster: &Cluster<'_>,
    sampling: &Sampling,
    observer: &mut dyn EpochObserver,
) -> Result<Option<Report>, TrainError> {
    let config = cluster.config();
    let hooks = ColumnFactory::new(FetchSpec::of(&config.method.featpart), config);
    data_parallel::run(cluster, sampling, observer, &hooks)
}

impl ColumnFactory {
    pub(crate) fn new(spec: FetchSpec, config: &TrainConfig) -> Self {
        Self { spec, target_acc: config.method.featpart.target_acc }
    }
}

impl HooksFactory for ColumnFactory {
    fn cut(&self) -> &'static str {
        "feature"
    }

    fn holds_columns(&self) -> bool {
        true
    }

    fn make<'a>(
        &self,
        comm: &'a dyn Communicator,
        clock: &'a CommClock<'a>,
        dataset: &'a Dataset,
    ) -> Result<Box<dyn WorkerHooks + 'a>, TrainError> {
        let graph = &dataset.graph;
        Ok(Box::new(ColumnHooks {
            grads: AllReduce { comm, clock },
            shard: ColumnShard::new(&dataset.features, comm.rank(), comm.size())?,
            plan: FetchPlan::new(self.spec.tau, self.spec.tau_max, self.spec.tau_rule),
            spec: self.spec,
            target_acc: self.target_acc,
            structure_bytes: (graph.indptr().len() * 8 + graph.indices().len() * 4) as u64,
            nodes: dataset.num_nodes() as u64,
            lr: 0.0,
            estimates: None,
            trials: None,
            bias: None,
            own_grads: Vec::new(),
            step: None,
            fetching: false,
            reported: (0, 0, 0),
        }))
    }
}

/// One worker's feature columns, fetch plan and gradient all-reduce.
struct ColumnHooks<'a> {
    grads: AllReduce<'a>,
    shard: ColumnShard,
    plan: FetchPlan,
    spec: FetchSpec,
    target_acc: Option<f64>,
    structure_bytes: u64,
    nodes: u64,
    /// The learning rate eq. 20 reads (set before training).
    lr: f64,
    estimates: Option<Estimates>,
    trials: Option<TrialCost>,
    /// sigma_bias's running maximum (`auto` with `--bias-estimate running-max`).
    bias: Option<RunningBias>,
    /// The all-reduced own-column gradient of the fetch iteration in progress (running-max).
    own_grads: Vec<f32>,
    /// The effective step since the last fetch (`auto` with `--eq20-step effective`).
    step: Option<EffectiveStep>,
    /// Whether the iteration in progress fetched.
    fetching: bool,
    /// Fetches, local iterations and decisions already put in epoch records.
    reported: (usize, usize, usize),
}

impl StepHooks for ColumnHooks<'_> {
    /// A fetch iteration's full rows (eq. 3), or a local iteration's own columns (eq. 4).
    fn inputs(&mut self, _epoch: usize, _step: usize, batch: &MiniBatch) -> Result<Option<StepRows<'_>>, TrainError> {
        self.fetching = self.plan.next_fetches();
        let ids = batch.input_ids();
        if self.fetching {
            let (comm, clock, shard) = (self.grads.comm, self.grads.clock, &mut self.shard);
            let own = Some(shard.own_columns());
            let values = clock.call(move || shard.fetch_rows(comm, ids))?;
            return Ok(Some(StepRows { values, own }));
        }
        Ok(Some(StepRows { values: self.shard.local_rows(ids), own: Some(OwnColumns::Only) }))
    }

    fn sync(&mut self, grads: &mut [f32], loss: f64) -> Result<f64, TrainError> {
        let mut seconds = self.grads.grads(grads)?;
        if let (true, Some(est)) = (self.fetching && self.plan.adaptive(), self.estimates) {
            let start = std::time::Instant::now();
            let (comm, clock) = (self.grads.comm, self.grads.clock);
            let mut global = [loss];
            clock.call(|| comm.all_reduce_sum_f64(FETCH_LOSS, &mut global)).map_err(DistError::from)?;
            let grad_sq = grads.iter().map(|g| f64::from(*g).powi(2)).sum();
            let sigma_bias = match &mut self.bias {
                Some(bias) => bias.observe(grads, &self.own_grads),
                None => est.sigma_bias,
            };
            // The span closes before this iteration's step, which opens the next one.
            let eta = self.step.as_mut().map_or(self.lr, |s| s.take(self.lr));
            self.plan.decide(&est, Eq20Inputs { eta, sigma_bias }, global[0], grad_sq);
            seconds += start.elapsed().as_secs_f64();
        }
        if let Some(step) = &mut self.step {
            step.gradient(grads);
        }
        Ok(seconds)
    }

    fn second_inputs(&mut self, batch: &MiniBatch) -> Result<Option<StepRows<'_>>, TrainError> {
        if self.fetching && self.plan.adaptive() && self.bias.is_some() {
            return Ok(Some(StepRows {
                values: self.shard.local_rows(batch.input_ids()),
                own: Some(OwnColumns::Only),
            }));
        }
        Ok(None)
    }

    fn second_gradient(&mut self, grads: &[f32]) -> Result<f64, TrainError> {
        let start = std::time::Instant::now();
        let (comm, clock) = (self.grads.comm, self.grads.clock);
        self.own_grads.clear();
        self.own_grads.extend_from_slice(grads);
        clock.call(|| comm.all_reduce_sum_f32(BIAS_GRADS, &mut self.own_grads)).map_err(DistError::from)?;
        Ok(start.elapsed().as_secs_f64())
    }

    fn reads_params(&self) -> bool {
        self.step.is_some()
    }

    fn holds_inputs(&self) -> bool {
        false
    }

    fn after_step(&mut self, params: &[f32]) {
        if let Some(step) = &mut self.step {
            step.stepped(params);
        }
    }
}

impl WorkerHooks for ColumnHooks<'_> {
    fn resident_columns(&self) -> Option<Array2<f32>> {
        Some(self.shard.own_rows_of_every_vertex())
    }

    fn before_training(&mut self, trainer: &mut BatchTrainer<'_>) -> Result<(), TrainError> {
        self.lr = f64::from(trainer.lr());
        if self.plan.adaptive() {
            let trials = Trials { comm: self.grads.comm, clock: self.grads.clock, iterations: self.spec.trials };
            let (estimates, cost) = trials.run(trainer, &mut self.shard)?;
            self.estimates = Some(estimates);
            self.trials = Some(cost);
            if self.spec.bias_estimate == BiasEstimate::RunningMax {
                self.bias = Some(RunningBias::new(estimates.sigma_bias));
            }
            if self.spec.eq20_step == Eq20Step::Effective {
                self.step = Some(EffectiveStep::new(&trainer.params()?));
            }
        }
        Ok(())
    }

    /// The fetch plan, the report's counters, and what the trials found: their estimates
    /// include measured compute time, so a resumed run reads them rather than repeating the
    /// trials (which would give other values and other tau decisions).
    fn save_state(&self, out: &mut Vec<u8>) -> Result<(), StateError> {
        put_f64(out, self.lr);
        out.push(self.estimates.is_some() as u8);
        if let Some(e) = &self.estimates {
            let terms =
                [e.sampled_vertices, e.compute_s, e.fetch_s, e.sigma_var, e.sigma_hat, e.sigma_bias, e.lipschitz];
            terms.into_iter().for_each(|v| put_f64(out, v));
        }
        out.push(self.trials.is_some() as u8);
        if let Some(t) = &self.trials {
            put_usize(out, t.iterations);
            out.extend(t.bytes.to_le_bytes());
            put_f64(out, t.modeled_comm_s);
            put_f64(out, t.compute_s);
        }
        out.push(self.bias.is_some() as u8);
        if let Some(bias) = &self.bias {
            put_f64(out, bias.current());
        }
        out.push(self.step.is_some() as u8);
        if let Some(step) = &self.step {
            step.save_state(out);
        }
        self.plan.save_state(out);
        Ok(())
    }

    fn restore_state(&mut self, bytes: &[u8]) -> Result<(), StateError> {
        let mut r = StateReader::new("featpart", bytes);
        self.lr = r.f64("the learning rate")?;
        self.estimates = match r.u8("whether estimates were made")? {
            0 => None,
            _ => Some(Estimates {
                sampled_vertices: r.f64("B")?,
                compute_s: r.f64("C")?,
                fetch_s: r.f64("the fetch time")?,
                sigma_var: r.f64("sigma_var")?,
                sigma_hat: r.f64("sigma-hat_var")?,
                sigma_bias: r.f64("sigma_bias")?,
                lipschitz: r.f64("L_f")?,
            }),
        };
        self.trials = match r.u8("whether trials ran")? {
            0 => None,
            _ => Some(TrialCost {
                iterations: usize_of(&mut r, "trial iterations")?,
                bytes: r.u64("trial bytes")?,
                modeled_comm_s: r.f64("trial communication time")?,
                compute_s: r.f64("trial compute time")?,
            }),
        };
        if self.plan.adaptive() != self.estimates.is_some() {
            return Err(StateError("featpart: tau = auto needs the trials' estimates, and only it".to_string()));
        }
        self.bias = match r.u8("whether sigma_bias is a running maximum")? {
            0 => None,
            _ => Some(RunningBias::new(r.f64("sigma_bias's running maximum")?)),
        };
        self.step = match r.u8("whether eta is the effective step")? {
            0 => None,
            _ => Some(EffectiveStep::restore(&mut r)?),
        };
        let running = self.plan.adaptive() && self.spec.bias_estimate == BiasEstimate::RunningMax;
        let effective = self.plan.adaptive() && self.spec.eq20_step == Eq20Step::Effective;
        if (running, effective) != (self.bias.is_some(), self.step.is_some()) {
            return Err(StateError(
                "featpart: the checkpoint was written with other --bias-estimate or --eq20-step settings".to_string(),
            ));
        }
        self.plan.restore_state(&mut r)?;
        // Every epoch record reports the plan's counts up to its end, checkpoints follow epochs.
        self.reported = (self.plan.fetches(), self.plan.locals(), self.plan.decisions().len());
        r.finish()
    }

    fn epoch_fields(&mut self) -> Option<Value> {
        let (fetches, locals, decided) = self.reported;
        let taus: Vec<usize> = self.plan.decisions()[decided..].iter().map(|d| d.applied).collect();
        self.reported = (self.plan.fetches(), self.plan.locals(), self.plan.decisions().len());
        Some(json!({
            "fetch_iterations": self.plan.fetches() - fetches,
            "local_iterations": self.plan.locals() - locals,
            "tau_decided": taus,
        }))
    }

    fn final_fields(&mut self, epochs: &[EpochRecord]) -> Option<Value> {
        let iterations = self.plan.fetches() + self.plan.locals();
        let bytes: u64 = epochs.iter().map(|e| e.bytes_intra + e.bytes_inter).sum();
        let fetch_bytes: u64 = epochs
            .iter()
            .flat_map(|e| e.bytes_by_phase.iter())
            .filter(|(phase, _)| phase.starts_with("fetch/"))
            .map(|(_, b)| b)
            .sum();
        let per_iteration = |b: u64| (iterations > 0).then(|| b as f64 / iterations as f64);
        let taus = self.plan.taus();
        let tenth = (taus.len() / 10).max(1).min(taus.len());
        let finite = self.spec.tau != Tau::Never;
        let compute_s: f64 = epochs.iter().map(|e| e.compute_s).sum();
        let comm_s: f64 = epochs.iter().map(|e| e.modeled_comm_s).sum();
        let before_s = self.trials.map_or(0.0, |t| t.modeled_s());
        let window = target::window(iterations.checked_div(epochs.len()).unwrap_or(0));
        Some(json!({
            "tau": self.spec.tau.to_string(),
            "tau_max": self.spec.tau_max,
            "tau_rule": self.spec.tau_rule,
            "bias_estimate": self.spec.bias_estimate,
            "eq20_step": self.spec.eq20_step,
            "fetch_iterations": self.plan.fetches(),
            "local_iterations": self.plan.locals(),
            "tau_schedule": self.plan.decisions(),
            "tau_median_first_10pct": finite.then(|| median(&taus[..tenth])).flatten(),
            "tau_median_last_10pct": finite.then(|| median(&taus[taus.len() - tenth..])).flatten(),
            "bytes_per_iteration": per_iteration(bytes),
            "fetch_bytes_per_iteration": per_iteration(fetch_bytes),
            "estimates": self.estimates,
            "trials": self.trials,
            "compute_to_comm": (comm_s > 0.0).then(|| compute_s / comm_s),
            "held_bytes": {
                "structure": self.structure_bytes,
                "feature_columns_per_worker": self.shard.held_bytes(self.nodes),
                "features_replicated": self.nodes * self.shard.columns().last().map_or(0, |c| c.end) as u64 * 4,
            },
            "target_acc": self.target_acc,
            "target_window_epochs": window,
            "time_to_target": self.target_acc.and_then(|t| target::time_to_target(epochs, t, window, before_s)),
        }))
    }
}
