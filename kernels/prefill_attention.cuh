// Causal prefill attention on tensor cores (flash-attention 2 style) over the paged bf16 KV cache.
// One block of 4 warps takes 64 query rows of one (sequence, query head); it walks the key tiles of
// 64 up to the causal limit: S = Q K^T and O += P V with mma.sync m16n8k16 bf16 (fp32 accumulate),
// online softmax in fp32, K/V tiles gathered through the block table into shared memory with
// cp.async. No score matrix is materialized, nothing is allocated, the launch is graph-capturable.
// Token j (0-based, among the sequence's new tokens) attends cache indices 0 .. ctx_start + j.
// On compute capability 9.0 (H100, H200) a Hopper variant with the same arguments and results runs
// instead: for head_dim 128 the warp-specialized kernel (kernels/prefill_attention_tma_sm90a.cu: TMA
// copies by a producer warp, the softmax overlapped with the P V product), else 128 query rows per
// block of two warpgroups with both products on warpgroup MMA (kernels/prefill_attention_wgmma.cu).
#pragma once

#include <cstddef>
#include <cstdint>

#include <cuda_bf16.h>
#include <cuda_runtime.h>

namespace cosmos::kernels {

// Which kernel runs: `automatic` takes the warp-specialized TMA kernel where
// prefill_attention_tma_supports(args), else the Hopper wgmma kernel (kernels/prefill_attention_wgmma.cu)
// where prefill_attention_wgmma_available(), else the mma.sync kernel; the others force one (a forced
// kernel that cannot run here launches nothing and returns 0).
enum class PrefillAttentionKernel { automatic, mma, wgmma, tma };

struct PrefillAttentionArgs {
  const __nv_bfloat16* q = nullptr;        // [n, heads, head_dim] bf16 (roped)
  const __nv_bfloat16* k_cache = nullptr;  // [slots, kv_heads, head_dim] bf16, this layer (new tokens written)
  const __nv_bfloat16* v_cache = nullptr;  // same shape
  const std::int32_t* block_tables = nullptr;  // flat int32; sequence s's table starts at table_offset[s]
  // Per sequence s, in device memory (int32 [seqs] each):
  const std::int32_t* table_offset = nullptr;  // start of its block table in block_tables
  const std::int32_t* q_start = nullptr;       // its first row in q / out
  const std::int32_t* q_len = nullptr;         // its new tokens (rows q_start .. q_start + q_len - 1)
  const std::int32_t* ctx_start = nullptr;     // cache index of its first new token (tokens cached before)
  void* out = nullptr;                     // [n, heads, head_dim] bf16 (fp16 with out_f16); only the sequences' rows are written
  bool out_f16 = false;                    // write fp16 (for fp16 weights: the o GEMM reads it directly)
  int seqs = 0, heads = 0, kv_heads = 0, head_dim = 0, block_size = 16;
  int n = 0;           // rows of q / out (only for the bytes estimate)
  int max_q_len = 0;   // >= every q_len[s]: sizes the grid (tiles past a sequence's q_len exit at once)
  int max_kv_len = 0;  // largest ctx_start + q_len (only for the bytes estimate; 0: max_q_len)
  int kv_slots = 0;    // slots in k_cache / v_cache (blocks x block_size): the TMA kernel's bounds (0: not used)
  float scale = 1.0f;  // usually 1 / sqrt(head_dim)
  PrefillAttentionKernel kernel = PrefillAttentionKernel::automatic;
};

inline constexpr int kPrefillAttentionTileQ = 64;   // query rows per block (16 per warp)
inline constexpr int kPrefillAttentionTileKv = 64;  // keys per shared-memory tile

// True when this kernel handles the shape: head_dim 64 or 128, heads a multiple of kv_heads.
bool prefill_attention_supports(int heads, int kv_heads, int head_dim);

// True when the wgmma kernel was built (the build's CUDA architectures include 90, which adds sm_90a
// code for it) and the current GPU is compute capability 9.0 (H100, H200).
bool prefill_attention_wgmma_available();

// True when the warp-specialized TMA kernel runs these arguments: prefill_attention_wgmma_available(),
// the driver encodes tensor maps, head_dim 128, block_size a power of two from 8 to 128, kv_slots > 0,
// and q, k_cache, v_cache 16-byte aligned.
bool prefill_attention_tma_supports(const PrefillAttentionArgs& args);

// The mma.sync kernel: grid (heads, max_q_len / 64 rounded up, seqs), 128 threads, 48 KB static
// shared memory for head_dim 128 (24 KB for 64); the wgmma kernel: see
// kernels/prefill_attention_wgmma.cuh; the TMA kernel: one block of 384 threads per SM (persistent),
// 193 KB of dynamic shared memory. Requirements: q, k_cache, v_cache and out 16-byte aligned; sm_80 or
// newer; block_size > 0 (a power of two is faster); seqs <= 65535. An unsupported shape launches
// nothing and returns 0, and so does a TMA launch the runtime refuses (its error consumed: the
// caller may run another kernel). Launched with launch_pdl (kernels/pdl.cuh). Returns bytes moved: q + out
// once, plus K and V of max_kv_len keys per (sequence, KV head) once (the repeated reads of a tile by
// the blocks of other query tiles and of the GQA group's heads are served by L2 and not counted).
std::size_t launch_prefill_attention(const PrefillAttentionArgs& args, cudaStream_t stream);

}  // namespace cosmos::kernels
