//! The cost of splitting the work: per-epoch compute time of vanilla distributed training on 4
//! in-process workers, summed over the workers, against single-process training, on the shape
//! PyG's CPU baseline is timed on (100k-node synthetic graph, average degree 20, 128 features,
//! 16 classes; 3-layer GCN, hidden 256; edge-cut by METIS over 2 hosts).
//!
//! The workers run with a compute gate (`LocalOptions::serialize_compute`): one computes at a
//! time with the whole machine, as it would on a machine of its own, and its compute time
//! excludes every wait on the others. A sample of the distributed benchmark is the sum over
//! workers of the report's per-worker compute times (`compute_s_sum`) of real training epochs,
//! taken from runs of a few epochs each (the first epoch of a run, which allocates its
//! buffers, is dropped); the single-process benchmark times `train_step`. Target: ratio <= 1.3.
//!
//! Run: `cargo bench -p halo-benches --bench distributed -- --warm-up-time 1 --measurement-time 3`

use std::collections::VecDeque;
use std::hint::black_box;
use std::time::{Duration, Instant};

use criterion::{Criterion, SamplingMode, criterion_group, criterion_main};
use graph_partition::synth::SynthConfig;
use trainer::config::{Method, ModelName, TrainConfig};
use trainer::distributed::{Cut, DistributedConfig, LocalOptions, run_with_dataset};
use trainer::single::SingleProcess;
use trainer::train_loop::Strategy;

/// Epochs per distributed run; every one but the first becomes a sample.
const EPOCHS_PER_RUN: usize = 6;

fn distributed(c: &mut Criterion) {
    let synth =
        SynthConfig { nodes: 100_000, avg_degree: 20.0, features: 128, classes: 16, seed: 0, ..Default::default() };
    let dataset = synth.generate().expect("valid synthetic parameters");
    let config = TrainConfig {
        model: ModelName::Gcn,
        layers: 3,
        hidden: 256,
        weight_decay: 0.0,
        epochs: EPOCHS_PER_RUN,
        method: Method::Vanilla,
        distributed: DistributedConfig { cut: Cut::Edge, workers: 4, hosts: 2, ..DistributedConfig::default() },
        ..TrainConfig::default()
    };
    let mut group = c.benchmark_group("distributed_gcn3x256_100k");
    group.sample_size(10).sampling_mode(SamplingMode::Flat);

    let mut single = SingleProcess::new(&config, &dataset).expect("the model fits the dataset");
    let mut epoch = 0;
    let mut single_s = Vec::new();
    group.bench_function("single_process_compute_per_epoch", |b| {
        b.iter_custom(|iters| {
            let start = Instant::now();
            for _ in 0..iters {
                epoch += 1;
                black_box(single.train_step(epoch).expect("training step runs"));
            }
            let elapsed = start.elapsed();
            single_s.push(elapsed.as_secs_f64() / iters as f64);
            elapsed
        })
    });
    drop(single);

    let mut epochs: VecDeque<f64> = VecDeque::new();
    let mut summed_s = Vec::new();
    group.bench_function("4_workers_compute_summed_per_epoch", |b| {
        b.iter_custom(|iters| {
            let mut total = 0.0;
            for _ in 0..iters {
                if epochs.is_empty() {
                    let report = run_with_dataset(&config, &dataset, LocalOptions { serialize_compute: true }, &mut ())
                        .expect("distributed run");
                    epochs.extend(report.epochs.iter().skip(1).map(|e| {
                        e.method.as_ref().and_then(|m| m["compute_s_sum"].as_f64()).expect("per-worker compute times")
                    }));
                }
                total += epochs.pop_front().expect("a run yields epochs");
            }
            summed_s.push(total / iters as f64);
            Duration::from_secs_f64(total)
        })
    });
    group.finish();

    let mean = |v: &[f64]| v.iter().sum::<f64>() / v.len().max(1) as f64;
    let (single_mean, summed_mean) = (mean(&single_s), mean(&summed_s));
    println!(
        "distributed_gcn3x256_100k: single-process {single_mean:.3} s/epoch, 4 workers summed {summed_mean:.3} s/epoch, \
         ratio {:.3} (target <= 1.3)",
        summed_mean / single_mean
    );
}

criterion_group!(benches, distributed);
criterion_main!(benches);
