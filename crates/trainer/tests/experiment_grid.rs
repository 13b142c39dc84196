//! The experiment grid runner on the built-in synthetic graph: every run once, reruns skipped,
//! corrupt or stale reports run again, failures named and finished runs kept, bad settings and
//! outputs refused before any run.

use std::convert::Infallible;
use std::path::Path;

use trainer::config::{DistributedConfig, Method, MethodConfig, TrainConfig};
use trainer::experiment::{
    ExperimentError, ExperimentSpec, GridObserver, Metric, Outcome, Plan, RESULTS_CSV, RESULTS_JSON, RunId, RunRow,
    Table,
};
use trainer::report::Best;
use trainer::report::EpochRecord;
use trainer::train_loop::EpochObserver;

const SPEC: &str = r#"
name = "grid"
seeds = [0, 1]
baseline = "vanilla"
[[variant]]
name = "single"
[[variant]]
name = "vanilla"
"#;

/// Records what the grid tells it.
#[derive(Default)]
struct Recorder {
    started: Vec<(String, u64)>,
    finished: Vec<(String, u64, bool)>,
    epochs: usize,
}

impl EpochObserver for Recorder {
    fn on_epoch(&mut self, _: &EpochRecord, _: &Best) {
        self.epochs += 1;
    }
}

impl GridObserver for Recorder {
    fn run_started(&mut self, run: &RunId<'_>) {
        self.started.push((run.variant.to_string(), run.seed));
    }

    fn run_finished(&mut self, run: &RunId<'_>, row: &RunRow, outcome: Outcome) {
        assert_eq!((row.variant.as_str(), row.seed), (run.variant, run.seed));
        self.finished.push((run.variant.to_string(), run.seed, outcome == Outcome::Skipped));
    }
}

/// A small synthetic run; `vanilla` on 2 workers, anything else single-process.
fn config(variant: &str, epochs: usize) -> TrainConfig {
    let distributed = DistributedConfig { workers: 2, ..DistributedConfig::default() };
    let method = if variant == "vanilla" { Method::Vanilla } else { Method::Single };
    TrainConfig { epochs, hidden: 8, method: MethodConfig::named(method), distributed, ..TrainConfig::default() }
}

fn plan(text: &str, config_of: impl Fn(&str) -> TrainConfig) -> Plan {
    let spec = ExperimentSpec::from_toml_str(text, "grid.toml").unwrap();
    Plan::new(spec, |v, _| Ok::<_, Infallible>(config_of(&v.name))).unwrap()
}

fn run(plan: &Plan, out: &Path) -> (Result<Table, ExperimentError>, Recorder) {
    let mut recorder = Recorder::default();
    let result = trainer::experiment::run(plan, out, Path::new("datasets"), &mut recorder);
    (result, recorder)
}

#[test]
fn every_run_once_then_a_rerun_skips_them_all() {
    let dir = tempfile::tempdir().unwrap();
    let plan = plan(SPEC, |v| config(v, 2));
    let (table, seen) = run(&plan, dir.path());
    let table = table.unwrap();
    let order: Vec<(&str, u64)> = seen.started.iter().map(|(v, s)| (v.as_str(), *s)).collect();
    assert_eq!(order, [("single", 0), ("vanilla", 0), ("single", 1), ("vanilla", 1)], "seed-major order");
    assert_eq!(seen.epochs, 4 * 2);
    assert_eq!(table.runs.len(), 4);
    for row in &table.runs {
        let report: trainer::Report =
            serde_json::from_slice(&std::fs::read(dir.path().join(&row.report)).unwrap()).unwrap();
        assert_eq!((report.seed, report.epochs.len()), (row.seed, 2), "{}", row.report);
        assert_eq!(row.value(Metric::TestAcc), Some(report.final_.test_acc_at_best_val));
    }
    let vanilla = &table.variants[1];
    assert!(vanilla.figures.get(Metric::BytesTotal).unwrap().unwrap().mean > 0.0);
    assert_eq!(*table.variants[0].ratios.get(Metric::BytesTotal).unwrap(), Some(0.0), "single sends nothing");
    let written = std::fs::read_to_string(dir.path().join(RESULTS_JSON)).unwrap();
    assert_eq!(written, serde_json::to_string_pretty(&table).unwrap() + "\n");
    assert_eq!(std::fs::read_to_string(dir.path().join(RESULTS_CSV)).unwrap(), table.to_csv());

    let (again, seen) = run(&plan, dir.path());
    assert!(seen.started.is_empty() && seen.epochs == 0, "nothing trains again: {:?}", seen.started);
    assert!(seen.finished.iter().all(|f| f.2) && seen.finished.len() == 4, "{:?}", seen.finished);
    assert_eq!(again.unwrap(), table, "the same table from the kept reports");
}

