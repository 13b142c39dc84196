//! A run on a cluster of workers: in-process threads (the local backend) or this process's rank
//! of an MPI job. The harness chooses the backend, holds the [`ComputeGate`] the workers share,
//! starts them, and hands each a [`Rank`]: its communicator and clock, its checkpoints and the
//! report. A failing worker ends the whole run with an error naming its rank and the last epoch
//! it finished; no worker waits forever.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc;

use comm_hierarchy::fault::Fault;
use comm_hierarchy::{ClusterOptions, Communicator, LocalCluster, Topology};
use serde_json::json;

use super::clock::{CommClock, ComputeGate};
use super::report::{self, Described, Workers};
use crate::checkpoint::{Agreement, Checkpoints, RunIdentity};
use crate::config::{Backend, TrainConfig};
use crate::data::Source;
use crate::error::{DistError, TrainError};
use crate::report::{Best, EpochRecord, Report};
use crate::train_loop::{EpochObserver, LoopOutcome};

/// Options of in-process runs that matter for measurements only.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct LocalOptions {
    /// Let one worker compute at a time (the compute gate), so each worker's `compute_s` is
    /// what it takes with the whole machine, as if every worker had a machine of its own.
    pub serialize_compute: bool,
}

/// Where the workers of a run on `source` go: an in-memory dataset always runs on in-process
/// workers (NCCL's, where configured); a loaded one on the configured backend.
pub(crate) fn backend_of(source: Source<'_>, config: &TrainConfig) -> Backend {
    match (source, config.distributed.backend) {
        (Source::Given(_), backend) if backend.in_process() => backend,
        // A dataset in memory stays in this process: its workers become threads.
        (Source::Given(_), Backend::MpiNccl) => Backend::Nccl,
        (Source::Given(_), _) => Backend::Local,
        (Source::Load(..), backend) => backend,
    }
}

/// A run of one method on `config.distributed`'s workers, hosts and backend.
pub(crate) struct Cluster<'a> {
    method: &'a str,
    config: &'a TrainConfig,
    /// Where the dataset comes from ([`super::RankData`] says how each rank gets it).
    source: Source<'a>,
    backend: Backend,
    /// Shared by the workers when they take turns to compute.
    gate: Option<ComputeGate>,
}

impl<'a> Cluster<'a> {
    /// A run of `method` on `source`, its workers on `backend` ([`backend_of`]), taking turns to
    /// compute where `serialize` says so.
    pub(crate) fn new(
        method: &'a str,
        config: &'a TrainConfig,
        source: Source<'a>,
        backend: Backend,
        serialize: bool,
    ) -> Self {
        let gate = serialize.then(ComputeGate::default);
        Self { method, config, source, backend, gate }
    }

    pub(crate) fn config(&self) -> &'a TrainConfig {
        self.config
    }

    pub(crate) fn source(&self) -> Source<'a> {
        self.source
    }

    pub(crate) fn backend(&self) -> Backend {
        self.backend
    }

    /// Runs `work` on every worker: one thread per worker with the local backend (rank 0's
    /// epochs reach `observer` on the calling thread), or this process's rank of an MPI job.
    /// Returns rank 0's report, `None` on the other MPI ranks.
    pub(crate) fn run<F>(&self, observer: &mut dyn EpochObserver, work: F) -> Result<Option<Report>, TrainError>
    where
        F: Fn(&Rank<'_>, &mut dyn EpochObserver) -> Result<Option<Report>, TrainError> + Sync,
    {
        let work = |comm: &dyn Communicator, observer: &mut dyn EpochObserver| {
            let placed = placed(self.config, comm.topology());
            let config = placed.as_ref().unwrap_or(self.config);
            let rank = Rank { comm, clock: CommClock::new(self.gate.as_ref()), cluster: self, config };
            work(&rank, observer)
        };
        match self.backend.in_process() {
            true => run_local(self.config, observer, work).map(Some),
            false => run_mpi(self.config, observer, work),
        }
    }
}

/// `config` with the hosts the workers run on, where they differ from its own: an MPI job's
/// hosts are where its ranks run ([`comm_hierarchy::mpi_backend::MpiOptions::hosts`]).
fn placed(config: &TrainConfig, topology: &Topology) -> Option<TrainConfig> {
    (topology.hosts() != config.distributed.hosts).then(|| {
        let mut placed = config.clone();
        placed.distributed.hosts = topology.hosts();
        placed
    })
}

/// One worker of a [`Cluster`], as the harness hands it to the runner.
pub(crate) struct Rank<'a> {
    pub comm: &'a dyn Communicator,
    /// Holds the worker's turn at the gate, if any, until the worker is done.
    pub clock: CommClock<'a>,
    cluster: &'a Cluster<'a>,
    /// The run's configuration, its hosts those the workers run on.
    config: &'a TrainConfig,
}

impl<'a> Rank<'a> {
    pub(crate) fn config(&self) -> &'a TrainConfig {
        self.config
    }

    pub(crate) fn backend(&self) -> Backend {
        self.cluster.backend
    }

    /// This rank's checkpoints, agreed on over the cluster, for training on data whose hash is
    /// `fingerprint`.
    pub(crate) fn checkpoints(&self, fingerprint: u64) -> Result<Checkpoints<'a>, TrainError> {
        let id = RunIdentity {
            method: self.cluster.method,
            config: self.config,
            rank: self.comm.rank(),
            world: self.comm.size(),
            fingerprint,
        };
        Ok(Checkpoints::for_run(&id, Agreement::Cluster(self.comm))?)
    }

    /// The run's report (rank 0's), on `data`, that ended with `outcome`; `final.method` gains
    /// the backend the workers ran on.
    pub(crate) fn report(&self, data: Described, mut outcome: LoopOutcome) -> Report {
        outcome.final_.method.get_or_insert_with(|| json!({}))["backend"] = json!(self.cluster.backend.as_str());
        let workers = Workers { count: self.comm.size(), hosts: self.comm.topology().hosts() };
        report::build(self.cluster.method, self.config, data, workers, outcome)
    }
}

