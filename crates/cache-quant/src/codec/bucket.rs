//! EC-Graph's bucket compression (§IV-A): the minimum and maximum over the *whole* block of a
//! message, `2^B` buckets of equal width between them, each value sent as its bucket's id and
//! decoded to the bucket's midpoint.
//!
//! Side information: the paper ships the table of `2^B` bucket values with every message
//! (256 KiB at `B = 16`); midpoints are a function of the minimum, the maximum and `B`, so a
//! block here carries a 9-byte header instead: `B` (one byte, so a receiver decodes whatever
//! width the sender's bit tuner chose) and the minimum and maximum (two little-endian `f32`),
//! then the ids packed least significant bit first. A block of `n` values therefore costs
//! `9 + ceil(n B / 8)` bytes ([`block_len`]), and every value decodes within half a bucket,
//! `(max - min) / 2^(B + 1)`, of itself.
//!
//! The reference implementation splits the range at zero and decodes negative values one bucket
//! low; here the id is `floor((v - min) / width)` over the whole range, whatever the sign.

use std::time::Duration;

pub use super::extent::bounds;
use super::kernel::{Encoding, KernelCodec, Measured, decode_through, encode_through};
use super::le::{extend_le, read_le};
use super::{Codec, CodecError, CodecStats};
use crate::knob::Knob;
use crate::stream::Pass;

pub(super) const NAME: &str = "bucket";

/// The bucket id widths a block may use.
pub const BUCKET_BITS: [u8; 5] = [1, 2, 4, 8, 16];

/// Bytes of a block header: `B`, minimum, maximum.
pub const HEADER_BYTES: usize = 9;

/// Bytes of a block of `count` values at `bits` bits.
pub fn block_len(bits: u8, count: usize) -> usize {
    HEADER_BYTES + (count * usize::from(bits)).div_ceil(8)
}

/// The bucket scale of one block: its bounds and width. Encoder and decoder derive it from the
/// same header, so both compute the same midpoints bit for bit.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Buckets {
    pub bits: u8,
    pub lo: f32,
    pub hi: f32,
}

impl Buckets {
    /// The scale of `bits`-bit buckets between `lo` and `hi`.
    pub fn new(bits: u8, lo: f32, hi: f32) -> Self {
        Self { bits, lo, hi }
    }

    /// The bucket of `v`; a flat or non-finite range puts every value in bucket 0.
    pub fn id(&self, v: f32) -> u32 {
        Grid::new(*self).id(v)
    }

    /// The midpoint of bucket `id`.
    pub fn midpoint(&self, id: u32) -> f32 {
        Grid::new(*self).midpoint(id)
    }

    /// `v` through its bucket.
    pub fn round_trip(&self, v: f32) -> f32 {
        let grid = Grid::new(*self);
        grid.midpoint(grid.id(v))
    }

    /// Every value of `values` through its bucket, into `out` (as long).
    pub fn round_trip_all(&self, values: &[f32], out: &mut [f32]) {
        let grid = Grid::new(*self);
        out.iter_mut().zip(values).for_each(|(o, &v)| *o = grid.midpoint(grid.id(v)));
    }
}

/// A scale's arithmetic with what every value shares computed once: the bucket of `v` is
/// `floor((v - lo) / (hi - lo) * 2^B)` in `f64` within `0..2^B`, the midpoint of bucket `k` is
/// `lo + (k + 0.5) (hi - lo) / 2^B` in `f32`.
#[derive(Debug, Clone, Copy)]
struct Grid {
    lo: f64,
    range: f64,
    count: f64,
    top: f64,
    /// Whether the range is positive and finite (else every value is in bucket 0).
    graded: bool,
    lo32: f32,
    width: f32,
}

impl Grid {
    fn new(scale: Buckets) -> Self {
        let (lo, count) = (f64::from(scale.lo), 1u32 << scale.bits);
        let range = f64::from(scale.hi) - lo;
        Self {
            lo,
            range,
            count: f64::from(count),
            top: f64::from(count - 1),
            graded: range > 0.0 && range.is_finite(),
            lo32: scale.lo,
            width: (scale.hi - scale.lo) / count as f32,
        }
    }

    /// The bucket of `v`. Clamping before the truncating conversion is the floor clamped
    /// after it: the floor and the truncation differ below 0 only, where both clamp to 0, and
    /// a NaN fails `x > 0` and becomes 0, the bucket the floor of a NaN converts to. (Each
    /// comparison is one `maxsd` or `minsd`.)
    #[inline]
    fn id(&self, v: f32) -> u32 {
        if !self.graded {
            return 0;
        }
        let x = (f64::from(v) - self.lo) / self.range * self.count;
        let x = if x > 0.0 { x } else { 0.0 };
        (if x < self.top { x } else { self.top }) as i32 as u32
    }

