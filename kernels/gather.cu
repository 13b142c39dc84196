// Row gather, scatter and scatter-add, the device halves of an exchange's pack and unpack, the
// per-row scaled add of a self term after an exchange, and column windows put and taken.
#include "halo_common.cuh"

// dst[i, :] = src[idx[i], :].
extern "C" __global__ void gather_rows(u32 n, u32 f, const u32* __restrict__ idx, const float* __restrict__ src,
                                       float* __restrict__ dst) {
    u64 t = halo_tid();
    if (t >= (u64)n * f) return;
    u64 i = t / f, j = t % f;
    dst[t] = src[(u64)idx[i] * f + j];
}

// dst[idx[i], :] += src[i, :]; repeated indices accumulate (atomically).
extern "C" __global__ void scatter_add_rows(u32 n, u32 f, const u32* __restrict__ idx,
                                           const float* __restrict__ src, float* __restrict__ dst) {
    u64 t = halo_tid();
    if (t >= (u64)n * f) return;
    u64 i = t / f, j = t % f;
    atomicAdd(&dst[(u64)idx[i] * f + j], src[t]);
}

// dst[idx[i], :] = src[i, :]; indices are distinct (a repeated one keeps one of its rows).
extern "C" __global__ void scatter_rows(u32 n, u32 f, const u32* __restrict__ idx, const float* __restrict__ src,
                                        float* __restrict__ dst) {
    u64 t = halo_tid();
    if (t >= (u64)n * f) return;
    u64 i = t / f, j = t % f;
    dst[(u64)idx[i] * f + j] = src[t];
}

// dst[i, :] += coeff[i] * src[i, :] (coeff null: 1).
extern "C" __global__ void add_scaled_rows(u32 n, u32 f, const float* __restrict__ coeff,
                                           const float* __restrict__ src, float* __restrict__ dst) {
    u64 t = halo_tid();
    if (t >= (u64)n * f) return;
    float c = coeff ? coeff[t / f] : 1.0f;
    dst[t] += c * src[t];
}

// Where element t of a compact n x (d - w) block (the columns outside [a, a + w), in order) sits
// in the n x d block around that window.
__device__ __forceinline__ u64 halo_around(u64 t, u32 d, u32 a, u32 w) {
    u32 f = d - w;
    u64 i = t / f;
    u32 j = (u32)(t % f);
    return i * d + (j < a ? j : j + w);
}

// The columns of `dst` (n x d) outside [a, a + w) from `src` (n x (d - w), those columns in
// order): dst[i, j] = src[i, j] for j < a, dst[i, j + w] = src[i, j] for j >= a. The columns
// [a, a + w) keep what they hold.
extern "C" __global__ void put_columns_around(u32 n, u32 d, u32 a, u32 w, const float* __restrict__ src,
                                              float* __restrict__ dst) {
    u64 t = halo_tid();
    if (t < (u64)n * (d - w)) dst[halo_around(t, d, a, w)] = src[t];
}

// The columns of `src` (n x d) outside [a, a + w), in order, into `dst` (n x (d - w)): the inverse
// of put_columns_around.
extern "C" __global__ void take_columns_around(u32 n, u32 d, u32 a, u32 w, const float* __restrict__ src,
                                               float* __restrict__ dst) {
    u64 t = halo_tid();
    if (t < (u64)n * (d - w)) dst[t] = src[halo_around(t, d, a, w)];
}
