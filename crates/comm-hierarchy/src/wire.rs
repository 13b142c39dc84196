//! The wire form of numeric slices: little-endian, no header. The communicator moves bytes;
//! these helpers are how typed rows become bytes and back.

use std::ops::Add;

/// A number that travels as little-endian bytes and can be summed by all-reduce.
pub trait Element: Copy + Default + Add<Output = Self> + Send + Sync + 'static {
    /// Bytes per element on the wire.
    const BYTES: usize;
    /// Writes the little-endian bytes of `self` into exactly [`Element::BYTES`] bytes.
    fn put(self, out: &mut [u8]);
    /// Reads one element from exactly [`Element::BYTES`] bytes.
    fn get(bytes: &[u8]) -> Self;
}

macro_rules! impl_element {
    ($t:ty) => {
        impl Element for $t {
            const BYTES: usize = std::mem::size_of::<$t>();

            fn put(self, out: &mut [u8]) {
                out.copy_from_slice(&self.to_le_bytes());
            }

            fn get(bytes: &[u8]) -> Self {
                let mut raw = [0u8; std::mem::size_of::<$t>()];
                raw.copy_from_slice(bytes);
                <$t>::from_le_bytes(raw)
            }
        }
    };
}

impl_element!(f32);
impl_element!(f64);

/// A byte message that does not hold the expected number of elements.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{len} bytes do not hold {expected} elements of {elem_bytes} bytes")]
pub struct WireError {
    /// Bytes received.
    pub len: usize,
    /// Elements expected (`len / elem_bytes` when any whole number was acceptable).
    pub expected: usize,
    /// Bytes per element.
    pub elem_bytes: usize,
}

/// Encodes `values` as little-endian bytes.
pub fn encode<E: Element>(values: &[E]) -> Vec<u8> {
    // Fixed-size chunks of a zeroed buffer let the compiler turn this into a plain copy on
    // little-endian targets.
    let mut out = vec![0u8; values.len() * E::BYTES];
    for (chunk, &v) in out.chunks_exact_mut(E::BYTES).zip(values) {
        v.put(chunk);
    }
    out
}

/// Decodes a whole number of elements.
pub fn decode<E: Element>(bytes: &[u8]) -> Result<Vec<E>, WireError> {
    if !bytes.len().is_multiple_of(E::BYTES) {
        return Err(WireError { len: bytes.len(), expected: bytes.len() / E::BYTES, elem_bytes: E::BYTES });
    }
    Ok(bytes.chunks_exact(E::BYTES).map(E::get).collect())
}

/// Decodes exactly `out.len()` elements into `out`.
pub fn decode_into<E: Element>(bytes: &[u8], out: &mut [E]) -> Result<(), WireError> {
    if bytes.len() != out.len() * E::BYTES {
        return Err(WireError { len: bytes.len(), expected: out.len(), elem_bytes: E::BYTES });
    }
    for (slot, chunk) in out.iter_mut().zip(bytes.chunks_exact(E::BYTES)) {
        *slot = E::get(chunk);
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    proptest! {
        #[test]
        fn f32_round_trips_bit_exactly(values in proptest::collection::vec(any::<f32>(), 0..64)) {
            let bytes = encode(&values);
            prop_assert_eq!(bytes.len(), values.len() * 4);
            let back: Vec<f32> = decode(&bytes).unwrap();
            prop_assert_eq!(back.iter().map(|v| v.to_bits()).collect::<Vec<_>>(),
                            values.iter().map(|v| v.to_bits()).collect::<Vec<_>>());
        }

        #[test]
        fn f64_round_trips_into_a_slice(values in proptest::collection::vec(any::<f64>(), 0..64)) {
            let mut out = vec![0.0f64; values.len()];
            decode_into(&encode(&values), &mut out).unwrap();
            prop_assert_eq!(out.iter().map(|v| v.to_bits()).collect::<Vec<_>>(),
                            values.iter().map(|v| v.to_bits()).collect::<Vec<_>>());
        }
    }

    #[test]
    fn layout_is_little_endian() {
        assert_eq!(encode(&[1.0f32]), vec![0x00, 0x00, 0x80, 0x3f]);
    }

    #[test]
    fn wrong_lengths_are_rejected() {
        assert_eq!(decode::<f32>(&[0; 7]).unwrap_err(), WireError { len: 7, expected: 1, elem_bytes: 4 });
        let mut out = [0.0f64; 2];
        let err = decode_into(&[0; 8], &mut out).unwrap_err();
        assert_eq!(err.to_string(), "8 bytes do not hold 2 elements of 8 bytes");
    }
}
