// Fused element-wise ops: bias + activation, activation backward, the bias gradient, dropout
// with gnn-core's keyed masks, and LayerNorm forward/backward.
#include "halo_common.cuh"

// Activation codes, as `gnn_core::gpu::ActCode`.
#define HALO_ACT_NONE 0u
#define HALO_ACT_RELU 1u
#define HALO_ACT_ELU 2u
#define HALO_ACT_LEAKY 3u

__device__ __forceinline__ float halo_act(u32 act, float alpha, float x) {
    switch (act) {
        case HALO_ACT_RELU: return fmaxf(x, 0.0f);
        case HALO_ACT_ELU: return x > 0.0f ? x : alpha * expm1f(x);
        case HALO_ACT_LEAKY: return x > 0.0f ? x : alpha * x;
        default: return x;
    }
}

// Derivative through the output y (gnn_core::Activation::derivative_from_output).
__device__ __forceinline__ float halo_act_grad(u32 act, float alpha, float y) {
    switch (act) {
        case HALO_ACT_RELU: return y > 0.0f ? 1.0f : 0.0f;
        case HALO_ACT_ELU: return y > 0.0f ? 1.0f : y + alpha;
        case HALO_ACT_LEAKY: return y > 0.0f ? 1.0f : alpha;
        default: return 1.0f;
    }
}

// x[i, j] = act(x[i, j] + bias[j]) in place; bias may be null.
extern "C" __global__ void bias_act(u32 n, u32 f, const float* __restrict__ bias, u32 act, float alpha,
                                    float* __restrict__ x) {
    u64 t = halo_tid();
    if (t >= (u64)n * f) return;
    float v = x[t] + (bias ? bias[t % f] : 0.0f);
    x[t] = halo_act(act, alpha, v);
}

// grad *= act'(x), read through the saved output y.
extern "C" __global__ void act_backward(u64 len, u32 act, float alpha, const float* __restrict__ y,
                                        float* __restrict__ grad) {
    u64 t = halo_tid();
    if (t >= len) return;
    grad[t] *= halo_act_grad(act, alpha, y[t]);
}

// Column sums in two passes, each deterministic (no atomics; a fixed summation order).
// Pass 1: partial[c * f + j] = sum of a[i, j] (times b[i, j] when b is not null) over the rows
// of chunk c, [c * chunk, min(n, (c + 1) * chunk)). Blocks are COLUMN_TILE x COLUMN_LANES
// threads: a tile of consecutive columns (so loads coalesce) times lanes that stride the chunk's
// rows and then meet in shared memory in lane order. Grid: (column tiles, chunks).
#define COLUMN_TILE 32u
#define COLUMN_LANES 8u
extern "C" __global__ void column_partials(u32 n, u32 f, u32 chunk, const float* __restrict__ a,
                                           const float* __restrict__ b, float* __restrict__ partial) {
    __shared__ float lanes[COLUMN_LANES][COLUMN_TILE + 1];
    u32 j = blockIdx.x * COLUMN_TILE + threadIdx.x;
    u64 begin = (u64)blockIdx.y * chunk;
    u64 end = begin + chunk < (u64)n ? begin + chunk : (u64)n;
    float acc = 0.0f;
    if (j < f) {
        for (u64 i = begin + threadIdx.y; i < end; i += COLUMN_LANES) {
            float v = a[i * f + j];
            acc += b ? v * b[i * f + j] : v;
        }
    }
    lanes[threadIdx.y][threadIdx.x] = acc;
    __syncthreads();
    if (threadIdx.y == 0 && j < f) {
        float s = 0.0f;
        for (u32 y = 0; y < COLUMN_LANES; ++y) s += lanes[y][threadIdx.x];
        partial[(u64)blockIdx.y * f + j] = s;
    }
}

// Pass 2: out[j] += sum over the chunks c of partial[c * f + j], in chunk order; one thread per
// column.
extern "C" __global__ void column_total(u32 chunks, u32 f, const float* __restrict__ partial, float* __restrict__ out) {
    u64 j = halo_tid();
    if (j >= f) return;
    float acc = 0.0f;
    for (u32 c = 0; c < chunks; ++c) acc += partial[(u64)c * f + j];
    out[j] += acc;
}

