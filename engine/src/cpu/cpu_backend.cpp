#include "cosmos/cpu_backend.h"

#include <omp.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <memory>
#include <string>
#include <vector>

#include <spdlog/spdlog.h>

#include "cosmos/batch_plan.h"
#include "cosmos/checkpoint.h"
#include "cosmos/memory_estimate.h"
#include "cosmos/quant.h"
#include "cosmos/mapped_file.h"
#include "cosmos/quant_cache.h"
#include "cpu/cpu_attention.h"
#include "cpu/cpu_ops.h"

namespace cosmos {
namespace {

using cpu::WeightView;

struct LayerWeights {
  std::vector<float> input_norm, post_norm;  // [hidden] fp32
  WeightView q, k, v, o, gate, up, down;     // [out, in] as stored
  std::vector<float> q_bias, k_bias, v_bias; // [q_dim], [kv_dim], [kv_dim] fp32
};

class CpuBackend final : public Backend {
 public:
  CpuBackend(ModelConfig config, Checkpoint checkpoint, const BackendOptions& options, KvCacheShape kv_shape)
      : config_(std::move(config)), ckpt_(std::move(checkpoint)), options_(options), cache_(kv_shape) {
    threads_ = options.threads > 0 ? options.threads : omp_get_num_procs();
  }

  Status bind_weights();
  // int8 / fp8 / int4: quantizes every linear weight and lm_head (cosmos/quant.h) into owned
  // buffers, rows split over the threads, reporting progress per matrix (false: cancelled).
  Status quantize_weights(QuantFormat format, const std::function<bool(double)>& progress);
  Status prefault_weights(const std::function<bool(double)>& progress) const;
  // Points v at m (now owned here) and counts its bytes.
  void place(WeightView& v, std::unique_ptr<QuantizedMatrix> m);

  std::string_view name() const override { return "cpu"; }
  std::string device_name() const override { return "CPU (" + std::to_string(threads_) + " threads)"; }
  Precision precision() const override { return options_.precision; }
  const ModelConfig& config() const override { return config_; }
  KvCache& kv_cache() override { return cache_; }
  KvFormat kv_format() const override { return options_.kv_format; }
  BackendMemory memory() const override {
    BackendMemory m;
    m.weights = ckpt_.total_bytes() - replaced_bytes_ + quantized_bytes_;
    m.kv_cache = kv_allocated_ ? static_cast<std::uint64_t>(cache_.shape().tokens()) *
                                     kv_bytes_per_token(config_, options_.kv_format, sizeof(float))
                               : 0;
    m.workspace = workspace_bytes_;
    return m;
  }
  Status forward(std::span<const SequenceInput> batch, ForwardOutput& out) override;

 private:
  WeightView view(const std::string& name) const {
    const CheckpointTensor* t = ckpt_.find(name);
    WeightView w;
    w.data = ckpt_.data(*t).data();
    w.dtype = t->info.dtype;
    w.rows = t->info.shape[0];
    w.cols = t->info.shape.size() > 1 ? t->info.shape[1] : 1;
    if (t->info.shape.size() == 1) std::swap(w.rows, w.cols);  // vectors: 1 row
    return w;
  }
  std::vector<float> vec(const std::string& name) const {
    const WeightView w = view(name);
    std::vector<float> out(w.cols);
    cpu::load_row(w, 0, out.data());
    return out;
  }
  // cos/sin of one M-RoPE position: [head_dim] each.
  void rope_tables(const Position3& p, float* cos, float* sin) const;
  // The cache row of token slot `slot` of block `block` (rows: [n_blocks * block_size]).
  std::size_t cache_row(int block, int slot) const {
    return static_cast<std::size_t>(block) * cache_.shape().block_size + slot;
  }
  // Writes token row `row`'s K and V ([kv_heads, head_dim] each) into layer `layer`'s cache.
  void write_kv(int layer, std::size_t row, const float* k, const float* v);

