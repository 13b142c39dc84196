//! A codec's message as data: what a kernel needs to write the bytes a codec writes, and to read
//! them, where the rows live (a GPU's memory) instead of on the host.
//!
//! A [`KernelCodec`] describes each message by an [`Encoding`] and keeps its bookkeeping (stats,
//! probes) apart from the arithmetic; [`Encoding::encode`] and [`Encoding::decode`] are that
//! arithmetic, a pure function of the rows (or bytes) and the description. The codec's own
//! [`super::Codec::encode`] and [`super::Codec::decode`] run exactly these, so a kernel checked against them
//! writes the codec's bytes: a message encoded on a device decodes on the host, and the other
//! way round.

use std::sync::Arc;
use std::time::Duration;

use super::le::{extend_le, read_le};
use super::{CodecError, LINEAR_BITS, bucket, identity, linear, row_count, stochastic};
use crate::stream::Pass;

/// How a message's rows become bytes (see the module docs).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Encoding {
    /// [`super::IdentityCodec`]: every value as its 4 little-endian bytes.
    Exact,
    /// [`super::LinearQuant`]: every row as its minimum and maximum and `bits`-bit levels.
    Linear { bits: u8 },
    /// [`super::StochasticCodec`]: row `r` as its zero point and scale and `bits[r]`-bit codes,
    /// its draws keyed by `hash_extend(key, [gids[r]])`.
    Stochastic { key: u64, bits: Vec<u8>, gids: Arc<[u32]> },
    /// [`super::BucketCodec`]: the whole message as one block of `bits`-bit bucket ids over its
    /// minimum and maximum, which its header carries with the width (a decoder reads the width
    /// there, whatever `bits` its own encoding names); no bytes for no rows.
    Bucket { bits: u8 },
}

/// What encoding a message measured: the decoded rows' squared error against the rows, and the
/// rows' squared norm, summed row by row in message order.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Measured {
    pub err_sq: f64,
    pub ref_sq: f64,
}

impl Encoding {
    /// An error unless the encoding describes `rows` rows at widths its codec packs.
    pub fn validate(&self, rows: usize) -> Result<(), CodecError> {
        let codec = self.codec();
        let detail = match self {
            Encoding::Linear { bits } if !LINEAR_BITS.contains(bits) => format!("{bits} bits per value"),
            Encoding::Stochastic { bits, gids, .. } if bits.len() != rows || gids.len() < rows => {
                format!("{rows} rows described by {} widths and {} ids", bits.len(), gids.len())
            }
            Encoding::Stochastic { bits, .. } => match bits.iter().find(|b| !stochastic::WIDTHS.contains(b)) {
                Some(b) => format!("a row of {b} bits"),
                None => return Ok(()),
            },
            Encoding::Bucket { bits } if let Err(e) = bucket::check_bits(*bits) => e.to_string(),
            Encoding::Exact | Encoding::Linear { .. } | Encoding::Bucket { .. } => return Ok(()),
        };
        Err(CodecError::Malformed { codec, detail })
    }

    /// An error unless `bytes` are a message of `rows` rows of `width` values (a bucket
    /// message at the width its header names).
    pub fn check(&self, bytes: &[u8], rows: usize, width: usize) -> Result<(), CodecError> {
        let codec = self.codec();
        let expected = match self {
            Encoding::Bucket { .. } => bucket::message_len(bytes, rows * width)?,
            _ => {
                self.validate(rows)?;
                self.message_len(rows, width)
            }
        };
        if bytes.len() != expected {
            return Err(CodecError::Length { codec, rows, width, expected, actual: bytes.len() });
        }
        Ok(())
    }

    /// Appends the message of `rows` (row-major, `width` wide) to `out`.
    pub fn encode(&self, rows: &[f32], width: usize, out: &mut Vec<u8>) -> Result<Measured, CodecError> {
        let n = row_count(self.codec(), rows.len(), width)?;
        self.validate(n)?;
        let start = out.len();
        out.reserve(self.message_len(n, width));
        let measured = match self {
            Encoding::Exact => {
                extend_le(out, rows);
                Measured::default()
            }
            Encoding::Linear { bits } => linear::encode_rows(*bits, rows, width, out),
            Encoding::Stochastic { key, bits, gids } => stochastic::encode_rows(*key, bits, gids, rows, width, out),
            Encoding::Bucket { bits } => bucket::encode_values(*bits, rows, out),
        };
        debug_assert_eq!(out.len() - start, self.message_len(n, width));
        Ok(measured)
    }

