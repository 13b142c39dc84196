//! Launch wrappers for every kernel in `kernels/*.cu`. Each checks buffer lengths against the
//! sizes it passes, which is what makes the launches memory-safe: the kernels index only below
//! those sizes, and CSR indices are below the column count by `graph_partition::Csr`'s invariant.

use cudarc::driver::{CudaSlice, CudaViewMut, LaunchConfig, PushKernelArg};
use graph_partition::{Csr, Labels};

use super::{Device, GpuError};
use crate::activation::Activation;
use crate::dropout::DropoutSite;
use crate::exchange::Put;
use crate::gpu::plan::{PickedLabels, pick_labels};
use crate::gpu::reference::max_code;
use crate::gpu::{COLUMN_TILE, column_chunks};
use crate::optim::{Adam, AdamScalars, Sgd};

const BLOCK: u32 = 256;

/// A CSR matrix on the device.
pub struct DeviceCsr {
    rows: usize,
    cols: usize,
    nnz: usize,
    indptr: CudaSlice<u64>,
    indices: CudaSlice<u32>,
}

impl DeviceCsr {
    /// A CSR from its raw parts, checked as `graph_partition::Csr` checks its own (the kernels
    /// rely on it): `indptr` starts at 0, never decreases and ends at `indices.len()`, and every
    /// index is below `cols`.
    pub fn from_parts(device: &Device, cols: usize, indptr: &[u64], indices: &[u32]) -> Result<Self, GpuError> {
        let bad = |detail: String| Err(GpuError::Shape { kernel: "csr", detail });
        if indptr.first() != Some(&0) || indptr.last() != Some(&(indices.len() as u64)) {
            return bad(format!("indptr must run from 0 to {} entries", indices.len()));
        }
        if indptr.windows(2).any(|w| w[0] > w[1]) {
            return bad("indptr decreases".to_string());
        }
        if let Some(i) = indices.iter().find(|&&i| i as usize >= cols) {
            return bad(format!("column index {i} out of {cols} columns"));
        }
        Ok(Self {
            rows: indptr.len() - 1,
            cols,
            nnz: indices.len(),
            indptr: device.upload(indptr)?,
            indices: device.upload(indices)?,
        })
    }

    pub fn rows(&self) -> usize {
        self.rows
    }

    pub fn nnz(&self) -> usize {
        self.nnz
    }

    pub fn upload(device: &Device, csr: &Csr) -> Result<Self, GpuError> {
        Ok(Self {
            rows: csr.num_rows(),
            cols: csr.num_cols(),
            nnz: csr.num_edges(),
            indptr: device.upload(csr.indptr())?,
            indices: device.upload(csr.indices())?,
        })
    }
}

/// Row indices on the device, each below `bound` (checked on upload), for gathers that run
/// every step without uploading their indices again.
pub struct DeviceIndex {
    idx: CudaSlice<u32>,
    bound: usize,
}

impl DeviceIndex {
    pub fn upload(device: &Device, idx: &[u32], bound: usize) -> Result<Self, GpuError> {
        check_indices("gather_rows", idx, bound)?;
        Ok(Self { idx: device.upload(idx)?, bound })
    }

    /// The rows the indices are below.
    pub fn bound(&self) -> usize {
        self.bound
    }
}

/// The rows of a stochastic message on the device: each row's bit width and where its bytes
/// start in a message of `width`-wide rows ([`cache_quant::Encoding::Stochastic`]), and the
/// message's length.
pub struct DeviceWidths {
    bits: CudaSlice<u8>,
    offsets: CudaSlice<u64>,
    bytes: usize,
}

impl DeviceWidths {
    /// The widths `bits` (each 2, 4 or 8: what makes the kernels' packing safe) of rows `width`
    /// values wide.
    pub fn upload(device: &Device, bits: &[u8], width: usize) -> Result<Self, GpuError> {
        let mut offsets = Vec::with_capacity(bits.len());
        let mut at = 0usize;
        for &b in bits {
            if !cache_quant::codec::stochastic::WIDTHS.contains(&b) {
                return Err(GpuError::Shape { kernel: "stochastic_encode_rows", detail: format!("a row of {b} bits") });
            }
            offsets.push(at as u64);
            at += cache_quant::codec::stochastic::row_bytes(width, b);
        }
        Ok(Self { bits: device.upload(bits)?, offsets: device.upload(&offsets)?, bytes: at })
    }

    /// Bytes of the message.
    pub fn bytes(&self) -> usize {
        self.bytes
    }
}

/// Labelled rows (a split) and their labels on the device, for logits of `num_nodes x width`.
pub struct DeviceLabels {
    rows: CudaSlice<u32>,
    labels: DeviceTargets,
    num_nodes: usize,
    width: usize,
    /// Scratch of [`Device::labelled_loss`]: each row's loss and hits, allocated once.
    row_loss: CudaSlice<f32>,
    row_hits: CudaSlice<f32>,
}

/// What the rows of a [`DeviceLabels`] are trained to predict.
enum DeviceTargets {
    /// One class per row: softmax cross-entropy.
    Classes(CudaSlice<u32>),
    /// `width` 0/1 targets per row: sigmoid binary cross-entropy.
    MultiLabel(CudaSlice<f32>),
}

impl DeviceLabels {
    /// The labels of `rows` for logits of `num_nodes x width` (`width`: classes, or label
    /// columns), checked on the host by [`pick_labels`]: what makes the loss kernels'
    /// indexing safe.
    pub fn upload(
        device: &Device,
        labels: &Labels,
        rows: &[u32],
        num_nodes: usize,
        width: usize,
    ) -> Result<Self, GpuError> {
        let labels = match pick_labels(labels, rows, num_nodes, width)? {
            PickedLabels::Classes(classes) => DeviceTargets::Classes(device.upload(&classes)?),
            PickedLabels::MultiLabel(targets) => DeviceTargets::MultiLabel(device.upload(&targets)?),
        };
        Ok(Self {
            rows: device.upload(rows)?,
            labels,
            num_nodes,
            width,
            row_loss: device.zeros(rows.len())?,
            row_hits: device.zeros(rows.len())?,
        })
    }

    pub fn len(&self) -> usize {
        self.rows.len()
    }

    /// Each row's loss and hits from the last [`Device::labelled_loss`] over this split.
    pub fn last_rows(&self) -> (&CudaSlice<f32>, &CudaSlice<f32>) {
        (&self.row_loss, &self.row_hits)
    }

    pub fn is_empty(&self) -> bool {
        self.rows.len() == 0
    }

    /// Loss terms and predictions per row: one for a class, `width` for multi-label targets
    /// (as the CPU's `Objective::terms_per_row`).
    pub fn terms_per_row(&self) -> usize {
        match self.labels {
            DeviceTargets::Classes(_) => 1,
            DeviceTargets::MultiLabel(_) => self.width,
        }
    }
}

/// Per-row codes (linear and stochastic) on the device.
pub struct RowCodes {
    pub lo: CudaSlice<f32>,
    pub scale: CudaSlice<f32>,
    pub codes: CudaSlice<u32>,
}

/// Whole-matrix bucket codes on the device; `lo` and `hi` hold one value each.
pub struct BucketCodes {
    pub lo: CudaSlice<f32>,
    pub hi: CudaSlice<f32>,
    pub codes: CudaSlice<u32>,
}

/// A bucket message encoded on the device ([`Device::bucket_encode`]).
pub struct BucketMessage {
    pub lo: CudaSlice<f32>,
    pub hi: CudaSlice<f32>,
    pub packed: CudaSlice<u8>,
    /// The squared error and the squared norm.
    pub sums: CudaSlice<f64>,
}

