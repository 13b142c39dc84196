// Quantize, dequantize and bit-pack for the linear, stochastic and bucket codecs.
//
// Linear (per row): lo = min, scale = (max - lo) / (2^b - 1), q = round((x - lo) / scale).
// Stochastic (per row): same lo and scale, q = floor((x - lo) / scale + u) with u a keyed
//   uniform draw (the CPU codec's: half column % 2 of output column / 2 of the SplitMix64 stream
//   seeded by hash_extend(prefix, gid)), clamped to 2^b - 1.
// Bucket (whole matrix): width = (max - min) / 2^b, q = min(floor((x - min) / width), 2^b - 1),
//   decoded to the bucket midpoint min + (q + 0.5) * width.
// A constant row (or matrix) has scale 0 and encodes to all-zero codes. Codes are u32 here and
// packed LSB-first into bytes: code i occupies bits [i * b, (i + 1) * b) of the byte stream.
#include "halo_common.cuh"

// Per-row min and max; one thread per row.
extern "C" __global__ void row_min_max(u32 n, u32 d, const float* __restrict__ x, float* __restrict__ lo,
                                       float* __restrict__ hi) {
    u64 r = halo_tid();
    if (r >= n) return;
    float mn = __int_as_float(0x7f800000), mx = -__int_as_float(0x7f800000);
    for (u32 j = 0; j < d; ++j) {
        float v = x[r * d + j];
        mn = fminf(mn, v);
        mx = fmaxf(mx, v);
    }
    lo[r] = mn;
    hi[r] = mx;
}

// One step of a whole-array min/max: block b reduces a grid-strided share of (lo_in, hi_in) into
// lo_out[b], hi_out[b]. Called on (x, x) and then once more with one block on the partials.
// blockDim.x must be a power of two no larger than 1024.
extern "C" __global__ void min_max_partials(u64 len, const float* __restrict__ lo_in, const float* __restrict__ hi_in,
                                            float* __restrict__ lo_out, float* __restrict__ hi_out) {
    __shared__ float smin[1024];
    __shared__ float smax[1024];
    float mn = __int_as_float(0x7f800000), mx = -__int_as_float(0x7f800000);
    for (u64 i = halo_tid(); i < len; i += (u64)gridDim.x * blockDim.x) {
        mn = fminf(mn, lo_in[i]);
        mx = fmaxf(mx, hi_in[i]);
    }
    smin[threadIdx.x] = mn;
    smax[threadIdx.x] = mx;
    __syncthreads();
    for (u32 s = blockDim.x / 2; s > 0; s >>= 1) {
        if (threadIdx.x < s) {
            smin[threadIdx.x] = fminf(smin[threadIdx.x], smin[threadIdx.x + s]);
            smax[threadIdx.x] = fmaxf(smax[threadIdx.x], smax[threadIdx.x + s]);
        }
        __syncthreads();
    }
    if (threadIdx.x == 0) {
        lo_out[blockIdx.x] = smin[0];
        hi_out[blockIdx.x] = smax[0];
    }
}

// scale[r] = (hi[r] - lo[r]) / levels, where levels = 2^b - 1 (linear, stochastic).
extern "C" __global__ void row_scales(u32 n, float levels, const float* __restrict__ lo, const float* __restrict__ hi,
                                      float* __restrict__ scale) {
    u64 r = halo_tid();
    if (r >= n) return;
    scale[r] = (hi[r] - lo[r]) / levels;
}

extern "C" __global__ void linear_quantize(u32 n, u32 d, u32 levels, const float* __restrict__ x,
                                           const float* __restrict__ lo, const float* __restrict__ scale,
                                           u32* __restrict__ codes) {
    u64 t = halo_tid();
    if (t >= (u64)n * d) return;
    u64 r = t / d;
    float s = scale[r];
    float q = s > 0.0f ? roundf((x[t] - lo[r]) / s) : 0.0f;
    codes[t] = (u32)fminf(fmaxf(q, 0.0f), (float)levels);
}

