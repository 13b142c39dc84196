//! Feature-cut: split the feature columns into contiguous ranges.

use std::ops::Range;

use super::PartitionError;

/// Splits `features` columns into `parts` contiguous ranges whose sizes differ by at most
/// one (the first `features % parts` ranges get the extra column).
pub fn feature_cut(features: usize, parts: usize) -> Result<Vec<Range<usize>>, PartitionError> {
    if parts == 0 || parts > features {
        return Err(PartitionError::FeatureParts { features, parts });
    }
    let (base, extra) = (features / parts, features % parts);
    let mut start = 0;
    Ok((0..parts)
        .map(|i| {
            let len = base + usize::from(i < extra);
            start += len;
            start - len..start
        })
        .collect())
}

/// Column ranges must tile `0..end` in order, each non-empty.
pub(super) fn check_columns(columns: &[Range<usize>]) -> Result<(), PartitionError> {
    let mut expected_start = 0;
    for (index, r) in columns.iter().enumerate() {
        if r.start != expected_start || r.end <= r.start {
            return Err(PartitionError::FeatureColumns { index, start: r.start, end: r.end });
        }
        expected_start = r.end;
    }
    if columns.is_empty() {
        return Err(PartitionError::FeatureParts { features: 0, parts: 0 });
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ranges_are_even_and_contiguous() {
        assert_eq!(feature_cut(1433, 4).unwrap(), [0..359, 359..717, 717..1075, 1075..1433]);
        assert_eq!(feature_cut(3, 3).unwrap(), [0..1, 1..2, 2..3]);
        assert_eq!(feature_cut(3, 4), Err(PartitionError::FeatureParts { features: 3, parts: 4 }));
        assert_eq!(feature_cut(3, 0), Err(PartitionError::FeatureParts { features: 3, parts: 0 }));
        check_columns(&feature_cut(10, 3).unwrap()).unwrap();
        assert_eq!(check_columns(&[0..2, 3..4]), Err(PartitionError::FeatureColumns { index: 1, start: 3, end: 4 }));
    }
}
