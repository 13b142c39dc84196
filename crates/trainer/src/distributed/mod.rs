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
//! part and its copies. Under the halo feature cache ([`crate::method::HaloFeatures::Cached`])
//! every worker then fetches its halo rows' input features from their owners once
//! (`setup/halo-features`, in `final.method.halo_cache`), and layer 0 exchanges nothing. Per epoch the report carries the step's
//! traffic merged over all ranks (`bytes_intra`, `bytes_inter`, `messages`, `bytes_by_phase`,
//! `modeled_comm_s` from the link cost model), `compute_s` = the slowest worker's time outside
//! communicator calls, `modeled_epoch_s` from `timeline`, and under `method`: every worker's
//! compute time, the codec stats and the method hook's fields. `final.method` holds the codec
//! stack, the topology, each worker's share size and peak memory.
//!
//! Backends: in-process threads ([`LocalCluster`], the default) or MPI processes (feature
//! `mpi`; `mpirun -np P halo train ... --backend mpi`). A failing worker ends the whole run with
//! an error naming its rank; no worker waits forever.
//!
//! [`EdgeCutExchange`]: gnn_core::exchange::edge_cut::EdgeCutExchange
//! [`VertexCutExchange`]: gnn_core::exchange::vertex_cut::VertexCutExchange

mod budget;
pub(crate) mod clock;
mod param_server;
mod setup;
mod timeline;
mod worker;

use comm_hierarchy::fault::Fault;
use comm_hierarchy::{ClusterOptions, Communicator, LocalCluster, Topology};
use graph_partition::book::CutKind;
use serde_json::json;
use std::sync::{Mutex, mpsc};

use graph_partition::Dataset;
use graph_partition::partition::PartitionConfig;

pub use clock::ComputeGate;

use crate::checkpoint::{Agreement, Checkpoints, RunIdentity, fingerprint_part};
use crate::config::{Backend, TrainConfig};
use crate::data::Source;
use crate::error::{DistError, TrainError};
use crate::memory::Limit;
use crate::method::{HaloFeatures, Parts};
use crate::report::{Best, EpochRecord, Report};
use crate::train_loop::{EpochObserver, LoopOptions, train_loop_with};
use clock::CommClock;
use worker::Worker;

/// Options of in-process runs that matter for measurements only.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct LocalOptions {
    /// Let one worker compute at a time ([`ComputeGate`]), so each worker's `compute_s` is
    /// what it takes with the whole machine, as if every worker had a machine of its own.
    pub serialize_compute: bool,
}

/// Where rank 0 gets the dataset.
#[derive(Clone, Copy)]
enum Root<'a> {
    /// As the caller gave it.
    Source(Source<'a>),
    /// Loaded by the caller before the workers started (to check the job against it first);
    /// rank 0 takes it and drops it once the shares are sent.
    Taken(&'a Mutex<Option<Dataset>>),
}

/// Everything a worker needs besides its communicator.
#[derive(Clone, Copy)]
struct Job<'a> {
    /// The method's name, for the report.
    method: &'a str,
    parts: &'a Parts,
    cut: CutKind,
    config: &'a TrainConfig,
    root: Root<'a>,
    gate: Option<&'a ComputeGate>,
    /// Where the workers actually run (for the report).
    backend: Backend,
    /// The memory ceiling, read once for every worker.
    limit: Option<Limit>,
}

/// Trains `parts` (whose data plan is `cut`) as `config` says with `config.distributed`'s
/// partitioner, workers, hosts and backend. Returns the report on rank 0 and `None` on the
/// other ranks of an MPI job (rank 0 reports for all). `observer` sees every epoch on rank 0.
/// A `Source::Given` dataset always runs on in-process workers.
pub(crate) fn run(
    method: &str,
    parts: &Parts,
    cut: CutKind,
    config: &TrainConfig,
    source: Source<'_>,
    options: LocalOptions,
    observer: &mut dyn EpochObserver,
) -> Result<Option<Report>, TrainError> {
    let backend = backend_of(source, config);
    let gate = ComputeGate::default();
    let gate = options.serialize_compute.then_some(&gate);
    let limit = Limit::of(&config.memory);
    let job = Job { method, parts, cut, config, root: Root::Source(source), gate, backend, limit };
    let workers = config.distributed.workers;
    // In-process workers: check the job against the dataset before starting a thread per
    // worker (too many workers would otherwise all start, and all fail alike).
    let holder: Mutex<Option<Dataset>>;
    let job = match (backend, source) {
        (Backend::Local, Source::Given(dataset)) => {
            check_workers(config, cut, dataset)?;
            budget::before_partitioning(config, cut, dataset, workers, limit)?;
            job
        }
        (Backend::Local, Source::Load(..)) => {
            let dataset = source.dataset(config, observer.shows_progress())?.into_owned();
            check_workers(config, cut, &dataset)?;
            budget::before_partitioning(config, cut, &dataset, workers, limit)?;
            holder = Mutex::new(Some(dataset));
            Job { root: Root::Taken(&holder), ..job }
        }
        (Backend::Mpi, _) => job,
    };
    on_cluster(config, backend, observer, |comm, observer| run_worker(comm, job, observer))
}

