//! The device path with the `cuda` feature: one [`Device`] per GPU, holding a stream, a cuBLAS
//! handle and the kernel modules, each loaded from the embedded PTX the first time one of its
//! kernels runs on that device (as candle does).

mod blas;
mod bounce;
mod kernels;
mod learner;
mod link;
mod meter;
mod model;
#[cfg(feature = "nccl")]
mod peers;
mod ptx;
mod rows;
mod stage;

use std::sync::atomic::AtomicU64;
use std::sync::{Arc, Mutex};

use cudarc::cublas::CudaBlas;
use cudarc::driver::{
    CudaContext, CudaFunction, CudaModule, CudaStream, DevicePtr, DevicePtrMut, DeviceRepr, ValidAsZeroBits,
};

pub use bounce::{CHUNK, Plain};
/// Device buffers, as the device path's callers hold them.
pub use cudarc::driver::CudaSlice;
pub use kernels::{BucketCodes, BucketMessage, DeviceCsr, DeviceIndex, DeviceLabels, DeviceWidths, NormOut, RowCodes};
pub use learner::{DeviceViews, DeviceWhole, PlacedBlocks, Resident};
pub use meter::{PhaseClock, Transfers};
pub use model::{DeviceBlocks, DeviceGraph, DeviceLoss, DeviceModel, PartViews};
pub use rows::{DeviceRows, RowLists};

