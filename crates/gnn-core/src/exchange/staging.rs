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
//! ([`OnStore::codes_on_store`]): the exchange runs on the store ([`OnStore::call_on_store`]),
//! which encodes each outgoing message by its [`cache_quant::Encoding`] ([`RowStore::encode_rows`]) and
//! decodes each incoming one onto its rows ([`RowStore::decode_rows`]); only the encoded bytes
//! cross, and the codecs' bookkeeping (stats, probes) stays on the host.
//!
//! [`OnStore::codes_on_store`]: super::OnStore::codes_on_store
//! [`OnStore::call_on_store`]: super::OnStore::call_on_store
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

use ndarray::{Array2, ArrayView1, ArrayViewMut1};

use super::row_store::{BusBytes, Put, RowStore};
use super::{Call, Exchange, ExchangeError, Half, Tag};

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
        let Some(calls) = exchange.on_store().filter(|_| store.dim().1 > 0) else { return Ok(false) };
        if !calls.codes_on_store(call, tag) {
            return Ok(false);
        }
        self.check_rows(tag, store.dim().0)?;
        self.bytes += calls.call_on_store(call, half, tag, store)?;
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
