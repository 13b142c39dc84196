//! The device training path against the CPU one: 20 epochs on Cora (public split, row-normalised
//! features, the settings) must give the same per-epoch training loss within 1e-3 and
//! the same accuracies within one vertex per split. The parameters start equal (initialised on
//! the CPU, uploaded) and dropout uses the same keyed masks, so the curves differ only by
//! floating-point summation order. They need a GPU, so `cargo test` skips them;
//! `cargo xtask gpu-test` runs them.
#![cfg(feature = "cuda")]

use std::path::Path;

use gnn_core::{ConvKind, LayerOrder};
use graph_partition::{Dataset, Labels};
use ndarray::Array2;
use trainer::config::{Device, FeatureNorm, TrainConfig};

const EPOCHS: usize = 20;

fn cora(model: ConvKind) -> TrainConfig {
    // `HALO_CORA` names the copy of a GPU bundle (`cargo xtask gpu-bundle`), which runs where the
    // build's paths do not exist.
    let dir = std::env::var_os("HALO_CORA")
        .map_or_else(|| Path::new(env!("CARGO_MANIFEST_DIR")).join("../../datasets/cora"), Into::into);
    let base = TrainConfig {
        dataset: Some(dir.display().to_string()),
        model,
        feature_norm: FeatureNorm::Row,
        epochs: EPOCHS,
        ..TrainConfig::default()
    };
    match model {
        ConvKind::Gat => TrainConfig { hidden: 8, heads: 8, dropout: 0.6, lr: 0.005, ..base },
        ConvKind::Gcn | ConvKind::Sage => base,
    }
}

/// The model and the hidden-layer options that change its steps, for failure messages.
fn describe(config: &TrainConfig) -> String {
    let norm = if config.layer_norm { " + LayerNorm" } else { "" };
    format!("{}{norm}, {}", config.model, config.layer_order().as_str())
}

fn load(config: &TrainConfig) -> Dataset {
    trainer::data::prepare_dataset(config, Path::new("datasets"), &Default::default()).expect("Cora loads")
}

/// `|a - b|` is at most one vertex of a split of `n`.
fn within_one_vertex(a: f64, b: f64, n: usize) -> bool {
    (a - b).abs() * n as f64 <= 1.0 + 1e-9
}

fn curves_match(cpu: TrainConfig) {
    let dataset = load(&cpu);
    curves_match_on(cpu, &dataset);
}

fn curves_match_on(cpu: TrainConfig, dataset: &Dataset) {
    let model = describe(&cpu);
    let run = |config: &TrainConfig| trainer::single::run("single", config, dataset, &mut ()).expect("training runs");
    let on_cpu = run(&cpu);
    let on_gpu = run(&TrainConfig { device: Device::Cuda(0), ..cpu.clone() });
    assert_eq!(on_gpu.epochs.len(), EPOCHS);
    let sizes = &on_cpu.split_sizes;
    for (c, g) in on_cpu.epochs.iter().zip(&on_gpu.epochs) {
        assert!((c.loss - g.loss).abs() <= 1e-3, "{model} epoch {}: loss CPU {} GPU {}", c.epoch, c.loss, g.loss);
        for (what, a, b, n) in [
            ("train", c.train_acc, g.train_acc, sizes.train),
            ("val", c.val_acc, g.val_acc, sizes.valid),
            ("test", c.test_acc, g.test_acc, sizes.test),
        ] {
            assert!(within_one_vertex(a, b, n), "{model} epoch {}: {what} acc CPU {a} GPU {b}", c.epoch);
        }
    }
}

#[test]
#[ignore = "needs a CUDA GPU: cargo xtask gpu-test"]
fn gcn_on_the_device_follows_the_cpu_loss_curve() {
    curves_match(cora(ConvKind::Gcn));
}

#[test]
#[ignore = "needs a CUDA GPU: cargo xtask gpu-test"]
fn sage_on_the_device_follows_the_cpu_loss_curve() {
    curves_match(cora(ConvKind::Sage));
}

#[test]
#[ignore = "needs a CUDA GPU: cargo xtask gpu-test"]
fn gat_on_the_device_follows_the_cpu_loss_curve() {
    curves_match(cora(ConvKind::Gat));
}

