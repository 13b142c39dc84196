//! Dense kernels: BLAS-quality matrix multiply (the `matrixmultiply` crate, multi-threaded) and
//! the row-parallel helpers the layers build their element-wise passes from.
//!
//! Reductions over rows use fixed-size row chunks combined in chunk order, so results are
//! bit-for-bit reproducible whatever the thread count or scheduling.

use std::ops::Range;

use ndarray::{Array2, ArrayBase, ArrayView2, ArrayViewMut2, Data, DataMut, Ix2, s};
use rayon::prelude::*;

/// Rows per chunk in deterministic reductions (fixed, so sums do not depend on the thread count).
const REDUCE_ROWS: usize = 1024;

/// Smallest number of rows a parallel element-wise task handles.
pub(crate) const MIN_PAR_ROWS: usize = 64;

/// `c = alpha * a · b + beta * c` for views of any strides (transposed views such as `x.t()`
/// cost nothing extra). With `beta == 0` the previous content of `c` is ignored, NaNs included.
///
/// # Panics
/// If the shapes do not chain (`a: m x k`, `b: k x n`, `c: m x n`).
pub fn gemm(alpha: f32, a: &ArrayView2<'_, f32>, b: &ArrayView2<'_, f32>, beta: f32, c: &mut ArrayViewMut2<'_, f32>) {
    let (m, k) = a.dim();
    let (k2, n) = b.dim();
    assert!(k == k2 && c.dim() == (m, n), "gemm shapes: {m}x{k} . {k2}x{n} into {:?}", c.dim());
    let (rsa, csa) = (a.strides()[0], a.strides()[1]);
    let (rsb, csb) = (b.strides()[0], b.strides()[1]);
    let (rsc, csc) = (c.strides()[0], c.strides()[1]);
    // SAFETY: the pointers and strides come from live views whose shapes were checked above, so
    // sgemm reads only elements of `a` and `b` and writes only elements of `c`; `c` is borrowed
    // mutably, so it cannot alias `a` or `b`, and ndarray views never have overlapping elements
    // in a mutable view (which sgemm requires of `c`).
    unsafe {
        matrixmultiply::sgemm(
            m,
            k,
            n,
            alpha,
            a.as_ptr(),
            rsa,
            csa,
            b.as_ptr(),
            rsb,
            csb,
            beta,
            c.as_mut_ptr(),
            rsc,
            csc,
        );
    }
}

/// `a · b` into a new array.
///
/// # Panics
/// If the inner dimensions differ.
pub fn matmul(a: &ArrayView2<'_, f32>, b: &ArrayView2<'_, f32>) -> Array2<f32> {
    let mut c = Array2::zeros((a.nrows(), b.ncols()));
    gemm(1.0, a, b, 0.0, &mut c.view_mut());
    c
}

/// How [`ensure_shape`] fills a growth inside a buffer's allocation.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Growth {
    /// Writes zeros into it, keeping its pages backed: the buffers of a graph whose rows are
    /// all written at every use (a mini-batch block's, a whole graph's), which change shape at
    /// every step, and whose released pages would each cost a page fault when written again.
    Written,
    /// Takes a large grown block as released pages (`crate::pages`), unbacked until written,
    /// as fresh pages would be: the buffers of a graph that pulls its halo, whose grown rows may
    /// be halo rows, written only while an exchange's rows are in flight.
    Released,
}

/// Gives `buf` the shape `rows x cols`, reallocating only when it needs more room than it has.
/// The content is unspecified afterwards: callers overwrite every element. A growth inside the
/// allocation keeps it and is filled as `growth` says.
///
/// Mini-batch blocks change every buffer's row count at every step; keeping the allocation
/// spares a fresh allocation (and a page fault per page of it) per buffer and step.
pub(crate) fn ensure_shape(buf: &mut Array2<f32>, rows: usize, cols: usize, growth: Growth) {
    if buf.dim() == (rows, cols) {
        return;
    }
    let len = rows * cols;
    let (mut data, _) = std::mem::take(buf).into_raw_vec_and_offset();
    if data.capacity() < len {
        data = vec![0.0; len];
    } else if growth == Growth::Released && len > data.len() {
        crate::pages::extend_zeroed(&mut data, len);
    } else {
        data.resize(len, 0.0);
    }
    *buf = Array2::from_shape_vec((rows, cols), data).expect("the length is rows x cols");
}

/// Bytes of `buf`'s values. ndarray does not expose its vector's capacity, which can exceed
/// this after [`ensure_shape`] shrank the array; buffers reshaped to the same size every step
/// (all of a training run's) hold exactly this.
pub(crate) fn array_bytes(buf: &Array2<f32>) -> usize {
    buf.len() * 4
}

/// Like [`ensure_shape`], but keeps `buf` as it is when it already has `cols` columns and at
/// least `rows` rows: for input gradients, whose caller may hand in a taller buffer (a block's
/// output rows are a prefix of the rows the previous layer computed).
pub(crate) fn ensure_rows(buf: &mut Array2<f32>, rows: usize, cols: usize, growth: Growth) {
    if buf.ncols() != cols || buf.nrows() < rows {
        ensure_shape(buf, rows, cols, growth);
    }
}

