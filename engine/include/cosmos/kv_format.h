// How the KV cache stores K and V (the cache's rows are read in full by every decode step, so at
// long contexts they are a large share of the bytes a token reads: docs/PERFORMANCE.md, "A bound no
// kernel moves").
//   full: the backend's own element type, bf16 on the GPU and fp32 on the CPU.
//   int8: each (token, KV head) row of head_dim values as int8 q with one fp32 scale s, x ~ s q:
//         s = max|x| / 127, q = round(x / s). One scale per row keeps the error of a row relative to
//         its own largest value (|x - s q| <= s / 2), and it factors out of both products attention
//         makes: q . k = s_k (q . k_int8) and sum_j p_j v_j = sum_j (p_j s_v,j) v_int8,j.
//         1 + 4 / head_dim bytes per value: 0.52x of bf16 and 0.26x of fp32 at head_dim 128.
#pragma once

#include <cstdint>
#include <optional>
#include <string_view>

#include "cosmos/model_config.h"

namespace cosmos {

enum class KvFormat { full, int8 };

std::string_view to_string(KvFormat f);
std::optional<KvFormat> kv_format_from_string(std::string_view name);  // "full", "int8"

// Bytes one token takes in the KV cache of all layers (K and V, scales included); `full_bytes` is
// the backend's element size for KvFormat::full (2 for bf16, 4 for fp32).
std::uint64_t kv_bytes_per_token(const ModelConfig& config, KvFormat format, int full_bytes);

// One (token, KV head) row x[0..n) to int8: q[0..n) and the returned scale (0 for a zero row, whose
// q is all zeros). A row with a non-finite value gets a NaN scale: the attention's output then shows
// the broken row as it would with the full cache, instead of a quantized row that hides it.
float quantize_kv_row(const float* x, int n, std::int8_t* q);

// x[i] = scale * q[i].
void dequantize_kv_row(const std::int8_t* q, int n, float scale, float* x);

}  // namespace cosmos
