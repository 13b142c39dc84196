//! Exchanges for a worker whose blocks live off the host (a GPU): each call stages through host
//! memory only the rows it reads and writes, as the exchange declares them
//! ([`Exchange::footprint`]), and runs the host exchange (codecs, caches, compensators and all)
//! on those rows.
//!
//! A staged call: the footprint's `reads` rows go down from the [`RowStore`] into a host block
//! of the worker's local rows, the exchange runs on that block, and the `writes` rows go back
//! up (added to the store's rows where the call adds into them, whose host rows start at zero),
//! then the store zeroes the rows the call releases. Rows outside the footprint are never
//! copied: the host block holds them as zeros, allocated lazily, so they cost no memory
//! either. The exchange keeps its state on the host, the same state a CPU worker's exchange
//! keeps for the same rows.
//!
//! A training call whose codecs are [`cache_quant::KernelCodec`]s does not stage rows at all
//! ([`Exchange::codes_on_store`]): the exchange runs on the store ([`Exchange::call_on_store`]),
//! which encodes each outgoing message by its [`Encoding`] ([`RowStore::encode_rows`]) and
//! decodes each incoming one onto its rows ([`RowStore::decode_rows`]); only the encoded bytes
//! cross, and the codecs' bookkeeping (stats, probes) stays on the host.
//!
//! A store that sends its messages to the peers' stores itself ([`RowStore::sends_direct`]:
//! NCCL between GPUs) keeps them where the rows live: such a call moves nothing over the bus but
//! what a codec's bookkeeping reads of an arrival, and the communicator only records the
//! all-to-all in the ledger, as the host path would have sent it.
//!
//! [`BusBytes`] counts what crossed between the store and the host, apart from the network
//! ledger. A call moves at most the rows it sends plus the rows it receives: a pull sends its
//! `reads` and receives into its `writes`, a push the other way round, and a replica sum sends
//! and receives every replicated row at least once each way; on the store, each in its encoded
//! size.

use cache_quant::{Encoding, Measured};
use ndarray::{Array2, ArrayView1, ArrayViewMut1};

use super::{Call, Exchange, ExchangeError, Half, Put, Tag};

/// Why a store could not move rows (the device's error, boxed).
pub type StoreError = Box<dyn std::error::Error + Send + Sync>;

/// A block of `rows x cols` values held where the host cannot read it directly, with the row
/// copies a staged exchange needs. [`Array2`] implements it as the reference every other store
/// is tested against.
pub trait RowStore {
    /// Rows and columns of the block.
    fn dim(&self) -> (usize, usize);

    /// Copies `rows` of the block, in that order, into `out` (`rows.len() x cols`, row-major).
    fn read_rows(&mut self, rows: &[u32], out: &mut [f32]) -> Result<(), StoreError>;

    /// Puts `values` (`rows.len() x cols`, row-major) into `rows`: over them, or added to them.
    fn write_rows(&mut self, rows: &[u32], values: &[f32], put: Put) -> Result<(), StoreError>;

    /// Zeroes rows `from..`.
    fn zero_rows_from(&mut self, from: usize) -> Result<(), StoreError>;

    /// Appends the message of `rows`, in that order, encoded by `encoding`: the bytes
    /// [`Encoding::encode`] writes for them.
    fn encode_rows(&mut self, rows: &[u32], encoding: &Encoding, out: &mut Vec<u8>) -> Result<Measured, StoreError>;

    /// Decodes a message `encoding` wrote for `rows` onto them, over them or added to them, as
    /// [`Encoding::decode`] then [`RowStore::write_rows`] would.
    fn decode_rows(&mut self, rows: &[u32], encoding: &Encoding, bytes: &[u8], put: Put) -> Result<(), StoreError>;

    /// Whether this store sends a message of `encoding` to the peer's store itself, without
    /// the host (NCCL between GPUs): a call whose every message it sends so goes through
    /// [`RowStore::encode_kept`], [`RowStore::post_kept`] and [`RowStore::decode_kept`]. The
    /// answer must be the same on every worker for the same encoding. None by default.
    fn sends_direct(&self, _encoding: &Encoding) -> bool {
        false
    }

