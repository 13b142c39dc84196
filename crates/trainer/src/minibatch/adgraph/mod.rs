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

use super::data_parallel::{AllReduce, Worker};
use super::trainer::{BatchTrainer, FullGraph, Subgraph};
use crate::checkpoint::{RunIdentity, fingerprint_ids};
use crate::config::{Backend, TrainConfig};
use crate::data::Source;
use crate::distributed::clock::CommClock;
use crate::distributed::{ComputeGate, LocalOptions, backend_of, on_cluster};
use crate::error::{DistError, TrainError};
use crate::method::Sampling;
use crate::report::{GraphSize, Report, SplitSizes};
use crate::train_loop::EpochObserver;

/// Trains `method` with ADGraph's plan at `hops` hops on `config.distributed`'s workers and
/// backend (in-process workers for a `Source::Given` dataset). Returns the report on rank 0,
/// `None` on the other ranks of an MPI job.
pub(crate) fn run(
    method: &str,
    hops: usize,
    sampling: &Sampling,
    config: &TrainConfig,
    source: Source<'_>,
    options: LocalOptions,
    observer: &mut dyn EpochObserver,
) -> Result<Option<Report>, TrainError> {
    let backend = backend_of(source, config);
    let shared = match backend {
        Backend::Local => Some(source.dataset(config, observer.shows_progress())?),
        Backend::Mpi => None,
    };
    let gate = ComputeGate::default();
    let gate = options.serialize_compute.then_some(&gate);
    let dist = &config.distributed;
    on_cluster(config, backend, observer, |comm, observer| {
        let own;
        let whole: Option<&Dataset> = match (&shared, comm.rank()) {
            (_, 1..) => None,
            (Some(dataset), 0) => Some(dataset),
            (None, 0) => {
                own = source.dataset(config, observer.shows_progress())?;
                Some(&own)
            }
        };
        let clock = CommClock::new(gate);
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
        let part = plan::ship(comm, &clock, parts)?;
        let setup = comm.ledger_since(mark);
        let setup = clock.call(|| comm.gather_ledger(0, &setup)).map_err(DistError::from)?;
        let subgraph = Subgraph { dataset: &part.dataset, keys: &part.keys, degrees: part.degrees() };
        let trainer = BatchTrainer::on_subgraph(config, sampling, subgraph, comm.size())?;
        let (rank, batch_size, seed) = (comm.rank(), sampling.batch_size, config.seed);
        let part_ref = &part;
        let steps = Box::new(move |epoch| Ok(part_ref.steps(rank, batch_size, seed, epoch)));
        let mut extra = json!({
            "steps_per_epoch": part.steps(rank, batch_size, seed, 1).len(),
            "batch_size_per_worker": batch_size,
        });
        if let (Some((_, Value::Object(figures))), Some(setup), Value::Object(fields)) = (&head, &setup, &mut extra) {
            fields.extend(figures.clone());
            fields.insert("setup_bytes".into(), json!(setup.phase_totals(plan::SETUP).bytes()));
            fields.insert("setup_modeled_s".into(), json!(cost::model(comm.topology(), setup).total_s));
        }
        let eval = whole.map(FullGraph::of);
        let hooks = Box::new(AllReduce { comm, clock: &clock });
        let mut worker = Worker::new(comm, &clock, trainer, steps, eval, extra, hooks);
        let fingerprint = fingerprint_ids(&part.keys, part.dataset.graph.fingerprint());
        let id = RunIdentity { method, config, rank: comm.rank(), world: comm.size(), fingerprint };
        let outcome = worker.train(&id, observer)?;
        let (Some(dataset), Some((summary, _))) = (whole, head) else {
            return Ok(None);
        };
        let mut final_ = outcome.final_;
        if let Some(Value::Object(fields)) = &mut final_.method {
            fields.insert("backend".into(), json!(backend.as_str()));
        }
        Ok(Some(Report {
            dataset: dataset.name.clone(),
            model: config.model.as_str().to_string(),
            method: method.to_string(),
            cut: CutKind::EdgeCut.to_string(),
            workers: comm.size(),
            hosts: comm.topology().hosts(),
            seed: config.seed,
            config: config.clone(),
            split_sizes: SplitSizes::of(&dataset.splits),
            graph: GraphSize::of(&dataset.graph),
            partition: Some(summary),
            epochs: outcome.epochs,
            final_,
            trained: outcome.trained,
        }))
    })
}
