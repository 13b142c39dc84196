//! What a run trains the model to predict: the loss and the accuracy for the dataset's labels.
//!
//! Everything here returns sums and counts over a set of rows, never means, so a distributed
//! strategy can add them across workers and divide by the global count.
//!
//! - Single-label: softmax cross-entropy; accuracy = fraction of rows whose arg-max is the class.
//! - Multi-label: sigmoid binary cross-entropy over every label column; accuracy = element-wise
//!   accuracy over (row, label) pairs with a logit > 0 predicting 1 (not ROC-AUC, which does not
//!   add up across workers).

use std::ops::Add;

use crate::loss::{
    LossError, bce_with_logits_in_place, count_correct, multilabel_counts, softmax_cross_entropy_in_place,
};
use graph_partition::Labels;
use ndarray::{Array2, Axis};

/// Loss and accuracy for one kind of labels.
#[derive(Debug, Clone, Copy)]
pub enum Objective<'a> {
    /// One class per node.
    Classes(&'a [u32]),
    /// One 0/1 target per node and label column.
    MultiLabel(&'a Array2<f32>),
}

/// Correct predictions out of a total (both add up across workers).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Hits {
    /// Correct predictions.
    pub correct: u64,
    /// Predictions made.
    pub total: u64,
}

impl Hits {
    /// `correct / total`, 0 when nothing was predicted.
    pub fn fraction(self) -> f64 {
        if self.total == 0 { 0.0 } else { self.correct as f64 / self.total as f64 }
    }
}

impl Add for Hits {
    type Output = Self;

    fn add(self, o: Self) -> Self {
        Self { correct: self.correct + o.correct, total: self.total + o.total }
    }
}

impl<'a> Objective<'a> {
    /// The objective matching a dataset's labels.
    pub fn new(labels: &'a Labels) -> Self {
        match labels {
            Labels::Classes(classes) => Self::Classes(classes),
            Labels::MultiLabel(targets) => Self::MultiLabel(targets),
        }
    }

    /// The labels of the vertices `ids` (a mini-batch's seeds), in that order: row `i` of the
    /// result is vertex `ids[i]`'s.
    pub fn select(&self, ids: &[u32]) -> Labels {
        match self {
            Self::Classes(classes) => Labels::Classes(ids.iter().map(|&v| classes[v as usize]).collect()),
            Self::MultiLabel(targets) => {
                let rows: Vec<usize> = ids.iter().map(|&v| v as usize).collect();
                Labels::MultiLabel(targets.select(Axis(0), &rows))
            }
        }
    }

    /// Loss terms contributed by one row: divide a loss sum by `rows x terms_per_row` for the mean.
    pub fn terms_per_row(&self) -> usize {
        match self {
            Self::Classes(_) => 1,
            Self::MultiLabel(targets) => targets.ncols(),
        }
    }

    /// The loss summed over `rows` (each listed once); turns `logits` into its gradient (zero
    /// outside `rows`), so that the logits and their gradient are one buffer.
    pub fn loss_sum(&self, logits: &mut Array2<f32>, rows: &[u32]) -> Result<f64, LossError> {
        match self {
            Self::Classes(classes) => softmax_cross_entropy_in_place(logits, classes, rows),
            Self::MultiLabel(targets) => bce_with_logits_in_place(logits, targets, rows),
        }
    }

    /// Correct predictions over `rows`.
    pub fn hits(&self, logits: &Array2<f32>, rows: &[u32]) -> Result<Hits, LossError> {
        Ok(match self {
            Self::Classes(classes) => {
                Hits { correct: count_correct(logits, classes, rows)? as u64, total: rows.len() as u64 }
            }
            Self::MultiLabel(targets) => {
                let c = multilabel_counts(logits, targets, rows)?;
                Hits { correct: c.true_pos + c.true_neg, total: c.true_pos + c.true_neg + c.false_pos + c.false_neg }
            }
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use ndarray::array;

    #[test]
    fn class_hits_use_the_argmax() {
        let logits = array![[2.0f32, 1.0], [0.0, 3.0], [5.0, 4.0]];
        let labels = Labels::Classes(vec![0, 0, 0]);
        let obj = Objective::new(&labels);
        assert_eq!(obj.hits(&logits, &[0, 1, 2]).unwrap(), Hits { correct: 2, total: 3 });
        assert_eq!(obj.hits(&logits, &[1]).unwrap().fraction(), 0.0);
        assert_eq!(obj.terms_per_row(), 1);
    }

    #[test]
    fn multilabel_hits_count_label_pairs() {
        let logits = array![[1.0f32, -1.0, 2.0], [-1.0, -1.0, -1.0]];
        let labels = Labels::MultiLabel(array![[1.0f32, 0.0, 0.0], [0.0, 1.0, 0.0]]);
        let obj = Objective::new(&labels);
        assert_eq!(obj.hits(&logits, &[0, 1]).unwrap(), Hits { correct: 4, total: 6 });
        assert_eq!(obj.terms_per_row(), 3);
        let mut grad = logits.clone();
        let sum = obj.loss_sum(&mut grad, &[0]).unwrap();
        assert!(sum > 0.0 && grad.row(1).iter().all(|&g| g == 0.0));
    }

    #[test]
    fn select_gathers_rows_in_order() {
        let classes = Labels::Classes(vec![4, 5, 6]);
        assert_eq!(Objective::new(&classes).select(&[2, 0]), Labels::Classes(vec![6, 4]));
        let targets = Labels::MultiLabel(array![[1.0f32, 0.0], [0.0, 1.0]]);
        assert_eq!(Objective::new(&targets).select(&[1]), Labels::MultiLabel(array![[0.0f32, 1.0]]));
    }

    #[test]
    fn hits_add_and_empty_sets_score_zero() {
        let h = Hits { correct: 1, total: 2 } + Hits { correct: 3, total: 6 };
        assert_eq!(h, Hits { correct: 4, total: 8 });
        assert_eq!(h.fraction(), 0.5);
        assert_eq!(Hits::default().fraction(), 0.0);
    }
}
