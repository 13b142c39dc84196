//! A block of rows on the device as a staged exchange's [`RowStore`]: the rows a call reads are
//! gathered on the device (`gather_rows`) and come down packed, the rows it writes go up packed
//! and are scattered over their rows (`scatter_rows`) or added to them (`scatter_add_rows`), and
//! released rows are zeroed by a memset. Only those rows cross the bus.
//!
//! Where the exchange's codecs are [`cache_quant::KernelCodec`]s, the store encodes a message
//! on the device (`stochastic_encode_rows`, `linear_encode_rows`: the CPU codec's bytes) and only
//! its bytes come down; an arriving message goes up as bytes and is decoded there and put over
//! or added to its rows.
//!
//! An exchange's footprint names the same row lists on every call, so their device copies are
//! uploaded once and kept in a [`RowLists`], with a stream's global ids and its messages' row
//! widths (which change only when a method assigns new ones).

use cache_quant::codec::bucket;
use cache_quant::{Encoding, Measured};
use cudarc::driver::CudaSlice;

use super::{BucketCodes, BucketMessage, Device, DeviceIndex, DeviceWidths, GpuError};
use crate::exchange::Put;
use crate::exchange::row_store::{RowStore, StoreError};

/// Width tables a [`RowLists`] keeps at most; the oldest goes first. A worker's streams, both
/// sides, fit several times over (AdaQP on 8 workers with 3 layers: 84).
const WIDTH_TABLES: usize = 256;

/// The device copies of the row lists a worker's exchange stages, each uploaded on first use,
/// and of the row widths of its stochastic messages.
#[derive(Default)]
pub struct RowLists {
    lists: Vec<(Vec<u32>, DeviceIndex)>,
    widths: Vec<(Vec<u8>, usize, DeviceWidths)>,
}

impl RowLists {
    /// Where the device copy of `rows` (indices below `bound`) is, uploaded if this is its
    /// first use.
    fn position(&mut self, dev: &Device, rows: &[u32], bound: usize) -> Result<usize, GpuError> {
        let found = self.lists.iter().position(|(host, idx)| host.as_slice() == rows && idx.bound() == bound);
        Ok(match found {
            Some(at) => at,
            None => {
                self.lists.push((rows.to_vec(), DeviceIndex::upload(dev, rows, bound)?));
                self.lists.len() - 1
            }
        })
    }

    /// The device copy of `rows` (indices below `bound`), uploaded if this is its first use.
    fn index(&mut self, dev: &Device, rows: &[u32], bound: usize) -> Result<&DeviceIndex, GpuError> {
        let at = self.position(dev, rows, bound)?;
        Ok(&self.lists[at].1)
    }

    /// Where the device table of `bits` for rows `width` wide is, uploaded if not kept.
    fn widths(&mut self, dev: &Device, bits: &[u8], width: usize) -> Result<usize, GpuError> {
        if let Some(at) = self.widths.iter().position(|(b, w, _)| *w == width && b.as_slice() == bits) {
            return Ok(at);
        }
        if self.widths.len() == WIDTH_TABLES {
            self.widths.remove(0);
        }
        self.widths.push((bits.to_vec(), width, DeviceWidths::upload(dev, bits, width)?));
        Ok(self.widths.len() - 1)
    }
}

/// A message on the device: exact rows as their values, a row-wise quantized message as its
/// bytes, a bucket message as its width, bounds and packed ids (its header's fields: the host
/// writes the header of one that comes down), or nothing (no rows: no buffer of no bytes).
pub(super) enum Message {
    Values(CudaSlice<f32>),
    Bytes(CudaSlice<u8>),
    Bucket {
        bits: u8,
        lo: CudaSlice<f32>,
        hi: CudaSlice<f32>,
        packed: CudaSlice<u8>,
    },
    /// Sent store to store only.
    #[cfg(feature = "nccl")]
    Empty,
}

impl Message {
    /// Its length in bytes, as [`Encoding::encode`] writes it.
    pub(super) fn bytes(&self) -> usize {
        match self {
            Message::Values(v) => v.len() * std::mem::size_of::<f32>(),
            Message::Bytes(b) => b.len(),
            Message::Bucket { packed, .. } => bucket::HEADER_BYTES + packed.len(),
            #[cfg(feature = "nccl")]
            Message::Empty => 0,
        }
    }

    /// Appends its bytes to `out` (waiting for the device's stream).
    fn download(&self, dev: &Device, out: &mut Vec<u8>) -> Result<(), GpuError> {
        match self {
            Message::Values(values) => dev.download_bytes(values, out),
            Message::Bytes(bytes) => dev.download_bytes(bytes, out),
            Message::Bucket { bits, lo, hi, packed } => {
                let mut bounds = [0.0f32; 2];
                dev.download_into(lo, &mut bounds[..1])?;
                dev.download_into(hi, &mut bounds[1..])?;
                out.push(*bits);
                bounds.iter().for_each(|b| out.extend(b.to_le_bytes()));
                dev.download_bytes(packed, out)
            }
            #[cfg(feature = "nccl")]
            Message::Empty => Ok(()),
        }
    }
}

