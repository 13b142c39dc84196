//! The codec interface: rows of `f32` in, bytes out, and back.
//!
//! A message carries a block of `rows x width` values for one peer. The receiver always knows
//! `width` and how many rows it expects (from its partition book), so a codec never has to
//! encode the shape; it may add whatever side information it needs (scales, bucket tables, a
//! mask of the rows it skipped, see [`mask`]).
//!
//! Codecs stack: a decorator such as [`SkipRepeats`] or [`PaysOrExact`] wraps an inner codec and
//! names itself `outer(inner)`, so a report names the whole stack.

mod bank;
pub mod bucket;
pub mod ecgraph;
mod encoding;
mod extent;
#[cfg(test)]
mod fuzz;
mod identity;
mod kernel;
pub(crate) mod le;
mod linear;
pub mod mask;
mod pack;
mod pays_or_exact;
mod skip_repeats;
mod stats;
pub mod stochastic;

pub use bank::{CodecBank, CodecFactory};
pub use bucket::{BUCKET_BITS, BucketCodec};
pub use identity::IdentityCodec;
pub use kernel::{Encoding, KernelCodec, Measured};
pub use linear::{BitsError, LINEAR_BITS, LinearQuant};
pub use pays_or_exact::PaysOrExact;
pub use skip_repeats::SkipRepeats;
pub use stats::{CodecStats, StatsKey, StatsTable};
pub use stochastic::{BitTable, QuantProbe, StochasticCodec};

use thiserror::Error;

use crate::state::{StateError, expect_empty};
use crate::stream::Pass;

/// Why a block of bytes could not be encoded or decoded.
#[derive(Debug, Error, PartialEq, Eq)]
pub enum CodecError {
    /// The message holds a different number of bytes than the rows it must fill need.
    #[error("codec `{codec}`: message has {actual} bytes, expected {expected} for {rows} rows of width {width}")]
    Length { codec: &'static str, rows: usize, width: usize, expected: usize, actual: usize },
    /// The output slice is not a whole number of rows.
    #[error("codec `{codec}`: output of {len} values is not a multiple of the row width {width}")]
    Shape { codec: &'static str, len: usize, width: usize },
    /// A stateful codec saw a block of another shape than the earlier messages of its stream.
    #[error("codec `{codec}`: stream carried {expected} values per message, now {actual}")]
    StreamShape { codec: &'static str, expected: usize, actual: usize },
    /// The message's framing contradicts itself or the codec's state.
    #[error("codec `{codec}`: malformed message: {detail}")]
    Malformed { codec: &'static str, detail: String },
}

/// Encodes blocks of `f32` rows into bytes and decodes them back.
///
/// Methods take `&mut self` so that a codec may keep state across messages (caches, error
/// feedback, predictors, random streams); a stateful codec serves one message stream only
/// ([`crate::Stream`]), which [`CodecBank`] arranges, and its encoder and decoder must evolve
/// identically. `pass` says which pass a message belongs to; exchanges send evaluation passes
/// around the codecs unless asked otherwise, so a codec's state is a training-only state.
pub trait Codec: Send {
    /// Stable name, `outer(inner)` for stacks; used in reports and error messages.
    fn name(&self) -> String;

    /// Appends the encoding of `rows` (row-major, `rows.len()` a multiple of `width`) to `out`.
    fn encode(&mut self, pass: Pass, rows: &[f32], width: usize, out: &mut Vec<u8>) -> Result<(), CodecError>;

    /// Decodes one message produced by [`Codec::encode`] into `out` (row-major, its length gives
    /// the number of rows). Malformed input is an error, never a panic.
    fn decode(&mut self, pass: Pass, bytes: &[u8], width: usize, out: &mut [f32]) -> Result<(), CodecError>;

    /// What the codec did since the last call, beyond the rows and bytes the exchange counts
    /// itself (skipped rows, bit-widths, error norms); the encoder side reports.
    fn take_stats(&mut self) -> CodecStats {
        CodecStats::default()
    }

    /// The codec as a [`KernelCodec`], where its messages are a pure function of the rows and
    /// an [`Encoding`] (a kernel can then encode and decode them where the rows live); `None`
    /// for codecs with state of their own, and decorators that change the messages (one that
    /// only chooses between codecs, [`PaysOrExact`], gives the chosen one's).
    fn kernel(&mut self) -> Option<&mut dyn KernelCodec> {
        None
    }

    /// Appends the state the codec carries from one message to the next (caches, residuals,
    /// histories) for a checkpoint between epochs; decorators append their inner codec's after
    /// their own. Stateless codecs append nothing; a codec whose state cannot be saved refuses.
    fn save_state(&self, _out: &mut Vec<u8>) -> Result<(), StateError> {
        Ok(())
    }

    /// Puts back a state [`Codec::save_state`] wrote, into a codec freshly made for the same
    /// stream; the error says what does not fit.
    fn restore_state(&mut self, bytes: &[u8]) -> Result<(), StateError> {
        expect_empty(&self.name(), bytes)
    }
}

/// Number of rows in a row-major block of `len` values, or a [`CodecError::Shape`].
pub(crate) fn row_count(codec: &'static str, len: usize, width: usize) -> Result<usize, CodecError> {
    if width == 0 {
        return if len == 0 { Ok(0) } else { Err(CodecError::Shape { codec, len, width }) };
    }
    if !len.is_multiple_of(width) {
        return Err(CodecError::Shape { codec, len, width });
    }
    Ok(len / width)
}
