//! `halo bench memory` end to end: one child `halo train` per dataset, the per-vertex figures
//! taken from each run's own report, failures recorded with their reasons, bad flags refused
//! before any run.

use std::path::PathBuf;
use std::process::{Command, Output};

use serde_json::Value;

fn cora_dir() -> String {
    let dir = PathBuf::from(concat!(env!("CARGO_MANIFEST_DIR"), "/../../datasets/cora"));
    assert!(dir.is_dir(), "Cora is missing: expected the vendored copy at {}", dir.display());
    dir.display().to_string()
}

fn bench(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_halo")).args(["bench", "memory"]).args(args).output().expect("run halo")
}

#[test]
fn each_run_gets_its_own_process_and_failures_keep_their_reason() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("bench");
    let missing = dir.path().join("no-such-dataset").display().to_string();
    let cora = cora_dir();
    let args = ["--dataset", &cora, "--dataset", &missing, "--out", out.to_str().unwrap(), "--", "--epochs", "1"];
    let run = bench(&[&args[..], &["--quiet"]].concat());
    let (stdout, stderr) = (String::from_utf8_lossy(&run.stdout), String::from_utf8_lossy(&run.stderr));
    assert!(!run.status.success(), "a failed run fails the bench");
    assert!(stderr.contains("1 of 2 runs failed"), "{stderr}");
    assert!(stdout.starts_with("| dataset | vertices |"), "stdout is the table alone: {stdout}");
    assert!(stderr.contains("single gcn on cora"), "the child's summary goes to stderr: {stderr}");

    let summary: Value = serde_json::from_slice(&std::fs::read(out.join("summary.json")).unwrap()).unwrap();
    let runs = summary["runs"].as_array().unwrap();
    assert_eq!(runs.len(), 2);

    let ok = &runs[0];
    let own: Value = serde_json::from_slice(&std::fs::read(ok["report"].as_str().unwrap()).unwrap()).unwrap();
    assert_eq!(ok["vertices"], 2708);
    assert_eq!(ok["edges"], 10556);
    assert_eq!(own["graph"]["vertices"], 2708);
    let peak = ok["peak_rss_bytes"].as_u64().unwrap();
    assert_eq!(peak, own["final"]["peak_rss_bytes"].as_u64().unwrap());
    let estimate = ok["estimate_bytes"].as_u64().unwrap();
    assert_eq!(estimate, own["final"]["memory"]["estimate_bytes"].as_u64().unwrap());
    assert!((ok["peak_bytes_per_vertex"].as_f64().unwrap() - peak as f64 / 2708.0).abs() < 1e-6);
    assert!((ok["estimate_per_peak"].as_f64().unwrap() - estimate as f64 / peak as f64).abs() < 1e-12);
    assert!(ok.get("error").is_none());

    let failed = &runs[1];
    let reason = failed["error"].as_str().unwrap();
    assert!(reason.contains("no-such-dataset"), "{reason}");
    assert!(failed.get("peak_rss_bytes").is_none());
}

#[test]
fn flags_the_bench_sets_or_halo_train_refuses_stop_it_before_any_run() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("bench");
    let cora = cora_dir();
    for (flags, says) in [
        (vec!["--report=r.json"], "--report"),
        (vec!["--dataset", "x"], "--dataset"),
        (vec!["--save-model", "m.safetensors"], "--save-model"),
        (vec!["--checkpoint-dir=ck"], "--checkpoint-dir"),
        (vec!["--epochs", "zero"], "--epochs"),
    ] {
        let run = bench(&[&["--dataset", &cora, "--out", out.to_str().unwrap(), "--"][..], &flags].concat());
        let stderr = String::from_utf8_lossy(&run.stderr);
        assert!(!run.status.success(), "{flags:?}");
        assert!(stderr.contains(says), "{flags:?}: {stderr}");
        assert!(!stderr.contains("run 1 of 1"), "{flags:?} started a run: {stderr}");
        assert!(!out.exists(), "{flags:?} created --out");
    }
}
