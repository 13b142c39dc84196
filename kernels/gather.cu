// Row gather and scatter-add, the device halves of an exchange's pack and unpack.
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
