//! `HALO_FAULT` through the `halo` binary: (rank, point, kind) trials of a checkpointed vanilla
//! run on in-process workers. Every run must end within its deadline with a non-zero exit and an
//! error naming the rank and the point, and the newest complete checkpoint it leaves must resume
//! to the end. CI runs the enumeration ([`enumerated`]: every point with a hang and with an
//! error, and every kind); `HALO_FAULT_TRIALS=200` adds random trials up to 200, the long set
//! (`docs/RELIABILITY.md`), and prints its figures. With the `mpi` feature the same trials run as
//! `mpirun` jobs, one rank a process (`HALO_FAULT_MPI_TRIALS`).

use std::path::Path;
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

const POINTS: [&str; 5] = ["setup", "forward-exchange", "backward-exchange", "all-reduce", "checkpoint"];
const KINDS: [&str; 5] = ["error", "panic", "hang", "abort", "kill"];
const WORKERS: usize = 3;
const EPOCHS: usize = 4;
/// `--peer-timeout`: how long a worker waits for a hung peer.
const COMM_TIMEOUT_S: u64 = 2;
/// Past this a run counts as hung and is killed.
const DEADLINE: Duration = Duration::from_secs(120);

/// How a trial's job starts: in-process workers in one `halo`, or one `halo` per `mpirun` rank.
#[derive(Clone, Copy, PartialEq)]
enum Launch {
    Local,
    #[cfg_attr(not(feature = "mpi"), allow(dead_code))]
    Mpi,
}

impl Launch {
    fn command(self) -> Command {
        let halo = env!("CARGO_BIN_EXE_halo");
        match self {
            Launch::Local => Command::new(halo),
            Launch::Mpi => {
                let mut mpirun = Command::new("mpirun");
                // `-x` hands the fault to every rank; a killed rank takes the job down at once.
                mpirun
                    .args(["-np", &WORKERS.to_string(), "--oversubscribe", "-x", "HALO_FAULT", halo])
                    .env("OMPI_ALLOW_RUN_AS_ROOT", "1")
                    .env("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1");
                mpirun
            }
        }
    }
}

