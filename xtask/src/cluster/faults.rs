//! `cargo xtask cluster faults --halo PATH [--trials N]`: fault trials on the wire. On 4 hosts
//! of one rank each, over 1 Gbit/s links, a vanilla Cora run meets one fault at a random
//! moment per trial:
//!
//! - `cut`: a link cut mid-run, for good;
//! - `cut-setup`: a link cut while the job starts (launch, partition scatter, memory agreement);
//! - `kill`: a rank killed with SIGKILL;
//! - `blip`: a link cut for 5 s and restored, which must not be a fault.
//!
//! Each trial counts as fired (the job ended non-zero), named (its stderr names the host at
//! fault within the deadline plus 10 s), hung (mpirun had to be stopped), lost (rank 0's report
//! missing, or not marked incomplete after a fault) and left (processes left on a host). A
//! blip trial passes when the run finishes with the uninterrupted run's losses, bit for bit.

use std::path::Path;
use std::process::Stdio;
use std::time::{Duration, Instant};

use anyhow::{Context, Result, ensure};
use serde_json::Value;

use super::reports::{losses, read, scratch};
use super::{LAUNCHER_DEADLINE_S, Rate, Shape, clear, down, net, start, up, wait_bounded};

/// The cases, in the order they run.
pub const CASES: [&str; 4] = ["cut", "cut-setup", "kill", "blip"];
const HOSTS: usize = 4;
const EPOCHS: &str = "300";
/// How long a blip cuts its link.
const BLIP: Duration = Duration::from_secs(5);
/// The run's peer deadline (`--peer-timeout`).
const PEER_TIMEOUT_S: u64 = 60;

/// One trial's outcome.
#[derive(Debug, Default, Clone, Copy)]
struct Outcome {
    fired: bool,
    named: bool,
    hung: bool,
    lost: bool,
    left: bool,
    /// Seconds from the fault to the job's end.
    ended_after_s: f64,
    /// A blip trial that finished with the reference losses.
    clean: bool,
}

/// Runs `trials` trials of every case with the MPI build `halo` and prints one line per trial
/// and a table per case. Fails when any trial hung, lost its report, left a process, or (a
/// fault) went unnamed, or a blip was not clean.
pub fn faults(halo: &Path, trials: usize, seed: u64) -> Result<()> {
    let halo = halo.canonicalize().with_context(|| format!("--halo {}: no such binary", halo.display()))?;
    let shape = Shape::new(HOSTS, 1, Rate::parse("1gbit")?);
    up(&shape)?;
    let outcome = all_trials(&halo, &shape, trials, seed);
    let removed = down();
    let failures = outcome?;
    removed?;
    ensure!(failures == 0, "cluster faults: {failures} trial(s) failed (see the table)");
    Ok(())
}

fn all_trials(halo: &Path, shape: &Shape, trials: usize, seed: u64) -> Result<usize> {
    let dir = scratch("faults")?;
    let reference = dir.join("reference.json");
    let started = Instant::now();
    let finished = trial(halo, shape, &reference, None)?;
    ensure!(finished.status_ok, "cluster faults: the run without a fault failed:\n{}", finished.stderr);
    // Faults land in the first half of a run as long as the reference (training starts after
    // about a second), so every trial meets its fault before the run could end.
    let span = started.elapsed().as_secs_f64();
    let reference = losses(&read(&reference)?);
    let mut rng = seed.max(1);
    let mut failures = 0;
    println!("case       fired named hung lost left  ended after (s)");
    for case in CASES {
        let mut totals = [0usize; 6];
        let mut ended = Vec::new();
        for t in 0..trials {
            let host = (next(&mut rng) % (HOSTS as u64 - 1)) as usize + 1;
            let at = match case {
                "cut-setup" => 0.2 + 1.3 * unit(&mut rng),
                _ => span * (0.15 + 0.35 * unit(&mut rng)),
            };
            let report = dir.join(format!("{case}-{t}.json"));
            let fault = Fault { case, host, at: Duration::from_secs_f64(at) };
            let outcome = judge(halo, shape, &report, fault, &reference)?;
            let ok = if case == "blip" {
                outcome.clean && !outcome.hung && !outcome.left
            } else {
                outcome.fired && outcome.named && !outcome.hung && !outcome.lost && !outcome.left
            };
            failures += usize::from(!ok);
            eprintln!("cluster faults: {case} #{t} on halo-h{host} at {at:.1} s: {outcome:?}");
            for (total, flag) in totals.iter_mut().zip([
                outcome.fired,
                outcome.named,
                outcome.hung,
                outcome.lost,
                outcome.left,
                outcome.clean,
            ]) {
                *total += usize::from(flag);
            }
            if outcome.fired {
                ended.push(outcome.ended_after_s);
            }
            // Every trial starts on whole links.
            for i in 0..HOSTS {
                net::set_link(i, true)?;
            }
        }
        ended.sort_by(f64::total_cmp);
        let range = match (ended.first(), ended.last()) {
            (Some(a), Some(b)) => format!("{a:.1}-{b:.1}"),
            _ => "-".into(),
        };
        let [fired, named, hung, lost, left, clean] = totals;
        let note = if case == "blip" { format!("  finished clean {clean}/{trials}") } else { String::new() };
        println!("{case:<10} {fired:>5} {named:>5} {hung:>4} {lost:>4} {left:>4}  {range}{note}");
    }
    let _ = std::fs::remove_dir_all(&dir);
    Ok(failures)
}