/// Where the workers of a run on `source` go: an in-memory dataset always runs on in-process
/// workers; a loaded one on the configured backend.
pub(crate) fn backend_of(source: Source<'_>, config: &TrainConfig) -> Backend {
    match source {
        Source::Given(_) => Backend::Local,
        Source::Load(..) => config.distributed.backend,
    }
}

/// Runs `work` on every worker of `config.distributed`'s cluster: one thread per worker with
/// the local backend (rank 0's epochs reach `observer` on the calling thread), or this
/// process's rank of an MPI job. Returns rank 0's report, `None` on the other MPI ranks.
pub(crate) fn on_cluster<F>(
    config: &TrainConfig,
    backend: Backend,
    observer: &mut dyn EpochObserver,
    work: F,
) -> Result<Option<Report>, TrainError>
where
    F: Fn(&dyn Communicator, &mut dyn EpochObserver) -> Result<Option<Report>, TrainError> + Sync,
{
    match backend {
        Backend::Local => run_local(config, observer, work).map(Some),
        Backend::Mpi => run_mpi(config, observer, work),
    }
}

/// Fails when `config`'s workers cannot partition `dataset` (more parts than vertices, hosts
/// that do not divide the workers).
fn check_workers(config: &TrainConfig, cut: CutKind, dataset: &Dataset) -> Result<(), DistError> {
    let dist = &config.distributed;
    let algorithm = dist.algorithm_for(cut);
    let pconfig = PartitionConfig { hosts: dist.hosts, ..PartitionConfig::new(algorithm, dist.workers) };
    pconfig.check(dataset.num_nodes()).map(drop).map_err(|source| DistError::Partition { algorithm, source })
}

/// One thread per worker; rank 0 forwards its epochs to `observer` on the calling thread.
fn run_local<F>(config: &TrainConfig, observer: &mut dyn EpochObserver, work: F) -> Result<Report, TrainError>
where
    F: Fn(&dyn Communicator, &mut dyn EpochObserver) -> Result<Option<Report>, TrainError> + Sync,
{
    let dist = &config.distributed;
    let topology = Topology::for_workers(dist.workers, dist.hosts, dist.links()).map_err(DistError::from)?;
    let options = ClusterOptions { timeout: config.reliability.timeout(), fault: Fault::from_env()? };
    let (sender, epochs) = mpsc::channel::<(EpochRecord, Best)>();
    let work = &work;
    let outcome = std::thread::scope(|scope| {
        let cluster = scope.spawn(move || {
            LocalCluster::run_with_options(&topology, options, |comm| {
                let mut forward = Forward(sender.clone());
                let observer: &mut dyn EpochObserver = if comm.rank() == 0 { &mut forward } else { &mut () };
                work(comm, observer).map_err(WithCauses)
            })
        });
        // Ends when the cluster thread drops the last sender, i.e. when every worker is done.
        for (record, best) in epochs {
            observer.on_epoch(&record, &best);
        }
        cluster.join().unwrap_or_else(|panic| std::panic::resume_unwind(panic))
    });
    let reports = outcome.map_err(DistError::from)?;
    Ok(reports.into_iter().next().flatten().expect("rank 0 always returns the report"))
}

/// A worker's error as the run reports it: a failure crosses threads (or processes) as text,
/// so the text carries every cause the message does not already quote (an exchange's
/// "communication failed" and the communicator's reason for it).
struct WithCauses(TrainError);

impl std::fmt::Display for WithCauses {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let mut previous = self.0.to_string();
        f.write_str(&previous)?;
        let mut cause = std::error::Error::source(&self.0);
        while let Some(err) = cause {
            let message = err.to_string();
            if !previous.contains(&message) {
                write!(f, ": {message}")?;
            }
            previous = message;
            cause = err.source();
        }
        Ok(())
    }
}

/// Hands rank 0's epochs to the observer on the thread that started the run.
struct Forward(mpsc::Sender<(EpochRecord, Best)>);

impl EpochObserver for Forward {
    fn on_epoch(&mut self, record: &EpochRecord, best: &Best) {
        // The receiver lives until the cluster finishes; a send cannot fail before that.
        let _ = self.0.send((record.clone(), *best));
    }
}

