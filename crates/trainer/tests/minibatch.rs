//! Mini-batch training end to end on the built-in synthetic graph: one batch holding every
//! training vertex with every neighbour equals full-batch training; data-parallel workers equal
//! one process on the same global batches; the epoch records carry the sampling figures.

use std::path::Path;
use std::sync::OnceLock;

use gnn_core::{ConvKind, GcnNorm};
use graph_partition::Dataset;
use graph_partition::book::CutKind;
use trainer::config::{LrScaling, Method, MethodConfig, MiniBatchConfig, TrainConfig};
use trainer::method::{BatchSource, DataPlan, MethodDef, Parts};
use trainer::{LocalOptions, Report, Source, TrainError, data, run_method, run_on};

fn dataset() -> &'static Dataset {
    static DATA: OnceLock<Dataset> = OnceLock::new();
    DATA.get_or_init(|| {
        data::prepare_dataset(&TrainConfig::default(), Path::new("."), &Default::default()).expect("synthetic graph")
    })
}

fn train(config: &TrainConfig) -> Report {
    run_on(config, dataset(), LocalOptions::default(), &mut ()).expect("training runs")
}

fn base(model: ConvKind) -> TrainConfig {
    TrainConfig { model, hidden: 8, heads: 2, epochs: 4, ..TrainConfig::default() }
}

fn minibatch(batch_size: usize, fanouts: Option<&str>) -> MiniBatchConfig {
    MiniBatchConfig {
        batch_size: Some(batch_size),
        fanouts: fanouts.map(|f| f.parse().unwrap()),
        ..MiniBatchConfig::default()
    }
}

fn close(a: f64, b: f64, tol: f64) -> bool {
    (a - b).abs() <= tol * (1.0 + b.abs())
}

/// Fanout -1 and one batch of every training vertex: each epoch's single step is the full-batch
/// step (same dropout masks, global GCN degrees), so the losses agree epoch after epoch.
#[test]
fn one_full_neighbourhood_batch_equals_full_batch_training() {
    let train_size = dataset().splits.train.len();
    for model in [ConvKind::Gcn, ConvKind::Sage, ConvKind::Gat] {
        let full = train(&base(model));
        let config = TrainConfig { minibatch: minibatch(train_size, Some("-1,-1")), ..base(model) };
        let mini = train(&config);
        for (f, m) in full.epochs.iter().zip(&mini.epochs) {
            assert!(
                close(m.loss, f.loss, 1e-5),
                "{model:?} epoch {}: loss {} vs full-batch {}",
                f.epoch,
                m.loss,
                f.loss
            );
            let vertex = 1.5 / dataset().splits.test.len() as f64;
            assert!((m.test_acc - f.test_acc).abs() < vertex, "{model:?}: layer-wise evaluation differs");
            assert_eq!(m.method.as_ref().unwrap()["steps"], 1);
        }
    }
}

/// Two workers on shares of global batches of 2 x 16 seeds against one process on batches of 32.
#[test]
fn data_parallel_workers_equal_one_process_on_the_global_batch() {
    for model in [ConvKind::Sage, ConvKind::Gat] {
        let single = TrainConfig { minibatch: minibatch(32, Some("5,5")), ..base(model) };
        let mut dp = TrainConfig {
            minibatch: minibatch(16, Some("5,5")),
            method: MethodConfig::named(Method::DataParallel),
            ..base(model)
        };
        dp.distributed.workers = 2;
        let (one, two) = (train(&single), train(&dp));
        assert_eq!((two.method.as_str(), two.workers, two.cut.as_str()), ("data-parallel", 2, "none"));
        for (a, b) in two.epochs.iter().zip(&one.epochs) {
            assert!(close(a.loss, b.loss, 1e-4), "{model:?} epoch {}: {} vs {}", a.epoch, a.loss, b.loss);
            assert_eq!(a.method.as_ref().unwrap()["steps"], b.method.as_ref().unwrap()["steps"]);
        }
        assert!(close(two.final_.test_acc_at_best_val, one.final_.test_acc_at_best_val, 1e-3));
    }
}

#[test]
fn the_gradient_all_reduce_is_the_only_traffic_of_an_epoch() {
    let mut config = TrainConfig {
        minibatch: minibatch(16, Some("5,5")),
        method: MethodConfig::named(Method::DataParallel),
        ..base(ConvKind::Gcn)
    };
    config.distributed.workers = 2;
    config.minibatch.lr_scaling = Some(LrScaling::Linear);
    let report = train(&config);
    let grads: u64 = report.epochs.iter().map(|e| e.bytes_by_phase.get("grads").copied().unwrap_or(0)).sum();
    assert!(grads > 0);
    assert_eq!(report.final_.bytes_grad_sync, grads);
    assert_eq!(report.final_.bytes_total, grads);
    assert_eq!(report.final_.bytes_exchange, 0);
    let final_method = report.final_.method.as_ref().unwrap();
    assert_eq!(final_method["lr"], f64::from(2.0 * config.lr));
    assert_eq!(final_method["global_batch_size"], 32);
    assert_eq!(final_method["backend"], "local");
    assert!(report.epochs.iter().all(|e| e.modeled_comm_s > 0.0 && e.modeled_epoch_s >= e.modeled_comm_s));
}

