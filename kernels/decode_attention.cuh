// Attention for decode steps (few new tokens, long contexts), flash-decoding style. Two kernels with
// the same contract: with a bf16 or int8 cache, the tensor-core kernel (kernels/decode_attention_mma.cu:
// the group's query heads as the rows of one mma tile, 64-key rounds through shared memory); with an
// fp32 cache (or when switched off, for comparison), the CUDA-core kernel described here. For each
// (token, KV head) the context is cut into up to decode_attention_splits(n, kv_heads) splits of
// multiples of 64 keys, the split length chosen on the device from the token's context length (so one captured
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
inline constexpr int kDecodeAttentionMaxTokens = 256;  // tokens per launch at most (n)
inline constexpr int kDecodeAttentionBlocks = 512; // batches of more than 4 tokens: splits for about this many blocks

// Splits per (token, KV head) of a launch for n tokens (its gridDim.z): kDecodeAttentionSplits
// for up to 4 tokens; larger batches (one token per sequence, continuous batching) take their
// parallelism from the tokens, with as many splits as make ~kDecodeAttentionBlocks blocks, so a
// batch of 256 short sequences does not launch 64 blocks per (token, KV head) that mostly return.
int decode_attention_splits(int n, int kv_heads);

// True when this kernel handles the shape (head_dim 64 or 128, up to 8 query heads per KV head).
bool decode_attention_supports(int heads, int kv_heads, int head_dim);

// Scratch bytes for n tokens: completion counters [kDecodeAttentionMaxTokens, kv_heads] int32 (the
// same place for every n), then per (token, head, split) the partial max and sum, then the partial
// output [head_dim] fp32 (not monotonic in n: size a buffer for several batch sizes with the
// largest of theirs). Zero it once (cudaMemset) before the first launch; every launch leaves the
// counters at zero again, whatever n the launches before it had.
std::size_t decode_attention_scratch_bytes(int n, int heads, int kv_heads, int head_dim);

// args.q is fp32 [n, heads, head_dim] (scaled by args.scale inside); the cache is fp32 or bf16
// (args.kv_type), or int8 with args.k_scale / v_scale (both kernels; fused, they write the new rows
// as cosmos::quantize_kv_row would; the tensor-core kernel multiplies bf16(scale x q), as the
// prefill's kernels/kv_dequant.cu expands them); out fp32, bf16 or fp16 (args.out_type).
// args.max_ctx is not used (lengths come from args.ctx_len on the device).
// rope (optional): instead of reading args.q, apply the rotary embedding to q and k from rope->qkv
// (+ rope->bias) exactly as launch_rope_kv(*rope) would, and write the new k and v rows into the
// cache at rope->slots (rope->q, q_type, the cache pointers and sizes are taken from args). Only
// valid when each of the n tokens is the newest token of its own sequence (ctx_len[t] - 1 is the
// position of its slot), as in a decode step.
// Launched with launch_pdl. Returns bytes moved for a context of args.max_ctx keys (estimate).
// sums (optional; see DecodeAttentionSums): the output as sums for the next kernel to divide,
// args.out untouched. Returns 0 with nothing launched when asked for sums the launch cannot give
// (decode_attention_sums_supported).
struct DecodeAttentionSums;
std::size_t launch_decode_attention(const AttentionArgs& args, void* scratch, cudaStream_t stream,
                                    const RopeKvArgs* rope = nullptr, const DecodeAttentionSums* sums = nullptr);

