//! Mini-batch blocks as aggregation graphs: the layers run on sampled message-flow graphs
//! unchanged.
//!
//! A [`Block`] (DGL's convention, built by `graph_partition::sample`) is bipartite: `num_dst`
//! destinations that are a prefix of `num_src` sources. As an [`AggGraph`] it is a square local
//! CSR over the sources whose rows past `num_dst` are empty, with the destinations as the
//! primaries and the *computed* rows, and every source's input local: a layer transforms every
//! source, aggregates into the destinations, and writes the input gradient of every source. The
//! layer's output rows are the next block's sources ([`BlockGraphs`] checks the chain).
//!
//! Normalisation. GraphSAGE's mean is over the sampled in-neighbours (`1 / k_v`, with `k_v` the
//! destination's row length in the block), whichever [`GcnNorm`]. GCN's coefficients come from
//! either
//! - [`GcnNorm::Global`] (the default): the whole graph's degrees, as full-graph GCN, with the
//!   neighbour sum of a destination scaled by `in_v / k_v`:
//!   `out_v = (in_v / k_v) sum_{u in sample(v)} h_u / sqrt((out_u + 1)(in_v + 1)) + h_v / (in_v + 1)`.
//!   Each neighbour is in the sample with probability `k_v / in_v`, so the sum is an unbiased
//!   estimate of the full-neighbour layer, and equals it when nothing is dropped (fanout -1),
//!   which is what evaluation runs. It does not depend on the rest of the batch.
//! - [`GcnNorm::Sampled`]: the block's own degrees, as DGL's `GraphConv` on a block with self
//!   loops: `in_v = k_v`, and `out_u` counts the destinations of the block that sampled `u`. A
//!   vertex's coefficients then depend on which other vertices share its batch.

use std::fmt;
use std::str::FromStr;
use std::sync::Arc;

use graph_partition::Csr;
use graph_partition::sample::{Block, MiniBatch};
use serde::{Deserialize, Serialize};

use crate::graph::{AggGraph, DegreeNorms, GraphDegrees, GraphError};

/// Which degrees GCN normalises a sampled block with (see the module docs).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum GcnNorm {
    /// The block's own degrees (DGL's `GraphConv` on blocks).
    Sampled,
    /// The whole graph's degrees, the neighbour sum rescaled to an unbiased estimate.
    #[default]
    Global,
}

impl GcnNorm {
    pub const ALL: [GcnNorm; 2] = [GcnNorm::Sampled, GcnNorm::Global];

    /// The name on the command line, in configs and reports.
    pub fn as_str(self) -> &'static str {
        match self {
            GcnNorm::Sampled => "sampled",
            GcnNorm::Global => "global",
        }
    }
}

impl fmt::Display for GcnNorm {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A normalisation name that is neither `sampled` nor `global`.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unknown GCN normalisation `{0}`; expected sampled or global")]
pub struct UnknownGcnNorm(pub String);

impl FromStr for GcnNorm {
    type Err = UnknownGcnNorm;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Self::ALL.into_iter().find(|n| n.as_str() == s).ok_or_else(|| UnknownGcnNorm(s.to_string()))
    }
}

impl AggGraph {
    /// The aggregation graph of one block (see the module docs). `degrees` are the whole
    /// graph's, by global id; they are read under [`GcnNorm::Global`] only.
    pub fn from_block(block: &Block, degrees: &GraphDegrees, norm: GcnNorm) -> Result<Self, GraphError> {
        Self::from_block_keyed(block, degrees, norm, None)
    }

    /// As [`AggGraph::from_block`] for a block sampled from a subgraph whose vertex `v` is
    /// global vertex `keys[v]`: `degrees` are indexed by the block's (subgraph) ids, the graph's
    /// global ids (the keys of its random draws) are `keys` of them. `None`: the block's ids
    /// are global.
    pub fn from_block_keyed(
        block: &Block,
        degrees: &GraphDegrees,
        norm: GcnNorm,
        keys: Option<&[u32]>,
    ) -> Result<Self, GraphError> {
        let (n, num_dst, adj) = (block.num_src(), block.num_dst(), block.adj());
        let gids = block.src_ids();
        let limit = keys.map_or(degrees.num_nodes(), |k| k.len().min(degrees.num_nodes()));
        if let Some(&gid) = gids.iter().find(|&&g| g as usize >= limit) {
            return Err(GraphError::UnknownVertex { gid, num_nodes: limit });
        }
        let global_ids = match keys {
            Some(keys) => gids.iter().map(|&g| keys[g as usize]).collect(),
            None => gids.to_vec(),
        };
        let mut indptr = adj.indptr().to_vec();
        indptr.resize(n + 1, adj.num_edges() as u64);
        let csr = Csr::try_new(n, n, indptr, adj.indices().to_vec()).expect("a block's rows are valid CSR rows");
        let sampled_in: Vec<f32> = (0..n).map(|v| csr.degree(v) as f32).collect();
        let (in_degree, out_degree) = match norm {
            GcnNorm::Sampled => (sampled_in.clone(), csr.column_counts().into_iter().map(|d| d as f32).collect()),
            GcnNorm::Global => (
                gids.iter().map(|&g| degrees.in_degree[g as usize]).collect(),
                gids.iter().map(|&g| degrees.out_degree[g as usize]).collect(),
            ),
        };
        let graph = Self::assemble(Arc::new(csr), num_dst, global_ids, in_degree, out_degree, |in_deg, out_deg| {
            DegreeNorms::sampled(in_deg, out_deg, &sampled_in, norm == GcnNorm::Global)
        })?;
        Ok(graph.with_held_halo()?.varying())
    }
}

