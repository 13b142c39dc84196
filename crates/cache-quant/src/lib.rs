//! Codecs and caches that cut the bytes a distributed GNN step moves: the [`Codec`] trait every
//! exchange encodes its rows through, the lossless [`IdentityCodec`], decorators such as
//! [`SkipRepeats`], the [`CodecBank`] that keeps one (possibly stateful) codec per message
//! [`Stream`], per-stream [`CodecStats`], and the [`Knob`]s through which a method changes its
//! codecs' settings between steps.
//!
//! Architecture invariant: this crate is pure over slices and arrays (plus the communicator for
//! the methods that need it); it knows nothing of models.

pub mod codec;
pub mod knob;
pub mod replica_cache;
pub mod stream;

pub use codec::{
    BitsError, Codec, CodecBank, CodecError, CodecFactory, CodecStats, IdentityCodec, LINEAR_BITS, LinearQuant,
    SkipRepeats, StatsKey, StatsTable,
};
pub use knob::Knob;
pub use replica_cache::ReplicaCache;
pub use stream::{Direction, Mode, Pass, Route, Side, Step, Stream, StreamId, Tag};
