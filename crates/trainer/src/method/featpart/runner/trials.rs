//! Remark 1's estimators: trial iterations before training measure B, C, sigma_var,
//! sigma_bias and sigma-hat_var at the initial parameters w_1, and L_f by the secant
//! max ||g(w') - g(w)|| / ||w' - w|| on the same batches after one SGD step from w_1. The
//! trials leave the parameters and the optimizer as they found them.

use std::time::Instant;

use comm_hierarchy::{Communicator, cost};
use graph_partition::sample::{BatchPlan, MiniBatch, NeighborSampler, Remainder, Share, StepKey};
use ndarray::Array2;
use serde::Serialize;

use super::shard::{ColumnShard, FETCH_COLUMNS, FETCH_IDS};
use crate::error::DistError;
use crate::error::TrainError;
use crate::harness::CommClock;
use crate::method::featpart::plan::Estimates;
use crate::method::featpart::readings::{mean, sigma_bias, sq_dist};
use crate::minibatch::trainer::{BatchTrainer, OwnColumns, StepRows};

/// Ledger phase of the trials' gradient all-reduces.
const TRIAL_GRADS: &str = "trial/grads";
/// The batch plan's epoch of the trials (training epochs count from 1).
const TRIAL_EPOCH: u64 = 0;

/// What the trials cost: their traffic, its modeled time, and their slowest worker's compute.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub(crate) struct TrialCost {
    pub iterations: usize,
    pub bytes: u64,
    pub modeled_comm_s: f64,
    pub compute_s: f64,
}

impl TrialCost {
    /// The trials' time on the modeled cluster (their calls block: compute, then communication).
    pub(crate) fn modeled_s(&self) -> f64 {
        self.compute_s + self.modeled_comm_s
    }
}

/// One worker's side of the trials; every worker calls [`Trials::run`] together.
pub(crate) struct Trials<'a> {
    pub comm: &'a dyn Communicator,
    pub clock: &'a CommClock<'a>,
    pub iterations: usize,
}

/// A sampled trial batch with its full rows and the global batch size it is a share of.
struct TrialBatch {
    batch: MiniBatch,
    /// The fetched rows, the worker's own columns (`own`) beside the others.
    rows: Array2<f32>,
    own: OwnColumns,
    global_rows: usize,
}

