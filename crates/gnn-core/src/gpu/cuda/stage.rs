//! Uploads through page-locked memory, asynchronous on the uploading device's stream: the
//! host bytes are copied into a page-locked buffer (placed by [`Arena`]) and the DMA copy to a
//! fresh device buffer is queued, so the call returns before the bus has moved them. Used by a
//! copy stream's device ([`Device::copy_device`]) to overlap a batch's upload with the compute
//! stream's work; cudarc's event tracking makes the compute stream wait for the copy before it
//! reads the buffer.

use std::sync::Arc;

use cudarc::driver::{CudaSlice, CudaStream, DevicePtrMut, DeviceRepr, PinnedHostSlice, result};

use super::GpuError;
use crate::gpu::arena::{Arena, Place};

/// The page-locked buffer and its cursor.
pub(super) struct PinnedStage {
    stream: Arc<CudaStream>,
    buffer: Option<PinnedHostSlice<u8>>,
    arena: Arena,
}

impl PinnedStage {
    pub(super) fn new(stream: Arc<CudaStream>) -> Self {
        Self { stream, buffer: None, arena: Arena::default() }
    }

    /// Queues the upload of `host` into a new device buffer on the stage's stream.
    pub(super) fn upload<T: DeviceRepr>(&mut self, host: &[T]) -> Result<CudaSlice<T>, GpuError> {
        let stream = &self.stream;
        // SAFETY: the copy queued below on the same stream writes every element before any
        // later work of any stream reads the buffer (cudarc records the write on the buffer).
        let mut dst = unsafe { stream.alloc::<T>(host.len()) }?;
        let bytes = std::mem::size_of_val(host);
        if bytes == 0 {
            return Ok(dst);
        }
        let offset = match self.arena.place(bytes) {
            Place::At(offset) => offset,
            Place::Restart => {
                stream.synchronize()?;
                0
            }
            Place::Grow { capacity } => {
                stream.synchronize()?;
                self.buffer = None;
                // SAFETY: the bytes are uninitialised until written below, and only the bytes
                // written there are ever read.
                self.buffer = Some(unsafe { stream.context().alloc_pinned::<u8>(capacity) }?);
                0
            }
        };
        let buffer =
            self.buffer.as_mut().ok_or(GpuError::Shape { kernel: "upload", detail: "no staging buffer".into() })?;
        let base = buffer.as_mut_ptr()?;
        // SAFETY: `offset + bytes` is within the buffer (`Arena::place`), which no copy in flight
        // reads at these bytes (the arena restarts or grows only after a synchronize); `host`
        // is `bytes` bytes of plain `DeviceRepr` values and does not overlap page-locked memory
        // we own.
        let staged = unsafe {
            let at = base.add(offset);
            std::ptr::copy_nonoverlapping(host.as_ptr().cast::<u8>(), at, bytes);
            std::slice::from_raw_parts(at.cast_const(), bytes)
        };
        let (ptr, record) = dst.device_ptr_mut(stream);
        // SAFETY: `ptr` is `dst`'s allocation of exactly `bytes` bytes on this stream, and
        // `staged` stays valid and unwritten until the stream has run the copy (see above, and
        // `Drop`, which waits for it).
        unsafe { result::memcpy_htod_async(ptr, staged, stream.cu_stream()) }?;
        drop(record);
        Ok(dst)
    }
}

impl Drop for PinnedStage {
    /// The page-locked buffer outlives the copies that read it.
    fn drop(&mut self) {
        if self.buffer.is_some() {
            let _ = self.stream.synchronize();
        }
    }
}
