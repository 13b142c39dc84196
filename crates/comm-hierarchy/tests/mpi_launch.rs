//! The MPI backend under a real launcher: `mpirun` starts `comm-mpi-selftest` on 4 ranks.
//! Needs `mpirun` on PATH (Open MPI); fails with a clear message when it is missing.
#![cfg(feature = "mpi")]

use std::path::PathBuf;
use std::process::{Command, Output, Stdio};
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// mpirun jobs share 2 cores badly; run them one at a time.
static ONE_JOB_AT_A_TIME: Mutex<()> = Mutex::new(());

const JOB_LIMIT: Duration = Duration::from_secs(120);
/// A failure must end the job well before the limit (the `fail` runs use a 2 s timeout).
const PROMPT: Duration = Duration::from_secs(60);

fn mpirun_path() -> PathBuf {
    let path = std::env::var_os("PATH").unwrap_or_default();
    std::env::split_paths(&path).map(|dir| dir.join("mpirun")).find(|p| p.is_file()).unwrap_or_else(|| {
        panic!(
            "mpirun was not found on PATH; the `mpi` feature's tests need an MPI launcher \
             (install Open MPI: apt-get install openmpi-bin libopenmpi-dev) or run the tests without --features mpi"
        )
    })
}

/// Runs the self-test on `ranks` ranks; returns its output and how long it took.
fn selftest(ranks: usize, args: &[&str]) -> (Output, Duration) {
    let _guard = ONE_JOB_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    let start = Instant::now();
    let mut child = Command::new(mpirun_path())
        .args(["--oversubscribe", "-np", &ranks.to_string(), env!("CARGO_BIN_EXE_comm-mpi-selftest")])
        .args(args)
        .env("OMPI_ALLOW_RUN_AS_ROOT", "1")
        .env("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1")
        .env("RUST_BACKTRACE", "0")
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("mpirun could not be started");
    while child.try_wait().expect("waiting for mpirun").is_none() {
        if start.elapsed() > JOB_LIMIT {
            child.kill().expect("killing a hung mpirun");
            panic!("mpirun {args:?} hung for more than {JOB_LIMIT:?}");
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    let output = child.wait_with_output().expect("collecting mpirun's output");
    (output, start.elapsed())
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

#[test]
fn four_ranks_on_two_hosts_count_4n_intra_and_8n_inter() {
    let n = 1 << 16;
    let (out, _) = selftest(4, &["check", "2", &n.to_string()]);
    let (stdout, stderr) = (text(&out.stdout), text(&out.stderr));
    assert!(out.status.success(), "selftest failed:\n{stdout}\n{stderr}");
    let expected = format!("hosts=2 workers=4 bytes={n} bytes_intra={} bytes_inter={}", 4 * n, 8 * n);
    assert!(stdout.contains(&expected), "expected `{expected}` in:\n{stdout}");
    assert_eq!(stdout.matches(": ok").count(), 4, "{stdout}");
}

/// Messages longer than the MPI backend's chunk (4 MiB) travel in pieces, and empty ones as a
/// header alone: both arrive whole and in order, on every pair.
#[test]
fn messages_of_several_chunks_and_empty_ones_arrive_whole() {
    for n in [(9 << 20) + 3, 0] {
        let (out, _) = selftest(4, &["check", "2", &n.to_string()]);
        let (stdout, stderr) = (text(&out.stdout), text(&out.stderr));
        assert!(out.status.success(), "selftest of {n} bytes failed:\n{stdout}\n{stderr}");
        assert_eq!(stdout.matches(": ok").count(), 4, "{stdout}");
    }
}

#[test]
fn processor_names_put_one_machine_on_one_host() {
    let n = 1000;
    let (out, _) = selftest(4, &["check", "auto", &n.to_string()]);
    let (stdout, stderr) = (text(&out.stdout), text(&out.stderr));
    assert!(out.status.success(), "selftest failed:\n{stdout}\n{stderr}");
    let expected = format!("hosts=1 workers=4 bytes={n} bytes_intra={} bytes_inter=0", 12 * n);
    assert!(stdout.contains(&expected), "expected `{expected}` in:\n{stdout}");
}

/// Rank 1 fails as `how`; the whole job must end promptly, non-zero, naming rank 1 (stderr
/// holds every one of `names_rank_1`).
fn assert_job_fails(how: &str, names_rank_1: &[&str]) {
    let (out, took) = selftest(4, &["fail", "1", how]);
    let stderr = text(&out.stderr);
    assert!(!out.status.success(), "a job whose rank 1 failed ({how}) exited 0:\n{stderr}");
    assert!(took < PROMPT, "the {how} failure took {took:?} to end the job");
    for needle in names_rank_1 {
        assert!(stderr.contains(needle), "expected `{needle}` in stderr:\n{stderr}");
    }
}

#[test]
fn an_erroring_rank_aborts_the_job() {
    assert_job_fails("error", &["halo: rank 1 returned an error: rank 1 hit a deliberate error"]);
}

#[test]
fn a_panicking_rank_aborts_the_job() {
    assert_job_fails("panic", &["halo: rank 1 panicked: deliberate panic"]);
}

#[test]
fn a_killed_rank_ends_the_job() {
    assert_job_fails("abort", &["process rank 1"]);
}

#[test]
fn a_stuck_rank_is_named_by_its_peers_timeouts() {
    // The peers name rank 1, its host (the processor name) and the phase they waited in.
    assert_job_fails("hang", &["waiting for rank 1 on host ", "then resume from the last checkpoint", "in `step/2`"]);
}
