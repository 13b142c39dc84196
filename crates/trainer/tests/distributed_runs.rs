//! Distributed vanilla runs on Cora: the traffic the ledger reports equals what the partition
//! book predicts, workers hold only their share, and a failing worker ends the run promptly with
//! an error naming it.

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::OnceLock;
use std::time::{Duration, Instant};

use comm_hierarchy::{LinkClass, LinkModel, Topology};
use gnn_core::{ExchangePoint, Model};
use graph_partition::book::CutKind;
use graph_partition::book::PartitionBook;
use graph_partition::partition::{Partition, PartitionConfig, partition_graph};
use graph_partition::{Dataset, Labels};
use trainer::config::{DistributedConfig, Method, MethodConfig, TrainConfig};
use trainer::report::is_exchange_phase;
use trainer::{LocalOptions, Report, TrainError, data, run_on};

const CORA: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../../datasets/cora");

fn cora() -> &'static Dataset {
    static CORA_DATA: OnceLock<Dataset> = OnceLock::new();
    CORA_DATA.get_or_init(|| {
        assert!(Path::new(CORA).is_dir(), "Cora is missing: expected the OGB raw layout at {CORA}");
        data::prepare_dataset(&config(CutKind::EdgeCut), Path::new("."), &Default::default()).expect("Cora loads")
    })
}

/// A 3-layer GCN (hidden 16): layers 0 and 2 exchange transformed rows, layer 1 its input.
fn config(cut: CutKind) -> TrainConfig {
    TrainConfig {
        dataset: Some(CORA.to_string()),
        layers: 3,
        epochs: 2,
        method: MethodConfig::named(Method::Vanilla),
        distributed: DistributedConfig { cut, workers: 4, hosts: 2, ..DistributedConfig::default() },
        ..TrainConfig::default()
    }
}

fn run(config: &TrainConfig, dataset: &Dataset) -> Result<Report, TrainError> {
    run_on(config, dataset, LocalOptions::default(), &mut ())
}

/// The book the run builds (partitioners are deterministic for a seed).
fn book(config: &TrainConfig, dataset: &Dataset) -> PartitionBook {
    let d = &config.distributed;
    let pconfig = PartitionConfig {
        hosts: d.hosts,
        seed: config.seed,
        ..PartitionConfig::new(d.algorithm_for(d.cut), d.workers)
    };
    PartitionBook::build(&dataset.graph, &partition_graph(&dataset.graph, &pconfig).unwrap()).unwrap()
}

/// Rows one sync of `cut` moves from part `p` to part `q`: edge-cut pulls send the owned rows
/// `q` holds as halo (pushes return as many); a vertex-cut sync gathers `p`'s mirrors mastered
/// on `q` and scatters `p`'s masters mirrored on `q`.
fn rows(book: &PartitionBook, cut: CutKind, p: usize, q: usize) -> usize {
    let part = &book.parts()[p];
    match cut {
        CutKind::EdgeCut => part.send(q).len(),
        CutKind::VertexCut | CutKind::FeatureCut => part.recv(q).len() + part.send(q).len(),
    }
}

/// Expected (intra, inter) bytes of every exchange phase of one step.
fn predicted(config: &TrainConfig, dataset: &Dataset) -> BTreeMap<String, (u64, u64)> {
    let book = book(config, dataset);
    let topology = Topology::for_workers(4, 2, LinkModel::default()).unwrap();
    let (mut intra_rows, mut inter_rows) = (0u64, 0u64);
    for p in 0..4 {
        for q in (0..4).filter(|&q| q != p) {
            let r = rows(&book, config.distributed.cut, p, q) as u64;
            match topology.link_class(p, q).unwrap() {
                LinkClass::Intra => intra_rows += r,
                LinkClass::Inter => inter_rows += r,
            }
        }
    }
    let model = Model::new(config.model_config(dataset.num_features(), dataset.num_classes)).unwrap();
    let mut out = BTreeMap::new();
    for (layer, conv) in model.convs().enumerate() {
        let (width, backward) = match conv.exchange_point() {
            ExchangePoint::Transformed => (conv.out_dim(), true),
            // The input's gradient, and so its exchange, is skipped for the first layer.
            ExchangePoint::Input => (conv.in_dim(), layer > 0),
        };
        let bytes = |rows: u64| rows * width as u64 * 4;
        out.insert(format!("fwd/{layer}"), (bytes(intra_rows), bytes(inter_rows)));
        if backward {
            out.insert(format!("bwd/{layer}"), (bytes(intra_rows), bytes(inter_rows)));
        }
    }
    out
}

