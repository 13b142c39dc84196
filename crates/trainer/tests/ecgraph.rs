//! EC-Graph end to end on Cora: with compression off it is vanilla edge-cut training, with its
//! halo feature cache or without; its full rounds cost vanilla's rows plus one kind byte per
//! message, its compressed rounds cost the analytic bucket bytes, and the report carries
//! selector shares and widths per layer.

use std::path::Path;
use std::sync::OnceLock;

use gnn_core::ConvKind;
use graph_partition::Dataset;
use graph_partition::book::CutKind;
use graph_partition::partition::Algorithm;
use trainer::config::{Compress, DistributedConfig, EcgraphSettings, Method, MethodConfig, ParamSync, TrainConfig};
use trainer::{LocalOptions, Report, data, run_on, single};

const CORA: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../../datasets/cora");

fn config(method: Method, settings: EcgraphSettings, epochs: usize) -> TrainConfig {
    let mut method = MethodConfig::named(method);
    method.ecgraph = settings;
    TrainConfig {
        dataset: Some(CORA.to_string()),
        layers: 2,
        epochs,
        method,
        distributed: DistributedConfig {
            cut: CutKind::EdgeCut,
            partitioner: Some(Algorithm::Hash),
            workers: 4,
            hosts: 4,
            topology: comm_hierarchy::Preset::Ecgraph,
            compress: Compress::Always,
            ..DistributedConfig::default()
        },
        ..TrainConfig::default()
    }
}

/// Compression off; the halo feature cache as by default (on).
fn exact() -> EcgraphSettings {
    EcgraphSettings { fp_bits: 32, bp_bits: 32, reqec: false, resec: false, bit_tuner: false, ..Default::default() }
}

/// Compression off, every layer pulling its halo rows: vanilla edge-cut exactly.
fn exact_uncached() -> EcgraphSettings {
    EcgraphSettings { halo_cache: false, ..exact() }
}

/// Bytes of an epoch's phases of layer `layer` (forward and backward).
fn layer_bytes(report: &Report, epoch: usize, layer: usize) -> u64 {
    let mine = |p: &str| p == format!("fwd/{layer}") || p == format!("bwd/{layer}");
    report.epochs[epoch].bytes_by_phase.iter().filter(|(p, _)| mine(p)).map(|(_, b)| b).sum()
}

/// A report's `final.method` field `key` of every worker, in rank order.
fn per_worker(report: &Report, key: &str) -> Vec<u64> {
    let workers = report.final_.method.as_ref().unwrap()["workers"].as_array().unwrap().clone();
    workers.iter().map(|w| w[key].as_u64().unwrap()).collect()
}

fn cora() -> &'static Dataset {
    static DATA: OnceLock<Dataset> = OnceLock::new();
    DATA.get_or_init(|| {
        let c = config(Method::Vanilla, exact(), 1);
        data::prepare_dataset(&c, Path::new("."), &Default::default()).expect("Cora loads")
    })
}

fn run(config: &TrainConfig) -> Report {
    run_on(config, cora(), LocalOptions::default(), &mut ()).expect("the run trains")
}

fn fwd_bytes(report: &Report, epoch: usize) -> u64 {
    report.epochs[epoch].bytes_by_phase.iter().filter(|(p, _)| p.starts_with("fwd/")).map(|(_, b)| b).sum()
}

#[test]
fn compression_off_is_vanilla_edge_cut() {
    let vanilla = run(&config(Method::Vanilla, exact(), 5));
    let ecgraph = run(&config(Method::Ecgraph, exact_uncached(), 5));
    for (v, e) in vanilla.epochs.iter().zip(&ecgraph.epochs) {
        assert!((v.loss - e.loss).abs() <= 1e-4 * v.loss.abs().max(1.0), "epoch {}: {} vs {}", v.epoch, v.loss, e.loss);
        assert_eq!(v.bytes_by_phase, e.bytes_by_phase, "epoch {}", v.epoch);
    }
}