    /// Encodes the message of `rows` for `peer`, as [`RowStore::encode_rows`] would write it,
    /// into this store's outbox (over what the outbox held for `peer`); returns its length in
    /// bytes and what encoding measured.
    fn encode_kept(
        &mut self,
        peer: usize,
        _rows: &[u32],
        _encoding: &Encoding,
    ) -> Result<(usize, Measured), StoreError> {
        Err(format!("this store keeps no message for rank {peer}").into())
    }

    /// Sends each outbox message to its peer's store under `phase`, and receives from each
    /// peer `p` with `incoming[p] = Some((rows, encoding))` its message of `rows` rows by
    /// `encoding` ([`Encoding::message_len`] bytes) into the inbox (none from this worker).
    /// The messages may still be in flight when it returns: [`RowStore::decode_kept`] lands
    /// them after they arrived.
    fn post_kept(&mut self, phase: &str, _incoming: &[Option<(usize, &Encoding)>]) -> Result<(), StoreError> {
        Err(format!("{phase}: this store sends no message itself").into())
    }

    /// Decodes the inbox message from `peer`, which `encoding` wrote for `rows`, onto them as
    /// [`RowStore::decode_rows`] would (checking it as [`Encoding::check`] does); with `copy`,
    /// also appends the message's bytes there (a codec's bookkeeping reads them).
    fn decode_kept(
        &mut self,
        peer: usize,
        _rows: &[u32],
        _encoding: &Encoding,
        _put: Put,
        _copy: Option<&mut Vec<u8>>,
    ) -> Result<(), StoreError> {
        Err(format!("this store holds no message from rank {peer}").into())
    }
}

impl RowStore for Array2<f32> {
    fn dim(&self) -> (usize, usize) {
        Array2::dim(self)
    }

    fn read_rows(&mut self, rows: &[u32], out: &mut [f32]) -> Result<(), StoreError> {
        let cols = self.ncols();
        for (dst, &r) in out.chunks_exact_mut(cols.max(1)).zip(rows) {
            dst.iter_mut().zip(self.row(r as usize)).for_each(|(d, &s)| *d = s);
        }
        Ok(())
    }

    fn write_rows(&mut self, rows: &[u32], values: &[f32], put: Put) -> Result<(), StoreError> {
        let cols = self.ncols();
        for (src, &r) in values.chunks_exact(cols.max(1)).zip(rows) {
            let row = self.row_mut(r as usize);
            match put {
                Put::Overwrite => row.into_iter().zip(src).for_each(|(d, &s)| *d = s),
                Put::Add => row.into_iter().zip(src).for_each(|(d, &s)| *d += s),
            }
        }
        Ok(())
    }

    fn zero_rows_from(&mut self, from: usize) -> Result<(), StoreError> {
        let from = from.min(self.nrows());
        self.slice_mut(ndarray::s![from.., ..]).fill(0.0);
        Ok(())
    }

    fn encode_rows(&mut self, rows: &[u32], encoding: &Encoding, out: &mut Vec<u8>) -> Result<Measured, StoreError> {
        let cols = self.ncols();
        let mut packed = vec![0.0; rows.len() * cols];
        self.read_rows(rows, &mut packed)?;
        Ok(encoding.encode(&packed, cols, out)?)
    }

    fn decode_rows(&mut self, rows: &[u32], encoding: &Encoding, bytes: &[u8], put: Put) -> Result<(), StoreError> {
        let mut values = vec![0.0; rows.len() * self.ncols()];
        encoding.decode(bytes, self.ncols(), &mut values)?;
        self.write_rows(rows, &values, put)
    }
}

/// Bytes that crossed between a [`RowStore`] and the host.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct BusBytes {
    /// Store to host.
    pub down: u64,
    /// Host to store.
    pub up: u64,
}

