// GAT's edge kernels: SDDMM, the additive attention logits, the edge softmax with its backward,
// and the same softmax split around a cut graph's replica syncs (a row maximum, the exponentials
// with their row sums, the per-head quotient, and their backwards). Edge values are laid out
// `[entry * heads + head]`, as in gnn-core's sparse.rs.
#include "halo_common.cuh"

// out[k * heads + h] = a[r][h] . b[col[k]][h]; a and b are `heads * dh` wide. One thread per
// (entry, head); the row of an entry is found by binary search over indptr.
__device__ __forceinline__ u64 halo_row_of(const u64* indptr, u32 rows, u64 k) {
    u32 lo = 0, hi = rows;
    while (hi - lo > 1) {
        u32 mid = lo + (hi - lo) / 2;
        if (indptr[mid] <= k) lo = mid; else hi = mid;
    }
    return lo;
}

extern "C" __global__ void sddmm(u32 rows, u32 heads, u32 dh, const u64* __restrict__ indptr,
                                 const u32* __restrict__ indices, const float* __restrict__ a,
                                 const float* __restrict__ b, float* __restrict__ out) {
    u64 t = halo_tid();
    u64 nnz = indptr[rows];
    if (t >= nnz * heads) return;
    u64 k = t / heads, h = t % heads;
    u64 r = halo_row_of(indptr, rows, k);
    u64 width = (u64)heads * dh;
    const float* ar = a + r * width + h * dh;
    const float* bc = b + (u64)indices[k] * width + h * dh;
    float acc = 0.0f;
    for (u32 i = 0; i < dh; ++i) acc += ar[i] * bc[i];
    out[t] = acc;
}

// GAT logits: out[k * heads + h] = LeakyReLU_slope(src[col[k]][h] + dst[r][h]).
extern "C" __global__ void gat_logits(u32 rows, u32 heads, float slope, const u64* __restrict__ indptr,
                                      const u32* __restrict__ indices, const float* __restrict__ src,
                                      const float* __restrict__ dst, float* __restrict__ out) {
    u64 t = halo_tid();
    u64 nnz = indptr[rows];
    if (t >= nnz * heads) return;
    u64 k = t / heads, h = t % heads;
    u64 r = halo_row_of(indptr, rows, k);
    float z = src[(u64)indices[k] * heads + h] + dst[r * heads + h];
    out[t] = z > 0.0f ? z : slope * z;
}

// Softmax over each row's entries, per head, in place; one thread per (row, head). Empty rows
// are left alone. Max-subtracted, as on the CPU.
extern "C" __global__ void edge_softmax(u32 rows, u32 heads, const u64* __restrict__ indptr,
                                        float* __restrict__ scores) {
    u64 t = halo_tid();
    if (t >= (u64)rows * heads) return;
    u64 r = t / heads, h = t % heads;
    u64 begin = indptr[r], end = indptr[r + 1];
    if (begin == end) return;
    float m = -__int_as_float(0x7f800000);
    for (u64 k = begin; k < end; ++k) m = fmaxf(m, scores[k * heads + h]);
    float s = 0.0f;
    for (u64 k = begin; k < end; ++k) {
        float w = expf(scores[k * heads + h] - m);
        scores[k * heads + h] = w;
        s += w;
    }
    for (u64 k = begin; k < end; ++k) scores[k * heads + h] /= s;
}

// Given the softmax output w and the gradient g of the loss in w, writes the gradient in the
// logits: dz_k = w_k (g_k - sum_j w_j g_j) over the row's entries, per head.
extern "C" __global__ void edge_softmax_backward(u32 rows, u32 heads, const u64* __restrict__ indptr,
                                                 const float* __restrict__ w, const float* __restrict__ g,
                                                 float* __restrict__ dz) {
    u64 t = halo_tid();
    if (t >= (u64)rows * heads) return;
    u64 r = t / heads, h = t % heads;
    float dot = 0.0f;
    for (u64 k = indptr[r]; k < indptr[r + 1]; ++k) dot += w[k * heads + h] * g[k * heads + h];
    for (u64 k = indptr[r]; k < indptr[r + 1]; ++k) {
        u64 i = k * heads + h;
        dz[i] = w[i] * (g[i] - dot);
    }
}

// A part's softmax, step 1: max[r][h] = the maximum of the row's self-loop logit
// LeakyReLU_slope(src[r][h] + dst[r][h]) and its entries' logits, as the CPU layer seeds it on
// every replica (the replicas then sync it). One thread per (row, head).
extern "C" __global__ void gat_row_max(u32 rows, u32 heads, float slope, const u64* __restrict__ indptr,
                                       const float* __restrict__ scores, const float* __restrict__ src,
                                       const float* __restrict__ dst, float* __restrict__ max) {
    u64 t = halo_tid();
    if (t >= (u64)rows * heads) return;
    u64 r = t / heads, h = t % heads;
    float z = src[t] + dst[t];
    float m = z > 0.0f ? z : slope * z;
    for (u64 k = indptr[r]; k < indptr[r + 1]; ++k) m = fmaxf(m, scores[k * heads + h]);
    max[t] = m;
}

