//! Blocks (DGL's message-flow graphs) and the mini-batch that holds one per layer.
//!
//! A [`Block`] lists its sources' global ids with the destinations as a prefix, and holds a
//! `num_dst x num_src` local CSR; [`BlockCounts`] are its sizes, as reports give them.

use std::collections::HashMap;

use super::StepKey;
use crate::csr::Csr;

/// Why a [`Block`] failed validation.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum BlockError {
    #[error("num_dst = {num_dst} exceeds the {num_src} source vertices (destinations must be a prefix of the sources)")]
    DstNotPrefix { num_dst: usize, num_src: usize },
    #[error("adjacency is {rows} x {cols}, expected num_dst x num_src = {num_dst} x {num_src}")]
    Shape { rows: usize, cols: usize, num_dst: usize, num_src: usize },
    #[error("global id {gid} appears twice among the source vertices (local ids {first} and {second})")]
    DuplicateSource { gid: u32, first: usize, second: usize },
}

/// A bipartite layer graph in DGL's message-flow-graph convention.
///
/// Local source ids are `0..num_src()`, with global ids [`Block::src_ids`]; the destinations are
/// the first `num_dst()` sources (so a destination's own features are row `i` of the layer
/// input, as DGL's `h[:block.num_dst_nodes()]`). [`Block::adj`] is a `num_dst x num_src` CSR in
/// Halo's convention: row `i` lists the local sources of the edges into destination `i`,
/// ascending, without duplicates.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Block {
    src_ids: Vec<u32>,
    num_dst: usize,
    adj: Csr,
}

/// Sizes of one block, as the trainer reports them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct BlockCounts {
    /// Source vertices (destinations included): the rows of the layer's input.
    pub src_vertices: usize,
    /// Destination vertices: the rows the layer computes.
    pub dst_vertices: usize,
    /// Sampled edges.
    pub edges: usize,
}

impl Block {
    /// Validates and wraps a block: `num_dst <= src_ids.len()`, `adj` is
    /// `num_dst x src_ids.len()`, and the source global ids are distinct. Use it to build blocks
    /// by hand; the sampler builds them valid by construction.
    pub fn try_new(src_ids: Vec<u32>, num_dst: usize, adj: Csr) -> Result<Self, BlockError> {
        let num_src = src_ids.len();
        if num_dst > num_src {
            return Err(BlockError::DstNotPrefix { num_dst, num_src });
        }
        if adj.num_rows() != num_dst || adj.num_cols() != num_src {
            return Err(BlockError::Shape { rows: adj.num_rows(), cols: adj.num_cols(), num_dst, num_src });
        }
        let mut seen = HashMap::with_capacity(num_src);
        for (local, &gid) in src_ids.iter().enumerate() {
            if let Some(first) = seen.insert(gid, local) {
                return Err(BlockError::DuplicateSource { gid, first, second: local });
            }
        }
        Ok(Self { src_ids, num_dst, adj })
    }

    /// The sampler's constructor: its source ids are distinct and its adjacency has the block's
    /// shape by construction (the adjacency itself went through [`Csr::try_new`]).
    pub(super) fn from_sampled(src_ids: Vec<u32>, num_dst: usize, adj: Csr) -> Self {
        debug_assert!(num_dst <= src_ids.len() && adj.num_rows() == num_dst && adj.num_cols() == src_ids.len());
        Self { src_ids, num_dst, adj }
    }

    /// Global ids of the source vertices, destinations first.
    pub fn src_ids(&self) -> &[u32] {
        &self.src_ids
    }

    /// Global ids of the destination vertices (a prefix of [`Block::src_ids`]).
    pub fn dst_ids(&self) -> &[u32] {
        &self.src_ids[..self.num_dst]
    }

    pub fn num_src(&self) -> usize {
        self.src_ids.len()
    }

    pub fn num_dst(&self) -> usize {
        self.num_dst
    }

    pub fn num_edges(&self) -> usize {
        self.adj.num_edges()
    }

    /// `num_dst x num_src` adjacency over local ids (row = destination, columns = its sources).
    pub fn adj(&self) -> &Csr {
        &self.adj
    }

    pub fn counts(&self) -> BlockCounts {
        BlockCounts { src_vertices: self.num_src(), dst_vertices: self.num_dst, edges: self.num_edges() }
    }

    /// `(src_ids, num_dst, adj)`, for callers that keep the arrays.
    pub fn into_parts(self) -> (Vec<u32>, usize, Csr) {
        (self.src_ids, self.num_dst, self.adj)
    }
}

/// One step's sample: one block per layer, ordered from the input layer to the output layer
/// (DGL's `blocks`). Block `l`'s destinations are block `l + 1`'s sources, and the last block's
/// destinations are the seeds, in the order given to the sampler.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MiniBatch {
    key: StepKey,
    blocks: Vec<Block>,
}

impl MiniBatch {
    /// `blocks` is non-empty and chained (the sampler's output).
    pub(super) fn new(key: StepKey, blocks: Vec<Block>) -> Self {
        debug_assert!(!blocks.is_empty());
        debug_assert!(blocks.windows(2).all(|w| w[0].dst_ids() == w[1].src_ids()));
        Self { key, blocks }
    }

    /// The (epoch, step) the draws were keyed by.
    pub fn key(&self) -> StepKey {
        self.key
    }

    /// Blocks, input layer first.
    pub fn blocks(&self) -> &[Block] {
        &self.blocks
    }

    pub fn into_blocks(self) -> Vec<Block> {
        self.blocks
    }

    /// The batch's seed vertices (the last block's destinations): the rows the loss reads.
    pub fn seeds(&self) -> &[u32] {
        self.last().dst_ids()
    }

    /// Global ids whose input features the first layer reads (the first block's sources).
    pub fn input_ids(&self) -> &[u32] {
        self.blocks[0].src_ids()
    }

    /// Per-block sizes, input layer first.
    pub fn counts(&self) -> Vec<BlockCounts> {
        self.blocks.iter().map(Block::counts).collect()
    }

    /// Sampled edges over all blocks (the figure DGL reports as sampled edges).
    pub fn num_edges(&self) -> usize {
        self.blocks.iter().map(Block::num_edges).sum()
    }

    fn last(&self) -> &Block {
        &self.blocks[self.blocks.len() - 1]
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn validates_shape_prefix_and_distinct_sources() {
        let adj = Csr::try_new(2, 3, vec![0, 1, 3], vec![2, 0, 2]).unwrap();
        let block = Block::try_new(vec![10, 20, 30], 2, adj.clone()).unwrap();
        assert_eq!(block.dst_ids(), &[10, 20]);
        assert_eq!(block.counts(), BlockCounts { src_vertices: 3, dst_vertices: 2, edges: 3 });
        assert_eq!(
            Block::try_new(vec![10, 20], 3, adj.clone()),
            Err(BlockError::DstNotPrefix { num_dst: 3, num_src: 2 })
        );
        assert_eq!(
            Block::try_new(vec![10, 20, 30, 40], 2, adj.clone()),
            Err(BlockError::Shape { rows: 2, cols: 3, num_dst: 2, num_src: 4 })
        );
        assert_eq!(
            Block::try_new(vec![10, 20, 10], 2, adj),
            Err(BlockError::DuplicateSource { gid: 10, first: 0, second: 2 })
        );
    }
}
