//! AdaQP's stochastic integer quantization (eq. 4-5), one row at a time.
//!
//! A row of `D` values at `b` bits travels as its zero point `z = min` and scale
//! `S = (max - min) / (2^b - 1)` (two little-endian `f32`, 8 bytes) followed by `D` codes
//! `q = clamp(floor((x - z) / S + u), 0, 2^b - 1)` packed `ceil(D b / 8)` bytes (see
//! `pack`), `u` uniform in `[0, 1)`; the receiver decodes `q S + z`. `E[q S + z] = x`, and
//! the error's variance is `S^2 f (1 - f)` per value, `f` the fractional part of `(x - z) / S`:
//! `D S^2 / 6` per row when fractional parts are uniform, at most `D S^2 / 4`.
//!
//! `u` is keyed by (seed, epoch, layer, direction, global id, column), so the draws depend
//! neither on the partition nor on the thread count: the first five words are hashed once per
//! row into a seed, and column `c` takes half `c % 2` (32 bits, of which the top 24 make the
//! `f32`) of output `c / 2` of a SplitMix64 stream from that seed, one hash per two values. The
//! clamp keeps a draw that rounds up at the maximum inside `b` bits; a constant row has `S = 0`,
//! codes 0, and decodes exactly. Rows are quantized, packed and unpacked whole, through draw and
//! code buffers a message reuses from row to row.
//!
//! The width of each row comes from a shared [`BitTable`] (the assignment changes it between
//! steps); the decoder adds every received row's variance trace `(D / 6)(max - min)^2` to a
//! [`QuantProbe`] for the assignment's next solve.

mod shared;

pub use shared::{BitTable, QuantProbe, RowTraces, WIDTHS};

use std::sync::Arc;
use std::time::Duration;

use graph_partition::rng::{SplitMix64, hash_extend, hash_key};

use super::extent::bounds;
use super::kernel::{Encoding, KernelCodec, Measured, decode_through, encode_through};
use super::le::read_le;
use super::pack::{pack, packed_len, unpack};
use super::{Codec, CodecError, CodecFactory, CodecStats};
use crate::knob::Knob;
use crate::stream::{Direction, Mode, Pass, Stream, StreamId};

pub(super) const NAME: &str = "stochastic";

/// Bytes of a row's zero point and scale.
pub const HEADER_BYTES: usize = 8;

/// Bytes one row of `width` values takes at `bits` bits: `ceil(width * bits / 8) + 8`.
pub fn row_bytes(width: usize, bits: u8) -> usize {
    packed_len(width, bits) + HEADER_BYTES
}

/// The stochastic codec of one stream (see the module docs).
pub struct StochasticCodec {
    seed: u64,
    id: StreamId,
    /// Global ids of the stream's rows, in message order.
    rows: Arc<[u32]>,
    bits: Knob<Arc<BitTable>>,
    probe: QuantProbe,
    stats: CodecStats,
}

impl StochasticCodec {
    /// The codec of `stream`, drawing from `seed`, reading widths from `bits`.
    pub fn new(seed: u64, stream: &Stream, bits: Knob<Arc<BitTable>>, probe: QuantProbe) -> Self {
        Self { seed, id: stream.id, rows: Arc::clone(&stream.rows), bits, probe, stats: CodecStats::default() }
    }

    /// Makes the codec of every stream of one worker; `bits` and `probe` are that worker's.
    pub fn factory(seed: u64, bits: Knob<Arc<BitTable>>, probe: QuantProbe) -> CodecFactory {
        Arc::new(move |stream: &Stream| Box::new(Self::new(seed, stream, bits.clone(), probe.clone())))
    }

    /// The width of each of `n` rows in message order.
    fn widths(&self, n: usize) -> Result<Vec<u8>, CodecError> {
        let table = self.bits.get();
        match table.stream(&self.id) {
            None => Ok(vec![table.uniform_bits(); n]),
            Some(bits) if bits.len() == n => Ok(bits.to_vec()),
            Some(bits) => Err(CodecError::Malformed {
                codec: NAME,
                detail: format!("bit table lists {} rows for a message of {n}", bits.len()),
            }),
        }
    }

