//! The MPI backend (feature `mpi`): one process per rank, started by an MPI launcher
//! (`mpirun -np P halo ...`), possibly over several hosts.
//!
//! Hosts are found by grouping ranks on `MPI_Get_processor_name`. [`MpiOptions::hosts`] is a
//! check against them, except on one machine, whose ranks it lets pose as several hosts.
//!
//! Failure semantics: when the work of a rank returns an error or panics, [`run`] prints
//! `halo: rank R ...` to stderr and calls `MPI_Abort`, so the launcher kills every other rank
//! and exits non-zero. A rank that waits for a peer while nothing moves for the timeout (no
//! message arrives, none of its sends completes) fails with [`CommError::Timeout`] naming the
//! peer and its host, and aborts the job the same way. A progress thread makes every MPI call
//! of the job ([`progress`]): messages move while the rank computes, and a link cut
//! mid-message is noticed too. MPI's own set-up, which blocks inside
//! MPI, has the same deadline (`watch.rs`). A rank that dies outright, or a host
//! the launcher loses, ends the job through the launcher (`docs/RELIABILITY.md`).

mod frames;
mod progress;
mod sends;
mod watch;

use std::ffi::c_int;
use std::fmt::Display;
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::time::Duration;

use mpi::Threading;
use mpi::collective::CommunicatorCollectives;
use mpi::environment::Universe;
use mpi::topology::{Communicator as MpiCommunicatorTrait, SimpleCommunicator};

use crate::endpoint::Endpoint;
use crate::error::{CommError, FailureKind, WorkerFailure};
use crate::local::{DEFAULT_TIMEOUT, panic_message};
use crate::topology::{LinkModel, Topology};
use crate::transport::{Tag, Transport};
use progress::Engine;

/// Exit code a failing rank aborts the job with.
pub const ABORT_CODE: c_int = 3;

/// Sequence numbers are folded into this many tag slots: `4096 * 8` ops stays within the
/// 32767 tags every MPI implementation must offer. Calls 4096 apart never overlap in time.
const TAG_SEQS: u64 = 4096;
const OP_BITS: u32 = 3;

/// Bytes of a processor name exchanged per rank (`MPI_MAX_PROCESSOR_NAME` in Open MPI).
const NAME_BYTES: usize = 256;

/// The communicator an MPI rank receives.
pub type MpiCommunicator = Endpoint<MpiTransport>;

/// How [`run`] sets the job up.
#[derive(Debug, Clone, PartialEq)]
pub struct MpiOptions {
    /// Number of hosts the run expects. Ranks are grouped by processor name; where that gives
    /// another number of hosts the job is refused, unless every rank runs on one machine, whose
    /// ranks then pose as this many hosts in equal contiguous blocks. `None` takes the names.
    pub hosts: Option<usize>,
    /// Link classes of the topology.
    pub links: LinkModel,
    /// How long a call waits for a peer before failing.
    pub timeout: Duration,
    /// A fault to inject ([`crate::fault`]).
    pub fault: Option<crate::fault::Fault>,
}

impl Default for MpiOptions {
    fn default() -> Self {
        Self { hosts: None, links: LinkModel::default(), timeout: DEFAULT_TIMEOUT, fault: None }
    }
}

/// Initialises MPI, builds this rank's communicator and runs `work` with it. Returns `work`'s
/// value on success; setup problems (MPI already initialised, a topology that does not fit
/// the world) are returned as errors on every rank. If `work` fails or panics, the job is
/// aborted (see the module notes) and this function does not return.
///
/// `work` owns the communicator; it is dropped, its last sends drained, before MPI shuts down.
pub fn run<T, E, F>(options: &MpiOptions, work: F) -> Result<T, CommError>
where
    F: FnOnce(MpiCommunicator) -> Result<T, E>,
    E: Display,
{
    crate::waiting::set_stage("in MPI set-up");
    tcp_defaults();
    let watch = watch::Watch::start(options.timeout, ABORT_CODE);
    let (universe, provided) = mpi::initialize_with_threading(Threading::Serialized)
        .ok_or_else(|| CommError::Mpi("MPI is already initialised in this process".into()))?;
    if provided < Threading::Serialized {
        return Err(CommError::Mpi(format!(
            "the MPI library offers thread level {provided:?}; Halo needs Serialized or better"
        )));
    }
    let world = universe.world();
    let rank = world.rank() as usize;
    let names = processor_names(&world)?;
    watch.finish();
    let topology = placed_topology(&names, options.hosts, options.links)?;
    let transport = MpiTransport::new(world, names, options.timeout)?;
    let comm = Endpoint::new(topology, transport)?.with_fault(options.fault);
    let failure = match catch_unwind(AssertUnwindSafe(|| work(comm))) {
        Ok(Ok(value)) => return Ok(value),
        Ok(Err(e)) => WorkerFailure { rank, kind: FailureKind::Error, reason: e.to_string() },
        Err(payload) => WorkerFailure { rank, kind: FailureKind::Panic, reason: panic_message(payload.as_ref()) },
    };
    abort_job(&universe, &failure)
}

