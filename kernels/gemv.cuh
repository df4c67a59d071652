// Matrix-vector product for batch-1 decode, weights in bf16 or fp16, x and y in fp32:
//   y = W x (+ bias) (+ residual)
// with two optional fusions that remove whole kernels from the decode step:
//   - RMSNorm prologue: x is replaced by rmsnorm(x) * norm_weight, computed by every block itself
//     (inv = 1 / sqrt(mean(x^2) + eps) in fp32, then xn = norm_weight * (x * inv), the order of
//     kernels/rms_norm.cu and the CPU backend), so no separate norm kernel runs;
//   - SwiGLU epilogue: W is [2F, cols] (gate rows 0..F-1, then up rows F..2F-1) and
//     y[j] = silu(gate_j . x + bias_j) * (up_j . x + bias_{F+j}) (+ residual[j]) for j < F, one warp
//     computing both rows so x is read once for both.
// Decode is memory-bound (every weight byte is read once per token), so the kernel streams W with
// 16-byte evict-first loads, several in flight per lane. It is launched with programmatic dependent
// launch (kernels/pdl.cuh): its first weight loads are issued before it waits for the previous
// kernel, which hides the launch and the DRAM ramp behind the previous kernel's tail.
#pragma once

#include <cstddef>
#include <cstdint>

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

namespace cosmos::kernels {

// T: __nv_bfloat16 or __half (the weight type; bias and norm_weight have the same type).
template <typename T>
struct GemvArgsT {
  const T* w = nullptr;             // [rows, cols] row-major
  const float* x = nullptr;         // [cols] fp32
  const T* bias = nullptr;          // [rows] or null (with swiglu: added to gate and up before the activation)
  const float* residual = nullptr;  // [outputs] fp32 or null; may alias y (each element is read, then written)
  float* y = nullptr;               // [outputs] fp32: outputs = rows, or rows / 2 with swiglu
  float* y2 = nullptr;              // [outputs] fp32 or null: a second copy of y (the fused MLP's input,
                                    // kernels/mlp_decode.cuh, while y accumulates its output)
  int rows = 0;                     // rows of W (with swiglu: 2F, must be even)
  int cols = 0;
  const T* norm_weight = nullptr;   // [cols] or null: when set, x is RMS-normalized and scaled first
  float norm_eps = 1e-6f;
  bool swiglu = false;
  // Instead of x (then null): the decode attention's output as sums (kernels/decode_attention.cuh,
  // DecodeAttentionSums, one token): with buckets k = 0, 1 of x_sums [2][cols] and x_sum_div
  // [2][cols / sum_group], per group g of sum_group columns
  //   x = s0 / d0 when d1 == 0, else (s0 2^-120 + s1) / (d0 2^-120 + d1)
  // (the kernel stages s0, or s0 2^-120 + s1, and scales each 8-column dot product by 1 / divisor:
  // kernels/gemv_sums.cuh). Without norm and SwiGLU; sum_group a power of two >= 16 dividing cols,
  // at most 224 groups, cols % 8 == 0, x_sums 16-byte aligned, cols x 4 bytes within the staging
  // limit (16 KB). Always the staged, narrow shape.
  const float* x_sums = nullptr;     // [2][cols] fp32
  const float* x_sum_div = nullptr;  // [2][cols / sum_group] fp32
  int sum_group = 0;
};
using GemvArgs = GemvArgsT<__nv_bfloat16>;
using GemvArgsF16 = GemvArgsT<__half>;

// Enqueues on `stream` through launch_pdl (kernels/pdl.cuh): with programmatic dependent launch when
// pdl_enabled(). The kernel reads only W (and bias / norm_weight) before its pdl_wait(), and lets
// the next kernel launch right after it (so the next kernel must follow the pdl.cuh contract too,
// which every launch_pdl kernel does). Returns the bytes the kernel moves (W + x + norm_weight +
// bias + residual + y (+ y2)), for GB/s; 0, with nothing launched, for an empty problem, swiglu with odd
// rows, or x_sums the launch cannot take (see GemvArgsT::x_sums). The fast path needs cols % 8 == 0 and w, x and norm_weight 16-byte aligned; anything else
// takes a slower element-wise path with the same result. Instantiated for __nv_bfloat16 and __half.
template <typename T>
std::size_t launch_gemv(const GemvArgsT<T>& args, cudaStream_t stream);

// True when launch_gemv takes x as sums (GemvArgsT::x_sums) for a product of `cols` columns in
// groups of `sum_group` (the shape conditions listed there; pointers and alignment aside).
bool gemv_sums_supported(int cols, int sum_group);

// The name the CUDA backend used before fp16 support.
inline std::size_t launch_gemv_bf16(const GemvArgs& args, cudaStream_t stream) { return launch_gemv(args, stream); }

// Launch knobs, for the benchmark and tests only (process-wide, not synchronized with concurrent
// launches; -1 or 0 = the measured default, given in brackets):
//   wave:            [1] one wave of blocks (SMs x occupancy), x staged in shared memory once per
//                    block, outputs dealt round-robin; 0: one output per warp, x through L1, as
//                    many blocks as that takes;
//   blocks_per_sm:   [as many as fit] at most this many blocks per SM in a wave;
//   stage_max_bytes: [16 KB] stage x in shared memory up to this size, above it read x through L1;
//   stage_plain:     [1] stage x also without the fused norm (1) or read it through L1 (0);
//   early_trigger:   [1] let the next kernel launch right after this one's pdl_wait (1) or only
//                    once each block is done (0);
//   l2_next:         [when outputs <= 2 x warps] each warp prefetches the weight rows of its next
//                    output into L2 while it works on the current one;
//   early_epi:       [1] the epilogue inputs of each warp's first output read early: the bias before
//                    the PDL wait, the residual right after it (0: both in the epilogue);
//   narrow:          [products without SwiGLU of up to 2 x SMs x 35 outputs] blocks of 7 warps at 5
//                    per SM instead of 8 at 4 (1: every product without SwiGLU; 0: never).
struct GemvTuning {
  int wave = -1;
  int blocks_per_sm = 0;
  int stage_max_bytes = 0;
  int stage_plain = -1;
  int early_trigger = -1;
  int l2_next = -1;
  int early_epi = -1;
  int narrow = -1;
};
void set_gemv_tuning(const GemvTuning& t);

}  // namespace cosmos::kernels
