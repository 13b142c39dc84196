//! Exact resumption (20 epochs = 10 + resume + 10, bit for bit), torn writes, and the
//! refusals that name what differs.

use std::path::Path;
use std::time::Duration;

use comm_hierarchy::fault::{Fault, Kind};
use comm_hierarchy::point::Point;
use graph_partition::book::CutKind;
use graph_partition::partition::Algorithm;
use graph_partition::{Dataset, SynthConfig};

use super::store::{self, MANIFEST};
use super::*;
use crate::config::{Method, MethodConfig};
use crate::{LocalOptions, Report, run_on};

fn dataset() -> Dataset {
    SynthConfig { nodes: 240, avg_degree: 6.0, features: 12, classes: 4, seed: 3, ..SynthConfig::default() }
        .generate()
        .unwrap()
}

fn config(method: Method, cut: CutKind, epochs: usize) -> TrainConfig {
    let mut c = TrainConfig { method: MethodConfig::named(method), epochs, hidden: 8, ..TrainConfig::default() };
    c.distributed.workers = 3;
    c.distributed.cut = cut;
    // The codecs' state every epoch; the judged switch resumes in `tests/compress.rs`.
    c.distributed.compress = crate::config::Compress::Always;
    c
}

fn run(c: &TrainConfig, data: &Dataset) -> Result<Report, crate::TrainError> {
    run_on(c, data, LocalOptions::default(), &mut ())
}

/// Trains 20 epochs straight, and 10 with checkpoints then 10 more resumed; the two runs'
/// every epoch loss, accuracy and bytes sent, and the kept model, are the same bits.
fn assert_resume_is_exact(method: Method, cut: CutKind) {
    assert_resume_is_exact_with(method, cut, |_| {});
}

/// [`assert_resume_is_exact`] with the method's settings edited by `edit`.
fn assert_resume_is_exact_with(method: Method, cut: CutKind, edit: impl Fn(&mut TrainConfig)) {
    let data = dataset();
    let make = |epochs| {
        let mut c = config(method, cut, epochs);
        edit(&mut c);
        c
    };
    let straight = run(&make(20), &data).unwrap();
    let dir = tempfile::tempdir().unwrap();
    let mut first = make(10);
    first.reliability.checkpoint_dir = Some(dir.path().to_path_buf());
    first.reliability.checkpoint_every = 5;
    run(&first, &data).unwrap();
    let mut second = make(20);
    second.reliability.resume = Some(dir.path().to_path_buf());
    let resumed = run(&second, &data).unwrap();
    // Bytes too: a codec that restarts from an empty state may give the same values but send
    // more (skip-repeats resends every row).
    let bits = |r: &Report| -> Vec<(usize, u64, u64, u64)> {
        r.epochs
            .iter()
            .map(|e| (e.epoch, e.loss.to_bits(), e.val_acc.to_bits(), e.bytes_intra + e.bytes_inter))
            .collect()
    };
    assert_eq!(bits(&resumed), bits(&straight), "{method:?} {cut:?}");
    assert_eq!(resumed.final_.best_epoch, straight.final_.best_epoch);
    assert_eq!(resumed.trained, straight.trained);
}

#[test]
fn single_process_resumes_exactly() {
    assert_resume_is_exact(Method::Single, CutKind::EdgeCut);
}

#[test]
fn vanilla_edge_cut_resumes_exactly() {
    assert_resume_is_exact(Method::Vanilla, CutKind::EdgeCut);
}

#[test]
fn vanilla_vertex_cut_resumes_exactly() {
    assert_resume_is_exact(Method::Vanilla, CutKind::VertexCut);
}

#[test]
fn cdfgnn_resumes_exactly_with_its_caches_quantizer_and_eps_controller() {
    // The default: the replica cache of deltas, 8-bit quantization and the prose eps rule.
    assert_resume_is_exact(Method::Cdfgnn, CutKind::VertexCut);
    // Eps follows the measured cache error, so it moves every epoch.
    assert_resume_is_exact_with(Method::Cdfgnn, CutKind::VertexCut, |c| {
        c.method.cdfgnn.eps_controller = crate::config::EpsRule::ErrorTarget;
        c.method.cdfgnn.error_target = 0.01;
    });
}

