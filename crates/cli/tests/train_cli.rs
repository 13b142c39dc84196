//! `halo train` end to end through the binary, on the built-in synthetic graph (and Cora for
//! the distributed summary).

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

fn halo(args: &[&str], cwd: &Path) -> Output {
    halo_with_env(args, cwd, &[])
}

fn halo_with_env(args: &[&str], cwd: &Path, env: &[(&str, &str)]) -> Output {
    let mut command = Command::new(env!("CARGO_BIN_EXE_halo"));
    command.arg("train").args(args).current_dir(cwd).envs(env.iter().copied());
    command.output().expect("halo runs")
}

fn cora_dir() -> PathBuf {
    let dir = PathBuf::from(concat!(env!("CARGO_MANIFEST_DIR"), "/../../datasets/cora"));
    assert!(dir.is_dir(), "Cora is missing: expected the vendored copy at {}", dir.display());
    dir
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
    let log = stderr(&out);
    // Off a terminal: plain lines in place of the bar, the first and the last epoch at least.
    assert!(log.starts_with("epoch 1/3 [") && log.contains("\nepoch 3/3 ["), "{log}");
    assert!(!log.contains('\x1b'), "no terminal codes off a terminal: {log:?}");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(stdout.contains("best val acc") && stdout.contains("test acc"), "{stdout}");
    assert!(stdout.contains("median step") && stdout.contains(" s, eval "), "step and eval apart: {stdout}");
    assert!(!stdout.contains("inter-host"), "no traffic for a single-process run: {stdout}");
    let report = read_report(&dir.path().join("run.json"));
    assert_eq!(report["epochs"].as_array().unwrap().len(), 3);
    assert_eq!(report["method"], "single");
    assert_eq!(report["model"], "gcn");
    assert_eq!(report["config"]["threads"], 1);
    let best = report["final"]["best_val_acc"].as_f64().unwrap();
    assert!((0.0..=1.0).contains(&best), "{best}");
    assert!(report["final"]["peak_rss_bytes"].as_u64().unwrap() > 0);
}

/// `--eval-every 2` on a distributed run evaluates after epochs 2, 4 and 5 (the last); the
/// others carry the last evaluation and say which, and the losses equal an every-epoch run's.
#[test]
fn eval_every_skips_evaluations_between_and_keeps_the_losses() {
    let dir = tempfile::tempdir().unwrap();
    let common = ["--method", "vanilla", "--workers", "2", "--epochs", "5", "--threads", "1"];
    let every = halo(&[&common[..], &["--report", "every.json"]].concat(), dir.path());
    let some = halo(&[&common[..], &["--eval-every", "2", "--report", "some.json"]].concat(), dir.path());
    assert!(every.status.success() && some.status.success(), "{}", stderr(&some));
    let (every, some) = (read_report(&dir.path().join("every.json")), read_report(&dir.path().join("some.json")));
    let field = |r: &serde_json::Value, key: &str| -> Vec<serde_json::Value> {
        r["epochs"].as_array().unwrap().iter().map(|e| e[key].clone()).collect()
    };
    assert_eq!(field(&every, "loss"), field(&some, "loss"));
    let at: Vec<Option<u64>> = field(&some, "eval_epoch").iter().map(|v| v.as_u64()).collect();
    assert_eq!(at, [Some(0), None, Some(2), None, None]);
    assert_eq!(field(&some, "val_acc")[3], field(&every, "val_acc")[3]);
    assert_eq!(field(&some, "val_acc")[2], field(&some, "val_acc")[1]);
    assert!(stderr(&halo(&["--eval-every", "0"], dir.path())).contains("eval-every"));
}

