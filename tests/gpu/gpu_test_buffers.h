// Shared by the gemv test binaries (test_gemv.cpp; test_gemv_quant.cpp and test_gemv_quant_chain.cpp
// through gemv_quant_test_common.h): deterministic random numbers and device buffers with poisoned
// guards.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <vector>

#include <cuda_runtime.h>
#include <gtest/gtest.h>

namespace cosmos::gpu_test {

// Fast deterministic uniform random numbers in [-1, 1) (splitmix64).
struct Rng {
  std::uint64_t s;
  explicit Rng(std::uint64_t seed) : s(seed) {}
  float next() {
    std::uint64_t z = (s += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    z ^= z >> 31;
    return static_cast<float>(z >> 40) / static_cast<float>(1 << 23) - 1.0f;
  }
};

// A device buffer holding `n` elements starting `offset` elements into the allocation (offset 1 on a
// 16-byte aligned allocation makes a misaligned pointer), plus `guard` NaN-poisoned elements after.
template <typename E>
struct DevBuf {
  E* base = nullptr;
  E* ptr = nullptr;
  std::size_t n = 0;
  DevBuf() = default;
  DevBuf(const DevBuf&) = delete;
  DevBuf& operator=(const DevBuf&) = delete;
  ~DevBuf() {
    if (base) cudaFree(base);
  }
  void alloc(std::size_t count, int offset = 0, int guard = 0) {
    n = count;
    const std::size_t bytes = std::max<std::size_t>((count + offset + guard) * sizeof(E), 16);
    ASSERT_EQ(cudaMalloc(&base, bytes), cudaSuccess);
    ASSERT_EQ(cudaMemset(base, 0xFF, bytes), cudaSuccess);  // NaN for floats, bf16 and fp16
    ptr = base + offset;
  }
  void upload(const std::vector<E>& v) {
    ASSERT_EQ(cudaMemcpy(ptr, v.data(), v.size() * sizeof(E), cudaMemcpyHostToDevice), cudaSuccess);
  }
  std::vector<E> download(std::size_t count) const {
    std::vector<E> v(count);
    EXPECT_EQ(cudaMemcpy(v.data(), ptr, count * sizeof(E), cudaMemcpyDeviceToHost), cudaSuccess);
    return v;
  }
};

}  // namespace cosmos::gpu_test
