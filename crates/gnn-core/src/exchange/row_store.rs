//! Where a worker's blocks live when the host cannot read them directly (a GPU): the
//! [`RowStore`] a staged or on-store exchange call moves rows through, how the rows it writes
//! take their values ([`Put`]), and the bytes that crossed between it and the host
//! ([`BusBytes`]). An [`Array2`] is the reference store every other is tested against.

use cache_quant::{Encoding, Measured};
use ndarray::Array2;

/// How a call's written rows take their new values.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Put {
    /// The rows' values are replaced.
    Overwrite,
    /// What arrived is added to the rows' values.
    Add,
}

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
