//! `halo bench comm`: the report's ledger totals, flag validation, (with the `mpi` feature) the
//! same run under `mpirun -np 4`, and (with `nccl`) the NCCL backend's launch paths.

use std::path::Path;
use std::process::{Command, Output};

use serde_json::Value;

fn halo(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_halo")).args(args).output().expect("cannot run halo")
}

fn read_report(path: &Path) -> Value {
    let text = std::fs::read_to_string(path).unwrap_or_else(|e| panic!("no report at {}: {e}", path.display()));
    serde_json::from_str(&text).expect("the report is not JSON")
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

/// One all-to-all of `n` bytes per ordered pair on 4 workers over 2 hosts: 4 intra-host and
/// 8 inter-host pairs, all in flight at once: each host's two devices send 2 n each across
/// through the host's one link.
fn assert_four_on_two(report: &Value, n: u64) {
    let a2a = &report["all_to_all"];
    assert_eq!(a2a["bytes_intra"], 4 * n, "{report:#}");
    assert_eq!(a2a["bytes_inter"], 8 * n, "{report:#}");
    assert_eq!(a2a["messages"], 12);
    let modeled = a2a["modeled_s"].as_f64().unwrap();
    let expected = 10e-6 + 4.0 * n as f64 / 8.27e9;
    assert_eq!(report["cost_model"], "concurrent flows, shared host links");
    assert!((modeled - expected).abs() < 1e-12, "modeled {modeled} vs {expected}");
    assert!(a2a["throughput_gb_s"].as_f64().unwrap() > 0.0);
    let reduce = &report["all_reduce"];
    assert_eq!(reduce["payload_bytes"], n);
    assert!(reduce["measured"]["mean_s"].as_f64().unwrap() > 0.0);
    assert_eq!((report["workers"].as_u64(), report["hosts"].as_u64()), (Some(4), Some(2)));
}

#[test]
fn local_run_reports_4n_intra_and_8n_inter() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("comm.json");
    let out = halo(&[
        "bench",
        "comm",
        "--workers",
        "4",
        "--hosts",
        "2",
        "--bytes",
        "8192",
        "--iterations",
        "2",
        "--report",
        path.to_str().unwrap(),
    ]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert!(text(&out.stdout).contains("all-to-all: 32768 B intra-host + 65536 B inter-host"), "{}", text(&out.stdout));
    let report = read_report(&path);
    assert_eq!(report["backend"], "local");
    assert_four_on_two(&report, 8192);
    assert!(report.get("link_fits").is_none(), "link fits are an MPI measurement");
}

#[test]
fn custom_links_change_the_model_and_bad_files_are_named() {
    let dir = tempfile::tempdir().unwrap();
    let links = dir.path().join("links.toml");
    std::fs::write(&links, "[inter]\nbandwidth_gb_s = 1.0\nlatency_us = 0.0\n").unwrap();
    let path = dir.path().join("comm.json");
    let out = halo(&[
        "bench",
        "comm",
        "--workers",
        "2",
        "--hosts",
        "2",
        "--bytes",
        "1000",
        "--iterations",
        "1",
        "--links",
        links.to_str().unwrap(),
        "--report",
        path.to_str().unwrap(),
    ]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let modeled = read_report(&path)["all_to_all"]["modeled_s"].as_f64().unwrap();
    assert!((modeled - 1e-6).abs() < 1e-15, "1000 B at 1 GB/s: {modeled}");

    std::fs::write(&links, "[inter]\nbandwidth_gb_s = -3.0\n").unwrap();
    let out = halo(&["bench", "comm", "--links", links.to_str().unwrap()]);
    assert!(!out.status.success());
    let stderr = text(&out.stderr);
    assert!(stderr.contains("links.toml") && stderr.contains("bandwidth_gb_s"), "{stderr}");
}

#[test]
fn uneven_hosts_name_both_flags() {
    let out = halo(&["bench", "comm", "--workers", "6", "--hosts", "4"]);
    assert!(!out.status.success());
    let stderr = text(&out.stderr);
    assert!(stderr.contains("--workers 6") && stderr.contains("--hosts 4"), "{stderr}");
}

#[test]
fn an_unwritable_report_is_named_before_any_work() {
    let dir = tempfile::tempdir().unwrap();
    let missing = dir.path().join("no-such-dir/comm.json");
    let out = halo(&["bench", "comm", "--workers", "2", "--report", missing.to_str().unwrap()]);
    let err = text(&out.stderr);
    assert!(!out.status.success() && err.contains("--report") && err.contains("no-such-dir"), "{err}");
    assert!(!err.contains("link"), "nothing was measured: {err}");
}

#[cfg(not(feature = "mpi"))]
#[test]
fn mpi_backend_without_the_feature_says_how_to_get_it() {
    let out = halo(&["bench", "comm", "--backend", "mpi"]);
    assert!(!out.status.success());
    assert!(text(&out.stderr).contains("--features mpi"), "{}", text(&out.stderr));
}

#[cfg(not(feature = "nccl"))]
#[test]
fn nccl_backend_without_the_feature_says_how_to_get_it() {
    let out = halo(&["bench", "comm", "--backend", "nccl"]);
    assert!(!out.status.success());
    assert!(text(&out.stderr).contains("rebuild with --features nccl"), "{}", text(&out.stderr));
}

/// With NCCL built in but no GPU driver (CI), the run fails with an error, not a panic.
#[cfg(feature = "nccl")]
#[test]
fn nccl_backend_without_a_driver_names_it() {
    let out = halo(&["bench", "comm", "--backend", "nccl", "--bytes", "4096", "--iterations", "1"]);
    if !out.status.success() {
        let stderr = text(&out.stderr);
        assert!(stderr.contains("NCCL") && !stderr.contains("panicked"), "{stderr}");
    }
}

/// Open MPI's launcher, allowed to run as root (CI does).
#[cfg(feature = "mpi")]
fn mpirun() -> Command {
    let path_var = std::env::var_os("PATH").unwrap_or_default();
    let mpirun =
        std::env::split_paths(&path_var).map(|d| d.join("mpirun")).find(|p| p.is_file()).unwrap_or_else(|| {
            panic!("mpirun was not found on PATH; install Open MPI or run the tests without --features mpi")
        });
    let mut command = Command::new(mpirun);
    command.env("OMPI_ALLOW_RUN_AS_ROOT", "1").env("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1");
    command
}

/// NCCL under mpirun, one process per GPU: without a GPU driver (CI) every rank fails with an
/// error naming the driver, not a panic; on a host with two GPUs it reports two NCCL workers.
#[cfg(all(feature = "mpi", feature = "nccl"))]
#[test]
fn nccl_under_mpirun_runs_a_process_per_gpu_or_names_the_missing_driver() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("comm.json");
    let out = mpirun()
        .args(["--oversubscribe", "-np", "2", env!("CARGO_BIN_EXE_halo")])
        .args(["bench", "comm", "--backend", "nccl", "--bytes", "65536", "--iterations", "2"])
        .args(["--timeout-s", "60", "--report", path.to_str().unwrap()])
        .output()
        .expect("cannot run mpirun");
    let stderr = text(&out.stderr);
    assert!(!stderr.contains("panicked"), "{stderr}");
    if out.status.success() {
        let report = read_report(&path);
        assert_eq!((report["backend"].as_str(), report["workers"].as_u64()), (Some("nccl"), Some(2)), "{report:#}");
    } else {
        assert!(stderr.contains("no CUDA driver") || stderr.contains("GPUs"), "{stderr}");
    }
}

/// An MPI launch of a build without MPI is told apart from the launcher's variables and
/// refused, instead of every process running its own one-thread-per-GPU job.
#[cfg(all(feature = "nccl", not(feature = "mpi")))]
#[test]
fn nccl_under_a_launcher_without_mpi_says_how_to_build_it() {
    let out = Command::new(env!("CARGO_BIN_EXE_halo"))
        .args(["bench", "comm", "--backend", "nccl"])
        .env("OMPI_COMM_WORLD_SIZE", "2")
        .output()
        .expect("cannot run halo");
    assert!(!out.status.success());
    let stderr = text(&out.stderr);
    assert!(stderr.contains("OMPI_COMM_WORLD_SIZE=2") && stderr.contains("--features nccl,mpi"), "{stderr}");
}

#[cfg(feature = "mpi")]
#[test]
fn mpirun_four_ranks_report_4n_intra_8n_inter_and_link_fits() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("comm.json");
    let out = mpirun()
        .args(["--oversubscribe", "-np", "4", env!("CARGO_BIN_EXE_halo")])
        .args(["bench", "comm", "--backend", "mpi", "--hosts", "2", "--bytes", "65536", "--iterations", "2"])
        .args(["--timeout-s", "60", "--report", path.to_str().unwrap()])
        .output()
        .expect("cannot run mpirun");
    assert!(out.status.success(), "{}\n{}", text(&out.stdout), text(&out.stderr));
    let report = read_report(&path);
    assert_eq!(report["backend"], "mpi");
    assert_four_on_two(&report, 65536);
    let fits = report["link_fits"].as_array().expect("link_fits under MPI");
    assert_eq!(fits.len(), 12, "one fit per ordered pair");
    for fit in fits {
        assert!(fit["fit"]["theta_s_per_mb"].is_f64() && fit["fit"]["gamma_s"].is_f64(), "{fit}");
        assert_eq!(fit["samples"], 21);
    }
}
