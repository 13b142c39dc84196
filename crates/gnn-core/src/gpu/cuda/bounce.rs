//! Copies between host slices and device buffers through a page-locked buffer of two halves,
//! [`CHUNK`] bytes each, on the device's stream: a download's next chunk is copied down into one
//! half while the host copies the last chunk out of the other; an upload's chunk is copied into
//! a half once that half's last copy up is done, and the copy is queued, so the call returns
//! with at most two chunks in flight.
//!
//! This is what the CUDA driver does for pageable memory too, but its bounce buffers are shared
//! by the process: workers sharing a GPU take turns on them. On an H200 host, one thread moved
//! 8-13 GB/s each way through pageable memory, and 8 threads 5.2 GB/s together; page-locked
//! copies moved 50 GB/s from one thread and 90 GB/s from 8 (`docs/BENCHMARKS.md`). Each
//! [`super::Device`] holds its own [`Bounce`], so workers copy in parallel.
//!
//! The halves are plain page-locked memory (not write-combined, which the host reads slowly).

use std::sync::Arc;

use cudarc::driver::sys::CUdeviceptr;
use cudarc::driver::{CudaEvent, CudaStream, DeviceRepr, PinnedHostSlice, result};

use super::GpuError;

/// The element types copied between host and device: plain numbers, for which every byte
/// pattern is a value, so their slices are copied as bytes.
pub trait Plain: DeviceRepr + Default + Clone {}
impl Plain for u8 {}
impl Plain for u32 {}
impl Plain for i32 {}
impl Plain for u64 {}
impl Plain for f32 {}
impl Plain for f64 {}

/// `values` as their bytes.
pub(super) fn bytes<T: Plain>(values: &[T]) -> &[u8] {
    // SAFETY: `Plain` types have no padding and no invalid bytes; the view spans exactly the
    // slice and borrows it.
    unsafe { std::slice::from_raw_parts(values.as_ptr().cast::<u8>(), std::mem::size_of_val(values)) }
}

/// `values` as their bytes, to be written.
pub(super) fn bytes_mut<T: Plain>(values: &mut [T]) -> &mut [u8] {
    // SAFETY: as `bytes`; any bytes written are a `Plain` value.
    unsafe { std::slice::from_raw_parts_mut(values.as_mut_ptr().cast::<u8>(), std::mem::size_of_val(values)) }
}

/// Bytes in each half of the buffer: the chunks a copy is cut into.
pub const CHUNK: usize = 4 << 20;

/// One half: its page-locked bytes, and an event recorded after the last copy that reads or
/// writes them.
struct Half {
    bytes: PinnedHostSlice<u8>,
    done: CudaEvent,
}

/// The page-locked buffer of one stream, allocated on first use.
pub(super) struct Bounce {
    stream: Arc<CudaStream>,
    halves: Vec<Half>,
}

impl Bounce {
    pub(super) fn new(stream: Arc<CudaStream>) -> Self {
        Self { stream, halves: Vec::new() }
    }

    fn halves(&mut self) -> Result<&mut [Half], GpuError> {
        if self.halves.is_empty() {
            let ctx = self.stream.context();
            for _ in 0..2 {
                // SAFETY: the bytes are uninitialised until a copy writes them, and only bytes a
                // copy wrote are read (`download` reads what its copy down wrote; `upload`
                // writes before its copy up reads).
                let bytes = unsafe { ctx.alloc_pinned_with_flags::<u8>(CHUNK, 0) }?;
                self.halves.push(Half { bytes, done: ctx.new_event(None)? });
            }
        }
        Ok(&mut self.halves)
    }

