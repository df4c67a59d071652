// CUDA backend: the quantized-weight cache (cosmos/quant_cache.h), the same files the CPU backend
// reads and writes. A valid file for the checkpoint and precision is read into host memory before
// the weights load, and its matrices are uploaded in place of streaming and quantizing the bf16
// ones (half to a quarter of the bytes to read from disk); without one, the matrices quantized on
// the GPU are copied back and written as a new file after the load. The cache never fails a load:
// a missing, stale or damaged file means quantizing again, a file that cannot be written is a
// warning.
#include <cstring>

#include "cosmos/quant_cache.h"
#include "cuda/cuda_backend_impl.h"

namespace cosmos {

namespace {

std::optional<QuantFormat> host_format(kernels::QuantKind k) {
  switch (k) {
    case kernels::QuantKind::int8_row: return QuantFormat::int8_row;
    case kernels::QuantKind::fp8_row: return QuantFormat::fp8_row;
    case kernels::QuantKind::int4_group: return QuantFormat::int4_group;
  }
  return std::nullopt;
}

}  // namespace

void CudaBackend::read_quant_cache(const WeightSource& src) {
  cached_.clear();
  fingerprint_.clear();
  if (quant_cache_dir_.empty() || !src.ckpt) return;  // no cache asked for, or random weights
  auto fp = checkpoint_fingerprint(*src.ckpt);
  if (!fp) {
    spdlog::warn("cuda backend: no quantized-weight cache: {}", fp.error().message);
    return;
  }
  fingerprint_ = *fp;
  const auto file = quant_cache_path(quant_cache_dir_, fingerprint_, precision_);
  auto cached = cosmos::read_quant_cache(file, precision_, fingerprint_);
  if (!cached) {
    if (cached.error().code != "quant_cache.missing")
      spdlog::warn("cuda backend: quantized-weight cache not used ({}); quantizing again", cached.error().message);
    return;
  }
  // Complete for this model: every linear matrix and lm_head (the names the CPU backend writes).
  const ModelConfig& c = config_;
  std::vector<std::pair<std::string, std::int64_t>> want;  // name, rows (cols checked on upload)
  for (int l = 0; l < c.num_layers; ++l) {
    const std::string p = "model.layers." + std::to_string(l) + ".";
    for (const char* n : {"self_attn.q_proj", "self_attn.k_proj", "self_attn.v_proj", "self_attn.o_proj",
                          "mlp.gate_proj", "mlp.up_proj", "mlp.down_proj"})
      want.emplace_back(p + n + ".weight", -1);
  }
  want.emplace_back(c.tie_word_embeddings ? "model.embed_tokens.weight" : "lm_head.weight", c.vocab_size);
  for (const auto& [name, rows] : want) {
    const auto it = cached->find(name);
    if (it == cached->end() || (rows >= 0 && it->second.rows != rows)) {
      spdlog::warn("cuda backend: quantized-weight cache {} lacks matrices of this model; quantizing again",
                   file.string());
      return;
    }
  }
  cached_ = std::move(*cached);
  spdlog::info("cuda backend: {} weights from the cache {}", to_string(precision_), file.string());
}

Status CudaBackend::upload_cached(const std::string& name, DevMatrix& m, std::size_t row0, std::size_t rows,
                                  std::size_t cols) {
  const QuantizedMatrix& q = cached_.at(name);
  if (q.rows != static_cast<std::int64_t>(rows) || q.cols != static_cast<std::int64_t>(cols) ||
      host_format(m.qm.kind) != q.format)
    return make_error(ErrorCategory::internal, "quant_cache.corrupt",
                      "the cached " + name + " has another shape or format than the model");
  const std::size_t row_bytes = static_cast<std::size_t>(kernels::quant_row_bytes(m.qm.kind, q.cols));
  auto* base = static_cast<std::uint8_t*>(m.data);
  if (auto st = stage_copy(base + row0 * row_bytes, q.q.data(), q.q.size(), kernels::ElemType::bf16); !st) return st;
  if (m.qm.kind == kernels::QuantKind::int4_group) {
    const std::size_t g = static_cast<std::size_t>(q.groups());
    auto* s = reinterpret_cast<std::uint8_t*>(const_cast<std::uint16_t*>(m.qm.group_scale)) + row0 * g * 2;
    auto* mn = reinterpret_cast<std::uint8_t*>(const_cast<std::uint16_t*>(m.qm.group_min)) + row0 * g * 2;
    if (auto st = stage_copy(s, reinterpret_cast<const std::uint8_t*>(q.group_scale.data()), q.group_scale.size() * 2,
                             kernels::ElemType::bf16);
        !st)
      return st;
    if (auto st = stage_copy(mn, reinterpret_cast<const std::uint8_t*>(q.group_min.data()), q.group_min.size() * 2,
                             kernels::ElemType::bf16);
        !st)
      return st;
  } else {
    auto* s = reinterpret_cast<std::uint8_t*>(const_cast<float*>(m.qm.row_scale)) + row0 * sizeof(float);
    if (auto st = stage_copy(s, reinterpret_cast<const std::uint8_t*>(q.row_scale.data()), q.row_scale.size() * 4,
                             kernels::ElemType::bf16);
        !st)
      return st;
  }
  uploaded_ += rows * cols * 2;  // progress counts the bf16 bytes this stands for
  if (progress_ && !progress_(static_cast<double>(uploaded_) / static_cast<double>(std::max<std::uint64_t>(1, to_upload_))))
    return load_cancelled_error();
  return ok_status();
}

void CudaBackend::write_quant_cache(const WeightSource& src) {
  if (quant_cache_dir_.empty() || !src.ckpt || fingerprint_.empty() || !quant_) return;
  const auto format = host_format(*quant_);
  std::vector<std::unique_ptr<QuantizedMatrix>> held;
  std::vector<std::pair<std::string, const QuantizedMatrix*>> all;
  for (const Placed& p : placed_) {
    QuantizedMatrix h;
    try {
      h = make_quantized(*format, static_cast<std::int64_t>(p.rows), static_cast<std::int64_t>(p.cols));
    } catch (const std::bad_alloc&) {
      spdlog::warn("cuda backend: not enough host memory to write the quantized-weight cache");
      return;
    }
    const std::size_t row_bytes = static_cast<std::size_t>(kernels::quant_row_bytes(*quant_, h.cols));
    cudaError_t e = cudaMemcpy(h.q.data(), static_cast<const std::uint8_t*>(p.m.data) + p.row0 * row_bytes, h.q.size(),
                               cudaMemcpyDeviceToHost);
    if (*quant_ == kernels::QuantKind::int4_group) {
      const std::size_t g = static_cast<std::size_t>(h.groups());
      if (e == cudaSuccess)
        e = cudaMemcpy(h.group_scale.data(), p.m.qm.group_scale + p.row0 * g, g * p.rows * 2, cudaMemcpyDeviceToHost);
      if (e == cudaSuccess)
        e = cudaMemcpy(h.group_min.data(), p.m.qm.group_min + p.row0 * g, g * p.rows * 2, cudaMemcpyDeviceToHost);
    } else if (e == cudaSuccess) {
      e = cudaMemcpy(h.row_scale.data(), p.m.qm.row_scale + p.row0, p.rows * 4, cudaMemcpyDeviceToHost);
    }
    if (e != cudaSuccess) {
      spdlog::warn("cuda backend: could not copy the quantized weights back for the cache: {}", cudaGetErrorString(e));
      return;
    }
    held.push_back(std::make_unique<QuantizedMatrix>(std::move(h)));
    all.emplace_back(p.name, held.back().get());
  }
  const auto file = quant_cache_path(quant_cache_dir_, fingerprint_, precision_);
  if (auto st = cosmos::write_quant_cache(file, precision_, fingerprint_, all); !st)
    spdlog::warn("cuda backend: could not write the quantized-weight cache: {}", st.error().message);
  else
    spdlog::info("cuda backend: wrote the quantized-weight cache {}", file.string());
}

}  // namespace cosmos
