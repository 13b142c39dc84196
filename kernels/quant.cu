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

// ---------------------------------------------------------------------------------------------
// The codecs' wire format, encoded and decoded where the rows live (cache_quant::Encoding: its
// encode and decode are these kernels' CPU reference, bit for bit). One thread per message row:
// row r is block row rows[r]; its bytes start at offsets[r]: a header of two little-endian f32
// (linear: min, max; stochastic: zero point, scale) and its codes packed least significant bits
// first from a byte boundary (2, 4 or 8 bits; linear's 16 bits as little-endian u16). The
// arithmetic is the CPU codec's operation for operation (PTX built with --fmad=false, IEEE
// division), so the bytes are the CPU's.

__device__ __forceinline__ void halo_put_f32(u8* at, float v) {
    u32 w = __float_as_uint(v);
    at[0] = (u8)w;
    at[1] = (u8)(w >> 8);
    at[2] = (u8)(w >> 16);
    at[3] = (u8)(w >> 24);
}

__device__ __forceinline__ float halo_get_f32(const u8* at) {
    return __uint_as_float((u32)at[0] | ((u32)at[1] << 8) | ((u32)at[2] << 16) | ((u32)at[3] << 24));
}

// The row's minimum and maximum as Rust's f32::min / f32::max folds give them (a NaN is skipped).
__device__ __forceinline__ void halo_row_range(const float* row, u32 d, float* lo, float* hi) {
    float mn = __int_as_float(0x7f800000), mx = -__int_as_float(0x7f800000);
    for (u32 j = 0; j < d; ++j) {
        mn = fminf(mn, row[j]);
        mx = fmaxf(mx, row[j]);
    }
    *lo = mn;
    *hi = mx;
}

// A row's codes written in column order a byte at a time, each byte once (so the bytes need not
// start zeroed): code j of `bits` bits (2, 4, 8 or 16) at bit (j * bits) % 8 of byte j * bits / 8,
// the layout halo_get_code reads.
struct halo_codes {
    u8* at;
    u32 acc, filled, bits;
};

__device__ __forceinline__ halo_codes halo_codes_at(u8* at, u32 bits) {
    halo_codes c;
    c.at = at;
    c.acc = 0;
    c.filled = 0;
    c.bits = bits;
    return c;
}

__device__ __forceinline__ void halo_codes_push(halo_codes* c, u32 q) {
    c->acc |= q << c->filled;
    c->filled += c->bits;
    while (c->filled >= 8) {
        *c->at++ = (u8)c->acc;
        c->acc >>= 8;
        c->filled -= 8;
    }
}

// Writes the last, partly filled byte.
__device__ __forceinline__ void halo_codes_end(halo_codes* c) {
    if (c->filled > 0) *c->at = (u8)c->acc;
}

__device__ __forceinline__ u32 halo_get_code(const u8* codes, u32 j, u32 bits) {
    u32 per = 8 / bits;
    return (codes[j / per] >> ((j % per) * bits)) & ((1u << bits) - 1u);
}

