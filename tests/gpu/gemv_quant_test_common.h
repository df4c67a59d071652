// Shared by test_gemv_quant.cpp (shapes and knobs) and test_gemv_quant_chain.cpp (PDL chains), one
// test binary: random numbers, bf16 bits, device buffers with poisoned guards, and a quantized
// matrix on the host (the engine's bytes and their dequantized values) and on the device.
#pragma once

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
#include "gpu_test_buffers.h"
#include "kernels/device_info.cuh"
#include "kernels/gemv_quant.cuh"
#include "kernels/pdl.cuh"

namespace cosmos::gemv_quant_test {

using gpu_test::DevBuf;
using gpu_test::Rng;

inline float bf16_to_f(std::uint16_t b) {
  const std::uint32_t u = static_cast<std::uint32_t>(b) << 16;
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}
inline std::uint16_t f_to_bf16(float v) {
  const __nv_bfloat16 h = __float2bfloat16(v);
  std::uint16_t b;
  std::memcpy(&b, &h, 2);
  return b;
}

inline const char* fmt_name(QuantFormat f) {
  switch (f) {
    case QuantFormat::int8_row: return "int8";
    case QuantFormat::fp8_row: return "fp8";
    case QuantFormat::int4_group: return "int4";
  }
  return "?";
}
inline kernels::QuantKind kind_of(QuantFormat f) {
  switch (f) {
    case QuantFormat::int8_row: return kernels::QuantKind::int8_row;
    case QuantFormat::fp8_row: return kernels::QuantKind::fp8_row;
    case QuantFormat::int4_group: return kernels::QuantKind::int4_group;
  }
  return kernels::QuantKind::int8_row;
}

// A quantized matrix and, per row, its dequantized values' dot products are computed on the fly.
// Weights: uniform, scaled so each output is about as large as the inputs, some rows shifted (int4
// minimums away from -7.5 s) and every 97th row zero (scale 0).
struct HostQuant {
  QuantizedMatrix m;
  // Quantizes in chunks of rows (no full fp32 copy of lm_head-sized matrices).
  HostQuant(QuantFormat f, int rows, int cols, Rng& rng) : m(make_quantized(f, rows, cols)) {
    const float ws = std::sqrt(3.0f / static_cast<float>(cols));
    const int chunk = std::max(1, (1 << 22) / std::max(cols, 1));
    std::vector<float> src;
    for (int r0 = 0; r0 < rows; r0 += chunk) {
      const int r1 = std::min(rows, r0 + chunk);
      src.assign(static_cast<std::size_t>(r1 - r0) * cols, 0.0f);
      for (int r = r0; r < r1; ++r) {
        if (r % 97 == 5) continue;
        const float shift = (r % 5 == 1) ? 0.5f * rng.next() : 0.0f;
        float* d = src.data() + static_cast<std::size_t>(r - r0) * cols;
        for (int c = 0; c < cols; ++c) d[c] = (rng.next() + shift) * ws;
      }
      QuantizedMatrix part = make_quantized(f, r1 - r0, cols);
      const Status st = quantize_rows(reinterpret_cast<const std::byte*>(src.data()), DType::f32, part, 0, r1 - r0);
      EXPECT_TRUE(st.ok());
      std::copy(part.q.begin(), part.q.end(), m.q.begin() + static_cast<std::ptrdiff_t>(part.q.size() / (r1 - r0)) * r0);
      std::copy(part.row_scale.begin(), part.row_scale.end(), m.row_scale.begin() + (part.row_scale.empty() ? 0 : r0));
      const std::ptrdiff_t g = static_cast<std::ptrdiff_t>(m.groups());
      std::copy(part.group_scale.begin(), part.group_scale.end(), m.group_scale.begin() + (part.group_scale.empty() ? 0 : g * r0));
      std::copy(part.group_min.begin(), part.group_min.end(), m.group_min.begin() + (part.group_min.empty() ? 0 : g * r0));
    }
  }
  // Row r: dequantized values (dst), the magnitudes of the kernel's terms (|s q|; int4 + |m|; int8
  // |s| (q + 256), below), and (int4) |s| (128 + q), the terms of the tensor-core kernel's offset
  // sums (else 0).
  void row(std::int64_t r, std::vector<float>& dst, std::vector<double>& mag, std::vector<double>& omag) const {
    const std::int64_t cols = m.cols;
    dst.resize(static_cast<std::size_t>(cols));
    mag.resize(static_cast<std::size_t>(cols));
    omag.assign(static_cast<std::size_t>(cols), 0.0);
    dequantize_row(m, r, dst.data());
    if (m.format == QuantFormat::int4_group) {
      const std::uint8_t* q = m.q.data() + r * ((cols + 1) / 2);
      for (std::int64_t c = 0; c < cols; ++c) {
        const std::size_t k = static_cast<std::size_t>(r * m.groups() + c / kInt4GroupSize);
        const int qc = (c & 1) ? q[c / 2] >> 4 : q[c / 2] & 0xF;
        mag[c] = std::fabs(static_cast<double>(qc) * bf16_to_f(m.group_scale[k])) + std::fabs(bf16_to_f(m.group_min[k]));
        omag[c] = std::fabs(static_cast<double>(bf16_to_f(m.group_scale[k]))) * (128 + qc);
      }
    } else if (m.format == QuantFormat::int8_row) {
      // The vector kernel's sums carry b = q + 128 (the weights masked in place), then take back
      // 128 sum(x): |s| (q + 128) + 128 |s| per term.
      const auto* q = reinterpret_cast<const std::int8_t*>(m.q.data()) + r * cols;
      const double s = std::fabs(static_cast<double>(m.row_scale[static_cast<std::size_t>(r)]));
      for (std::int64_t c = 0; c < cols; ++c) mag[c] = s * (q[c] + 256);
    } else {
      for (std::int64_t c = 0; c < cols; ++c) mag[c] = std::fabs(static_cast<double>(dst[c]));
    }
  }
};

// The quantized matrix on the device; q starts `q_offset` bytes into its allocation.
struct DevQuant {
  DevBuf<std::uint8_t> q;
  DevBuf<float> row_scale;
  DevBuf<std::uint16_t> gs, gm;
  kernels::QuantMatrix mat;
  void upload(const QuantizedMatrix& m, int q_offset = 0) {
    q.alloc(m.q.size(), q_offset);
    q.upload(m.q);
    mat.kind = kind_of(m.format);
    mat.q = q.ptr;
    if (!m.row_scale.empty()) {
      row_scale.alloc(m.row_scale.size());
      row_scale.upload(m.row_scale);
      mat.row_scale = row_scale.ptr;
    }
    if (!m.group_scale.empty()) {
      gs.alloc(m.group_scale.size());
      gs.upload(m.group_scale);
      gm.alloc(m.group_min.size());
      gm.upload(m.group_min);
      mat.group_scale = gs.ptr;
      mat.group_min = gm.ptr;
    }
  }
};

}  // namespace cosmos::gemv_quant_test
