//! The grid runner: every variant x seed through [`crate::run`], each report kept on disk so a
//! rerun resumes, then the results table.
//!
//! Each report is kept under `runs/`, written atomically, and reused by a rerun when it parses and
//! has the same configuration.

use graph_partition::LoadOptions;
use std::path::Path;
use std::time::Instant;

use super::error::ExperimentError;
use super::spec::{ExperimentSpec, Variant};
use super::table::{RunRow, Table};
use crate::config::TrainConfig;
use crate::report::Report;
use crate::train_loop::EpochObserver;

/// The results table as JSON, in the output directory.
pub const RESULTS_JSON: &str = "results.json";
/// The results table as CSV, in the output directory.
pub const RESULTS_CSV: &str = "results.csv";
/// The folder of the per-run reports, in the output directory.
pub const RUNS_DIR: &str = "runs";

/// An experiment with every variant's configuration built, ready to run.
#[derive(Debug, Clone)]
pub struct Plan {
    spec: ExperimentSpec,
    configs: Vec<TrainConfig>,
}

impl Plan {
    /// Builds each variant's configuration from its full `halo train` flags (base flags first)
    /// with `config_of`, so that a bad flag stops the experiment before any run starts. The seed
    /// and report path of the configurations are replaced per run.
    pub fn new<E>(
        spec: ExperimentSpec,
        mut config_of: impl FnMut(&Variant, &[String]) -> Result<TrainConfig, E>,
    ) -> Result<Self, E> {
        let configs = spec.variants.iter().map(|v| config_of(v, &spec.train_flags(v))).collect::<Result<_, E>>()?;
        Ok(Self { spec, configs })
    }

    /// The experiment.
    pub fn spec(&self) -> &ExperimentSpec {
        &self.spec
    }

    /// Variants x seeds.
    pub fn total_runs(&self) -> usize {
        self.spec.variants.len() * self.spec.seeds.len()
    }
}

/// One run of the grid, as the observer sees it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RunId<'a> {
    /// The variant's name.
    pub variant: &'a str,
    /// The run's seed.
    pub seed: u64,
    /// 0-based position in the order the grid visits runs.
    pub index: usize,
    /// Number of runs in the grid.
    pub total: usize,
}

/// Where a run's figures came from.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Outcome {
    /// The run trained now, taking this many seconds (dataset loading included).
    Trained {
        /// Wall-clock seconds.
        seconds: f64,
    },
    /// A complete report of the same configuration was already on disk.
    Skipped,
}

