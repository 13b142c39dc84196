//! Failure semantics of the local backend: a failing worker ends the whole run quickly, with
//! errors naming it; nothing hangs.

use std::time::{Duration, Instant};

use comm_hierarchy::{ClusterError, CommError, Communicator, FailureKind, LinkModel, LocalCluster, Topology};

/// Long enough that a test passing quickly proves failures are noticed without it.
const GENEROUS: Duration = Duration::from_secs(60);
const PROMPT: Duration = Duration::from_secs(10);

fn four_on_two() -> Topology {
    Topology::for_workers(4, 2, LinkModel::default()).unwrap()
}

fn exchange(comm: &dyn Communicator, phase: &str) -> Result<(), CommError> {
    comm.all_to_all_v(phase, vec![vec![1u8; 64]; comm.size()]).map(drop)
}

fn assert_rank1_named(err: &ClusterError, kind: FailureKind, reason: &str) {
    let ClusterError::WorkerFailed { first, later } = err else {
        panic!("expected a worker failure, got {err}");
    };
    assert_eq!((first.rank, first.kind), (1, kind), "{err}");
    assert!(first.reason.contains(reason), "{err}");
    assert_eq!(err.failed_rank(), Some(1));
    // Every other worker stopped because of rank 1, and says so.
    assert_eq!(later.iter().map(|f| f.rank).collect::<Vec<_>>(), vec![0, 2, 3], "{err}");
    for f in later {
        assert!(f.reason.contains("rank 1 failed"), "rank {} reason: {}", f.rank, f.reason);
    }
    assert!(err.to_string().starts_with("rank 1 "), "{err}");
}

#[test]
fn an_erroring_worker_fails_its_blocked_peers_fast() {
    let start = Instant::now();
    let err = LocalCluster::run_with_timeout(&four_on_two(), GENEROUS, |comm| {
        exchange(comm, "fwd/1")?;
        if comm.rank() == 1 {
            return Err(CommError::InvalidArgument { phase: "fwd/2".into(), detail: "out of memory".into() });
        }
        // The peers block here waiting for rank 1's part.
        exchange(comm, "fwd/2")
    })
    .unwrap_err();
    assert!(start.elapsed() < PROMPT, "took {:?}", start.elapsed());
    assert_rank1_named(&err, FailureKind::Error, "out of memory");
}

#[test]
fn a_panicking_worker_fails_its_peers_fast() {
    let start = Instant::now();
    let err = LocalCluster::run_with_timeout(&four_on_two(), GENEROUS, |comm| {
        let mut grad = vec![1.0f32; 8];
        comm.all_reduce_sum_f32("params", &mut grad)?;
        assert!(comm.rank() != 1, "gradient exploded");
        comm.all_reduce_sum_f32("params", &mut grad)
    })
    .unwrap_err();
    assert!(start.elapsed() < PROMPT, "took {:?}", start.elapsed());
    assert_rank1_named(&err, FailureKind::Panic, "gradient exploded");
}

#[test]
fn pending_and_later_calls_fail_after_a_peer_failed() {
    let err = LocalCluster::run_with_timeout(&four_on_two(), GENEROUS, |comm| {
        if comm.rank() == 1 {
            return Err("rank one gives up".to_owned());
        }
        // Started before or after the failure; either way the wait must fail.
        let pending = comm.start_all_to_all_v("fwd/1", vec![vec![0u8; 8]; 4]);
        let waited = pending.and_then(|p| p.wait()).unwrap_err();
        let later = comm.barrier("after").unwrap_err();
        Err::<(), _>(format!("{waited} | {later}"))
    })
    .unwrap_err();
    let ClusterError::WorkerFailed { first, later } = &err else { panic!("{err}") };
    assert_eq!(first.rank, 1);
    for f in later {
        let (waited, after) = f.reason.split_once(" | ").unwrap();
        assert!(waited.contains("rank 1 failed") && waited.contains("`fwd/1`"), "{waited}");
        assert!(after.contains("rank 1 failed") && after.contains("`after`"), "{after}");
    }
}

#[test]
fn a_stuck_peer_is_reported_after_the_timeout() {
    let t = Topology::for_workers(2, 1, LinkModel::default()).unwrap();
    let start = Instant::now();
    let err = LocalCluster::run_with_timeout(&t, Duration::from_millis(150), |comm| {
        if comm.rank() == 1 {
            std::thread::sleep(Duration::from_millis(600));
        }
        comm.barrier("sync")
    })
    .unwrap_err();
    assert!(start.elapsed() < PROMPT);
    let ClusterError::WorkerFailed { first, .. } = &err else { panic!("{err}") };
    assert_eq!(first.rank, 0, "{err}");
    assert!(first.reason.contains("timed out") && first.reason.contains("waiting for rank 1"), "{err}");
}

#[test]
fn a_peer_that_exited_early_is_named() {
    let t = Topology::for_workers(2, 1, LinkModel::default()).unwrap();
    let start = Instant::now();
    let err = LocalCluster::run_with_timeout(&t, GENEROUS, |comm| {
        if comm.rank() == 0 {
            comm.barrier("sync")?;
        }
        Ok::<_, CommError>(())
    })
    .unwrap_err();
    assert!(start.elapsed() < PROMPT);
    let ClusterError::WorkerFailed { first, .. } = &err else { panic!("{err}") };
    assert_eq!(first.rank, 0);
    assert!(first.reason.contains("rank 1 exited"), "{err}");
}

#[test]
fn successful_runs_return_results_in_rank_order() {
    let out = LocalCluster::run(&four_on_two(), |comm| Ok::<_, CommError>(comm.rank() * 10)).unwrap();
    assert_eq!(out, vec![0, 10, 20, 30]);
}
