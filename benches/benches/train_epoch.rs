//! One epoch of `halo train` through the trainer's single-process strategy, on the shape PyG's CPU
//! baseline is timed on: a 100k-node synthetic graph (average degree 20, 128 features, 16
//! classes), 3-layer GCN with hidden 256, Adam without weight decay. `train_step` is what the
//! report's `wall_s` measures (forward, loss, backward, update); `evaluate` is its `eval_s`.
//!
//! Run: `cargo bench -p halo-benches --bench train_epoch -- --warm-up-time 1 --measurement-time 3`

use std::hint::black_box;

use criterion::{Criterion, criterion_group, criterion_main};
use gnn_core::ConvKind;
use graph_partition::synth::SynthConfig;
use trainer::config::TrainConfig;
use trainer::single::SingleProcess;
use trainer::train_loop::Strategy;

fn train_epoch(c: &mut Criterion) {
    let synth =
        SynthConfig { nodes: 100_000, avg_degree: 20.0, features: 128, classes: 16, seed: 0, ..Default::default() };
    let dataset = synth.generate().expect("valid synthetic parameters");
    let config =
        TrainConfig { model: ConvKind::Gcn, layers: 3, hidden: 256, weight_decay: 0.0, ..TrainConfig::default() };
    let mut strategy = SingleProcess::new(&config, &dataset).expect("the model fits the dataset");
    let mut group = c.benchmark_group("train_epoch_gcn3x256_100k");
    group.sample_size(10);
    let mut epoch = 0;
    group.bench_function("train_step", |b| {
        b.iter(|| {
            epoch += 1;
            black_box(strategy.train_step(epoch).expect("training step runs"))
        })
    });
    group.bench_function("evaluate", |b| b.iter(|| black_box(strategy.evaluate().expect("evaluation runs"))));
    group.finish();
}

criterion_group!(benches, train_epoch);
criterion_main!(benches);
