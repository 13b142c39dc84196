//! The distributed step of every layer, as a hook.
//!
//! Layers never talk to other workers themselves: at fixed points they hand a block of local rows
//! to an [`Exchange`], which fills in what other workers hold. Single-process training uses
//! [`NoExchange`]; distributed strategies implement the trait over a communicator (and may wrap a
//! codec, a cache or an error compensator). The trait's contract is what makes distributed
//! training equal single-process training:
//!
//! * Every worker calls the same methods in the same order with the same [`Tag`]s (the order
//!   depends only on the model configuration), so each call can be a collective.
//! * Rows are indexed by local id ([`crate::AggGraph`]): `0..num_owned` are owned vertices
//!   (edge-cut owners, vertex-cut masters), the rest halo vertices or mirrors.
//!
//! Per layer, forward: `pull_halo` on the rows about to be read as neighbours -> local aggregation
//! over the worker's edges -> `sum_replicas` on the aggregate -> per-vertex self term, bias and
//! activation (never before the sync, so a replicated vertex counts its self term once). GAT also
//! calls `max_replicas` on the per-destination score maximum before exponentiating. Backward
//! mirrors it: `sum_replicas` on the gradient of the aggregate, transposed aggregation, then
//! `push_halo_grad` on the gradient of the pulled rows.

use std::fmt;

use ndarray::Array2;

pub mod edge_cut;
mod landing;
pub mod part_view;
mod replica_router;
pub mod vertex_cut;
pub use replica_router::{CommWatch, ExchangeOptions, SetupError};

/// Whether a call belongs to the forward or the backward pass.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Direction {
    Forward,
    Backward,
}

/// Which exchange of a layer a call is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Step {
    /// Halo rows: `pull_halo` (forward) and `push_halo_grad` (backward).
    Halo,
    /// Partial aggregates: `sum_replicas` (for GAT: softmax denominators and numerators).
    Aggregate,
    /// GAT's per-destination score maximum: `max_replicas`.
    AttentionMax,
}

/// Names one exchange call: conv layer index (0-based), direction and step.
///
/// [`Tag::phase`] is the coarse ledger label (`"fwd/1"`), `Display` the fine one (`"fwd/1/halo"`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Tag {
    pub layer: usize,
    pub dir: Direction,
    pub step: Step,
}

impl Tag {
    pub fn new(layer: usize, dir: Direction, step: Step) -> Self {
        Self { layer, dir, step }
    }

    /// `"fwd/<layer>"` or `"bwd/<layer>"`: the traffic-ledger phase of this call.
    pub fn phase(&self) -> String {
        format!("{}/{}", self.dir, self.layer)
    }
}

impl fmt::Display for Direction {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Direction::Forward => "fwd",
            Direction::Backward => "bwd",
        })
    }
}

impl fmt::Display for Step {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Step::Halo => "halo",
            Step::Aggregate => "agg",
            Step::AttentionMax => "attmax",
        })
    }
}

impl fmt::Display for Tag {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}/{}", self.dir, self.layer, self.step)
    }
}

/// Why an exchange failed; every variant names the call.
#[derive(Debug, thiserror::Error)]
pub enum ExchangeError {
    #[error("exchange {tag}: expected a block of {expected_rows} x {expected_cols}, got {rows} x {cols}")]
    Shape { tag: Tag, expected_rows: usize, expected_cols: usize, rows: usize, cols: usize },
    #[error("exchange {tag}: {message}")]
    Protocol { tag: Tag, message: String },
    #[error("exchange {tag}: communication failed")]
    Comm {
        tag: Tag,
        #[source]
        source: Box<dyn std::error::Error + Send + Sync>,
    },
}

/// The per-layer distributed step (see the module docs for when each method is called).
///
/// All blocks have one row per local vertex; columns are the layer's feature width at that point.
pub trait Exchange {
    /// Edge-cut: overwrite the halo rows (local id >= `num_owned`) of `x` with their owners'
    /// current rows. Owned rows are left as they are.
    fn pull_halo(&mut self, tag: Tag, x: &mut Array2<f32>) -> Result<(), ExchangeError>;

    /// Adjoint of [`Exchange::pull_halo`]: add each halo row of `g` into its owner's row (at the
    /// owner) and zero the halo rows.
    fn push_halo_grad(&mut self, tag: Tag, g: &mut Array2<f32>) -> Result<(), ExchangeError>;

    /// Vertex-cut: every replica of a vertex ends with the sum of all replicas' rows. Self-adjoint,
    /// so the backward pass calls it on the gradient of the same block.
    fn sum_replicas(&mut self, tag: Tag, x: &mut Array2<f32>) -> Result<(), ExchangeError>;

    /// Vertex-cut: every replica ends with the element-wise maximum over all replicas' rows
    /// (GAT's softmax stabiliser; treated as a constant in backward, so it has no adjoint call).
    fn max_replicas(&mut self, tag: Tag, x: &mut Array2<f32>) -> Result<(), ExchangeError>;
}

/// Single-process training: the whole graph is local, every method does nothing.
#[derive(Debug, Clone, Copy, Default)]
pub struct NoExchange;

impl Exchange for NoExchange {
    fn pull_halo(&mut self, _tag: Tag, _x: &mut Array2<f32>) -> Result<(), ExchangeError> {
        Ok(())
    }

    fn push_halo_grad(&mut self, _tag: Tag, _g: &mut Array2<f32>) -> Result<(), ExchangeError> {
        Ok(())
    }

    fn sum_replicas(&mut self, _tag: Tag, _x: &mut Array2<f32>) -> Result<(), ExchangeError> {
        Ok(())
    }

    fn max_replicas(&mut self, _tag: Tag, _x: &mut Array2<f32>) -> Result<(), ExchangeError> {
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tags_render_as_ledger_labels() {
        let t = Tag::new(1, Direction::Forward, Step::Halo);
        assert_eq!(t.phase(), "fwd/1");
        assert_eq!(t.to_string(), "fwd/1/halo");
        assert_eq!(Tag::new(0, Direction::Backward, Step::AttentionMax).to_string(), "bwd/0/attmax");
    }

    #[test]
    fn no_exchange_leaves_blocks_alone() {
        let mut x = Array2::from_shape_fn((3, 2), |(i, j)| (i * 2 + j) as f32);
        let before = x.clone();
        let t = Tag::new(0, Direction::Forward, Step::Aggregate);
        let mut ex = NoExchange;
        ex.pull_halo(t, &mut x).unwrap();
        ex.push_halo_grad(t, &mut x).unwrap();
        ex.sum_replicas(t, &mut x).unwrap();
        ex.max_replicas(t, &mut x).unwrap();
        assert_eq!(x, before);
    }
}
