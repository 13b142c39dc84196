//! The neighbour sampler: a batch of seed vertices in, one [`Block`] per layer out.
//!
//! Blocks are built from the output layer back to the input layer, as in DGL: the seeds are
//! the destinations of the last block; each block's sources (its destinations, then the new
//! sampled neighbours in order of first appearance) are the destinations of the block below.
//! Within a block the work runs in three passes over the destinations, in their order:
//! 1. draw every destination's neighbours (pure per destination, so run in parallel for large
//!    blocks: see [`draw`](super::draw) for the keyed without-replacement method);
//! 2. give each new source the next local id, scanning destinations in order and each one's
//!    neighbours in draw order (serial: it is the step that fixes the order of first
//!    appearance);
//! 3. sort each row's local ids, as [`Csr`] requires (pure per row, parallel).
//!
//! No pass depends on how rows are split among threads, so the output is identical for any
//! thread count, and since a destination's draw reads only its own key, identical for any way
//! of splitting or ordering the seeds, up to the local numbering.
//!
//! [`NeighborSampler::with_keys`] samples a subgraph (ADGraph's extended part) with every draw keyed
//! by the vertex's global id, so a vertex whose whole in-neighbourhood the subgraph holds gets the
//! whole graph's sample.

use std::ops::Range;

use rayon::prelude::*;

use super::draw::{LayerKey, RowSampler};
use super::relabel::{LocalIds, MapPool};
use super::{Block, Fanout, Fanouts, MiniBatch, StepKey};
use crate::csr::Csr;

/// Blocks with at least this many destinations draw and sort their rows on the rayon pool.
pub const DEFAULT_PARALLEL_MIN_DST: usize = 1024;

/// Destinations per parallel task: tens of microseconds of drawing at fanouts 5 to 15
/// (about 12 ns per sampled edge measured), far above a rayon task's overhead.
const ROWS_PER_TASK: usize = 256;

/// Why a batch could not be sampled.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SampleError {
    #[error("the graph to sample from must be square: its CSR has {rows} rows and {cols} columns")]
    NotSquare { rows: usize, cols: usize },
    #[error("seed vertex {seed} is out of range: the graph has {num_nodes} vertices")]
    SeedOutOfRange { seed: u32, num_nodes: usize },
    #[error("seed vertex {seed} appears twice in one batch (a batch's seeds must be distinct)")]
    DuplicateSeed { seed: u32 },
    #[error("the prefetching thread panicked: {message}")]
    PrefetchPanicked { message: String },
    #[error("draw keys must name one global id per vertex: {keys} keys for {num_nodes} vertices")]
    KeyCount { keys: usize, num_nodes: usize },
}

/// Uniform neighbour sampler without replacement over a square graph (row `v` lists the
/// sources of the edges into `v`, so it samples in-neighbours).
///
/// Every draw is keyed by (seed, epoch, step, layer, global id of the destination): the same
/// vertex sampled at the same step and layer gets the same neighbours whichever batch, worker
/// or thread samples it. Safe to share between threads (`&self` methods only); it keeps a pool
/// of graph-sized id maps, one per concurrent [`NeighborSampler::sample`] call.
#[derive(Debug)]
pub struct NeighborSampler<'g> {
    graph: &'g Csr,
    /// Global id of each vertex of `graph` when it is a subgraph; `None`: its ids are global.
    keys: Option<&'g [u32]>,
    fanouts: Fanouts,
    seed: u64,
    parallel_min_dst: usize,
    maps: MapPool,
}

impl<'g> NeighborSampler<'g> {
    /// A sampler over `graph` drawing with `seed`; `fanouts` has one entry per layer, input
    /// layer first.
    pub fn new(graph: &'g Csr, fanouts: Fanouts, seed: u64) -> Result<Self, SampleError> {
        if graph.num_rows() != graph.num_cols() {
            return Err(SampleError::NotSquare { rows: graph.num_rows(), cols: graph.num_cols() });
        }
        let maps = MapPool::default();
        Ok(Self { graph, keys: None, fanouts, seed, parallel_min_dst: DEFAULT_PARALLEL_MIN_DST, maps })
    }

    /// Samples a subgraph whose vertex `v` is vertex `keys[v]` of a larger graph: draws are
    /// keyed by `keys[v]`, so a vertex whose whole in-neighbourhood the subgraph holds (in the
    /// same order, as [`Csr::induced_subgraph`] keeps it over ascending ids) gets the sample
    /// the larger graph would give it. Seeds and blocks stay in the subgraph's ids.
    pub fn with_keys(mut self, keys: &'g [u32]) -> Result<Self, SampleError> {
        if keys.len() != self.graph.num_nodes() {
            return Err(SampleError::KeyCount { keys: keys.len(), num_nodes: self.graph.num_nodes() });
        }
        self.keys = Some(keys);
        Ok(self)
    }

    /// Blocks with at least `min_dst` destinations run in parallel; `0` always, `usize::MAX`
    /// never. Only speed changes: the output is the same.
    pub fn with_parallel_threshold(mut self, min_dst: usize) -> Self {
        self.parallel_min_dst = min_dst;
        self
    }