/// The contiguous row-major storage of an array the crate allocated itself, or of a row prefix
/// of one ([`head`]).
pub(crate) fn slice<S: Data<Elem = f32>>(x: &ArrayBase<S, Ix2>) -> &[f32] {
    x.as_slice().expect("arrays made by gnn-core are in standard layout")
}

/// Mutable counterpart of [`slice`].
pub(crate) fn slice_mut<S: DataMut<Elem = f32>>(x: &mut ArrayBase<S, Ix2>) -> &mut [f32] {
    x.as_slice_mut().expect("arrays made by gnn-core are in standard layout")
}

/// The first `rows` rows of `x`: the rows a worker computes itself
/// ([`crate::AggGraph::computed_rows`]). A row prefix of a standard-layout array is contiguous.
pub(crate) fn head(x: &Array2<f32>, rows: usize) -> ArrayView2<'_, f32> {
    x.slice(s![..rows, ..])
}

/// Mutable counterpart of [`head`].
pub(crate) fn head_mut(x: &mut Array2<f32>, rows: usize) -> ArrayViewMut2<'_, f32> {
    x.slice_mut(s![..rows, ..])
}

/// Zeroes `rows` of `x` (clamped to its rows) by writing them: rows written again soon (a
/// block's source rows, which a transposed aggregation accumulates into), where handing their
/// pages back would only cost a page fault per page.
pub(crate) fn zero_rows(x: &mut Array2<f32>, rows: Range<usize>) {
    let end = rows.end.min(x.nrows());
    x.slice_mut(s![rows.start.min(end)..end, ..]).fill(0.0);
}

/// Zeroes rows `from..` of `x`, halo rows that are done with or written only while an
/// exchange's rows are in flight. In a standard-layout array they are the tail of its storage,
/// and their whole pages go back to the operating system ([`crate::pages`]) instead of being
/// written.
pub(crate) fn release_rows_from(x: &mut Array2<f32>, from: usize) {
    let from = from.min(x.nrows());
    let start = from * x.ncols();
    match x.as_slice_mut() {
        Some(values) => crate::pages::zero(&mut values[start..]),
        None => x.slice_mut(s![from.., ..]).fill(0.0),
    }
}

/// Runs `f(row_index, row)` over the rows of `x` in parallel.
pub(crate) fn par_rows_mut<S: DataMut<Elem = f32>>(
    x: &mut ArrayBase<S, Ix2>,
    f: impl Fn(usize, &mut [f32]) + Sync + Send,
) {
    let width = x.ncols();
    if width == 0 {
        return;
    }
    slice_mut(x).par_chunks_mut(width).enumerate().with_min_len(MIN_PAR_ROWS).for_each(|(r, row)| f(r, row));
}

/// Adds `sum over rows r in 0..num_rows of contribution(r)` into `out`, where `fold(rows, acc)`
/// adds the contributions of a range of rows into a zeroed accumulator of `out.len()` values.
/// Chunks of rows are folded in parallel and combined in order, so the result is deterministic.
pub(crate) fn row_reduce(num_rows: usize, out: &mut [f32], fold: impl Fn(Range<usize>, &mut [f32]) + Sync) {
    let width = out.len();
    let chunks: Vec<Range<usize>> =
        (0..num_rows).step_by(REDUCE_ROWS).map(|start| start..(start + REDUCE_ROWS).min(num_rows)).collect();
    let partials: Vec<Vec<f32>> = chunks
        .into_par_iter()
        .map(|rows| {
            let mut acc = vec![0.0f32; width];
            fold(rows, &mut acc);
            acc
        })
        .collect();
    for partial in partials {
        for (o, p) in out.iter_mut().zip(partial) {
            *o += p;
        }
    }
}

/// Adds the column sums of `x` into `out` (a bias gradient).
pub(crate) fn add_col_sums<S: Data<Elem = f32>>(x: &ArrayBase<S, Ix2>, out: &mut [f32]) {
    let width = x.ncols();
    debug_assert_eq!(width, out.len());
    let data = slice(x);
    row_reduce(x.nrows(), out, |rows, acc| {
        for row in data[rows.start * width..rows.end * width].chunks_exact(width) {
            for (a, v) in acc.iter_mut().zip(row) {
                *a += v;
            }
        }
    });
}

#[cfg(test)]
mod tests {
    use super::*;
    use ndarray::Array2;

    fn naive(a: &ArrayView2<f32>, b: &ArrayView2<f32>) -> Array2<f32> {
        Array2::from_shape_fn((a.nrows(), b.ncols()), |(i, j)| (0..a.ncols()).map(|k| a[[i, k]] * b[[k, j]]).sum())
    }

