//! CPU references for the device kernels in `kernels/*.cu` that have no counterpart in the CPU
//! training path, written element by element in the kernels' own arithmetic order so that
//! integer outputs (codes, packed bytes, masks) match exactly. Kernels that do have one are
//! compared against the CPU path itself: `sparse::{spmm, sddmm, edge_softmax}`,
//! `DropoutSite::apply_rows` (forward, and backward on the gradient), `LayerNorm` and `Activation`.
//!
//! Quantization formulas (the codecs' definitions):
//! - linear, per row: `lo = min`, `scale = (max - lo) / (2^b - 1)`, `q = round((x - lo) / scale)`;
//! - stochastic, per row: the same `lo` and `scale`, `q = floor((x - lo) / scale + u)` with `u`
//!   the CPU codec's draw for the row key `hash_extend(prefix, [gid])` and the column
//!   (`cache_quant::codec::stochastic::rounding_draw`), clamped to `2^b - 1`;
//! - bucket, whole matrix: `width = (max - min) / 2^b`, `q = min(floor((x - min) / width), 2^b - 1)`,
//!   decoded to the midpoint `min + (q + 0.5) * width`.
//!
//! A constant row (or matrix) has scale 0 and all-zero codes. Codes pack LSB-first: code `i`
//! holds bits `[i * b, (i + 1) * b)` of the byte stream.

use graph_partition::Csr;
use graph_partition::rng::{hash_extend, mix64};

use crate::activation::Activation;

/// Widest code [`pack_codes`] and the device kernels accept.
pub const MAX_CODE_BITS: u32 = 16;

/// `out[col[k], :] += vals[k] * x[r, :]`: `A^T x` scattered from `A`'s rows (the `csr_spmm_t`
/// kernel); `out` has `csr.num_cols()` rows of `f`.
pub fn spmm_t(csr: &Csr, vals: Option<&[f32]>, x: &[f32], f: usize) -> Vec<f32> {
    let mut out = vec![0.0f32; csr.num_cols() * f];
    for r in 0..csr.num_rows() {
        for k in csr.row_range(r) {
            let v = vals.map_or(1.0, |vals| vals[k]);
            let c = csr.indices()[k] as usize;
            for j in 0..f {
                out[c * f + j] += v * x[r * f + j];
            }
        }
    }
    out
}

/// GAT logits `LeakyReLU_slope(src[col[k]][h] + dst[r][h])` per entry and head.
pub fn gat_logits(csr: &Csr, heads: usize, slope: f32, src: &[f32], dst: &[f32]) -> Vec<f32> {
    let mut out = vec![0.0f32; csr.num_edges() * heads];
    for r in 0..csr.num_rows() {
        for k in csr.row_range(r) {
            let c = csr.indices()[k] as usize;
            for h in 0..heads {
                let z = src[c * heads + h] + dst[r * heads + h];
                out[k * heads + h] = if z > 0.0 { z } else { slope * z };
            }
        }
    }
    out
}

/// The logit gradient of an edge softmax with output `w` and output gradient `g`:
/// `dz_k = w_k (g_k - sum_j w_j g_j)` over each row's entries, per head.
pub fn edge_softmax_backward(csr: &Csr, heads: usize, w: &[f32], g: &[f32]) -> Vec<f32> {
    let mut dz = vec![0.0f32; w.len()];
    for r in 0..csr.num_rows() {
        for h in 0..heads {
            let dot: f32 = csr.row_range(r).map(|k| w[k * heads + h] * g[k * heads + h]).sum();
            for k in csr.row_range(r) {
                let i = k * heads + h;
                dz[i] = w[i] * (g[i] - dot);
            }
        }
    }
    dz
}

/// A part's softmax, step 1 (`gat_row_max`): per row and head, the maximum of the self-loop
/// logit `LeakyReLU_slope(src[r][h] + dst[r][h])` and the row's entries' `scores`, the CPU
/// layer's per-replica maximum before its sync.
pub fn gat_row_max(csr: &Csr, heads: usize, slope: f32, scores: &[f32], src: &[f32], dst: &[f32]) -> Vec<f32> {
    let mut max: Vec<f32> = src
        .iter()
        .zip(dst)
        .map(|(s, d)| {
            let z = s + d;
            if z > 0.0 { z } else { slope * z }
        })
        .collect();
    crate::sparse::edge_row_max(csr, scores, heads, &mut max);
    max
}

