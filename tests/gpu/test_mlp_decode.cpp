// launch_mlp_decode (the fused decode MLP: RMSNorm, gate/up, SwiGLU and down in one kernel, split
// over the intermediate neurons, kernels/mlp_decode.cuh) and launch_transpose16 against float64 CPU
// references, on fresh random inputs: the 7B shape, odd small shapes (one chunk for the whole grid,
// more blocks than chunks, hidden sizes that leave threads without an output group), bf16 and fp16;
// chained behind a gemv with PDL on (the o product writing the MLP's input and a copy of it), which
// fails if the MLP reads its input before that gemv has written it. y holds the residual on entry
// (the kernel adds into it), so it cannot be poisoned; a NaN-poisoned guard after it must stay so.
//
// Tolerance per output, from the fp32 roundings on the same rounded inputs (u = 2^-24), doubled:
//   - gate and up: as test_gemv.cpp's fused-norm product, (H/32 + 16 + H/256 + 24) u sum|w n|;
//   - h = silu(gate) * up: 1.1 |up| err_gate + |silu(gate)| err_up + 8 u |h| (silu' <= 1.1);
//   - y: sum_j |down_rj| err_hj, plus (terms per thread + blocks + 2) u (sum_j |down_rj h_j| + |x_r|):
//     each thread sums its chunks' terms in order, then the blocks' partials are added one by one.
// A wrong or missing neuron errs by about |down_rj h_j|; the relative L2 error over all outputs must
// also stay under 1e-5.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include "kernels/gemv.cuh"
#include "kernels/mlp_decode.cuh"
#include "kernels/transpose.cuh"
#include "test_ops_common.h"

