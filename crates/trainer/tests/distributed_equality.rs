//! The correctness contract (docs/ARCHITECTURE.md): vanilla distributed training on 4 workers over 2 hosts
//! equals single-process training with the same seed, epoch by epoch, dropout included, for
//! GCN, GraphSAGE and GAT on Cora, edge-cut (METIS) and vertex-cut (EBV).

use std::path::Path;
use std::sync::OnceLock;

use gnn_core::ConvKind;
use graph_partition::Dataset;
use graph_partition::book::CutKind;
use trainer::config::{Compress, DistributedConfig, Method, MethodConfig, OptimizerKind, ParamSync, TrainConfig};
use trainer::{LocalOptions, Report, data, run_on, single};

const CORA: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../../datasets/cora");
const EPOCHS: usize = 6;

/// Cora as every test's configuration prepares it (the same feature normalisation for all).
fn cora(config: &TrainConfig) -> &'static Dataset {
    static CORA_DATA: OnceLock<Dataset> = OnceLock::new();
    CORA_DATA.get_or_init(|| {
        assert!(Path::new(CORA).is_dir(), "Cora is missing: expected the OGB raw layout at {CORA}");
        data::prepare_dataset(config, Path::new("."), &Default::default()).expect("Cora loads")
    })
}

fn config(model: ConvKind, cut: CutKind) -> TrainConfig {
    TrainConfig {
        dataset: Some(CORA.to_string()),
        model,
        hidden: if model == ConvKind::Gat { 8 } else { 16 },
        epochs: EPOCHS,
        seed: 3,
        method: MethodConfig::named(Method::Vanilla),
        distributed: DistributedConfig {
            cut,
            workers: 4,
            hosts: 2,
            compress: Compress::Always,
            ..DistributedConfig::default()
        },
        ..TrainConfig::default()
    }
}

fn assert_same_losses(name: &str, single: &Report, dist: &Report) {
    assert_eq!(single.epochs.len(), dist.epochs.len(), "{name}: epoch counts differ");
    let mut worst = 0.0f64;
    for (s, d) in single.epochs.iter().zip(&dist.epochs) {
        let rel = (s.loss - d.loss).abs() / s.loss.abs();
        worst = worst.max(rel);
        assert!(
            rel <= 1e-4,
            "{name}: epoch {} loss {} (single) vs {} (distributed), rel {rel:.2e}",
            s.epoch,
            s.loss,
            d.loss
        );
        assert!(
            (s.val_acc - d.val_acc).abs() <= 2.0 / 500.0,
            "{name}: epoch {} val acc {} vs {}",
            s.epoch,
            s.val_acc,
            d.val_acc
        );
    }
    eprintln!("{name}: largest relative loss difference over {} epochs: {worst:.2e}", single.epochs.len());
}

fn check(model: ConvKind, cut: CutKind) {
    check_config(config(model, cut));
}

fn check_config(config: TrainConfig) {
    let (model, cut) = (config.model, config.distributed.cut);
    let dataset = cora(&config);
    let single = single::run("single", &config, dataset, &mut ()).expect("single-process run");
    let dist = run_on(&config, dataset, LocalOptions::default(), &mut ()).expect("distributed run");
    let masters = if config.distributed.masters_only { ", masters only" } else { "" };
    let name = format!("{model:?} {}-cut{masters}", cut.as_str());
    assert_same_losses(&name, &single, &dist);
    let partition = dist.partition.as_ref().expect("distributed reports carry the partition");
    assert_eq!(partition.algorithm, if cut == CutKind::EdgeCut { "metis" } else { "ebv" });
    assert_eq!((dist.workers, dist.hosts, dist.method.as_str(), dist.cut.as_str()), (4, 2, "vanilla", cut.as_str()));
    for e in &dist.epochs {
        assert!(e.bytes_inter > 0 && e.bytes_intra > 0 && e.messages > 0, "{name}: epoch {} moved nothing", e.epoch);
        assert!(e.modeled_comm_s > 0.0 && e.compute_s > 0.0, "{name}: epoch {}", e.epoch);
    }
}

#[test]
fn gcn_edge_cut_equals_single_process() {
    check(ConvKind::Gcn, CutKind::EdgeCut);
}

#[test]
fn gcn_vertex_cut_equals_single_process() {
    check(ConvKind::Gcn, CutKind::VertexCut);
}

