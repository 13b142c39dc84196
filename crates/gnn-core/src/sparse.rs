//! Sparse kernels over Halo's CSR (row `v` lists the sources `u` of edges `u -> v`).
//!
//! * SpMM `out_v = sum_k w_k x_{u_k}`: rayon-parallel over destination rows, each row accumulated
//!   in cache while neighbour rows stream through a vectorised multiply-add; the next neighbours'
//!   rows are prefetched. Compiled for the baseline, AVX2+FMA and AVX-512, picked at run time.
//! * Its transpose runs as the same gather over the transposed CSR (`Csr::transpose_with_perm`),
//!   with per-edge values following the entry permutation, so no scatter or atomics are needed.
//! * SDDMM (per-edge, per-head dot products) and the pieces of an edge softmax (row maximum,
//!   exponentials with row sums) used by GAT, whose softmax is split by the exchange hooks.
//!
//! Internally, rows may be read from and written to column windows of wider buffers, so GAT can
//! aggregate straight into the block it synchronises.

use std::ops::Range;

use graph_partition::Csr;
use ndarray::{Array2, ArrayView2};
use rayon::prelude::*;

use crate::dense::MIN_PAR_ROWS;

/// Whether a kernel overwrites its output or adds to it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Write {
    Overwrite,
    Accumulate,
}

/// How far ahead (in entries) neighbour rows are prefetched.
const PREFETCH_AHEAD: usize = 3;

/// A window of columns in a row-major buffer: row `r` starts at `r * stride + offset`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Cols {
    pub stride: usize,
    pub offset: usize,
}

impl Cols {
    /// All columns of a buffer `stride` wide.
    pub fn full(stride: usize) -> Self {
        Self { stride, offset: 0 }
    }

    fn start(&self, row: usize) -> usize {
        row * self.stride + self.offset
    }
}

/// Aggregates `heads` blocks of `head_width` columns over the rows `rows` of `csr`:
/// `out[v][h] (+)= sum_{entries k of row v, column u} weight(v, k, u, h) * x[u][h]`.
/// Rows of `out` outside `rows` are left as they are, so a layer can aggregate the rows that
/// need no halo row while the halo is in flight and the rest after; every row is computed the
/// same way whatever the range, so the split gives the same bits.
#[allow(clippy::too_many_arguments)] // a kernel signature: buffers, layouts and the weight.
pub(crate) fn aggregate<W>(
    csr: &Csr,
    rows: Range<usize>,
    x: &[f32],
    x_cols: Cols,
    out: &mut [f32],
    out_cols: Cols,
    heads: usize,
    head_width: usize,
    write: Write,
    weight: W,
) where
    W: Fn(usize, usize, usize, usize) -> f32 + Sync,
{
    aggregate_selected(csr, rows, |_| true, x, x_cols, out, out_cols, heads, head_width, write, weight);
}

/// [`aggregate`] over the rows `v` of `rows` with `select(v)` only; the others are left as
/// they are. Lets a layer aggregate every row that reads no halo row while the halo is in
/// flight, wherever those rows sit, and the rest after.
#[allow(clippy::too_many_arguments)] // a kernel signature: buffers, layouts and the weight.
pub(crate) fn aggregate_selected<W, S>(
    csr: &Csr,
    rows: Range<usize>,
    select: S,
    x: &[f32],
    x_cols: Cols,
    out: &mut [f32],
    out_cols: Cols,
    heads: usize,
    head_width: usize,
    write: Write,
    weight: W,
) where
    W: Fn(usize, usize, usize, usize) -> f32 + Sync,
    S: Fn(usize) -> bool + Sync,
{
    let width = heads * head_width;
    if width == 0 || out_cols.stride == 0 {
        return;
    }
    debug_assert!(rows.end <= csr.num_rows() && out.len() >= rows.end * out_cols.stride);
    debug_assert!(x.len() >= csr.num_cols() * x_cols.stride || csr.num_edges() == 0);
    let simd = Simd::detect();
    let first = rows.start;
    let out = &mut out[rows.start * out_cols.stride..rows.end * out_cols.stride];
    out.par_chunks_mut(out_cols.stride).enumerate().with_min_len(MIN_PAR_ROWS).for_each(|(i, row)| {
        let v = first + i;
        if !select(v) {
            return;
        }
        let o = &mut row[out_cols.offset..out_cols.offset + width];
        if write == Write::Overwrite {
            o.fill(0.0);
        }
        simd.aggregate_row(&RowJob { csr, x, x_cols, heads, head_width }, v, o, &weight);
    });
}

