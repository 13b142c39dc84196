//! Row-major GEMM through cuBLAS (which is column-major).

use cudarc::cublas::sys::cublasOperation_t;
use cudarc::cublas::{Gemm, GemmConfig};
use cudarc::driver::CudaSlice;

use super::kernels::int;
use super::{Device, GpuError};

impl Device {
    /// `op(A) op(B)` for row-major `A` and `B`, giving a row-major `m x n` matrix; `op(A)` is
    /// `m x k` (`A` is stored `k x m` when `trans_a`), `op(B)` is `k x n` (stored `n x k` when
    /// `trans_b`).
    ///
    /// A row-major matrix is its column-major transpose, so this asks cuBLAS for
    /// `C^T = op(B)^T op(A)^T`.
    #[allow(clippy::too_many_arguments)]
    pub fn matmul(
        &self,
        a: &CudaSlice<f32>,
        trans_a: bool,
        b: &CudaSlice<f32>,
        trans_b: bool,
        m: usize,
        k: usize,
        n: usize,
    ) -> Result<CudaSlice<f32>, GpuError> {
        let mut c = self.zeros::<f32>(m * n)?;
        self.gemm_into(a, trans_a, b, trans_b, m, k, n, 0.0, &mut c)?;
        Ok(c)
    }

    /// `c = op(A) op(B) + beta c`, shapes as [`Device::matmul`]; with `beta = 1` it accumulates
    /// (gradients, GraphSAGE's root term) without a separate add.
    #[allow(clippy::too_many_arguments)]
    pub fn gemm_into(
        &self,
        a: &CudaSlice<f32>,
        trans_a: bool,
        b: &CudaSlice<f32>,
        trans_b: bool,
        m: usize,
        k: usize,
        n: usize,
        beta: f32,
        c: &mut CudaSlice<f32>,
    ) -> Result<(), GpuError> {
        const KERNEL: &str = "matmul";
        if a.len() != m * k || b.len() != k * n || c.len() != m * n {
            return Err(GpuError::Shape {
                kernel: KERNEL,
                detail: format!(
                    "{m}x{k} by {k}x{n} into {m}x{n} needs {} and {} into {} elements, got {}, {} and {}",
                    m * k,
                    k * n,
                    m * n,
                    a.len(),
                    b.len(),
                    c.len()
                ),
            });
        }
        if m == 0 || n == 0 {
            return Ok(());
        }
        let op = |t: bool| if t { cublasOperation_t::CUBLAS_OP_T } else { cublasOperation_t::CUBLAS_OP_N };
        let cfg = GemmConfig {
            transa: op(trans_b),
            transb: op(trans_a),
            m: int::<i32>(KERNEL, n)?,
            n: int::<i32>(KERNEL, m)?,
            k: int::<i32>(KERNEL, k)?,
            alpha: 1.0f32,
            lda: int::<i32>(KERNEL, if trans_b { k } else { n })?.max(1),
            ldb: int::<i32>(KERNEL, if trans_a { m } else { k })?.max(1),
            beta,
            ldc: int::<i32>(KERNEL, n)?,
        };
        let blas = self.blas.as_ref().ok_or(GpuError::CopyOnly)?;
        // SAFETY: the lengths of a, b and c were checked against m, k and n above, and the
        // leading dimensions are those of the row-major layouts, so cuBLAS stays in bounds.
        unsafe { blas.gemm(cfg, b, a, c) }?;
        Ok(())
    }
}
