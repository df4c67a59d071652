// launch_gemm_q_small (quantized weights times a few bf16 tokens, kernels/gemm_q_small.cu) against a
// float64 CPU reference on the same quantized bytes: random weights quantized by the engine's
// cosmos::quantize_rows (the CPU backend's bytes), x rounded to bf16 on the host, and the reference
// sum_c w_c x_c in double from cosmos::dequantize_row. Shapes: rows not a multiple of the 16-row tile,
// the 7B decode matrices (q/k/v, down with 18,944 columns, gate/up), and token counts 1..64 (one n8
// tile, several, a partial one, two passes of 32); fp32 output, accumulation into a filled y, and bf16
// output; NaN-poisoned guards after y stay untouched, and y is poisoned again before every run.
// Each case runs the automatic launch plan with
// PDL off and on, then forced plans (1, 2 and 4 row tiles per warp, 1-8 warps per tile, weights in
// registers or through the shared-memory ring, or x shared by the block; columns split over 2-16
// blocks; passes of 32 or 64 tokens). Split plans must also leave their tickets zero and give the same
// bits when run again (the partial sums are added in a fixed order).
//
// Tolerance, per output, with A = sum_c |w_c x_c|: int8 / fp8 weights and bf16 x are exact in the
// mma's inputs, so only the fp32 accumulation rounds: at most one rounding (of up to 2^-23, the
// tensor cores need not round to nearest) per mma in the accumulator's chain of cols / 16, plus the
// kS partial sums and the row scale: (cols / 16 + 16) 2^-23 A. int4 weights enter as q s + m rounded
// once to bf16 (relative <= 2^-9 each): 2^-8 A. bf16 output adds its own rounding (2^-9 |y|).
// A wrong column pairing, nibble, scale or token errs by about |w x| on many terms, far above these;
// the relative L2 error over all outputs is also bounded (3e-5; int4 2e-3; bf16 output 4e-3).
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include <cuda_bf16.h>
#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include "cosmos/quant.h"
#include "kernels/device_info.cuh"
#include "kernels/gemm_q_small.cuh"
#include "kernels/pdl.cuh"
#include "gemv_quant_test_common.h"

