// The o product taking the decode attention's output as sums (QGemvArgs::x_div; the sums' format:
// kernels/decode_attention.cuh, DecodeAttentionSums): x = s0 / d0 per head of 128 columns when
// d1 == 0, else (s0 2^-120 + s1) / (d0 2^-120 + d1). Each case compares the launch on sums with the
// same launch on the plain x those sums stand for, on the 7B o shape (3,584 x 3,584, residual
// aliasing y): int4 at a long context (the only int4 kernel that takes sums), int8 and fp8 on their
// o shape (kernels/gemv_quant_sums.cuh).
//   - Power-of-two divisors make the division exact: x from the sums is x bit for bit, so int4's and
//     fp8's y must equal the plain launch's bit for bit. int8's may differ in its last bits: its
//     offset term (-128 sum(x)) is summed per head from the sums, in another order. A wrong head,
//     bucket or divisor changes x by far more.
//   - Random divisors: x from the sums differs from x by the division's rounding (a few u), so y
//     must match within a relative L2 error of 1e-5 (about 2^-17).
// Data rows: the format, which heads have a share in bucket 1 (none, some, all), whether the
// divisors are powers of two and (int8 / fp8) the kSums kernel's rows per item (QGemvArgs::sums_rows,
// checked in the plan). A launch that cannot take sums must enqueue nothing.
#include <cmath>
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include "cosmos/quant.h"
#include "kernels/device_info.cuh"
#include "kernels/gemv_quant.cuh"
#include "kernels/pdl.cuh"
#include "gemv_quant_test_common.h"