/// LayerNorm's output and what its backward needs.
pub struct NormOut {
    pub out: CudaSlice<f32>,
    pub xhat: CudaSlice<f32>,
    pub rstd: CudaSlice<f32>,
}

/// A size as the kernels' `u32`, or a shape error naming the kernel.
pub(super) fn int<T: TryFrom<usize>>(kernel: &'static str, v: usize) -> Result<T, GpuError> {
    T::try_from(v)
        .map_err(|_| GpuError::Shape { kernel, detail: format!("size {v} exceeds the kernel's integer range") })
}

fn expect_len(kernel: &'static str, what: &str, len: usize, want: usize) -> Result<(), GpuError> {
    if len == want {
        Ok(())
    } else {
        Err(GpuError::Shape { kernel, detail: format!("{what} has {len} elements, expected {want}") })
    }
}

/// Refuses rows of `stride` columns too narrow to hold `heads` per-head sums.
fn expect_sums_fit(kernel: &'static str, stride: usize, heads: usize) -> Result<(), GpuError> {
    if stride < heads {
        return Err(GpuError::Shape { kernel, detail: format!("rows of {stride} hold no {heads} sums") });
    }
    Ok(())
}

fn grid(threads: usize) -> LaunchConfig {
    let blocks = threads.div_ceil(BLOCK as usize).max(1) as u32;
    LaunchConfig { grid_dim: (blocks, 1, 1), block_dim: (BLOCK, 1, 1), shared_mem_bytes: 0 }
}

/// The kernels' activation code and parameter.
fn act_code(act: Option<Activation>) -> (u32, f32) {
    match act {
        None => (0, 0.0),
        Some(Activation::Relu) => (1, 0.0),
        Some(Activation::Elu { alpha }) => (2, alpha),
        Some(Activation::LeakyRelu { slope }) => (3, slope),
    }
}

/// Launches `$module::$kernel` over `$threads` threads (or with the launch configuration after
/// `config:`) with the given arguments.
macro_rules! launch {
    ($dev:expr, $module:literal, $kernel:literal, config: $cfg:expr, [$($arg:expr),* $(,)?]) => {{
        let function = $dev.function($module, $kernel)?;
        let mut builder = $dev.stream.launch_builder(&function);
        $(builder.arg($arg);)*
        // SAFETY: every caller checks its buffers against the sizes it passes (see the module
        // comment), and the argument list matches the kernel's signature in kernels/*.cu.
        unsafe { builder.launch($cfg) }?;
    }};
    ($dev:expr, $module:literal, $kernel:literal, $threads:expr, [$($arg:expr),* $(,)?]) => {
        launch!($dev, $module, $kernel, config: grid($threads), [$($arg),*])
    };
}

/// From this many columns on, [`Device::spmm`] runs a warp per row (`csr_spmm_warp`);
/// narrower products keep a thread per output (`csr_spmm`), where a warp would idle.
const WARP_SPMM_MIN_COLUMNS: usize = 32;
/// Warps per block of `csr_spmm_warp`.
const SPMM_WARPS: u32 = 8;

/// Threads of `pair_sums_f64`'s one block (the kernel's most). Its loads are what it waits on:
/// with 256 threads it took 74 us for a message of 40k rows on an H200, four times the encoder
/// (`docs/BENCHMARKS.md`); four times the threads keep four times the loads in flight.
const SUM_THREADS: u32 = 1024;

/// The column reductions' block shape (`COLUMN_TILE` x `COLUMN_LANES` in elementwise.cu).
const COLUMN_LANES: u32 = 8;

impl Device {
    fn null_f32(&self) -> Result<CudaSlice<f32>, GpuError> {
        Ok(self.stream.null()?)
    }

    /// `A x` for `A` with entry values `vals` (ones when `None`) and `x` of `A.cols x f`.
    pub fn spmm(
        &self,
        a: &DeviceCsr,
        vals: Option<&CudaSlice<f32>>,
        x: &CudaSlice<f32>,
        f: usize,
    ) -> Result<CudaSlice<f32>, GpuError> {
        expect_len("csr_spmm", "x", x.len(), a.cols * f)?;
        if let Some(v) = vals {
            expect_len("csr_spmm", "vals", v.len(), a.nnz)?;
        }
        let null = self.null_f32()?;
        let mut out = self.zeros::<f32>(a.rows * f)?;
        let (rows, fw): (u32, u32) = (int("csr_spmm", a.rows)?, int("csr_spmm", f)?);
        let v = vals.unwrap_or(&null);
        if f < WARP_SPMM_MIN_COLUMNS {
            launch!(self, "sparse", "csr_spmm", a.rows * f, [&rows, &fw, &a.indptr, &a.indices, v, x, &mut out]);
            return Ok(out);
        }
        // One warp per row and slab of 128 columns (32 when f is not a multiple of 4).
        let slab = if f.is_multiple_of(4) { 128 } else { 32 };
        let slabs: u32 = int("csr_spmm_warp", f.div_ceil(slab))?;
        let warps = a.rows * slabs as usize;
        let config = LaunchConfig {
            grid_dim: (int("csr_spmm_warp", warps.div_ceil(SPMM_WARPS as usize).max(1))?, 1, 1),
            block_dim: (32, SPMM_WARPS, 1),
            shared_mem_bytes: 0,
        };
        launch!(self, "sparse", "csr_spmm_warp", config: config, [&rows, &fw, &slabs, &a.indptr, &a.indices, v, x, &mut out]);
        Ok(out)
    }

    /// `A^T x` for `x` of `A.rows x f`, scattered with atomics (no transpose is built).
    pub fn spmm_t(
        &self,
        a: &DeviceCsr,
        vals: Option<&CudaSlice<f32>>,
        x: &CudaSlice<f32>,
        f: usize,
    ) -> Result<CudaSlice<f32>, GpuError> {
        expect_len("csr_spmm_t", "x", x.len(), a.rows * f)?;
        if let Some(v) = vals {
            expect_len("csr_spmm_t", "vals", v.len(), a.nnz)?;
        }
        let null = self.null_f32()?;
        let mut out = self.zeros::<f32>(a.cols * f)?;
        let (rows, fw): (u32, u32) = (int("csr_spmm_t", a.rows)?, int("csr_spmm_t", f)?);
        launch!(
            self,
            "sparse",
            "csr_spmm_t",
            a.rows * f,
            [&rows, &fw, &a.indptr, &a.indices, vals.unwrap_or(&null), x, &mut out]
        );
        Ok(out)
    }

    /// Per-entry, per-head dot products of `a` (a row per CSR row) and `b` (a row per CSR
    /// column), both `heads * dh` wide, as `sparse::sddmm`.
    pub fn sddmm(
        &self,
        csr: &DeviceCsr,
        heads: usize,
        dh: usize,
        a: &CudaSlice<f32>,
        b: &CudaSlice<f32>,
    ) -> Result<CudaSlice<f32>, GpuError> {
        expect_len("sddmm", "a", a.len(), csr.rows * heads * dh)?;
        expect_len("sddmm", "b", b.len(), csr.cols * heads * dh)?;
        let mut out = self.zeros::<f32>(csr.nnz * heads)?;
        let (rows, h, d): (u32, u32, u32) = (int("sddmm", csr.rows)?, int("sddmm", heads)?, int("sddmm", dh)?);
        launch!(
            self,
            "attention",
            "sddmm",
            csr.nnz * heads,
            [&rows, &h, &d, &csr.indptr, &csr.indices, a, b, &mut out]
        );
        Ok(out)
    }

