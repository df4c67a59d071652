// CUDA backend: the kernels of one forward pass, enqueued on the backend's stream (and captured
// into a graph for decode steps). Three paths share the same layer structure:
//   one token      gemv products with bias/residual epilogues, flash-decoding attention;
//   several tokens tensor-core GEMMs (cuBLASLt, bf16/fp16 inputs, fp32 out, residual accumulated
//                  in place), flash prefill attention on tensor cores, bias added in rope_kv;
//   reference math fp32 CUDA-core matmuls and the fp32 KV cache (tests against fp32 references).
#include <cmath>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string_view>

#include "cuda/cuda_backend_impl.h"
#include "kernels/attention.cuh"
#include "kernels/convert_dtype.cuh"
#include "kernels/decode_attention.cuh"
#include "kernels/embedding.cuh"
#include "kernels/kv_dequant.cuh"
#include "kernels/gemv.cuh"
#include "kernels/gemv_quant.cuh"
#include "kernels/matmul_bf16.cuh"
#include "kernels/prefill_attention.cuh"
#include "kernels/quantize.cuh"
#include "kernels/quantize_act.cuh"
#include "kernels/rms_norm.cuh"
#include "kernels/rope_kv.cuh"
#include "kernels/sampling.cuh"
#include "kernels/gemm_q_small.cuh"
#include "kernels/gemm_swiglu.cuh"
#include "kernels/swiglu.cuh"
#include "kernels/tensor_map.cuh"

