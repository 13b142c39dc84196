//! CDFGNN's linear quantization (eq. 22-23): each row as its minimum and maximum (two `f32`,
//! counted in the bytes sent) and `B`-bit levels between them.
//!
//! Eq. 22 as printed, `floor(2^B (m - min) / (max - min) + 0.5)`, reaches `2^B` at the maximum,
//! which needs `B + 1` bits; here the range is split into `2^B - 1` steps, so every level fits
//! in `B` bits and the error is at most `(max - min) / (2 (2^B - 1))`. Levels are packed least
//! significant bit first, each row starting on a byte boundary (2, 4 and 8 bits as the
//! stochastic codec packs its codes, 16 bits as little-endian `u16`s). Decoding is a pure
//! function of the bytes, so every receiver of the same row (and the sender's own shadow decode)
//! gets the same bits.

use std::time::Duration;

use super::extent::bounds;
use super::kernel::{Encoding, KernelCodec, Measured, decode_through, encode_through};
use super::le::{extend_le, read_le};
use super::pack::{pack, packed_len, unpack};
use super::{Codec, CodecError, CodecStats};
use crate::stream::Pass;

pub(super) const NAME: &str = "linear";

/// The bit-widths [`LinearQuant`] packs.
pub const LINEAR_BITS: [u8; 4] = [2, 4, 8, 16];

/// Why a [`LinearQuant`] cannot be built.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("linear quantization takes 2, 4, 8 or 16 bits, got {0}")]
pub struct BitsError(pub u8);

/// Quantizes every row to `bits` bits between its minimum and maximum (see the module docs).
#[derive(Debug, Clone)]
pub struct LinearQuant {
    bits: u8,
    stats: CodecStats,
}

impl LinearQuant {
    /// A codec of `bits` bits per value, one of [`LINEAR_BITS`].
    pub fn new(bits: u8) -> Result<Self, BitsError> {
        if !LINEAR_BITS.contains(&bits) {
            return Err(BitsError(bits));
        }
        Ok(Self { bits, stats: CodecStats::default() })
    }

    /// Bytes of one encoded row of `width` values: minimum, maximum and the packed levels.
    pub fn row_bytes(&self, width: usize) -> usize {
        row_bytes(self.bits, width)
    }
}

/// Bytes of one row of `width` values at `bits` bits.
pub(super) fn row_bytes(bits: u8, width: usize) -> usize {
    8 + (width * usize::from(bits)).div_ceil(8)
}

/// The largest level at `bits` bits.
fn levels(bits: u8) -> u32 {
    (1u32 << bits) - 1
}

/// The level of `v` in a row whose minimum is `lo` and whose range `range` is positive and
/// finite: `round((v - lo) / range * levels)` in `f64`, half away from zero, within
/// `0..=levels` (a NaN is level 0).
#[inline]
fn level(v: f32, lo: f32, range: f64, levels: u32) -> u32 {
    let x = (f64::from(v) - f64::from(lo)) / range * f64::from(levels);
    // Rounding half away from zero is the whole part (a truncating conversion, NaN to 0) plus
    // one when the fraction, which the subtraction gives exactly, is at least a half:
    // `f64::round`'s result without its library call, nor `trunc`'s. The conversion saturates
    // at the bounds of `i32`, far outside `0..=levels` (at most `2^16 - 1`), where the clamp
    // gives the same level as the exact whole part would.
    let whole = x as i32;
    let rounded = whole.saturating_add(i32::from(x - f64::from(whole) >= 0.5));
    rounded.clamp(0, levels as i32) as u32
}

/// The step between levels of a row quantized between `lo` and `hi` with `levels` steps; level
/// `q` decodes to `lo + q * step`.
fn step(lo: f32, hi: f32, levels: u32) -> f32 {
    (hi - lo) / levels as f32
}

/// Appends the rows (`width` wide, whole rows) at `bits` bits ([`Encoding::Linear`]).
pub(super) fn encode_rows(bits: u8, rows: &[f32], width: usize, out: &mut Vec<u8>) -> Measured {
    let levels = levels(bits);
    let mut codes = vec![0u16; width];
    let mut narrow = vec![0u8; if bits == 16 { 0 } else { width }];
    for row in rows.chunks_exact(width.max(1)) {
        let (lo, hi) = bounds(row);
        extend_le(out, &[lo, hi]);
        let range = f64::from(hi) - f64::from(lo);
        // A flat (or non-finite) row is all level 0: it decodes to its minimum.
        if range > 0.0 && range.is_finite() {
            codes.iter_mut().zip(row).for_each(|(q, &v)| *q = level(v, lo, range, levels) as u16);
        } else {
            codes.fill(0);
        }
        if bits == 16 {
            let start = out.len();
            out.resize(start + 2 * width, 0);
            out[start..].chunks_exact_mut(2).zip(&codes).for_each(|(dst, q)| dst.copy_from_slice(&q.to_le_bytes()));
        } else {
            narrow.iter_mut().zip(&codes).for_each(|(n, &q)| *n = q as u8);
            pack(&narrow, bits, out);
        }
    }
    // The codec reports no error sums.
    Measured::default()
}

