//! EC-Graph end to end on Cora: with compression off it is vanilla edge-cut training; its full
//! rounds cost vanilla's rows plus one kind byte per message, its compressed rounds cost the
//! analytic bucket bytes, and the report carries selector shares and widths per layer.

use std::path::Path;
use std::sync::OnceLock;

use graph_partition::Dataset;
use graph_partition::book::CutKind;
use graph_partition::partition::Algorithm;
use trainer::config::{DistributedConfig, EcgraphSettings, Method, MethodConfig, ParamSync, TrainConfig};
use trainer::{LocalOptions, Report, data, run_on};

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
            ..DistributedConfig::default()
        },
        ..TrainConfig::default()
    }
}

fn exact() -> EcgraphSettings {
    EcgraphSettings { fp_bits: 32, bp_bits: 32, reqec: false, resec: false, bit_tuner: false, ..Default::default() }
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
    let ecgraph = run(&config(Method::Ecgraph, exact(), 5));
    for (v, e) in vanilla.epochs.iter().zip(&ecgraph.epochs) {
        assert!((v.loss - e.loss).abs() <= 1e-4 * v.loss.abs().max(1.0), "epoch {}: {} vs {}", v.epoch, v.loss, e.loss);
        assert_eq!(v.bytes_by_phase, e.bytes_by_phase, "epoch {}", v.epoch);
    }
}

#[test]
fn full_rounds_cost_a_byte_per_message_and_compressed_rounds_the_bucket_bytes() {
    let vanilla = run(&config(Method::Vanilla, exact(), 3));
    // ReqEC with T_tr = 10: epoch 1 (t = 0) is a full round, epochs 2-3 selective at 2 bits.
    let settings = EcgraphSettings { bit_tuner: false, resec: false, bp_bits: 32, ..Default::default() };
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
