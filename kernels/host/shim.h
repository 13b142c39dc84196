// Host shims for running a kernel file's per-thread kernels on the CPU, thread by thread, in
// `crates/gnn-core/tests/wire_kernels_on_host.rs` (CI has no GPU). Each CUDA qualifier becomes
// nothing and each round-to-nearest intrinsic the plain IEEE operation it names (compile with
// -ffp-contract=off, as the PTX is built with --fmad=false). Kernels that cooperate through
// shared memory and __syncthreads cannot run this way; only per-thread kernels are called.
#pragma once
#include <cmath>
#include <cstring>

#define __global__
#define __device__
#define __forceinline__ inline
#define __restrict__
#define __shared__ static

struct HaloDim {
    unsigned x = 0, y = 0, z = 0;
};
static HaloDim threadIdx, blockIdx, blockDim, gridDim;
static inline void __syncthreads() {}

static inline float __int_as_float(int i) { float f; std::memcpy(&f, &i, 4); return f; }
static inline float __uint_as_float(unsigned i) { float f; std::memcpy(&f, &i, 4); return f; }
static inline unsigned __float_as_uint(float f) { unsigned i; std::memcpy(&i, &f, 4); return i; }
static inline float __fadd_rn(float a, float b) { return a + b; }
static inline float __fsub_rn(float a, float b) { return a - b; }
static inline float __fmul_rn(float a, float b) { return a * b; }
static inline float __fdiv_rn(float a, float b) { return a / b; }
static inline double __dadd_rn(double a, double b) { return a + b; }
static inline double __dsub_rn(double a, double b) { return a - b; }
static inline double __dmul_rn(double a, double b) { return a * b; }
static inline double __ddiv_rn(double a, double b) { return a / b; }
using std::isfinite;
using std::isnan;

// Runs `kernel` as a 1-D grid of `threads` threads in blocks of 256, one thread at a time.
template <class Kernel> static void halo_launch(unsigned long long threads, Kernel kernel) {
    blockDim.x = 256;
    gridDim.x = (unsigned)((threads + 255) / 256);
    for (unsigned long long t = 0; t < threads; ++t) {
        blockIdx.x = (unsigned)(t / 256);
        threadIdx.x = (unsigned)(t % 256);
        kernel();
    }
}
