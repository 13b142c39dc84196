//! AdaQP's costs at the 100k-vertex graph's scale (docs/methods/adaqp.md): one bit-width
//! assignment problem (4 workers, 12 directed pairs of ~14,600 halo rows of 256 values, groups of
//! 20 rows, the default, of 100 and of 500) by the exact sweep, and the stochastic codec's encode
//! plus decode of one pair's message at 2, 4 and 8 bits.
//!
//! Run: `cargo bench -p halo-benches --bench adaqp -- --warm-up-time 1 --measurement-time 3`

use std::hint::black_box;
use std::sync::Arc;

use cache_quant::assign::{PairGroups, Problem, TimeModel, solve};
use cache_quant::codec::Codec;
use cache_quant::codec::stochastic::{BitTable, QuantProbe, StochasticCodec};
use cache_quant::knob::Knob;
use cache_quant::stream::{Direction, Pass, Route, Side, Step, Stream, StreamId, Tag};
use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use graph_partition::rng::SplitMix64;

const WORKERS: usize = 4;
const ROWS: usize = 14_600;
const WIDTH: usize = 256;

/// Problem (12) for one layer and direction: weights log-uniform over six orders of magnitude
/// (the spread of aggregation score times variance trace), the `adaqp` topology's links at
/// `--bandwidth-scale 0.0005` (6.25 MB/s between the 2 hosts, 11.35 MB/s inside one).
fn problem(group_size: usize) -> Problem {
    let mut rng = SplitMix64::new(7);
    let pairs = (0..WORKERS)
        .flat_map(|s| (0..WORKERS).filter(move |&d| d != s).map(move |d| (s, d)))
        .map(|(src, dst)| {
            let rows = ROWS - 200 + rng.below(400) as usize;
            let weights: Vec<f64> = (0..rows).map(|_| 10f64.powf(rng.next_f64() * 6.0 - 3.0)).collect();
            let mb_per_s = if src / 2 == dst / 2 { 11.35 } else { 6.25 };
            let time = TimeModel { theta_s_per_mb: 1.0 / mb_per_s, gamma_s: 1e-5 };
            PairGroups::new(src, dst, WIDTH, time, &weights, group_size)
        })
        .collect();
    Problem { workers: WORKERS, lambda: 0.5, pairs, budget_bytes: None }
}

fn assignment_100k(c: &mut Criterion) {
    let mut group = c.benchmark_group("adaqp_assign_100k");
    for group_size in [20, 100, 500] {
        let problem = problem(group_size);
        group.bench_function(format!("exact_sweep_groups_of_{group_size}"), |b| {
            b.iter(|| solve(black_box(&problem), 60.0).unwrap())
        });
    }
    group.finish();
}

fn codec_round_trip(c: &mut Criterion) {
    let id =
        |side| StreamId { tag: Tag::new(1, Direction::Forward, Step::Halo), route: Route::ToCopies, peer: 1, side };
    let rows: Arc<[u32]> = (0..ROWS as u32).map(|r| r * 7 + 3).collect();
    let mut rng = SplitMix64::new(3);
    let values: Vec<f32> = (0..ROWS * WIDTH).map(|_| rng.normal() as f32).collect();
    let mut group = c.benchmark_group("adaqp_codec_14600x256");
    group.throughput(Throughput::Elements((ROWS * WIDTH) as u64));
    group.sample_size(20);
    for bits in [2u8, 4, 8] {
        let table = Knob::new(Arc::new(BitTable::uniform(bits).expect("a codec width")));
        let probe = QuantProbe::default();
        let stream = |side| Stream { id: id(side), rows: Arc::clone(&rows) };
        let mut enc = StochasticCodec::new(11, &stream(Side::Encode), table.clone(), probe.clone());
        let mut dec = StochasticCodec::new(11, &stream(Side::Decode), table, probe);
        let (mut bytes, mut back) = (Vec::new(), vec![0.0f32; values.len()]);
        group.bench_function(format!("encode_decode_{bits}_bits"), |b| {
            b.iter(|| {
                bytes.clear();
                enc.encode(Pass::train(1, 0), black_box(&values), WIDTH, &mut bytes).unwrap();
                dec.decode(Pass::train(1, 0), &bytes, WIDTH, &mut back).unwrap();
                enc.take_stats();
                black_box(&back);
            })
        });
    }
    group.finish();
}

criterion_group!(benches, assignment_100k, codec_round_trip);
criterion_main!(benches);
