// launch_gemv (bf16 and fp16 weights) against a float64 CPU reference: fresh random inputs for every
// case, model and odd shapes (the element-wise path: cols % 8 != 0 or misaligned pointers; x too
// large to stage in shared memory), each epilogue (bias, residual aliasing y, fused RMSNorm, fused
// SwiGLU), in both launch shapes (GemvTuning::wave) with PDL off and on, outputs NaN-poisoned and a
// poisoned guard after y that must stay untouched (and the wave shape with GemvTuning's kernel
// variants switched the other way from the default); then chains of dependent launches with PDL on
// (eager and in a CUDA graph), which fail if a kernel reads its input before the previous kernel
// has finished writing it.
//
// Tolerance, per output, from the error analysis of the fp32 arithmetic on the same rounded inputs
// (the reference uses the very same bf16/fp16 weights and fp32 x, so the only differences are the
// kernel's fp32 roundings; u = 2^-24):
//   - dot product: every product w*x passes through at most (cols/32 + 16) fp32 roundings before
//     it reaches y (each lane's running sum over at most cols/32 terms, the 8-term partial sums,
//     5 shuffle levels, the epilogue), so |err| <= (cols/32 + 16) u sum|w x| (first-order bound
//     of recursive summation);
//   - fused RMSNorm: the normalized input carries a relative error of at most (cols/256 + 24) u
//     (the sum of squares: cols/256 terms per thread and 8 partials, the mean, sqrt and divide,
//     then x * inv and * g), which adds that many u times sum|w xn|;
//   - SwiGLU: silu'(g) is bounded by 1.1, so gate and up errors propagate as
//     1.1 |up| err_g + |silu(g)| err_u, plus 8 u |y| for expf (2 ulp), the divide and the products.
// The bound is doubled for margin. A real bug (a missing weight vector, a wrong x element, a stale
// input) errs by about |w x| per term, far more than u * cols; a relative L2 error bound of 1e-5
// over all outputs backs the per-output check statistically.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <string>
#include <vector>

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include "gpu_test_buffers.h"
#include "half_convert.h"
#include "kernels/device_info.cuh"
#include "kernels/gemv.cuh"
#include "kernels/pdl.cuh"