    /// The midpoint of bucket `id` (below `2^16`, so a signed conversion is exact).
    #[inline]
    fn midpoint(&self, id: u32) -> f32 {
        self.lo32 + (id as i32 as f32 + 0.5) * self.width
    }
}

/// Appends a block of `values` at `scale` (header and packed ids) to `out`, and calls
/// `each(i, v, decoded)` with every value's index, the value and its decode, in order.
pub fn encode_block(scale: Buckets, values: &[f32], out: &mut Vec<u8>, each: impl FnMut(usize, f32, f32)) {
    out.push(scale.bits);
    extend_le(out, &[scale.lo, scale.hi]);
    let grid = Grid::new(scale);
    match scale.bits {
        1 => pack_ids::<1>(grid, values, out, each),
        2 => pack_ids::<2>(grid, values, out, each),
        4 => pack_ids::<4>(grid, values, out, each),
        8 => pack_ids::<8>(grid, values, out, each),
        _ => pack_ids::<16>(grid, values, out, each),
    }
}

/// Values a chunk of the packing loops holds: `BITS` whole 64-bit words of ids at every width.
const CHUNK: usize = 64;

/// [`encode_block`]'s ids at `BITS` bits (a divisor of 64), a chunk of [`CHUNK`] values at a
/// time: their ids, then `64 / BITS` ids to a little-endian word, the last chunk cut to the
/// bytes its values fill.
fn pack_ids<const BITS: usize>(grid: Grid, values: &[f32], out: &mut Vec<u8>, mut each: impl FnMut(usize, f32, f32)) {
    let (mut ids, mut decoded) = ([0u32; CHUNK], [0.0f32; CHUNK]);
    let mut bytes = [0u8; CHUNK * 16 / 8];
    for (c, chunk) in values.chunks(CHUNK).enumerate() {
        let ids = &mut ids[..chunk.len()];
        ids.iter_mut().zip(chunk).for_each(|(id, &v)| *id = grid.id(v));
        for (word, ids) in bytes.chunks_exact_mut(8).zip(ids.chunks(64 / BITS)) {
            let w = ids.iter().enumerate().fold(0u64, |w, (i, &id)| w | u64::from(id) << (i * BITS));
            word.copy_from_slice(&w.to_le_bytes());
        }
        out.extend_from_slice(&bytes[..(chunk.len() * BITS).div_ceil(8)]);
        decoded.iter_mut().zip(ids.iter()).for_each(|(d, &id)| *d = grid.midpoint(id));
        for (i, (&v, &d)) in chunk.iter().zip(&decoded).enumerate() {
            each(c * CHUNK + i, v, d);
        }
    }
}

/// Decodes a block of exactly `out.len()` values from the front of `bytes`; returns its scale
/// and the number of bytes it took.
pub fn decode_block(codec: &'static str, bytes: &[u8], out: &mut [f32]) -> Result<(Buckets, usize), CodecError> {
    let bits = block_bits(codec, bytes)?;
    let len = block_len(bits, out.len());
    if bytes.len() < len {
        let detail = format!("bucket block of {} values needs {len} bytes, has {}", out.len(), bytes.len());
        return Err(CodecError::Malformed { codec, detail });
    }
    let scale = header(bytes);
    let (grid, packed) = (Grid::new(scale), &bytes[HEADER_BYTES..len]);
    match bits {
        1 => unpack_ids::<1>(grid, packed, out),
        2 => unpack_ids::<2>(grid, packed, out),
        4 => unpack_ids::<4>(grid, packed, out),
        8 => unpack_ids::<8>(grid, packed, out),
        _ => unpack_ids::<16>(grid, packed, out),
    }
    Ok((scale, len))
}

/// [`decode_block`]'s midpoints from ids packed at `BITS` bits, a chunk of [`CHUNK`] values at
/// a time: the chunk's words, their ids, then the midpoints.
fn unpack_ids<const BITS: usize>(grid: Grid, packed: &[u8], out: &mut [f32]) {
    let mask = (1u64 << BITS) - 1;
    let mut ids = [0u32; CHUNK];
    for (chunk, bytes) in out.chunks_mut(CHUNK).zip(packed.chunks(CHUNK * BITS / 8)) {
        for (ids, bytes) in ids.chunks_exact_mut(64 / BITS).zip(bytes.chunks(8)) {
            let mut word = [0u8; 8];
            word[..bytes.len()].copy_from_slice(bytes);
            let word = u64::from_le_bytes(word);
            ids.iter_mut().enumerate().for_each(|(i, id)| *id = ((word >> (i * BITS)) & mask) as u32);
        }
        chunk.iter_mut().zip(&ids).for_each(|(v, &id)| *v = grid.midpoint(id));
    }
}

