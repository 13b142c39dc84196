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

mod import {
    //! `halo datasets import`: Cora exported to each input layout by the helpers below, imported,
    //! and trained against the vendored copy; bad inputs refused with nothing left behind.

    use std::path::Path;

    use graph_partition::dataset::npy::{NpzWriter, write_npy};
    use graph_partition::{CacheMode, Dataset, Labels, LoadOptions};

    use super::{cora, halo, stderr};

    fn load_cora() -> Dataset {
        Dataset::load(&cora(), &LoadOptions { cache: CacheMode::Off, ..LoadOptions::default() }).unwrap()
    }

    /// Every stored entry as a directed `(src, dst)` edge (both directions, as PyG keeps them)
    /// or each undirected edge once.
    fn edges(d: &Dataset, both_ways: bool) -> Vec<(i64, i64)> {
        let g = &d.graph;
        let mut out = Vec::new();
        for v in 0..g.num_nodes() {
            for &u in g.neighbors(v) {
                if both_ways || (u as usize) < v {
                    out.push((u as i64, v as i64));
                }
            }
        }
        out
    }

    fn classes(d: &Dataset) -> Vec<i64> {
        let Labels::Classes(c) = &d.labels else { panic!("Cora is single-label") };
        c.iter().map(|&c| c as i64).collect()
    }

    fn mask(d: &Dataset, ids: &[u32]) -> Vec<bool> {
        let mut m = vec![false; d.num_nodes()];
        ids.iter().for_each(|&i| m[i as usize] = true);
        m
    }

    fn shape(d: &Dataset) -> [u64; 2] {
        [d.num_nodes() as u64, d.num_features() as u64]
    }

    /// PyG style: `edge_index`, `x`, `y` and the three masks in one `.npz`.
    fn export_npz(d: &Dataset, path: &Path) {
        let e = edges(d, true);
        let mut w = NpzWriter::create(path, false).unwrap();
        let index: Vec<i64> = e.iter().map(|p| p.0).chain(e.iter().map(|p| p.1)).collect();
        w.add("edge_index", &[2, e.len() as u64], &index).unwrap();
        w.add("x", &shape(d), d.features.as_slice().unwrap()).unwrap();
        w.add("y", &[d.num_nodes() as u64], &classes(d)).unwrap();
        w.add("train_mask", &[d.num_nodes() as u64], &mask(d, &d.splits.train)).unwrap();
        w.add("val_mask", &[d.num_nodes() as u64], &mask(d, &d.splits.valid)).unwrap();
        w.add("test_mask", &[d.num_nodes() as u64], &mask(d, &d.splits.test)).unwrap();
        w.finish().unwrap();
    }

    /// OGB's binary folder: deflated `raw/data.npz` (float64 features, edges once) and
    /// `raw/node-label.npz` (float64 (N, 1)), the split folder copied.
    fn export_ogb_bin(d: &Dataset, dir: &Path) {
        std::fs::create_dir_all(dir.join("raw")).unwrap();
        let e = edges(d, false);
        let mut w = NpzWriter::create(&dir.join("raw/data.npz"), true).unwrap();
        let index: Vec<i64> = e.iter().map(|p| p.0).chain(e.iter().map(|p| p.1)).collect();
        w.add("edge_index", &[2, e.len() as u64], &index).unwrap();
        let x: Vec<f64> = d.features.iter().map(|&v| v as f64).collect();
        w.add("node_feat", &shape(d), &x).unwrap();
        w.add("num_nodes_list", &[1], &[d.num_nodes() as i64]).unwrap();
        w.add("num_edges_list", &[1], &[e.len() as i64]).unwrap();
        w.finish().unwrap();
        let mut w = NpzWriter::create(&dir.join("raw/node-label.npz"), true).unwrap();
        let y: Vec<f64> = classes(d).iter().map(|&c| c as f64).collect();
        w.add("node_label", &[d.num_nodes() as u64, 1], &y).unwrap();
        w.finish().unwrap();
        copy_split(&dir.join("split/public"));
    }

    fn copy_split(to: &Path) {
        std::fs::create_dir_all(to).unwrap();
        for part in ["train", "valid", "test"] {
            let file = format!("{part}.csv.gz");
            std::fs::copy(cora().join("split/public").join(&file), to.join(&file)).unwrap();
        }
    }