namespace cosmos {
namespace {

// GemvTuning's kernel variants, each switched the other way from its default (-1 / 0 = default).
void flip_variants(kernels::GemvTuning& t) {
  const kernels::GemvTuning def;
  t.early_epi = def.early_epi == 0 ? 1 : 0;  // default -1 means on
  t.narrow = 0;                               // default -1 means "small products"; the forced runs below cover 1
}

constexpr double kU = 1.0 / (1 << 24);

using gpu_test::DevBuf;
using gpu_test::Rng;

using testing::from_f;
using testing::to_f;

enum class WType { kBf16, kFp16 };

struct Case {
  WType type;
  int rows, cols;
  bool bias, residual, alias, norm, swiglu, misalign;
};

std::string case_name(const ::testing::TestParamInfo<Case>& info) {
  const Case& c = info.param;
  std::string s = std::string(c.type == WType::kBf16 ? "bf16_" : "fp16_") + std::to_string(c.rows) + "x" +
                  std::to_string(c.cols);
  if (c.bias) s += "_bias";
  if (c.residual) s += c.alias ? "_resalias" : "_res";
  if (c.norm) s += "_norm";
  if (c.swiglu) s += "_swiglu";
  if (c.misalign) s += "_misaligned";
  return s;
}

// Float64 reference of one launch; `tol` gets each output's error bound (see the top comment).
template <typename T>
void reference(const std::vector<T>& w, const std::vector<float>& x, const std::vector<T>& bias,
               const std::vector<float>& residual, const std::vector<T>& g, const Case& c, float eps,
               std::vector<double>& ref, std::vector<double>& tol) {
  const int outs = c.swiglu ? c.rows / 2 : c.rows;
  std::vector<double> xn(c.cols);
  double ss = 0;
  for (int i = 0; i < c.cols; ++i) ss += static_cast<double>(x[i]) * x[i];
  const double inv = 1.0 / std::sqrt(ss / c.cols + eps);
  for (int i = 0; i < c.cols; ++i) xn[i] = c.norm ? static_cast<double>(to_f(g[i])) * (x[i] * inv) : x[i];
  const double n_dot = std::ceil(c.cols / 32.0) + 16, n_norm = c.norm ? std::ceil(c.cols / 256.0) + 24 : 0;
  std::vector<double> dot(c.rows), err(c.rows);
  for (int r = 0; r < c.rows; ++r) {
    const T* wr = w.data() + static_cast<std::size_t>(r) * c.cols;
    double acc = 0, mag = 0;
    for (int i = 0; i < c.cols; ++i) {
      const double p = static_cast<double>(to_f(wr[i])) * xn[i];
      acc += p;
      mag += std::fabs(p);
    }
    if (c.bias) acc += to_f(bias[r]);
    dot[r] = acc;
    err[r] = 2 * (n_dot + n_norm) * kU * mag + 2 * kU * std::fabs(acc);
  }
  ref.assign(outs, 0);
  tol.assign(outs, 0);
  for (int o = 0; o < outs; ++o) {
    double v, e;
    if (c.swiglu) {
      const double gt = dot[o], up = dot[o + outs], eg = err[o], eu = err[o + outs];
      const double silu = gt / (1 + std::exp(-gt));
      v = silu * up;
      e = 1.1 * eg * (std::fabs(up) + eu) + std::fabs(silu) * eu + 2 * 8 * kU * std::fabs(v);
    } else {
      v = dot[o];
      e = err[o];
    }
    if (c.residual) {
      v += residual[o];
      e += 2 * kU * (std::fabs(v) + std::fabs(residual[o]));
    }
    ref[o] = v;
    tol[o] = e + 1e-30;
  }
}

template <typename T>
void run_case(const Case& c) {
  const int outs = c.swiglu ? c.rows / 2 : c.rows;
  const int off_w = c.misalign ? 1 : 0, off_x = c.misalign ? 1 : 0;
  const float eps = 1e-6f;
  Rng rng(static_cast<std::uint64_t>(c.rows) * 1000003u + static_cast<std::uint64_t>(c.cols) * 7919u +
          (c.norm ? 11u : 0u) + (c.swiglu ? 101u : 0u) + (c.type == WType::kFp16 ? 1009u : 0u));
  const std::size_t n = static_cast<std::size_t>(c.rows) * c.cols;
  // Weights scaled so each output is about as large as the inputs (uniform, variance 1 / cols).
  const float ws = std::sqrt(3.0f / static_cast<float>(c.cols));
  std::vector<T> w(n), bias(c.rows), g(c.cols);
  std::vector<float> x(c.cols), residual(outs);
  for (auto& v : w) v = from_f<T>(rng.next() * ws);
  for (auto& v : bias) v = from_f<T>(rng.next());
  for (auto& v : g) v = from_f<T>(1.0f + 0.5f * rng.next());
  for (auto& v : x) v = 3.0f * rng.next();  // the norm input is not unit-scale
  for (auto& v : residual) v = rng.next();

  std::vector<double> ref, tol;
  reference(w, x, bias, residual, g, c, eps, ref, tol);

  DevBuf<T> dw, db, dg;
  DevBuf<float> dx, dres, dy;
  constexpr int kGuard = 64;  // poisoned floats after y: nothing may be written there
  dw.alloc(n, off_w);
  dw.upload(w);
  db.alloc(c.rows);
  db.upload(bias);
  dg.alloc(c.cols);
  dg.upload(g);
  dx.alloc(c.cols, off_x);
  dx.upload(x);
  dres.alloc(outs);
  dres.upload(residual);
  dy.alloc(outs, 0, kGuard);
  cudaStream_t stream;
  ASSERT_EQ(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking), cudaSuccess);

