//! What the cluster's commands read back from `halo`: reports, their epochs and losses, and
//! the scratch folder the runs write them to.

use std::path::{Path, PathBuf};

use anyhow::{Context, Result};
use serde_json::Value;

/// A fresh scratch folder `halo-cluster-<what>-<pid>` under the temporary directory.
pub fn scratch(what: &str) -> Result<PathBuf> {
    let dir = std::env::temp_dir().join(format!("halo-cluster-{what}-{}", std::process::id()));
    std::fs::create_dir_all(&dir).with_context(|| format!("creating {}", dir.display()))?;
    Ok(dir)
}

/// The JSON report at `path`; an error says the run wrote none, or not JSON.
pub fn read(path: &Path) -> Result<Value> {
    let text = std::fs::read(path).with_context(|| format!("the run wrote no report at {}", path.display()))?;
    serde_json::from_slice(&text).with_context(|| format!("{}: not JSON", path.display()))
}

/// The report's epoch records.
pub fn epochs(report: &Value) -> Vec<Value> {
    report["epochs"].as_array().cloned().unwrap_or_default()
}

/// The report's losses, one per epoch.
pub fn losses(report: &Value) -> Vec<f64> {
    epochs(report).iter().filter_map(|e| e["loss"].as_f64()).collect()
}
