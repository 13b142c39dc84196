//! The arithmetic of an [`Encoding`]: the bytes a message of rows becomes and the rows it
//! decodes to, a pure function of the rows (or bytes) and the description. Each codec's module
//! holds the arithmetic of its own messages; this is the one place that chooses among them, so it
//! sits above every codec, and the codecs, like the kernel interface they implement
//! ([`super::kernel`]), name none of it. A codec's own encode and decode run exactly this (through
//! `encode_through` and `decode_through`), so a kernel checked against [`Encoding::encode`] and
//! [`Encoding::decode`] writes and reads the codec's bytes.

use super::kernel::{Encoding, Measured};
use super::le::{extend_le, read_le};
use super::{CodecError, LINEAR_BITS, bucket, identity, linear, row_count, stochastic};

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

#[cfg(test)]
mod tests {
    use std::sync::Arc;
    use std::time::Duration;

    use super::*;
    use crate::codec::{BitTable, BucketCodec, Codec, LinearQuant, QuantProbe, StochasticCodec};
    use crate::knob::Knob;
    use crate::stream::{Direction, Pass, Route, Side, Step, Stream, StreamId, Tag};

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
