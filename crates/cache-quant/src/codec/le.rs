//! `f32` values as little-endian bytes, the wire form of every codec's floats.
//!
//! On little-endian machines the in-memory bytes of an `f32` slice already are that form, so
//! both directions are one `memcpy`; elsewhere each value is converted.

/// Appends the little-endian bytes of `values` to `out`.
pub(crate) fn extend_le(out: &mut Vec<u8>, values: &[f32]) {
    #[cfg(target_endian = "little")]
    {
        // SAFETY: `values` is a live, initialised slice of `size_of_val(values)` bytes; `u8` has
        // alignment 1 and every byte of an `f32` is a valid `u8`; the view lives only for this
        // copy, during which `values` is borrowed immutably.
        let bytes = unsafe { std::slice::from_raw_parts(values.as_ptr().cast::<u8>(), std::mem::size_of_val(values)) };
        out.extend_from_slice(bytes);
    }
    #[cfg(not(target_endian = "little"))]
    out.extend(values.iter().flat_map(|v| v.to_le_bytes()));
}

/// Fills `out` from little-endian bytes; `bytes.len()` must be `4 * out.len()` (checked by the
/// callers, which report the mismatch; here it panics).
pub(crate) fn read_le(bytes: &[u8], out: &mut [f32]) {
    assert_eq!(bytes.len(), std::mem::size_of_val(out), "read_le: byte count does not match the output");
    #[cfg(target_endian = "little")]
    {
        // SAFETY: `out` is a live, exclusively borrowed slice of `size_of_val(out)` bytes; `u8`
        // has alignment 1 and any 4 bytes are a valid `f32`, so writing arbitrary bytes through
        // this view leaves `out` holding valid values; the view is dropped before `out` is used.
        let dst = unsafe { std::slice::from_raw_parts_mut(out.as_mut_ptr().cast::<u8>(), std::mem::size_of_val(out)) };
        dst.copy_from_slice(bytes);
    }
    #[cfg(not(target_endian = "little"))]
    for (dst, chunk) in out.iter_mut().zip(bytes.chunks_exact(4)) {
        *dst = f32::from_le_bytes([chunk[0], chunk[1], chunk[2], chunk[3]]);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bytes_are_little_endian_and_round_trip() {
        let values = [1.0f32, -2.5, f32::from_bits(0x0102_0304)];
        let mut out = vec![0xAA];
        extend_le(&mut out, &values);
        assert_eq!(out[1..5], [0x00, 0x00, 0x80, 0x3f]);
        assert_eq!(out[9..13], [0x04, 0x03, 0x02, 0x01]);
        let mut back = [0.0f32; 3];
        read_le(&out[1..], &mut back);
        assert_eq!(back.map(f32::to_bits), values.map(f32::to_bits));
    }

    #[test]
    #[should_panic(expected = "byte count")]
    fn mismatched_lengths_are_refused() {
        read_le(&[0; 7], &mut [0.0; 2]);
    }
}