#[test]
fn full_rounds_cost_a_byte_per_message_and_compressed_rounds_the_bucket_bytes() {
    let vanilla = run(&config(Method::Vanilla, exact(), 3));
    // ReqEC with T_tr = 10: epoch 1 (t = 0) is a full round, epochs 2-3 selective at 2 bits.
    let settings =
        EcgraphSettings { bit_tuner: false, resec: false, bp_bits: 32, halo_cache: false, ..Default::default() };
    let reqec = run(&config(Method::Ecgraph, settings, 3));
    let e0 = &reqec.epochs[0];
    let codec = &e0.method.as_ref().unwrap()["codec"];
    for layer in 0..2 {
        let phase = format!("fwd/{layer}");
        let stats = &codec[format!("{phase}/to-copies")];
        let rows = stats["rows"].as_u64().unwrap();
        let vanilla_bytes = vanilla.epochs[0].bytes_by_phase[&phase];
        let width = vanilla_bytes / (4 * rows);
        // One kind byte per non-empty message: the ledger counts rows x width x 4 plus those.
        let messages = e0.bytes_by_phase[&phase] - vanilla_bytes;
        assert!((1..=12).contains(&messages), "{phase}: {messages} extra bytes");
        assert_eq!(stats["bits"]["32"].as_u64(), Some(rows), "{phase}: every row full at t = 0");
        // A selective round: per message kind, selector words and (unless every row is
        // predicted) one bucket block; the payload is at most rows x width x 2 bits.
        let sel = &reqec.epochs[1].method.as_ref().unwrap()["codec"][format!("{phase}/to-copies")];
        let sent = sel["bits"]["2"].as_u64().unwrap_or(0);
        let skipped = sel["rows_skipped"].as_u64().unwrap();
        assert_eq!(sent + skipped, rows, "{phase}: every row compressed, averaged or predicted");
        let bytes = reqec.epochs[1].bytes_by_phase[&phase];
        // Per message: sum ceil(r / 16) selector words lie in [rows / 16, rows / 16 + messages].
        let floor = messages + rows / 4 + sent * width / 4;
        let ceiling = messages * (1 + 4 + 9 + 1) + rows.div_ceil(4) + (sent * width).div_ceil(4);
        assert!(floor <= bytes && bytes <= ceiling, "{phase}: {bytes} not in [{floor}, {ceiling}]");
    }
    assert!(fwd_bytes(&reqec, 1) * 4 <= fwd_bytes(&vanilla, 1), "2-bit rounds send at most a quarter");
    let controller = &reqec.epochs[1].method.as_ref().unwrap()["controller"];
    assert_eq!(controller["fwd_bits"], serde_json::json!([2, 2]));
    let shares = &controller["selector"][0];
    let total: f64 = ["compressed", "predicted", "average"].iter().map(|k| shares[k].as_f64().unwrap()).sum();
    assert!((total - 1.0).abs() < 1e-9, "{shares}");
    let totals = &reqec.final_.method.as_ref().unwrap()["controller"];
    assert_eq!(totals["fwd_bits_epochs"][0]["2"], 3);
}

#[test]
fn parameter_servers_equal_all_reduce() {
    let reference = run(&config(Method::Ecgraph, exact(), 5));
    for servers in [1, 2, 4] {
        let mut c = config(Method::Ecgraph, exact(), 5);
        c.distributed.param_sync = ParamSync::Ps;
        c.distributed.servers = Some(servers);
        let ps = run(&c);
        for (a, p) in reference.epochs.iter().zip(&ps.epochs) {
            let tol = 1e-6 * a.loss.abs().max(1.0);
            assert!((a.loss - p.loss).abs() <= tol, "M = {servers}, epoch {}: {} vs {}", a.epoch, a.loss, p.loss);
            assert!((a.val_acc - p.val_acc).abs() <= 1e-6, "M = {servers}, epoch {}", a.epoch);
            assert!(!p.bytes_by_phase.contains_key("grads"), "no all-reduce of the gradients");
            // Each worker pushes the slices it does not serve and pulls them back.
            let (push, pull) = (p.bytes_by_phase["ps/push"], p.bytes_by_phase["ps/pull"]);
            assert_eq!(push, pull, "M = {servers}: every pushed value comes back");
        }
        let grads = reference.epochs[0].bytes_by_phase["grads"];
        assert!(ps.final_.bytes_grad_sync > 0 && grads > 0);
    }
}

