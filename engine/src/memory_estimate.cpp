#include "cosmos/memory_estimate.h"

#include "cosmos/model_tensors.h"

#include <algorithm>
#include <fstream>
#include <sstream>
#include <string>

namespace cosmos {

std::string_view to_string(Precision p) {
  switch (p) {
    case Precision::bf16: return "bf16";
    case Precision::fp16: return "fp16";
    case Precision::fp8: return "fp8";
    case Precision::int8: return "int8";
    case Precision::int4: return "int4";
  }
  return "?";
}

std::optional<Precision> precision_from_string(std::string_view name) {
  for (Precision p : kAllPrecisions)
    if (to_string(p) == name) return p;
  return std::nullopt;
}

std::uint64_t linear_weight_bytes(std::uint64_t rows, std::uint64_t cols, Precision precision) {
  constexpr std::uint64_t kGroup = 128;
  switch (precision) {
    case Precision::bf16:
    case Precision::fp16: return rows * cols * 2;
    case Precision::fp8:
    case Precision::int8: return rows * cols + rows * 4;  // fp32 scale per output row
    case Precision::int4: {
      const std::uint64_t groups = (cols + kGroup - 1) / kGroup;
      return rows * ((cols + 1) / 2) + rows * groups * 4;  // bf16 scale + bf16 zero per group
    }
  }
  return 0;
}

MemoryEstimate estimate_memory(const ModelConfig& c, Precision precision, const EstimateOptions& o) {
  MemoryEstimate e;
  const bool quantized = precision != Precision::bf16 && precision != Precision::fp16;
  for (const ExpectedTensor& t : text_model_tensors(c)) {
    switch (t.role) {
      case TensorRole::attn_weight:
      case TensorRole::mlp_weight:
        e.linear_weights += linear_weight_bytes(t.shape[0], t.shape[1], precision);
        break;
      case TensorRole::lm_head:
        e.lm_head += linear_weight_bytes(t.shape[0], t.shape[1], precision);
        break;
      case TensorRole::embedding:
        (o.gpu && quantized ? e.host : e.embedding) += t.numel() * 2;
        break;
      default:
        e.small += t.numel() * 2;
        break;
    }
  }
  const std::uint64_t ctx = static_cast<std::uint64_t>(o.context_tokens) * o.batch;
  e.kv_cache = ctx * kv_bytes_per_token(c, o.kv_format, o.gpu ? 2 : 4);
  // One prefill chunk: hidden in/out, q/k/v, attention out, gate/up/act (bf16), and fp32 logits of
  // the last position of each sequence.
  const std::uint64_t chunk = o.prefill_chunk;
  const std::uint64_t per_token = 3ull * c.hidden_size + c.q_dim() + 2ull * c.kv_dim() + 3ull * c.intermediate_size;
  e.workspace = chunk * per_token * 2 + static_cast<std::uint64_t>(o.batch) * c.vocab_size * 4 + (32ull << 20);
  // Quantized formats on the GPU: the largest layer matrix (gate/up) dequantized to bf16 for the
  // prefill GEMMs.
  if (o.gpu && quantized) e.workspace += 2ull * c.intermediate_size * c.hidden_size * 2;
  // The int8 KV cache on the GPU: one layer's K and V expanded to bf16 for the prefill attention.
  if (o.gpu && o.kv_format == KvFormat::int8) e.workspace += 2ull * c.kv_dim() * ctx * 2;
  // ... and the small-batch kernel's fp32 partial sums: 16 column splits x 64 tokens x the larger of q/k/v's
  // rows and the hidden size (kernels/gemm_q_small.cuh, qsmall_scratch_floats).
  if (o.gpu && quantized)
    e.workspace += 16ull * 64 * std::max<std::uint64_t>(c.q_dim() + 2ull * c.kv_dim(), c.hidden_size) * 4;
  return e;
}

std::optional<Precision> most_accurate_that_fits(const ModelConfig& config, const EstimateOptions& options,
                                                 std::uint64_t budget, std::span<const Precision> candidates) {
  for (Precision p : candidates)
    if (estimate_memory(config, p, options).total() <= budget) return p;
  return std::nullopt;
}

std::uint64_t available_host_memory() {
  std::ifstream f("/proc/meminfo");
  std::string line;
  while (std::getline(f, line)) {
    if (line.rfind("MemAvailable:", 0) != 0) continue;
    std::istringstream in(line.substr(13));
    std::uint64_t kib = 0;
    in >> kib;
    return kib * 1024;
  }
  return 0;
}

}  // namespace cosmos
