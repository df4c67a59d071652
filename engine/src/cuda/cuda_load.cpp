// CUDA backend: construction, memory, and loading the weights (checkpoint shards streamed through
// pinned staging buffers with the copies overlapping the reads, fp16 converted on the GPU; or the
// test-model generator run on the GPU).
#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <string_view>

#include "cosmos/model_tensors.h"
#include "cosmos/quant.h"
#include "cosmos/test_model.h"
#include "cuda/cuda_backend_impl.h"
#include "kernels/attention.cuh"
#include "kernels/convert_dtype.cuh"
#include "kernels/decode_attention.cuh"
#include "kernels/pdl.cuh"
#include "kernels/quantize.cuh"
#include "kernels/test_weights.cuh"

namespace cosmos {

using kernels::ElemType;

Error cuda_error(cudaError_t e, const char* call, const char* file, int line) {
  return make_error(ErrorCategory::internal, "backend.cuda",
                    std::string(call) + " failed: " + cudaGetErrorString(e) + " (" + file + ":" + std::to_string(line) + ")");
}

CudaBackend::CudaBackend(ModelConfig config, const kernels::GpuInfo& gpu, KvCacheShape shape,
                         const BackendOptions& options)
    : config_(std::move(config)), gpu_(gpu), cache_(shape), precision_(options.precision),
      reference_math_(options.reference_math), kv_format_(options.kv_format), quant_cache_dir_(options.quant_cache_dir),
      tune_cache_dir_(options.tune_cache_dir) {
  wtype_ = precision_ == Precision::fp16 ? ElemType::f16 : ElemType::bf16;
  if (const auto f = quant_format_for(precision_))
    quant_ = *f == QuantFormat::int8_row  ? kernels::QuantKind::int8_row
             : *f == QuantFormat::fp8_row ? kernels::QuantKind::fp8_row
                                          : kernels::QuantKind::int4_group;
  kvtype_ = reference_math_ ? ElemType::f32 : ElemType::bf16;
}

CudaBackend::~CudaBackend() {
  sync_streams();  // also a decode step run ahead
  drop_graphs();
  release_decode_knobs();
  for (auto* events : {&step_done_, &pass_done_, &up_done_})
    for (cudaEvent_t e : *events)
      if (e) cudaEventDestroy(e);
  for (cudaStream_t s : {ids_stream_, up_stream_})
    if (s) cudaStreamDestroy(s);
  for (void* p : allocations_) cudaFree(p);
  for (int i = 0; i < kStageSlots; ++i) {
    if (stage_host_[i]) cudaFreeHost(stage_host_[i]);
    if (stage_done_[i]) cudaEventDestroy(stage_done_[i]);
  }
  for (void* p : {static_cast<void*>(meta_host_), sparams_host_, static_cast<void*>(out_ids_host_), embed_host_})
    if (p) cudaFreeHost(p);
  if (stream_) cudaStreamDestroy(stream_);
}

Error CudaBackend::fail(Error e) {
  failed_ = e.message;
  spdlog::error("cuda backend: {}", e.message);
  return e;
}

BackendMemory CudaBackend::memory() const {
  BackendMemory m;
  m.weights = weight_bytes_;
  m.kv_cache = kv_bytes_;
  m.workspace = workspace_bytes_;
  m.host = host_bytes_;
  m.on_gpu = true;
  return m;
}

Result<void*> CudaBackend::alloc(std::size_t bytes, const char* what) {
  void* p = nullptr;
  const cudaError_t e = cudaMalloc(&p, std::max<std::size_t>(bytes, 16));
  if (e != cudaSuccess) {
    cudaGetLastError();
    std::size_t free_b = 0, total_b = 0;
    cudaMemGetInfo(&free_b, &total_b);
    return make_error(ErrorCategory::out_of_memory, "backend.gpu_memory",
                      std::string("out of GPU memory allocating ") + what + ": needed " + std::to_string(bytes >> 20) +
                          " MiB, " + std::to_string(free_b >> 20) + " MiB free of " + std::to_string(total_b >> 20) +
                          " MiB on " + gpu_.name);
  }
  allocations_.push_back(p);
  return p;
}

void CudaBackend::release(void*& p) {
  if (!p) return;
  cudaFree(p);
  std::erase(allocations_, p);
  p = nullptr;
}

// Copies `bytes` of bf16 from host memory (the mapped checkpoint) to `dst` through the pinned ring:
// while the GPU copies one slot, the CPU fills the next. fp16: the bf16 bytes land in a device
// staging slot and a kernel converts them into dst.
Status CudaBackend::stage_copy(void* dst, const std::uint8_t* src, std::size_t bytes, ElemType type) {
  for (std::size_t off = 0; off < bytes; off += kStageBytes) {
    const std::size_t len = std::min(kStageBytes, bytes - off);
    const int s = stage_next_;
    stage_next_ = (stage_next_ + 1) % kStageSlots;
    CUDA_TRY(cudaEventSynchronize(stage_done_[s]));  // the slot's previous copy has finished
    std::memcpy(stage_host_[s], src + off, len);
    if (type == ElemType::bf16) {
      CUDA_TRY(cudaMemcpyAsync(static_cast<std::uint8_t*>(dst) + off, stage_host_[s], len, cudaMemcpyHostToDevice,
                               stream_));
    } else {
      CUDA_TRY(cudaMemcpyAsync(stage_dev_[s], stage_host_[s], len, cudaMemcpyHostToDevice, stream_));
      kernels::launch_bf16_to_f16(static_cast<const std::uint16_t*>(stage_dev_[s]),
                                  reinterpret_cast<std::uint16_t*>(static_cast<std::uint8_t*>(dst) + off), len / 2,
                                  stream_);
      CUDA_TRY(cudaGetLastError());
    }
    CUDA_TRY(cudaEventRecord(stage_done_[s], stream_));
  }
  return ok_status();
}

namespace {

// The generator's entry for a tensor of the random-weights model (its shape and role, as the file
// writer sees them); null when there is none.
const ExpectedTensor* generated_tensor(const ModelConfig& config, const std::string& name) {
  static thread_local std::vector<ExpectedTensor> tensors;
  static thread_local ModelConfig cached;
  if (tensors.empty() || cached.hidden_size != config.hidden_size || cached.num_layers != config.num_layers ||
      cached.vocab_size != config.vocab_size || cached.intermediate_size != config.intermediate_size) {
    tensors = text_model_tensors(config);
    cached = config;
  }
  const auto it = std::find_if(tensors.begin(), tensors.end(), [&](const ExpectedTensor& t) { return t.name == name; });
  return it == tensors.end() ? nullptr : &*it;
}

// The bf16 bytes of a checkpoint tensor holding `expect_elems` values, or why not.
Result<std::span<const std::byte>> tensor_bytes(const Checkpoint& ckpt, const std::string& name, std::size_t expect_elems) {
  const CheckpointTensor* t = ckpt.find(name);
  if (t->info.dtype != DType::bf16)
    return make_error(ErrorCategory::unsupported_model, "backend.dtype",
                      name + " is " + std::string(dtype_name(t->info.dtype)) +
                          "; the CUDA backend reads bf16 checkpoints (Cosmos-Reason1-7B ships bf16)");
  const auto bytes = ckpt.data(*t);
  if (bytes.size() != expect_elems * 2)
    return make_error(ErrorCategory::unsupported_model, "backend.shape",
                      name + " holds " + std::to_string(bytes.size() / 2) + " values, expected " +
                          std::to_string(expect_elems));
  return bytes;
}

}  // namespace

Status CudaBackend::upload(const WeightSource& src, const std::string& name, void* dst, ElemType type,
                           std::size_t expect_elems) {
  if (progress_ && !progress_(static_cast<double>(uploaded_) / static_cast<double>(std::max<std::uint64_t>(1, to_upload_))))
    return load_cancelled_error();
  if (!src.ckpt) {
    // Generated on the GPU.
    const ExpectedTensor* t = generated_tensor(config_, name);
    if (!t) return make_error(ErrorCategory::internal, "backend.weights", "no generator entry for " + name);
    const TestWeightSpec spec = test_weight_spec(src.random_seed, *t);
    kernels::launch_fill_test_weights(dst, type, t->numel(), spec.key, spec.kind, spec.fan_in, stream_);
    CUDA_TRY(cudaGetLastError());
    uploaded_ += t->numel() * 2;
    return ok_status();
  }
  auto bytes = tensor_bytes(*src.ckpt, name, expect_elems);
  if (!bytes) return bytes.error();
  if (auto st = stage_copy(dst, reinterpret_cast<const std::uint8_t*>(bytes->data()), bytes->size(), type); !st) return st;
  uploaded_ += bytes->size();
  return ok_status();
}

Result<DevMatrix> CudaBackend::alloc_matrix(std::size_t rows, std::size_t cols, const char* what) {
  DevMatrix m;
  auto take = [&](std::size_t bytes) -> Result<void*> {
    auto p = alloc(bytes, what);
    if (p) weight_bytes_ += bytes;
    return p;
  };
  if (!quant_) {
    auto p = take(rows * cols * kernels::elem_size(wtype_));
    if (!p) return p.error();
    m.data = *p;
    return m;
  }
  m.quantized = true;
  m.qm.kind = *quant_;
  auto q = take(rows * static_cast<std::size_t>(kernels::quant_row_bytes(*quant_, static_cast<std::int64_t>(cols))));
  if (!q) return q.error();
  m.data = *q;
  m.qm.q = static_cast<const std::uint8_t*>(*q);
  if (*quant_ == kernels::QuantKind::int4_group) {
    const std::size_t g = rows * static_cast<std::size_t>(kernels::quant_groups(static_cast<std::int64_t>(cols)));
    auto s = take(g * 2);
    if (!s) return s.error();
    auto mn = take(g * 2);
    if (!mn) return mn.error();
    m.qm.group_scale = static_cast<const std::uint16_t*>(*s);
    m.qm.group_min = static_cast<const std::uint16_t*>(*mn);
  } else {
    auto s = take(rows * sizeof(float));
    if (!s) return s.error();
    m.qm.row_scale = static_cast<const float*>(*s);
  }
  return m;
}

Status CudaBackend::upload_matrix(const WeightSource& src, const std::string& name, DevMatrix& m, std::size_t row0,
                                  std::size_t t_rows, std::size_t cols) {
  if (!m.quantized)
    return upload(src, name, static_cast<std::uint8_t*>(m.data) + row0 * cols * kernels::elem_size(wtype_), wtype_,
                  t_rows * cols);
  placed_.push_back(Placed{name, m, row0, t_rows, cols});
  if (cached_.count(name)) return upload_cached(name, m, row0, t_rows, cols);
  // Quantized: bf16 rows into dq_ a chunk at a time, then quantized on the GPU into their place.
  const TestWeightSpec* spec = nullptr;
  TestWeightSpec gen{};
  std::span<const std::byte> bytes;
  if (!src.ckpt) {
    const ExpectedTensor* t = generated_tensor(config_, name);
    if (!t) return make_error(ErrorCategory::internal, "backend.weights", "no generator entry for " + name);
    gen = test_weight_spec(src.random_seed, *t);
    spec = &gen;
  } else {
    auto b = tensor_bytes(*src.ckpt, name, t_rows * cols);
    if (!b) return b.error();
    bytes = *b;
  }
  const std::size_t chunk = std::max<std::size_t>(1, dq_elems_ / cols);
  const auto kind = m.qm.kind;
  const std::size_t row_bytes = static_cast<std::size_t>(kernels::quant_row_bytes(kind, static_cast<std::int64_t>(cols)));
  const std::size_t groups = static_cast<std::size_t>(kernels::quant_groups(static_cast<std::int64_t>(cols)));
  auto* status = static_cast<kernels::QuantStatus*>(qstatus_);
  for (std::size_t r = 0; r < t_rows; r += chunk) {
    if (progress_ && !progress_(static_cast<double>(uploaded_) / static_cast<double>(std::max<std::uint64_t>(1, to_upload_))))
      return load_cancelled_error();
    const std::size_t n = std::min(chunk, t_rows - r);
    if (spec) {
      kernels::launch_fill_test_weights(dq_, ElemType::bf16, n * cols, spec->key, spec->kind, spec->fan_in, stream_,
                                        r * cols);
    } else if (auto st = stage_copy(dq_, reinterpret_cast<const std::uint8_t*>(bytes.data()) + r * cols * 2, n * cols * 2,
                                    ElemType::bf16);
               !st) {
      return st;
    }
    const std::size_t at = row0 + r;  // first row of the chunk in m
    kernels::QuantOut out;
    out.q = static_cast<std::uint8_t*>(m.data) + at * row_bytes;
    if (kind == kernels::QuantKind::int4_group) {
      out.group_scale = const_cast<std::uint16_t*>(m.qm.group_scale) + at * groups;
      out.group_min = const_cast<std::uint16_t*>(m.qm.group_min) + at * groups;
    } else {
      out.row_scale = const_cast<float*>(m.qm.row_scale) + at;
    }
    kernels::launch_quantize(static_cast<const bf16*>(dq_), static_cast<std::int64_t>(n), static_cast<std::int64_t>(cols),
                             kind, out, status, stream_);
    CUDA_TRY(cudaGetLastError());
    kernels::QuantStatus st{};
    CUDA_TRY(cudaMemcpyAsync(&st, status, sizeof st, cudaMemcpyDeviceToHost, stream_));
    CUDA_TRY(cudaStreamSynchronize(stream_));
    // The first bad weight in row-major order, with the CPU quantizer's codes (cosmos::quantize_rows).
    if (st.non_finite != kernels::kQuantNoError || st.out_of_range != kernels::kQuantNoError) {
      const bool nf = st.non_finite <= st.out_of_range;
      const unsigned long long v = nf ? st.non_finite : st.out_of_range;
      const std::string where = "the weight of " + name + " at row " + std::to_string(r + (v >> 32)) + ", column " +
                                std::to_string(v & 0xffffffffull);
      if (nf)
        return make_error(ErrorCategory::bad_input, "quant.non_finite",
                          where + " is not finite: the checkpoint holds a non-finite weight, which cannot be quantized");
      return make_error(ErrorCategory::bad_input, "quant.range",
                        where + " is beyond the +-2^126 that quantized weights hold: the checkpoint looks corrupt");
    }
    uploaded_ += n * cols * 2;
  }
  return ok_status();
}

Status CudaBackend::load(const WeightSource& src, const std::function<bool(double)>& progress) {
  progress_ = progress;
  if (progress_ && !progress_(0.0)) return load_cancelled_error();
  for (const auto& t : text_model_tensors(config_)) to_upload_ += t.numel() * 2;
  CUDA_TRY(cudaSetDevice(gpu_.index));
  CUDA_TRY(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking));
  kernels::set_pdl_enabled(gpu_.sm_major >= 9);
  for (int i = 0; i < kStageSlots; ++i) {
    CUDA_TRY(cudaHostAlloc(&stage_host_[i], kStageBytes, cudaHostAllocDefault));
    CUDA_TRY(cudaEventCreateWithFlags(&stage_done_[i], cudaEventDisableTiming));
    CUDA_TRY(cudaEventRecord(stage_done_[i], stream_));
  }
  const ModelConfig& c = config_;
  const std::size_t H = c.hidden_size, Q = c.q_dim(), KV = c.kv_dim(), FF = c.intermediate_size, V = c.vocab_size;
  const ElemType W = wtype_;
#define TRY_ASSIGN(lhs, expr)      \
  do {                             \
    auto r_ = (expr);              \
    if (!r_) return r_.error();    \
    lhs = *r_;                     \
  } while (0)
#define TRY(expr)                  \
  do {                             \
    auto s_ = (expr);              \
    if (!s_) return s_.error();    \
  } while (0)
  auto weights = [&](std::size_t elems, ElemType t, const char* what) -> Result<void*> {
    auto p = alloc(elems * kernels::elem_size(t), what);
    if (!p) return p.error();
    weight_bytes_ += elems * kernels::elem_size(t);
    return *p;
  };
  if (W == ElemType::f16)
    for (int i = 0; i < kStageSlots; ++i) TRY_ASSIGN(stage_dev_[i], alloc(kStageBytes, "staging"));
  void* p = nullptr;
  if (quant_) {
    read_quant_cache(src);
    // The bf16 rows being quantized while loading, and later a matrix dequantized for a GEMM.
    dq_elems_ = std::max(2 * FF * H, std::max((Q + 2 * KV) * H, H * FF));
    TRY_ASSIGN(dq_, alloc(dq_elems_ * 2, "the dequantization buffer"));
    TRY_ASSIGN(qstatus_, alloc(sizeof(kernels::QuantStatus), "quantization status"));
    // The small-batch kernel's partial sums, for plans that split a matrix's columns over blocks
    // (kernels/gemm_q_small.cuh; the tuned plans do for q/k/v, o and down at 48-64 tokens).
    const int split_rows = static_cast<int>(std::max(Q + 2 * KV, H));
    qsmall_scratch_.partial_floats = kernels::qsmall_scratch_floats(split_rows);
    qsmall_scratch_.ticket_count = kernels::qsmall_scratch_tickets(split_rows);
    TRY_ASSIGN(p, alloc(qsmall_scratch_.partial_floats * 4, "the small-batch kernel's partial sums"));
    qsmall_scratch_.partials = static_cast<float*>(p);
    TRY_ASSIGN(p, alloc(static_cast<std::size_t>(qsmall_scratch_.ticket_count) * 4, "the small-batch kernel's tickets"));
    qsmall_scratch_.tickets = static_cast<unsigned*>(p);
    if (const cudaError_t e = cudaMemset(p, 0, static_cast<std::size_t>(qsmall_scratch_.ticket_count) * 4); e != cudaSuccess)
      return make_error(ErrorCategory::internal, "backend.cuda",
                        std::string("clearing the small-batch kernel's tickets: ") + cudaGetErrorString(e));
  }
  if (quant_) {
    // Quantized formats: the embedding, read one row per token, in pinned host memory that the GPU
    // reads over the bus (1.1 GB less GPU memory: 22% of int4's); GPU memory when pinning fails.
    cudaError_t e = cudaHostAlloc(&embed_host_, V * H * 2, cudaHostAllocMapped);
    if (e == cudaSuccess) e = cudaHostGetDevicePointer(&p, embed_host_, 0);
    if (e != cudaSuccess || !p) {
      cudaGetLastError();
      if (embed_host_) cudaFreeHost(embed_host_);
      embed_host_ = nullptr;
      p = nullptr;
      spdlog::warn("cuda backend: cannot pin {} MiB of host memory for the embedding ({}); it goes to GPU memory",
                   (V * H * 2) >> 20, cudaGetErrorString(e));
    }
  }
  if (embed_host_) {
    host_bytes_ = V * H * 2;
    embed_ = static_cast<bf16*>(p);
    if (src.ckpt) {
      auto bytes = tensor_bytes(*src.ckpt, "model.embed_tokens.weight", V * H);
      if (!bytes) return bytes.error();
      std::memcpy(embed_host_, bytes->data(), bytes->size());
      uploaded_ += bytes->size();
    } else {
      TRY(upload(src, "model.embed_tokens.weight", embed_, ElemType::bf16, V * H));  // the generator writes it
    }
  } else {
    TRY_ASSIGN(p, weights(V * H, ElemType::bf16, "the embedding"));
    embed_ = static_cast<bf16*>(p);
    TRY(upload(src, "model.embed_tokens.weight", embed_, ElemType::bf16, V * H));
  }
  if (quant_) {
    // Quantized like the linear weights (it is read every token), also when tied to the embedding
    // (which then stays bf16 for the gather): as the CPU backend and the memory estimate do.
    TRY_ASSIGN(lm_head_, alloc_matrix(V, H, "lm_head"));
    lm_type_ = ElemType::bf16;
    TRY(upload_matrix(src, c.tie_word_embeddings ? "model.embed_tokens.weight" : "lm_head.weight", lm_head_, 0, V, H));
  } else if (c.tie_word_embeddings) {
    lm_head_.data = embed_;  // shared with the embedding, so it stays bf16
    lm_type_ = ElemType::bf16;
  } else {
    TRY_ASSIGN(lm_head_, alloc_matrix(V, H, "lm_head"));
    lm_type_ = W;
    TRY(upload_matrix(src, "lm_head.weight", lm_head_, 0, V, H));
  }
  TRY_ASSIGN(p, weights(H, ElemType::bf16, "the final norm"));
  final_norm_ = static_cast<bf16*>(p);
  TRY(upload(src, "model.norm.weight", final_norm_, ElemType::bf16, H));
  const std::size_t we = kernels::elem_size(W);
  for (int l = 0; l < c.num_layers; ++l) {
    const std::string pre = "model.layers." + std::to_string(l) + ".";
    CudaLayer L;
    TRY_ASSIGN(p, weights(H, ElemType::bf16, "norms"));
    L.in_norm = static_cast<bf16*>(p);
    TRY(upload(src, pre + "input_layernorm.weight", L.in_norm, ElemType::bf16, H));
    TRY_ASSIGN(p, weights(H, ElemType::bf16, "norms"));
    L.post_norm = static_cast<bf16*>(p);
    TRY(upload(src, pre + "post_attention_layernorm.weight", L.post_norm, ElemType::bf16, H));
    if (W == ElemType::bf16) {
      L.in_norm_w = L.in_norm;
      L.post_norm_w = L.post_norm;
    } else {
      TRY_ASSIGN(L.in_norm_w, weights(H, W, "norms"));
      kernels::launch_bf16_to_f16(reinterpret_cast<const std::uint16_t*>(L.in_norm), static_cast<std::uint16_t*>(L.in_norm_w),
                                  H, stream_);
      TRY_ASSIGN(L.post_norm_w, weights(H, W, "norms"));
      kernels::launch_bf16_to_f16(reinterpret_cast<const std::uint16_t*>(L.post_norm),
                                  static_cast<std::uint16_t*>(L.post_norm_w), H, stream_);
    }
    auto base = [](void* q, std::size_t off) { return static_cast<std::uint8_t*>(q) + off; };
    TRY_ASSIGN(L.qkv, alloc_matrix(Q + 2 * KV, H, "q/k/v weights"));
    TRY(upload_matrix(src, pre + "self_attn.q_proj.weight", L.qkv, 0, Q, H));
    TRY(upload_matrix(src, pre + "self_attn.k_proj.weight", L.qkv, Q, KV, H));
    TRY(upload_matrix(src, pre + "self_attn.v_proj.weight", L.qkv, Q + KV, KV, H));
    TRY_ASSIGN(L.qkv_bias, weights(Q + 2 * KV, W, "q/k/v biases"));
    TRY(upload(src, pre + "self_attn.q_proj.bias", L.qkv_bias, W, Q));
    TRY(upload(src, pre + "self_attn.k_proj.bias", base(L.qkv_bias, Q * we), W, KV));
    TRY(upload(src, pre + "self_attn.v_proj.bias", base(L.qkv_bias, (Q + KV) * we), W, KV));
    TRY_ASSIGN(p, weights(Q + 2 * KV, ElemType::f32, "q/k/v biases"));
    L.qkv_bias_f32 = static_cast<float*>(p);
    if (W == ElemType::bf16)
      kernels::launch_bf16_to_f32(static_cast<const std::uint16_t*>(L.qkv_bias), L.qkv_bias_f32, Q + 2 * KV, stream_);
    else
      kernels::launch_f16_to_f32(static_cast<const std::uint16_t*>(L.qkv_bias), L.qkv_bias_f32, Q + 2 * KV, stream_);
    TRY_ASSIGN(L.o, alloc_matrix(H, Q, "o_proj"));
    TRY(upload_matrix(src, pre + "self_attn.o_proj.weight", L.o, 0, H, Q));
    TRY_ASSIGN(L.gate_up, alloc_matrix(2 * FF, H, "gate/up weights"));
    TRY(upload_matrix(src, pre + "mlp.gate_proj.weight", L.gate_up, 0, FF, H));
    TRY(upload_matrix(src, pre + "mlp.up_proj.weight", L.gate_up, FF, FF, H));
    TRY_ASSIGN(L.down, alloc_matrix(H, FF, "down_proj"));
    TRY(upload_matrix(src, pre + "mlp.down_proj.weight", L.down, 0, H, FF));
    layers_.push_back(L);
  }
  TRY(alloc_kv_cache());
  std::vector<float> inv(c.head_dim / 2);
  for (int j = 0; j < c.head_dim / 2; ++j)
    inv[j] = 1.0f / std::pow(static_cast<float>(c.rope_theta), static_cast<float>(2 * j) / static_cast<float>(c.head_dim));
  TRY_ASSIGN(p, alloc(inv.size() * sizeof(float), "rope tables"));
  inv_freq_ = static_cast<float*>(p);
  CUDA_TRY(cudaMemcpy(inv_freq_, inv.data(), inv.size() * sizeof(float), cudaMemcpyHostToDevice));
  if (kernels::decode_attention_supports(c.num_heads, c.num_kv_heads, c.head_dim)) {
    decode_scratch_bytes_ = 0;  // the largest any decode pass needs (not monotonic in its tokens)
    for (int n = 1; n <= kMaxDecodeBatch; ++n)
      decode_scratch_bytes_ = std::max<std::uint64_t>(
          decode_scratch_bytes_, kernels::decode_attention_scratch_bytes(n, c.num_heads, c.num_kv_heads, c.head_dim));
    TRY_ASSIGN(decode_scratch_, alloc(decode_scratch_bytes_, "attention scratch"));
    CUDA_TRY(cudaMemset(decode_scratch_, 0, decode_scratch_bytes_));
  }
  TRY_ASSIGN(gemm_ws_, alloc(kGemmWorkspace, "GEMM workspace"));
  if (std::string err = gemm_.init(gemm_ws_, kGemmWorkspace); !err.empty())
    return fail(make_error(ErrorCategory::internal, "backend.cuda", err));
  if (const char* env = std::getenv("COSMOS_GEMM_WAVE_FILL"); env && std::string_view(env) == "0") {
    gemm_.set_wave_fill(false);
    spdlog::info("cuda backend: GEMM tuning without wave-fill tiles (COSMOS_GEMM_WAVE_FILL=0)");
  }
  // No timing runs: each GEMM takes cuBLASLt's heuristic choice. For compute-sanitizer runs, where
  // the timing runs would take minutes and measure nothing (tests/gpu/run.sh --sanitize sets it).
  if (const char* env = std::getenv("COSMOS_GEMM_AUTOTUNE"); env && std::string_view(env) == "0") {
    gemm_.set_autotune(false);
    spdlog::info("cuda backend: GEMM tuning off; each prompt GEMM takes cuBLASLt's heuristic choice (COSMOS_GEMM_AUTOTUNE=0)");
  }
  read_tune_cache();
  choose_fp8_gemm();
  // Shared memory for the reference attention over the whole cache (as far as it reaches: a cache
  // beyond attention_max_context() is only made where the flash kernels serve every pass, see
  // module_entry.cpp), set outside any graph capture.
  kernels::prepare_attention(
      static_cast<int>(std::min<std::int64_t>(cache_.shape().tokens(), kernels::attention_max_context())));
  CUDA_TRY(cudaGetLastError());
  CUDA_TRY(cudaStreamSynchronize(stream_));
  for (int i = 0; i < kStageSlots; ++i) {
    cudaFreeHost(stage_host_[i]);
    stage_host_[i] = nullptr;
    release(stage_dev_[i]);
  }
  if (quant_ && cached_.empty()) write_quant_cache(src);
  // The fused decode MLP (bf16 / fp16) reads the down weights transposed: laid out last, through a
  // scratch matrix that is freed again, so it never takes memory the weights or the KV cache needed.
  choose_fused_mlp();
  if (fused_mlp_) {
    const std::size_t bytes = H * FF * kernels::elem_size(W);
    if (auto sp = alloc(bytes, "the transpose scratch"); sp) {
      void* scratch = *sp;
      for (CudaLayer& L : layers_) TRY(transpose_down(L.down, scratch));
      CUDA_TRY(cudaStreamSynchronize(stream_));
      release(scratch);
    } else {
      fused_mlp_ = false;
      spdlog::warn("cuda backend: decode MLP as two kernels: no GPU memory to lay out its weights ({})",
                   sp.error().message);
    }
  }
  TRY(choose_att_sums());
  choose_act16();
  choose_prefill_attention();
  choose_fused_swiglu();
  choose_qsmall();
  choose_decode_ahead();
  choose_graphs();
  cached_.clear();
  placed_.clear();
  if (progress_ && !progress_(1.0)) return load_cancelled_error();
  progress_ = nullptr;
  if (auto st = ensure_workspace(64, 1); !st) return st;
  setup_decode_tuning();  // plans with the workspace's pointers
  return ok_status();
#undef TRY_ASSIGN
#undef TRY
}

