//! Single-process training end to end on the built-in synthetic graph.

use std::path::Path;

use gnn_core::ConvKind;
use trainer::config::TrainConfig;
use trainer::{Report, Source, run};

fn train(config: &TrainConfig) -> Report {
    run(config, Source::Load(Path::new("datasets"), &Default::default()), &mut ())
        .expect("training runs")
        .expect("single-process runs report")
}

fn losses(report: &Report) -> Vec<f64> {
    report.epochs.iter().map(|e| e.loss).collect()
}

fn quick(model: ConvKind, epochs: usize) -> TrainConfig {
    let hidden = if model == ConvKind::Gat { 8 } else { 16 };
    TrainConfig { model, epochs, hidden, heads: 4, ..TrainConfig::default() }
}

#[test]
fn same_seed_gives_identical_runs_and_another_seed_does_not() {
    let config = quick(ConvKind::Gcn, 8);
    let (a, b) = (train(&config), train(&config));
    assert_eq!(losses(&a), losses(&b));
    assert_eq!(a.final_.best_val_acc, b.final_.best_val_acc);
    let other = train(&TrainConfig { seed: 1, ..config });
    assert_ne!(losses(&a), losses(&other));
}

#[test]
fn every_model_reduces_the_loss_and_beats_chance() {
    // 8 balanced classes: chance is 0.125.
    for model in [ConvKind::Gcn, ConvKind::Sage, ConvKind::Gat] {
        let report = train(&quick(model, 30));
        let (first, last) = (report.epochs[0].loss, report.epochs.last().unwrap().loss);
        assert!(last < 0.7 * first, "{model:?}: loss {first} -> {last}");
        assert!(report.final_.best_val_acc > 0.5, "{model:?}: best val acc {}", report.final_.best_val_acc);
        assert!(report.final_.test_acc_at_best_val > 0.5, "{model:?}: test acc {}", report.final_.test_acc_at_best_val);
    }
}

#[test]
fn final_record_agrees_with_the_epochs() {
    let report = train(&quick(ConvKind::Sage, 12));
    assert_eq!(report.epochs.len(), 12);
    let best = &report.epochs[report.final_.best_epoch - 1];
    assert_eq!(best.val_acc, report.final_.best_val_acc);
    assert_eq!(best.test_acc, report.final_.test_acc_at_best_val);
    assert!(report.epochs[..report.final_.best_epoch - 1].iter().all(|e| e.val_acc < best.val_acc));
    assert!(report.epochs.iter().all(|e| e.val_acc <= best.val_acc));
    let wall: f64 = report.epochs.iter().map(|e| e.wall_s).sum();
    assert!((report.final_.train_wall_s - wall).abs() < 1e-9);
    assert!(report.final_.peak_rss_bytes.is_some_and(|b| b > 0));
    assert_eq!((report.workers, report.hosts, report.cut.as_str(), report.final_.bytes_total), (1, 1, "none", 0));
}

#[test]
fn patience_stops_a_run_that_stopped_improving() {
    // A large learning rate saturates validation accuracy within a few epochs.
    let config = TrainConfig { lr: 0.05, patience: Some(3), ..quick(ConvKind::Gcn, 200) };
    let report = train(&config);
    let n = report.epochs.len();
    assert!(n < 200, "ran all epochs");
    assert_eq!(n, report.final_.best_epoch + 3);
}

#[test]
fn report_json_has_every_contract_key() {
    let report = train(&quick(ConvKind::Gcn, 2));
    let json: serde_json::Value = serde_json::from_str(&serde_json::to_string(&report).unwrap()).unwrap();
    let top =
        ["dataset", "model", "method", "cut", "workers", "hosts", "seed", "config", "partition", "epochs", "final"];
    for key in top {
        assert!(json.get(key).is_some(), "top-level key `{key}` missing");
    }
    assert!(json["partition"].is_null(), "single-process runs have no partition");
    let epoch = [
        "epoch",
        "loss",
        "train_acc",
        "val_acc",
        "test_acc",
        "wall_s",
        "eval_s",
        "compute_s",
        "bytes_intra",
        "bytes_inter",
        "messages",
        "modeled_comm_s",
    ];
    for e in json["epochs"].as_array().unwrap() {
        for key in epoch {
            assert!(e[key].is_number(), "epoch key `{key}` missing or not a number");
        }
    }
    let fin =
        ["best_val_acc", "test_acc_at_best_val", "best_epoch", "train_wall_s", "bytes_total", "modeled_comm_s_total"];
    for key in fin {
        assert!(json["final"][key].is_number(), "final key `{key}` missing or not a number");
    }
    assert!(json["final"]["peak_rss_bytes"].is_u64());
    assert_eq!(json["config"]["epochs"], 2);
    let back: Report = serde_json::from_value(json).expect("the report reads back");
    assert_eq!((back.config, back.final_.best_epoch), (report.config, report.final_.best_epoch));
}

#[test]
fn a_split_without_training_nodes_is_an_error() {
    let mut dataset = trainer::data::builtin_synthetic(0).unwrap();
    dataset.splits.train.clear();
    let err = trainer::single::SingleProcess::new(&TrainConfig::default(), &dataset).unwrap_err();
    assert!(err.to_string().contains("no training nodes"), "{err}");
}
