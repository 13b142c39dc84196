//! Reading reports that `halo train` wrote, for the commands that look back at runs
//! (`halo compare`, `halo plot`).
//!
//! A report is labelled by its method, or by its file where methods repeat; an incomplete report
//! gets the figures of its epochs so far. The settings the reports differ on are found here too.

use std::path::{Path, PathBuf};

use anyhow::{Context, bail};
use serde_json::Value;

/// A report read back: its file, a label naming it among the others, and its JSON.
pub struct LoadedReport {
    pub path: PathBuf,
    pub label: String,
    pub json: Value,
}

impl LoadedReport {
    /// The epoch records (empty where the report has none).
    pub fn epochs(&self) -> &[Value] {
        self.json["epochs"].as_array().map_or(&[], Vec::as_slice)
    }

    /// Whether the run stopped before its last epoch (its `final` figures are those of the
    /// epochs so far).
    pub fn incomplete(&self) -> bool {
        self.json["incomplete"].as_bool() == Some(true)
    }
}

/// The `final` figures of `epochs`, as `halo train` sums them: what an incomplete report, which
/// has no `final`, shows for the epochs it finished.
fn final_of(epochs: &[Value]) -> Value {
    let num = |e: &Value, key: &str| e[key].as_f64().unwrap_or(0.0);
    let sum = |key: &str| epochs.iter().map(|e| num(e, key)).sum::<f64>();
    let phases = |keep: fn(&str) -> bool| -> f64 {
        let by_phase = epochs.iter().filter_map(|e| e["bytes_by_phase"].as_object()).flatten();
        by_phase.filter(|(phase, _)| keep(phase.as_str())).filter_map(|(_, b)| b.as_f64()).sum()
    };
    // The earliest epoch of the highest validation accuracy.
    let best = epochs.iter().fold(None::<&Value>, |best, e| match best {
        Some(b) if num(b, "val_acc") >= num(e, "val_acc") => Some(b),
        _ => Some(e),
    });
    serde_json::json!({
        "best_val_acc": best.map(|b| num(b, "val_acc")),
        "test_acc_at_best_val": best.map(|b| num(b, "test_acc")),
        "best_epoch": best.map(|b| num(b, "epoch")),
        "train_wall_s": sum("wall_s"),
        "bytes_total": sum("bytes_intra") + sum("bytes_inter"),
        "bytes_exchange": phases(trainer::report::is_exchange_phase),
        "bytes_grad_sync": phases(|p: &str| trainer::report::GRAD_SYNC_PHASES.contains(&p)),
        "modeled_comm_s_total": sum("modeled_comm_s"),
        "modeled_train_s": sum("modeled_epoch_s"),
    })
}

/// The settings (dotted keys of the reports' `config`, file paths left out) on which the
/// reports differ, each with every report's value in order (`-` where one lacks it). A run in
/// one process has no use for its `distributed` settings: they show as `-` and count as no
/// difference.
pub fn differing_settings(reports: &[LoadedReport]) -> Vec<(String, Vec<String>)> {
    let one_process: Vec<bool> = reports
        .iter()
        .map(|r| {
            let config = serde_json::from_value::<trainer::TrainConfig>(r.json["config"].clone());
            config.is_ok_and(|c| trainer::plan::in_one_process(&c))
        })
        .collect();
    let flat: Vec<std::collections::BTreeMap<String, String>> = reports
        .iter()
        .map(|r| {
            let mut out = std::collections::BTreeMap::new();
            if r.json["config"].is_object() {
                flatten("", &r.json["config"], &mut out);
            }
            out
        })
        .collect();
    let keys: std::collections::BTreeSet<&String> = flat.iter().flat_map(|f| f.keys()).collect();
    keys.into_iter()
        .filter(|key| !PATHS.iter().any(|p| key.ends_with(p)))
        .filter_map(|key| {
            let unused = |run: usize| one_process[run] && key.starts_with(DISTRIBUTED);
            let value = |run: usize| match flat[run].get(key) {
                Some(value) if !unused(run) => value.clone(),
                _ => "-".to_string(),
            };
            let values: Vec<String> = (0..reports.len()).map(value).collect();
            let used: Vec<&String> =
                values.iter().enumerate().filter(|(run, _)| !unused(*run)).map(|(_, v)| v).collect();
            used.iter().any(|v| *v != used[0]).then(|| (key.clone(), values))
        })
        .collect()
}

/// The prefix of the settings of distributed training.
const DISTRIBUTED: &str = "distributed.";

