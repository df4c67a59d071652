// The MLP block of one decode token in one kernel, bf16 or fp16 weights, fp32 activations:
//   y += W_down (silu(W_gate n) * (W_up n)),   n = rmsnorm(x) * norm_weight
// Split over the intermediate neurons instead of over the outputs: block b takes chunks of 8
// neurons (c = b, b + grid, ...); per chunk each warp computes one neuron's gate and up dot
// products, and then every thread adds those 8 neurons' down weights, times their activations, into
// its own fp32 outputs. The down product therefore never waits for the whole SwiGLU vector, which
// removes the layer's gate/up -> down grid-wide dependency (a kernel boundary and the down
// product's read of a 74 KB input; docs/PERFORMANCE.md, session 11). At the end each block adds its
// partial outputs into y with 16-byte atomic adds (sm_90+; one float at a time on older GPUs), so the
// order of those additions, and with it the last bits of y, can differ between runs.
//
// The down weights are read transposed: w_down_t is [F, H] row-major, row j holding neuron j's
// weight into every output (the column-major view of the model's [H, F] matrix; launch_transpose16
// in kernels/transpose.cuh makes it at load), so every read is a contiguous 16-byte vector.
#pragma once

#include <cstddef>

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

namespace cosmos::kernels {

// T: __nv_bfloat16 or __half.
template <typename T>
struct MlpDecodeArgsT {
  const T* w_gate_up = nullptr;    // [2F, H] row-major: gate rows 0..F-1, then up rows F..2F-1
  const T* w_down_t = nullptr;     // [F, H] row-major: the down projection, transposed
  const T* norm_weight = nullptr;  // [H]
  const float* x = nullptr;        // [H] fp32: the block's input (residual stream); must not alias y
  float* y = nullptr;              // [H] fp32: holds the residual (== x) on entry; the MLP is added into it
  int hidden = 0;                  // H
  int inter = 0;                   // F
  float norm_eps = 1e-6f;
};

// Whether launch_mlp_decode takes this shape: H % 8 == 0, H <= 4096, F % 8 == 0, both > 0.
bool mlp_decode_supported(int hidden, int inter);

// Enqueues the kernel through launch_pdl (kernels/pdl.cuh): before its pdl_wait() it reads only the
// weights. Needs every pointer 16-byte aligned. Returns the bytes it moves (weights, norm weight, x,
// y read and written by each block's atomics) for GB/s; 0, with nothing launched, for a shape that
// mlp_decode_supported() refuses. Instantiated for __nv_bfloat16 and __half.
template <typename T>
std::size_t launch_mlp_decode(const MlpDecodeArgsT<T>& args, cudaStream_t stream);

// Blocks the kernel runs with on the current device (one per SM): for tests and the benchmark.
int mlp_decode_blocks();

}  // namespace cosmos::kernels