  ModelConfig config_;
  Checkpoint ckpt_;
  BackendOptions options_;
  KvCache cache_;
  int threads_ = 1;
  WeightView embed_, lm_head_;
  std::vector<float> final_norm_;          // [hidden]
  std::vector<LayerWeights> layers_;
  std::vector<float> inv_freq_;            // [head_dim / 2]
  // The KV cache, per layer, by options_.kv_format (cosmos/kv_format.h):
  std::vector<std::vector<float>> k_cache_, v_cache_;  // full: [n_blocks, block_size, kv_heads, head_dim] fp32
  std::vector<std::vector<std::int8_t>> k8_, v8_;      // int8: [n_blocks, block_size, kv_heads, head_dim] int8
  std::vector<std::vector<float>> k_scale_, v_scale_;  // int8: [n_blocks, block_size, kv_heads] fp32
  bool kv_allocated_ = false;
  std::uint64_t workspace_bytes_ = 0;
  std::vector<std::unique_ptr<QuantizedMatrix>> quantized_;  // owned by the views that point to them
  std::uint64_t quantized_bytes_ = 0;  // their bytes
  std::uint64_t replaced_bytes_ = 0;   // the checkpoint bytes they stand in for (untied lm_head and
                                       // linear weights; a tied lm_head's embedding stays in use)
};

Status CpuBackend::quantize_weights(QuantFormat format, const std::function<bool(double)>& progress) {
  std::vector<WeightView*> targets;
  std::vector<std::string> names;  // the checkpoint's names (the cache's keys)
  for (std::size_t l = 0; l < layers_.size(); ++l) {
    LayerWeights& w = layers_[l];
    const std::string p = "model.layers." + std::to_string(l) + ".";
    targets.insert(targets.end(), {&w.q, &w.k, &w.v, &w.o, &w.gate, &w.up, &w.down});
    for (const char* n : {"self_attn.q_proj", "self_attn.k_proj", "self_attn.v_proj", "self_attn.o_proj", "mlp.gate_proj",
                          "mlp.up_proj", "mlp.down_proj"})
      names.push_back(p + n + ".weight");
  }
  targets.push_back(&lm_head_);
  names.push_back(config_.tie_word_embeddings ? "model.embed_tokens.weight" : "lm_head.weight");

  // The cache: a valid file for this checkpoint and precision replaces the quantization.
  std::string fingerprint;
  std::filesystem::path cache_file;
  if (!options_.quant_cache_dir.empty()) {
    if (auto fp = checkpoint_fingerprint(ckpt_)) {
      fingerprint = *fp;
      cache_file = quant_cache_path(options_.quant_cache_dir, fingerprint, options_.precision);
      auto cached = read_quant_cache(cache_file, options_.precision, fingerprint);
      bool complete = cached.ok();
      for (std::size_t i = 0; complete && i < targets.size(); ++i) {
        const auto it = cached->find(names[i]);
        complete = it != cached->end() && it->second.rows == targets[i]->rows && it->second.cols == targets[i]->cols;
      }
      if (complete) {
        for (std::size_t i = 0; i < targets.size(); ++i) {
          auto m = std::make_unique<QuantizedMatrix>(std::move(cached->at(names[i])));
          place(*targets[i], std::move(m));
        }
        spdlog::info("cpu backend: {} weights from the cache {}", to_string(options_.precision), cache_file.string());
        if (progress && !progress(static_cast<double>(targets.size()) / static_cast<double>(targets.size() + 1)))
          return load_cancelled_error();
        return ok_status();
      }
      if (!cached.ok() && cached.error().code != "quant_cache.missing")
        spdlog::warn("cpu backend: quantized-weight cache not used ({}); quantizing again", cached.error().message);
      else if (cached.ok())
        spdlog::warn("cpu backend: quantized-weight cache {} lacks matrices of this model; quantizing again",
                     cache_file.string());
    } else {
      spdlog::warn("cpu backend: no quantized-weight cache: {}", fp.error().message);
    }
  }
  std::uint64_t total = 0;  // what all the quantized matrices take (for an out-of-memory error)
  for (const WeightView* v : targets)
    total += linear_weight_bytes(static_cast<std::uint64_t>(v->rows), static_cast<std::uint64_t>(v->cols),
                                 options_.precision);
  // All the quantized matrices first, over the threads: filling fresh memory costs the kernel a zeroed
  // page per first touch (in a VM, with the host's fault behind it), which one thread paid alone
  // before the quantization of each matrix (docs/PERFORMANCE.md, session 51).
  std::vector<std::unique_ptr<QuantizedMatrix>> made(targets.size());
  std::atomic<bool> no_memory{false};
#pragma omp parallel for num_threads(threads_) schedule(dynamic)
  for (std::size_t i = 0; i < targets.size(); ++i) {
    if (no_memory.load(std::memory_order_relaxed)) continue;
    try {
      made[i] = std::make_unique<QuantizedMatrix>(make_quantized(format, targets[i]->rows, targets[i]->cols));
    } catch (const std::bad_alloc&) {
      no_memory = true;
    }
  }
  if (no_memory) {
    std::uint64_t allocated = 0;
    for (const auto& m : made) allocated += m ? m->bytes() : 0;
    return make_error(ErrorCategory::out_of_memory, "backend.memory",
                      "not enough memory for the " + std::string(to_string(options_.precision)) +
                          " weights: they need " + std::to_string(total >> 20) + " MiB, and the allocation failed after " +
                          std::to_string(allocated >> 20) + " MiB");
  }
  for (std::size_t i = 0; i < targets.size(); ++i) {
    WeightView& v = *targets[i];
    std::unique_ptr<QuantizedMatrix> m = std::move(made[i]);
    prefault_read(v.data, static_cast<std::size_t>(v.rows * v.cols) * dtype_size(v.dtype));  // the source's pages, at once
    // Rows in chunks over the threads; the first error (a non-finite weight) wins.
    constexpr std::int64_t kChunk = 64;
    const std::int64_t chunks = (v.rows + kChunk - 1) / kChunk;
    std::atomic<bool> failed{false};
    Status first = ok_status();
#pragma omp parallel for num_threads(threads_) schedule(dynamic)
    for (std::int64_t c = 0; c < chunks; ++c) {
      if (failed.load(std::memory_order_relaxed)) continue;
      Status st = quantize_rows(v.data, v.dtype, *m, c * kChunk, std::min(v.rows, (c + 1) * kChunk));
      if (!st.ok() && !failed.exchange(true)) first = std::move(st);
    }
    if (failed) return first.error();
    place(v, std::move(m));
    if (progress && !progress(static_cast<double>(i + 1) / static_cast<double>(targets.size() + 1)))
      return load_cancelled_error();
  }
  if (!cache_file.empty()) {
    std::vector<std::pair<std::string, const QuantizedMatrix*>> all;
    for (std::size_t i = 0; i < targets.size(); ++i) all.emplace_back(names[i], targets[i]->quant);
    if (auto st = write_quant_cache(cache_file, options_.precision, fingerprint, all); !st)
      spdlog::warn("cpu backend: could not write the quantized-weight cache: {}", st.error().message);
    else
      spdlog::info("cpu backend: wrote the quantized-weight cache {}", cache_file.string());
  }
  return ok_status();
}

// bf16 / f32 weights stay memory-mapped; without this the first prompt would fault their pages in
// one at a time (in a VM, ~3.5 s of a 7B model's first 10-token reply on 2 cores). Mapping them here,
// a matrix per call, puts that wait in the load, under its progress and cancel. The embedding is left
// to page in by row (one row per token), unless it is also the output matrix.
Status CpuBackend::prefault_weights(const std::function<bool(double)>& progress) const {
  std::vector<const WeightView*> all;
  for (const LayerWeights& w : layers_) all.insert(all.end(), {&w.q, &w.k, &w.v, &w.o, &w.gate, &w.up, &w.down});
  all.push_back(&lm_head_);
  for (std::size_t i = 0; i < all.size(); ++i) {
    const WeightView& v = *all[i];
    prefault_read(v.data, static_cast<std::size_t>(v.rows * v.cols) * dtype_size(v.dtype));
    if (progress && !progress(static_cast<double>(i + 1) / static_cast<double>(all.size() + 1)))
      return load_cancelled_error();
  }
  return ok_status();
}

void CpuBackend::place(WeightView& v, std::unique_ptr<QuantizedMatrix> m) {
  const bool tied = &v == &lm_head_ && config_.tie_word_embeddings;
  if (!tied) replaced_bytes_ += static_cast<std::uint64_t>(v.rows) * v.cols * dtype_size(v.dtype);
  quantized_bytes_ += m->bytes();
  v.quant = m.get();
  quantized_.push_back(std::move(m));
}

Status CpuBackend::bind_weights() {
  embed_ = view("model.embed_tokens.weight");
  lm_head_ = config_.tie_word_embeddings ? embed_ : view("lm_head.weight");
  final_norm_ = vec("model.norm.weight");
  for (int l = 0; l < config_.num_layers; ++l) {
    const std::string p = "model.layers." + std::to_string(l) + ".";
    LayerWeights w;
    w.input_norm = vec(p + "input_layernorm.weight");
    w.post_norm = vec(p + "post_attention_layernorm.weight");
    w.q = view(p + "self_attn.q_proj.weight");
    w.k = view(p + "self_attn.k_proj.weight");
    w.v = view(p + "self_attn.v_proj.weight");
    w.o = view(p + "self_attn.o_proj.weight");
    w.q_bias = vec(p + "self_attn.q_proj.bias");
    w.k_bias = vec(p + "self_attn.k_proj.bias");
    w.v_bias = vec(p + "self_attn.v_proj.bias");
    w.gate = view(p + "mlp.gate_proj.weight");
    w.up = view(p + "mlp.up_proj.weight");
    w.down = view(p + "mlp.down_proj.weight");
    layers_.push_back(std::move(w));
  }
  // inv_freq[j] = theta^(-2j / head_dim), computed in fp32 like transformers.
  const int half = config_.head_dim / 2;
  for (int j = 0; j < half; ++j)
    inv_freq_.push_back(1.0f / std::pow(static_cast<float>(config_.rope_theta),
                                        static_cast<float>(2 * j) / static_cast<float>(config_.head_dim)));
  const auto& s = cache_.shape();
  const std::size_t rows = static_cast<std::size_t>(s.tokens());
  const std::size_t per_layer = rows * config_.kv_dim();
  try {
    if (options_.kv_format == KvFormat::int8) {
      k8_.assign(config_.num_layers, std::vector<std::int8_t>(per_layer));
      v8_.assign(config_.num_layers, std::vector<std::int8_t>(per_layer));
      k_scale_.assign(config_.num_layers, std::vector<float>(rows * config_.num_kv_heads));
      v_scale_.assign(config_.num_layers, std::vector<float>(rows * config_.num_kv_heads));
    } else {
      k_cache_.assign(config_.num_layers, std::vector<float>(per_layer));
      v_cache_.assign(config_.num_layers, std::vector<float>(per_layer));
    }
  } catch (const std::bad_alloc&) {
    const std::uint64_t need = rows * kv_bytes_per_token(config_, options_.kv_format, sizeof(float));
    return make_error(ErrorCategory::out_of_memory, "backend.memory",
                      "not enough memory for a " + std::string(to_string(options_.kv_format)) + " KV cache of " +
                          std::to_string(s.tokens()) + " tokens (" + std::to_string(need >> 20) + " MiB)");
  }
  kv_allocated_ = true;
  return ok_status();
}

void CpuBackend::write_kv(int layer, std::size_t row, const float* k, const float* v) {
  const std::size_t kv = config_.kv_dim();
  if (options_.kv_format == KvFormat::full) {
    std::copy_n(k, kv, k_cache_[layer].data() + row * kv);
    std::copy_n(v, kv, v_cache_[layer].data() + row * kv);
    return;
  }
  const int D = config_.head_dim, heads = config_.num_kv_heads;
  for (int h = 0; h < heads; ++h) {
    const std::size_t at = row * kv + static_cast<std::size_t>(h) * D, sat = row * heads + h;
    k_scale_[layer][sat] = quantize_kv_row(k + static_cast<std::size_t>(h) * D, D, k8_[layer].data() + at);
    v_scale_[layer][sat] = quantize_kv_row(v + static_cast<std::size_t>(h) * D, D, v8_[layer].data() + at);
  }
}

void CpuBackend::rope_tables(const Position3& p, float* cos, float* sin) const {
  const int half = config_.head_dim / 2;
  const auto& sec = config_.mrope_section;
  for (int j = 0; j < half; ++j) {
    // M-RoPE: frequency j takes its position from the t, h or w row by section.
    int which = 0;
    if (sec.size() == 3) which = j < sec[0] ? 0 : (j < sec[0] + sec[1] ? 1 : 2);
    const std::int32_t pos = which == 0 ? p.t : (which == 1 ? p.h : p.w);
    const float f = static_cast<float>(pos) * inv_freq_[j];
    cos[j] = cos[j + half] = std::cos(f);
    sin[j] = sin[j + half] = std::sin(f);
  }
}

Status CpuBackend::forward(std::span<const SequenceInput> batch, ForwardOutput& out) {
  const ModelConfig& c = config_;
  const int H = c.hidden_size, Q = c.q_dim(), KV = c.kv_dim(), FF = c.intermediate_size, D = c.head_dim;
  const auto bs = cache_.shape().block_size;
  out.ran_ahead = false;

  auto planned = plan_batch(batch, cache_, c.vocab_size);
  if (!planned) return planned.error();
  const BatchPlan& plan = *planned;
  const auto& tokens = plan.tokens;
  const int N = static_cast<int>(tokens.size());
  // Activations, all fp32.
  std::vector<float> x(static_cast<std::size_t>(N) * H);     // [N, hidden] residual stream
  std::vector<float> h(static_cast<std::size_t>(N) * H);     // [N, hidden] normed
  std::vector<float> q(static_cast<std::size_t>(N) * Q);     // [N, heads, head_dim]
  std::vector<float> k(static_cast<std::size_t>(N) * KV);    // [N, kv_heads, head_dim]
  std::vector<float> v(static_cast<std::size_t>(N) * KV);    // [N, kv_heads, head_dim]
  std::vector<float> att(static_cast<std::size_t>(N) * Q);   // [N, heads, head_dim]
  std::vector<float> gate(static_cast<std::size_t>(N) * FF); // [N, intermediate]
  std::vector<float> up(static_cast<std::size_t>(N) * FF);   // [N, intermediate]
  std::vector<float> tmp(static_cast<std::size_t>(N) * H);   // [N, hidden] projection output
  std::vector<float> cos(static_cast<std::size_t>(N) * D), sin(static_cast<std::size_t>(N) * D);  // [N, head_dim]
  workspace_bytes_ = (x.size() * 4 + q.size() * 2 + k.size() * 2 + gate.size() * 2) * sizeof(float);

  for (int t = 0; t < N; ++t) {
    const PlannedToken& tok = tokens[t];
    float* xt = x.data() + static_cast<std::size_t>(t) * H;
    if (tok.embedding_row >= 0) {
      std::copy_n(batch[tok.seq_index].embeddings.data() + static_cast<std::size_t>(tok.embedding_row) * H, H, xt);
    } else {
      cpu::load_row(embed_, tok.id, xt);
    }
    rope_tables(tok.position, cos.data() + static_cast<std::size_t>(t) * D, sin.data() + static_cast<std::size_t>(t) * D);
  }

  std::vector<cpu::AttentionQuery> queries(static_cast<std::size_t>(N));  // [N] what each token attends to
  for (int t = 0; t < N; ++t)
    queries[t] = {cache_.block_table(batch[tokens[t].seq_index].seq), tokens[t].cache_index + 1};

  const float eps = static_cast<float>(c.rms_norm_eps);
  for (int l = 0; l < c.num_layers; ++l) {
    const LayerWeights& w = layers_[l];
    cpu::rms_norm(x.data(), w.input_norm.data(), h.data(), N, H, eps);
    cpu::matmul(h.data(), w.q, w.q_bias.data(), q.data(), N, threads_);
    cpu::matmul(h.data(), w.k, w.k_bias.data(), k.data(), N, threads_);
    cpu::matmul(h.data(), w.v, w.v_bias.data(), v.data(), N, threads_);
    for (int t = 0; t < N; ++t) {
      const float* ct = cos.data() + static_cast<std::size_t>(t) * D;
      const float* st = sin.data() + static_cast<std::size_t>(t) * D;
      cpu::apply_rope(q.data() + static_cast<std::size_t>(t) * Q, c.num_heads, D, ct, st);
      cpu::apply_rope(k.data() + static_cast<std::size_t>(t) * KV, c.num_kv_heads, D, ct, st);
      const int slot = tokens[t].slot;
      write_kv(l, cache_row(slot / bs, slot % bs), k.data() + static_cast<std::size_t>(t) * KV,
               v.data() + static_cast<std::size_t>(t) * KV);
    }
    // Causal grouped-query attention over the cache: token t sees cache indices 0..cache_index
    // (cpu/cpu_attention.h: each K/V row read once per group of query heads).
    cpu::KvLayerView view;
    if (options_.kv_format == KvFormat::int8) {
      view.k8 = k8_[l].data();
      view.v8 = v8_[l].data();
      view.k_scale = k_scale_[l].data();
      view.v_scale = v_scale_[l].data();
    } else {
      view.k = k_cache_[l].data();
      view.v = v_cache_[l].data();
    }
    view.kv_heads = c.num_kv_heads;
    view.head_dim = D;
    view.block_size = bs;
    cpu::grouped_attention(view, queries, c.num_heads, q.data(), att.data(), threads_);
    cpu::matmul(att.data(), w.o, nullptr, tmp.data(), N, threads_);
    for (std::size_t i = 0; i < x.size(); ++i) x[i] += tmp[i];
    cpu::rms_norm(x.data(), w.post_norm.data(), h.data(), N, H, eps);
    cpu::matmul(h.data(), w.gate, nullptr, gate.data(), N, threads_);
    cpu::matmul(h.data(), w.up, nullptr, up.data(), N, threads_);
    cpu::silu_mul(gate.data(), up.data(), gate.data(), gate.size());
    cpu::matmul(gate.data(), w.down, nullptr, tmp.data(), N, threads_);
    for (std::size_t i = 0; i < x.size(); ++i) x[i] += tmp[i];
  }

  // Final norm and lm_head for the rows asked for.
  const std::vector<int>& rows = plan.logits_rows;
  out.first_row = plan.first_row;
  std::vector<float> sel(rows.size() * H);  // [rows, hidden]
  for (std::size_t r = 0; r < rows.size(); ++r)
    cpu::rms_norm(x.data() + static_cast<std::size_t>(rows[r]) * H, final_norm_.data(), sel.data() + r * H, 1, H, eps);
  out.vocab = c.vocab_size;
  out.logits.resize(rows.size() * static_cast<std::size_t>(c.vocab_size));
  cpu::matmul(sel.data(), lm_head_, nullptr, out.logits.data(), static_cast<int>(rows.size()), threads_);

  commit_batch(batch, plan, cache_);
  return ok_status();
}

}  // namespace

Result<std::unique_ptr<Backend>> create_cpu_backend(const std::filesystem::path& model_dir,
                                                    const BackendOptions& options) {
  // fp16 is a GPU format (the CPU computes in fp32 from bf16 as fast); the quantized formats cut the
  // bytes each token reads, which is what bounds the CPU too.
  if (options.precision == Precision::fp16)
    return make_error(ErrorCategory::unsupported_model, "backend.precision",
                      "the CPU backend runs bf16, fp8, int8 and int4 weights; fp16 is for the GPU (on the CPU it would "
                      "run no faster than bf16)");
  if (options.context_tokens < 1 || options.context_tokens > (1 << 22))
    return make_error(ErrorCategory::bad_input, "backend.context",
                      "context length " + std::to_string(options.context_tokens) + " is out of range (1..4194304)");
  auto config = load_model_config(model_dir / "config.json");
  if (!config) return config.error();
  auto ckpt = Checkpoint::open(model_dir);
  if (!ckpt) return ckpt.error();
  if (auto st = ckpt->validate_text_model(*config); !st) return st.error();
  KvCacheShape shape;
  shape.n_layers = config->num_layers;
  shape.n_kv_heads = config->num_kv_heads;
  shape.head_dim = config->head_dim;
  shape.block_size = 16;
  shape.n_blocks = (options.context_tokens + shape.block_size - 1) / shape.block_size;
  if (options.progress && !options.progress(0.0)) return load_cancelled_error();
  auto backend = std::make_unique<CpuBackend>(std::move(*config), std::move(*ckpt), options, shape);
  if (auto st = backend->bind_weights(); !st) return st.error();
  if (const auto format = quant_format_for(options.precision)) {
    if (auto st = backend->quantize_weights(*format, options.progress); !st) return st.error();
  } else if (auto st = backend->prefault_weights(options.progress); !st) {
    return st.error();
  }
  if (options.progress && !options.progress(1.0)) return load_cancelled_error();
  spdlog::info("cpu backend: {} from {}, {} weights ({} MiB), {} tokens of {} KV cache ({} MiB)", backend->device_name(),
               model_dir.string(), to_string(options.precision), backend->memory().weights >> 20, shape.tokens(),
               options.kv_format == KvFormat::int8 ? "int8" : "fp32", backend->memory().kv_cache >> 20);
  if (quant_format_for(options.precision))
    spdlog::info("cpu backend: one-token {} products on {}", to_string(options.precision), name(quant_dot_isa()));
  return std::unique_ptr<Backend>(std::move(backend));
}

}  // namespace cosmos
