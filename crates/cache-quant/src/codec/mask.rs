//! The framing of a message that carries only some of its rows: a bitmap of the rows sent
//! (one bit per row, least significant bit first, `ceil(rows / 8)` bytes), then the payload of
//! those rows. The receiver fills the other rows from its own state.

use super::CodecError;

/// Bytes of the bitmap of `rows` rows.
pub fn mask_bytes(rows: usize) -> usize {
    rows.div_ceil(8)
}

/// Appends the bitmap of `sent` (one flag per row) to `out`.
pub fn write_mask(sent: &[bool], out: &mut Vec<u8>) {
    let start = out.len();
    out.resize(start + mask_bytes(sent.len()), 0);
    for (i, _) in sent.iter().enumerate().filter(|(_, s)| **s) {
        out[start + i / 8] |= 1 << (i % 8);
    }
}

/// Splits a message of `rows` rows into its flags and the payload after the bitmap. Bits past
/// `rows` in the last byte must be zero.
pub fn read_mask<'b>(codec: &'static str, bytes: &'b [u8], rows: usize) -> Result<(Vec<bool>, &'b [u8]), CodecError> {
    let n = mask_bytes(rows);
    if bytes.len() < n {
        return Err(CodecError::Malformed {
            codec,
            detail: format!("{} bytes cannot hold the row mask of {rows} rows ({n} bytes)", bytes.len()),
        });
    }
    let (mask, payload) = bytes.split_at(n);
    if !rows.is_multiple_of(8) && mask[n - 1] >> (rows % 8) != 0 {
        return Err(CodecError::Malformed { codec, detail: format!("row mask sets bits past row {rows}") });
    }
    Ok(((0..rows).map(|i| mask[i / 8] >> (i % 8) & 1 == 1).collect(), payload))
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;

    #[test]
    fn bits_are_least_significant_first() {
        let mut out = vec![0xEE];
        write_mask(&[true, false, false, true, false, false, false, false, true], &mut out);
        assert_eq!(out, [0xEE, 0b0000_1001, 0b1]);
    }

    #[test]
    fn short_or_overlong_masks_are_errors() {
        assert!(read_mask("t", &[0xFF], 9).is_err());
        assert!(read_mask("t", &[0b1000_0000], 7).is_err());
        let (flags, rest) = read_mask("t", &[0b0100_0000, 5], 7).unwrap();
        assert_eq!(flags, [false, false, false, false, false, false, true]);
        assert_eq!(rest, [5]);
    }

    proptest! {
        #[test]
        fn masks_round_trip(flags in proptest::collection::vec(any::<bool>(), 0..70), tail in proptest::collection::vec(any::<u8>(), 0..4)) {
            let mut out = Vec::new();
            write_mask(&flags, &mut out);
            prop_assert_eq!(out.len(), mask_bytes(flags.len()));
            out.extend(&tail);
            let (back, rest) = read_mask("t", &out, flags.len()).unwrap();
            prop_assert_eq!(back, flags);
            prop_assert_eq!(rest, &tail[..]);
        }
    }
}
