#include "kernels/gemv_bf16.cuh"

namespace cosmos::kernels {
namespace {

constexpr int kWarps = 8;   // warps per block, one row per warp at a time
constexpr int kUnroll = 4;  // 16-byte loads in flight per lane

__device__ __forceinline__ float dot8(const uint4& w, const float4& a, const float4& b) {
  const __nv_bfloat162* h = reinterpret_cast<const __nv_bfloat162*>(&w);
  const float2 w0 = __bfloat1622float2(h[0]), w1 = __bfloat1622float2(h[1]);
  const float2 w2 = __bfloat1622float2(h[2]), w3 = __bfloat1622float2(h[3]);
  return w0.x * a.x + w0.y * a.y + w1.x * a.z + w1.y * a.w + w2.x * b.x + w2.y * b.y + w3.x * b.z + w3.y * b.w;
}

// Vector path: cols % 8 == 0. Each lane reads 8 weights (16 bytes) per step, kUnroll steps at once.
__global__ void __launch_bounds__(kWarps * 32) gemv_bf16_vec(GemvArgs a) {
  const int lane = threadIdx.x & 31;
  const int warp = threadIdx.x >> 5;
  const int vecs = a.cols / 8;  // uint4 per row
  const float4* x4 = reinterpret_cast<const float4*>(a.x);
  for (int row = blockIdx.x * kWarps + warp; row < a.rows; row += gridDim.x * kWarps) {
    const uint4* wrow = reinterpret_cast<const uint4*>(a.w + static_cast<std::size_t>(row) * a.cols);
    float acc = 0.0f;
    int v = lane;
    for (; v + 32 * (kUnroll - 1) < vecs; v += 32 * kUnroll) {
      uint4 w[kUnroll];
#pragma unroll
      for (int u = 0; u < kUnroll; ++u) w[u] = __ldcs(wrow + v + 32 * u);  // streamed once: evict-first
#pragma unroll
      for (int u = 0; u < kUnroll; ++u) {
        const int e = v + 32 * u;
        acc += dot8(w[u], __ldg(x4 + 2 * e), __ldg(x4 + 2 * e + 1));
      }
    }
    for (; v < vecs; v += 32) acc += dot8(__ldcs(wrow + v), __ldg(x4 + 2 * v), __ldg(x4 + 2 * v + 1));
#pragma unroll
    for (int off = 16; off > 0; off >>= 1) acc += __shfl_xor_sync(0xffffffffu, acc, off);
    if (lane == 0) {
      if (a.bias) acc += __bfloat162float(a.bias[row]);
      if (a.residual) acc += a.residual[row];
      a.y[row] = acc;
    }
  }
}

// Any cols (odd sizes, unaligned rows): one element per lane per step.
__global__ void __launch_bounds__(kWarps * 32) gemv_bf16_scalar(GemvArgs a) {
  const int lane = threadIdx.x & 31;
  const int warp = threadIdx.x >> 5;
  for (int row = blockIdx.x * kWarps + warp; row < a.rows; row += gridDim.x * kWarps) {
    const __nv_bfloat16* wrow = a.w + static_cast<std::size_t>(row) * a.cols;
    float acc = 0.0f;
    for (int c = lane; c < a.cols; c += 32) acc += __bfloat162float(wrow[c]) * a.x[c];
#pragma unroll
    for (int off = 16; off > 0; off >>= 1) acc += __shfl_xor_sync(0xffffffffu, acc, off);
    if (lane == 0) {
      if (a.bias) acc += __bfloat162float(a.bias[row]);
      if (a.residual) acc += a.residual[row];
      a.y[row] = acc;
    }
  }
}

}  // namespace

std::size_t launch_gemv_bf16(const GemvArgs& a, cudaStream_t stream) {
  if (a.rows <= 0 || a.cols <= 0) return 0;
  const int blocks = (a.rows + kWarps - 1) / kWarps;
  const bool aligned = a.cols % 8 == 0 && reinterpret_cast<std::uintptr_t>(a.w) % 16 == 0 &&
                       reinterpret_cast<std::uintptr_t>(a.x) % 16 == 0;
  if (aligned) {
    gemv_bf16_vec<<<blocks, kWarps * 32, 0, stream>>>(a);
  } else {
    gemv_bf16_scalar<<<blocks, kWarps * 32, 0, stream>>>(a);
  }
  const std::size_t r = static_cast<std::size_t>(a.rows), c = static_cast<std::size_t>(a.cols);
  return r * c * 2 + c * 4 + r * 4 + (a.bias ? r * 2 : 0) + (a.residual ? r * 4 : 0);
}

}  // namespace cosmos::kernels