    fn arr(r: usize, c: usize, s: f32) -> Array2<f32> {
        Array2::from_shape_fn((r, c), |(i, j)| ((i * 7 + j * 3) as f32 * s).sin())
    }

    #[test]
    fn gemm_matches_naive_with_transposes_and_beta() {
        let a = arr(37, 19, 0.3);
        let b = arr(19, 23, 0.7);
        let want = naive(&a.view(), &b.view());
        assert!((matmul(&a.view(), &b.view()) - &want).iter().all(|d| d.abs() < 1e-4));
        // a^T stored transposed, b^T likewise: (a^T)^T . (b^T)^T
        let at = a.t().to_owned();
        let bt = b.t().to_owned();
        let mut c = Array2::from_elem((37, 23), 1.0f32);
        gemm(2.0, &at.t(), &bt.t(), 0.5, &mut c.view_mut());
        let want2 = want.mapv(|v| 2.0 * v + 0.5);
        assert!((c - want2).iter().all(|d| d.abs() < 1e-4));
    }

    #[test]
    fn beta_zero_ignores_nan_and_empty_inner_dim_scales() {
        let a = arr(4, 3, 0.1);
        let b = arr(3, 5, 0.2);
        let mut c = Array2::from_elem((4, 5), f32::NAN);
        gemm(1.0, &a.view(), &b.view(), 0.0, &mut c.view_mut());
        assert!(c.iter().all(|v| v.is_finite()));
        let e = Array2::<f32>::zeros((4, 0));
        let f = Array2::<f32>::zeros((0, 5));
        let mut c = Array2::from_elem((4, 5), 2.0f32);
        gemm(1.0, &e.view(), &f.view(), 0.5, &mut c.view_mut());
        assert!(c.iter().all(|&v| v == 1.0));
    }

    #[test]
    fn col_sums_are_deterministic_and_correct() {
        let x = arr(3000, 5, 0.01);
        let mut out = vec![1.0f32; 5];
        add_col_sums(&x, &mut out);
        for (j, o) in out.iter().enumerate() {
            let want: f64 = 1.0 + x.column(j).iter().map(|&v| v as f64).sum::<f64>();
            assert!((*o as f64 - want).abs() < 1e-3, "{o} vs {want}");
        }
        let mut again = vec![1.0f32; 5];
        add_col_sums(&x, &mut again);
        assert_eq!(out, again);
    }

    #[test]
    fn reshaping_keeps_the_allocation_unless_it_must_grow() {
        let mut buf = Array2::<f32>::zeros((100, 8));
        let base = buf.as_ptr();
        ensure_shape(&mut buf, 30, 10, Growth::Written);
        assert_eq!((buf.dim(), buf.as_ptr()), ((30, 10), base));
        ensure_shape(&mut buf, 100, 8, Growth::Written);
        assert_eq!(buf.as_ptr(), base, "the capacity covers it again");
        ensure_shape(&mut buf, 200, 8, Growth::Written);
        assert_eq!(buf.dim(), (200, 8));
        assert!(buf.as_slice().is_some(), "standard layout");
        ensure_rows(&mut buf, 150, 8, Growth::Written);
        assert_eq!(buf.dim(), (200, 8), "taller buffers are kept");
        ensure_rows(&mut buf, 150, 4, Growth::Written);
        assert_eq!(buf.dim(), (150, 4));
    }

    /// A growth by a large block inside the allocation keeps it (no fresh pages to fault in for
    /// the rows kept) under either growth, and the grown rows read zero (written, or their
    /// pages handed back).
    #[test]
    fn a_large_growth_inside_the_allocation_keeps_it() {
        for growth in [Growth::Written, Growth::Released] {
            let (rows, cols) = (4096, 256);
            let mut buf = Array2::<f32>::from_elem((rows, cols), 3.0);
            let base = buf.as_ptr();
            ensure_shape(&mut buf, 64, cols, growth);
            ensure_shape(&mut buf, rows, cols, growth);
            assert_eq!((buf.dim(), buf.as_ptr()), ((rows, cols), base), "{growth:?}");
            assert!(buf.slice(s![..64, ..]).iter().all(|&v| v == 3.0), "kept rows are not rewritten");
            assert!(buf.slice(s![64.., ..]).iter().all(|&v| v == 0.0), "grown rows read zero");
        }
    }

    #[test]
    fn zeroing_and_releasing_rows_clear_those_rows_only() {
        for release in [false, true] {
            let mut x = Array2::<f32>::from_elem((2048, 300), 1.5);
            let end = if release { 2048 } else { 1900 };
            if release {
                release_rows_from(&mut x, 700)
            } else {
                zero_rows(&mut x, 700..end)
            }
            assert!(x.slice(s![..700, ..]).iter().all(|&v| v == 1.5), "release {release}");
            assert!(x.slice(s![700..end, ..]).iter().all(|&v| v == 0.0), "release {release}");
            assert!(x.slice(s![end.., ..]).iter().all(|&v| v == 1.5), "release {release}");
        }
    }
}