/// Runs `halo train ARGS` in `cwd` with `env`, killing it at `DEADLINE`; `None` when it hung.
fn halo(launch: Launch, args: &[String], cwd: &Path, env: &[(&str, String)]) -> Option<(Output, Duration)> {
    let start = Instant::now();
    let mut child = launch
        .command()
        .arg("train")
        .args(args)
        .args(if launch == Launch::Mpi { &["--backend", "mpi"][..] } else { &[] })
        .current_dir(cwd)
        .env("HALO_FAULT", "")
        .envs(env.iter().map(|(k, v)| (*k, v.as_str())))
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("the job starts");
    loop {
        if child.try_wait().expect("wait on the job").is_some() {
            return Some((child.wait_with_output().expect("the job's output"), start.elapsed()));
        }
        if start.elapsed() > DEADLINE {
            let _ = child.kill();
            let _ = child.wait();
            return None;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

fn args(epochs: usize, checkpoints: &str, resume: bool) -> Vec<String> {
    let flag = if resume { "--resume" } else { "--checkpoint-dir" };
    [
        "--method",
        "vanilla",
        "--workers",
        &WORKERS.to_string(),
        "--epochs",
        &epochs.to_string(),
        "--hidden",
        "8",
        "--threads",
        "1",
        "--peer-timeout",
        &COMM_TIMEOUT_S.to_string(),
        "-q",
        flag,
        checkpoints,
    ]
    .iter()
    .map(|s| s.to_string())
    .collect()
}

/// SplitMix64, so a trial set is the same on every run.
fn next(state: &mut u64) -> u64 {
    *state = state.wrapping_add(0x9E37_79B9_7F4A_7C15);
    let mut z = *state;
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

#[test]
fn the_enumeration_reaches_every_point_and_kind() {
    let planned = enumerated();
    for point in POINTS {
        for kind in ["hang", "error"] {
            assert!(planned.iter().any(|t| (t.1, t.2) == (point, kind)), "{point}:{kind}");
        }
    }
    assert!(KINDS.iter().all(|k| planned.iter().any(|t| t.2 == *k)));
    assert!((0..WORKERS).all(|r| planned.iter().any(|t| t.0 == r)));
}

#[derive(Default)]
struct Tally {
    trials: usize,
    fired: usize,
    failed_cleanly: usize,
    hangs: usize,
    unnamed: Vec<String>,
    resumed: usize,
    resume_failures: Vec<String>,
    slowest: Duration,
}

#[test]
fn random_faults_end_runs_cleanly_and_leave_a_loadable_checkpoint() {
    trials(Launch::Local, "HALO_FAULT_TRIALS");
}

#[cfg(feature = "mpi")]
#[test]
fn random_faults_end_mpirun_jobs_cleanly_and_leave_a_loadable_checkpoint() {
    trials(Launch::Mpi, "HALO_FAULT_MPI_TRIALS");
}

/// The trials CI runs, as (rank, point, kind, N): every point with a hang (its peers must name
/// it where they wait, in whichever collective that is) and with an error (the rank names
/// itself), then the other kinds once each; ranks rotate. N is 1 at `setup` (reached once), 2
/// elsewhere, so that every trial fires and the later ones leave a checkpoint to resume.
fn enumerated() -> Vec<(usize, &'static str, &'static str, u64)> {
    let mut list: Vec<(&str, &str)> = POINTS.iter().flat_map(|&p| [(p, "hang"), (p, "error")]).collect();
    list.extend(KINDS.iter().filter(|k| !["hang", "error"].contains(k)).zip(POINTS).map(|(&k, p)| (p, k)));
    let nth = |point: &str| if point == "setup" { 1 } else { 2 };
    list.into_iter().enumerate().map(|(i, (point, kind))| (i % WORKERS, point, kind, nth(point))).collect()
}

/// Runs the enumeration, then random trials up to the number the environment variable `count`
/// says, and asserts the figures.
fn trials(launch: Launch, count: &str) {
    let planned = enumerated();
    let trials: usize = std::env::var(count).ok().and_then(|v| v.parse().ok()).unwrap_or(planned.len());
    let mut rng = 0x5EED_u64;
    let mut tally = Tally::default();
    for trial in 0..trials.max(planned.len()) {
        let (rank, point, kind, nth) = planned.get(trial).copied().unwrap_or_else(|| {
            let kind = KINDS[next(&mut rng) as usize % KINDS.len()];
            let rank = next(&mut rng) as usize % WORKERS;
            let point = POINTS[next(&mut rng) as usize % POINTS.len()];
            (rank, point, kind, 1 + next(&mut rng) % 3)
        });
        let fault = format!("{rank}:{point}:{kind}:{nth}");
        let dir = tempfile::tempdir().unwrap();
        tally.trials += 1;
        let Some((out, took)) = halo(launch, &args(EPOCHS, "ck", false), dir.path(), &[("HALO_FAULT", fault.clone())])
        else {
            tally.hangs += 1;
            continue;
        };
        tally.slowest = tally.slowest.max(took);
        let log = String::from_utf8_lossy(&out.stderr);
        // `setup` is reached once per run: a later N never fires and the run completes.
        let fires = point != "setup" || nth == 1;
        if !fires {
            assert!(out.status.success(), "{fault}: {log}");
            continue;
        }
        tally.fired += 1;
        if !out.status.success() {
            tally.failed_cleanly += 1;
        }
        // A hung rank says nothing: its peers name it, and the point, where they wait on it.
        // Either way the failure says how far the run got.
        let stage = log.contains("after epoch ") || log.contains("before any epoch finished");
        let named = if kind == "hang" {
            log.contains(&format!("waiting for rank {rank}")) && log.contains("(point ") && stage
        } else {
            log.contains(&format!("rank {rank}")) && log.contains(point) && (kind != "error" || stage)
        };
        if !named {
            tally.unnamed.push(format!("{fault}: {log}"));
        }
        // Whatever the fault left, the newest complete checkpoint (if any) resumes to the end.
        if dir.path().join("ck").is_dir() && std::fs::read_dir(dir.path().join("ck")).unwrap().count() > 0 {
            match halo(launch, &args(EPOCHS, "ck", true), dir.path(), &[]) {
                Some((out, _)) if out.status.success() => tally.resumed += 1,
                Some((out, _)) => {
                    let log = String::from_utf8_lossy(&out.stderr).into_owned();
                    // Only a fault before the first commit may leave nothing to resume.
                    if !log.contains("no complete checkpoint") {
                        tally.resume_failures.push(format!("{fault}: {log}"));
                    }
                }
                None => tally.hangs += 1,
            }
        }
    }
    eprintln!(
        "fault trials ({count}): {} run, {} fired, {} ended non-zero, {} hung, {} without rank and point, {} resumed, slowest {:.1} s",
        tally.trials,
        tally.fired,
        tally.failed_cleanly,
        tally.hangs,
        tally.unnamed.len(),
        tally.resumed,
        tally.slowest.as_secs_f64()
    );
    assert_eq!(tally.hangs, 0);
    assert!(tally.fired >= planned.len(), "every enumerated trial fires");
    assert_eq!(tally.failed_cleanly, tally.fired, "every fault that fired ends its run non-zero");
    assert!(tally.unnamed.is_empty(), "{:#?}", tally.unnamed);
    assert!(tally.resume_failures.is_empty(), "{:#?}", tally.resume_failures);
}
