//! Fault injection: `HALO_FAULT=RANK:POINT:KIND` makes one worker fail at a named point, so a
//! user can rehearse failures on their own cluster. It is honoured in every build, release
//! included.
//!
//! - POINT: `setup` (the shares' distribution), `forward-exchange` (a layer's forward rows),
//!   `backward-exchange` (a layer's gradient rows), `all-reduce` (the gradient sync),
//!   `checkpoint` (between writing a checkpoint's shard and committing its manifest).
//! - KIND: `error` (the call returns an error), `panic`, `hang` (the rank stops answering),
//!   `abort` (the process aborts), `kill` (the process sends itself SIGKILL).
//! - An optional fourth field `:N` fires at the N-th time the rank reaches the point (default
//!   1), e.g. at the third epoch's all-reduce or the second checkpoint.
//!
//! A point is recognised by the ledger phase of the call that reaches it ([`Point::of_phase`]),
//! so a fault armed on a communicator ([`crate::Endpoint::with_fault`], the backends' options)
//! needs nothing from the caller; a process with no communicator (single-process training)
//! calls [`Fault::hit`] itself. The fault fires the N-th time its rank reaches its point.

use std::cell::Cell;
use std::fmt;
use std::str::FromStr;

use crate::error::CommError;
use crate::point::Point;

/// The environment variable that names a fault.
pub const ENV: &str = "HALO_FAULT";

/// How a fault fails its worker.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Kind {
    Error,
    Panic,
    Hang,
    Abort,
    Kill,
}

impl Kind {
    /// Every kind.
    pub const ALL: [Kind; 5] = [Kind::Error, Kind::Panic, Kind::Hang, Kind::Abort, Kind::Kill];

    pub fn as_str(self) -> &'static str {
        match self {
            Kind::Error => "error",
            Kind::Panic => "panic",
            Kind::Hang => "hang",
            Kind::Abort => "abort",
            Kind::Kill => "kill",
        }
    }
}

impl fmt::Display for Kind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Why a `HALO_FAULT` value was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "{ENV}={value}: {detail} (expected RANK:POINT:KIND, POINT one of setup, forward-exchange, \
         backward-exchange, all-reduce, checkpoint; KIND one of error, panic, hang, abort, kill)"
)]
pub struct FaultSpecError {
    pub value: String,
    pub detail: String,
}

/// One injected fault: `rank` fails at the `nth` time it reaches `point`, as `kind` says.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Fault {
    pub rank: usize,
    pub point: Point,
    pub kind: Kind,
    /// 1-based.
    pub nth: u32,
}

impl fmt::Display for Fault {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}:{}:{}:{}", self.rank, self.point, self.kind, self.nth)
    }
}

impl FromStr for Fault {
    type Err = FaultSpecError;

    fn from_str(value: &str) -> Result<Self, FaultSpecError> {
        let err = |detail: String| FaultSpecError { value: value.to_string(), detail };
        let fields: Vec<&str> = value.trim().split(':').collect();
        let (rank, point, kind, nth) = match fields[..] {
            [rank, point, kind] => (rank, point, kind, "1"),
            [rank, point, kind, nth] => (rank, point, kind, nth),
            _ => return Err(err(format!("{} fields", fields.len()))),
        };
        let nth =
            nth.parse().ok().filter(|&n: &u32| n >= 1).ok_or_else(|| err(format!("N `{nth}` is not 1 or more")))?;
        let rank = rank.parse().map_err(|_| err(format!("rank `{rank}` is not a number")))?;
        let point = Point::ALL
            .into_iter()
            .find(|p| p.as_str() == point)
            .ok_or_else(|| err(format!("unknown point `{point}`")))?;
        let kind =
            Kind::ALL.into_iter().find(|k| k.as_str() == kind).ok_or_else(|| err(format!("unknown kind `{kind}`")))?;
        Ok(Fault { rank, point, kind, nth })
    }
}