/// LayerNorm between conv and activation, dropout last (the `single` method's order).
#[test]
#[ignore = "needs a CUDA GPU: cargo xtask gpu-test"]
fn gcn_with_layer_norm_on_the_device_follows_the_cpu_loss_curve() {
    curves_match(TrainConfig { layer_norm: true, ..cora(ConvKind::Gcn) });
}

/// Dropout first: `conv -> dropout -> LayerNorm -> activation` (AdaQP's order).
#[test]
#[ignore = "needs a CUDA GPU: cargo xtask gpu-test"]
fn sage_with_layer_norm_and_dropout_first_on_the_device_follows_the_cpu_loss_curve() {
    curves_match(TrainConfig { layer_norm: true, layer_order: Some(LayerOrder::DropoutFirst), ..cora(ConvKind::Sage) });
}

/// GAT's hidden LayerNorm spans all concatenated heads.
#[test]
#[ignore = "needs a CUDA GPU: cargo xtask gpu-test"]
fn gat_with_layer_norm_on_the_device_follows_the_cpu_loss_curve() {
    curves_match(TrainConfig { layer_norm: true, ..cora(ConvKind::Gat) });
}

/// Dropout first without LayerNorm splits the fused bias and activation on the device.
#[test]
#[ignore = "needs a CUDA GPU: cargo xtask gpu-test"]
fn gcn_with_dropout_first_on_the_device_follows_the_cpu_loss_curve() {
    curves_match(TrainConfig { layer_order: Some(LayerOrder::DropoutFirst), ..cora(ConvKind::Gcn) });
}

/// Cora as a multi-label task: columns 0 to 6 one-hot of the class, column 7 set where the
/// vertex has more than three neighbours, so rows carry one or two labels.
fn cora_multi_label(config: &TrainConfig) -> Dataset {
    let mut dataset = load(config);
    let Labels::Classes(classes) = &dataset.labels else { panic!("Cora is single-label") };
    let columns = dataset.num_classes + 1;
    let targets = Array2::from_shape_fn((classes.len(), columns), |(v, j)| {
        let on = if j < dataset.num_classes { classes[v] as usize == j } else { dataset.graph.degree(v) > 3 };
        if on { 1.0 } else { 0.0 }
    });
    dataset.labels = Labels::MultiLabel(targets);
    dataset.num_classes = columns;
    dataset
}

/// Sigmoid binary cross-entropy on the device (`sigmoid_bce`): the mean over rows and columns,
/// accuracy over (row, column) pairs, as the CPU's multi-label objective.
#[test]
#[ignore = "needs a CUDA GPU: cargo xtask gpu-test"]
fn multi_label_gcn_on_the_device_follows_the_cpu_loss_curve() {
    let config = cora(ConvKind::Gcn);
    let dataset = cora_multi_label(&config);
    curves_match_on(config, &dataset);
}

/// `--save-model` after a device run: the file holds the best validation epoch's parameters
/// (downloaded at that epoch), and the CPU model loaded from it scores what the device run
/// reported for that epoch, within one vertex per split (GAT with LayerNorm: every kind of
/// device tensor).
#[test]
#[ignore = "needs a CUDA GPU: cargo xtask gpu-test"]
fn saved_device_weights_reproduce_the_best_epoch_on_the_cpu() {
    let config = TrainConfig { device: Device::Cuda(0), layer_norm: true, ..cora(ConvKind::Gat) };
    let dataset = load(&config);
    let report = trainer::single::run("single", &config, &dataset, &mut ()).expect("training runs");
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("m.safetensors");
    trainer::export::save(&path, &report).expect("the device run kept its best epoch");
    let (mut model, sidecar) = trainer::export::load(&path).expect("the saved weights load");
    let best = report.final_.best_epoch;
    assert_eq!(sidecar.epoch, best);
    assert_eq!(model.config(), &config.model_config(dataset.num_features(), dataset.num_classes));
    let eval = trainer::export::predict(&mut model, &dataset).expect("the CPU evaluates").eval;
    let reported = &report.epochs[best - 1];
    let sizes = &report.split_sizes;
    for (what, cpu, gpu, n) in [
        ("train", eval.train_acc, reported.train_acc, sizes.train),
        ("val", eval.val_acc, report.final_.best_val_acc, sizes.valid),
        ("test", eval.test_acc, report.final_.test_acc_at_best_val, sizes.test),
    ] {
        assert!(within_one_vertex(cpu, gpu, n), "epoch {best}: {what} acc of the saved weights {cpu}, device {gpu}");
    }
}