/// Settings that name where a run writes or reads its files, not how it trains.
const PATHS: [&str; 4] = ["report", "save-model", "checkpoint-dir", "resume"];

/// `value`'s leaves under dotted keys; arrays are one value.
fn flatten(prefix: &str, value: &Value, out: &mut std::collections::BTreeMap<String, String>) {
    match value {
        Value::Object(map) => {
            for (key, child) in map {
                let key = if prefix.is_empty() { key.clone() } else { format!("{prefix}.{key}") };
                flatten(&key, child, out);
            }
        }
        Value::String(s) => {
            out.insert(prefix.to_string(), s.clone());
        }
        other => {
            out.insert(prefix.to_string(), other.to_string());
        }
    }
}

/// Reads `paths`; each is labelled with its method and, where two share a method, its file stem
/// too. Errors name the file (and the line, for malformed JSON).
pub fn load(paths: &[PathBuf]) -> anyhow::Result<Vec<LoadedReport>> {
    let mut reports = paths.iter().map(|p| read(p)).collect::<anyhow::Result<Vec<_>>>()?;
    let methods: Vec<String> = reports.iter().map(|r| r.label.clone()).collect();
    for report in &mut reports {
        let twins = methods.iter().filter(|m| **m == report.label).count();
        if twins > 1 {
            let stem = report.path.file_stem().map(|s| s.to_string_lossy().into_owned()).unwrap_or_default();
            report.label = format!("{} ({stem})", report.label);
        }
        if report.incomplete() {
            let done = report.epochs().len();
            let planned = report.json["config"]["epochs"].as_u64().map_or(String::new(), |n| format!(" of {n}"));
            report.label.push_str(&format!(" [incomplete: {done}{planned} epochs]"));
            if report.json.get("final").is_none_or(Value::is_null) {
                report.json["final"] = final_of(report.epochs());
            }
        }
    }
    Ok(reports)
}

