//! What an epoch of mini-batch training reports under `epochs[i].method`: steps, sampled
//! vertices and edges per step, sampling time against compute time, and the label entropy of the
//! batches.

use graph_partition::Labels;
use graph_partition::sample::MiniBatch;
use serde_json::{Value, json};

/// One worker's sums over an epoch.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct EpochTotals {
    /// Steps taken (the same on every worker).
    pub steps: usize,
    /// Steps with at least one seed (a data-parallel worker's last share can be empty).
    pub batches: usize,
    /// Seed vertices trained on.
    pub seeds: usize,
    /// Loss summed over the seeds, and the number of loss terms in it.
    pub loss_sum: f64,
    pub loss_terms: f64,
    /// Per block (input layer first): source vertices, destination vertices, edges, summed.
    pub blocks: Vec<[f64; 3]>,
    /// Seconds the prefetching thread spent sampling.
    pub sampling_s: f64,
    /// Seconds training waited for a sampled batch.
    pub sampling_wait_s: f64,
    /// Seconds of forward, backward and update (neither sampling waits nor gradient sync).
    pub compute_s: f64,
    /// Seconds of the gradient all-reduce.
    pub sync_s: f64,
    /// Label entropy (bits) summed over the batches, and its minimum.
    pub entropy_sum: f64,
    pub entropy_min: f64,
}

impl EpochTotals {
    pub(crate) fn new(layers: usize) -> Self {
        Self {
            steps: 0,
            batches: 0,
            seeds: 0,
            loss_sum: 0.0,
            loss_terms: 0.0,
            blocks: vec![[0.0; 3]; layers],
            sampling_s: 0.0,
            sampling_wait_s: 0.0,
            compute_s: 0.0,
            sync_s: 0.0,
            entropy_sum: 0.0,
            entropy_min: f64::INFINITY,
        }
    }

    /// Counts a trained batch whose seeds have the first rows of `labels`.
    pub(crate) fn add_batch(&mut self, batch: &MiniBatch, labels: &Labels, loss_sum: f64, loss_terms: f64) {
        self.batches += 1;
        self.seeds += batch.seeds().len();
        self.loss_sum += loss_sum;
        self.loss_terms += loss_terms;
        for (sum, counts) in self.blocks.iter_mut().zip(batch.counts()) {
            sum[0] += counts.src_vertices as f64;
            sum[1] += counts.dst_vertices as f64;
            sum[2] += counts.edges as f64;
        }
        let entropy = label_entropy_bits(labels, batch.seeds().len());
        self.entropy_sum += entropy;
        self.entropy_min = self.entropy_min.min(entropy);
    }

    /// The values as one row of numbers, for an all-reduce of every worker's row.
    pub(crate) fn to_row(&self) -> Vec<f64> {
        let mut row = vec![
            self.steps as f64,
            self.batches as f64,
            self.seeds as f64,
            self.loss_sum,
            self.loss_terms,
            self.sampling_s,
            self.sampling_wait_s,
            self.compute_s,
            self.sync_s,
            self.entropy_sum,
            self.entropy_min,
        ];
        row.extend(self.blocks.iter().flatten());
        row
    }

    /// Reads back [`EpochTotals::to_row`].
    pub(crate) fn from_row(row: &[f64]) -> Self {
        let blocks = row[Self::FIXED..].chunks_exact(3).map(|c| [c[0], c[1], c[2]]).collect();
        Self {
            steps: row[0] as usize,
            batches: row[1] as usize,
            seeds: row[2] as usize,
            loss_sum: row[3],
            loss_terms: row[4],
            sampling_s: row[5],
            sampling_wait_s: row[6],
            compute_s: row[7],
            sync_s: row[8],
            entropy_sum: row[9],
            entropy_min: row[10],
            blocks,
        }
    }

    /// Scalar fields of a row, before the per-block ones.
    const FIXED: usize = 11;

    /// Length of a row for `layers` blocks.
    pub(crate) fn row_len(layers: usize) -> usize {
        Self::FIXED + 3 * layers
    }
}

/// The mean loss over every worker's seeds.
pub(crate) fn mean_loss(workers: &[EpochTotals]) -> f64 {
    let terms: f64 = workers.iter().map(|w| w.loss_terms).sum();
    if terms == 0.0 { 0.0 } else { workers.iter().map(|w| w.loss_sum).sum::<f64>() / terms }
}

/// The epoch's `method` fields from every worker's totals (one entry for single-process runs).
/// Per-step figures are means over the batches a worker trained on; times are the slowest
/// worker's.
pub(crate) fn epoch_json(workers: &[EpochTotals]) -> Value {
    let batches: usize = workers.iter().map(|w| w.batches).sum();
    let per_batch = |x: f64| if batches == 0 { 0.0 } else { x / batches as f64 };
    let layers = workers.first().map_or(0, |w| w.blocks.len());
    let block_sum = |l: usize, k: usize| workers.iter().map(|w| w.blocks[l][k]).sum::<f64>();
    let edges: f64 = (0..layers).map(|l| block_sum(l, 2)).sum();
    let slowest = |time: fn(&EpochTotals) -> f64| workers.iter().map(time).fold(0.0, f64::max);
    let sampling_s: f64 = workers.iter().map(|w| w.sampling_s).sum();
    let steps = workers.first().map_or(0, |w| w.steps);
    let seeds: usize = workers.iter().map(|w| w.seeds).sum();
    let blocks: Vec<Value> = (0..layers)
        .map(|l| {
            json!({
                "src_vertices": per_batch(block_sum(l, 0)),
                "dst_vertices": per_batch(block_sum(l, 1)),
                "edges": per_batch(block_sum(l, 2)),
            })
        })
        .collect();
    let entropy_min = workers.iter().map(|w| w.entropy_min).fold(f64::INFINITY, f64::min);
    json!({
        "steps": steps,
        "workers": workers.len(),
        "seeds_per_step": if steps == 0 { 0.0 } else { seeds as f64 / steps as f64 },
        "sampled_vertices_per_step": per_batch(if layers > 0 { block_sum(0, 0) } else { 0.0 }),
        "sampled_edges_per_step": per_batch(edges),
        "blocks": blocks,
        "sampling_s": slowest(|w| w.sampling_s),
        "sampling_wait_s": slowest(|w| w.sampling_wait_s),
        "compute_s": slowest(|w| w.compute_s),
        "grad_sync_s": slowest(|w| w.sync_s),
        "sampled_edges_per_s": if sampling_s > 0.0 { edges / sampling_s } else { 0.0 },
        "label_entropy_bits": {
            "mean": per_batch(workers.iter().map(|w| w.entropy_sum).sum()),
            "min": entropy_min.is_finite().then_some(entropy_min),
        },
    })
}