/// Open MPI settings a rank gives itself before MPI starts, where its environment (the user's,
/// or the launcher's `--mca`) sets none.
///
/// The TCP transport's eager limit (and the largest fragment it sends) raised to a chunk of
/// [`frames`] plus room for Open MPI's own header, so that every chunk goes out as soon as it
/// is posted instead of after a rendezvous with its receiver (the module notes of [`frames`]).
const TCP_DEFAULTS: [(&str, &str); 3] = [
    ("OMPI_MCA_btl_tcp_eager_limit", TCP_EAGER),
    ("OMPI_MCA_btl_tcp_rndv_eager_limit", TCP_EAGER),
    ("OMPI_MCA_btl_tcp_max_send_size", TCP_EAGER),
];

/// [`frames::CHUNK`] plus 4 KiB for Open MPI's headers.
const TCP_EAGER: &str = "4198400";

fn tcp_defaults() {
    for (name, value) in TCP_DEFAULTS {
        if std::env::var_os(name).is_none() {
            // SAFETY: this runs before MPI starts and before this module starts a thread; no
            // other thread of a Halo rank reads or writes the environment while it runs (the
            // trainer's compute pool and signal thread do not). Covered by every MPI test,
            // and by `ranks_send_chunks_eagerly_unless_told`.
            unsafe { std::env::set_var(name, value) };
        }
    }
}

fn abort_job(universe: &Universe, failure: &WorkerFailure) -> ! {
    eprintln!("halo: {failure}; aborting the MPI job");
    universe.world().abort(ABORT_CODE)
}

/// The topology of ranks running on the hosts `names` (one per rank), checked against the
/// `expected` number of hosts (see [`MpiOptions::hosts`]).
fn placed_topology(names: &[String], expected: Option<usize>, links: LinkModel) -> Result<Topology, CommError> {
    let found = Topology::from_host_names(names, links)?;
    match expected {
        None => Ok(found),
        Some(hosts) if hosts == found.hosts() => Ok(found),
        Some(hosts) if found.hosts() == 1 => Ok(Topology::for_workers(names.len(), hosts, links)?),
        Some(hosts) => {
            let mut distinct: Vec<&str> = names.iter().map(String::as_str).collect();
            distinct.dedup();
            Err(CommError::Mpi(format!(
                "--hosts {hosts}, but the {} ranks run on {} hosts ({}); drop --hosts to take the hosts the ranks run on",
                names.len(),
                found.hosts(),
                distinct.join(", ")
            )))
        }
    }
}

/// Every rank's processor name, in rank order (collective).
fn processor_names(world: &SimpleCommunicator) -> Result<Vec<String>, CommError> {
    let name = mpi::environment::processor_name()
        .map_err(|e| CommError::Mpi(format!("the processor name is not UTF-8: {e}")))?;
    let mut mine = [0u8; NAME_BYTES];
    let len = name.len().min(NAME_BYTES);
    mine[..len].copy_from_slice(&name.as_bytes()[..len]);
    let mut all = vec![0u8; NAME_BYTES * world.size() as usize];
    world.all_gather_into(&mine[..], &mut all[..]);
    Ok(all
        .chunks(NAME_BYTES)
        .map(|raw| {
            let end = raw.iter().position(|&b| b == 0).unwrap_or(raw.len());
            String::from_utf8_lossy(&raw[..end]).into_owned()
        })
        .collect())
}

/// The integer MPI tag of a [`Tag`].
fn mpi_tag(tag: Tag) -> c_int {
    (((tag.seq % TAG_SEQS) as c_int) << OP_BITS) | c_int::from(tag.op.code())
}

