// GemmLt autotuning (kernels/gemm_lt.h): the first product of a size bucket times cuBLASLt's
// candidates on its real inputs (into a scratch output), the next sizes of the bucket reuse the
// winner. Checks that the tuned path computes the same product as a float64 reference, that tuning
// never touches y (with accumulate, y = residual + W x exactly once), and that a second size in the
// same bucket and a size in another bucket are right too; and that every configuration the tuner
// may keep (the heuristic's and the wave-fill ones) computes the product. Relative L2 error bound
// 1e-4 (fp32 accumulation of exact bf16 products; see test_ops_matmul.cpp, section 6 for the
// per-element bound). And that choices restored into a fresh GemmLt skip the tuning.
#include <cmath>
#include <cstdio>
#include <cstdint>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include <cuda_bf16.h>
#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include "cuda_upload.h"
#include "kernels/device_info.cuh"
#include "kernels/gemm_lt.h"

namespace cosmos {
namespace {

using testing::upload;

TEST(GpuGemmTune, TunedProductsMatchFloat64AndLeaveYAlone) {
  const auto q = kernels::query_gpus();
  if (q.gpus.empty()) GTEST_SKIP() << q.why_none;
  const int rows = 520, cols = 1024;
  std::mt19937 rng(11);
  std::normal_distribution<float> normal;
  const int max_n = 700;
  std::vector<__nv_bfloat16> w(static_cast<std::size_t>(rows) * cols), x(static_cast<std::size_t>(max_n) * cols);
  for (auto& v : w) v = __float2bfloat16(normal(rng) * 0.05f);
  for (auto& v : x) v = __float2bfloat16(normal(rng));
  std::vector<float> res(static_cast<std::size_t>(max_n) * rows);
  for (auto& v : res) v = normal(rng);
  auto* dw = upload(w);
  auto* dx = upload(x);
  void* ws = nullptr;
  const std::size_t ws_bytes = std::size_t{32} << 20;
  ASSERT_EQ(cudaMalloc(&ws, ws_bytes), cudaSuccess);
  kernels::GemmLt gemm;
  ASSERT_EQ(gemm.init(ws, ws_bytes), "");
  // n = 300 tunes bucket 512; 290 reuses it; 700 tunes bucket 1024; 300 without accumulate is a new plan.
  for (const auto& [n, accumulate] : std::vector<std::pair<int, bool>>{{300, true}, {290, true}, {700, true}, {300, false}}) {
    SCOPED_TRACE("n = " + std::to_string(n) + (accumulate ? ", accumulate" : ""));
    std::vector<float> y0(res.begin(), res.begin() + static_cast<std::ptrdiff_t>(n) * rows);
    auto* dy = upload(y0);
    ASSERT_EQ(gemm.run(dw, dx, dy, n, rows, cols, accumulate, kernels::ElemType::bf16, nullptr), "");
    ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
    std::vector<float> y(y0.size());
    ASSERT_EQ(cudaMemcpy(y.data(), dy, y.size() * 4, cudaMemcpyDeviceToHost), cudaSuccess);
    cudaFree(dy);
    double num = 0, den = 0;
    for (int t = 0; t < n; ++t)
      for (int r = 0; r < rows; ++r) {
        double acc = accumulate ? y0[static_cast<std::size_t>(t) * rows + r] : 0.0;
        for (int k = 0; k < cols; ++k)
          acc += static_cast<double>(__bfloat162float(w[static_cast<std::size_t>(r) * cols + k])) *
                 __bfloat162float(x[static_cast<std::size_t>(t) * cols + k]);
        const double d = y[static_cast<std::size_t>(t) * rows + r] - acc;
        num += d * d;
        den += acc * acc;
      }
    EXPECT_LT(std::sqrt(num / den), 1e-4);
  }
  cudaFree(dw);
  cudaFree(dx);
  cudaFree(ws);
}

// Every tuning candidate, run into y with accumulate, against one float64 reference. The shape has
// wave-fill tiles on an H200 (1,792 x 1,024 outputs: 112 x 128 tiles are 128 blocks, 0.97 waves on
// 132 SMs); on compute capability 9.0 the test requires some (cuBLASLt 13 offers them there).
TEST(GpuGemmTune, EveryCandidateComputesTheProduct) {
  const auto q = kernels::query_gpus();
  if (q.gpus.empty()) GTEST_SKIP() << q.why_none;
  const int rows = 1792, cols = 512, n = 1024;
  std::mt19937 rng(12);
  std::normal_distribution<float> normal;
  std::vector<__nv_bfloat16> w(static_cast<std::size_t>(rows) * cols), x(static_cast<std::size_t>(n) * cols);
  for (auto& v : w) v = __float2bfloat16(normal(rng) * 0.05f);
  for (auto& v : x) v = __float2bfloat16(normal(rng));
  std::vector<float> y0(static_cast<std::size_t>(n) * rows);
  for (auto& v : y0) v = normal(rng);
  std::vector<double> ref(y0.size());
  std::vector<double> wd(w.size()), xd(x.size());
  for (std::size_t i = 0; i < w.size(); ++i) wd[i] = __bfloat162float(w[i]);
  for (std::size_t i = 0; i < x.size(); ++i) xd[i] = __bfloat162float(x[i]);
  for (int t = 0; t < n; ++t)
    for (int r = 0; r < rows; ++r) {
      double acc = y0[static_cast<std::size_t>(t) * rows + r];
      const double* wr = &wd[static_cast<std::size_t>(r) * cols];
      const double* xt = &xd[static_cast<std::size_t>(t) * cols];
      for (int k = 0; k < cols; ++k) acc += wr[k] * xt[k];
      ref[static_cast<std::size_t>(t) * rows + r] = acc;
    }
  auto* dw = upload(w);
  auto* dx = upload(x);
  auto* dy = upload(y0);
  void* ws = nullptr;
  const std::size_t ws_bytes = std::size_t{32} << 20;
  ASSERT_EQ(cudaMalloc(&ws, ws_bytes), cudaSuccess);
  kernels::GemmLt gemm;
  ASSERT_EQ(gemm.init(ws, ws_bytes), "");
  int wave_fill = 0;
  const int count = gemm.tuning_candidate_count(n, rows, cols, true, kernels::ElemType::bf16, kernels::ElemType::f32,
                                                &wave_fill);
  std::printf("%d tuning candidates, %d of them wave-fill\n", count, wave_fill);
  ASSERT_GT(count, wave_fill);
  if (q.gpus[0].sm_major == 9 && q.gpus[0].sm_minor == 0) {
    EXPECT_GT(wave_fill, 0);
  }
  std::vector<float> y(y0.size());
  for (int i = 0; i < count; ++i) {
    SCOPED_TRACE("candidate " + std::to_string(i));
    ASSERT_EQ(cudaMemcpy(dy, y0.data(), y0.size() * 4, cudaMemcpyHostToDevice), cudaSuccess);
    ASSERT_EQ(gemm.run_candidate(i, dw, dx, dy, n, rows, cols, true, kernels::ElemType::bf16, nullptr), "");
    ASSERT_EQ(cudaMemcpy(y.data(), dy, y.size() * 4, cudaMemcpyDeviceToHost), cudaSuccess);
    double num = 0, den = 0;
    for (std::size_t k = 0; k < y.size(); ++k) {
      const double d = y[k] - ref[k];
      num += d * d;
      den += ref[k] * ref[k];
    }
    EXPECT_LT(std::sqrt(num / den), 1e-4);
  }
  EXPECT_NE(gemm.run_candidate(count, dw, dx, dy, n, rows, cols, true, kernels::ElemType::bf16, nullptr), "");
  cudaFree(dw);
  cudaFree(dx);
  cudaFree(dy);
  cudaFree(ws);
}

// The tuner's choices carried to a fresh GemmLt (what the on-disk cache does): restored choices
// are used without timing again and compute the product; entries that cuBLASLt refuses or that
// are not a bucket's key are dropped.
TEST(GpuGemmTune, RestoredChoicesSkipTheTuning) {
  const auto q = kernels::query_gpus();
  if (q.gpus.empty()) GTEST_SKIP() << q.why_none;
  const int rows = 520, cols = 1024, n = 300;
  std::mt19937 rng(13);
  std::normal_distribution<float> normal;
  std::vector<__nv_bfloat16> w(static_cast<std::size_t>(rows) * cols), x(static_cast<std::size_t>(n) * cols);
  for (auto& v : w) v = __float2bfloat16(normal(rng) * 0.05f);
  for (auto& v : x) v = __float2bfloat16(normal(rng));
  auto* dw = upload(w);
  auto* dx = upload(x);
  std::vector<float> zeros(static_cast<std::size_t>(n) * rows, 0.0f);
  auto* dy = upload(zeros);
  void* ws = nullptr;
  const std::size_t ws_bytes = std::size_t{32} << 20;
  ASSERT_EQ(cudaMalloc(&ws, ws_bytes), cudaSuccess);
  kernels::GemmLt first;
  ASSERT_EQ(first.init(ws, ws_bytes), "");
  EXPECT_NE(first.identity().find("cuBLASLt"), std::string::npos) << first.identity();
  ASSERT_EQ(first.run(dw, dx, dy, n, rows, cols, false, kernels::ElemType::bf16, nullptr), "");
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  EXPECT_EQ(first.tunings(), 1);
  const std::string log = first.take_tune_log();  // one line for the one size class, then cleared
  EXPECT_NE(log.find("300x520x1024: kept candidate"), std::string::npos) << log;
  EXPECT_NE(log.find("tile "), std::string::npos) << log;
  EXPECT_EQ(first.take_tune_log(), "");
  const auto list = first.tuned();
  ASSERT_EQ(list.size(), 1u);
  EXPECT_EQ(list[0].key[0], 512);  // the bucket of n = 300
  std::vector<float> y_first(zeros.size());
  ASSERT_EQ(cudaMemcpy(y_first.data(), dy, y_first.size() * 4, cudaMemcpyDeviceToHost), cudaSuccess);

  kernels::GemmLt second;
  ASSERT_EQ(second.init(ws, ws_bytes), "");
  auto bad_algo = list[0];
  for (auto& word : bad_algo.algo.data) word = ~word;
  auto bad_key = list[0];
  bad_key.key[0] = 300;  // not a bucket
  auto bad_type = list[0];
  bad_type.key[4] = 77;
  EXPECT_EQ(second.restore_tuned({bad_algo, bad_key, bad_type}), 0);
  EXPECT_EQ(second.restore_tuned(list), 1);
  ASSERT_EQ(cudaMemcpy(dy, zeros.data(), zeros.size() * 4, cudaMemcpyHostToDevice), cudaSuccess);
  ASSERT_EQ(second.run(dw, dx, dy, n, rows, cols, false, kernels::ElemType::bf16, nullptr), "");
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  EXPECT_EQ(second.tunings(), 0);
  EXPECT_EQ(second.take_tune_log(), "");  // restored: nothing tuned
  std::vector<float> y_second(zeros.size());
  ASSERT_EQ(cudaMemcpy(y_second.data(), dy, y_second.size() * 4, cudaMemcpyDeviceToHost), cudaSuccess);
  EXPECT_EQ(y_first, y_second);  // the same algorithm on the same inputs
  cudaFree(dw);
  cudaFree(dx);
  cudaFree(dy);
  cudaFree(ws);
}

}  // namespace
}  // namespace cosmos