/// Watches the grid: each run's start and end, and every epoch of the runs that train.
pub trait GridObserver: EpochObserver {
    /// A run is about to train.
    fn run_started(&mut self, run: &RunId<'_>);
    /// A run finished or was skipped; `row` holds its figures.
    fn run_finished(&mut self, run: &RunId<'_>, row: &RunRow, outcome: Outcome);
}

/// Runs every variant x seed of `plan`, writing each run's report to `out_dir/runs/` and the
/// table to `out_dir/results.{json,csv}`; a bare dataset name is looked up under `datasets_root`.
///
/// Everything that can be checked is checked before the first run: the variants' configurations
/// and the output paths. A run whose report is already on disk, complete and made with the same
/// configuration, is not run again. A failing run stops the grid; the runs before it keep their
/// reports and the table is not written.
pub fn run(
    plan: &Plan,
    out_dir: &Path,
    datasets_root: &Path,
    observer: &mut dyn GridObserver,
) -> Result<Table, ExperimentError> {
    let spec = &plan.spec;
    for (variant, config) in spec.variants.iter().zip(&plan.configs) {
        check_config(&variant.name, config)?;
    }
    prepare_outputs(out_dir, spec)?;
    let total = plan.total_runs();
    let mut rows = Vec::with_capacity(total);
    // Seed-major order: a grid stopped half way leaves whole seeds, each comparable with the baseline.
    let runs = spec.seeds.iter().flat_map(|&seed| spec.variants.iter().zip(&plan.configs).map(move |vc| (seed, vc)));
    for (index, (seed, (variant, config))) in runs.enumerate() {
        let id = RunId { variant: &variant.name, seed, index, total };
        let relative = run_report_path(&variant.name, seed);
        let path = out_dir.join(&relative);
        let mut config = config.clone();
        config.seed = seed;
        config.report = Some(path.clone());
        let (text, outcome) = match finished_report(&path, &config) {
            Some(text) => (text, Outcome::Skipped),
            None => {
                observer.run_started(&id);
                let started = Instant::now();
                let report = train(&config, datasets_root, observer, &id)?;
                let text = pretty(&report, &id)?;
                write_atomically(&path, &text)?;
                (text, Outcome::Trained { seconds: started.elapsed().as_secs_f64() })
            }
        };
        // Figures are read from the report's text in both cases: serde_json's parser is not
        // correctly rounded for every float, so a rerun that read the file while the first run
        // used the in-memory report could differ in the last bit.
        let json = serde_json::from_str(&text).map_err(|source| serialise_error(&id, source))?;
        let row = RunRow::from_report(&variant.name, seed, &json, relative);
        observer.run_finished(&id, &row, outcome);
        rows.push(row);
    }
    let table = Table::new(spec, rows);
    let json = serde_json::to_string_pretty(&table)
        .map_err(|source| ExperimentError::Output { path: out_dir.join(RESULTS_JSON), source: source.into() })?;
    write_atomically(&out_dir.join(RESULTS_JSON), &(json + "\n"))?;
    write_atomically(&out_dir.join(RESULTS_CSV), &table.to_csv())?;
    Ok(table)
}

/// The report of one run, relative to the output directory (`/`-separated on every platform,
/// as it appears in the results).
fn run_report_path(variant: &str, seed: u64) -> String {
    format!("{RUNS_DIR}/{variant}-seed{seed}.json")
}

fn check_config(variant: &str, config: &TrainConfig) -> Result<(), ExperimentError> {
    config.validate().map_err(|source| ExperimentError::Variant { variant: variant.to_string(), source })?;
    if config.threads.is_some() {
        return Err(ExperimentError::Threads { variant: variant.to_string() });
    }
    Ok(())
}

/// Creates the output folders and checks that every file the experiment writes can be written.
fn prepare_outputs(out_dir: &Path, spec: &ExperimentSpec) -> Result<(), ExperimentError> {
    let runs_dir = out_dir.join(RUNS_DIR);
    std::fs::create_dir_all(&runs_dir).map_err(|source| ExperimentError::Output { path: runs_dir.clone(), source })?;
    let run_files = spec.variants.iter().flat_map(|v| spec.seeds.iter().map(|&s| run_report_path(&v.name, s)));
    let files = [RESULTS_JSON.to_string(), RESULTS_CSV.to_string()].into_iter().chain(run_files);
    for file in files.map(|f| out_dir.join(f)) {
        if file.is_dir() {
            return Err(ExperimentError::NotAFile { path: file });
        }
    }
    for dir in [out_dir, &runs_dir] {
        // Creating a file is the one portable test of write permission.
        let probe = dir.join(format!(".halo-experiment-probe-{}", std::process::id()));
        std::fs::File::create_new(&probe)
            .and_then(|_| std::fs::remove_file(&probe))
            .map_err(|source| ExperimentError::Output { path: dir.to_path_buf(), source })?;
    }
    Ok(())
}

/// The text of the report at `path` if it is complete (it parses as a whole report) and was made
/// with `config` (whatever the output directory was called then); otherwise the run is due.
fn finished_report(path: &Path, config: &TrainConfig) -> Option<String> {
    let text = match std::fs::read_to_string(path) {
        Ok(text) => text,
        Err(err) if err.kind() == std::io::ErrorKind::NotFound => return None,
        Err(err) => {
            tracing::warn!("{}: cannot read ({err}); running it again", path.display());
            return None;
        }
    };
    let mut report: Report = match serde_json::from_str(&text) {
        Ok(report) => report,
        Err(err) => {
            tracing::warn!("{}: not a complete report ({err}); running it again", path.display());
            return None;
        }
    };
    report.config.report.clone_from(&config.report);
    if report.config != *config {
        tracing::warn!("{}: made with other settings than the experiment's; running it again", path.display());
        return None;
    }
    Some(text)
}

fn train(
    config: &TrainConfig,
    datasets_root: &Path,
    observer: &mut dyn GridObserver,
    id: &RunId<'_>,
) -> Result<Report, ExperimentError> {
    let failed =
        |source| ExperimentError::Run { variant: id.variant.to_string(), seed: id.seed, source: Box::new(source) };
    let source = crate::data::Source::Load(datasets_root, &LoadOptions::default());
    let report: Option<Report> = crate::run(config, source, observer).map_err(failed)?;
    report.ok_or_else(|| ExperimentError::NoReport { variant: id.variant.to_string(), seed: id.seed })
}

/// The report file's text, serialised from the typed report: through a `Value` the `f32`
/// settings would print as their `f64` widening (`0.01` as `0.009999999776482582`).
fn pretty(report: &Report, id: &RunId<'_>) -> Result<String, ExperimentError> {
    serde_json::to_string_pretty(report).map(|json| json + "\n").map_err(|source| serialise_error(id, source))
}

fn serialise_error(id: &RunId<'_>, source: serde_json::Error) -> ExperimentError {
    ExperimentError::Serialise { variant: id.variant.to_string(), seed: id.seed, source }
}

/// [`write_atomic`](graph_partition::fs::write_atomic) with the path in the error: an
/// interrupted write never leaves a truncated file that a rerun would take for a finished one.
fn write_atomically(path: &Path, text: &str) -> Result<(), ExperimentError> {
    graph_partition::fs::write_atomic(path, |tmp| std::fs::write(tmp, text))
        .map_err(|e| ExperimentError::Output { path: e.path, source: e.source })
}
