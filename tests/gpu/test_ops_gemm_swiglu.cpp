// The fused gate/up + SwiGLU product (kernels/gemm_swiglu.cuh) against a float64 reference on the
// same rounded inputs. Shapes cover token counts that are not multiples of the 128-token tile, k
// that is not a multiple of the 64-column stage (the TMA's zero fill), one and several tiles per
// block (the persistent loop: more tiles than SMs), bf16 and fp16, and the 7B's k = 3,584.
//
// Tolerance per element: the tensor cores multiply exactly and accumulate in fp32, so each of g, u
// is within e = k * 2^-23 * sum |x_i w_i| (twice the classic gamma_k bound) of its exact value; the
// activation silu(g) * u then errs by at most 1.1 |u| e_g + (|silu(g)| + 1.1 e_g) e_u (|silu'| <= 1.1)
// plus its own evaluation with __expf and __fdividef ((6 + 1.2 |g|) 2^-23 relative; bound used:
// (16 + 4 |g|) u), before the output's rounding (stored()). Every shape runs with the blocks in
// clusters of two sharing the weight copies (the default) and without (cluster = 1).
#include <cmath>
#include <cstdint>
#include <vector>

#include "kernels/gemm_swiglu.cuh"
#include "test_ops_common.h"

namespace cosmos::gpu_ops_test {
namespace {

struct GemmSwigluCase {
  int n, ff, k;
  bool f16;
  int cluster = 2;
};

void PrintTo(const GemmSwigluCase& c, std::ostream* os) {
  *os << "n" << c.n << "_ff" << c.ff << "_k" << c.k << (c.f16 ? "_f16" : "_bf16") << "_cluster" << c.cluster;
}

class GpuGemmSwiglu : public GpuOpsP<GemmSwigluCase> {};

TEST_P(GpuGemmSwiglu, MatchesFloat64Reference) {
  if (!kernels::gemm_swiglu_available()) GTEST_SKIP() << "needs an sm_90 GPU and a build with sm_90a code";
  const GemmSwigluCase c = GetParam();
  const ElemType type = c.f16 ? ElemType::f16 : ElemType::bf16;
  Rng rng(0x5EED0000u + static_cast<std::uint64_t>(c.n) * 131 + c.ff * 7 + c.k);
  auto to_bits = [&](float v) { return c.f16 ? float_to_f16(v) : float_to_bf16(v); };
  auto to_float = [&](std::uint16_t b) { return c.f16 ? f16_to_float(b) : bf16_to_float(b); };
  // x ~ U[-1, 1), w ~ U[-1, 1) / sqrt(k): g and u of order 1 whatever k.
  const float wscale = 1.5f / std::sqrt(static_cast<float>(c.k));
  std::vector<std::uint16_t> x(static_cast<std::size_t>(c.n) * c.k), w(static_cast<std::size_t>(2) * c.ff * c.k);
  for (auto& v : x) v = to_bits(rng.next());
  for (auto& v : w) v = to_bits(rng.next() * wscale);

  DevBuf<std::uint16_t> dx, dw, dout;
  dx.alloc(x.size(), 0, 0);
  dw.alloc(w.size(), 0, 0);
  dout.alloc(static_cast<std::size_t>(c.n) * c.ff);
  dx.upload(x);
  dw.upload(w);
  kernels::GemmSwigluArgs a;
  a.x = dx.ptr;
  a.w = dw.ptr;
  a.out = dout.ptr;
  a.n = c.n;
  a.ff = c.ff;
  a.k = c.k;
  a.f16 = c.f16;
  a.cluster = c.cluster;
  const std::size_t bytes = kernels::launch_gemm_swiglu(a, nullptr);
  ASSERT_EQ(cudaGetLastError(), cudaSuccess);
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  EXPECT_EQ(bytes, (x.size() + w.size() + static_cast<std::size_t>(c.n) * c.ff) * 2);
  const std::vector<std::uint16_t> out = dout.download();

  std::vector<double> xf(x.size()), wf(w.size());
  for (std::size_t i = 0; i < x.size(); ++i) xf[i] = to_float(x[i]);
  for (std::size_t i = 0; i < w.size(); ++i) wf[i] = to_float(w[i]);
  Checker ck{cat("gemm_swiglu_", type_name(type))};
  for (int t = 0; t < c.n; ++t) {
    const double* xr = xf.data() + static_cast<std::size_t>(t) * c.k;
    for (int i = 0; i < c.ff; ++i) {
      const double* gr = wf.data() + static_cast<std::size_t>(i) * c.k;
      const double* ur = wf.data() + static_cast<std::size_t>(c.ff + i) * c.k;
      double g = 0, u = 0, ga = 0, ua = 0;
      for (int j = 0; j < c.k; ++j) {
        g += xr[j] * gr[j];
        u += xr[j] * ur[j];
        ga += std::fabs(xr[j] * gr[j]);
        ua += std::fabs(xr[j] * ur[j]);
      }
      const double eg = c.k * 0x1p-23 * ga, eu = c.k * 0x1p-23 * ua;
      const double silu = g / (1.0 + std::exp(-g)), ref = silu * u;
      const double e32 = 1.1 * std::fabs(u) * eg + (std::fabs(silu) + 1.1 * eg) * eu + (16 + 4 * std::fabs(g)) * kU * std::fabs(ref);
      const Expect e = stored(type, ref, e32);
      ck.near(to_float(out[static_cast<std::size_t>(t) * c.ff + i]), e.want, e.tol, t, i);
    }
  }
  for (std::size_t i = static_cast<std::size_t>(c.n) * c.ff; i < out.size(); ++i)
    if (out[i] != 0xFFFF) ck.fail(cat("guard element ", i, " was written"));
  ck.finish();
}

std::vector<GemmSwigluCase> gemm_swiglu_cases() {
  std::vector<GemmSwigluCase> v = {
      {1, 128, 64, false},      // one token, one stage
      {77, 256, 200, false},    // partial token tile, k not a multiple of 64 (zero-filled)
      {128, 128, 3584, false},  // one full tile, the 7B's k
      {300, 384, 520, true},    // fp16, three token tiles (the last partial)
      {2100, 1024, 64, false},  // 17 x 8 = 136 tiles: more than an H200's 132 SMs
      {1100, 1920, 136, true},  // 9 x 15 = 135 tiles, fp16
      {520, 256, 3584, true},   // fp16 with the 7B's k
  };
  const std::size_t shapes = v.size();
  for (std::size_t i = 0; i < shapes; ++i) {
    GemmSwigluCase c = v[i];
    c.cluster = 1;
    v.push_back(c);
  }
  return v;
}

INSTANTIATE_TEST_SUITE_P(Shapes, GpuGemmSwiglu, ::testing::ValuesIn(gemm_swiglu_cases()));

// Shapes it does not take are refused before any launch (the caller keeps the unfused path).
TEST_F(GpuOps, GemmSwigluRefusesUnsupportedShapesWithoutLaunching) {
  EXPECT_TRUE(kernels::gemm_swiglu_supports(18944, 3584));
  EXPECT_FALSE(kernels::gemm_swiglu_supports(100, 3584));  // ff not a multiple of 128
  EXPECT_FALSE(kernels::gemm_swiglu_supports(128, 30));    // rows of 60 bytes: TMA needs 16-byte strides
  DevBuf<std::uint16_t> dx, dw, dout;
  dx.alloc(4 * 64, 0, 0);
  dw.alloc(2 * 100 * 64, 0, 0);
  dout.alloc(4 * 100);
  kernels::GemmSwigluArgs a;
  a.x = dx.ptr;
  a.w = dw.ptr;
  a.out = dout.ptr;
  a.n = 4;
  a.ff = 100;
  a.k = 64;
  EXPECT_EQ(kernels::launch_gemm_swiglu(a, nullptr), 0u);
  a.ff = 128;
  a.x = dx.ptr + 1;  // 2 bytes off 16-byte alignment
  EXPECT_EQ(kernels::launch_gemm_swiglu(a, nullptr), 0u);
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  for (const std::uint16_t v : dout.download()) ASSERT_EQ(v, 0xFFFF);
}

}  // namespace
}  // namespace cosmos::gpu_ops_test
