//! Neighbour sampling for mini-batch training, in DGL's message-flow-graph convention.
//!
//! - [`Fanouts`]: one [`Fanout`] per layer, input layer first, parsed from `"15,10,5"` or `"-1"`.
//! - [`BatchPlan`]: an epoch's training vertices shuffled by (seed, epoch) and cut into global
//!   batches; [`Share`] is one data-parallel worker's part of each global batch; [`Step`] is a
//!   step's key and seeds.
//! - [`NeighborSampler`]: seeds in, a [`MiniBatch`] of [`Block`]s out, one per layer, input
//!   layer first. Block `l` samples with `fanouts[l]`, uniformly without replacement among
//!   each destination's in-neighbours (Floyd's algorithm, see `draw.rs`). Destinations are a
//!   prefix of sources; block `l`'s destinations are block `l + 1`'s sources; the last block's
//!   destinations are the seeds.
//! - [`Prefetch`]: samples the next steps on background threads ([`PrefetchOptions`]) while the
//!   caller trains.
//! - [`sample_in_edges`]: a whole graph whose rows keep sampled in-edges (full-graph layers on
//!   sampled edges, EC-Graph's sampled mode), keyed like the blocks.
//!
//! Determinism: every draw is keyed by (seed, epoch, step, layer, global id of the
//! destination) through [`crate::rng`], so a vertex's sampled neighbours do not depend on the
//! batch it is in, the worker that samples it, or the thread count. Sources are numbered in
//! order of first appearance in a serial scan, so whole blocks are identical across thread
//! counts too.
//!
//! ```
//! use graph_partition::csr::{Csr, EdgeListOptions};
//! use graph_partition::sample::{BatchPlan, Fanouts, NeighborSampler, Prefetch, Remainder, Share};
//!
//! let graph = Csr::from_edges(6, &[(0, 1), (1, 2), (2, 3), (3, 4), (4, 5), (5, 0)], EdgeListOptions::default())?;
//! let fanouts: Fanouts = "2,-1".parse()?;
//! let sampler = NeighborSampler::new(&graph, fanouts, 42)?;
//! let plan = BatchPlan::shuffled(&[0, 2, 4], 2, 42, 0, Remainder::Keep)?;
//! // Serially:
//! for step in plan.steps(Share::whole()) {
//!     let batch = sampler.sample(step.key, step.seeds)?;
//!     assert_eq!(batch.seeds(), step.seeds);
//!     assert_eq!(batch.blocks().len(), 2);
//! }
//! // Or one batch ahead, on a background thread:
//! std::thread::scope(|scope| -> Result<(), Box<dyn std::error::Error>> {
//!     for batch in Prefetch::spawn(scope, &sampler, plan.steps(Share::whole())) {
//!         let batch = batch?;
//!         let input = batch.input_ids(); // rows of the feature matrix the first layer reads
//!         assert!(input.len() >= batch.seeds().len());
//!     }
//!     Ok(())
//! })?;
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

mod batch;
mod block;
mod draw;
mod fanout;
mod in_edges;
mod neighbor;
mod prefetch;
#[cfg(test)]
mod proptests;
mod relabel;
#[cfg(test)]
mod tests;

pub use batch::{BatchPlan, PlanError, Remainder, Share, Step};
pub use block::{Block, BlockCounts, BlockError, MiniBatch};
pub use fanout::{Fanout, FanoutError, Fanouts};
pub use in_edges::sample_in_edges;
pub use neighbor::{DEFAULT_PARALLEL_MIN_DST, NeighborSampler, SampleError};
pub use prefetch::{Prefetch, PrefetchOptions};

/// The part of a draw key that changes per step: with the sampler's seed, the layer and the
/// destination's global id it keys every draw.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct StepKey {
    pub epoch: u64,
    /// The step within the epoch (the global batch index, the same on every worker).
    pub step: u64,
}
