//! Fuzzing of every codec's decode side on stable Rust: proptest mutates valid messages (byte
//! overwrites, then a cut) and decoding must return rows or an error naming the codec, never
//! panic. 5k inputs per target; `HALO_FUZZ_CASES=100000` is the long run
//! (`docs/RELIABILITY.md`).

use std::sync::Arc;

use proptest::prelude::*;
use proptest::sample::Index;

use super::ecgraph::{ReqEc, ResEc};
use super::*;
use crate::knob::Knob;
use crate::stream::{Direction, Mode, Pass, Route, Side, Step, Stream, StreamId, Tag};

/// Stateful codecs (skip-repeats, ReqEC, ResEC) first pass one clean message at epoch 0, so the
/// mutated one at epoch 1 meets a warmed state (for ReqEC, a selective round after a full one).
const WARM: Pass = Pass { mode: Mode::Train, epoch: 0, step: 0 };
const PASS: Pass = Pass { mode: Mode::Train, epoch: 1, step: 0 };
/// Codecs `pair` makes.
const CODECS: usize = 13;

fn cases() -> u32 {
    std::env::var("HALO_FUZZ_CASES").ok().and_then(|v| v.parse().ok()).unwrap_or(5000)
}

fn stream(rows: usize, side: Side) -> Stream {
    let id = StreamId { tag: Tag::new(0, Direction::Forward, Step::Halo), route: Route::ToCopies, peer: 1, side };
    Stream { id, rows: (0..rows as u32).collect() }
}

/// The encoder and decoder of codec `which` for a stream of `rows` rows.
fn pair(which: usize, rows: usize) -> (Box<dyn Codec>, Box<dyn Codec>) {
    let stochastic = |bits: u8| -> Box<dyn Codec> {
        let table = Knob::new(Arc::new(BitTable::uniform(bits).expect("a supported width")));
        Box::new(StochasticCodec::new(3, &stream(rows, Side::Decode), table, QuantProbe::default()))
    };
    let make = |which: usize| -> Box<dyn Codec> {
        match which {
            0 => Box::new(IdentityCodec),
            1..=4 => Box::new(LinearQuant::new(LINEAR_BITS[which - 1]).expect("a supported width")),
            5..=7 => stochastic([2, 4, 8][which - 5]),
            9 => Box::new(BucketCodec::new(Knob::new(2))),
            10 | 11 => Box::new(ReqEc::new(4, Knob::new(2), which == 11, None)),
            // 8, skip-repeats, has its own pair below.
            _ => Box::new(ResEc::new(Knob::new(4))),
        }
    };
    if which == 8 {
        let factory = SkipRepeats::over(Arc::new(|_: &Stream| Box::new(LinearQuant::new(8).expect("8 bits"))));
        return (factory(&stream(rows, Side::Encode)), factory(&stream(rows, Side::Decode)));
    }
    (make(which), make(which))
}

proptest! {
    #![proptest_config(ProptestConfig { cases: cases(), failure_persistence: None, ..ProptestConfig::default() })]

    #[test]
    fn mutated_messages_decode_or_fail_naming_the_codec(
        which in 0usize..CODECS,
        rows in 1usize..6,
        width in 1usize..5,
        values in proptest::collection::vec(-4.0f32..4.0, 30),
        edits in proptest::collection::vec((any::<Index>(), any::<u8>()), 0..6),
        cut in proptest::option::of(any::<Index>()),
    ) {
        let (mut enc, mut dec) = pair(which, rows);
        let block = &values[..rows * width];
        let mut bytes = Vec::new();
        let mut out = vec![0.0f32; block.len()];
        enc.encode(WARM, block, width, &mut bytes).unwrap();
        dec.decode(WARM, &bytes, width, &mut out).unwrap();
        bytes.clear();
        enc.encode(PASS, block, width, &mut bytes).unwrap();
        if !bytes.is_empty() {
            for (at, value) in &edits {
                let i = at.index(bytes.len());
                bytes[i] = *value;
            }
        }
        if let Some(cut) = cut {
            bytes.truncate(cut.index(bytes.len() + 1));
        }
        if let Err(e) = dec.decode(PASS, &bytes, width, &mut out) {
            prop_assert!(e.to_string().contains("codec") || e.to_string().contains(&dec.name()), "{e}");
        }
    }
}