// The merge of the splits left to the next kernel (the decode step's o product stages x from it):
// instead of writing its output, a launch leaves per (token t, head h) fp32 sums in two buckets,
//   o[k][t][h][:] = sum of O_s 2^(e_s - 60 - 120k),  l[k][t][h] = sum of L_s 2^(e_s - 60 - 120k),
// over the splits s in bucket k (k = 0 when e_s <= 120, else 1), where O_s, L_s and M_s are split
// s's unnormalized output, sum of weights and largest score, and e_s = (M_s - c_h) x scale x log2(e)
// with c_h the score of key 0, common to every split. The sums are added with fp32 atomic adds, so
// the splits need no ticket, no partials and no last-block merge, and the output is
//   out = o[0] / l[0] when l[1] == 0 (key 0 within ~80 nats of the top score: the usual case),
//   out = (o[0] 2^-120 + o[1]) / (l[0] 2^-120 + l[1]) otherwise.
// Split 0 holds key 0 (e >= 0), so l[0] or l[1] is at least 2^-60: the sums cannot vanish, and in
// bucket 0 they stay below 2^72 |v|. Bucket 1 reaches e = 240 (166 nats above key 0's score);
// beyond that the weights are clamped (a split's weight relative to key 0 of more than e^166).
// A context within one split stores its O and L in bucket 0 (and l[1] = 0). The atomic adds come
// in a varying order: the output can differ run to run in its last bits (as the fused decode MLP's).
// o and l must be zero before the launch: the caller keeps one set per layer and lets each launch
// zero the previous layer's (clear_*: read by then, by the o product before this launch, through
// the chain of PDL waits between them), the first layer's launch zeroing the last layer's. Zero them
// once (cudaMemset) at allocation.
inline constexpr int kSumsShift = 60;    // bucket 0: 2^(e - 60)
inline constexpr int kSumsBucket = 120;  // bucket 1 starts at e > 120: 2^(e - 60 - 120)
struct DecodeAttentionSums {
  float* o = nullptr;        // [2][n, heads, head_dim] fp32 (16-byte aligned)
  float* l = nullptr;        // [2][n, heads] fp32
  float* clear_o = nullptr;  // [2][n, heads, head_dim] or null: zeroed by the launch after its PDL wait
  float* clear_l = nullptr;  // [2][n, heads] or null: likewise
  // Splits per (token, KV head) for launches of up to 4 tokens; 0: decode_attention_splits(). The
  // sums need no merge, so any count from 1 to kDecodeAttentionMaxSumSplits works: more splits give
  // longer contexts one 64-key round per block (kDecodeAttentionLongSplits, below), at the cost of
  // the blocks that find no keys and return (docs/PERFORMANCE.md, session 43).
  int splits = 0;
  // The tensor-core kernel with every warp on mma work over half of head_dim, at 3 blocks per SM
  // instead of 2 (kernels/decode_attention_mma.cu, kHalves): faster where splits take more than one
  // 64-key round (kDecodeAttentionHalvesFrom), slower at one. Same results up to the atomic adds' order.
  // Both caches (bf16 and int8).
  bool halves = false;
};
inline constexpr int kDecodeAttentionMaxSumSplits = 1024;
// The decode step's splits with sums at long contexts: contexts up to 8,192 keys in one round per
// block (64 splits give 4,097-8,192 keys two rounds, whose second round's loads wait on the first's
// work). Session 43 (engine A/Bs, means of 2-3 rounds): int4 decode +0.6-1.7% @4096, +1.6-1.8%
// @8192; bf16 +0.7% @4096 and @8192, but -0.4% @0, where the extra blocks find no keys and return,
// so the engine launches it in long-context graphs only. 256 splits: -4.6% int4 @8192 (520 blocks,
// more than stay resident beside the q/k/v product).
inline constexpr int kDecodeAttentionLongSplits = 128;
// Contexts from which kDecodeAttentionLongSplits splits take two or more 64-key rounds, and the
// decode step launches the attention with DecodeAttentionSums::halves (session 63, H100: int4
// @12288 +7.0%, @16384 +8.3%, bf16 @12288 +2.5%; at one round per split it is slower: int4 @4096
// -1.1% in a timing build).
inline constexpr int kDecodeAttentionHalvesFrom = 64 * kDecodeAttentionLongSplits + 1;

// True when a launch with these arguments can give sums: the tensor-core kernel (bf16 or int8
// cache, the process-wide switch below on) and a supported shape.
bool decode_attention_sums_supported(const AttentionArgs& args);

// Process-wide switch for tests and benchmarks (default on): the tensor-core kernel for bf16 and
// int8 caches.
void set_decode_attention_tensor_cores(bool on);

}  // namespace cosmos::kernels
