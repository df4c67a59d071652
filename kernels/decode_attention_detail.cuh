// Internal to kernels/decode_attention.cu and kernels/decode_attention_mma.cu: the split of the
// context, the fused-RoPE inputs and the scratch layout both decode attention kernels share.
#pragma once

#include <cstdint>

#include <cuda_runtime.h>

#include "kernels/attention.cuh"
#include "kernels/decode_attention.cuh"

namespace cosmos::kernels::decode_detail {

constexpr int kMaxGroup = 8;   // query heads per KV head
constexpr int kSplitKeys = 64; // split lengths are multiples of this
constexpr int kSplits = kDecodeAttentionSplits;
static_assert(kSplits <= 64, "the merges give each lane two splits");

// Keys per split: a multiple of kSplitKeys, as few splits as cover the context with at most kSplits.
__device__ __forceinline__ int split_len(int len) {
  const int per = (len + kSplits - 1) / kSplits;
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

// Scratch: ml [n][heads][kSplits][2] (max, sum), o [n][heads][kSplits][D], counters [n][kv_heads].
// What "max" and "sum" mean is each kernel's own (the split partials never mix kernels).
struct Scratch {
  float* ml;
  float* o;
  int* counters;
};

// The tensor-core kernel (kernels/decode_attention_mma.cu): bf16 cache, head_dim 64 or 128.
void launch_decode_attention_mma(const AttentionArgs& a, const RopeIn& r, const Scratch& s, cudaStream_t stream);

}  // namespace cosmos::kernels::decode_detail