impl BusBytes {
    /// Both directions.
    pub fn total(&self) -> u64 {
        self.down + self.up
    }
}

impl std::ops::AddAssign for BusBytes {
    fn add_assign(&mut self, other: Self) {
        self.down += other.down;
        self.up += other.up;
    }
}

/// Why a staged call failed.
#[derive(Debug, thiserror::Error)]
pub enum StageError {
    /// The exchange failed, or the store did (`ExchangeError::Store`).
    #[error(transparent)]
    Exchange(#[from] ExchangeError),
    #[error("staging {tag}: the store holds {rows} rows, the exchange's worker {expected}")]
    Rows { tag: Tag, rows: usize, expected: usize },
    #[error("staging {tag}: {call:?} cannot be split (only pulls and pushes are)")]
    Unsplit { tag: Tag, call: Call },
}

/// Stages one worker's exchange calls through host blocks of its `num_local` rows.
pub struct Stager {
    num_local: usize,
    /// One host block per width the calls have used.
    blocks: Vec<Array2<f32>>,
    /// Rows on their way between the store and a host block.
    packed: Vec<f32>,
    bytes: BusBytes,
}

impl Stager {
    /// A stager for a worker of `num_local` local rows (the exchange's part).
    pub fn new(num_local: usize) -> Self {
        Self { num_local, blocks: Vec::new(), packed: Vec::new(), bytes: BusBytes::default() }
    }

    /// Runs `call` of `exchange` on `store`'s block: the blocking form.
    pub fn call(
        &mut self,
        exchange: &mut dyn Exchange,
        call: Call,
        tag: Tag,
        store: &mut dyn RowStore,
    ) -> Result<(), StageError> {
        if self.on_store(exchange, call, Half::Whole, tag, store)? {
            return Ok(());
        }
        let block = self.down(exchange, call, tag, store)?;
        let host = &mut self.blocks[block];
        match call {
            Call::Pull => exchange.pull_halo(tag, host)?,
            Call::Push => exchange.push_halo_grad(tag, host)?,
            Call::Sum => exchange.sum_replicas(tag, host)?,
            Call::Max => exchange.max_replicas(tag, host)?,
        }
        self.up(exchange, call, tag, store, block)
    }

    /// First half of a split pull or push ([`Exchange::start_pull`], [`Exchange::start_push`]):
    /// the rows the call reads go down and are sent. The store's block may be read and (a push's
    /// primary rows) changed until [`Stager::finish`]; the host block stays the stager's.
    pub fn start(
        &mut self,
        exchange: &mut dyn Exchange,
        call: Call,
        tag: Tag,
        store: &mut dyn RowStore,
    ) -> Result<(), StageError> {
        if self.on_store(exchange, call, Half::Start, tag, store)? {
            return Ok(());
        }
        let block = self.down(exchange, call, tag, store)?;
        let host = &self.blocks[block];
        match call {
            Call::Pull => exchange.start_pull(tag, host)?,
            Call::Push => exchange.start_push(tag, host)?,
            Call::Sum | Call::Max => return Err(StageError::Unsplit { tag, call }),
        }
        Ok(())
    }

    /// Second half of a split call [`Stager::start`] began on a block of `store`'s width: lands
    /// what arrived and puts the written rows into the store.
    pub fn finish(
        &mut self,
        exchange: &mut dyn Exchange,
        call: Call,
        tag: Tag,
        store: &mut dyn RowStore,
    ) -> Result<(), StageError> {
        if self.on_store(exchange, call, Half::Finish, tag, store)? {
            return Ok(());
        }
        let block = self.block(tag, store.dim())?;
        let host = &mut self.blocks[block];
        match call {
            Call::Pull => exchange.finish_pull(tag, host)?,
            Call::Push => exchange.finish_push(tag, host)?,
            Call::Sum | Call::Max => return Err(StageError::Unsplit { tag, call }),
        }
        self.up(exchange, call, tag, store, block)
    }

