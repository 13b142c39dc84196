//! Losses and accuracy counts over a subset of rows (a worker's share of the training or
//! evaluation set). Everything returns *sums*, so a distributed trainer adds them across workers
//! and divides by the global count; gradients are those of the sums.

use ndarray::Array2;

/// Why a loss could not be computed; names the offending row, label or shape.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum LossError {
    #[error("labels has {got} entries, expected one per logits row ({rows})")]
    LabelsLength { got: usize, rows: usize },
    #[error("row {row} is out of range: logits have {rows} rows")]
    RowOutOfRange { row: u32, rows: usize },
    #[error("row {row} has label {label}, but the logits have {classes} classes")]
    LabelOutOfRange { row: u32, label: u32, classes: usize },
    #[error("row {row} is listed twice")]
    RowTwice { row: u32 },
    #[error("targets are {got_rows} x {got_cols}, expected the logits' shape {rows} x {cols}")]
    TargetsShape { got_rows: usize, got_cols: usize, rows: usize, cols: usize },
}

fn check_rows(rows: &[u32], n: usize) -> Result<(), LossError> {
    match rows.iter().find(|&&r| r as usize >= n) {
        Some(&row) => Err(LossError::RowOutOfRange { row, rows: n }),
        None => Ok(()),
    }
}

fn check_labels(logits: &Array2<f32>, labels: &[u32], rows: &[u32]) -> Result<(), LossError> {
    let (n, classes) = logits.dim();
    if labels.len() != n {
        return Err(LossError::LabelsLength { got: labels.len(), rows: n });
    }
    check_rows(rows, n)?;
    match rows.iter().find(|&&r| labels[r as usize] as usize >= classes) {
        Some(&row) => Err(LossError::LabelOutOfRange { row, label: labels[row as usize], classes }),
        None => Ok(()),
    }
}

fn check_targets(logits: &Array2<f32>, targets: &Array2<f32>, rows: &[u32]) -> Result<(), LossError> {
    if targets.dim() != logits.dim() {
        let ((got_rows, got_cols), (r, c)) = (targets.dim(), logits.dim());
        return Err(LossError::TargetsShape { got_rows, got_cols, rows: r, cols: c });
    }
    check_rows(rows, logits.nrows())
}

/// Softmax cross-entropy summed over `rows` (each listed once), with `labels[r]` the class of
/// logits row `r`. Returns the sum and its gradient (zero outside `rows`); divide both by the
/// global number of rows for the mean loss (`torch.nn.functional.cross_entropy`).
pub fn softmax_cross_entropy(
    logits: &Array2<f32>,
    labels: &[u32],
    rows: &[u32],
) -> Result<(f64, Array2<f32>), LossError> {
    let mut grad = logits.clone();
    let total = softmax_cross_entropy_in_place(&mut grad, labels, rows)?;
    Ok((total, grad))
}

/// [`softmax_cross_entropy`] that turns `logits` into the gradient: a trainer's largest
/// per-vertex buffer besides the activations need not exist twice (backward never reads the
/// logits). On an error `logits` is unchanged.
pub fn softmax_cross_entropy_in_place(
    logits: &mut Array2<f32>,
    labels: &[u32],
    rows: &[u32],
) -> Result<f64, LossError> {
    check_labels(logits, labels, rows)?;
    let listed = listed_once(rows, logits.nrows())?;
    let mut total = 0.0f64;
    for &r in rows {
        let (mut row, label) = (logits.row_mut(r as usize), labels[r as usize] as usize);
        let max = row.iter().copied().fold(f32::NEG_INFINITY, f32::max);
        let sum: f64 = row.iter().map(|&v| f64::from(v - max).exp()).sum();
        total += sum.ln() - f64::from(row[label] - max);
        for v in row.iter_mut() {
            *v = (f64::from(*v - max).exp() / sum) as f32;
        }
        row[label] -= 1.0;
    }
    zero_unlisted(logits, &listed);
    Ok(total)
}

/// Which rows `rows` lists, checking that none is listed twice (in place, a second visit
/// would read the gradient the first one wrote).
fn listed_once(rows: &[u32], n: usize) -> Result<Vec<bool>, LossError> {
    let mut listed = vec![false; n];
    for &r in rows {
        if std::mem::replace(&mut listed[r as usize], true) {
            return Err(LossError::RowTwice { row: r });
        }
    }
    Ok(listed)
}

fn zero_unlisted(grad: &mut Array2<f32>, listed: &[bool]) {
    for (mut row, _) in grad.rows_mut().into_iter().zip(listed).filter(|(_, l)| !**l) {
        row.fill(0.0);
    }
}

