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
    assert!(dir.join("raw/edge.csv.gz").is_file(), "Cora is missing: expected the vendored copy at {}", dir.display());
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
fn info_json_with_the_cache_in_another_directory() {
    // The cache goes to --cache-dir, not into the repository's copy of Cora.
    let caches = tempfile::tempdir().unwrap();
    let cora = cora();
    let (cora, cache_dir) = (cora.to_str().unwrap(), caches.path().to_str().unwrap());
    let out = halo(&["datasets", "info", cora, "--json", "--split", "public", "--cache-dir", cache_dir]);
    assert!(out.status.success(), "{}", stderr(&out));
    let written: Vec<_> = std::fs::read_dir(caches.path()).unwrap().flatten().map(|e| e.file_name()).collect();
    assert_eq!(written.len(), 1, "one cache file for Cora: {written:?}");
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
    assert!(out_dir.join("processed/halo-cache-v2.bin").is_file());
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
    let cases: [SynthCase; 9] = [
        ("0", "2", "4", "2", "0.8", &[], "--nodes"),
        ("10", "1", "4", "2", "0.8", &[], "--classes"),
        ("10", "2", "0", "2", "0.8", &[], "--features"),
        ("10", "2", "4", "-1", "0.8", &[], "--avg-degree"),
        ("2", "2", "4", "5", "0.8", &[], "--avg-degree"),
        ("10", "2", "4", "2", "1.5", &[], "--intra"),
        ("10", "2", "4", "2", "0.8", &["--communities", "11"], "--communities"),
        ("10", "2", "4", "2", "0.8", &["--signal-blocks", "5"], "--signal-blocks"),
        ("10", "2", "4", "2", "0.8", &["--signal-blocks", "0"], "--signal-blocks"),
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

/// Writes a small synthetic dataset to `dir` with `halo datasets synth`.
fn synth(dir: &Path, nodes: &str) {
    let args = ["datasets", "synth", "--nodes", nodes, "--avg-degree", "2", "--features", "3", "--classes", "2"];
    let out = halo(&[&args[..], &["--out", dir.to_str().unwrap()]].concat());
    assert!(out.status.success(), "{}", stderr(&out));
}

/// Rewrites line `line` (1-based) of the gzip file at `path` with `edit`.
fn edit_gz_line(path: &Path, line: usize, edit: impl FnOnce(&str) -> String) {
    use std::io::{Read, Write};
    let mut text = String::new();
    flate2::read::MultiGzDecoder::new(std::fs::File::open(path).unwrap()).read_to_string(&mut text).unwrap();
    let mut lines: Vec<String> = text.lines().map(String::from).collect();
    lines[line - 1] = edit(&lines[line - 1]);
    let mut enc = flate2::write::GzEncoder::new(std::fs::File::create(path).unwrap(), flate2::Compression::fast());
    enc.write_all((lines.join("\n") + "\n").as_bytes()).unwrap();
    enc.finish().unwrap();
}

#[test]
fn non_finite_features_fail_naming_file_line_and_column_unless_allowed() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("d");
    synth(&data, "20");
    for token in ["nan", "inf", "1e39"] {
        edit_gz_line(&data.join("raw/node-feat.csv.gz"), 5, |row| {
            let mut cols: Vec<&str> = row.split(',').collect();
            cols[1] = token;
            cols.join(",")
        });
        let out = halo(&["datasets", "info", data.to_str().unwrap()]);
        assert!(!out.status.success(), "{token} accepted");
        let err = stderr(&out);
        assert!(err.contains(&format!("raw/node-feat.csv.gz:5: column 2: `{token}`")), "{err}");
        assert!(err.contains("--allow-nonfinite"), "{err}");
        let out = halo(&["datasets", "info", data.to_str().unwrap(), "--allow-nonfinite"]);
        assert!(out.status.success(), "{}", stderr(&out));
        // The cache written by the lenient load does not let a strict load through.
        let out = halo(&["datasets", "info", data.to_str().unwrap()]);
        assert!(!out.status.success() && stderr(&out).contains("node-feat.csv.gz:5"), "{}", stderr(&out));
    }
}

#[test]
fn a_truncated_gzip_file_prints_its_cause_once() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("d");
    synth(&data, "200");
    let edges = data.join("raw/edge.csv.gz");
    let bytes = std::fs::read(&edges).unwrap();
    std::fs::write(&edges, &bytes[..bytes.len() / 2]).unwrap();
    let out = halo(&["datasets", "info", data.to_str().unwrap(), "--no-cache"]);
    assert!(!out.status.success());
    let err = stderr(&out);
    let line = err.lines().find(|l| l.starts_with("error: ")).unwrap_or_else(|| panic!("no error line: {err}"));
    assert_eq!(line.matches("edge.csv.gz").count(), 1, "{line}");
    let cause = line.rsplit(": ").next().unwrap();
    assert_eq!(line.matches(cause).count(), 1, "`{cause}` repeats in {line}");
}

#[test]
fn synth_over_an_existing_dataset_leaves_no_old_split() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("d");
    let copy = |from: &Path, to: &Path| {
        std::fs::create_dir_all(to.parent().unwrap()).unwrap();
        std::fs::copy(from, to).unwrap();
    };
    for part in ["train", "valid", "test"] {
        let file = format!("split/public/{part}.csv.gz");
        copy(&cora().join(&file), &data.join(&file));
    }
    synth(&data, "20");
    assert!(!data.join("split/public").exists());
    let out = halo(&["datasets", "info", data.to_str().unwrap(), "--no-cache"]);
    assert!(out.status.success(), "the only split is random: {}", stderr(&out));
}

#[test]
fn missing_dataset_says_how_to_download() {
    let out = halo(&["datasets", "info", "/nonexistent/ogbn-arxiv"]);
    assert!(!out.status.success());
    assert!(stderr(&out).contains("cargo xtask download"), "{}", stderr(&out));
}

/// From the repository root, `cora` names `datasets/cora`, as it does for `halo train`; a name
/// found nowhere lists the places tried and how to download.
#[test]
fn a_bare_name_is_looked_up_under_datasets() {
    let root = cora().join("../..");
    let info = |name: &str| {
        let out = Command::new(env!("CARGO_BIN_EXE_halo"))
            .args(["datasets", "info", name, "--no-cache"])
            .current_dir(&root)
            .output()
            .unwrap();
        (out.status.success(), stdout(&out), stderr(&out))
    };
    let (ok, text, err) = info("cora");
    assert!(ok, "{err}");
    assert_eq!(line_with(&text, "nodes"), "nodes     2708");
    let (ok, _, err) = info("absent-name");
    assert!(!ok && err.contains("datasets/absent-name") && err.contains("cargo xtask download"), "{err}");
}
