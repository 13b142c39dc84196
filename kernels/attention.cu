// GAT's edge kernels: SDDMM, the additive attention logits, and the edge softmax with its
// backward. Edge values are laid out `[entry * heads + head]`, as in gnn-core's sparse.rs.
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