/// Sigmoid binary cross-entropy with logits (multi-label), summed over `rows` (each listed
/// once) and all columns; `targets` in `[0, 1]`, same shape as `logits`. Divide by `global rows x
/// classes` for `torch.nn.BCEWithLogitsLoss`'s mean.
pub fn bce_with_logits(
    logits: &Array2<f32>,
    targets: &Array2<f32>,
    rows: &[u32],
) -> Result<(f64, Array2<f32>), LossError> {
    let mut grad = logits.clone();
    let total = bce_with_logits_in_place(&mut grad, targets, rows)?;
    Ok((total, grad))
}

/// [`bce_with_logits`] that turns `logits` into the gradient (see
/// [`softmax_cross_entropy_in_place`]). On an error `logits` is unchanged.
pub fn bce_with_logits_in_place(
    logits: &mut Array2<f32>,
    targets: &Array2<f32>,
    rows: &[u32],
) -> Result<f64, LossError> {
    check_targets(logits, targets, rows)?;
    let listed = listed_once(rows, logits.nrows())?;
    let mut total = 0.0f64;
    for &r in rows {
        let r = r as usize;
        for (x, &t) in logits.row_mut(r).iter_mut().zip(targets.row(r).iter()) {
            let (x64, t64) = (f64::from(*x), f64::from(t));
            // Stable form: max(x, 0) - x t + ln(1 + e^-|x|).
            total += x64.max(0.0) - x64 * t64 + (-x64.abs()).exp().ln_1p();
            *x = (1.0 / (1.0 + (-x64).exp()) - t64) as f32;
        }
    }
    zero_unlisted(logits, &listed);
    Ok(total)
}

/// Number of `rows` whose arg-max logit (first on ties) equals the label.
pub fn count_correct(logits: &Array2<f32>, labels: &[u32], rows: &[u32]) -> Result<usize, LossError> {
    check_labels(logits, labels, rows)?;
    Ok(rows
        .iter()
        .filter(|&&r| {
            let row = logits.row(r as usize);
            let best = row.iter().enumerate().fold(0, |best, (j, &v)| if v > row[best] { j } else { best });
            best == labels[r as usize] as usize
        })
        .count())
}

/// Multi-label confusion counts (prediction: logit > 0, truth: target > 0.5); they add up across
/// workers, and [`MultiLabelCounts::micro_f1`] turns the totals into the usual metric.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct MultiLabelCounts {
    pub true_pos: u64,
    pub false_pos: u64,
    pub false_neg: u64,
    pub true_neg: u64,
}

impl MultiLabelCounts {
    /// `2 TP / (2 TP + FP + FN)`; 1 when there is nothing to find and nothing was predicted.
    pub fn micro_f1(&self) -> f64 {
        let denom = 2 * self.true_pos + self.false_pos + self.false_neg;
        if denom == 0 { 1.0 } else { (2 * self.true_pos) as f64 / denom as f64 }
    }

    /// Element-wise accuracy `(TP + TN) / all`.
    pub fn accuracy(&self) -> f64 {
        let all = self.true_pos + self.false_pos + self.false_neg + self.true_neg;
        if all == 0 { 0.0 } else { (self.true_pos + self.true_neg) as f64 / all as f64 }
    }
}

impl std::ops::Add for MultiLabelCounts {
    type Output = Self;

    fn add(self, o: Self) -> Self {
        Self {
            true_pos: self.true_pos + o.true_pos,
            false_pos: self.false_pos + o.false_pos,
            false_neg: self.false_neg + o.false_neg,
            true_neg: self.true_neg + o.true_neg,
        }
    }
}