/// A part's softmax, step 2 (`edge_exp_sums`): `scores <- exp(scores - max[row])` in place and
/// each row's sums per head into the first `heads` columns of `sums`, rows `stride` wide: the
/// CPU layer's own step (`sparse::edge_exp_sums`).
pub fn edge_exp_sums(csr: &Csr, heads: usize, max: &[f32], scores: &mut [f32], sums: &mut [f32], stride: usize) {
    crate::sparse::edge_exp_sums(csr, scores, heads, max, sums, crate::sparse::Cols { stride, offset: 0 });
}

/// A part's softmax, step 3 (`head_divide`): from a synced `[denominators | numerators]` block
/// (rows of `heads + heads*dh`), each head's numerators times the inverse of its denominator,
/// zero where the denominator is zero (a row with no entry on any replica).
pub fn head_divide(heads: usize, dh: usize, block: &[f32]) -> Vec<f32> {
    let width = heads * dh;
    let mut out = Vec::with_capacity(block.len() / (heads + width) * width);
    for row in block.chunks_exact(heads + width) {
        let (den, num) = row.split_at(heads);
        for (c, &v) in num.iter().enumerate() {
            let d = den[c / dh];
            out.push(if d > 0.0 { v * d.recip() } else { 0.0 });
        }
    }
    out
}

/// The gradient of [`head_divide`]'s block given `g`, that of its output (`head_divide_backward`):
/// `d num = g / den`, `d den = -(g . num / den) / den` per head, zero where `den` is.
pub fn head_divide_backward(heads: usize, dh: usize, block: &[f32], g: &[f32]) -> Vec<f32> {
    let (width, stride) = (heads * dh, heads + heads * dh);
    let mut dblock = vec![0.0f32; block.len()];
    for ((row, drow), gr) in block.chunks_exact(stride).zip(dblock.chunks_exact_mut(stride)).zip(g.chunks_exact(width))
    {
        for h in 0..heads {
            let den = row[h];
            let inv = if den > 0.0 { den.recip() } else { 0.0 };
            let mut dot = 0.0f32;
            for j in h * dh..(h + 1) * dh {
                drow[heads + j] = gr[j] * inv;
                dot += gr[j] * (row[heads + j] * inv);
            }
            drow[h] = -dot * inv;
        }
    }
    dblock
}

/// The logit gradient of [`edge_exp_sums`]' exponentials `w` (the maximum held constant) given
/// `g`, the gradient in `w`, and `dsums`, that of the row sums in the first `heads` columns of
/// rows `stride` wide (`edge_exp_backward`): `dz = w (g + dsums[row])`.
pub fn edge_exp_backward(csr: &Csr, heads: usize, w: &[f32], g: &[f32], dsums: &[f32], stride: usize) -> Vec<f32> {
    let mut dz = vec![0.0f32; w.len()];
    for r in 0..csr.num_rows() {
        for k in csr.row_range(r) {
            for h in 0..heads {
                let i = k * heads + h;
                dz[i] = w[i] * (g[i] + dsums[r * stride + h]);
            }
        }
    }
    dz
}

/// `x[i, j] = act(x[i, j] + bias[j])` in place.
pub fn bias_act(f: usize, bias: Option<&[f32]>, act: Option<Activation>, x: &mut [f32]) {
    for (t, v) in x.iter_mut().enumerate() {
        let z = *v + bias.map_or(0.0, |b| b[t % f]);
        *v = act.map_or(z, |a| a.apply(z));
    }
}

/// Column sums of an `n x f` matrix (the bias gradient), accumulated in `f64`: a reference
/// closer to the exact sum than any `f32` order, which the kernel's chunked order is checked
/// against.
pub fn column_sum(f: usize, grad: &[f32]) -> Vec<f32> {
    let mut db = vec![0.0f64; f];
    for row in grad.chunks_exact(f) {
        db.iter_mut().zip(row).for_each(|(d, &g)| *d += f64::from(g));
    }
    db.into_iter().map(|d| d as f32).collect()
}

/// The `dropout_rows` kernel's keep flag for column `col` of the row of global vertex `gid`:
/// lane `col % 4` of `mix64(hash_extend(prefix, [gid]) + col / 4)` against `threshold`.
pub fn dropout_keep(prefix: u64, threshold: u32, gid: u32, col: usize) -> u8 {
    let bits = mix64(hash_extend(prefix, &[u64::from(gid)]).wrapping_add((col / 4) as u64));
    u8::from((bits >> (16 * (col % 4))) & 0xFFFF >= u64::from(threshold))
}

