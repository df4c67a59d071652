// CUDA backend: the quantized one-token products' launch knobs on this GPU (cosmos/decode_tuner.h).
// The knobs are process-wide in the kernels (kernels::set_gemv_quant_shape_knobs); each backend keeps
// its own spec and puts it back before a pass if another backend changed them meanwhile (the app
// holds the old backend while a precision switch loads the new one).
//
// Which variants are offered: one knob value of one product, where the kernels would plan that
// product differently from the automatic plan (kernels::gemv_quant_plan, at short and long
// contexts), and where the product keeps the input format the backend chose at load (bf16 x, the
// attention's sums): those were decided under the automatic plan, and only a reload could change them.
//
// The saved tuning (`cosmos-cli tune`, cosmos/tune_cache.h) is applied at the end of a load when its
// identity matches: this GPU, precision, KV format, model shape and the automatic plans of every
// product (a kernel change that moves a plan makes the file stale). COSMOS_DECODE_TUNING=0 or
// COSMOS_QGEMV_TUNING (an experiment's knobs) leave it unapplied, and the log says so.
#include <array>
#include <cstdlib>
#include <string>
#include <string_view>

#include <spdlog/spdlog.h>

#include "cosmos/tune_cache.h"
#include "cuda/cuda_backend_impl.h"
#include "kernels/gemv_quant.cuh"

