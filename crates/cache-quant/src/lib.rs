//! Codecs and caches that cut the bytes a distributed GNN step moves: the [`Codec`] trait every
//! exchange encodes its rows through, the lossless [`IdentityCodec`], and the [`CodecBank`] that
//! keeps one (possibly stateful) codec per message stream.
//!
//! Architecture invariant: this crate is pure over slices and arrays (plus the communicator for
//! the methods that need it); it knows nothing of models.

pub mod codec;

pub use codec::{Codec, CodecBank, CodecError, CodecFactory, IdentityCodec};
