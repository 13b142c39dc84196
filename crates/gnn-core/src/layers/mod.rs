//! Graph convolutions with hand-written backward passes.
//!
//! Each layer reads and writes its parameters in the model's flat buffers through
//! [`crate::ParamSlot`]s, and calls the [`Exchange`] hook at fixed points (see
//! [`crate::exchange`]). Forward caches what backward needs; backward *accumulates* parameter
//! gradients.
//!
//! Gradients flowing backward through a vertex-cut are *partial*: each replica holds a share and
//! the shares sum to the true gradient. Per-vertex terms (self loops, bias, activation, LayerNorm)
//! use those shares directly; only the aggregation over edges first sums them with
//! `sum_replicas`, the adjoint of the forward sum. That keeps replicated vertices from being
//! counted twice in parameter gradients, which the trainer then all-reduces.

mod agg;
pub(crate) mod gat;

use ndarray::Array2;

pub use agg::{AggConv, AggKind};
pub use gat::GatConv;

use crate::exchange::{Exchange, ExchangeError, Pass};
use crate::graph::AggGraph;

/// Per-call context of a forward pass.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ForwardCtx {
    /// Dropout is applied only in training mode.
    pub training: bool,
    /// Seed of the dropout masks (independent of the parameter-initialisation seed).
    pub seed: u64,
    /// Epoch number, part of every dropout key.
    pub epoch: u64,
    /// Step within the epoch (mini-batch training; 0 for full batch), part of every dropout key.
    pub step: u64,
}

impl ForwardCtx {
    /// A full-batch training pass: dropout on, masks keyed by `(seed, epoch, ...)`.
    pub fn train(seed: u64, epoch: u64) -> Self {
        Self { training: true, seed, epoch, step: 0 }
    }

    /// A training pass of step `step` of `epoch`.
    pub fn train_step(seed: u64, epoch: u64, step: u64) -> Self {
        Self { training: true, seed, epoch, step }
    }

    /// An evaluation pass: no dropout.
    pub fn eval() -> Self {
        Self { training: false, seed: 0, epoch: 0, step: 0 }
    }

    /// The pass the exchange calls of this forward (and its backward) belong to.
    pub fn pass(&self) -> Pass {
        if self.training { Pass::train(self.epoch, self.step) } else { Pass::eval() }
    }

    /// The epoch-and-step part of dropout keys: the epoch alone for full-batch steps, so
    /// full-batch masks do not depend on whether steps are counted.
    pub fn round(&self) -> u64 {
        self.epoch ^ (self.step << 32)
    }
}

/// Where a layer exchanges vertex rows with other workers.
///
/// Both choices give exactly the same result; they differ in which rows travel. `Transformed`
/// (aggregate `X W`) is used when the layer's output is narrower than its input, `Input`
/// (aggregate `X`, then transform) otherwise, so the narrower block is pulled and summed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ExchangePoint {
    /// Pull/sum the layer input rows, transform after aggregating.
    Input,
    /// Transform first, pull/sum the transformed rows.
    Transformed,
}

impl ExchangePoint {
    /// The cheaper point for a layer reading `in_dim` columns whose aggregated rows are
    /// `transformed_dim` wide after the linear transform.
    pub fn choose(in_dim: usize, transformed_dim: usize) -> Self {
        if transformed_dim < in_dim { ExchangePoint::Transformed } else { ExchangePoint::Input }
    }
}

/// A graph convolution over an [`AggGraph`], with its parameters in flat buffers.
pub trait Conv: Send + std::fmt::Debug {
    /// Input width.
    fn in_dim(&self) -> usize;

    /// Output width.
    fn out_dim(&self) -> usize;

    /// Where this layer exchanges rows.
    fn exchange_point(&self) -> ExchangePoint;

    /// Whether [`Conv::backward`] reads the layer's input `x`. When it does not (GCN
    /// aggregating its input: backward reads the cached aggregate), the model need not keep
    /// the input between forward and backward.
    fn backward_reads_input(&self) -> bool;

    /// Bytes of the buffers this layer keeps between calls (forward caches, backward scratch):
    /// what a memory estimate must match.
    fn buffer_bytes(&self) -> usize;

    /// `out <- conv(x)`. `x` has `in_dim` columns and at least one row per local vertex (rows
    /// past `num_local` are not read); only its rows before [`AggGraph::local_input_rows`] are
    /// read as they are, its halo rows are overwritten by `pull_halo` when the layer needs them
    /// (on a graph that pulls its halo, [`AggGraph::pulls_halo`]) and unspecified afterwards (a
    /// layer may release them once read).
    /// `out` is reshaped to `num_local x out_dim`; its computed rows are overwritten, the rest
    /// are unspecified. `layer` names the exchange calls and keys attention dropout.
    #[allow(clippy::too_many_arguments)] // buffers + graph + hook + context, all needed.
    fn forward(
        &mut self,
        params: &[f32],
        graph: &AggGraph,
        x: &mut Array2<f32>,
        out: &mut Array2<f32>,
        exchange: &mut dyn Exchange,
        layer: usize,
        ctx: ForwardCtx,
    ) -> Result<(), ExchangeError>;

    /// Backward of the last [`Conv::forward`] (same graph, `x` as forward left it; any array,
    /// an empty one included, when [`Conv::backward_reads_input`] is false). Adds the
    /// parameter gradients into `grads`; `dout` (gradient of `out`, at least `num_local` rows,
    /// rows past the computed rows ignored) is used as scratch. When `dx` is given it is
    /// reshaped (kept if it has `in_dim` columns and at least `num_local` rows) and its rows
    /// before [`AggGraph::local_input_rows`] are overwritten with the gradient of `x`, halo
    /// contributions already pushed to their owners (its other rows are unspecified); pass
    /// `None` for the first layer to skip that work.
    #[allow(clippy::too_many_arguments)]
    fn backward(
        &mut self,
        params: &[f32],
        grads: &mut [f32],
        graph: &AggGraph,
        x: &Array2<f32>,
        dout: &mut Array2<f32>,
        dx: Option<&mut Array2<f32>>,
        exchange: &mut dyn Exchange,
        layer: usize,
    ) -> Result<(), ExchangeError>;
}

#[cfg(test)]
mod tests;
