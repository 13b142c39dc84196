//! Accuracy on Cora (public Planetoid split, row-normalised features): test accuracy at the best
//! validation epoch, mean over seeds 0-4, against the targets (PyG on the same machine:
//! GCN 0.822, GraphSAGE 0.810, GAT 0.828).

use std::path::{Path, PathBuf};

use trainer::config::{FeatureNorm, ModelName, TrainConfig};

fn cora_dir() -> PathBuf {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../../shared/datasets/cora");
    assert!(
        dir.join("raw/edge.csv.gz").is_file(),
        "Cora is missing: expected it in the OGB raw layout at {} (a sibling `shared/` of the repository)",
        dir.display()
    );
    dir
}

/// Mean test accuracy at the best validation epoch over seeds 0-4.
fn mean_test_acc(base: &TrainConfig) -> f64 {
    let dataset = trainer::data::prepare_dataset(base, Path::new("datasets")).expect("Cora loads");
    let accs: Vec<f64> = (0..5)
        .map(|seed| {
            let config = TrainConfig { seed, ..base.clone() };
            trainer::single::run(&config, &dataset, &mut ()).expect("training runs").final_.test_acc_at_best_val
        })
        .collect();
    let mean = accs.iter().sum::<f64>() / accs.len() as f64;
    eprintln!("{:?} per seed {accs:?}, mean {mean:.4}", base.model);
    mean
}

fn cora(model: ModelName) -> TrainConfig {
    TrainConfig {
        dataset: Some(cora_dir().display().to_string()),
        model,
        feature_norm: FeatureNorm::Row,
        epochs: 200,
        ..TrainConfig::default()
    }
}

#[test]
fn gcn_reaches_the_cora_target() {
    let mean = mean_test_acc(&cora(ModelName::Gcn));
    assert!(mean >= 0.810, "GCN mean test accuracy {mean:.4} < 0.810");
}
