//! `cargo xtask cluster table --halo PATH --dataset DIR`: the papers' claims on the wire. For
//! each link rate, on 4 hosts of one rank each: `halo bench comm --backend mpi` measures the
//! links, then vanilla (edge- and vertex-cut) and each full-batch method train on the same cut
//! with `--links` set to that measurement, and one markdown table row per run is printed.
//!
//! Each row is the median of the run's steady epochs ([`steady`]): after the first, and for
//! AdaQP after its first bit-width assignment and without one. AdaQP assigns every
//! [`ADAQP_PERIOD`] epochs here; a line under each rate gives what an assignment adds to its
//! epoch, and that cost spread over the default period of 50 epochs.
//!
//! Columns: the step's wall clock and its ratio to
//! vanilla's on the same cut; the CPU floor (the report's `cpu_floor_s`: the CPU seconds the
//! ranks' processes used in the step over the cores of the machine they share) over vanilla's
//! step;
//! bytes sent, the measured communication share (`1 - compute_s /
//! wall_s`: the time the step spent waiting on the wire), the modeled epoch and its ratio to
//! the measured step, the evaluation's time, and the best validation accuracy.

use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::{Context, Result, ensure};
use serde_json::Value;

use super::reports::{epochs, read, scratch};
use super::{Cpus, Rate, Shape, down, net, run_command, up};

/// Epochs between AdaQP's bit-width assignments in the table: the first comes after epoch 3,
/// so that a run of 8 epochs has steady epochs at the assigned widths.
const ADAQP_PERIOD: &str = "3";

/// AdaQP's default assignment period, over which the line under each rate spreads the cost.
const ADAQP_DEFAULT_PERIOD: f64 = 50.0;

/// The runs of one rate: (label, method, extra flags, the vanilla run it is compared with).
const RUNS: [(&str, &str, &[&str], &str); 6] = [
    ("vanilla, edge-cut (METIS)", "vanilla", &[], "vanilla, edge-cut (METIS)"),
    ("adaqp", "adaqp", &["--assign-period", ADAQP_PERIOD], "vanilla, edge-cut (METIS)"),
    ("adaqp --overlap", "adaqp", &["--assign-period", ADAQP_PERIOD, "--overlap"], "vanilla, edge-cut (METIS)"),
    ("ecgraph", "ecgraph", &[], "vanilla, edge-cut (METIS)"),
    ("vanilla, vertex-cut (EBV)", "vanilla", &["--cut", "vertex"], "vanilla, vertex-cut (EBV)"),
    ("cdfgnn", "cdfgnn", &[], "vanilla, vertex-cut (EBV)"),
];

/// What the table is run on.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TableSpec {
    pub halo: PathBuf,
    pub dataset: PathBuf,
    /// The link rates, one table block each; empty: find the rate where vanilla's measured
    /// communication share is within [`TARGET_SHARE`] (`Runs::find_rate`).
    pub rates: Vec<Rate>,
    pub hosts: usize,
    /// Ranks per host.
    pub ranks: usize,
    /// Each host's cores; `None`: the hosts share the machine's.
    pub cpus: Option<Cpus>,
    pub epochs: usize,
    /// Extra `halo train` flags for every run (`--layers 2 --hidden 128`).
    pub train: Vec<String>,
}

/// The communication share of vanilla's step that `--rates auto` looks for.
pub const TARGET_SHARE: (f64, f64) = (0.6, 0.8);

/// Runs every rate's rows and prints the table; the cluster is removed whatever happens.
pub fn table(spec: &TableSpec) -> Result<()> {
    let halo = spec.halo.canonicalize().with_context(|| format!("--halo {}: no such binary", spec.halo.display()))?;
    let dataset =
        spec.dataset.canonicalize().with_context(|| format!("--dataset {}: no such folder", spec.dataset.display()))?;
    let first = spec.rates.first().cloned().unwrap_or(Rate::parse("1gbit")?);
    let shape = Shape { hosts: spec.hosts, ranks: spec.ranks, rate: first, cpus: spec.cpus };
    up(&shape)?;
    let outcome = rows(&halo, &dataset, spec, &shape);
    let removed = down();
    outcome?;
    removed
}

