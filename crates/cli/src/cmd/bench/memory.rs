//! `halo bench memory`: one `halo train` per dataset, each in a child process of its own, and
//! the peak resident memory per vertex next to the run's estimate.
//!
//! A process's peak RSS (`VmHWM`) only grows, and memory freed back to the allocator is not
//! always returned to the kernel, so runs that shared a process would read each other's peaks.
//! The child is this same binary, so the figures are those of the `halo train` a user runs.

use std::path::{Path, PathBuf};
use std::process::{Command, ExitStatus, Stdio};

use anyhow::{Context, bail};
use serde::Serialize;
use serde_json::Value;

use crate::cmd::output::{bytes, write_atomically};
use crate::cmd::train::config_from_flags;

#[derive(Debug, clap::Args)]
pub(super) struct MemoryArgs {
    /// Dataset of one run (a directory or a name, as for `halo train --dataset`); repeat the
    /// flag for more runs, each in a process of its own.
    #[arg(long = "dataset", required = true)]
    datasets: Vec<String>,
    /// Directory for each run's `halo train` report and `summary.json` (created if missing).
    #[arg(long, default_value = "bench-memory")]
    out: PathBuf,
    /// `halo train` flags shared by every run, after `--` (all but --dataset and --report,
    /// which the bench sets, and --save-model and --checkpoint-dir, which every run would share).
    #[arg(last = true)]
    train: Vec<String>,
}

/// One run's figures; the memory fields are absent when the run left no complete report.
#[derive(Debug, Serialize)]
struct Run {
    dataset: String,
    /// The run's own `halo train` report.
    report: PathBuf,
    #[serde(skip_serializing_if = "Option::is_none")]
    vertices: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    edges: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    peak_rss_bytes: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    peak_bytes_per_vertex: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    estimate_bytes: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    estimate_per_peak: Option<f64>,
    /// Distributed runs: the largest share a worker held.
    #[serde(skip_serializing_if = "Option::is_none")]
    held_bytes_max: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    train_wall_s: Option<f64>,
    /// Why the run failed: its incomplete report's reason, or how the process ended.
    #[serde(skip_serializing_if = "Option::is_none")]
    error: Option<String>,
}

/// Flags the bench sets on every child itself, and outputs every child would write alike.
const RESERVED: [&str; 4] = ["--dataset", "--report", "--save-model", "--checkpoint-dir"];

#[derive(Debug, Serialize)]
struct Summary<'a> {
    train_flags: &'a [String],
    runs: &'a [Run],
}

pub(super) fn run(args: MemoryArgs) -> anyhow::Result<()> {
    if let Some(flag) = args.train.iter().find(|f| RESERVED.iter().any(|r| f.split('=').next() == Some(*r))) {
        bail!(
            "the flags after -- cannot include {flag}: the bench sets --dataset and --report of every run, and every \
             run would write the same --save-model or --checkpoint-dir"
        );
    }
    config_from_flags(&args.train).context("the halo train flags after --")?;
    std::fs::create_dir_all(&args.out).with_context(|| format!("cannot create --out {}", args.out.display()))?;
    let exe = std::env::current_exe().context("cannot find this halo binary to run halo train")?;
    let mut runs = Vec::with_capacity(args.datasets.len());
    for (i, dataset) in args.datasets.iter().enumerate() {
        let report = args.out.join(format!("{i:02}-{}.json", file_stem(dataset)));
        // A report left by an earlier bench would pass for this run's if the run wrote none.
        match std::fs::remove_file(&report) {
            Err(e) if e.kind() != std::io::ErrorKind::NotFound => {
                return Err(e).with_context(|| format!("cannot replace {}", report.display()));
            }
            _ => {}
        }
        eprintln!("halo bench memory: run {} of {}: halo train --dataset {dataset}", i + 1, args.datasets.len());
        let status = Command::new(&exe)
            .arg("train")
            .args(["--dataset", dataset])
            .arg("--report")
            .arg(&report)
            .args(&args.train)
            .stdin(Stdio::null())
            .stdout(child_stdout())
            .status()
            .with_context(|| format!("cannot start halo train for --dataset {dataset}"))?;
        runs.push(read_run(dataset, &report, status)?);
        // Written after every run, so an interrupted bench keeps the runs it finished.
        let summary = serde_json::to_string_pretty(&Summary { train_flags: &args.train, runs: &runs })?;
        write_atomically(&args.out.join("summary.json"), &(summary + "\n"), "--out")?;
    }
    println!("{}", table(&runs));
    let failed: Vec<_> = runs.iter().filter(|r| r.error.is_some()).map(|r| r.dataset.as_str()).collect();
    if !failed.is_empty() {
        bail!(
            "{} of {} runs failed ({}); their reasons are in {}",
            failed.len(),
            runs.len(),
            failed.join(", "),
            args.out.join("summary.json").display()
        );
    }
    Ok(())
}

