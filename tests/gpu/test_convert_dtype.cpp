// convert_dtype kernels vs the CPU: bf16 -> fp16 (round to nearest even) and bf16 -> fp32 (exact).
#include <bit>
#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include "kernels/convert_dtype.cuh"
#include "kernels/device_info.cuh"

namespace cosmos {
namespace {

float bf16_to_float(std::uint16_t b) {
  const std::uint32_t x = static_cast<std::uint32_t>(b) << 16;
  float f;
  std::memcpy(&f, &x, 4);
  return f;
}

std::uint16_t float_to_f16_bits(float f) {
  const _Float16 h = static_cast<_Float16>(f);  // round to nearest even
  std::uint16_t bits;
  std::memcpy(&bits, &h, 2);
  return bits;
}

class GpuConvert : public ::testing::TestWithParam<std::size_t> {
 protected:
  void SetUp() override {
    const auto q = kernels::query_gpus();
    if (q.gpus.empty()) GTEST_SKIP() << q.why_none;
  }
};

TEST_P(GpuConvert, MatchesCpuBitForBit) {
  const std::size_t n = GetParam();
  std::mt19937 rng(1234);
  std::vector<std::uint16_t> in(n);
  for (auto& v : in) v = static_cast<std::uint16_t>(rng());
  // Finite values of weight-like magnitude, plus some specials, so both paths are covered.
  for (std::size_t i = 0; i < n; ++i)
    if (i % 7 != 0) in[i] = static_cast<std::uint16_t>((in[i] & 0x80FF) | 0x3C00);

  std::uint16_t *d_in = nullptr, *d_h = nullptr;
  float* d_f = nullptr;
  ASSERT_EQ(cudaMalloc(&d_in, n * 2 + 16), cudaSuccess);
  ASSERT_EQ(cudaMalloc(&d_h, n * 2 + 16), cudaSuccess);
  ASSERT_EQ(cudaMalloc(&d_f, n * 4 + 16), cudaSuccess);
  ASSERT_EQ(cudaMemcpy(d_in, in.data(), n * 2, cudaMemcpyHostToDevice), cudaSuccess);
  EXPECT_EQ(kernels::launch_bf16_to_f16(d_in, d_h, n, nullptr), 4 * n);
  EXPECT_EQ(kernels::launch_bf16_to_f32(d_in, d_f, n, nullptr), 6 * n);
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  std::vector<std::uint16_t> h(n);
  std::vector<float> f(n);
  ASSERT_EQ(cudaMemcpy(h.data(), d_h, n * 2, cudaMemcpyDeviceToHost), cudaSuccess);
  ASSERT_EQ(cudaMemcpy(f.data(), d_f, n * 4, cudaMemcpyDeviceToHost), cudaSuccess);
  std::size_t bad_h = 0, bad_f = 0;
  for (std::size_t i = 0; i < n; ++i) {
    const float ref = bf16_to_float(in[i]);
    if (std::isnan(ref)) {
      bad_h += !std::isnan(static_cast<float>(std::bit_cast<_Float16>(h[i])));
      bad_f += !std::isnan(f[i]);
      continue;
    }
    bad_h += h[i] != float_to_f16_bits(ref);
    bad_f += std::memcmp(&f[i], &ref, 4) != 0;
  }
  EXPECT_EQ(bad_h, 0u);
  EXPECT_EQ(bad_f, 0u);
  cudaFree(d_in);
  cudaFree(d_h);
  cudaFree(d_f);
}

// Sizes that exercise the vector body, the scalar tail and tiny inputs.
INSTANTIATE_TEST_SUITE_P(Sizes, GpuConvert, ::testing::Values(1, 7, 8, 9, 1000, 4096 + 3, 3584 * 512));

}  // namespace
}  // namespace cosmos
