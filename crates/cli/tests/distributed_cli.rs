//! `halo train --method vanilla` end to end on Cora: the distributed report, flag errors, and
//! (with the `mpi` feature) an `mpirun` job that must reproduce the local run.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use serde_json::Value;

fn cora_dir() -> PathBuf {
    let dir = PathBuf::from(concat!(env!("CARGO_MANIFEST_DIR"), "/../../datasets/cora"));
    assert!(dir.is_dir(), "Cora is missing: expected the vendored copy at {}", dir.display());
    dir
}

/// `halo train` arguments of a short vanilla run on Cora with 2 hosts.
fn vanilla_args(cut: &str, epochs: usize) -> Vec<String> {
    let cora = cora_dir().display().to_string();
    let epochs = epochs.to_string();
    ["train", "--dataset", &cora, "--method", "vanilla", "--cut", cut, "--hosts", "2", "--epochs", &epochs, "--quiet"]
        .map(String::from)
        .to_vec()
}

fn halo(args: &[String], extra: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_halo")).args(args).args(extra).output().expect("run halo")
}

fn report_of(out: &Output, path: &Path) -> Value {
    assert!(out.status.success(), "halo failed: {}", String::from_utf8_lossy(&out.stderr));
    serde_json::from_slice(&std::fs::read(path).expect("report written")).expect("report is JSON")
}

#[cfg(feature = "mpi")]
fn losses(report: &Value) -> Vec<f64> {
    report["epochs"].as_array().expect("epochs").iter().map(|e| e["loss"].as_f64().expect("loss")).collect()
}

#[test]
fn vanilla_run_writes_a_distributed_report() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("r.json");
    let out = halo(&vanilla_args("vertex", 3), &["--workers", "4", "--report", path.to_str().unwrap()]);
    let r = report_of(&out, &path);
    assert_eq!((r["method"].as_str(), r["cut"].as_str()), (Some("vanilla"), Some("vertex")));
    assert_eq!((r["workers"].as_u64(), r["hosts"].as_u64()), (Some(4), Some(2)));
    assert_eq!(r["partition"]["algorithm"], "ebv");
    assert!(r["partition"]["replication_factor"].as_f64().unwrap() > 1.0);
    assert_eq!(r["config"]["distributed"]["workers"], 4);
    assert_eq!((r["graph"]["vertices"].as_u64(), r["graph"]["edges"].as_u64()), (Some(2708), Some(10556)));
    let epochs = r["epochs"].as_array().unwrap();
    assert_eq!(epochs.len(), 3);
    for e in epochs {
        assert!(e["bytes_inter"].as_u64().unwrap() > 0 && e["modeled_comm_s"].as_f64().unwrap() > 0.0, "{e}");
        assert_eq!(e["method"]["compute_s_per_worker"].as_array().map(Vec::len), Some(4), "{e}");
    }
    assert_eq!(r["final"]["method"]["workers"].as_array().map(Vec::len), Some(4));
    assert!(
        String::from_utf8_lossy(&out.stdout).starts_with("vanilla gcn on cora"),
        "{}",
        String::from_utf8_lossy(&out.stdout)
    );
}

#[test]
fn a_partitioner_of_the_other_cut_is_a_flag_error() {
    let out = halo(&vanilla_args("vertex", 1), &["--partitioner", "metis"]);
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("partitioner") && err.contains("`metis` does not make a vertex-cut"), "{err}");
    let out = halo(&vanilla_args("edge", 1), &["--workers", "3"]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("`hosts`") && err.contains("divide workers = 3"), "{err}");
}

#[cfg(not(feature = "mpi"))]
#[test]
fn the_mpi_backend_needs_the_mpi_feature() {
    let out = halo(&vanilla_args("edge", 1), &["--backend", "mpi"]);
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("--backend mpi needs halo built with the `mpi` feature"), "{err}");
}

