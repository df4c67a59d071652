// CUDA backend: the fused decode MLP (kernels/mlp_decode.cuh) in the engine: whether it runs, the
// transposed down weights it reads (laid out at load), the o product and the MLP of one decode
// token (bf16 / fp16 weights), and the decode attention's sums that this o product divides.
#include <cstdlib>
#include <limits>
#include <string_view>

#include "cuda/cuda_backend_impl.h"
#include "kernels/decode_attention.cuh"
#include "kernels/gemv.cuh"
#include "kernels/gemv_quant.cuh"
#include "kernels/mlp_decode.cuh"
#include "kernels/transpose.cuh"

namespace cosmos {

using kernels::ElemType;

namespace {

// x = att, or (sums) the attention's sums [2][Q] and their divisors [2][Q / D] right after them.
template <typename T>
std::size_t launch_o(const CudaLayer& L, const float* att, const float* sums, float* x, float* xm, int H, int Q, int D,
                     cudaStream_t stream) {
  kernels::GemvArgsT<T> o;
  o.w = static_cast<const T*>(L.o.data);
  if (sums) {
    o.x_sums = sums;
    o.x_sum_div = sums + 2 * static_cast<std::size_t>(Q);
    o.sum_group = D;
  } else {
    o.x = att;
  }
  o.residual = x;
  o.y = x;
  o.y2 = xm;
  o.rows = H;
  o.cols = Q;
  return kernels::launch_gemv(o, stream);
}

template <typename T>
std::size_t launch_mlp(const CudaLayer& L, const float* x, float* y, int H, int FF, float eps, cudaStream_t stream) {
  kernels::MlpDecodeArgsT<T> m;
  m.w_gate_up = static_cast<const T*>(L.gate_up.data);
  m.w_down_t = static_cast<const T*>(L.down.data);
  m.norm_weight = static_cast<const T*>(L.post_norm_w);
  m.x = x;
  m.y = y;
  m.hidden = H;
  m.inter = FF;
  m.norm_eps = eps;
  return kernels::launch_mlp_decode(m, stream);
}

}  // namespace

Status CudaBackend::o_from_sums(const CudaLayer& L, const kernels::DecodeAttentionSums& ds) {
  const ModelConfig& c = config_;
  kernels::QGemvArgs o;
  o.w = L.o.qm;
  o.x = ds.o;
  o.x_div = ds.l;
  o.residual = x_;
  o.y = x_;
  o.rows = c.hidden_size;
  o.cols = c.q_dim();
  o.long_context = long_context_;
  o.sums_rows = tier_sums_rows(tier_);
  if (kernels::launch_gemv_quant(o, stream_) == 0)
    return fail(make_error(ErrorCategory::internal, "backend.cuda", "the quantized o product refused the attention's sums"));
  CUDA_TRY(cudaGetLastError());
  return ok_status();
}

Status CudaBackend::o_and_fused_mlp(const CudaLayer& L, const float* sums) {
  const ModelConfig& c = config_;
  const int H = c.hidden_size, Q = c.q_dim(), FF = c.intermediate_size, D = c.head_dim;
  const float eps = static_cast<float>(c.rms_norm_eps);
  const auto* att = static_cast<const float*>(att_);
  // x_ += W_o att_, and the same values into xm_: the MLP reads xm_ while it adds into x_.
  std::size_t o_moved = 0, moved = 0;
  if (wtype_ == ElemType::f16) {
    o_moved = launch_o<__half>(L, att, sums, x_, xm_, H, Q, D, stream_);
    moved = launch_mlp<__half>(L, xm_, x_, H, FF, eps, stream_);
  } else {
    o_moved = launch_o<bf16>(L, att, sums, x_, xm_, H, Q, D, stream_);
    moved = launch_mlp<bf16>(L, xm_, x_, H, FF, eps, stream_);
  }
  if (o_moved == 0)
    return fail(make_error(ErrorCategory::internal, "backend.cuda", "the decode o product refused its inputs"));
  if (moved == 0)
    return fail(make_error(ErrorCategory::internal, "backend.cuda", "the fused decode MLP refused its inputs"));
  CUDA_TRY(cudaGetLastError());
  return ok_status();
}

void CudaBackend::choose_fused_mlp() {
  fused_mlp_ = false;
  // Quantized precisions keep two kernels: an int8 / fp8 fused MLP measured slower with 8 warps per
  // block (decode -9%) and level with 16 (int8), docs/PERFORMANCE.md session 11 step 2.
  if (quant_ || reference_math_) return;
  const ModelConfig& c = config_;
  if (!kernels::mlp_decode_supported(c.hidden_size, c.intermediate_size)) {
    spdlog::info("cuda backend: decode MLP as two kernels: the fused kernel does not take hidden {} / intermediate {}",
                 c.hidden_size, c.intermediate_size);
    return;
  }
  if (gpu_.sm_major < 9) {  // measured on Hopper only (and its 16-byte atomic adds are sm_90+)
    spdlog::info("cuda backend: decode MLP as two kernels on {} (sm_{}{}): the fused kernel is for sm_90+", gpu_.name,
                 gpu_.sm_major, gpu_.sm_minor);
    return;
  }
  if (const char* env = std::getenv("COSMOS_FUSED_MLP"); env && std::string_view(env) == "0") {
    spdlog::info("cuda backend: decode MLP as two kernels (COSMOS_FUSED_MLP=0)");
    return;
  }
  fused_mlp_ = true;
  spdlog::info("cuda backend: decode MLP as one fused kernel per layer (COSMOS_FUSED_MLP=0: two kernels, bit-reproducible)");
}

void CudaBackend::choose_act16() {
  act16_ = att16_ = false;
  if (!quant_ || reference_math_ || fused_mlp_ || layers_.empty() || !layers_[0].down.quantized) return;
  if (const char* env = std::getenv("COSMOS_ACT16"); env && std::string_view(env) == "0") {
    spdlog::info("cuda backend: one-token MLP and attention outputs in fp32 (COSMOS_ACT16=0)");
    return;
  }
  kernels::QGemvArgs d;  // the one-token down product (its inputs are not read here)
  d.w = layers_[0].down.qm;
  d.rows = config_.hidden_size;
  d.cols = config_.intermediate_size;
  act16_ = kernels::gemv_quant_takes_x16(d);
  kernels::QGemvArgs o;  // the o product at a short context
  o.w = layers_[0].o.qm;
  o.rows = config_.hidden_size;
  o.cols = config_.q_dim();
  // int8 keeps its o product's fp32 input: with the bf16 one it measured 489.6 tok/s against 493.2
  // (MLP activations alone), where int4 gained 767.8 against 757.2 and fp8 494.6 against 492.9
  // (session 48, 3 rounds; docs/PERFORMANCE.md).
  const bool int8 = o.w.kind == kernels::QuantKind::int8_row;
  att16_ = !int8 && kernels::gemv_quant_takes_x16(o);
  spdlog::info("cuda backend: one-token MLP activations in {}, attention outputs at short contexts in {}, as Hugging "
               "Face keeps them in bf16 (COSMOS_ACT16=0: fp32){}",
               act16_ ? "bf16" : "fp32", att16_ ? "bf16" : "fp32",
               act16_ && att16_ ? ""
               : int8        ? " (int8's o product is faster with its fp32 input)"
                             : " (fp32: no bf16-input kernel for that product's shape)");
}

Status CudaBackend::choose_att_sums() {
  att_sums_ = nullptr;
  att_sums_stride_ = 0;
  att_sums_bytes_ = 0;
  quant_att_sums_ = false;
  // The sums are divided by the fused path's o product, or by the quantized o products in the
  // long-context graphs: int4's wide kernel (kLongContext tokens or more; int4 decode level at 2,048
  // tokens, +0.6% at 4,096, +1.0% at 8,192: docs/PERFORMANCE.md, session 41), int8 / fp8's kSums
  // kernel (past kLongSplitsContext, session 44; an 8-bit o taking sums measured 2-4% slower at
  // short context in session 32).
  // Each layer's attention zeroes the previous layer's pair, which needs two layers or more.
  if (!decode_scratch_ || layers_.size() < 2) return ok_status();
  const ModelConfig& c = config_;
  const bool quant = !fused_mlp_;  // set below when the sums are allocated
  if (quant) {
    kernels::QGemvArgs o;  // the long-context o product (x and y are not read here)
    o.w = layers_[0].o.qm;
    o.rows = c.hidden_size;
    o.cols = c.q_dim();
    o.long_context = true;
    if (!quant_ || !layers_[0].o.quantized || c.head_dim != 128 || !kernels::gemv_quant_takes_sums(o))
      return ok_status();
  }
  kernels::AttentionArgs probe;
  probe.kv_type = kvtype_;
  float int8_probe = 0.0f;  // any non-null scale: the int8 cache's kernel (tensor cores) gives sums too
  if (kv_format_ == KvFormat::int8) probe.k_scale = probe.v_scale = &int8_probe;
  probe.heads = c.num_heads;
  probe.kv_heads = c.num_kv_heads;
  probe.head_dim = c.head_dim;
  if (!kernels::decode_attention_sums_supported(probe) ||
      (fused_mlp_ && !kernels::gemv_sums_supported(c.q_dim(), c.head_dim))) {
    spdlog::info("cuda backend: decode attention merges its own splits (the o product cannot take sums for this shape)");
    return ok_status();
  }
  if (const char* env = std::getenv("COSMOS_ATT_SUMS"); env && std::string_view(env) == "0") {
    spdlog::info("cuda backend: decode attention merges its own splits (COSMOS_ATT_SUMS=0)");
    return ok_status();
  }
  const std::size_t stride = (2 * static_cast<std::size_t>(c.num_heads) * (c.head_dim + 1) + 3) / 4 * 4;
  const std::size_t bytes = stride * layers_.size() * sizeof(float);
  auto p = alloc(bytes, "the decode attention sums");
  if (!p) {
    spdlog::warn("cuda backend: decode attention merges its own splits: no GPU memory for its sums ({})",
                 p.error().message);
    return ok_status();
  }
  CUDA_TRY(cudaMemset(*p, 0, bytes));
  att_sums_ = static_cast<float*>(*p);
  att_sums_stride_ = stride;
  att_sums_bytes_ = bytes;
  quant_att_sums_ = quant;
  spdlog::info("cuda backend: decode attention leaves its split merge to the o product{} (sums; COSMOS_ATT_SUMS=0: "
               "merged in the attention)",
               quant_att_sums_ ? fmt::format(" at {} tokens of context or more", long_context_from()) : std::string());
  return ok_status();
}

// One-sequence decode steps replay the long-context graphs from this context length on (INT_MAX:
// never). int4: from kLongContext (o's wide kernel, which divides the attention's sums). The fused
// MLP (bf16 / fp16, sums at every length): past kLongSplitsContext, where only the attention's
// splits differ (kernels::kDecodeAttentionLongSplits). int8 / fp8 with sums: their o product divides
// the sums, and the attention runs the long splits; below the threshold the attention merges its
// own 64 splits. fp8 past kLongContext (+0.7% at 1,024 tokens, +1.2% at 2,048), int8 past
// kLongSplitsContext (-1.1% at 1,024, level at 2,048 from there; docs/PERFORMANCE.md, session 45).
// Their o product's kSums kernel runs 1 row per item up to kLongSplitsContext (fp8 at 2,048: 2 rows
// measured 1.7-2.3% slower) and 2 past it (+1.3% int8, +2.0% fp8 at 4,096): context_tier() 1 and 2.
// From kDecodeAttentionHalvesFrom, where the long graphs' splits take two or more rounds, the
// attention runs with every warp on mma work (DecodeAttentionSums::halves): tiers 3 and 4.
int CudaBackend::context_tier(int max_ctx) const {
  if (max_ctx < long_context_from()) return 0;
  const bool eight_bit = quant_att_sums_ && precision_ != Precision::int4;
  const int tier = eight_bit && max_ctx > kLongSplitsContext ? 2 : 1;
  return max_ctx >= kernels::kDecodeAttentionHalvesFrom ? tier + 2 : tier;
}

int CudaBackend::long_context_from() const {
  if (precision_ == Precision::int4) return kLongContext;
  if (!att_sums_ || !(fused_mlp_ || quant_att_sums_)) return std::numeric_limits<int>::max();
  if (quant_att_sums_ && precision_ == Precision::fp8) return kLongContext + 1;
  return kLongSplitsContext + 1;
}

// down [hidden, intermediate] -> [intermediate, hidden] in place, through `scratch` (same size).
Status CudaBackend::transpose_down(DevMatrix& down, void* scratch) {
  const std::size_t H = config_.hidden_size, FF = config_.intermediate_size;
  kernels::launch_transpose16(static_cast<const std::uint16_t*>(down.data), static_cast<int>(H), static_cast<int>(FF),
                              static_cast<std::uint16_t*>(scratch), stream_);
  CUDA_TRY(cudaGetLastError());
  const std::size_t bytes = H * FF * kernels::elem_size(wtype_);
  CUDA_TRY(cudaMemcpyAsync(down.data, scratch, bytes, cudaMemcpyDeviceToDevice, stream_));
  down.transposed = true;
  return ok_status();
}

}  // namespace cosmos