// cache_quant::codec::stochastic::encode_rows. err[r] and norm[r]: the row's squared error and
// squared norm, summed in column order in f32 as the CPU codec sums them.
extern "C" __global__ void stochastic_encode_rows(u32 n, u32 d, const float* __restrict__ x,
                                                  const u32* __restrict__ rows, const u8* __restrict__ bits,
                                                  const u64* __restrict__ offsets, const u32* __restrict__ gids,
                                                  u64 key, u8* __restrict__ out, float* __restrict__ err,
                                                  float* __restrict__ norm) {
    u64 r = halo_tid();
    if (r >= n) return;
    const float* row = x + (u64)rows[r] * d;
    u32 b = bits[r];
    float top = (float)((1u << b) - 1u);
    float zero = 0.0f, scale = 0.0f;
    if (d > 0) {
        float hi;
        halo_row_range(row, d, &zero, &hi);
        scale = __fdiv_rn(__fsub_rn(hi, zero), top);
    }
    u8* at = out + offsets[r];
    halo_put_f32(at, zero);
    halo_put_f32(at + 4, scale);
    halo_codes codes = halo_codes_at(at + 8, b);
    float e2 = 0.0f, n2 = 0.0f;
    if (scale > 0.0f) {
        u64 row_key = halo_hash_extend(key, (u64)gids[r]);
        for (u32 j = 0; j < d; ++j) {
            u64 draw = halo_split_mix64_at(row_key, j / 2);
            u32 half = (j & 1) ? (u32)(draw >> 32) : (u32)draw;
            float u = __fmul_rn((float)(half >> 8), 1.0f / 16777216.0f);
            float v = fminf(__fadd_rn(__fdiv_rn(__fsub_rn(row[j], zero), scale), u), top);
            u32 q = (u32)v;
            halo_codes_push(&codes, q);
            float e = __fsub_rn(__fadd_rn(__fmul_rn((float)q, scale), zero), row[j]);
            e2 = __fadd_rn(e2, __fmul_rn(e, e));
            n2 = __fadd_rn(n2, __fmul_rn(row[j], row[j]));
        }
    } else {
        for (u32 j = 0; j < d; ++j) {
            halo_codes_push(&codes, 0);
            n2 = __fadd_rn(n2, __fmul_rn(row[j], row[j]));
        }
    }
    halo_codes_end(&codes);
    err[r] = e2;
    norm[r] = n2;
}

// cache_quant::codec::stochastic::decode_rows, into the packed rows `y` (n x d): a thread per
// value, so that a warp's stores are contiguous (a thread per row wrote d apart, and took six
// times the encoder's time on an H200).
extern "C" __global__ void stochastic_decode_rows(u32 n, u32 d, const u8* __restrict__ bytes,
                                                  const u8* __restrict__ bits, const u64* __restrict__ offsets,
                                                  float* __restrict__ y) {
    u64 t = halo_tid();
    if (t >= (u64)n * d) return;
    u64 r = t / d;
    u32 j = (u32)(t % d);
    const u8* at = bytes + offsets[r];
    float zero = halo_get_f32(at), scale = halo_get_f32(at + 4);
    u32 q = halo_get_code(at + 8, j, bits[r]);
    y[t] = __fadd_rn(__fmul_rn((float)q, scale), zero);
}

// cache_quant::codec::linear::encode_rows: levels round((v - min) / (max - min) * (2^b - 1)) in
// f64, half away from zero, as the CPU computes them (a NaN is level 0).
extern "C" __global__ void linear_encode_rows(u32 n, u32 d, u32 b, u64 row_bytes, const float* __restrict__ x,
                                              const u32* __restrict__ rows, u8* __restrict__ out) {
    u64 r = halo_tid();
    if (r >= n) return;
    const float* row = x + (u64)rows[r] * d;
    float lo, hi;
    halo_row_range(row, d, &lo, &hi);
    u8* at = out + r * row_bytes;
    halo_put_f32(at, lo);
    halo_put_f32(at + 4, hi);
    halo_codes codes = halo_codes_at(at + 8, b);
    u32 levels = (1u << b) - 1u;
    double range = __dsub_rn((double)hi, (double)lo);
    bool graded = range > 0.0 && isfinite(range);
    for (u32 j = 0; j < d; ++j) {
        u32 q = 0;
        if (graded) {
            double v = __dmul_rn(__ddiv_rn(__dsub_rn((double)row[j], (double)lo), range), (double)levels);
            long long whole = isnan(v) ? 0 : (long long)v;
            long long rounded = whole + (__dsub_rn(v, (double)whole) >= 0.5 ? 1 : 0);
            q = (u32)(rounded < 0 ? 0 : (rounded > (long long)levels ? (long long)levels : rounded));
        }
        halo_codes_push(&codes, q);
    }
    halo_codes_end(&codes);
}

