//! Mini-batch training: the runners of the [`crate::method::BatchSource::Sampled`] batch source.
//!
//! An epoch shuffles the training vertices by (seed, epoch) and cuts them into global batches;
//! each step samples its seeds' neighbourhoods (one block per layer, one fanout per layer),
//! sampling the next step on a background thread meanwhile, and runs the model over the blocks
//! (`gnn_core::Model::forward_blocks`). Evaluation is full-neighbour inference one layer at a
//! time over every vertex (`gnn_core::Model::infer_layerwise`).
//!
//! - `trainer`: one worker's epoch and evaluation over a graph it holds whole.
//! - [`single`]: one process takes every step ([`crate::method::DataPlan::Whole`]).
//! - `data_parallel`: `K` workers take disjoint shares of every global batch and all-reduce
//!   gradients every step ([`crate::method::DataPlan::Replicated`]).
//! - `stats`: the epoch record's `method` fields: steps, seeds, sampled vertices and edges
//!   per step (and per block), sampling time, the time training waited for batches, compute and
//!   gradient-sync time, sampled edges per second of sampling, and the label entropy of the
//!   batches (mean and minimum, bits).
//!
//! The methods' own runners ([`crate::method::OwnRunner`]) build on these: adgraph's l-hop
//! parts and featpart's feature columns, each under `method/<name>/runner/`.

pub(crate) mod compute;
pub(crate) mod data_parallel;
pub(crate) mod full_graph;
mod lr_schedule;
pub(crate) mod on_device;
pub mod single;
mod stats;
#[cfg(test)]
pub(crate) mod tests;
pub(crate) mod trainer;
