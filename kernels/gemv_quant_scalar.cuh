// kernels/gemv_quant.cu's element-wise kernel: any shape and alignment (the vector kernels need
// full-width aligned rows). Included by gemv_quant.cu only, inside its anonymous namespace, after
// QParams, the formats, kWarps / kThreads and the gemv_common helpers are in scope.
#pragma once

// Lane 0's epilogue for an output of the element-wise kernel (a0, a1: gate and up with swiglu).
template <bool kSwiglu>
__device__ __forceinline__ void finish(const QParams& p, int r0, float a0, float a1, bool has1) {
  if constexpr (kSwiglu) {
    float gate = a0, up = a1;
    if (p.bias) {
      gate += bf16f(p.bias[r0]);
      up += bf16f(p.bias[r0 + p.half]);
    }
    float v = gate / (1.0f + expf(-gate)) * up;
    if (p.residual) v += __ldcg(p.residual + r0);
    if (p.y16) p.y16[r0] = __bfloat16_as_ushort(__float2bfloat16_rn(v));
    else p.y[r0] = v;
  } else {
    float v0 = a0, v1 = a1;
    if (p.bias) {
      v0 += bf16f(p.bias[r0]);
      if (has1) v1 += bf16f(p.bias[r0 + 1]);
    }
    if (p.residual) {
      v0 += __ldcg(p.residual + r0);
      if (has1) v1 += __ldcg(p.residual + r0 + 1);
    }
    p.y[r0] = v0;
    if (has1) p.y[r0 + 1] = v1;
  }
}

// Any shape and alignment: one output per warp, one element per lane per step, each weight
// dequantized on its own (int8 / fp8: q, the row scale applied to the sum; int4: q s + m).
template <typename F, bool kNorm, bool kSwiglu>
__global__ void __launch_bounds__(kThreads) gemv_q_scalar(const QParams p) {
  constexpr int kR = kSwiglu ? 2 : 1;
  const int lane = threadIdx.x & 31;
  const int warp = threadIdx.x >> 5;
  pdl_wait();
  pdl_launch_dependents();
  float inv = 1.0f;
  if constexpr (kNorm) inv = gemv_common::block_inv_rms_of(p.x, p.cols, p.eps);
  for (int o = blockIdx.x + gridDim.x * warp; o < p.outs; o += gridDim.x * kWarps) {
    float acc[kR];
#pragma unroll
    for (int r = 0; r < kR; ++r) acc[r] = 0.0f;
#pragma unroll 4
    for (int c = lane; c < p.cols; c += 32) {
      float xv = p.x[c];
      if constexpr (kNorm) xv = bf16f(p.g[c]) * (xv * inv);
#pragma unroll
      for (int r = 0; r < kR; ++r) acc[r] = fmaf(F::elem(p, o + r * p.half, c), xv, acc[r]);
    }
#pragma unroll
    for (int r = 0; r < kR; ++r) acc[r] = warp_sum(acc[r]);
    if (lane == 0) {
      if constexpr (!F::kGroups) {
#pragma unroll
        for (int r = 0; r < kR; ++r) acc[r] *= p.row_scale[o + r * p.half];
      }
      finish<kSwiglu>(p, o, acc[0], acc[kR - 1], false);
    }
  }
}