fn check_traffic(cut: CutKind) {
    let config = config(cut);
    let dataset = cora();
    let expected = predicted(&config, dataset);
    let points: Vec<_> = Model::new(config.model_config(dataset.num_features(), dataset.num_classes))
        .unwrap()
        .convs()
        .map(|c| c.exchange_point())
        .collect();
    assert!(points.contains(&ExchangePoint::Input) && points.contains(&ExchangePoint::Transformed), "{points:?}");
    let report = run(&config, dataset).expect("distributed run");
    let expected: BTreeMap<String, u64> = expected.into_iter().map(|(p, (a, b))| (p, a + b)).collect();
    for epoch in &report.epochs {
        let phases = &epoch.bytes_by_phase;
        let exchanged: BTreeMap<String, u64> =
            phases.iter().filter(|(p, _)| is_exchange_phase(p)).map(|(p, b)| (p.clone(), *b)).collect();
        assert_eq!(exchanged, expected, "{}-cut epoch {}: exchange bytes per phase", cut.as_str(), epoch.epoch);
        // The epoch total is the phases' sum: exchanges, gradient and loss all-reduces.
        assert_eq!(epoch.bytes_intra + epoch.bytes_inter, phases.values().sum::<u64>());
        assert!(phases.contains_key("grads") && phases.contains_key("loss"), "{phases:?}");
        assert!(epoch.modeled_epoch_s >= epoch.compute_s, "no overlap: compute plus communication");
    }
    let epochs = report.epochs.len() as u64;
    assert_eq!(report.final_.bytes_exchange, epochs * expected.values().sum::<u64>());
    let grads: u64 = report.epochs.iter().map(|e| e.bytes_by_phase["grads"]).sum();
    assert_eq!(report.final_.bytes_grad_sync, grads);
    let modeled: f64 = report.epochs.iter().map(|e| e.modeled_epoch_s).sum();
    assert!((report.final_.modeled_train_s - modeled).abs() < 1e-9);
}

#[test]
fn edge_cut_traffic_equals_the_partition_book_prediction() {
    check_traffic(CutKind::EdgeCut);
}

#[test]
fn vertex_cut_traffic_equals_the_partition_book_prediction() {
    check_traffic(CutKind::VertexCut);
}

/// Every worker holds its part of the graph and the features of the rows it computes: its own
/// vertices, plus the mirrors under vertex-cut; edge-cut halo rows are pulled, never loaded.
#[test]
fn workers_hold_their_part_and_halo_only() {
    let dataset = cora();
    let row_bytes = (dataset.features.ncols() * 4) as u64;
    let whole = dataset.features.len() as u64 * 4;
    for cut in [CutKind::EdgeCut, CutKind::VertexCut] {
        let report = run(&config(cut), dataset).expect("distributed run");
        let method = report.final_.method.expect("final method fields");
        let workers = method["workers"].as_array().expect("per-worker table");
        assert_eq!(workers.len(), 4);
        let mut owned = 0;
        for w in workers {
            let (primaries, copies) = (w["primaries"].as_u64().unwrap(), w["copies"].as_u64().unwrap());
            owned += primaries;
            let held = w["held_bytes"].as_u64().unwrap();
            let feature_rows = match cut {
                CutKind::EdgeCut => primaries,
                CutKind::VertexCut | CutKind::FeatureCut => primaries + copies,
            };
            // The graph and labels are small next to one feature row per copy.
            assert!(held >= feature_rows * row_bytes && held < (feature_rows + copies / 2) * row_bytes, "{w}");
            assert!(held < whole, "{w}");
            assert!(w.get("peak_rss_bytes").is_none(), "in-process workers share the process peak: {w}");
        }
        assert_eq!(owned as usize, dataset.num_nodes(), "every vertex has exactly one primary");
        assert_eq!(method["backend"], "local");
    }
}

#[test]
fn a_failing_worker_ends_the_run_with_an_error_naming_it() {
    let config = TrainConfig { epochs: 50, ..config(CutKind::EdgeCut) };
    let mut dataset = cora().clone();
    // A training vertex with a label the model cannot output: only its owner's loss fails.
    let victim = dataset.splits.train[17];
    let Labels::Classes(classes) = &mut dataset.labels else { panic!("Cora is single-label") };
    classes[victim as usize] = 99;
    let d = &config.distributed;
    let pconfig = PartitionConfig {
        hosts: d.hosts,
        seed: config.seed,
        ..PartitionConfig::new(d.algorithm_for(d.cut), d.workers)
    };
    let Partition::EdgeCut { owner, .. } = partition_graph(&dataset.graph, &pconfig).unwrap() else {
        panic!("METIS makes an edge-cut")
    };
    let start = Instant::now();
    let err = run(&config, &dataset).expect_err("a bad label must fail the run");
    let msg = err.to_string();
    assert!(start.elapsed() < Duration::from_secs(60), "took {:?}", start.elapsed());
    let rank = owner[victim as usize];
    assert!(msg.contains(&format!("rank {rank} returned an error")) && msg.contains("label 99"), "{msg}");
}
