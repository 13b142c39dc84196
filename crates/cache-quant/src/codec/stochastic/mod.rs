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
//! neither on the partition nor on the thread count. The clamp keeps a draw that rounds up at
//! the maximum inside `b` bits; a constant row has `S = 0`, codes 0, and decodes exactly.
//!
//! The width of each row comes from a shared [`BitTable`] (the assignment changes it between
//! steps); the decoder adds every received row's variance trace `(D / 6)(max - min)^2` to a
//! [`QuantProbe`] for the assignment's next solve.

mod pack;
mod shared;

pub use shared::{BitTable, QuantProbe, RowTraces, WIDTHS};

use std::sync::Arc;
use std::time::Instant;

use graph_partition::rng::{hash_extend, hash_key};

use super::{Codec, CodecError, CodecFactory, CodecStats, row_count};
use crate::knob::Knob;
use crate::stream::{Direction, Mode, Pass, Stream, StreamId};
use pack::{pack, packed_len, unpack};

const NAME: &str = "stochastic";

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

    /// The global id of row `r`, or an error when the message has more rows than the stream.
    fn global_id(&self, r: usize) -> Result<u32, CodecError> {
        self.rows.get(r).copied().ok_or_else(|| CodecError::Malformed {
            codec: NAME,
            detail: format!("message row {r} is past the stream's {} rows", self.rows.len()),
        })
    }
}

/// A uniform draw in `[0, 1)` from a row's key and a column.
#[inline]
fn uniform(row_key: u64, column: usize) -> f32 {
    (hash_extend(row_key, &[column as u64]) >> 40) as f32 * (1.0 / (1u64 << 24) as f32)
}

/// The largest code at `bits` bits.
fn max_code(bits: u8) -> f32 {
    ((1u32 << bits) - 1) as f32
}

/// The zero point and scale of a row at `bits` bits.
fn zero_and_scale(row: &[f32], bits: u8) -> (f32, f32) {
    let (lo, hi) = row.iter().fold((f32::INFINITY, f32::NEG_INFINITY), |(lo, hi), &x| (lo.min(x), hi.max(x)));
    if row.is_empty() {
        return (0.0, 0.0);
    }
    (lo, (hi - lo) / max_code(bits))
}

impl Codec for StochasticCodec {
    fn name(&self) -> String {
        NAME.to_string()
    }

    fn encode(&mut self, pass: Pass, rows: &[f32], width: usize, out: &mut Vec<u8>) -> Result<(), CodecError> {
        let start = Instant::now();
        let n = row_count(NAME, rows.len(), width)?;
        let widths = self.widths(n)?;
        let key = self.draw_key(pass);
        for (r, (row, &bits)) in rows.chunks_exact(width.max(1)).zip(&widths).enumerate() {
            let row_key = hash_extend(key, &[u64::from(self.global_id(r)?)]);
            let (zero, scale) = zero_and_scale(row, bits);
            out.extend_from_slice(&zero.to_le_bytes());
            out.extend_from_slice(&scale.to_le_bytes());
            let top = max_code(bits);
            let code = |(c, &x): (usize, &f32)| -> u8 {
                if scale > 0.0 { ((x - zero) / scale + uniform(row_key, c)).floor().clamp(0.0, top) as u8 } else { 0 }
            };
            let codes: Vec<u8> = row.iter().enumerate().map(code).collect();
            for (&x, &q) in row.iter().zip(&codes) {
                let decoded = f32::from(q) * scale + zero;
                self.stats.err_sq += f64::from(decoded - x).powi(2);
                self.stats.ref_sq += f64::from(x).powi(2);
            }
            pack(codes.into_iter(), bits, out);
            self.stats.bits[bits as usize] += 1;
        }
        self.probe.add_time(start.elapsed());
        Ok(())
    }

    fn decode(&mut self, pass: Pass, bytes: &[u8], width: usize, out: &mut [f32]) -> Result<(), CodecError> {
        let start = Instant::now();
        let n = row_count(NAME, out.len(), width)?;
        let widths = self.widths(n)?;
        let expected: usize = widths.iter().map(|&b| row_bytes(width, b)).sum();
        if bytes.len() != expected {
            return Err(CodecError::Length { codec: NAME, rows: n, width, expected, actual: bytes.len() });
        }
        let mut traces = Vec::with_capacity(n);
        let mut at = 0;
        for (row, &bits) in out.chunks_exact_mut(width.max(1)).zip(&widths) {
            let word = |i: usize| f32::from_le_bytes([bytes[i], bytes[i + 1], bytes[i + 2], bytes[i + 3]]);
            let (zero, scale) = (word(at), word(at + 4));
            let codes = &bytes[at + HEADER_BYTES..at + row_bytes(width, bits)];
            for (c, x) in row.iter_mut().enumerate() {
                *x = f32::from(unpack(codes, bits, c)) * scale + zero;
            }
            let range = f64::from(scale) * f64::from(max_code(bits));
            traces.push(width as f64 / 6.0 * range * range);
            at += row_bytes(width, bits);
        }
        if pass.mode == Mode::Train {
            self.probe.add_traces(self.id, width, &self.rows, &traces);
        }
        self.probe.add_time(start.elapsed());
        Ok(())
    }

    fn take_stats(&mut self) -> CodecStats {
        std::mem::take(&mut self.stats)
    }
}

#[cfg(test)]
mod tests;
