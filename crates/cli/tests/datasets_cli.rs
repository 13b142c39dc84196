//! `halo datasets info|synth` through the built binary.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

fn halo(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_halo")).args(args).output().expect("the halo binary runs")
}

fn stdout(out: &Output) -> String {
    String::from_utf8_lossy(&out.stdout).into_owned()
}

fn stderr(out: &Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

fn cora() -> PathBuf {
    let dir = PathBuf::from(concat!(env!("CARGO_MANIFEST_DIR"), "/../../datasets/cora"));
    assert!(
        dir.join("raw/edge.csv.gz").is_file(),
        "Cora is missing: expected the vendored copy at {}",
        dir.display()
    );
    dir
}

/// The value printed after `label` on its line, e.g. `nodes     2708` -> "2708".
fn line_with<'a>(text: &'a str, label: &str) -> &'a str {
    text.lines().find(|l| l.starts_with(label)).unwrap_or_else(|| panic!("no `{label}` line in:\n{text}"))
}

#[test]
fn info_on_cora_prints_the_published_sizes() {
    let out = halo(&["datasets", "info", cora().to_str().unwrap(), "--no-cache"]);
    assert!(out.status.success(), "{}", stderr(&out));
    let text = stdout(&out);
    assert_eq!(line_with(&text, "nodes"), "nodes     2708");
    assert_eq!(line_with(&text, "edges"), "edges     5278 undirected, 10556 directed (stored entries)");
    assert_eq!(line_with(&text, "features"), "features  1433");
    assert!(line_with(&text, "classes").starts_with("classes   7 classes"), "{text}");
    assert_eq!(line_with(&text, "split"), "split     public: train 140, valid 500, test 1000");
    assert!(line_with(&text, "degree").starts_with("degree    min 1, max 168, mean 3.90"), "{text}");
}

#[test]
fn info_json_and_cache_default_on_a_read_only_directory() {
    // Cora's directory is read-only: the default (cached) path must still work.
    let out = halo(&["datasets", "info", cora().to_str().unwrap(), "--json", "--split", "public"]);
    assert!(out.status.success(), "{}", stderr(&out));
    let v: serde_json::Value = serde_json::from_str(&stdout(&out)).expect("valid JSON");
    assert_eq!(v["nodes"], 2708);
    assert_eq!(v["undirected_edges"], 5278);
    assert_eq!(v["directed_edges"], 10556);
    assert_eq!(v["features"], 1433);
    assert_eq!(v["classes"], 7);
    assert_eq!((v["train"].clone(), v["valid"].clone(), v["test"].clone()), (140.into(), 500.into(), 1000.into()));
    assert_eq!(v["degree"]["max"], 168);
}

#[test]
fn synth_then_info_round_trip() {
    let dir = tempfile::tempdir().unwrap();
    let out_dir = dir.path().join("synth");
    let out = halo(&[
        "datasets",
        "synth",
        "--nodes",
        "600",
        "--avg-degree",
        "8",
        "--features",
        "12",
        "--classes",
        "3",
        "--communities",
        "4",
        "--intra",
        "0.7",
        "--seed",
        "9",
        "--out",
        out_dir.to_str().unwrap(),
    ]);
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(stdout(&out).contains("600 nodes"), "{}", stdout(&out));
    for file in ["raw/edge.csv.gz", "raw/node-feat.csv.gz", "split/random/test.csv.gz", "meta.json"] {
        assert!(out_dir.join(file).is_file(), "missing {file}");
    }
    let out = halo(&["datasets", "info", out_dir.to_str().unwrap(), "--json"]);
    assert!(out.status.success(), "{}", stderr(&out));
    let v: serde_json::Value = serde_json::from_str(&stdout(&out)).unwrap();
    assert_eq!((v["nodes"].as_u64(), v["features"].as_u64(), v["classes"].as_u64()), (Some(600), Some(12), Some(3)));
    assert_eq!((v["train"].as_u64(), v["valid"].as_u64(), v["test"].as_u64()), (Some(360), Some(120), Some(120)));
    assert_eq!(v["split"], "random");
    let mean = v["degree"]["mean"].as_f64().unwrap();
    assert!((mean - 8.0).abs() < 0.8, "mean degree {mean}");
    // The first info wrote the cache; a second run reads it and agrees.
    assert!(out_dir.join("processed/halo-cache-v1.bin").is_file());
    let again = halo(&["datasets", "info", out_dir.to_str().unwrap(), "--json"]);
    assert_eq!(stdout(&again), stdout(&out));
}

#[test]
fn bad_path_fails_naming_it() {
    let missing = Path::new("/nonexistent/halo/dataset-dir");
    let out = halo(&["datasets", "info", missing.to_str().unwrap()]);
    assert!(!out.status.success());
    assert!(stderr(&out).contains("/nonexistent/halo/dataset-dir"), "{}", stderr(&out));
}

#[test]
fn broken_file_error_names_the_file() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("d");
    let out = halo(&[
        "datasets",
        "synth",
        "--nodes",
        "20",
        "--avg-degree",
        "2",
        "--features",
        "2",
        "--classes",
        "2",
        "--out",
        data.to_str().unwrap(),
    ]);
    assert!(out.status.success(), "{}", stderr(&out));
    std::fs::write(data.join("split/random/test.csv.gz"), "not gzip").unwrap();
    let out = halo(&["datasets", "info", data.to_str().unwrap()]);
    assert!(!out.status.success());
    assert!(stderr(&out).contains("split/random/test.csv.gz"), "{}", stderr(&out));
}

/// One rejected `halo datasets synth` call: nodes, classes, features, avg degree, intra
/// fraction, extra flags, and the flag the error must name.
type SynthCase<'a> = (&'a str, &'a str, &'a str, &'a str, &'a str, &'a [&'a str], &'a str);

#[test]
fn synth_flags_are_validated_by_name() {
    let dir = tempfile::tempdir().unwrap();
    let out_dir = dir.path().to_str().unwrap();
    let cases: [SynthCase; 7] = [
        ("0", "2", "4", "2", "0.8", &[], "--nodes"),
        ("10", "1", "4", "2", "0.8", &[], "--classes"),
        ("10", "2", "0", "2", "0.8", &[], "--features"),
        ("10", "2", "4", "-1", "0.8", &[], "--avg-degree"),
        ("2", "2", "4", "5", "0.8", &[], "--avg-degree"),
        ("10", "2", "4", "2", "1.5", &[], "--intra"),
        ("10", "2", "4", "2", "0.8", &["--communities", "11"], "--communities"),
    ];
    for (nodes, classes, features, degree, intra, extra, flag) in cases {
        let mut args: Vec<String> =
            ["datasets", "synth", "--nodes", nodes, "--classes", classes, "--features", features]
                .map(String::from)
                .to_vec();
        // `=` keeps a negative value from reading as a flag.
        args.extend([format!("--avg-degree={degree}"), format!("--intra={intra}"), format!("--out={out_dir}")]);
        args.extend(extra.iter().map(|s| s.to_string()));
        let out = halo(&args.iter().map(String::as_str).collect::<Vec<_>>());
        assert!(!out.status.success(), "{args:?} was accepted");
        assert!(stderr(&out).contains(flag), "{args:?}: {}", stderr(&out));
    }
}
