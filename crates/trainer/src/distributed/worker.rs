//! One worker's side of distributed full-batch training: the model on its part of the graph
//! (a [`PartModel`], on the CPU or a device), the exchange of its cut with the method's codec
//! stack, gradients all-reduced (summed) before every worker applies the same optimizer step,
//! and losses and accuracy counts all-reduced, so every worker sees the global values.
//!
//! Before training, one all-reduce under the `messages` phase agrees on the largest pair's rows for
//! the exchange's `MessageCap`. Under `masters-only` a vertex-cut worker runs the primary/copy
//! exchange on `AggGraph::with_primaries_computing` views, and its share holds the masters'
//! features only.

use std::time::Instant;

use cache_quant::state::put_bytes;
use cache_quant::{StateError, StateReader, StatsTable};
use comm_hierarchy::{Communicator, LedgerSnapshot, cost};
use gnn_core::Model;
use gnn_core::exchange::edge_cut::EdgeCutExchange;
use gnn_core::exchange::part_view::agg_graph_of;
use gnn_core::exchange::vertex_cut::VertexCutExchange;
use gnn_core::exchange::{CallKind, Exchange, ExchangeOptions, MessageCap};
use graph_partition::book::CutKind;
use serde_json::{Value, json};

use super::compute::{PartJob, PartModel};
use super::setup::WorkerShare;
use crate::checkpoint::WorkerState;
use crate::config::TrainConfig;
use crate::error::DistError;
use crate::error::TrainError;
use crate::harness::CommClock;
use crate::harness::GradSum;
use crate::harness::report::device_epoch_over_workers;
use crate::harness::timeline::{
    Machines, WorkerStep, modeled_step_s, overlap_bound_s, overlapped_calls, played_step_s,
};
use crate::method::{ControlCtx, Controller, Parts};
use crate::report::{DeviceEpoch, TrainedModel};
use crate::train_loop::{CommStats, EvalStats, StepStats, Strategy};
use gnn_core::objective::{Hits, Objective};

/// Ledger phases of the worker's own collectives (the exchange's are `fwd/<layer>` and
/// `bwd/<layer>`). Only `grads` and `loss` run inside a step; the others run after it and are
/// not part of any epoch's counts.
const GRADS: &str = "grads";
const LOSS: &str = "loss";
const EVAL: &str = "eval";
const STATS: &str = "stats";
/// The phase of the collective that agrees on the exchange's [`MessageCap`], before training.
const MESSAGES: &str = "messages";
/// The phase of the collective that tells which ranks share a machine, before training.
const MACHINES: &str = "machines";

/// The most bytes an exact exchange message carries ([`MessageCap`]): calls of Cora's size run
/// in one round, while at ogbn-products scale a worker holds a few hundred MiB of messages
/// instead of gigabytes.
pub(super) const MESSAGE_BYTES: usize = 16 << 20;

/// A training [`Strategy`] run by every worker of a job, in lock step, whatever its model
/// computes on ([`PartModel`]).
pub(crate) struct Worker<'a> {
    comm: &'a dyn Communicator,
    clock: &'a CommClock<'a>,
    compute: Box<dyn PartModel + 'a>,
    exchange: Box<dyn Exchange + 'a>,
    controller: Option<Box<dyn Controller>>,
    /// Codec stats summed over workers and epochs.
    codec_totals: StatsTable,
    /// Loss terms over the whole training set (the mean's denominator).
    global_terms: f64,
    layers: usize,
    /// Which ranks share a machine's cores (MPI jobs; `None` in one process).
    machines: Option<Machines>,
}

/// The most rows any worker exchanges with one peer, by one all-reduce: every worker derives
/// the same rounds from it ([`MessageCap`]).
fn agreed_pair_rows(comm: &dyn Communicator, clock: &CommClock<'_>, share: &WorkerShare) -> Result<usize, DistError> {
    let mine = share.part.largest_peer_list();
    let mut table = vec![0.0f64; comm.size()];
    table[comm.rank()] = mine as f64;
    clock.call(|| comm.all_reduce_sum_f64(MESSAGES, &mut table))?;
    Ok(table.into_iter().fold(0.0, f64::max) as usize)
}

