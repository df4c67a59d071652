// Per-row E4M3 quantization of bf16/fp16 activations (see quantize_act.cuh for the math).
//   x: [n, cols] bf16 | f16 | f32    q: [n, cols] E4M3    scale: [n] fp32
// Bytes moved: n * cols * (elem_size + 1) + 4 n; the 7B prefill's widest input (2048 x 18944) moves 116 MB.
//
// One block per row (a grid-stride loop over rows beyond the grid). Pass 1 reduces |x| to the row's
// maximum; pass 2 re-reads the row (from L1/L2: at most 37 KB) and converts. Fast path (cols % 8 == 0
// and 16-byte aligned rows): 8 elements per thread per step, one 16-byte load and one 8-byte store;
// otherwise one element per step. Both paths compute x * inv in fp32 and convert with the same
// saturating round-to-nearest-even, so the result does not depend on the path.
#include "kernels/quantize_act.cuh"

#include <cstdint>

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_fp8.h>

#include "kernels/pdl.cuh"

namespace cosmos::kernels {
namespace {

constexpr int kThreads = 256;
constexpr int kMaxBlocks = 65535;

__device__ __forceinline__ float to_f32(__nv_bfloat16 v) { return __bfloat162float(v); }
__device__ __forceinline__ float to_f32(__half v) { return __half2float(v); }
__device__ __forceinline__ float to_f32(float v) { return v; }

// Eight consecutive elements at p (16-byte aligned) as fp32 (exact).
template <typename T>
__device__ __forceinline__ void load8(const T* p, float (&v)[8]) {
  const uint4 u = *reinterpret_cast<const uint4*>(p);
  const T* e = reinterpret_cast<const T*>(&u);
#pragma unroll
  for (int k = 0; k < 8; ++k) v[k] = to_f32(e[k]);
}
__device__ __forceinline__ void load8(const float* p, float (&v)[8]) {
  const float4 a = *reinterpret_cast<const float4*>(p), b = *reinterpret_cast<const float4*>(p + 4);
  v[0] = a.x, v[1] = a.y, v[2] = a.z, v[3] = a.w, v[4] = b.x, v[5] = b.y, v[6] = b.z, v[7] = b.w;
}

__device__ __forceinline__ std::uint16_t e4m3x2(float a, float b) {
  return static_cast<std::uint16_t>(__nv_cvt_float2_to_fp8x2(make_float2(a, b), __NV_SATFINITE, __NV_E4M3));
}

// Maximum over the block; every thread gets the result.
__device__ float block_max(float v) {
  __shared__ float part[kThreads / 32];
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
  if ((threadIdx.x & 31) == 0) part[threadIdx.x >> 5] = v;
  __syncthreads();
  v = part[0];
#pragma unroll
  for (int w = 1; w < kThreads / 32; ++w) v = fmaxf(v, part[w]);
  __syncthreads();  // part is reused by the next row
  return v;
}

template <typename T, bool kVec>
__global__ void __launch_bounds__(kThreads)
    quantize_rows_fp8_kernel(const T* __restrict__ x, int n, int cols, std::uint8_t* __restrict__ q,
                             float* __restrict__ scale) {
  pdl_wait();
  pdl_launch_dependents();
  for (int r = blockIdx.x; r < n; r += gridDim.x) {
    const T* row = x + static_cast<std::size_t>(r) * cols;
    std::uint8_t* qrow = q + static_cast<std::size_t>(r) * cols;
    float amax = 0.0f;
    if constexpr (kVec) {
      for (int c = threadIdx.x * 8; c < cols; c += kThreads * 8) {
        float v[8];
        load8(row + c, v);
#pragma unroll
        for (int k = 0; k < 8; ++k) amax = fmaxf(amax, fabsf(v[k]));
      }
    } else {
      for (int c = threadIdx.x; c < cols; c += kThreads) amax = fmaxf(amax, fabsf(to_f32(row[c])));
    }
    amax = block_max(amax);
    // fmaxf drops NaN; an infinite element gives inv = 0, so the row quantizes to zeros and its
    // scale is infinite: the product is NaN, as in the unquantized GEMM.
    const float inv = amax > 0.0f ? kE4m3Max / amax : 1.0f;
    if (threadIdx.x == 0) scale[r] = amax > 0.0f ? amax / kE4m3Max : 1.0f;
    if constexpr (kVec) {
      for (int c = threadIdx.x * 8; c < cols; c += kThreads * 8) {
        float v[8];
        load8(row + c, v);
        uint2 out;
        out.x = e4m3x2(v[0] * inv, v[1] * inv) | (static_cast<std::uint32_t>(e4m3x2(v[2] * inv, v[3] * inv)) << 16);
        out.y = e4m3x2(v[4] * inv, v[5] * inv) | (static_cast<std::uint32_t>(e4m3x2(v[6] * inv, v[7] * inv)) << 16);
        *reinterpret_cast<uint2*>(qrow + c) = out;
      }
    } else {
      for (int c = threadIdx.x; c < cols; c += kThreads)
        qrow[c] = static_cast<std::uint8_t>(
            __nv_cvt_float_to_fp8(to_f32(row[c]) * inv, __NV_SATFINITE, __NV_E4M3));
    }
  }
}

template <typename T>
void launch_as(const T* x, int n, int cols, std::uint8_t* q, float* scale, cudaStream_t stream) {
  const dim3 grid(static_cast<unsigned>(n < kMaxBlocks ? n : kMaxBlocks));
  const bool vec = cols % 8 == 0 && reinterpret_cast<std::uintptr_t>(x) % 16 == 0 &&
                   reinterpret_cast<std::uintptr_t>(q) % 8 == 0;
  if (vec)
    launch_pdl(quantize_rows_fp8_kernel<T, true>, grid, dim3(kThreads), 0, stream, x, n, cols, q, scale);
  else
    launch_pdl(quantize_rows_fp8_kernel<T, false>, grid, dim3(kThreads), 0, stream, x, n, cols, q, scale);
}

}  // namespace

std::size_t launch_quantize_rows_fp8(const void* x, ElemType type, int n, int cols, std::uint8_t* q, float* scale,
                                     cudaStream_t stream) {
  if (n <= 0 || cols <= 0) return 0;
  switch (type) {
    case ElemType::f32: launch_as(static_cast<const float*>(x), n, cols, q, scale, stream); break;
    case ElemType::bf16: launch_as(static_cast<const __nv_bfloat16*>(x), n, cols, q, scale, stream); break;
    case ElemType::f16: launch_as(static_cast<const __half*>(x), n, cols, q, scale, stream); break;
  }
  return static_cast<std::size_t>(n) * cols * (elem_size(type) + 1) + static_cast<std::size_t>(n) * 4;
}

}  // namespace cosmos::kernels