/// Decodes a message of `bits`-bit rows whose length [`Encoding::check`] passed.
pub(super) fn decode_rows(bits: u8, bytes: &[u8], width: usize, out: &mut [f32]) {
    let (levels, row_bytes) = (levels(bits), row_bytes(bits, width));
    let mut codes = vec![0u8; width];
    for (row, message) in out.chunks_exact_mut(width.max(1)).zip(bytes.chunks_exact(row_bytes)) {
        let mut bounds = [0.0f32; 2];
        read_le(&message[..8], &mut bounds);
        let (lo, step) = (bounds[0], step(bounds[0], bounds[1], levels));
        let packed = &message[8..];
        if bits == 16 {
            for (v, code) in row.iter_mut().zip(packed.chunks_exact(2)) {
                *v = lo + f32::from(u16::from_le_bytes([code[0], code[1]])) * step;
            }
        } else {
            debug_assert_eq!(packed.len(), packed_len(width, bits));
            unpack(packed, bits, &mut codes);
            for (v, &code) in row.iter_mut().zip(&codes) {
                *v = lo + f32::from(code) * step;
            }
        }
    }
}

impl KernelCodec for LinearQuant {
    fn encoding(&self, _pass: Pass, _rows: usize) -> Result<Encoding, CodecError> {
        Ok(Encoding::Linear { bits: self.bits })
    }

    fn sent(&mut self, _encoding: &Encoding, rows: usize, _measured: Measured, _spent: Duration) {
        self.stats.bits[usize::from(self.bits)] += rows as u64;
    }

    fn received(&mut self, _pass: Pass, _encoding: &Encoding, _bytes: &[u8], _width: usize, _spent: Duration) {}
}

