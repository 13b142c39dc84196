// The steps of a device training epoch that the layer kernels do not cover: the loss over the
// labelled rows (softmax cross-entropy for classes, sigmoid binary cross-entropy for
// multi-label targets; loss, gradient and hits per row) and Adam.
#include "halo_common.cuh"

// One thread per labelled row i (logits row rows[i], class labels[i]): writes the row's
// loss to loss[i], whether its arg-max (first on ties) is the label to hit[i], and
// (softmax - onehot) * grad_scale into dlogits (whose other rows the caller zeroed), as
// gnn_core::loss::softmax_cross_entropy and count_correct. A null dlogits (evaluation) writes
// no gradient.
extern "C" __global__ void softmax_xent(u32 count, u32 c, const u32* __restrict__ rows,
                                        const u32* __restrict__ labels, const float* __restrict__ logits,
                                        float grad_scale, float* __restrict__ dlogits, float* __restrict__ loss,
                                        float* __restrict__ hit) {
    u64 i = halo_tid();
    if (i >= count) return;
    const float* x = logits + (u64)rows[i] * c;
    float* g = dlogits ? dlogits + (u64)rows[i] * c : 0;
    u32 label = labels[i];
    float mx = x[0];
    u32 best = 0;
    for (u32 j = 1; j < c; ++j) {
        if (x[j] > mx) {
            mx = x[j];
            best = j;
        }
    }
    double sum = 0.0;
    for (u32 j = 0; j < c; ++j) sum += exp((double)(x[j] - mx));
    loss[i] = (float)(log(sum) - (double)(x[label] - mx));
    hit[i] = best == label ? 1.0f : 0.0f;
    if (!dlogits) return;
    for (u32 j = 0; j < c; ++j) {
        float p = (float)(exp((double)(x[j] - mx)) / sum);
        g[j] = (p - (j == label ? 1.0f : 0.0f)) * grad_scale;
    }
}

// One thread per labelled row i (logits row rows[i], its c targets at targets + i * c): writes
// the row's binary cross-entropy with logits summed over its columns to loss[i], how many of
// its columns the prediction (logit > 0) gets right (target > 0.5) to hit[i], and
// (sigmoid - target) * grad_scale into dlogits (whose other rows the caller zeroed), as
// gnn_core::loss::bce_with_logits and multilabel_counts. A null dlogits writes no gradient.
extern "C" __global__ void sigmoid_bce(u32 count, u32 c, const u32* __restrict__ rows,
                                       const float* __restrict__ targets, const float* __restrict__ logits,
                                       float grad_scale, float* __restrict__ dlogits, float* __restrict__ loss,
                                       float* __restrict__ hit) {
    u64 i = halo_tid();
    if (i >= count) return;
    const float* x = logits + (u64)rows[i] * c;
    const float* t = targets + i * c;
    float* g = dlogits ? dlogits + (u64)rows[i] * c : 0;
    double sum = 0.0;
    u32 right = 0;
    for (u32 j = 0; j < c; ++j) {
        double xj = (double)x[j], tj = (double)t[j];
        // Stable form: max(x, 0) - x t + ln(1 + e^-|x|).
        sum += fmax(xj, 0.0) - xj * tj + log1p(exp(-fabs(xj)));
        right += (x[j] > 0.0f) == (t[j] > 0.5f) ? 1u : 0u;
        if (g) g[j] = (float)(1.0 / (1.0 + exp(-xj)) - tj) * grad_scale;
    }
    loss[i] = (float)sum;
    hit[i] = (float)right;
}

// One SGD step over len values, as gnn_core::optim::Sgd::step (torch.optim.SGD, dampening 0):
// the L2 weight added to the gradient; with momentum the buffer starts at the first gradient
// (first != 0) and then follows momentum * buf + g; Nesterov (nesterov != 0) steps along
// g + momentum * buf. Without momentum buf is left as it is.
extern "C" __global__ void sgd_step(u64 len, float lr, float momentum, u32 nesterov, float weight_decay, u32 first,
                                    float* __restrict__ p, const float* __restrict__ grad, float* __restrict__ buf) {
    u64 t = halo_tid();
    if (t >= len) return;
    float g = grad[t] + weight_decay * p[t];
    float d = g;
    if (momentum != 0.0f) {
        float b = first ? g : momentum * buf[t] + g;
        buf[t] = b;
        d = nesterov ? g + momentum * b : b;
    }
    p[t] -= lr * d;
}

// One Adam / AdamW step over len values, as gnn_core::optim::Adam::step: coupled is the L2
// weight added to the gradient, shrink the decoupled decay factor, step_size lr / (1 - b1^t),
// bc2_sqrt sqrt(1 - b2^t).
extern "C" __global__ void adam_step(u64 len, float beta1, float beta2, float eps, float coupled, float shrink,
                                     float step_size, float bc2_sqrt, float* __restrict__ p,
                                     const float* __restrict__ grad, float* __restrict__ m, float* __restrict__ v) {
    u64 t = halo_tid();
    if (t >= len) return;
    float g = grad[t] + coupled * p[t];
    float pv = p[t] * shrink;
    float mv = m[t] + (1.0f - beta1) * (g - m[t]);
    float vv = beta2 * v[t] + (1.0f - beta2) * g * g;
    m[t] = mv;
    v[t] = vv;
    p[t] = pv - step_size * mv / (sqrtf(vv) / bc2_sqrt + eps);
}