/// A failure of the device path.
#[derive(Debug, thiserror::Error)]
pub enum GpuError {
    #[error("no CUDA driver (libcuda.so) on the loader path: this machine has no usable NVIDIA GPU driver")]
    NoDriver,
    #[error("CUDA driver: {0}")]
    Driver(#[from] cudarc::driver::DriverError),
    #[error("cuBLAS: {0}")]
    Blas(#[from] cudarc::cublas::result::CublasError),
    #[error(
        "kernel `{kernel}` is not in the embedded PTX of kernels/{module}.cu: the PTX is stale; run `{}` and rebuild",
        ptx::REBUILD
    )]
    MissingKernel { module: &'static str, kernel: &'static str },
    #[error("kernel `{kernel}`: {detail}")]
    Shape { kernel: &'static str, detail: String },
    #[error(transparent)]
    Plan(#[from] crate::gpu::plan::PlanError),
    #[error("backward or loss needs a forward pass on the device first")]
    NoForward,
    #[error(
        "this call needs a graph uploaded {needs} (`DeviceModel::upload_graph` for a whole graph, `upload_part_graph` for a worker's part)"
    )]
    GraphUpload { needs: &'static str },
    #[error(transparent)]
    Stage(#[from] crate::exchange::staging::StageError),
    #[error("a copy device (`Device::copy_device`) only uploads; products run on the device it copies for")]
    CopyOnly,
    /// NCCL between the joined devices failed.
    #[cfg(feature = "nccl")]
    #[error(transparent)]
    Peers(#[from] comm_hierarchy::CommError),
    #[error("this device was not joined to its peers (`Device::join_peers`, feature `nccl`)")]
    NotJoined,
}

/// One CUDA device.
pub struct Device {
    stream: Arc<CudaStream>,
    /// `None` on a copy device ([`Device::copy_device`]), which runs no products.
    blas: Option<CudaBlas>,
    /// One slot per embedded PTX module, filled on first use.
    modules: Mutex<Vec<Option<Arc<CudaModule>>>>,
    /// A copy stream's device ([`Device::copy_device`]): uploads go through page-locked memory.
    stage: Option<Mutex<stage::PinnedStage>>,
    /// Every other copy between host and device goes through this page-locked buffer.
    bounce: Mutex<bounce::Bounce>,
    /// Bytes uploaded and downloaded so far ([`Device::transfers`]).
    h2d_bytes: AtomicU64,
    d2h_bytes: AtomicU64,
    /// The exchange calls' GPU time since the last [`Device::take_exchange_s`].
    spans: Mutex<meter::Spans>,
    /// The codecs' kernels inside those spans ([`Device::codec_span`]).
    codec_spans: Mutex<meter::Spans>,
    /// The other workers' devices, once joined ([`Device::join_peers`]).
    #[cfg(feature = "nccl")]
    peers: Mutex<Option<peers::Peers>>,
}

impl std::fmt::Debug for Device {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Device").field("ordinal", &self.ordinal()).finish_non_exhaustive()
    }
}

impl Device {
    /// Opens GPU `ordinal` (its primary context) with its own stream.
    pub fn new(ordinal: usize) -> Result<Self, GpuError> {
        // cudarc panics when it cannot load the driver library; probe first to return an error.
        // SAFETY: loading libcuda runs its initialisers, which need nothing from us; the probe
        // keeps no handle.
        if !unsafe { cudarc::driver::sys::is_culib_present() } {
            return Err(GpuError::NoDriver);
        }
        Self::on(CudaContext::new(ordinal)?.new_stream()?, false)
    }

    fn on(stream: Arc<CudaStream>, staged: bool) -> Result<Self, GpuError> {
        let blas = if staged { None } else { Some(CudaBlas::new(stream.clone())?) };
        Ok(Self {
            stage: staged.then(|| Mutex::new(stage::PinnedStage::new(stream.clone()))),
            bounce: Mutex::new(bounce::Bounce::new(stream.clone())),
            stream,
            blas,
            modules: Mutex::new(vec![None; ptx::MODULES.len()]),
            h2d_bytes: AtomicU64::new(0),
            d2h_bytes: AtomicU64::new(0),
            spans: Mutex::default(),
            codec_spans: Mutex::default(),
            #[cfg(feature = "nccl")]
            peers: Mutex::default(),
        })
    }

    /// The same GPU (its context: buffers are shared) with a stream of its own, whose
    /// [`Device::upload`]s go through page-locked memory and return before the copy is done:
    /// the copy stream of a mini-batch worker, overlapping the next batch's upload with this
    /// one's compute. A buffer it uploads may be used on any stream of the GPU (cudarc's event
    /// tracking orders the use after the copy). It has no cuBLAS handle of its own.
    pub fn copy_device(&self) -> Result<Device, GpuError> {
        Self::on(self.stream.context().new_stream()?, true)
    }

    /// The number of GPUs visible to this process (`CUDA_VISIBLE_DEVICES` applied).
    pub fn count() -> Result<usize, GpuError> {
        // SAFETY: as in `Device::new`: the probe loads libcuda and keeps no handle.
        if !unsafe { cudarc::driver::sys::is_culib_present() } {
            return Err(GpuError::NoDriver);
        }
        Ok(CudaContext::device_count()? as usize)
    }

    pub fn ordinal(&self) -> usize {
        self.stream.context().ordinal()
    }

    /// The stream every operation of this device is queued on.
    pub fn stream(&self) -> &Arc<CudaStream> {
        &self.stream
    }

    /// Copies host data to a new device buffer, through page-locked memory: queued on the
    /// stream, returning once `host` may change (on a [`Device::copy_device`], through its
    /// stage, which leaves every copy queued).
    pub fn upload<T: Plain>(&self, host: &[T]) -> Result<CudaSlice<T>, GpuError> {
        if let Some(stage) = &self.stage {
            self.count_transfer(true, std::mem::size_of_val(host));
            return stage.lock().unwrap_or_else(|poisoned| poisoned.into_inner()).upload(host);
        }
        // SAFETY: the copy `upload_into` queues on this stream writes every element, before
        // any later work of any stream reads the buffer (cudarc records the write).
        let mut dev = unsafe { self.output::<T>(host.len()) }?;
        self.upload_into(host, &mut dev)?;
        Ok(dev)
    }

    /// Copies host data into an existing device buffer of the same length (queued, as
    /// [`Device::upload`]).
    pub fn upload_into<T: Plain>(&self, host: &[T], dev: &mut CudaSlice<T>) -> Result<(), GpuError> {
        if host.len() != dev.len() {
            let detail = format!("{} host values into a buffer of {}", host.len(), dev.len());
            return Err(GpuError::Shape { kernel: "upload", detail });
        }
        self.copy_up(bounce::bytes(host), dev)
    }

    /// A device buffer of the values whose bytes (the device's, little-endian) are `host`:
    /// an exact message going up as it arrived.
    pub fn upload_bytes<T: Plain>(&self, host: &[u8]) -> Result<CudaSlice<T>, GpuError> {
        let size = std::mem::size_of::<T>();
        if !host.len().is_multiple_of(size) {
            let detail = format!("{} bytes are not values of {size} bytes", host.len());
            return Err(GpuError::Shape { kernel: "upload", detail });
        }
        // SAFETY: `copy_up` queues the copy of every byte, before any later work reads it.
        let mut dev = unsafe { self.output::<T>(host.len() / size) }?;
        self.copy_up(host, &mut dev)?;
        Ok(dev)
    }

    /// Queues the copy of `host` into `dev`, whose bytes it fills exactly (checked by callers).
    fn copy_up<T: Plain>(&self, host: &[u8], dev: &mut CudaSlice<T>) -> Result<(), GpuError> {
        self.count_transfer(true, host.len());
        let (ptr, record) = dev.device_ptr_mut(&self.stream);
        let mut bounce = self.bounce.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
        // SAFETY: `ptr` is `dev`'s allocation, of `host`'s length in bytes (the callers check
        // it), in this stream's context; `device_ptr_mut` made this stream wait for other
        // streams' work on it and `record` marks the copies as its last write.
        unsafe { bounce.upload(host, ptr) }?;
        drop(record);
        Ok(())
    }

    /// Copies a device buffer back to the host (waiting for the stream).
    pub fn download<T: Plain>(&self, dev: &CudaSlice<T>) -> Result<Vec<T>, GpuError> {
        let mut host = vec![T::default(); dev.len()];
        self.download_into(dev, &mut host)?;
        Ok(host)
    }

    /// Copies a device buffer into `host`, of the same length, through page-locked memory
    /// (waiting for the stream).
    pub fn download_into<T: Plain>(&self, dev: &CudaSlice<T>, host: &mut [T]) -> Result<(), GpuError> {
        if host.len() != dev.len() {
            let detail = format!("a buffer of {} into {} host values", dev.len(), host.len());
            return Err(GpuError::Shape { kernel: "download", detail });
        }
        self.copy_down(dev, bounce::bytes_mut(host))
    }

    /// Appends a device buffer's bytes (the device's, little-endian) to `out`, waiting for the
    /// stream: rows going down as an exact message.
    pub fn download_bytes<T: Plain>(&self, dev: &CudaSlice<T>, out: &mut Vec<u8>) -> Result<(), GpuError> {
        let start = out.len();
        out.resize(start + dev.len() * std::mem::size_of::<T>(), 0);
        self.copy_down(dev, &mut out[start..])
    }

    /// Copies `dev`'s bytes into `host`, of its length in bytes (checked by callers).
    fn copy_down<T: Plain>(&self, dev: &CudaSlice<T>, host: &mut [u8]) -> Result<(), GpuError> {
        self.count_transfer(false, host.len());
        let (ptr, record) = dev.device_ptr(&self.stream);
        let mut bounce = self.bounce.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
        // SAFETY: `ptr` is `dev`'s allocation, of `host`'s length in bytes (the callers check
        // it), in this stream's context; `device_ptr` made this stream wait for other streams'
        // writes to it, and the copies are done when `download` returns.
        unsafe { bounce.download(ptr, host) }?;
        drop(record);
        Ok(())
    }

    /// A device buffer of `len` elements, undefined until written: for a kernel's output that
    /// the kernel writes whole, which then needs no memset first.
    ///
    /// # Safety
    /// Work queued on this device's stream writes every element before any is read.
    unsafe fn output<T: DeviceRepr>(&self, len: usize) -> Result<CudaSlice<T>, GpuError> {
        // SAFETY: the caller's contract.
        Ok(unsafe { self.stream.alloc::<T>(len) }?)
    }

    /// A zero-filled device buffer of `len` elements.
    pub fn zeros<T: DeviceRepr + ValidAsZeroBits>(&self, len: usize) -> Result<CudaSlice<T>, GpuError> {
        Ok(self.stream.alloc_zeros(len)?)
    }

    /// Kernel `kernel` of module `module`, loading the module's PTX on this device if needed.
    fn function(&self, module: &'static str, kernel: &'static str) -> Result<CudaFunction, GpuError> {
        let index = ptx::index(module).ok_or(GpuError::MissingKernel { module, kernel })?;
        let loaded = {
            let mut modules = self.modules.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
            match &modules[index] {
                Some(m) => m.clone(),
                None => {
                    let m = self.stream.context().load_module(ptx::MODULES[index].1.into())?;
                    modules[index] = Some(m.clone());
                    m
                }
            }
        };
        loaded.load_function(kernel).map_err(|_| GpuError::MissingKernel { module, kernel })
    }
}

/// A build without NCCL joins no device to its peers.
#[cfg(not(feature = "nccl"))]
impl Device {
    /// Whether `Device::join_peers` (feature `nccl`) joined this device: never here.
    pub fn joined(&self) -> bool {
        false
    }

    /// Refused: a build without NCCL has no peers to sum over.
    pub fn sum_on_peers(&self, _phase: &str, _data: &mut CudaSlice<f32>) -> Result<(), GpuError> {
        Err(GpuError::NotJoined)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Without a driver (CI) this is an error, never a panic; with a GPU, device 0 opens and
    /// an absent ordinal is a driver error.
    #[test]
    fn opening_a_device_fails_cleanly_without_a_driver() {
        match Device::new(0) {
            Err(GpuError::NoDriver) => {
                assert!(GpuError::NoDriver.to_string().contains("libcuda"));
                assert!(matches!(Device::count(), Err(GpuError::NoDriver)));
            }
            Err(other) => panic!("unexpected error opening device 0: {other}"),
            Ok(dev) => {
                assert_eq!(dev.ordinal(), 0);
                assert!(matches!(Device::new(4096), Err(GpuError::Driver(_))));
            }
        }
    }
}
