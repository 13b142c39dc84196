//! `halo compare` through the binary: it names the settings on which the runs differ above the
//! table, and an incomplete report, even listed first, shows its epochs so far and leaves the
//! other rows' ratios intact; `halo plot` draws over none of the reports it reads.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

fn halo(args: &[&str], cwd: &Path) -> Output {
    let out = Command::new(env!("CARGO_BIN_EXE_halo")).args(args).current_dir(cwd).output().expect("halo runs");
    assert!(out.status.success(), "halo {args:?} failed: {}", String::from_utf8_lossy(&out.stderr));
    out
}

fn cora() -> String {
    let dir = PathBuf::from(concat!(env!("CARGO_MANIFEST_DIR"), "/../../datasets/cora"));
    assert!(dir.is_dir(), "Cora is missing: expected the vendored copy at {}", dir.display());
    dir.display().to_string()
}

/// Trains on Cora with `args`, writing `report` in `dir`.
fn train(dir: &Path, report: &str, args: &[&str]) {
    let common = ["train", "--dataset", &cora(), "--no-cache", "-q", "--report", report];
    halo(&[&common[..], args].concat(), dir);
}

#[test]
fn compare_names_the_differing_settings_and_an_incomplete_report_spoils_no_ratio() {
    let dir = tempfile::tempdir().unwrap();
    train(dir.path(), "gcn.json", &["--model", "gcn", "--epochs", "4", "--feature-norm", "row"]);
    train(dir.path(), "sage.json", &["--model", "sage", "--epochs", "2"]);
    let out = halo(&["compare", "gcn.json", "sage.json"], dir.path());
    let printed = String::from_utf8_lossy(&out.stdout);
    let first = printed.lines().next().unwrap_or_default();
    assert!(first.starts_with("runs differ in: "), "{printed}");
    for key in ["model (gcn, sage)", "epochs (4, 2)", "feature-norm (row, none)"] {
        assert!(first.contains(key), "`{key}` missing: {printed}");
    }
    assert!(!first.contains("report"), "output paths are not settings: {first}");

    // An interrupted run's report: the epochs so far, no `final`.
    let mut partial: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(dir.path().join("gcn.json")).unwrap()).unwrap();
    partial["epochs"].as_array_mut().unwrap().truncate(2);
    partial.as_object_mut().unwrap().remove("final");
    partial["incomplete"] = serde_json::json!(true);
    partial["reason"] = serde_json::json!("interrupted (SIGINT)");
    std::fs::write(dir.path().join("partial.json"), partial.to_string()).unwrap();
    let alone = String::from_utf8_lossy(&halo(&["compare", "gcn.json", "sage.json"], dir.path()).stdout).into_owned();
    let out = halo(&["compare", "partial.json", "gcn.json", "sage.json"], dir.path());
    let printed = String::from_utf8_lossy(&out.stdout);
    assert!(printed.contains("ratios against single (gcn) (the first complete report)"), "{printed}");
    let row = |text: &str, label: &str| -> Vec<String> {
        let line = text.lines().find(|l| l.starts_with(label)).unwrap_or_else(|| panic!("no `{label}` row: {text}"));
        line[label.len()..].split_whitespace().map(String::from).collect()
    };
    // The incomplete run shows its epochs so far (accuracy and wall time), without ratios.
    let partial_row = row(&printed, "single (partial) [incomplete: 2 of 4 epochs]");
    assert!(!partial_row[0].contains("n/a") && partial_row.iter().filter(|c| *c == "n/a").count() >= 3, "{printed}");
    // The other rows read exactly as they do without it.
    for label in ["single (gcn)", "single (sage)"] {
        assert_eq!(row(&printed, label), row(&alone, label), "{label}: {printed}\n{alone}");
    }

    // A single-process run's unused distributed settings are no difference from a 2-worker run.
    train(dir.path(), "vanilla.json", &["--model", "gcn", "--epochs", "4", "--method", "vanilla", "--workers", "2"]);
    let out = halo(&["compare", "gcn.json", "vanilla.json"], dir.path());
    let first = String::from_utf8_lossy(&out.stdout).lines().next().unwrap_or_default().to_string();
    assert!(first.contains("method.name (single, vanilla)") && !first.contains("distributed."), "{first}");

    // A picture drawn over a report it reads is refused, naming both.
    let args = ["plot", "gcn.json", "sage.json", "--out", "./sage.json"];
    let out = Command::new(env!("CARGO_BIN_EXE_halo")).args(args).current_dir(dir.path()).output().unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success() && err.contains("--out ./sage.json") && err.contains("report sage.json"), "{err}");
}