/// The [`Transport`] of an MPI rank: sends and receives handed to its progress engine
/// ([`progress`]), which moves them while the rank computes; receives wait with a timeout.
pub struct MpiTransport {
    engine: Engine,
    rank: usize,
    size: usize,
    /// Every rank's processor name, for errors that name a peer's host.
    hosts: Vec<String>,
    timeout: Duration,
}

impl MpiTransport {
    fn new(world: SimpleCommunicator, hosts: Vec<String>, timeout: Duration) -> Result<Self, CommError> {
        let (rank, size) = (world.rank() as usize, world.size() as usize);
        Ok(Self { engine: Engine::start(world, timeout)?, rank, size, hosts, timeout })
    }

    /// The error of a wait for `peer` in `phase` during which nothing moved for the timeout.
    fn timed_out(&self, peer: usize, phase: &str) -> CommError {
        CommError::Timeout {
            observer: self.rank,
            peer,
            host: self.hosts.get(peer).cloned().unwrap_or_default(),
            phase: phase.to_owned(),
            timeout: self.timeout,
        }
    }
}

impl Transport for MpiTransport {
    fn rank(&self) -> usize {
        self.rank
    }

    fn size(&self) -> usize {
        self.size
    }

    fn post(&mut self, dst: usize, tag: Tag, bytes: Vec<u8>, phase: &str) -> Result<(), CommError> {
        self.engine.post(dst, mpi_tag(tag), bytes, phase)
    }

    fn recv(&mut self, src: usize, tag: Tag, phase: &str) -> Result<Vec<u8>, CommError> {
        let host = self.hosts.get(src).map_or("", String::as_str);
        let _waiting = crate::waiting::start(self.rank, src, host, phase);
        self.engine.recv(src, mpi_tag(tag), self.timeout).map_err(|failure| match failure {
            Some(e) => e,
            None => self.timed_out(src, phase),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::transport::Op;

    #[test]
    fn hosts_come_from_where_the_ranks_run_and_the_flag_only_checks_them() {
        let names = |v: &[&str]| v.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        let four = names(&["h0", "h1", "h2", "h3"]);
        let links = LinkModel::default();
        assert_eq!(placed_topology(&four, None, links).unwrap().hosts(), 4);
        assert_eq!(placed_topology(&four, Some(4), links).unwrap().hosts(), 4);
        let err = placed_topology(&four, Some(2), links).unwrap_err().to_string();
        assert!(err.contains("--hosts 2, but the 4 ranks run on 4 hosts (h0, h1, h2, h3)"), "{err}");
        // One machine poses as the hosts asked for.
        let one = names(&["m", "m", "m", "m"]);
        let posed = placed_topology(&one, Some(2), links).unwrap();
        assert_eq!((posed.hosts(), posed.host_of(1), posed.host_of(2)), (2, 0, 1));
        assert_eq!(placed_topology(&one, None, links).unwrap().hosts(), 1);
    }

    #[test]
    fn ranks_send_chunks_eagerly_unless_told() {
        // This test's process starts no MPI, and no other test of this binary reads the
        // variable.
        assert_eq!(TCP_EAGER.parse::<usize>().unwrap(), frames::CHUNK + 4096);
        let (name, value) = TCP_DEFAULTS[0];
        tcp_defaults();
        assert_eq!(std::env::var(name).unwrap(), value);
        // SAFETY: no other thread of this test binary reads or writes this variable.
        unsafe { std::env::set_var(name, "3") };
        tcp_defaults();
        assert_eq!(std::env::var(name).unwrap(), "3", "a user's setting stays");
    }

    #[test]
    fn tags_fit_the_guaranteed_range_and_differ_by_op() {
        let ops = [
            Op::AllToAll,
            Op::ReduceScatter,
            Op::AllGather,
            Op::Broadcast,
            Op::Gather,
            Op::Scatter,
            Op::Barrier,
            Op::PointToPoint,
        ];
        let mut seen = std::collections::HashSet::new();
        for op in ops {
            for seq in [0, 1, TAG_SEQS - 1, TAG_SEQS, u64::MAX] {
                let tag = mpi_tag(Tag { op, seq });
                assert!((0..=32767).contains(&tag), "{op:?} {seq} -> {tag}");
                if seq < TAG_SEQS {
                    assert!(seen.insert(tag), "duplicate tag {tag}");
                }
            }
        }
    }
}