#[test]
fn epoch_records_carry_the_sampling_figures() {
    let config = TrainConfig {
        minibatch: MiniBatchConfig { gcn_norm: GcnNorm::Sampled, ..minibatch(64, Some("4,3")) },
        ..base(ConvKind::Gcn)
    };
    let report = train(&config);
    let steps = dataset().splits.train.len().div_ceil(64);
    for epoch in &report.epochs {
        let m = epoch.method.as_ref().expect("mini-batch epochs have method fields");
        assert_eq!(m["steps"], steps);
        assert_eq!(m["workers"], 1);
        let blocks = m["blocks"].as_array().unwrap();
        assert_eq!(blocks.len(), 2);
        // Fanout 3 at the output layer: at most 3 edges per seed.
        assert!(blocks[1]["edges"].as_f64().unwrap() <= 3.0 * blocks[1]["dst_vertices"].as_f64().unwrap());
        assert_eq!(blocks[0]["dst_vertices"], blocks[1]["src_vertices"]);
        let edges = blocks.iter().map(|b| b["edges"].as_f64().unwrap()).sum::<f64>();
        assert!(close(m["sampled_edges_per_step"].as_f64().unwrap(), edges, 1e-9));
        assert_eq!(m["sampled_vertices_per_step"], blocks[0]["src_vertices"]);
        let entropy = &m["label_entropy_bits"];
        let (mean, min) = (entropy["mean"].as_f64().unwrap(), entropy["min"].as_f64().unwrap());
        // 8 classes: at most 3 bits.
        assert!(0.0 < min && min <= mean && mean <= 3.0, "{entropy}");
        assert!(m["sampling_s"].as_f64().unwrap() > 0.0 && m["compute_s"].as_f64().unwrap() > 0.0);
        assert!(m["sampled_edges_per_s"].as_f64().unwrap() > 0.0);
    }
    assert!(report.epochs.last().unwrap().loss < report.epochs[0].loss);
}

/// A method whose parts pair sampled batches with a partitioned graph.
struct SampledCut;

impl MethodDef for SampledCut {
    fn name(&self) -> &str {
        "sampled-cut"
    }

    fn parts(&self, config: &TrainConfig) -> Parts {
        Parts { batches: BatchSource::from_config(config), ..Parts::exact(DataPlan::Cut(CutKind::EdgeCut)) }
    }
}

#[test]
fn parts_that_do_not_go_together_are_an_error() {
    let config = TrainConfig { minibatch: minibatch(16, None), ..base(ConvKind::Gcn) };
    let err = run_method(&SampledCut, &config, Source::Given(dataset()), LocalOptions::default(), &mut ()).unwrap_err();
    assert!(matches!(err, TrainError::Parts { .. }), "{err}");
    assert!(err.to_string().starts_with("method `sampled-cut`: mini-batches over a partitioned graph"), "{err}");
}

/// Without the `cuda` feature a cut graph's device workers stop before any work, naming the
/// build.
#[cfg(not(feature = "cuda"))]
#[test]
fn cut_graph_device_workers_need_the_cuda_feature() {
    let method = MethodConfig { name: Method::Vanilla, ..MethodConfig::default() };
    let config = TrainConfig { device: trainer::config::Device::Cuda(0), method, ..base(ConvKind::Gcn) };
    let err = run_on(&config, dataset(), LocalOptions::default(), &mut ()).unwrap_err().to_string();
    assert!(err.contains("without CUDA support") && err.contains("--features cuda"), "{err}");
}

/// Without the `cuda` feature the mini-batch runners' device workers stop before any work,
/// naming the build.
#[cfg(not(feature = "cuda"))]
#[test]
fn mini_batch_device_workers_need_the_cuda_feature() {
    for (name, workers) in [(Method::Single, 1), (Method::DataParallel, 2), (Method::Adgraph, 2), (Method::Featpart, 2)]
    {
        let mut config = TrainConfig {
            device: trainer::config::Device::Cuda(0),
            minibatch: minibatch(8, Some("3,3")),
            ..base(ConvKind::Sage)
        };
        config.method = MethodConfig { name, ..MethodConfig::default() };
        config.distributed.workers = workers;
        let err = run_on(&config, dataset(), LocalOptions::default(), &mut ()).unwrap_err().to_string();
        assert!(err.contains("without CUDA support") && err.contains("--features cuda"), "{name:?}: {err}");
    }
}
