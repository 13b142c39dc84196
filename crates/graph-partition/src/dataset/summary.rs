//! Size, split and degree statistics of a dataset (what `halo datasets info` prints).

use std::fmt;

use serde::Serialize;

use super::{Dataset, Labels};
use crate::csr::Csr;

/// Row-length statistics of the adjacency (in-degrees; equal to degrees for symmetric graphs).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct DegreeStats {
    pub min: u32,
    pub max: u32,
    pub mean: f64,
    pub median: f64,
}

/// What [`Dataset::summary`] reports.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct DatasetSummary {
    pub name: String,
    pub nodes: usize,
    /// Stored adjacency entries (each undirected edge counts twice).
    pub directed_edges: usize,
    /// Distinct unordered node pairs `{u, v}` joined by an entry either way (self loops count once).
    pub undirected_edges: usize,
    pub self_loops: usize,
    pub features: usize,
    pub classes: usize,
    pub multi_label: bool,
    /// Nodes with a class (all nodes for multi-label tasks).
    pub labelled_nodes: usize,
    pub split: String,
    pub train: usize,
    pub valid: usize,
    pub test: usize,
    pub degree: DegreeStats,
}

impl DatasetSummary {
    pub(crate) fn of(d: &Dataset) -> Self {
        let (undirected_edges, self_loops) = undirected_and_loops(&d.graph);
        let labelled_nodes = match &d.labels {
            Labels::Classes(c) => c.iter().filter(|&&c| c != Labels::UNLABELLED).count(),
            Labels::MultiLabel(m) => m.nrows(),
        };
        Self {
            name: d.name.clone(),
            nodes: d.num_nodes(),
            directed_edges: d.graph.num_edges(),
            undirected_edges,
            self_loops,
            features: d.num_features(),
            classes: d.num_classes,
            multi_label: d.labels.is_multi_label(),
            labelled_nodes,
            split: d.splits.name.clone(),
            train: d.splits.train.len(),
            valid: d.splits.valid.len(),
            test: d.splits.test.len(),
            degree: DegreeStats::of(&d.graph.degrees()),
        }
    }
}

/// Counts unordered pairs: an entry `(v, u)` with `u < v` always, with `u > v` only when the
/// reverse entry is missing, and every self loop once.
pub(crate) fn undirected_and_loops(g: &Csr) -> (usize, usize) {
    use rayon::prelude::*;
    (0..g.num_rows())
        .into_par_iter()
        .map(|v| {
            let mut pairs = 0;
            let mut loops = 0;
            for &u in g.neighbors(v) {
                let u = u as usize;
                if u == v {
                    loops += 1;
                    pairs += 1;
                } else if u < v || u >= g.num_rows() || g.neighbors(u).binary_search(&(v as u32)).is_err() {
                    pairs += 1;
                }
            }
            (pairs, loops)
        })
        .reduce(|| (0, 0), |a, b| (a.0 + b.0, a.1 + b.1))
}

impl DegreeStats {
    /// Statistics of a list of degrees (all zero for an empty list).
    pub fn of(degrees: &[u32]) -> Self {
        if degrees.is_empty() {
            return Self { min: 0, max: 0, mean: 0.0, median: 0.0 };
        }
        let mut sorted = degrees.to_vec();
        let mid = sorted.len() / 2;
        let (below, &mut upper, _) = sorted.select_nth_unstable(mid);
        let median = if degrees.len() % 2 == 1 {
            upper as f64
        } else {
            let lower = *below.iter().max().expect("even length >= 2 leaves a lower half");
            (lower as f64 + upper as f64) / 2.0
        };
        let sum: u64 = degrees.iter().map(|&d| d as u64).sum();
        Self {
            min: *degrees.iter().min().expect("non-empty"),
            max: *degrees.iter().max().expect("non-empty"),
            mean: sum as f64 / degrees.len() as f64,
            median,
        }
    }
}

impl fmt::Display for DatasetSummary {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let kind = if self.multi_label { "label columns (multi-label)" } else { "classes" };
        writeln!(f, "dataset   {}", self.name)?;
        writeln!(f, "nodes     {}", self.nodes)?;
        writeln!(
            f,
            "edges     {} undirected, {} directed (stored entries)",
            self.undirected_edges, self.directed_edges
        )?;
        if self.self_loops > 0 {
            writeln!(f, "loops     {}", self.self_loops)?;
        }
        writeln!(f, "features  {}", self.features)?;
        writeln!(f, "classes   {} {kind}, {} labelled nodes", self.classes, self.labelled_nodes)?;
        writeln!(f, "split     {}: train {}, valid {}, test {}", self.split, self.train, self.valid, self.test)?;
        write!(
            f,
            "degree    min {}, max {}, mean {:.2}, median {}",
            self.degree.min, self.degree.max, self.degree.mean, self.degree.median
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::csr::EdgeListOptions;

    #[test]
    fn degree_stats() {
        let s = DegreeStats::of(&[3, 1, 2, 10]);
        assert_eq!((s.min, s.max, s.mean, s.median), (1, 10, 4.0, 2.5));
        assert_eq!(DegreeStats::of(&[5, 1, 3]).median, 3.0);
        assert_eq!(DegreeStats::of(&[]).max, 0);
    }

    #[test]
    fn undirected_counts_directed_graphs_too() {
        let raw = EdgeListOptions { symmetrize: false, remove_self_loops: false };
        // 0->1 and 1->0 are one pair; 1->2 one pair; 2->2 a loop.
        let g = Csr::from_edges(3, &[(0, 1), (1, 0), (1, 2), (2, 2)], raw).unwrap();
        assert_eq!(undirected_and_loops(&g), (3, 1));
        let sym = Csr::from_edges(3, &[(0, 1), (1, 2)], EdgeListOptions::default()).unwrap();
        assert_eq!(undirected_and_loops(&sym), (2, 0));
    }
}
