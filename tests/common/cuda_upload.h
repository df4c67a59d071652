// Test helper: copies a host vector into a fresh device buffer (at least 16 bytes, so empty inputs
// and 16-byte vector loads stay valid). The caller frees it with cudaFree.
#pragma once

#include <algorithm>
#include <vector>

#include <cuda_runtime.h>
#include <gtest/gtest.h>

namespace cosmos::testing {

template <typename T>
T* upload(const std::vector<T>& v) {
  T* d = nullptr;
  EXPECT_EQ(cudaMalloc(&d, std::max<std::size_t>(v.size() * sizeof(T), 16)), cudaSuccess);
  EXPECT_EQ(cudaMemcpy(d, v.data(), v.size() * sizeof(T), cudaMemcpyHostToDevice), cudaSuccess);
  return d;
}

}  // namespace cosmos::testing
