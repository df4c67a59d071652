// launch_gemv_quant (int8, fp8 E4M3 and int4 weights) against a float64 CPU reference (the PDL
// chains are in test_gemv_quant_chain.cpp, the shared helpers in gemv_quant_test_common.h): random fp32
// weights quantized by the engine's cosmos::quantize_rows (the CPU backend's very bytes) and the
// reference computed in double from cosmos::dequantize_row values and the same fp32 x. Fresh random
// inputs for every case; the 7B decode shapes (q/k/v with norm + bias, o with the residual aliasing
// y, gate/up with norm + SwiGLU, down with 74 KB of x, lm_head with norm) and odd shapes
// (the element-wise path: cols not a multiple of the vector width, int4 with odd cols or a short
// last group, misaligned pointers; the vector path with 1, 3 or 7 rows, with x read through L1);
// PDL off and on, under the automatic launch knobs and then under every QGemvTuning combination
// (those resolving to the same launch run once; the reference is computed once per case); outputs
// NaN-poisoned and a poisoned guard after y that must stay untouched. Then
// chains of dependent launches with PDL on (eager and in a CUDA graph), which fail if a kernel reads
// its input before the previous kernel has finished writing it.
//
// Tolerance, per output (u = 2^-24). Both sides use the same quantized bytes and fp32 x, so the
// differences are fp32 roundings. Let A = sum_c |s q_c| |xn_c| (fp8: s the row scale), sum_c |s|
// (q_c + 256) |xn_c| (int8: the vector kernel sums (q + 128) x, then subtracts 128 sum(x)) or sum_c
// (|s_g q_c| + |m_g|) |xn_c| (int4), the magnitudes the kernel's sums actually carry (int4's
// s (q . x) + m sum(x) split can be far larger than |w x| when m cancels s q):
//   - products and sums: a product passes through at most N = ceil(cols / 32) + 64 fp32 roundings:
//     the element-wise kernel's lane sum of ceil(cols / 32) terms, 5 shuffle levels and the epilogue;
//     the vector kernel's fewer (16 or 32 per 16-byte vector, ceil(cols / 512) vectors per lane,
//     the scale FFMA, the shuffles); int4's group sums of x (4-term sums and 5 shuffle levels, <= 8
//     roundings relative to sum |x| over the group); the reference's own fp32 dequantization
//     (fl(q s) for int8 / fp8, fl(fl(q s) + m) for int4: <= 2 u (|q s| + |m|)) and the element-wise
//     kernel's fmaf(q, s, m). First-order bound of recursive summation: N u A;
//   - fused RMSNorm: xn carries a relative error of at most (cols / 256 + 24) u (as test_gemv.cpp);
//   - SwiGLU: silu' <= 1.1, so 1.1 |up| err_g + |silu(g)| err_u + 8 u |y|; bias and residual adds:
//     one rounding each.
//   - int4 by integer dot products (the kDp kernels): x enters as 16-bit fixed point per group of
//     128 columns, |x - x~| <= (1/2 + 2^-8) max_g |xn| / 32767 < 2^-15 max_g |xn| (the rounding
//     and the scale's own fp32 rounding), both in s q . x~ and in the minimum's m sum(x~): kDpX
//     2^-15 D with D = sum_c (|s_g q_c| + |m_g|) max_g(c) |xn|. The relative L2 error of int4
//     outputs is then about 2^-16 (uniform x): its bound is 1e-4.
//   - int4 on tensor cores (gemv_q4_mma.cu): x enters as bf16 hi + lo, |x - hi - lo| <= 2^-18 |x|
//     = 64 u |x| (kTcX u A); the mma sums carry s (128 + q) |x| (the weights offset by 128), with at
//     most kTcOffset = 16 roundings (2 per mma in a chain of 4, the chains' and the columns' sums,
//     the subtraction of 128 X'), so B = sum_c s_g (128 + q_c) |xn_c| adds kTcOffset u B.
// The bound is doubled for margin. A real bug (a wrong nibble, scale, group or x element) errs by
// about |w x| on many terms; the relative L2 error over all outputs must also stay below 1e-5 (int4
// 1e-4, above; with
// at least 16 outputs: for one output it is that output's error relative to a value that can cancel).
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <string>
#include <tuple>
#include <vector>