/// The machines of an MPI job's ranks and their cores, by one all-reduce; `None` for workers
/// in one process (its CPU is all of theirs) or where a rank cannot tell its machine.
fn agreed_machines(
    comm: &dyn Communicator,
    clock: &CommClock<'_>,
    config: &TrainConfig,
) -> Result<Option<Machines>, DistError> {
    if config.distributed.backend.in_process() {
        return Ok(None);
    }
    let cpu = crate::measure::host_cpu();
    // Ranks under one CPU quota share it as ranks of one machine share its cores.
    let id = crate::memory::machine_id().map(|id| match &cpu.quota_group {
        Some(group) => {
            let words: Vec<u64> =
                group.as_bytes().chunks(8).map(|c| c.iter().fold(0u64, |w, &b| (w << 8) | u64::from(b))).collect();
            graph_partition::rng::hash_extend(id, &words) & ((1 << 52) - 1)
        }
        None => id,
    });
    let mut table = vec![0.0f64; 2 * comm.size()];
    let mine = &mut table[2 * comm.rank()..][..2];
    (mine[0], mine[1]) = (id.map_or(-1.0, |id| id as f64), cpu.cores);
    clock.call(|| comm.all_reduce_sum_f64(MACHINES, &mut table))?;
    if table.chunks_exact(2).any(|r| r[0] < 0.0) {
        return Ok(None);
    }
    let ids: Vec<u64> = table.chunks_exact(2).map(|r| r[0] as u64).collect();
    let cores: Vec<f64> = table.chunks_exact(2).map(|r| r[1]).collect();
    Ok(Some(Machines::new(&ids, &cores)))
}