namespace cosmos {

namespace {

const void* g_knobs_owner = nullptr;  // the backend whose spec the kernels hold now

std::string plan_text(const kernels::QGemvTuning& t) {
  const std::array<int, 8> v = {t.rows_per_item, t.loads, t.pipeline, t.l2_next, t.stage_x, t.mma, t.mma_tile_warps, t.wide};
  std::string s;
  for (std::size_t i = 0; i < v.size(); ++i) {  // appended, not "," + ...: GCC 12's -Wrestrict false positive
    if (i) s += ',';
    s += std::to_string(v[i]);
  }
  return s;
}

// The knob values the variants take (kernels/qgemv_tuning_spec.h); mma is int4's only.
constexpr std::array<std::string_view, 14> kValues = {"rows=1",  "rows=2",     "rows=4",     "loads=4", "loads=7",
                                                       "loads=8", "pipeline=0", "pipeline=1", "stage=0", "stage=1",
                                                       "l2=0",    "l2=1",       "wide=0",     "wide=1"};
constexpr std::array<std::string_view, 3> kMmaValues = {"mma=0", "mma=2", "mma=4"};

}  // namespace

std::vector<CudaBackend::DecodeProduct> CudaBackend::decode_products() const {
  std::vector<DecodeProduct> out;
  if (!quant_ || layers_.empty() || !layers_[0].qkv.quantized) return out;
  const ModelConfig& c = config_;
  const CudaLayer& L = layers_[0];
  const auto args = [&](const DevMatrix& w, int rows, int cols, const void* norm, bool swiglu, bool x16) {
    kernels::QGemvArgs a;
    a.w = w.qm;
    a.rows = rows;
    a.cols = cols;
    a.x = x_;  // planning reads the inputs' alignment only
    a.y = x_;
    a.norm_weight = static_cast<const bf16*>(norm);
    a.swiglu = swiglu;
    if (swiglu && act16_) a.y16 = reinterpret_cast<bf16*>(x_), a.y = nullptr;
    if (x16) a.x16 = reinterpret_cast<const bf16*>(x_), a.x = nullptr;
    return a;
  };
  out.push_back({"qkv", args(L.qkv, c.q_dim() + 2 * c.kv_dim(), c.hidden_size, L.in_norm_w, false, false)});
  out.push_back({"o", args(L.o, c.hidden_size, c.q_dim(), nullptr, false, att16_)});
  out.push_back({"gateup", args(L.gate_up, 2 * c.intermediate_size, c.hidden_size, L.post_norm_w, true, false)});
  out.push_back({"down", args(L.down, c.hidden_size, c.intermediate_size, nullptr, false, act16_)});
  if (lm_head_.quantized) out.push_back({"lm_head", args(lm_head_, c.vocab_size, c.hidden_size, final_norm_, false, false)});
  return out;
}

// Whether the knobs now set keep every input format chosen at load (choose_act16, choose_att_sums).
bool CudaBackend::decode_formats_hold() const {
  for (const DecodeProduct& p : decode_products()) {
    if (p.args.x16 && !kernels::gemv_quant_takes_x16(p.args)) return false;
    if (p.name == std::string_view("o") && quant_att_sums_) {
      kernels::QGemvArgs o = p.args;
      o.long_context = true;
      o.x16 = nullptr;
      o.x = x_;
      if (!kernels::gemv_quant_takes_sums(o)) return false;
    }
  }
  return true;
}

// Every product's plan at short and long contexts under the knobs now set.
std::string CudaBackend::decode_plans() const {
  std::string s;
  for (const DecodeProduct& p : decode_products()) {
    kernels::QGemvArgs longer = p.args;
    longer.long_context = true;
    s += std::string(s.empty() ? "" : " ") + p.name + ":" + plan_text(kernels::gemv_quant_plan(p.args)) + "/" +
         plan_text(kernels::gemv_quant_plan(longer));
  }
  return s;
}

std::vector<std::string> CudaBackend::decode_tuning_candidates() const {
  std::vector<std::string> out;
  if (!quant_) return out;
  const kernels::QGemvTuningSpec saved = kernels::parse_qgemv_tuning(decode_spec_);
  kernels::set_gemv_quant_shape_knobs({});
  const std::string automatic = decode_plans();
  std::vector<std::string> seen;  // plans already offered
  for (const DecodeProduct& p : decode_products()) {
    const std::string shape = std::to_string(p.args.rows) + "x" + std::to_string(p.args.cols);
    std::vector<std::string_view> values(kValues.begin(), kValues.end());
    if (*quant_ == kernels::QuantKind::int4_group) values.insert(values.end(), kMmaValues.begin(), kMmaValues.end());
    for (std::string_view v : values) {
      const std::string spec = shape + "/" + std::string(v);
      kernels::set_gemv_quant_shape_knobs(kernels::parse_qgemv_tuning(spec));
      const std::string plans = decode_plans();
      if (plans == automatic || !decode_formats_hold()) continue;
      bool dup = false;
      for (const std::string& s : seen) dup |= s == plans;
      if (dup) continue;
      seen.push_back(plans);
      out.push_back(spec);
    }
  }
  kernels::set_gemv_quant_shape_knobs(saved);
  g_knobs_owner = this;  // the kernels hold this backend's knobs again (its graphs were captured under them)
  return out;
}

Status CudaBackend::set_decode_tuning(std::string_view spec) {
  if (!quant_) {
    if (spec.empty()) return ok_status();
    return make_error(ErrorCategory::bad_input, "tuning.unsupported",
                      "decode launch knobs are for int8, fp8 and int4 weights; this backend runs " +
                          std::string(to_string(precision_)));
  }
  const kernels::QGemvTuningSpec parsed = kernels::parse_qgemv_tuning(spec);
  if (!parsed.errors.empty()) {
    std::string why;
    for (const std::string& e : parsed.errors) why += (why.empty() ? "" : "; ") + e;
    return make_error(ErrorCategory::bad_input, "tuning.spec", "decode tuning '" + std::string(spec) + "': " + why);
  }
  if (ahead_.active)
    if (auto st = cancel_ahead(); !st) return st;
  sync_streams();
  kernels::set_gemv_quant_shape_knobs(parsed);
  if (!decode_formats_hold()) {
    // The kernels now hold this backend's own knobs again, whoever held them before the call.
    kernels::set_gemv_quant_shape_knobs(kernels::parse_qgemv_tuning(decode_spec_));
    g_knobs_owner = this;
    return make_error(ErrorCategory::bad_input, "tuning.inconsistent",
                      "decode tuning '" + std::string(spec) +
                          "' would change a product's input format chosen at load (bf16 input or the attention's "
                          "sums); the knobs in force stay");
  }
  g_knobs_owner = this;
  drop_graphs();
  decode_spec_ = std::string(spec);
  return ok_status();
}

void CudaBackend::own_decode_knobs() {
  if (g_knobs_owner == this || !quant_) return;
  if (ahead_.active) (void)cancel_ahead();  // its graph was captured under these knobs; let it finish first
  sync_streams();
  kernels::set_gemv_quant_shape_knobs(kernels::parse_qgemv_tuning(decode_spec_));
  g_knobs_owner = this;
  drop_graphs();
}

void CudaBackend::release_decode_knobs() {
  if (g_knobs_owner != this) return;
  kernels::set_gemv_quant_shape_knobs({});
  g_knobs_owner = nullptr;
}

std::filesystem::path CudaBackend::decode_tuning_file() const {
  if (tune_cache_dir_.empty() || decode_identity_.empty()) return {};
  return decode_tune_path(tune_cache_dir_, decode_identity_);
}

// At the end of a load: the identity under the automatic plan, then the saved tuning if it matches.
void CudaBackend::setup_decode_tuning() {
  decode_spec_.clear();
  decode_identity_.clear();
  if (!quant_) return;
  kernels::set_gemv_quant_shape_knobs({});
  g_knobs_owner = this;
  const ModelConfig& c = config_;
  decode_identity_ = gpu_.name + ", cc " + std::to_string(gpu_.sm_major) + "." + std::to_string(gpu_.sm_minor) + ", " +
                     std::to_string(gpu_.multiprocessors) + " SMs; " + std::string(to_string(precision_)) + ", kv " +
                     std::string(to_string(kv_format_)) + "; hidden " + std::to_string(c.hidden_size) + ", ff " +
                     std::to_string(c.intermediate_size) + ", heads " + std::to_string(c.num_heads) + "/" +
                     std::to_string(c.num_kv_heads) + ", vocab " + std::to_string(c.vocab_size) + "; plans " +
                     decode_plans();
  const std::filesystem::path file = decode_tuning_file();
  if (file.empty()) return;
  if (const char* env = std::getenv("COSMOS_DECODE_TUNING"); env && std::string_view(env) == "0") {
    spdlog::info("cuda backend: decode products on their automatic plan (COSMOS_DECODE_TUNING=0)");
    return;
  }
  if (std::getenv("COSMOS_QGEMV_TUNING")) {
    spdlog::info("cuda backend: the saved decode tuning is not applied while COSMOS_QGEMV_TUNING is set");
    return;
  }
  auto saved = read_decode_tune(file, decode_identity_);
  if (!saved) {
    if (saved.error().code == "tune_cache.missing")
      spdlog::info("cuda backend: decode products on their automatic plan (no tuning saved for this GPU and "
                   "precision; `cosmos-cli tune` times the variants)");
    else
      spdlog::warn("cuda backend: decode products on their automatic plan: the saved tuning is not used ({}: {}); "
                   "`cosmos-cli tune` times them again",
                   saved.error().code, saved.error().message);
    return;
  }
  if (saved->spec.empty()) {
    spdlog::info("cuda backend: decode products on their automatic plan (`cosmos-cli tune` found nothing faster on this GPU)");
    return;
  }
  if (auto st = set_decode_tuning(saved->spec); !st) {
    spdlog::warn("cuda backend: decode products on their automatic plan: the saved tuning '{}' is not used ({})",
                 saved->spec, st.error().message);
    return;
  }
  spdlog::info("cuda backend: decode products tuned for this GPU: {} (saved by `cosmos-cli tune`; COSMOS_DECODE_TUNING=0: "
               "the automatic plan)",
               saved->spec);
}

}  // namespace cosmos
