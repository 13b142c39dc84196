//! Number parsing for the CSV files. Feature files hold hundreds of millions of decimals, so
//! the common short form (`-12.345678`) takes a hand-rolled exact path; everything else
//! (exponents, long mantissas, `inf`, surrounding spaces) falls back to the standard library.

/// Unsigned decimal integer; surrounding ASCII spaces are tolerated.
#[inline]
pub(crate) fn parse_u64(token: &str) -> Option<u64> {
    digits_u64(token.as_bytes()).or_else(|| digits_u64(token.trim().as_bytes()))
}

#[inline]
fn digits_u64(bytes: &[u8]) -> Option<u64> {
    if bytes.is_empty() || bytes.len() > 20 {
        return None;
    }
    let mut value: u64 = 0;
    for &b in bytes {
        let digit = b.wrapping_sub(b'0');
        if digit > 9 {
            return None;
        }
        value = value.checked_mul(10)?.checked_add(digit as u64)?;
    }
    Some(value)
}

/// `f32` with the same result as `str::parse::<f32>` (after trimming spaces), bit for bit.
#[inline]
pub(crate) fn parse_f32(token: &str) -> Option<f32> {
    fast_f32(token.as_bytes()).or_else(|| token.trim().parse().ok())
}

/// Powers of ten exactly representable in `f64`, for the fast path.
const POW10: [f64; 9] = [1e0, 1e1, 1e2, 1e3, 1e4, 1e5, 1e6, 1e7, 1e8];

/// Exact parse of `[-+]?digits[.digits]` when the value has at most 7 integer digits, at most
/// 8 fraction digits and at most 15 significant digits; `None` otherwise.
///
/// Why this is correctly rounded: the mantissa `m < 2^53` and `10^k` (k <= 8) are exact in
/// `f64`, so `m / 10^k` is the correctly rounded `f64` of the decimal `d`. Rounding that `f64`
/// again to `f32` could only differ from rounding `d` directly if the `f64` rounding moved `d`
/// across (or onto) an `f32` rounding midpoint `M`. Values below `2^24` have midpoints
/// `M = odd * 2^e` with `odd < 2^25`, `e < 0`, and `d - M` is a non-zero multiple of
/// `1 / (10^k * 2^-e)`, so `|d - M| / M >= 1 / (10^k * 2^25) > 2^-53` for `k <= 8`, which
/// exceeds the `f64` relative rounding error `2^-53`.
#[inline]
fn fast_f32(bytes: &[u8]) -> Option<f32> {
    let (negative, rest) = match bytes.first() {
        Some(b'-') => (true, &bytes[1..]),
        Some(b'+') => (false, &bytes[1..]),
        _ => (false, bytes),
    };
    let mut mantissa: u64 = 0;
    let mut significant = 0u32;
    let mut int_digits = 0usize;
    let mut i = 0;
    while i < rest.len() && rest[i].is_ascii_digit() {
        mantissa = mantissa * 10 + (rest[i] - b'0') as u64;
        significant += (mantissa != 0) as u32;
        int_digits += 1;
        i += 1;
        if int_digits > 7 {
            return None;
        }
    }
    let mut frac_digits = 0usize;
    if i < rest.len() && rest[i] == b'.' {
        i += 1;
        while i < rest.len() && rest[i].is_ascii_digit() {
            mantissa = mantissa * 10 + (rest[i] - b'0') as u64;
            significant += (mantissa != 0) as u32;
            frac_digits += 1;
            i += 1;
            if frac_digits > 8 || significant > 15 {
                return None;
            }
        }
    }
    if i != rest.len() || int_digits + frac_digits == 0 {
        return None;
    }
    let magnitude = (mantissa as f64 / POW10[frac_digits]) as f32;
    Some(if negative { -magnitude } else { magnitude })
}

