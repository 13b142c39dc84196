//! Packing of unsigned codes of 2, 4 or 8 bits, the quantizing codecs' wire form (stochastic and
//! linear): one row's codes fill `ceil(D * b / 8)` bytes, `8 / b` consecutive codes per byte,
//! least significant bits first; the last byte's unused high bits are zero.

/// Bytes of `count` codes of `bits` bits.
pub(crate) fn packed_len(count: usize, bits: u8) -> usize {
    (count * bits as usize).div_ceil(8)
}

/// Appends `codes` (each `< 2^bits`, `bits` in {2, 4, 8}) packed to `out`.
pub(crate) fn pack(codes: &[u8], bits: u8, out: &mut Vec<u8>) {
    match bits {
        2 => pack_narrow::<2>(codes, out),
        4 => pack_narrow::<4>(codes, out),
        _ => out.extend_from_slice(codes),
    }
}

/// [`pack`] for `BITS` < 8: the packed bytes are written in place, whole bytes of `8 / BITS`
/// codes in a loop without branches, then the last partial byte.
fn pack_narrow<const BITS: usize>(codes: &[u8], out: &mut Vec<u8>) {
    let per_byte = 8 / BITS;
    let byte = |chunk: &[u8]| chunk.iter().enumerate().fold(0u8, |b, (i, &c)| b | c << (i * BITS));
    let start = out.len();
    out.resize(start + packed_len(codes.len(), BITS as u8), 0);
    let whole = codes.chunks_exact(per_byte);
    let rest = whole.remainder();
    let packed = &mut out[start..];
    for (dst, chunk) in packed.iter_mut().zip(whole) {
        *dst = byte(chunk);
    }
    if !rest.is_empty() {
        packed[packed.len() - 1] = byte(rest);
    }
}

/// Fills `codes` with the first `codes.len()` codes of a packed row.
pub(crate) fn unpack(bytes: &[u8], bits: u8, codes: &mut [u8]) {
    match bits {
        2 => unpack_narrow::<2>(bytes, codes),
        4 => unpack_narrow::<4>(bytes, codes),
        _ => codes.copy_from_slice(&bytes[..codes.len()]),
    }
}

/// [`unpack`] for `BITS` < 8: whole bytes in a loop without branches, then the last one.
fn unpack_narrow<const BITS: usize>(bytes: &[u8], codes: &mut [u8]) {
    let per_byte = 8 / BITS;
    let mask = (1u8 << BITS) - 1;
    let split =
        |chunk: &mut [u8], byte: u8| chunk.iter_mut().enumerate().for_each(|(i, c)| *c = (byte >> (i * BITS)) & mask);
    let last = codes.len() / per_byte;
    let mut whole = codes.chunks_exact_mut(per_byte);
    for (chunk, &byte) in (&mut whole).zip(bytes) {
        split(chunk, byte);
    }
    let rest = whole.into_remainder();
    if !rest.is_empty() {
        split(rest, bytes[last]);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn codes_fill_bytes_least_significant_first() {
        let mut out = Vec::new();
        pack(&[1u8, 2, 3, 0, 3], 2, &mut out);
        assert_eq!(out, [0b00_11_10_01, 0b11]);
        assert_eq!(packed_len(5, 2), 2);
        assert_eq!(packed_len(3, 4), 2);
    }

    proptest! {
        #[test]
        fn packed_codes_round_trip(bits in prop::sample::select(vec![2u8, 4, 8]), raw in prop::collection::vec(any::<u8>(), 0..40)) {
            let codes: Vec<u8> = raw.iter().map(|c| if bits == 8 { *c } else { c % (1 << bits) }).collect();
            let mut out = Vec::new();
            pack(&codes, bits, &mut out);
            prop_assert_eq!(out.len(), packed_len(codes.len(), bits));
            let mut back = vec![0u8; codes.len()];
            unpack(&out, bits, &mut back);
            prop_assert_eq!(back, codes);
        }
    }
}