/// One aggregation graph per layer of a mini-batch, input layer first, chained: layer `l`
/// computes exactly the rows layer `l + 1` reads, vertex for vertex.
#[derive(Debug, Clone)]
pub struct BlockGraphs {
    layers: Vec<AggGraph>,
}

impl BlockGraphs {
    /// Checks the chain: every graph computes only its primaries (built by
    /// [`AggGraph::from_block`]), and graph `l`'s primaries are graph `l + 1`'s local vertices
    /// with the same global ids in the same order.
    pub fn new(layers: Vec<AggGraph>) -> Result<Self, GraphError> {
        for (layer, pair) in layers.windows(2).enumerate() {
            let (this, next) = (&pair[0], &pair[1]);
            let computed = &this.global_ids()[..this.computed_rows()];
            if computed.len() != next.num_local() {
                let detail = format!("it computes {} rows, the next reads {}", computed.len(), next.num_local());
                return Err(GraphError::BlockChain { layer, detail });
            }
            if let Some(row) = computed.iter().zip(next.global_ids()).position(|(a, b)| a != b) {
                let detail = format!(
                    "row {row} is vertex {} in this block's output and vertex {} in the next one's input",
                    computed[row],
                    next.global_ids()[row]
                );
                return Err(GraphError::BlockChain { layer, detail });
            }
        }
        if let Some(layer) = layers.iter().position(|g| g.local_input_rows() != g.num_local()) {
            let detail = "a block holds the input of all its sources; this graph pulls a halo".to_string();
            return Err(GraphError::BlockChain { layer, detail });
        }
        Ok(Self { layers })
    }

    /// The graphs of a sampled mini-batch.
    pub fn from_batch(batch: &MiniBatch, degrees: &GraphDegrees, norm: GcnNorm) -> Result<Self, GraphError> {
        Self::from_batch_keyed(batch, degrees, norm, None)
    }

    /// The graphs of a mini-batch sampled from a subgraph whose vertex `v` is global vertex
    /// `keys[v]` (see [`AggGraph::from_block_keyed`]): the graphs carry global ids, so the
    /// layers' random draws match a batch sampled from the whole graph.
    pub fn from_batch_keyed(
        batch: &MiniBatch,
        degrees: &GraphDegrees,
        norm: GcnNorm,
        keys: Option<&[u32]>,
    ) -> Result<Self, GraphError> {
        let layers = batch
            .blocks()
            .iter()
            .map(|b| AggGraph::from_block_keyed(b, degrees, norm, keys))
            .collect::<Result<_, _>>()?;
        Self::new(layers)
    }

    /// The graphs, input layer first (never empty when built from a batch).
    pub fn layers(&self) -> &[AggGraph] {
        &self.layers
    }

    /// Global ids of the rows the first layer reads (its input features).
    pub fn input_ids(&self) -> &[u32] {
        self.layers.first().map_or(&[], |g| g.global_ids())
    }

    /// Global ids of the rows the last layer computes, in order: the rows of the logits that
    /// carry the loss.
    pub fn output_ids(&self) -> &[u32] {
        self.layers.last().map_or(&[], |g| &g.global_ids()[..g.computed_rows()])
    }
}

#[cfg(test)]
mod tests {
    use graph_partition::EdgeListOptions;
    use graph_partition::sample::{NeighborSampler, StepKey};

    use super::*;

    /// Vertex 0 with in-neighbours 1, 2, 3; vertex 1 with in-neighbour 2; 3 -> 4.
    fn graph() -> Csr {
        let opts = EdgeListOptions { symmetrize: false, remove_self_loops: true };
        Csr::from_edges(5, &[(1, 0), (2, 0), (3, 0), (2, 1), (3, 4)], opts).unwrap()
    }

    fn one_block(fanouts: &str, seeds: &[u32]) -> (Block, GraphDegrees) {
        let csr = graph();
        let sampler = NeighborSampler::new(&csr, fanouts.parse().unwrap(), 3).unwrap();
        let batch = sampler.sample(StepKey::default(), seeds).unwrap();
        (batch.into_blocks().remove(0), GraphDegrees::of(&csr))
    }

