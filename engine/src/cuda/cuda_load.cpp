// CUDA backend: construction, memory, and loading the weights (checkpoint shards streamed through
// pinned staging buffers with the copies overlapping the reads, fp16 converted on the GPU; or the
// test-model generator run on the GPU).
#include <algorithm>
#include <cmath>
#include <cstring>

#include "cosmos/model_tensors.h"
#include "cosmos/test_model.h"
#include "cuda/cuda_backend_impl.h"
#include "kernels/attention.cuh"
#include "kernels/convert_dtype.cuh"
#include "kernels/decode_attention.cuh"
#include "kernels/pdl.cuh"
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
      reference_math_(options.reference_math) {
  wtype_ = precision_ == Precision::fp16 ? ElemType::f16 : ElemType::bf16;
  kvtype_ = reference_math_ ? ElemType::f32 : ElemType::bf16;
}

CudaBackend::~CudaBackend() {
  drop_graphs();
  if (stream_) cudaStreamSynchronize(stream_);
  for (void* p : allocations_) cudaFree(p);
  for (int i = 0; i < kStageSlots; ++i) {
    if (stage_host_[i]) cudaFreeHost(stage_host_[i]);
    if (stage_done_[i]) cudaEventDestroy(stage_done_[i]);
  }
  for (void* p : {static_cast<void*>(meta_host_), sparams_host_, static_cast<void*>(out_ids_host_)})
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

Status CudaBackend::upload(const WeightSource& src, const std::string& name, void* dst, ElemType type,
                           std::size_t expect_elems) {
  if (progress_ && !progress_(static_cast<double>(uploaded_) / static_cast<double>(std::max<std::uint64_t>(1, to_upload_))))
    return load_cancelled_error();
  if (!src.ckpt) {
    // Generated on the GPU: find the tensor's shape and role as the file writer does.
    static thread_local std::vector<ExpectedTensor> tensors;
    if (tensors.empty() || tensors.front().shape.size() != 2 ||
        tensors.front().shape[1] != config_.hidden_size)
      tensors = text_model_tensors(config_);
    const auto it = std::find_if(tensors.begin(), tensors.end(), [&](const ExpectedTensor& t) { return t.name == name; });
    if (it == tensors.end())
      return make_error(ErrorCategory::internal, "backend.weights", "no generator entry for " + name);
    const TestWeightSpec spec = test_weight_spec(src.random_seed, *it);
    kernels::launch_fill_test_weights(dst, type, it->numel(), spec.key, spec.kind, spec.fan_in, stream_);
    CUDA_TRY(cudaGetLastError());
    uploaded_ += it->numel() * 2;
    return ok_status();
  }
  const CheckpointTensor* t = src.ckpt->find(name);
  if (t->info.dtype != DType::bf16)
    return make_error(ErrorCategory::unsupported_model, "backend.dtype",
                      name + " is " + std::string(dtype_name(t->info.dtype)) +
                          "; the CUDA backend reads bf16 checkpoints (Cosmos-Reason1-7B ships bf16)");
  const auto bytes = src.ckpt->data(*t);
  if (bytes.size() != expect_elems * 2)
    return make_error(ErrorCategory::unsupported_model, "backend.shape",
                      name + " holds " + std::to_string(bytes.size() / 2) + " values, expected " +
                          std::to_string(expect_elems));
  if (auto st = stage_copy(dst, reinterpret_cast<const std::uint8_t*>(bytes.data()), bytes.size(), type); !st) return st;
  uploaded_ += bytes.size();
  return ok_status();
}

Status CudaBackend::load(const WeightSource& src, const std::function<bool(double)>& progress) {
  progress_ = progress;
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
  TRY_ASSIGN(p, weights(V * H, ElemType::bf16, "the embedding"));
  embed_ = static_cast<bf16*>(p);
  TRY(upload(src, "model.embed_tokens.weight", embed_, ElemType::bf16, V * H));
  if (c.tie_word_embeddings) {
    lm_head_ = embed_;  // shared with the embedding, so it stays bf16
    lm_type_ = ElemType::bf16;
  } else {
    TRY_ASSIGN(lm_head_, weights(V * H, W, "lm_head"));
    lm_type_ = W;
    TRY(upload(src, "lm_head.weight", lm_head_, W, V * H));
  }
  TRY_ASSIGN(p, weights(H, ElemType::bf16, "the final norm"));
  final_norm_ = static_cast<bf16*>(p);
  TRY(upload(src, "model.norm.weight", final_norm_, ElemType::bf16, H));
  const auto& s = cache_.shape();
  const std::size_t slots = static_cast<std::size_t>(s.n_blocks) * s.block_size;
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
    TRY_ASSIGN(L.qkv, weights((Q + 2 * KV) * H, W, "q/k/v weights"));
    TRY(upload(src, pre + "self_attn.q_proj.weight", L.qkv, W, Q * H));
    TRY(upload(src, pre + "self_attn.k_proj.weight", base(L.qkv, Q * H * we), W, KV * H));
    TRY(upload(src, pre + "self_attn.v_proj.weight", base(L.qkv, (Q + KV) * H * we), W, KV * H));
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
    TRY_ASSIGN(L.o, weights(H * Q, W, "o_proj"));
    TRY(upload(src, pre + "self_attn.o_proj.weight", L.o, W, H * Q));
    TRY_ASSIGN(L.gate_up, weights(2 * FF * H, W, "gate/up weights"));
    TRY(upload(src, pre + "mlp.gate_proj.weight", L.gate_up, W, FF * H));
    TRY(upload(src, pre + "mlp.up_proj.weight", base(L.gate_up, FF * H * we), W, FF * H));
    TRY_ASSIGN(L.down, weights(H * FF, W, "down_proj"));
    TRY(upload(src, pre + "mlp.down_proj.weight", L.down, W, H * FF));
    const std::size_t kv_bytes = slots * KV * kernels::elem_size(kvtype_);
    TRY_ASSIGN(L.k_cache, alloc(kv_bytes, "the KV cache"));
    TRY_ASSIGN(L.v_cache, alloc(kv_bytes, "the KV cache"));
    kv_bytes_ += 2 * kv_bytes;
    layers_.push_back(L);
  }
  std::vector<float> inv(c.head_dim / 2);
  for (int j = 0; j < c.head_dim / 2; ++j)
    inv[j] = 1.0f / std::pow(static_cast<float>(c.rope_theta), static_cast<float>(2 * j) / static_cast<float>(c.head_dim));
  TRY_ASSIGN(p, alloc(inv.size() * sizeof(float), "rope tables"));
  inv_freq_ = static_cast<float*>(p);
  CUDA_TRY(cudaMemcpy(inv_freq_, inv.data(), inv.size() * sizeof(float), cudaMemcpyHostToDevice));
  if (kernels::decode_attention_supports(c.num_heads, c.num_kv_heads, c.head_dim)) {
    decode_scratch_bytes_ = kernels::decode_attention_scratch_bytes(kDecodeTokens, c.num_heads, c.num_kv_heads, c.head_dim);
    TRY_ASSIGN(decode_scratch_, alloc(decode_scratch_bytes_, "attention scratch"));
    CUDA_TRY(cudaMemset(decode_scratch_, 0, decode_scratch_bytes_));
  }
  TRY_ASSIGN(gemm_ws_, alloc(kGemmWorkspace, "GEMM workspace"));
  if (std::string err = gemm_.init(gemm_ws_, kGemmWorkspace); !err.empty())
    return fail(make_error(ErrorCategory::internal, "backend.cuda", err));
  // Shared memory for the reference attention over the whole cache, set outside any graph capture.
  kernels::prepare_attention(static_cast<int>(cache_.shape().tokens()));
  CUDA_TRY(cudaGetLastError());
  CUDA_TRY(cudaStreamSynchronize(stream_));
  for (int i = 0; i < kStageSlots; ++i) {
    cudaFreeHost(stage_host_[i]);
    stage_host_[i] = nullptr;
    release(stage_dev_[i]);
  }
  if (progress_ && !progress_(1.0)) return load_cancelled_error();
  progress_ = nullptr;
  return ensure_workspace(64, 1);
#undef TRY_ASSIGN
#undef TRY
}

Status CudaBackend::ensure_workspace(int tokens, int rows) {
  if (tokens <= ws_tokens_ && rows <= ws_rows_) return ok_status();
  tokens = std::max(tokens, ws_tokens_);
  rows = std::max(rows, ws_rows_);
  drop_graphs();
  for (void** p : {reinterpret_cast<void**>(&x_), &h_, reinterpret_cast<void**>(&qkv_), &q_, &att_,
                   reinterpret_cast<void**>(&gu_), &act_, reinterpret_cast<void**>(&sel_),
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
                      {reinterpret_cast<void**>(&logits_), static_cast<std::size_t>(rows) * c.vocab_size}};
  workspace_bytes_ = decode_scratch_bytes_ + kGemmWorkspace + sample_ws_bytes_;
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
  if (options.precision != Precision::bf16 && options.precision != Precision::fp16)
    return make_error(ErrorCategory::unsupported_model, "backend.precision",
                      std::string("the CUDA backend runs bf16 and fp16; ") +
                          std::string(to_string(options.precision)) + " runs on the CPU until its GPU kernels exist");
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
