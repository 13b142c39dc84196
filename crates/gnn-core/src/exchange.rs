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
//! * Rows are indexed by local id ([`crate::AggGraph`]): `0..num_primary` are primaries
//!   (edge-cut owners, vertex-cut masters), the rest halo vertices or mirrors.
//!
//! Per layer, forward: `pull_halo` on the rows about to be read as neighbours -> local aggregation
//! over the worker's edges -> `sum_replicas` on the aggregate -> per-vertex self term, bias and
//! activation (never before the sync, so a replicated vertex counts its self term once). GAT also
//! calls `max_replicas` on the per-destination score maximum before exponentiating. Backward
//! mirrors it: `sum_replicas` on the gradient of the aggregate, transposed aggregation, then
//! `push_halo_grad` on the gradient of the pulled rows. A layer on a view whose halo inputs are
//! held ([`crate::AggGraph::pulls_halo`] false: a block, or an edge-cut first layer under the
//! halo feature cache) makes neither call. On a vertex-cut view whose masters alone compute
//! ([`crate::AggGraph::with_primaries_computing`]), forward also pushes the aggregate
//! (`push_halo_grad` under [`Step::Aggregate`]: copies' partial sums into their primaries) and
//! backward pulls its gradient back to the copies before the transposed aggregation.
//!
//! Calls: `begin(pass)`, `pull_halo` / `push_halo_grad` (edge-cut), `sum_replicas` / `max_replicas`
//! (vertex-cut), their split forms `start_pull` / `finish_pull` and `start_push` / `finish_push`
//! (used when `overlaps()`; by default the blocking call), `take_stats`, `codec_name`, and
//! `save_state` / `restore_state` for checkpoints (the codec banks of both ends of every stream,
//! and the replica caches), and `footprint`: the rows each call reads and writes, so that a worker
//! whose blocks live on a device stages only those through the host ([`staging`]). Where the
//! codecs are [`cache_quant::KernelCodec`]s, a training call runs on the device's block itself
//! (`codes_on_store`, `call_on_store`): the block's store encodes each outgoing message and
//! decodes each incoming one, so only encoded bytes cross between it and the host.

use ndarray::Array2;

use row_store::{BusBytes, RowStore, StoreError};

pub use cache_quant::{Direction, Mode, Pass, StateError, StatsTable, Step, Tag};

mod cached_sync;
pub mod edge_cut;
mod landing;
pub mod part_view;
mod replica_router;
pub mod row_store;
pub mod staging;
pub mod vertex_cut;
#[cfg(test)]
pub(crate) use replica_router::testkit;
pub use replica_router::{CallKind, CommWatch, ExchangeOptions, MessageCap, ReplicaCacheOptions, SetupError};
pub use row_store::Put;

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
    #[error("exchange {tag}: the row store failed")]
    Store {
        tag: Tag,
        #[source]
        source: StoreError,
    },
}

/// Which part of a call runs: all of it, or one half of a split pull or push.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Half {
    Whole,
    Start,
    Finish,
}

/// A call of an [`Exchange`] that moves rows, as [`Exchange::footprint`] describes it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Call {
    /// [`Exchange::pull_halo`] (and its split form).
    Pull,
    /// [`Exchange::push_halo_grad`] (and its split form).
    Push,
    /// [`Exchange::sum_replicas`].
    Sum,
    /// [`Exchange::max_replicas`].
    Max,
}

/// The rows of a block one call reads and writes (local ids, ascending). The call reads no
/// other row, changes no other row but the released ones, and gives the same result whatever
/// the other rows hold.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Footprint<'a> {
    pub reads: &'a [u32],
    pub writes: &'a [u32],
    /// With [`Put::Add`] the call adds into the written rows: its result on them is their old
    /// value plus its result on zero rows (up to the order of the additions).
    pub put: Put,
    /// Rows from this one on are zeroed (a push releases the halo rows it sent).
    pub zeroes_from: Option<usize>,
}

impl Footprint<'_> {
    /// A call that touches no row.
    pub const NONE: Footprint<'static> = Footprint { reads: &[], writes: &[], put: Put::Overwrite, zeroes_from: None };
}

/// The per-layer distributed step (see the module docs for when each method is called).
///
/// All blocks have one row per local vertex; columns are the layer's feature width at that point.
pub trait Exchange {
    /// Starts a pass: every call until the next `begin` belongs to `pass`. Evaluation passes
    /// are exact unless the exchange was built to evaluate through its codecs, and leave the
    /// codecs' state alone.
    fn begin(&mut self, _pass: Pass) {}

    /// Edge-cut: overwrite the halo rows (local id >= `num_primary`) of `x` with their
    /// primaries' current rows. Primary rows are left as they are.
    fn pull_halo(&mut self, tag: Tag, x: &mut Array2<f32>) -> Result<(), ExchangeError>;

