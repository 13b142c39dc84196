//! Dense kernels: BLAS-quality matrix multiply (`matrixmultiply`'s kernels, tiled over rayon) and
//! the row-parallel helpers the layers build their element-wise passes from.
//!
//! Reductions over rows use fixed-size row chunks combined in chunk order, so results are
//! bit-for-bit reproducible whatever the thread count or scheduling.
//!
//! Matmul runs `matrixmultiply`'s single-threaded kernels over tiles of the output on rayon's pool,
//! the one pool every kernel shares; a tile sums the whole depth in the uncut order, so products
//! are bit-identical whatever the thread count. A deep product with a small output (a weight
//! gradient `x^T · dout` over a block's or a graph's rows) is cut along its depth instead, into
//! slices of a fixed depth whose partial products are added in slice order: the order depends on
//! the shapes alone, so these too are bit-identical whatever the thread count.
//!
//! Buffers: `ensure_shape` keeps a buffer's allocation when it grows inside it, writing the grown
//! block (`Growth::Written`) or, on a view that pulls its halo, taking a large one as released
//! pages (`Growth::Released`); a mini-batch block's buffers allocate an eighth more than asked
//! (`Growth::Varying`), so the next steps' slightly larger blocks fit; `release_rows_from` hands
//! the whole pages of a buffer's trailing rows back to the system (`crate::pages`).

use std::ops::Range;

use ndarray::{Array2, ArrayBase, ArrayView1, ArrayView2, ArrayViewMut2, Axis, Data, DataMut, Ix2, s};
use rayon::prelude::*;

/// Rows per chunk in deterministic reductions (fixed, so sums do not depend on the thread count).
const REDUCE_ROWS: usize = 1024;

/// Smallest number of rows a parallel element-wise task handles.
pub(crate) const MIN_PAR_ROWS: usize = 64;

/// `c = alpha * a · b + beta * c` for views of any strides (transposed views such as `x.t()`
/// cost nothing extra). With `beta == 0` the previous content of `c` is ignored, NaNs included.
///
/// Runs on rayon's pool, the one every other kernel uses: `c` is cut into tiles, each
/// computed by one single-threaded `matrixmultiply` call. A tile's elements are summed over the
/// whole depth `k` in the same order as an uncut product's, so the result is bit-for-bit the
/// same whatever the tiling, thread count or scheduling. (`matrixmultiply`'s own threading
/// synchronises its threads at every depth block, which left the weight gradients, `x^T · dout`
/// with a depth of tens of thousands of rows, slower on two threads than on one.)
///
/// A deep product with a small `c` (at least 16,384 deep, at most 2^18 elements) is cut along
/// `k` instead, into slices of a fixed depth added in slice order: tiles of `c` would each pack
/// the whole depth of `a`'s rows and `b`'s columns again, which for a weight gradient is most of
/// the product's memory traffic.
///
/// # Panics
/// If the shapes do not chain (`a: m x k`, `b: k x n`, `c: m x n`).
pub fn gemm(alpha: f32, a: &ArrayView2<'_, f32>, b: &ArrayView2<'_, f32>, beta: f32, c: &mut ArrayViewMut2<'_, f32>) {
    let (m, k) = a.dim();
    let (k2, n) = b.dim();
    assert!(k == k2 && c.dim() == (m, n), "gemm shapes: {m}x{k} . {k2}x{n} into {:?}", c.dim());
    if depth_sliced(m, k, n) {
        gemm_sliced(alpha, a, b, beta, c);
    } else {
        gemm_tiled(alpha, a, b, beta, c, Tiles::new(m, k, n, rayon::current_num_threads()));
    }
}

/// Depth of one slice of a depth-sliced product: fixed, so the order of the sums depends on the
/// shapes only. 4096 rows of `a^T` and `b` keep each slice's packed panels a few MiB.
const DEPTH_SLICE: usize = 4096;

/// Largest `c` (elements) a product is depth-sliced for: each slice holds a partial `c`.
const MAX_SLICED_OUT: usize = 1 << 18;

/// Whether [`gemm`] cuts a product along its depth: at least four slices deep, with a `c` of at
/// most [`MAX_SLICED_OUT`] elements (and not empty). The weight gradients of a block's first
/// layer (depth: its tens of thousands of destinations) and of a whole graph are; forward
/// products (depth: a layer's width) and a block's inner layers (a few thousand rows) are not.
fn depth_sliced(m: usize, k: usize, n: usize) -> bool {
    k >= 4 * DEPTH_SLICE && (1..=MAX_SLICED_OUT).contains(&m.saturating_mul(n))
}

