// CSR sparse x dense products. Row pointers are u64 and column indices u32, as in
// graph_partition::Csr; `vals` may be null for an all-ones matrix.
#include "halo_common.cuh"

// out[r, j] = sum_k vals[k] * x[col[k], j] over row r's entries: one thread per output element,
// consecutive threads on consecutive columns so loads of x rows coalesce.
extern "C" __global__ void csr_spmm(u32 rows, u32 f, const u64* __restrict__ indptr, const u32* __restrict__ indices,
                                    const float* __restrict__ vals, const float* __restrict__ x,
                                    float* __restrict__ out) {
    u64 t = halo_tid();
    if (t >= (u64)rows * f) return;
    u64 r = t / f, j = t % f;
    float acc = 0.0f;
    for (u64 k = indptr[r]; k < indptr[r + 1]; ++k) {
        float v = vals ? vals[k] : 1.0f;
        acc += v * x[(u64)indices[k] * f + j];
    }
    out[t] = acc;
}

// csr_spmm with one warp per (row, slab of columns), for f >= 32: the warp loads 32 of the
// row's indices and values at a time (one coalesced load each) and passes them lane to lane, and
// each lane adds 4 consecutive columns as one float4 load when f is a multiple of 4 (a slab is
// 128 columns), else 1 (a slab is 32). Each output still sums the row's entries in order, so it
// equals csr_spmm's bit for bit. Blocks are 32 x blockDim.y threads; warp y of block b takes
// task b * blockDim.y + y, row task / slabs and slab task % slabs.
extern "C" __global__ void csr_spmm_warp(u32 rows, u32 f, u32 slabs, const u64* __restrict__ indptr,
                                         const u32* __restrict__ indices, const float* __restrict__ vals,
                                         const float* __restrict__ x, float* __restrict__ out) {
    u64 task = (u64)blockIdx.x * blockDim.y + threadIdx.y;
    // Whole warps leave together (task is the same across a warp), so the shuffles below
    // always have all 32 lanes.
    if (task >= (u64)rows * slabs) return;
    u32 lane = threadIdx.x;
    u64 r = task / slabs;
    u32 slab = (u32)(task % slabs);
    bool vec4 = (f & 3u) == 0;
    u32 j = vec4 ? slab * 128u + lane * 4u : slab * 32u + lane;
    bool active = j < f;
    float a0 = 0.0f, a1 = 0.0f, a2 = 0.0f, a3 = 0.0f;
    u64 begin = indptr[r], end = indptr[r + 1];
    for (u64 base = begin; base < end; base += 32) {
        u32 count = end - base < 32 ? (u32)(end - base) : 32u;
        u32 my_c = 0;
        float my_v = 0.0f;
        if (lane < count) {
            my_c = indices[base + lane];
            my_v = vals ? vals[base + lane] : 1.0f;
        }
        for (u32 e = 0; e < count; ++e) {
            u32 c = __shfl_sync(0xffffffffu, my_c, e);
            float v = __shfl_sync(0xffffffffu, my_v, e);
            if (!active) continue;
            const float* xr = x + (u64)c * f + j;
            if (vec4) {
                float4 q = *reinterpret_cast<const float4*>(xr);
                a0 += v * q.x;
                a1 += v * q.y;
                a2 += v * q.z;
                a3 += v * q.w;
            } else {
                a0 += v * xr[0];
            }
        }
    }
    if (!active) return;
    float* o = out + r * f + j;
    if (vec4) {
        *reinterpret_cast<float4*>(o) = make_float4(a0, a1, a2, a3);
    } else {
        o[0] = a0;
    }
}

// out[col[k], j] += vals[k] * x[r, j]: A^T x without building the transpose. `out` must be
// zeroed (or hold what to add to); atomics make the summation order vary from run to run.
extern "C" __global__ void csr_spmm_t(u32 rows, u32 f, const u64* __restrict__ indptr,
                                      const u32* __restrict__ indices, const float* __restrict__ vals,
                                      const float* __restrict__ x, float* __restrict__ out) {
    u64 t = halo_tid();
    if (t >= (u64)rows * f) return;
    u64 r = t / f, j = t % f;
    float xv = x[t];
    for (u64 k = indptr[r]; k < indptr[r + 1]; ++k) {
        float v = vals ? vals[k] : 1.0f;
        atomicAdd(&out[(u64)indices[k] * f + j], v * xv);
    }
}