#include <cuda_bf16.h>
#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include "cosmos/quant.h"
#include "kernels/device_info.cuh"
#include "kernels/gemv_quant.cuh"
#include "kernels/pdl.cuh"
#include "gemv_quant_test_common.h"

namespace cosmos {
namespace {

constexpr double kU = 1.0 / (1 << 24);
constexpr double kTcX = 64;       // int4 tensor-core kernel: x as bf16 hi + lo (see the top comment)
constexpr double kTcOffset = 16;  // its roundings of the offset sums
constexpr double kDpX = 1.0 / (1 << 15);  // int4 integer kernels: x as 16-bit fixed point per group

using namespace gemv_quant_test;  // NOLINT(google-build-using-namespace): this test binary's own helpers

struct Case {
  QuantFormat fmt;
  int rows, cols;
  bool bias, residual, alias, norm, swiglu, misalign;
  bool long_context = false;  // QGemvArgs::long_context (int4 o: the 2-blocks-per-SM kernel)
  // bf16 activations: with SwiGLU y as bf16 (QGemvArgs::y16), else x as bf16 (QGemvArgs::x16; only the
  // down- and o-shaped kernels take it, every other launch must refuse it and write nothing). 0: no,
  // 1: yes (x16: the automatic plan takes it), 2: x16 that the automatic plan refuses.
  int act16 = 0;
};

std::string case_name(const ::testing::TestParamInfo<Case>& info) {
  const Case& c = info.param;
  std::string s = std::string(fmt_name(c.fmt)) + "_" + std::to_string(c.rows) + "x" + std::to_string(c.cols);
  if (c.bias) s += "_bias";
  if (c.residual) s += c.alias ? "_resalias" : "_res";
  if (c.norm) s += "_norm";
  if (c.swiglu) s += "_swiglu";
  if (c.misalign) s += "_misaligned";
  if (c.long_context) s += "_long";
  if (c.act16) s += c.swiglu ? "_y16" : "_x16";
  return s;
}

void run_case(const Case& c) {
  const int outs = c.swiglu ? c.rows / 2 : c.rows;
  const float eps = 1e-6f;
  Rng rng(static_cast<std::uint64_t>(c.rows) * 1000003u + static_cast<std::uint64_t>(c.cols) * 7919u +
          (c.norm ? 11u : 0u) + (c.swiglu ? 101u : 0u) + static_cast<std::uint64_t>(c.fmt) * 1009u);
  const HostQuant hq(c.fmt, c.rows, c.cols, rng);
  std::vector<std::uint16_t> bias(c.rows), g(c.cols);
  std::vector<float> x(c.cols), residual(outs);
  for (auto& v : bias) v = f_to_bf16(rng.next());
  for (auto& v : g) v = f_to_bf16(1.0f + 0.5f * rng.next());
  for (auto& v : x) v = 3.0f * rng.next();  // the norm input is not unit-scale
  for (auto& v : residual) v = rng.next();
  const bool x16 = c.act16 && !c.swiglu, y16 = c.act16 && c.swiglu;
  std::vector<std::uint16_t> xb;  // x16: x as bf16, the reference's x its exact values
  if (x16) {
    for (auto& v : x) xb.push_back(f_to_bf16(v));
    for (int i = 0; i < c.cols; ++i) x[i] = bf16_to_f(xb[i]);
  }

  // float64 reference and per-output bounds (see the top comment)
  std::vector<double> xn(c.cols);
  double ss = 0;
  for (int i = 0; i < c.cols; ++i) ss += static_cast<double>(x[i]) * x[i];
  const double inv = 1.0 / std::sqrt(ss / c.cols + eps);
  for (int i = 0; i < c.cols; ++i) xn[i] = c.norm ? static_cast<double>(bf16_to_f(g[i])) * (x[i] * inv) : x[i];
  const double n_dot = std::ceil(c.cols / 32.0) + 64, n_norm = c.norm ? std::ceil(c.cols / 256.0) + 24 : 0;
  std::vector<double> dot(c.rows), err(c.rows);
  std::vector<float> wrow;
  std::vector<double> mrow, orow;
  const bool int4 = c.fmt == QuantFormat::int4_group;
  std::vector<double> gmax((c.cols + kInt4GroupSize - 1) / kInt4GroupSize, 0.0);  // max |xn| per group
  for (int i = 0; i < c.cols; ++i) gmax[i / kInt4GroupSize] = std::max(gmax[i / kInt4GroupSize], std::fabs(xn[i]));
  for (int r = 0; r < c.rows; ++r) {
    hq.row(r, wrow, mrow, orow);
    double acc = 0, mag = 0, omag = 0, dmag = 0;
    for (int i = 0; i < c.cols; ++i) {
      acc += static_cast<double>(wrow[i]) * xn[i];
      mag += mrow[i] * std::fabs(xn[i]);
      omag += orow[i] * std::fabs(xn[i]);
      if (int4) dmag += mrow[i] * gmax[i / kInt4GroupSize];
    }
    if (c.bias) acc += bf16_to_f(bias[r]);
    dot[r] = acc;
    err[r] = 2 * (n_dot + n_norm + kTcX) * kU * mag + 2 * kTcOffset * kU * omag + 2 * kU * std::fabs(acc) +
             2 * kDpX * dmag;
  }
  std::vector<double> ref(outs), tol(outs);
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

  DevQuant dw;
  DevBuf<std::uint16_t> db, dg;
  DevBuf<float> dx, dres, dy;
  DevBuf<std::uint16_t> dx16, dy16;
  constexpr int kGuard = 64;  // poisoned floats after y: nothing may be written there
  dw.upload(hq.m, c.misalign ? 1 : 0);
  db.alloc(c.rows);
  db.upload(bias);
  dg.alloc(c.cols);
  dg.upload(g);
  dx.alloc(c.cols, c.misalign ? 1 : 0);
  dx.upload(x);
  dres.alloc(outs);
  dres.upload(residual);
  dy.alloc(outs, 0, kGuard);
  if (x16) {
    dx16.alloc(c.cols, c.misalign ? 1 : 0);
    dx16.upload(xb);
  }
  if (y16) dy16.alloc(outs, 0, kGuard);
  cudaStream_t stream;
  ASSERT_EQ(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking), cudaSuccess);