/// [`gemm`] over depth slices: slice `s` computes `alpha · a[:, s] · b[s, :]` into its own
/// partial `c` (one single-threaded `matrixmultiply` call each, on rayon's pool); then each
/// element of `c` becomes `beta · c` (zero with `beta == 0`) plus the partials added in slice
/// order.
fn gemm_sliced(
    alpha: f32,
    a: &ArrayView2<'_, f32>,
    b: &ArrayView2<'_, f32>,
    beta: f32,
    c: &mut ArrayViewMut2<'_, f32>,
) {
    let (m, k) = a.dim();
    let n = b.ncols();
    let size = m * n;
    let mut partials = vec![0.0f32; k.div_ceil(DEPTH_SLICE) * size];
    partials.par_chunks_mut(size).enumerate().for_each(|(slice, partial)| {
        let depth = slice * DEPTH_SLICE..((slice + 1) * DEPTH_SLICE).min(k);
        let mut partial = ArrayViewMut2::from_shape((m, n), partial).expect("a slice holds m x n values");
        gemm_tiled(
            alpha,
            &a.slice(s![.., depth.clone()]),
            &b.slice(s![depth, ..]),
            0.0,
            &mut partial,
            Tiles::whole(m, n),
        );
    });
    c.axis_chunks_iter_mut(Axis(0), MIN_PAR_ROWS).into_par_iter().enumerate().for_each(|(chunk, mut rows)| {
        for (i, mut row) in rows.rows_mut().into_iter().enumerate() {
            let at = (chunk * MIN_PAR_ROWS + i) * n;
            if beta == 0.0 {
                row.fill(0.0);
            } else {
                row *= beta;
            }
            for partial in partials.chunks_exact(size) {
                row += &ArrayView1::from(&partial[at..at + n]);
            }
        }
    });
}

/// Multiply-adds below which a product runs as one tile (about a tenth of a millisecond on one
/// core): splitting would cost more in packing and task hand-off than the other cores gain.
const MIN_PAR_MACS: usize = 1 << 22;

/// Smallest tile side: `matrixmultiply`'s kernels work on 8 x 8 (f32, AVX) blocks, and each tile
/// packs its own panels of `a` and `b`.
const MIN_TILE: usize = 64;

/// How [`gemm`] cuts `c`: `rows x cols` tiles of equal size (the last of each smaller).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Tiles {
    rows: usize,
    cols: usize,
    tile_rows: usize,
    tile_cols: usize,
}

impl Tiles {
    /// At least two tiles per thread where the product is big enough (some slack for a core
    /// that another process holds), cutting the side whose tiles are longer first.
    fn new(m: usize, k: usize, n: usize, threads: usize) -> Self {
        let (mut rows, mut cols) = (1, 1);
        if threads > 1 && m.saturating_mul(n).saturating_mul(k) >= MIN_PAR_MACS {
            let want = 2 * threads;
            while rows * cols < want {
                let (tr, tc) = (m.div_ceil(rows + 1), n.div_ceil(cols + 1));
                let can_rows = tr >= MIN_TILE;
                let can_cols = tc >= MIN_TILE;
                match (can_rows, can_cols) {
                    (true, true) if m.div_ceil(rows) >= n.div_ceil(cols) => rows += 1,
                    (true, true) | (false, true) => cols += 1,
                    (true, false) => rows += 1,
                    (false, false) => break,
                }
            }
        }
        let (tile_rows, tile_cols) = (m.div_ceil(rows).max(1), n.div_ceil(cols).max(1));
        Self { rows: m.div_ceil(tile_rows).max(1), cols: n.div_ceil(tile_cols).max(1), tile_rows, tile_cols }
    }

    /// One tile: all of `c`.
    fn whole(m: usize, n: usize) -> Self {
        Self { rows: 1, cols: 1, tile_rows: m.max(1), tile_cols: n.max(1) }
    }

    fn count(self) -> usize {
        self.rows * self.cols
    }
}

/// Raw pointers that may cross to the pool's threads.
#[derive(Clone, Copy)]
struct Operands {
    a: *const f32,
    b: *const f32,
    c: *mut f32,
}

// SAFETY: the pointers are only dereferenced by `gemm_tiled`'s tasks while the views they came
// from are borrowed by `gemm_tiled` (shared for `a` and `b`, exclusive for `c`), and the tasks
// write disjoint tiles of `c`.
unsafe impl Send for Operands {}
// SAFETY: as for `Send`: the tasks share `a` and `b` read-only and write disjoint parts of `c`.
unsafe impl Sync for Operands {}

