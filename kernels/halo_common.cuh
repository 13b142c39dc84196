// Shared by every kernel file: integer types (NVRTC has no <stdint.h>), the launch index helper,
// and the counter-based hash of graph-partition's rng.rs, ported bit for bit so that device and
// CPU draw the same dropout masks and stochastic-rounding noise.
#pragma once

typedef unsigned long long u64;
typedef unsigned int u32;
typedef unsigned char u8;

// Global thread index over a 1-D grid, in 64 bits so n * f above 2^32 does not wrap.
__device__ __forceinline__ u64 halo_tid() {
    return (u64)blockIdx.x * (u64)blockDim.x + (u64)threadIdx.x;
}

// SplitMix64 finaliser (graph_partition::rng::mix64).
__device__ __forceinline__ u64 halo_mix64(u64 z) {
    z += 0x9E3779B97F4A7C15ULL;
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
    return z ^ (z >> 31);
}

// graph_partition::rng::hash_extend with one word: hash_extend(prefix, [w]).
__device__ __forceinline__ u64 halo_hash_extend(u64 prefix, u64 w) {
    return halo_mix64(prefix ^ halo_mix64(w));
}

// graph_partition::rng::SplitMix64::output_at: output k of the stream seeded with `seed`.
__device__ __forceinline__ u64 halo_split_mix64_at(u64 seed, u64 k) {
    return halo_mix64(halo_mix64(seed) + (k + 1) * 0x9E3779B97F4A7C15ULL);
}