/// The width the first byte of a block names, refused unless it is a bucket width.
fn block_bits(codec: &'static str, bytes: &[u8]) -> Result<u8, CodecError> {
    let detail = match bytes.first() {
        Some(&bits) if BUCKET_BITS.contains(&bits) => return Ok(bits),
        Some(bits) => format!("bucket block of {bits} bits (expected 1, 2, 4, 8 or 16)"),
        None => "empty bucket block".to_string(),
    };
    Err(CodecError::Malformed { codec, detail })
}

/// The scale a block's header names (its width, minimum and maximum); `bytes` holds at least the
/// header, its width checked ([`super::Encoding::check`], [`decode_block`]).
pub fn header(bytes: &[u8]) -> Buckets {
    let mut lohi = [0.0f32; 2];
    read_le(&bytes[1..HEADER_BYTES], &mut lohi);
    Buckets::new(bytes[0], lohi[0], lohi[1])
}

/// Decodes a message that is one block of all `out`'s values, or nothing when `out` is empty.
pub fn decode_message(codec: &'static str, bytes: &[u8], out: &mut [f32]) -> Result<(), CodecError> {
    if out.is_empty() {
        return expect_empty(codec, bytes);
    }
    let (_, used) = decode_block(codec, bytes, out)?;
    if used != bytes.len() {
        return Err(CodecError::Malformed { codec, detail: format!("{} bytes after the block", bytes.len() - used) });
    }
    Ok(())
}

/// The decode of a message for no rows: it must be empty.
pub fn expect_empty(codec: &'static str, bytes: &[u8]) -> Result<(), CodecError> {
    if bytes.is_empty() {
        Ok(())
    } else {
        Err(CodecError::Malformed { codec, detail: format!("{} bytes for no rows", bytes.len()) })
    }
}

/// Appends `values` as one block at `bits` bits over their own bounds ([`Encoding::Bucket`]),
/// nothing when there are none; measures each value's error through its bucket.
pub(super) fn encode_values(bits: u8, values: &[f32], out: &mut Vec<u8>) -> Measured {
    let mut measured = Measured::default();
    if values.is_empty() {
        // A peer that reads none of our rows gets an empty message, as without a codec.
        return measured;
    }
    let (lo, hi) = bounds(values);
    encode_block(Buckets::new(bits, lo, hi), values, out, |_, v, decoded| {
        measured.err_sq += f64::from(decoded - v).powi(2);
        measured.ref_sq += f64::from(v).powi(2);
    });
    measured
}

/// Bytes of a message of `count` values, whose width its header gives (`bytes` is the message):
/// nothing for no values, else one block; a header naming no bucket width is refused.
pub(super) fn message_len(bytes: &[u8], count: usize) -> Result<usize, CodecError> {
    if count == 0 {
        return Ok(0);
    }
    Ok(block_len(block_bits(NAME, bytes)?, count))
}

/// Checks that `bits` is a bucket width.
pub fn check_bits(bits: u8) -> Result<u8, BucketBitsError> {
    if BUCKET_BITS.contains(&bits) { Ok(bits) } else { Err(BucketBitsError(bits)) }
}

/// A bucket width outside [`BUCKET_BITS`].
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("bucket compression takes 1, 2, 4, 8 or 16 bits, got {0}")]
pub struct BucketBitsError(pub u8);

/// Stateless bucket compression of whole messages at the width a [`Knob`] holds when a message
/// is encoded (the width travels in the header, so the decoder needs no knob).
#[derive(Debug, Clone)]
pub struct BucketCodec {
    bits: Knob<u8>,
    stats: CodecStats,
}

impl BucketCodec {
    /// A codec at the width `bits` holds (one of [`BUCKET_BITS`]).
    pub fn new(bits: Knob<u8>) -> Self {
        Self { bits, stats: CodecStats::default() }
    }
}

impl KernelCodec for BucketCodec {
    /// The width the knob holds now, which encoding checks (a decoder reads the sender's from
    /// the message).
    fn encoding(&self, _pass: Pass, _rows: usize) -> Result<Encoding, CodecError> {
        Ok(Encoding::Bucket { bits: self.bits.get() })
    }

    fn sent(&mut self, encoding: &Encoding, rows: usize, measured: Measured, _spent: Duration) {
        if let (Encoding::Bucket { bits }, 1..) = (encoding, rows) {
            self.stats.bits[usize::from(*bits)] += rows as u64;
            self.stats.err_sq += measured.err_sq;
            self.stats.ref_sq += measured.ref_sq;
        }
    }

    fn received(&mut self, _pass: Pass, _encoding: &Encoding, _bytes: &[u8], _width: usize, _spent: Duration) {}
}