#[test]
fn ecgraph_resumes_exactly_with_its_trends_residuals_and_bit_tuner() {
    // A trend group of 3 puts the checkpoint resumed from (the newest, after epoch 10) inside a
    // group.
    assert_resume_is_exact_with(Method::Ecgraph, CutKind::EdgeCut, |c| c.method.ecgraph.trend = 3);
}

#[test]
fn adaqp_resumes_exactly_with_its_bit_table_and_variance_traces() {
    // Assignments after epochs 3, 6, 9, ...: the checkpoint resumed from (the newest, after
    // epoch 10) holds an assigned table and one epoch of traces towards the next one.
    assert_resume_is_exact_with(Method::Adaqp, CutKind::EdgeCut, |c| c.method.adaqp.assign_period = 3);
}

#[test]
fn parameter_servers_resume_exactly_with_each_servers_slice_of_adam() {
    assert_resume_is_exact_with(Method::Vanilla, CutKind::EdgeCut, |c| {
        c.distributed.param_sync = crate::config::ParamSync::Ps;
    });
}

#[test]
fn vanilla_with_skip_repeats_resumes_exactly_on_both_cuts() {
    for cut in [CutKind::EdgeCut, CutKind::VertexCut] {
        assert_resume_is_exact_with(Method::Vanilla, cut, |c| c.method.vanilla.skip_repeats = true);
    }
}

/// Mini-batches of 8 seeds per worker with fanouts 4,3, and a learning-rate warm-up that is
/// still rising at the checkpoint resumed from (the newest: after epoch 10).
fn sampled(c: &mut TrainConfig) {
    c.minibatch.batch_size = Some(8);
    c.minibatch.fanouts = Some("4,3".parse().unwrap());
    c.minibatch.lr_warmup_epochs = 12;
}

/// SGD's momentum buffer and step count go into the checkpoint (Nesterov reads the buffer
/// twice a step, so a restarted buffer would show), full-batch distributed and mini-batch.
#[test]
fn sgd_resumes_exactly_with_its_momentum() {
    let sgd = |c: &mut TrainConfig| {
        (c.optimizer, c.lr, c.momentum, c.nesterov) = (crate::config::OptimizerKind::Sgd, 0.2, 0.9, true);
    };
    assert_resume_is_exact_with(Method::Vanilla, CutKind::EdgeCut, sgd);
    assert_resume_is_exact_with(Method::DataParallel, CutKind::EdgeCut, |c| {
        sampled(c);
        sgd(c);
    });
}

#[test]
fn sampled_single_process_resumes_exactly() {
    assert_resume_is_exact_with(Method::Single, CutKind::EdgeCut, sampled);
}

#[test]
fn data_parallel_resumes_exactly() {
    assert_resume_is_exact_with(Method::DataParallel, CutKind::EdgeCut, |c| {
        sampled(c);
        c.minibatch.lr_scaling = Some(crate::config::LrScaling::Linear);
    });
}

#[test]
fn adgraph_resumes_exactly_on_its_extended_parts() {
    assert_resume_is_exact_with(Method::Adgraph, CutKind::EdgeCut, sampled);
}

#[test]
fn featpart_resumes_exactly_inside_a_tau_cycle() {
    // A fetch, then 6 local iterations; 6 steps per epoch (144 training vertices in global
    // batches of 24) put the checkpoint after epoch 10 at iteration 60, four into a cycle.
    assert_resume_is_exact_with(Method::Featpart, CutKind::EdgeCut, |c| {
        sampled(c);
        c.method.featpart.tau = crate::config::Tau::Fixed(6);
    });
}

#[test]
fn featpart_auto_resumes_with_the_trials_estimates_and_tau_decisions_of_its_first_part() {
    assert_featpart_auto_resumes(|s| s.bias_estimate = crate::config::BiasEstimate::Trials);
}