    pub fn graph(&self) -> &'g Csr {
        self.graph
    }

    pub fn fanouts(&self) -> &Fanouts {
        &self.fanouts
    }

    pub fn seed(&self) -> u64 {
        self.seed
    }

    /// Samples the blocks of one step whose seed vertices (global ids, distinct) are `seeds`.
    /// The last block's destinations are `seeds` in the given order.
    pub fn sample(&self, key: StepKey, seeds: &[u32]) -> Result<MiniBatch, SampleError> {
        let num_nodes = self.graph.num_nodes();
        if let Some(&seed) = seeds.iter().find(|&&s| s as usize >= num_nodes) {
            return Err(SampleError::SeedOutOfRange { seed, num_nodes });
        }
        let mut ids = self.maps.take(num_nodes);
        if let Some(&seed) = seeds.iter().find(|&&s| !ids.insert_new(s)) {
            return Err(SampleError::DuplicateSeed { seed });
        }
        ids.finish();
        let layers = self.fanouts.as_slice();
        let mut blocks: Vec<Block> = Vec::with_capacity(layers.len());
        for (layer, &fanout) in layers.iter().enumerate().rev() {
            let dst = blocks.last().map_or(seeds, Block::src_ids);
            let layer_key = LayerKey::new(self.seed, key.epoch, key.step, layer);
            let block = self.sample_block(&mut ids, layer_key, fanout, dst);
            blocks.push(block);
        }
        blocks.reverse();
        Ok(MiniBatch::new(key, blocks))
    }

    /// One block over the distinct destinations `dst` (see the module docs for the passes).
    fn sample_block(&self, ids: &mut LocalIds<'_>, key: LayerKey, fanout: Fanout, dst: &[u32]) -> Block {
        let (graph, keys) = (self.graph, self.keys);
        for &d in dst {
            ids.insert_new(d);
        }
        let mut indptr = Vec::with_capacity(dst.len() + 1);
        indptr.push(0u64);
        let mut nnz = 0u64;
        for &d in dst {
            nnz += fanout.limit(graph.degree(d as usize)) as u64;
            indptr.push(nnz);
        }
        let mut cols = vec![0u32; nnz as usize];
        let parallel = dst.len() >= self.parallel_min_dst;
        for_row_chunks(&indptr, &mut cols, parallel, |rows, out| {
            let mut sampler = RowSampler::default();
            for_rows(&indptr, rows, out, |i, row_out| {
                let d = dst[i];
                let gid = keys.map_or(d, |k| k[d as usize]);
                sampler.draw(key, gid, graph.neighbors(d as usize), fanout, row_out);
            });
        });
        for c in &mut cols {
            *c = ids.local_or_insert(*c);
        }
        for_row_chunks(&indptr, &mut cols, parallel, |rows, out| {
            for_rows(&indptr, rows, out, |_, row_out| sort_distinct(row_out));
        });
        let src_ids = ids.finish();
        let adj = Csr::try_new(dst.len(), src_ids.len(), indptr, cols)
            .expect("sampled rows are sorted, distinct and name assigned local ids");
        Block::from_sampled(src_ids, dst.len(), adj)
    }
}

/// Runs `work(rows, entries)` over chunks of [`ROWS_PER_TASK`] rows, `entries` being the
/// chunk's slice of `data` (laid out by `indptr`); on the rayon pool when `parallel`.
pub(super) fn for_row_chunks<F>(indptr: &[u64], data: &mut [u32], parallel: bool, work: F)
where
    F: Fn(Range<usize>, &mut [u32]) + Sync,
{
    let num_rows = indptr.len() - 1;
    let mut chunks = Vec::with_capacity(num_rows.div_ceil(ROWS_PER_TASK));
    let mut rest = data;
    for start in (0..num_rows).step_by(ROWS_PER_TASK) {
        let end = (start + ROWS_PER_TASK).min(num_rows);
        let (chunk, tail) = rest.split_at_mut((indptr[end] - indptr[start]) as usize);
        chunks.push((start..end, chunk));
        rest = tail;
    }
    if parallel {
        chunks.into_par_iter().for_each(|(rows, chunk)| work(rows, chunk));
    } else {
        chunks.into_iter().for_each(|(rows, chunk)| work(rows, chunk));
    }
}

/// Calls `each(row, entries)` for every row of a chunk that starts at `rows.start`.
pub(super) fn for_rows(indptr: &[u64], rows: Range<usize>, chunk: &mut [u32], mut each: impl FnMut(usize, &mut [u32])) {
    let base = indptr[rows.start];
    for i in rows {
        each(i, &mut chunk[(indptr[i] - base) as usize..(indptr[i + 1] - base) as usize]);
    }
}

/// Rows up to this long sort by rank (see [`sort_distinct`]).
const RANK_SORT_MAX: usize = 32;

/// Sorts a row of distinct ids. Sampled rows are short (the fanout), and at those lengths
/// placing each entry at its rank (the count of smaller entries, a branch-free loop the
/// compiler vectorises) measured about a quarter faster than the standard sort's insertion
/// sort, whose compares mispredict on random data.
fn sort_distinct(row: &mut [u32]) {
    if row.len() > RANK_SORT_MAX {
        row.sort_unstable();
        return;
    }
    let mut sorted = [0u32; RANK_SORT_MAX];
    for &x in row.iter() {
        let rank: u32 = row.iter().map(|&y| u32::from(y < x)).sum();
        sorted[rank as usize] = x;
    }
    row.copy_from_slice(&sorted[..row.len()]);
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rng::SplitMix64;

    #[test]
    fn sort_distinct_sorts_short_and_long_rows() {
        let mut rng = SplitMix64::new(5);
        for len in [0, 1, 2, 15, RANK_SORT_MAX, RANK_SORT_MAX + 1, 200] {
            let mut row: Vec<u32> = (0..len as u32 * 3).step_by(3).collect();
            for i in (1..row.len()).rev() {
                row.swap(i, rng.below(i as u64 + 1) as usize);
            }
            let mut expected = row.clone();
            expected.sort_unstable();
            sort_distinct(&mut row);
            assert_eq!(row, expected, "length {len}");
        }
    }
}
