// The decode o product's x from the decode attention's sums (GemvArgsT::x_sums,
// kernels/decode_attention.cuh's DecodeAttentionSums): per group of `group` columns,
//   x = s0 / d0 when d1 == 0 (the usual case), else (s0 2^-120 + s1) / (d0 2^-120 + d1),
// with s0, s1 the group's sums in buckets 0 and 1 and d0, d1 its divisors. The product is linear
// in x, so the division moves out of x: the staged x holds s0 (or s0 2^-120 + s1), and each
// 8-column dot product is scaled by its group's 1 / divisor (group = 2^k >= 16: a whole number of
// 8-column vectors). Internal to kernels/gemv.cu (the staged layout is its: float4 i at
// xs[(i & 1) * ps + i / 2]).
#pragma once

#include <cuda_runtime.h>

#include "kernels/decode_attention.cuh"

namespace cosmos::kernels::gemv_sums {

static_assert(kSumsBucket == 120, "kDown is 2^-kSumsBucket");
constexpr float kDown = 1.0f / (1ull << 60) / (1ull << 60);  // 2^-120: bucket 0 in bucket 1's units
constexpr int kMaxGroups = 224;                              // one thread per group reads its divisors

// Stages bucket 0 of x ([2][cols] sums at x, [2][cols / group] divisors at xl) into xs, kB float4s
// per thread per batch (one round trip with the divisors, which thread g < groups reads), and
// fills inv[g] = 1 / divisor. One barrier, as for a plain x; only when some group has a share in
// bucket 1 (__syncthreads_or) a second pass adds bucket 1 into those groups, and a barrier.
template <int kThreads>
__device__ __forceinline__ void stage(float4* xs, int ps, float* inv, const float* x, const float* xl, int cols,
                                      int group) {
  static_assert(kThreads >= kMaxGroups, "a thread per group");
  __shared__ unsigned char s_mixed[kMaxGroups];
  constexpr int kB = 4;
  const int n4 = cols >> 2, g4 = group >> 2, groups = cols / group;
  const float4* x0 = reinterpret_cast<const float4*>(x);
  float d0 = 0.0f, d1 = 0.0f;
  const bool divisor = static_cast<int>(threadIdx.x) < groups;
  if (divisor) {
    d0 = __ldcg(xl + threadIdx.x);
    d1 = __ldcg(xl + groups + threadIdx.x);
  }
  for (int i0 = threadIdx.x; i0 < n4; i0 += kB * kThreads) {
    float4 v[kB];
#pragma unroll
    for (int b = 0; b < kB; ++b) {
      const int i = i0 + b * kThreads;
      if (i < n4) v[b] = __ldcg(x0 + i);
    }
#pragma unroll
    for (int b = 0; b < kB; ++b) {
      const int i = i0 + b * kThreads;
      if (i < n4) xs[(i & 1) * ps + (i >> 1)] = v[b];
    }
  }
  const bool mixed = divisor && d1 != 0.0f;
  if (divisor) {
    inv[threadIdx.x] = __frcp_rn(mixed ? fmaf(d0, kDown, d1) : d0);
    s_mixed[threadIdx.x] = mixed;
  }
  if (!__syncthreads_or(mixed)) return;
  const float4* x1 = x0 + n4;  // rare: bucket 1 into the groups that have a share there
  for (int i = threadIdx.x; i < n4; i += kThreads) {
    if (!s_mixed[i / g4]) continue;
    float4& a = xs[(i & 1) * ps + (i >> 1)];
    const float4 b = __ldcg(x1 + i);
    a = make_float4(fmaf(a.x, kDown, b.x), fmaf(a.y, kDown, b.y), fmaf(a.z, kDown, b.z), fmaf(a.w, kDown, b.w));
  }
  __syncthreads();
}

}  // namespace cosmos::kernels::gemv_sums
