//! Packing of unsigned codes of 2, 4 or 8 bits: one row's codes fill `ceil(D * b / 8)` bytes,
//! `8 / b` consecutive codes per byte, least significant bits first; the last byte's unused high
//! bits are zero.

/// Bytes of `count` codes of `bits` bits.
pub(crate) fn packed_len(count: usize, bits: u8) -> usize {
    (count * bits as usize).div_ceil(8)
}

/// Appends `codes` (each `< 2^bits`, `bits` in {2, 4, 8}) packed to `out`.
pub(crate) fn pack(codes: impl Iterator<Item = u8>, bits: u8, out: &mut Vec<u8>) {
    let per_byte = 8 / bits as usize;
    let (mut byte, mut filled) = (0u8, 0usize);
    for code in codes {
        byte |= code << (filled * bits as usize);
        filled += 1;
        if filled == per_byte {
            out.push(byte);
            (byte, filled) = (0, 0);
        }
    }
    if filled > 0 {
        out.push(byte);
    }
}

/// The `i`-th code of a packed row.
#[inline]
pub(crate) fn unpack(bytes: &[u8], bits: u8, i: usize) -> u8 {
    let per_byte = 8 / bits as usize;
    let shift = (i % per_byte) * bits as usize;
    let mask = if bits == 8 { u8::MAX } else { (1u8 << bits) - 1 };
    (bytes[i / per_byte] >> shift) & mask
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn codes_fill_bytes_least_significant_first() {
        let mut out = Vec::new();
        pack([1u8, 2, 3, 0, 3].into_iter(), 2, &mut out);
        assert_eq!(out, [0b00_11_10_01, 0b11]);
        assert_eq!(packed_len(5, 2), 2);
        assert_eq!(packed_len(3, 4), 2);
    }

    proptest! {
        #[test]
        fn packed_codes_round_trip(bits in prop::sample::select(vec![2u8, 4, 8]), raw in prop::collection::vec(any::<u8>(), 0..40)) {
            let codes: Vec<u8> = raw.iter().map(|c| if bits == 8 { *c } else { c % (1 << bits) }).collect();
            let mut out = Vec::new();
            pack(codes.iter().copied(), bits, &mut out);
            prop_assert_eq!(out.len(), packed_len(codes.len(), bits));
            let back: Vec<u8> = (0..codes.len()).map(|i| unpack(&out, bits, i)).collect();
            prop_assert_eq!(back, codes);
        }
    }
}