impl Fault {
    /// The fault `HALO_FAULT` names, if it is set and not empty.
    pub fn from_env() -> Result<Option<Fault>, FaultSpecError> {
        match std::env::var(ENV) {
            Ok(value) if !value.trim().is_empty() => value.parse().map(Some),
            _ => Ok(None),
        }
    }

    /// The error a fault of kind `error` returns.
    fn error(&self) -> CommError {
        CommError::Injected { rank: self.rank, point: self.point.as_str().to_string() }
    }

    /// Fires the fault on a rank with no peers (single-process training) when `rank`, `point`
    /// and the `nth` time it is reached are its own. A hang there has nobody to notice it, so
    /// it waits `hang_for` and then fails as an error would.
    pub fn hit(&self, rank: usize, point: Point, nth: u32, hang_for: std::time::Duration) -> Result<(), CommError> {
        if (rank, point, nth) != (self.rank, self.point, self.nth) {
            return Ok(());
        }
        if self.kind == Kind::Hang {
            std::thread::sleep(hang_for);
            return Err(CommError::Injected { rank, point: format!("{point} (hung for {hang_for:?})") });
        }
        self.fire_fatal();
        Err(self.error())
    }

    /// Panics, aborts or kills as the kind says; returns for `error` and `hang`.
    fn fire_fatal(&self) {
        let what = format!("rank {}: injected fault ({}) at point {}", self.rank, self.kind, self.point);
        match self.kind {
            Kind::Error | Kind::Hang => {}
            Kind::Panic => panic!("{what}"),
            Kind::Abort => {
                eprintln!("halo: {what}");
                std::process::abort();
            }
            Kind::Kill => {
                eprintln!("halo: {what}");
                kill_self();
            }
        }
    }
}

/// Ends this process with SIGKILL, as an out-of-memory killer or a scheduler would.
#[cfg(unix)]
fn kill_self() -> ! {
    // SAFETY: `raise` has no memory-safety preconditions; SIGKILL cannot be caught, so the
    // process ends here. Exercised by `tests/fault_cli.rs`, which expects the kill signal.
    unsafe { libc::raise(libc::SIGKILL) };
    std::process::abort()
}

#[cfg(not(unix))]
fn kill_self() -> ! {
    std::process::abort()
}

/// A fault armed on one rank's communicator ([`crate::Endpoint::with_fault`]): it fires the
/// N-th time its rank makes a call under a phase of its point.
#[derive(Debug)]
pub(crate) struct Armed {
    fault: Fault,
    /// Times the rank reached the point so far.
    reached: Cell<u32>,
}

impl Armed {
    pub(crate) fn new(fault: Fault) -> Self {
        Self { fault, reached: Cell::new(0) }
    }

    /// Fires the fault if `rank`'s call under `phase` is the N-th to reach its point. A hang
    /// calls `wait_forever`, which blocks on a message no peer sends until a peer gives up on
    /// this rank (its receive times out and the run fails, naming this rank and the phase);
    /// `wait_forever` returns the error that released it. A rank with no peers has nobody to
    /// notice a hang and returns the injected error.
    pub(crate) fn reach(
        &self,
        rank: usize,
        size: usize,
        phase: &str,
        wait_forever: impl FnOnce() -> CommError,
    ) -> Result<(), CommError> {
        if rank != self.fault.rank || Point::of_phase(phase) != Some(self.fault.point) {
            return Ok(());
        }
        let reached = self.reached.get().saturating_add(1);
        self.reached.set(reached);
        if reached != self.fault.nth {
            return Ok(());
        }
        if self.fault.kind == Kind::Hang && size > 1 {
            return Err(wait_forever());
        }
        self.fault.fire_fatal();
        Err(self.fault.error())
    }
}

#[cfg(test)]
mod tests {
    use std::time::{Duration, Instant};

    use super::*;
    use crate::communicator::Communicator;
    use crate::local::{ClusterOptions, LocalCluster};
    use crate::preset::Preset;
    use crate::topology::Topology;

