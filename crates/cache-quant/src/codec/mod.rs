//! The codec interface: rows of `f32` in, bytes out, and back.
//!
//! A message carries a block of `rows x width` values for one peer. The receiver always knows
//! `width` and how many rows it expects (from its partition book), so a codec never has to
//! encode the shape; it may add whatever side information it needs (scales, bucket tables).

mod bank;
mod identity;
mod le;

pub use bank::{CodecBank, CodecFactory};
pub use identity::IdentityCodec;

use thiserror::Error;

/// Why a block of bytes could not be decoded.
#[derive(Debug, Error, PartialEq, Eq)]
pub enum CodecError {
    /// The message holds a different number of bytes than the rows it must fill need.
    #[error("codec `{codec}`: message has {actual} bytes, expected {expected} for {rows} rows of width {width}")]
    Length { codec: &'static str, rows: usize, width: usize, expected: usize, actual: usize },
    /// The output slice is not a whole number of rows.
    #[error("codec `{codec}`: output of {len} values is not a multiple of the row width {width}")]
    Shape { codec: &'static str, len: usize, width: usize },
}

/// Encodes blocks of `f32` rows into bytes and decodes them back.
///
/// Methods take `&mut self` so that a codec may keep state across messages (error feedback,
/// predictors, random streams); a stateful codec must be used for one message stream only,
/// which [`CodecBank`] arranges.
pub trait Codec: Send {
    /// Short stable name, used in reports and error messages.
    fn name(&self) -> &'static str;

    /// Appends the encoding of `rows` (row-major, `rows.len()` a multiple of `width`) to `out`.
    fn encode_rows(&mut self, rows: &[f32], width: usize, out: &mut Vec<u8>) -> Result<(), CodecError>;

    /// Decodes one message produced by [`Codec::encode_rows`] into `out` (row-major, its length
    /// gives the number of rows). Malformed input is an error, never a panic.
    fn decode_rows(&mut self, bytes: &[u8], width: usize, out: &mut [f32]) -> Result<(), CodecError>;
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