#[test]
fn featpart_auto_resumes_with_its_running_bias_and_effective_step() {
    assert_featpart_auto_resumes(|s| {
        s.bias_estimate = crate::config::BiasEstimate::RunningMax;
        s.eq20_step = crate::config::Eq20Step::Effective;
    });
}

/// The trials measure compute time, so two runs differ in their estimates; a resumed run must
/// go on with the estimates and decisions of the run it continues (`readings` set eq. 20's
/// inputs).
fn assert_featpart_auto_resumes(readings: impl Fn(&mut crate::config::FeatpartSettings)) {
    let data = dataset();
    let make = |epochs| {
        let mut c = config(Method::Featpart, CutKind::EdgeCut, epochs);
        sampled(&mut c);
        c.method.featpart.tau = crate::config::Tau::Auto;
        readings(&mut c.method.featpart);
        c
    };
    let dir = tempfile::tempdir().unwrap();
    let mut first = make(3);
    first.reliability.checkpoint_dir = Some(dir.path().to_path_buf());
    first.reliability.checkpoint_every = 3;
    let first = run(&first, &data).unwrap();
    let mut second = make(6);
    second.reliability.resume = Some(dir.path().to_path_buf());
    let resumed = run(&second, &data).unwrap();
    let method = |r: &Report| r.final_.method.clone().unwrap();
    let (first, resumed) = (method(&first), method(&resumed));
    assert!(first["estimates"]["compute_s"].as_f64().is_some_and(|c| c > 0.0), "{first}");
    assert_eq!(resumed["estimates"], first["estimates"]);
    assert_eq!(resumed["trials"], first["trials"]);
    // Epochs 4-6 add decisions to those of epochs 1-3.
    let decisions = |m: &serde_json::Value| m["tau_schedule"].as_array().unwrap().clone();
    let (before, after) = (decisions(&first), decisions(&resumed));
    assert!(!before.is_empty() && after.len() > before.len(), "{before:?} {after:?}");
    assert_eq!(after[..before.len()], before[..]);
    // sigma_bias goes on from where it stood (constant under the trials' estimate).
    let bias: Vec<f64> = after.iter().map(|d| d["sigma_bias"].as_f64().unwrap()).collect();
    assert!(bias.windows(2).all(|w| w[1] >= w[0]), "{bias:?}");
    let iterations =
        |m: &serde_json::Value| m["fetch_iterations"].as_u64().unwrap() + m["local_iterations"].as_u64().unwrap();
    assert_eq!(iterations(&resumed), 2 * iterations(&first), "6 steps per epoch");
}

/// A run of `epochs` vanilla epochs on 3 workers that checkpoints every 2 into `dir`, keeping 3.
fn checkpointed(dir: &Path, epochs: usize) -> TrainConfig {
    let mut c = config(Method::Vanilla, CutKind::EdgeCut, epochs);
    c.reliability.checkpoint_dir = Some(dir.to_path_buf());
    c.reliability.checkpoint_every = 2;
    c.reliability.checkpoint_keep = 3;
    c
}

#[test]
fn only_committed_checkpoints_are_read_and_old_ones_are_pruned() {
    let data = dataset();
    let dir = tempfile::tempdir().unwrap();
    run(&checkpointed(dir.path(), 8), &data).unwrap();
    let mut kept: Vec<String> =
        std::fs::read_dir(dir.path()).unwrap().map(|e| e.unwrap().file_name().into_string().unwrap()).collect();
    kept.sort();
    assert_eq!(kept, ["epoch-000004", "epoch-000006", "epoch-000008"]);
    // A torn checkpoint after epoch 10: shards written, the manifest still a temporary file.
    let torn = store::epoch_dir(dir.path(), 10);
    std::fs::create_dir(&torn).unwrap();
    std::fs::copy(store::epoch_dir(dir.path(), 8).join("rank-0000.bin"), torn.join("rank-0000.bin")).unwrap();
    std::fs::write(torn.join(format!(".halo-tmp-1-0-{MANIFEST}")), b"{\"format\": \"halo-che").unwrap();
    let (picked, manifest) = store::newest_complete(dir.path()).unwrap();
    assert_eq!((picked, manifest.epoch), (store::epoch_dir(dir.path(), 8), 8));
    let mut resume = config(Method::Vanilla, CutKind::EdgeCut, 9);
    resume.reliability.resume = Some(dir.path().to_path_buf());
    let report = run(&resume, &data).unwrap();
    assert_eq!(report.epochs.len(), 9);
    // A committed shard cut short is an error naming it, not a silent fallback.
    let shard = store::epoch_dir(dir.path(), 8).join("rank-0002.bin");
    let bytes = std::fs::read(&shard).unwrap();
    std::fs::write(&shard, &bytes[..bytes.len() / 2]).unwrap();
    let err = run(&resume, &data).unwrap_err().to_string();
    assert!(err.contains("rank-0002.bin") && err.contains("truncated"), "{err}");
}