    /// GAT logits `LeakyReLU_slope(src[col][h] + dst[row][h])` per entry and head.
    pub fn gat_logits(
        &self,
        csr: &DeviceCsr,
        heads: usize,
        slope: f32,
        src: &CudaSlice<f32>,
        dst: &CudaSlice<f32>,
    ) -> Result<CudaSlice<f32>, GpuError> {
        expect_len("gat_logits", "src", src.len(), csr.cols * heads)?;
        expect_len("gat_logits", "dst", dst.len(), csr.rows * heads)?;
        let mut out = self.zeros::<f32>(csr.nnz * heads)?;
        let (rows, h): (u32, u32) = (int("gat_logits", csr.rows)?, int("gat_logits", heads)?);
        launch!(
            self,
            "attention",
            "gat_logits",
            csr.nnz * heads,
            [&rows, &h, &slope, &csr.indptr, &csr.indices, src, dst, &mut out]
        );
        Ok(out)
    }

    /// Softmax over each row's entries, per head, in place.
    pub fn edge_softmax(&self, csr: &DeviceCsr, heads: usize, scores: &mut CudaSlice<f32>) -> Result<(), GpuError> {
        expect_len("edge_softmax", "scores", scores.len(), csr.nnz * heads)?;
        let (rows, h): (u32, u32) = (int("edge_softmax", csr.rows)?, int("edge_softmax", heads)?);
        launch!(self, "attention", "edge_softmax", csr.rows * heads, [&rows, &h, &csr.indptr, scores]);
        Ok(())
    }

    /// The logit gradient of an edge softmax with output `w` and output gradient `g`.
    pub fn edge_softmax_backward(
        &self,
        csr: &DeviceCsr,
        heads: usize,
        w: &CudaSlice<f32>,
        g: &CudaSlice<f32>,
    ) -> Result<CudaSlice<f32>, GpuError> {
        expect_len("edge_softmax_backward", "w", w.len(), csr.nnz * heads)?;
        expect_len("edge_softmax_backward", "g", g.len(), csr.nnz * heads)?;
        let mut dz = self.zeros::<f32>(csr.nnz * heads)?;
        let (rows, h): (u32, u32) = (int("edge_softmax_backward", csr.rows)?, int("edge_softmax_backward", heads)?);
        launch!(self, "attention", "edge_softmax_backward", csr.rows * heads, [&rows, &h, &csr.indptr, w, g, &mut dz]);
        Ok(dz)
    }

    /// A part's softmax, step 1 ([`crate::gpu::reference::gat_row_max`]): per row and head, the maximum of
    /// the self-loop logit `LeakyReLU_slope(src[r][h] + dst[r][h])` and the row's entries'
    /// `scores`.
    pub fn gat_row_max(
        &self,
        csr: &DeviceCsr,
        heads: usize,
        slope: f32,
        scores: &CudaSlice<f32>,
        src: &CudaSlice<f32>,
        dst: &CudaSlice<f32>,
    ) -> Result<CudaSlice<f32>, GpuError> {
        const KERNEL: &str = "gat_row_max";
        expect_len(KERNEL, "scores", scores.len(), csr.nnz * heads)?;
        expect_len(KERNEL, "src", src.len(), csr.rows * heads)?;
        expect_len(KERNEL, "dst", dst.len(), csr.rows * heads)?;
        let mut max = self.zeros::<f32>(csr.rows * heads)?;
        let (rows, h): (u32, u32) = (int(KERNEL, csr.rows)?, int(KERNEL, heads)?);
        launch!(
            self,
            "attention",
            "gat_row_max",
            csr.rows * heads,
            [&rows, &h, &slope, &csr.indptr, scores, src, dst, &mut max]
        );
        Ok(max)
    }

    /// A part's softmax, step 2: `scores <- exp(scores - max[row])` in place, and each row's
    /// sums per head into the first `heads` columns of `sums` (rows `stride` wide), as
    /// `sparse::edge_exp_sums` computes them.
    pub fn edge_exp_sums(
        &self,
        csr: &DeviceCsr,
        heads: usize,
        max: &CudaSlice<f32>,
        scores: &mut CudaSlice<f32>,
        sums: &mut CudaSlice<f32>,
        stride: usize,
    ) -> Result<(), GpuError> {
        const KERNEL: &str = "edge_exp_sums";
        expect_sums_fit(KERNEL, stride, heads)?;
        expect_len(KERNEL, "max", max.len(), csr.rows * heads)?;
        expect_len(KERNEL, "scores", scores.len(), csr.nnz * heads)?;
        expect_len(KERNEL, "sums", sums.len(), csr.rows * stride)?;
        let (rows, h, st): (u32, u32, u32) = (int(KERNEL, csr.rows)?, int(KERNEL, heads)?, int(KERNEL, stride)?);
        launch!(self, "attention", "edge_exp_sums", csr.rows * heads, [&rows, &h, &csr.indptr, max, &st, scores, sums]);
        Ok(())
    }

    /// A part's softmax, step 3 ([`crate::gpu::reference::head_divide`]): each head's numerators over its
    /// denominator, from a synced `rows x (heads + heads*dh)` block `[denominators |
    /// numerators]`; zero where the denominator is.
    pub fn head_divide(
        &self,
        rows: usize,
        heads: usize,
        dh: usize,
        block: &CudaSlice<f32>,
    ) -> Result<CudaSlice<f32>, GpuError> {
        const KERNEL: &str = "head_divide";
        expect_len(KERNEL, "block", block.len(), rows * (heads + heads * dh))?;
        let mut out = self.zeros::<f32>(rows * heads * dh)?;
        let (nr, h, d): (u32, u32, u32) = (int(KERNEL, rows)?, int(KERNEL, heads)?, int(KERNEL, dh)?);
        launch!(self, "attention", "head_divide", rows * heads * dh, [&nr, &h, &d, block, &mut out]);
        Ok(out)
    }

    /// The gradient of [`Device::head_divide`]'s block given `g`, that of its output
    /// ([`crate::gpu::reference::head_divide_backward`]).
    pub fn head_divide_backward(
        &self,
        rows: usize,
        heads: usize,
        dh: usize,
        block: &CudaSlice<f32>,
        g: &CudaSlice<f32>,
    ) -> Result<CudaSlice<f32>, GpuError> {
        const KERNEL: &str = "head_divide_backward";
        expect_len(KERNEL, "block", block.len(), rows * (heads + heads * dh))?;
        expect_len(KERNEL, "g", g.len(), rows * heads * dh)?;
        let mut dblock = self.zeros::<f32>(block.len())?;
        let (nr, h, d): (u32, u32, u32) = (int(KERNEL, rows)?, int(KERNEL, heads)?, int(KERNEL, dh)?);
        launch!(self, "attention", "head_divide_backward", rows * heads, [&nr, &h, &d, block, g, &mut dblock]);
        Ok(dblock)
    }