#[cfg(feature = "mpi")]
fn run_mpi<F>(config: &TrainConfig, observer: &mut dyn EpochObserver, work: F) -> Result<Option<Report>, TrainError>
where
    F: Fn(&dyn Communicator, &mut dyn EpochObserver) -> Result<Option<Report>, TrainError> + Sync,
{
    use comm_hierarchy::mpi_backend::{MpiOptions, run};
    let dist = &config.distributed;
    let options = MpiOptions {
        hosts: Some(dist.hosts),
        links: dist.links(),
        timeout: config.reliability.timeout(),
        fault: comm_hierarchy::fault::Fault::from_env()?,
    };
    let outcome = run(&options, |comm| {
        let observer: &mut dyn EpochObserver = if comm.rank() == 0 { observer } else { &mut () };
        work(&comm, observer).map_err(WithCauses)
    });
    Ok(outcome.map_err(DistError::from)?)
}

#[cfg(not(feature = "mpi"))]
fn run_mpi<F>(_config: &TrainConfig, _observer: &mut dyn EpochObserver, _work: F) -> Result<Option<Report>, TrainError>
where
    F: Fn(&dyn Communicator, &mut dyn EpochObserver) -> Result<Option<Report>, TrainError> + Sync,
{
    Err(DistError::NoMpi.into())
}

/// Everything one rank does: get its share, train in lock step with the others, and (rank 0)
/// assemble the report.
fn run_worker(
    comm: &dyn Communicator,
    job: Job<'_>,
    observer: &mut dyn EpochObserver,
) -> Result<Option<Report>, TrainError> {
    let clock = CommClock::new(job.gate);
    let config = job.config;
    let (root, mut share) = if comm.rank() == 0 {
        let dataset = match job.root {
            Root::Source(source) => source.dataset(config, observer.shows_progress())?,
            Root::Taken(holder) => {
                let taken = holder.lock().unwrap_or_else(std::sync::PoisonError::into_inner).take();
                std::borrow::Cow::Owned(taken.expect("rank 0 takes the loaded dataset once"))
            }
        };
        if job.backend == Backend::Mpi {
            budget::before_partitioning(config, job.cut, &dataset, 1, job.limit)?;
        }
        let prepared = setup::prepare(&dataset, job.cut, &config.distributed, comm.size(), config.seed)?;
        let (share, held) = setup::hand_out(comm, &clock, &dataset, prepared.plan)?;
        // In process every worker keeps its share; an MPI rank 0 keeps its own.
        let kept = if job.backend == Backend::Local { held } else { vec![share.held_bytes()] };
        let setup_memory = budget::setup_phase(config, job.cut, &dataset, &kept);
        // An owned dataset is dropped here, before training: rank 0 keeps only its share.
        drop(dataset);
        (Some((prepared.described, setup_memory)), share)
    } else {
        (None, setup::receive(comm, &clock)?)
    };
    // The halo feature cache: one fetch before training (and before the memory check, which
    // counts the fetched rows among the share's).
    let halo_fetch = match job.parts.halo_features {
        HaloFeatures::Pulled => None,
        HaloFeatures::Cached => {
            let mark = comm.ledger_mark();
            share.fetch_halo_features(comm, &clock)?;
            clock.call(|| comm.gather_ledger(0, &comm.ledger_since(mark))).map_err(DistError::from)?
        }
    };
    let (root, setup_memory) = match root {
        Some((described, setup_memory)) => (Some(described), Some(setup_memory)),
        None => (None, None),
    };
    let in_process = job.backend == Backend::Local;
    let memory =
        budget::before_training(comm, &clock, config, job.cut, job.parts, &share, setup_memory, job.limit, in_process)?;
    let mut worker = Worker::new(comm, &clock, &share, job.parts, job.cut, config)?;
    let options = LoopOptions { epochs: config.epochs, patience: config.patience };
    let id = RunIdentity {
        method: job.method,
        config,
        rank: comm.rank(),
        world: comm.size(),
        fingerprint: fingerprint_part(&share.part),
    };
    let checkpoints = Checkpoints::for_run(&id, Agreement::Cluster(comm))?;
    let mut outcome = train_loop_with(&mut worker, options, observer, checkpoints)?;
    let codec = worker.codec_name();
    drop(worker);

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
            if job.backend == Backend::Mpi {
                worker["peak_rss_bytes"] = json!(w[4] as u64);
            }
            worker
        })
        .collect();
    let mut method = outcome.final_.method.take().unwrap_or_else(|| json!({}));
    method["backend"] = json!(job.backend.as_str());
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
    Ok(Some(Report {
        dataset: described.dataset,
        model: config.model.as_str().to_string(),
        method: job.method.to_string(),
        cut: job.cut.as_str().to_string(),
        workers: comm.size(),
        hosts: topology.hosts(),
        seed: config.seed,
        config: config.clone(),
        split_sizes: described.split_sizes,
        graph: described.graph,
        partition: Some(described.partition),
        epochs: outcome.epochs,
        final_: outcome.final_,
        trained: outcome.trained,
    }))
}