namespace cosmos {
namespace {

using namespace gemv_quant_test;  // NOLINT(google-build-using-namespace): this test binary's own helpers

enum class Out { f32, f32_accumulate, bf16 };

struct Case {
  QuantFormat fmt;
  int rows, cols, n;
  Out out;
};

std::string case_name(const ::testing::TestParamInfo<Case>& info) {
  const Case& c = info.param;
  std::string s = std::string(fmt_name(c.fmt)) + "_" + std::to_string(c.rows) + "x" + std::to_string(c.cols) + "_n" +
                  std::to_string(c.n);
  if (c.out == Out::f32_accumulate) s += "_acc";
  if (c.out == Out::bf16) s += "_bf16";
  return s;
}

class GemmQSmall : public ::testing::TestWithParam<Case> {};

TEST_P(GemmQSmall, MatchesFloat64OnTheSameBytes) {
  const auto gq = kernels::query_gpus();
  if (gq.gpus.empty()) GTEST_SKIP() << gq.why_none;
  const Case c = GetParam();
  Rng rng(0x5EED0000u + static_cast<unsigned>(c.rows * 31 + c.cols * 7 + c.n) + static_cast<unsigned>(c.fmt) * 1009u);
  const HostQuant hq(c.fmt, c.rows, c.cols, rng);
  DevQuant dq;
  dq.upload(hq.m);

  // x: [n][cols] bf16; y: [n][rows] with a poisoned guard of 64 elements after it.
  std::vector<std::uint16_t> xb(static_cast<std::size_t>(c.n) * c.cols);
  for (auto& v : xb) v = f_to_bf16(2.0f * rng.next());
  DevBuf<std::uint16_t> x;
  x.alloc(xb.size());
  x.upload(xb);
  const std::size_t ny = static_cast<std::size_t>(c.n) * c.rows;
  std::vector<float> y0(ny, 0.0f);
  for (auto& v : y0) v = rng.next();
  DevBuf<float> yf;
  DevBuf<std::uint16_t> yb;
  if (c.out == Out::bf16) {
    yb.alloc(ny, 0, 64);
  } else {
    yf.alloc(ny, 0, 64);
    if (c.out == Out::f32_accumulate) yf.upload(y0);
  }

  kernels::QSmallArgs a;
  a.w = dq.mat;
  a.x = x.ptr;
  a.y = c.out == Out::bf16 ? static_cast<void*>(yb.ptr) : static_cast<void*>(yf.ptr);
  a.n = c.n;
  a.rows = c.rows;
  a.cols = c.cols;
  a.y_bf16 = c.out == Out::bf16;
  a.accumulate = c.out == Out::f32_accumulate;
  ASSERT_EQ(kernels::gemm_q_small_unsupported(a), nullptr);
  // Scratch for the plans that split columns over blocks, sized for this matrix.
  DevBuf<float> partials;
  DevBuf<unsigned> tickets;
  partials.alloc(kernels::qsmall_scratch_floats(c.rows));
  tickets.alloc(static_cast<std::size_t>(kernels::qsmall_scratch_tickets(c.rows)));
  ASSERT_EQ(cudaMemset(tickets.ptr, 0, tickets.n * sizeof(unsigned)), cudaSuccess);
  a.scratch = {partials.ptr, partials.n, tickets.ptr, static_cast<int>(tickets.n)};

  // The float64 reference and its bound per output, once.
  const double rel = c.fmt == QuantFormat::int4_group ? std::ldexp(1.0, -8) : (c.cols / 16.0 + 16) * std::ldexp(1.0, -23);
  std::vector<double> ref(ny), bound(ny), mags(ny);
  {
    std::vector<float> w;
    std::vector<double> mag, omag;
    for (int r = 0; r < c.rows; ++r) {
      hq.row(r, w, mag, omag);
      for (int n = 0; n < c.n; ++n) {
        const std::uint16_t* xr = xb.data() + static_cast<std::size_t>(n) * c.cols;
        double sum = 0, A = 0;
        for (int k = 0; k < c.cols; ++k) {
          const double p = static_cast<double>(w[k]) * bf16_to_f(xr[k]);
          sum += p;
          A += std::fabs(p);
        }
        const std::size_t at = static_cast<std::size_t>(n) * c.rows + r;
        if (c.out == Out::f32_accumulate) sum += y0[at];
        double b = rel * A + 1e-30;
        if (c.out == Out::f32_accumulate) b += std::ldexp(std::fabs(sum), -23);
        if (c.out == Out::bf16) b += std::ldexp(std::fabs(sum), -8);  // the output's own rounding
        ref[at] = sum;
        bound[at] = b;
        mags[at] = A;
      }
    }
  }

  // The automatic plan with PDL off and on, then forced plans (16-row tiles per warp x warps per
  // tile) so every kernel variant's indexing is checked on this shape.
  struct Run {
    bool pdl;
    kernels::QSmallPlan plan;
  };
  // QSmallPlan {m_tiles, split, feed (1 registers, 2 ring, 3 x shared), pass (tokens per pass)}.
  std::vector<Run> runs = {{false, {}},          {true, {}},           {true, {1, 1, 1, 0}},  {true, {2, 2, 1, 0}},
                           {true, {2, 8, 1, 0}}, {true, {4, 4, 1, 0}}, {true, {1, 1, 2, 0}},  {true, {2, 8, 2, 0}},
                           {true, {1, 4, 2, 64}}, {true, {2, 2, 2, 64}}, {true, {1, 8, 1, 64}}, {true, {2, 1, 1, 64}},
                           {true, {1, 1, 3, 0}},  {true, {2, 1, 3, 64}}, {false, {1, 1, 3, 64}},
                           {true, {2, 8, 1, 0, 16}}, {true, {2, 4, 1, 64, 4}}, {true, {2, 4, 1, 0, 2}}, {false, {4, 8, 1, 0, 8}}};
  for (const Run& run : runs) {
    kernels::QSmallArgs ar = a;
    ar.plan = run.plan;
    if (kernels::gemm_q_small_unsupported(ar)) continue;  // m_tiles 4 above 16 tokens per pass
    const std::string what = "pdl " + std::to_string(run.pdl) + ", plan m " + std::to_string(run.plan.m_tiles) +
                             " split " + std::to_string(run.plan.split) + " feed " + std::to_string(run.plan.feed) +
                             " pass " + std::to_string(run.plan.pass) + " column split " + std::to_string(run.plan.col_split);
    kernels::set_pdl_enabled(run.pdl);
    // y poisoned (NaN) before every run, or y0 to accumulate into: a launch that writes nothing fails.
    if (c.out == Out::f32_accumulate) yf.upload(y0);
    else ASSERT_EQ(cudaMemset(c.out == Out::bf16 ? static_cast<void*>(yb.ptr) : static_cast<void*>(yf.ptr), 0xFF,
                              ny * (c.out == Out::bf16 ? 2 : 4)),
                   cudaSuccess);
    EXPECT_GT(kernels::launch_gemm_q_small(ar, nullptr), 0u);
    ASSERT_EQ(cudaGetLastError(), cudaSuccess) << what;
    ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
    std::vector<float> got(ny + 64);
    if (c.out == Out::bf16) {
      const auto raw = yb.download(ny + 64);
      for (std::size_t i = 0; i < ny; ++i) got[i] = bf16_to_f(raw[i]);
      for (std::size_t i = ny; i < ny + 64; ++i) EXPECT_EQ(raw[i], 0xFFFFu) << "guard " << i - ny << " written";
    } else {
      got = yf.download(ny + 64);
      for (std::size_t i = ny; i < ny + 64; ++i) EXPECT_TRUE(std::isnan(got[i])) << "guard " << i - ny << " written";
    }
    double err2 = 0, ref2 = 0, worst = 0;
    int bad = 0;
    for (std::size_t at = 0; at < ny; ++at) {
      const double e = std::fabs(got[at] - ref[at]);
      err2 += e * e;
      ref2 += ref[at] * ref[at];
      worst = std::max(worst, e / (mags[at] + 1e-30));
      if (!(e <= bound[at]) && bad++ < 5)
        ADD_FAILURE() << "row " << at % c.rows << " token " << at / c.rows << ": got " << got[at] << ", want " << ref[at]
                      << " (bound " << bound[at] << ", " << what << ")";
    }
    EXPECT_EQ(bad, 0) << what;
    if (run.plan.col_split > 1) {
      for (unsigned v : tickets.download(tickets.n)) ASSERT_EQ(v, 0u) << "a ticket left set, " << what;
      if (c.out == Out::f32_accumulate) yf.upload(y0);
      EXPECT_GT(kernels::launch_gemm_q_small(ar, nullptr), 0u);
      ASSERT_EQ(cudaGetLastError(), cudaSuccess) << what;
      ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
      if (c.out == Out::bf16) {
        const auto raw = yb.download(ny);
        for (std::size_t i = 0; i < ny; ++i) ASSERT_EQ(bf16_to_f(raw[i]), got[i]) << "run again: output " << i << ", " << what;
      } else {
        const auto again = yf.download(ny);
        for (std::size_t i = 0; i < ny; ++i)
          ASSERT_EQ(std::memcmp(&again[i], &got[i], 4), 0) << "run again: output " << i << ", " << what;
      }
    }
    const double rel_l2 = std::sqrt(err2 / std::max(ref2, 1e-300));
    EXPECT_LT(rel_l2, c.out == Out::bf16 ? 4e-3 : c.fmt == QuantFormat::int4_group ? 2e-3 : 3e-5) << what;
    std::printf("[ measured ] %s (%s): relative L2 error %.3g, worst error / sum|w x| %.3g\n",
                case_name(::testing::TestParamInfo<Case>(c, 0)).c_str(), what.c_str(), rel_l2, worst);
  }
  kernels::set_pdl_enabled(false);
}

std::vector<Case> cases() {
  std::vector<Case> v;
  for (QuantFormat f : {QuantFormat::int8_row, QuantFormat::fp8_row, QuantFormat::int4_group}) {
    for (int n : {1, 7, 8, 13, 33, 45, 57, 64}) v.push_back({f, 40, 256, n, Out::f32});
    v.push_back({f, 1040, 4096, 48, Out::f32_accumulate});  // many chunks per warp, units spanning the ring
    v.push_back({f, 40, 384, 9, Out::f32_accumulate});
    v.push_back({f, 24, 512, 20, Out::bf16});
    v.push_back({f, 4608, 3584, 32, Out::f32});          // q/k/v
    v.push_back({f, 3584, 18944, 5, Out::f32_accumulate});  // down, into the residual stream
    v.push_back({f, 37888, 3584, 3, Out::bf16});          // gate/up
  }
  return v;
}

INSTANTIATE_TEST_SUITE_P(Shapes, GemmQSmall, ::testing::ValuesIn(cases()), case_name);

// An int8 16 x 256 matrix times n tokens over static host buffers, for what gemm_q_small_unsupported
// and gemm_q_small_plan decide (nothing is launched on them).
kernels::QSmallArgs int8_16x256(int n) {
  kernels::QSmallArgs a;
  alignas(16) static std::uint8_t q[64 * 256];
  alignas(16) static std::uint16_t x[64 * 256];
  alignas(16) static float s[64];
  a.w.kind = kernels::QuantKind::int8_row;
  a.w.q = q;
  a.w.row_scale = s;
  a.x = x;
  a.rows = 16;
  a.cols = 256;
  a.n = n;
  return a;
}

TEST(GemmQSmallShapes, RefusesWhatItCannotRun) {
  kernels::QSmallArgs a = int8_16x256(4);
  alignas(16) static std::uint16_t x[64 * 256];
  EXPECT_EQ(kernels::gemm_q_small_unsupported(a), nullptr);
  a.n = 0;
  EXPECT_NE(kernels::gemm_q_small_unsupported(a), nullptr);
  a.n = 65;
  EXPECT_NE(kernels::gemm_q_small_unsupported(a), nullptr);
  a.n = 4;
  a.cols = 96;  // not a multiple of 64
  EXPECT_NE(kernels::gemm_q_small_unsupported(a), nullptr);
  a.w.kind = kernels::QuantKind::int4_group;
  a.cols = 192;  // a multiple of 64, not of 128
  EXPECT_NE(kernels::gemm_q_small_unsupported(a), nullptr);
  a.cols = 256;
  EXPECT_NE(kernels::gemm_q_small_unsupported(a), nullptr) << "int4 without group scales";
  a.w.kind = kernels::QuantKind::fp8_row;
  a.x = x + 1;  // misaligned
  EXPECT_NE(kernels::gemm_q_small_unsupported(a), nullptr);
  a.x = x;
  a.y_bf16 = true;
  a.accumulate = true;
  EXPECT_NE(kernels::gemm_q_small_unsupported(a), nullptr);
  a.y_bf16 = false;
  a.accumulate = false;
  a.plan = {3, 0};  // 16-row tiles per warp: 1, 2 or 4
  EXPECT_NE(kernels::gemm_q_small_unsupported(a), nullptr);
  a.plan = {0, 3};  // warps per tile: 1, 2, 4 or 8
  EXPECT_NE(kernels::gemm_q_small_unsupported(a), nullptr);
  a.plan = {4, 8};
  a.n = 16;
  EXPECT_EQ(kernels::gemm_q_small_unsupported(a), nullptr);
  a.n = 17;  // 4 tiles per warp take at most 16 tokens per pass
  EXPECT_NE(kernels::gemm_q_small_unsupported(a), nullptr);
  a.n = 64;
  a.plan = {2, 8};
  EXPECT_EQ(kernels::gemm_q_small_unsupported(a), nullptr);
  a.plan = {2, 8, 3, 0};  // x shared takes split 1
  EXPECT_NE(kernels::gemm_q_small_unsupported(a), nullptr);
  a.plan = {2, 8, 1, 0, 8};  // columns split over 8 blocks: needs scratch
  EXPECT_NE(kernels::gemm_q_small_unsupported(a), nullptr);
  alignas(16) static float part[8 * 64 * 16];
  alignas(16) static unsigned tick[1];
  a.scratch = {part, 8 * 64 * 16 - 1, tick, 1};  // one float short
  EXPECT_NE(kernels::gemm_q_small_unsupported(a), nullptr);
  a.scratch.partial_floats = 8 * 64 * 16;
  EXPECT_EQ(kernels::gemm_q_small_unsupported(a), nullptr);
  a.scratch.ticket_count = 0;
  EXPECT_NE(kernels::gemm_q_small_unsupported(a), nullptr);
  a.scratch.ticket_count = 1;
  a.plan = {2, 8, 2, 0, 8};  // not with the ring
  EXPECT_NE(kernels::gemm_q_small_unsupported(a), nullptr);
  a.plan = {2, 1, 3, 0, 8};  // nor with x shared
  EXPECT_NE(kernels::gemm_q_small_unsupported(a), nullptr);
  a.plan = {2, 8, 1, 0, 3};  // column splits: 1, 2, 4, 8 or 16
  EXPECT_NE(kernels::gemm_q_small_unsupported(a), nullptr);
  a.plan = {1, 8, 1, 0, 2};  // registers with column splits: built for m_tiles 2 or 4, split 4 or 8
  EXPECT_NE(kernels::gemm_q_small_unsupported(a), nullptr);
  a.plan = {2, 2, 1, 0, 2};
  EXPECT_NE(kernels::gemm_q_small_unsupported(a), nullptr);
  a.scratch = {};
  a.plan = {2, 8, 4, 0};  // feed: 1 registers, 2 ring, 3 x shared
  EXPECT_NE(kernels::gemm_q_small_unsupported(a), nullptr);
  a.plan = {2, 8, 2, 48};  // pass: 32 or 64 tokens
  EXPECT_NE(kernels::gemm_q_small_unsupported(a), nullptr);
  a.plan = {2, 8, 2, 64};
  EXPECT_EQ(kernels::gemm_q_small_unsupported(a), nullptr);
  a.n = 16;
  a.plan = {4, 8, 2, 0};  // 4 row tiles per warp have no ring
  EXPECT_NE(kernels::gemm_q_small_unsupported(a), nullptr);
  a.plan = {4, 8, 1, 64};
  EXPECT_EQ(kernels::gemm_q_small_unsupported(a), nullptr);
  // int4 scales the ring copies as 4-byte words must be 4-byte aligned.
  alignas(16) static std::uint16_t gs[64 * 4], gm[64 * 4];
  a.w.kind = kernels::QuantKind::int4_group;
  a.w.group_scale = gs;
  a.w.group_min = gm + 1;
  a.plan = {1, 1, 2, 0};
  EXPECT_NE(kernels::gemm_q_small_unsupported(a), nullptr);
  a.plan = {1, 1, 1, 0};
  EXPECT_EQ(kernels::gemm_q_small_unsupported(a), nullptr);
  // ... and an even number of them, so the last word stays inside the arrays (3 rows x 3 groups: 9).
  a.w.group_min = gm;
  a.rows = 3;
  a.cols = 384;
  a.plan = {1, 1, 2, 0};
  EXPECT_NE(kernels::gemm_q_small_unsupported(a), nullptr);
  a.rows = 4;
  EXPECT_EQ(kernels::gemm_q_small_unsupported(a), nullptr);
}

// Plan tables set at run time (gemm_q_small_set_plans, COSMOS_QSMALL_PLANS in the engine): rows as
// bench --table prints them are taken, a malformed line keeps the table, and on a 132-SM GPU (the
// tuned plans' kind) the set row is the plan a matching shape gets.
TEST(GemmQSmallPlans, TablesSetAtRunTime) {
  std::string why;
  EXPECT_EQ(kernels::gemm_q_small_set_plans("// a comment\n\nTABLE   {kI8, 16, 256, 1, 2, 4, 1, 0, 0, 0, 0},  // 8 tokens\n"
                                            "  {kI4, 16, 256, 1, 1, 2, 1, 3, 1, 1, 1},\n",
                                            &why),
            2)
      << why;
  EXPECT_EQ(kernels::gemm_q_small_set_plans("{kI8, 16, 256, 1, 2, 4, 1, 0, 0, 0, 0},\n{kQ9, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10},\n", &why), -1);
  EXPECT_NE(why.find("line 2"), std::string::npos) << why;
  EXPECT_EQ(kernels::gemm_q_small_set_plans("{kI8, 16, 256, 1, 2, 4, 0, 0, 0},\n", &why), -1);  // the old 9-field rows
  // Two rows for one shape: the second would never be taken.
  EXPECT_EQ(kernels::gemm_q_small_set_plans("{kI8, 16, 256, 1, 2, 4, 1, 0, 0, 0, 0},\n{kI4, 16, 256, 1, 1, 2, 1, 0, 0, 0, 0},\n"
                                            "{kI8, 16, 256, 1, 1, 8, 1, 0, 0, 0, 0},\n",
                                            &why),
            -1);
  EXPECT_NE(why.find("line 3 repeats"), std::string::npos) << why;
  // The two-row table is still set: on a tuned-kind GPU a 16 x 256 int8 pass of 8 tokens takes it.
  const auto gq = kernels::query_gpus();
  if (!gq.gpus.empty() && gq.gpus[0].multiprocessors == 132) {
    kernels::QSmallArgs a = int8_16x256(8);
    a.plan.feed = 1;
    const kernels::QSmallPlan p = kernels::gemm_q_small_plan(a);
    EXPECT_EQ(p.m_tiles, 2);
    EXPECT_EQ(p.split, 4);
  }
  EXPECT_EQ(kernels::gemm_q_small_set_plans("", &why), 0);  // the built-in table again
}

}  // namespace
}  // namespace cosmos