  // Both launch shapes (GemvTuning::wave), each with PDL off and on; then the wave shape with the
  // kernel variants of GemvTuning (early epilogue inputs, the narrow shape) switched the other way.
  // Runs 6, 7: the narrow shape forced on for every product without SwiGLU.
  for (int run = 0; run < 8; ++run) {
    const bool pdl = run % 2 == 1;
    kernels::GemvTuning tuning;
    tuning.wave = run >= 4 ? 1 : run / 2;
    if (run == 4 || run == 5) flip_variants(tuning);
    if (run >= 6) tuning.narrow = 1;
    kernels::set_gemv_tuning(tuning);
    SCOPED_TRACE(std::string(pdl ? "pdl on" : "pdl off") + (tuning.wave ? ", wave" : ", blocks") +
                 (run == 4 || run == 5 ? ", variants flipped" : run >= 6 ? ", narrow forced" : ""));
    kernels::set_pdl_enabled(pdl);
    ASSERT_EQ(cudaMemset(dy.ptr, 0xFF, (outs + kGuard) * sizeof(float)), cudaSuccess);  // NaN poison
    if (c.alias) dy.upload(residual);
    ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
    kernels::GemvArgsT<T> a;
    a.w = dw.ptr;
    a.x = dx.ptr;
    a.bias = c.bias ? db.ptr : nullptr;
    a.residual = c.residual ? (c.alias ? dy.ptr : dres.ptr) : nullptr;
    a.y = dy.ptr;
    a.rows = c.rows;
    a.cols = c.cols;
    a.norm_weight = c.norm ? dg.ptr : nullptr;
    a.norm_eps = eps;
    a.swiglu = c.swiglu;
    const std::size_t bytes = kernels::launch_gemv(a, stream);
    ASSERT_EQ(cudaGetLastError(), cudaSuccess);
    ASSERT_EQ(cudaStreamSynchronize(stream), cudaSuccess);
    EXPECT_GE(bytes, n * sizeof(T));
    const std::vector<float> y = dy.download(outs + kGuard);
    double num = 0, den = 0, worst = 0;
    int bad = 0;
    for (int o = 0; o < outs; ++o) {
      ASSERT_FALSE(std::isnan(y[o])) << "output " << o << " not written";
      const double d = std::fabs(y[o] - ref[o]);
      worst = std::max(worst, d / tol[o]);
      if (d > tol[o] && ++bad <= 5)
        ADD_FAILURE() << "output " << o << ": " << y[o] << " vs " << ref[o] << " (error " << d << " > bound " << tol[o]
                      << ")";
      num += d * d;
      den += ref[o] * ref[o];
    }
    for (int k = 0; k < kGuard; ++k) ASSERT_TRUE(std::isnan(y[outs + k])) << "write past the end, at +" << k;
    const double rel = std::sqrt(num / std::max(den, 1e-30));
    EXPECT_LT(rel, 1e-5);
    char buf[64];
    std::snprintf(buf, sizeof buf, "%.3g / %.3g", rel, worst);
    ::testing::Test::RecordProperty("rel_l2_and_worst_err_over_bound_" + std::to_string(run), buf);
  }
  kernels::set_pdl_enabled(false);
  kernels::set_gemv_tuning({});
  cudaStreamDestroy(stream);
}

class GpuGemv : public ::testing::TestWithParam<Case> {
 protected:
  void SetUp() override {
    const auto q = kernels::query_gpus();
    if (q.gpus.empty()) GTEST_SKIP() << q.why_none;
  }
};

TEST_P(GpuGemv, MatchesFloat64Reference) {
  const Case c = GetParam();
  if (c.type == WType::kBf16) {
    run_case<__nv_bfloat16>(c);
  } else {
    run_case<__half>(c);
  }
}

std::vector<Case> all_cases() {
  // rows, cols, bias, residual, alias, norm, swiglu, misalign
  const Case shapes[] = {
      {WType::kBf16, 1, 1, false, false, false, false, false, false},
      {WType::kBf16, 7, 9, true, false, false, false, false, false},
      {WType::kBf16, 33, 8, false, true, false, false, false, false},
      {WType::kBf16, 1000, 1003, true, true, true, false, false, false},
      {WType::kBf16, 1000, 1003, false, false, false, true, false, false},
      {WType::kBf16, 74, 77, true, true, true, true, true, false},
      {WType::kBf16, 3, 16, true, false, false, true, false, false},
      {WType::kBf16, 64, 4096, false, false, false, false, false, false},
      {WType::kBf16, 256, 4096, true, false, false, false, false, true},
      {WType::kBf16, 130, 3584, false, false, false, true, true, true},
      {WType::kBf16, 512, 3584, true, false, false, false, false, false},
      {WType::kBf16, 3584, 3584, true, false, false, false, false, false},
      {WType::kBf16, 4608, 3584, true, false, false, true, false, false},     // norm + qkv
      {WType::kBf16, 3584, 3584, false, true, true, false, false, false},     // o + residual
      {WType::kBf16, 37888, 3584, false, false, false, true, true, false},    // norm + gate/up + swiglu
      {WType::kBf16, 3584, 18944, false, true, true, false, false, false},    // down + residual
      {WType::kBf16, 600, 1024, true, true, true, false, true, false},        // swiglu + bias + residual
      {WType::kBf16, 40000, 512, false, false, false, true, false, false},    // many outputs per warp
      {WType::kBf16, 64, 32768, true, false, false, true, false, false},      // x beyond shared memory
      {WType::kBf16, 48, 30000, false, true, true, false, false, false},      // x beyond shared memory
      {WType::kBf16, 66, 30000, false, false, false, true, true, false},      // x beyond shared memory
  };
  std::vector<Case> v;
  for (const WType t : {WType::kBf16, WType::kFp16}) {
    for (Case c : shapes) {
      c.type = t;
      v.push_back(c);
    }
  }
  return v;
}

INSTANTIATE_TEST_SUITE_P(Shapes, GpuGemv, ::testing::ValuesIn(all_cases()), case_name);

// Launching with swiglu and an odd row count enqueues nothing and says so by returning 0.
TEST(GpuGemvArgs, RejectsOddSwigluRows) {
  kernels::GemvArgs a;
  a.rows = 3;
  a.cols = 8;
  a.swiglu = true;
  EXPECT_EQ(kernels::launch_gemv(a, nullptr), 0u);
  a.rows = 0;
  a.swiglu = false;
  EXPECT_EQ(kernels::launch_gemv(a, nullptr), 0u);
}

// A decode-like chain with PDL on: each launch reads what the one before wrote.
//   y1  = W1 rmsnorm(x) g1 + b1         (rows R1 >= H, cols H)
//   x  += W2 y1[0:H]                      (residual aliasing y)
//   act = swiglu(W3 rmsnorm(x) g2)        (rows 2F, cols H)
//   x  += W4 act                          (cols F)
// y1 and act start NaN-poisoned and x changes every iteration, so a kernel that reads its input
// before the previous kernel finished gets NaN or the previous iteration's values: both fail. The
// reference repeats the chain in float64; the tolerance (relative L2 1e-4) covers fp32 rounding
// carried through iterations (about 1e-6 relative per launch, see the top comment), far below the
// error of one stale or missing input.
template <typename T>
void run_chain(bool graph, int wave) {
  const int H = 3584, R1 = 4608, F = 4096, iters = 3;
  const float eps = 1e-6f;
  Rng rng(graph ? 77 : 78);
  auto make = [&](int rows, int cols) {
    std::vector<T> m(static_cast<std::size_t>(rows) * cols);
    const float s = std::sqrt(3.0f / static_cast<float>(cols));
    for (auto& v : m) v = from_f<T>(rng.next() * s);
    return m;
  };
  const std::vector<T> w1 = make(R1, H), w2 = make(H, H), w3 = make(2 * F, H), w4 = make(H, F);
  std::vector<T> b1(R1), g1(H), g2(H);
  for (auto& v : b1) v = from_f<T>(0.5f * rng.next());
  for (auto& v : g1) v = from_f<T>(1.0f + 0.5f * rng.next());
  for (auto& v : g2) v = from_f<T>(1.0f + 0.5f * rng.next());
  std::vector<float> x0(H);
  for (auto& v : x0) v = 2.0f * rng.next();

  // float64 reference
  std::vector<double> x(x0.begin(), x0.end());
  auto matvec = [](const std::vector<T>& m, int rows, int cols, const std::vector<double>& in) {
    std::vector<double> out(rows);
    for (int r = 0; r < rows; ++r) {
      double acc = 0;
      for (int i = 0; i < cols; ++i) acc += static_cast<double>(to_f(m[static_cast<std::size_t>(r) * cols + i])) * in[i];
      out[r] = acc;
    }
    return out;
  };
  auto rmsnorm = [&](const std::vector<double>& in, const std::vector<T>& gw) {
    double ss = 0;
    for (double v : in) ss += v * v;
    const double inv = 1.0 / std::sqrt(ss / H + eps);
    std::vector<double> out(H);
    for (int i = 0; i < H; ++i) out[i] = static_cast<double>(to_f(gw[i])) * (in[i] * inv);
    return out;
  };
  for (int it = 0; it < iters; ++it) {
    std::vector<double> y1 = matvec(w1, R1, H, rmsnorm(x, g1));
    for (int r = 0; r < R1; ++r) y1[r] += to_f(b1[r]);
    y1.resize(H);
    const std::vector<double> d2 = matvec(w2, H, H, y1);
    for (int i = 0; i < H; ++i) x[i] += d2[i];
    const std::vector<double> gu = matvec(w3, 2 * F, H, rmsnorm(x, g2));
    std::vector<double> act(F);
    for (int j = 0; j < F; ++j) act[j] = gu[j] / (1 + std::exp(-gu[j])) * gu[F + j];
    const std::vector<double> d4 = matvec(w4, H, F, act);
    for (int i = 0; i < H; ++i) x[i] += d4[i];
  }

  DevBuf<T> dw1, dw2, dw3, dw4, db1, dg1, dg2;
  DevBuf<float> dx, dy1, dact;
  dw1.alloc(w1.size());
  dw1.upload(w1);
  dw2.alloc(w2.size());
  dw2.upload(w2);
  dw3.alloc(w3.size());
  dw3.upload(w3);
  dw4.alloc(w4.size());
  dw4.upload(w4);
  db1.alloc(R1);
  db1.upload(b1);
  dg1.alloc(H);
  dg1.upload(g1);
  dg2.alloc(H);
  dg2.upload(g2);
  dx.alloc(H);
  dx.upload(x0);
  dy1.alloc(R1);   // NaN-poisoned by alloc
  dact.alloc(F);   // likewise

  kernels::set_pdl_enabled(true);
  kernels::GemvTuning tuning;
  tuning.wave = wave > 0 ? 1 : 0;
  if (wave == 2) flip_variants(tuning);
  kernels::set_gemv_tuning(tuning);
  cudaStream_t stream;
  ASSERT_EQ(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking), cudaSuccess);
  auto enqueue = [&] {
    for (int it = 0; it < iters; ++it) {
      kernels::GemvArgsT<T> a;
      a.w = dw1.ptr;
      a.x = dx.ptr;
      a.bias = db1.ptr;
      a.y = dy1.ptr;
      a.rows = R1;
      a.cols = H;
      a.norm_weight = dg1.ptr;
      a.norm_eps = eps;
      kernels::launch_gemv(a, stream);
      kernels::GemvArgsT<T> b;
      b.w = dw2.ptr;
      b.x = dy1.ptr;
      b.residual = dx.ptr;
      b.y = dx.ptr;
      b.rows = H;
      b.cols = H;
      kernels::launch_gemv(b, stream);
      kernels::GemvArgsT<T> c;
      c.w = dw3.ptr;
      c.x = dx.ptr;
      c.y = dact.ptr;
      c.rows = 2 * F;
      c.cols = H;
      c.norm_weight = dg2.ptr;
      c.norm_eps = eps;
      c.swiglu = true;
      kernels::launch_gemv(c, stream);
      kernels::GemvArgsT<T> d;
      d.w = dw4.ptr;
      d.x = dact.ptr;
      d.residual = dx.ptr;
      d.y = dx.ptr;
      d.rows = H;
      d.cols = F;
      kernels::launch_gemv(d, stream);
    }
  };
  if (graph) {
    cudaGraph_t g;
    cudaGraphExec_t exec;
    ASSERT_EQ(cudaStreamBeginCapture(stream, cudaStreamCaptureModeThreadLocal), cudaSuccess);
    enqueue();
    ASSERT_EQ(cudaStreamEndCapture(stream, &g), cudaSuccess);
    ASSERT_EQ(cudaGraphInstantiate(&exec, g, 0), cudaSuccess);
    ASSERT_EQ(cudaGraphLaunch(exec, stream), cudaSuccess);
    ASSERT_EQ(cudaStreamSynchronize(stream), cudaSuccess);
    cudaGraphExecDestroy(exec);
    cudaGraphDestroy(g);
  } else {
    enqueue();
  }
  ASSERT_EQ(cudaGetLastError(), cudaSuccess);
  ASSERT_EQ(cudaStreamSynchronize(stream), cudaSuccess);
  kernels::set_pdl_enabled(false);
  kernels::set_gemv_tuning({});
  cudaStreamDestroy(stream);