    /// The logit gradient of [`Device::edge_exp_sums`]' exponentials `w` (the maximum held
    /// constant) given `g`, the gradient in `w`, and `dsums`, that of the row sums in the first
    /// `heads` columns of rows `stride` wide ([`crate::gpu::reference::edge_exp_backward`]).
    pub fn edge_exp_backward(
        &self,
        csr: &DeviceCsr,
        heads: usize,
        w: &CudaSlice<f32>,
        g: &CudaSlice<f32>,
        dsums: &CudaSlice<f32>,
        stride: usize,
    ) -> Result<CudaSlice<f32>, GpuError> {
        const KERNEL: &str = "edge_exp_backward";
        expect_sums_fit(KERNEL, stride, heads)?;
        expect_len(KERNEL, "w", w.len(), csr.nnz * heads)?;
        expect_len(KERNEL, "g", g.len(), csr.nnz * heads)?;
        expect_len(KERNEL, "dsums", dsums.len(), csr.rows * stride)?;
        let mut dz = self.zeros::<f32>(csr.nnz * heads)?;
        let (rows, h, st): (u32, u32, u32) = (int(KERNEL, csr.rows)?, int(KERNEL, heads)?, int(KERNEL, stride)?);
        launch!(
            self,
            "attention",
            "edge_exp_backward",
            csr.rows * heads,
            [&rows, &h, &csr.indptr, w, g, dsums, &st, &mut dz]
        );
        Ok(dz)
    }

    /// The loss of `split`'s rows of `logits` (`num_nodes x width`, as `split` was uploaded
    /// for): softmax cross-entropy of classes (`softmax_xent`), sigmoid binary cross-entropy of
    /// multi-label targets (`sigmoid_bce`). Adds the rows' loss sum to `loss_sum[0]` and their
    /// hits to `hits[0]` (the arg-max is the class: 1 or 0 a row; multi-label: the columns whose
    /// prediction, logit > 0, is the target), both reduced on the device into the split's own
    /// scratch buffers. With `grad`, `(scale, dlogits)`, writes the loss's gradient times
    /// `scale` into those rows of `dlogits` (other rows untouched); without, no gradient is
    /// computed (evaluation).
    pub fn labelled_loss(
        &self,
        split: &mut DeviceLabels,
        logits: &CudaSlice<f32>,
        grad: Option<(f32, &mut CudaSlice<f32>)>,
        loss_sum: &mut CudaViewMut<'_, f32>,
        hits: &mut CudaViewMut<'_, u64>,
    ) -> Result<(), GpuError> {
        let kernel = match split.labels {
            DeviceTargets::Classes(_) => "softmax_xent",
            DeviceTargets::MultiLabel(_) => "sigmoid_bce",
        };
        // The kernels index rows[i] < num_nodes and classes below width (checked on upload by
        // DeviceLabels), inside logits and dlogits of num_nodes x width (checked here).
        let size = split.num_nodes * split.width;
        expect_len(kernel, "logits", logits.len(), size)?;
        let mut null = self.null_f32()?;
        let (grad_scale, dlogits) = match grad {
            Some((scale, dlogits)) => {
                expect_len(kernel, "dlogits", dlogits.len(), size)?;
                (scale, dlogits)
            }
            None => (0.0, &mut null),
        };
        let count = split.len();
        let (cnt, cw): (u32, u32) = (int(kernel, count)?, int(kernel, split.width)?);
        let DeviceLabels { rows, labels, row_loss, row_hits, .. } = split;
        match labels {
            DeviceTargets::Classes(classes) => launch!(
                self,
                "train",
                "softmax_xent",
                count,
                [&cnt, &cw, &*rows, &*classes, logits, &grad_scale, dlogits, &mut *row_loss, &mut *row_hits]
            ),
            DeviceTargets::MultiLabel(targets) => launch!(
                self,
                "train",
                "sigmoid_bce",
                count,
                [&cnt, &cw, &*rows, &*targets, logits, &grad_scale, dlogits, &mut *row_loss, &mut *row_hits]
            ),
        }
        if count > 0 {
            self.column_sum(count, 1, row_loss, None, loss_sum)?;
            self.count_total(row_hits, hits)?;
        }
        Ok(())
    }

    /// `w *= keep * scale` per entry and head of `csr` with GAT's keyed attention-dropout flags
    /// of `site` (as `DropoutSite::edge_keep` for global source `gids[col]` and destination
    /// `gids[row]`), which it returns for the backward pass.
    pub fn attention_dropout(
        &self,
        csr: &DeviceCsr,
        heads: usize,
        gids: &CudaSlice<u32>,
        site: &DropoutSite,
        w: &mut CudaSlice<f32>,
    ) -> Result<CudaSlice<u8>, GpuError> {
        expect_len("attention_dropout", "w", w.len(), csr.nnz * heads)?;
        expect_len("attention_dropout", "gids", gids.len(), csr.rows.max(csr.cols))?;
        let mut keep = self.zeros::<u8>(csr.nnz * heads)?;
        let (rows, h): (u32, u32) = (int("attention_dropout", csr.rows)?, int("attention_dropout", heads)?);
        let (prefix, threshold, scale) = (site.attention_prefix(), site.threshold(), site.scale());
        launch!(
            self,
            "attention",
            "attention_dropout",
            csr.nnz * heads,
            [&rows, &h, &csr.indptr, &csr.indices, gids, &prefix, &threshold, &scale, w, &mut keep]
        );
        Ok(keep)
    }

    /// Step `t` (1-based) of `adam`'s rule over `p` with gradient `g` and moments `m`, `v`, as
    /// [`Adam`]'s own step with the same scalars ([`Adam::step_scalars`]).
    pub fn adam_step(
        &self,
        adam: &Adam,
        t: u64,
        p: &mut CudaSlice<f32>,
        g: &CudaSlice<f32>,
        m: &mut CudaSlice<f32>,
        v: &mut CudaSlice<f32>,
    ) -> Result<(), GpuError> {
        for (what, len) in [("grad", g.len()), ("m", m.len()), ("v", v.len())] {
            expect_len("adam_step", what, len, p.len())?;
        }
        let (beta1, beta2, eps) = (adam.beta1, adam.beta2, adam.eps);
        let AdamScalars { coupled, shrink, step_size, bc2_sqrt } = adam.step_scalars(t);
        let threads = p.len();
        let len = threads as u64;
        launch!(
            self,
            "train",
            "adam_step",
            threads,
            [&len, &beta1, &beta2, &eps, &coupled, &shrink, &step_size, &bc2_sqrt, p, g, m, v]
        );
        Ok(())
    }

    /// Step `t` (1-based) of `sgd`'s rule over `p` with gradient `g` and momentum buffer `buf`,
    /// as [`Sgd`]'s own step (the buffer starts at the first gradient; without momentum it is
    /// left as it is).
    pub fn sgd_step(
        &self,
        sgd: &Sgd,
        t: u64,
        p: &mut CudaSlice<f32>,
        g: &CudaSlice<f32>,
        buf: &mut CudaSlice<f32>,
    ) -> Result<(), GpuError> {
        for (what, len) in [("grad", g.len()), ("buf", buf.len())] {
            expect_len("sgd_step", what, len, p.len())?;
        }
        let (lr, momentum, weight_decay) = (sgd.lr, sgd.momentum, sgd.weight_decay);
        let (nesterov, first) = (u32::from(sgd.nesterov), u32::from(t == 1));
        let threads = p.len();
        let len = threads as u64;
        launch!(
            self,
            "train",
            "sgd_step",
            threads,
            [&len, &lr, &momentum, &nesterov, &weight_decay, &first, p, g, buf]
        );
        Ok(())
    }

    /// `x = act(x + bias)` in place for `x` of `n x f`.
    pub fn bias_act(
        &self,
        n: usize,
        f: usize,
        bias: Option<&CudaSlice<f32>>,
        act: Option<Activation>,
        x: &mut CudaSlice<f32>,
    ) -> Result<(), GpuError> {
        expect_len("bias_act", "x", x.len(), n * f)?;
        if let Some(b) = bias {
            expect_len("bias_act", "bias", b.len(), f)?;
        }
        let null = self.null_f32()?;
        let (code, param) = act_code(act);
        let (nr, fw): (u32, u32) = (int("bias_act", n)?, int("bias_act", f)?);
        launch!(self, "elementwise", "bias_act", n * f, [&nr, &fw, bias.unwrap_or(&null), &code, &param, x]);
        Ok(())
    }

