// Causal grouped-query attention over the paged KV cache for the CPU backend (fp32 math).
//
// Work item = (token, KV head, split of the token's keys): the G query heads that share the KV
// head are computed together, so each K and V row is read once per group instead of once per
// head (7 times for Cosmos-Reason1-7B's 28/4 heads); a token's keys are cut into splits when
// there are fewer (token, KV head) pairs than the threads can use (a decode step: 4 pairs), and
// the splits' partial softmax sums are merged (flash-decoding). Bytes per token and KV head: the
// context's K and V rows once (fp32 rows, or int8 rows plus their scales).
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

namespace cosmos::cpu {

// One layer's cache in cosmos/kv_cache.h's paged layout, rows = n_blocks * block_size.
struct KvLayerView {
  const float* k = nullptr;           // full cache: [rows, kv_heads, head_dim] fp32
  const float* v = nullptr;           // same shape
  const std::int8_t* k8 = nullptr;    // int8 cache (cosmos/kv_format.h): [rows, kv_heads, head_dim]
  const std::int8_t* v8 = nullptr;    // same shape
  const float* k_scale = nullptr;     // int8 cache: [rows, kv_heads] fp32
  const float* v_scale = nullptr;     // same shape
  int kv_heads = 0, head_dim = 0, block_size = 0;
  bool int8() const { return k8 != nullptr; }
};

// What one token attends to: the first `len` positions of its sequence's block table.
struct AttentionQuery {
  std::span<const int> table;
  int len = 0;
};

// out[t, h, :] = softmax(q[t, h, :] . K[0..len_t) / sqrt(D)) V for each token t and query head h
// (KV head h / (heads / kv_heads)). q and out: [tokens.size(), heads, head_dim] fp32.
// min_split: the fewest keys a split takes (tests use small values to force several splits).
void grouped_attention(const KvLayerView& kv, std::span<const AttentionQuery> tokens, int heads, const float* q,
                       float* out, int threads, int min_split = 256);

}  // namespace cosmos::cpu
