//! Neighbour sampling on the shape DGL's mini-batch peer (`../shared/peers/dgl_minibatch.py`)
//! is timed on: the 100k-vertex synthetic graph (average degree 20, 128 features, 16 classes;
//! 60% of the vertices train), fanouts 15,10,5, batch 1024.
//!
//! - `batch_1024`: sampling one batch, on the default rayon pool and on a 1-thread pool. Each
//!   iteration takes the next step of the epoch (epochs advance, so every sample is fresh).
//! - `epoch`: a whole epoch of sampling alone (shuffle, then every batch in turn, no
//!   prefetching), the figure the DGL script reports as `sample_epoch_s`.
//!
//! After the groups it prints sampled edges per second (all blocks' edges, as DGL counts them)
//! over every timed iteration.
//!
//! Run: `cargo bench -p halo-benches --bench sampler -- --warm-up-time 1 --measurement-time 5`

use std::hint::black_box;
use std::time::{Duration, Instant};

use criterion::{Criterion, SamplingMode, criterion_group, criterion_main};
use graph_partition::sample::{BatchPlan, BlockCounts, Fanouts, NeighborSampler, Remainder, Share};
use graph_partition::synth::SynthConfig;

const BATCH: usize = 1024;
const SEED: u64 = 0;

/// Timed sampling work, with the edges it produced.
#[derive(Default)]
struct Tally {
    edges: usize,
    time: Duration,
}

impl Tally {
    fn add(&mut self, edges: usize, time: Duration) -> Duration {
        self.edges += edges;
        self.time += time;
        time
    }

    fn edges_per_s(&self) -> f64 {
        self.edges as f64 / self.time.as_secs_f64()
    }
}

/// Steps taken one at a time across epochs.
struct Cursor<'a> {
    train: &'a [u32],
    plan: BatchPlan,
    step: usize,
}

impl<'a> Cursor<'a> {
    fn new(train: &'a [u32]) -> Self {
        Self { train, plan: epoch_plan(train, 0), step: 0 }
    }

    /// Samples the next step; the plan of the next epoch is built outside the timing.
    fn sample_next(&mut self, sampler: &NeighborSampler<'_>, tally: &mut Tally) -> Duration {
        if self.step == self.plan.num_steps() {
            self.plan = epoch_plan(self.train, self.plan.epoch() + 1);
            self.step = 0;
        }
        let step = self.plan.steps(Share::whole()).nth(self.step).expect("step < num_steps");
        self.step += 1;
        let start = Instant::now();
        let batch = sampler.sample(step.key, step.seeds).expect("seeds are training vertices");
        let elapsed = start.elapsed();
        tally.add(black_box(batch).num_edges(), elapsed)
    }
}

fn epoch_plan(train: &[u32], epoch: u64) -> BatchPlan {
    BatchPlan::shuffled(train, BATCH, SEED, epoch, Remainder::Keep).expect("batch size is positive")
}

/// Mean sampled vertices and edges per block over one epoch, for comparing batch shapes.
fn print_mean_counts(sampler: &NeighborSampler<'_>, train: &[u32]) {
    let plan = epoch_plan(train, 0);
    let mut sums = vec![BlockCounts::default(); sampler.fanouts().num_layers()];
    for step in plan.steps(Share::whole()) {
        let batch = sampler.sample(step.key, step.seeds).expect("training seeds");
        for (sum, counts) in sums.iter_mut().zip(batch.counts()) {
            sum.src_vertices += counts.src_vertices;
            sum.dst_vertices += counts.dst_vertices;
            sum.edges += counts.edges;
        }
    }
    let steps = plan.num_steps();
    for (layer, sum) in sums.iter().enumerate() {
        eprintln!(
            "block {layer}: mean {} src, {} dst, {} edges per batch",
            sum.src_vertices / steps,
            sum.dst_vertices / steps,
            sum.edges / steps
        );
    }
}

fn sampler(c: &mut Criterion) {
    let synth =
        SynthConfig { nodes: 100_000, avg_degree: 20.0, features: 128, classes: 16, seed: 0, ..Default::default() };
    let dataset = synth.generate().expect("valid synthetic parameters");
    let train = &dataset.splits.train;
    let fanouts: Fanouts = "15,10,5".parse().expect("valid fanouts");
    let sampler = NeighborSampler::new(&dataset.graph, fanouts, SEED).expect("a square graph");
    let one_thread = rayon::ThreadPoolBuilder::new().num_threads(1).build().expect("a thread pool");
    let threads = rayon::current_num_threads();
    eprintln!(
        "graph: {} vertices, {} stored edges, {} training vertices, {} steps per epoch, {threads} rayon threads",
        dataset.graph.num_nodes(),
        dataset.graph.num_edges(),
        train.len(),
        train.len().div_ceil(BATCH)
    );

    print_mean_counts(&sampler, train);

    let names =
        [format!("batch_1024/{threads}_threads"), "batch_1024/1_thread".into(), format!("epoch/{threads}_threads")];
    let mut tallies: [Tally; 3] = Default::default();
    let mut group = c.benchmark_group("sampler_100k_fanouts_15_10_5");
    group.sample_size(20);
    let mut cursor = Cursor::new(train);
    group.bench_function(&names[0], |b| {
        b.iter_custom(|iters| (0..iters).map(|_| cursor.sample_next(&sampler, &mut tallies[0])).sum())
    });
    let mut cursor = Cursor::new(train);
    group.bench_function(&names[1], |b| {
        b.iter_custom(|iters| {
            one_thread.install(|| (0..iters).map(|_| cursor.sample_next(&sampler, &mut tallies[1])).sum())
        })
    });
    group.finish();

    let mut group = c.benchmark_group("sampler_100k_fanouts_15_10_5");
    group.sample_size(10).sampling_mode(SamplingMode::Flat);
    let mut epoch = 0;
    group.bench_function(&names[2], |b| {
        b.iter_custom(|iters| {
            (0..iters)
                .map(|_| {
                    epoch += 1;
                    let start = Instant::now();
                    let plan = epoch_plan(train, epoch);
                    let edges: usize = plan
                        .steps(Share::whole())
                        .map(|step| sampler.sample(step.key, step.seeds).expect("training seeds").num_edges())
                        .sum();
                    tallies[2].add(edges, start.elapsed())
                })
                .sum()
        })
    });
    group.finish();

    for (name, tally) in names.iter().zip(&tallies) {
        println!("sampler {name}: {:.2}M sampled edges per second", tally.edges_per_s() / 1e6);
    }
}

criterion_group!(benches, sampler);
criterion_main!(benches);