/// Under mpirun, `--method vanilla` without `--backend` trains one worker per process instead of
/// a whole local job in each (the mpirun trap).
#[cfg(feature = "mpi")]
#[test]
fn mpirun_without_a_backend_flag_trains_on_the_mpi_backend() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("auto.json");
    let out = Command::new("mpirun")
        .args(["-np", "2", "--oversubscribe", env!("CARGO_BIN_EXE_halo")])
        .args(vanilla_args("edge", 2))
        .args(["--report", path.to_str().unwrap()])
        .env("OMPI_ALLOW_RUN_AS_ROOT", "1")
        .env("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1")
        .output()
        .expect("mpirun is installed");
    let report = report_of(&out, &path);
    assert_eq!(report["final"]["method"]["backend"], "mpi");
    assert_eq!((report["workers"].as_u64(), report["hosts"].as_u64()), (Some(2), Some(2)));
}

/// `--backend nccl` under mpirun trains one process per GPU, their gradients summed by NCCL
/// (`mpi-nccl`): on a host with two GPUs the report names the backend and follows the MPI run's
/// losses (NCCL sums in its own order: within 1e-4); without a GPU driver (CI) every rank fails
/// with an error naming it, not a panic.
#[cfg(all(feature = "mpi", feature = "nccl", feature = "cuda"))]
#[test]
fn nccl_under_mpirun_sums_on_a_gpu_per_process_or_names_the_missing_driver() {
    let dir = tempfile::tempdir().unwrap();
    let (nccl, mpi) = (dir.path().join("nccl.json"), dir.path().join("mpi.json"));
    let mut args = vanilla_args("edge", 2);
    args.extend(["--device", "cuda"].map(String::from));
    let out = Command::new("mpirun")
        .args(["-np", "2", "--oversubscribe", env!("CARGO_BIN_EXE_halo")])
        .args(&args)
        .args(["--backend", "nccl", "--report", nccl.to_str().unwrap()])
        .env("OMPI_ALLOW_RUN_AS_ROOT", "1")
        .env("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1")
        .output()
        .expect("mpirun is installed");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!stderr.contains("panicked"), "{stderr}");
    if !out.status.success() {
        assert!(stderr.contains("CUDA driver") || stderr.contains("GPU"), "{stderr}");
        return;
    }
    let report = report_of(&out, &nccl);
    assert_eq!(report["final"]["method"]["backend"], "mpi-nccl");
    let host = report_of(&mpirun_halo(2, &args, &mpi), &mpi);
    for (a, b) in losses(&report).iter().zip(losses(&host)) {
        assert!((a - b).abs() <= 1e-4, "NCCL {a} against MPI {b}");
    }
}

/// `mpirun -np 4` ranks, each loading nothing but its share, train exactly like 4 in-process
/// workers: the same losses at every epoch.
#[cfg(feature = "mpi")]
#[test]
fn an_mpirun_job_reproduces_the_local_run() {
    let dir = tempfile::tempdir().unwrap();
    for cut in ["edge", "vertex"] {
        let args = vanilla_args(cut, 5);
        let local_path = dir.path().join(format!("local-{cut}.json"));
        let local = report_of(&halo(&args, &["--workers", "4", "--report", local_path.to_str().unwrap()]), &local_path);
        let mpi_path = dir.path().join(format!("mpi-{cut}.json"));
        let out = mpirun_halo(4, &args, &mpi_path);
        let mpi = report_of(&out, &mpi_path);
        assert_eq!(mpi["final"]["method"]["backend"], "mpi");
        assert_eq!(mpi["workers"], 4);
        let (a, b) = (losses(&local), losses(&mpi));
        assert_eq!(a.len(), b.len(), "{cut}-cut: epoch counts");
        for (epoch, (x, y)) in a.iter().zip(&b).enumerate() {
            assert!((x - y).abs() <= 1e-6 * x.abs(), "{cut}-cut epoch {}: local loss {x} vs MPI {y}", epoch + 1);
        }
        let worst = a.iter().zip(&b).map(|(x, y)| (x - y).abs() / x.abs()).fold(0.0, f64::max);
        eprintln!("{cut}-cut: largest relative loss difference, local vs mpirun: {worst:.2e}");
        for key in ["bytes_intra", "bytes_inter", "messages"] {
            assert_eq!(local["epochs"][0][key], mpi["epochs"][0][key], "{cut}-cut: {key} of epoch 1");
        }
    }
}