    #[test]
    fn specs_parse_and_refusals_name_the_field() {
        let f: Fault = "2:all-reduce:hang".parse().unwrap();
        assert_eq!(f, Fault { rank: 2, point: Point::AllReduce, kind: Kind::Hang, nth: 1 });
        assert_eq!(f.to_string(), "2:all-reduce:hang:1");
        assert_eq!("0:checkpoint:kill:3".parse::<Fault>().unwrap().nth, 3);
        assert!("0:checkpoint:kill:0".parse::<Fault>().unwrap_err().to_string().contains("N `0`"));
        for (bad, says) in
            [("x:setup:error", "rank `x`"), ("0:nowhere:error", "point `nowhere`"), ("0:setup:boom", "kind `boom`")]
        {
            let e = bad.parse::<Fault>().unwrap_err().to_string();
            assert!(e.contains(says) && e.contains(ENV), "{e}");
        }
        assert!("0:setup".parse::<Fault>().unwrap_err().to_string().contains("2 fields"));
    }

    /// Every rank all-reduces under `grads` twice, through a fault at rank 1.
    fn run_with(fault: Fault, timeout: Duration) -> Result<Vec<()>, crate::ClusterError> {
        let topology = Topology::for_workers(3, 1, Preset::Cdfgnn.links()).unwrap();
        LocalCluster::run_with_options(&topology, ClusterOptions { timeout, fault: Some(fault) }, |comm| {
            let mut v = vec![1.0f32; 4];
            comm.all_reduce_sum_f32("loss", &mut v)?;
            comm.all_reduce_sum_f32("grads", &mut v)?;
            comm.all_reduce_sum_f32("grads", &mut v)?;
            Ok::<(), CommError>(())
        })
    }

    #[test]
    fn error_and_panic_end_the_run_naming_rank_and_point() {
        for kind in [Kind::Error, Kind::Panic] {
            let fault = Fault { rank: 1, point: Point::AllReduce, kind, nth: 2 };
            let err = run_with(fault, Duration::from_secs(30)).unwrap_err();
            assert_eq!(err.failed_rank(), Some(1));
            let text = err.to_string();
            assert!(text.contains("rank 1") && text.contains("all-reduce"), "{text}");
        }
    }

    #[test]
    fn a_hang_is_noticed_by_its_peers_within_the_timeout() {
        let fault = Fault { rank: 1, point: Point::AllReduce, kind: Kind::Hang, nth: 1 };
        let start = Instant::now();
        let err = run_with(fault, Duration::from_millis(300)).unwrap_err();
        assert!(start.elapsed() < Duration::from_secs(10));
        let text = err.to_string();
        assert!(text.contains("waiting for rank 1") && text.contains("(point all-reduce)"), "{text}");
    }

    #[test]
    fn other_ranks_and_points_pass_through() {
        let fault = Fault { rank: 1, point: Point::Setup, kind: Kind::Panic, nth: 1 };
        assert!(run_with(fault, Duration::from_secs(30)).is_ok());
        let third = Fault { rank: 1, point: Point::AllReduce, kind: Kind::Panic, nth: 3 };
        assert!(run_with(third, Duration::from_secs(30)).is_ok(), "two all-reduces: the third is never reached");
        assert!(fault.hit(0, Point::Setup, 1, Duration::ZERO).is_ok());
        assert!(fault.hit(1, Point::Checkpoint, 1, Duration::ZERO).is_ok());
        let hang = Fault { rank: 0, point: Point::Checkpoint, kind: Kind::Hang, nth: 2 };
        assert!(hang.hit(0, Point::Checkpoint, 1, Duration::ZERO).is_ok());
        let text = hang.hit(0, Point::Checkpoint, 2, Duration::from_millis(10)).unwrap_err().to_string();
        assert!(text.contains("rank 0") && text.contains("checkpoint"), "{text}");
    }
}