/// A fault to inject into one run: `case` on host `host`, `at` after the start.
#[derive(Debug, Clone, Copy)]
struct Fault {
    case: &'static str,
    host: usize,
    at: Duration,
}

/// How a run ended.
struct Ended {
    status_ok: bool,
    stderr: String,
    hung: bool,
    left: bool,
    /// When the fault fired, and when the job ended.
    fired_at: Option<Instant>,
    ended_at: Instant,
}

fn judge(halo: &Path, shape: &Shape, report: &Path, fault: Fault, reference: &[f64]) -> Result<Outcome> {
    let ended = trial(halo, shape, report, Some(fault))?;
    let written = read(report).ok();
    let ended_after_s = ended.fired_at.map_or(0.0, |at| ended.ended_at.duration_since(at).as_secs_f64());
    let bound = (LAUNCHER_DEADLINE_S.max(PEER_TIMEOUT_S) + 10) as f64;
    let host = net::host_name(fault.host);
    let fired = !ended.status_ok;
    Ok(Outcome {
        fired,
        named: fired && ended.stderr.contains(&host) && ended_after_s <= bound,
        hung: ended.hung,
        lost: match &written {
            None => true,
            Some(report) => fired && report["incomplete"] != Value::Bool(true),
        },
        left: ended.left,
        ended_after_s,
        clean: ended.status_ok && written.as_ref().is_some_and(|r| losses(r) == reference),
    })
}

/// One run of the workload with `fault` injected; its stderr is kept.
fn trial(halo: &Path, shape: &Shape, report: &Path, fault: Option<Fault>) -> Result<Ended> {
    let _ = std::fs::remove_file(report);
    let command: Vec<String> = [
        &halo.display().to_string(),
        "train",
        "--dataset",
        &Path::new(env!("CARGO_MANIFEST_DIR")).join("../datasets/cora").display().to_string(),
        "--method",
        "vanilla",
        "--epochs",
        EPOCHS,
        "--quiet",
        "--peer-timeout",
        &PEER_TIMEOUT_S.to_string(),
        "--report",
        &report.display().to_string(),
    ]
    .map(String::from)
    .to_vec();
    let log = report.with_extension("stderr");
    let file = std::fs::File::create(&log)?;
    let child = start(shape, &command, Stdio::from(file))?;
    let started = Instant::now();
    let fired_at = fault.map(|fault| inject(fault, halo, started)).transpose()?;
    let bound = Duration::from_secs(LAUNCHER_DEADLINE_S.max(PEER_TIMEOUT_S) + 120);
    let (status, hung) = wait_bounded(child, bound)?;
    let ended_at = Instant::now();
    // A host cut off from mpirun ends its own daemon once its keepalives fail.
    let left = !clear(Duration::from_secs(LAUNCHER_DEADLINE_S + 10))?.is_empty();
    let stderr = std::fs::read_to_string(&log).unwrap_or_default();
    Ok(Ended { status_ok: status.success(), stderr, hung, left, fired_at, ended_at })
}

/// Waits until `fault.at` after `started` and injects it (a kill hits the ranks running
/// `halo`); returns when it fired.
fn inject(fault: Fault, halo: &Path, started: Instant) -> Result<Instant> {
    if let Some(wait) = fault.at.checked_sub(started.elapsed()) {
        std::thread::sleep(wait);
    }
    let fired = Instant::now();
    match fault.case {
        "kill" => {
            let ns = net::host_name(fault.host);
            for pid in net::pids(&ns)? {
                if std::fs::read_link(format!("/proc/{pid}/exe")).is_ok_and(|exe| exe == halo) {
                    let _ = net::sh("kill", &["-KILL", &pid.to_string()]);
                }
            }
        }
        "blip" => {
            net::set_link(fault.host, false)?;
            std::thread::sleep(BLIP);
            net::set_link(fault.host, true)?;
        }
        _ => net::set_link(fault.host, false)?,
    }
    Ok(fired)
}

/// xorshift64: the trials' moments and hosts, reproducible from `--seed`.
fn next(state: &mut u64) -> u64 {
    *state ^= *state << 13;
    *state ^= *state >> 7;
    *state ^= *state << 17;
    *state
}

fn unit(state: &mut u64) -> f64 {
    (next(state) >> 11) as f64 / (1u64 << 53) as f64
}
