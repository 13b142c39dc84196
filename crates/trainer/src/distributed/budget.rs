//! The memory checks of a distributed run: before partitioning from the dataset alone, and
//! before training from every worker's real share (`memory::estimate`).

use comm_hierarchy::Communicator;
use graph_partition::Dataset;
use graph_partition::book::CutKind;
use graph_partition::partition::Algorithm;

use super::setup::WorkerShare;
use crate::config::TrainConfig;
use crate::error::DistError;
use crate::error::TrainError;
use crate::harness::CommClock;
use crate::memory::estimate::{self, Estimate, Term};
use crate::memory::{Limit, MemoryReport};
use crate::method::{HaloFeatures, Parts};

const SUGGESTION: &str = "use fewer in-process workers (--workers), a lower --hidden, or MPI ranks spread over \
                          more machines (--backend mpi under mpirun)";

/// What to try when the estimate is over the ceiling: [`SUGGESTION`], and under a vertex-cut
/// whose replicas all compute, the masters computing alone (the same results on a fraction of
/// the rows; GCN and GraphSAGE).
fn suggestion(config: &TrainConfig, cut: CutKind) -> String {
    let d = &config.distributed;
    if cut == CutKind::VertexCut && !d.masters_only && config.model != gnn_core::ConvKind::Gat {
        format!("{SUGGESTION}; under a vertex-cut, --masters-only (method vanilla) computes on the masters alone")
    } else {
        SUGGESTION.to_string()
    }
}

/// Whether rank 0 runs METIS (its input is a copy of the graph).
fn runs_metis(config: &TrainConfig, cut: CutKind) -> bool {
    config.distributed.partition_book.is_none() && config.distributed.algorithm_for(cut) == Algorithm::Metis
}

/// Checks the estimate of a process holding `dataset` and `in_process` workers before
/// partitioning (halo rows unknown yet: a lower bound of the training phase).
pub(super) fn before_partitioning(
    config: &TrainConfig,
    cut: CutKind,
    dataset: &Dataset,
    in_process: usize,
    limit: Option<Limit>,
) -> Result<(), TrainError> {
    let phases = estimate::before_partitioning(config, dataset, runs_metis(config, cut), in_process)?;
    tracing::info!("estimated peak memory before partitioning:\n{}", phases.breakdown());
    if let Some(limit) = limit {
        limit.check(phases.peak(), "before partitioning", &phases.breakdown(), &suggestion(config, cut))?;
    }
    Ok(())
}

/// Rank 0's setup phase from the `held_bytes` of the shares this process keeps, computed before
/// the dataset is dropped.
pub(super) fn setup_phase(config: &TrainConfig, cut: CutKind, dataset: &Dataset, kept: &[u64]) -> Estimate {
    estimate::distributed(Some(dataset), runs_metis(config, cut), kept, &[]).setup
}

/// Every worker's estimate from its share, gathered on every rank by one all-reduce, checked
/// against the ceiling: the sum of the workers for in-process workers (one process holds them
/// all, and every worker decides alike), a rank's own under MPI.
#[allow(clippy::too_many_arguments)] // the worker's context, its share and what to check against.
pub(super) fn before_training(
    comm: &dyn Communicator,
    clock: &CommClock<'_>,
    config: &TrainConfig,
    cut: CutKind,
    parts: &Parts,
    share: &WorkerShare,
    setup: Option<Estimate>,
    limit: Option<Limit>,
    in_process: bool,
) -> Result<MemoryReport, TrainError> {
    let (in_dim, classes) = (share.features.ncols(), share.num_classes);
    let messages = parts.exchange.is_none().then_some(super::worker::MESSAGE_BYTES);
    let halo_held = parts.halo_features == HaloFeatures::Cached;
    let mine = estimate::worker(config, &share.part, cut, halo_held, in_dim, classes, share.held_bytes(), messages)?;
    let width = mine.terms.len();
    let mut table = vec![0.0f64; comm.size() * width];
    for (slot, term) in table[comm.rank() * width..][..width].iter_mut().zip(&mine.terms) {
        *slot = term.bytes as f64;
    }
    clock.call(|| comm.all_reduce_sum_f64("memory", &mut table)).map_err(DistError::from)?;
    let workers: Vec<Estimate> = table
        .chunks_exact(width)
        .map(|w| Estimate {
            terms: mine.terms.iter().zip(w).map(|(t, &b)| Term { name: t.name.clone(), bytes: b as u64 }).collect(),
        })
        .collect();
    let mut phases = if in_process {
        estimate::distributed(None, false, &[], &workers)
    } else {
        estimate::distributed(None, false, &[], std::slice::from_ref(&mine))
    };
    phases.per_worker = workers.iter().map(Estimate::total).collect();
    if let Some(setup) = setup {
        phases.setup = setup;
    }
    if comm.rank() == 0 {
        tracing::info!("estimated peak memory:\n{}", phases.breakdown());
    }
    if let Some(limit) = limit {
        let total = phases.training.total();
        limit.check(total, "before training", &phases.training.breakdown(), &suggestion(config, cut))?;
    }
    Ok(MemoryReport::distributed(phases, limit))
}

#[cfg(test)]
mod tests {
    use graph_partition::book::CutKind;

    use crate::{LocalOptions, TrainConfig};

    fn config(text: &str) -> (TrainConfig, graph_partition::Dataset) {
        let config = TrainConfig::from_toml_str(text, "test").unwrap();
        let dataset =
            crate::data::prepare_dataset(&config, std::path::Path::new("datasets"), &Default::default()).unwrap();
        (config, dataset)
    }

    #[test]
    fn a_vanilla_report_has_every_workers_estimate_and_both_phases() {
        let (mut config, dataset) = config("method = \"vanilla\"\nepochs = 1\n");
        config.distributed.workers = 3;
        let report = crate::run_on(&config, &dataset, LocalOptions::default(), &mut ()).unwrap();
        let memory = report.final_.memory.expect("distributed runs report the estimate");
        let per_worker = memory.per_worker.as_ref().unwrap();
        assert_eq!(per_worker.len(), 3);
        let training: u64 = memory.terms.iter().map(|t| t.bytes).sum();
        assert_eq!(training, per_worker.iter().sum::<u64>(), "in-process training is the workers' sum");
        let setup: u64 = memory.setup_terms.as_ref().unwrap().iter().map(|t| t.bytes).sum();
        assert_eq!(memory.estimate_bytes, setup.max(training));
        assert!(memory.terms.iter().any(|t| t.name == "exchange buffers" && t.bytes > 0), "{:?}", memory.terms);
    }

    #[test]
    fn a_ceiling_below_the_estimate_stops_the_run_before_training() {
        let (mut config, dataset) = config("method = \"vanilla\"\nepochs = 1\n[memory]\nmax-memory = 1024\n");
        config.distributed.workers = 2;
        let err = crate::run_on(&config, &dataset, LocalOptions::default(), &mut ()).unwrap_err().to_string();
        assert!(err.contains("before partitioning") && err.contains("--workers"), "{err}");
        assert!(!err.contains("--masters-only"), "an edge-cut computes its owned rows only: {err}");
        config.distributed.cut = CutKind::VertexCut;
        let err = crate::run_on(&config, &dataset, LocalOptions::default(), &mut ()).unwrap_err().to_string();
        assert!(err.contains("--masters-only"), "{err}");
    }
}