namespace cosmos {

using kernels::ElemType;

namespace {

template <typename T>
void launch_gemv_as(const void* x, const void* w, const void* bias, const float* residual, float* y, int rows, int cols,
                    const void* norm_w, float eps, bool swiglu, cudaStream_t stream) {
  kernels::GemvArgsT<T> a;
  a.w = static_cast<const T*>(w);
  a.x = static_cast<const float*>(x);
  a.bias = static_cast<const T*>(bias);
  a.residual = residual;
  a.y = y;
  a.rows = rows;
  a.cols = cols;
  a.norm_weight = static_cast<const T*>(norm_w);
  a.norm_eps = eps;
  a.swiglu = swiglu;
  kernels::launch_gemv(a, stream);
}

}  // namespace

Result<const void*> CudaBackend::gemm_weight(const DevMatrix& m, int rows, int cols) {
  if (!m.quantized) return static_cast<const void*>(m.data);
  if (static_cast<std::size_t>(rows) * static_cast<std::size_t>(cols) > dq_elems_)
    return fail(make_error(ErrorCategory::internal, "backend.cuda",
                           "a quantized matrix of " + std::to_string(rows) + "x" + std::to_string(cols) +
                               " is larger than the dequantization buffer"));
  kernels::launch_dequantize(m.qm, rows, cols, static_cast<bf16*>(dq_), stream_);
  return static_cast<const void*>(dq_);
}

bool CudaBackend::small_quant_product(const void* x, const DevMatrix& w, ElemType wtype, void* y, int n, int rows,
                                      int cols, bool accumulate, ElemType out_type) {
  if (!qsmall_ || !w.quantized || w.transposed || wtype != ElemType::bf16 || n > kernels::kQSmallMaxTokens ||
      (out_type != ElemType::f32 && out_type != ElemType::bf16))
    return false;
  // fp8 on fp8 tensor cores (W8A8) from qsmall_fp8_max_ + 1 tokens on (H200, bench --batch, decode tok/s
  // here / there, session 25: 24 sequences 5,528 / 4,848, 32 6,483 / 6,479, level).
  if (w.qm.kind == kernels::QuantKind::fp8_row && fp8_gemm_ && n > qsmall_fp8_max_) return false;
  kernels::QSmallArgs a;
  a.w = w.qm;
  a.x = x;
  a.y = y;
  a.n = n;
  a.rows = rows;
  a.cols = cols;
  a.y_bf16 = out_type == ElemType::bf16;
  a.accumulate = accumulate;
  a.scratch = qsmall_scratch_;
  // Weights through the shared-memory ring (where the tuned plans have one) only from
  // qsmall_ring_from_ tokens: its 64+ KB of shared memory per block changes the SMs' carveout
  // between it and its neighbours, which cost more than the ring gained below that (session 25).
  a.plan.feed = n >= qsmall_ring_from_ ? 0 : 1;
  if (kernels::gemm_q_small_unsupported(a)) return false;  // this matrix takes the GEMM path (load logged why)
  kernels::launch_gemm_q_small(a, stream_);
  return true;
}

void CudaBackend::choose_qsmall() {
  qsmall_ = false;
  if (reference_math_ || layers_.empty() || !layers_[0].qkv.quantized) return;
  if (const char* env = std::getenv("COSMOS_QSMALL"); env && std::string_view(env) == "0") {
    spdlog::info("cuda backend: passes of a few tokens dequantize each matrix for a GEMM (COSMOS_QSMALL=0)");
    return;
  }
  qsmall_ = true;
  // Measuring knobs: a token count from the environment within lo..hi, else the default (logged).
  const auto tokens_knob = [](const char* name, int lo, int hi, int fallback, const char* what) {
    const char* env = std::getenv(name);
    if (!env) return fallback;
    const int v = std::atoi(env);
    if (v < lo || v > hi) {
      spdlog::warn("cuda backend: {}={} is not {}..{}; keeping {}", name, env, lo, hi, fallback);
      return fallback;
    }
    spdlog::info("cuda backend: {}: {} tokens ({})", what, v, name);
    return v;
  };
  qsmall_fp8_max_ = tokens_knob("COSMOS_QSMALL_FP8_MAX", 1, kernels::kQSmallMaxTokens, kQSmallFp8MaxTokens,
                                "the largest fp8 pass on the small-batch kernel");
  qsmall_ring_from_ = tokens_knob("COSMOS_QSMALL_RING_FROM", 1, kernels::kQSmallMaxTokens + 1, kQSmallRingFrom,
                                  "the smallest pass that may take the shared-memory ring");
  // A plan table in place of the built-in one (bench_gemm_q_small --table output), for comparing tables.
  if (const char* path = std::getenv("COSMOS_QSMALL_PLANS"); path && *path) {
    std::ifstream in(path);
    std::stringstream text;
    text << in.rdbuf();
    std::string why;
    const int rows = in ? kernels::gemm_q_small_set_plans(text.str(), &why) : -1;
    if (!in) why = "cannot read it";
    if (rows < 0)
      spdlog::warn("cuda backend: COSMOS_QSMALL_PLANS={}: {}; keeping the built-in plans", path, why);
    else
      spdlog::info("cuda backend: {} small-batch plans from {} (COSMOS_QSMALL_PLANS)", rows, path);
  }
  const ModelConfig& c = config_;
  kernels::QSmallArgs a;
  a.w = layers_[0].qkv.qm;
  a.x = layers_[0].qkv.qm.q;  // only its alignment is checked here
  a.n = 1;
  a.rows = c.q_dim() + 2 * c.kv_dim();
  bool all = true;
  for (int cols : {c.hidden_size, c.q_dim(), c.intermediate_size}) {
    a.cols = cols;
    if (const char* why = kernels::gemm_q_small_unsupported(a)) {
      all = false;
      spdlog::info("cuda backend: passes of up to {} tokens dequantize the {}-column matrices for a GEMM ({})",
                   kernels::kQSmallMaxTokens, cols, why);
    }
  }
  spdlog::info("cuda backend: passes of up to {} tokens multiply {} quantized weights on tensor cores, each matrix "
               "read once for all tokens (COSMOS_QSMALL=0: dequantize for a GEMM)",
               kernels::kQSmallMaxTokens, all ? "the" : "the other");
}

bool CudaBackend::lm_small_rows(int R) const {
  if (R <= 1 || !qsmall_ || !lm_head_.quantized || lm_type_ != ElemType::bf16) return false;
  if (lm_head_.qm.kind == kernels::QuantKind::fp8_row && fp8_gemm_ && R > qsmall_fp8_max_) return false;
  kernels::QSmallArgs a;
  a.w = lm_head_.qm;
  a.x = h_;
  a.n = 1;
  a.rows = config_.vocab_size;
  a.cols = config_.hidden_size;
  return kernels::gemm_q_small_unsupported(a) == nullptr;
}

Status CudaBackend::gemm_product(const void* x, const DevMatrix& w, ElemType wtype, void* y, int n, int rows, int cols,
                                 bool accumulate, ElemType out_type) {
  if (small_quant_product(x, w, wtype, y, n, rows, cols, accumulate, out_type)) return ok_status();
  if (fp8_gemm_ && w.quantized && w.qm.kind == kernels::QuantKind::fp8_row) {
    // [n, cols] E4M3 and [n] fp32 scales in the unused second half of x's buffer (see the header).
    auto* xq = static_cast<std::uint8_t*>(const_cast<void*>(x)) + static_cast<std::size_t>(n) * cols * 2;
    auto* xs = reinterpret_cast<float*>(xq + static_cast<std::size_t>(n) * cols);
    kernels::launch_quantize_rows_fp8(x, wtype, n, cols, xq, xs, stream_);
    const std::string err = gemm_.run_fp8(w.qm.q, w.qm.row_scale, xq, xs, y, n, rows, cols, accumulate, stream_, out_type);
    if (err.empty()) return ok_status();
    // cuBLASLt refused this shape (the load-time probe accepted the layer shapes at 512 tokens):
    // this and later products take the bf16 path; x is untouched, y not yet written.
    spdlog::warn("cuda backend: fp8 tensor-core product {}x{}x{} failed ({}); fp8 prefill dequantizes to bf16 from now on",
                 n, rows, cols, err);
    fp8_gemm_ = false;
  }
  auto wv = gemm_weight(w, rows, cols);
  if (!wv) return wv.error();
  if (std::string err = gemm_.run(*wv, x, y, n, rows, cols, accumulate, wtype, stream_, out_type, w.transposed);
      !err.empty())
    return fail(make_error(ErrorCategory::internal, "backend.cuda", err));
  return ok_status();
}

Status CudaBackend::linear(const void* x, const DevMatrix& w, ElemType wtype, const void* bias, const float* residual,
                           float* y, int n, int rows, int cols, const void* norm_w, bool swiglu, bool act16) {
  if (w.transposed && (n == 1 || reference_math_))
    return fail(make_error(ErrorCategory::internal, "backend.cuda", "a transposed matrix outside a GEMM"));
  if (n == 1) {
    const float eps = static_cast<float>(config_.rms_norm_eps);
    if (w.quantized) {
      kernels::QGemvArgs a;
      a.w = w.qm;
      a.x = static_cast<const float*>(x);
      a.bias = static_cast<const bf16*>(bias);  // quantized precisions keep biases and norms in bf16
      a.residual = residual;
      a.y = y;
      a.rows = rows;
      a.cols = cols;
      a.norm_weight = static_cast<const bf16*>(norm_w);
      a.norm_eps = eps;
      a.swiglu = swiglu;
      a.long_context = long_context_;
      if (act16 && swiglu) {
        a.y16 = static_cast<bf16*>(static_cast<void*>(y));
        a.y = nullptr;
      } else if (act16) {
        a.x16 = static_cast<const bf16*>(x);
        a.x = nullptr;
      }
      if (kernels::launch_gemv_quant(a, stream_) == 0 && act16)
        return fail(make_error(ErrorCategory::internal, "backend.cuda",
                               "the one-token " + std::to_string(rows) + "x" + std::to_string(cols) +
                                   " product refused its bf16 " + (swiglu ? "output" : "input")));
    } else if (wtype == ElemType::f16) {
      launch_gemv_as<__half>(x, w.data, bias, residual, y, rows, cols, norm_w, eps, swiglu, stream_);
    } else {
      launch_gemv_as<bf16>(x, w.data, bias, residual, y, rows, cols, norm_w, eps, swiglu, stream_);
    }
  } else if (norm_w || swiglu) {
    return fail(make_error(ErrorCategory::internal, "backend.cuda", "fused norm/SwiGLU asked for several tokens"));
  } else if (!reference_math_) {
    if (bias || (residual && residual != y))
      return fail(make_error(ErrorCategory::internal, "backend.cuda", "GEMM path: bias or a separate residual"));
    if (auto st = gemm_product(x, w, wtype, y, n, rows, cols, residual != nullptr, ElemType::f32); !st) return st;
  } else {
    kernels::MatmulArgs a;
    a.x = static_cast<const float*>(x);
    a.w = static_cast<const bf16*>(w.data);
    a.bias = static_cast<const bf16*>(bias);
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

void CudaBackend::choose_prefill_attention() {
  const ModelConfig& c = config_;
  using K = kernels::PrefillAttentionKernel;
  prefill_kernel_ = K::mma;
  if (reference_math_ || !kernels::prefill_attention_supports(c.num_heads, c.num_kv_heads, c.head_dim)) return;
  const auto off = [](const char* name) {
    const char* env = std::getenv(name);
    return env && std::string_view(env) == "0";
  };
  if (!kernels::prefill_attention_wgmma_available()) {
    spdlog::info("cuda backend: prefill attention on mma.sync (the Hopper kernels need an sm_90 GPU and a build for it)");
    return;
  }
  if (off("COSMOS_PREFILL_WGMMA")) {
    spdlog::info("cuda backend: prefill attention on mma.sync (COSMOS_PREFILL_WGMMA=0)");
    return;
  }
  prefill_kernel_ = K::wgmma;
  if (off("COSMOS_PREFILL_TMA")) {
    spdlog::info("cuda backend: prefill attention on warpgroup MMA (COSMOS_PREFILL_TMA=0)");
    return;
  }
  const int bs = cache_.shape().block_size;
  if (c.head_dim != 128 || bs < 8 || bs > 128 || (bs & (bs - 1)) != 0 || !kernels::tensor_maps_available()) {
    spdlog::info("cuda backend: prefill attention on warpgroup MMA (the TMA kernel takes head_dim 128 and cache "
                 "blocks of 8-128 slots, and needs the driver's tensor-map encoder)");
    return;
  }
  prefill_kernel_ = K::tma;
  spdlog::info("cuda backend: prefill attention warp-specialized on TMA and warpgroup MMA (COSMOS_PREFILL_TMA=0: "
               "the wgmma kernel; COSMOS_PREFILL_WGMMA=0: mma.sync)");
}

void CudaBackend::choose_fused_swiglu() {
  const ModelConfig& c = config_;
  fused_swiglu_ = false;
  if (reference_math_ || (wtype_ != ElemType::bf16 && wtype_ != ElemType::f16) || layers_.empty() ||
      layers_[0].gate_up.quantized)
    return;
  if (!kernels::gemm_swiglu_available() || !kernels::gemm_swiglu_supports(c.intermediate_size, c.hidden_size)) {
    spdlog::info("cuda backend: prefill gate/up product and SwiGLU as two kernels (the fused one needs an sm_90 GPU, "
                 "a build for it and an intermediate size that is a multiple of 128)");
    return;
  }
  if (const char* env = std::getenv("COSMOS_FUSED_SWIGLU"); env && std::string_view(env) == "0") {
    spdlog::info("cuda backend: prefill gate/up product and SwiGLU as two kernels (COSMOS_FUSED_SWIGLU=0)");
    return;
  }
  fused_swiglu_ = true;
  spdlog::info("cuda backend: prefill gate/up product with SwiGLU fused (COSMOS_FUSED_SWIGLU=0: two kernels)");
}

bool CudaBackend::fused_gate_up_swiglu(const CudaLayer& L, int N) {
  if (!fused_swiglu_ || N < kFusedSwigluMinTokens || L.gate_up.quantized || L.gate_up.transposed) return false;
  kernels::GemmSwigluArgs a;
  a.x = h_;
  a.w = L.gate_up.data;
  a.out = act_;
  a.n = N;
  a.ff = config_.intermediate_size;
  a.k = config_.hidden_size;
  a.f16 = wtype_ == ElemType::f16;
  if (kernels::launch_gemm_swiglu(a, stream_) != 0) return true;
  fused_swiglu_ = false;  // refused before launching anything: this and later passes take two kernels
  spdlog::warn("cuda backend: the fused gate/up + SwiGLU product refused a {}-token pass (misaligned buffer, no "
               "tensor-map encoder, or the launch refused); prefill runs it as two kernels from now on",
               N);
  return false;
}

Status CudaBackend::enqueue(int N, const std::vector<int>& rows, const MetaOffsets& o, int max_ctx,
                            const SampleMode& mode) {
  const ModelConfig& c = config_;
  const int H = c.hidden_size, Q = c.q_dim(), KV = c.kv_dim(), FF = c.intermediate_size, D = c.head_dim;
  const int R = static_cast<int>(rows.size());
  const bool gemm = N > 1 && !reference_math_;        // tensor-core GEMMs for this pass
  const ElemType in_type = gemm ? wtype_ : ElemType::f32;  // what the products read
  // Decode attention: a few tokens, or a decode step of many sequences (one new token each).
  const bool decode_att = (N <= kDecodeTokens || (N == o.n_seqs && N <= kMaxDecodeBatch)) && decode_scratch_;
  const bool prefill_att = !decode_att && !reference_math_ &&
                           kernels::prefill_attention_supports(c.num_heads, c.num_kv_heads, D);
  // COSMOS_PROFILE=1: time per operation of passes of several tokens (cuda_pass_profile.h).
  const double n = N, fp32 = 4, half = 2;
  profile_.begin(stream_, N);
  kernels::launch_embedding(embed_, meta_ + o.ids, x_, N, H, stream_);
  for (const auto& [row, src] : pending_embeddings_)
    CUDA_TRY(cudaMemcpyAsync(x_ + static_cast<std::size_t>(row) * H, src, H * sizeof(float), cudaMemcpyHostToDevice, stream_));
  profile_.mark(PassProfile::embed, 0, n * H * (half + fp32));
  const double norm_bytes = n * H * (fp32 + half), mm = 2 * n;  // mm: FLOPs per weight of a product
  const float eps = static_cast<float>(c.rms_norm_eps);
  const int sec0 = c.mrope_section.size() == 3 ? c.mrope_section[0] : D;
  const int sec1 = c.mrope_section.size() == 3 ? c.mrope_section[1] : 0;
  // One token with the fused MLP: the attention leaves sums that the o product divides
  // (att_sums_); layer li's attention zeroes layer li - 1's pair (the first layer's: the last's).
  // int4 / int8 / fp8 at a long context: the same sums, divided by their o product (o_from_sums).
  const bool sums = N == 1 && att_sums_ && decode_att && (fused_mlp_ || (quant_att_sums_ && long_context_));
  // Quantized one-token steps at a short context: the attention's output in bf16 for the o product
  // (int4's long-context o kernel, the wide one, takes no bf16 input).
  const bool att16 = att16_ && N == 1 && decode_att && !sums && !fused_mlp_ && !long_context_;
  const std::size_t n_layers = layers_.size();
  for (std::size_t li = 0; li < n_layers; ++li) {
    const CudaLayer& L = layers_[li];
    kernels::DecodeAttentionSums ds;
    if (sums) {
      ds.o = att_sums_ + li * att_sums_stride_;
      ds.l = ds.o + 2 * static_cast<std::size_t>(Q);
      ds.clear_o = att_sums_ + (li + n_layers - 1) % n_layers * att_sums_stride_;
      ds.clear_l = ds.clear_o + 2 * static_cast<std::size_t>(Q);
      // Long-context graphs: one 64-key round per block up to 8,192 keys (short graphs keep 64
      // splits: the extra blocks, empty there, cost bf16 0.4% @0; docs/PERFORMANCE.md session 43).
      if (long_context_) ds.splits = kernels::kDecodeAttentionLongSplits;
      // Past kDecodeAttentionHalvesFrom (two or more rounds per split): 3 blocks per SM.
      ds.halves = tier_halves(tier_);
    }
    // Attention block (one token: the norm runs inside the q/k/v product).
    if (N == 1) {
      if (auto st = linear(x_, L.qkv, wtype_, L.qkv_bias, nullptr, qkv_, 1, Q + 2 * KV, H, L.in_norm_w); !st) return st;
    } else {
      kernels::launch_rms_norm(x_, H, L.in_norm, h_, in_type, N, H, eps, stream_);
      profile_.mark(PassProfile::norm, 0, norm_bytes);
      if (auto st = linear(h_, L.qkv, wtype_, gemm ? nullptr : L.qkv_bias, nullptr, qkv_, N, Q + 2 * KV, H); !st)
        return st;
      profile_.mark(PassProfile::qkv, mm * (Q + 2 * KV) * H, 0);
    }
    kernels::RopeKvArgs r;
    r.qkv = qkv_;
    r.bias = gemm ? L.qkv_bias_f32 : nullptr;
    r.positions = meta_ + o.pos;
    r.inv_freq = inv_freq_;
    r.slots = meta_ + o.slots;
    r.q = q_;
    r.q_type = prefill_att ? ElemType::bf16 : ElemType::f32;
    r.k_cache = L.k_cache;
    r.v_cache = L.v_cache;
    r.kv_type = kvtype_;
    r.k_scale = L.k_scale;  // int8 cache: the rows' scales (null otherwise)
    r.v_scale = L.v_scale;
    r.n = N;
    r.heads = c.num_heads;
    r.kv_heads = c.num_kv_heads;
    r.head_dim = D;
    r.section0 = sec0;
    r.section1 = sec1;
    // Decode steps with one new token per sequence: RoPE and the KV write run inside the attention
    // kernel (one launch per layer instead of two).
    const bool fuse_rope = decode_att && o.n_seqs == N;
    if (!fuse_rope && kernels::launch_rope_kv(r, stream_) == 0)
      return fail(make_error(ErrorCategory::internal, "backend.cuda", "the RoPE / KV-cache write refused its inputs"));
    profile_.mark(PassProfile::rope_kv, 0, n * ((Q + 2 * KV) * fp32 + (Q + 2 * KV) * half));
    const float scale = 1.0f / std::sqrt(static_cast<float>(D));
    if (prefill_att) {
      kernels::PrefillAttentionArgs a;
      a.q = static_cast<const bf16*>(q_);
      a.k_cache = static_cast<const bf16*>(L.k_cache);
      a.v_cache = static_cast<const bf16*>(L.v_cache);
      if (L.k_scale) {
        // int8 cache: the blocks of this pass's sequences (their new rows included), expanded into
        // the bf16 copy the prefill kernels read, at the same slots.
        kernels::KvDequantArgs d;
        d.k8 = static_cast<const std::int8_t*>(L.k_cache);
        d.v8 = static_cast<const std::int8_t*>(L.v_cache);
        d.k_scale = L.k_scale;
        d.v_scale = L.v_scale;
        d.blocks = meta_ + o.tab;
        d.k16 = kv_shadow_k_;
        d.v16 = kv_shadow_v_;
        d.n_blocks = o.n_tab;
        d.block_size = cache_.shape().block_size;
        d.kv_heads = c.num_kv_heads;
        d.head_dim = D;
        if (kernels::launch_kv_dequant(d, stream_) == 0)
          return fail(make_error(ErrorCategory::internal, "backend.cuda", "the KV cache's expansion refused its inputs"));
        a.k_cache = kv_shadow_k_;
        a.v_cache = kv_shadow_v_;
      }
      a.block_tables = meta_ + o.tab;
      a.q_start = meta_ + o.seq_qstart;
      a.q_len = meta_ + o.seq_qlen;
      a.ctx_start = meta_ + o.seq_ctx0;
      a.table_offset = meta_ + o.seq_toff;
      a.out = att_;
      a.out_f16 = wtype_ == ElemType::f16;  // the o GEMM reads the weights' type
      a.seqs = o.n_seqs;
      a.n = N;
      a.max_q_len = N;
      a.max_kv_len = max_ctx;
      a.heads = c.num_heads;
      a.kv_heads = c.num_kv_heads;
      a.head_dim = D;
      a.block_size = cache_.shape().block_size;
      a.scale = scale;
      a.kv_slots = cache_.shape().n_blocks * cache_.shape().block_size;
      a.kernel = prefill_kernel_;
      if (kernels::launch_prefill_attention(a, stream_) == 0 && prefill_kernel_ == kernels::PrefillAttentionKernel::tma) {
        // Refused before launching anything (a tensor map or the launch): this and later passes take
        // the wgmma kernel.
        prefill_kernel_ = a.kernel = kernels::PrefillAttentionKernel::wgmma;
        spdlog::warn("cuda backend: the TMA prefill attention refused a {}-token pass (tensor map or launch); prefill "
                     "attention runs on the wgmma kernel from now on",
                     N);
        if (kernels::launch_prefill_attention(a, stream_) == 0)
          return fail(make_error(ErrorCategory::internal, "backend.cuda", "the prefill attention refused its inputs"));
      }
    } else {
      kernels::AttentionArgs a;
      a.q = static_cast<const float*>(q_);
      a.k_cache = L.k_cache;
      a.v_cache = L.v_cache;
      a.kv_type = kvtype_;
      a.k_scale = L.k_scale;
      a.v_scale = L.v_scale;
      a.block_tables = meta_ + o.tab;
      a.table_offset = meta_ + o.toff;
      a.ctx_len = meta_ + o.ctx;
      a.out = att_;
      a.out_type = att16 ? ElemType::bf16 : in_type;
      a.n = N;
      a.heads = c.num_heads;
      a.kv_heads = c.num_kv_heads;
      a.head_dim = D;
      a.block_size = cache_.shape().block_size;
      a.max_ctx = max_ctx;
      a.scale = scale;
      static_assert(kMaxDecodeBatch <= kernels::kDecodeAttentionMaxTokens, "the decode attention's counters");
      if (decode_att) {
        if (kernels::launch_decode_attention(a, decode_scratch_, stream_, fuse_rope ? &r : nullptr, sums ? &ds : nullptr) == 0)
          return fail(make_error(ErrorCategory::internal, "backend.cuda", "the decode attention refused its inputs"));
      } else
        kernels::launch_attention(a, stream_);
    }
    CUDA_TRY(cudaGetLastError());
    // Causal: query i of a sequence sees its cached keys and i + 1 new ones (exact for one sequence).
    profile_.mark(PassProfile::attention,
                  4.0 * D * c.num_heads * (n * (max_ctx - N) + n * (n + 1) / 2), 0);
    if (N == 1 && fused_mlp_) {
      if (auto st = o_and_fused_mlp(L, sums ? ds.o : nullptr); !st) return st;
      continue;
    }
    if (sums) {
      if (auto st = o_from_sums(L, ds); !st) return st;
    } else if (auto st = linear(att_, L.o, wtype_, nullptr, x_, x_, N, H, Q, nullptr, false, att16); !st) {
      return st;
    }
    profile_.mark(PassProfile::o, mm * H * Q, 0);
    // MLP block (one token: norm and SwiGLU run inside the gate/up product).
    if (N == 1) {
      if (auto st = linear(x_, L.gate_up, wtype_, nullptr, nullptr, static_cast<float*>(act_), 1, 2 * FF, H,
                           L.post_norm_w, true, act16_);
          !st)
        return st;
    } else {
      kernels::launch_rms_norm(x_, H, L.post_norm, h_, in_type, N, H, eps, stream_);
      profile_.mark(PassProfile::norm, 0, norm_bytes);
      if (gemm && fused_gate_up_swiglu(L, N)) {
        profile_.mark(PassProfile::gate_up, mm * 2 * FF * H, n * FF * half);
      } else {
        if (gemm) {
          // gate/up stored in bf16/fp16 (as Hugging Face does): the widest activation, half the bytes.
          if (auto st = gemm_product(h_, L.gate_up, wtype_, gu_, N, 2 * FF, H, false, wtype_); !st) return st;
          profile_.mark(PassProfile::gate_up, mm * 2 * FF * H, 0);
          kernels::launch_swiglu(gu_, wtype_, act_, in_type, N, FF, stream_);
        } else {
          if (auto st = linear(h_, L.gate_up, wtype_, nullptr, nullptr, gu_, N, 2 * FF, H); !st) return st;
          profile_.mark(PassProfile::gate_up, mm * 2 * FF * H, 0);
          kernels::launch_swiglu(gu_, act_, in_type, N, FF, stream_);
        }
        profile_.mark(PassProfile::swiglu, 0, n * FF * 3 * half);
      }
    }
    if (auto st = linear(act_, L.down, wtype_, nullptr, x_, x_, N, H, FF, nullptr, false, act16_ && N == 1); !st) return st;
    profile_.mark(PassProfile::down, mm * H * FF, 0);
  }
  // Final norm of the rows that get logits, then lm_head. One row with a bf16 or quantized lm_head:
  // the norm runs inside the gemv; else a norm launch (one when the rows are consecutive) first.
  // An int8 / int4 lm_head takes one gemv per row (dequantizing its 152k rows for a GEMM would need
  // a 1 GB buffer); fp8 runs on fp8 tensor cores.
  if (R == 1 && (lm_type_ == ElemType::bf16 || lm_head_.quantized)) {
    if (auto st = linear(x_ + static_cast<std::size_t>(rows[0]) * H, lm_head_, lm_type_, nullptr, nullptr, logits_, 1,
                         c.vocab_size, H, final_norm_);
        !st)
      return st;
  } else {
    // Several rows: a GEMM (fp8 weights on fp8 tensor cores), or quantized weights times up to 64 rows
    // at a time on tensor cores (int8 / int4 always, fp8 up to kQSmallFp8MaxTokens rows when it has
    // fp8 tensor cores); else one gemv per row.
    const bool lm_fp8 = lm_head_.quantized && fp8_gemm_ && lm_head_.qm.kind == kernels::QuantKind::fp8_row;
    const bool lm_small = lm_small_rows(R);
    const bool lm_gemm = R > 1 && !reference_math_ && (!lm_head_.quantized || lm_fp8) && !lm_small;
    void* normed = lm_gemm || lm_small ? h_ : static_cast<void*>(sel_);
    const ElemType normed_type = lm_gemm || lm_small ? lm_type_ : ElemType::f32;
    bool consecutive = true;
    for (int r = 1; r < R; ++r) consecutive &= rows[r] == rows[0] + r;
    if (consecutive) {
      kernels::launch_rms_norm(x_ + static_cast<std::size_t>(rows[0]) * H, H, final_norm_, normed, normed_type, R, H,
                               eps, stream_);
    } else {
      const std::size_t es = kernels::elem_size(normed_type);
      for (int r = 0; r < R; ++r)
        kernels::launch_rms_norm(x_ + static_cast<std::size_t>(rows[r]) * H, H, final_norm_,
                                 static_cast<std::uint8_t*>(normed) + static_cast<std::size_t>(r) * H * es, normed_type,
                                 1, H, eps, stream_);
    }
    if (lm_small) {
      const std::size_t es = kernels::elem_size(normed_type);
      for (int r0 = 0; r0 < R; r0 += kernels::kQSmallMaxTokens) {
        const int rn = std::min(kernels::kQSmallMaxTokens, R - r0);
        if (!small_quant_product(static_cast<std::uint8_t*>(normed) + static_cast<std::size_t>(r0) * H * es, lm_head_,
                                 lm_type_, logits_ + static_cast<std::size_t>(r0) * c.vocab_size, rn, c.vocab_size, H,
                                 false, ElemType::f32))
          return fail(make_error(ErrorCategory::internal, "backend.cuda", "the quantized lm_head product refused rows"));
      }
    } else if (lm_gemm && lm_fp8) {
      if (auto st = gemm_product(normed, lm_head_, lm_type_, logits_, R, c.vocab_size, H, false, ElemType::f32); !st)
        return st;
    } else if (lm_head_.quantized) {
      for (int r = 0; r < R; ++r)
        if (auto st = linear(sel_ + static_cast<std::size_t>(r) * H, lm_head_, lm_type_, nullptr, nullptr,
                             logits_ + static_cast<std::size_t>(r) * c.vocab_size, 1, c.vocab_size, H);
            !st)
          return st;
    } else if (auto st = linear(normed, lm_head_, lm_type_, nullptr, nullptr, logits_, R, c.vocab_size, H); !st) {
      return st;
    }
  }
  profile_.mark(PassProfile::lm_head, 2.0 * R * c.vocab_size * H, 0);
  if (mode.on) {
    kernels::SampleArgs s;
    s.logits = logits_;
    s.rows = R;
    s.vocab = c.vocab_size;
    s.params = static_cast<const kernels::SampleParams*>(sparams_);
    s.history = hist_;
    s.history_offsets = meta_ + o.hist_off;
    s.out_ids = out_ids_;
    // One token per sequence: the ids are also the next step's input ids (a step run ahead reads
    // them there; cuda_decode_ahead.cpp).
    s.next_ids = N == o.n_seqs ? meta_next_ + o.ids : nullptr;  // the next pass's slot
    // One sequence with a penalty: the id also extends the history (hist_ has a spare entry).
    s.history_append = N == 1 && o.n_seqs == 1 && mode.any_penalty ? hist_ : nullptr;
    s.workspace = sample_ws_;
    s.workspace_bytes = sample_ws_bytes_;
    s.any_penalty = mode.any_penalty;
    s.all_greedy = mode.all_greedy;
    s.need_sort = mode.need_sort;
    s.skip_top_k = !mode.any_top_k;
    s.skip_top_p = !mode.any_top_p;
    kernels::launch_sample(s, stream_);
    CUDA_TRY(cudaGetLastError());
    profile_.mark(PassProfile::sample, 0, 2.0 * R * c.vocab_size * fp32);
  }
  profile_.end();
  return ok_status();
}

}  // namespace cosmos
