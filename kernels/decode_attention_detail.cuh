// Internal to kernels/decode_attention.cu and kernels/decode_attention_mma.cu: the split of the
// context, the fused-RoPE inputs and the scratch layout both decode attention kernels share.
#pragma once

#include <cmath>
#include <cstddef>
#include <cstdint>

#include <cuda_runtime.h>

#include "kernels/attention.cuh"
#include "kernels/decode_attention.cuh"

namespace cosmos::kernels::decode_detail {

constexpr int kMaxGroup = 8;   // query heads per KV head
constexpr int kSplitKeys = 64; // split lengths are multiples of this
static_assert(kDecodeAttentionSplits <= 64, "the merges give each lane two splits");

// Keys per split: a multiple of kSplitKeys, as few splits as cover the context with at most
// `splits` (the launch's gridDim.z, decode_attention_splits()).
__device__ __forceinline__ int split_len(int len, int splits) {
  const int per = (len + splits - 1) / splits;
  return ((per + kSplitKeys - 1) / kSplitKeys) * kSplitKeys;
}

__device__ __forceinline__ float warp_max(float v) {
#pragma unroll
  for (int off = 16; off > 0; off >>= 1) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, off));
  return v;
}
__device__ __forceinline__ float warp_sum(float v) {
#pragma unroll
  for (int off = 16; off > 0; off >>= 1) v += __shfl_xor_sync(0xffffffffu, v, off);
  return v;
}

struct RopeIn {  // kernels/rope_kv.cuh's inputs, for the fused path (null qkv: not fused)
  const float* qkv = nullptr;
  const float* bias = nullptr;
  const std::int32_t* positions = nullptr;
  const float* inv_freq = nullptr;
  const std::int32_t* slots = nullptr;
  int section0 = 0, section1 = 0;
};

// RoPE in two halves, so that a kernel can compute the angles before its PDL wait (positions are
// metadata, inv_freq constant) and only read the q/k/v row after it. rope_angle: the sine and
// cosine of pair p (0 <= p < D / 2) at positions pos[0..3); rope_rotate: the rotated elements
// p and p + D / 2 from the row's x1, x2 (bias already added), with the same fp32 roundings as
// kernels/rope_kv.cu's rotate().
__device__ __forceinline__ void rope_angle(const RopeIn& rope, const std::int32_t* pos, int p, float& sn, float& cs) {
  const int which = p < rope.section0 ? 0 : (p < rope.section0 + rope.section1 ? 1 : 2);
  const float f = static_cast<float>(pos[which]) * rope.inv_freq[p];
  sincosf(f, &sn, &cs);
}
__device__ __forceinline__ void rope_rotate(float x1, float x2, float sn, float cs, float& y1, float& y2) {
  y1 = __fmaf_rn(cs, x1, -__fmul_rn(sn, x2));
  y2 = __fmaf_rn(sn, x1, __fmul_rn(cs, x2));
}

// RoPE of pair p (0 <= p < D / 2) of the head at element offset `off` of a token's q/k/v row `row`
// (positions pos[0..3)), exactly as kernels/rope_kv.cu computes it (same angle, bias first, the
// same fp32 roundings as its rotate()): y1, y2 are the rotated elements p and p + D / 2.
template <int D>
__device__ __forceinline__ void rope_pair(const RopeIn& rope, const float* row, const std::int32_t* pos, int off, int p,
                                          float& y1, float& y2) {
  constexpr int kHalf = D / 2;
  float sn, cs;
  rope_angle(rope, pos, p, sn, cs);
  float x1 = row[off + p], x2 = row[off + p + kHalf];
  if (rope.bias) {
    x1 += rope.bias[off + p];
    x2 += rope.bias[off + p + kHalf];
  }
  rope_rotate(x1, x2, sn, cs, y1, y2);
}

// Scratch: ml [n][heads][splits][2] (max, sum), o [n][heads][splits][D], counters [n][kv_heads]
// (splits = decode_attention_splits(n, kv_heads), the launch's gridDim.z).
// What "max" and "sum" mean is each kernel's own (the split partials never mix kernels).
// sum_o / sum_l (tensor-core kernel only): the DecodeAttentionSums of the launch, or null.
struct Scratch {
  float* ml;
  float* o;
  int* counters;
  float* sum_o = nullptr;    // [2][n][heads][D]: the output's sums (instead of a.out)
  float* sum_l = nullptr;    // [2][n][heads]
  float* clear_o = nullptr;  // [2][n][heads][D] or null: zeroed after the PDL wait
  float* clear_l = nullptr;  // [2][n][heads]
  int sum_splits = 0;        // DecodeAttentionSums::splits
  bool halves = false;       // DecodeAttentionSums::halves
};

// A split's arrival at its (token, KV head): thread 0 calls it between two block (or group) barriers,
// after the block's partial stores; true for the last of `active` arrivals, which then merges and
// leaves the counter at zero for the next launch. One release-acquire atomic: the release orders
// the block's stores (seen by thread 0 through the barrier; release is cumulative) before the
// ticket, and the acquire orders the last block's reads after every other ticket, the barrier
// passing that on to its other threads. A fence before and one after the ticket did the same with
// one more L2 round trip on the merge's path (0.25 us per layer, docs/PERFORMANCE.md session 14).
__device__ __forceinline__ bool arrive_last(int* counter, int active) {
  int ticket;
  asm volatile("atom.acq_rel.gpu.global.add.s32 %0, [%1], 1;" : "=r"(ticket) : "l"(counter) : "memory");
  if (ticket != active - 1) return false;
  *counter = 0;  // ordered before the next launch by the kernel boundary
  return true;
}

// The merge's weights for one head's splits, from ml (each split's (max, sum), at at0 + split): lane
// l gets w0, w1 = exp(max - M) for splits l and l + 32 (0 past `active`), M the largest max; returns
// the total sum(sum_s w_s), the same in every lane. kBase2: the maxima are base-2 exponents.
template <bool kBase2>
__device__ __forceinline__ float split_weights(const float* ml, std::size_t at0, int active, int lane, float& w0,
                                               float& w1) {
  const int s0 = lane, s1 = lane + 32;
  const float m0 = s0 < active ? __ldcg(ml + 2 * (at0 + s0)) : -INFINITY;
  const float m1 = s1 < active ? __ldcg(ml + 2 * (at0 + s1)) : -INFINITY;
  const float l0 = s0 < active ? __ldcg(ml + 2 * (at0 + s0) + 1) : 0.0f;
  const float l1 = s1 < active ? __ldcg(ml + 2 * (at0 + s1) + 1) : 0.0f;
  const float M = warp_max(fmaxf(m0, m1));
  auto ex = [](float x) { return kBase2 ? exp2f(x) : expf(x); };
  w0 = s0 < active ? ex(m0 - M) : 0.0f;
  w1 = s1 < active ? ex(m1 - M) : 0.0f;
  return warp_sum(l0 * w0 + l1 * w1);
}

// The tensor-core kernel (kernels/decode_attention_mma.cu): bf16 cache, head_dim 64 or 128.
void launch_decode_attention_mma(const AttentionArgs& a, const RopeIn& r, const Scratch& s, cudaStream_t stream);

}  // namespace cosmos::kernels::decode_detail