#[test]
fn a_fault_between_shard_and_manifest_leaves_the_previous_checkpoint_newest() {
    let data = dataset();
    let dir = tempfile::tempdir().unwrap();
    let mut c = checkpointed(dir.path(), 2);
    c.method = MethodConfig::named(Method::Single);
    run(&c, &data).unwrap();
    let fault = Fault { rank: 0, point: Point::Checkpoint, kind: Kind::Error, nth: 1 };
    let id = RunIdentity { method: "single", config: &c, rank: 0, world: 1, fingerprint: data.graph.fingerprint() };
    let checkpoints = Checkpoints::for_run(&id, Agreement::Alone { fault: Some(fault), hang_for: Duration::ZERO });
    let writer = checkpoints.unwrap().writer.unwrap();
    let state = WorkerState { params: vec![1.0], optimizer: Moments { m: vec![], v: vec![], t: 0 }, method: vec![] };
    let err = writer.save(4, state, None, &[], None).unwrap_err().to_string();
    assert!(err.contains("rank 0") && err.contains("checkpoint"), "{err}");
    assert!(store::epoch_dir(dir.path(), 4).join("rank-0000.bin").is_file());
    assert_eq!(store::newest_complete(dir.path()).unwrap().1.epoch, 2);
}

#[test]
fn resuming_a_different_run_names_what_differs() {
    let data = dataset();
    let dir = tempfile::tempdir().unwrap();
    run(&checkpointed(dir.path(), 2), &data).unwrap();
    let resume = |edit: &dyn Fn(&mut TrainConfig)| {
        let mut c = config(Method::Vanilla, CutKind::EdgeCut, 4);
        c.reliability.resume = Some(dir.path().to_path_buf());
        edit(&mut c);
        run(&c, &data).unwrap_err().to_string()
    };
    let err = resume(&|c| c.lr = 0.02);
    assert!(err.contains("`lr` is 0.01") && err.contains("manifest.json"), "{err}");
    let err = resume(&|c| c.distributed.workers = 2);
    assert!(err.contains("world size") && err.contains("3 workers"), "{err}");
    let err = resume(&|c| c.distributed.partitioner = Some(Algorithm::Hash));
    assert!(err.contains("partitioner"), "{err}");
    let err = resume(&|c| c.method = MethodConfig::named(Method::Single));
    assert!(err.contains("world size") || err.contains("method"), "{err}");
    let empty = tempfile::tempdir().unwrap();
    let err = resume(&|c| c.reliability.resume = Some(empty.path().to_path_buf()));
    assert!(err.contains("no complete checkpoint"), "{err}");
}

/// Checkpoints with `--device cuda` in a build without CUDA: the run stops naming the build
/// before any checkpoint is written or read (the device's own checkpoints are a GPU test).
#[test]
#[cfg(not(feature = "cuda"))]
fn device_checkpoints_without_cuda_stop_before_anything_is_written() {
    let data = dataset();
    let dir = tempfile::tempdir().unwrap();
    let mut c = checkpointed(dir.path(), 2);
    c.method = MethodConfig::named(Method::Single);
    c.device = crate::config::Device::Cuda(0);
    let err = run(&c, &data).unwrap_err().to_string();
    assert!(err.contains("built without CUDA"), "{err}");
    assert!(std::fs::read_dir(dir.path()).unwrap().next().is_none(), "nothing written");
}