/// Confusion counts of multi-label predictions over `rows`.
pub fn multilabel_counts(
    logits: &Array2<f32>,
    targets: &Array2<f32>,
    rows: &[u32],
) -> Result<MultiLabelCounts, LossError> {
    check_targets(logits, targets, rows)?;
    let mut c = MultiLabelCounts::default();
    for &r in rows {
        for (&x, &t) in logits.row(r as usize).iter().zip(targets.row(r as usize).iter()) {
            match (x > 0.0, t > 0.5) {
                (true, true) => c.true_pos += 1,
                (true, false) => c.false_pos += 1,
                (false, true) => c.false_neg += 1,
                (false, false) => c.true_neg += 1,
            }
        }
    }
    Ok(c)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn logits() -> Array2<f32> {
        Array2::from_shape_vec((3, 3), vec![2.0, 1.0, 0.1, -1.0, 3.0, 0.5, 0.3, 0.3, 0.3]).unwrap()
    }

    /// Central differences of `loss(logits)` against the returned gradient.
    fn check_grad(f: impl Fn(&Array2<f32>) -> (f64, Array2<f32>), x: &Array2<f32>) {
        let (_, g) = f(x);
        for idx in 0..x.len() {
            let eps = 1e-3f32;
            let (mut p, mut m) = (x.clone(), x.clone());
            p.as_slice_mut().unwrap()[idx] += eps;
            m.as_slice_mut().unwrap()[idx] -= eps;
            let fd = (f(&p).0 - f(&m).0) / (2.0 * f64::from(eps));
            let an = f64::from(g.as_slice().unwrap()[idx]);
            assert!((fd - an).abs() < 1e-3, "entry {idx}: fd {fd} vs {an}");
        }
    }

    #[test]
    fn cross_entropy_value_and_gradient() {
        let x = logits();
        let labels = [0, 1, 2];
        let (loss, g) = softmax_cross_entropy(&x, &labels, &[0, 2]).unwrap();
        let p0 = (2.0f64).exp() / ((2.0f64).exp() + 1f64.exp() + 0.1f64.exp());
        let want = -p0.ln() + 3f64.ln();
        assert!((loss - want).abs() < 1e-6, "{loss} vs {want}");
        assert!(g.row(1).iter().all(|&v| v == 0.0), "rows not listed get no gradient");
        check_grad(|x| softmax_cross_entropy(x, &labels, &[0, 1, 2]).unwrap(), &x);
    }

    #[test]
    fn in_place_losses_refuse_a_row_listed_twice_and_leave_the_logits_alone_on_errors() {
        let t = Array2::zeros((3, 3));
        let mut x = logits();
        assert_eq!(softmax_cross_entropy_in_place(&mut x, &[0, 1, 2], &[2, 0, 2]), Err(LossError::RowTwice { row: 2 }));
        assert_eq!(bce_with_logits_in_place(&mut x, &t, &[1, 1]), Err(LossError::RowTwice { row: 1 }));
        assert!(matches!(
            softmax_cross_entropy_in_place(&mut x, &[0, 7, 2], &[0, 1]),
            Err(LossError::LabelOutOfRange { row: 1, label: 7, classes: 3 })
        ));
        assert_eq!(x, logits());
        let loss = softmax_cross_entropy_in_place(&mut x, &[0, 1, 2], &[0, 2]).unwrap();
        assert_eq!((loss, x), softmax_cross_entropy(&logits(), &[0, 1, 2], &[0, 2]).unwrap());
    }

    #[test]
    fn bce_value_and_gradient() {
        let x = logits();
        let t = Array2::from_shape_vec((3, 3), vec![1.0, 0.0, 1.0, 0.0, 1.0, 0.0, 1.0, 1.0, 0.0]).unwrap();
        let (loss, _) = bce_with_logits(&x, &t, &[1]).unwrap();
        let want: f64 = [(-1.0f64, 0.0), (3.0, 1.0), (0.5, 0.0)]
            .iter()
            .map(|&(x, t)| {
                let p = 1.0 / (1.0 + (-x).exp());
                -(t * p.ln() + (1.0 - t) * (1.0 - p).ln())
            })
            .sum();
        assert!((loss - want).abs() < 1e-6);
        check_grad(|x| bce_with_logits(x, &t, &[0, 1, 2]).unwrap(), &x);
    }

    #[test]
    fn counts_and_errors() {
        let x = logits();
        assert_eq!(count_correct(&x, &[0, 1, 2], &[0, 1, 2]).unwrap(), 2, "ties pick the first class");
        assert_eq!(
            softmax_cross_entropy(&x, &[0, 1, 7], &[2]).unwrap_err(),
            LossError::LabelOutOfRange { row: 2, label: 7, classes: 3 }
        );
        assert_eq!(count_correct(&x, &[0, 1, 2], &[3]).unwrap_err(), LossError::RowOutOfRange { row: 3, rows: 3 });
        assert_eq!(count_correct(&x, &[0], &[0]).unwrap_err(), LossError::LabelsLength { got: 1, rows: 3 });
        let t = Array2::from_shape_vec((3, 3), vec![1.0, 0.0, 1.0, 0.0, 1.0, 0.0, 1.0, 1.0, 0.0]).unwrap();
        let c = multilabel_counts(&x, &t, &[0, 1, 2]).unwrap();
        assert_eq!(c, MultiLabelCounts { true_pos: 5, false_pos: 3, false_neg: 0, true_neg: 1 });
        assert!((c.micro_f1() - 10.0 / 13.0).abs() < 1e-12);
        assert!((c.accuracy() - 6.0 / 9.0).abs() < 1e-12);
        assert_eq!((c + c).true_pos, 10);
        let bad = Array2::zeros((2, 3));
        assert!(matches!(bce_with_logits(&x, &bad, &[0]), Err(LossError::TargetsShape { got_rows: 2, .. })));
    }
}