    /// `grad *= act'(x)`, read through the activation's output `y`.
    pub fn act_backward(&self, act: Activation, y: &CudaSlice<f32>, grad: &mut CudaSlice<f32>) -> Result<(), GpuError> {
        expect_len("act_backward", "grad", grad.len(), y.len())?;
        let (code, param) = act_code(Some(act));
        let len = y.len() as u64;
        launch!(self, "elementwise", "act_backward", y.len(), [&len, &code, &param, y, grad]);
        Ok(())
    }

    /// `out += column sums of a` (of `a * b` element-wise when `b` is given) for `a` of `n x f`:
    /// per-chunk partial sums, then their totals (two deterministic passes, no atomics).
    pub fn column_sum(
        &self,
        n: usize,
        f: usize,
        a: &CudaSlice<f32>,
        b: Option<&CudaSlice<f32>>,
        out: &mut CudaViewMut<'_, f32>,
    ) -> Result<(), GpuError> {
        expect_len("column_partials", "a", a.len(), n * f)?;
        if let Some(b) = b {
            expect_len("column_partials", "b", b.len(), n * f)?;
        }
        expect_len("column_total", "out", out.len(), f)?;
        let (chunks, chunk) = column_chunks(n, f);
        let mut partial = self.zeros::<f32>(chunks * f)?;
        let null = self.null_f32()?;
        let (nr, fw, rows, parts): (u32, u32, u32, u32) = (
            int("column_partials", n)?,
            int("column_partials", f)?,
            int("column_partials", chunk)?,
            int("column_total", chunks)?,
        );
        let config = LaunchConfig {
            grid_dim: (f.div_ceil(COLUMN_TILE).max(1) as u32, parts, 1),
            block_dim: (COLUMN_TILE as u32, COLUMN_LANES, 1),
            shared_mem_bytes: 0,
        };
        launch!(self, "elementwise", "column_partials", config: config, [&nr, &fw, &rows, a, b.unwrap_or(&null), &mut partial]);
        launch!(self, "elementwise", "column_total", f, [&parts, &fw, &partial, out]);
        Ok(())
    }

    /// `out[0] += the sum of x`, whose elements are small non-negative integers (per-row hit
    /// counts), exactly: 64-bit integer atomics per warp.
    pub fn count_total(&self, x: &CudaSlice<f32>, out: &mut CudaViewMut<'_, u64>) -> Result<(), GpuError> {
        expect_len("count_total", "out", out.len(), 1)?;
        let len = x.len() as u64;
        launch!(self, "elementwise", "count_total", x.len(), [&len, x, out]);
        Ok(())
    }

    /// Feature dropout of `x` (`n x f`, row `r` is global vertex `gids[r]`) with `site`'s keyed
    /// masks, exactly as `DropoutSite::apply_rows`; records the keep flags in `mask` if given.
    pub fn dropout_rows(
        &self,
        site: &DropoutSite,
        f: usize,
        gids: &CudaSlice<u32>,
        x: &mut CudaSlice<f32>,
        mask: Option<&mut CudaSlice<u8>>,
    ) -> Result<(), GpuError> {
        let n = gids.len();
        expect_len("dropout_rows", "x", x.len(), n * f)?;
        let mut null = self.stream.null::<u8>()?;
        let mask = match mask {
            Some(m) => {
                expect_len("dropout_rows", "mask", m.len(), n * f)?;
                m
            }
            None => &mut null,
        };
        let (nr, fw): (u32, u32) = (int("dropout_rows", n)?, int("dropout_rows", f)?);
        let (prefix, threshold, scale) = (site.feature_prefix(), site.threshold(), site.scale());
        launch!(self, "elementwise", "dropout_rows", n * f, [&nr, &fw, gids, &prefix, &threshold, &scale, x, mask]);
        Ok(())
    }

    /// `grad *= mask * scale`, the adjoint of [`Device::dropout_rows`].
    pub fn dropout_backward(
        &self,
        mask: &CudaSlice<u8>,
        scale: f32,
        grad: &mut CudaSlice<f32>,
    ) -> Result<(), GpuError> {
        expect_len("dropout_backward", "grad", grad.len(), mask.len())?;
        let len = mask.len() as u64;
        launch!(self, "elementwise", "dropout_backward", mask.len(), [&len, mask, &scale, grad]);
        Ok(())
    }

    /// LayerNorm of the rows of `x` (`n x d`).
    pub fn layer_norm(
        &self,
        n: usize,
        d: usize,
        eps: f32,
        x: &CudaSlice<f32>,
        gamma: &CudaSlice<f32>,
        beta: &CudaSlice<f32>,
    ) -> Result<NormOut, GpuError> {
        expect_len("layer_norm", "x", x.len(), n * d)?;
        expect_len("layer_norm", "gamma", gamma.len(), d)?;
        expect_len("layer_norm", "beta", beta.len(), d)?;
        let (mut out, mut xhat, mut rstd) = (self.zeros(n * d)?, self.zeros(n * d)?, self.zeros(n)?);
        let (nr, dw): (u32, u32) = (int("layer_norm", n)?, int("layer_norm", d)?);
        launch!(self, "elementwise", "layer_norm", n, [&nr, &dw, &eps, x, gamma, beta, &mut out, &mut xhat, &mut rstd]);
        Ok(NormOut { out, xhat, rstd })
    }

    /// LayerNorm backward: returns `dx` and adds `d gamma`, `d beta` into `dgamma`, `dbeta`.
    #[allow(clippy::too_many_arguments)]
    pub fn layer_norm_backward(
        &self,
        n: usize,
        d: usize,
        dy: &CudaSlice<f32>,
        xhat: &CudaSlice<f32>,
        rstd: &CudaSlice<f32>,
        gamma: &CudaSlice<f32>,
        dgamma: &mut CudaSlice<f32>,
        dbeta: &mut CudaSlice<f32>,
    ) -> Result<CudaSlice<f32>, GpuError> {
        for (what, len, want) in
            [("dy", dy.len(), n * d), ("xhat", xhat.len(), n * d), ("rstd", rstd.len(), n), ("gamma", gamma.len(), d)]
        {
            expect_len("layer_norm_backward", what, len, want)?;
        }
        expect_len("layer_norm_backward", "dgamma", dgamma.len(), d)?;
        expect_len("layer_norm_backward", "dbeta", dbeta.len(), d)?;
        let mut dx = self.zeros(n * d)?;
        let (nr, dw): (u32, u32) = (int("layer_norm_backward", n)?, int("layer_norm_backward", d)?);
        launch!(self, "elementwise", "layer_norm_backward", n, [&nr, &dw, dy, xhat, rstd, gamma, &mut dx]);
        self.column_sum(n, d, dy, Some(xhat), &mut dgamma.slice_mut(..))?;
        self.column_sum(n, d, dy, None, &mut dbeta.slice_mut(..))?;
        Ok(dx)
    }

