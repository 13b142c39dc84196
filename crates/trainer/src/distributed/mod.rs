//! The distributed runner: every method whose data plan cuts the structure runs here, with its
//! parts ([`crate::method::Parts`]) plugged in. The graph is partitioned (edge-cut or
//! vertex-cut), every worker trains the same model on its part, and the per-layer exchange
//! moves rows through the method's codec stack; with the exact stack the result equals
//! single-process training (the correctness contract in `docs/ARCHITECTURE.md`).
//!
//! - Edge-cut: before each aggregation a worker pulls the rows of its halo vertices from their
//!   primaries and, in backward, sends their gradient rows back ([`EdgeCutExchange`]); with
//!   `overlap` both calls are split and the layers compute meanwhile.
//! - Vertex-cut: replicas aggregate over their own edges; mirrors send partial sums to the
//!   primary, which scatters the total back, forward and backward ([`VertexCutExchange`]).
//! - Parameters: gradients are all-reduced (summed, bit-identical on every rank) and every
//!   worker applies the same Adam step; the loss is summed over each worker's primary training
//!   vertices, all-reduced and divided by the global training-set size.
//! - Evaluation goes around the codecs (exact, their state untouched) unless `lossy-eval`.
//!
//! Rank 0 loads and partitions the dataset and hands out one share per worker, cutting and
//! sending one before the next (`setup`), then drops the dataset; a worker then holds only its
//! part and its copies. With a part folder (`--partition-book DIR` holding `parts.json`) no rank
//! loads the dataset: every rank reads its own part (`setup::PartFolder`), the same share. Under the halo feature cache ([`crate::method::HaloFeatures::Cached`])
//! every worker then fetches its halo rows' input features from their owners once
//! (`setup/halo-features`, in `final.method.halo_cache`), and layer 0 exchanges nothing. Per epoch the report carries the step's
//! traffic merged over all ranks (`bytes_intra`, `bytes_inter`, `messages`, `bytes_by_phase`,
//! `modeled_comm_s` from the link cost model), `compute_s` = the slowest worker's time outside
//! communicator calls (a device worker's: its GPU time outside exchange calls, from CUDA
//! events), `modeled_epoch_s` from the harness's modeled timeline, and under `method`: every worker's
//! compute time, the codec stats and the method hook's fields. `final.method` holds the codec
//! stack, the topology, each worker's share size and peak memory.
//!
//! The workers run on the cluster harness (`crate::harness`): in-process threads (the
//! default) or MPI processes (feature `mpi`; `mpirun -np P halo train ... --backend mpi`).
//! Each computes with a `compute::PartModel`: the CPU model, or under `device = "cuda"` a
//! model on its GPU (`on_device`; worker `i` on GPU `i mod G`, `harness::placement`), with the
//! same exchange and collectives, so the network ledger is the CPU run's.
//!
//! [`EdgeCutExchange`]: gnn_core::exchange::edge_cut::EdgeCutExchange
//! [`VertexCutExchange`]: gnn_core::exchange::vertex_cut::VertexCutExchange

mod budget;
mod compute;
mod on_device;
mod param_server;
mod setup;
mod worker;

use gnn_core::Model;
use graph_partition::Dataset;
use graph_partition::book::CutKind;
use graph_partition::partition::PartitionConfig;
use serde_json::json;

use crate::checkpoint::fingerprint_part;
use crate::config::{Device, TrainConfig};
use crate::error::{DistError, TrainError};
use crate::harness::{Cluster, Described, Rank, RankData};
use crate::memory::Limit;
use crate::memory::estimate::Estimate;
use crate::method::{HaloFeatures, Parts};
use crate::report::Report;
use crate::train_loop::{EpochObserver, LoopOptions, train_loop_with};
use compute::{OnPart, PartModel};
use setup::WorkerShare;
use worker::Worker;

/// Everything a worker needs besides what the harness hands it.
#[derive(Clone, Copy)]
struct Job<'a> {
    parts: &'a Parts,
    cut: CutKind,
    /// Where each rank gets its share.
    input: &'a Input<'a>,
    /// The memory ceiling, read once for every worker.
    limit: Option<Limit>,
}