/// A single-label class: a non-negative integer (also written `3.0`), or `nan` for
/// "unlabelled", which becomes `u32::MAX`.
#[inline]
pub(crate) fn parse_class(token: &str) -> Option<u32> {
    if let Some(v) = parse_u64(token) {
        return u32::try_from(v).ok().filter(|&c| c != u32::MAX);
    }
    let value: f64 = token.trim().parse().ok()?;
    if value.is_nan() {
        return Some(u32::MAX);
    }
    let in_range = value >= 0.0 && value < u32::MAX as f64 && value.fract() == 0.0;
    in_range.then_some(value as u32)
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;

    #[test]
    fn integers() {
        assert_eq!(parse_u64("0"), Some(0));
        assert_eq!(parse_u64("18446744073709551615"), Some(u64::MAX));
        assert_eq!(parse_u64("18446744073709551616"), None);
        assert_eq!(parse_u64(" 42 "), Some(42));
        assert_eq!(parse_u64("-1"), None);
        assert_eq!(parse_u64("4x"), None);
        assert_eq!(parse_u64(""), None);
    }

    #[test]
    fn floats_fast_and_fallback() {
        for s in ["0", "-0", "1", "0.5", "-12.345678", "1e-3", "3.4028235e38", "inf", "-inf", " 2.5", ".5", "5."] {
            assert_eq!(parse_f32(s).map(f32::to_bits), s.trim().parse::<f32>().ok().map(f32::to_bits), "{s}");
        }
        assert!(parse_f32("nan").unwrap().is_nan());
        for s in ["", "-", ".", "1.2.3", "abc", "1,5"] {
            assert_eq!(parse_f32(s), None, "{s}");
        }
    }

    #[test]
    fn classes() {
        assert_eq!(parse_class("3"), Some(3));
        assert_eq!(parse_class("3.0"), Some(3));
        assert_eq!(parse_class("nan"), Some(u32::MAX));
        assert_eq!(parse_class("NaN"), Some(u32::MAX));
        assert_eq!(parse_class("-1"), None);
        assert_eq!(parse_class("2.5"), None);
        assert_eq!(parse_class("4294967295"), None);
        assert_eq!(parse_class("x"), None);
    }

    proptest! {
        /// The fast path agrees bit for bit with the standard parser on short decimals, where
        /// it applies, including the hardest cases near f32 rounding midpoints.
        #[test]
        fn fast_path_matches_std(int in 0u64..10_000_000, frac in 0u64..100_000_000, digits in 0usize..=8, neg in any::<bool>()) {
            let frac_str = format!("{frac:08}");
            let s = if digits == 0 {
                format!("{}{int}", if neg { "-" } else { "" })
            } else {
                format!("{}{int}.{}", if neg { "-" } else { "" }, &frac_str[..digits])
            };
            prop_assert_eq!(parse_f32(&s).map(f32::to_bits), s.parse::<f32>().ok().map(f32::to_bits), "{}", s);
        }

        #[test]
        fn shortest_repr_round_trips(bits in any::<u32>()) {
            let x = f32::from_bits(bits);
            prop_assume!(x.is_finite());
            let s = x.to_string();
            prop_assert_eq!(parse_f32(&s).map(f32::to_bits), Some(bits), "{}", s);
        }

        #[test]
        fn midpoint_neighbours(bits in 0x3380_0000u32..0x4b7f_ffff, nudge in -3i64..=3) {
            // Decimal strings with 8 fraction digits just around a midpoint between two floats.
            let lo = f32::from_bits(bits) as f64;
            let hi = f32::from_bits(bits + 1) as f64;
            let mid = (lo + hi) / 2.0;
            let scaled = (mid * 1e8).round() as i64 + nudge;
            prop_assume!(scaled >= 0);
            let s = format!("{}.{:08}", scaled / 100_000_000, scaled % 100_000_000);
            prop_assert_eq!(parse_f32(&s).map(f32::to_bits), s.parse::<f32>().ok().map(f32::to_bits), "{}", s);
        }
    }
}