    fn row_params(
        &self,
        kernel: &'static str,
        d: usize,
        bits: u32,
        x: &CudaSlice<f32>,
    ) -> Result<(CudaSlice<f32>, CudaSlice<f32>, u32, u32), GpuError> {
        if d == 0 || !x.len().is_multiple_of(d) {
            return Err(GpuError::Shape { kernel, detail: format!("{} elements do not form rows of {d}", x.len()) });
        }
        check_bits(kernel, bits)?;
        let n = x.len() / d;
        let (mut lo, mut hi, mut scale) = (self.zeros::<f32>(n)?, self.zeros::<f32>(n)?, self.zeros::<f32>(n)?);
        let (nr, dw): (u32, u32) = (int(kernel, n)?, int(kernel, d)?);
        let levels = max_code(bits);
        let levels_f = levels as f32;
        launch!(self, "quant", "row_min_max", n, [&nr, &dw, x, &mut lo, &mut hi]);
        launch!(self, "quant", "row_scales", n, [&nr, &levels_f, &lo, &hi, &mut scale]);
        Ok((lo, scale, nr, levels))
    }

    /// Linear quantization of the rows of `x` (width `d`) to `bits`-bit codes.
    pub fn linear_quantize(&self, d: usize, bits: u32, x: &CudaSlice<f32>) -> Result<RowCodes, GpuError> {
        let (lo, scale, nr, levels) = self.row_params("linear_quantize", d, bits, x)?;
        let mut codes = self.zeros(x.len())?;
        let dw: u32 = int("linear_quantize", d)?;
        launch!(self, "quant", "linear_quantize", x.len(), [&nr, &dw, &levels, x, &lo, &scale, &mut codes]);
        Ok(RowCodes { lo, scale, codes })
    }

    /// Stochastic rounding of the rows of `x` (row `r` is vertex `gids[r]`) with draws keyed by
    /// `prefix`, as `reference::stochastic_quantize`.
    pub fn stochastic_quantize(
        &self,
        d: usize,
        bits: u32,
        x: &CudaSlice<f32>,
        gids: &CudaSlice<u32>,
        prefix: u64,
    ) -> Result<RowCodes, GpuError> {
        let (lo, scale, nr, levels) = self.row_params("stochastic_quantize", d, bits, x)?;
        expect_len("stochastic_quantize", "gids", gids.len(), nr as usize)?;
        let mut codes = self.zeros(x.len())?;
        let dw: u32 = int("stochastic_quantize", d)?;
        launch!(
            self,
            "quant",
            "stochastic_quantize",
            x.len(),
            [&nr, &dw, &levels, x, &lo, &scale, gids, &prefix, &mut codes]
        );
        Ok(RowCodes { lo, scale, codes })
    }

    /// `lo + code * scale` per row (linear and stochastic codes), rows of width `d`.
    pub fn row_dequantize(&self, d: usize, q: &RowCodes) -> Result<CudaSlice<f32>, GpuError> {
        let n = q.lo.len();
        expect_len("row_dequantize", "codes", q.codes.len(), n * d)?;
        expect_len("row_dequantize", "scale", q.scale.len(), n)?;
        let mut x = self.zeros(n * d)?;
        let (nr, dw): (u32, u32) = (int("row_dequantize", n)?, int("row_dequantize", d)?);
        launch!(self, "quant", "row_dequantize", n * d, [&nr, &dw, &q.codes, &q.lo, &q.scale, &mut x]);
        Ok(x)
    }

    /// Whole-array min and max, as one-element buffers.
    pub fn min_max(&self, x: &CudaSlice<f32>) -> Result<(CudaSlice<f32>, CudaSlice<f32>), GpuError> {
        const PARTIALS: usize = 256;
        let (mut plo, mut phi) = (self.zeros::<f32>(PARTIALS)?, self.zeros::<f32>(PARTIALS)?);
        let (mut lo, mut hi) = (self.zeros::<f32>(1)?, self.zeros::<f32>(1)?);
        let function = self.function("quant", "min_max_partials")?;
        let cfg = |blocks: usize| LaunchConfig {
            grid_dim: (blocks as u32, 1, 1),
            block_dim: (BLOCK, 1, 1),
            shared_mem_bytes: 0,
        };
        let len = x.len() as u64;
        let mut first = self.stream.launch_builder(&function);
        first.arg(&len).arg(x).arg(x).arg(&mut plo).arg(&mut phi);
        // SAFETY: the kernel reads `len` elements of x (its length) and writes one value per
        // block into plo and phi, which hold PARTIALS = grid size values; BLOCK is a power of
        // two no larger than the kernel's 1024-entry shared arrays.
        unsafe { first.launch(cfg(PARTIALS)) }?;
        let plen = PARTIALS as u64;
        let mut second = self.stream.launch_builder(&function);
        second.arg(&plen).arg(&plo).arg(&phi).arg(&mut lo).arg(&mut hi);
        // SAFETY: as above, reading the PARTIALS values and writing one from a single block.
        unsafe { second.launch(cfg(1)) }?;
        Ok((lo, hi))
    }

    /// Bucket quantization of the whole of `x` into `2^bits` buckets.
    pub fn bucket_quantize(&self, bits: u32, x: &CudaSlice<f32>) -> Result<BucketCodes, GpuError> {
        check_bits("bucket_quantize", bits)?;
        let (lo, hi) = self.min_max(x)?;
        let mut codes = self.zeros(x.len())?;
        let (len, buckets) = (x.len() as u64, max_code(bits) + 1);
        launch!(self, "quant", "bucket_quantize", x.len(), [&len, &buckets, x, &lo, &hi, &mut codes]);
        Ok(BucketCodes { lo, hi, codes })
    }

    /// Bucket midpoints of `q`'s codes.
    pub fn bucket_dequantize(&self, bits: u32, q: &BucketCodes) -> Result<CudaSlice<f32>, GpuError> {
        check_bits("bucket_dequantize", bits)?;
        expect_len("bucket_dequantize", "lo", q.lo.len(), 1)?;
        expect_len("bucket_dequantize", "hi", q.hi.len(), 1)?;
        let mut x = self.zeros(q.codes.len())?;
        let (len, buckets) = (q.codes.len() as u64, max_code(bits) + 1);
        launch!(self, "quant", "bucket_dequantize", q.codes.len(), [&len, &buckets, &q.codes, &q.lo, &q.hi, &mut x]);
        Ok(x)
    }

    /// LSB-first packing of `bits`-bit codes into bytes.
    pub fn pack_codes(&self, bits: u32, codes: &CudaSlice<u32>) -> Result<CudaSlice<u8>, GpuError> {
        check_bits("pack_codes", bits)?;
        let bytes_len = (codes.len() * bits as usize).div_ceil(8);
        let mut bytes = self.zeros(bytes_len)?;
        let len = codes.len() as u64;
        launch!(self, "quant", "pack_codes", bytes_len, [&len, &bits, codes, &mut bytes]);
        Ok(bytes)
    }

    /// The `len` codes packed in `bytes`.
    pub fn unpack_codes(&self, bits: u32, bytes: &CudaSlice<u8>, len: usize) -> Result<CudaSlice<u32>, GpuError> {
        check_bits("unpack_codes", bits)?;
        expect_len("unpack_codes", "bytes", bytes.len(), (len * bits as usize).div_ceil(8))?;
        let mut codes = self.zeros(len)?;
        let n = len as u64;
        launch!(self, "quant", "unpack_codes", len, [&n, &bits, bytes, &mut codes]);
        Ok(codes)
    }

