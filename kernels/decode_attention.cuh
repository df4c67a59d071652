// Attention for decode steps (few new tokens, long contexts), flash-decoding style. For each
// (token, KV head) the context is cut into up to kDecodeAttentionSplits splits whose length is
// chosen on the device from the token's context length (so one captured CUDA graph serves every
// length); one block per split computes all the query heads that share the KV head (each K/V row
// is read once for the whole group) with an online softmax over tiles staged in shared memory.
// The last block of a (token, KV head) to finish merges the splits (no second kernel); a context
// that fits one split is written directly. Same inputs and result as launch_attention.
#pragma once

#include <cstddef>

#include "kernels/attention.cuh"

namespace cosmos::kernels {

inline constexpr int kDecodeAttentionSplits = 64;  // blocks per (token, KV head) at most
inline constexpr int kDecodeAttentionTile = 32;    // keys staged in shared memory at a time

// True when this kernel handles the shape (head_dim 64 or 128, up to 8 query heads per KV head).
bool decode_attention_supports(int heads, int kv_heads, int head_dim);

// Scratch bytes for n tokens: partial results [n, heads, splits, head_dim + 2] fp32, then
// completion counters [n, kv_heads] int32. Zero it once (cudaMemset) before the first launch; the
// kernel leaves the counters at zero again.
std::size_t decode_attention_scratch_bytes(int n, int heads, int kv_heads, int head_dim);

// args.q is fp32 [n, heads, head_dim]; the cache is fp32 or bf16 (args.kv_type); out fp32, bf16 or
// fp16 (args.out_type). args.max_ctx is not used (lengths come from args.ctx_len on the device).
// Launched with launch_pdl. Returns bytes moved for a context of args.max_ctx keys (estimate).
std::size_t launch_decode_attention(const AttentionArgs& args, void* scratch, cudaStream_t stream);

}  // namespace cosmos::kernels