/// Per-row quantization: offsets, scales and codes of an `n x d` matrix.
#[derive(Debug, Clone, PartialEq)]
pub struct RowQuant {
    pub lo: Vec<f32>,
    pub scale: Vec<f32>,
    pub codes: Vec<u32>,
}

/// Whole-matrix bucket quantization.
#[derive(Debug, Clone, PartialEq)]
pub struct BucketQuant {
    pub lo: f32,
    pub hi: f32,
    pub codes: Vec<u32>,
}

/// `2^bits - 1`, the largest code of `bits` bits.
pub fn max_code(bits: u32) -> u32 {
    assert!((1..=MAX_CODE_BITS).contains(&bits), "code width {bits} outside 1..={MAX_CODE_BITS}");
    (1u32 << bits) - 1
}

/// Per-row min and max (`row_min_max`).
pub fn row_min_max(d: usize, x: &[f32]) -> (Vec<f32>, Vec<f32>) {
    x.chunks_exact(d)
        .map(|row| row.iter().fold((f32::INFINITY, f32::NEG_INFINITY), |(lo, hi), &v| (lo.min(v), hi.max(v))))
        .unzip()
}

fn row_params(d: usize, bits: u32, x: &[f32]) -> (Vec<f32>, Vec<f32>) {
    let (lo, hi) = row_min_max(d, x);
    let levels = max_code(bits) as f32;
    let scale = lo.iter().zip(&hi).map(|(l, h)| (h - l) / levels).collect();
    (lo, scale)
}

/// Clamps a float code into `0..=max` the way the kernels do (`fminf(fmaxf(q, 0), max)`).
fn clamp_code(q: f32, max: u32) -> u32 {
    q.max(0.0).min(max as f32) as u32
}

/// Linear quantization with round-to-nearest (`linear_quantize`).
pub fn linear_quantize(d: usize, bits: u32, x: &[f32]) -> RowQuant {
    let (lo, scale) = row_params(d, bits, x);
    let codes = x
        .iter()
        .enumerate()
        .map(|(t, &v)| {
            let (l, s) = (lo[t / d], scale[t / d]);
            clamp_code(if s > 0.0 { ((v - l) / s).round() } else { 0.0 }, max_code(bits))
        })
        .collect();
    RowQuant { lo, scale, codes }
}

/// The uniform draw of stochastic rounding for element `(gid, col)` under `prefix`: the CPU
/// codec's own draw, so device and CPU codes match draw for draw.
pub fn rounding_draw(prefix: u64, gid: u32, col: usize) -> f32 {
    cache_quant::codec::stochastic::rounding_draw(hash_extend(prefix, &[u64::from(gid)]), col)
}

/// Stochastic rounding with keyed draws (`stochastic_quantize`); row `r` is vertex `gids[r]`.
pub fn stochastic_quantize(d: usize, bits: u32, x: &[f32], gids: &[u32], prefix: u64) -> RowQuant {
    let (lo, scale) = row_params(d, bits, x);
    let codes = x
        .iter()
        .enumerate()
        .map(|(t, &v)| {
            let (r, j) = (t / d, t % d);
            let (l, s) = (lo[r], scale[r]);
            let u = rounding_draw(prefix, gids[r], j);
            clamp_code(if s > 0.0 { ((v - l) / s + u).floor() } else { 0.0 }, max_code(bits))
        })
        .collect();
    RowQuant { lo, scale, codes }
}

/// `lo[r] + q * scale[r]` (`row_dequantize`, for linear and stochastic codes).
pub fn row_dequantize(d: usize, q: &RowQuant) -> Vec<f32> {
    q.codes.iter().enumerate().map(|(t, &c)| q.lo[t / d] + c as f32 * q.scale[t / d]).collect()
}

/// Whole-matrix bucket quantization into `2^bits` buckets (`bucket_quantize`).
pub fn bucket_quantize(bits: u32, x: &[f32]) -> BucketQuant {
    let (lo, hi) = x.iter().fold((f32::INFINITY, f32::NEG_INFINITY), |(lo, hi), &v| (lo.min(v), hi.max(v)));
    let width = (hi - lo) / (max_code(bits) + 1) as f32;
    let codes = x
        .iter()
        .map(|&v| clamp_code(if width > 0.0 { ((v - lo) / width).floor() } else { 0.0 }, max_code(bits)))
        .collect();
    BucketQuant { lo, hi, codes }
}

