//! `halo train --save-model` and `halo predict` end to end: the weights reproduce the report's
//! accuracy, Python's `safetensors` reads them, and bad inputs are named.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use serde_json::Value;

fn halo(args: &[&str], cwd: &Path) -> Output {
    Command::new(env!("CARGO_BIN_EXE_halo")).args(args).current_dir(cwd).output().expect("halo runs")
}

fn ok(out: Output) -> String {
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    String::from_utf8_lossy(&out.stdout).into_owned()
}

fn cora() -> String {
    let dir = PathBuf::from(concat!(env!("CARGO_MANIFEST_DIR"), "/../../datasets/cora"));
    assert!(dir.is_dir(), "Cora is missing: expected the vendored copy at {}", dir.display());
    dir.to_str().unwrap().to_string()
}

/// The number after `label` in `text` (`test acc 0.7950`).
fn figure(text: &str, label: &str) -> f64 {
    let rest = &text[text.find(label).unwrap_or_else(|| panic!("no `{label}` in {text}")) + label.len()..];
    rest.split(|c: char| c == ',' || c.is_whitespace()).find(|w| !w.is_empty()).unwrap().parse().unwrap()
}

/// Trains with `extra` flags, saves the model, predicts, and checks the accuracies against the report.
fn round_trip(dir: &Path, extra: &[&str], tolerance: f64) {
    let cora = cora();
    let mut args = vec!["train", "--dataset", &cora, "--epochs", "8", "--threads", "1", "-q"];
    args.extend_from_slice(extra);
    args.extend_from_slice(&["--report", "r.json", "--save-model", "m.safetensors"]);
    let trained = ok(halo(&args, dir));
    let report: Value = serde_json::from_str(&std::fs::read_to_string(dir.join("r.json")).unwrap()).unwrap();
    let best = report["final"]["best_epoch"].as_u64().unwrap();
    assert!(trained.contains(&format!("saved the model of epoch {best}")), "{trained}");
    let sidecar: Value =
        serde_json::from_str(&std::fs::read_to_string(dir.join("m.safetensors.json")).unwrap()).unwrap();
    assert_eq!(sidecar["epoch"].as_u64(), Some(best));
    assert_eq!(sidecar["model"]["in_dim"], 1433);

    let predicted = ok(halo(&["predict", "--model", "m.safetensors", "--out", "p.csv"], dir));
    for (key, label) in [("best_val_acc", "val acc "), ("test_acc_at_best_val", "test acc ")] {
        let want = report["final"][key].as_f64().unwrap();
        let got = figure(&predicted, label);
        assert!((got - want).abs() <= tolerance + 5e-5, "{extra:?}: {label}{got} against the report's {want}");
    }
    let csv = std::fs::read_to_string(dir.join("p.csv")).unwrap();
    assert_eq!(csv.lines().count(), 1 + 2708, "a header and one line per vertex");
    assert!(csv.lines().skip(1).all(|l| l.split_once(',').is_some_and(|(_, c)| c.parse::<u32>().is_ok_and(|c| c < 7))));
}

#[test]
fn saved_weights_reproduce_the_reported_accuracy() {
    let dir = tempfile::tempdir().unwrap();
    round_trip(dir.path(), &[], 0.0);
    // Distributed training equals single-process training up to summation order: a vertex may flip.
    let dir = tempfile::tempdir().unwrap();
    round_trip(dir.path(), &["--model", "sage", "--method", "vanilla", "--workers", "2"], 1.0 / 1000.0);
}

