//! Behaviour pinned by reports: short fixed-seed runs on Cora of every runner and method,
//! compared with the reports committed under `tests/golden/`, apart from times and memory
//! measurements (which differ run to run).
//!
//! A golden report is compared as a subset: every field it holds must be in the new report with
//! the same value (floats bit for bit), while fields added since are not compared. After a
//! change that is meant to change results, rewrite the goldens with
//! `HALO_BLESS=1 cargo test -p trainer --test golden` and say why in the commit.
//!
//! The runs keep the methods' codecs every epoch (`compress = "always"`): the judge of
//! compression's cost decides from measured seconds, which differ run to run (its runs are in
//! `tests/compress.rs`).

use std::path::{Path, PathBuf};

use graph_partition::Dataset;
use serde_json::Value;
use trainer::config::TrainConfig;
use trainer::{LocalOptions, Report};

/// Settings every golden run shares: Cora, 2-layer GCN, a few epochs, 2 workers, the methods'
/// codecs every epoch.
const BASE: &str = r#"
dataset = "cora"
feature-norm = "row"
epochs = 4
seed = 7
[distributed]
workers = 2
compress = "always"
"#;

/// The runs: a name (the golden file's) and the TOML added to [`BASE`].
const RUNS: [(&str, &str); 10] = [
    ("single", "method = \"single\"\n"),
    ("single-minibatch", "method = \"single\"\n[minibatch]\nbatch-size = 256\nfanouts = \"5,5\"\n"),
    ("vanilla-edge", "method = \"vanilla\"\n"),
    ("vanilla-vertex", "method = \"vanilla\"\n[distributed]\ncut = \"vertex\"\n"),
    ("data-parallel", "method = \"data-parallel\"\n[minibatch]\nbatch-size = 128\nfanouts = \"5,5\"\n"),
    ("adaqp", "[method]\nname = \"adaqp\"\n[method.adaqp]\nassign-period = 2\n"),
    ("cdfgnn", "method = \"cdfgnn\"\n[distributed]\ncut = \"vertex\"\n"),
    ("ecgraph", "method = \"ecgraph\"\n"),
    (
        "featpart",
        "[method]\nname = \"featpart\"\n[method.featpart]\ntau = 2\n[minibatch]\nbatch-size = 128\nfanouts = \"5,5\"\n",
    ),
    ("adgraph", "method = \"adgraph\"\n[minibatch]\nbatch-size = 128\nfanouts = \"5,5\"\n"),
];

fn golden_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/golden")
}

fn datasets_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../datasets")
}

/// `BASE` with `extra` merged in (tables of the same name are joined).
fn config(extra: &str) -> TrainConfig {
    let mut base: toml::Table = BASE.parse().expect("BASE is TOML");
    let extra: toml::Table = extra.parse().expect("a run's TOML");
    merge(&mut base, extra);
    TrainConfig::from_toml_str(&toml::to_string(&base).unwrap(), "golden").expect("a valid golden config")
}

fn merge(into: &mut toml::Table, from: toml::Table) {
    for (key, value) in from {
        match (into.get_mut(&key), value) {
            (Some(toml::Value::Table(a)), toml::Value::Table(b)) => merge(a, b),
            (_, value) => {
                into.insert(key, value);
            }
        }
    }
}

fn cora(config: &TrainConfig) -> Dataset {
    let load = graph_partition::LoadOptions { cache: graph_partition::CacheMode::Off, ..Default::default() };
    trainer::data::prepare_dataset(config, &datasets_root(), &load).expect("the vendored Cora loads")
}

fn train(config: &TrainConfig, dataset: &Dataset) -> Report {
    trainer::run_on(config, dataset, LocalOptions::default(), &mut ()).expect("the golden run trains")
}

/// Whether `key` holds a time (`wall_s`, `compute_s_max`, `busy_s_per_worker`, featpart's
/// `compute_to_comm`) or a memory measurement, which differ run to run.
fn measured(key: &str) -> bool {
    key.ends_with("_s")
        || key.contains("_s_")
        || key.contains("rss")
        || key.starts_with("limit_")
        || ["compute_to_comm", "time_to_target"].contains(&key)
}

