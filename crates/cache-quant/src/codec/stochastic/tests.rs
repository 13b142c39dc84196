use std::sync::Arc;

use proptest::prelude::*;

use super::*;
use crate::stream::{Route, Side, Step, Tag};

fn stream(rows: usize, side: Side) -> Stream {
    let id = StreamId { tag: Tag::new(1, Direction::Forward, Step::Halo), route: Route::ToCopies, peer: 1, side };
    Stream { id, rows: (0..rows as u32).map(|r| 100 + r).collect() }
}

fn pair(rows: usize, bits: u8) -> (StochasticCodec, StochasticCodec, QuantProbe) {
    let table = Knob::new(Arc::new(BitTable::uniform(bits).unwrap()));
    let probe = QuantProbe::default();
    let enc = StochasticCodec::new(7, &stream(rows, Side::Encode), table.clone(), probe.clone());
    let dec = StochasticCodec::new(7, &stream(rows, Side::Decode), table, probe.clone());
    (enc, dec, probe)
}

fn round_trip(
    enc: &mut StochasticCodec,
    dec: &mut StochasticCodec,
    epoch: u64,
    rows: &[f32],
    width: usize,
) -> Vec<f32> {
    let mut bytes = Vec::new();
    enc.encode(Pass::train(epoch, 0), rows, width, &mut bytes).unwrap();
    let mut back = vec![0.0; rows.len()];
    dec.decode(Pass::train(epoch, 0), &bytes, width, &mut back).unwrap();
    back
}

/// A row whose values spread over `[-1.5, 2.5]` with irregular fractional parts.
fn spread_row(width: usize) -> Vec<f32> {
    (0..width).map(|c| -1.5 + 4.0 * ((c as f32 * 0.618_034).fract())).collect()
}

#[test]
fn decoding_is_unbiased_within_three_sigma() {
    let width = 16;
    let row = spread_row(width);
    for bits in WIDTHS {
        let (mut enc, mut dec, _) = pair(1, bits);
        let (zero, scale) = zero_and_scale(&row, bits);
        let n = 10_000;
        let mut sum = vec![0.0f64; width];
        for epoch in 1..=n {
            let back = round_trip(&mut enc, &mut dec, epoch, &row, width);
            sum.iter_mut().zip(&back).for_each(|(s, x)| *s += f64::from(*x));
        }
        for (c, (&x, s)) in row.iter().zip(&sum).enumerate() {
            let f = (f64::from(x - zero) / f64::from(scale)).fract();
            let sigma = (f * (1.0 - f)).sqrt() * f64::from(scale);
            let mean = s / n as f64;
            let bound = 3.0 * sigma / (n as f64).sqrt() + 1e-6;
            assert!((mean - f64::from(x)).abs() <= bound, "bits {bits} column {c}: mean {mean} vs {x}, bound {bound}");
        }
    }
}

#[test]
fn row_variance_is_within_ten_percent_of_d_s2_over_6() {
    let width = 512;
    // Fractional parts spread evenly over [0, 1): the regime D S^2 / 6 describes.
    let row: Vec<f32> = (0..width).map(|c| ((c * 37) % width) as f32 / width as f32 * 3.0 + (c % 3) as f32).collect();
    for bits in [2u8, 4] {
        let (mut enc, mut dec, _) = pair(1, bits);
        let (_, scale) = zero_and_scale(&row, bits);
        let n = 10_000;
        let mut total = 0.0f64;
        for epoch in 1..=n {
            let back = round_trip(&mut enc, &mut dec, epoch, &row, width);
            total += row.iter().zip(&back).map(|(a, b)| f64::from(a - b).powi(2)).sum::<f64>();
        }
        let measured = total / n as f64;
        let predicted = width as f64 * f64::from(scale).powi(2) / 6.0;
        assert!((measured / predicted - 1.0).abs() < 0.1, "bits {bits}: variance {measured} vs {predicted}");
    }
}