    /// A tab-separated edge list with a header, `x.npy` features and `y.csv` labels.
    fn export_edge_list(d: &Dataset, dir: &Path) {
        std::fs::create_dir_all(dir).unwrap();
        let mut text = String::from("src\tdst\n");
        for (s, t) in edges(d, false) {
            text.push_str(&format!("{s}\t{t}\n"));
        }
        std::fs::write(dir.join("edges.tsv"), text).unwrap();
        let mut x = Vec::new();
        write_npy(&mut x, &shape(d), d.features.as_slice().unwrap()).unwrap();
        std::fs::write(dir.join("x.npy"), x).unwrap();
        let y: String = classes(d).iter().map(|c| format!("{c}\n")).collect();
        std::fs::write(dir.join("y.csv"), y).unwrap();
        copy_split(&dir.join("public"));
    }

    /// Losses and accuracies of a short `halo train` run.
    fn train(dataset: &Path, work: &Path) -> Vec<serde_json::Value> {
        let report = work.join(format!("{}.json", dataset.file_name().unwrap().to_string_lossy()));
        let args = ["train", "--dataset", dataset.to_str().unwrap(), "--epochs", "3", "--threads", "1", "--seed", "7"];
        let out = halo(&[&args[..], &["--no-cache", "-q", "--report", report.to_str().unwrap()]].concat());
        assert!(out.status.success(), "{}", stderr(&out));
        let v: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(report).unwrap()).unwrap();
        let epochs = v["epochs"].as_array().unwrap();
        let keys = ["loss", "train_acc", "val_acc", "test_acc"];
        epochs.iter().flat_map(|e| keys.map(|k| e[k].clone())).collect()
    }

    #[test]
    fn cora_in_each_layout_imports_and_trains_like_the_vendored_copy() {
        let d = load_cora();
        let work = tempfile::tempdir().unwrap();
        let w = work.path();
        export_npz(&d, &w.join("cora.npz"));
        export_ogb_bin(&d, &w.join("cora-bin"));
        export_edge_list(&d, &w.join("el"));
        let s = |p: &str| w.join(p).to_str().unwrap().to_string();
        let flag = |f: &str| f.to_string();
        let imports = [
            ("npz", vec![s("cora.npz")]),
            ("ogb", vec![s("cora-bin")]),
            ("el", vec![s("el/edges.tsv"), flag("--features"), s("el/x.npy"), flag("--labels"), s("el/y.csv")]),
        ];
        let expected = train(&cora(), w);
        assert_eq!(expected.len(), 12);
        for (name, mut args) in imports {
            if name == "el" {
                args.extend([flag("--split"), s("el/public")]);
            }
            let args: Vec<&str> = args.iter().map(String::as_str).collect();
            let out_dir = w.join(format!("imported-{name}"));
            let out = halo(&[&["datasets", "import"][..], &args, &["--out", out_dir.to_str().unwrap()]].concat());
            assert!(out.status.success(), "{name}: {}", stderr(&out));
            let notes = stderr(&out);
            assert!(notes.contains("note: edges are"), "{name}: {notes}");
            assert!(!notes.contains("random split"), "{name}: {notes}");
            let imported =
                Dataset::load(&out_dir, &LoadOptions { cache: CacheMode::Off, ..LoadOptions::default() }).unwrap();
            assert_eq!(imported.graph, d.graph, "{name}");
            assert_eq!(imported.features, d.features, "{name}");
            assert_eq!(imported.labels, d.labels, "{name}");
            assert_eq!(imported.num_classes, d.num_classes, "{name}");
            assert_eq!(
                (&imported.splits.train, &imported.splits.valid, &imported.splits.test),
                (&d.splits.train, &d.splits.valid, &d.splits.test)
            );
            assert_eq!(train(&out_dir, w), expected, "{name}: the run differs from datasets/cora's");
        }
    }

    #[test]
    fn a_killed_import_leaves_no_dataset_or_a_whole_one() {
        let dir = tempfile::tempdir().unwrap();
        let (n, f) = (200_000u64, 32u64);
        let npz = dir.path().join("big.npz");
        let mut w = NpzWriter::create(&npz, false).unwrap();
        let index: Vec<i64> = (0..n as i64).chain((0..n as i64).map(|v| (v * 7 + 1) % n as i64)).collect();
        w.add("edge_index", &[2, n], &index).unwrap();
        let x: Vec<f32> = (0..n * f).map(|i| (i % 1000) as f32 / 7.0).collect();
        w.add("x", &[n, f], &x).unwrap();
        w.add("y", &[n], &(0..n as i64).map(|v| v % 5).collect::<Vec<_>>()).unwrap();
        w.finish().unwrap();
        let out_dir = dir.path().join("out");
        let mut child = std::process::Command::new(env!("CARGO_BIN_EXE_halo"))
            .args(["datasets", "import", npz.to_str().unwrap(), "--out", out_dir.to_str().unwrap()])
            .stderr(std::process::Stdio::null())
            .spawn()
            .unwrap();
        std::thread::sleep(std::time::Duration::from_millis(300));
        let _ = child.kill();
        child.wait().unwrap();
        if out_dir.exists() {
            let d = Dataset::load(&out_dir, &LoadOptions { cache: CacheMode::Off, ..LoadOptions::default() }).unwrap();
            assert_eq!((d.num_nodes(), d.num_features()), (n as usize, f as usize));
        }
    }

    /// An import that must fail naming `expected`, leaving `dir` as it was.
    fn refused(dir: &Path, args: &[&str], expected: &str) {
        let before: Vec<_> = std::fs::read_dir(dir).unwrap().map(|e| e.unwrap().file_name()).collect();
        let out_dir = dir.join("out");
        let out = halo(&[&["datasets", "import"][..], args, &["--out", out_dir.to_str().unwrap()]].concat());
        assert!(!out.status.success(), "{args:?} was accepted");
        assert!(stderr(&out).contains(expected), "{args:?}: {}", stderr(&out));
        let after: Vec<_> = std::fs::read_dir(dir).unwrap().map(|e| e.unwrap().file_name()).collect();
        assert_eq!(before.len(), after.len(), "{args:?} left {after:?}");
    }

    #[test]
    fn bad_inputs_are_refused_by_name_and_leave_nothing() {
        let dir = tempfile::tempdir().unwrap();
        let d = dir.path();
        let write = |name: &str, text: &str| {
            std::fs::write(d.join(name), text).unwrap();
            d.join(name).to_str().unwrap().to_string()
        };
        let x = write("x.csv", "1,2\n3,4\n5,nan\n");
        let y = write("y.csv", "0\n1\n1\n");
        let edges = write("e.csv", "src,dst\n0,1\n1,2\n");
        refused(d, &[&edges, "--features", &x, "--labels", &y], "x.csv:3: column 2: `nan`");
        let lenient = d.join("lenient");
        let args = ["datasets", "import", &edges, "--features", &x, "--labels", &y, "--allow-non-finite", "--out"];
        let out = halo(&[&args[..], &[lenient.to_str().unwrap()]].concat());
        assert!(out.status.success(), "{}", stderr(&out));
        let x = write("x.csv", "1,2\n3,4\n5,6\n");
        let bad = write("e2.csv", "0,1\n1,9\n");
        refused(d, &[&bad, "--features", &x, "--labels", &y], "e2.csv:2: node id 9 is out of range");
        let y2 = write("y2.csv", "0\n1\n");
        refused(d, &[&edges, "--features", &x, "--labels", &y2], "y2.csv: has 2 labels, expected 3");
        refused(
            d,
            &[&edges, "--features", &x, "--labels", &y, "--num-classes", "1"],
            "y.csv:2: class 1 is out of range",
        );
        let npz = d.join("g.npz");
        let mut w = NpzWriter::create(&npz, false).unwrap();
        w.add("edge_index", &[2, 1], &[0i64, 3]).unwrap();
        w.add("x", &[2, 1], &[0.5f32, 1.0]).unwrap();
        w.add("y", &[2], &[0i64, 1]).unwrap();
        w.finish().unwrap();
        refused(d, &[npz.to_str().unwrap()], "g.npz: array `edge_index` at [1, 0]: node id 3 is out of range");
        let mut bytes = Vec::new();
        write_npy(&mut bytes, &[3, 2], &[1.0f32; 6]).unwrap();
        let at = bytes.windows(3).position(|w| w == b"<f4").unwrap();
        bytes[at..at + 3].copy_from_slice(b">f4");
        std::fs::write(d.join("x.npy"), &bytes).unwrap();
        refused(
            d,
            &[&edges, "--features", d.join("x.npy").to_str().unwrap(), "--labels", &y],
            "unsupported dtype `>f4`",
        );
        let out = halo(&[
            "datasets",
            "import",
            &edges,
            "--features",
            &x,
            "--labels",
            &y,
            "--out",
            d.join("ok").to_str().unwrap(),
        ]);
        assert!(out.status.success(), "{}", stderr(&out));
        let notes = stderr(&out);
        assert!(notes.contains("made undirected") && notes.contains("random split"), "{notes}");
        refused(d, &[&edges, "--features", &x, "--labels", &y, "--format", "npz"], "e.csv");
    }
}
