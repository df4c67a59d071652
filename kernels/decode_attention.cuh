// Attention for decode steps (few new tokens, long contexts), flash-decoding style. Two kernels with
// the same contract: with a bf16 cache, the tensor-core kernel (kernels/decode_attention_mma.cu:
// the group's query heads as the rows of one mma tile, 64-key rounds through shared memory); with an
// fp32 cache (or when switched off, for comparison), the CUDA-core kernel described here. For each
// (token, KV head) the context is cut into up to kDecodeAttentionSplits splits of multiples of
// 64 keys, the split length chosen on the device from the token's context length (so one captured
// CUDA graph serves every length). One block per split, one warp per query head of the group (the
// group's warps read the same K/V rows, mostly from L1): 32 keys per round, one per lane, K and V
// straight from the cache into registers (no shared-memory staging), an online softmax per warp,
// the next round's loads issued behind the current round's work. The last block of a (token, KV
// head) to finish merges the splits (no second kernel); a context within one split is written
// directly. Optionally fused with the rotary embedding and the KV-cache write of
// kernels/rope_kv.cuh (one kernel per layer instead of two); fused, the first round's K/V loads go
// out before the kernel waits on the one before it. Same inputs and result as launch_attention.
#pragma once

#include <cstddef>

#include "kernels/attention.cuh"
#include "kernels/rope_kv.cuh"

namespace cosmos::kernels {

inline constexpr int kDecodeAttentionSplits = 64;  // blocks per (token, KV head) at most

// True when this kernel handles the shape (head_dim 64 or 128, up to 8 query heads per KV head).
bool decode_attention_supports(int heads, int kv_heads, int head_dim);

// Scratch bytes for n tokens: per (token, head, split) the partial max and sum, then the partial
// output [head_dim] fp32, then completion counters [n, kv_heads] int32. Zero it once (cudaMemset)
// before the first launch; the kernel leaves the counters at zero again.
std::size_t decode_attention_scratch_bytes(int n, int heads, int kv_heads, int head_dim);

// args.q is fp32 [n, heads, head_dim] (scaled by args.scale inside); the cache is fp32 or bf16
// (args.kv_type); out fp32, bf16 or fp16 (args.out_type). args.max_ctx is not used (lengths come
// from args.ctx_len on the device).
// rope (optional): instead of reading args.q, apply the rotary embedding to q and k from rope->qkv
// (+ rope->bias) exactly as launch_rope_kv(*rope) would, and write the new k and v rows into the
// cache at rope->slots (rope->q, q_type, the cache pointers and sizes are taken from args). Only
// valid when each of the n tokens is the newest token of its own sequence (ctx_len[t] - 1 is the
// position of its slot), as in a decode step.
// Launched with launch_pdl. Returns bytes moved for a context of args.max_ctx keys (estimate).
std::size_t launch_decode_attention(const AttentionArgs& args, void* scratch, cudaStream_t stream,
                                    const RopeKvArgs* rope = nullptr);

// Process-wide switch for tests and benchmarks (default on): the tensor-core kernel for bf16 caches.
void set_decode_attention_tensor_cores(bool on);

}  // namespace cosmos::kernels