/// A `rows x cols` row-major block on a device, as a [`RowStore`].
pub struct DeviceRows<'a> {
    dev: &'a Device,
    block: &'a mut CudaSlice<f32>,
    rows: usize,
    cols: usize,
    lists: &'a mut RowLists,
}

impl<'a> DeviceRows<'a> {
    /// `block` as `rows x cols`, its row lists cached in `lists`; refused when its length is not
    /// `rows * cols`.
    pub fn new(
        dev: &'a Device,
        block: &'a mut CudaSlice<f32>,
        rows: usize,
        cols: usize,
        lists: &'a mut RowLists,
    ) -> Result<Self, GpuError> {
        if block.len() != rows * cols {
            let detail = format!("a block of {} values is not {rows} rows of {cols}", block.len());
            return Err(GpuError::Shape { kernel: "row store", detail });
        }
        Ok(Self { dev, block, rows, cols, lists })
    }
}

impl RowStore for DeviceRows<'_> {
    fn dim(&self) -> (usize, usize) {
        (self.rows, self.cols)
    }

    fn read_rows(&mut self, rows: &[u32], out: &mut [f32]) -> Result<(), StoreError> {
        if rows.is_empty() || self.cols == 0 {
            return Ok(());
        }
        let idx = self.lists.index(self.dev, rows, self.rows)?;
        let packed = self.dev.gather_rows_at(self.cols, idx, self.block, self.rows)?;
        self.dev.download_into(&packed, out)?;
        Ok(())
    }

    fn write_rows(&mut self, rows: &[u32], values: &[f32], put: Put) -> Result<(), StoreError> {
        if rows.is_empty() || self.cols == 0 {
            return Ok(());
        }
        let idx = self.lists.index(self.dev, rows, self.rows)?;
        let packed = self.dev.upload(values)?;
        self.dev.scatter_rows_at(put, self.cols, idx, &packed, self.block, self.rows)?;
        Ok(())
    }

    fn zero_rows_from(&mut self, from: usize) -> Result<(), StoreError> {
        if from < self.rows {
            let mut tail = self.block.slice_mut(from * self.cols..);
            self.dev.stream().memset_zeros(&mut tail).map_err(GpuError::from)?;
        }
        Ok(())
    }

    fn encode_rows(&mut self, rows: &[u32], encoding: &Encoding, out: &mut Vec<u8>) -> Result<Measured, StoreError> {
        if rows.is_empty() || self.cols == 0 {
            // No values to read: the message is the array store's, of no rows.
            return Ok(encoding.encode(&[], self.cols, out)?);
        }
        encoding.validate(rows.len())?;
        let (message, measured) = self.encode_here(rows, encoding)?;
        message.download(self.dev, out)?;
        Ok(measured)
    }

    fn decode_rows(&mut self, rows: &[u32], encoding: &Encoding, bytes: &[u8], put: Put) -> Result<(), StoreError> {
        encoding.check(bytes, rows.len(), self.cols)?;
        if rows.is_empty() || self.cols == 0 {
            return Ok(());
        }
        let dev = self.dev;
        let message = match encoding {
            Encoding::Exact => Message::Values(dev.upload_bytes(bytes)?),
            Encoding::Linear { .. } | Encoding::Stochastic { .. } => Message::Bytes(dev.upload(bytes)?),
            // The header (its width, minimum and maximum; checked above) is read here, and only
            // the packed ids go up.
            Encoding::Bucket { .. } => {
                let scale = bucket::header(bytes);
                Message::Bucket {
                    bits: scale.bits,
                    lo: dev.upload(&[scale.lo])?,
                    hi: dev.upload(&[scale.hi])?,
                    packed: dev.upload(&bytes[bucket::HEADER_BYTES..])?,
                }
            }
        };
        Ok(self.decode_here(rows, encoding, message, put)?)
    }

    #[cfg(feature = "nccl")]
    fn sends_direct(&self, _encoding: &Encoding) -> bool {
        self.dev.joined()
    }

    #[cfg(feature = "nccl")]
    fn encode_kept(&mut self, peer: usize, rows: &[u32], encoding: &Encoding) -> Result<(usize, Measured), StoreError> {
        encoding.validate(rows.len())?;
        let (message, measured) = match rows.is_empty() || self.cols == 0 {
            true => (Message::Empty, Measured::default()),
            false => self.encode_here(rows, encoding)?,
        };
        let len = message.bytes();
        let mut peers = self.dev.peers();
        peers.as_mut().ok_or(GpuError::NotJoined)?.outbox.insert(peer, message);
        Ok((len, measured))
    }

    #[cfg(feature = "nccl")]
    fn post_kept(&mut self, phase: &str, incoming: &[Option<(usize, &Encoding)>]) -> Result<(), StoreError> {
        let cols = self.cols;
        let sizes: Vec<Option<(usize, &Encoding)>> =
            incoming.iter().map(|i| i.map(|(rows, e)| (e.message_len(rows, cols), e))).collect();
        let mut peers = self.dev.peers();
        Ok(peers.as_mut().ok_or(GpuError::NotJoined)?.post(phase, &sizes)?)
    }

    #[cfg(feature = "nccl")]
    fn decode_kept(
        &mut self,
        peer: usize,
        rows: &[u32],
        encoding: &Encoding,
        put: Put,
        copy: Option<&mut Vec<u8>>,
    ) -> Result<(), StoreError> {
        encoding.validate(rows.len())?;
        let message = {
            let mut peers = self.dev.peers();
            let inbox = &mut peers.as_mut().ok_or(GpuError::NotJoined)?.inbox;
            inbox.remove(&peer).ok_or_else(|| format!("nothing arrived from rank {peer}"))?
        };
        let expected = encoding.message_len(rows.len(), self.cols);
        if message.bytes() != expected {
            return Err(format!("rank {peer}'s message has {} bytes, its encoding {expected}", message.bytes()).into());
        }
        if let Some(copy) = copy {
            message.download(self.dev, copy)?;
        }
        if rows.is_empty() || self.cols == 0 {
            return Ok(());
        }
        Ok(self.decode_here(rows, encoding, message, put)?)
    }
}

