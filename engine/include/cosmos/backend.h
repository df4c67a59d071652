// The backend interface: runs the Qwen2.5-VL text decoder for a batch of sequences of different
// lengths over a paged KV cache and returns logits. `cpu` is the reference; `cuda` follows.
#pragma once

#include <cstdint>
#include <filesystem>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "cosmos/error.h"
#include "cosmos/kv_cache.h"
#include "cosmos/kv_format.h"
#include "cosmos/model_config.h"
#include "cosmos/precision.h"
#include "cosmos/sampler.h"
#include "cosmos/tokenizer.h"

namespace cosmos {

// M-RoPE position of one token: temporal, height, width. Text tokens have t == h == w == index.
struct Position3 {
  std::int32_t t = 0, h = 0, w = 0;
  static Position3 text(std::int32_t p) { return {p, p, p}; }
  bool operator==(const Position3&) const = default;
};

// New tokens of one sequence for one forward pass. They are appended after the sequence's cached
// tokens (KvCache::length) and attend to all of them (causal).
struct SequenceInput {
  SeqId seq = 0;
  std::vector<TokenId> tokens;         // [n] ids (ignored where embedding_row >= 0)
  std::vector<Position3> positions;    // [n]; empty: text positions length .. length + n - 1
  // Input embeddings in place of ids (images, video): embedding_rows[i] >= 0 selects row
  // embedding_rows[i] of `embeddings` for token i. Empty: all tokens use ids.
  std::vector<int> embedding_rows;     // [n] or empty
  std::span<const float> embeddings;   // [rows, hidden] fp32
  bool all_logits = false;             // logits for every new token, else only the last
  // Sample the next token on the device (backends where samples_on_device()) instead of returning
  // logits: the last token's logits go through `sampling` (same processors as cosmos::Sampler) with
  // `history` for the repetition penalty, and ForwardOutput::sampled gets the id. Needs
  // !all_logits; in one batch either every sequence sets it or none.
  const SamplingParams* sampling = nullptr;
  std::span<const TokenId> history;
  std::uint64_t sample_step = 0;       // the draw's counter: same seed + step, same draw
};

struct ForwardOutput {
  // Logits rows in batch order: for each sequence, n rows if all_logits else 1.
  std::vector<float> logits;           // [rows, vocab] fp32
  std::vector<int> first_row;          // [n_seqs] index of each sequence's first row
  int vocab = 0;
  // When the batch asked for device sampling: the sampled id per sequence (logits then empty).
  std::vector<TokenId> sampled;        // [n_seqs]
  // The CUDA backend submitted this step before the call asked for it (a decode step run ahead of
  // the host: same results, no GPU idle time between steps).
  bool ran_ahead = false;
  std::span<const float> row(int r) const {
    return {logits.data() + static_cast<std::size_t>(r) * vocab, static_cast<std::size_t>(vocab)};
  }
};

struct BackendMemory {
  std::uint64_t weights = 0;   // bytes held for weights (mapped or copied)
  std::uint64_t kv_cache = 0;  // bytes of KV storage
  std::uint64_t workspace = 0;
  std::uint64_t host = 0;      // GPU backends: pinned host memory the GPU reads (the embedding of quantized formats)
  bool on_gpu = false;
};

class Backend {
 public:
  virtual ~Backend() = default;
  virtual std::string_view name() const = 0;      // "cpu", "cuda"
  virtual std::string device_name() const = 0;    // e.g. "CPU (16 threads)"
  virtual Precision precision() const = 0;
  virtual const ModelConfig& config() const = 0;
  virtual KvCache& kv_cache() = 0;
  virtual KvFormat kv_format() const { return KvFormat::full; }
  virtual BackendMemory memory() const = 0;
  // True when forward() can sample on the device (SequenceInput::sampling).
  virtual bool samples_on_device() const { return false; }

  // Runs the batch: writes K/V of the new tokens into the cache (reserving blocks), advances each
  // sequence's length, and fills `out`. On error no sequence length changes.
  virtual Status forward(std::span<const SequenceInput> batch, ForwardOutput& out) = 0;

  // Decode launch tuning (cosmos/decode_tuner.h; the CUDA backend's quantized one-token products):
  // the variants worth timing on this GPU, each one knob of one product as
  // "ROWSxCOLS/key=value" (kernels/qgemv_tuning_spec.h); empty where the backend has none.
  virtual std::vector<std::string> decode_tuning_candidates() const { return {}; }
  // The knobs the one-token products launch with (a spec as above, several entries joined by ';';
  // empty: the automatic plan). Setting one re-plans the next decode step; results stay within the
  // kernels' accumulation tolerance of the automatic plan. Errors: "tuning.unsupported" (this
  // backend or precision has no such knobs), "tuning.spec" (a spec that does not parse),
  // "tuning.inconsistent" (a variant that would change a product's input format, which only a
  // reload can; the knobs in force stay as they were).
  virtual Status set_decode_tuning(std::string_view spec) {
    if (spec.empty()) return ok_status();
    return make_error(ErrorCategory::bad_input, "tuning.unsupported",
                      std::string(name()) + " backend: no decode launch knobs to set");
  }
  virtual std::string decode_tuning() const { return {}; }
  // Where the tuning saved for this GPU and precision is kept (cosmos/tune_cache.h); empty: not
  // saved (no tuning cache directory, or no knobs).
  virtual std::filesystem::path decode_tuning_file() const { return {}; }
  virtual std::string decode_tuning_identity() const { return {}; }
};

struct BackendOptions {
  int context_tokens = 8192;  // KV-cache capacity in tokens (all sequences together)
  int threads = 0;            // CPU threads; 0: all cores
  Precision precision = Precision::bf16;
  // How the KV cache stores K and V (cosmos/kv_format.h): int8 takes about half the bytes of bf16
  // (a quarter of the CPU's fp32), which long contexts read at every decode step.
  KvFormat kv_format = KvFormat::full;
  // int8 / fp8 / int4: where quantized weights are cached between loads (cosmos/quant_cache.h);
  // empty: no cache (quantize at every load).
  std::filesystem::path quant_cache_dir;
  // CUDA: where the GEMM tuner's choices are kept between loads (cosmos/tune_cache.h); empty: none
  // (each load times the candidates of a size class at its first long prompt again).
  std::filesystem::path tune_cache_dir;
  // Load progress (0..1, as weights are placed); returning false cancels the load, which then
  // fails with category `cancelled`, code "load.cancelled".
  std::function<bool(double fraction)> progress;
  // CUDA: fp32 KV cache and fp32 CUDA-core matmuls for prefill instead of the bf16 KV cache and
  // tensor-core GEMMs (slow; for tests against fp32 references). bf16 only.
  bool reference_math = false;
  // CUDA: fill the weights on the GPU with the test-model generator (cosmos/test_model.h) for this
  // seed instead of reading a checkpoint; the model folder then needs only config.json (benchmarks).
  std::optional<std::uint64_t> random_weights;
};

inline Error load_cancelled_error() {
  return make_error(ErrorCategory::cancelled, "load.cancelled", "loading was cancelled");
}

}  // namespace cosmos