impl<'a> Worker<'a> {
    /// The worker of `share`, with the exchange of `cut` through `parts`' codecs, and the model
    /// `place` makes for its part (the CPU's, or a device's).
    pub(crate) fn new(
        comm: &'a dyn Communicator,
        clock: &'a CommClock<'a>,
        share: &'a WorkerShare,
        parts: &Parts,
        cut: CutKind,
        config: &TrainConfig,
        place: impl FnOnce(PartJob<'a, '_>) -> Result<Box<dyn PartModel + 'a>, TrainError>,
    ) -> Result<Self, TrainError> {
        let (codecs, controller, replica_cache) = match parts.exchange.as_ref().map(|make| make()) {
            Some(stack) => (Some(stack.codecs), stack.controller, stack.replica_cache),
            None => (None, None, None),
        };
        let options = ExchangeOptions {
            codecs,
            watch: Some(clock),
            overlap: config.distributed.overlap,
            lossy_eval: config.distributed.lossy_eval,
            replica_cache,
            message_cap: Some(MessageCap { bytes: MESSAGE_BYTES, pair_rows: agreed_pair_rows(comm, clock, share)? }),
        };
        // When only primaries compute, rows move between primaries and copies (a vertex-cut
        // with masters only like an edge-cut: copies pull inputs and push partial aggregates);
        // otherwise replicas sync.
        let primaries_only = config.distributed.primaries_only(cut);
        let exchange: Box<dyn Exchange + 'a> = if primaries_only {
            Box::new(EdgeCutExchange::new(&share.part, comm, options).map_err(DistError::from)?)
        } else {
            Box::new(VertexCutExchange::new(&share.part, comm, options).map_err(DistError::from)?)
        };
        let mut graph = agg_graph_of(&share.part, cut)?;
        if primaries_only && cut == CutKind::VertexCut {
            graph = graph.with_primaries_computing();
        }
        let global_terms = (share.global_train * Objective::new(&share.labels).terms_per_row()) as f64;
        let compute = place(PartJob { share, graph, parts, config, rank: comm.rank() })?;
        Ok(Self {
            comm,
            clock,
            compute,
            exchange,
            controller,
            codec_totals: StatsTable::default(),
            global_terms,
            layers: config.layers,
            machines: agreed_machines(comm, clock, config)?,
        })
    }

    /// The codec stack's name (ask after training).
    pub(crate) fn codec_name(&self) -> String {
        self.exchange.codec_name()
    }

    /// Forward, loss, backward, gradient all-reduce and update; returns the global loss.
    fn step(&mut self, epoch: usize) -> Result<f64, TrainError> {
        let pass = self.compute.train_pass(epoch, self.global_terms, self.exchange.as_mut())?;
        let (comm, clock) = (self.comm, self.clock);
        if !self.compute.steps_on_servers() {
            self.compute.sum_grads(&mut GradSum::new(comm, clock, GRADS))?;
        }
        let mut loss = [pass.loss_sum];
        clock.call(|| comm.all_reduce_sum_f64(LOSS, &mut loss)).map_err(DistError::from)?;
        let loss = loss[0] / self.global_terms;
        self.compute.update(epoch, loss, pass, comm, clock)?;
        Ok(loss)
    }

    /// Restores the method's state [`Strategy::checkpoint_state`] saved.
    fn restore_method(&mut self, bytes: &[u8]) -> Result<(), StateError> {
        let mut r = StateReader::new("the method", bytes);
        let exchange = r.bytes("the exchange")?;
        let controlled = r.u8("whether a controller runs")? != 0;
        let controller = r.bytes("the controller")?;
        r.finish()?;
        // The controller first: it sets the knobs that restored codecs may read.
        match (self.controller.as_mut(), controlled) {
            (Some(mine), true) => mine.restore_state(controller).map_err(|e| e.context("the controller"))?,
            (None, false) => {}
            (mine, _) => {
                let with = |c: bool| if c { "with" } else { "without" };
                let detail = format!("saved {} a controller, resumed {} one", with(controlled), with(mine.is_some()));
                return Err(StateError(format!("the method: {detail}")));
            }
        }
        self.exchange.restore_state(exchange).map_err(|e| e.context("the exchange"))
    }

    /// The codec stats of the step summed over all workers (identical on every rank).
    fn global_codec_stats(&mut self) -> Result<StatsTable, DistError> {
        let mut flat = self.exchange.take_stats().to_vec(self.layers);
        self.clock.call(|| self.comm.all_reduce_sum_f64(STATS, &mut flat))?;
        Ok(StatsTable::from_vec(self.layers, &flat))
    }

    /// Merges the step's traffic (`delta` on every rank) at rank 0 and collects every worker's
    /// compute time and overlaps; returns the traffic and modeled step (complete on rank 0
    /// only), the method fields and the slowest worker's compute time.
    fn step_stats(
        &self,
        delta: &LedgerSnapshot,
        compute_s: f64,
        cpu_s: [f64; 2],
    ) -> Result<(CommStats, Value, f64), DistError> {
        // The step's own calls, before the calls that collect its figures.
        let mut overlaps = self.clock.step_overlaps();
        let events = self.clock.step_events();
        let merged = self.clock.call(|| self.comm.gather_ledger(0, delta))?;
        // Per worker: compute, the thread's and the process's CPU time, its count of events, the
        // overlap of each of the step's calls, and the compute before each event (a call has at
        // most two: its start and its wait). Every rank makes the same calls, so the rows have
        // one length.
        const HEAD: usize = 4;
        let calls = delta.collectives().len();
        overlaps.resize(calls, 0.0);
        let slots = 2 * calls;
        let row = HEAD + calls + slots;
        let mut table = vec![0.0f64; self.comm.size() * row];
        let mine = &mut table[self.comm.rank() * row..][..row];
        (mine[0], mine[1], mine[2]) = (compute_s, cpu_s[0], cpu_s[1]);
        mine[3] = if events.len() <= slots { events.len() as f64 } else { f64::NAN };
        mine[HEAD..HEAD + calls].copy_from_slice(&overlaps);
        for (slot, event) in mine[HEAD + calls..].iter_mut().zip(&events) {
            *slot = event.lead_s;
        }
        self.clock.call(|| self.comm.all_reduce_sum_f64(STATS, &mut table))?;
        let cpu_per_worker: Vec<f64> = table.chunks_exact(row).map(|r| r[1]).collect();
        let process_cpu_per_worker: Vec<f64> = table.chunks_exact(row).map(|r| r[2]).collect();
        // Host compute only: a device's compute is not its process's CPU.
        let host = self.compute.device_compute_s().is_none();
        let floor = self.machines.as_ref().filter(|_| host).map(|m| m.floor_s(&process_cpu_per_worker));
        let workers: Vec<WorkerStep> = table
            .chunks_exact(row)
            .map(|r| WorkerStep { compute_s: r[0], overlaps: r[HEAD..HEAD + calls].to_vec() })
            .collect();
        // Each worker's leads, where its count of events is this rank's (whose kinds they take).
        let leads: Vec<Vec<f64>> = table
            .chunks_exact(row)
            .filter(|r| r[3] == events.len() as f64)
            .map(|r| r[HEAD + calls..][..events.len()].to_vec())
            .collect();
        let kinds: Vec<CallKind> = events.iter().map(|e| e.kind).collect();
        let per_worker: Vec<f64> = workers.iter().map(|w| w.compute_s).collect();
        let overlapped: f64 = workers.iter().map(|w| w.overlaps.iter().sum::<f64>()).sum();
        let max = per_worker.iter().copied().fold(0.0, f64::max);
        let mut stats = CommStats::default();
        let mut no_overlap_s = None;
        let mut overlap = Value::Null;
        if let Some(merged) = merged {
            let totals = merged.totals();
            stats.bytes_intra = totals.bytes_intra;
            stats.bytes_inter = totals.bytes_inter;
            stats.messages = totals.messages();
            let modeled = cost::model(self.comm.topology(), &merged);
            stats.modeled_comm_s = modeled.total_s;
            let seconds: Vec<f64> = modeled.calls.iter().map(|c| c.seconds).collect();
            // Overlaps are credited call by call; a ledger that does not line up with the
            // clock's calls gets none (it costs compute plus communication).
            let blocking: Vec<WorkerStep> =
                workers.iter().map(|w| WorkerStep { overlaps: Vec::new(), ..w.clone() }).collect();
            let credited = if seconds.len() == calls { &workers } else { &blocking };
            // Played out event by event where every worker's events line up with the ledger's
            // calls and its compute is host time (a device's compute is timed apart from them).
            let played = |blocking_calls: bool| {
                host.then(|| played_step_s(&seconds, &kinds, &leads, &per_worker, blocking_calls)).flatten()
            };
            let step = played(false).unwrap_or_else(|| modeled_step_s(&seconds, credited));
            stats.modeled_epoch_s = Some(floor.map_or(step, |floor| step.max(floor)));
            no_overlap_s = Some(played(true).unwrap_or_else(|| modeled_step_s(&seconds, &blocking)));
            let split = overlapped_calls(&seconds, credited);
            overlap = json!({
                "comm_s_per_call": split.iter().map(|c| c.0).collect::<Vec<_>>(),
                "central_compute_s_per_call": split.iter().map(|c| c.1).collect::<Vec<_>>(),
                "bound_s": overlap_bound_s(&seconds, credited),
            });
            for phase in merged.phases() {
                stats.bytes_by_phase.insert(phase.to_string(), merged.phase_totals(phase).bytes());
            }
        }
        let method = json!({
            "modeled_epoch_s_no_overlap": no_overlap_s,
            "overlap": overlap,
            "overlapped_compute_s_sum": overlapped,
            "compute_s_max": max,
            "compute_s_sum": per_worker.iter().sum::<f64>(),
            "compute_s_per_worker": per_worker,
            "cpu_s_per_worker": cpu_per_worker,
            "process_cpu_s_per_worker": process_cpu_per_worker,
            "cpu_floor_s": floor,
        });
        Ok((stats, method, max))
    }
}