// cache_quant::codec::linear::decode_rows, into the packed rows `y` (n x d): a thread per value,
// as stochastic_decode_rows.
extern "C" __global__ void linear_decode_rows(u32 n, u32 d, u32 b, u64 row_bytes, const u8* __restrict__ bytes,
                                              float* __restrict__ y) {
    u64 t = halo_tid();
    if (t >= (u64)n * d) return;
    u64 r = t / d;
    u32 j = (u32)(t % d);
    const u8* at = bytes + r * row_bytes;
    float lo = halo_get_f32(at), hi = halo_get_f32(at + 4);
    float step = __fdiv_rn(__fsub_rn(hi, lo), (float)((1u << b) - 1u));
    u32 q = b == 16 ? ((u32)at[8 + 2 * j] | ((u32)at[9 + 2 * j] << 8)) : halo_get_code(at + 8, j, b);
    y[t] = __fadd_rn(lo, __fmul_rn((float)q, step));
}

// cache_quant::codec::bucket's ids of a block over its bounds lo[0], hi[0] (Buckets::id: in f64 as
// the CPU computes them, a NaN or a flat range in bucket 0), and each value's error through its
// bucket's midpoint (Buckets::midpoint, in f32) for the error sums.
extern "C" __global__ void bucket_ids(u64 len, u32 bits, const float* __restrict__ x, const float* __restrict__ lo,
                                      const float* __restrict__ hi, u32* __restrict__ ids, float* __restrict__ diff) {
    u64 t = halo_tid();
    if (t >= len) return;
    float l = lo[0], h = hi[0];
    u32 count = 1u << bits;
    double range = __dsub_rn((double)h, (double)l);
    u32 id = 0;
    if (range > 0.0 && isfinite(range)) {
        double v = floor(__dmul_rn(__ddiv_rn(__dsub_rn((double)x[t], (double)l), range), (double)count));
        double top = (double)(count - 1u);
        v = v < 0.0 ? 0.0 : (v > top ? top : v);
        id = isnan(v) ? 0u : (u32)v;
    }
    ids[t] = id;
    float width = __fdiv_rn(__fsub_rn(h, l), (float)count);
    diff[t] = __fsub_rn(__fadd_rn(l, __fmul_rn(__fadd_rn((float)id, 0.5f), width)), x[t]);
}

// out[0] = sum of a[0..n), out[1] = sum of b[0..n) (of their squares when `square`), in f64: one
// block of blockDim.x threads (a power of two, at most 1024), thread t summing elements t,
// t + blockDim.x, ... in order, then the threads' sums added pairwise: a fixed order, so the
// same bits on every run.
extern "C" __global__ void pair_sums_f64(u32 n, u32 square, const float* __restrict__ a, const float* __restrict__ b,
                                         double* __restrict__ out) {
    __shared__ double sa[1024];
    __shared__ double sb[1024];
    double ta = 0.0, tb = 0.0;
    for (u32 i = threadIdx.x; i < n; i += blockDim.x) {
        double va = (double)a[i], vb = (double)b[i];
        ta = __dadd_rn(ta, square ? __dmul_rn(va, va) : va);
        tb = __dadd_rn(tb, square ? __dmul_rn(vb, vb) : vb);
    }
    sa[threadIdx.x] = ta;
    sb[threadIdx.x] = tb;
    __syncthreads();
    for (u32 s = blockDim.x / 2; s > 0; s >>= 1) {
        if (threadIdx.x < s) {
            sa[threadIdx.x] = __dadd_rn(sa[threadIdx.x], sa[threadIdx.x + s]);
            sb[threadIdx.x] = __dadd_rn(sb[threadIdx.x], sb[threadIdx.x + s]);
        }
        __syncthreads();
    }
    if (threadIdx.x == 0) {
        out[0] = sa[0];
        out[1] = sb[0];
    }
}
