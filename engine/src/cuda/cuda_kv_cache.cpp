// CUDA backend: the KV cache's device memory, per layer in cosmos/kv_cache.h's paged layout:
//   full: K, V [slots, kv_heads, head_dim] bf16 (fp32 for reference math);
//   int8: K, V [slots, kv_heads, head_dim] int8 and their scales [slots, kv_heads] fp32
//         (cosmos/kv_format.h), plus one layer's K and V in bf16 [slots, kv_heads, head_dim], which
//         the prefill attention reads after kernels/kv_dequant.cu has expanded a pass's blocks.
#include "cuda/cuda_backend_impl.h"

namespace cosmos {

Status CudaBackend::alloc_kv_cache() {
  const std::size_t slots = static_cast<std::size_t>(cache_.shape().tokens()), KV = config_.kv_dim();
  const bool int8 = kv_format_ == KvFormat::int8;
  auto take = [&](std::size_t bytes, const char* what, auto*& into) -> Status {
    auto p = alloc(bytes, what);
    if (!p) return p.error();
    into = static_cast<std::remove_reference_t<decltype(into)>>(*p);
    return ok_status();
  };
  const std::size_t kv_bytes = slots * KV * (int8 ? 1 : kernels::elem_size(kvtype_));
  const std::size_t scale_bytes = slots * config_.num_kv_heads * sizeof(float);
  for (CudaLayer& L : layers_) {
    for (void** p : {&L.k_cache, &L.v_cache})
      if (auto st = take(kv_bytes, "the KV cache", *p); !st) return st;
    kv_bytes_ += 2 * kv_bytes;
    if (!int8) continue;
    // Zeroed: a decode step reads the newest key's scale before it writes it (then reads it again).
    for (float** p : {&L.k_scale, &L.v_scale}) {
      if (auto st = take(scale_bytes, "the KV cache's scales", *p); !st) return st;
      CUDA_TRY(cudaMemset(*p, 0, scale_bytes));
    }
    kv_bytes_ += 2 * scale_bytes;
  }
  if (int8) {
    const std::size_t shadow = slots * KV * sizeof(bf16);
    for (bf16** p : {&kv_shadow_k_, &kv_shadow_v_})
      if (auto st = take(shadow, "the KV cache's bf16 copy for prompts", *p); !st) return st;
    kv_shadow_bytes_ = 2 * shadow;
  }
  return ok_status();
}

}  // namespace cosmos
