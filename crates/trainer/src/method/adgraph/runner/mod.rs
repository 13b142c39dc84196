//! ADGraph's runner: rank 0 plans the extended parts ([`plan`]) and ships one to every worker
//! (the `setup` phase, counted); each worker then trains data-parallel on its own training
//! vertices, sampling their multi-layer neighbourhoods inside its extended part, with the
//! gradients all-reduced every step (the only traffic of an epoch). Every worker takes the same
//! number of steps per epoch ([`plan::PartData::steps`]). Rank 0 keeps the whole dataset to
//! evaluate (layer-wise inference, as data-parallel training does); evaluation is a
//! measurement, not part of the method.
//!
//! Draws are keyed by global ids and a part's rows keep the whole graph's neighbour order, so
//! where the part holds a batch's whole neighbourhood (hops at least the number of layers) the
//! batch is the one the whole graph gives: ADGraph then trains exactly as one process on the
//! union of the workers' batches.

mod plan;
#[cfg(test)]
mod tests;

use comm_hierarchy::cost;
use graph_partition::Dataset;
use graph_partition::book::CutKind;
use graph_partition::partition::PartitionConfig;
use serde_json::{Value, json};

use crate::checkpoint::fingerprint_ids;
use crate::error::{DistError, TrainError};
use crate::harness::{Cluster, Described, RankData};
use crate::method::{OwnRunner, Sampling};
use crate::minibatch::data_parallel::{AllReduce, Worker};
use crate::minibatch::full_graph::FullGraph;
use crate::minibatch::on_device;
use crate::minibatch::trainer::{BatchTrainer, Subgraph};
use crate::report::Report;
use crate::train_loop::EpochObserver;

/// ADGraph's l-hop parts and their runner.
pub(crate) const RUNNER: OwnRunner = OwnRunner { holds: "l-hop parts", partition_keys: &["cut", "partitioner"], run };

/// Trains with ADGraph's plan at `[method.adgraph] hops` hops on `cluster`, on `sampling`'s
/// batches. Returns the report on rank 0, `None` on the other ranks of an MPI job.
fn run(
    cluster: &Cluster<'_>,
    sampling: &Sampling,
    observer: &mut dyn EpochObserver,
) -> Result<Option<Report>, TrainError> {
    let hops = cluster.config().method.adgraph.hops;
    let data = RankData::shared(cluster, observer.shows_progress())?;
    cluster.run(observer, |rank, observer| {
        let (comm, clock, config) = (rank.comm, &rank.clock, rank.config());
        let dist = &config.distributed;
        // Rank 0 plans the parts and evaluates on the whole graph.
        let whole = (comm.rank() == 0).then(|| data.get(observer.shows_progress())).transpose()?;
        let whole: Option<&Dataset> = whole.as_deref();
        let pconfig = PartitionConfig {
            hosts: dist.hosts,
            seed: config.seed,
            ..PartitionConfig::new(dist.algorithm_for(CutKind::EdgeCut), comm.size())
        };
        let planned = whole.map(|dataset| plan::plan(dataset, &pconfig, hops)).transpose()?;
        let (parts, head) = match planned {
            Some(p) => (Some(p.parts), Some((p.summary, p.figures))),
            None => (None, None),
        };
        let mark = comm.ledger_mark();
        let part = plan::ship(comm, clock, parts)?;
        let setup = comm.ledger_since(mark);
        let setup = clock.call(|| comm.gather_ledger(0, &setup)).map_err(DistError::from)?;
        let subgraph = Subgraph { dataset: &part.dataset, keys: &part.keys, degrees: part.degrees() };
        let gpu = on_device::open(rank, &part.dataset, whole, false)?;
        let mut trainer = BatchTrainer::on_subgraph(config, sampling, subgraph, comm.size())?;
        on_device::place(gpu.as_ref(), &mut trainer)?;
        let (index, batch_size, seed) = (comm.rank(), sampling.batch_size, config.seed);
        let part_ref = &part;
        let steps = Box::new(move |epoch| Ok(part_ref.steps(index, batch_size, seed, epoch)));
        let mut extra = json!({
            "steps_per_epoch": part.steps(index, batch_size, seed, 1).len(),
            "batch_size_per_worker": batch_size,
        });
        if let (Some((_, Value::Object(figures))), Some(setup), Value::Object(fields)) = (&head, &setup, &mut extra) {
            fields.extend(figures.clone());
            fields.insert("setup_bytes".into(), json!(setup.phase_totals(plan::SETUP).bytes()));
            fields.insert("setup_modeled_s".into(), json!(cost::model(comm.topology(), setup).total_s));
        }
        let eval = whole.map(FullGraph::of);
        let hooks = Box::new(AllReduce { comm, clock });
        let mut worker = Worker::new(comm, clock, trainer, steps, eval, extra, hooks);
        let fingerprint = fingerprint_ids(&part.keys, part.dataset.graph.fingerprint());
        let mut outcome = worker.train(rank, fingerprint, observer)?;
        let (Some(dataset), Some((summary, _))) = (whole, head) else {
            return Ok(None);
        };
        if let Some(gpu) = &gpu {
            outcome.final_.device = Some(gpu.summary()?);
        }
        Ok(Some(rank.report(Described::of(dataset, CutKind::EdgeCut.as_str(), Some(summary)), outcome)))
    })
}