    /// The stochastic message of rows `idx` of `block` (`block_rows x d`), keyed by `key` and
    /// the rows' global ids `gids`, at `widths` ([`cache_quant::Encoding::encode`]'s bytes),
    /// and the rows' squared error and squared norm summed in `f64` (`pair_sums_f64`).
    #[allow(clippy::too_many_arguments)] // the block, the rows and the encoding's three parts.
    pub fn stochastic_encode(
        &self,
        d: usize,
        key: u64,
        widths: &DeviceWidths,
        gids: &DeviceIndex,
        idx: &DeviceIndex,
        block: &CudaSlice<f32>,
        block_rows: usize,
    ) -> Result<(CudaSlice<u8>, CudaSlice<f64>), GpuError> {
        let kernel = "stochastic_encode_rows";
        let n = idx.idx.len();
        expect_len(kernel, "block", block.len(), block_rows * d)?;
        expect_len(kernel, "widths", widths.bits.len(), n)?;
        expect_rows_within(kernel, idx, block_rows)?;
        if gids.idx.len() < n {
            return Err(GpuError::Shape { kernel, detail: format!("{} ids for {n} rows", gids.idx.len()) });
        }
        // SAFETY: the kernel writes each row's bytes (the widths' offsets tile the message)
        // and its two sums.
        let (mut out, mut err, mut norm) =
            unsafe { (self.output::<u8>(widths.bytes)?, self.output::<f32>(n)?, self.output::<f32>(n)?) };
        let (nr, dw): (u32, u32) = (int(kernel, n)?, int(kernel, d)?);
        launch!(
            self,
            "quant",
            "stochastic_encode_rows",
            n,
            [&nr, &dw, block, &idx.idx, &widths.bits, &widths.offsets, &gids.idx, &key, &mut out, &mut err, &mut norm]
        );
        let sums = self.pair_sums(false, &err, &norm)?;
        Ok((out, sums))
    }

    /// The sums of `a` and of `b` (of their squares when `square`), in `f64` in a fixed order
    /// (`pair_sums_f64`), as a two-element buffer.
    fn pair_sums(&self, square: bool, a: &CudaSlice<f32>, b: &CudaSlice<f32>) -> Result<CudaSlice<f64>, GpuError> {
        let kernel = "pair_sums_f64";
        expect_len(kernel, "b", b.len(), a.len())?;
        let (n, square): (u32, u32) = (int(kernel, a.len())?, u32::from(square));
        // SAFETY: the block's first thread writes both sums.
        let mut sums = unsafe { self.output::<f64>(2) }?;
        let config = LaunchConfig { grid_dim: (1, 1, 1), block_dim: (SUM_THREADS, 1, 1), shared_mem_bytes: 0 };
        launch!(self, "quant", "pair_sums_f64", config: config, [&n, &square, a, b, &mut sums]);
        Ok(sums)
    }

    /// The bucket message of the values `x` at `bits` bits (1, 2, 4, 8 or 16): the block's
    /// minimum and maximum (one-element buffers), its ids packed as `cache_quant::Encoding`'s
    /// (`bucket_ids`, `pack_codes`), and the values' squared error through their buckets and
    /// squared norm, summed in `f64`.
    pub fn bucket_encode(&self, bits: u8, x: &CudaSlice<f32>) -> Result<BucketMessage, GpuError> {
        let kernel = "bucket_ids";
        check_bits(kernel, u32::from(bits))?;
        let (lo, hi) = self.min_max(x)?;
        let (mut ids, mut diff) = (self.zeros::<u32>(x.len())?, self.zeros::<f32>(x.len())?);
        let (len, b) = (x.len() as u64, u32::from(bits));
        launch!(self, "quant", "bucket_ids", x.len(), [&len, &b, x, &lo, &hi, &mut ids, &mut diff]);
        let packed = self.pack_codes(b, &ids)?;
        let sums = self.pair_sums(true, &diff, x)?;
        Ok(BucketMessage { lo, hi, packed, sums })
    }

    /// The `widths.bits.len()` rows of a stochastic message `bytes` (its length checked on the
    /// host against the widths), decoded into an `n x d` block.
    pub fn stochastic_decode(
        &self,
        d: usize,
        widths: &DeviceWidths,
        bytes: &CudaSlice<u8>,
    ) -> Result<CudaSlice<f32>, GpuError> {
        let kernel = "stochastic_decode_rows";
        let n = widths.bits.len();
        expect_len(kernel, "bytes", bytes.len(), widths.bytes)?;
        // SAFETY: the kernel writes every value of each of its rows.
        let mut y = unsafe { self.output::<f32>(n * d) }?;
        let (nr, dw): (u32, u32) = (int(kernel, n)?, int(kernel, d)?);
        launch!(
            self,
            "quant",
            "stochastic_decode_rows",
            n * d,
            [&nr, &dw, bytes, &widths.bits, &widths.offsets, &mut y]
        );
        Ok(y)
    }

    /// The linear message of rows `idx` of `block` (`block_rows x d`) at `bits` bits (2, 4, 8
    /// or 16): [`cache_quant::Encoding::encode`]'s bytes.
    pub fn linear_encode(
        &self,
        d: usize,
        bits: u8,
        idx: &DeviceIndex,
        block: &CudaSlice<f32>,
        block_rows: usize,
    ) -> Result<CudaSlice<u8>, GpuError> {
        let kernel = "linear_encode_rows";
        let row_bytes = linear_row_bytes(kernel, bits, d)?;
        let n = idx.idx.len();
        expect_len(kernel, "block", block.len(), block_rows * d)?;
        expect_rows_within(kernel, idx, block_rows)?;
        // SAFETY: the kernel writes each row's `row_bytes` bytes.
        let mut out = unsafe { self.output::<u8>(n * row_bytes) }?;
        let (nr, dw, b, rb): (u32, u32, u32, u64) =
            (int(kernel, n)?, int(kernel, d)?, u32::from(bits), row_bytes as u64);
        launch!(self, "quant", "linear_encode_rows", n, [&nr, &dw, &b, &rb, block, &idx.idx, &mut out]);
        Ok(out)
    }

    /// The `n` rows of a linear message `bytes` at `bits` bits, decoded into an `n x d` block.
    pub fn linear_decode(
        &self,
        d: usize,
        bits: u8,
        n: usize,
        bytes: &CudaSlice<u8>,
    ) -> Result<CudaSlice<f32>, GpuError> {
        let kernel = "linear_decode_rows";
        let row_bytes = linear_row_bytes(kernel, bits, d)?;
        expect_len(kernel, "bytes", bytes.len(), n * row_bytes)?;
        // SAFETY: the kernel writes every value of each of its rows.
        let mut y = unsafe { self.output::<f32>(n * d) }?;
        let (nr, dw, b, rb): (u32, u32, u32, u64) =
            (int(kernel, n)?, int(kernel, d)?, u32::from(bits), row_bytes as u64);
        launch!(self, "quant", "linear_decode_rows", n * d, [&nr, &dw, &b, &rb, bytes, &mut y]);
        Ok(y)
    }

    /// `dst[i, :] = src[idx[i], :]` for `src` of `src_rows x f`.
    pub fn gather_rows(
        &self,
        f: usize,
        idx: &[u32],
        src: &CudaSlice<f32>,
        src_rows: usize,
    ) -> Result<CudaSlice<f32>, GpuError> {
        expect_len("gather_rows", "src", src.len(), src_rows * f)?;
        self.gather_rows_at(f, &DeviceIndex::upload(self, idx, src_rows)?, src, src_rows)
    }