    /// Copies the `dst.len()` bytes at device address `src` into `dst`, and waits for them.
    ///
    /// # Safety
    /// `src` must be a device allocation of the stream's context holding at least `dst.len()`
    /// bytes, which no queued or later work writes before this call returns.
    pub(super) unsafe fn download(&mut self, src: CUdeviceptr, dst: &mut [u8]) -> Result<(), GpuError> {
        let stream = self.stream.cu_stream();
        let halves = self.halves()?;
        let chunks = dst.len().div_ceil(CHUNK);
        // Queues chunk `k`'s copy down into half `k % 2`, then records that half's event.
        let queue = |halves: &mut [Half], k: usize, len: usize| -> Result<(), GpuError> {
            let half = &mut halves[k % 2];
            // SAFETY: `len <= CHUNK` bytes of the half's own allocation; the half's previous
            // chunk was copied out before this (the loop below), so nothing reads them now.
            let into = unsafe { std::slice::from_raw_parts_mut(half.bytes_ptr()?, len) };
            // SAFETY: `src + k * CHUNK` holds `len` bytes (the caller's contract), and `into`
            // stays allocated until the event below has passed (`Drop` waits for the stream).
            unsafe { result::memcpy_dtoh_async(into, src + (k * CHUNK) as u64, stream) }?;
            // SAFETY: an event and stream of the same context.
            unsafe { result::event::record(half.done.cu_event(), stream) }?;
            Ok(())
        };
        let total = dst.len();
        let len_of = |k: usize| CHUNK.min(total - k * CHUNK);
        if chunks > 0 {
            queue(halves, 0, len_of(0))?;
        }
        for k in 0..chunks {
            if k + 1 < chunks {
                queue(halves, k + 1, len_of(k + 1))?;
            }
            let half = &mut halves[k % 2];
            half.done.synchronize()?;
            let len = len_of(k);
            // SAFETY: the copy down of these `len` bytes has completed (the event above), and
            // nothing else writes the half until the next `queue` of it.
            let from = unsafe { std::slice::from_raw_parts(half.bytes_ptr()?.cast_const(), len) };
            dst[k * CHUNK..k * CHUNK + len].copy_from_slice(from);
        }
        Ok(())
    }

    /// Queues the copy of `src` to device address `dst`; returns once every byte is in the
    /// page-locked buffer (at most two chunks still to cross).
    ///
    /// # Safety
    /// `dst` must be a device allocation of the stream's context of at least `src.len()` bytes,
    /// which no work queued on another stream before the copies reads or writes.
    pub(super) unsafe fn upload(&mut self, src: &[u8], dst: CUdeviceptr) -> Result<(), GpuError> {
        let stream = self.stream.cu_stream();
        let halves = self.halves()?;
        for (k, chunk) in src.chunks(CHUNK).enumerate() {
            let half = &mut halves[k % 2];
            // The half's last copy up (two chunks ago, or an earlier call's) has read it.
            half.done.synchronize()?;
            // SAFETY: `chunk.len() <= CHUNK` bytes of the half's own allocation, which no copy
            // in flight reads (the wait above).
            let at = half.bytes_ptr()?;
            let staged = unsafe {
                std::ptr::copy_nonoverlapping(chunk.as_ptr(), at, chunk.len());
                std::slice::from_raw_parts(at.cast_const(), chunk.len())
            };
            // SAFETY: `dst + k * CHUNK` holds `chunk.len()` bytes (the caller's contract);
            // `staged` is neither written nor freed before the event recorded below has passed
            // (the wait above on the half's next use; `Drop`).
            unsafe { result::memcpy_htod_async(dst + (k * CHUNK) as u64, staged, stream) }?;
            // SAFETY: an event and stream of the same context.
            unsafe { result::event::record(half.done.cu_event(), stream) }?;
        }
        Ok(())
    }
}

impl Half {
    /// The half's first byte. The callers order their reads and writes through it after the
    /// copies, by `done`; the slice's own event, which `as_mut_ptr` waits on, no copy here
    /// records, so it returns at once.
    fn bytes_ptr(&mut self) -> Result<*mut u8, GpuError> {
        Ok(self.bytes.as_mut_ptr()?)
    }
}

impl Drop for Bounce {
    /// The page-locked halves outlive the copies that use them.
    fn drop(&mut self) {
        if !self.halves.is_empty() {
            let _ = self.stream.synchronize();
        }
    }
}