/// The read-only inputs of one row of [`aggregate`].
struct RowJob<'a> {
    csr: &'a Csr,
    x: &'a [f32],
    x_cols: Cols,
    heads: usize,
    head_width: usize,
}

#[inline(always)]
fn aggregate_row<W, const FMA: bool>(job: &RowJob<'_>, v: usize, o: &mut [f32], weight: &W)
where
    W: Fn(usize, usize, usize, usize) -> f32,
{
    let width = job.heads * job.head_width;
    let indices = job.csr.indices();
    for k in job.csr.row_range(v) {
        let u = indices[k] as usize;
        if let Some(&ahead) = indices.get(k + PREFETCH_AHEAD) {
            prefetch_row(job.x, job.x_cols.start(ahead as usize), width);
        }
        let xr = &job.x[job.x_cols.start(u)..][..width];
        for ((oh, xh), h) in o.chunks_exact_mut(job.head_width).zip(xr.chunks_exact(job.head_width)).zip(0..) {
            let w = weight(v, k, u, h);
            for (a, &b) in oh.iter_mut().zip(xh) {
                *a = if FMA { w.mul_add(b, *a) } else { *a + w * b };
            }
        }
    }
}

/// The instruction set the row kernel is compiled for. Only [`Simd::detect`] (or a level below
/// the detected one) may be used: the variants promise CPU features to `target_feature` code.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
#[cfg_attr(not(target_arch = "x86_64"), allow(dead_code))]
enum Simd {
    Portable,
    /// AVX2 + FMA.
    Avx2,
    /// AVX-512F (+ AVX2, FMA): half the instructions per row on wide feature blocks.
    Avx512,
}

impl Simd {
    /// The best level this CPU supports.
    fn detect() -> Self {
        #[cfg(target_arch = "x86_64")]
        {
            if std::is_x86_feature_detected!("avx2") && std::is_x86_feature_detected!("fma") {
                return if std::is_x86_feature_detected!("avx512f") { Simd::Avx512 } else { Simd::Avx2 };
            }
        }
        Simd::Portable
    }

    #[inline]
    fn aggregate_row<W>(self, job: &RowJob<'_>, v: usize, o: &mut [f32], weight: &W)
    where
        W: Fn(usize, usize, usize, usize) -> f32,
    {
        #[cfg(target_arch = "x86_64")]
        {
            #[target_feature(enable = "avx2,fma")]
            fn avx2<W: Fn(usize, usize, usize, usize) -> f32>(job: &RowJob<'_>, v: usize, o: &mut [f32], w: &W) {
                aggregate_row::<W, true>(job, v, o, w);
            }
            #[target_feature(enable = "avx512f,avx2,fma")]
            fn avx512<W: Fn(usize, usize, usize, usize) -> f32>(job: &RowJob<'_>, v: usize, o: &mut [f32], w: &W) {
                aggregate_row::<W, true>(job, v, o, w);
            }
            match self {
                // SAFETY: levels above `Portable` come from `detect()`, which checked these features.
                Simd::Avx2 => return unsafe { avx2(job, v, o, weight) },
                // SAFETY: as above.
                Simd::Avx512 => return unsafe { avx512(job, v, o, weight) },
                Simd::Portable => {}
            }
        }
        aggregate_row::<W, false>(job, v, o, weight);
    }
}

/// Hints the cache to fetch `x[start..start + width]` (at most 16 cache lines); a no-op elsewhere.
#[inline(always)]
fn prefetch_row(x: &[f32], start: usize, width: usize) {
    #[cfg(target_arch = "x86_64")]
    {
        use std::arch::x86_64::{_MM_HINT_T0, _mm_prefetch};
        const FLOATS_PER_LINE: usize = 16;
        let base = x.as_ptr().wrapping_add(start);
        for line in 0..width.div_ceil(FLOATS_PER_LINE).min(16) {
            // SAFETY: SSE is part of the x86_64 baseline, and a prefetch never dereferences its
            // address (invalid ones are ignored), so any pointer value is sound.
            unsafe { _mm_prefetch::<_MM_HINT_T0>(base.wrapping_add(line * FLOATS_PER_LINE) as *const i8) };
        }
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = (x, start, width);
}

/// Runs `f(rows, entry_data, row_data)` in parallel over blocks of consecutive rows of `csr`,
/// where `entry_data` holds `entry_width` values per CSR entry of those rows and `row_data`
/// `row_width` values per row. Blocks balance entries + rows, so skewed degrees spread evenly.
pub(crate) fn par_row_blocks<A: Send, B: Send>(
    csr: &Csr,
    entry_data: (&mut [A], usize),
    row_data: (&mut [B], usize),
    f: impl Fn(Range<usize>, &mut [A], &mut [B]) + Sync,
) {
    let (mut entries, entry_width) = entry_data;
    let (mut rows, row_width) = row_data;
    let n = csr.num_rows();
    let indptr = csr.indptr();
    let blocks = (rayon::current_num_threads() * 8).clamp(1, n.max(1));
    let target = (csr.num_edges() + n).div_ceil(blocks).max(1);
    let mut jobs = Vec::with_capacity(blocks + 1);
    let mut start = 0;
    let mut load = 0;
    for v in 0..n {
        load += csr.degree(v) + 1;
        if load >= target || v + 1 == n {
            let e_len = (indptr[v + 1] - indptr[start]) as usize * entry_width;
            let (e_block, e_rest) = std::mem::take(&mut entries).split_at_mut(e_len);
            let (r_block, r_rest) = std::mem::take(&mut rows).split_at_mut((v + 1 - start) * row_width);
            jobs.push((start..v + 1, e_block, r_block));
            entries = e_rest;
            rows = r_rest;
            start = v + 1;
            load = 0;
        }
    }
    jobs.into_par_iter().for_each(|(range, e, r)| f(range, e, r));
}

/// Per-entry, per-head dot products: `out[k * heads + h] = a[v][h] . b[u][h]` for entry `k`
/// (row `v`, column `u`), with `heads` blocks of `head_width` columns.
pub(crate) fn sddmm_cols(
    csr: &Csr,
    a: (&[f32], Cols),
    b: (&[f32], Cols),
    heads: usize,
    head_width: usize,
    out: &mut [f32],
) {
    let ((a, a_cols), (b, b_cols)) = (a, b);
    let width = heads * head_width;
    let indices = csr.indices();
    par_row_blocks(csr, (out, heads), (&mut [] as &mut [f32], 0), |rows, dots, _| {
        let first = csr.indptr()[rows.start] as usize;
        for v in rows {
            let av = &a[a_cols.start(v)..][..width];
            for k in csr.row_range(v) {
                let bu = &b[b_cols.start(indices[k] as usize)..][..width];
                let d = &mut dots[(k - first) * heads..][..heads];
                for ((dh, ah), bh) in d.iter_mut().zip(av.chunks_exact(head_width)).zip(bu.chunks_exact(head_width)) {
                    *dh = ah.iter().zip(bh).map(|(x, y)| x * y).sum();
                }
            }
        }
    });
}

/// Edge-softmax step 1: `max[v][h] = max(max[v][h], max over entries k of row v of scores[k][h])`
/// (start `max` at `-inf`, or at a self-loop score).
pub(crate) fn edge_row_max(csr: &Csr, scores: &[f32], heads: usize, max: &mut [f32]) {
    par_row_blocks(csr, (&mut [] as &mut [f32], 0), (max, heads), |rows, _, m| {
        let first = rows.start;
        for v in rows {
            let mv = &mut m[(v - first) * heads..][..heads];
            for k in csr.row_range(v) {
                for (mh, &s) in mv.iter_mut().zip(&scores[k * heads..][..heads]) {
                    *mh = mh.max(s);
                }
            }
        }
    });
}

/// Edge-softmax step 2: `scores[k][h] <- exp(scores[k][h] - max[v][h])` in place, and the row
/// sums of the exponentials written to the `heads` columns of `sums` at `sum_cols`.
pub(crate) fn edge_exp_sums(
    csr: &Csr,
    scores: &mut [f32],
    heads: usize,
    max: &[f32],
    sums: &mut [f32],
    sum_cols: Cols,
) {
    par_row_blocks(csr, (scores, heads), (sums, sum_cols.stride), |rows, w, s| {
        let (first_row, first_entry) = (rows.start, csr.indptr()[rows.start] as usize);
        for v in rows {
            let sv = &mut s[(v - first_row) * sum_cols.stride + sum_cols.offset..][..heads];
            sv.fill(0.0);
            let mv = &max[v * heads..][..heads];
            for k in csr.row_range(v) {
                for ((wh, sh), &mh) in w[(k - first_entry) * heads..][..heads].iter_mut().zip(sv.iter_mut()).zip(mv) {
                    *wh = (*wh - mh).exp();
                    *sh += *wh;
                }
            }
        }
    });
}

/// `out (+)= A . x` where entry `k` of `csr` has value `values[k]` (1 when `None`).
///
/// # Panics
/// If `x` has fewer rows than `csr` has columns, `out` is not `csr.num_rows() x x.ncols()` in
/// standard layout, or `values` is not one value per entry.
pub fn spmm(csr: &Csr, values: Option<&[f32]>, x: &ArrayView2<'_, f32>, out: &mut Array2<f32>, write: Write) {
    spmm_impl(csr, None, values, x, out, write);
}

/// `out (+)= A^T . x` for the matrix `A` whose transpose `csr_t` and entry permutation `perm`
/// came from `A.transpose_with_perm()`; `values` are `A`'s entry values, in `A`'s order.
///
/// # Panics
/// As [`spmm`], and if `perm` is not one index per entry.
pub fn spmm_transpose(
    csr_t: &Csr,
    perm: &[usize],
    values: Option<&[f32]>,
    x: &ArrayView2<'_, f32>,
    out: &mut Array2<f32>,
    write: Write,
) {
    assert_eq!(perm.len(), csr_t.num_edges(), "spmm_transpose: one permutation index per entry");
    spmm_impl(csr_t, Some(perm), values, x, out, write);
}

fn spmm_impl(
    csr: &Csr,
    perm: Option<&[usize]>,
    values: Option<&[f32]>,
    x: &ArrayView2<'_, f32>,
    out: &mut Array2<f32>,
    write: Write,
) {
    let f = x.ncols();
    assert!(x.nrows() >= csr.num_cols(), "spmm: x has {} rows, the matrix {} columns", x.nrows(), csr.num_cols());
    assert_eq!(out.dim(), (csr.num_rows(), f), "spmm: output shape");
    if let Some(v) = values {
        assert_eq!(v.len(), csr.num_edges(), "spmm: one value per entry");
    }
    let x = x.as_standard_layout();
    let xs = x.as_slice().expect("standard layout");
    let out = out.as_slice_mut().expect("spmm: output must be in standard layout");
    let cols = Cols::full(f);
    match (values, perm) {
        (None, _) => aggregate(csr, 0..csr.num_rows(), xs, cols, out, cols, 1, f, write, |_, _, _, _| 1.0),
        (Some(vals), None) => aggregate(csr, 0..csr.num_rows(), xs, cols, out, cols, 1, f, write, |_, k, _, _| vals[k]),
        (Some(vals), Some(p)) => {
            aggregate(csr, 0..csr.num_rows(), xs, cols, out, cols, 1, f, write, |_, k, _, _| vals[p[k]])
        }
    }
}

/// Per-entry, per-head dot products `out[k * heads + h] = a[v][h] . b[u][h]` for entry `k` (row `v`,
/// column `u`); `a` has a row per CSR row, `b` per CSR column, both `heads` blocks wide.
///
/// # Panics
/// If the shapes disagree or the width is not a multiple of `heads`.
pub fn sddmm(csr: &Csr, a: &ArrayView2<'_, f32>, b: &ArrayView2<'_, f32>, heads: usize, out: &mut [f32]) {
    let width = a.ncols();
    assert!(
        heads > 0 && width.is_multiple_of(heads) && b.ncols() == width,
        "sddmm: widths must match and split into heads"
    );
    assert!(a.nrows() >= csr.num_rows() && b.nrows() >= csr.num_cols(), "sddmm: too few rows");
    assert_eq!(out.len(), csr.num_edges() * heads, "sddmm: one value per entry and head");
    let (a, b) = (a.as_standard_layout(), b.as_standard_layout());
    let cols = Cols::full(width);
    sddmm_cols(
        csr,
        (a.as_slice().expect("standard"), cols),
        (b.as_slice().expect("standard"), cols),
        heads,
        width / heads,
        out,
    );
}

/// Softmax over each row's entries, independently per head, in place (`scores[k * heads + h]`).
/// Empty rows are left alone. This is the single-process composition of the steps GAT runs with
/// exchanges in between.
///
/// # Panics
/// If `scores` is not one value per entry and head.
pub fn edge_softmax(csr: &Csr, scores: &mut [f32], heads: usize) {
    assert_eq!(scores.len(), csr.num_edges() * heads, "edge_softmax: one score per entry and head");
    let n = csr.num_rows();
    let mut max = vec![f32::NEG_INFINITY; n * heads];
    edge_row_max(csr, scores, heads, &mut max);
    let mut sums = vec![0.0f32; n * heads];
    edge_exp_sums(csr, scores, heads, &max, &mut sums, Cols::full(heads));
    par_row_blocks(csr, (scores, heads), (&mut [] as &mut [f32], 0), |rows, w, _| {
        let first = csr.indptr()[rows.start] as usize;
        for v in rows {
            for k in csr.row_range(v) {
                for (wh, &s) in w[(k - first) * heads..][..heads].iter_mut().zip(&sums[v * heads..][..heads]) {
                    *wh /= s;
                }
            }
        }
    });
}

#[cfg(test)]
mod tests {
    use super::*;
    use graph_partition::EdgeListOptions;
    use graph_partition::rng::SplitMix64;

    fn random_graph(n: usize, m: usize, seed: u64) -> Csr {
        let mut r = SplitMix64::new(seed);
        let edges: Vec<(u32, u32)> = (0..m).map(|_| (r.below(n as u64) as u32, r.below(n as u64) as u32)).collect();
        Csr::from_edges(n, &edges, EdgeListOptions { symmetrize: false, remove_self_loops: true }).unwrap()
    }

    fn random_array(rows: usize, cols: usize, seed: u64) -> Array2<f32> {
        let mut r = SplitMix64::new(seed);
        Array2::from_shape_simple_fn((rows, cols), || r.next_f64() as f32 - 0.5)
    }

    fn dense_of(csr: &Csr, values: &[f32]) -> Array2<f32> {
        let mut a = Array2::zeros((csr.num_rows(), csr.num_cols()));
        for v in 0..csr.num_rows() {
            for k in csr.row_range(v) {
                a[[v, csr.indices()[k] as usize]] = values[k];
            }
        }
        a
    }

    #[test]
    fn spmm_and_transpose_match_dense() {
        let csr = random_graph(300, 3000, 1);
        let vals: Vec<f32> = (0..csr.num_edges()).map(|k| (k as f32 * 0.37).sin()).collect();
        let dense = dense_of(&csr, &vals);
        for f in [1, 7, 16, 33] {
            let x = random_array(300, f, f as u64);
            let mut out = Array2::from_elem((300, f), 9.0);
            spmm(&csr, Some(&vals), &x.view(), &mut out, Write::Overwrite);
            let want = dense.dot(&x);
            assert!((&out - &want).iter().all(|d| d.abs() < 1e-4), "f = {f}");
            let (t, perm) = csr.transpose_with_perm();
            let mut out_t = Array2::from_elem((300, f), 1.0);
            spmm_transpose(&t, &perm, Some(&vals), &x.view(), &mut out_t, Write::Accumulate);
            let want_t = dense.t().dot(&x) + 1.0;
            assert!((&out_t - &want_t).iter().all(|d| d.abs() < 1e-4), "transpose f = {f}");
        }
    }

    #[test]
    fn every_available_simd_level_matches_portable() {
        // Covers the run-time dispatch (and the unsafe calls behind it) against the portable path.
        let csr = random_graph(200, 4000, 2);
        let f = 37;
        let x = random_array(200, f, 3);
        let job = RowJob { csr: &csr, x: x.as_slice().unwrap(), x_cols: Cols::full(f), heads: 1, head_width: f };
        let levels = [Simd::Portable, Simd::Avx2, Simd::Avx512];
        for level in levels.into_iter().filter(|&l| l <= Simd::detect()) {
            for v in 0..200 {
                let (mut fast, mut portable) = (vec![0.0f32; f], vec![0.0f32; f]);
                level.aggregate_row(&job, v, &mut fast, &|_, k, _, _| 1.0 / (1 + k % 5) as f32);
                aggregate_row::<_, false>(&job, v, &mut portable, &|_, k, _, _| 1.0 / (1 + k % 5) as f32);
                assert!(fast.iter().zip(&portable).all(|(a, b)| (a - b).abs() < 1e-5), "{level:?} row {v}");
            }
        }
    }

    #[test]
    fn multi_head_windows() {
        // Two heads of width 3, read from columns 1..7 of a 9-wide buffer, written at offset 2.
        let csr = random_graph(50, 400, 4);
        let x = random_array(50, 9, 5);
        let mut out = vec![0.5f32; 50 * 10];
        let hw = |k: usize, h: usize| (k + 3 * h) as f32 * 0.01;
        aggregate(
            &csr,
            0..50,
            x.as_slice().unwrap(),
            Cols { stride: 9, offset: 1 },
            &mut out,
            Cols { stride: 10, offset: 2 },
            2,
            3,
            Write::Overwrite,
            |_, k, _, h| hw(k, h),
        );
        for v in 0..50 {
            assert_eq!(out[v * 10], 0.5);
            for h in 0..2 {
                for c in 0..3 {
                    let want: f32 =
                        csr.row_range(v).map(|k| hw(k, h) * x[[csr.indices()[k] as usize, 1 + h * 3 + c]]).sum();
                    assert!((out[v * 10 + 2 + h * 3 + c] - want).abs() < 1e-5);
                }
            }
        }
    }

    #[test]
    fn sddmm_matches_dots() {
        let csr = random_graph(80, 600, 6);
        let a = random_array(80, 6, 7);
        let b = random_array(80, 6, 8);
        let mut out = vec![0.0; csr.num_edges() * 2];
        sddmm(&csr, &a.view(), &b.view(), 2, &mut out);
        for v in 0..80 {
            for k in csr.row_range(v) {
                let u = csr.indices()[k] as usize;
                for h in 0..2 {
                    let want: f32 = (0..3).map(|c| a[[v, h * 3 + c]] * b[[u, h * 3 + c]]).sum();
                    assert!((out[k * 2 + h] - want).abs() < 1e-5);
                }
            }
        }
    }

    #[test]
    fn edge_softmax_rows_sum_to_one_and_are_shift_invariant() {
        let csr = random_graph(60, 500, 9);
        let heads = 3;
        let mut scores: Vec<f32> = (0..csr.num_edges() * heads).map(|i| (i as f32 * 0.77).sin() * 5.0).collect();
        let mut shifted: Vec<f32> = scores.iter().map(|s| s + 100.0).collect();
        edge_softmax(&csr, &mut scores, heads);
        edge_softmax(&csr, &mut shifted, heads);
        for v in 0..60 {
            for h in 0..heads {
                let total: f32 = csr.row_range(v).map(|k| scores[k * heads + h]).sum();
                assert!(csr.degree(v) == 0 || (total - 1.0).abs() < 1e-5);
            }
        }
        assert!(scores.iter().zip(&shifted).all(|(a, b)| (a - b).abs() < 1e-5));
    }
}