  const std::vector<float> y = dx.download(H);
  double num = 0, den = 0;
  for (int i = 0; i < H; ++i) {
    ASSERT_FALSE(std::isnan(y[i])) << "x[" << i << "] is NaN: a launch read a poisoned input";
    num += (y[i] - x[i]) * (y[i] - x[i]);
    den += x[i] * x[i];
  }
  EXPECT_LT(std::sqrt(num / den), 1e-4);
}

class GpuGemvChain : public ::testing::TestWithParam<std::tuple<WType, bool, int>> {
 protected:
  void SetUp() override {
    const auto q = kernels::query_gpus();
    if (q.gpus.empty()) GTEST_SKIP() << q.why_none;
  }
};

TEST_P(GpuGemvChain, DependentLaunchesWithPdlSeeTheirInputs) {
  const auto [type, graph, wave] = GetParam();
  if (type == WType::kBf16) {
    run_chain<__nv_bfloat16>(graph, wave);
  } else {
    run_chain<__half>(graph, wave);
  }
}

std::string chain_name(const ::testing::TestParamInfo<std::tuple<WType, bool, int>>& i) {
  return std::string(std::get<0>(i.param) == WType::kBf16 ? "bf16" : "fp16") + (std::get<1>(i.param) ? "_graph" : "_eager") +
         (std::get<2>(i.param) == 0 ? "_blocks" : std::get<2>(i.param) == 1 ? "_wave" : "_wave_variants");
}

INSTANTIATE_TEST_SUITE_P(Chains, GpuGemvChain,
                         ::testing::Combine(::testing::Values(WType::kBf16, WType::kFp16), ::testing::Bool(),
                                            ::testing::Values(0, 1, 2)),
                         chain_name);

}  // namespace
}  // namespace cosmos