    /// [`Device::gather_rows`] with indices already on the device.
    pub fn gather_rows_at(
        &self,
        f: usize,
        idx: &DeviceIndex,
        src: &CudaSlice<f32>,
        src_rows: usize,
    ) -> Result<CudaSlice<f32>, GpuError> {
        expect_len("gather_rows", "src", src.len(), src_rows * f)?;
        if idx.bound > src_rows {
            let detail = format!("indices up to {} gather from {src_rows} rows", idx.bound);
            return Err(GpuError::Shape { kernel: "gather_rows", detail });
        }
        let len = idx.idx.len();
        // SAFETY: the kernel writes every element (a thread each).
        let mut dst = unsafe { self.output(len * f) }?;
        let (n, fw): (u32, u32) = (int("gather_rows", len)?, int("gather_rows", f)?);
        launch!(self, "gather", "gather_rows", len * f, [&n, &fw, &idx.idx, src, &mut dst]);
        Ok(dst)
    }

    /// `dst[idx[i], :] += src[i, :]` for `dst` of `dst_rows x f`.
    pub fn scatter_add_rows(
        &self,
        f: usize,
        idx: &[u32],
        src: &CudaSlice<f32>,
        dst: &mut CudaSlice<f32>,
        dst_rows: usize,
    ) -> Result<(), GpuError> {
        expect_len("scatter_add_rows", "src", src.len(), idx.len() * f)?;
        expect_len("scatter_add_rows", "dst", dst.len(), dst_rows * f)?;
        check_indices("scatter_add_rows", idx, dst_rows)?;
        self.scatter_rows_at(Put::Add, f, &DeviceIndex::upload(self, idx, dst_rows)?, src, dst, dst_rows)
    }

    /// `dst[idx[i], :] = src[i, :]` (`put` overwrite, `scatter_rows`; the indices distinct) or
    /// `+= src[i, :]` (`put` add, `scatter_add_rows`) for `dst` of `dst_rows x f`, with indices
    /// already on the device.
    pub fn scatter_rows_at(
        &self,
        put: Put,
        f: usize,
        idx: &DeviceIndex,
        src: &CudaSlice<f32>,
        dst: &mut CudaSlice<f32>,
        dst_rows: usize,
    ) -> Result<(), GpuError> {
        let kernel = match put {
            Put::Overwrite => "scatter_rows",
            Put::Add => "scatter_add_rows",
        };
        let len = idx.idx.len();
        expect_len(kernel, "src", src.len(), len * f)?;
        expect_len(kernel, "dst", dst.len(), dst_rows * f)?;
        if idx.bound > dst_rows {
            let detail = format!("indices up to {} scatter into {dst_rows} rows", idx.bound);
            return Err(GpuError::Shape { kernel, detail });
        }
        let (n, fw): (u32, u32) = (int(kernel, len)?, int(kernel, f)?);
        match put {
            Put::Overwrite => launch!(self, "gather", "scatter_rows", len * f, [&n, &fw, &idx.idx, src, dst]),
            Put::Add => launch!(self, "gather", "scatter_add_rows", len * f, [&n, &fw, &idx.idx, src, dst]),
        }
        Ok(())
    }

    /// `dst[i, :] += coeff[i] * src[i, :]` for `n x f` blocks (`coeff` 1 when `None`): a self
    /// term added after an exchange, or a plain sum.
    pub fn add_scaled_rows(
        &self,
        n: usize,
        f: usize,
        coeff: Option<&CudaSlice<f32>>,
        src: &CudaSlice<f32>,
        dst: &mut CudaSlice<f32>,
    ) -> Result<(), GpuError> {
        expect_len("add_scaled_rows", "src", src.len(), n * f)?;
        expect_len("add_scaled_rows", "dst", dst.len(), n * f)?;
        if let Some(c) = coeff {
            expect_len("add_scaled_rows", "coeff", c.len(), n)?;
        }
        let null = self.null_f32()?;
        let (nr, fw): (u32, u32) = (int("add_scaled_rows", n)?, int("add_scaled_rows", f)?);
        launch!(self, "gather", "add_scaled_rows", n * f, [&nr, &fw, coeff.unwrap_or(&null), src, dst]);
        Ok(())
    }

    /// The columns of `dst` (`n x d`) outside `kept` from `src` (`n x (d - kept.len())`, those
    /// columns in order); the columns in `kept` keep what they hold (`put_columns_around`).
    pub fn put_columns_around(
        &self,
        n: usize,
        d: usize,
        kept: std::ops::Range<usize>,
        src: &CudaSlice<f32>,
        dst: &mut CudaSlice<f32>,
    ) -> Result<(), GpuError> {
        const KERNEL: &str = "put_columns_around";
        let (a, w) = column_window(KERNEL, d, &kept)?;
        let f = d - kept.len();
        expect_len(KERNEL, "src", src.len(), n * f)?;
        expect_len(KERNEL, "dst", dst.len(), n * d)?;
        let (nr, dw): (u32, u32) = (int(KERNEL, n)?, int(KERNEL, d)?);
        launch!(self, "gather", "put_columns_around", n * f, [&nr, &dw, &a, &w, src, dst]);
        Ok(())
    }

    /// The columns of `src` (`n x d`) outside `skipped`, in order, as an `n x (d -
    /// skipped.len())` buffer: the inverse of [`Device::put_columns_around`]
    /// (`take_columns_around`).
    pub fn take_columns_around(
        &self,
        n: usize,
        d: usize,
        skipped: std::ops::Range<usize>,
        src: &CudaSlice<f32>,
    ) -> Result<CudaSlice<f32>, GpuError> {
        const KERNEL: &str = "take_columns_around";
        let (a, w) = column_window(KERNEL, d, &skipped)?;
        expect_len(KERNEL, "src", src.len(), n * d)?;
        let f = d - skipped.len();
        let mut dst = self.zeros::<f32>(n * f)?;
        let (nr, dw): (u32, u32) = (int(KERNEL, n)?, int(KERNEL, d)?);
        launch!(self, "gather", "take_columns_around", n * f, [&nr, &dw, &a, &w, src, &mut dst]);
        Ok(dst)
    }
}

/// The start and width of `cols`, a window of a row of `d` columns, for a kernel.
fn column_window(kernel: &'static str, d: usize, cols: &std::ops::Range<usize>) -> Result<(u32, u32), GpuError> {
    if cols.start > cols.end || cols.end > d {
        return Err(GpuError::Shape { kernel, detail: format!("columns {cols:?} of a row of {d}") });
    }
    Ok((int(kernel, cols.start)?, int(kernel, cols.len())?))
}

fn check_bits(kernel: &'static str, bits: u32) -> Result<(), GpuError> {
    if (1..=crate::gpu::reference::MAX_CODE_BITS).contains(&bits) {
        Ok(())
    } else {
        Err(GpuError::Shape { kernel, detail: format!("code width {bits} outside 1..=16") })
    }
}

/// Bytes of a linear row of `d` values at `bits` bits, refusing widths the kernels do not pack.
fn linear_row_bytes(kernel: &'static str, bits: u8, d: usize) -> Result<usize, GpuError> {
    let codec = cache_quant::LinearQuant::new(bits).map_err(|e| GpuError::Shape { kernel, detail: e.to_string() })?;
    Ok(codec.row_bytes(d))
}

/// Refuses indices that may reach past a block of `rows` rows.
fn expect_rows_within(kernel: &'static str, idx: &DeviceIndex, rows: usize) -> Result<(), GpuError> {
    if idx.bound > rows {
        return Err(GpuError::Shape { kernel, detail: format!("indices up to {} into {rows} rows", idx.bound) });
    }
    Ok(())
}

fn check_indices(kernel: &'static str, idx: &[u32], rows: usize) -> Result<(), GpuError> {
    match idx.iter().find(|&&i| i as usize >= rows) {
        Some(i) => Err(GpuError::Shape { kernel, detail: format!("row index {i} out of {rows} rows") }),
        None => Ok(()),
    }
}
