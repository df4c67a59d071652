// cosmos-cli bench --batch: decode throughput of many sequences at once. For each batch size B,
// B sequences get a random prompt of `prompt` tokens (prefilled several sequences per pass, up to
// `prefill_tokens` tokens a pass, as continuous batching does), then every step decodes one token
// for all B together (one forward pass: the engine's batched decode step, a captured CUDA graph on
// the GPU). Two untimed steps first (graph capture), then `gen` timed steps. Reports tokens per
// second in all and per stream, and the median step time over `reps`.
#pragma once

#include <random>
#include <vector>

#include <nlohmann/json.hpp>

#include "cosmos/backend.h"
#include "cosmos/error.h"
#include "cosmos/sampler.h"

namespace cosmos::cli {

struct BatchBenchOptions {
  std::vector<int> sizes;     // batch sizes (sequences decoding together)
  int prompt = 128;           // prompt tokens per sequence
  int gen = 128;              // timed decode steps
  int reps = 3;
  int prefill_tokens = 2048;  // tokens per prefill pass
  SamplingParams sampling;    // the same for every sequence (seeded per sequence)
};

// KV-cache tokens the largest batch needs (with a block of slack per sequence).
int batch_bench_context(const BatchBenchOptions& o, int block_size);

// One JSON object per batch size: batch, tok_per_s, per_stream_tok_per_s, ms_per_step,
// context_at_end. Errors: the backend's (out of KV cache: the context was too small).
Result<nlohmann::json> run_batch_bench(Backend& b, const BatchBenchOptions& o, std::mt19937& rng);

}  // namespace cosmos::cli
