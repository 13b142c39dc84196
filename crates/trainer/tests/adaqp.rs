//! AdaQP end to end on Cora: uniform 8-bit rows cost exactly `D + 8` bytes where vanilla's cost
//! `4 D`, and the adaptive assignment changes both ends of every stream together (a width the
//! decoder did not expect fails the run) without doing worse than uniform 8-bit on problem (12);
//! within random widths' bytes it moves no more bytes than they do, problem by problem.

use std::path::Path;
use std::sync::OnceLock;

use graph_partition::Dataset;
use graph_partition::book::CutKind;
use serde_json::{Value, json};
use trainer::config::{Bits, Compress, DistributedConfig, Method, MethodConfig, TrainConfig};
use trainer::{LocalOptions, Report, data, run_on};

const CORA: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../../datasets/cora");

fn config(method: Method, bits: Bits, epochs: usize) -> TrainConfig {
    let mut method = MethodConfig::named(method);
    method.adaqp.bits = bits;
    method.adaqp.assign_period = 1;
    method.adaqp.group_size = 10;
    TrainConfig {
        dataset: Some(CORA.to_string()),
        layers: 3,
        epochs,
        method,
        distributed: DistributedConfig {
            cut: CutKind::EdgeCut,
            workers: 4,
            hosts: 2,
            topology: comm_hierarchy::Preset::Adaqp,
            compress: Compress::Always,
            ..DistributedConfig::default()
        },
        ..TrainConfig::default()
    }
}

fn cora() -> &'static Dataset {
    static DATA: OnceLock<Dataset> = OnceLock::new();
    DATA.get_or_init(|| {
        let c = config(Method::Vanilla, Bits::Eight, 1);
        data::prepare_dataset(&c, Path::new("."), &Default::default()).expect("Cora loads")
    })
}

fn run(config: &TrainConfig) -> Report {
    run_on(config, cora(), LocalOptions::default(), &mut ()).expect("the run trains")
}

#[test]
fn uniform_8_bit_rows_cost_d_plus_8_bytes() {
    let vanilla = run(&config(Method::Vanilla, Bits::Eight, 1));
    let adaqp = run(&config(Method::Adaqp, Bits::Eight, 1));
    let (v, a) = (&vanilla.epochs[0], &adaqp.epochs[0]);
    let codec = &a.method.as_ref().unwrap()["codec"];
    for (phase, &bytes) in v.bytes_by_phase.iter().filter(|(p, _)| p.starts_with("fwd/") || p.starts_with("bwd/")) {
        let route = if phase.starts_with("fwd") { "to-copies" } else { "to-primary" };
        let rows = codec[format!("{phase}/{route}")]["rows"].as_u64().unwrap();
        let width = bytes / (4 * rows);
        assert_eq!(bytes, 4 * width * rows, "{phase}: vanilla moves whole f32 rows");
        assert_eq!(a.bytes_by_phase[phase], (width + 8) * rows, "{phase}: {rows} rows of width {width}");
    }
}

#[test]
fn adaptive_widths_change_both_ends_and_beat_uniform_8_bit() {
    let report = run(&config(Method::Adaqp, Bits::Adaptive, 3));
    let method = |e: usize| report.epochs[e].method.as_ref().unwrap();
    let total_bits = |e: usize| method(e)["codec"]["total"]["bits"].as_object().unwrap().clone();
    assert_eq!(total_bits(0).keys().collect::<Vec<_>>(), ["8"], "8 bits until the first assignment");
    assert!(total_bits(1).len() > 1, "the assignment mixes widths: {:?}", total_bits(1));
    let problems = method(0)["controller"]["assignment"]["problems"].as_array().unwrap().clone();
    assert_eq!(problems.len(), 6, "one problem per layer and direction");
    for p in &problems {
        let (got, uniform) = (p["objective"].as_f64().unwrap(), p["objective_uniform_8"].as_f64().unwrap());
        assert!(got <= uniform + 1e-9 && p["optimal"] == Value::Bool(true), "{p}");
        assert_eq!(p["solver"], "exact-sweep", "no byte budget: the combinatorial solver: {p}");
    }
    assert!(report.epochs[1].bytes_by_phase["fwd/1"] < report.epochs[0].bytes_by_phase["fwd/1"]);
    assert!(report.epochs.iter().all(|e| e.loss.is_finite()));
}

#[test]
fn random_widths_run_with_the_same_protocol() {
    let report = run(&config(Method::Adaqp, Bits::Random, 2));
    let method = report.epochs[1].method.as_ref().unwrap();
    let bits = method["codec"]["total"]["bits"].as_object().unwrap();
    assert_eq!(bits.len(), 3, "random widths use 2, 4 and 8: {bits:?}");
    assert_eq!(method["controller"]["bits"], "random");
}

#[test]
fn adaptive_within_random_bytes_moves_no_more_than_random() {
    let problems = |bits| {
        let report = run(&config(Method::Adaqp, bits, 1));
        report.epochs[0].method.as_ref().unwrap()["controller"]["assignment"]["problems"].as_array().unwrap().clone()
    };
    let (random, capped) = (problems(Bits::Random), problems(Bits::AdaptiveRandomBudget));
    assert_eq!(random.len(), capped.len());
    for (r, c) in random.iter().zip(&capped) {
        assert_eq!((&r["layer"], &r["dir"]), (&c["layer"], &c["dir"]));
        assert_eq!(c["budget_bytes"], r["bytes"], "the budget is random's draw: {c}");
        assert_eq!((&c["solver"], &r["solver"]), (&json!("milp"), &Value::Null), "{c} {r}");
        assert!(c["bytes"].as_u64().unwrap() <= r["bytes"].as_u64().unwrap(), "{c} vs {r}");
        assert!(c["objective"].as_f64().unwrap() <= r["objective"].as_f64().unwrap() + 1e-9, "{c} vs {r}");
    }
}
