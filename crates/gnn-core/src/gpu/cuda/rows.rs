//! A block of rows on the device as a staged exchange's [`RowStore`]: the rows a call reads are
//! gathered on the device (`gather_rows`) and come down packed, the rows it writes go up packed
//! and are scattered over their rows (`scatter_rows`) or added to them (`scatter_add_rows`), and
//! released rows are zeroed by a memset. Only those rows cross the bus.
//!
//! An exchange's footprint names the same row lists on every call, so their device copies are
//! uploaded once and kept in a [`RowLists`].

use cudarc::driver::CudaSlice;

use super::{Device, DeviceIndex, GpuError};
use crate::exchange::Put;
use crate::exchange::staging::{RowStore, StoreError};

/// The device copies of the row lists a worker's exchange stages, each uploaded on first use.
#[derive(Default)]
pub struct RowLists {
    lists: Vec<(Vec<u32>, DeviceIndex)>,
}

impl RowLists {
    /// The device copy of `rows` (indices below `bound`), uploaded if this is its first use.
    fn index(&mut self, dev: &Device, rows: &[u32], bound: usize) -> Result<&DeviceIndex, GpuError> {
        let found = self.lists.iter().position(|(host, idx)| host.as_slice() == rows && idx.bound() == bound);
        let at = match found {
            Some(at) => at,
            None => {
                self.lists.push((rows.to_vec(), DeviceIndex::upload(dev, rows, bound)?));
                self.lists.len() - 1
            }
        };
        Ok(&self.lists[at].1)
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
}