/// One thread per worker; rank 0 forwards its epochs to `observer` on the calling thread.
fn run_local<F>(config: &TrainConfig, observer: &mut dyn EpochObserver, work: F) -> Result<Report, TrainError>
where
    F: Fn(&dyn Communicator, &mut dyn EpochObserver) -> Result<Option<Report>, TrainError> + Sync,
{
    let dist = &config.distributed;
    let topology = Topology::for_workers(dist.workers, dist.hosts, dist.links()?).map_err(DistError::from)?;
    let options = ClusterOptions { timeout: config.reliability.timeout(), fault: Fault::from_env()? };
    let (sender, epochs) = mpsc::channel::<(EpochRecord, Best)>();
    let work = &work;
    // Set once the observer asks to stop: every worker then ends before its next epoch, and the
    // first to end fails the others' waits on it, so none is left waiting.
    let stop = AtomicBool::new(false);
    let stop = &stop;
    let outcome = std::thread::scope(|scope| {
        let cluster = scope.spawn(move || {
            LocalCluster::run_with_options(&topology, options, |comm| {
                let mut observer = Forward { sender: (comm.rank() == 0).then(|| sender.clone()), stop };
                tracked(comm, &mut observer, work, None)
            })
        });
        // Ends when the cluster thread drops the last sender, i.e. when every worker is done.
        for (record, best) in epochs {
            observer.on_epoch(&record, &best);
            if observer.stop_requested() {
                stop.store(true, Ordering::Relaxed);
            }
        }
        cluster.join().unwrap_or_else(|panic| std::panic::resume_unwind(panic))
    });
    let reports = outcome.map_err(DistError::from)?;
    Ok(reports.into_iter().next().flatten().expect("rank 0 always returns the report"))
}

/// Runs `work` on the worker of `comm`, counting the epochs it finishes, so that its failure
/// says how far it got. `publish` is also told each stage (an MPI rank's, for what it says when
/// it is told to stop while it waits: `comm_hierarchy::waiting`).
fn tracked<F>(
    comm: &dyn Communicator,
    observer: &mut dyn EpochObserver,
    work: &F,
    publish: Option<fn(&str)>,
) -> Result<Option<Report>, WithCauses>
where
    F: Fn(&dyn Communicator, &mut dyn EpochObserver) -> Result<Option<Report>, TrainError>,
{
    let mut tracked = Tracked { inner: observer, done: 0, publish };
    tracked.publish();
    work(comm, &mut tracked).map_err(|error| WithCauses { error: Box::new(error), stage: stage(tracked.done) })
}

/// How far a worker got: `before any epoch finished`, or `after epoch N`.
fn stage(done: usize) -> String {
    match done {
        0 => "before any epoch finished".to_owned(),
        n => format!("after epoch {n}"),
    }
}

/// An observer that counts the epochs it passes on.
struct Tracked<'o> {
    inner: &'o mut dyn EpochObserver,
    done: usize,
    publish: Option<fn(&str)>,
}

impl Tracked<'_> {
    fn publish(&self) {
        if let Some(publish) = self.publish {
            publish(&stage(self.done));
        }
    }
}

impl EpochObserver for Tracked<'_> {
    fn on_epoch(&mut self, record: &EpochRecord, best: &Best) {
        self.done = record.epoch;
        self.publish();
        self.inner.on_epoch(record, best);
    }

    fn shows_progress(&self) -> bool {
        self.inner.shows_progress()
    }

    fn stop_requested(&self) -> bool {
        self.inner.stop_requested()
    }
}

/// A worker's error as the run reports it: a failure crosses threads (or processes) as text,
/// so the text carries every cause the message does not already quote (an exchange's
/// "communication failed" and the communicator's reason for it), and how far the worker got.
struct WithCauses {
    error: Box<TrainError>,
    stage: String,
}

impl std::fmt::Display for WithCauses {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let mut previous = self.error.to_string();
        f.write_str(&previous)?;
        let mut cause = std::error::Error::source(&*self.error);
        while let Some(err) = cause {
            let message = err.to_string();
            if !previous.contains(&message) {
                write!(f, ": {message}")?;
            }
            previous = message;
            cause = err.source();
        }
        write!(f, "; {}", self.stage)
    }
}

/// A worker's observer: rank 0 hands its epochs to the observer on the thread that started the
/// run (`sender`); every worker stops when that observer asked for it (`stop`).
struct Forward<'s> {
    sender: Option<mpsc::Sender<(EpochRecord, Best)>>,
    stop: &'s AtomicBool,
}

impl EpochObserver for Forward<'_> {
    fn on_epoch(&mut self, record: &EpochRecord, best: &Best) {
        if let Some(sender) = &self.sender {
            // The receiver lives until the cluster finishes; a send cannot fail before that.
            let _ = sender.send((record.clone(), *best));
        }
    }

    fn stop_requested(&self) -> bool {
        self.stop.load(Ordering::Relaxed)
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
        // The default (one host) takes the hosts the ranks run on; a larger number is checked
        // against them, or posed on one machine.
        hosts: (dist.hosts > 1).then_some(dist.hosts),
        links: dist.links()?,
        timeout: config.reliability.timeout(),
        fault: Fault::from_env()?,
    };
    let outcome = run(&options, |comm| {
        let observer: &mut dyn EpochObserver = if comm.rank() == 0 { observer } else { &mut () };
        tracked(&comm, observer, &work, Some(comm_hierarchy::waiting::set_stage))
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
