//! `halo experiment FILE.toml --out DIR`: a grid of `halo train` variants x seeds, summarised
//! over seeds and compared with a baseline variant.
//!
//! The file format and the outputs are described in `trainer::experiment` and
//! `experiments/README.md`. This module reads each variant's flags with `halo train`'s own parser,
//! shows progress on stderr and prints a summary; the runner and the statistics are the trainer's.
//!
//! Each variant's `TrainConfig` comes from `train::config_from_flags`; the first seed's runs are
//! drawn into `epochs.svg`.

use std::io::IsTerminal;
use std::path::{Path, PathBuf};

use anyhow::Context;
use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use trainer::experiment::{
    self, ExperimentSpec, GridObserver, Metric, Outcome, Plan, RESULTS_CSV, RESULTS_JSON, RUNS_DIR, RunId, RunRow,
    Table,
};
use trainer::report::Best;
use trainer::report::EpochRecord;
use trainer::train_loop::EpochObserver;

use super::output::{Place, refuse_clashes};
use super::train::config_from_flags;
use super::{plot, reports};

#[derive(Debug, clap::Args)]
pub struct Args {
    /// The experiment: seeds, base flags, baseline and `[[variant]]` tables (see experiments/README.md).
    #[arg(value_name = "FILE.toml")]
    file: PathBuf,
    /// Output directory: results.json, results.csv and `runs/<variant>-seed<k>.json`. Running again
    /// into the same directory skips the runs whose report is there.
    #[arg(long, value_name = "DIR")]
    out: PathBuf,
    /// Where a bare dataset name (`--dataset cora`) is looked up.
    #[arg(long, value_name = "DIR", default_value = "datasets")]
    datasets: PathBuf,
    /// No progress on stderr.
    #[arg(long, short)]
    quiet: bool,
}

pub fn run(args: Args) -> anyhow::Result<()> {
    let mut places = vec![Place::input("the experiment", &args.file)];
    places.push(Place::output_folder(format!("--out's {RUNS_DIR}/"), &args.out.join(RUNS_DIR)));
    places.extend(
        [RESULTS_JSON, RESULTS_CSV, PLOT_SVG]
            .map(|name| Place::output(format!("--out's {name}"), &args.out.join(name))),
    );
    refuse_clashes(&places)?;
    let spec = ExperimentSpec::from_file(&args.file)?;
    let file = args.file.display().to_string();
    // A flag at fault in `base` fails alone as it fails in every variant: named at its own line.
    let base_error = config_from_flags(&spec.base).err().map(|e| format!("{e:#}"));
    let base_spec = spec.clone();
    let plan = Plan::new(spec, |variant, flags| {
        config_from_flags(flags).map_err(|e| {
            let message = format!("{e:#}");
            match base_spec.base_line_named(&message).filter(|_| base_error.as_ref() == Some(&message)) {
                Some(line) => anyhow::anyhow!("{file}:{line}: base flags: {message}"),
                None => e.context(format!("{file}:{}: flags of variant `{}`", variant.line, variant.name)),
            }
        })
    })?;
    let mut progress = Progress::new(plan.total_runs(), args.quiet);
    let table = experiment::run(&plan, &args.out, &args.datasets, &mut progress);
    progress.bar.finish_and_clear();
    let table = table.with_context(|| format!("experiment {file}"))?;
    print!("{}", summary(&table, &args.out));
    // The table is the experiment's result; a picture that cannot be drawn is only a warning.
    match plot_first_seed(&table, &args.out) {
        Ok(path) => println!("epochs of seed {} drawn in {}", table.seeds[0], path.display()),
        Err(err) => eprintln!("warning: no plot: {err:#}"),
    }
    Ok(())
}

/// Draws every variant's run of the first seed into `PLOT_SVG` beside the table, one colour per
/// variant.
fn plot_first_seed(table: &Table, out: &Path) -> anyhow::Result<PathBuf> {
    let rows: Vec<&RunRow> = table.runs.iter().filter(|r| r.seed == table.seeds[0]).collect();
    let paths: Vec<PathBuf> = rows.iter().map(|r| out.join(&r.report)).collect();
    let mut loaded = reports::load(&paths)?;
    for (report, row) in loaded.iter_mut().zip(&rows) {
        report.label.clone_from(&row.variant);
    }
    let path = out.join(PLOT_SVG);
    let (panels, _) = plot::panels(&loaded, &[]);
    plot::draw(&path, &loaded, &panels, "--out")?;
    Ok(path)
}

/// The picture `halo experiment` draws next to its table.
const PLOT_SVG: &str = "epochs.svg";

