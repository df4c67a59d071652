// GPU memory needed to run a model at a precision with a context length: the estimator the app
// shows next to each precision and `auto` uses to choose one. Assumptions (kept in one place):
// - linear weights (q/k/v/o, gate/up/down) in the chosen format; fp8/int8 carry one fp32 scale per
//   output row; int4 carries a bf16 scale and a bf16 zero point per group of 128 weights;
// - lm_head is quantized like the linear weights (it is read every token; in int4 it would
//   otherwise be a quarter of the bytes read); the embedding stays bf16 (one row per token);
// - on the GPU (EstimateOptions::gpu) a quantized format keeps the embedding in pinned host memory
//   (`host`, not part of total()): it is read one row per token, and it would be 22% of int4's GPU
//   memory; bf16 / fp16 keep it on the GPU;
// - norms and biases stay bf16; the KV cache is bf16 on the GPU and fp32 on the CPU, or int8 with an
//   fp32 scale per (token, KV head) row (EstimateOptions::kv_format, cosmos/kv_format.h);
// - workspace: activations of one prefill chunk plus fp32 logits and a 32 MiB GEMM workspace; for
//   a quantized format also the gate/up matrix in bf16 (the GPU dequantizes into it for prefill GEMMs);
//   with the int8 KV cache on the GPU, one layer's K and V in bf16 (the prefill attention reads them).
#pragma once

#include <cstdint>
#include <optional>
#include <span>

#include "cosmos/kv_format.h"
#include "cosmos/model_config.h"
#include "cosmos/precision.h"

namespace cosmos {

struct MemoryEstimate {
  std::uint64_t linear_weights = 0;  // q/k/v/o + MLP of all layers
  std::uint64_t lm_head = 0;
  std::uint64_t embedding = 0;
  std::uint64_t small = 0;           // norms and biases
  std::uint64_t kv_cache = 0;        // [layers, 2, kv_heads, context, head_dim] (+ scales for int8)
  std::uint64_t workspace = 0;
  std::uint64_t host = 0;            // pinned host memory the GPU reads (the embedding of quantized formats)
  std::uint64_t weights() const { return linear_weights + lm_head + embedding + small; }
  std::uint64_t total() const { return weights() + kv_cache + workspace; }
};

struct EstimateOptions {
  int context_tokens = 8192;
  int batch = 1;
  int prefill_chunk = 2048;
  bool gpu = true;  // the CUDA backend's memory (false: the CPU backend's, all of it host memory)
  KvFormat kv_format = KvFormat::full;
};

MemoryEstimate estimate_memory(const ModelConfig& config, Precision precision, const EstimateOptions& options = {});

// Bytes of `rows x cols` linear weights stored in `precision` (scales included).
std::uint64_t linear_weight_bytes(std::uint64_t rows, std::uint64_t cols, Precision precision);

// The first of `candidates` (give them most accurate first, e.g. from kPrecisionsByAccuracy) whose
// estimate for `options` fits in `budget` bytes; nullopt when none does.
std::optional<Precision> most_accurate_that_fits(const ModelConfig& config, const EstimateOptions& options,
                                                 std::uint64_t budget, std::span<const Precision> candidates);

// Bytes of host memory available now (MemAvailable in /proc/meminfo); 0 when unknown.
std::uint64_t available_host_memory();

}  // namespace cosmos