/// Where a child's summary line goes: this process's stderr, with its progress, so that the
/// bench's stdout is its table alone.
fn child_stdout() -> Stdio {
    #[cfg(unix)]
    if let Ok(fd) = std::os::fd::AsFd::as_fd(&std::io::stderr()).try_clone_to_owned() {
        return Stdio::from(fd);
    }
    Stdio::inherit()
}

/// A file-name-safe form of a dataset argument (its last path component).
fn file_stem(dataset: &str) -> String {
    let name = Path::new(dataset).file_name().map_or(dataset.into(), |n| n.to_string_lossy());
    name.chars().map(|c| if c.is_ascii_alphanumeric() || c == '-' || c == '_' { c } else { '_' }).collect()
}

/// The figures of the run that wrote `report` and ended with `status`.
fn read_run(dataset: &str, report: &Path, status: ExitStatus) -> anyhow::Result<Run> {
    let json: Option<Value> = match std::fs::read(report) {
        Ok(bytes) => Some(
            serde_json::from_slice(&bytes).with_context(|| format!("the report {} is not JSON", report.display()))?,
        ),
        Err(_) => None,
    };
    let mut run = Run {
        dataset: dataset.to_string(),
        report: report.to_path_buf(),
        vertices: None,
        edges: None,
        peak_rss_bytes: None,
        peak_bytes_per_vertex: None,
        estimate_bytes: None,
        estimate_per_peak: None,
        held_bytes_max: None,
        train_wall_s: None,
        error: None,
    };
    let complete = json.as_ref().filter(|j| status.success() && j.get("final").is_some());
    let Some(json) = complete else {
        let reason = json.as_ref().and_then(|j| j["reason"].as_str()).map(str::to_string);
        run.error = Some(reason.unwrap_or_else(|| ended(status)));
        return Ok(run);
    };
    let last = &json["final"];
    run.vertices = json["graph"]["vertices"].as_u64();
    run.edges = json["graph"]["edges"].as_u64();
    run.peak_rss_bytes = last["peak_rss_bytes"].as_u64();
    run.estimate_bytes = last["memory"]["estimate_bytes"].as_u64();
    run.held_bytes_max = last["method"]["held_bytes_max"].as_u64();
    run.train_wall_s = last["train_wall_s"].as_f64();
    if let (Some(peak), Some(n)) = (run.peak_rss_bytes, run.vertices.filter(|&n| n > 0)) {
        run.peak_bytes_per_vertex = Some(peak as f64 / n as f64);
    }
    if let (Some(peak), Some(estimate)) = (run.peak_rss_bytes.filter(|&p| p > 0), run.estimate_bytes) {
        run.estimate_per_peak = Some(estimate as f64 / peak as f64);
    }
    Ok(run)
}

/// How a child that left no reason ended.
fn ended(status: ExitStatus) -> String {
    #[cfg(unix)]
    if let Some(signal) = std::os::unix::process::ExitStatusExt::signal(&status) {
        return format!(
            "halo train was killed by signal {signal}{}, leaving no report",
            if signal == 9 { " (the kernel's OOM killer, if memory ran out)" } else { "" }
        );
    }
    format!("halo train ended with {status} and left no report")
}

/// The runs as a Markdown table, failures with the first line of their reason.
fn table(runs: &[Run]) -> String {
    let mut text = String::from(
        "| dataset | vertices | edges | peak RSS | per vertex | estimate | estimate / peak | largest share | training s |\n\
         |---|---|---|---|---|---|---|---|---|\n",
    );
    let opt = |v: Option<String>| v.unwrap_or_else(|| "-".into());
    for r in runs {
        if let Some(error) = &r.error {
            let first = error.lines().next().unwrap_or_default();
            text.push_str(&format!("| {} | failed: {first} |{}\n", r.dataset, " |".repeat(7)));
            continue;
        }
        text.push_str(&format!(
            "| {} | {} | {} | {} | {} | {} | {} | {} | {} |\n",
            r.dataset,
            opt(r.vertices.map(|v| v.to_string())),
            opt(r.edges.map(|e| e.to_string())),
            opt(r.peak_rss_bytes.map(|b| bytes(b as f64))),
            opt(r.peak_bytes_per_vertex.map(|b| format!("{b:.0} B"))),
            opt(r.estimate_bytes.map(|b| bytes(b as f64))),
            opt(r.estimate_per_peak.map(|x| format!("{x:.3}"))),
            opt(r.held_bytes_max.map(|b| bytes(b as f64))),
            opt(r.train_wall_s.map(|s| format!("{s:.1}"))),
        ));
    }
    text.trim_end().to_string()
}
