// GemmLt autotuning (kernels/gemm_lt.h): the first product of a size bucket times cuBLASLt's
// candidates on its real inputs (into a scratch output), the next sizes of the bucket reuse the
// winner. Checks that the tuned path computes the same product as a float64 reference, that tuning
// never touches y (with accumulate, y = residual + W x exactly once), and that a second size in the
// same bucket and a size in another bucket are right too. Relative L2 error bound 1e-4 (fp32
// accumulation of exact bf16 products; see test_ops_matmul.cpp, section 6 for the per-element bound).
#include <cmath>
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

}  // namespace
}  // namespace cosmos