// A part's softmax, step 2: scores[k][h] <- exp(scores[k][h] - max[r][h]) in place, and the row
// sums written to the first `heads` columns of `sums`, rows `stride` wide: sums[r * stride + h]
// (0 for an empty row). One thread per (row, head).
extern "C" __global__ void edge_exp_sums(u32 rows, u32 heads, const u64* __restrict__ indptr,
                                         const float* __restrict__ max, u32 stride, float* __restrict__ scores,
                                         float* __restrict__ sums) {
    u64 t = halo_tid();
    if (t >= (u64)rows * heads) return;
    u64 r = t / heads, h = t % heads;
    float s = 0.0f;
    for (u64 k = indptr[r]; k < indptr[r + 1]; ++k) {
        float w = expf(scores[k * heads + h] - max[t]);
        scores[k * heads + h] = w;
        s += w;
    }
    sums[r * stride + h] = s;
}

// A part's softmax, step 3, on a synced [denominators | numerators] block (rows x (heads +
// heads * dh)): out[r][h * dh + j] = numerator[r][h][j] * (1 / denominator[r][h]), 0 where the
// denominator is 0 (a row with no entry anywhere). One thread per output.
extern "C" __global__ void head_divide(u32 rows, u32 heads, u32 dh, const float* __restrict__ block,
                                       float* __restrict__ out) {
    u64 width = (u64)heads * dh;
    u64 t = halo_tid();
    if (t >= (u64)rows * width) return;
    u64 r = t / width, c = t % width;
    const float* row = block + r * (heads + width);
    float den = row[c / dh];
    out[t] = den > 0.0f ? row[heads + c] * (1.0f / den) : 0.0f;
}

// head_divide's backward: with g the gradient of its output, writes the block's gradient
// [d denominators | d numerators]: d num = g / den, d den = -(g . num / den) / den, per head
// (zeros where the denominator is 0). One thread per (row, head).
extern "C" __global__ void head_divide_backward(u32 rows, u32 heads, u32 dh, const float* __restrict__ block,
                                                const float* __restrict__ g, float* __restrict__ dblock) {
    u64 t = halo_tid();
    if (t >= (u64)rows * heads) return;
    u64 r = t / heads, h = t % heads;
    u64 width = (u64)heads * dh, stride = heads + width;
    const float* row = block + r * stride;
    float* drow = dblock + r * stride;
    const float* gr = g + r * width + h * dh;
    float den = row[h];
    float inv = den > 0.0f ? 1.0f / den : 0.0f;
    float dot = 0.0f;
    for (u32 j = 0; j < dh; ++j) {
        u64 c = h * dh + j;
        drow[heads + c] = gr[j] * inv;
        dot += gr[j] * (row[heads + c] * inv);
    }
    drow[h] = -dot * inv;
}

// The logit gradient of a part's exponentials w = exp(z - max) (the synced maximum held
// constant), with g the gradient of the loss in w and dsums that of each row's sum, in the first
// `heads` columns of rows `stride` wide: dz = w (g + dsums[r * stride + h]). One thread per
// (row, head).
extern "C" __global__ void edge_exp_backward(u32 rows, u32 heads, const u64* __restrict__ indptr,
                                             const float* __restrict__ w, const float* __restrict__ g,
                                             const float* __restrict__ dsums, u32 stride, float* __restrict__ dz) {
    u64 t = halo_tid();
    if (t >= (u64)rows * heads) return;
    u64 r = t / heads, h = t % heads;
    float ds = dsums[r * stride + h];
    for (u64 k = indptr[r]; k < indptr[r + 1]; ++k) {
        u64 i = k * heads + h;
        dz[i] = w[i] * (g[i] + ds);
    }
}

// GAT attention dropout with the CPU's keyed flags (gnn_core::dropout::DropoutSite::edge_keep):
// entry k (row r, source indices[k]) keeps head h when 16-bit lane h % 4 of
// mix64(key + h / 4) >= threshold, key = hash_extend(hash_extend(prefix, gids[source]), gids[r])
// (prefix = hash_key([ATTENTION_DOMAIN, seed, epoch, layer])). Scales w in place (by 0 or
// scale, as the CPU multiplies) and records the flags in keep; one thread per (entry, head).
extern "C" __global__ void attention_dropout(u32 rows, u32 heads, const u64* __restrict__ indptr,
                                             const u32* __restrict__ indices, const u32* __restrict__ gids,
                                             u64 prefix, u32 threshold, float scale, float* __restrict__ w,
                                             u8* __restrict__ keep) {
    u64 t = halo_tid();
    u64 nnz = indptr[rows];
    if (t >= nnz * heads) return;
    u64 k = t / heads, h = t % heads;
    u64 r = halo_row_of(indptr, rows, k);
    u64 key = halo_hash_extend(halo_hash_extend(prefix, (u64)gids[indices[k]]), (u64)gids[r]);
    u64 bits = halo_mix64(key + h / 4);
    u32 lane = (u32)((bits >> (16 * (h % 4))) & 0xFFFFULL);
    u8 kept = lane >= threshold ? 1 : 0;
    w[t] *= (float)kept * scale;
    keep[t] = kept;
}