/// The report form of codec stats: per (layer, direction, route) and in total.
fn stats_json(table: &StatsTable) -> Value {
    let entry = |s: &cache_quant::CodecStats| {
        let bits: serde_json::Map<String, Value> =
            s.bits.iter().enumerate().filter(|(_, n)| **n > 0).map(|(b, n)| (b.to_string(), json!(n))).collect();
        json!({
            "rows": s.rows,
            "rows_skipped": s.rows_skipped,
            "rows_sent_fraction": if s.rows > 0 { (s.rows - s.rows_skipped) as f64 / s.rows as f64 } else { 1.0 },
            "bytes": s.bytes,
            "exact_bytes": s.exact_bytes,
            "bytes_fraction": s.bytes_fraction(),
            "relative_error": s.relative_error(),
            "bits": bits,
            "codec_s": s.codec_s,
        })
    };
    let mut out: serde_json::Map<String, Value> = table.entries().map(|(k, s)| (k.to_string(), entry(s))).collect();
    out.insert("total".to_string(), entry(&table.total()));
    Value::Object(out)
}

impl Strategy for Worker<'_> {
    type Error = TrainError;

    fn train_step(&mut self, epoch: usize) -> Result<StepStats, TrainError> {
        self.clock.begin_step();
        let mark = self.comm.ledger_mark();
        let waited_before = self.clock.waited();
        let start = Instant::now();
        let cpu_start = (crate::memory::thread_cpu_s(), crate::memory::process_cpu_s());
        let loss = self.step(epoch)?;
        let wall_s = start.elapsed().saturating_sub(self.clock.waited() - waited_before).as_secs_f64();
        let compute_s = self.compute.device_compute_s().unwrap_or(wall_s);
        let since = |end: Option<f64>, start: Option<f64>| end.zip(start).map_or(0.0, |(end, start)| end - start);
        let cpu_s =
            [since(crate::memory::thread_cpu_s(), cpu_start.0), since(crate::memory::process_cpu_s(), cpu_start.1)];
        let delta = self.comm.ledger_since(mark);
        let (mut comm, mut method, slowest) = self.step_stats(&delta, compute_s, cpu_s)?;
        let codec_stats = self.global_codec_stats()?;
        self.codec_totals.merge(&codec_stats);
        method["codec"] = stats_json(&codec_stats);
        if let Some(controller) = self.controller.as_mut() {
            let ctx = ControlCtx { comm: self.comm, graph: self.compute.graph(), watch: Some(self.clock) };
            if let Some(fields) = controller.after_step_in(epoch, &codec_stats, &ctx)? {
                method["controller"] = fields;
            }
        }
        // Chosen so that the loop's `compute_s` (its wall time minus this) is the slowest
        // worker's compute time; `compute_s_sum` in the method fields is the work summed over
        // workers.
        comm.waited_s = start.elapsed().as_secs_f64() - slowest;
        Ok(StepStats { loss, comm, method: Some(method) })
    }

    fn evaluate(&mut self) -> Result<EvalStats, TrainError> {
        let hits = self.compute.hits(self.exchange.as_mut())?;
        let mut counts = [0.0f64; 6];
        for (k, hits) in hits.iter().enumerate() {
            counts[2 * k] = hits.correct as f64;
            counts[2 * k + 1] = hits.total as f64;
        }
        let comm = self.comm;
        self.clock.call(|| comm.all_reduce_sum_f64(EVAL, &mut counts)).map_err(DistError::from)?;
        let fraction = |k: usize| Hits { correct: counts[2 * k] as u64, total: counts[2 * k + 1] as u64 }.fraction();
        let eval = EvalStats { train_acc: fraction(0), val_acc: fraction(1), test_acc: fraction(2) };
        if let Some(controller) = self.controller.as_mut() {
            controller.after_eval(&eval);
        }
        Ok(eval)
    }

    fn final_method(&mut self) -> Option<Value> {
        let total = self.codec_totals.total();
        // Rows sent over the rows the exact exchange sends, over the run.
        let rows_sent_fraction = (total.rows > 0).then(|| (total.rows - total.rows_skipped) as f64 / total.rows as f64);
        let mut fields =
            json!({ "codec_stats": stats_json(&self.codec_totals), "rows_sent_fraction": rows_sent_fraction });
        if let Some(controller) = self.controller.as_mut().and_then(|c| c.final_fields()) {
            fields["controller"] = controller;
        }
        Some(fields)
    }

    fn device_epoch(&mut self) -> Result<Option<DeviceEpoch>, TrainError> {
        match self.compute.device_epoch() {
            Some(mine) => Ok(Some(device_epoch_over_workers(self.comm, self.clock, STATS, mine)?)),
            None => Ok(None),
        }
    }

    fn model(&self) -> Option<&Model> {
        self.compute.model()
    }

    fn snapshot(&mut self, epoch: usize) -> Result<Option<TrainedModel>, TrainError> {
        self.compute.snapshot(epoch)
    }

    fn checkpoint_state(&self) -> Result<WorkerState, String> {
        // The method's state: the exchange's (codecs of every stream on both ends, caches),
        // then the controller's, each length-prefixed.
        let mut method = Vec::new();
        let mut section = Vec::new();
        self.exchange.save_state(&mut section).map_err(|e| e.context("the exchange").to_string())?;
        put_bytes(&mut method, &section);
        section.clear();
        method.push(self.controller.is_some() as u8);
        if let Some(controller) = &self.controller {
            controller.save_state(&mut section).map_err(|e| e.context("the controller").to_string())?;
        }
        put_bytes(&mut method, &section);
        self.compute.state(method)
    }

    fn restore_state(&mut self, state: WorkerState) -> Result<(), String> {
        let method = self.compute.restore(state)?;
        self.restore_method(&method).map_err(|e| e.to_string())
    }
}