/// [`gemm`] with a given tiling (the shapes checked by the caller).
fn gemm_tiled(
    alpha: f32,
    a: &ArrayView2<'_, f32>,
    b: &ArrayView2<'_, f32>,
    beta: f32,
    c: &mut ArrayViewMut2<'_, f32>,
    tiles: Tiles,
) {
    let (m, k) = a.dim();
    let n = b.ncols();
    let (rsa, csa) = (a.strides()[0], a.strides()[1]);
    let (rsb, csb) = (b.strides()[0], b.strides()[1]);
    let (rsc, csc) = (c.strides()[0], c.strides()[1]);
    let ops = Operands { a: a.as_ptr(), b: b.as_ptr(), c: c.as_mut_ptr() };
    let tile = |t: usize| {
        // The whole struct, not its fields (which closures would capture one by one): the
        // struct is what may cross threads.
        let ops = &ops;
        let (r0, c0) = ((t / tiles.cols) * tiles.tile_rows, (t % tiles.cols) * tiles.tile_cols);
        let (rows, cols) = (tiles.tile_rows.min(m - r0), tiles.tile_cols.min(n - c0));
        // SAFETY: `r0 < m` and `c0 < n` (a tile index below `tiles.count()` starts inside `c`),
        // so the offsets stay inside the views' elements; the tile reads rows `r0..r0 + rows`
        // of `a`, columns `c0..c0 + cols` of `b`, and writes only that block of `c`, which no
        // other tile writes. `c` is borrowed mutably, so it aliases neither `a` nor `b`, and a
        // mutable ndarray view never has overlapping elements (which sgemm requires of `c`).
        unsafe {
            matrixmultiply::sgemm(
                rows,
                k,
                cols,
                alpha,
                ops.a.offset(r0 as isize * rsa),
                rsa,
                csa,
                ops.b.offset(c0 as isize * csb),
                rsb,
                csb,
                beta,
                ops.c.offset(r0 as isize * rsc + c0 as isize * csc),
                rsc,
                csc,
            );
        }
    };
    if m == 0 || n == 0 {
        return;
    }
    if tiles.count() == 1 {
        tile(0);
    } else {
        (0..tiles.count()).into_par_iter().for_each(tile);
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

/// How [`ensure_shape`] fills a growth inside a buffer's allocation, and sizes a fresh one.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Growth {
    /// Writes zeros into it, keeping its pages backed: the buffers of a whole graph, whose rows
    /// are all written at every use (and which the layers' buffer pool hands from one shape to
    /// another), and whose released pages would each cost a page fault when written again.
    /// A large fresh allocation for them asks for huge pages (`crate::pages::zeroed`).
    Written,
    /// As [`Growth::Written`], for a mini-batch block's buffers, whose row counts change at every
    /// step by a few percent: a fresh allocation takes [`VARYING_ROOM`] more, so the next steps'
    /// slightly larger blocks fit in it instead of each new largest one allocating (and
    /// faulting in) the buffer again.
    Varying,
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
        data = match growth {
            // Every row written at each use: huge pages for a large block (`pages::zeroed`).
            Growth::Written => crate::pages::zeroed(len),
            Growth::Varying => {
                let mut room = crate::pages::zeroed(len + len / VARYING_ROOM);
                room.truncate(len);
                room
            }
            Growth::Released => vec![0.0; len],
        };
    } else if growth == Growth::Released && len > data.len() {
        crate::pages::extend_zeroed(&mut data, len);
    } else {
        data.resize(len, 0.0);
    }
    *buf = Array2::from_shape_vec((rows, cols), data).expect("the length is rows x cols");
}