/// Bucket midpoints (`bucket_dequantize`).
pub fn bucket_dequantize(bits: u32, q: &BucketQuant) -> Vec<f32> {
    let width = (q.hi - q.lo) / (max_code(bits) + 1) as f32;
    q.codes.iter().map(|&c| q.lo + (c as f32 + 0.5) * width).collect()
}

/// LSB-first bit packing of `bits`-bit codes (`pack_codes`); bits above `bits` are ignored.
pub fn pack_codes(bits: u32, codes: &[u32]) -> Vec<u8> {
    let mask = max_code(bits);
    let mut bytes = vec![0u8; (codes.len() * bits as usize).div_ceil(8)];
    for (i, &c) in codes.iter().enumerate() {
        let mut value = u64::from(c & mask) << ((i * bits as usize) % 8);
        let mut k = i * bits as usize / 8;
        while value != 0 {
            bytes[k] |= value as u8;
            value >>= 8;
            k += 1;
        }
    }
    bytes
}

/// The inverse of [`pack_codes`] for `len` codes (`unpack_codes`).
pub fn unpack_codes(bits: u32, bytes: &[u8], len: usize) -> Vec<u32> {
    let mask = max_code(bits);
    (0..len)
        .map(|i| {
            let start = i * bits as usize;
            let word = (start / 8..=(start + bits as usize - 1) / 8)
                .enumerate()
                .fold(0u32, |w, (s, k)| w | u32::from(bytes[k]) << (8 * s));
            (word >> (start % 8)) & mask
        })
        .collect()
}

/// `dst[i, :] = src[idx[i], :]` (`gather_rows`).
pub fn gather_rows(f: usize, idx: &[u32], src: &[f32]) -> Vec<f32> {
    idx.iter().flat_map(|&i| &src[i as usize * f..][..f]).copied().collect()
}

/// `dst[idx[i], :] += src[i, :]` (`scatter_add_rows`).
pub fn scatter_add_rows(f: usize, idx: &[u32], src: &[f32], dst: &mut [f32]) {
    for (&i, row) in idx.iter().zip(src.chunks_exact(f)) {
        dst[i as usize * f..][..f].iter_mut().zip(row).for_each(|(d, s)| *d += s);
    }
}

/// `dst[idx[i], :] = src[i, :]` (`scatter_rows`; indices distinct).
pub fn scatter_rows(f: usize, idx: &[u32], src: &[f32], dst: &mut [f32]) {
    for (&i, row) in idx.iter().zip(src.chunks_exact(f)) {
        dst[i as usize * f..][..f].copy_from_slice(row);
    }
}

/// The columns of `dst` (rows of `d`) outside `kept` from `src` (rows of `d - kept.len()`, those
/// columns in order); the columns in `kept` keep what they hold (`put_columns_around`).
pub fn put_columns_around(d: usize, kept: std::ops::Range<usize>, src: &[f32], dst: &mut [f32]) {
    let f = d - kept.len();
    for (out, row) in dst.chunks_exact_mut(d).zip(src.chunks_exact(f.max(1))) {
        let (before, after) = row.split_at(kept.start);
        out[..kept.start].copy_from_slice(before);
        out[kept.end..].copy_from_slice(after);
    }
}

/// The columns of `src` (rows of `d`) outside `skipped`, in order (`take_columns_around`): the
/// inverse of [`put_columns_around`].
pub fn take_columns_around(d: usize, skipped: std::ops::Range<usize>, src: &[f32]) -> Vec<f32> {
    src.chunks_exact(d).flat_map(|row| row[..skipped.start].iter().chain(&row[skipped.end..])).copied().collect()
}

/// `dst[i, :] += coeff[i] * src[i, :]`, `coeff` 1 when `None` (`add_scaled_rows`).
pub fn add_scaled_rows(f: usize, coeff: Option<&[f32]>, src: &[f32], dst: &mut [f32]) {
    for (i, (d, s)) in dst.chunks_exact_mut(f).zip(src.chunks_exact(f)).enumerate() {
        let c = coeff.map_or(1.0, |c| c[i]);
        d.iter_mut().zip(s).for_each(|(d, s)| *d += c * s);
    }
}

#[cfg(test)]
#[path = "reference_tests.rs"]
mod tests;