/// Shannon entropy (bits) of the labels of the first `rows` rows of `labels` (a batch's seeds):
/// of the class distribution for single-label data (unlabelled vertices left out), the mean
/// over label columns of the binary entropy of the positive fraction for multi-label data
/// (unknown targets left out).
pub(crate) fn label_entropy_bits(labels: &Labels, rows: usize) -> f64 {
    match labels {
        Labels::Classes(classes) => {
            let mut counts = std::collections::BTreeMap::<u32, usize>::new();
            for &c in classes[..rows].iter().filter(|&&c| c != Labels::UNLABELLED) {
                *counts.entry(c).or_default() += 1;
            }
            entropy(counts.values().copied())
        }
        Labels::MultiLabel(targets) => {
            if targets.ncols() == 0 {
                return 0.0;
            }
            let column = |col: ndarray::ArrayView1<'_, f32>| {
                let known = col.iter().filter(|t| !t.is_nan());
                let (pos, total) = known.fold((0, 0), |(p, n), &t| (p + usize::from(t > 0.5), n + 1));
                entropy([pos, total - pos].into_iter())
            };
            let seeds = targets.slice(ndarray::s![..rows, ..]);
            seeds.columns().into_iter().map(column).sum::<f64>() / targets.ncols() as f64
        }
    }
}

/// Entropy (bits) of the distribution given by `counts`.
fn entropy(counts: impl Iterator<Item = usize> + Clone) -> f64 {
    let total: usize = counts.clone().sum();
    if total == 0 {
        return 0.0;
    }
    counts
        .filter(|&c| c > 0)
        .map(|c| {
            let p = c as f64 / total as f64;
            -p * p.log2()
        })
        .sum()
}

#[cfg(test)]
mod tests {
    use ndarray::array;

    use super::*;

    #[test]
    fn entropy_of_class_and_multilabel_batches() {
        assert_eq!(label_entropy_bits(&Labels::Classes(vec![3, 3, 3]), 3), 0.0);
        assert!((label_entropy_bits(&Labels::Classes(vec![0, 1, 2, 3]), 4) - 2.0).abs() < 1e-12);
        assert_eq!(label_entropy_bits(&Labels::Classes(vec![0, 0, 2, 3]), 2), 0.0, "only the seeds count");
        let with_unlabelled = Labels::Classes(vec![0, 1, Labels::UNLABELLED]);
        assert!((label_entropy_bits(&with_unlabelled, 3) - 1.0).abs() < 1e-12);
        assert_eq!(label_entropy_bits(&Labels::Classes(vec![]), 0), 0.0);
        // Column 0 half positive (1 bit), column 1 all negative (0 bits), NaN ignored; the
        // fifth row is not a seed.
        let targets = Labels::MultiLabel(array![[1.0f32, 0.0], [0.0, f32::NAN], [1.0, 0.0], [0.0, 0.0], [1.0, 1.0]]);
        assert!((label_entropy_bits(&targets, 4) - 0.5).abs() < 1e-12);
    }

    #[test]
    fn rows_round_trip_and_merge_into_the_report_form() {
        let mut a = EpochTotals::new(2);
        a.steps = 3;
        a.batches = 3;
        a.seeds = 30;
        a.blocks = vec![[300.0, 90.0, 900.0], [90.0, 30.0, 120.0]];
        a.sampling_s = 0.5;
        a.compute_s = 2.0;
        a.entropy_sum = 3.0;
        a.entropy_min = 0.5;
        a.loss_sum = 6.0;
        a.loss_terms = 30.0;
        assert_eq!(EpochTotals::from_row(&a.to_row()), a);
        assert_eq!(a.to_row().len(), EpochTotals::row_len(2));
        let mut b = EpochTotals { compute_s: 3.0, entropy_min: 0.25, loss_sum: 4.0, ..a.clone() };
        b.seeds = 20;
        let json = epoch_json(&[a.clone(), b.clone()]);
        assert_eq!(json["steps"], 3);
        assert_eq!(json["seeds_per_step"], 50.0 / 3.0);
        assert_eq!(json["sampled_vertices_per_step"], 100.0);
        assert_eq!(json["sampled_edges_per_step"], 340.0);
        assert_eq!(json["blocks"][1]["dst_vertices"], 10.0);
        assert_eq!(json["compute_s"], 3.0);
        assert_eq!(json["sampled_edges_per_s"], 2040.0);
        assert_eq!(json["label_entropy_bits"]["min"], 0.25);
        assert_eq!(json["label_entropy_bits"]["mean"], 1.0);
        assert!((mean_loss(&[a, b]) - 10.0 / 60.0).abs() < 1e-12);
        assert_eq!(epoch_json(&[EpochTotals::new(1)])["label_entropy_bits"]["min"], Value::Null);
    }
}
