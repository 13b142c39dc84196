//! The embedded backend: one thread per worker in this process, exchanging messages through
//! shared mailboxes. A worker that returns an error or panics is recorded as failed and every
//! blocked or later call of its peers fails at once with [`CommError::PeerFailed`].

use std::any::Any;
use std::collections::HashMap;
use std::fmt::Display;
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard, OnceLock, PoisonError};
use std::thread;
use std::time::{Duration, Instant};

use crate::endpoint::Endpoint;
use crate::error::{ClusterError, CommError, FailureKind, WorkerFailure};
use crate::fault::Fault;
use crate::topology::Topology;
use crate::transport::{Tag, Transport};

/// How long a call waits for a peer that neither sends nor fails before it gives up. Long
/// enough for a peer that is still computing (evaluation, a slow layer); a failed peer is
/// noticed at once, not after this.
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(60);

/// How a [`LocalCluster`] runs: the receive timeout, and a fault to inject
/// ([`crate::fault`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ClusterOptions {
    /// How long a call waits for a peer that neither sends nor fails.
    pub timeout: Duration,
    pub fault: Option<Fault>,
}

impl Default for ClusterOptions {
    fn default() -> Self {
        Self { timeout: DEFAULT_TIMEOUT, fault: None }
    }
}

/// The communicator a [`LocalCluster`] worker receives.
pub type LocalCommunicator = Endpoint<LocalTransport>;

/// Runs a closure on every worker of a topology, one thread each.
#[derive(Debug)]
pub struct LocalCluster;

impl LocalCluster {
    /// Runs `work` on every rank of `topology` and returns the results in rank order. If a
    /// worker returns `Err` or panics, its peers' calls fail fast and the run returns
    /// [`ClusterError::WorkerFailed`] naming it. Peers wait at most [`DEFAULT_TIMEOUT`] for a
    /// message.
    pub fn run<T, E, F>(topology: &Topology, work: F) -> Result<Vec<T>, ClusterError>
    where
        F: Fn(&LocalCommunicator) -> Result<T, E> + Sync,
        T: Send,
        E: Display,
    {
        Self::run_with_timeout(topology, DEFAULT_TIMEOUT, work)
    }

    /// [`LocalCluster::run`] with a chosen receive timeout.
    pub fn run_with_timeout<T, E, F>(topology: &Topology, timeout: Duration, work: F) -> Result<Vec<T>, ClusterError>
    where
        F: Fn(&LocalCommunicator) -> Result<T, E> + Sync,
        T: Send,
        E: Display,
    {
        Self::run_with_options(topology, ClusterOptions { timeout, fault: None }, work)
    }

    /// [`LocalCluster::run`] with a chosen receive timeout and an injected fault.
    pub fn run_with_options<T, E, F>(
        topology: &Topology,
        options: ClusterOptions,
        work: F,
    ) -> Result<Vec<T>, ClusterError>
    where
        F: Fn(&LocalCommunicator) -> Result<T, E> + Sync,
        T: Send,
        E: Display,
    {
        let ClusterOptions { timeout, fault } = options;
        let size = topology.workers();
        let fabric = Arc::new(Fabric::new(size));
        let outcomes: Vec<Result<T, WorkerFailure>> = thread::scope(|scope| {
            let mut handles = Vec::with_capacity(size);
            for rank in 0..size {
                let transport = LocalTransport { rank, fabric: Arc::clone(&fabric), timeout };
                let work = &work;
                let spawned = thread::Builder::new()
                    .name(format!("halo-rank-{rank}"))
                    .spawn_scoped(scope, move || run_worker(topology.clone(), transport, fault, work));
                match spawned {
                    Ok(handle) => handles.push(handle),
                    Err(e) => {
                        let reason = format!("cannot start its thread: {e}");
                        fabric.fail(WorkerFailure { rank, kind: FailureKind::Error, reason });
                        break;
                    }
                }
            }
            handles
                .into_iter()
                .enumerate()
                .map(|(rank, handle)| {
                    handle.join().unwrap_or_else(|payload| {
                        Err(WorkerFailure { rank, kind: FailureKind::Panic, reason: panic_message(payload.as_ref()) })
                    })
                })
                .collect()
        });
        if outcomes.len() < size {
            let rank = outcomes.len();
            let message = fabric.first_failure.get().map_or_else(String::new, |f| f.reason.clone());
            return Err(ClusterError::Spawn { rank, message });
        }
        let (ok, failed): (Vec<_>, Vec<_>) = outcomes.into_iter().partition(Result::is_ok);
        if failed.is_empty() {
            return Ok(ok.into_iter().filter_map(Result::ok).collect());
        }
        let mut failures: Vec<WorkerFailure> = failed.into_iter().filter_map(Result::err).collect();
        let first_rank = fabric.first_failure.get().map_or(failures[0].rank, |f| f.rank);
        let first_pos = failures.iter().position(|f| f.rank == first_rank).unwrap_or(0);
        let first = failures.remove(first_pos);
        Err(ClusterError::WorkerFailed { first, later: failures })
    }
}