    /// Decodes a message [`Encoding::encode`] wrote into `out` (row-major, its length gives the
    /// rows); malformed input is an error.
    pub fn decode(&self, bytes: &[u8], width: usize, out: &mut [f32]) -> Result<(), CodecError> {
        let n = row_count(self.codec(), out.len(), width)?;
        self.check(bytes, n, width)?;
        match self {
            Encoding::Exact => read_le(bytes, out),
            Encoding::Linear { bits } => linear::decode_rows(*bits, bytes, width, out),
            Encoding::Stochastic { bits, .. } => stochastic::decode_rows(bits, bytes, width, out),
            Encoding::Bucket { .. } => bucket::decode_message(bucket::NAME, bytes, out)?,
        }
        Ok(())
    }

    /// Bytes of a message of `rows` rows that this encoding writes.
    pub fn message_len(&self, rows: usize, width: usize) -> usize {
        match self {
            Encoding::Exact => rows * width * 4,
            Encoding::Linear { bits } => rows * linear::row_bytes(*bits, width),
            Encoding::Stochastic { bits, .. } => bits.iter().take(rows).map(|&b| stochastic::row_bytes(width, b)).sum(),
            Encoding::Bucket { bits } if rows * width > 0 => bucket::block_len(*bits, rows * width),
            Encoding::Bucket { .. } => 0,
        }
    }

    fn codec(&self) -> &'static str {
        match self {
            Encoding::Exact => identity::NAME,
            Encoding::Linear { .. } => linear::NAME,
            Encoding::Stochastic { .. } => stochastic::NAME,
            Encoding::Bucket { .. } => bucket::NAME,
        }
    }
}

/// A codec whose messages an [`Encoding`] describes, so that a kernel can write and read them
/// where the rows live; the codec keeps the bookkeeping a message leaves behind.
pub trait KernelCodec {
    /// The encoding of this stream's next message of `rows` rows in `pass`, either side.
    fn encoding(&self, pass: Pass, rows: usize) -> Result<Encoding, CodecError>;

    /// Accounts a message of `rows` rows encoded by `encoding` (stats), as
    /// [`super::Codec::encode`] does; `spent` is the time encoding took.
    fn sent(&mut self, encoding: &Encoding, rows: usize, measured: Measured, spent: Duration);

    /// Accounts a message of `bytes` decoded by `encoding` (probes), as [`super::Codec::decode`] does;
    /// `bytes` passed [`Encoding::check`]. A message that went from store to store without the
    /// host (NCCL) comes with its bytes only where [`KernelCodec::reads_arrivals`] says the
    /// codec reads them, else with none.
    fn received(&mut self, pass: Pass, encoding: &Encoding, bytes: &[u8], width: usize, spent: Duration);

    /// Whether [`KernelCodec::received`] reads the message's bytes in `pass`: a receiving store
    /// that keeps its messages (NCCL) then copies them to the host too.
    fn reads_arrivals(&self, _pass: Pass) -> bool {
        false
    }
}

/// [`super::Codec::encode`] of a [`KernelCodec`]: its encoding's bytes, then its bookkeeping.
pub(crate) fn encode_through(
    codec: &mut dyn KernelCodec,
    pass: Pass,
    rows: &[f32],
    width: usize,
    out: &mut Vec<u8>,
) -> Result<(), CodecError> {
    let start = std::time::Instant::now();
    let n = rows_in(rows.len(), width);
    let encoding = codec.encoding(pass, n)?;
    let measured = encoding.encode(rows, width, out)?;
    codec.sent(&encoding, n, measured, start.elapsed());
    Ok(())
}

/// [`super::Codec::decode`] of a [`KernelCodec`].
pub(crate) fn decode_through(
    codec: &mut dyn KernelCodec,
    pass: Pass,
    bytes: &[u8],
    width: usize,
    out: &mut [f32],
) -> Result<(), CodecError> {
    let start = std::time::Instant::now();
    let encoding = codec.encoding(pass, rows_in(out.len(), width))?;
    encoding.decode(bytes, width, out)?;
    codec.received(pass, &encoding, bytes, width, start.elapsed());
    Ok(())
}