    /// The key prefix of every draw of `pass` on this stream.
    fn draw_key(&self, pass: Pass) -> u64 {
        let dir = match self.id.tag.dir {
            Direction::Forward => 0,
            Direction::Backward => 1,
        };
        hash_key(&[self.seed, pass.epoch, self.id.tag.layer as u64, dir])
    }
}

/// A uniform draw in `[0, 1)` from 32 random bits (their top 24, all an `f32` holds).
#[inline]
fn unit(bits: u32) -> f32 {
    (bits >> 8) as f32 * (1.0 / (1u32 << 24) as f32)
}

/// The draw `quantize` takes for column `col` of the row keyed `row_key`, computed alone: the
/// form a kernel with a thread per value uses (`kernels/quant.cu`, `gnn_core::gpu::reference`).
pub fn rounding_draw(row_key: u64, col: usize) -> f32 {
    let bits = SplitMix64::output_at(row_key, col as u64 / 2);
    unit(if col.is_multiple_of(2) { bits as u32 } else { (bits >> 32) as u32 })
}

/// Writes the stochastic codes of `row` (zero point `zero`, scale `scale > 0`, largest code
/// `top`) to `codes`, drawing from the stream of `row_key` into `draws`; returns the row's
/// squared error and squared norm. The draws come first (one SplitMix64 output per two
/// columns), then the codes in a loop without branches, then the error sums in column order.
fn quantize(
    row: &[f32],
    zero: f32,
    scale: f32,
    top: f32,
    row_key: u64,
    draws: &mut [f32],
    codes: &mut [u8],
) -> (f32, f32) {
    let mut stream = SplitMix64::new(row_key);
    let mut pairs = draws.chunks_exact_mut(2);
    for pair in &mut pairs {
        let r = stream.next_u64();
        pair[0] = unit(r as u32);
        pair[1] = unit((r >> 32) as u32);
    }
    if let [u] = pairs.into_remainder() {
        *u = unit(stream.next_u64() as u32);
    }
    // Non-negative, so the truncating conversion is the floor; a NaN fails the comparison and
    // takes the largest code, as `f32::min` gives it. A division, not a reciprocal: a
    // subnormal scale's reciprocal is infinite.
    for ((q, &x), &u) in codes.iter_mut().zip(row).zip(draws.iter()) {
        let y = (x - zero) / scale + u;
        *q = (if y < top { y } else { top }) as i32 as u8;
    }
    row.iter().zip(codes.iter()).fold((0.0, 0.0), |(err, norm), (&x, &q)| {
        let e = f32::from(q) * scale + zero - x;
        (err + e * e, norm + x * x)
    })
}

/// The largest code at `bits` bits.
fn max_code(bits: u8) -> f32 {
    ((1u32 << bits) - 1) as f32
}

/// The zero point and scale of a row at `bits` bits.
fn zero_and_scale(row: &[f32], bits: u8) -> (f32, f32) {
    if row.is_empty() {
        return (0.0, 0.0);
    }
    let (lo, hi) = bounds(row);
    (lo, (hi - lo) / max_code(bits))
}

/// Appends the rows (`width` wide, whole rows, row `r` at `bits[r]` bits and keyed by
/// `gids[r]`) as [`Encoding::Stochastic`] describes them.
pub(super) fn encode_rows(
    key: u64,
    bits: &[u8],
    gids: &[u32],
    rows: &[f32],
    width: usize,
    out: &mut Vec<u8>,
) -> Measured {
    let (mut codes, mut draws) = (vec![0u8; width], vec![0.0f32; width]);
    let mut measured = Measured::default();
    for ((row, &b), &gid) in rows.chunks_exact(width.max(1)).zip(bits).zip(gids) {
        let row_key = hash_extend(key, &[u64::from(gid)]);
        let (zero, scale) = zero_and_scale(row, b);
        out.extend_from_slice(&zero.to_le_bytes());
        out.extend_from_slice(&scale.to_le_bytes());
        let (err, norm) = if scale > 0.0 {
            quantize(row, zero, scale, max_code(b), row_key, &mut draws, &mut codes)
        } else {
            codes.fill(0);
            (0.0, row.iter().map(|&x| x * x).sum())
        };
        measured.err_sq += f64::from(err);
        measured.ref_sq += f64::from(norm);
        pack(&codes, b, out);
    }
    measured
}