#[test]
fn flags_override_the_config_file() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("run.toml"), "epochs = 5\nmodel = \"sage\"\nreport = \"from-toml.json\"\n").unwrap();
    let out = halo(&["--config", "run.toml", "--epochs", "2", "-q"], dir.path());
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(stderr(&out).is_empty(), "--quiet writes no progress lines: {}", stderr(&out));
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
fn negative_numbers_reach_the_validator() {
    let dir = tempfile::tempdir().unwrap();
    let cases: [(&[&str], &str); 3] = [
        (&["--lr", "-1"], "invalid `lr`: must be a finite number greater than 0, got -1"),
        (&["--weight-decay", "-0.5"], "invalid `weight-decay`: must be a finite number >= 0, got -0.5"),
        (&["--epochs", "-3"], "invalid value '-3' for '--epochs <N>'"),
    ];
    for (args, message) in cases {
        let out = halo(args, dir.path());
        assert!(!out.status.success(), "{args:?} succeeded");
        assert!(stderr(&out).contains(message), "{args:?}: {}", stderr(&out));
    }
}

#[test]
fn an_unwritable_report_path_fails_before_training() {
    let dir = tempfile::tempdir().unwrap();
    let out = halo(&["--epochs", "3", "--report", "missing/run.json"], dir.path());
    assert!(!out.status.success());
    let err = stderr(&out);
    assert!(err.contains("--report missing/run.json: directory missing does not exist"), "{err}");
    assert!(!err.contains("epoch 1/"), "no epoch ran: {err}");
    std::fs::create_dir(dir.path().join("run.json")).unwrap();
    let out = halo(&["--epochs", "3", "--report", "run.json"], dir.path());
    assert!(!out.status.success() && stderr(&out).contains("--report run.json: is a directory"), "{}", stderr(&out));
    std::fs::write(dir.path().join("run.toml"), "report = \"missing/run.json\"\n").unwrap();
    let out = halo(&["--config", "run.toml", "--epochs", "3"], dir.path());
    assert!(!out.status.success());
    assert!(stderr(&out).contains("`report` of run.toml missing/run.json: directory"), "{}", stderr(&out));
}

#[test]
fn a_failed_run_leaves_an_incomplete_report_with_the_reason() {
    let dir = tempfile::tempdir().unwrap();
    let out = halo(&["--dataset", "/nonexistent/graphs/cora2", "--report", "run.json"], dir.path());
    assert!(!out.status.success());
    assert!(stderr(&out).contains("the report so far is in run.json, marked incomplete"), "{}", stderr(&out));
    let report = read_report(&dir.path().join("run.json"));
    assert_eq!(report["incomplete"], true);
    assert!(report["reason"].as_str().unwrap().contains("/nonexistent/graphs/cora2"), "{report}");
    assert_eq!(report["epochs"].as_array().map(Vec::len), Some(0));
    assert_eq!(report["config"]["dataset"], "/nonexistent/graphs/cora2");
    assert!(report.get("final").is_none());
}

/// SIGINT or SIGTERM in the middle of a run keeps the epochs so far and exits with 128 + the
/// signal's number, as a shell reports a process the signal killed.
#[cfg(unix)]
#[test]
fn a_signal_mid_run_keeps_the_report_so_far() {
    use std::io::{BufRead, BufReader};
    use std::process::Stdio;
    use std::sync::mpsc;
    use std::time::{Duration, Instant};
    // Generous bounds on a loaded machine; a broken handler fails the test instead of hanging it.
    const PATIENCE: Duration = Duration::from_secs(120);
    let dir = tempfile::tempdir().unwrap();
    for (signal, code) in [("INT", 130), ("TERM", 143)] {
        let mut child = Command::new(env!("CARGO_BIN_EXE_halo"))
            .args(["train", "--epochs", "1000000", "--threads", "1", "--report", "run.json"])
            .current_dir(dir.path())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .expect("halo starts");
        let (sender, lines) = mpsc::channel();
        let stderr = child.stderr.take().unwrap();
        std::thread::spawn(move || {
            BufReader::new(stderr).lines().map_while(Result::ok).try_for_each(|l| sender.send(l))
        });
        // The first epoch's line says training is under way (and the signal thread is waiting).
        let Ok(first) = lines.recv_timeout(PATIENCE) else {
            child.kill().unwrap();
            panic!("no progress line within {PATIENCE:?}");
        };
        assert!(first.starts_with("epoch 1/1000000"), "{first}");
        let kill = Command::new("kill").args([&format!("-{signal}"), &child.id().to_string()]).status().unwrap();
        assert!(kill.success());
        let deadline = Instant::now() + PATIENCE;
        let status = loop {
            if let Some(status) = child.try_wait().unwrap() {
                break status;
            }
            if Instant::now() > deadline {
                child.kill().unwrap();
                panic!("SIG{signal} did not end the run within {PATIENCE:?}");
            }
            std::thread::sleep(Duration::from_millis(50));
        };
        let rest: Vec<String> = lines.iter().collect();
        assert_eq!(status.code(), Some(code), "SIG{signal}: {status:?}, stderr {rest:?}");
        assert!(rest.iter().any(|l| l.contains(&format!("interrupted by SIG{signal}"))), "{rest:?}");
        let report = read_report(&dir.path().join("run.json"));
        assert_eq!(report["incomplete"], true);
        assert_eq!(report["reason"], format!("interrupted by SIG{signal}"));
        let epochs = report["epochs"].as_array().unwrap();
        assert!(!epochs.is_empty(), "the epochs before the signal are kept");
        assert!(epochs.iter().enumerate().all(|(i, e)| e["epoch"] == i + 1), "epochs in order");
        assert_eq!(report["config"]["epochs"], 1000000);
    }
}

