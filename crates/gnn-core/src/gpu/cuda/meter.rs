//! What a device measures about its own work: GPU time between points of its stream (CUDA
//! events), the part of it spent inside exchange calls, the bytes copied between host and
//! device, and its memory (free, total, and the high-water mark of the stream-ordered pool every
//! buffer of this path is allocated from).

use std::sync::atomic::Ordering;
use std::sync::{Mutex, PoisonError};

use cudarc::driver::sys::{CUevent_flags, CUmemPool_attribute};
use cudarc::driver::{CudaEvent, result};

use super::{Device, GpuError};
use crate::gpu::MemoryInfo;

/// Bytes copied between host and device since the device was opened.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Transfers {
    pub host_to_device: u64,
    pub device_to_host: u64,
}

impl Transfers {
    /// What was copied between `earlier` and `self`.
    pub fn since(self, earlier: Transfers) -> Transfers {
        Transfers {
            host_to_device: self.host_to_device - earlier.host_to_device,
            device_to_host: self.device_to_host - earlier.device_to_host,
        }
    }
}

/// Events recorded on a device's stream between named phases; [`PhaseClock::read`] gives the
/// GPU time of each phase (from the previous mark, or the clock's start, to its own).
pub struct PhaseClock<'d> {
    dev: &'d Device,
    start: CudaEvent,
    marks: Vec<(&'static str, CudaEvent)>,
}

impl PhaseClock<'_> {
    /// Ends phase `name` at this point of the stream.
    pub fn mark(&mut self, name: &'static str) -> Result<(), GpuError> {
        let event = self.dev.timed_event()?;
        self.marks.push((name, event));
        Ok(())
    }

    /// Each phase's GPU seconds, in the order marked (waits for the last mark).
    pub fn read(self) -> Result<Vec<(&'static str, f64)>, GpuError> {
        let mut previous = &self.start;
        let mut phases = Vec::with_capacity(self.marks.len());
        for (name, event) in &self.marks {
            phases.push((*name, f64::from(previous.elapsed_ms(event)?) / 1e3));
            previous = event;
        }
        Ok(phases)
    }
}

/// The exchange calls' GPU time since the last [`Device::take_exchange_s`]: the seconds of
/// the spans already read, and the spans not yet read (two events around one call each).
#[derive(Default)]
pub(super) struct Spans {
    read_s: f64,
    open: Vec<(CudaEvent, CudaEvent)>,
}

impl Spans {
    /// Spans kept before they are read into `read_s`: their events are driver objects, so a
    /// caller that never takes the time holds no more than these.
    const KEPT: usize = 256;

    /// Reads every span into `read_s` (waits for the last one to end).
    fn read(&mut self) -> Result<(), GpuError> {
        for (start, end) in self.open.drain(..) {
            self.read_s += f64::from(start.elapsed_ms(&end)?) / 1e3;
        }
        Ok(())
    }
}

impl Device {
    /// Runs `call` (an exchange call: rows staged through the host and the host exchange)
    /// between two events of the stream, kept for [`Device::take_exchange_s`]. The span is the
    /// GPU time from the stream's reaching the call (its earlier kernels done) to the call's
    /// last upload or kernel: what the call kept this stream from computing.
    pub(super) fn exchange_span<T>(&self, call: impl FnOnce() -> Result<T, GpuError>) -> Result<T, GpuError> {
        self.span(&self.spans, call)
    }

    /// Runs `call` (a codec's kernels inside an exchange call: a message encoded or decoded
    /// where the rows live) between two events, kept apart: [`Device::take_exchange_s`] leaves
    /// them out, so they count as compute, as a CPU worker's codec does.
    pub(super) fn codec_span<T>(&self, call: impl FnOnce() -> Result<T, GpuError>) -> Result<T, GpuError> {
        self.span(&self.codec_spans, call)
    }

    /// Runs `call` between two events of the stream, kept in `spans`.
    fn span<T>(&self, spans: &Mutex<Spans>, call: impl FnOnce() -> Result<T, GpuError>) -> Result<T, GpuError> {
        let start = self.timed_event()?;
        let out = call()?;
        let end = self.timed_event()?;
        let mut spans = spans.lock().unwrap_or_else(PoisonError::into_inner);
        spans.open.push((start, end));
        if spans.open.len() >= Spans::KEPT {
            spans.read()?;
        }
        Ok(out)
    }