#[test]
fn corrupt_and_stale_reports_run_again() {
    let dir = tempfile::tempdir().unwrap();
    run(&plan(SPEC, |v| config(v, 1)), dir.path()).0.unwrap();
    let corrupt = dir.path().join("runs/single-seed1.json");
    let text = std::fs::read_to_string(&corrupt).unwrap();
    std::fs::write(&corrupt, &text[..text.len() / 2]).unwrap();
    // The vanilla variant's settings change: its old reports no longer describe it.
    let changed = plan(SPEC, |v| config(v, if v == "vanilla" { 2 } else { 1 }));
    let (table, seen) = run(&changed, dir.path());
    let mut rerun = seen.started.clone();
    rerun.sort();
    assert_eq!(rerun, [("single".to_string(), 1), ("vanilla".to_string(), 0), ("vanilla".to_string(), 1)]);
    table.unwrap();
    let report: trainer::Report =
        serde_json::from_slice(&std::fs::read(dir.path().join("runs/vanilla-seed0.json")).unwrap()).unwrap();
    assert_eq!(report.epochs.len(), 2, "rewritten with the new settings");
}

#[test]
fn a_failing_run_is_named_and_the_finished_ones_are_kept() {
    let dir = tempfile::tempdir().unwrap();
    let text = SPEC.replace("name = \"vanilla\"\n", "name = \"broken\"\n").replace("\"vanilla\"", "\"single\"");
    let plan = plan(&text, |v| TrainConfig {
        dataset: (v == "broken").then(|| "/nonexistent/graph".to_string()),
        ..config(v, 1)
    });
    let (result, seen) = run(&plan, dir.path());
    let err = result.unwrap_err();
    let message = anyhow_like(&err);
    assert!(message.contains("variant `broken` with seed 0") && message.contains("/nonexistent/graph"), "{message}");
    assert_eq!(seen.finished, [("single".to_string(), 0, false)], "the grid stops at the failure");
    assert!(dir.path().join("runs/single-seed0.json").is_file(), "the finished run is kept");
    assert!(!dir.path().join(RESULTS_JSON).exists(), "no table from a partial grid");
}

#[test]
fn bad_settings_and_outputs_are_refused_before_any_run() {
    let dir = tempfile::tempdir().unwrap();
    let threads = plan(SPEC, |v| TrainConfig { threads: (v == "vanilla").then_some(1), ..config(v, 1) });
    let (result, seen) = run(&threads, dir.path());
    let message = anyhow_like(&result.unwrap_err());
    assert!(message.contains("variant `vanilla` sets `threads`"), "{message}");
    assert!(seen.started.is_empty());

    let invalid = plan(SPEC, |v| TrainConfig { dropout: if v == "single" { 1.0 } else { 0.5 }, ..config(v, 1) });
    let message = anyhow_like(&run(&invalid, dir.path()).0.unwrap_err());
    assert!(message.starts_with("variant `single`: invalid `dropout`"), "{message}");

    std::fs::create_dir_all(dir.path().join(RESULTS_CSV)).unwrap();
    let (result, seen) = run(&plan(SPEC, |v| config(v, 1)), dir.path());
    let message = anyhow_like(&result.unwrap_err());
    assert!(message.contains(RESULTS_CSV) && message.contains("is a directory"), "{message}");
    assert!(seen.started.is_empty());
    assert_eq!(std::fs::read_dir(dir.path().join("runs")).unwrap().count(), 0, "no run wrote anything");
}

/// The error and its causes, joined as the CLI prints them.
fn anyhow_like(err: &dyn std::error::Error) -> String {
    let mut parts = vec![err.to_string()];
    let mut source = err.source();
    while let Some(s) = source {
        parts.push(s.to_string());
        source = s.source();
    }
    parts.join(": ")
}
