//! Accuracy on Cora (public Planetoid split, row-normalised features, 200 epochs): test accuracy
//! at the best validation epoch against the targets (mean over seeds 0-4; PyG on the same
//! machine: GCN 0.822, GraphSAGE 0.810, GAT 0.828).
//!
//! The five-seed runs take minutes on two cores, so they are ignored by default; run them with
//! `cargo test --release -p trainer --test cora -- --ignored --nocapture`. The default suite keeps
//! one GCN seed.

use std::path::{Path, PathBuf};

use gnn_core::ConvKind;
use trainer::config::{FeatureNorm, TrainConfig};

fn cora_dir() -> PathBuf {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../datasets/cora");
    assert!(dir.join("raw/edge.csv.gz").is_file(), "Cora is missing: expected the vendored copy at {}", dir.display());
    dir
}

/// Mean test accuracy at the best validation epoch over `seeds`.
fn mean_test_acc(base: &TrainConfig, seeds: std::ops::Range<u64>) -> f64 {
    let dataset = trainer::data::prepare_dataset(base, Path::new("datasets"), &Default::default()).expect("Cora loads");
    let accs: Vec<f64> = seeds
        .map(|seed| {
            let config = TrainConfig { seed, ..base.clone() };
            trainer::single::run("single", &config, &dataset, &mut ())
                .expect("training runs")
                .final_
                .test_acc_at_best_val
        })
        .collect();
    let mean = accs.iter().sum::<f64>() / accs.len() as f64;
    eprintln!("{:?} per seed {accs:?}, mean {mean:.4}", base.model);
    mean
}

/// The settings: 2 layers, lr 0.01, weight decay 5e-4; GCN and SAGE hidden 16 with
/// dropout 0.5, GAT 8 heads of 8 with dropout 0.6 and lr 0.005.
fn cora(model: ConvKind) -> TrainConfig {
    let base = TrainConfig {
        dataset: Some(cora_dir().display().to_string()),
        model,
        feature_norm: FeatureNorm::Row,
        epochs: 200,
        ..TrainConfig::default()
    };
    match model {
        ConvKind::Gat => TrainConfig { hidden: 8, heads: 8, dropout: 0.6, lr: 0.005, ..base },
        ConvKind::Gcn | ConvKind::Sage => base,
    }
}

fn check(model: ConvKind, seeds: std::ops::Range<u64>, target: f64) {
    let mean = mean_test_acc(&cora(model), seeds.clone());
    assert!(mean >= target, "{model:?} mean test accuracy over seeds {seeds:?} is {mean:.4} < {target}");
}

#[test]
fn gcn_seed_0_reaches_the_cora_target() {
    check(ConvKind::Gcn, 0..1, 0.810);
}

#[test]
#[ignore = "minutes on two cores; run with --ignored"]
fn gcn_reaches_the_cora_target_over_five_seeds() {
    check(ConvKind::Gcn, 0..5, 0.810);
}

#[test]
#[ignore = "minutes on two cores; run with --ignored"]
fn sage_reaches_the_cora_target_over_five_seeds() {
    check(ConvKind::Sage, 0..5, 0.795);
}

#[test]
#[ignore = "minutes on two cores; run with --ignored"]
fn gat_reaches_the_cora_target_over_five_seeds() {
    check(ConvKind::Gat, 0..5, 0.815);
}