/// A [`Growth::Varying`] allocation's spare room: `1 / VARYING_ROOM` of its length (an eighth;
/// a block's row counts vary by a few percent from step to step).
const VARYING_ROOM: usize = 8;

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
    fn tiled_products_equal_the_uncut_product_bit_for_bit() {
        // Odd sides (partial tiles and kernel edges), a deep weight-gradient shape (x^T . dout)
        // and a transposed right side (dout . w^T), with beta both 0 and 1.
        for (m, k, n) in [(333, 101, 129), (70, 3001, 200), (1000, 300, 16), (130, 257, 131)] {
            let x = arr(k, m, 0.37);
            let y = arr(k, n, 0.11);
            let w = arr(n, k, 0.05);
            for (a, b) in [(x.t(), y.view()), (x.t(), w.t())] {
                for beta in [0.0, 1.0] {
                    let start = arr(m, n, 0.9);
                    let (mut want, mut got) = (start.clone(), start.clone());
                    gemm_tiled(0.5, &a, &b, beta, &mut want.view_mut(), Tiles::whole(m, n));
                    for threads in [2, 3, 16] {
                        let tiles = Tiles::new(m, k, n, threads);
                        assert!(tiles.count() > 1, "{m}x{k}x{n} on {threads} threads is cut");
                        got.assign(&start);
                        gemm_tiled(0.5, &a, &b, beta, &mut got.view_mut(), tiles);
                        assert!(
                            want.iter().zip(&got).all(|(p, q)| p.to_bits() == q.to_bits()),
                            "{m}x{k}x{n}, beta {beta}, {tiles:?}"
                        );
                    }
                }
            }
        }
    }

    #[test]
    fn depth_sliced_products_are_exact_and_the_same_on_any_thread_count() {
        // A weight-gradient shape with a partial last slice, beta 0 (over NaN) and 1.
        let (m, k, n) = (40, 4 * DEPTH_SLICE + 777, 24);
        assert!(depth_sliced(m, k, n));
        let x = arr(k, m, 0.37);
        let y = arr(k, n, 0.11);
        let want = naive(&x.t(), &y.view());
        for beta in [0.0, 1.0] {
            let start = if beta == 0.0 { Array2::from_elem((m, n), f32::NAN) } else { arr(m, n, 0.9) };
            let runs: Vec<Array2<f32>> = [1, 2, 3]
                .into_iter()
                .map(|threads| {
                    let pool = rayon::ThreadPoolBuilder::new().num_threads(threads).build().unwrap();
                    let mut c = start.clone();
                    pool.install(|| gemm(0.5, &x.t(), &y.view(), beta, &mut c.view_mut()));
                    c
                })
                .collect();
            for (i, got) in runs.iter().enumerate() {
                let close = got.iter().zip(&want).zip(&start).all(|((g, w), s)| {
                    let expect = 0.5 * w + if beta == 0.0 { 0.0 } else { beta * s };
                    (g - expect).abs() <= 1e-3 * expect.abs().max(1.0)
                });
                assert!(close, "beta {beta}, run {i}");
                assert!(got.iter().zip(&runs[0]).all(|(p, q)| p.to_bits() == q.to_bits()), "beta {beta}, run {i}");
            }
        }
    }

    #[test]
    fn only_deep_products_with_small_outputs_are_depth_sliced() {
        // A block's first-layer weight gradient and a whole graph's are; forward products, a
        // block's inner layers, empty and huge outputs are not.
        assert!(depth_sliced(128, 33_000, 256));
        assert!(depth_sliced(256, 100_000, 256));
        assert!(!depth_sliced(33_000, 128, 256));
        assert!(!depth_sliced(256, 5_500, 256));
        assert!(!depth_sliced(0, 33_000, 256));
        assert!(!depth_sliced(1024, 33_000, 1024));
    }

    #[test]
    fn tiles_cover_c_and_stay_whole_for_small_products() {
        for (m, k, n, threads) in [(33_000, 128, 256, 2), (128, 33_000, 256, 16), (256, 5_500, 16, 4), (64, 64, 64, 8)]
        {
            let t = Tiles::new(m, k, n, threads);
            assert!(t.rows * t.tile_rows >= m && (t.rows - 1) * t.tile_rows < m, "{t:?}");
            assert!(t.cols * t.tile_cols >= n && (t.cols - 1) * t.tile_cols < n, "{t:?}");
            assert!(t.count() <= 2 * threads, "{t:?}");
            assert!(
                t.count() == 1 || (t.tile_rows >= MIN_TILE || t.rows == 1) && (t.tile_cols >= MIN_TILE || t.cols == 1)
            );
        }
        // A 64 x 64 x 64 product is below MIN_PAR_MACS; one thread never cuts.
        assert_eq!(Tiles::new(64, 64, 64, 8).count(), 1);
        assert_eq!(Tiles::new(33_000, 128, 256, 1).count(), 1);
        // The deep weight gradient gets both sides cut on 16 threads.
        let deep = Tiles::new(128, 33_000, 256, 16);
        assert!(deep.rows > 1 && deep.cols > 1, "{deep:?}");
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

    #[test]
    fn a_varying_buffer_grows_once_for_blocks_a_little_larger() {
        // A block's buffer, then the next steps' blocks up to an eighth larger: one allocation,
        // whose rows read zero when grown into.
        let mut buf = Array2::<f32>::zeros((0, 0));
        ensure_shape(&mut buf, 1000, 16, Growth::Varying);
        let base = buf.as_ptr();
        buf.fill(1.0);
        for rows in [1010, 990, 1100, 1125] {
            ensure_shape(&mut buf, rows, 16, Growth::Varying);
            assert_eq!((buf.dim(), buf.as_ptr()), ((rows, 16), base), "{rows} rows fit the room");
        }
        assert!(buf.slice(s![1010.., ..]).iter().all(|&v| v == 0.0));
        ensure_shape(&mut buf, 1200, 16, Growth::Varying);
        assert_eq!(buf.dim(), (1200, 16));
        assert_ne!(buf.as_ptr(), base, "past the room: a fresh allocation");
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