/// `mpirun -np 2` data-parallel ranks, each loading Cora itself, train exactly like 2
/// in-process workers.
#[cfg(feature = "mpi")]
#[test]
fn an_mpirun_data_parallel_job_reproduces_the_local_run() {
    let dir = tempfile::tempdir().unwrap();
    let cora = cora_dir().display().to_string();
    let args: Vec<String> = [
        "train",
        "--dataset",
        &cora,
        "--model",
        "sage",
        "--method",
        "data-parallel",
        "--batch-size",
        "16",
        "--fanouts",
        "5,5",
        "--epochs",
        "3",
        "--quiet",
    ]
    .map(String::from)
    .to_vec();
    let local_path = dir.path().join("local-dp.json");
    let local = report_of(&halo(&args, &["--workers", "2", "--report", local_path.to_str().unwrap()]), &local_path);
    let mpi_path = dir.path().join("mpi-dp.json");
    let out = mpirun_halo(2, &args, &mpi_path);
    let mpi = report_of(&out, &mpi_path);
    assert_eq!((mpi["final"]["method"]["backend"].as_str(), mpi["workers"].as_u64()), (Some("mpi"), Some(2)));
    for (epoch, (x, y)) in losses(&local).iter().zip(&losses(&mpi)).enumerate() {
        assert!((x - y).abs() <= 1e-6 * x.abs(), "epoch {}: local loss {x} vs MPI {y}", epoch + 1);
    }
    assert_eq!(local["epochs"][0]["bytes_by_phase"], mpi["epochs"][0]["bytes_by_phase"]);
}

/// Under `mpirun`, every rank writing its own shard: 6 epochs straight equal 3 epochs, a
/// checkpoint, and 3 more resumed from it, bit for bit, under both cuts.
#[cfg(feature = "mpi")]
#[test]
fn an_mpirun_job_resumes_exactly_from_its_checkpoint() {
    for cut in ["edge", "vertex"] {
        assert_mpirun_resume_is_exact(&format!("{cut}-cut"), |epochs| vanilla_args(cut, epochs));
    }
}

/// The methods whose exchange carries codec state (caches, residuals, trend histories, bit
/// tables) and whose controllers carry theirs, and parameter servers (Adam's moments in the
/// servers' slices), resume as exactly under `mpirun`.
#[cfg(feature = "mpi")]
#[test]
fn mpirun_jobs_of_the_codec_stack_methods_resume_exactly() {
    let runs: [(&str, &[&str]); 5] = [
        ("cdfgnn", &["--eps-controller", "error-target", "--cut", "vertex"]),
        ("adaqp", &["--assign-period", "2"]),
        ("ecgraph", &["--trend", "2"]),
        ("vanilla", &["--skip-repeats", "--cut", "vertex"]),
        ("vanilla", &["--param-sync", "ps"]),
    ];
    for (method, extra) in runs {
        assert_mpirun_resume_is_exact(method, |epochs| {
            let mut args = vanilla_args("edge", epochs);
            args[4] = method.to_string();
            // Each method's cut is in `extra` (edge-cut when none is given).
            args.drain(5..7);
            args.extend(extra.iter().map(|a| a.to_string()));
            args
        });
    }
}

/// The mini-batch runners resume as exactly under `mpirun`: data-parallel and ADGraph (the
/// sampler's draws are keyed by seed, epoch and step; the optimizer and the warm-up's position
/// come back), and featpart with the checkpoint (after 15 iterations, 5 per epoch) three
/// iterations into a tau cycle of 4.
#[cfg(feature = "mpi")]
#[test]
fn mpirun_jobs_of_the_mini_batch_methods_resume_exactly() {
    let runs: [(&str, &[&str]); 3] = [("data-parallel", &[]), ("adgraph", &[]), ("featpart", &["--tau", "3"])];
    for (method, extra) in runs {
        assert_mpirun_resume_is_exact(method, |epochs| {
            let mut args = vanilla_args("edge", epochs);
            args[4] = method.to_string();
            args.drain(5..7);
            let sampled = ["--batch-size", "16", "--fanouts", "5,5", "--lr-warmup", "5"];
            args.extend(sampled.iter().chain(extra).map(|a| a.to_string()));
            args
        });
    }
}