impl Trials<'_> {
    fn all_reduce(&self, values: &mut [f32]) -> Result<(), DistError> {
        Ok(self.clock.call(|| self.comm.all_reduce_sum_f32(TRIAL_GRADS, values))?)
    }

    fn all_reduce_f64(&self, values: &mut [f64]) -> Result<(), DistError> {
        Ok(self.clock.call(|| self.comm.all_reduce_sum_f64(TRIAL_GRADS, values))?)
    }

    /// The averaged gradient (eq. 3 or 4 by `rows`) of `trial` at the current parameters, and
    /// this worker's compute seconds.
    fn gradient(
        &self,
        trainer: &mut BatchTrainer<'_>,
        index: usize,
        trial: &TrialBatch,
        rows: StepRows<'_>,
    ) -> Result<(Vec<f32>, f64), TrainError> {
        let start = Instant::now();
        trainer.zero_grad()?;
        if !trial.batch.seeds().is_empty() {
            let blocks = trainer.blocks(&trial.batch)?;
            trainer.add_gradient(TRIAL_EPOCH as usize, index, &trial.batch, &blocks, Some(rows), trial.global_rows)?;
        }
        // Brought to the host first: a device model's passes are done then.
        let mut grads = trainer.grads()?.to_vec();
        let compute_s = start.elapsed().as_secs_f64();
        self.all_reduce(&mut grads)?;
        Ok((grads, compute_s))
    }

    /// Runs the trials on `trainer`'s batches, fetching through `shard`.
    pub(crate) fn run(
        &self,
        trainer: &mut BatchTrainer<'_>,
        shard: &mut ColumnShard,
    ) -> Result<(Estimates, TrialCost), TrainError> {
        let (comm, workers) = (self.comm, self.comm.size());
        let mark = comm.ledger_mark();
        let dataset = trainer.dataset();
        let sampling = trainer.sampling().clone();
        let share = Share::new(comm.rank(), workers)?;
        let plan = BatchPlan::shuffled(
            &dataset.splits.train,
            sampling.batch_size * workers,
            trainer.seed(),
            TRIAL_EPOCH,
            Remainder::Keep,
        )?;
        let sampler = NeighborSampler::new(&dataset.graph, sampling.fanouts.clone(), trainer.seed())?;
        let (mut full, mut local) = (Vec::new(), Vec::new());
        let (mut batches, mut compute_s, mut sampled) = (Vec::new(), 0.0, 0.0);
        for index in 0..self.iterations {
            let seeds = plan.batch(index % plan.num_steps()).expect("index below the step count");
            let key = StepKey { epoch: TRIAL_EPOCH, step: index as u64 };
            let batch = sampler.sample(key, share.of(seeds))?;
            // Through the clock, which hands the compute gate over while the fetch waits.
            let rows = self.clock.call(|| shard.fetch_rows(comm, batch.input_ids()))?.clone();
            sampled += batch.input_ids().len() as f64;
            let trial = TrialBatch { batch, rows, own: shard.own_columns(), global_rows: seeds.len() };
            let (g, c) =
                self.gradient(trainer, index, &trial, StepRows { values: &trial.rows, own: Some(trial.own) })?;
            full.push(g);
            compute_s += c;
            let local_rows = shard.local_rows(trial.batch.input_ids()).clone();
            let (g, c) =
                self.gradient(trainer, index, &trial, StepRows { values: &local_rows, own: Some(OwnColumns::Only) })?;
            local.push(g);
            compute_s += c;
            batches.push(trial);
        }
        let lipschitz = self.secant(trainer, &batches, &full, &mut compute_s)?;
        let (full_mean, local_mean) = (mean(&full), mean(&local));
        // Per worker: its mean forward-backward seconds (two per trial) and sampled vertices.
        let mut table = vec![0.0f64; 2 * workers];
        table[2 * comm.rank()] = compute_s / (2 * self.iterations) as f64;
        table[2 * comm.rank() + 1] = sampled / self.iterations as f64;
        self.all_reduce_f64(&mut table)?;
        let per_iteration_s = table.iter().step_by(2).copied().fold(0.0, f64::max);
        let sampled_vertices = table.iter().skip(1).step_by(2).sum::<f64>() / workers as f64;
        let delta = comm.ledger_since(mark);
        // Rank 0 models the trials' traffic and shares the figures: fetch seconds, comm
        // seconds, bytes, and every worker's trial compute (the slowest sets the time).
        let mut figures = vec![0.0f64; 3 + workers];
        figures[3 + comm.rank()] = compute_s;
        if let Some(merged) = self.clock.call(|| comm.gather_ledger(0, &delta)).map_err(DistError::from)? {
            let modeled = cost::model(comm.topology(), &merged);
            let by_phase = modeled.by_phase();
            let fetch_s = [FETCH_IDS, FETCH_COLUMNS].iter().filter_map(|p| by_phase.get(*p)).sum::<f64>();
            figures[0] = fetch_s / self.iterations as f64;
            figures[1] = modeled.total_s;
            figures[2] = merged.totals().bytes() as f64;
        }
        self.all_reduce_f64(&mut figures)?;
        let estimates = Estimates {
            sampled_vertices,
            compute_s: per_iteration_s,
            fetch_s: figures[0],
            sigma_var: spread(&local, &local_mean),
            sigma_hat: spread(&full, &full_mean),
            sigma_bias: sigma_bias(&full, &local),
            lipschitz,
        };
        let cost = TrialCost {
            iterations: self.iterations,
            bytes: figures[2] as u64,
            modeled_comm_s: figures[1],
            compute_s: figures[3..].iter().copied().fold(0.0, f64::max),
        };
        Ok((estimates, cost))
    }

    /// L_f: from w_1 one SGD step along the mean full-feature gradient to w', then the largest
    /// ||g_j(w') - g_j(w_1)|| / ||w' - w_1|| over the trial batches; w_1 is restored.
    fn secant(
        &self,
        trainer: &mut BatchTrainer<'_>,
        batches: &[TrialBatch],
        at_start: &[Vec<f32>],
        compute_s: &mut f64,
    ) -> Result<f64, TrainError> {
        let start = trainer.params()?.to_vec();
        let lr = trainer.lr();
        let direction = mean(at_start);
        let moved: Vec<f32> = start.iter().zip(&direction).map(|(w, g)| w - lr * g).collect();
        let step = sq_dist(&moved, &start).sqrt();
        trainer.set_params(&moved)?;
        let mut lipschitz = 0.0f64;
        for (index, (trial, g0)) in batches.iter().zip(at_start).enumerate() {
            let (g1, c) =
                self.gradient(trainer, index, trial, StepRows { values: &trial.rows, own: Some(trial.own) })?;
            *compute_s += c;
            if step > 0.0 {
                lipschitz = lipschitz.max(sq_dist(&g1, g0).sqrt() / step);
            }
        }
        trainer.set_params(&start)?;
        trainer.zero_grad()?;
        Ok(lipschitz)
    }
}

/// The unbiased sample variance of `vectors` around `center` (their mean): sum of squared
/// distances over n - 1.
fn spread(vectors: &[Vec<f32>], center: &[f32]) -> f64 {
    vectors.iter().map(|v| sq_dist(v, center)).sum::<f64>() / (vectors.len().max(2) - 1) as f64
}
