// The warp-specialized Hopper prefill attention (kernels/prefill_attention_tma_sm90a.cu): the
// launcher, given the three TMA tensor maps kernels/prefill_attention.cu encoded. Built only as
// sm_90a code (COSMOS_HAVE_SM90A); head_dim 128 only.
#pragma once

#include <cuda.h>
#include <cuda_runtime.h>

#include "kernels/prefill_attention.cuh"

namespace cosmos::kernels {

inline constexpr int kPrefillTmaRows = 128;  // query rows per work item (two warpgroups of 64)
inline constexpr int kPrefillTmaKeys = 128;  // keys per K/V tile

// Maps (16-bit elements, 128-byte swizzle, boxes of 64 dims):
//   q: dims {128, heads, n},          box {64, 1, 128}: one 64-dim half of a work item's 128 rows;
//   k, v: dims {128, kv_heads, slots}, box {64, 1, block_size}: one 64-dim half of one cache block.
// Requirements (checked by the caller): head_dim 128, block_size a power of two from 8 to 128.
// Returns the launch's own error (shared-memory opt-in or the launch), or cudaSuccess.
cudaError_t launch_prefill_attention_tma_sm90a(const CUtensorMap& q, const CUtensorMap& k, const CUtensorMap& v,
                                              const PrefillAttentionArgs& a, int sms, cudaStream_t stream);

}  // namespace cosmos::kernels
