//! Halo's model layer: dense and sparse kernels, GNN layers with hand-written backward passes,
//! losses, optimizers, the [`Exchange`] hook through which distributed strategies plug
//! their communication into every layer, and [`Learner`]: one model over the CPU and device
//! backends, which a trainer's runners are written against.
//!
//! A typical single-process training step:
//! ```
//! # use gnn_core::*;
//! # use graph_partition::{Csr, EdgeListOptions};
//! # use ndarray::Array2;
//! let csr = Csr::from_edges(4, &[(0, 1), (1, 2), (2, 3)], EdgeListOptions::default()).unwrap();
//! let graph = AggGraph::single(&csr).unwrap();
//! let x = Array2::from_elem((4, 3), 0.5f32);
//! let labels = [0u32, 1, 0, 1];
//! let train = [0u32, 1];
//! let mut model = Model::new(ModelConfig::gcn(3, 8, 2)).unwrap();
//! let mut adam = Adam::new(0.01, 5e-4);
//! for epoch in 0..3 {
//!     model.zero_grad();
//!     let logits = model.forward(&graph, &x, &mut NoExchange, ForwardCtx::train(0, epoch)).unwrap();
//!     let (loss_sum, mut dlogits) = softmax_cross_entropy(logits, &labels, &train).unwrap();
//!     dlogits /= train.len() as f32; // mean over the (global) training set
//!     model.backward(&graph, dlogits, &mut NoExchange).unwrap();
//!     model.step(&mut adam).unwrap();
//!     assert!(loss_sum.is_finite());
//! }
//! ```
//!
//! Architecture invariant: gnn-core never chooses a distribution method; it exposes the
//! [`Exchange`] hook and the trainer picks implementations.

pub mod activation;
pub mod block;
#[cfg(test)]
mod block_tests;
pub mod dense;
pub mod dropout;
pub mod exchange;
pub mod gpu;
pub mod graph;
mod inference;
pub mod layers;
pub mod learner;
pub mod loss;
pub mod model;
pub mod norm;
pub mod objective;
pub mod optim;
mod pages;
pub mod params;
pub mod sparse;
#[cfg(test)]
mod testkit;

pub use activation::Activation;
pub use block::{BlockGraphs, GcnNorm, UnknownGcnNorm};
pub use exchange::{Direction, Exchange, ExchangeError, NoExchange, Step, Tag};
pub use graph::{AggGraph, GraphDegrees, GraphError};
pub use layers::{AggConv, AggKind, Conv, ExchangePoint, ForwardCtx, GatConv};
pub use learner::{BatchInput, HostTargets, LearnError, Learner, Phase, PhaseTimes, State, Traffic, Views};
pub use loss::{
    LossError, MultiLabelCounts, bce_with_logits, bce_with_logits_in_place, count_correct, multilabel_counts,
    softmax_cross_entropy, softmax_cross_entropy_in_place,
};
pub use model::{BufferBytes, ConvKind, LayerOrder, Model, ModelConfig, ModelError};
pub use norm::LayerNorm;
pub use objective::{Hits, Objective};
pub use optim::{Adam, AdamScalars, Optim, OptimError, Optimizer, Sgd};
pub use params::{Init, ParamInfo, ParamLayout, ParamSlot};