/// The halo feature cache moves where layer 0's halo rows come from, not what is computed: with
/// compression off, ecgraph with the cache equals vanilla edge-cut and single-process training
/// within `distributed_equality`'s tolerance, for GCN narrower than the input (layer 0 would
/// exchange transformed rows) and as wide (it would exchange its input), GraphSAGE and GAT.
/// Layer 0 then moves no byte in any epoch; the setup fetch moves each halo row's features once.
#[test]
fn the_halo_cache_equals_vanilla_and_single_process_and_layer_0_moves_nothing() {
    let in_dim = cora().features.ncols() as u64;
    for (model, hidden) in
        [(ConvKind::Gcn, 16), (ConvKind::Gcn, in_dim as usize), (ConvKind::Sage, 16), (ConvKind::Gat, 8)]
    {
        let name = format!("{model} hidden {hidden}");
        let with = |method, settings| TrainConfig { model, hidden, seed: 3, ..config(method, settings, 4) };
        let cached = run(&with(Method::Ecgraph, exact()));
        let vanilla = run(&with(Method::Vanilla, exact()));
        let single = single::run("single", &with(Method::Vanilla, exact()), cora(), &mut ()).unwrap();
        for (reference, other) in [("vanilla", &vanilla), ("single", &single)] {
            for (c, o) in cached.epochs.iter().zip(&other.epochs) {
                let rel = (c.loss - o.loss).abs() / o.loss.abs();
                assert!(rel <= 1e-4, "{name} vs {reference}, epoch {}: loss {} vs {}", c.epoch, c.loss, o.loss);
                assert!((c.val_acc - o.val_acc).abs() <= 2.0 / 500.0, "{name} vs {reference}, epoch {}", c.epoch);
            }
        }
        for e in 0..cached.epochs.len() {
            assert_eq!(layer_bytes(&cached, e, 0), 0, "{name}, epoch {e}: layer 0 exchanged");
            assert!(layer_bytes(&vanilla, e, 0) > 0, "{name}, epoch {e}: vanilla's layer 0 pulls");
            assert_eq!(layer_bytes(&cached, e, 1), layer_bytes(&vanilla, e, 1), "{name}, epoch {e}: layer 1");
            assert!(!cached.epochs[e].bytes_by_phase.keys().any(|p| p.starts_with("setup")), "{name}");
        }
        // Under edge-cut a worker's copies are its halo rows; the partition is the same.
        let halo = per_worker(&cached, "copies");
        assert_eq!(halo, per_worker(&vanilla, "copies"), "{name}");
        let fetched = &cached.final_.method.as_ref().unwrap()["halo_cache"];
        assert_eq!(fetched["bytes"].as_u64(), Some(halo.iter().sum::<u64>() * in_dim * 4), "{name}");
        assert!(fetched["modeled_s"].as_f64().unwrap() > 0.0, "{name}");
        assert!(vanilla.final_.method.as_ref().unwrap().get("halo_cache").is_none(), "{name}");
        // Every worker holds its halo rows' features, and the memory estimate counts them.
        let extra: Vec<u64> = halo.iter().map(|h| h * in_dim * 4).collect();
        let held = per_worker(&cached, "held_bytes");
        let expected: Vec<u64> = per_worker(&vanilla, "held_bytes").iter().zip(&extra).map(|(v, x)| v + x).collect();
        assert_eq!(held, expected, "{name}");
        let term = |r: &Report, name: &str| {
            r.final_.memory.as_ref().unwrap().terms.iter().find(|t| t.name == name).map(|t| t.bytes).unwrap()
        };
        let share = "share (local graph, features, labels)";
        assert_eq!(term(&cached, share), term(&vanilla, share) + extra.iter().sum::<u64>(), "{name}");
        // Layer 0 exchanges nothing, so the exchange's buffers are sized by the later layers.
        assert!(term(&cached, "exchange buffers") <= term(&vanilla, "exchange buffers"), "{name}");
    }
}
