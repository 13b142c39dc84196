//! Codecs and caches that cut the bytes a distributed GNN step moves: the [`Codec`] trait every
//! exchange encodes its rows through, the lossless [`IdentityCodec`], decorators such as
//! [`SkipRepeats`] and [`PaysOrExact`], the [`CodecBank`] that keeps one (possibly stateful) codec per message
//! [`Stream`], per-stream [`CodecStats`], and the [`Knob`]s through which a method changes its
//! codecs' settings between steps.
//!
//! A codec turns rows into bytes and back (`examples/codec.rs` stacks `SkipRepeats` on it):
//! ```
//! use cache_quant::{Codec, IdentityCodec, Pass};
//!
//! let rows = [1.0f32, 2.0, 3.0, 4.0]; // two rows of width 2
//! let mut bytes = Vec::new();
//! IdentityCodec.encode(Pass::train(1, 0), &rows, 2, &mut bytes)?;
//! let mut back = [0.0f32; 4];
//! IdentityCodec.decode(Pass::train(1, 0), &bytes, 2, &mut back)?;
//! assert_eq!(back, rows);
//! # Ok::<(), cache_quant::CodecError>(())
//! ```
//!
//! Architecture invariant: this crate is pure over slices and arrays (plus the communicator for
//! the methods that need it); it knows nothing of models.

pub mod assign;
pub mod codec;
pub mod knob;
pub mod replica_cache;
pub mod state;
pub mod stream;

pub use codec::{
    BitTable, BitsError, Codec, CodecBank, CodecError, CodecFactory, CodecStats, Encoding, IdentityCodec, KernelCodec,
    LINEAR_BITS, LinearQuant, Measured, PaysOrExact, QuantProbe, SkipRepeats, StatsKey, StatsTable, StochasticCodec,
};
pub use knob::Knob;
pub use replica_cache::ReplicaCache;
pub use state::{StateError, StateReader};
pub use stream::{Direction, Mode, Pass, Route, Side, Step, Stream, StreamId, Tag};