// out[0] += sum of x[0..len), each a small non-negative integer held in a float (per-row hit
// counts): warp sums, then one 64-bit integer atomic per warp, so the total is exact in any order.
extern "C" __global__ void count_total(u64 len, const float* __restrict__ x, unsigned long long* __restrict__ out) {
    u64 t = halo_tid();
    unsigned long long v = t < len ? (unsigned long long)x[t] : 0ULL;
    for (u32 offset = 16; offset > 0; offset >>= 1) v += __shfl_down_sync(0xffffffffu, v, offset);
    if ((threadIdx.x & 31u) == 0 && v != 0ULL) atomicAdd(out, v);
}

// Feature dropout of gnn_core::dropout::DropoutSite::apply_rows. `prefix` is
// hash_key([FEATURE_DOMAIN, seed, epoch, layer]) from the host; the row key is
// hash_extend(prefix, gid); column j uses 16-bit lane j % 4 of mix64(key + j / 4) and is kept
// when that lane >= threshold. Kept values are scaled, dropped ones zeroed; mask may be null.
extern "C" __global__ void dropout_rows(u32 n, u32 f, const u32* __restrict__ gids, u64 prefix, u32 threshold,
                                        float scale, float* __restrict__ x, u8* __restrict__ mask) {
    u64 t = halo_tid();
    if (t >= (u64)n * f) return;
    u64 i = t / f, j = t % f;
    u64 key = halo_hash_extend(prefix, (u64)gids[i]);
    u64 bits = halo_mix64(key + j / 4);
    u32 lane = (u32)((bits >> (16 * (j % 4))) & 0xFFFFULL);
    u8 keep = lane >= threshold ? 1 : 0;
    // Multiplying by 0 or scale, as the CPU does, keeps the sign of dropped zeros identical.
    x[t] *= (float)keep * scale;
    if (mask) mask[t] = keep;
}

// grad *= mask * scale (gnn_core::dropout::dropout_backward).
extern "C" __global__ void dropout_backward(u64 len, const u8* __restrict__ mask, float scale,
                                            float* __restrict__ grad) {
    u64 t = halo_tid();
    if (t >= len) return;
    grad[t] *= (float)mask[t] * scale;
}

// out = gamma * (x - mean) * rstd + beta per row (gnn_core::LayerNorm::forward); saves xhat
// and rstd for backward. One thread per row.
extern "C" __global__ void layer_norm(u32 n, u32 d, float eps, const float* __restrict__ x,
                                      const float* __restrict__ gamma, const float* __restrict__ beta,
                                      float* __restrict__ out, float* __restrict__ xhat, float* __restrict__ rstd) {
    u64 r = halo_tid();
    if (r >= n) return;
    const float* row = x + r * d;
    float mean = 0.0f;
    for (u32 j = 0; j < d; ++j) mean += row[j];
    mean /= (float)d;
    float var = 0.0f;
    for (u32 j = 0; j < d; ++j) var += (row[j] - mean) * (row[j] - mean);
    var /= (float)d;
    float rs = 1.0f / sqrtf(var + eps);
    rstd[r] = rs;
    for (u32 j = 0; j < d; ++j) {
        float h = (row[j] - mean) * rs;
        xhat[r * d + j] = h;
        out[r * d + j] = gamma[j] * h + beta[j];
    }
}

// dx = rstd * (dy * gamma - mean(dy * gamma) - xhat * mean(dy * gamma * xhat)), per row.
extern "C" __global__ void layer_norm_backward(u32 n, u32 d, const float* __restrict__ dy,
                                               const float* __restrict__ xhat, const float* __restrict__ rstd,
                                               const float* __restrict__ gamma, float* __restrict__ dx) {
    u64 r = halo_tid();
    if (r >= n) return;
    float m1 = 0.0f, m2 = 0.0f;
    for (u32 j = 0; j < d; ++j) {
        float yg = dy[r * d + j] * gamma[j];
        m1 += yg;
        m2 += yg * xhat[r * d + j];
    }
    m1 /= (float)d;
    m2 /= (float)d;
    for (u32 j = 0; j < d; ++j) {
        dx[r * d + j] = rstd[r] * (dy[r * d + j] * gamma[j] - m1 - xhat[r * d + j] * m2);
    }
}