/// Where the workers' shares come from.
enum Input<'a> {
    /// Rank 0 gets the dataset, partitions it (or reads a book) and hands the shares out.
    Scatter(RankData<'a>),
    /// Every rank reads its own part of a part folder.
    Parts(setup::PartFolder),
}

/// Trains `parts` (whose data plan is `cut`) on `cluster`, with its configuration's
/// partitioner. Returns the report on rank 0 and `None` on the other ranks of an MPI job (rank
/// 0 reports for all). `observer` sees every epoch on rank 0.
pub(crate) fn run(
    cluster: &Cluster<'_>,
    parts: &Parts,
    cut: CutKind,
    observer: &mut dyn EpochObserver,
) -> Result<Option<Report>, TrainError> {
    let config = cluster.config();
    let limit = Limit::of(&config.memory);
    let input = match setup::PartFolder::of(config, cluster.source())? {
        Some(folder) => Input::Parts(folder),
        // In-process workers: check the job against the dataset before starting a thread per
        // worker (too many workers would otherwise all start, and all fail alike).
        None => Input::Scatter(RankData::handed_to_root(cluster, observer.shows_progress(), |dataset| {
            check_workers(config, cut, dataset)?;
            budget::before_partitioning(config, cut, dataset, config.distributed.workers, limit)
        })?),
    };
    let job = Job { parts, cut, input: &input, limit };
    cluster.run(observer, |rank, observer| run_worker(rank, job, observer))
}

/// Fails when `config`'s workers cannot partition `dataset` (more parts than vertices, hosts
/// that do not divide the workers).
fn check_workers(config: &TrainConfig, cut: CutKind, dataset: &Dataset) -> Result<(), DistError> {
    let dist = &config.distributed;
    let algorithm = dist.algorithm_for(cut);
    let pconfig = PartitionConfig { hosts: dist.hosts, ..PartitionConfig::new(algorithm, dist.workers) };
    pconfig.check(dataset.num_nodes()).map(drop).map_err(|source| DistError::Partition { algorithm, source })
}

/// What rank 0 alone knows after setup: the report's description of the data, and the setup
/// phase's memory where it held the dataset.
type RootSetup = (Described, Option<Estimate>);

/// Rank `rank`'s share from a streamed scatter: rank 0 gets the dataset from `data`,
/// partitions it (or reads a book), hands the shares out and drops the dataset; with the
/// report's description of the data and its setup memory on rank 0.
fn scatter(
    rank: &Rank<'_>,
    job: Job<'_>,
    data: &RankData<'_>,
    observer: &mut dyn EpochObserver,
) -> Result<(Option<RootSetup>, WorkerShare), TrainError> {
    let (comm, clock, config) = (rank.comm, &rank.clock, rank.config());
    let backend = rank.backend();
    if comm.rank() != 0 {
        return Ok((None, setup::receive(comm, clock)?));
    }
    let dataset = data.get(observer.shows_progress())?;
    if !backend.in_process() {
        budget::before_partitioning(config, job.cut, &dataset, 1, job.limit)?;
    }
    let prepared = setup::prepare(&dataset, job.cut, &config.distributed, comm.size(), config.seed)?;
    let (share, held) = setup::hand_out(comm, clock, &dataset, prepared.plan)?;
    // In process every worker keeps its share; an MPI rank 0 keeps its own.
    let kept = if backend.in_process() { held } else { vec![share.held_bytes()] };
    let setup_memory = budget::setup_phase(config, job.cut, &dataset, &kept);
    // An owned dataset is dropped here, before training: rank 0 keeps only its share.
    drop(dataset);
    Ok((Some((prepared.described, Some(setup_memory))), share))
}