fn rows(halo: &Path, dataset: &Path, spec: &TableSpec, shape: &Shape) -> Result<()> {
    let dir = scratch("table")?;
    let runs = Runs { halo, dataset, spec, shape, dir: &dir };
    let rates = if spec.rates.is_empty() { vec![runs.find_rate()?] } else { spec.rates.clone() };
    println!(
        "| link | CPU / host | run | step (s) | / vanilla, same cut | CPU floor / vanilla | bytes / epoch | measured comm share | modeled epoch (s) | modeled / measured | eval (s) | best val acc |"
    );
    println!("|---|---|---|---|---|---|---|---|---|---|---|---|");
    let mut notes = Vec::new();
    for rate in &rates {
        let fit = runs.measure_links(rate)?;
        let mut vanilla: Vec<(&str, f64)> = Vec::new();
        for (label, method, extra, baseline) in RUNS {
            let r = runs.train(rate, &fit, label, method, extra, spec.epochs)?;
            let step = median(&r, |e| e["wall_s"].as_f64());
            if method == "vanilla" {
                vanilla.push((label, step));
            }
            let base = vanilla.iter().find(|(l, _)| *l == baseline).map_or(f64::NAN, |(_, s)| *s);
            let bytes = median(&r, |e| Some((e["bytes_intra"].as_u64()? + e["bytes_inter"].as_u64()?) as f64));
            let floor = median(&r, |e| e["method"]["cpu_floor_s"].as_f64());
            let modeled = median(&r, |e| e["modeled_epoch_s"].as_f64());
            let eval = median(&r, |e| e["eval_s"].as_f64());
            if let Some(cost) = assignment_cost(&r, step) {
                notes.push(format!(
                    "{}: an adaqp epoch that assigns bit-widths takes {cost:.3} s more than a steady one (every {} epochs: {:.4} s an epoch)",
                    rate.label(),
                    ADAQP_DEFAULT_PERIOD,
                    cost / ADAQP_DEFAULT_PERIOD
                ));
            }
            println!(
                "| {} | {} | {label} | {step:.3} | {:.2} | {:.2} | {:.1} MiB | {:.0}% | {modeled:.3} | {:.2} | {eval:.3} | {:.4} |",
                rate.label(),
                shape.cpu_label(),
                step / base,
                floor / base,
                bytes / (1 << 20) as f64,
                100.0 * median(&r, share),
                modeled / step,
                r["final"]["best_val_acc"].as_f64().unwrap_or(f64::NAN),
            );
        }
    }
    for note in notes {
        println!("\n{note}");
    }
    let _ = std::fs::remove_dir_all(&dir);
    Ok(())
}

/// The measured communication share of an epoch's step: `1 - compute_s / wall_s`, the time it
/// spent waiting on the wire.
fn share(epoch: &Value) -> Option<f64> {
    Some(1.0 - epoch["compute_s"].as_f64()? / epoch["wall_s"].as_f64()?)
}

/// Probes [`Runs::find_rate`] makes before it gives up.
const RATE_PROBES: usize = 6;
/// Epochs of each probe's vanilla run.
const PROBE_EPOCHS: usize = 4;

/// The runs of one table on its cluster.
struct Runs<'a> {
    halo: &'a Path,
    dataset: &'a Path,
    spec: &'a TableSpec,
    shape: &'a Shape,
    dir: &'a Path,
}

impl Runs<'_> {
    /// Shapes every link to `rate` and measures the links (`halo bench comm --report`); returns
    /// the report's path, for `--links`.
    fn measure_links(&self, rate: &Rate) -> Result<PathBuf> {
        for i in 0..self.shape.hosts {
            net::shape(i, rate)?;
        }
        let fit = self.dir.join(format!("comm-{}.json", rate.label()));
        let bench = ["bench", "comm", "--backend", "mpi", "--bytes", "4194304", "--iterations", "3", "--report"];
        let mut command = vec![self.halo.display().to_string()];
        command.extend(bench.map(String::from));
        command.push(fit.display().to_string());
        run(self.shape, &command, "halo bench comm")?;
        Ok(fit)
    }

    /// Trains `method` with `extra` flags for `epochs` on links measured in `fit`; returns its report.
    fn train(
        &self,
        rate: &Rate,
        fit: &Path,
        label: &str,
        method: &str,
        extra: &[&str],
        epochs: usize,
    ) -> Result<Value> {
        let report = self.dir.join(format!("{}-{label}.json", rate.label()).replace([' ', ',', '(', ')'], "_"));
        let mut command: Vec<String> = [
            &self.halo.display().to_string(),
            "train",
            "--dataset",
            &self.dataset.display().to_string(),
            "--method",
            method,
            "--epochs",
            &epochs.to_string(),
            "--links",
            &fit.display().to_string(),
            "--quiet",
            "--report",
            &report.display().to_string(),
        ]
        .map(String::from)
        .to_vec();
        command.extend(extra.iter().map(|s| s.to_string()));
        command.extend(self.spec.train.iter().cloned());
        run(self.shape, &command, label)?;
        read(&report)
    }

    /// The rate at which vanilla's measured communication share lies within [`TARGET_SHARE`]
    /// on this shape. Communication time goes as one over the rate and compute does not, so
    /// the share's odds `s / (1 - s)` go as one over the rate: each probe moves the rate by the
    /// ratio of the odds it measured to the target's (at most 8x a step).
    fn find_rate(&self) -> Result<Rate> {
        let (low, high) = TARGET_SHARE;
        let odds = |s: f64| s / (1.0 - s);
        let target = odds((low + high) / 2.0);
        let mut mbit = 1000.0_f64;
        for _ in 0..RATE_PROBES {
            let rate = Rate::parse(&format!("{}mbit", mbit.round().max(1.0)))?;
            let fit = self.measure_links(&rate)?;
            let r = self.train(&rate, &fit, "probe", "vanilla", &[], PROBE_EPOCHS)?;
            let measured = median(&r, share);
            eprintln!("cluster table: at {} vanilla's communication share is {:.0}%", rate.label(), 100.0 * measured);
            if (low..=high).contains(&measured) {
                return Ok(rate);
            }
            let factor = if measured.is_finite() && measured > 0.0 { odds(measured.min(0.999)) / target } else { 8.0 };
            mbit *= factor.clamp(1.0 / 8.0, 8.0);
        }
        anyhow::bail!(
            "cluster table: no rate within {RATE_PROBES} probes gives vanilla a communication share of {:.0}-{:.0}%",
            100.0 * low,
            100.0 * high
        )
    }
}

