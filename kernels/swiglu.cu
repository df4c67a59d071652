// SwiGLU: out[t, c] = silu(gate) * up, computed in fp32 as g / (1 + expf(-g)) * u.
//   gu:  [n, 2 * ff] gu_type (f32, bf16 or f16): row t is gate[t, 0..ff) | up[t, 0..ff)
//   out: [n, ff] out_type (f32, bf16 or f16; fp16 saturates to +-65504 as store_elem does)
// Bytes moved: n * ff * (2 * elem_size(gu_type) + elem_size(out_type)); the 7B prefill (n = 2048,
// ff = 18944, bf16 -> bf16) moves 155 MB + 78 MB = 233 MB.
//
// Grid: x covers the columns of one row, y the tokens (a block-stride loop beyond 65535 tokens), so
// no thread divides by ff. Fast path (ff % 8 == 0, gu and out 16-byte aligned): each thread takes 8
// consecutive columns of one token, with 16-byte loads of gate and up (two each for fp32) and one
// 16-byte store (two for fp32 out). Anything else takes the scalar path, one column per thread;
// both paths evaluate the very same fp32 expression per element, so their results are identical.
#include "kernels/swiglu.cuh"

#include <algorithm>
#include <cstdint>

#include "kernels/pdl.cuh"

namespace cosmos::kernels {
namespace {

constexpr int kThreads = 256;     // scalar path: at most 256 threads a block, one column each
constexpr int kVecThreads = 128;  // vector path: 8 columns per thread (18944 / 8 / 128 = 18.5 blocks a row)
constexpr unsigned kMaxGridY = 65535;

// The element function of both paths (one expression, so one rounding sequence).
__device__ __forceinline__ float silu_mul(float g, float u) { return g / (1.0f + expf(-g)) * u; }

// Eight consecutive elements at p (16-byte aligned) as fp32; the conversions are exact.
__device__ __forceinline__ void load8(const float* p, float (&x)[8]) {
  const float4 a = *reinterpret_cast<const float4*>(p), b = *reinterpret_cast<const float4*>(p + 4);
  x[0] = a.x, x[1] = a.y, x[2] = a.z, x[3] = a.w, x[4] = b.x, x[5] = b.y, x[6] = b.z, x[7] = b.w;
}
__device__ __forceinline__ void load8(const __nv_bfloat16* p, float (&x)[8]) {
  const uint4 v = *reinterpret_cast<const uint4*>(p);
  const std::uint32_t w[4] = {v.x, v.y, v.z, v.w};
#pragma unroll
  for (int k = 0; k < 4; ++k) {
    x[2 * k] = __uint_as_float(w[k] << 16);  // bf16 -> fp32 is a shift
    x[2 * k + 1] = __uint_as_float(w[k] & 0xFFFF0000u);
  }
}
__device__ __forceinline__ void load8(const __half* p, float (&x)[8]) {
  const uint4 v = *reinterpret_cast<const uint4*>(p);
  const std::uint32_t w[4] = {v.x, v.y, v.z, v.w};
#pragma unroll
  for (int k = 0; k < 4; ++k) {
    x[2 * k] = __half2float(__ushort_as_half(static_cast<unsigned short>(w[k] & 0xFFFFu)));
    x[2 * k + 1] = __half2float(__ushort_as_half(static_cast<unsigned short>(w[k] >> 16)));
  }
}

// The 16 bits store_elem would write for v (same conversion, same fp16 saturation).
__device__ __forceinline__ std::uint32_t bits16(__nv_bfloat16*, float v) {
  return __bfloat16_as_ushort(__float2bfloat16(v));
}
__device__ __forceinline__ std::uint32_t bits16(__half*, float v) {
  return __half_as_ushort(__float2half(v != v ? v : fminf(fmaxf(v, -65504.0f), 65504.0f)));
}

// Stores eight values at p (16-byte aligned).
__device__ __forceinline__ void store8(float* p, const float (&y)[8]) {
  *reinterpret_cast<float4*>(p) = make_float4(y[0], y[1], y[2], y[3]);
  *reinterpret_cast<float4*>(p + 4) = make_float4(y[4], y[5], y[6], y[7]);
}
template <typename Out>
__device__ __forceinline__ void store8(Out* p, const float (&y)[8]) {
  std::uint32_t w[4];
#pragma unroll
  for (int k = 0; k < 4; ++k) w[k] = bits16(p, y[2 * k]) | (bits16(p, y[2 * k + 1]) << 16);
  *reinterpret_cast<uint4*>(p) = make_uint4(w[0], w[1], w[2], w[3]);
}

// Vector path: thread (blockIdx.x * blockDim.x + threadIdx.x) takes columns [8 v, 8 v + 8) of token
// t = blockIdx.y (+ k gridDim.y). Needs ff % 8 == 0 and 16-byte aligned gu and out.
template <typename In, typename Out>
__global__ void __launch_bounds__(kVecThreads) swiglu_vec8_kernel(const In* __restrict__ gu, Out* __restrict__ out,
                                                                  int n, int ff) {
  pdl_wait();
  pdl_launch_dependents();
  const int c = 8 * (blockIdx.x * kVecThreads + threadIdx.x);
  if (c >= ff) return;
  for (int t = blockIdx.y; t < n; t += gridDim.y) {
    const In* gate = gu + static_cast<std::size_t>(t) * 2 * ff + c;
    float g[8], u[8], y[8];
    load8(gate, g);
    load8(gate + ff, u);
#pragma unroll
    for (int k = 0; k < 8; ++k) y[k] = silu_mul(g[k], u[k]);
    store8(out + static_cast<std::size_t>(t) * ff + c, y);
  }
}

// Scalar path (any ff, any alignment): one column per thread, same grid layout.
template <typename In, typename Out>
__global__ void __launch_bounds__(kThreads) swiglu_kernel(const In* __restrict__ gu, Out* __restrict__ out, int n,
                                                          int ff) {
  pdl_wait();
  pdl_launch_dependents();
  const int c = blockIdx.x * blockDim.x + threadIdx.x;
  if (c >= ff) return;
  for (int t = blockIdx.y; t < n; t += gridDim.y) {
    const In* gate = gu + static_cast<std::size_t>(t) * 2 * ff;
    store_elem(out, static_cast<std::size_t>(t) * ff + c, silu_mul(load_elem(gate, c), load_elem(gate, ff + c)));
  }
}

template <typename In, typename Out>
void launch_typed(const In* gu, Out* out, int n, int ff, cudaStream_t stream) {
  const std::uintptr_t addr = reinterpret_cast<std::uintptr_t>(gu) | reinterpret_cast<std::uintptr_t>(out);
  const bool vec = ff % 8 == 0 && addr % 16 == 0;
  const unsigned rows = std::min(static_cast<unsigned>(n), kMaxGridY);
  if (vec) {
    const unsigned cols = static_cast<unsigned>((ff / 8 + kVecThreads - 1) / kVecThreads);
    launch_pdl(swiglu_vec8_kernel<In, Out>, dim3(cols, rows), kVecThreads, 0, stream, gu, out, n, ff);
  } else {
    const int threads = std::min(kThreads, (ff + 31) / 32 * 32);  // narrow rows: fewer idle threads
    const unsigned cols = static_cast<unsigned>((ff + threads - 1) / threads);
    launch_pdl(swiglu_kernel<In, Out>, dim3(cols, rows), threads, 0, stream, gu, out, n, ff);
  }
}

template <typename In>
void launch_in(const In* gu, void* out, ElemType out_type, int n, int ff, cudaStream_t stream) {
  switch (out_type) {
    case ElemType::f32: launch_typed(gu, static_cast<float*>(out), n, ff, stream); break;
    case ElemType::bf16: launch_typed(gu, static_cast<__nv_bfloat16*>(out), n, ff, stream); break;
    case ElemType::f16: launch_typed(gu, static_cast<__half*>(out), n, ff, stream); break;
  }
}

}  // namespace

std::size_t launch_swiglu(const void* gu, ElemType gu_type, void* out, ElemType out_type, int n, int ff,
                          cudaStream_t stream) {
  if (n <= 0 || ff <= 0) return 0;
  switch (gu_type) {
    case ElemType::f32: launch_in(static_cast<const float*>(gu), out, out_type, n, ff, stream); break;
    case ElemType::bf16: launch_in(static_cast<const __nv_bfloat16*>(gu), out, out_type, n, ff, stream); break;
    case ElemType::f16: launch_in(static_cast<const __half*>(gu), out, out_type, n, ff, stream); break;
  }
  const std::size_t total = static_cast<std::size_t>(n) * ff;
  return total * (2 * elem_size(gu_type) + elem_size(out_type));
}

}  // namespace cosmos::kernels
