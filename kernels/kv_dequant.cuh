// The int8 KV cache (cosmos/kv_format.h) back to bf16 for the prefill attention kernels, which read
// bf16 rows: the cache blocks a pass's sequences hold (their block tables) are expanded, row by
// row, into a bf16 copy of one layer's cache with the same paged layout (block b of the int8 cache
// becomes block b of the copy), so the prefill kernels run unchanged on the copy.
//   k8, v8:         [slots, kv_heads, head_dim] int8, one layer
//   k_scale, v_scale: [slots, kv_heads] fp32
//   blocks:         [n_blocks] int32, the cache blocks to expand (repeats are harmless)
//   k16, v16:       [slots, kv_heads, head_dim] bf16, the same slots written: bf16(scale x q)
// Bytes moved: n_blocks x block_size x 2 x kv_heads x (head_dim x 3 + 4).
#pragma once

#include <cstddef>
#include <cstdint>

#include <cuda_bf16.h>
#include <cuda_runtime.h>

namespace cosmos::kernels {

struct KvDequantArgs {
  const std::int8_t* k8 = nullptr;
  const std::int8_t* v8 = nullptr;
  const float* k_scale = nullptr;
  const float* v_scale = nullptr;
  const std::int32_t* blocks = nullptr;
  __nv_bfloat16* k16 = nullptr;
  __nv_bfloat16* v16 = nullptr;
  int n_blocks = 0, block_size = 16, kv_heads = 0, head_dim = 0;
};

// Launched with launch_pdl. Returns bytes moved; 0, with nothing launched, when head_dim is not a
// multiple of 16 or a buffer is not 16-byte aligned.
std::size_t launch_kv_dequant(const KvDequantArgs& args, cudaStream_t stream);

}  // namespace cosmos::kernels