fn run(shape: &Shape, command: &[String], what: &str) -> Result<()> {
    let finished = run_command(shape, Duration::from_secs(1800), command)?;
    ensure!(finished.status.success() && !finished.stopped, "cluster table: {what} failed ({})", finished.status);
    Ok(())
}

/// Whether an epoch record carries a bit-width assignment.
fn assigns(epoch: &Value) -> bool {
    !epoch["method"]["controller"]["assignment"].is_null()
}

/// The epochs a row is the median of: after the first (all of them when there is one), and in a
/// run that assigns bit-widths, after the first assignment and without one.
fn steady(report: &Value) -> Vec<Value> {
    let epochs = epochs(report);
    let first = epochs.iter().position(assigns).map_or(usize::from(epochs.len() > 1), |i| i + 1);
    let kept: Vec<Value> = epochs.iter().skip(first).filter(|e| !assigns(e)).cloned().collect();
    if kept.is_empty() { epochs } else { kept }
}

/// How much longer the median epoch that assigns takes than the steady `step`; `None` when no
/// epoch assigns.
fn assignment_cost(report: &Value, step: f64) -> Option<f64> {
    middle(epochs(report).iter().filter(|e| assigns(e)).filter_map(|e| e["wall_s"].as_f64()).collect())
        .map(|wall| wall - step)
}

/// The median of `values` (the upper one of an even count); `None` when there are none.
fn middle(mut values: Vec<f64>) -> Option<f64> {
    values.sort_by(f64::total_cmp);
    values.get(values.len() / 2).copied()
}

/// The median of `field` over the [`steady`] epochs.
fn median(report: &Value, field: impl Fn(&Value) -> Option<f64>) -> f64 {
    middle(steady(report).iter().filter_map(&field).collect()).unwrap_or(f64::NAN)
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn rows_are_the_median_of_the_steady_epochs() {
        let epoch = |wall: f64, assign: bool| {
            let controller = if assign { json!({"assignment": {"objective": 0.5}}) } else { json!({}) };
            json!({"wall_s": wall, "method": {"controller": controller}})
        };
        // No assignment: every epoch after the first.
        let plain = json!({"epochs": [epoch(9.0, false), epoch(1.0, false), epoch(3.0, false), epoch(2.0, false)]});
        assert_eq!(median(&plain, |e| e["wall_s"].as_f64()), 2.0);
        assert_eq!(assignment_cost(&plain, 2.0), None);
        // Assignments after epochs 3 and 6: epochs 4, 5, 7 and 8 count.
        let walls = [9.0, 8.0, 5.0, 1.0, 2.0, 6.0, 3.0, 4.0];
        let assigned =
            json!({"epochs": walls.iter().enumerate().map(|(i, &w)| epoch(w, i == 2 || i == 5)).collect::<Vec<_>>()});
        assert_eq!(median(&assigned, |e| e["wall_s"].as_f64()), 3.0);
        assert_eq!(assignment_cost(&assigned, 3.0), Some(3.0));
        // One epoch: itself.
        let one = json!({"epochs": [epoch(7.0, false)]});
        assert_eq!(median(&one, |e| e["wall_s"].as_f64()), 7.0);
    }
}