fn run_worker<T, E, F>(
    topology: Topology,
    transport: LocalTransport,
    fault: Option<Fault>,
    work: &F,
) -> Result<T, WorkerFailure>
where
    F: Fn(&LocalCommunicator) -> Result<T, E>,
    E: Display,
{
    let rank = transport.rank;
    let fabric = Arc::clone(&transport.fabric);
    let outcome = match Endpoint::new(topology, transport).map(|e| e.with_fault(fault)) {
        Ok(comm) => match catch_unwind(AssertUnwindSafe(|| work(&comm))) {
            Ok(Ok(value)) => Ok(value),
            Ok(Err(e)) => Err(WorkerFailure { rank, kind: FailureKind::Error, reason: e.to_string() }),
            Err(payload) => {
                Err(WorkerFailure { rank, kind: FailureKind::Panic, reason: panic_message(payload.as_ref()) })
            }
        },
        Err(e) => Err(WorkerFailure { rank, kind: FailureKind::Error, reason: e.to_string() }),
    };
    match &outcome {
        Ok(_) => fabric.exit(rank),
        Err(failure) => fabric.fail(failure.clone()),
    }
    outcome
}

/// The text of a panic payload (`&str` or `String`, as `panic!` produces).
pub(crate) fn panic_message(payload: &(dyn Any + Send)) -> String {
    if let Some(s) = payload.downcast_ref::<&str>() {
        (*s).to_owned()
    } else if let Some(s) = payload.downcast_ref::<String>() {
        s.clone()
    } else {
        "panic with a non-string payload".to_owned()
    }
}

/// Messages waiting for one rank, keyed by sender and tag (unique per sender).
#[derive(Default)]
struct Mailbox {
    messages: Mutex<HashMap<(usize, Tag), Vec<u8>>>,
    arrived: Condvar,
}

impl Mailbox {
    fn lock(&self) -> MutexGuard<'_, HashMap<(usize, Tag), Vec<u8>>> {
        // No code that can panic runs under this lock, so a poisoned lock still holds
        // consistent data.
        self.messages.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Wakes the owner so it re-checks the failure and exit flags. Taking the lock first
    /// orders the flag change before the owner's next check.
    fn wake(&self) {
        let _guard = self.lock();
        self.arrived.notify_all();
    }
}

/// State shared by the workers of one local run.
struct Fabric {
    mailboxes: Vec<Mailbox>,
    first_failure: OnceLock<WorkerFailure>,
    exited: Vec<AtomicBool>,
}

impl Fabric {
    fn new(size: usize) -> Self {
        Self {
            mailboxes: (0..size).map(|_| Mailbox::default()).collect(),
            first_failure: OnceLock::new(),
            exited: (0..size).map(|_| AtomicBool::new(false)).collect(),
        }
    }

    fn fail(&self, failure: WorkerFailure) {
        // Only the first failure is the cause; later ones are its consequences.
        let _ = self.first_failure.set(failure);
        self.mailboxes.iter().for_each(Mailbox::wake);
    }

    fn exit(&self, rank: usize) {
        self.exited[rank].store(true, Ordering::Release);
        self.mailboxes.iter().for_each(Mailbox::wake);
    }

    fn check(&self, observer: usize, phase: &str) -> Result<(), CommError> {
        match self.first_failure.get() {
            Some(f) => Err(CommError::PeerFailed {
                rank: f.rank,
                reason: format!("{}: {}", f.kind, f.reason),
                observer,
                phase: phase.to_owned(),
            }),
            None => Ok(()),
        }
    }
}

/// The [`Transport`] of a local worker.
pub struct LocalTransport {
    rank: usize,
    fabric: Arc<Fabric>,
    timeout: Duration,
}

impl Transport for LocalTransport {
    fn rank(&self) -> usize {
        self.rank
    }

    fn size(&self) -> usize {
        self.fabric.mailboxes.len()
    }

    fn post(&mut self, dst: usize, tag: Tag, bytes: Vec<u8>, phase: &str) -> Result<(), CommError> {
        self.fabric.check(self.rank, phase)?;
        let mailbox = &self.fabric.mailboxes[dst];
        mailbox.lock().insert((self.rank, tag), bytes);
        mailbox.arrived.notify_all();
        Ok(())
    }

    fn recv(&mut self, src: usize, tag: Tag, phase: &str) -> Result<Vec<u8>, CommError> {
        let deadline = Instant::now() + self.timeout;
        let mailbox = &self.fabric.mailboxes[self.rank];
        let mut messages = mailbox.lock();
        loop {
            if let Some(bytes) = messages.remove(&(src, tag)) {
                return Ok(bytes);
            }
            self.fabric.check(self.rank, phase)?;
            if self.fabric.exited[src].load(Ordering::Acquire) {
                return Err(CommError::PeerExited { rank: src, observer: self.rank, phase: phase.to_owned() });
            }
            let now = Instant::now();
            if now >= deadline {
                return Err(CommError::Timeout {
                    observer: self.rank,
                    peer: src,
                    host: String::new(),
                    phase: phase.to_owned(),
                    timeout: self.timeout,
                });
            }
            messages = mailbox.arrived.wait_timeout(messages, deadline - now).unwrap_or_else(PoisonError::into_inner).0;
        }
    }
}
