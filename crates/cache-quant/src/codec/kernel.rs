//! A codec's message as data: what a kernel needs to write the bytes a codec writes, and to read
//! them, where the rows live (a GPU's memory) instead of on the host.
//!
//! A [`KernelCodec`] describes each message by an [`Encoding`] and keeps its bookkeeping (stats,
//! probes) apart from the arithmetic. The codecs build on this module and it names none of them:
//! the arithmetic ([`Encoding::encode`], [`Encoding::decode`]), a pure function of the rows (or
//! bytes) and the description, is the one place that chooses among the codecs, above them all
//! (`encoding.rs`). A codec's own [`super::Codec::encode`] and [`super::Codec::decode`] run
//! exactly that arithmetic ([`encode_through`], [`decode_through`]), so a kernel checked against
//! it writes the codec's bytes: a message encoded on a device decodes on the host, and the other
//! way round.

use std::sync::Arc;
use std::time::Duration;

use super::CodecError;
use crate::stream::Pass;

/// How a message's rows become bytes (see the module docs).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Encoding {
    /// The identity codec's: every value as its 4 little-endian bytes.
    Exact,
    /// The linear quantizer's: every row as its minimum and maximum and `bits`-bit levels.
    Linear { bits: u8 },
    /// The stochastic quantizer's: row `r` as its zero point and scale and `bits[r]`-bit codes,
    /// its draws keyed by `hash_extend(key, [gids[r]])`.
    Stochastic { key: u64, bits: Vec<u8>, gids: Arc<[u32]> },
    /// The bucket codec's: the whole message as one block of `bits`-bit bucket ids over its
    /// minimum and maximum, which its header carries with the width (a decoder reads the width
    /// there, whatever `bits` its own encoding names); no bytes for no rows.
    Bucket { bits: u8 },
}

/// What encoding a message measured: the decoded rows' squared error against the rows, and the
/// rows' squared norm, summed row by row in message order.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Measured {
    pub err_sq: f64,
    pub ref_sq: f64,
}

/// A codec whose messages an [`Encoding`] describes, so that a kernel can write and read them
/// where the rows live; the codec keeps the bookkeeping a message leaves behind.
pub trait KernelCodec {
    /// The encoding of this stream's next message of `rows` rows in `pass`, either side.
    fn encoding(&self, pass: Pass, rows: usize) -> Result<Encoding, CodecError>;

    /// Accounts a message of `rows` rows encoded by `encoding` (stats), as
    /// [`super::Codec::encode`] does; `spent` is the time encoding took.
    fn sent(&mut self, encoding: &Encoding, rows: usize, measured: Measured, spent: Duration);

    /// Accounts a message of `bytes` decoded by `encoding` (probes), as [`super::Codec::decode`] does;
    /// `bytes` passed [`Encoding::check`]. A message that went from store to store without the
    /// host (NCCL) comes with its bytes only where [`KernelCodec::reads_arrivals`] says the
    /// codec reads them, else with none.
    fn received(&mut self, pass: Pass, encoding: &Encoding, bytes: &[u8], width: usize, spent: Duration);

    /// Whether [`KernelCodec::received`] reads the message's bytes in `pass`: a receiving store
    /// that keeps its messages (NCCL) then copies them to the host too.
    fn reads_arrivals(&self, _pass: Pass) -> bool {
        false
    }
}

/// [`super::Codec::encode`] of a [`KernelCodec`]: its encoding's bytes, then its bookkeeping.
pub(crate) fn encode_through(
    codec: &mut dyn KernelCodec,
    pass: Pass,
    rows: &[f32],
    width: usize,
    out: &mut Vec<u8>,
) -> Result<(), CodecError> {
    let start = std::time::Instant::now();
    let n = rows_in(rows.len(), width);
    let encoding = codec.encoding(pass, n)?;
    let measured = encoding.encode(rows, width, out)?;
    codec.sent(&encoding, n, measured, start.elapsed());
    Ok(())
}

/// [`super::Codec::decode`] of a [`KernelCodec`].
pub(crate) fn decode_through(
    codec: &mut dyn KernelCodec,
    pass: Pass,
    bytes: &[u8],
    width: usize,
    out: &mut [f32],
) -> Result<(), CodecError> {
    let start = std::time::Instant::now();
    let encoding = codec.encoding(pass, rows_in(out.len(), width))?;
    encoding.decode(bytes, width, out)?;
    codec.received(pass, &encoding, bytes, width, start.elapsed());
    Ok(())
}

/// Whole rows in `len` values (the encoding refuses a remainder, naming its codec).
fn rows_in(len: usize, width: usize) -> usize {
    len.checked_div(width).unwrap_or(0)
}