impl DeviceRows<'_> {
    /// The message of `rows` (at least one, of at least one column) by `encoding`, where the
    /// rows live: exact rows gathered in message order, a quantized message encoded by its
    /// kernels; with what encoding measured.
    fn encode_here(&mut self, rows: &[u32], encoding: &Encoding) -> Result<(Message, Measured), GpuError> {
        let (dev, d) = (self.dev, self.cols);
        let idx = self.lists.position(dev, rows, self.rows)?;
        Ok(match encoding {
            Encoding::Exact => {
                let values = dev.gather_rows_at(d, &self.lists.lists[idx].1, self.block, self.rows)?;
                (Message::Values(values), Measured::default())
            }
            Encoding::Linear { bits } => {
                let index = &self.lists.lists[idx].1;
                let bytes = dev.codec_span(|| dev.linear_encode(d, *bits, index, self.block, self.rows))?;
                (Message::Bytes(bytes), Measured::default())
            }
            Encoding::Stochastic { key, bits, gids } => {
                let table = self.lists.widths(dev, bits, d)?;
                let ids = self.lists.position(dev, &gids[..rows.len()], u32::MAX as usize + 1)?;
                let lists = &*self.lists;
                let (index, ids, table) = (&lists.lists[idx].1, &lists.lists[ids].1, &lists.widths[table].2);
                let (bytes, sums) =
                    dev.codec_span(|| dev.stochastic_encode(d, *key, table, ids, index, self.block, self.rows))?;
                (Message::Bytes(bytes), measured(dev, &sums)?)
            }
            Encoding::Bucket { bits } => {
                let values = dev.gather_rows_at(d, &self.lists.lists[idx].1, self.block, self.rows)?;
                let message = dev.codec_span(|| dev.bucket_encode(*bits, &values))?;
                let measured = measured(dev, &message.sums)?;
                let BucketMessage { lo, hi, packed, .. } = message;
                (Message::Bucket { bits: *bits, lo, hi, packed }, measured)
            }
        })
    }

    /// Decodes `message`, which `encoding` wrote for `rows` (at least one), onto them: over
    /// them or added to them.
    fn decode_here(&mut self, rows: &[u32], encoding: &Encoding, message: Message, put: Put) -> Result<(), GpuError> {
        let (dev, d) = (self.dev, self.cols);
        let values = match (encoding, message) {
            (Encoding::Exact, Message::Values(values)) => values,
            (Encoding::Linear { bits }, Message::Bytes(bytes)) => {
                dev.codec_span(|| dev.linear_decode(d, *bits, rows.len(), &bytes))?
            }
            (Encoding::Stochastic { bits, .. }, Message::Bytes(bytes)) => {
                let table = self.lists.widths(dev, bits, d)?;
                dev.codec_span(|| dev.stochastic_decode(d, &self.lists.widths[table].2, &bytes))?
            }
            // The width the message names (its header's, checked against its length).
            (Encoding::Bucket { .. }, Message::Bucket { bits, lo, hi, packed }) => dev.codec_span(|| {
                let bits = u32::from(bits);
                let codes = dev.unpack_codes(bits, &packed, rows.len() * d)?;
                dev.bucket_dequantize(bits, &BucketCodes { lo, hi, codes })
            })?,
            (encoding, message) => {
                let detail = format!("a message of {} bytes is not one of {encoding:?}", message.bytes());
                return Err(GpuError::Shape { kernel: "row store", detail });
            }
        };
        let idx = self.lists.index(dev, rows, self.rows)?;
        dev.scatter_rows_at(put, d, idx, &values, self.block, self.rows)?;
        Ok(())
    }
}

/// A message's error sums, downloaded from their two-element buffer.
fn measured(dev: &Device, sums: &CudaSlice<f64>) -> Result<Measured, GpuError> {
    let mut pair = [0.0f64; 2];
    dev.download_into(sums, &mut pair)?;
    Ok(Measured { err_sq: pair[0], ref_sq: pair[1] })
}
