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

// db[j] += sum_i grad[i, j]: one thread per column, rows in order (a reduction).
extern "C" __global__ void column_sum(u32 n, u32 f, const float* __restrict__ grad, float* __restrict__ db) {
    u64 j = halo_tid();
    if (j >= f) return;
    float acc = 0.0f;
    for (u64 i = 0; i < n; ++i) acc += grad[i * f + j];
    db[j] += acc;
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

// dgamma[j] += sum_i dy[i, j] * xhat[i, j]; dbeta[j] += sum_i dy[i, j]; one thread per column.
extern "C" __global__ void layer_norm_param_grad(u32 n, u32 d, const float* __restrict__ dy,
                                                 const float* __restrict__ xhat, float* __restrict__ dgamma,
                                                 float* __restrict__ dbeta) {
    u64 j = halo_tid();
    if (j >= d) return;
    float g = 0.0f, b = 0.0f;
    for (u64 i = 0; i < n; ++i) {
        g += dy[i * d + j] * xhat[i * d + j];
        b += dy[i * d + j];
    }
    dgamma[j] += g;
    dbeta[j] += b;
}
