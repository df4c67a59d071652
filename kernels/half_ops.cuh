// Two packed 16-bit weights to floats, and their dot products, for the decode kernels that read bf16 or fp16 weights
// (kernels/gemv.cu, kernels/mlp_decode.cu). Internal to the kernels library (not an API).
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>

namespace cosmos::kernels::half_ops {

struct Bf16Ops {
  using T = __nv_bfloat16;
  // Two packed bf16 (low half first) to two floats: a bf16 is the top half of a float.
  __device__ static float2 pair(unsigned u) {
    return make_float2(__uint_as_float(u << 16), __uint_as_float(u & 0xffff0000u));
  }
  __device__ static float one(unsigned short u) { return __uint_as_float(static_cast<unsigned>(u) << 16); }
};
struct F16Ops {
  using T = __half;
  __device__ static float2 pair(unsigned u) {
    return make_float2(__half2float(__ushort_as_half(static_cast<unsigned short>(u & 0xffffu))),
                       __half2float(__ushort_as_half(static_cast<unsigned short>(u >> 16))));
  }
  __device__ static float one(unsigned short u) { return __half2float(__ushort_as_half(u)); }
};
template <typename T>
struct OpsOf;
template <>
struct OpsOf<__nv_bfloat16> {
  using type = Bf16Ops;
};
template <>
struct OpsOf<__half> {
  using type = F16Ops;
};

// The dot product of one 16-byte vector of 8 weights with its 8 x values (a: columns 0-3, b: 4-7),
// in two chains of 4 fused multiply-adds.
template <typename Ops>
__device__ __forceinline__ float dot8(const uint4& w, const float4& a, const float4& b) {
  const float2 w0 = Ops::pair(w.x), w1 = Ops::pair(w.y), w2 = Ops::pair(w.z), w3 = Ops::pair(w.w);
  float s0 = w0.x * a.x;
  s0 = fmaf(w0.y, a.y, s0);
  s0 = fmaf(w1.x, a.z, s0);
  s0 = fmaf(w1.y, a.w, s0);
  float s1 = w2.x * b.x;
  s1 = fmaf(w2.y, b.y, s1);
  s1 = fmaf(w3.x, b.z, s1);
  s1 = fmaf(w3.y, b.w, s1);
  return s0 + s1;
}

// Float4s per half of a staged fp32 vector of `vecs` 8-float groups, padded so that staging writes
// (thread i writes float4 i to half i & 1, slot i >> 1; 8 threads per 128-byte wavefront) hit 8
// different 4-bank groups: with ps % 8 == 4 the second half starts 16 banks after the first.
__host__ __device__ constexpr int staged_half(int vecs) { return vecs + ((4 - vecs % 8) + 8) % 8; }

}  // namespace cosmos::kernels::half_ops
