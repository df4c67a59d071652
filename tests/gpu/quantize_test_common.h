// Shared by test_quantize.cpp (every format x value pattern) and test_quantize_kinds.cpp (large
// matrices, row ranges, arbitrary bytes, bad weights, edge arguments), one test binary: bf16 bits,
// device buffers with poisoned guards, value patterns, and the GPU quantizer run and compared with
// the CPU quantizer (cosmos::quantize_rows / dequantize_row) bit for bit.
#pragma once

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include <cuda_bf16.h>
#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include "cosmos/quant.h"
#include "kernels/device_info.cuh"
#include "kernels/quantize.cuh"
#include "test_ops_common.h"


namespace cosmos::quantize_test {


using kernels::QuantKind;

using gpu_ops_test::Rng;  // splitmix64 (test_ops_common.h)

inline std::uint16_t bf16_rne(float f) {
  const std::uint32_t u = std::bit_cast<std::uint32_t>(f);
  if ((u & 0x7FFFFFFFu) > 0x7F800000u) return static_cast<std::uint16_t>((u >> 16) | 0x40u);
  return static_cast<std::uint16_t>((u + 0x7FFFu + ((u >> 16) & 1u)) >> 16);
}
inline bool bf16_is_nan(std::uint16_t b) { return (b & 0x7FFFu) > 0x7F80u; }

inline QuantFormat format_of(QuantKind k) {
  switch (k) {
    case QuantKind::int8_row: return QuantFormat::int8_row;
    case QuantKind::fp8_row: return QuantFormat::fp8_row;
    case QuantKind::int4_group: return QuantFormat::int4_group;
  }
  return QuantFormat::int8_row;
}
inline const char* kind_name(QuantKind k) {
  return k == QuantKind::int8_row ? "int8" : k == QuantKind::fp8_row ? "fp8" : "int4";
}

// ---- device buffers with poisoned guards ---------------------------------------------------------

constexpr std::size_t kGuard = 64;

// `n` elements at `offset` elements into an allocation with kGuard bytes after them; everything
// filled with the byte `poison`; check_guards() says whether the bytes around the elements still are.
template <typename E>
struct DevBuf {
  std::uint8_t* base = nullptr;
  E* ptr = nullptr;
  std::size_t n = 0, offset = 0, total = 0;
  DevBuf() = default;
  DevBuf(const DevBuf&) = delete;
  DevBuf& operator=(const DevBuf&) = delete;
  ~DevBuf() {
    if (base) cudaFree(base);
  }
  void alloc(std::size_t count, std::size_t offset_elems, std::uint8_t poison) {
    if (base) cudaFree(base);
    n = count;
    offset = offset_elems * sizeof(E);
    total = offset + n * sizeof(E) + kGuard;
    ASSERT_EQ(cudaMalloc(&base, total), cudaSuccess);
    ASSERT_EQ(cudaMemset(base, poison, total), cudaSuccess);
    ptr = reinterpret_cast<E*>(base + offset);
  }
  void upload(const std::vector<E>& v) {
    ASSERT_EQ(v.size(), n);
    if (n == 0) return;
    ASSERT_EQ(cudaMemcpy(ptr, v.data(), n * sizeof(E), cudaMemcpyHostToDevice), cudaSuccess);
  }
  std::vector<E> download() const {
    std::vector<E> v(n);
    if (n == 0) return v;
    EXPECT_EQ(cudaMemcpy(v.data(), ptr, n * sizeof(E), cudaMemcpyDeviceToHost), cudaSuccess);
    return v;
  }
  bool guards_intact(std::uint8_t poison) const {
    std::vector<std::uint8_t> all(total);
    EXPECT_EQ(cudaMemcpy(all.data(), base, total, cudaMemcpyDeviceToHost), cudaSuccess);
    for (std::size_t i = 0; i < offset; ++i)
      if (all[i] != poison) return false;
    for (std::size_t i = offset + n * sizeof(E); i < total; ++i)
      if (all[i] != poison) return false;
    return true;
  }
};

// ---- value patterns ------------------------------------------------------------------------------

enum class Pattern { normal, zeros, constant, one_value_group, tiny, huge, mixed_signs, ties, scale_edge };
inline const char* pattern_name(Pattern p) {
  switch (p) {
    case Pattern::normal: return "normal";
    case Pattern::zeros: return "zeros";
    case Pattern::constant: return "constant";
    case Pattern::one_value_group: return "one_value_group";
    case Pattern::tiny: return "tiny";
    case Pattern::huge: return "huge";
    case Pattern::mixed_signs: return "mixed_signs";
    case Pattern::ties: return "ties";
    case Pattern::scale_edge: return "scale_edge";
  }
  return "?";
}

inline std::uint16_t normalish(Rng& rng, float scale) {
  const float x = (rng.uniform() + rng.uniform() + rng.uniform() + rng.uniform() - 2.0f) * scale;
  return bf16_rne(x);
}

// E4M3 code c (0 <= c <= 0x7E) as a float.
inline float e4m3_positive(int c) { return e4m3_to_float(static_cast<std::uint8_t>(c)); }

inline std::vector<std::uint16_t> make_data(Pattern p, QuantKind kind, std::int64_t rows, std::int64_t cols,
                                     std::uint64_t seed) {
  Rng rng(seed);
  std::vector<std::uint16_t> v(static_cast<std::size_t>(rows * cols));
  const std::int64_t groups = (cols + kInt4GroupSize - 1) / kInt4GroupSize;
  for (std::int64_t r = 0; r < rows; ++r) {
    std::uint16_t* w = v.data() + r * cols;
    const float row_scale = std::ldexp(1.0f, rng.below(17) - 8);
    switch (p) {
      case Pattern::normal:
        for (std::int64_t c = 0; c < cols; ++c) w[c] = normalish(rng, row_scale);
        break;
      case Pattern::zeros:  // +0 and -0 (which one comes first in a group decides int4's minimum bits)
        for (std::int64_t c = 0; c < cols; ++c) w[c] = (rng.bits() & 1) ? 0x8000u : 0x0000u;
        break;
      case Pattern::constant: {
        static constexpr std::uint16_t kValues[] = {0x3F80u, 0xBEC0u, 0x0001u, 0x8000u, 0x7E80u, 0xFE80u, 0x4123u};
        const std::uint16_t x = kValues[(r + static_cast<std::int64_t>(seed)) % 7];
        for (std::int64_t c = 0; c < cols; ++c) w[c] = x;
        break;
      }
      case Pattern::one_value_group: {
        for (std::int64_t c = 0; c < cols; ++c) w[c] = normalish(rng, row_scale);
        const std::int64_t g = r % groups;
        const std::uint16_t x = normalish(rng, row_scale);
        for (std::int64_t c = g * kInt4GroupSize; c < std::min(cols, (g + 1) * kInt4GroupSize); ++c) w[c] = x;
        break;
      }
      case Pattern::tiny:  // bf16 subnormals and the smallest normals (fp32 underflow territory)
        for (std::int64_t c = 0; c < cols; ++c) {
          const std::uint16_t mag = (r % 2 == 0) ? static_cast<std::uint16_t>(rng.below(0x80))
                                                 : static_cast<std::uint16_t>(rng.below(0x300));
          w[c] = static_cast<std::uint16_t>(mag | ((rng.bits() & 1) ? 0x8000u : 0u));
        }
        break;
      case Pattern::huge:  // up to +-2^126 (0x7E80) exactly, which is still accepted
        for (std::int64_t c = 0; c < cols; ++c) {
          const std::uint16_t mag = rng.below(8) == 0 ? std::uint16_t{0x7E80u}
                                                      : static_cast<std::uint16_t>(0x7C00u + rng.below(0x281));
          w[c] = static_cast<std::uint16_t>(mag | ((rng.bits() & 1) ? 0x8000u : 0u));
        }
        break;
      case Pattern::mixed_signs:  // alternating signs over 2^-60 .. 2^60, some zeros
        for (std::int64_t c = 0; c < cols; ++c) {
          if (rng.below(16) == 0) {
            w[c] = (c & 1) ? 0x8000u : 0u;
            continue;
          }
          const float x = std::ldexp(1.0f + rng.uniform(), rng.below(121) - 60);
          w[c] = bf16_rne((c & 1) ? -x : x);
        }
        break;
      case Pattern::ties:
        for (std::int64_t c = 0; c < cols; ++c) {
          const bool neg = rng.bits() & 1;
          float x = 0;
          if (kind == QuantKind::int8_row) {  // s = 127 / 127 = 1: w / s = k + 0.5 exactly
            x = c == 0 ? 127.0f : static_cast<float>(rng.below(127)) + 0.5f;
            if (neg) x = -x;
          } else if (kind == QuantKind::fp8_row) {  // s = 448 / 448 = 1: midpoints of adjacent codes
            if (c == 0) {
              x = 448.0f;
            } else {
              const int code = rng.below(0x7E);
              x = 0.5f * (e4m3_positive(code) + e4m3_positive(code + 1));
            }
            if (neg) x = -x;
          } else {  // every group: 0 and 15 (m = 0, s = 1), then k + 0.5
            const std::int64_t k = c % kInt4GroupSize;
            x = k == 0 ? 0.0f : k == 1 ? 15.0f : static_cast<float>(rng.below(15)) + 0.5f;
          }
          w[c] = bf16_rne(x);
        }
        break;
      case Pattern::scale_edge:  // per group: m = -2^-k (tiny), hi = 15 b (b of 4 significant bits):
        // (hi - m) / 15 lies just above the bf16 b but rounds to it in fp32, so the int4 scale is the
        // bf16 after b (float rounded down, then bumped up, then rounded up to bf16)
        for (std::int64_t g = 0; g < groups; ++g) {
          const float b = std::ldexp(static_cast<float>(8 + rng.below(8)), rng.below(40) - 20);
          const float m = -std::ldexp(1.0f, -(30 + rng.below(60)));
          for (std::int64_t c = g * kInt4GroupSize; c < std::min(cols, (g + 1) * kInt4GroupSize); ++c) {
            const std::int64_t k = c % kInt4GroupSize;
            w[c] = bf16_rne(k == 0 ? m : k == 1 ? 15.0f * b : rng.uniform() * 15.0f * b);
          }
        }
        break;
    }
  }
  return v;
}

// ---- launching -----------------------------------------------------------------------------------

struct GpuQuant {
  std::vector<std::uint8_t> q;
  std::vector<float> row_scale;
  std::vector<std::uint16_t> gscale, gmin;
  kernels::QuantStatus status{};
};

inline std::int64_t row_bytes_of(QuantKind k, std::int64_t cols) { return kernels::quant_row_bytes(k, cols); }

// Quantizes data on the GPU with every pointer offset by `off` elements and outputs poisoned with
// `poison`; checks the guards.
inline void gpu_quantize(QuantKind kind, const std::vector<std::uint16_t>& data, std::int64_t rows, std::int64_t cols,
                  std::size_t off, std::uint8_t poison, GpuQuant& out) {
  const bool int4 = kind == QuantKind::int4_group;
  const auto qn = static_cast<std::size_t>(rows * row_bytes_of(kind, cols));
  const auto gn = static_cast<std::size_t>(rows * kernels::quant_groups(cols));
  DevBuf<std::uint16_t> src, gs, gm;
  DevBuf<std::uint8_t> q;
  DevBuf<float> rs;
  DevBuf<kernels::QuantStatus> st;
  src.alloc(data.size(), off, 0x00);
  src.upload(data);
  q.alloc(qn, off, poison);
  rs.alloc(int4 ? 0 : static_cast<std::size_t>(rows), off, poison);
  gs.alloc(int4 ? gn : 0, off, poison);
  gm.alloc(int4 ? gn : 0, off, poison);
  st.alloc(1, 0, 0x00);  // "row 0, column 0" in both fields unless launch_quantize resets it
  kernels::QuantOut o;
  o.q = q.ptr;
  o.row_scale = int4 ? nullptr : rs.ptr;
  o.group_scale = int4 ? gs.ptr : nullptr;
  o.group_min = int4 ? gm.ptr : nullptr;
  const std::size_t bytes = kernels::launch_quantize(reinterpret_cast<const __nv_bfloat16*>(src.ptr), rows, cols,
                                                     kind, o, st.ptr, nullptr);
  EXPECT_GT(bytes, 0u);
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  ASSERT_EQ(cudaGetLastError(), cudaSuccess);
  out.q = q.download();
  out.row_scale = rs.download();
  out.gscale = gs.download();
  out.gmin = gm.download();
  out.status = st.download()[0];
  EXPECT_TRUE(q.guards_intact(poison)) << "q written outside its rows";
  EXPECT_TRUE(rs.guards_intact(poison)) << "row_scale written outside its rows";
  EXPECT_TRUE(gs.guards_intact(poison)) << "group_scale written outside its rows";
  EXPECT_TRUE(gm.guards_intact(poison)) << "group_min written outside its rows";
}

inline std::string where(std::int64_t i, std::int64_t per_row) {
  return "row " + std::to_string(i / per_row) + ", index " + std::to_string(i % per_row);
}

// Compares the first `rows` rows of the GPU result with the CPU's; one message per kind of mismatch.
inline void expect_same(const QuantizedMatrix& cpu, const GpuQuant& gpu, std::int64_t rows, const std::uint16_t* src) {
  const QuantKind kind = cpu.format == QuantFormat::int8_row  ? QuantKind::int8_row
                         : cpu.format == QuantFormat::fp8_row ? QuantKind::fp8_row
                                                              : QuantKind::int4_group;
  const std::int64_t rb = row_bytes_of(kind, cpu.cols);
  for (std::int64_t i = 0; i < rows * rb; ++i) {
    if (gpu.q[static_cast<std::size_t>(i)] != cpu.q[static_cast<std::size_t>(i)]) {
      const std::int64_t r = i / rb, c = kind == QuantKind::int4_group ? 2 * (i % rb) : i % rb;
      ADD_FAILURE() << "q differs at " << where(i, rb) << ": gpu 0x" << std::hex << int{gpu.q[i]} << ", cpu 0x"
                    << int{cpu.q[i]} << ", source bits 0x" << src[r * cpu.cols + c] << std::dec;
      break;
    }
  }
  if (kind == QuantKind::int4_group) {
    const std::int64_t g = cpu.groups();
    for (std::int64_t i = 0; i < rows * g; ++i) {
      if (gpu.gscale[i] != cpu.group_scale[i] || gpu.gmin[i] != cpu.group_min[i]) {
        ADD_FAILURE() << "group " << where(i, g) << ": gpu scale/min 0x" << std::hex << gpu.gscale[i] << "/0x"
                      << gpu.gmin[i] << ", cpu 0x" << cpu.group_scale[i] << "/0x" << cpu.group_min[i] << std::dec;
        break;
      }
    }
  } else {
    for (std::int64_t r = 0; r < rows; ++r) {
      if (std::bit_cast<std::uint32_t>(gpu.row_scale[r]) != std::bit_cast<std::uint32_t>(cpu.row_scale[r])) {
        ADD_FAILURE() << "row_scale differs at row " << r << ": gpu " << gpu.row_scale[r] << " (0x" << std::hex
                      << std::bit_cast<std::uint32_t>(gpu.row_scale[r]) << "), cpu " << std::dec << cpu.row_scale[r]
                      << " (0x" << std::hex << std::bit_cast<std::uint32_t>(cpu.row_scale[r]) << ")" << std::dec;
        break;
      }
    }
  }
}

// Uploads m (pointers offset by `off` elements), dequantizes it into a bf16 buffer (offset too),
// compares every element with dequantize_row rounded to nearest even (NaN: both NaN).
inline void expect_dequantize(const QuantizedMatrix& m, std::size_t off) {
  const QuantKind kind = m.format == QuantFormat::int8_row  ? QuantKind::int8_row
                         : m.format == QuantFormat::fp8_row ? QuantKind::fp8_row
                                                            : QuantKind::int4_group;
  const bool int4 = kind == QuantKind::int4_group;
  DevBuf<std::uint8_t> q;
  DevBuf<float> rs;
  DevBuf<std::uint16_t> gs, gm, dst;
  q.alloc(m.q.size(), off, 0);
  q.upload(m.q);
  rs.alloc(m.row_scale.size(), off, 0);
  rs.upload(m.row_scale);
  gs.alloc(m.group_scale.size(), off, 0);
  gs.upload(m.group_scale);
  gm.alloc(m.group_min.size(), off, 0);
  gm.upload(m.group_min);
  const auto n = static_cast<std::size_t>(m.rows * m.cols);
  dst.alloc(n, off, 0xFF);
  kernels::QuantMatrix qm;
  qm.kind = kind;
  qm.q = q.ptr;
  qm.row_scale = int4 ? nullptr : rs.ptr;
  qm.group_scale = int4 ? gs.ptr : nullptr;
  qm.group_min = int4 ? gm.ptr : nullptr;
  EXPECT_GT(kernels::launch_dequantize(qm, m.rows, m.cols, reinterpret_cast<__nv_bfloat16*>(dst.ptr), nullptr), 0u);
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  const std::vector<std::uint16_t> got = dst.download();
  EXPECT_TRUE(dst.guards_intact(0xFF)) << "dequantize wrote outside the matrix";
  std::vector<float> row(static_cast<std::size_t>(m.cols));
  for (std::int64_t r = 0; r < m.rows; ++r) {
    dequantize_row(m, r, row.data());
    for (std::int64_t c = 0; c < m.cols; ++c) {
      const std::uint16_t want = bf16_rne(row[c]), have = got[static_cast<std::size_t>(r * m.cols + c)];
      if (want == have || (bf16_is_nan(want) && bf16_is_nan(have))) continue;
      ADD_FAILURE() << kind_name(kind) << " dequantize differs at row " << r << ", col " << c << ": gpu 0x"
                    << std::hex << have << ", cpu 0x" << want << " (fp32 " << std::dec << row[c] << ")";
      return;
    }
  }
}

inline QuantizedMatrix cpu_quantize(QuantKind kind, const std::vector<std::uint16_t>& data, std::int64_t rows,
                             std::int64_t cols, Status* status = nullptr) {
  QuantizedMatrix m = make_quantized(format_of(kind), rows, cols);
  Status st = quantize_rows(reinterpret_cast<const std::byte*>(data.data()), DType::bf16, m, 0, rows);
  if (status) {
    *status = st;
  } else {
    EXPECT_TRUE(st.ok()) << st.error().code << ": " << st.error().message;
  }
  return m;
}

// Quantizes on both sides (GPU twice, with two poisons; aligned, and misaligned by `off`) and
// compares quantization and dequantization.
inline void check_case(QuantKind kind, const std::vector<std::uint16_t>& data, std::int64_t rows, std::int64_t cols,
                std::size_t off) {
  const QuantizedMatrix cpu = cpu_quantize(kind, data, rows, cols);
  for (const std::uint8_t poison : {std::uint8_t{0xA5}, std::uint8_t{0x5A}}) {
    SCOPED_TRACE(poison == 0xA5 ? "poison 0xA5" : "poison 0x5A");
    GpuQuant gpu;
    gpu_quantize(kind, data, rows, cols, off, poison, gpu);
    EXPECT_EQ(gpu.status.non_finite, kernels::kQuantNoError);
    EXPECT_EQ(gpu.status.out_of_range, kernels::kQuantNoError);
    expect_same(cpu, gpu, rows, data.data());
  }
  expect_dequantize(cpu, off);
}

class GpuQuantize : public ::testing::TestWithParam<std::tuple<QuantKind, Pattern>> {
 protected:
  void SetUp() override {
    const auto q = kernels::query_gpus();
    if (q.gpus.empty()) GTEST_SKIP() << q.why_none;
  }
};

}  // namespace cosmos::quantize_test
