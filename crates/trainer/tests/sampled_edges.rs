//! Full-batch training on in-edges sampled every epoch (fanouts without a batch size; EC-Graph's
//! sampled mode) on Cora: partitioned training equals single-process training on the same
//! draws, with every edge kept it is full-graph training bit for bit, it exchanges what
//! full-graph training exchanges, and the runs that cannot sample in-edges say so.

use std::path::Path;
use std::sync::OnceLock;

use gnn_core::ConvKind;
use graph_partition::Dataset;
use graph_partition::book::CutKind;
use graph_partition::partition::Algorithm;
use trainer::config::{Compress, DistributedConfig, EcgraphSettings, Method, MethodConfig, TrainConfig};
use trainer::{LocalOptions, Report, data, run_on, single};

const CORA: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../../datasets/cora");

fn config(method: Method, model: ConvKind, fanouts: Option<&str>) -> TrainConfig {
    let mut method = MethodConfig::named(method);
    method.ecgraph = EcgraphSettings {
        fp_bits: 32,
        bp_bits: 32,
        reqec: false,
        resec: false,
        bit_tuner: false,
        ..Default::default()
    };
    let mut c = TrainConfig {
        dataset: Some(CORA.to_string()),
        model,
        hidden: if model == ConvKind::Gat { 8 } else { 16 },
        layers: 2,
        epochs: 4,
        seed: 5,
        method,
        distributed: DistributedConfig {
            cut: CutKind::EdgeCut,
            partitioner: Some(Algorithm::Hash),
            workers: 4,
            hosts: 2,
            compress: Compress::Always,
            ..DistributedConfig::default()
        },
        ..TrainConfig::default()
    };
    c.minibatch.fanouts = fanouts.map(|f| f.parse().unwrap());
    c
}

fn cora() -> &'static Dataset {
    static DATA: OnceLock<Dataset> = OnceLock::new();
    DATA.get_or_init(|| {
        let c = config(Method::Single, ConvKind::Gcn, None);
        data::prepare_dataset(&c, Path::new("."), &Default::default()).expect("Cora loads")
    })
}

fn run(config: &TrainConfig) -> Report {
    run_on(config, cora(), LocalOptions::default(), &mut ()).expect("the run trains")
}

fn alone(config: &TrainConfig) -> Report {
    single::run("single", config, cora(), &mut ()).expect("the run trains")
}

fn losses(report: &Report) -> Vec<f64> {
    report.epochs.iter().map(|e| e.loss).collect()
}

/// Within `distributed_equality`'s tolerance: losses within 1e-4 relative, validation
/// accuracies within two vertices.
fn assert_same_run(name: &str, a: &Report, b: &Report) {
    assert_eq!(a.epochs.len(), b.epochs.len(), "{name}");
    for (x, y) in a.epochs.iter().zip(&b.epochs) {
        let rel = (x.loss - y.loss).abs() / y.loss.abs();
        assert!(rel <= 1e-4, "{name}, epoch {}: loss {} vs {}", x.epoch, x.loss, y.loss);
        assert!((x.val_acc - y.val_acc).abs() <= 2.0 / 500.0, "{name}, epoch {}", x.epoch);
    }
}

#[test]
fn partitioned_training_on_sampled_edges_equals_single_process_training() {
    for model in ConvKind::ALL {
        let sampled = |method| config(method, model, Some("3,2"));
        let reference = alone(&sampled(Method::Single));
        // The draws are the sampler's, not the whole graph's: the run differs from full-graph training.
        assert_ne!(losses(&reference), losses(&alone(&config(Method::Single, model, None))), "{model}");
        assert_same_run(&format!("{model} vanilla"), &run(&sampled(Method::Vanilla)), &reference);
        // EC-Graph-S with compression off, its halo feature cache on.
        assert_same_run(&format!("{model} ecgraph"), &run(&sampled(Method::Ecgraph)), &reference);
    }
}

#[test]
fn fanouts_above_every_degree_train_on_every_edge_and_exchange_the_same_rows() {
    let max_degree = (0..cora().num_nodes()).map(|v| cora().graph.degree(v)).max().unwrap();
    let all = format!("{},{}", max_degree, max_degree + 7);
    for model in [ConvKind::Gcn, ConvKind::Sage] {
        let whole = alone(&config(Method::Single, model, None));
        assert_eq!(losses(&alone(&config(Method::Single, model, Some(&all)))), losses(&whole), "{model}");
    }
    // Sampling changes what is aggregated, not what is exchanged: the same halo rows every epoch.
    let full = run(&config(Method::Vanilla, ConvKind::Gcn, None));
    let sampled = run(&config(Method::Vanilla, ConvKind::Gcn, Some("3,2")));
    for (f, s) in full.epochs.iter().zip(&sampled.epochs) {
        assert_eq!(f.bytes_by_phase, s.bytes_by_phase, "epoch {}", f.epoch);
    }
}

#[test]
fn runs_that_cannot_sample_in_edges_say_why() {
    let mut vertex = config(Method::Vanilla, ConvKind::Gcn, Some("3,2"));
    vertex.distributed.cut = CutKind::VertexCut;
    vertex.distributed.partitioner = None;
    let err = run_on(&vertex, cora(), LocalOptions::default(), &mut ()).unwrap_err().to_string();
    assert!(err.contains("edge-cut") && err.contains("fanouts"), "{err}");
    let mut cdfgnn = config(Method::Cdfgnn, ConvKind::Gcn, Some("3,2"));
    let err = run_on(&cdfgnn, cora(), LocalOptions::default(), &mut ()).unwrap_err().to_string();
    assert!(err.contains("`hash` does not make a vertex-cut"), "cdfgnn's own cut is checked first: {err}");
    cdfgnn.distributed.partitioner = None;
    let err = run_on(&cdfgnn, cora(), LocalOptions::default(), &mut ()).unwrap_err().to_string();
    assert!(err.contains("`fanouts`") && err.contains("cdfgnn"), "{err}");
}

/// The estimate counts the sampled graphs of a step: at most `fanout` in-edges per vertex and
/// layer, never more than the graph's.
#[test]
fn the_memory_estimate_counts_the_sampled_layer_graphs() {
    let term = |fanouts: Option<&str>| {
        let est = trainer::memory::estimate::single(&config(Method::Single, ConvKind::Gcn, fanouts), cora()).unwrap();
        est.terms.iter().find(|t| t.name.starts_with("sampled layer graphs")).map(|t| t.bytes)
    };
    assert_eq!(term(None), None);
    let (n, edges) = (cora().num_nodes() as u64, cora().graph.num_edges() as u64);
    let graph = |e: u64| 2 * ((n + 1) * 8 + e * 4) + n * 29;
    assert_eq!(term(Some("3,2")), Some(graph(edges.min(3 * n)) + graph(edges.min(2 * n))));
    assert_eq!(term(Some("-1,1000")), Some(2 * graph(edges)));
}
