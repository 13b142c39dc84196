//! `halo partition` end to end on Cora: reports, saved books, parameter errors.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use graph_partition::book::{PartitionBook, part_path};
use graph_partition::metrics::PartitionMetrics;
use graph_partition::partition::HostLayout;
use serde_json::Value;

fn cora_dir() -> PathBuf {
    let dir = PathBuf::from(concat!(env!("CARGO_MANIFEST_DIR"), "/../../datasets/cora"));
    assert!(dir.is_dir(), "Cora is missing: expected the vendored copy at {}", dir.display());
    dir
}

/// Runs `halo partition` on Cora (without writing a cache into the repository) unless `args`
/// name another `--dataset`.
fn halo_partition(args: &[&str], report: &Path) -> Output {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_halo"));
    cmd.arg("partition").arg("--report").arg(report).args(args);
    if !args.contains(&"--dataset") {
        cmd.arg("--dataset").arg(cora_dir()).arg("--no-cache");
    }
    cmd.output().expect("run halo")
}

/// Runs `halo partition` on Cora with exactly `args` (no `--report` added).
fn halo_partition_bare(args: &[&str]) -> Output {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_halo"));
    cmd.arg("partition").args(args).arg("--dataset").arg(cora_dir()).arg("--no-cache");
    cmd.output().expect("run halo")
}

fn succeed(args: &[&str], report: &Path) -> Value {
    let out = halo_partition(args, report);
    assert!(out.status.success(), "halo partition {args:?} failed: {}", String::from_utf8_lossy(&out.stderr));
    serde_json::from_slice(&std::fs::read(report).unwrap()).unwrap()
}

fn fail(args: &[&str]) -> String {
    let dir = tempfile::tempdir().unwrap();
    let report = dir.path().join("r.json");
    let out = halo_partition(args, &report);
    assert!(!out.status.success(), "halo partition {args:?} should fail");
    assert!(!report.exists(), "no report after a failure");
    String::from_utf8_lossy(&out.stderr).into_owned()
}

#[test]
fn ebv_report_matches_the_saved_book() {
    let dir = tempfile::tempdir().unwrap();
    let (report, out) = (dir.path().join("report.json"), dir.path().join("book"));
    let args = ["--algo", "ebv", "--parts", "4", "--hosts", "2", "--out", out.to_str().unwrap()];
    let r = succeed(&args, &report);
    for key in [
        "algorithm",
        "parts",
        "hosts",
        "replication_factor",
        "edge_imbalance",
        "vertex_imbalance",
        "edge_cut_fraction",
        "remote_neighbor_ratio",
        "max_inner_connections",
        "max_outer_connections",
        "time_s",
        "peak_rss_bytes",
    ] {
        assert!(r.get(key).is_some(), "report lacks {key}: {r}");
    }
    assert_eq!(r["algorithm"], "ebv");
    assert_eq!((r["parts"].as_u64(), r["hosts"].as_u64()), (Some(4), Some(2)));
    assert!(r["edge_cut_fraction"].is_null(), "vertex-cut has no edge-cut fraction");
    assert!(r["edge_imbalance"].as_f64().unwrap() <= 1.05);
    assert!(r["time_s"].as_f64().unwrap() > 0.0);

    let book = PartitionBook::load(&out).unwrap();
    let m = PartitionMetrics::of(&book, &HostLayout::new(4, 2).unwrap()).unwrap();
    assert_eq!(r["replication_factor"].as_f64().unwrap(), m.replication_factor);
    assert_eq!(r["max_outer_connections"].as_u64().unwrap(), m.max_outer_connections);
    assert_eq!(book.meta().num_nodes, 2708);
}

#[test]
fn metis_with_l_hop_sets() {
    let dir = tempfile::tempdir().unwrap();
    let (report, out) = (dir.path().join("report.json"), dir.path().join("book"));
    let r = succeed(&["--algo", "metis", "--parts", "4", "--hops", "2", "--out", out.to_str().unwrap()], &report);
    let cut = r["edge_cut_fraction"].as_f64().unwrap();
    assert!(cut > 0.0 && cut < 0.2, "METIS cut fraction {cut}");
    assert_eq!(r["l_hop"]["hops"], 2);
    let book = PartitionBook::load(&out).unwrap();
    let l_hop = book.l_hop().expect("l-hop sets saved");
    let sizes: Vec<u64> = l_hop.nodes.iter().map(|s| s.len() as u64).collect();
    let reported: Vec<u64> =
        r["l_hop"]["nodes_per_part"].as_array().unwrap().iter().map(|v| v.as_u64().unwrap()).collect();
    assert_eq!(sizes, reported);
    for (lg, set) in book.parts().iter().zip(&l_hop.nodes) {
        assert!(set.len() >= lg.num_primary());
    }
}

#[test]
fn bad_parameters_name_their_flag() {
    assert!(fail(&["--algo", "ebv", "--parts", "0"]).contains("--parts"));
    assert!(fail(&["--algo", "hash", "--parts", "5000"]).contains("--parts"));
    assert!(fail(&["--algo", "ebv", "--parts", "4", "--hosts", "3"]).contains("--hosts"));
    assert!(fail(&["--algo", "ebv", "--parts", "4", "--gamma", "1.5"]).contains("--gamma"));
    assert!(fail(&["--algo", "ebv", "--parts", "4", "--hops", "2"]).contains("--hops"));
    let unknown = fail(&["--algo", "kernighan", "--parts", "4"]);
    assert!(unknown.contains("--algo") && unknown.contains("random-vertex-cut"), "{unknown}");
    let missing = fail(&["--algo", "hash", "--parts", "2", "--dataset", "/nonexistent/halo-data"]);
    assert!(missing.contains("/nonexistent/halo-data"), "{missing}");
}

