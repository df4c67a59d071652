// gemv_bf16 against a float64 CPU reference: fresh random inputs, odd and model shapes, outputs
// poisoned with NaN first. Tolerance: relative L2 error 1e-5 (bf16 weights are exact in fp32; the
// only error is fp32 accumulation over at most 18944 terms, ~1e-6).
#include <cmath>
#include <random>
#include <tuple>
#include <vector>

#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include "cuda_upload.h"
#include "kernels/device_info.cuh"
#include "kernels/gemv_bf16.cuh"

namespace cosmos {
namespace {

struct Shape {
  int rows, cols;
  bool bias, residual;
};

class GpuGemv : public ::testing::TestWithParam<Shape> {
 protected:
  void SetUp() override {
    const auto q = kernels::query_gpus();
    if (q.gpus.empty()) GTEST_SKIP() << q.why_none;
  }
};

using testing::upload;

TEST_P(GpuGemv, MatchesFloat64Reference) {
  const Shape s = GetParam();
  std::mt19937 rng(static_cast<unsigned>(s.rows * 7919 + s.cols));
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::vector<__nv_bfloat16> w(static_cast<std::size_t>(s.rows) * s.cols), bias(s.rows);
  std::vector<float> x(s.cols), residual(s.rows);
  for (auto& v : w) v = __float2bfloat16(normal(rng) * 0.05f);
  for (auto& v : bias) v = __float2bfloat16(normal(rng));
  for (auto& v : x) v = normal(rng);
  for (auto& v : residual) v = normal(rng);

  std::vector<double> ref(s.rows);
  for (int r = 0; r < s.rows; ++r) {
    double acc = 0;
    for (int c = 0; c < s.cols; ++c)
      acc += static_cast<double>(__bfloat162float(w[static_cast<std::size_t>(r) * s.cols + c])) * x[c];
    if (s.bias) acc += __bfloat162float(bias[r]);
    if (s.residual) acc += residual[r];
    ref[r] = acc;
  }

  auto* dw = upload(w);
  auto* db = upload(bias);
  auto* dx = upload(x);
  auto* dres = upload(residual);
  float* dy = nullptr;
  ASSERT_EQ(cudaMalloc(&dy, s.rows * sizeof(float)), cudaSuccess);
  ASSERT_EQ(cudaMemset(dy, 0xFF, s.rows * sizeof(float)), cudaSuccess);  // NaN poison
  kernels::GemvArgs a;
  a.w = dw;
  a.x = dx;
  a.bias = s.bias ? db : nullptr;
  a.residual = s.residual ? dres : nullptr;
  a.y = dy;
  a.rows = s.rows;
  a.cols = s.cols;
  const std::size_t bytes = kernels::launch_gemv_bf16(a, nullptr);
  ASSERT_EQ(cudaGetLastError(), cudaSuccess);
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  EXPECT_GE(bytes, static_cast<std::size_t>(s.rows) * s.cols * 2);
  std::vector<float> y(s.rows);
  ASSERT_EQ(cudaMemcpy(y.data(), dy, s.rows * sizeof(float), cudaMemcpyDeviceToHost), cudaSuccess);
  double num = 0, den = 0;
  for (int r = 0; r < s.rows; ++r) {
    ASSERT_FALSE(std::isnan(y[r])) << "row " << r << " not written";
    num += (y[r] - ref[r]) * (y[r] - ref[r]);
    den += ref[r] * ref[r];
  }
  EXPECT_LT(std::sqrt(num / std::max(den, 1e-30)), 1e-5);
  for (void* p : {static_cast<void*>(dw), static_cast<void*>(db), static_cast<void*>(dx), static_cast<void*>(dres),
                  static_cast<void*>(dy)})
    cudaFree(p);
}

INSTANTIATE_TEST_SUITE_P(
    Shapes, GpuGemv,
    ::testing::Values(Shape{1, 1, false, false}, Shape{7, 9, true, false}, Shape{33, 8, false, true},
                      Shape{1000, 1003, true, true}, Shape{64, 4096, false, false},
                      Shape{3584, 3584, true, false}, Shape{512, 3584, true, false},
                      Shape{18944, 3584, false, false}, Shape{3584, 18944, false, true}));

}  // namespace
}  // namespace cosmos