/// 6 epochs straight against 3 + checkpoint + 3 resumed, 2 ranks: the loss, validation
/// accuracy and bytes of every epoch, and the best epoch.
#[cfg(feature = "mpi")]
fn assert_mpirun_resume_is_exact(name: &str, args: impl Fn(usize) -> Vec<String>) {
    let dir = tempfile::tempdir().unwrap();
    let ck = dir.path().join("ck").display().to_string();
    let straight_path = dir.path().join("straight.json");
    let straight = report_of(&mpirun_halo(2, &args(6), &straight_path), &straight_path);
    let first_path = dir.path().join("first.json");
    let first = [args(3), vec!["--checkpoint-dir".into(), ck.clone()]].concat();
    report_of(&mpirun_halo(2, &first, &first_path), &first_path);
    let resumed_path = dir.path().join("resumed.json");
    let resumed = [args(6), vec!["--resume".into(), ck]].concat();
    let resumed = report_of(&mpirun_halo(2, &resumed, &resumed_path), &resumed_path);
    let bits = |r: &Value| {
        let epochs = r["epochs"].as_array().expect("epochs");
        let field = |e: &Value, key: &str| e[key].as_f64().unwrap_or_else(|| panic!("{name}: no {key} in {e}"));
        let bytes = |e: &Value| e["bytes_intra"].as_u64().zip(e["bytes_inter"].as_u64()).map(|(a, b)| a + b);
        epochs.iter().map(|e| (field(e, "loss").to_bits(), field(e, "val_acc").to_bits(), bytes(e))).collect::<Vec<_>>()
    };
    assert_eq!(bits(&straight), bits(&resumed), "{name}: 6 straight epochs vs 3 + 3 resumed");
    for key in ["best_epoch", "test_acc_at_best_val"] {
        assert_eq!(straight["final"][key], resumed["final"][key], "{name}: {key}");
    }
}

/// `mpirun -np NP halo train ARGS --backend mpi --report REPORT`, as root where need be.
#[cfg(feature = "mpi")]
fn mpirun_halo(np: usize, args: &[String], report: &Path) -> Output {
    Command::new("mpirun")
        .args(["-np", &np.to_string(), "--oversubscribe", env!("CARGO_BIN_EXE_halo")])
        .args(args)
        .args(["--backend", "mpi", "--report", report.to_str().unwrap()])
        .env("OMPI_ALLOW_RUN_AS_ROOT", "1")
        .env("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1")
        .output()
        .expect("mpirun is installed")
}

/// `halo partition` of Cora into `parts` parts with `algo`, written to `dir` as a part folder;
/// also returns a copy of the same book without the rows (`book.json` and `part-<i>.bin`),
/// which a run reads by today's streamed scatter.
fn part_folder(dir: &Path, algo: &str, parts: usize) -> (PathBuf, PathBuf) {
    let (folder, book) = (dir.join(format!("parts-{algo}")), dir.join(format!("book-{algo}")));
    let cora = cora_dir().display().to_string();
    let args = ["partition", "--dataset", &cora, "--algo", algo, "--parts", &parts.to_string(), "--hosts", "2"];
    let out = halo(&args.map(String::from), &["--out", folder.to_str().unwrap()]);
    assert!(out.status.success(), "halo partition failed: {}", String::from_utf8_lossy(&out.stderr));
    std::fs::create_dir_all(&book).unwrap();
    for entry in std::fs::read_dir(&folder).unwrap() {
        let name = entry.unwrap().file_name().into_string().unwrap();
        if name == "book.json" || name.ends_with(".bin") {
            std::fs::copy(folder.join(&name), book.join(&name)).unwrap();
        }
    }
    (folder, book)
}