#[test]
fn constant_rows_decode_exactly_and_rows_cost_their_bytes() {
    for bits in WIDTHS {
        let (mut enc, mut dec, _) = pair(2, bits);
        let rows = [3.25f32, 3.25, 3.25, -7.0, -7.0, -7.0];
        let mut bytes = Vec::new();
        enc.encode(Pass::train(1, 0), &rows, 3, &mut bytes).unwrap();
        assert_eq!(bytes.len(), 2 * row_bytes(3, bits));
        let mut back = [0.0f32; 6];
        dec.decode(Pass::train(1, 0), &bytes, 3, &mut back).unwrap();
        assert_eq!(back, rows);
    }
    assert_eq!((row_bytes(1433, 2), row_bytes(1433, 4), row_bytes(256, 8)), (359 + 8, 717 + 8, 256 + 8));
}

#[test]
fn per_row_widths_come_from_the_table_and_traces_reach_the_probe() {
    let (mut enc, mut dec, probe) = pair(2, 8);
    let mut table = BitTable::uniform(8).unwrap();
    let widths: Arc<[u8]> = Arc::from(vec![2u8, 4]);
    table.set_stream(enc.id, Arc::clone(&widths)).unwrap();
    table.set_stream(dec.id, widths).unwrap();
    assert!(table.set_stream(dec.id, Arc::from(vec![3u8, 4])).is_none());
    enc.bits.set(Arc::new(table));
    let rows: Vec<f32> = spread_row(10).into_iter().chain((0..10).map(|c| c as f32)).collect();
    let mut bytes = Vec::new();
    enc.encode(Pass::train(1, 0), &rows, 10, &mut bytes).unwrap();
    assert_eq!(bytes.len(), row_bytes(10, 2) + row_bytes(10, 4));
    let stats = enc.take_stats();
    assert_eq!((stats.bits[2], stats.bits[4], stats.bits[8]), (1, 1, 0));
    let mut back = vec![0.0; 20];
    dec.decode(Pass::train(1, 0), &bytes, 10, &mut back).unwrap();
    let traces = probe.take_traces();
    let range = |r: &[f32]| r.iter().copied().fold(f32::MIN, f32::max) - r.iter().copied().fold(f32::MAX, f32::min);
    let expect = |r: &[f32]| 10.0 / 6.0 * f64::from(range(r)).powi(2);
    let got = &traces[&dec.id].traces;
    assert_eq!((traces[&dec.id].width, traces[&dec.id].rows[1]), (10, 101));
    assert!((got[0] - expect(&rows[..10])).abs() < 1e-4 * got[0] && (got[1] - expect(&rows[10..])).abs() < 1e-3);
    // Evaluation passes leave the traces alone.
    dec.decode(Pass::eval(), &bytes, 10, &mut back).unwrap();
    assert!(probe.take_traces().is_empty());
}

/// The bytes of the row of global id `gid` in a message of stream `rows` (ids) and `values`.
fn encoded_row(rows: &[u32], peer: usize, values: &[f32], width: usize, bits: u8, gid: u32) -> Vec<u8> {
    let id =
        StreamId { tag: Tag::new(1, Direction::Forward, Step::Halo), route: Route::ToCopies, peer, side: Side::Encode };
    let stream = Stream { id, rows: rows.iter().copied().collect() };
    let table = Knob::new(Arc::new(BitTable::uniform(bits).unwrap()));
    let mut enc = StochasticCodec::new(7, &stream, table, QuantProbe::default());
    let mut bytes = Vec::new();
    enc.encode(Pass::train(3, 0), values, width, &mut bytes).unwrap();
    let at = rows.iter().position(|&r| r == gid).unwrap() * row_bytes(width, bits);
    bytes[at..at + row_bytes(width, bits)].to_vec()
}