// fp8 weights: prefill products on fp8 tensor cores (sm_89+) when cuBLASLt has an algorithm with
// outer-vector scales for every layer shape; otherwise the weights are dequantized to bf16 for each
// product, and the log says why.
void CudaBackend::choose_fp8_gemm() {
  fp8_gemm_ = false;
  if (quant_ != kernels::QuantKind::fp8_row || reference_math_) return;
  if (gpu_.sm_major * 10 + gpu_.sm_minor < 89) {
    spdlog::info("cuda backend: {} (sm_{}{}) has no fp8 tensor cores; fp8 prefill dequantizes the weights to bf16",
                 gpu_.name, gpu_.sm_major, gpu_.sm_minor);
    return;
  }
  const ModelConfig& c = config_;
  const int H = c.hidden_size, Q = c.q_dim(), KV = c.kv_dim(), FF = c.intermediate_size;
  struct Shape {
    int rows, cols;
    bool accumulate;
    ElemType out;
  };
  for (const Shape& s : {Shape{Q + 2 * KV, H, false, ElemType::f32}, Shape{H, Q, true, ElemType::f32},
                         Shape{2 * FF, H, false, wtype_}, Shape{H, FF, true, ElemType::f32}}) {
    if (std::string err = gemm_.probe_fp8(512, s.rows, s.cols, s.accumulate, s.out); !err.empty()) {
      spdlog::warn("cuda backend: fp8 prefill dequantizes the weights to bf16: no fp8 tensor-core product for {}x{} ({})",
                   s.rows, s.cols, err);
      return;
    }
  }
  fp8_gemm_ = true;
  spdlog::info("cuda backend: fp8 prefill on fp8 tensor cores (E4M3 weights and per-token E4M3 activations)");
}

