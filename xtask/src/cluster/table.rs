//! `cargo xtask cluster table --halo PATH --dataset DIR`: the papers' claims on the wire. For
//! each link rate, on 4 hosts of one rank each: `halo bench comm --backend mpi` measures the
//! links, then vanilla (edge- and vertex-cut) and each full-batch method train on the same cut
//! with `--links` set to that measurement, and one markdown table row per run is printed.
//!
//! Columns (medians of the epochs after the first): the step's wall clock and its ratio to
//! vanilla's on the same cut, bytes sent, the measured communication share (`1 - compute_s /
//! wall_s`: the time the step spent waiting on the wire), the modeled epoch and its ratio to
//! the measured step, the evaluation's time, and the best validation accuracy.

use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::{Context, Result, ensure};
use serde_json::Value;

use super::reports::{epochs, read, scratch};
use super::{Rate, Shape, down, net, run_command, up};

/// The runs of one rate: (label, method, extra flags, the vanilla run it is compared with).
const RUNS: [(&str, &str, &[&str], &str); 5] = [
    ("vanilla, edge-cut (METIS)", "vanilla", &[], "vanilla, edge-cut (METIS)"),
    ("adaqp", "adaqp", &[], "vanilla, edge-cut (METIS)"),
    ("ecgraph", "ecgraph", &[], "vanilla, edge-cut (METIS)"),
    ("vanilla, vertex-cut (EBV)", "vanilla", &["--cut", "vertex"], "vanilla, vertex-cut (EBV)"),
    ("cdfgnn", "cdfgnn", &[], "vanilla, vertex-cut (EBV)"),
];

/// What the table is run on.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TableSpec {
    pub halo: PathBuf,
    pub dataset: PathBuf,
    pub rates: Vec<Rate>,
    pub hosts: usize,
    pub epochs: usize,
}

/// Runs every rate's rows and prints the table; the cluster is removed whatever happens.
pub fn table(spec: &TableSpec) -> Result<()> {
    let halo = spec.halo.canonicalize().with_context(|| format!("--halo {}: no such binary", spec.halo.display()))?;
    let dataset =
        spec.dataset.canonicalize().with_context(|| format!("--dataset {}: no such folder", spec.dataset.display()))?;
    let shape = Shape { hosts: spec.hosts, ranks: 1, rate: spec.rates[0].clone() };
    up(&shape)?;
    let outcome = rows(&halo, &dataset, spec, &shape);
    let removed = down();
    outcome?;
    removed
}

fn rows(halo: &Path, dataset: &Path, spec: &TableSpec, shape: &Shape) -> Result<()> {
    let dir = scratch("table")?;
    println!(
        "| link | run | step (s) | / vanilla, same cut | bytes / epoch | measured comm share | modeled epoch (s) | modeled / measured | eval (s) | best val acc |"
    );
    println!("|---|---|---|---|---|---|---|---|---|---|");
    for rate in &spec.rates {
        for i in 0..shape.hosts {
            net::shape(i, rate)?;
        }
        let fit = dir.join(format!("comm-{}.json", rate.label()));
        let bench = ["bench", "comm", "--backend", "mpi", "--bytes", "4194304", "--iterations", "3", "--report"]
            .map(String::from);
        let mut command = vec![halo.display().to_string()];
        command.extend(bench);
        command.push(fit.display().to_string());
        run(shape, &command, "halo bench comm")?;
        let mut vanilla: Vec<(&str, f64)> = Vec::new();
        for (label, method, extra, baseline) in RUNS {
            let report = dir.join(format!("{}-{label}.json", rate.label()).replace([' ', ',', '(', ')'], "_"));
            let mut command: Vec<String> = [
                &halo.display().to_string(),
                "train",
                "--dataset",
                &dataset.display().to_string(),
                "--method",
                method,
                "--epochs",
                &spec.epochs.to_string(),
                "--links",
                &fit.display().to_string(),
                "--quiet",
                "--report",
                &report.display().to_string(),
            ]
            .map(String::from)
            .to_vec();
            command.extend(extra.iter().map(|s| s.to_string()));
            run(shape, &command, label)?;
            let r = read(&report)?;
            let step = median(&r, |e| e["wall_s"].as_f64());
            if method == "vanilla" {
                vanilla.push((label, step));
            }
            let base = vanilla.iter().find(|(l, _)| *l == baseline).map_or(f64::NAN, |(_, s)| *s);
            let bytes = median(&r, |e| Some((e["bytes_intra"].as_u64()? + e["bytes_inter"].as_u64()?) as f64));
            let share = median(&r, |e| Some(1.0 - e["compute_s"].as_f64()? / e["wall_s"].as_f64()?));
            let modeled = median(&r, |e| e["modeled_epoch_s"].as_f64());
            let eval = median(&r, |e| e["eval_s"].as_f64());
            println!(
                "| {} | {label} | {step:.3} | {:.2} | {:.1} MiB | {:.0}% | {modeled:.3} | {:.2} | {eval:.3} | {:.4} |",
                rate.label(),
                step / base,
                bytes / (1 << 20) as f64,
                100.0 * share,
                modeled / step,
                r["final"]["best_val_acc"].as_f64().unwrap_or(f64::NAN),
            );
        }
    }
    let _ = std::fs::remove_dir_all(&dir);
    Ok(())
}

fn run(shape: &Shape, command: &[String], what: &str) -> Result<()> {
    let finished = run_command(shape, Duration::from_secs(1800), command)?;
    ensure!(finished.status.success() && !finished.stopped, "cluster table: {what} failed ({})", finished.status);
    Ok(())
}

/// The median of `field` over the epochs after the first (all of them when there is one).
fn median(report: &Value, field: impl Fn(&Value) -> Option<f64>) -> f64 {
    let epochs = epochs(report);
    let skip = usize::from(epochs.len() > 1);
    let mut values: Vec<f64> = epochs.iter().skip(skip).filter_map(&field).collect();
    values.sort_by(f64::total_cmp);
    values.get(values.len() / 2).copied().unwrap_or(f64::NAN)
}
