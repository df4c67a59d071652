// Attention for decode steps (few new tokens, long contexts), flash-decoding style: the context is
// cut into chunks of kChunk keys, one block per (token, KV head, chunk) computes all the query heads
// that share that KV head (each K/V row is read once for them) with an online softmax, then a
// combine kernel merges the chunks. Same inputs and result as launch_attention (attention.cuh).
#pragma once

#include <cstddef>

#include "kernels/attention.cuh"

namespace cosmos::kernels {

inline constexpr int kDecodeAttentionChunk = 64;  // keys per block

// True when this kernel handles the shape (head_dim 64 or 128, up to 8 query heads per KV head).
bool decode_attention_supports(int heads, int kv_heads, int head_dim);

// Scratch floats needed for n tokens over max_ctx keys: [n, heads, chunks, head_dim + 2].
std::size_t decode_attention_scratch_floats(int n, int heads, int head_dim, int max_ctx);

// `scratch` must hold decode_attention_scratch_floats(...) floats. args.max_ctx sets the number of
// chunks (blocks past a token's length exit at once), so a graph captured with the cache's
// capacity serves every length. Returns bytes moved (K/V of max_ctx keys per KV head, estimate).
std::size_t launch_decode_attention(const AttentionArgs& args, float* scratch, cudaStream_t stream);

}  // namespace cosmos::kernels
