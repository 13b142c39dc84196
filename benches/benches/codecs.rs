//! Every wire codec's encode and decode of one message of 16,384 rows of 128 values, against a
//! plain copy of the same rows: identity, CDFGNN's linear quantizer (2, 4, 8, 16 bits), AdaQP's
//! stochastic quantizer (2, 4, 8 bits), EC-Graph's bucket codec (1 to 16 bits), ReqEC-FP and
//! ResEC-BP, and `skip-repeats(identity)`.
//!
//! Each codec runs as an encoder and its decoder in lock step over a cycle of four blocks that
//! differ in every other row (so `skip-repeats` sends half the rows, and ReqEC's trend groups of
//! 10 mix full and selective rounds as in training); `encode/*` times the encoder's calls only,
//! `decode/*` the decoder's. Throughput is in values, so `1000 / (Melem/s)` is ns per value.
//!
//! Run: `cargo bench -p halo-benches --bench codecs -- --warm-up-time 1 --measurement-time 3`

use std::hint::black_box;
use std::sync::Arc;
use std::time::{Duration, Instant};

use cache_quant::codec::ecgraph::{ReqEc, ResEc};
use cache_quant::codec::stochastic::{BitTable, QuantProbe, StochasticCodec};
use cache_quant::codec::{BucketCodec, Codec, IdentityCodec, LinearQuant, SkipRepeats};
use cache_quant::knob::Knob;
use cache_quant::stream::{Direction, Pass, Route, Side, Step, Stream, StreamId, Tag};
use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use graph_partition::rng::SplitMix64;

const ROWS: usize = 16_384;
const WIDTH: usize = 128;
const BLOCKS: usize = 4;

/// An encoder and the decoder of the same stream.
type Pair = (Box<dyn Codec>, Box<dyn Codec>);

/// Normal rows; block `k` moves every odd row by `0.05 k` times a normal step.
fn blocks() -> Vec<Vec<f32>> {
    let mut rng = SplitMix64::new(3);
    let base: Vec<f32> = (0..ROWS * WIDTH).map(|_| rng.normal() as f32).collect();
    let step: Vec<f32> = (0..ROWS * WIDTH).map(|_| rng.normal() as f32).collect();
    (0..BLOCKS)
        .map(|k| {
            let moved = |i: usize| (i / WIDTH) % 2 == 1;
            (0..ROWS * WIDTH).map(|i| if moved(i) { base[i] + 0.05 * k as f32 * step[i] } else { base[i] }).collect()
        })
        .collect()
}

fn stochastic(bits: u8) -> Pair {
    let id =
        |side| StreamId { tag: Tag::new(1, Direction::Forward, Step::Halo), route: Route::ToCopies, peer: 1, side };
    let rows: Arc<[u32]> = (0..ROWS as u32).map(|r| r * 7 + 3).collect();
    let stream = |side| Stream { id: id(side), rows: Arc::clone(&rows) };
    let table = Knob::new(Arc::new(BitTable::uniform(bits).expect("a codec width")));
    let probe = QuantProbe::default();
    let enc = StochasticCodec::new(11, &stream(Side::Encode), table.clone(), probe.clone());
    (Box::new(enc), Box::new(StochasticCodec::new(11, &stream(Side::Decode), table, probe)))
}

/// The codecs by name, each as a fresh encoder and decoder pair.
fn codecs() -> Vec<(String, Box<dyn Fn() -> Pair>)> {
    let mut all: Vec<(String, Box<dyn Fn() -> Pair>)> =
        vec![("identity".into(), Box::new(|| (Box::new(IdentityCodec) as Box<dyn Codec>, Box::new(IdentityCodec))))];
    for bits in [2u8, 4, 8, 16] {
        let linear = move || Box::new(LinearQuant::new(bits).expect("a linear width")) as Box<dyn Codec>;
        all.push((format!("linear_{bits}"), Box::new(move || (linear(), linear()))));
    }
    for bits in [2u8, 4, 8] {
        all.push((format!("stochastic_{bits}"), Box::new(move || stochastic(bits))));
    }
    for bits in [1u8, 2, 4, 8, 16] {
        let bucket = move || Box::new(BucketCodec::new(Knob::new(bits))) as Box<dyn Codec>;
        all.push((format!("bucket_{bits}"), Box::new(move || (bucket(), bucket()))));
    }
    let reqec = || Box::new(ReqEc::new(10, Knob::new(2), false, None)) as Box<dyn Codec>;
    all.push(("reqec_2".into(), Box::new(move || (reqec(), reqec()))));
    let resec = || Box::new(ResEc::new(Knob::new(4))) as Box<dyn Codec>;
    all.push(("resec_4".into(), Box::new(move || (resec(), resec()))));
    let identity = || Box::new(IdentityCodec) as Box<dyn Codec>;
    all.push((
        "skip_repeats_identity".into(),
        Box::new(move || {
            let enc = SkipRepeats::encoder(identity(), identity());
            (Box::new(enc) as Box<dyn Codec>, Box::new(SkipRepeats::decoder(identity())) as Box<dyn Codec>)
        }),
    ));
    all
}

/// Runs `iters` messages through `pair` in lock step and returns the time spent in the encoder
/// (`encode`) or in the decoder.
fn lock_step(pair: &mut Pair, blocks: &[Vec<f32>], iters: u64, encode: bool) -> Duration {
    let (enc, dec) = pair;
    let (mut bytes, mut back) = (Vec::new(), vec![0.0f32; ROWS * WIDTH]);
    let mut spent = Duration::ZERO;
    for i in 0..iters {
        let pass = Pass::train(i + 1, 0);
        bytes.clear();
        let start = Instant::now();
        enc.encode(pass, black_box(&blocks[i as usize % BLOCKS]), WIDTH, &mut bytes).expect("encode");
        let encoded = start.elapsed();
        let start = Instant::now();
        dec.decode(pass, black_box(&bytes), WIDTH, &mut back).expect("decode");
        spent += if encode { encoded } else { start.elapsed() };
        black_box(&back);
        enc.take_stats();
    }
    spent
}

fn codec_bench(c: &mut Criterion) {
    let blocks = blocks();
    for (side, encode) in [("encode", true), ("decode", false)] {
        let mut group = c.benchmark_group(format!("codec_{side}_{ROWS}x{WIDTH}"));
        group.throughput(Throughput::Elements((ROWS * WIDTH) as u64));
        group.sample_size(20);
        let mut out = vec![0.0f32; ROWS * WIDTH];
        group.bench_function("copy", |b| {
            let mut k = 0;
            b.iter(|| {
                out.copy_from_slice(black_box(&blocks[k % BLOCKS]));
                k += 1;
                black_box(&out);
            })
        });
        for (name, make) in codecs() {
            // One pair per benchmark, so stateful codecs carry their stream across samples.
            let mut pair = make();
            group.bench_function(&name, |b| b.iter_custom(|iters| lock_step(&mut pair, &blocks, iters, encode)));
        }
        group.finish();
    }
}

criterion_group!(benches, codec_bench);
criterion_main!(benches);