/// In-process workers, each reading its own part of a part folder, train like today's scatter
/// of the same book, bit for bit: edge-cut, vertex-cut and EC-Graph's halo feature cache (whose
/// halo rows come from the part files).
#[test]
fn workers_reading_their_parts_train_like_the_scatter_of_the_same_book() {
    let dir = tempfile::tempdir().unwrap();
    for (cut, algo, method) in
        [("edge", "metis", "vanilla"), ("vertex", "ebv", "vanilla"), ("edge", "metis", "ecgraph")]
    {
        let (folder, book) = part_folder(dir.path(), algo, 4);
        let mut args = vanilla_args(cut, 3);
        args[4] = method.to_string();
        let model = |name: &str| dir.path().join(format!("model-{name}-{cut}-{method}.safetensors"));
        let run = |book: &Path, name: &str| {
            let path = dir.path().join(format!("{name}-{cut}-{method}.json"));
            let (book, report, model) = (book.to_str().unwrap(), path.to_str().unwrap(), model(name));
            let extra = ["--workers", "4", "--partition-book", book, "--report", report];
            report_of(&halo(&args, &[&extra[..], &["--save-model", model.to_str().unwrap()]].concat()), &path)
        };
        let (parts, scatter) = (run(&folder, "parts"), run(&book, "scatter"));
        // The tensors, after the header (whose JSON keys come in no fixed order).
        let tensors = |name: &str| {
            let bytes = std::fs::read(model(name)).unwrap();
            let header = u64::from_le_bytes(bytes[..8].try_into().unwrap()) as usize;
            bytes[8 + header..].to_vec()
        };
        assert_eq!(tensors("parts"), tensors("scatter"), "{method} {cut}-cut: saved weights");
        assert_eq!(parts["epochs"].as_array().unwrap().len(), 3);
        for key in ["loss", "train_acc", "val_acc", "test_acc"] {
            for (a, b) in parts["epochs"].as_array().unwrap().iter().zip(scatter["epochs"].as_array().unwrap()) {
                assert_eq!(a[key], b[key], "{method} {cut}-cut: {key}");
            }
        }
        assert_eq!(
            parts["final"]["test_acc_at_best_val"], scatter["final"]["test_acc_at_best_val"],
            "{method} {cut}-cut"
        );
        assert_eq!(parts["graph"], scatter["graph"]);
        assert_eq!(parts["split_sizes"], scatter["split_sizes"]);
        assert_eq!(parts["partition"]["replication_factor"], scatter["partition"]["replication_factor"]);
    }
}

/// Workers reading their parts resume from a checkpoint exactly: 3 epochs straight equal 2,
/// a checkpoint and 1 resumed.
#[test]
fn workers_reading_their_parts_resume_exactly() {
    let dir = tempfile::tempdir().unwrap();
    let (folder, _) = part_folder(dir.path(), "metis", 4);
    let ck = dir.path().join("ck").display().to_string();
    let run = |epochs: usize, extra: &[&str], name: &str| {
        let path = dir.path().join(format!("{name}.json"));
        let book = folder.to_str().unwrap();
        let common = ["--workers", "4", "--partition-book", book, "--report", path.to_str().unwrap()];
        report_of(&halo(&vanilla_args("edge", epochs), &[&common[..], extra].concat()), &path)
    };
    let straight = run(3, &[], "straight");
    run(2, &["--checkpoint-dir", &ck], "first");
    let resumed = run(3, &["--resume", &ck], "resumed");
    let losses = |r: &Value| r["epochs"].as_array().unwrap().iter().map(|e| e["loss"].clone()).collect::<Vec<_>>();
    assert_eq!(losses(&straight), losses(&resumed));
    assert_eq!(straight["final"]["test_acc_at_best_val"], resumed["final"]["test_acc_at_best_val"]);
}

