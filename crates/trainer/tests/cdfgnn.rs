//! CDFGNN's cache at eps 0 with exact deltas trains like vanilla vertex-cut training, and its
//! report counts what the ledger counts.

use std::path::Path;

use graph_partition::book::CutKind;
use trainer::config::{Compress, DistributedConfig, EpsRule, Method, MethodConfig, TrainConfig};
use trainer::{LocalOptions, data, run_on};

const CORA: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../../datasets/cora");

fn config(method: Method) -> TrainConfig {
    let mut config = TrainConfig {
        dataset: Some(CORA.to_string()),
        hidden: 16,
        epochs: 8,
        seed: 5,
        method: MethodConfig::named(method),
        distributed: DistributedConfig {
            cut: CutKind::VertexCut,
            workers: 4,
            hosts: 2,
            compress: Compress::Always,
            ..DistributedConfig::default()
        },
        ..TrainConfig::default()
    };
    config.input_dropout = Some(config.dropout);
    let c = &mut config.method.cdfgnn;
    (c.eps, c.eps_controller, c.quant_bits) = (0.0, EpsRule::Fixed, 0);
    config
}

#[test]
fn eps_zero_without_quantization_equals_vanilla_vertex_cut() {
    let vanilla = config(Method::Vanilla);
    let dataset = data::prepare_dataset(&vanilla, Path::new("."), &Default::default()).expect("Cora loads");
    let exact = run_on(&vanilla, &dataset, LocalOptions::default(), &mut ()).expect("vanilla run");
    let cached = run_on(&config(Method::Cdfgnn), &dataset, LocalOptions::default(), &mut ()).expect("cdfgnn run");
    assert_eq!((cached.method.as_str(), cached.cut.as_str()), ("cdfgnn", "vertex"));
    for (v, c) in exact.epochs.iter().zip(&cached.epochs) {
        let rel = (v.loss - c.loss).abs() / v.loss.abs();
        assert!(
            rel <= 1e-4,
            "epoch {}: loss {} (vanilla) vs {} (cdfgnn eps 0), rel {rel:.2e}",
            v.epoch,
            v.loss,
            c.loss
        );
        assert!((v.val_acc - c.val_acc).abs() <= 2.0 / 500.0, "epoch {}", v.epoch);
        let controller = &c.method.as_ref().expect("method fields")["controller"];
        assert_eq!((controller["eps"].as_f64(), controller["rule"].as_str()), (Some(0.0), Some("fixed")));
    }
    let fin = &cached.final_;
    let method = fin.method.as_ref().expect("final method fields");
    // Every message's bytes are the codec's: the ledger's exchange bytes equal the stats'.
    assert_eq!(method["codec_stats"]["total"]["bytes"].as_u64(), Some(fin.bytes_exchange), "{method}");
    assert_eq!(method["codec"].as_str(), Some("replica-cache(identity)"));
    let sent = method["rows_sent_fraction"].as_f64().expect("rows_sent_fraction");
    assert!(sent > 0.0 && sent <= 1.0, "{sent}");
    for key in ["fwd/0/to-primary", "fwd/1/to-copies", "bwd/1/to-primary", "bwd/1/to-copies"] {
        assert!(method["codec_stats"][key]["rows"].as_u64().unwrap_or(0) > 0, "{key}: {method}");
    }
}

/// A configuration that names cdfgnn and nothing about the cut (TOML alone, or code leaving the
/// default edge-cut) trains on an EBV vertex-cut, and its report says so.
#[test]
fn cdfgnn_sets_its_own_vertex_cut() {
    let toml = TrainConfig::from_toml_str("method = \"cdfgnn\"\nepochs = 2\n[distributed]\nworkers = 2\n", "t.toml")
        .expect("a TOML-only cdfgnn configuration");
    let mut coded = TrainConfig { epochs: 2, method: MethodConfig::named(Method::Cdfgnn), ..TrainConfig::default() };
    coded.distributed.workers = 2;
    assert_eq!(coded.distributed.cut, CutKind::EdgeCut, "code leaves the default cut");
    let dataset = data::builtin_synthetic(0).expect("the built-in graph");
    for config in [toml, coded] {
        let report = run_on(&config, &dataset, LocalOptions::default(), &mut ()).expect("cdfgnn run");
        let algorithm = report.partition.as_ref().map(|p| p.algorithm.as_str());
        assert_eq!((report.cut.as_str(), algorithm), ("vertex", Some("ebv")));
        assert_eq!(report.config.distributed.cut, CutKind::VertexCut);
    }
}

/// Under input dropout the first layer's forward sync skips the cache (`cache-first-layer =
/// "auto"`): over a run it sends what vanilla vertex-cut training sends (every row, every epoch,
/// the same bytes), while the other syncs still skip rows at a wide threshold.
#[test]
fn under_input_dropout_the_first_layer_sends_what_vanilla_sends() {
    let vanilla = config(Method::Vanilla);
    let mut cached = config(Method::Cdfgnn);
    assert!(vanilla.input_dropout_rate() > 0.0 && cached.input_dropout_rate() > 0.0);
    cached.method.cdfgnn.eps = 0.5;
    let dataset = data::prepare_dataset(&vanilla, Path::new("."), &Default::default()).expect("Cora loads");
    let exact = run_on(&vanilla, &dataset, LocalOptions::default(), &mut ()).expect("vanilla run");
    let cached = run_on(&cached, &dataset, LocalOptions::default(), &mut ()).expect("cdfgnn run");
    let stats =
        |report: &trainer::Report| report.final_.method.as_ref().expect("final method fields")["codec_stats"].clone();
    let (exact, cached) = (stats(&exact), stats(&cached));
    // The counts, without the seconds the codec calls took (which differ run to run).
    let counts = |entry: &serde_json::Value| {
        let mut entry = entry.clone();
        entry.as_object_mut().map(|fields| fields.remove("codec_s"));
        entry
    };
    for key in ["fwd/0/to-primary", "fwd/0/to-copies"] {
        assert!(exact[key]["rows"].as_u64().unwrap_or(0) > 0, "{key}: {exact}");
        assert_eq!(counts(&cached[key]), counts(&exact[key]), "{key}");
        assert_eq!(cached[key]["rows_skipped"].as_u64(), Some(0), "{key}");
    }
    assert!(cached["total"]["rows_skipped"].as_u64().unwrap_or(0) > 0, "the later syncs are cached: {cached}");
}