#[test]
fn distributed_flags_without_a_distributed_method_are_an_error() {
    let dir = tempfile::tempdir().unwrap();
    let out = halo(&["--workers", "2", "--overlap", "--epochs", "1"], dir.path());
    assert!(!out.status.success());
    let err = stderr(&out);
    assert!(err.contains("--workers, --overlap have no effect with --method single"), "{err}");
    assert!(err.contains("add --method vanilla"), "{err}");
    let out = halo(&["--method", "single", "--cut", "vertex"], dir.path());
    assert!(stderr(&out).contains("--cut has no effect"), "{}", stderr(&out));
    // A config file may hold every method's settings; only the named method's apply.
    std::fs::write(dir.path().join("run.toml"), "[distributed]\nworkers = 2\n").unwrap();
    let out = halo(&["--config", "run.toml", "--epochs", "1", "-q"], dir.path());
    assert!(out.status.success(), "{}", stderr(&out));
}

/// A process that an MPI launcher started (seen from its variables; no mpirun needed) must not
/// run an independent job of its own.
#[cfg(not(feature = "mpi"))]
#[test]
fn an_mpi_launch_without_mpi_in_the_build_says_how_to_build_it() {
    let dir = tempfile::tempdir().unwrap();
    let vars = [("OMPI_COMM_WORLD_SIZE", "4"), ("OMPI_COMM_WORLD_RANK", "0")];
    let out = halo_with_env(&["--method", "vanilla", "--epochs", "1"], dir.path(), &vars);
    assert!(!out.status.success());
    let err = stderr(&out);
    assert!(
        err.contains("OMPI_COMM_WORLD_SIZE=4") && err.contains("cargo install --path crates/cli --features mpi"),
        "{err}"
    );
    let out = halo_with_env(&["--epochs", "1"], dir.path(), &[("PMI_SIZE", "2"), ("PMI_RANK", "1")]);
    assert!(!out.status.success());
    assert!(stderr(&out).contains("--method single trains in one process"), "{}", stderr(&out));
    let out = halo_with_env(&["--epochs", "1", "-q"], dir.path(), &[("PMI_SIZE", "1")]);
    assert!(out.status.success(), "a launch of one process is a plain run: {}", stderr(&out));
}

#[test]
fn help_says_whether_this_build_has_mpi() {
    let out = halo(&["--help"], Path::new("."));
    assert!(out.status.success());
    let help = String::from_utf8_lossy(&out.stdout);
    let expected = if cfg!(feature = "mpi") { "This build has MPI." } else { "This build has no MPI" };
    assert!(help.contains(expected), "{help}");
}