    /// Adjoint of [`Exchange::pull_halo`]: add each halo row of `g` into its primary's row (at
    /// the primary) and zero the halo rows.
    fn push_halo_grad(&mut self, tag: Tag, g: &mut Array2<f32>) -> Result<(), ExchangeError>;

    /// Vertex-cut: every replica of a vertex ends with the sum of all replicas' rows. Self-adjoint,
    /// so the backward pass calls it on the gradient of the same block.
    fn sum_replicas(&mut self, tag: Tag, x: &mut Array2<f32>) -> Result<(), ExchangeError>;

    /// Vertex-cut: every replica ends with the element-wise maximum over all replicas' rows
    /// (GAT's softmax stabiliser; treated as a constant in backward, so it has no adjoint call).
    fn max_replicas(&mut self, tag: Tag, x: &mut Array2<f32>) -> Result<(), ExchangeError>;

    /// The rows `call` reads and writes (the same for every call of that kind).
    fn footprint(&self, call: Call) -> Footprint<'_>;

    /// Whether layers should use the split calls below, computing what needs no halo row while
    /// the halo is in flight. Either way the results are the same, bit for bit.
    fn overlaps(&self) -> bool {
        false
    }

    /// First half of a split [`Exchange::pull_halo`]: reads the primary rows of `x` and sends
    /// them. Until [`Exchange::finish_pull`] the caller may read `x` but not change it.
    fn start_pull(&mut self, _tag: Tag, _x: &Array2<f32>) -> Result<(), ExchangeError> {
        Ok(())
    }

    /// Second half of a split pull: lands the halo rows in `x`.
    fn finish_pull(&mut self, tag: Tag, x: &mut Array2<f32>) -> Result<(), ExchangeError> {
        self.pull_halo(tag, x)
    }

    /// First half of a split [`Exchange::push_halo_grad`]: reads the halo rows of `g` and sends
    /// them. Until [`Exchange::finish_push`] the caller may change primary rows of `g` only.
    fn start_push(&mut self, _tag: Tag, _g: &Array2<f32>) -> Result<(), ExchangeError> {
        Ok(())
    }

    /// Second half of a split push: adds what arrived into the primary rows, zeroes the halo rows.
    fn finish_push(&mut self, tag: Tag, g: &mut Array2<f32>) -> Result<(), ExchangeError> {
        self.push_halo_grad(tag, g)
    }

    /// The calls this exchange makes on a row store's rows (a device's), where its codecs
    /// encode there: the device backend's extension of the exchange; `None` (the default) where
    /// every call runs on host rows.
    fn on_store(&mut self) -> Option<&mut dyn OnStore> {
        None
    }

    /// What the codecs did since the last call, per layer, direction and route (training
    /// passes only).
    fn take_stats(&mut self) -> StatsTable {
        StatsTable::default()
    }

    /// The codec stack rows travel through, `outer(inner)` (ask after training: an exchange
    /// that has not used a stream yet builds a throw-away codec to learn the name).
    fn codec_name(&self) -> String {
        "identity".to_string()
    }

    /// Appends the state the exchange carries between training steps (each stream's codec
    /// state, on both ends, and caches) for a checkpoint at an epoch boundary; an exchange
    /// whose codecs cannot save theirs refuses.
    fn save_state(&self, _out: &mut Vec<u8>) -> Result<(), StateError> {
        Ok(())
    }

    /// Puts back a state [`Exchange::save_state`] wrote, into an exchange freshly built for
    /// the same part and codecs; the error says what does not fit.
    fn restore_state(&mut self, bytes: &[u8]) -> Result<(), StateError> {
        cache_quant::state::expect_empty("the exchange", bytes)
    }
}

/// The calls of an [`Exchange`] on a row store's rows ([`Exchange::on_store`]).
pub trait OnStore {
    /// Whether `call` under `tag` runs on its rows' store instead of on host rows: in training
    /// passes, where every message's codec is a [`cache_quant::KernelCodec`]. The answer holds
    /// for a whole pass.
    fn codes_on_store(&mut self, call: Call, tag: Tag) -> bool;

    /// `call` (or one `half` of a split pull or push) on `store`'s rows, for a call
    /// [`OnStore::codes_on_store`] says runs there: the store encodes each outgoing message and
    /// decodes and lands each incoming one, with the same results and the same bytes on the
    /// network as the call on host rows; returns the encoded bytes that crossed between the
    /// store and the host.
    fn call_on_store(
        &mut self,
        call: Call,
        half: Half,
        tag: Tag,
        store: &mut dyn RowStore,
    ) -> Result<BusBytes, ExchangeError>;
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

    fn footprint(&self, _call: Call) -> Footprint<'_> {
        Footprint::NONE
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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