/// Whole rows in `len` values (the encoding refuses a remainder, naming its codec).
fn rows_in(len: usize, width: usize) -> usize {
    len.checked_div(width).unwrap_or(0)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::codec::{BitTable, BucketCodec, Codec, LinearQuant, QuantProbe, StochasticCodec};
    use crate::knob::Knob;
    use crate::stream::{Direction, Route, Side, Step, Stream, StreamId, Tag};

    #[test]
    fn descriptions_the_kernels_cannot_pack_and_wrong_lengths_are_refused() {
        assert!(Encoding::Linear { bits: 3 }.validate(1).is_err());
        assert!(Encoding::Bucket { bits: 3 }.validate(1).is_err());
        // A bucket message's length follows the width its header names.
        let bucket = Encoding::Bucket { bits: 16 };
        bucket.check(&[2, 0, 0, 0, 0, 0, 0, 0, 0, 0], 2, 2).unwrap();
        let err = bucket.check(&[2; 11], 2, 2).unwrap_err();
        assert!(matches!(err, CodecError::Length { expected: 10, actual: 11, .. }), "{err}");
        assert!(bucket.check(&[3; 10], 2, 2).is_err(), "a header of no bucket width");
        bucket.check(&[], 0, 2).unwrap();
        let gids: Arc<[u32]> = Arc::from(vec![10, 11]);
        let fine = Encoding::Stochastic { key: 1, bits: vec![4, 2], gids: gids.clone() };
        fine.validate(2).unwrap();
        assert!(fine.validate(3).is_err(), "three rows, two widths");
        assert!(Encoding::Stochastic { key: 1, bits: vec![4, 3], gids }.validate(2).is_err());
        assert_eq!(fine.message_len(2, 5), (8 + 3) + (8 + 2));
        let err = fine.check(&[0; 20], 2, 5).unwrap_err();
        assert!(matches!(err, CodecError::Length { expected: 21, actual: 20, .. }), "{err}");
        assert!(fine.encode(&[0.0; 7], 5, &mut Vec::new()).is_err(), "a ragged block");
        assert!(fine.decode(&[0; 21], 5, &mut [0.0; 15]).is_err(), "three rows out of a two-row message");
        // Exact rows: four bytes a value, any count of rows.
        assert_eq!(Encoding::Exact.message_len(3, 2), 24);
        let err = Encoding::Exact.check(&[0; 7], 1, 2).unwrap_err();
        assert!(matches!(err, CodecError::Length { codec: "identity", expected: 8, actual: 7, .. }), "{err}");
        Encoding::Exact.check(&[], 0, 2).unwrap();
    }

    /// A message a kernel would write (the encoding's bytes, with the codec's bookkeeping after
    /// it) leaves the codec as its own `encode` does, and decodes through the receiver's codec.
    #[test]
    fn a_message_encoded_elsewhere_leaves_the_codecs_as_their_own_encoding_does() {
        let id = StreamId {
            tag: Tag::new(0, Direction::Forward, Step::Halo),
            route: Route::ToCopies,
            peer: 1,
            side: Side::Encode,
        };
        let stream = Stream { id, rows: Arc::from(vec![3, 9, 4]) };
        let table = Knob::new(Arc::new(BitTable::uniform(4).unwrap()));
        let make = || -> Vec<Box<dyn Codec>> {
            vec![
                Box::new(StochasticCodec::new(5, &stream, table.clone(), QuantProbe::default())),
                Box::new(LinearQuant::new(8).unwrap()),
                Box::new(BucketCodec::new(Knob::new(4))),
            ]
        };
        let rows: Vec<f32> = (0..12).map(|i| (i as f32 * 0.37).sin()).collect();
        let pass = Pass::train(2, 0);
        for (mut own, mut elsewhere) in make().into_iter().zip(make()) {
            let mut expected = Vec::new();
            own.encode(pass, &rows, 4, &mut expected).unwrap();
            let kernel = elsewhere.kernel().expect("a kernel codec");
            let encoding = kernel.encoding(pass, 3).unwrap();
            let mut bytes = Vec::new();
            let measured = encoding.encode(&rows, 4, &mut bytes).unwrap();
            kernel.sent(&encoding, 3, measured, Duration::ZERO);
            assert_eq!(bytes, expected, "{}", own.name());
            assert_eq!(elsewhere.take_stats(), own.take_stats(), "{}", own.name());
            let mut back = vec![0.0; 12];
            own.decode(pass, &bytes, 4, &mut back).unwrap();
            let mut direct = vec![0.0; 12];
            encoding.decode(&bytes, 4, &mut direct).unwrap();
            assert_eq!(back, direct, "{}", own.name());
        }
    }
}