namespace cosmos {
namespace {

using namespace gemv_quant_test;  // NOLINT(google-build-using-namespace): this test binary's own helpers

constexpr int kCols = 3584, kRows = 3584, kHead = 128, kHeads = kCols / kHead;

struct SumsCase {
  const char* name;
  QuantFormat fmt;
  int mixed_every;  // heads h with h % mixed_every == 1 have a share in bucket 1 (0: none; 1: all)
  bool pow2;        // divisors powers of two (exact division)
  int sums_rows = 2;  // int8 / fp8: QGemvArgs::sums_rows (the plain launch runs as many rows per item)
};

std::string sums_case_name(const ::testing::TestParamInfo<SumsCase>& p) { return p.param.name; }

class GpuGemvQuantSums : public ::testing::TestWithParam<SumsCase> {
 protected:
  void SetUp() override {
    const auto q = kernels::query_gpus();
    if (q.gpus.empty()) GTEST_SKIP() << q.why_none;
  }
};

// y = W x + residual (aliasing y) on stream; x plain (div null) or sums (div set).
// sums_rows: the sums launch's QGemvArgs::sums_rows; the plain launch runs as many rows per item
// (the tuning knob, 1 only), so the two compute each row in the same order.
std::vector<float> run_o(const DevQuant& dw, const float* x, const float* div, const std::vector<float>& residual,
                         bool long_context, std::size_t* bytes, int sums_rows = 2) {
  DevBuf<float> dy;
  dy.alloc(kRows);
  dy.upload(residual);
  kernels::QGemvArgs a;
  a.w = dw.mat;
  a.x = x;
  a.x_div = div;
  a.residual = dy.ptr;
  a.y = dy.ptr;
  a.rows = kRows;
  a.cols = kCols;
  a.long_context = long_context;
  a.sums_rows = sums_rows;
  kernels::QGemvTuning knobs;
  if (!div && sums_rows == 1) knobs.rows_per_item = 1;
  kernels::set_gemv_quant_tuning(knobs);
  if (div && dw.mat.kind != kernels::QuantKind::int4_group) {
    EXPECT_EQ(kernels::gemv_quant_plan(a).rows_per_item, sums_rows);
  }
  cudaStream_t stream;
  EXPECT_EQ(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking), cudaSuccess);
  *bytes = kernels::launch_gemv_quant(a, stream);
  EXPECT_EQ(cudaGetLastError(), cudaSuccess);
  EXPECT_EQ(cudaStreamSynchronize(stream), cudaSuccess);
  cudaStreamDestroy(stream);
  kernels::set_gemv_quant_tuning({});
  return dy.download(kRows);
}

TEST_P(GpuGemvQuantSums, MatchesThePlainInput) {
  const SumsCase& c = GetParam();
  Rng rng(20261204u + static_cast<std::uint64_t>(c.mixed_every) * 31u + (c.pow2 ? 7u : 0u) +
          static_cast<std::uint64_t>(c.fmt) * 1009u);
  const HostQuant hq(c.fmt, kRows, kCols, rng);
  std::vector<float> x(kCols), residual(kRows);
  for (auto& v : x) v = 2.0f * rng.next();
  for (auto& v : residual) v = rng.next();
  // sums [2][cols] (buckets 0, 1), divisors [2][heads]
  std::vector<float> sums(2 * kCols, 0.0f), div(2 * kHeads, 0.0f), xs(kCols);
  for (int h = 0; h < kHeads; ++h) {
    const bool mixed = c.mixed_every > 0 && h % c.mixed_every == (c.mixed_every == 1 ? 0 : 1);
    // Bucket 0 alone: d0 in [0.5, 64); mixed: d0 2^-120 + d1 with d1 in [0.5, 8) and a share of
    // bucket 0 in units of 2^-120 (s0 = x d 2^120 / 2 etc.).
    const float d = c.pow2 ? std::ldexp(1.0f, h % 7 - 1) : 0.5f + 31.75f * (rng.next() + 1.0f);
    if (!mixed) {
      div[h] = d;
      for (int i = h * kHead; i < (h + 1) * kHead; ++i) {
        sums[i] = x[i] * d;
        xs[i] = sums[i] / d;  // (pow2: x itself)
      }
    } else {
      // d = d0 2^-120 + d1 with both halves equal: d0 = d / 2 * 2^120, d1 = d / 2.
      div[h] = std::ldexp(d * 0.5f, 120);
      div[kHeads + h] = d * 0.5f;
      for (int i = h * kHead; i < (h + 1) * kHead; ++i) {
        const float half = x[i] * d * 0.5f;
        sums[i] = std::ldexp(half, 120);
        sums[kCols + i] = half;
        xs[i] = (half + half) / d;
      }
    }
  }
  // The plain input the sums stand for: x itself with power-of-two divisors, else the host's
  // division (the kernel multiplies by the rounded reciprocal: a few u apart).
  if (c.pow2) {
    ASSERT_EQ(std::memcmp(xs.data(), x.data(), x.size() * sizeof(float)), 0);
  }
  DevQuant dw;
  dw.upload(hq.m);
  DevBuf<float> dplain, dsums, ddiv;
  dplain.alloc(kCols);
  dplain.upload(xs);
  dsums.alloc(2 * kCols);
  dsums.upload(sums);
  ddiv.alloc(2 * kHeads);
  ddiv.upload(div);

  for (bool pdl : {false, true}) {
    SCOPED_TRACE(pdl ? "pdl on" : "pdl off");
    kernels::set_pdl_enabled(pdl);
    kernels::QGemvArgs probe;
    probe.w = dw.mat;
    probe.rows = kRows;
    probe.cols = kCols;
    probe.long_context = true;
    ASSERT_TRUE(kernels::gemv_quant_takes_sums(probe));
    std::size_t plain_bytes = 0, sums_bytes = 0;
    const std::vector<float> want = run_o(dw, dplain.ptr, nullptr, residual, true, &plain_bytes, c.sums_rows);
    const std::vector<float> got = run_o(dw, dsums.ptr, ddiv.ptr, residual, true, &sums_bytes, c.sums_rows);
    ASSERT_GT(plain_bytes, 0u);
    EXPECT_EQ(sums_bytes, plain_bytes + 2 * kHeads * sizeof(float));
    double num = 0, den = 0;
    int differ = 0;
    for (int r = 0; r < kRows; ++r) {
      ASSERT_FALSE(std::isnan(got[r])) << "row " << r;
      const double d = static_cast<double>(got[r]) - want[r];
      num += d * d;
      den += static_cast<double>(want[r]) * want[r];
      differ += got[r] != want[r];
    }
    const double rel = std::sqrt(num / den);
    std::printf("[ measured ] o from sums (%s): %d of %d outputs differ from the plain input's, relative L2 %.3g\n",
                c.name, differ, kRows, rel);
    if (c.pow2 && c.fmt != QuantFormat::int8_row) {
      EXPECT_EQ(differ, 0);
    }
    EXPECT_LT(rel, 1e-5);
  }
  kernels::set_pdl_enabled(false);
}

INSTANTIATE_TEST_SUITE_P(
    Rows, GpuGemvQuantSums,
    ::testing::Values(SumsCase{"int4_bucket0_pow2", QuantFormat::int4_group, 0, true},
                      SumsCase{"int4_some_mixed_pow2", QuantFormat::int4_group, 3, true},
                      SumsCase{"int4_all_mixed_pow2", QuantFormat::int4_group, 1, true},
                      SumsCase{"int4_bucket0_random", QuantFormat::int4_group, 0, false},
                      SumsCase{"int4_some_mixed_random", QuantFormat::int4_group, 3, false},
                      SumsCase{"int8_bucket0_pow2", QuantFormat::int8_row, 0, true},
                      SumsCase{"int8_some_mixed_pow2", QuantFormat::int8_row, 3, true},
                      SumsCase{"int8_all_mixed_pow2", QuantFormat::int8_row, 1, true},
                      SumsCase{"int8_bucket0_random", QuantFormat::int8_row, 0, false},
                      SumsCase{"int8_some_mixed_random", QuantFormat::int8_row, 3, false},
                      SumsCase{"fp8_bucket0_pow2", QuantFormat::fp8_row, 0, true},
                      SumsCase{"fp8_some_mixed_pow2", QuantFormat::fp8_row, 3, true},
                      SumsCase{"fp8_all_mixed_pow2", QuantFormat::fp8_row, 1, true},
                      SumsCase{"fp8_bucket0_random", QuantFormat::fp8_row, 0, false},
                      SumsCase{"fp8_some_mixed_random", QuantFormat::fp8_row, 3, false},
                      // the kSums kernel at 1 row per item (contexts up to 4,096 tokens)
                      SumsCase{"int8_some_mixed_pow2_1row", QuantFormat::int8_row, 3, true, 1},
                      SumsCase{"int8_bucket0_random_1row", QuantFormat::int8_row, 0, false, 1},
                      SumsCase{"fp8_some_mixed_pow2_1row", QuantFormat::fp8_row, 3, true, 1},
                      SumsCase{"fp8_all_mixed_pow2_1row", QuantFormat::fp8_row, 1, true, 1},
                      SumsCase{"fp8_bucket0_random_1row", QuantFormat::fp8_row, 0, false, 1}),
    sums_case_name);

// int4: only the long-context o kernel divides sums; int8: not a row of whole heads of 128 columns.
// Elsewhere launch_gemv_quant enqueues nothing.
TEST(GpuGemvQuantSumsArgs, OtherKernelsRefuseSums) {
  const auto q = kernels::query_gpus();
  if (q.gpus.empty()) GTEST_SKIP() << q.why_none;
  Rng rng(7u);
  const HostQuant hq(QuantFormat::int4_group, kRows, kCols, rng);
  DevQuant dw;
  dw.upload(hq.m);
  DevBuf<float> dx, ddiv;
  dx.alloc(2 * kCols);
  dx.upload(std::vector<float>(2 * kCols, 1.0f));
  ddiv.alloc(2 * kHeads);
  ddiv.upload(std::vector<float>(2 * kHeads, 1.0f));
  kernels::QGemvArgs probe;
  probe.w = dw.mat;
  probe.rows = kRows;
  probe.cols = kCols;
  EXPECT_FALSE(kernels::gemv_quant_takes_sums(probe));  // short context: the 4-blocks-per-SM kernel
  const std::vector<float> residual(kRows, 0.5f);
  std::size_t bytes = 1;
  const std::vector<float> y = run_o(dw, dx.ptr, ddiv.ptr, residual, false, &bytes);
  EXPECT_EQ(bytes, 0u);
  for (int r = 0; r < kRows; ++r) ASSERT_EQ(y[r], 0.5f) << "row " << r << " written";

  // int8 with 3,600 columns (16-byte vectors, but heads of 128 columns do not divide the row)
  constexpr int kOdd = kCols + 16;
  const HostQuant h8(QuantFormat::int8_row, kRows, kOdd, rng);
  DevQuant dw8;
  dw8.upload(h8.m);
  DevBuf<float> dx8, dy8;
  dx8.alloc(2 * kOdd);
  dx8.upload(std::vector<float>(2 * kOdd, 1.0f));
  dy8.alloc(kRows);
  dy8.upload(residual);
  kernels::QGemvArgs a8;
  a8.w = dw8.mat;
  a8.rows = kRows;
  a8.cols = kOdd;
  EXPECT_FALSE(kernels::gemv_quant_takes_sums(a8));
  a8.x = dx8.ptr;
  a8.x_div = ddiv.ptr;
  a8.residual = dy8.ptr;
  a8.y = dy8.ptr;
  EXPECT_EQ(kernels::launch_gemv_quant(a8, nullptr), 0u);
  EXPECT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  const std::vector<float> y8 = dy8.download(kRows);
  for (int r = 0; r < kRows; ++r) ASSERT_EQ(y8[r], 0.5f) << "int8 row " << r << " written";
  // and the int8 o shape takes them
  const HostQuant h8o(QuantFormat::int8_row, kRows, kCols, rng);
  DevQuant dw8o;
  dw8o.upload(h8o.m);
  a8.w = dw8o.mat;
  a8.cols = kCols;
  EXPECT_TRUE(kernels::gemv_quant_takes_sums(a8));
}

}  // namespace
}  // namespace cosmos