#[test]
fn over_the_memory_ceiling_fails_before_training_with_the_breakdown() {
    let dir = tempfile::tempdir().unwrap();
    let cora = cora_dir().display().to_string();
    let single = ["--dataset", &cora, "--no-cache", "--epochs", "2", "-q", "--max-memory", "1M"];
    let distributed = [&single[..], &["--method", "vanilla", "--workers", "2"]].concat();
    for (args, when) in [(&single[..], "before training"), (&distributed[..], "before partitioning")] {
        let out = halo(&[args, &["--report", "run.json"]].concat(), dir.path());
        assert!(!out.status.success(), "a 1 MiB ceiling must fail on Cora");
        let err = stderr(&out);
        for part in ["--max-memory", when, "dataset features", "layer 0 kept input", "total", "--hidden"] {
            assert!(err.contains(part), "error lacks `{part}`: {err}");
        }
        assert!(!err.contains("epoch 1/"), "no epoch may start: {err}");
    }
    let out = halo(&["--max-memory", "lots"], dir.path());
    assert!(!out.status.success() && stderr(&out).contains("--max-memory"), "{}", stderr(&out));
    // Under the default ceiling (the available memory) the report has the estimate.
    let out = halo(&[&single[..6], &["--report", "ok.json"]].concat(), dir.path());
    assert!(out.status.success(), "{}", stderr(&out));
    let report = read_report(&dir.path().join("ok.json"));
    let memory = &report["final"]["memory"];
    assert!(
        memory["estimate_bytes"].as_u64().unwrap() > 0 && memory["terms"].as_array().unwrap().len() > 5,
        "{memory}"
    );
    assert_eq!(memory["limit_source"], "MemAvailable");
    assert!(String::from_utf8_lossy(&out.stdout).contains("(estimated "));
}

#[test]
fn a_distributed_summary_names_traffic_and_partition() {
    let dir = tempfile::tempdir().unwrap();
    let cora = cora_dir().display().to_string();
    for (cut, quality) in [("edge", "edge-cut fraction"), ("vertex", "replication factor")] {
        let args = ["--dataset", &cora, "--no-cache", "--method", "vanilla", "--cut", cut, "--workers", "2"];
        let out = halo(&[&args[..], &["--hosts", "2", "--epochs", "2", "-q"]].concat(), dir.path());
        assert!(out.status.success(), "{}", stderr(&out));
        let stdout = String::from_utf8_lossy(&out.stdout);
        for part in ["median step", "eval", "intra-host", "inter-host", "modeled comm", quality] {
            assert!(stdout.contains(part), "{cut}-cut summary lacks `{part}`: {stdout}");
        }
    }
}

#[test]
fn log_lines_carry_no_colour_codes_off_a_terminal() {
    let dir = tempfile::tempdir().unwrap();
    let cora = cora_dir().display().to_string();
    let args = ["--dataset", &cora, "--cache-dir", "cache", "--epochs", "1", "-q"];
    // The second run reads the cache the first one wrote, and says so at the info level.
    for _ in 0..2 {
        let out = halo_with_env(&args, dir.path(), &[("HALO_LOG", "info")]);
        assert!(out.status.success(), "{}", stderr(&out));
        if stderr(&out).contains("binary cache") {
            assert!(!stderr(&out).contains('\x1b'), "{:?}", stderr(&out));
            return;
        }
    }
    panic!("no run logged reading the cache");
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

    let adgraph =
        ["--method", "adgraph", "--workers", "2", "--hops", "2", "--partitioner", "random", "--report", "ad.json"];
    let out = halo(&[&common[..], &adgraph[..]].concat(), dir.path());
    assert!(out.status.success(), "{}", stderr(&out));
    let report = read_report(&dir.path().join("ad.json"));
    assert_eq!((report["method"].as_str(), report["workers"].as_u64()), (Some("adgraph"), Some(2)));
    let method = &report["final"]["method"];
    assert_eq!((method["hops"].as_u64(), method["lr"].as_f64().map(|lr| lr > 0.0)), (Some(2), Some(true)));
    assert!(method["setup_bytes"].as_u64().unwrap() > 0 && method["replication_factor"].as_f64().unwrap() >= 1.0);
    assert!(report["epochs"][0]["bytes_by_phase"].get("setup").is_none(), "shipping the parts is not an epoch's");

    let out = halo(&["--method", "data-parallel", "--epochs", "1"], dir.path());
    assert!(!out.status.success());
    assert!(stderr(&out).contains("`batch-size`") && stderr(&out).contains("data-parallel"), "{}", stderr(&out));
}