#[test]
fn out_alone_saves_a_book_and_a_rerun_with_fewer_parts_leaves_no_stale_part() {
    let dir = tempfile::tempdir().unwrap();
    let book_dir = dir.path().join("book");
    let out = book_dir.to_str().unwrap();
    let run = halo_partition_bare(&["--algo", "metis", "--parts", "4", "--out", out]);
    assert!(run.status.success(), "--out without --report: {}", String::from_utf8_lossy(&run.stderr));
    assert!(part_path(&book_dir, 3).is_file());
    let run = halo_partition_bare(&["--algo", "metis", "--parts", "2", "--out", out]);
    assert!(run.status.success(), "{}", String::from_utf8_lossy(&run.stderr));
    assert!(!part_path(&book_dir, 2).exists() && !part_path(&book_dir, 3).exists(), "stale parts remain");
    assert_eq!(PartitionBook::load(&book_dir).unwrap().meta().parts, 2);
}

#[test]
fn unwritable_outputs_name_their_flag_before_any_work() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("a-file");
    std::fs::write(&file, "").unwrap();
    let msg = fail(&["--algo", "hash", "--parts", "2", "--out", file.to_str().unwrap()]);
    assert!(msg.contains("--out") && msg.contains("a-file"), "{msg}");
    // A book directory that cannot be created: its parent is a file.
    let below_file = file.join("book");
    let msg = fail(&["--algo", "hash", "--parts", "2", "--out", below_file.to_str().unwrap()]);
    assert!(msg.contains("--out") && msg.contains("a-file/book"), "{msg}");
    let missing_dir = dir.path().join("no-such-dir/report.json");
    let run = halo_partition_bare(&["--algo", "hash", "--parts", "2", "--report", missing_dir.to_str().unwrap()]);
    let msg = String::from_utf8_lossy(&run.stderr);
    assert!(!run.status.success() && msg.contains("--report") && msg.contains("no-such-dir"), "{msg}");
}

#[test]
fn missing_dataset_says_how_to_download() {
    let msg = fail(&["--algo", "hash", "--parts", "2", "--dataset", "/nonexistent/ogbn-arxiv"]);
    assert!(msg.contains("/nonexistent/ogbn-arxiv") && msg.contains("cargo xtask download"), "{msg}");
}

#[test]
fn more_parts_than_vertices_is_one_short_error() {
    let msg = fail(&["--algo", "ebv", "--parts", "3000"]);
    assert!(msg.contains("--parts") && msg.contains("2708") && msg.len() < 300, "{msg}");
}

#[test]
fn load_flags_non_finite_features_and_cache_dir() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("d");
    let toy =
        graph_partition::SynthConfig { nodes: 40, avg_degree: 4.0, features: 3, classes: 2, ..Default::default() };
    let mut dataset = toy.generate().unwrap();
    dataset.features[[9, 2]] = f32::INFINITY;
    dataset.write_ogb(&data).unwrap();
    let data = data.to_str().unwrap();
    let msg = fail(&["--algo", "hash", "--parts", "2", "--dataset", data]);
    assert!(msg.contains("node-feat.csv.gz:10: column 3") && msg.contains("--allow-nonfinite"), "{msg}");
    // With --out the features are only streamed into the part files; the error is the same, and
    // no part folder is left (no parts.json, no part rows).
    let out = dir.path().join("parts");
    let msg = fail(&["--algo", "hash", "--parts", "2", "--dataset", data, "--out", out.to_str().unwrap()]);
    assert!(msg.contains("node-feat.csv.gz:10: column 3") && msg.contains("--allow-nonfinite"), "{msg}");
    let left: Vec<_> = std::fs::read_dir(&out).unwrap().map(|e| e.unwrap().file_name()).collect();
    assert!(left.iter().all(|n| n == "book.json" || n.to_str().unwrap().ends_with(".bin")), "{left:?}");

    let caches = dir.path().join("caches");
    let report = dir.path().join("r.json");
    let args = ["--algo", "hash", "--parts", "2", "--dataset", data, "--allow-nonfinite", "--cache-dir"];
    succeed(&[&args[..], &[caches.to_str().unwrap()]].concat(), &report);
    assert_eq!(std::fs::read_dir(&caches).unwrap().count(), 1, "the cache went to --cache-dir");
    assert!(!dir.path().join("d/processed").exists());
}

/// `--dataset cora` names `datasets/cora` from the repository root, and a report inside the
/// book's folder is refused before any work.
#[test]
fn a_bare_dataset_name_and_a_report_inside_the_book() {
    let root = cora_dir().join("../..");
    let dir = tempfile::tempdir().unwrap();
    let report = dir.path().join("r.json");
    let out = Command::new(env!("CARGO_BIN_EXE_halo"))
        .args(["partition", "--dataset", "cora", "--no-cache", "--algo", "hash", "--parts", "2", "--report"])
        .arg(&report)
        .current_dir(&root)
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let json: Value = serde_json::from_slice(&std::fs::read(&report).unwrap()).unwrap();
    assert_eq!(json["num_nodes"], 2708);
    let book = dir.path().join("book");
    let inside = book.join("book.json");
    let out = halo_partition(&["--algo", "hash", "--parts", "2", "--out", book.to_str().unwrap()], &inside);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success() && err.contains("--out") && err.contains("--report"), "{err}");
    assert!(!book.exists(), "refused before any work");
}