/// The report as JSON without its measurements, and with `dir` (a temporary directory) spelled
/// `<dir>`.
fn comparable(report: &Report, dir: Option<&Path>) -> Value {
    fn strip(value: &mut Value, dir: Option<&str>) {
        match value {
            Value::Object(map) => {
                map.retain(|key, _| !measured(key));
                map.values_mut().for_each(|v| strip(v, dir));
            }
            Value::Array(items) => items.iter_mut().for_each(|v| strip(v, dir)),
            Value::String(text) => {
                if let Some(dir) = dir.filter(|d| text.starts_with(d)) {
                    *text = text.replacen(dir, "<dir>", 1);
                }
            }
            _ => {}
        }
    }
    let mut json = serde_json::to_value(report).unwrap();
    let dir = dir.map(|d| d.display().to_string());
    strip(&mut json, dir.as_deref());
    json
}

/// The first place where `actual` lacks a field of `golden` or holds another value.
fn first_difference(golden: &Value, actual: &Value, path: &str) -> Option<String> {
    match (golden, actual) {
        (Value::Object(g), Value::Object(a)) => g.iter().find_map(|(key, gv)| match a.get(key) {
            Some(av) => first_difference(gv, av, &format!("{path}.{key}")),
            None => Some(format!("{path}.{key}: missing (golden {gv})")),
        }),
        (Value::Array(g), Value::Array(a)) if g.len() == a.len() => {
            g.iter().zip(a).enumerate().find_map(|(i, (gv, av))| first_difference(gv, av, &format!("{path}[{i}]")))
        }
        (Value::Array(g), Value::Array(a)) => Some(format!("{path}: {} items, golden {}", a.len(), g.len())),
        _ if golden == actual => None,
        _ => Some(format!("{path}: {actual}, golden {golden}")),
    }
}

/// Compares `report` with the golden `name` (or writes it under `HALO_BLESS=1`).
fn check(name: &str, report: &Value) -> Result<(), String> {
    let path = golden_dir().join(format!("{name}.json"));
    if std::env::var_os("HALO_BLESS").is_some() {
        std::fs::create_dir_all(golden_dir()).unwrap();
        std::fs::write(&path, serde_json::to_string_pretty(report).unwrap() + "\n").unwrap();
        return Ok(());
    }
    let text = std::fs::read_to_string(&path).map_err(|err| format!("{}: {err}", path.display()))?;
    let golden: Value = serde_json::from_str(&text).map_err(|err| format!("{}: {err}", path.display()))?;
    match first_difference(&golden, report, name) {
        None => Ok(()),
        Some(diff) => Err(format!("{}: {diff}", path.display())),
    }
}

#[test]
fn reports_match_the_goldens() {
    let dataset = cora(&config(RUNS[0].1));
    let failures: Vec<String> = RUNS
        .iter()
        .filter_map(|(name, extra)| check(name, &comparable(&train(&config(extra), &dataset), None)).err())
        .collect();
    assert!(failures.is_empty(), "reports differ from the goldens:\n{}", failures.join("\n"));
}

/// Vanilla edge-cut with a checkpoint after epoch 2, resumed to epoch 4.
#[test]
fn a_resumed_report_matches_its_golden() {
    let dir = tempfile::tempdir().unwrap();
    let mut first = config("method = \"vanilla\"\nepochs = 2\n");
    first.reliability.checkpoint_dir = Some(dir.path().to_path_buf());
    first.reliability.checkpoint_every = 2;
    let dataset = cora(&first);
    train(&first, &dataset);
    let mut second = config("method = \"vanilla\"\n");
    second.reliability.resume = Some(dir.path().to_path_buf());
    let report = comparable(&train(&second, &dataset), Some(dir.path()));
    check("vanilla-edge-resumed", &report).unwrap();
}
