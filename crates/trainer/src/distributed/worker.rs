//! One worker's side of distributed full-batch training: the model on its part of the graph,
//! the exchange of its cut, gradients all-reduced (summed) before every worker applies the
//! same optimizer step, and losses and accuracy counts all-reduced, so every worker sees the
//! global values.

use std::time::Instant;

use comm_hierarchy::{Communicator, LedgerSnapshot, cost};
use gnn_core::exchange::edge_cut::EdgeCutExchange;
use gnn_core::exchange::part_view::agg_graph_of;
use gnn_core::exchange::vertex_cut::VertexCutExchange;
use gnn_core::exchange::{Exchange, ExchangeOptions};
use gnn_core::{Adam, AggGraph, ForwardCtx, Model};
use serde_json::{Value, json};

use super::DistError;
use super::clock::CommClock;
use super::settings::Cut;
use super::setup::WorkerShare;
use crate::config::TrainConfig;
use crate::error::TrainError;
use crate::objective::{Hits, Objective};
use crate::train_loop::{CommStats, EvalStats, StepStats, Strategy};

/// Ledger phases of the worker's own collectives (the exchange's are `fwd/<layer>` and
/// `bwd/<layer>`).
const GRADS: &str = "grads";
const LOSS: &str = "loss";
const EVAL: &str = "eval";
const STATS: &str = "stats";

/// A training [`Strategy`] run by every worker of a job, in lock step.
pub(crate) struct Worker<'a> {
    comm: &'a dyn Communicator,
    clock: &'a CommClock<'a>,
    share: &'a WorkerShare,
    graph: AggGraph,
    objective: Objective<'a>,
    model: Model,
    exchange: Box<dyn Exchange + 'a>,
    optimizer: Adam,
    /// Loss terms over the whole training set (the mean's denominator).
    global_terms: f64,
    seed: u64,
}

