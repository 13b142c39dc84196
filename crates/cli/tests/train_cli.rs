//! `halo train` end to end through the binary, on the built-in synthetic graph.

use std::path::Path;
use std::process::{Command, Output};

fn halo(args: &[&str], cwd: &Path) -> Output {
    Command::new(env!("CARGO_BIN_EXE_halo")).arg("train").args(args).current_dir(cwd).output().expect("halo runs")
}

fn stderr(out: &Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

fn read_report(path: &Path) -> serde_json::Value {
    serde_json::from_str(&std::fs::read_to_string(path).expect("report written")).expect("report is JSON")
}

#[test]
fn short_run_writes_a_report_and_a_summary() {
    let dir = tempfile::tempdir().unwrap();
    let out = halo(&["--epochs", "3", "--threads", "1", "--report", "run.json"], dir.path());
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(stderr(&out).is_empty(), "no progress bar when stderr is not a terminal: {}", stderr(&out));
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(stdout.contains("best val acc") && stdout.contains("test acc"), "{stdout}");
    let report = read_report(&dir.path().join("run.json"));
    assert_eq!(report["epochs"].as_array().unwrap().len(), 3);
    assert_eq!(report["method"], "single");
    assert_eq!(report["model"], "gcn");
    assert_eq!(report["config"]["threads"], 1);
    let best = report["final"]["best_val_acc"].as_f64().unwrap();
    assert!((0.0..=1.0).contains(&best), "{best}");
    assert!(report["final"]["peak_rss_bytes"].as_u64().unwrap() > 0);
}

#[test]
fn flags_override_the_config_file() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("run.toml"), "epochs = 5\nmodel = \"sage\"\nreport = \"from-toml.json\"\n").unwrap();
    let out = halo(&["--config", "run.toml", "--epochs", "2", "-q"], dir.path());
    assert!(out.status.success(), "{}", stderr(&out));
    let report = read_report(&dir.path().join("from-toml.json"));
    assert_eq!(report["epochs"].as_array().unwrap().len(), 2, "--epochs beats the file");
    assert_eq!(report["model"], "sage", "the file beats the default");
}

#[test]
fn bad_values_fail_naming_the_flag() {
    let dir = tempfile::tempdir().unwrap();
    let cases: [(&[&str], &str); 6] = [
        (&["--lr", "fast"], "--lr"),
        (&["--model", "mlp"], "--model"),
        (&["--method", "magic"], "--method"),
        (&["--feature-norm", "col"], "--feature-norm"),
        (&["--dropout", "1.5"], "dropout"),
        (&["--epochs", "0"], "epochs"),
    ];
    for (args, flag) in cases {
        let out = halo(args, dir.path());
        assert!(!out.status.success(), "{args:?} succeeded");
        assert!(stderr(&out).contains(flag), "{args:?}: {}", stderr(&out));
    }
    let out = halo(&["--learning-rate", "0.1"], dir.path());
    assert!(!out.status.success() && stderr(&out).contains("--learning-rate"), "{}", stderr(&out));
}

#[test]
fn missing_dataset_is_named() {
    let dir = tempfile::tempdir().unwrap();
    let out = halo(&["--dataset", "/nonexistent/graphs/cora2"], dir.path());
    assert!(!out.status.success());
    assert!(stderr(&out).contains("/nonexistent/graphs/cora2"), "{}", stderr(&out));
    let out = halo(&["--dataset", "cora2"], dir.path());
    assert!(!out.status.success());
    assert!(stderr(&out).contains("datasets/cora2"), "bare names are looked up under datasets/: {}", stderr(&out));
}

#[test]
fn bad_config_file_names_file_line_and_key() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("bad.toml"), "epochs = 2\nhidden = \"wide\"\n").unwrap();
    let out = halo(&["--config", "bad.toml"], dir.path());
    assert!(!out.status.success());
    let err = stderr(&out);
    assert!(err.contains("bad.toml:2") && err.contains("hidden"), "{err}");
    let out = halo(&["--config", "absent.toml"], dir.path());
    assert!(!out.status.success() && stderr(&out).contains("absent.toml"), "{}", stderr(&out));
}

#[test]
fn mini_batch_and_data_parallel_runs_report_their_batches() {
    let dir = tempfile::tempdir().unwrap();
    let common = ["--epochs", "2", "--model", "sage", "--batch-size", "64", "--fanouts", "5,5", "-q"];
    let out = halo(&[&common[..], &["--report", "single.json"]].concat(), dir.path());
    assert!(out.status.success(), "{}", stderr(&out));
    let report = read_report(&dir.path().join("single.json"));
    assert_eq!(
        (report["method"].as_str(), report["config"]["minibatch"]["fanouts"].as_str()),
        (Some("single"), Some("5,5"))
    );
    let epoch = &report["epochs"][0]["method"];
    assert!(epoch["steps"].as_u64().unwrap() > 1 && epoch["sampled_edges_per_step"].as_f64().unwrap() > 0.0, "{epoch}");

    let dp = ["--method", "data-parallel", "--workers", "2", "--lr-scaling", "linear", "--report", "dp.json"];
    let out = halo(&[&common[..], &dp[..]].concat(), dir.path());
    assert!(out.status.success(), "{}", stderr(&out));
    let report = read_report(&dir.path().join("dp.json"));
    assert_eq!((report["method"].as_str(), report["workers"].as_u64()), (Some("data-parallel"), Some(2)));
    assert_eq!(report["final"]["method"]["global_batch_size"], 128);
    assert!(report["final"]["bytes_grad_sync"].as_u64().unwrap() > 0);

    let out = halo(&["--method", "data-parallel", "--epochs", "1"], dir.path());
    assert!(!out.status.success());
    assert!(stderr(&out).contains("`batch-size`") && stderr(&out).contains("data-parallel"), "{}", stderr(&out));
}