/// Python's `safetensors` (installed in a venv by `.ci/run`, which names its interpreter in
/// `HALO_PYTHON`) reads every tensor with the name, shape and values Halo wrote.
#[test]
fn python_safetensors_reads_the_weights() {
    let Some(python) = std::env::var_os("HALO_PYTHON") else {
        assert!(std::env::var_os("CI").is_none(), "CI sets HALO_PYTHON (.ci/run)");
        eprintln!("skipped: set HALO_PYTHON to a Python with `safetensors` and numpy (.ci/run does)");
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let cora = cora();
    ok(halo(
        &["train", "--dataset", &cora, "--model", "gat", "--epochs", "2", "-q", "--save-model", "m.safetensors"],
        dir.path(),
    ));
    let script = "import json, sys\nfrom safetensors.numpy import load_file\nfrom safetensors import safe_open\n\
                  t = load_file(sys.argv[1])\nwith safe_open(sys.argv[1], 'np') as f: meta = f.metadata()\n\
                  print(json.dumps({'meta': meta, 'tensors': {k: {'shape': list(v.shape), 'dtype': str(v.dtype), \
                  'values': [float(x) for x in v.ravel()]} for k, v in t.items()}}))";
    let out = Command::new(python).args(["-c", script, "m.safetensors"]).current_dir(dir.path()).output().unwrap();
    let seen: Value = serde_json::from_slice(&ok_bytes(out)).unwrap();
    let (model, sidecar) = trainer::export::load(&dir.path().join("m.safetensors")).unwrap();
    let meta: Value = serde_json::from_str(seen["meta"]["halo.model"].as_str().unwrap()).unwrap();
    assert_eq!(meta, serde_json::to_value(&sidecar.model).unwrap(), "the header names the model");
    let tensors = seen["tensors"].as_object().unwrap();
    assert_eq!(tensors.len(), model.param_info().len());
    for info in model.param_info() {
        let t = &tensors[&info.name];
        assert_eq!(t["shape"], serde_json::json!([info.slot.rows, info.slot.cols]), "{}", info.name);
        assert_eq!(t["dtype"], "float32");
        let values: Vec<f32> = t["values"].as_array().unwrap().iter().map(|v| v.as_f64().unwrap() as f32).collect();
        assert_eq!(values, info.slot.slice(model.params()), "{} holds the trained values", info.name);
    }
}

fn ok_bytes(out: Output) -> Vec<u8> {
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    out.stdout
}

#[test]
fn bad_model_files_are_named() {
    let dir = tempfile::tempdir().unwrap();
    let out = halo(&["predict", "--model", "absent.safetensors"], dir.path());
    let msg = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success() && msg.contains("--model") && msg.contains("absent.safetensors"), "{msg}");
    let cora = cora();
    ok(halo(&["train", "--dataset", &cora, "--epochs", "1", "-q", "--save-model", "m.safetensors"], dir.path()));
    // Weights without their sidecar: the sidecar is named.
    std::fs::rename(dir.path().join("m.safetensors.json"), dir.path().join("kept.json")).unwrap();
    let out = halo(&["predict", "--model", "m.safetensors"], dir.path());
    let msg = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success() && msg.contains("m.safetensors.json"), "{msg}");
    std::fs::rename(dir.path().join("kept.json"), dir.path().join("m.safetensors.json")).unwrap();
    // Predictions written over the weights or their sidecar are refused.
    for target in ["m.safetensors", "m.safetensors.json"] {
        let out = halo(&["predict", "--model", "m.safetensors", "--out", target], dir.path());
        let msg = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success() && msg.contains("--out") && msg.contains("--model"), "{msg}");
    }
    std::fs::write(dir.path().join("m.safetensors"), b"not a safetensors file").unwrap();
    let out = halo(&["predict", "--model", "m.safetensors"], dir.path());
    let msg = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success() && msg.contains("m.safetensors") && msg.contains("not a safetensors file"), "{msg}");
}

/// A model trained on `--dataset cora` from the repository root predicts from any folder: its
/// sidecar records the dataset's absolute directory.
#[test]
fn a_saved_model_finds_its_dataset_from_another_folder() {
    let root = PathBuf::from(concat!(env!("CARGO_MANIFEST_DIR"), "/../.."));
    let dir = tempfile::tempdir().unwrap();
    let model = dir.path().join("m.safetensors");
    let model = model.to_str().unwrap();
    ok(halo(&["train", "--dataset", "cora", "--epochs", "1", "-q", "--save-model", model], &root));
    let sidecar: Value =
        serde_json::from_str(&std::fs::read_to_string(dir.path().join("m.safetensors.json")).unwrap()).unwrap();
    let recorded = PathBuf::from(sidecar["dataset_dir"].as_str().unwrap());
    assert!(recorded.is_absolute() && recorded.ends_with("datasets/cora"), "{sidecar}");
    let elsewhere = tempfile::tempdir().unwrap();
    let out = halo(&["predict", "--model", model], elsewhere.path());
    assert!(String::from_utf8_lossy(&out.stderr).is_empty(), "{}", String::from_utf8_lossy(&out.stderr));
    let predicted = ok(out);
    assert!(predicted.starts_with("cora: train acc"), "{predicted}");
    assert!(sidecar["dataset_fingerprint"].is_u64(), "{sidecar}");
    // A dataset whose files differ from those trained on is named in a warning.
    let mut changed = sidecar.clone();
    changed["dataset_fingerprint"] = serde_json::json!(0);
    std::fs::write(dir.path().join("m.safetensors.json"), changed.to_string()).unwrap();
    let out = halo(&["predict", "--model", model], elsewhere.path());
    let warning = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success() && warning.contains("changed since the model trained on it"), "{warning}");
}