#[test]
fn sage_edge_cut_equals_single_process() {
    check(ConvKind::Sage, CutKind::EdgeCut);
}

#[test]
fn sage_vertex_cut_equals_single_process() {
    check(ConvKind::Sage, CutKind::VertexCut);
}

/// SGD with Nesterov momentum: the distributed step equals the single-process one, under an
/// all-reduce and under parameter servers (whose slices run the optimizer).
#[test]
fn sgd_edge_cut_equals_single_process_under_all_reduce_and_parameter_servers() {
    for param_sync in [ParamSync::Allreduce, ParamSync::Ps] {
        let mut config = config(ConvKind::Sage, CutKind::EdgeCut);
        (config.optimizer, config.lr, config.momentum, config.nesterov) = (OptimizerKind::Sgd, 0.2, 0.9, true);
        config.distributed.param_sync = param_sync;
        check_config(config);
    }
}

/// Only masters compute; mirrors aggregate and push partial sums.
#[test]
fn gcn_and_sage_vertex_cut_with_masters_only_equal_single_process() {
    for model in [ConvKind::Gcn, ConvKind::Sage] {
        let mut config = config(model, CutKind::VertexCut);
        config.distributed.masters_only = true;
        // The middle of three layers (16 -> 16) pulls its input, the others `x W`.
        config.layers = 3;
        check_config(config);
    }
}

/// A method that brings its own exchange (CDFGNN's replica cache) keeps every replica computing.
#[test]
fn masters_only_is_refused_where_the_method_brings_its_own_exchange() {
    let mut config = config(ConvKind::Gcn, CutKind::VertexCut);
    config.distributed.masters_only = true;
    config.method = MethodConfig::named(Method::Cdfgnn);
    let err = run_on(&config, cora(&config), LocalOptions::default(), &mut ()).unwrap_err().to_string();
    assert!(err.contains("method `cdfgnn`") && err.contains("masters-only is for exact full-batch"), "{err}");
}

#[test]
fn gat_edge_cut_equals_single_process() {
    check(ConvKind::Gat, CutKind::EdgeCut);
}

#[test]
fn gat_vertex_cut_equals_single_process() {
    check(ConvKind::Gat, CutKind::VertexCut);
}

/// Computing one worker at a time changes when workers compute, not what: the same losses,
/// accuracies and bytes, bit for bit.
#[test]
fn serialized_compute_changes_no_result() {
    let free = config(ConvKind::Gcn, CutKind::EdgeCut);
    let mut gated = free.clone();
    gated.distributed.serialize_compute = true;
    let run = |c: &TrainConfig| run_on(c, cora(c), LocalOptions::default(), &mut ()).unwrap();
    let (a, b) = (run(&free), run(&gated));
    for (x, y) in a.epochs.iter().zip(&b.epochs) {
        assert_eq!((x.loss, x.val_acc, &x.bytes_by_phase), (y.loss, y.val_acc, &y.bytes_by_phase), "epoch {}", x.epoch);
    }
}

/// The controllers' own collectives (EC-Graph's tuner, AdaQP's assignment) hand the machine
/// over too: serialized runs of both finish with the results of free ones.
#[test]
fn serialized_compute_runs_the_controllers() {
    use trainer::config::{AdaqpSettings, EcgraphSettings};
    let mut ecgraph = config(ConvKind::Gcn, CutKind::EdgeCut);
    ecgraph.method = MethodConfig::named(Method::Ecgraph);
    ecgraph.method.ecgraph = EcgraphSettings { fp_bits: 2, bp_bits: 2, ..EcgraphSettings::default() };
    let mut adaqp = config(ConvKind::Gcn, CutKind::EdgeCut);
    adaqp.method = MethodConfig::named(Method::Adaqp);
    adaqp.method.adaqp = AdaqpSettings { assign_period: 2, ..AdaqpSettings::default() };
    for free in [ecgraph, adaqp] {
        let mut gated = free.clone();
        gated.distributed.serialize_compute = true;
        let run = |c: &TrainConfig| run_on(c, cora(c), LocalOptions::default(), &mut ()).unwrap();
        let (a, b) = (run(&free), run(&gated));
        let losses = |r: &Report| r.epochs.iter().map(|e| e.loss).collect::<Vec<_>>();
        assert_eq!(losses(&a), losses(&b), "{}", free.method.name.as_str());
    }
}