    /// The GPU seconds of the exchange calls made since the last call of this, less their
    /// codecs' kernels (waits for the last one to end). A phase clock's reading over the same
    /// calls includes them; the difference is the device's compute.
    pub fn take_exchange_s(&self) -> Result<f64, GpuError> {
        let take = |spans: &Mutex<Spans>| -> Result<f64, GpuError> {
            let mut spans = spans.lock().unwrap_or_else(PoisonError::into_inner);
            spans.read()?;
            Ok(std::mem::take(&mut *spans).read_s)
        };
        Ok(take(&self.spans)? - take(&self.codec_spans)?)
    }

    /// A clock starting at this point of the stream.
    pub fn clock(&self) -> Result<PhaseClock<'_>, GpuError> {
        Ok(PhaseClock { dev: self, start: self.timed_event()?, marks: Vec::new() })
    }

    fn timed_event(&self) -> Result<CudaEvent, GpuError> {
        Ok(self.stream.record_event(Some(CUevent_flags::CU_EVENT_DEFAULT))?)
    }

    /// Bytes copied by [`Device::upload`] and [`Device::download`] so far.
    pub fn transfers(&self) -> Transfers {
        Transfers {
            host_to_device: self.h2d_bytes.load(Ordering::Relaxed),
            device_to_host: self.d2h_bytes.load(Ordering::Relaxed),
        }
    }

    pub(super) fn count_transfer(&self, host_to_device: bool, bytes: usize) {
        let counter = if host_to_device { &self.h2d_bytes } else { &self.d2h_bytes };
        counter.fetch_add(bytes as u64, Ordering::Relaxed);
    }

    /// Free and total memory of the device.
    pub fn memory(&self) -> Result<MemoryInfo, GpuError> {
        let (free, total) = self.stream.context().mem_get_info()?;
        Ok(MemoryInfo { free: free as u64, total: total as u64 })
    }

    /// The most bytes the device's memory pool has had in use at once since the last
    /// [`Device::reset_peak`] (every buffer of this path comes from that pool; cuBLAS's
    /// workspace and the loaded modules do not).
    pub fn peak_bytes(&self) -> Result<u64, GpuError> {
        self.used_mem_high(false)
    }

    /// Restarts [`Device::peak_bytes`] from the bytes in use now.
    pub fn reset_peak(&self) -> Result<(), GpuError> {
        self.used_mem_high(true).map(drop)
    }

    /// The pool's `USED_MEM_HIGH` attribute, read, or reset (the driver takes only 0).
    fn used_mem_high(&self, reset: bool) -> Result<u64, GpuError> {
        let mut value: u64 = 0;
        let pool = self.pool()?;
        let attribute = CUmemPool_attribute::CU_MEMPOOL_ATTR_USED_MEM_HIGH;
        let at = (&mut value as *mut u64).cast();
        // SAFETY: `pool` is the device's current pool (from the driver, for a device of this
        // context), and USED_MEM_HIGH is a cuuint64_t attribute, which `value` is; a reset
        // passes the 0 it holds.
        unsafe {
            if reset {
                result::mem_pool::set_attribute(pool, attribute, at)
            } else {
                result::mem_pool::get_attribute(pool, attribute, at)
            }
        }?;
        Ok(value)
    }

    fn pool(&self) -> Result<cudarc::driver::sys::CUmemoryPool, GpuError> {
        let ctx = self.stream.context();
        ctx.bind_to_thread()?;
        // SAFETY: the device handle comes from this live context.
        Ok(unsafe { result::device::get_mem_pool(ctx.cu_device()) }?)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn transfers_since_an_earlier_reading_are_the_difference() {
        let earlier = Transfers { host_to_device: 10, device_to_host: 3 };
        let now = Transfers { host_to_device: 25, device_to_host: 7 };
        assert_eq!(now.since(earlier), Transfers { host_to_device: 15, device_to_host: 4 });
    }
}