/// What the experiment prints when it ends: one line per variant against the baseline.
fn summary(table: &Table, out: &Path) -> String {
    let fixed = |v: Option<f64>, digits: usize| v.map_or("n/a".to_string(), |v| format!("{v:.digits$}"));
    let mut text = format!(
        "{}: {} variants x {} seeds, baseline `{}`; {} and {} in {}\n",
        table.experiment,
        table.variants.len(),
        table.seeds.len(),
        table.baseline,
        RESULTS_JSON,
        RESULTS_CSV,
        out.display()
    );
    text += &format!(
        "{:<16} {:>18} {:>20} {:>12} {:>14}\n",
        "variant", "test acc", "diff vs baseline", "bytes ratio", "modeled ratio"
    );
    for v in &table.variants {
        let acc = v.figures.get(Metric::TestAcc).copied().flatten();
        let diff = v.test_acc_diff.as_ref().map(|d| d.estimate);
        let ratio = |m| fixed(v.ratios.get(m).copied().flatten(), 3);
        text += &format!(
            "{:<16} {:>18} {:>20} {:>12} {:>14}\n",
            v.name,
            format!("{} ± {}", fixed(acc.map(|e| e.mean), 4), fixed(acc.and_then(|e| e.stderr), 4)),
            format!("{} ± {}", fixed(diff.map(|e| e.mean), 4), fixed(diff.and_then(|e| e.stderr), 4)),
            ratio(Metric::BytesTotal),
            ratio(Metric::ModeledTrainS),
        );
    }
    text
}

/// Progress on stderr: a bar over the runs on a terminal, one line per run elsewhere, nothing
/// with `--quiet`.
struct Progress {
    bar: ProgressBar,
    lines: bool,
    current: String,
}

impl Progress {
    fn new(runs: usize, quiet: bool) -> Self {
        let terminal = std::io::stderr().is_terminal();
        let bar = ProgressBar::with_draw_target(
            Some(runs as u64),
            if quiet || !terminal { ProgressDrawTarget::hidden() } else { ProgressDrawTarget::stderr() },
        );
        bar.set_style(
            ProgressStyle::with_template("run {pos}/{len} {bar:25} {elapsed_precise} {msg}")
                .expect("the template is a valid constant"),
        );
        Self { bar, lines: !quiet && !terminal, current: String::new() }
    }
}

impl EpochObserver for Progress {
    fn on_epoch(&mut self, r: &EpochRecord, best: &Best) {
        self.bar.set_message(format!(
            "{}: epoch {} | val {:.3} | best val {:.3} @ {}",
            self.current, r.epoch, r.val_acc, best.val_acc, best.epoch
        ));
    }
}

impl GridObserver for Progress {
    fn run_started(&mut self, run: &RunId<'_>) {
        self.current = format!("{} seed {}", run.variant, run.seed);
        self.bar.set_message(self.current.clone());
    }

    fn run_finished(&mut self, run: &RunId<'_>, row: &RunRow, outcome: Outcome) {
        self.bar.inc(1);
        if self.lines {
            let how = match outcome {
                Outcome::Trained { seconds } => format!("{seconds:.1} s"),
                Outcome::Skipped => format!("skipped, {} is complete", row.report),
            };
            let acc = row.value(Metric::TestAcc).map_or("n/a".to_string(), |a| format!("{a:.4}"));
            eprintln!("[{}/{}] {} seed {}: test acc {acc}, {how}", run.index + 1, run.total, run.variant, run.seed);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use gnn_core::ConvKind;
    use trainer::config::Method;

    fn flags(list: &[&str]) -> Vec<String> {
        list.iter().map(|s| s.to_string()).collect()
    }

    /// Every committed experiment's variants are valid `halo train` flags, so that a refusal
    /// added to `train` shows here and not when someone reruns the experiment.
    #[test]
    fn every_committed_experiment_resolves() {
        let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../experiments");
        let mut checked = 0;
        for entry in std::fs::read_dir(&dir).unwrap() {
            let path = entry.unwrap().path();
            if path.extension().is_none_or(|e| e != "toml") {
                continue;
            }
            let spec = ExperimentSpec::from_file(&path).unwrap();
            let file = path.display().to_string();
            Plan::new(spec, |variant, flags| {
                config_from_flags(flags).with_context(|| format!("{file}: variant `{}`", variant.name))
            })
            .unwrap_or_else(|err| panic!("{err:#}"));
            checked += 1;
        }
        assert!(checked > 10, "{checked} experiments under {}", dir.display());
    }

    #[test]
    fn variant_flags_mean_what_they_mean_to_halo_train() {
        let c =
            config_from_flags(&flags(&["--model", "sage", "--epochs", "3", "--method", "vanilla", "--workers", "2"]))
                .unwrap();
        assert_eq!((c.model, c.epochs, c.method.name, c.distributed.workers), (ConvKind::Sage, 3, Method::Vanilla, 2));
        assert_eq!(config_from_flags(&[]).unwrap(), trainer::TrainConfig::default());
    }

    #[test]
    fn bad_variant_flags_are_named_in_one_line() {
        for (list, want) in [
            (&["--workers", "many"][..], "--workers"),
            (&["--epochz", "3"][..], "--epochz"),
            (&["--dropout", "2"][..], "dropout"),
        ] {
            let message = format!("{:#}", config_from_flags(&flags(list)).unwrap_err());
            assert!(message.contains(want) && !message.contains("Usage"), "{list:?}: {message}");
        }
    }
}