/// A part folder that does not fit the run, or a part that is not its rank's, truncated or
/// corrupt, is refused before training, naming the file, the rank and the field.
#[test]
fn a_part_folder_that_does_not_fit_is_refused_naming_the_mismatch() {
    let dir = tempfile::tempdir().unwrap();
    let (folder, _) = part_folder(dir.path(), "metis", 4);
    let train = |args: &[String], extra: &[&str]| {
        let book = folder.to_str().unwrap();
        let out = halo(args, &[&["--partition-book", book], extra].concat());
        assert!(!out.status.success(), "trained on a bad part folder");
        String::from_utf8_lossy(&out.stderr).into_owned()
    };
    let args = vanilla_args("edge", 1);
    let err = train(&args, &["--workers", "2"]);
    // Each rank refuses it; whichever does first is named.
    assert!(err.contains("(rank ") && err.contains("4 parts, the run has 2 workers"), "{err}");
    let err = train(&vanilla_args("vertex", 1), &["--workers", "4"]);
    assert!(err.contains("edge-cut, the run needs a vertex-cut"), "{err}");
    // Another dataset: Cora with one file changed.
    let other = dir.path().join("cora-copy");
    std::fs::create_dir_all(other.join("raw")).unwrap();
    for name in ["raw/edge.csv.gz", "raw/node-feat.csv.gz", "raw/node-label.csv.gz", "raw/num-node-list.csv.gz"] {
        std::fs::copy(cora_dir().join(name), other.join(name)).unwrap();
    }
    std::fs::write(other.join("meta.json"), "{\"name\": \"other\"}").unwrap();
    let mut moved = args.clone();
    moved[2] = other.display().to_string();
    let err = train(&moved, &["--workers", "4"]);
    assert!(err.contains("parts.json") && err.contains("dataset fingerprint"), "{err}");

    let rows = |i: usize| folder.join(format!("part-{i}.rows"));
    let keep: Vec<Vec<u8>> = (0..4).map(|i| std::fs::read(rows(i)).unwrap()).collect();
    // Rank 1 reads part 2's rows.
    std::fs::write(rows(1), &keep[2]).unwrap();
    let err = train(&args, &["--workers", "4"]);
    assert!(err.contains("part-1.rows") && err.contains("it holds part 2, read by rank 1"), "{err}");
    // A truncated part.
    std::fs::write(rows(1), &keep[1][..keep[1].len() - 10]).unwrap();
    let err = train(&args, &["--workers", "4"]);
    assert!(err.contains("rank 1") && err.contains("part-1.rows") && err.contains("truncated"), "{err}");
    // A flipped feature byte.
    let mut flipped = keep[1].clone();
    let at = flipped.len() / 4;
    flipped[at] ^= 0x40;
    std::fs::write(rows(1), &flipped).unwrap();
    let err = train(&args, &["--workers", "4"]);
    assert!(err.contains("part-1.rows") && err.contains("features checksum mismatch"), "{err}");
    // Another format version.
    let mut newer = keep[1].clone();
    newer[8] = 99;
    std::fs::write(rows(1), &newer).unwrap();
    let err = train(&args, &["--workers", "4"]);
    assert!(err.contains("part-1.rows") && err.contains("format version is 99"), "{err}");
    std::fs::write(rows(1), &keep[1]).unwrap();
    let path = dir.path().join("ok.json");
    report_of(
        &halo(
            &args,
            &["--workers", "4", "--partition-book", folder.to_str().unwrap(), "--report", path.to_str().unwrap()],
        ),
        &path,
    );
}

/// `mpirun -np 4` ranks, each opening only its part of a part folder, give the losses and
/// accuracies of today's scatter of the same book under `mpirun`, bit for bit.
#[cfg(feature = "mpi")]
#[test]
fn an_mpirun_job_on_part_folders_trains_like_the_scatter_of_the_same_book() {
    let dir = tempfile::tempdir().unwrap();
    for (cut, algo) in [("edge", "metis"), ("vertex", "ebv")] {
        let (folder, book) = part_folder(dir.path(), algo, 4);
        let mut args = vanilla_args(cut, 3);
        let run = |book: &Path, name: &str, args: &mut Vec<String>| {
            let path = dir.path().join(format!("{name}-{cut}.json"));
            args.extend(["--partition-book".to_string(), book.display().to_string()]);
            let report = report_of(&mpirun_halo(4, args, &path), &path);
            args.truncate(args.len() - 2);
            report
        };
        let (parts, scatter) = (run(&folder, "parts", &mut args), run(&book, "scatter", &mut args));
        assert_eq!(parts["final"]["method"]["backend"], "mpi");
        assert_eq!(losses(&parts), losses(&scatter), "{cut}-cut losses");
        for key in ["train_acc", "val_acc", "test_acc"] {
            for (a, b) in parts["epochs"].as_array().unwrap().iter().zip(scatter["epochs"].as_array().unwrap()) {
                assert_eq!(a[key], b[key], "{cut}-cut {key}");
            }
        }
    }
}