    #[test]
    fn a_block_computes_its_destinations_and_holds_every_source() {
        let (block, degrees) = one_block("2", &[0, 1]);
        let g = AggGraph::from_block(&block, &degrees, GcnNorm::Global).unwrap();
        assert_eq!((g.num_local(), g.num_primary(), g.computed_rows()), (block.num_src(), 2, 2));
        assert_eq!(g.local_input_rows(), block.num_src());
        assert_eq!(g.global_ids(), block.src_ids());
        assert!((2..g.num_local()).all(|v| g.fwd().neighbors(v).is_empty()));
        // Vertex 0 kept 2 of its 3 in-neighbours: mean over 2, GCN sum scaled by 3 / 2.
        let norms = g.norms();
        assert_eq!(norms.mean[0], 0.5);
        assert!((norms.gcn_dst[0] - 1.5 / 2.0).abs() < 1e-6, "{}", norms.gcn_dst[0]);
        assert_eq!(norms.gcn_self[0], 0.25);
        assert_eq!(g.in_degree()[0], 3.0);
        // Its buffers change shape at every step; a whole graph's do not.
        assert_eq!(g.growth(), crate::dense::Growth::Varying);
        assert_eq!(AggGraph::single(&graph()).unwrap().growth(), crate::dense::Growth::Written);
    }

    #[test]
    fn sampled_norm_uses_the_block_degrees() {
        let (block, degrees) = one_block("2", &[0, 1]);
        let g = AggGraph::from_block(&block, &degrees, GcnNorm::Sampled).unwrap();
        assert_eq!(g.in_degree()[..2], [2.0, 1.0]);
        let out_of = |gid: u32| g.out_degree()[block.src_ids().iter().position(|&s| s == gid).unwrap()];
        // Vertex 2 is an in-neighbour of both 0 and 1; whether 0 sampled it decides its count.
        let sampled_by_0 = block.adj().neighbors(0).iter().any(|&c| block.src_ids()[c as usize] == 2);
        assert_eq!(out_of(2), 1.0 + f32::from(u8::from(sampled_by_0)));
        assert!((g.norms().gcn_dst[0] - 3f32.sqrt().recip()).abs() < 1e-6);
        assert_eq!(g.norms().gcn_self[1], 0.5);
    }

    #[test]
    fn full_fanout_global_norm_matches_the_whole_graph() {
        let (block, degrees) = one_block("-1", &[0, 1, 2, 3, 4]);
        let g = AggGraph::from_block(&block, &degrees, GcnNorm::Global).unwrap();
        let whole = AggGraph::single(&graph()).unwrap();
        for (local, &gid) in g.global_ids().iter().enumerate() {
            let v = gid as usize;
            assert_eq!(g.norms().gcn_dst[local], whole.norms().gcn_dst[v]);
            assert_eq!(g.norms().gcn_src[local], whole.norms().gcn_src[v]);
            assert_eq!(g.norms().mean[local], whole.norms().mean[v]);
        }
    }

    #[test]
    fn chains_are_checked() {
        let csr = graph();
        let degrees = GraphDegrees::of(&csr);
        let sampler = NeighborSampler::new(&csr, "-1,-1".parse().unwrap(), 0).unwrap();
        let batch = sampler.sample(StepKey::default(), &[0, 4]).unwrap();
        let graphs = BlockGraphs::from_batch(&batch, &degrees, GcnNorm::Global).unwrap();
        assert_eq!(graphs.output_ids(), &[0, 4]);
        assert_eq!(graphs.input_ids(), batch.input_ids());
        let mut swapped = graphs.layers().to_vec();
        swapped.reverse();
        assert!(matches!(BlockGraphs::new(swapped), Err(GraphError::BlockChain { layer: 0, .. })));
        // A halo row's input is pulled, not held: no block.
        let opts = EdgeListOptions { symmetrize: false, remove_self_loops: true };
        let halo = Csr::from_edges(2, &[(1, 0)], opts).unwrap();
        let pulled = AggGraph::new(halo, 1, vec![0, 1], vec![1.0, 0.0], vec![0.0, 1.0]).unwrap().with_pulled_halo();
        assert!(matches!(BlockGraphs::new(vec![pulled.unwrap()]), Err(GraphError::BlockChain { layer: 0, .. })));
        let too_small = GraphDegrees { in_degree: vec![0.0; 2], out_degree: vec![0.0; 2] };
        let err = AggGraph::from_block(&batch.blocks()[0], &too_small, GcnNorm::Global).unwrap_err();
        assert!(matches!(err, GraphError::UnknownVertex { num_nodes: 2, .. }), "{err}");
    }
}
