//! Seeded synthetic node-classification datasets for tests and benchmarks.
//!
//! The model (every draw keyed by the seed through [`crate::rng`], so the output does not
//! depend on the thread count):
//! - **Degrees**: Chung-Lu. Node `v` gets a Pareto weight `w_v = u^(-1/(gamma-1))` with
//!   `gamma = 2.5` (a power-law degree tail), capped so no expected degree exceeds
//!   `sqrt(nodes * avg_degree)` (the structural cut-off that keeps hub pairs from needing
//!   multi-edges). Each node sources about `w_v / sum(w) * edges` edges (stochastic
//!   rounding) and each edge picks its target proportionally to `w` among the nodes allowed
//!   by the rules below. Duplicates and self
//!   loops are dropped and edges are topped up until the undirected edge count reaches
//!   `nodes * avg_degree / 2` (within 1%, or after a few rounds for graphs too small for it).
//! - **Classes**: balanced (`nodes / classes` each, randomly placed). With probability
//!   `homophily` an edge's target has the source's class, otherwise a different class, so
//!   the fraction of intra-class edges is about `homophily`.
//! - **Communities** (`communities = Some(k)`): balanced random groups, independent of the
//!   classes (not aligned: a community mixes all classes, so structure and labels are
//!   separate signals). A fraction `intra_community` of edges stays inside the source's
//!   community, the rest leaves it; homophily applies within both.
//! - **Features**: class centroid plus unit Gaussian noise; centroids are Gaussian with
//!   spread chosen so two class centroids lie [`FEATURE_SEPARATION`] noise deviations apart
//!   whatever the width: features alone classify noisily, neighbours sharpen it. With
//!   `signal_blocks = Some(b)` the columns are cut into `b` contiguous blocks (the
//!   [`crate::partition::feature_cut`] of `b` parts) and class `c`'s centroid is zero outside
//!   block `c mod b`: the class signal lives in column blocks, so a worker of a feature cut
//!   that holds one block cannot tell apart the classes whose signal lies elsewhere (a signal
//!   spread over every column would let each block classify alone).
//! - **Split** `random`: 60% train, 20% valid, 20% test, each sorted.
//!
//! Constraints that cannot be met (a different class when a community holds one class, a
//! different community when one holds almost all weight) are tried a bounded number of times
//! and then relaxed.

mod alias;
mod edges;
mod features;
pub(crate) use features::random_split;
#[cfg(test)]
mod tests;

use crate::dataset::{Dataset, Labels, Splits};

/// Distance between two class centroids, in units of the per-feature noise deviation.
pub const FEATURE_SEPARATION: f64 = 3.0;

/// Parameters of a synthetic dataset; see the module docs for the model.
#[derive(Debug, Clone, PartialEq)]
pub struct SynthConfig {
    pub nodes: usize,
    /// Target mean degree of the symmetric graph (stored entries per node).
    pub avg_degree: f64,
    pub features: usize,
    pub classes: usize,
    /// Number of planted communities; `None` for none.
    pub communities: Option<usize>,
    /// Fraction of edges inside the source's community (used with `communities`).
    pub intra_community: f64,
    /// Fraction of edges joining nodes of the same class.
    pub homophily: f64,
    /// Put each class's feature signal in one of this many column blocks; `None`: in every
    /// column.
    pub signal_blocks: Option<usize>,
    pub seed: u64,
}

impl Default for SynthConfig {
    fn default() -> Self {
        Self {
            nodes: 1000,
            avg_degree: 10.0,
            features: 32,
            classes: 4,
            communities: None,
            intra_community: 0.8,
            homophily: 0.8,
            signal_blocks: None,
            seed: 0,
        }
    }
}

/// An invalid [`SynthConfig`] field.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("invalid synthetic dataset parameter `{field}`: {reason}")]
pub struct SynthError {
    /// The [`SynthConfig`] field at fault.
    pub field: &'static str,
    pub reason: String,
}

impl SynthConfig {
    /// Checks every field; the error names the first one out of range.
    pub fn validate(&self) -> Result<(), SynthError> {
        let fail = |field, reason: String| Err(SynthError { field, reason });
        if self.nodes == 0 || self.nodes >= u32::MAX as usize {
            return fail("nodes", format!("{} is not in 1..{}", self.nodes, u32::MAX));
        }
        if !(self.avg_degree.is_finite() && self.avg_degree >= 0.0 && self.avg_degree <= (self.nodes - 1) as f64) {
            return fail("avg_degree", format!("{} is not in [0, nodes - 1 = {}]", self.avg_degree, self.nodes - 1));
        }
        if self.features == 0 {
            return fail("features", "must be at least 1".into());
        }
        if self.classes == 0 || self.classes > self.nodes {
            return fail("classes", format!("{} is not in 1..={} (nodes)", self.classes, self.nodes));
        }
        if let Some(k) = self.communities
            && (k == 0 || k > self.nodes)
        {
            return fail("communities", format!("{k} is not in 1..={} (nodes)", self.nodes));
        }
        if let Some(b) = self.signal_blocks
            && (b == 0 || b > self.features)
        {
            return fail("signal_blocks", format!("{b} is not in 1..={} (features)", self.features));
        }
        for (field, value) in [("intra_community", self.intra_community), ("homophily", self.homophily)] {
            if !(0.0..=1.0).contains(&value) {
                return fail(field, format!("{value} is not a fraction in [0, 1]"));
            }
        }
        Ok(())
    }

    /// Generates the dataset (named `synth-n<nodes>-d<avg_degree>-s<seed>`).
    pub fn generate(&self) -> Result<Dataset, SynthError> {
        self.validate()?;
        let classes = features::balanced_groups(self.nodes, self.classes, self.seed, features::CLASS_TAG);
        let communities = self
            .communities
            .filter(|&k| k > 1)
            .map(|k| features::balanced_groups(self.nodes, k, self.seed, features::COMMUNITY_TAG));
        let graph = edges::generate(self, &classes, communities.as_deref());
        let features = features::class_features(self, &classes);
        let all: Vec<u32> = (0..self.nodes as u32).collect();
        let (train, valid, test) = features::random_split(&all, 0.6, 0.2, self.seed);
        Ok(Dataset {
            name: format!("synth-n{}-d{}-s{}", self.nodes, self.avg_degree, self.seed),
            graph: graph.into(),
            features,
            labels: Labels::Classes(classes),
            splits: Splits { name: "random".into(), train, valid, test },
            num_classes: self.classes,
        })
    }
}