    /// Bytes moved since the last call, and a fresh count.
    pub fn take_bytes(&mut self) -> BusBytes {
        std::mem::take(&mut self.bytes)
    }

    /// Runs `half` of `call` on `store` where the exchange codes there; whether it did. A block
    /// of no columns stages (there is nothing to move, and a codec reads no rows from it).
    fn on_store(
        &mut self,
        exchange: &mut dyn Exchange,
        call: Call,
        half: Half,
        tag: Tag,
        store: &mut dyn RowStore,
    ) -> Result<bool, StageError> {
        if store.dim().1 == 0 || !exchange.codes_on_store(call, tag) {
            return Ok(false);
        }
        self.check_rows(tag, store.dim().0)?;
        self.bytes += exchange.call_on_store(call, half, tag, store)?;
        Ok(true)
    }

    /// An error unless a store of `rows` rows is the worker's.
    fn check_rows(&self, tag: Tag, rows: usize) -> Result<(), StageError> {
        if rows != self.num_local {
            return Err(StageError::Rows { tag, rows, expected: self.num_local });
        }
        Ok(())
    }

    /// The host block for `dim`'s width (made zeroed on first use), checked against the worker.
    fn block(&mut self, tag: Tag, (rows, cols): (usize, usize)) -> Result<usize, StageError> {
        self.check_rows(tag, rows)?;
        Ok(match self.blocks.iter().position(|b| b.ncols() == cols) {
            Some(i) => i,
            None => {
                self.blocks.push(Array2::zeros((rows, cols)));
                self.blocks.len() - 1
            }
        })
    }

    /// Brings the rows `call` reads down into its host block, whose rows it adds into start at
    /// zero; returns the block's index.
    fn down(
        &mut self,
        exchange: &dyn Exchange,
        call: Call,
        tag: Tag,
        store: &mut dyn RowStore,
    ) -> Result<usize, StageError> {
        let block = self.block(tag, store.dim())?;
        let footprint = exchange.footprint(call);
        let host = &mut self.blocks[block];
        let cols = host.ncols();
        let len = footprint.reads.len() * cols;
        if self.packed.len() < len {
            self.packed.resize(len, 0.0);
        }
        store
            .read_rows(footprint.reads, &mut self.packed[..len])
            .map_err(|source| ExchangeError::Store { tag, source })?;
        // `assign` between contiguous rows is a slice copy (about twice an element-wise zip's
        // rate on a 128-wide block).
        for (src, &r) in self.packed[..len].chunks_exact(cols.max(1)).zip(footprint.reads) {
            host.row_mut(r as usize).assign(&ArrayView1::from(src));
        }
        if footprint.put == Put::Add {
            footprint.writes.iter().for_each(|&r| host.row_mut(r as usize).fill(0.0));
        }
        self.bytes.down += (len * 4) as u64;
        Ok(block)
    }

    /// Puts the rows `call` wrote from host block `block` into the store, and zeroes the rows
    /// it releases.
    fn up(
        &mut self,
        exchange: &dyn Exchange,
        call: Call,
        tag: Tag,
        store: &mut dyn RowStore,
        block: usize,
    ) -> Result<(), StageError> {
        let footprint = exchange.footprint(call);
        let host = &self.blocks[block];
        let cols = host.ncols();
        let len = footprint.writes.len() * cols;
        if self.packed.len() < len {
            self.packed.resize(len, 0.0);
        }
        for (dst, &r) in self.packed[..len].chunks_exact_mut(cols.max(1)).zip(footprint.writes) {
            ArrayViewMut1::from(dst).assign(&host.row(r as usize));
        }
        let store_err = |source| ExchangeError::Store { tag, source };
        store.write_rows(footprint.writes, &self.packed[..len], footprint.put).map_err(store_err)?;
        if let Some(from) = footprint.zeroes_from {
            store.zero_rows_from(from).map_err(store_err)?;
        }
        self.bytes.up += (len * 4) as u64;
        Ok(())
    }
}

#[cfg(test)]
#[path = "staging_tests.rs"]
mod tests;