#[test]
fn a_rows_codes_depend_only_on_its_key() {
    let width = 9;
    let target = spread_row(width);
    let filler: Vec<f32> = (0..width).map(|c| c as f32 * 0.37).collect();
    for bits in WIDTHS {
        // Row 42 first of two rows to peer 1, then last of three (other neighbours, another
        // peer): another partition of the same graph.
        let alone = encoded_row(&[42, 5], 1, &[target.clone(), filler.clone()].concat(), width, bits, 42);
        let moved =
            encoded_row(&[8, 9, 42], 3, &[filler.clone(), filler.clone(), target.clone()].concat(), width, bits, 42);
        assert_eq!(alone, moved, "bits {bits}");
        // Another global id draws other codes (9 columns at 2 bits: a chance match is unlikely).
        let other = encoded_row(&[43, 5], 1, &[target.clone(), filler.clone()].concat(), width, bits, 43);
        assert_ne!(alone[HEADER_BYTES..], other[HEADER_BYTES..], "bits {bits}");
    }
}

#[test]
fn each_draw_computed_alone_equals_the_rows_stream() {
    // An odd width, so the last column takes the low half of a stream output of its own.
    let row = spread_row(11);
    let (zero, scale) = zero_and_scale(&row, 8);
    let (mut codes, mut draws) = (vec![0u8; row.len()], vec![0.0f32; row.len()]);
    let row_key = 0x1234_5678_9ABC_DEF0;
    quantize(&row, zero, scale, max_code(8), row_key, &mut draws, &mut codes);
    for (col, (&x, &q)) in row.iter().zip(&codes).enumerate() {
        assert_eq!(draws[col].to_bits(), rounding_draw(row_key, col).to_bits(), "column {col}");
        let alone = ((x - zero) / scale + rounding_draw(row_key, col)).min(max_code(8)) as u8;
        assert_eq!(q, alone, "column {col}");
    }
}

#[test]
fn malformed_messages_are_errors() {
    let (mut enc, mut dec, _) = pair(2, 4);
    let mut bytes = Vec::new();
    enc.encode(Pass::train(1, 0), &[1.0, 2.0, 3.0, 4.0], 2, &mut bytes).unwrap();
    let mut out = [0.0f32; 4];
    assert!(matches!(dec.decode(Pass::train(1, 0), &bytes[1..], 2, &mut out), Err(CodecError::Length { .. })));
    let mut wide = Vec::new();
    assert!(matches!(enc.encode(Pass::train(1, 0), &[0.0; 6], 2, &mut wide), Err(CodecError::Malformed { .. })));
}

proptest! {
    #[test]
    fn codes_never_exceed_the_width_and_decode_inside_the_row_range(
        bits in prop::sample::select(WIDTHS.to_vec()),
        values in prop::collection::vec(-1e3f32..1e3, 1..24),
        epoch in 1u64..1000,
    ) {
        let width = values.len();
        let (mut enc, mut dec, _) = pair(1, bits);
        let mut bytes = Vec::new();
        enc.encode(Pass::train(epoch, 0), &values, width, &mut bytes).unwrap();
        let codes = &bytes[HEADER_BYTES..];
        let mut unpacked = vec![0u8; width];
        unpack(codes, bits, &mut unpacked);
        prop_assert!(unpacked.iter().all(|&q| u32::from(q) < (1u32 << bits)));
        // The last byte's unused bits stay zero, so no code spills past the row.
        let spare = codes.len() * 8 - width * bits as usize;
        prop_assert_eq!(u32::from(codes[codes.len() - 1]) >> (8 - spare), 0);
        let mut back = vec![0.0; width];
        dec.decode(Pass::train(epoch, 0), &bytes, width, &mut back).unwrap();
        let (lo, hi) = values.iter().fold((f32::MAX, f32::MIN), |(l, h), &x| (l.min(x), h.max(x)));
        let slack = (hi - lo) * 1e-5 + 1e-4;
        prop_assert!(back.iter().all(|&x| x >= lo - slack && x <= hi + slack));
    }
}
