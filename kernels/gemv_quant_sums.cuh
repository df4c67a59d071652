// The int8 / fp8 o product taking the decode attention's output as sums (QGemvArgs::x_div, the
// format of kernels/decode_attention.cuh's DecodeAttentionSums): x = s0 / d0 per head of 128 columns
// (one "sum group"), or (s0 2^-120 + s1) / (d0 2^-120 + d1) where bucket 1 has a share (d1 != 0).
// Included by kernels/gemv_quant_vec.cuh, so inside gemv_quant.cu's anonymous namespace with its
// helpers (warp_sum) in scope; used by the kSums instantiations (all of it) and by int4's wide o
// kernel (load_sum_divisors, divide4: it divides its x in registers, in its staging batch).
//
// Shape of the work, for a block of kNT threads staging x as kP planes of float4s (stage_at(f)):
//   1. before the staging loop, warp 0 copies the divisors [2][groups] into shared memory
//      (load_sum_divisors): two coalesced requests per block. When every warp of int4's wide o
//      kernel read its own groups' d0, d1 (broadcast loads, 8 per warp), its 224 blocks sent
//      ~14,000 requests to the same two L2 lines, and o's staging loop took 4.3-4.5 us at 4,096
//      tokens of context against 2.0 with x read and no divisors (kernel timestamps,
//      docs/PERFORMANCE.md session 44); with the copy 2.5 us, int4 decode @4096 628.6 -> 652.4
//      tok/s, @8192 607.6 -> 626.7 (engine A/B, means of 3 rounds);
//   2. the loop stages s0 as it is (the divisors are not there yet);
//   3. after the block barrier that ends the staging, divide_staged() rescales each thread's own
//      staged float4s by 1 / divisor (bucket 1 read and folded in first where d1 != 0), applies the
//      format's pre-scale (I8: 2^80 .. 2^96, which s0 itself, up to 2^72 |v|, would overflow) and,
//      with kOffset, sums each group's x (a warp's 32 float4s of one pass are one group; sums of s0
//      itself could overflow fp32: bucket 0 may hold values near 2^120 where bucket 1 has a share);
//      one more barrier publishes them.
// Bytes: bucket 0 of x (4 cols) and the divisors (8 cols / 128) per block, bucket 1 only for groups
// that have a share in it.
#pragma once

namespace gemv_quant_sums {

constexpr int kMaxGroups = 64;  // sum groups (heads of 128 columns) per row at most: 8,192 columns
constexpr float kDown = 0x1p-120f;  // 2^-kSumsBucket (kernels/decode_attention.cuh)

// Warp 0 (the caller checks) copies the 2 x groups divisors into div.
__device__ __forceinline__ void load_sum_divisors(const float* xdiv, int groups, int lane, float* div) {
  for (int i = lane; i < 2 * groups; i += 32) div[i] = __ldcg(xdiv + i);
}

__device__ __forceinline__ float sum4(float4 v) { return ((v.x + v.y) + v.z) + v.w; }

// One float4 of x in a sum group with divisors d0, d1: s0 / d0 when d1 == 0 (bucket 0 only, the
// usual case), else (s0 2^-120 + s1) / (d0 2^-120 + d1), bucket 1's float4 read from s1 then (a
// warp-uniform branch: a warp's float4s are one group). The reciprocal is MUFU.RCP's (__fdividef:
// within 2 ulp, exact for powers of two), not the IEEE one (__frcp_rn, a multi-instruction sequence
// with a slow-path branch in the staging's chain): int4 decode +0.9% at 4,096 tokens of context,
// +1.0% at 8,192 (docs/PERFORMANCE.md, session 42).
__device__ __forceinline__ float4 divide4(float4 x, float d, float d1, const float4* s1) {
  if (d1 != 0.0f) {
    const float4 b = __ldcg(s1);
    x = make_float4(fmaf(x.x, kDown, b.x), fmaf(x.y, kDown, b.y), fmaf(x.z, kDown, b.z), fmaf(x.w, kDown, b.w));
    d = fmaf(d, kDown, d1);
  }
  const float inv = __fdividef(1.0f, d);
  return make_float4(x.x * inv, x.y * inv, x.z * inv, x.w * inv);
}

// Step 3 for the float4s f = threadIdx.x + k kNT (the ones this thread staged). stage_at(f) holds s0.
// Writes x, pre-scaled, into stage_at(f) and (kOffset) the sum of group g's x into gx[g].
// Warp-uniform: n4 is a multiple of 32, so a warp's float4s are one group.
template <typename F, int kNT, typename StageAt>
__device__ __forceinline__ void divide_staged(StageAt stage_at, const float4* x4, int n4, const float* div,
                                              int groups, float* gx) {
  const int lane = threadIdx.x & 31;
  for (int f = threadIdx.x; f < n4; f += kNT) {
    const int g = f >> 5;
    const float4 x = divide4(stage_at(f), div[g], div[groups + g], x4 + n4 + f);
    if constexpr (F::kOffset) {
      const float s = warp_sum(sum4(x));
      if (lane == 0) gx[g] = s;
    }
    if constexpr (F::kPrescale) stage_at(f) = F::prescale(x, false);
    else stage_at(f) = x;
  }
}

}  // namespace gemv_quant_sums