extern "C" __global__ void stochastic_quantize(u32 n, u32 d, u32 levels, const float* __restrict__ x,
                                               const float* __restrict__ lo, const float* __restrict__ scale,
                                               const u32* __restrict__ gids, u64 prefix, u32* __restrict__ codes) {
    u64 t = halo_tid();
    if (t >= (u64)n * d) return;
    u64 r = t / d, j = t % d;
    float s = scale[r];
    // cache_quant::codec::stochastic::rounding_draw: half j % 2 of output j / 2 of the row's
    // stream, its top 24 bits.
    u64 bits = halo_split_mix64_at(halo_hash_extend(prefix, (u64)gids[r]), j / 2);
    u32 half = (j & 1) ? (u32)(bits >> 32) : (u32)bits;
    float u = (float)(half >> 8) * (1.0f / 16777216.0f);
    float q = s > 0.0f ? floorf((x[t] - lo[r]) / s + u) : 0.0f;
    codes[t] = (u32)fminf(fmaxf(q, 0.0f), (float)levels);
}

// x = lo[r] + q * scale[r] (linear and stochastic).
extern "C" __global__ void row_dequantize(u32 n, u32 d, const u32* __restrict__ codes, const float* __restrict__ lo,
                                          const float* __restrict__ scale, float* __restrict__ x) {
    u64 t = halo_tid();
    if (t >= (u64)n * d) return;
    u64 r = t / d;
    x[t] = lo[r] + (float)codes[t] * scale[r];
}

// range[0] = min, range[1] = max of the whole matrix (from min_max_partials).
extern "C" __global__ void bucket_quantize(u64 len, u32 buckets, const float* __restrict__ x,
                                           const float* __restrict__ lo, const float* __restrict__ hi,
                                           u32* __restrict__ codes) {
    u64 t = halo_tid();
    if (t >= len) return;
    float width = (hi[0] - lo[0]) / (float)buckets;
    float q = width > 0.0f ? floorf((x[t] - lo[0]) / width) : 0.0f;
    codes[t] = (u32)fminf(fmaxf(q, 0.0f), (float)(buckets - 1));
}

extern "C" __global__ void bucket_dequantize(u64 len, u32 buckets, const u32* __restrict__ codes,
                                             const float* __restrict__ lo, const float* __restrict__ hi,
                                             float* __restrict__ x) {
    u64 t = halo_tid();
    if (t >= len) return;
    float width = (hi[0] - lo[0]) / (float)buckets;
    x[t] = lo[0] + ((float)codes[t] + 0.5f) * width;
}

// bytes[k] gathers bits [8k, 8k + 8) of the LSB-first stream of `len` codes of `bits` bits
// (1..=16). One thread per output byte, so no two threads write the same byte.
extern "C" __global__ void pack_codes(u64 len, u32 bits, const u32* __restrict__ codes, u8* __restrict__ bytes) {
    u64 k = halo_tid();
    u64 total_bits = len * bits;
    if (k * 8 >= total_bits) return;
    u64 first = (k * 8) / bits;
    u64 last = (k * 8 + 7) / bits;
    u32 byte = 0;
    for (u64 i = first; i <= last && i < len; ++i) {
        long long shift = (long long)(i * bits) - (long long)(k * 8);
        u64 code = codes[i] & ((1u << bits) - 1u);
        byte |= (u32)(shift >= 0 ? code << shift : code >> (-shift));
    }
    bytes[k] = (u8)(byte & 0xFFu);
}

// The inverse of pack_codes: code i from bits [i * b, (i + 1) * b), spanning up to three bytes.
extern "C" __global__ void unpack_codes(u64 len, u32 bits, const u8* __restrict__ bytes, u32* __restrict__ codes) {
    u64 i = halo_tid();
    if (i >= len) return;
    u64 start = i * bits;
    u64 first = start / 8, last = (start + bits - 1) / 8;
    u32 word = 0;
    for (u64 k = first; k <= last; ++k) word |= (u32)bytes[k] << (8 * (k - first));
    codes[i] = (word >> (start % 8)) & ((1u << bits) - 1u);
}
