//! The cost of splitting the work: per-epoch compute time of vanilla distributed training on 4
//! in-process workers, summed over the workers, against single-process training, on the shape
//! PyG's CPU baseline is timed on (100k-node synthetic graph, average degree 20, 128 features,
//! 16 classes; 3-layer GCN, hidden 256; edge-cut by METIS over 2 hosts, or with
//! `HALO_BENCH_CUT=vertex` vertex-cut by EBV). Target: ratio <= 1.3.
//!
//! The workers run with a compute gate (`LocalOptions::serialize_compute`): one computes at a
//! time with the whole machine, as it would on a machine of its own, and its compute time
//! excludes every wait on the others. A distributed sample is the sum over workers of the
//! report's per-worker compute times (`compute_s_sum`) of one real training epoch (the first
//! epoch of each run, which allocates its buffers, is dropped); a single-process sample is one
//! timed `train_step`. Samples are produced in alternating rounds (one distributed run, then as
//! many single-process epochs), so that both see the same machine load, and handed to
//! criterion through `iter_custom`.
//!
//! Run: `cargo bench -p halo-benches --bench distributed -- --warm-up-time 1 --measurement-time 3`
//! (prefix `HALO_BENCH_CUT=vertex` for the vertex-cut).

use std::collections::VecDeque;
use std::time::{Duration, Instant};

use criterion::{Criterion, SamplingMode, criterion_group, criterion_main};
use gnn_core::ConvKind;
use graph_partition::Dataset;
use graph_partition::book::CutKind;
use graph_partition::synth::SynthConfig;
use trainer::config::{DistributedConfig, Method, MethodConfig, TrainConfig};
use trainer::single::SingleProcess;
use trainer::train_loop::Strategy;
use trainer::{LocalOptions, run_on};

/// Epochs per distributed run; every one but the first becomes a sample.
const EPOCHS_PER_RUN: usize = 6;

/// Per-epoch compute times, measured in alternating rounds.
struct Samples<'a> {
    config: &'a TrainConfig,
    dataset: &'a Dataset,
    single: SingleProcess<'a>,
    epoch: usize,
    single_s: VecDeque<f64>,
    summed_s: VecDeque<f64>,
    /// Every sample handed out, for the ratio.
    used: [Vec<f64>; 2],
}

impl<'a> Samples<'a> {
    fn new(config: &'a TrainConfig, dataset: &'a Dataset) -> Self {
        let single = SingleProcess::new(config, dataset).expect("the model fits the dataset");
        let (single_s, summed_s) = (VecDeque::new(), VecDeque::new());
        Self { config, dataset, single, epoch: 0, single_s, summed_s, used: [Vec::new(), Vec::new()] }
    }

    /// One round: a distributed run, then as many single-process epochs as it gave samples.
    fn round(&mut self) {
        let gated = LocalOptions { serialize_compute: true };
        let report = run_on(self.config, self.dataset, gated, &mut ()).expect("distributed run");
        for e in report.epochs.iter().skip(1) {
            let summed = e.method.as_ref().and_then(|m| m["compute_s_sum"].as_f64()).expect("per-worker compute times");
            self.summed_s.push_back(summed);
            self.epoch += 1;
            let start = Instant::now();
            self.single.train_step(self.epoch).expect("training step runs");
            self.single_s.push_back(start.elapsed().as_secs_f64());
        }
    }

    /// The total of the next `iters` samples of one kind (0: single, 1: summed over workers).
    fn take(&mut self, kind: usize, iters: u64) -> Duration {
        let mut total = 0.0;
        for _ in 0..iters {
            if [&self.single_s, &self.summed_s][kind].is_empty() {
                self.round();
            }
            let sample = [&mut self.single_s, &mut self.summed_s][kind].pop_front().expect("a round yields samples");
            self.used[kind].push(sample);
            total += sample;
        }
        Duration::from_secs_f64(total)
    }
}

fn bench_cut() -> CutKind {
    match std::env::var("HALO_BENCH_CUT").as_deref() {
        Err(_) | Ok("edge") => CutKind::EdgeCut,
        Ok("vertex") => CutKind::VertexCut,
        Ok(other) => panic!("HALO_BENCH_CUT={other}: expected edge or vertex"),
    }
}

fn median(values: &[f64]) -> f64 {
    let mut v = values.to_vec();
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

fn distributed(c: &mut Criterion) {
    let synth =
        SynthConfig { nodes: 100_000, avg_degree: 20.0, features: 128, classes: 16, seed: 0, ..Default::default() };
    let dataset = synth.generate().expect("valid synthetic parameters");
    let config = TrainConfig {
        model: ConvKind::Gcn,
        layers: 3,
        hidden: 256,
        weight_decay: 0.0,
        epochs: EPOCHS_PER_RUN,
        method: MethodConfig::named(Method::Vanilla),
        distributed: DistributedConfig { cut: bench_cut(), workers: 4, hosts: 2, ..DistributedConfig::default() },
        ..TrainConfig::default()
    };
    let mut samples = Samples::new(&config, &dataset);
    let name = format!("distributed_gcn3x256_100k_{}_cut", config.distributed.cut.as_str());
    let mut group = c.benchmark_group(&name);
    group.sample_size(10).sampling_mode(SamplingMode::Flat);
    group.bench_function("single_process_compute_per_epoch", |b| b.iter_custom(|iters| samples.take(0, iters)));
    group.bench_function("4_workers_compute_summed_per_epoch", |b| b.iter_custom(|iters| samples.take(1, iters)));
    group.finish();

    let (single, summed) = (median(&samples.used[0]), median(&samples.used[1]));
    println!(
        "{name}: median single-process {single:.3} s/epoch, median 4 workers summed {summed:.3} \
         s/epoch, ratio {:.3} (target <= 1.3)",
        summed / single
    );
}

criterion_group!(benches, distributed);
criterion_main!(benches);