/// Decodes a message whose length [`Encoding::check`] passed.
pub(super) fn decode_rows(bits: &[u8], bytes: &[u8], width: usize, out: &mut [f32]) {
    let mut codes = vec![0u8; width];
    let mut at = 0;
    for (row, &b) in out.chunks_exact_mut(width.max(1)).zip(bits) {
        let (zero, scale) = header(bytes, at);
        unpack(&bytes[at + HEADER_BYTES..at + row_bytes(width, b)], b, &mut codes);
        row.iter_mut().zip(&codes).for_each(|(x, &q)| *x = f32::from(q) * scale + zero);
        at += row_bytes(width, b);
    }
}

/// The zero point and scale of the row whose bytes start at `at`.
fn header(bytes: &[u8], at: usize) -> (f32, f32) {
    let mut words = [0.0f32; 2];
    read_le(&bytes[at..at + HEADER_BYTES], &mut words);
    (words[0], words[1])
}

impl KernelCodec for StochasticCodec {
    fn encoding(&self, pass: Pass, rows: usize) -> Result<Encoding, CodecError> {
        if rows > self.rows.len() {
            let detail = format!("a message of {rows} rows on a stream of {}", self.rows.len());
            return Err(CodecError::Malformed { codec: NAME, detail });
        }
        Ok(Encoding::Stochastic { key: self.draw_key(pass), bits: self.widths(rows)?, gids: Arc::clone(&self.rows) })
    }

    fn sent(&mut self, encoding: &Encoding, _rows: usize, measured: Measured, spent: Duration) {
        if let Encoding::Stochastic { bits, .. } = encoding {
            bits.iter().for_each(|&b| self.stats.bits[usize::from(b)] += 1);
        }
        self.stats.err_sq += measured.err_sq;
        self.stats.ref_sq += measured.ref_sq;
        self.probe.add_time(spent);
    }

    /// Adds every row's variance trace `(D / 6)(max - min)^2`, from its header, to the probe.
    fn received(&mut self, pass: Pass, encoding: &Encoding, bytes: &[u8], width: usize, spent: Duration) {
        if let (Encoding::Stochastic { bits, .. }, Mode::Train) = (encoding, pass.mode) {
            let mut at = 0;
            let traces: Vec<f64> = bits
                .iter()
                .map(|&b| {
                    let range = f64::from(header(bytes, at).1) * f64::from(max_code(b));
                    at += row_bytes(width, b);
                    width as f64 / 6.0 * range * range
                })
                .collect();
            self.probe.add_traces(self.id, width, &self.rows, &traces);
        }
        self.probe.add_time(spent);
    }

    /// The probe takes each arrived row's range from its header in training.
    fn reads_arrivals(&self, pass: Pass) -> bool {
        pass.mode == Mode::Train
    }
}

impl Codec for StochasticCodec {
    fn name(&self) -> String {
        NAME.to_string()
    }

    fn encode(&mut self, pass: Pass, rows: &[f32], width: usize, out: &mut Vec<u8>) -> Result<(), CodecError> {
        encode_through(self, pass, rows, width, out)
    }

    fn decode(&mut self, pass: Pass, bytes: &[u8], width: usize, out: &mut [f32]) -> Result<(), CodecError> {
        decode_through(self, pass, bytes, width, out)
    }

    fn take_stats(&mut self) -> CodecStats {
        std::mem::take(&mut self.stats)
    }

    fn kernel(&mut self) -> Option<&mut dyn KernelCodec> {
        Some(self)
    }
}

#[cfg(test)]
mod tests;