impl Codec for LinearQuant {
    fn name(&self) -> String {
        format!("{NAME}{}", self.bits)
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
mod tests {
    use proptest::prelude::*;

    use super::*;

    const P: Pass = Pass { mode: crate::Mode::Train, epoch: 1, step: 0 };

    fn round_trip(bits: u8, rows: &[f32], width: usize) -> (Vec<u8>, Vec<f32>) {
        let mut codec = LinearQuant::new(bits).unwrap();
        let mut bytes = Vec::new();
        codec.encode(P, rows, width, &mut bytes).unwrap();
        let mut back = vec![0.0; rows.len()];
        codec.decode(P, &bytes, width, &mut back).unwrap();
        (bytes, back)
    }

    #[test]
    fn extremes_and_flat_rows_are_exact_and_sizes_count_the_bounds() {
        let (bytes, back) = round_trip(2, &[-1.0, 2.0, 0.0, 1.0, 5.0, 5.0, 5.0, 5.0], 4);
        // Per row: min and max (8 bytes) and 4 values of 2 bits (1 byte).
        assert_eq!(bytes.len(), 2 * 9);
        assert_eq!(back, [-1.0, 2.0, 0.0, 1.0, 5.0, 5.0, 5.0, 5.0]);
        assert_eq!(LinearQuant::new(16).unwrap().row_bytes(3), 8 + 6);
        assert_eq!(LinearQuant::new(4).unwrap().name(), "linear4");
    }

    #[test]
    fn unsupported_widths_and_bad_lengths_are_errors() {
        assert_eq!(LinearQuant::new(3).unwrap_err(), BitsError(3));
        assert_eq!(LinearQuant::new(0).unwrap_err().to_string(), "linear quantization takes 2, 4, 8 or 16 bits, got 0");
        let mut codec = LinearQuant::new(8).unwrap();
        let err = codec.decode(P, &[0; 9], 2, &mut [0.0; 2]).unwrap_err();
        assert!(matches!(err, CodecError::Length { expected: 10, actual: 9, .. }), "{err}");
    }

    #[test]
    fn the_histogram_counts_rows_at_their_width() {
        let mut codec = LinearQuant::new(4).unwrap();
        codec.encode(P, &[1.0; 6], 2, &mut Vec::new()).unwrap();
        assert_eq!(codec.take_stats().bits[4], 3);
    }

    /// A level is `f64::round`'s, half away from zero, clamped: at a half, just below it, at
    /// the row's ends, and for a NaN (level 0).
    #[test]
    fn levels_round_as_f64_round_does() {
        let old = |v: f32, lo: f32, range: f64, levels: u32| {
            ((f64::from(v) - f64::from(lo)) / range * f64::from(levels)).round().clamp(0.0, f64::from(levels)) as u32
        };
        // Between 0 and 2 with 255 levels, 1.0 sits at 127.5 exactly.
        for v in [0.0f32, 1.0, 1.0f32.next_down(), 1.0f32.next_up(), 2.0, 0.25, 1.75, f32::NAN] {
            assert_eq!(level(v, 0.0, 2.0, 255), old(v, 0.0, 2.0, 255), "v = {v}");
        }
        assert_eq!(level(1.0, 0.0, 2.0, 255), 128, "127.5 rounds up");
        assert_eq!(level(f32::NAN, 0.0, 2.0, 255), 0);
        for v in [-3.0f32, -1.5, 0.0, 7.0, 65535.0] {
            assert_eq!(level(v, -3.0, 65538.0, 65535), old(v, -3.0, 65538.0, 65535), "v = {v}");
        }
    }

    /// The codec's bytes before its levels were packed a byte at a time: every bit set one by
    /// one, least significant first, with `f64::round`.
    fn bitwise_encode(bits: u8, rows: &[f32], width: usize) -> Vec<u8> {
        let (b, levels) = (usize::from(bits), (1u32 << bits) - 1);
        let mut out = Vec::new();
        for row in rows.chunks_exact(width) {
            let lo = row.iter().copied().fold(f32::INFINITY, f32::min);
            let hi = row.iter().copied().fold(f32::NEG_INFINITY, f32::max);
            out.extend(lo.to_le_bytes().into_iter().chain(hi.to_le_bytes()));
            let start = out.len();
            out.resize(start + (width * b).div_ceil(8), 0);
            let range = f64::from(hi) - f64::from(lo);
            for (i, &v) in row.iter().enumerate() {
                let q = if range > 0.0 && range.is_finite() {
                    ((f64::from(v) - f64::from(lo)) / range * f64::from(levels)).round().clamp(0.0, f64::from(levels))
                        as u32
                } else {
                    0
                };
                for bit in 0..b {
                    if q >> bit & 1 == 1 {
                        out[start + (i * b + bit) / 8] |= 1 << ((i * b + bit) % 8);
                    }
                }
            }
        }
        out
    }

    proptest! {
        /// The bytes are the bit-by-bit packing's, at every width, on rows with repeated values,
        /// flat rows and NaNs, and on values that fall on a level's half.
        #[test]
        fn bytes_are_the_bitwise_packing(
            bits in prop::sample::select(LINEAR_BITS.to_vec()),
            width in 1usize..11,
            raw in prop::collection::vec(prop_oneof![-4i32..=4, Just(i32::MIN)], 1..60),
            scale in prop::sample::select(vec![0.5f32, 0.1, 3.0, 1e-3]),
        ) {
            // Small integers times a scale hit the halves between levels; `i32::MIN` is a NaN.
            let rows: Vec<f32> = raw
                .iter()
                .map(|&i| if i == i32::MIN { f32::NAN } else { i as f32 * scale })
                .collect();
            let n = rows.len() / width * width;
            let mut codec = LinearQuant::new(bits).unwrap();
            let mut bytes = Vec::new();
            codec.encode(P, &rows[..n], width, &mut bytes).unwrap();
            prop_assert_eq!(&bytes, &bitwise_encode(bits, &rows[..n], width));
        }

        /// Every value decodes within half a step, (max - min) / (2 (2^B - 1)), of itself.
        #[test]
        fn error_is_at_most_half_a_step(
            bits in prop::sample::select(LINEAR_BITS.to_vec()),
            rows in prop::collection::vec(prop::collection::vec(-1e3f32..1e3, 5), 1..6),
        ) {
            let flat: Vec<f32> = rows.concat();
            let (bytes, back) = round_trip(bits, &flat, 5);
            prop_assert_eq!(bytes.len(), rows.len() * (8 + (5 * usize::from(bits)).div_ceil(8)));
            for (row, got) in rows.iter().zip(back.chunks_exact(5)) {
                let lo = row.iter().copied().fold(f32::INFINITY, f32::min);
                let hi = row.iter().copied().fold(f32::NEG_INFINITY, f32::max);
                let bound = f64::from(hi - lo) / (2.0 * f64::from((1u32 << bits) - 1));
                // Float rounding of the decode: a few ulps of the row's magnitude.
                let slack = 4.0 * f64::from(f32::EPSILON) * f64::from(lo.abs().max(hi.abs()));
                for (v, g) in row.iter().zip(got) {
                    prop_assert!(f64::from((v - g).abs()) <= bound + slack, "{} vs {} (bound {})", v, g, bound);
                }
            }
        }
    }
}
