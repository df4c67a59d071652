// Rotary embedding (M-RoPE, half-split) on q and k of the fused q/k/v product (plus its bias when
// the product came from a GEMM without a bias epilogue), with k and v written into the paged KV
// cache (fp32, bf16, or int8 rows with an fp32 scale each: cosmos/kv_format.h).
#pragma once

#include <cstddef>
#include <cstdint>

#include <cuda_runtime.h>

#include "kernels/elem_type.cuh"

namespace cosmos::kernels {

struct RopeKvArgs {
  const float* qkv = nullptr;        // [n, (heads + 2 kv_heads) * head_dim] fp32: q | k | v
  const float* bias = nullptr;       // [(heads + 2 kv_heads) * head_dim] fp32 added first, or null
  const std::int32_t* positions = nullptr;  // [n, 3] int32: temporal, height, width
  const float* inv_freq = nullptr;   // [head_dim / 2] fp32
  const std::int32_t* slots = nullptr;  // [n] int32: cache slot = block * block_size + offset
  void* q = nullptr;                 // [n, heads, head_dim] q_type out (roped)
  ElemType q_type = ElemType::f32;
  void* k_cache = nullptr;           // [n_blocks * block_size, kv_heads, head_dim] kv_type, this layer
  void* v_cache = nullptr;           // same shape
  ElemType kv_type = ElemType::f32;  // f32 or bf16
  // int8 cache: k_cache / v_cache hold int8 [slots, kv_heads, head_dim] (kv_type ignored), and each
  // written (token, KV head) row gets its scale here, as cosmos::quantize_kv_row makes them from the
  // fp32 roped k and v (same operations: the same bytes for the same fp32 row).
  float* k_scale = nullptr;          // [slots, kv_heads] fp32, or null: no int8
  float* v_scale = nullptr;          // same shape
  int n = 0, heads = 0, kv_heads = 0, head_dim = 0;
  int section0 = 0, section1 = 0;    // mrope sections: frequency j < s0 uses t, < s0+s1 uses h, else w
};

// Launched with launch_pdl (kernels/pdl.cuh). Returns bytes moved; 0, with nothing launched, for an
// int8 cache without v_scale, with an odd head_dim or with more than 48 KB of k and v per token.
std::size_t launch_rope_kv(const RopeKvArgs& args, cudaStream_t stream);

}  // namespace cosmos::kernels
