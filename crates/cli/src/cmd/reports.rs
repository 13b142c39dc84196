//! Reading reports that `halo train` wrote, for the commands that look back at runs
//! (`halo compare`, `halo plot`).

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
        if report.json["incomplete"].as_bool() == Some(true) {
            report.label.push_str(" [incomplete]");
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