fn read(path: &Path) -> anyhow::Result<LoadedReport> {
    let text = std::fs::read_to_string(path).with_context(|| format!("cannot read report {}", path.display()))?;
    let json: Value = serde_json::from_str(&text)
        .with_context(|| format!("{} is not a JSON report of `halo train`", path.display()))?;
    let Some(method) = json["method"].as_str() else {
        bail!("{} is not a report of `halo train`: it has no `method` field", path.display());
    };
    if json["epochs"].as_array().is_none_or(Vec::is_empty) {
        bail!("{} holds no epochs: the run ended before its first epoch", path.display());
    }
    Ok(LoadedReport { path: path.to_path_buf(), label: method.to_string(), json })
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use serde_json::json;

    /// A minimal report of `method` whose epochs have test accuracies `acc` and `bytes` bytes each.
    pub(crate) fn report(method: &str, acc: &[f64], bytes: u64) -> Value {
        let epochs: Vec<Value> = acc
            .iter()
            .enumerate()
            .map(|(i, a)| {
                json!({"epoch": i + 1, "loss": 1.0 / (i as f64 + 1.0), "train_acc": a, "val_acc": a, "test_acc": a,
                       "wall_s": 0.5, "eval_s": 0.1, "compute_s": 0.4, "bytes_intra": bytes / 4 * 3,
                       "bytes_inter": bytes / 4, "messages": 2, "modeled_comm_s": 0.2, "modeled_epoch_s": 0.6,
                       "bytes_by_phase": {}, "method": {"eps": 0.01 * (i as f64 + 1.0), "rows": {"fwd/0": 0.5}}})
            })
            .collect();
        let n = acc.len() as f64;
        let best = acc.iter().copied().fold(0.0, f64::max);
        json!({"dataset": "cora", "model": "gcn", "method": method, "epochs": epochs,
               "final": {"best_val_acc": best, "test_acc_at_best_val": best, "best_epoch": 1,
                         "train_wall_s": 0.5 * n, "bytes_total": bytes * acc.len() as u64,
                         "bytes_exchange": bytes * acc.len() as u64, "bytes_grad_sync": 0,
                         "modeled_comm_s_total": 0.2 * n, "modeled_train_s": 0.6 * n}})
    }

    pub(crate) fn write(dir: &Path, name: &str, value: &Value) -> PathBuf {
        let path = dir.join(name);
        std::fs::write(&path, value.to_string()).unwrap();
        path
    }

    #[test]
    fn labels_are_methods_disambiguated_by_file_stem() {
        let dir = tempfile::tempdir().unwrap();
        let a = write(dir.path(), "a.json", &report("vanilla", &[0.5], 10));
        let b = write(dir.path(), "b.json", &report("cdfgnn", &[0.5], 10));
        let c = write(dir.path(), "c.json", &report("cdfgnn", &[0.5], 10));
        let labels: Vec<String> = load(&[a, b, c]).unwrap().into_iter().map(|r| r.label).collect();
        assert_eq!(labels, ["vanilla", "cdfgnn (b)", "cdfgnn (c)"]);
    }

    #[test]
    fn an_incomplete_report_gets_the_figures_of_its_epochs_so_far() {
        let dir = tempfile::tempdir().unwrap();
        let mut partial = report("vanilla", &[0.5, 0.7, 0.6], 100);
        partial["final"] = Value::Null;
        partial["incomplete"] = json!(true);
        partial["config"] = json!({"epochs": 10});
        let path = write(dir.path(), "partial.json", &partial);
        let loaded = load(&[path]).unwrap().remove(0);
        assert_eq!(loaded.label, "vanilla [incomplete: 3 of 10 epochs]");
        let f = &loaded.json["final"];
        assert_eq!((f["best_val_acc"].as_f64(), f["best_epoch"].as_f64()), (Some(0.7), Some(2.0)));
        assert_eq!(f["bytes_total"].as_f64(), Some(300.0));
        assert!((f["modeled_train_s"].as_f64().unwrap() - 1.8).abs() < 1e-12, "{f}");
    }

    #[test]
    fn differing_settings_name_each_key_with_every_value() {
        let dir = tempfile::tempdir().unwrap();
        let mut gcn = report("vanilla", &[0.5], 10);
        gcn["config"] = json!({"model": "gcn", "epochs": 200, "layers": 2, "report": "a.json", "reliability": {"checkpoint-dir": "ck1"}});
        let mut sage = report("vanilla", &[0.5], 10);
        sage["config"] = json!({"model": "sage", "epochs": 20, "layers": 2, "report": "b.json", "reliability": {"checkpoint-dir": "ck2"}});
        let paths = [write(dir.path(), "a.json", &gcn), write(dir.path(), "b.json", &sage)];
        let differ = differing_settings(&load(&paths).unwrap());
        let expected = [("epochs", ["200", "20"]), ("model", ["gcn", "sage"])]
            .map(|(k, v)| (k.to_string(), v.map(String::from).to_vec()));
        assert_eq!(differ, expected);
    }

    /// A single-process run's `distributed` settings are defaults it never used: they are not
    /// set against a distributed run's.
    #[test]
    fn a_single_process_run_differs_in_no_distributed_setting() {
        let dir = tempfile::tempdir().unwrap();
        let mut single = report("single", &[0.5], 10);
        single["config"] = json!({"method": "single", "distributed": {"workers": 4, "hosts": 1}});
        let mut vanilla = report("vanilla", &[0.5], 10);
        vanilla["config"] = json!({"method": "vanilla", "distributed": {"workers": 2, "hosts": 1}});
        let mut paths = vec![write(dir.path(), "s.json", &single), write(dir.path(), "v.json", &vanilla)];
        let differ = differing_settings(&load(&paths).unwrap());
        assert_eq!(differ, [("method".to_string(), vec!["single".to_string(), "vanilla".to_string()])]);
        vanilla["config"]["distributed"]["workers"] = json!(4);
        paths.push(write(dir.path(), "v4.json", &vanilla));
        let differ = differing_settings(&load(&paths).unwrap());
        assert_eq!(differ[0], ("distributed.workers".to_string(), ["-", "2", "4"].map(String::from).to_vec()));
    }

    #[test]
    fn errors_name_the_file_and_what_is_wrong() {
        let dir = tempfile::tempdir().unwrap();
        let bad = dir.path().join("bad.json");
        std::fs::write(&bad, "{\n\"method\": ").unwrap();
        let msg = format!("{:#}", load(std::slice::from_ref(&bad)).err().unwrap());
        assert!(msg.contains("bad.json") && msg.contains("line 2"), "{msg}");
        let other = write(dir.path(), "other.json", &json!({"rows": 3}));
        let msg = format!("{:#}", load(&[other]).err().unwrap());
        assert!(msg.contains("other.json") && msg.contains("no `method`"), "{msg}");
        let missing = dir.path().join("missing.json");
        let msg = format!("{:#}", load(&[missing]).err().unwrap());
        assert!(msg.contains("missing.json"), "{msg}");
    }
}
