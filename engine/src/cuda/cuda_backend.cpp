#include "cosmos/cuda_backend.h"

#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <string>
#include <vector>

#include <spdlog/spdlog.h>

#include "cosmos/batch_plan.h"
#include "cosmos/checkpoint.h"
#include "cuda/cuda_backend_internal.h"
#include "kernels/attention.cuh"
#include "kernels/decode_attention.cuh"
#include "kernels/device_info.cuh"
#include "kernels/embedding.cuh"
#include "kernels/gemv_bf16.cuh"
#include "kernels/matmul_bf16.cuh"
#include "kernels/rms_norm.cuh"
#include "kernels/rope_kv.cuh"
#include "kernels/swiglu.cuh"

namespace cosmos {
namespace {

using bf16 = __nv_bfloat16;

Error cuda_error(cudaError_t e, const char* call, const char* file, int line) {
  return make_error(ErrorCategory::internal, "backend.cuda",
                    std::string(call) + " failed: " + cudaGetErrorString(e) + " (" + file + ":" + std::to_string(line) + ")");
}

#define CUDA_TRY(call)                                                   \
  do {                                                                   \
    const cudaError_t e_ = (call);                                       \
    if (e_ != cudaSuccess) return fail(cuda_error(e_, #call, __FILE__, __LINE__)); \
  } while (0)

struct Layer {
  bf16* in_norm = nullptr;   // [hidden]
  bf16* post_norm = nullptr; // [hidden]
  bf16* qkv = nullptr;       // [q_dim + 2 kv_dim, hidden]: q rows, then k, then v
  bf16* qkv_bias = nullptr;  // [q_dim + 2 kv_dim]
  bf16* o = nullptr;         // [hidden, q_dim]
  bf16* gate_up = nullptr;   // [2 intermediate, hidden]: gate rows, then up
  bf16* down = nullptr;      // [hidden, intermediate]
  float* k_cache = nullptr;  // [slots, kv_heads, head_dim] fp32
  float* v_cache = nullptr;  // [slots, kv_heads, head_dim] fp32
};

class CudaBackend final : public Backend {
 public:
  CudaBackend(ModelConfig config, const kernels::GpuInfo& gpu, KvCacheShape shape)
      : config_(std::move(config)), gpu_(gpu), cache_(shape) {}
  ~CudaBackend() override {
    drop_graph();
    for (void* p : allocations_) cudaFree(p);
    if (stream_) cudaStreamDestroy(stream_);
  }

  Status load(const Checkpoint& ckpt, const std::function<bool(double)>& progress);

  std::string_view name() const override { return "cuda"; }
  std::string device_name() const override { return gpu_.name; }
  Precision precision() const override { return Precision::bf16; }
  const ModelConfig& config() const override { return config_; }
  KvCache& kv_cache() override { return cache_; }
  BackendMemory memory() const override {
    BackendMemory m;
    m.weights = weight_bytes_;
    m.kv_cache = kv_bytes_;
    m.workspace = workspace_bytes_;
    m.on_gpu = true;
    return m;
  }
  Status forward(std::span<const SequenceInput> batch, ForwardOutput& out) override;

 private:
  Error fail(Error e) {
    failed_ = e.message;
    spdlog::error("cuda backend: {}", e.message);
    return e;
  }
  Result<void*> alloc(std::size_t bytes, const char* what);
  Status upload(const Checkpoint& ckpt, const std::string& name, bf16* dst);
  Status ensure_workspace(int tokens, int rows);
  Status linear(const float* x, const bf16* w, const bf16* bias, const float* residual, float* y, int n, int rows,
                int cols);
  // Offsets of each array inside meta_ (see forward()).
  struct MetaOffsets {
    std::size_t ids = 0, pos = 0, slots = 0, toff = 0, ctx = 0, tab = 0;
  };
  // Launches the whole forward pass for N tokens (logits rows `rows`) on stream_.
  Status enqueue(int N, const std::vector<int>& rows, const MetaOffsets& o, int max_ctx);
  // Frees the decode graph (its kernels captured pointers that are about to change).
  void drop_graph() {
    if (graph_exec_) cudaGraphExecDestroy(graph_exec_);
    graph_exec_ = nullptr;
  }

  ModelConfig config_;
  kernels::GpuInfo gpu_;
  KvCache cache_;
  cudaStream_t stream_ = nullptr;
  std::vector<void*> allocations_;
  std::string failed_;
  bf16 *embed_ = nullptr, *lm_head_ = nullptr, *final_norm_ = nullptr;
  float* inv_freq_ = nullptr;  // [head_dim / 2]
  std::vector<Layer> layers_;
  std::uint64_t weight_bytes_ = 0, kv_bytes_ = 0, workspace_bytes_ = 0;
  std::function<bool(double)> progress_;         // load progress, null after loading
  std::uint64_t uploaded_ = 0, to_upload_ = 0;   // text-model bytes copied / to copy
  // Workspace, grown on demand (sized for `ws_tokens_` tokens and `ws_rows_` logits rows).
  int ws_tokens_ = 0, ws_rows_ = 0;
  float *x_ = nullptr, *h_ = nullptr, *qkv_ = nullptr, *q_ = nullptr, *att_ = nullptr, *gu_ = nullptr, *act_ = nullptr;
  float *sel_ = nullptr, *logits_ = nullptr;
  std::int32_t* meta_ = nullptr;  // ids, positions, slots, table offsets, ctx lengths, tables
  std::size_t meta_ints_ = 0;
  // The one-token decode step captured as a CUDA graph (kernels read positions and lengths from
  // meta_, so the same graph replays at every step); rebuilt when buffers move.
  cudaGraphExec_t graph_exec_ = nullptr;
  static constexpr int kDecodeTokens = 4;  // passes of up to this many tokens use decode attention
  float* decode_scratch_ = nullptr;        // [kDecodeTokens, heads, chunks(capacity), head_dim + 2] fp32
  std::uint64_t decode_scratch_bytes_ = 0;
  std::vector<std::pair<int, const float*>> pending_embeddings_;  // (token row, host fp32 [hidden]) for this pass
};

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

Status CudaBackend::upload(const Checkpoint& ckpt, const std::string& name, bf16* dst) {
  if (progress_ && !progress_(static_cast<double>(uploaded_) / static_cast<double>(std::max<std::uint64_t>(1, to_upload_))))
    return load_cancelled_error();
  const CheckpointTensor* t = ckpt.find(name);
  if (t->info.dtype != DType::bf16)
    return make_error(ErrorCategory::unsupported_model, "backend.dtype",
                      name + " is " + std::string(dtype_name(t->info.dtype)) +
                          "; the CUDA backend reads bf16 checkpoints (Cosmos-Reason1-7B ships bf16)");
  const auto bytes = ckpt.data(*t);
  CUDA_TRY(cudaMemcpy(dst, bytes.data(), bytes.size(), cudaMemcpyHostToDevice));
  uploaded_ += bytes.size();
  return ok_status();
}

Status CudaBackend::load(const Checkpoint& ckpt, const std::function<bool(double)>& progress) {
  progress_ = progress;
  for (const auto& t : ckpt.tensors())
    if (t.name.rfind("visual.", 0) != 0) to_upload_ += t.info.nbytes;
  CUDA_TRY(cudaSetDevice(gpu_.index));
  CUDA_TRY(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking));
  const ModelConfig& c = config_;
  const std::size_t H = c.hidden_size, Q = c.q_dim(), KV = c.kv_dim(), FF = c.intermediate_size, V = c.vocab_size;
  auto weights = [&](std::size_t elems, const char* what) -> Result<bf16*> {
    auto p = alloc(elems * sizeof(bf16), what);
    if (!p) return p.error();
    weight_bytes_ += elems * sizeof(bf16);
    return static_cast<bf16*>(*p);
  };
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
  TRY_ASSIGN(embed_, weights(V * H, "the embedding"));
  TRY(upload(ckpt, "model.embed_tokens.weight", embed_));
  if (c.tie_word_embeddings) {
    lm_head_ = embed_;
  } else {
    TRY_ASSIGN(lm_head_, weights(V * H, "lm_head"));
    TRY(upload(ckpt, "lm_head.weight", lm_head_));
  }
  TRY_ASSIGN(final_norm_, weights(H, "the final norm"));
  TRY(upload(ckpt, "model.norm.weight", final_norm_));
  const auto& s = cache_.shape();
  const std::size_t slots = static_cast<std::size_t>(s.n_blocks) * s.block_size;
  for (int l = 0; l < c.num_layers; ++l) {
    const std::string p = "model.layers." + std::to_string(l) + ".";
    Layer L;
    TRY_ASSIGN(L.in_norm, weights(H, "norms"));
    TRY(upload(ckpt, p + "input_layernorm.weight", L.in_norm));
    TRY_ASSIGN(L.post_norm, weights(H, "norms"));
    TRY(upload(ckpt, p + "post_attention_layernorm.weight", L.post_norm));
    TRY_ASSIGN(L.qkv, weights((Q + 2 * KV) * H, "q/k/v weights"));
    TRY(upload(ckpt, p + "self_attn.q_proj.weight", L.qkv));
    TRY(upload(ckpt, p + "self_attn.k_proj.weight", L.qkv + Q * H));
    TRY(upload(ckpt, p + "self_attn.v_proj.weight", L.qkv + (Q + KV) * H));
    TRY_ASSIGN(L.qkv_bias, weights(Q + 2 * KV, "q/k/v biases"));
    TRY(upload(ckpt, p + "self_attn.q_proj.bias", L.qkv_bias));
    TRY(upload(ckpt, p + "self_attn.k_proj.bias", L.qkv_bias + Q));
    TRY(upload(ckpt, p + "self_attn.v_proj.bias", L.qkv_bias + Q + KV));
    TRY_ASSIGN(L.o, weights(H * Q, "o_proj"));
    TRY(upload(ckpt, p + "self_attn.o_proj.weight", L.o));
    TRY_ASSIGN(L.gate_up, weights(2 * FF * H, "gate/up weights"));
    TRY(upload(ckpt, p + "mlp.gate_proj.weight", L.gate_up));
    TRY(upload(ckpt, p + "mlp.up_proj.weight", L.gate_up + FF * H));
    TRY_ASSIGN(L.down, weights(H * FF, "down_proj"));
    TRY(upload(ckpt, p + "mlp.down_proj.weight", L.down));
    void* k = nullptr;
    void* v = nullptr;
    TRY_ASSIGN(k, alloc(slots * KV * sizeof(float), "the KV cache"));
    TRY_ASSIGN(v, alloc(slots * KV * sizeof(float), "the KV cache"));
    L.k_cache = static_cast<float*>(k);
    L.v_cache = static_cast<float*>(v);
    kv_bytes_ += 2 * slots * KV * sizeof(float);
    layers_.push_back(L);
  }
  std::vector<float> inv(c.head_dim / 2);
  for (int j = 0; j < c.head_dim / 2; ++j)
    inv[j] = 1.0f / std::pow(static_cast<float>(c.rope_theta), static_cast<float>(2 * j) / static_cast<float>(c.head_dim));
  void* f = nullptr;
  TRY_ASSIGN(f, alloc(inv.size() * sizeof(float), "rope tables"));
  inv_freq_ = static_cast<float*>(f);
  CUDA_TRY(cudaMemcpy(inv_freq_, inv.data(), inv.size() * sizeof(float), cudaMemcpyHostToDevice));
  if (kernels::decode_attention_supports(c.num_heads, c.num_kv_heads, c.head_dim)) {
    const std::size_t floats = kernels::decode_attention_scratch_floats(
        kDecodeTokens, c.num_heads, c.head_dim, static_cast<int>(cache_.shape().tokens()));
    void* p = nullptr;
    TRY_ASSIGN(p, alloc(floats * sizeof(float), "attention scratch"));
    decode_scratch_ = static_cast<float*>(p);
    decode_scratch_bytes_ = floats * sizeof(float);
  }
  // Shared memory for attention over the whole cache, set once outside any graph capture.
  kernels::prepare_attention(static_cast<int>(cache_.shape().tokens()));
  CUDA_TRY(cudaGetLastError());
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
  drop_graph();
  for (float* p : {x_, h_, qkv_, q_, att_, gu_, act_, sel_, logits_}) {
    if (!p) continue;
    cudaFree(p);
    std::erase(allocations_, static_cast<void*>(p));
  }
  const ModelConfig& c = config_;
  const std::size_t T = tokens, H = c.hidden_size, Q = c.q_dim(), KV = c.kv_dim(), FF = c.intermediate_size;
  struct Buf {
    float** p;
    std::size_t floats;
  };
  const Buf bufs[] = {{&x_, T * H},  {&h_, T * H},       {&qkv_, T * (Q + 2 * KV)},        {&q_, T * Q},
                      {&att_, T * Q}, {&gu_, T * 2 * FF}, {&act_, T * FF},                  {&sel_, rows * H},
                      {&logits_, static_cast<std::size_t>(rows) * c.vocab_size}};
  workspace_bytes_ = decode_scratch_bytes_;
  for (const Buf& b : bufs) {
    auto p = alloc(b.floats * sizeof(float), "activations");
    if (!p) return p.error();
    *b.p = static_cast<float*>(*p);
    workspace_bytes_ += b.floats * sizeof(float);
  }
  ws_tokens_ = tokens;
  ws_rows_ = rows;
  return ok_status();
}

Status CudaBackend::linear(const float* x, const bf16* w, const bf16* bias, const float* residual, float* y, int n,
                           int rows, int cols) {
  if (n == 1) {
    kernels::GemvArgs a;
    a.w = w;
    a.x = x;
    a.bias = bias;
    a.residual = residual;
    a.y = y;
    a.rows = rows;
    a.cols = cols;
    kernels::launch_gemv_bf16(a, stream_);
  } else {
    kernels::MatmulArgs a;
    a.x = x;
    a.w = w;
    a.bias = bias;
    a.residual = residual;
    a.y = y;
    a.n = n;
    a.rows = rows;
    a.cols = cols;
    kernels::launch_matmul_bf16(a, stream_);
  }
  CUDA_TRY(cudaGetLastError());
  return ok_status();
}

Status CudaBackend::forward(std::span<const SequenceInput> batch, ForwardOutput& out) {
  if (!failed_.empty())
    return make_error(ErrorCategory::internal, "backend.failed", "the GPU backend stopped after an error: " + failed_);
  const ModelConfig& c = config_;
  const int H = c.hidden_size;
  auto planned = plan_batch(batch, cache_, c.vocab_size);
  if (!planned) return planned.error();
  const BatchPlan& plan = *planned;
  // Flat per-token arrays for the kernels: id, position, slot, table offset, context length; and
  // each sequence's block table.
  std::vector<std::int32_t> ids, pos, slots, table_off, ctx, tables;
  std::vector<int> table_start(batch.size());
  for (std::size_t s = 0; s < batch.size(); ++s) {
    table_start[s] = static_cast<int>(tables.size());
    const auto table = cache_.block_table(batch[s].seq);
    tables.insert(tables.end(), table.begin(), table.end());
  }
  for (const PlannedToken& t : plan.tokens) {
    ids.push_back(t.id);
    pos.insert(pos.end(), {t.position.t, t.position.h, t.position.w});
    slots.push_back(t.slot);
    table_off.push_back(table_start[t.seq_index]);
    ctx.push_back(t.cache_index + 1);
  }
  const std::vector<int>& rows = plan.logits_rows;
  out.first_row = plan.first_row;
  const int max_ctx = plan.max_ctx;
  const int N = static_cast<int>(ids.size()), R = static_cast<int>(rows.size());
  // Any failure from here on gives the reserved cache blocks back.
  struct Rollback {
    std::span<const SequenceInput> batch;
    const BatchPlan& plan;
    KvCache& cache;
    bool armed = true;
    ~Rollback() {
      if (armed) rollback_batch(batch, plan, cache);
    }
  } rollback{batch, plan, cache_};
  if (auto st = ensure_workspace(N, R); !st) return st;
  // One upload of all the small int arrays.
  std::vector<std::int32_t> meta;
  meta.reserve(ids.size() * 7 + tables.size());
  const std::size_t o_ids = 0, o_pos = ids.size(), o_slots = o_pos + pos.size(), o_toff = o_slots + slots.size(),
                    o_ctx = o_toff + table_off.size(), o_tab = o_ctx + ctx.size();
  for (auto* v : {&ids, &pos, &slots, &table_off, &ctx, &tables}) meta.insert(meta.end(), v->begin(), v->end());
  if (meta.size() > meta_ints_) {
    drop_graph();
    if (meta_) {
      cudaFree(meta_);
      std::erase(allocations_, static_cast<void*>(meta_));
    }
    auto p = alloc(meta.size() * 2 * sizeof(std::int32_t), "batch metadata");
    if (!p) return p.error();
    meta_ = static_cast<std::int32_t*>(*p);
    meta_ints_ = meta.size() * 2;
  }
  CUDA_TRY(cudaMemcpyAsync(meta_, meta.data(), meta.size() * sizeof(std::int32_t), cudaMemcpyHostToDevice, stream_));
  const MetaOffsets offsets{o_ids, o_pos, o_slots, o_toff, o_ctx, o_tab};
  pending_embeddings_.clear();
  for (std::size_t t = 0; t < plan.tokens.size(); ++t)
    if (plan.tokens[t].embedding_row >= 0)
      pending_embeddings_.emplace_back(static_cast<int>(t), batch[plan.tokens[t].seq_index].embeddings.data() +
                                                                static_cast<std::size_t>(plan.tokens[t].embedding_row) * H);
  const bool has_embeddings = !pending_embeddings_.empty();
  if (N == 1 && !has_embeddings) {
    // Decode step: replay the captured graph (capture it the first time). Attention is captured
    // for the cache's full capacity; the kernels read the real length from meta_.
    if (!graph_exec_) {
      cudaGraph_t graph = nullptr;
      CUDA_TRY(cudaStreamBeginCapture(stream_, cudaStreamCaptureModeThreadLocal));
      const Status st = enqueue(1, rows, offsets, static_cast<int>(cache_.shape().tokens()));
      const cudaError_t end = cudaStreamEndCapture(stream_, &graph);
      if (!st) return st;
      if (end != cudaSuccess) return fail(cuda_error(end, "cudaStreamEndCapture", __FILE__, __LINE__));
      const cudaError_t inst = cudaGraphInstantiate(&graph_exec_, graph, 0);
      cudaGraphDestroy(graph);
      if (inst != cudaSuccess) return fail(cuda_error(inst, "cudaGraphInstantiate", __FILE__, __LINE__));
    }
    CUDA_TRY(cudaGraphLaunch(graph_exec_, stream_));
  } else {
    if (auto st = enqueue(N, rows, offsets, max_ctx); !st) return st;
  }
  out.vocab = c.vocab_size;
  out.logits.resize(static_cast<std::size_t>(R) * c.vocab_size);
  CUDA_TRY(cudaMemcpyAsync(out.logits.data(), logits_, out.logits.size() * sizeof(float), cudaMemcpyDeviceToHost, stream_));
  CUDA_TRY(cudaStreamSynchronize(stream_));
  rollback.armed = false;
  commit_batch(batch, plan, cache_);
  return ok_status();
}

Status CudaBackend::enqueue(int N, const std::vector<int>& rows, const MetaOffsets& o, int max_ctx) {
  const ModelConfig& c = config_;
  const int H = c.hidden_size, Q = c.q_dim(), KV = c.kv_dim(), FF = c.intermediate_size, D = c.head_dim;
  const int bs = cache_.shape().block_size;
  const int R = static_cast<int>(rows.size());
  const std::size_t o_ids = o.ids, o_pos = o.pos, o_slots = o.slots, o_toff = o.toff, o_ctx = o.ctx, o_tab = o.tab;
  kernels::launch_embedding(embed_, meta_ + o_ids, x_, N, H, stream_);
  for (const auto& [row, src] : pending_embeddings_)
    CUDA_TRY(cudaMemcpyAsync(x_ + static_cast<std::size_t>(row) * H, src, H * sizeof(float), cudaMemcpyHostToDevice, stream_));
  const float eps = static_cast<float>(c.rms_norm_eps);
  const int sec0 = c.mrope_section.size() == 3 ? c.mrope_section[0] : D;
  const int sec1 = c.mrope_section.size() == 3 ? c.mrope_section[1] : 0;
  for (const Layer& L : layers_) {
    kernels::launch_rms_norm(x_, H, L.in_norm, h_, N, H, eps, stream_);
    if (auto st = linear(h_, L.qkv, L.qkv_bias, nullptr, qkv_, N, Q + 2 * KV, H); !st) return st;
    kernels::RopeKvArgs r;
    r.qkv = qkv_;
    r.positions = meta_ + o_pos;
    r.inv_freq = inv_freq_;
    r.slots = meta_ + o_slots;
    r.q = q_;
    r.k_cache = L.k_cache;
    r.v_cache = L.v_cache;
    r.n = N;
    r.heads = c.num_heads;
    r.kv_heads = c.num_kv_heads;
    r.head_dim = D;
    r.section0 = sec0;
    r.section1 = sec1;
    kernels::launch_rope_kv(r, stream_);
    kernels::AttentionArgs a;
    a.q = q_;
    a.k_cache = L.k_cache;
    a.v_cache = L.v_cache;
    a.block_tables = meta_ + o_tab;
    a.table_offset = meta_ + o_toff;
    a.ctx_len = meta_ + o_ctx;
    a.out = att_;
    a.n = N;
    a.heads = c.num_heads;
    a.kv_heads = c.num_kv_heads;
    a.head_dim = D;
    a.block_size = bs;
    a.max_ctx = max_ctx;
    a.scale = 1.0f / std::sqrt(static_cast<float>(D));
    // Few new tokens (decode): flash-decoding over chunks of the context; else the reference kernel.
    if (N <= kDecodeTokens && decode_scratch_) {
      kernels::launch_decode_attention(a, decode_scratch_, stream_);
    } else {
      kernels::launch_attention(a, stream_);
    }
    CUDA_TRY(cudaGetLastError());
    if (auto st = linear(att_, L.o, nullptr, x_, x_, N, H, Q); !st) return st;
    kernels::launch_rms_norm(x_, H, L.post_norm, h_, N, H, eps, stream_);
    if (auto st = linear(h_, L.gate_up, nullptr, nullptr, gu_, N, 2 * FF, H); !st) return st;
    kernels::launch_swiglu(gu_, act_, N, FF, stream_);
    if (auto st = linear(act_, L.down, nullptr, x_, x_, N, H, FF); !st) return st;
  }
  for (int r = 0; r < R; ++r)
    kernels::launch_rms_norm(x_ + static_cast<std::size_t>(rows[r]) * H, H, final_norm_, sel_ + static_cast<std::size_t>(r) * H,
                             1, H, eps, stream_);
  return linear(sel_, lm_head_, nullptr, nullptr, logits_, R, c.vocab_size, H);
}

}  // namespace

Result<std::unique_ptr<Backend>> load_cuda_backend(ModelConfig config, const kernels::GpuInfo& gpu, KvCacheShape shape,
                                                   const Checkpoint& ckpt, const BackendOptions& options) {
  auto backend = std::make_unique<CudaBackend>(std::move(config), gpu, shape);
  if (auto st = backend->load(ckpt, options.progress); !st) return st.error();
  return std::unique_ptr<Backend>(std::move(backend));
}

}  // namespace cosmos
