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