namespace cosmos {
namespace {

using gpu_ops_test::Rng;
using gpu_ops_test::kU;

struct Case {
  bool fp16;
  int hidden, inter;
  bool chain;  // behind a gemv with PDL on that writes x and its copy
};

std::string case_name(const ::testing::TestParamInfo<Case>& info) {
  const Case& c = info.param;
  return std::string(c.fp16 ? "fp16_" : "bf16_") + std::to_string(c.hidden) + "x" + std::to_string(c.inter) +
         (c.chain ? "_chain" : "");
}

std::uint16_t to_half_bits(bool fp16, float v) {
  return fp16 ? gpu_ops_test::float_to_f16(v) : gpu_ops_test::float_to_bf16(v);
}
double from_half_bits(bool fp16, std::uint16_t b) {
  return fp16 ? gpu_ops_test::f16_to_float(b) : gpu_ops_test::bf16_to_float(b);
}

template <typename E>
E* dev_upload(const std::vector<E>& v, std::size_t extra = 0) {
  E* p = nullptr;
  EXPECT_EQ(cudaMalloc(&p, (v.size() + extra) * sizeof(E)), cudaSuccess);
  EXPECT_EQ(cudaMemset(p, 0xFF, (v.size() + extra) * sizeof(E)), cudaSuccess);
  EXPECT_EQ(cudaMemcpy(p, v.data(), v.size() * sizeof(E), cudaMemcpyHostToDevice), cudaSuccess);
  return p;
}
template <typename E>
std::vector<E> dev_download(const E* p, std::size_t n) {
  std::vector<E> v(n);
  EXPECT_EQ(cudaMemcpy(v.data(), p, n * sizeof(E), cudaMemcpyDeviceToHost), cudaSuccess);
  return v;
}

template <typename T>
std::size_t launch(const Case& c, const std::uint16_t* wgu, const std::uint16_t* wdt, const std::uint16_t* g,
                   const float* x, float* y) {
  kernels::MlpDecodeArgsT<T> a;
  a.w_gate_up = reinterpret_cast<const T*>(wgu);
  a.w_down_t = reinterpret_cast<const T*>(wdt);
  a.norm_weight = reinterpret_cast<const T*>(g);
  a.x = x;
  a.y = y;
  a.hidden = c.hidden;
  a.inter = c.inter;
  a.norm_eps = 1e-6f;
  return kernels::launch_mlp_decode(a, nullptr);
}

template <typename T>
void launch_o(const Case& c, const std::uint16_t* wo, const float* a, float* x, float* xcopy) {
  kernels::GemvArgsT<T> o;
  o.w = reinterpret_cast<const T*>(wo);
  o.x = a;
  o.residual = x;
  o.y = x;
  o.y2 = xcopy;
  o.rows = c.hidden;
  o.cols = c.hidden;
  kernels::launch_gemv(o, nullptr);
}

void run_case(const Case& c) {
  const int H = c.hidden, F = c.inter;
  Rng rng(static_cast<std::uint64_t>(H) * 1000003u + static_cast<std::uint64_t>(F) * 7919u + (c.fp16 ? 17u : 0u) +
          (c.chain ? 5u : 0u));
  const float sg = std::sqrt(3.0f / static_cast<float>(H)), sd = std::sqrt(3.0f / static_cast<float>(F));
  std::vector<std::uint16_t> wgu(static_cast<std::size_t>(2) * F * H), wd(static_cast<std::size_t>(H) * F), g(H);
  for (auto& v : wgu) v = to_half_bits(c.fp16, 2.0f * sg * rng.next());  // gate/up of order 1: SwiGLU not linear
  for (auto& v : wd) v = to_half_bits(c.fp16, sd * rng.next());
  for (auto& v : g) v = to_half_bits(c.fp16, 1.0f + 0.5f * rng.next());
  std::vector<float> x(H);
  for (auto& v : x) v = 3.0f * rng.next();

  std::uint16_t* d_wgu = dev_upload(wgu);
  std::uint16_t* d_wd = dev_upload(wd);
  std::uint16_t* d_g = dev_upload(g);
  std::uint16_t* d_wdt = nullptr;
  ASSERT_EQ(cudaMalloc(&d_wdt, wd.size() * 2), cudaSuccess);
  ASSERT_GT(kernels::launch_transpose16(d_wd, H, F, d_wdt, nullptr), 0u);
  constexpr int kGuard = 64;
  float* d_y = dev_upload(x, kGuard);    // the residual, then the output; NaN guard after it
  float* d_x = dev_upload(x);            // the MLP's input (a copy of the residual)
  std::uint16_t* d_wo = nullptr;
  float* d_a = nullptr;
  if (c.chain) {
    // x and its copy come from an o product (x += W_o a) launched just before, both with PDL.
    std::vector<std::uint16_t> wo(static_cast<std::size_t>(H) * H);
    for (auto& v : wo) v = to_half_bits(c.fp16, sg * rng.next());
    std::vector<float> a(H);
    for (auto& v : a) v = rng.next();
    d_wo = dev_upload(wo);
    d_a = dev_upload(a);
    ASSERT_EQ(cudaMemset(d_x, 0xFF, H * sizeof(float)), cudaSuccess);  // NaN until the o product writes it
    ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
    kernels::set_pdl_enabled(true);
    if (c.fp16) launch_o<__half>(c, d_wo, d_a, d_y, d_x);
    else launch_o<__nv_bfloat16>(c, d_wo, d_a, d_y, d_x);
  }
  const std::size_t bytes = c.fp16 ? launch<__half>(c, d_wgu, d_wdt, d_g, d_x, d_y)
                                   : launch<__nv_bfloat16>(c, d_wgu, d_wdt, d_g, d_x, d_y);
  ASSERT_GT(bytes, 0u);
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  kernels::set_pdl_enabled(false);
  if (c.chain) x = dev_download(d_x, H);  // the input the MLP must have seen (and the residual)
  const std::vector<float> y = dev_download(d_y, H + kGuard);

  // Float64 reference on the same rounded inputs.
  double ss = 0;
  for (float v : x) ss += static_cast<double>(v) * v;
  const double inv = 1.0 / std::sqrt(ss / H + 1e-6);
  std::vector<double> n(H);
  for (int i = 0; i < H; ++i) n[i] = from_half_bits(c.fp16, g[i]) * (x[i] * inv);
  const double n_dot = std::ceil(H / 32.0) + 16 + std::ceil(H / 256.0) + 24;
  std::vector<double> h(F), eh(F);
  for (int j = 0; j < F; ++j) {
    double gate = 0, up = 0, mg = 0, mu = 0;
    for (int i = 0; i < H; ++i) {
      const double pg = from_half_bits(c.fp16, wgu[static_cast<std::size_t>(j) * H + i]) * n[i];
      const double pu = from_half_bits(c.fp16, wgu[static_cast<std::size_t>(j + F) * H + i]) * n[i];
      gate += pg;
      up += pu;
      mg += std::fabs(pg);
      mu += std::fabs(pu);
    }
    const double eg = 2 * n_dot * kU * mg + 2 * kU * std::fabs(gate), eu = 2 * n_dot * kU * mu + 2 * kU * std::fabs(up);
    const double silu = gate / (1 + std::exp(-gate));
    h[j] = silu * up;
    eh[j] = 1.1 * eg * (std::fabs(up) + eu) + std::fabs(silu) * eu + 16 * kU * std::fabs(h[j]);
  }
  const int blocks = std::min(kernels::mlp_decode_blocks(), F / 8);
  const double n_y = std::ceil(F / 8.0 / blocks) * 8 + blocks + 2;
  double num = 0, den = 0;
  int bad = 0;
  for (int r = 0; r < H; ++r) {
    double acc = x[r], mag = std::fabs(x[r]), eprop = 0;
    for (int j = 0; j < F; ++j) {
      const double wv = from_half_bits(c.fp16, wd[static_cast<std::size_t>(r) * F + j]);
      acc += wv * h[j];
      mag += std::fabs(wv * h[j]);
      eprop += std::fabs(wv) * eh[j];
    }
    const double tol = 2 * (eprop + n_y * kU * mag) + 1e-30;
    const double err = std::fabs(y[r] - acc);
    num += err * err;
    den += acc * acc;
    if (!(err <= tol) && bad++ < 5) ADD_FAILURE() << "y[" << r << "] = " << y[r] << ", want " << acc << " +- " << tol;
  }
  EXPECT_EQ(bad, 0) << "outputs out of bound";
  EXPECT_LT(std::sqrt(num / (den + 1e-300)), 1e-5);
  for (int i = H; i < H + kGuard; ++i) ASSERT_TRUE(std::isnan(y[i])) << "guard element " << i - H << " written";
  for (void* p : {static_cast<void*>(d_wgu), static_cast<void*>(d_wd), static_cast<void*>(d_g),
                  static_cast<void*>(d_wdt), static_cast<void*>(d_y), static_cast<void*>(d_x),
                  static_cast<void*>(d_wo), static_cast<void*>(d_a)})
    if (p) cudaFree(p);
}

class GpuMlpDecode : public ::testing::TestWithParam<Case> {
 protected:
  void SetUp() override {
    const auto q = kernels::query_gpus();
    if (q.gpus.empty()) GTEST_SKIP() << q.why_none;
  }
};

TEST_P(GpuMlpDecode, MatchesFloat64Reference) { run_case(GetParam()); }

INSTANTIATE_TEST_SUITE_P(Shapes, GpuMlpDecode,
                         ::testing::Values(Case{false, 3584, 18944, false}, Case{true, 3584, 18944, false},
                                           Case{false, 3584, 18944, true}, Case{true, 256, 512, true},
                                           Case{false, 64, 128, false}, Case{false, 128, 8, false},
                                           Case{true, 520, 96, false}, Case{false, 4096, 1024, false},
                                           Case{false, 136, 2072, false}, Case{true, 2056, 4104, false}),
                         case_name);

TEST(GpuMlpDecodeShapes, RefusesWhatItCannotRun) {
  EXPECT_TRUE(kernels::mlp_decode_supported(3584, 18944));
  EXPECT_FALSE(kernels::mlp_decode_supported(3588, 18944));  // hidden not a multiple of 8
  EXPECT_FALSE(kernels::mlp_decode_supported(4104, 18944));  // more outputs than the threads' groups
  EXPECT_FALSE(kernels::mlp_decode_supported(3584, 18940));  // neurons not in whole chunks of 8
  EXPECT_FALSE(kernels::mlp_decode_supported(0, 8));
  kernels::MlpDecodeArgsT<__nv_bfloat16> a;  // a refused shape launches nothing
  a.hidden = 12;
  a.inter = 8;
  EXPECT_EQ(kernels::launch_mlp_decode(a, nullptr), 0u);
}

TEST(GpuTranspose16, OddShapes) {
  const auto q = kernels::query_gpus();
  if (q.gpus.empty()) GTEST_SKIP() << q.why_none;
  Rng rng(42);
  for (const auto& [rows, cols] : {std::pair{37, 70}, std::pair{1, 33}, std::pair{64, 32}, std::pair{100, 1}}) {
    std::vector<std::uint16_t> src(static_cast<std::size_t>(rows) * cols);
    for (auto& v : src) v = static_cast<std::uint16_t>(rng.bits());
    std::uint16_t* d_src = dev_upload(src);
    std::uint16_t* d_dst = dev_upload(std::vector<std::uint16_t>(src.size()), 32);  // poisoned guard after it
    ASSERT_EQ(cudaMemset(d_dst, 0xFF, (src.size() + 32) * 2), cudaSuccess);
    ASSERT_EQ(kernels::launch_transpose16(d_src, rows, cols, d_dst, nullptr), 4u * src.size());
    const auto dst = dev_download(d_dst, src.size() + 32);
    for (int r = 0; r < rows; ++r)
      for (int c = 0; c < cols; ++c)
        ASSERT_EQ(dst[static_cast<std::size_t>(c) * rows + r], src[static_cast<std::size_t>(r) * cols + c])
            << rows << "x" << cols << " at " << r << "," << c;
    for (std::size_t i = src.size(); i < src.size() + 32; ++i) ASSERT_EQ(dst[i], 0xFFFF);
    cudaFree(d_src);
    cudaFree(d_dst);
  }
}

}  // namespace
}  // namespace cosmos