/// Everything one rank does: get its share, train in lock step with the others, and (rank 0)
/// assemble the report.
fn run_worker(rank: &Rank<'_>, job: Job<'_>, observer: &mut dyn EpochObserver) -> Result<Option<Report>, TrainError> {
    let (comm, clock, config) = (rank.comm, &rank.clock, rank.config());
    let backend = rank.backend();
    let cached = job.parts.halo_features == HaloFeatures::Cached;
    let (root, mut share) = match job.input {
        Input::Parts(folder) => {
            let (share, described) = folder.open(comm, job.cut, config, cached)?;
            ((comm.rank() == 0).then_some((described, None)), share)
        }
        Input::Scatter(data) => scatter(rank, job, data, observer)?,
    };
    // The halo feature cache: one fetch before training (and before the memory check, which
    // counts the fetched rows among the share's), unless the share holds them (a part folder's).
    let halo_fetch = match cached && matches!(job.input, Input::Scatter(_)) {
        false => None,
        true => {
            let mark = comm.ledger_mark();
            share.fetch_halo_features(comm, clock)?;
            clock.call(|| comm.gather_ledger(0, &comm.ledger_since(mark))).map_err(DistError::from)?
        }
    };
    let (root, setup_memory) = match root {
        Some((described, setup_memory)) => (Some(described), setup_memory),
        None => (None, None),
    };
    let in_process = backend.in_process();
    let memory =
        budget::before_training(comm, clock, config, job.cut, job.parts, &share, setup_memory, job.limit, in_process)?;
    // Where this worker computes: the CPU, or its GPU (`on_device`).
    let gpu = match config.device {
        Device::Cpu => None,
        Device::Cuda(_) => Some(on_device::open(rank, &share, job.parts.halo_features)?),
    };
    let mut worker = Worker::new(comm, clock, &share, job.parts, job.cut, config, |part| {
        // Every worker's model starts from the seed's parameters, on whichever backend.
        let host = Model::new(config.model_config(share.features.ncols(), share.num_classes))?;
        match &gpu {
            None => Ok(Box::new(OnPart::new(host, part)?) as Box<dyn PartModel + '_>),
            Some(gpu) => on_device::model(gpu, &host, part),
        }
    })?;
    let checkpoints = rank.checkpoints(fingerprint_part(&share.part))?;
    let mut outcome = train_loop_with(&mut worker, LoopOptions::of(config), observer, checkpoints)?;
    let codec = worker.codec_name();
    drop(worker);
    if let Some(gpu) = &gpu {
        outcome.final_.device = Some(gpu.summary()?);
    }

    // Every worker's share and memory, in rank order.
    const FIELDS: usize = 5;
    let mut table = vec![0.0f64; comm.size() * FIELDS];
    let mine = [
        share.part.num_primary() as f64,
        share.part.num_copies() as f64,
        share.part.num_edges() as f64,
        share.held_bytes() as f64,
        crate::memory::peak_rss_bytes().unwrap_or(0) as f64,
    ];
    table[comm.rank() * FIELDS..][..FIELDS].copy_from_slice(&mine);
    clock.call(|| comm.all_reduce_sum_f64("memory", &mut table)).map_err(DistError::from)?;
    let Some(described) = root else {
        return Ok(None);
    };
    let topology = comm.topology();
    let workers: Vec<_> = table
        .chunks_exact(FIELDS)
        .enumerate()
        .map(|(rank, w)| {
            let mut worker = json!({
                "rank": rank,
                "host": topology.host_of(rank),
                "primaries": w[0] as u64,
                "copies": w[1] as u64,
                "edges": w[2] as u64,
                "held_bytes": w[3] as u64,
            });
            // In-process workers share one process, whose peak is `final.peak_rss_bytes`;
            // `held_bytes` is the per-worker figure there.
            if !backend.in_process() {
                worker["peak_rss_bytes"] = json!(w[4] as u64);
            }
            worker
        })
        .collect();
    let mut method = outcome.final_.method.take().unwrap_or_else(|| json!({}));
    method["codec"] = json!(codec);
    method["topology"] = json!(config.distributed.topology.as_str());
    method["bandwidth_scale"] = json!(config.distributed.bandwidth_scale);
    method["cost_model"] = json!(comm_hierarchy::cost::MODEL);
    method["overlap"] = json!(config.distributed.overlap);
    method["held_bytes_max"] = json!(table.chunks_exact(FIELDS).map(|w| w[3] as u64).max());
    if let Some(fetch) = halo_fetch {
        method["halo_cache"] = json!({
            "bytes": fetch.phase_totals(setup::HALO_FEATURES).bytes(),
            "modeled_s": comm_hierarchy::cost::model(topology, &fetch).total_s,
        });
    }
    method["workers"] = json!(workers);
    outcome.final_.method = Some(method);
    outcome.final_.memory = Some(memory);
    Ok(Some(rank.report(described, outcome)))
}