Status CudaBackend::ensure_workspace(int tokens, int rows) {
  if (tokens <= ws_tokens_ && rows <= ws_rows_) return ok_status();
  tokens = std::max(tokens, ws_tokens_);
  // Logits rows in powers of two: a decode batch growing one sequence at a time reallocates (and
  // drops its graphs) rarely.
  int rows_cap = 4;
  while (rows_cap < rows) rows_cap *= 2;
  rows = std::max(rows_cap, ws_rows_);
  drop_graphs();
  for (void** p : {reinterpret_cast<void**>(&x_), &h_, reinterpret_cast<void**>(&qkv_), &q_, &att_,
                   reinterpret_cast<void**>(&gu_), &act_, reinterpret_cast<void**>(&sel_), reinterpret_cast<void**>(&xm_),
                   reinterpret_cast<void**>(&logits_)})
    release(*p);
  const ModelConfig& c = config_;
  const std::size_t T = tokens, H = c.hidden_size, Q = c.q_dim(), KV = c.kv_dim(), FF = c.intermediate_size;
  struct Buf {
    void** p;
    std::size_t floats;
  };
  const Buf bufs[] = {{reinterpret_cast<void**>(&x_), T * H},
                      {&h_, T * H},
                      {reinterpret_cast<void**>(&qkv_), T * (Q + 2 * KV)},
                      {&q_, T * Q},
                      {&att_, T * Q},
                      {reinterpret_cast<void**>(&gu_), T * 2 * FF},
                      {&act_, T * FF},
                      {reinterpret_cast<void**>(&sel_), rows * H},
                      {reinterpret_cast<void**>(&xm_), H},
                      {reinterpret_cast<void**>(&logits_), static_cast<std::size_t>(rows) * c.vocab_size}};
  workspace_bytes_ = kv_shadow_bytes_ + decode_scratch_bytes_ + att_sums_bytes_ + kGemmWorkspace + sample_ws_bytes_ +
                     dq_elems_ * 2 + qsmall_scratch_.partial_floats * 4 + static_cast<std::size_t>(qsmall_scratch_.ticket_count) * 4;
  for (const Buf& b : bufs) {
    auto p = alloc(b.floats * sizeof(float), "activations");
    if (!p) return p.error();
    *b.p = *p;
    workspace_bytes_ += b.floats * sizeof(float);
  }
  ws_tokens_ = tokens;
  ws_rows_ = rows;
  return ok_status();
}

Result<std::unique_ptr<Backend>> load_cuda_backend(ModelConfig config, const kernels::GpuInfo& gpu, KvCacheShape shape,
                                                   const Checkpoint* ckpt, const BackendOptions& options) {
  if (options.reference_math && options.precision != Precision::bf16)
    return make_error(ErrorCategory::bad_input, "backend.precision", "reference math runs bf16 weights only");
  WeightSource src;
  src.ckpt = ckpt;
  if (!ckpt) {
    if (!options.random_weights)
      return make_error(ErrorCategory::internal, "backend.weights", "no checkpoint and no random-weights seed");
    src.random_seed = *options.random_weights;
  }
  auto backend = std::make_unique<CudaBackend>(std::move(config), gpu, shape, options);
  if (auto st = backend->load(src, options.progress); !st) return st.error();
  return std::unique_ptr<Backend>(std::move(backend));
}

}  // namespace cosmos