impl Codec for BucketCodec {
    fn name(&self) -> String {
        NAME.to_string()
    }

    fn encode(&mut self, pass: Pass, rows: &[f32], width: usize, out: &mut Vec<u8>) -> Result<(), CodecError> {
        if rows.is_empty() {
            // No width check for an empty message, as before the encoding was described.
            return Ok(());
        }
        encode_through(self, pass, rows, width, out)
    }

    fn decode(&mut self, pass: Pass, bytes: &[u8], width: usize, out: &mut [f32]) -> Result<(), CodecError> {
        decode_through(self, pass, bytes, width, out)
    }

    fn kernel(&mut self) -> Option<&mut dyn KernelCodec> {
        Some(self)
    }

    fn take_stats(&mut self) -> CodecStats {
        std::mem::take(&mut self.stats)
    }
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;

    const P: Pass = Pass { mode: crate::Mode::Train, epoch: 1, step: 0 };

    fn round_trip(bits: u8, values: &[f32], width: usize) -> (Vec<u8>, Vec<f32>) {
        let mut codec = BucketCodec::new(Knob::new(bits));
        let mut bytes = Vec::new();
        codec.encode(P, values, width, &mut bytes).unwrap();
        let mut back = vec![0.0; values.len()];
        BucketCodec::new(Knob::new(1)).decode(P, &bytes, width, &mut back).unwrap();
        (bytes, back)
    }

    #[test]
    fn negative_values_decode_in_their_own_bucket() {
        // Range [-1, 1] at 2 bits: buckets of width 0.5, midpoints -0.75, -0.25, 0.25, 0.75.
        let (bytes, back) = round_trip(2, &[-1.0, -0.3, 0.1, 1.0], 2);
        assert_eq!(back, [-0.75, -0.25, 0.25, 0.75]);
        // Header (B, min, max) and 4 ids of 2 bits.
        assert_eq!(bytes.len(), HEADER_BYTES + 1);
        assert_eq!(bytes[0], 2);
        assert_eq!(bytes[9], 0b11_10_01_00);
    }

    #[test]
    fn flat_blocks_are_exact_and_bad_input_is_an_error() {
        assert_eq!(round_trip(1, &[3.5; 6], 3).1, [3.5; 6]);
        let mut codec = BucketCodec::new(Knob::new(3));
        let err = codec.encode(P, &[1.0], 1, &mut Vec::new()).unwrap_err();
        assert!(err.to_string().contains("got 3"), "{err}");
        let err = codec.decode(P, &[5, 0, 0, 0, 0, 0, 0, 0, 0, 0], 1, &mut [0.0]).unwrap_err();
        assert!(err.to_string().contains("5 bits"), "{err}");
        let err = codec.decode(P, &[8, 0, 0, 0, 0, 0, 0, 0, 0], 1, &mut [0.0]).unwrap_err();
        assert!(matches!(err, CodecError::Length { expected: 10, actual: 9, .. }), "{err}");
        assert_eq!(check_bits(16), Ok(16));
        assert_eq!(check_bits(0).unwrap_err().to_string(), "bucket compression takes 1, 2, 4, 8 or 16 bits, got 0");
    }

    proptest! {
        /// Every value decodes within (max - min) / 2^(B + 1) of itself, and a block costs the
        /// analytic count.
        #[test]
        fn error_is_at_most_half_a_bucket_and_bytes_are_analytic(
            bits in prop::sample::select(BUCKET_BITS.to_vec()),
            rows in prop::collection::vec(prop::collection::vec(-1e3f32..1e3, 3), 1..20),
        ) {
            let flat: Vec<f32> = rows.concat();
            let (bytes, back) = round_trip(bits, &flat, 3);
            prop_assert_eq!(bytes.len(), block_len(bits, flat.len()));
            prop_assert_eq!(bytes.len(), 9 + (flat.len() * usize::from(bits)).div_ceil(8));
            let (lo, hi) = bounds(&flat);
            let bound = (f64::from(hi) - f64::from(lo)) / f64::from(1u32 << (bits + 1));
            // Float rounding of the midpoint: a few ulps of the block's magnitude.
            let slack = 8.0 * f64::from(f32::EPSILON) * f64::from(lo.abs().max(hi.abs()));
            for (v, g) in flat.iter().zip(&back) {
                prop_assert!(f64::from((v - g).abs()) <= bound + slack, "{} vs {} (bound {})", v, g, bound);
            }
            // Decoding is a pure function of the bytes: the encoder's own view is the receiver's.
            let scale = Buckets::new(bits, lo, hi);
            for (v, g) in flat.iter().zip(&back) {
                prop_assert_eq!(scale.round_trip(*v).to_bits(), g.to_bits());
            }
        }
    }
}
