//! The lossless codec: each value as its 4 little-endian bytes.

use std::time::Duration;

use super::kernel::{Encoding, KernelCodec, Measured, decode_through, encode_through};
use super::{Codec, CodecError};
use crate::stream::Pass;

/// Sends `f32` values unchanged (little-endian), so distributed training with it equals
/// single-process training bit for bit.
#[derive(Debug, Default, Clone, Copy)]
pub struct IdentityCodec;

pub(crate) const NAME: &str = "identity";

impl Codec for IdentityCodec {
    fn name(&self) -> String {
        NAME.to_string()
    }

    fn encode(&mut self, pass: Pass, rows: &[f32], width: usize, out: &mut Vec<u8>) -> Result<(), CodecError> {
        encode_through(self, pass, rows, width, out)
    }

    fn decode(&mut self, pass: Pass, bytes: &[u8], width: usize, out: &mut [f32]) -> Result<(), CodecError> {
        decode_through(self, pass, bytes, width, out)
    }

    fn kernel(&mut self) -> Option<&mut dyn KernelCodec> {
        Some(self)
    }
}

/// Exact rows keep no bookkeeping.
impl KernelCodec for IdentityCodec {
    fn encoding(&self, _pass: Pass, _rows: usize) -> Result<Encoding, CodecError> {
        Ok(Encoding::Exact)
    }

    fn sent(&mut self, _encoding: &Encoding, _rows: usize, _measured: Measured, _spent: Duration) {}

    fn received(&mut self, _pass: Pass, _encoding: &Encoding, _bytes: &[u8], _width: usize, _spent: Duration) {}
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    const P: Pass = Pass { mode: crate::Mode::Train, epoch: 1, step: 0 };

    #[test]
    fn round_trip_is_bit_exact_including_special_values() {
        let rows = [0.0, -0.0, 1.5, f32::MIN_POSITIVE, f32::INFINITY, f32::NAN, -3.25e-30, f32::MAX];
        let mut bytes = Vec::new();
        IdentityCodec.encode(P, &rows, 4, &mut bytes).unwrap();
        assert_eq!(bytes.len(), rows.len() * 4);
        let mut back = [7.0f32; 8];
        IdentityCodec.decode(P, &bytes, 4, &mut back).unwrap();
        for (a, b) in rows.iter().zip(&back) {
            assert_eq!(a.to_bits(), b.to_bits());
        }
    }

    #[test]
    fn encode_appends_after_existing_bytes() {
        let mut bytes = vec![9u8];
        IdentityCodec.encode(P, &[1.0], 1, &mut bytes).unwrap();
        assert_eq!(bytes, [9, 0, 0, 0x80, 0x3f]);
    }

    #[test]
    fn truncated_or_padded_message_is_an_error() {
        let mut bytes = Vec::new();
        IdentityCodec.encode(P, &[1.0, 2.0, 3.0, 4.0], 2, &mut bytes).unwrap();
        let mut out = [0.0f32; 4];
        let err = IdentityCodec.decode(P, &bytes[..15], 2, &mut out).unwrap_err();
        assert_eq!(err, CodecError::Length { codec: "identity", rows: 2, width: 2, expected: 16, actual: 15 });
        bytes.push(0);
        assert!(matches!(IdentityCodec.decode(P, &bytes, 2, &mut out), Err(CodecError::Length { .. })));
    }

    #[test]
    fn ragged_blocks_are_shape_errors() {
        let mut bytes = Vec::new();
        assert!(matches!(IdentityCodec.encode(P, &[1.0, 2.0, 3.0], 2, &mut bytes), Err(CodecError::Shape { .. })));
        assert!(matches!(IdentityCodec.encode(P, &[1.0], 0, &mut bytes), Err(CodecError::Shape { .. })));
        let mut out = [0.0f32; 3];
        assert!(matches!(IdentityCodec.decode(P, &[0; 12], 2, &mut out), Err(CodecError::Shape { .. })));
        IdentityCodec.encode(P, &[], 0, &mut bytes).unwrap();
        assert!(bytes.is_empty());
    }

    proptest! {
        #[test]
        fn any_block_round_trips(width in 1usize..9, values in proptest::collection::vec(any::<f32>(), 0..64)) {
            let rows = &values[..values.len() / width * width];
            let mut bytes = Vec::new();
            IdentityCodec.encode(P, rows, width, &mut bytes).unwrap();
            let mut back = vec![0.0f32; rows.len()];
            IdentityCodec.decode(P, &bytes, width, &mut back).unwrap();
            prop_assert!(rows.iter().zip(&back).all(|(a, b)| a.to_bits() == b.to_bits()));
        }

        #[test]
        fn arbitrary_bytes_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..40), rows in 0usize..6) {
            let mut out = vec![0.0f32; rows * 2];
            let result = IdentityCodec.decode(P, &bytes, 2, &mut out);
            prop_assert_eq!(result.is_ok(), bytes.len() == rows * 8);
        }
    }
}