#[test]
fn json_logs_are_one_object_per_line() {
    let dir = tempfile::tempdir().unwrap();
    let cora = cora_dir().display().to_string();
    let args = ["--dataset", &cora, "--cache-dir", "cache", "--epochs", "1", "-q", "--log-format", "json"];
    let mut lines = Vec::new();
    for _ in 0..2 {
        let out = halo_with_env(&args, dir.path(), &[("HALO_LOG", "info")]);
        assert!(out.status.success(), "{}", stderr(&out));
        lines.extend(stderr(&out).lines().map(str::to_string));
    }
    assert!(!lines.is_empty(), "the cache is logged at the info level");
    for line in &lines {
        let record: serde_json::Value = serde_json::from_str(line).unwrap_or_else(|e| panic!("{e}: {line}"));
        assert!(record["level"].is_string() && record["fields"]["message"].is_string(), "{line}");
    }
}

/// The run's outputs (report, saved model, its sidecar, checkpoint folder) and its config file
/// never share a path: each pair that would is refused before training, naming both.
#[test]
fn outputs_that_would_write_over_each_other_are_refused_naming_both() {
    let dir = tempfile::tempdir().unwrap();
    let refused = |args: &[&str], names: &[&str]| {
        let out = halo(&[&["--epochs", "1", "-q"][..], args].concat(), dir.path());
        let err = stderr(&out);
        assert!(!out.status.success(), "{args:?} is refused");
        assert!(names.iter().all(|n| err.contains(n)) && err.contains("give them separate paths"), "{args:?}: {err}");
        assert!(!dir.path().join("x.json").exists(), "{args:?}: refused before training");
    };
    refused(&["--report", "m.safetensors", "--save-model", "m.safetensors"], &["--report", "--save-model"]);
    refused(
        &["--report", "m.safetensors.json", "--save-model", "m.safetensors"],
        &["--report", "--save-model's sidecar"],
    );
    refused(&["--report", "ck", "--checkpoint-dir", "ck"], &["--report ck", "--checkpoint-dir ck"]);
    refused(&["--report", "ck/x.json", "--checkpoint-dir", "ck"], &["--report ck/x.json", "--checkpoint-dir ck"]);
    refused(&["--save-model", "ck/m.safetensors", "--checkpoint-dir", "ck"], &["--save-model", "--checkpoint-dir"]);
    refused(
        &["--save-model", "m", "--checkpoint-dir", "m.json"],
        &["--save-model's sidecar m.json", "--checkpoint-dir"],
    );
    std::fs::write(dir.path().join("run.toml"), "epochs = 1\n").unwrap();
    refused(&["--config", "run.toml", "--report", "./run.toml"], &["--config run.toml", "--report ./run.toml"]);
    std::fs::write(dir.path().join("out.toml"), "report = \"ck/r.json\"\n").unwrap();
    refused(&["--config", "out.toml", "--checkpoint-dir", "ck"], &["`report` of out.toml", "--checkpoint-dir"]);

    // The report and the model of one stem both stay: the sidecar is `x.safetensors.json`.
    let out = halo(&["--epochs", "1", "-q", "--save-model", "x.safetensors", "--report", "x.json"], dir.path());
    assert!(out.status.success(), "{}", stderr(&out));
    assert_eq!(read_report(&dir.path().join("x.json"))["epochs"].as_array().unwrap().len(), 1);
    let sidecar = read_report(&dir.path().join("x.safetensors.json"));
    assert_eq!(sidecar["epoch"], 1, "{sidecar}");
}
