// Causal grouped-query attention over the paged KV cache, for any mix of prefill and decode
// tokens: token t attends to cache positions 0 .. ctx_len[t] - 1 of its sequence.
// Reference-accurate version (fp32 math, scores in shared memory): the exact path and the fallback
// for shapes the flash kernels (decode_attention, prefill_attention) do not take.
#pragma once

#include <cstddef>
#include <cstdint>

#include <cuda_runtime.h>

#include "kernels/elem_type.cuh"

namespace cosmos::kernels {

struct AttentionArgs {
  const float* q = nullptr;          // [n, heads, head_dim] fp32 (roped)
  const void* k_cache = nullptr;     // [slots, kv_heads, head_dim] kv_type, this layer
  const void* v_cache = nullptr;     // same shape
  ElemType kv_type = ElemType::f32;  // f32 or bf16
  // int8 cache (cosmos/kv_format.h; decode_attention's CUDA-core kernel only): k_cache / v_cache
  // hold int8 rows, kv_type is ignored, and row (slot, KV head) is scale[slot * kv_heads + head] x
  // its int8 values.
  const float* k_scale = nullptr;    // [slots, kv_heads] fp32, or null: kv_type
  const float* v_scale = nullptr;    // same shape
  const std::int32_t* block_tables = nullptr;  // flat int32: each token's sequence table at table_offset[t]
  const std::int32_t* table_offset = nullptr;  // [n] int32
  const std::int32_t* ctx_len = nullptr;       // [n] int32: positions visible to the token (its index + 1)
  void* out = nullptr;               // [n, heads, head_dim] out_type
  ElemType out_type = ElemType::f32;
  int n = 0, heads = 0, kv_heads = 0, head_dim = 0, block_size = 16;
  int max_ctx = 0;                   // the largest ctx_len (sizes shared memory)
  float scale = 1.0f;
};

// The longest context this kernel supports on the current device (shared memory bound).
int attention_max_context();
// Allows launches with max_ctx up to `max_ctx` (raises the kernel's dynamic shared-memory limit);
// call once before capturing launches into a CUDA graph.
void prepare_attention(int max_ctx);
std::size_t launch_attention(const AttentionArgs& args, cudaStream_t stream);

}  // namespace cosmos::kernels