impl<'a> Worker<'a> {
    /// The worker of `share`, with the exchange of `config`'s cut and the model and optimizer it
    /// describes (initialised identically on every worker from the seed).
    pub(crate) fn new(
        comm: &'a dyn Communicator,
        clock: &'a CommClock<'a>,
        share: &'a WorkerShare,
        config: &TrainConfig,
    ) -> Result<Self, TrainError> {
        // No codec: rows travel as exact f32 (the identity codec).
        let options = ExchangeOptions { codecs: None, watch: Some(clock) };
        let exchange: Box<dyn Exchange + 'a> = match config.distributed.cut {
            Cut::Edge => Box::new(EdgeCutExchange::new(&share.part, comm, options).map_err(DistError::from)?),
            Cut::Vertex => Box::new(VertexCutExchange::new(&share.part, comm, options).map_err(DistError::from)?),
        };
        let objective = Objective::new(&share.labels);
        Ok(Self {
            comm,
            clock,
            share,
            graph: agg_graph_of(&share.part, config.distributed.cut.kind())?,
            global_terms: (share.global_train * objective.terms_per_row()) as f64,
            objective,
            model: Model::new(config.model_config(share.features.ncols(), share.num_classes))?,
            exchange,
            optimizer: config.optimizer(),
            seed: config.seed,
        })
    }

    /// Forward, loss, backward, gradient all-reduce and update; returns the global loss.
    fn step(&mut self, epoch: usize) -> Result<f64, TrainError> {
        self.model.zero_grad();
        let ctx = ForwardCtx::train(self.seed, epoch as u64);
        let logits = self.model.forward(&self.graph, &self.share.features, self.exchange.as_mut(), ctx)?;
        let (loss_sum, mut dlogits) = self.objective.loss_sum(logits, &self.share.train)?;
        dlogits /= self.global_terms as f32;
        self.model.backward(&self.graph, dlogits, self.exchange.as_mut())?;
        let (comm, grads) = (self.comm, self.model.grads_mut());
        self.clock.call(|| comm.all_reduce_sum_f32(GRADS, grads)).map_err(DistError::from)?;
        self.model.step(&mut self.optimizer)?;
        let mut loss = [loss_sum];
        self.clock.call(|| comm.all_reduce_sum_f64(LOSS, &mut loss)).map_err(DistError::from)?;
        Ok(loss[0] / self.global_terms)
    }

    /// Merges the step's traffic (`delta` on every rank) at rank 0 and collects every worker's
    /// compute time; returns the traffic (complete on rank 0 only), the method fields and the
    /// slowest worker's compute time. These collectives run after the step and are not part of
    /// its counts.
    fn step_stats(&self, delta: &LedgerSnapshot, compute_s: f64) -> Result<(CommStats, Value, f64), DistError> {
        let merged = self.clock.call(|| self.comm.gather_ledger(0, delta))?;
        let mut per_worker = vec![0.0f64; self.comm.size()];
        per_worker[self.comm.rank()] = compute_s;
        self.clock.call(|| self.comm.all_reduce_sum_f64(STATS, &mut per_worker))?;
        let max = per_worker.iter().copied().fold(0.0, f64::max);
        let sum: f64 = per_worker.iter().sum();
        let mut stats = CommStats::default();
        let mut phases = serde_json::Map::new();
        if let Some(merged) = merged {
            let totals = merged.totals();
            stats.bytes_intra = totals.bytes_intra;
            stats.bytes_inter = totals.bytes_inter;
            stats.messages = totals.messages();
            stats.modeled_comm_s = cost::model(self.comm.topology(), &merged).total_s;
            for phase in merged.phases() {
                let t = merged.phase_totals(phase);
                let entry =
                    json!({"bytes_intra": t.bytes_intra, "bytes_inter": t.bytes_inter, "messages": t.messages()});
                phases.insert(phase.to_string(), entry);
            }
        }
        let method = json!({
            "compute_s_max": max,
            "compute_s_sum": sum,
            "compute_s_per_worker": per_worker,
            "phases": phases,
        });
        Ok((stats, method, max))
    }
}

impl Strategy for Worker<'_> {
    type Error = TrainError;

    fn train_step(&mut self, epoch: usize) -> Result<StepStats, TrainError> {
        let mark = self.comm.ledger_mark();
        let waited_before = self.clock.waited();
        let start = Instant::now();
        let loss = self.step(epoch)?;
        let compute_s = start.elapsed().saturating_sub(self.clock.waited() - waited_before).as_secs_f64();
        let delta = self.comm.ledger_since(mark);
        let (mut comm, method, slowest) = self.step_stats(&delta, compute_s)?;
        // Chosen so that the loop's `compute_s` (its wall time minus this) is the slowest
        // worker's compute time; `compute_s_sum` in the method fields is the work summed over
        // workers.
        comm.waited_s = start.elapsed().as_secs_f64() - slowest;
        Ok(StepStats { loss, comm, method: Some(method) })
    }

    fn evaluate(&mut self) -> Result<EvalStats, TrainError> {
        let logits =
            self.model.forward(&self.graph, &self.share.features, self.exchange.as_mut(), ForwardCtx::eval())?;
        let mut counts = [0.0f64; 6];
        for (k, rows) in [&self.share.train, &self.share.valid, &self.share.test].into_iter().enumerate() {
            let hits = self.objective.hits(logits, rows)?;
            counts[2 * k] = hits.correct as f64;
            counts[2 * k + 1] = hits.total as f64;
        }
        let comm = self.comm;
        self.clock.call(|| comm.all_reduce_sum_f64(EVAL, &mut counts)).map_err(DistError::from)?;
        let fraction = |k: usize| Hits { correct: counts[2 * k] as u64, total: counts[2 * k + 1] as u64 }.fraction();
        Ok(EvalStats { train_acc: fraction(0), val_acc: fraction(1), test_acc: fraction(2) })
    }
}