  // The automatic knobs with PDL off and on, then every knob combination (PDL on) that resolves to
  // a launch not run yet.
  struct Run {
    kernels::QGemvTuning tuning;
    bool pdl;
    bool record;
  };
  std::vector<Run> runs = {{kernels::QGemvTuning{}, false, true}, {kernels::QGemvTuning{}, true, true}};
  for (int rows : {1, 2, 4})  // 4: int4 with 8-byte vectors only
    for (int loads : {4, 7, 8})  // 7: int4's 8-byte vectors where the shape takes them
      for (int pipe : {0, 1})
        for (int l2 : {0, 1})
          for (int st : {0, 1}) runs.push_back({kernels::QGemvTuning{rows, loads, pipe, l2, st, 0, 0, -1}, true, false});
  for (int mma : {2, 4})
    for (int tw : {4, 8}) runs.push_back({kernels::QGemvTuning{0, 0, -1, -1, -1, mma, tw, -1}, true, false});
  for (int wide : {0, 1}) runs.push_back({kernels::QGemvTuning{0, 0, -1, -1, -1, -1, 0, wide}, true, false});
  std::vector<kernels::QGemvTuning> done;
  auto same = [](const kernels::QGemvTuning& a, const kernels::QGemvTuning& b) {
    return a.rows_per_item == b.rows_per_item && a.loads == b.loads && a.pipeline == b.pipeline &&
           a.l2_next == b.l2_next && a.stage_x == b.stage_x && a.mma == b.mma &&
         a.mma_tile_warps == b.mma_tile_warps && a.wide == b.wide;
  };
  for (const Run& run : runs) {
    const bool pdl = run.pdl;
    kernels::set_gemv_quant_tuning(run.tuning);
    kernels::QGemvArgs pa;
    pa.w = dw.mat;
    pa.x = dx.ptr;
    pa.rows = c.rows;
    pa.cols = c.cols;
    pa.norm_weight = c.norm ? reinterpret_cast<const __nv_bfloat16*>(dg.ptr) : nullptr;
    pa.swiglu = c.swiglu;
    pa.long_context = c.long_context;
    const kernels::QGemvTuning plan = kernels::gemv_quant_plan(pa);
    if (run.record) {
      // The wide o kernel: int4 rows of 3,584 columns without norm or SwiGLU at 2 rows per item,
      // automatic at a long context only.
      const bool o_shape = c.fmt == QuantFormat::int4_group && c.cols == 3584 && !c.norm && !c.swiglu && !c.misalign &&
                           plan.rows_per_item == 2 && plan.loads == 7;
      EXPECT_EQ(plan.wide, o_shape && c.long_context ? 1 : 0);
    }
    if (!run.record) {
      bool seen = false;
      for (const auto& d : done) seen = seen || same(d, plan);
      if (seen) continue;
    }
    if (pdl) done.push_back(plan);
    char trace[160];
    std::snprintf(trace, sizeof trace, "pdl %s, rows %d loads %d pipeline %d l2_next %d stage_x %d mma %d/%d wide %d%s",
                  pdl ? "on" : "off", plan.rows_per_item, plan.loads, plan.pipeline, plan.l2_next, plan.stage_x,
                  plan.mma, plan.mma_tile_warps, plan.wide, run.record ? " (auto)" : "");
    SCOPED_TRACE(trace);
    kernels::set_pdl_enabled(pdl);
    ASSERT_EQ(cudaMemset(dy.ptr, 0xFF, (outs + kGuard) * sizeof(float)), cudaSuccess);  // NaN poison
    if (y16) {
      ASSERT_EQ(cudaMemset(dy16.ptr, 0xFF, (outs + kGuard) * sizeof(std::uint16_t)), cudaSuccess);
    }
    if (c.alias) dy.upload(residual);
    ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
    kernels::QGemvArgs a;
    a.w = dw.mat;
    a.x = dx.ptr;
    a.bias = c.bias ? reinterpret_cast<const __nv_bfloat16*>(db.ptr) : nullptr;
    a.residual = c.residual ? (c.alias ? dy.ptr : dres.ptr) : nullptr;
    a.y = dy.ptr;
    a.rows = c.rows;
    a.cols = c.cols;
    a.norm_weight = c.norm ? reinterpret_cast<const __nv_bfloat16*>(dg.ptr) : nullptr;
    a.norm_eps = eps;
    a.swiglu = c.swiglu;
    a.long_context = c.long_context;
    if (x16) {
      a.x = nullptr;
      a.x16 = reinterpret_cast<const __nv_bfloat16*>(dx16.ptr);
    }
    if (y16) {
      a.y = nullptr;
      a.y16 = reinterpret_cast<__nv_bfloat16*>(dy16.ptr);
    }
    // x16: the automatic plans of down and o shapes take it; others must refuse it untouched.
    const bool takes = !x16 || kernels::gemv_quant_takes_x16(a);
    if (x16 && run.record) {
      EXPECT_EQ(takes, c.act16 == 1);
    }
    const std::size_t bytes = kernels::launch_gemv_quant(a, stream);
    ASSERT_EQ(cudaGetLastError(), cudaSuccess);
    ASSERT_EQ(cudaStreamSynchronize(stream), cudaSuccess);
    if (!takes) {
      EXPECT_EQ(bytes, 0u);
      const std::vector<float> y0 = dy.download(outs);
      for (int o = 0; o < outs; ++o)
        ASSERT_TRUE(c.alias ? y0[o] == residual[o] : std::isnan(y0[o])) << "a launch that refused x16 wrote y[" << o << "]";
      continue;
    }
    EXPECT_GE(bytes, hq.m.bytes());
    std::vector<float> y = dy.download(outs + kGuard);
    if (y16) {
      const std::vector<std::uint16_t> yb = dy16.download(outs + kGuard);
      for (int o = 0; o < outs + kGuard; ++o) y[o] = bf16_to_f(yb[o]);
    }
    double num = 0, den = 0, worst = 0;
    int bad = 0;
    for (int o = 0; o < outs; ++o) {
      ASSERT_FALSE(std::isnan(y[o])) << "output " << o << " not written";
      const double d = std::fabs(y[o] - ref[o]);
      // y16: the fp32 output's rounding to bf16, at most 2^-8 of it (u of an 8-bit significand)
      const double t = y16 ? tol[o] + 0x1p-8 * (std::fabs(ref[o]) + tol[o]) : tol[o];
      worst = std::max(worst, d / t);
      if (d > t && ++bad <= 5)
        ADD_FAILURE() << "output " << o << ": " << y[o] << " vs " << ref[o] << " (error " << d << " > bound " << t << ")";
      num += d * d;
      den += ref[o] * ref[o];
    }
    for (int k = 0; k < kGuard; ++k) ASSERT_TRUE(std::isnan(y[outs + k])) << "write past the end, at +" << k;
    const double rel = std::sqrt(num / std::max(den, 1e-30));
    if (outs >= 16) {  // (a handful of outputs: the per-output bounds alone)
      EXPECT_LT(rel, y16 ? 3e-3 : c.fmt == QuantFormat::int4_group ? 1e-4 : 1e-5);  // (bf16 y: 2^-8 at most)
    }
    if (run.record) {
      std::printf("[ measured ] %s %dx%d pdl %s: relative L2 error %.3g, worst error / bound %.3g\n", fmt_name(c.fmt),
                  c.rows, c.cols, pdl ? "on" : "off", rel, worst);
      char buf[64];
      std::snprintf(buf, sizeof buf, "%.3g / %.3g", rel, worst);
      ::testing::Test::RecordProperty(std::string("rel_l2_and_worst_err_over_bound_pdl_") + (pdl ? "on" : "off"), buf);
    }
  }
  kernels::set_gemv_quant_tuning({});
  kernels::set_pdl_enabled(false);
  cudaStreamDestroy(stream);
}

class GpuGemvQuant : public ::testing::TestWithParam<Case> {
 protected:
  void SetUp() override {
    const auto q = kernels::query_gpus();
    if (q.gpus.empty()) GTEST_SKIP() << q.why_none;
  }
};

TEST_P(GpuGemvQuant, MatchesFloat64Reference) { run_case(GetParam()); }

std::vector<Case> all_cases() {
  using F = QuantFormat;
  // rows, cols, bias, residual, alias, norm, swiglu, misalign
  const Case shapes[] = {
      // 7B decode shapes
      {F::int8_row, 4608, 3584, true, false, false, true, false, false},     // norm + q/k/v + bias
      {F::int8_row, 3584, 3584, false, true, true, false, false, false},     // o + residual (aliasing y)
      {F::int8_row, 37888, 3584, false, false, false, true, true, false},    // norm + gate/up + swiglu
      {F::int8_row, 3584, 18944, false, true, true, false, false, false},    // down + residual, x through L1
      {F::int8_row, 3584, 4224, false, true, true, false, false, false},     // down of the chain test: one step
      {F::int8_row, 152064, 3584, false, false, false, true, false, false},  // norm + lm_head
      {F::int8_row, 3584, 3584, false, true, true, false, false, false, true},  // o at a long context (int4: wide)
      {F::int8_row, 3, 3584, true, false, false, false, false, false, true},    // wide: a half last item, bias
      // odd shapes: the element-wise path for some or all formats
      {F::int8_row, 1, 100, false, false, false, false, false, false},
      {F::int8_row, 3, 130, true, false, false, false, false, false},
      {F::int8_row, 7, 257, false, true, false, false, false, false},
      {F::int8_row, 33, 1000, true, true, true, true, false, false},
      {F::int8_row, 74, 130, true, true, true, true, true, false},
      {F::int8_row, 9, 200, false, false, false, true, false, false},     // int4: a short last group
      {F::int8_row, 5, 3648, true, false, false, false, false, false},    // int4: a short last group
      {F::int8_row, 256, 4096, true, false, false, false, false, true},   // misaligned q and x
      {F::int8_row, 130, 3584, false, false, false, true, true, true},    // misaligned q and x
      // the vector path at the edges
      {F::int8_row, 1, 3584, false, false, false, false, false, false},   // one row: a half item
      {F::int8_row, 3, 3584, true, false, false, true, false, false},
      {F::int8_row, 7, 4096, false, true, false, false, false, false},
      {F::int8_row, 2, 16, false, false, false, false, false, false},     // int8 / fp8: one vector
      {F::int8_row, 4, 128, false, false, false, false, true, false},     // int4: one group
      {F::int8_row, 600, 1024, true, true, true, false, true, false},     // swiglu + bias + residual
      {F::int8_row, 17, 1152, true, true, true, true, false, false},      // int4 tensor cores: 9 groups, a partial tile
      {F::int8_row, 26, 640, true, true, false, true, true, false},       // int4 tensor cores: 5 groups, 13 outputs
      {F::int8_row, 40000, 512, false, false, false, true, false, false}, // many items per warp
      {F::int8_row, 64, 8192, true, false, false, true, false, false},    // x through L1, with norm
      {F::int8_row, 66, 8192, false, false, false, true, true, false},    // x through L1, norm + swiglu
      {F::int8_row, 48, 30080, false, true, true, false, false, false},   // x through L1, several steps
      {F::int8_row, 10, 3584, true, true, true, true, true, false},       // int4, 4 rows per item: 5 outputs of SwiGLU
      {F::int8_row, 6, 7168, true, true, false, false, false, false},     // int4, 4 rows per item: a half last item
      // bf16 activations (act16): the one-token MLP's gate/up writing bf16, the down product staging it
      {F::int8_row, 37888, 3584, false, false, false, true, true, false, false, 1},  // gate/up, y16
      {F::int8_row, 600, 1024, true, true, true, false, true, false, false, 1},    // swiglu + bias + residual, y16
      {F::int8_row, 74, 130, true, true, true, true, true, false, false, 1},       // element-wise, y16
      {F::int8_row, 3584, 18944, false, true, true, false, false, false, false, 1},  // down + residual, x16
      {F::int8_row, 3584, 4224, false, true, false, false, false, false, false, 1},  // one step, x16
      {F::int8_row, 64, 20608, false, true, false, false, false, false, false, 1},   // x16: int4's 2nd batch ends mid-warp
      {F::int8_row, 3584, 3584, false, true, true, false, false, false, false, 1},   // o + residual, x16
      {F::int8_row, 48, 30080, false, true, true, false, false, false, false, 2},    // x through L1: refuses x16
      {F::int8_row, 4608, 3584, true, false, false, true, false, false, false, 2},   // norm: refuses x16
  };
  std::vector<Case> v;
  for (const F f : {F::int8_row, F::fp8_row, F::int4_group}) {
    for (Case c : shapes) {
      c.fmt = f;
      v.push_back(c);
    }
  }
  return v;
}

INSTANTIATE_TEST_SUITE_P(Shapes, GpuGemvQuant, ::testing::ValuesIn(all_cases()), case_name);

// Launching with swiglu and an odd row count, or an empty problem, enqueues nothing and returns 0.
TEST(GpuGemvQuantArgs, RejectsOddSwigluRowsAndEmptyProblems) {
  kernels::QGemvArgs a;
  a.rows = 3;
  a.cols = 16;
  a.swiglu = true;
  EXPECT_EQ(kernels::launch_gemv_quant(a, nullptr), 0u);
  a.rows = 0;
  a.swiglu = false;
  EXPECT_EQ(kernels::launch_gemv_quant(a, nullptr), 0u);
  a.rows = 4;
  a.cols = 0;
  EXPECT_EQ(kernels::launch_gemv_quant(a, nullptr), 0u);
}

}  // namespace
}  // namespace cosmos
