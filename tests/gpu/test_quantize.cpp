// launch_quantize / launch_dequantize (kernels/quantize.cuh) against the CPU quantizer
// (cosmos::quantize_rows / dequantize_row), which they must equal bit for bit on bf16 sources:
//   - every format x shapes (rows 1..5 x cols 1, 7, 127, 128, 129, 255, 256, 1000, 3584; the vector
//     path and, with every pointer offset by one element, the element path) x value patterns (random
//     normal-ish, zeros of both signs, constant rows, a group of one value, tiny values down to bf16
//     subnormals, huge values up to +-2^126, mixed signs over many magnitudes, exact rounding ties,
//     int4 scales just above a bf16 value);
//     outputs poisoned before each launch (twice, with two poisons, so no unwritten byte can pass
//     by matching the poison), guards before and after every buffer that must stay poisoned, the
//     status poisoned with 0 (a missing reset reads as "row 0, column 0 is bad");
//   - every byte of q and every bit of the scales / minima against quantize_rows; the dequantized
//     bf16 against dequantize_row rounded to nearest even;
//   - dequantization of arbitrary bytes (all E4M3 codes, subnormal scales, random int4 scales and
//     minima: products and sums that an FMA would round differently);
//   - NaN / infinity / beyond-2^126 weights: the smallest bad (row, column) of each kind, the CPU's
//     error being the smaller of the two, and rows before it quantized as on the CPU;
//   - a 4608 x 3584 matrix (with a timing report), and quantizing / dequantizing row ranges through
//     offset pointers, which must equal the whole-matrix launch.
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

namespace cosmos {
namespace {

using kernels::QuantKind;

using gpu_ops_test::Rng;  // splitmix64 (test_ops_common.h)

std::uint16_t bf16_rne(float f) {
  const std::uint32_t u = std::bit_cast<std::uint32_t>(f);
  if ((u & 0x7FFFFFFFu) > 0x7F800000u) return static_cast<std::uint16_t>((u >> 16) | 0x40u);
  return static_cast<std::uint16_t>((u + 0x7FFFu + ((u >> 16) & 1u)) >> 16);
}
bool bf16_is_nan(std::uint16_t b) { return (b & 0x7FFFu) > 0x7F80u; }

QuantFormat format_of(QuantKind k) {
  switch (k) {
    case QuantKind::int8_row: return QuantFormat::int8_row;
    case QuantKind::fp8_row: return QuantFormat::fp8_row;
    case QuantKind::int4_group: return QuantFormat::int4_group;
  }
  return QuantFormat::int8_row;
}
const char* kind_name(QuantKind k) {
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
const char* pattern_name(Pattern p) {
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

std::uint16_t normalish(Rng& rng, float scale) {
  const float x = (rng.uniform() + rng.uniform() + rng.uniform() + rng.uniform() - 2.0f) * scale;
  return bf16_rne(x);
}

// E4M3 code c (0 <= c <= 0x7E) as a float.
float e4m3_positive(int c) { return e4m3_to_float(static_cast<std::uint8_t>(c)); }

std::vector<std::uint16_t> make_data(Pattern p, QuantKind kind, std::int64_t rows, std::int64_t cols,
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

std::int64_t row_bytes_of(QuantKind k, std::int64_t cols) { return kernels::quant_row_bytes(k, cols); }

// Quantizes data on the GPU with every pointer offset by `off` elements and outputs poisoned with
// `poison`; checks the guards.
void gpu_quantize(QuantKind kind, const std::vector<std::uint16_t>& data, std::int64_t rows, std::int64_t cols,
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

std::string where(std::int64_t i, std::int64_t per_row) {
  return "row " + std::to_string(i / per_row) + ", index " + std::to_string(i % per_row);
}

// Compares the first `rows` rows of the GPU result with the CPU's; one message per kind of mismatch.
void expect_same(const QuantizedMatrix& cpu, const GpuQuant& gpu, std::int64_t rows, const std::uint16_t* src) {
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
void expect_dequantize(const QuantizedMatrix& m, std::size_t off) {
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

QuantizedMatrix cpu_quantize(QuantKind kind, const std::vector<std::uint16_t>& data, std::int64_t rows,
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
void check_case(QuantKind kind, const std::vector<std::uint16_t>& data, std::int64_t rows, std::int64_t cols,
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

TEST_P(GpuQuantize, MatchesCpuBitForBit) {
  const auto [kind, pattern] = GetParam();
  std::uint64_t seed = 1;
  for (const std::int64_t cols : {1, 7, 127, 128, 129, 255, 256, 1000, 3584}) {
    for (std::int64_t rows = 1; rows <= 5; ++rows) {
      const std::vector<std::uint16_t> data = make_data(pattern, kind, rows, cols, seed++);
      for (const std::size_t off : {std::size_t{0}, std::size_t{1}}) {
        SCOPED_TRACE(std::to_string(rows) + "x" + std::to_string(cols) + (off ? " misaligned" : " aligned"));
        check_case(kind, data, rows, cols, off);
        if (HasFailure()) return;
      }
    }
  }
}

std::string param_name(const ::testing::TestParamInfo<std::tuple<QuantKind, Pattern>>& info) {
  return std::string(kind_name(std::get<0>(info.param))) + "_" + pattern_name(std::get<1>(info.param));
}

INSTANTIATE_TEST_SUITE_P(Patterns, GpuQuantize,
                         ::testing::Combine(::testing::Values(QuantKind::int8_row, QuantKind::fp8_row,
                                                             QuantKind::int4_group),
                                            ::testing::Values(Pattern::normal, Pattern::zeros, Pattern::constant,
                                                              Pattern::one_value_group, Pattern::tiny, Pattern::huge,
                                                              Pattern::mixed_signs, Pattern::ties,
                                                              Pattern::scale_edge)),
                         param_name);

class GpuQuantizeKind : public ::testing::TestWithParam<QuantKind> {
 protected:
  void SetUp() override {
    const auto q = kernels::query_gpus();
    if (q.gpus.empty()) GTEST_SKIP() << q.why_none;
  }
};

std::string kind_param_name(const ::testing::TestParamInfo<QuantKind>& info) { return kind_name(info.param); }

// A qkv-sized matrix (some rows zero, constant, or with a constant group), then the bandwidth.
TEST_P(GpuQuantizeKind, LargeMatrix) {
  const QuantKind kind = GetParam();
  const std::int64_t rows = 4608, cols = 3584;
  std::vector<std::uint16_t> data = make_data(Pattern::normal, kind, rows, cols, 77);
  for (std::int64_t c = 0; c < cols; ++c) {
    data[static_cast<std::size_t>(5 * cols + c)] = 0;
    data[static_cast<std::size_t>(6 * cols + c)] = 0xBEC0u;
    if (c >= 256 && c < 384) data[static_cast<std::size_t>(7 * cols + c)] = 0x3D00u;
  }
  check_case(kind, data, rows, cols, 0);

  // Timing (reported, not asserted).
  DevBuf<std::uint16_t> src, gs, gm, dst;
  DevBuf<std::uint8_t> q;
  DevBuf<float> rs;
  DevBuf<kernels::QuantStatus> st;
  const auto gn = static_cast<std::size_t>(rows * kernels::quant_groups(cols));
  src.alloc(data.size(), 0, 0);
  src.upload(data);
  q.alloc(static_cast<std::size_t>(rows * row_bytes_of(kind, cols)), 0, 0);
  rs.alloc(static_cast<std::size_t>(rows), 0, 0);
  gs.alloc(gn, 0, 0);
  gm.alloc(gn, 0, 0);
  dst.alloc(data.size(), 0, 0);
  st.alloc(1, 0, 0);
  kernels::QuantOut o{q.ptr, rs.ptr, gs.ptr, gm.ptr};
  kernels::QuantMatrix qm{kind, q.ptr, rs.ptr, gs.ptr, gm.ptr};
  cudaEvent_t e0, e1;
  cudaEventCreate(&e0);
  cudaEventCreate(&e1);
  constexpr int kReps = 20;
  std::size_t qbytes = 0, dbytes = 0;
  float qms = 0, dms = 0;
  qbytes = kernels::launch_quantize(reinterpret_cast<const __nv_bfloat16*>(src.ptr), rows, cols, kind, o, st.ptr,
                                    nullptr);  // warm-up
  cudaEventRecord(e0);
  for (int i = 0; i < kReps; ++i)
    kernels::launch_quantize(reinterpret_cast<const __nv_bfloat16*>(src.ptr), rows, cols, kind, o, st.ptr, nullptr);
  cudaEventRecord(e1);
  cudaEventSynchronize(e1);
  cudaEventElapsedTime(&qms, e0, e1);
  dbytes = kernels::launch_dequantize(qm, rows, cols, reinterpret_cast<__nv_bfloat16*>(dst.ptr), nullptr);
  cudaEventRecord(e0);
  for (int i = 0; i < kReps; ++i)
    kernels::launch_dequantize(qm, rows, cols, reinterpret_cast<__nv_bfloat16*>(dst.ptr), nullptr);
  cudaEventRecord(e1);
  cudaEventSynchronize(e1);
  cudaEventElapsedTime(&dms, e0, e1);
  ASSERT_EQ(cudaGetLastError(), cudaSuccess);
  cudaEventDestroy(e0);
  cudaEventDestroy(e1);
  const double qus = 1e3 * qms / kReps, dus = 1e3 * dms / kReps;
  char buf[200];
  std::snprintf(buf, sizeof buf, "%s %lldx%lld: quantize %.1f us (%zu B, %.0f GB/s), dequantize %.1f us (%zu B, %.0f GB/s)",
                kind_name(kind), static_cast<long long>(rows), static_cast<long long>(cols), qus, qbytes,
                qbytes / (qus * 1e3), dus, dbytes, dbytes / (dus * 1e3));
  std::printf("[ PERF     ] %s\n", buf);
  ::testing::Test::RecordProperty("perf", buf);
}

// Rows [r0, r1) through offset pointers equal the whole matrix's rows, for quantize and dequantize;
// a bad weight is reported by its row within the launch.
TEST_P(GpuQuantizeKind, RowRangesThroughOffsetPointers) {
  const QuantKind kind = GetParam();
  const bool int4 = kind == QuantKind::int4_group;
  for (const std::int64_t cols : {129, 1000, 3584}) {
    SCOPED_TRACE("cols " + std::to_string(cols));
    const std::int64_t rows = 37, r0 = 13, r1 = 30;
    const std::vector<std::uint16_t> data = make_data(Pattern::normal, kind, rows, cols, 5 + cols);
    const QuantizedMatrix cpu = cpu_quantize(kind, data, rows, cols);
    const std::int64_t rb = row_bytes_of(kind, cols), groups = kernels::quant_groups(cols);
    DevBuf<std::uint16_t> src, gs, gm, dst;
    DevBuf<std::uint8_t> q;
    DevBuf<float> rs;
    DevBuf<kernels::QuantStatus> st;
    src.alloc(data.size(), 0, 0);
    src.upload(data);
    q.alloc(static_cast<std::size_t>(rows * rb), 0, 0xA5);
    rs.alloc(static_cast<std::size_t>(rows), 0, 0xA5);
    gs.alloc(static_cast<std::size_t>(rows * groups), 0, 0xA5);
    gm.alloc(static_cast<std::size_t>(rows * groups), 0, 0xA5);
    st.alloc(1, 0, 0);
    const auto* s = reinterpret_cast<const __nv_bfloat16*>(src.ptr);
    using Range = std::pair<std::int64_t, std::int64_t>;
    for (const auto& [a, b] : {Range{0, r0}, Range{r0, r1}, Range{r1, rows}}) {
      kernels::QuantOut o;
      o.q = q.ptr + a * rb;
      o.row_scale = int4 ? nullptr : rs.ptr + a;
      o.group_scale = int4 ? gs.ptr + a * groups : nullptr;
      o.group_min = int4 ? gm.ptr + a * groups : nullptr;
      EXPECT_GT(kernels::launch_quantize(s + a * cols, b - a, cols, kind, o, st.ptr, nullptr), 0u);
    }
    ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
    GpuQuant gpu;
    gpu.q = q.download();
    gpu.row_scale = rs.download();
    gpu.gscale = gs.download();
    gpu.gmin = gm.download();
    expect_same(cpu, gpu, rows, data.data());

    // Dequantize the whole matrix, then rows [r0, r1) alone into a poisoned buffer.
    kernels::QuantMatrix qm{kind, q.ptr, rs.ptr, gs.ptr, gm.ptr};
    dst.alloc(data.size(), 0, 0xFF);
    ASSERT_GT(kernels::launch_dequantize(qm, rows, cols, reinterpret_cast<__nv_bfloat16*>(dst.ptr), nullptr), 0u);
    ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
    const std::vector<std::uint16_t> whole = dst.download();
    DevBuf<std::uint16_t> part;
    part.alloc(data.size(), 0, 0xFF);
    kernels::QuantMatrix sub{kind, q.ptr + r0 * rb, int4 ? nullptr : rs.ptr + r0, int4 ? gs.ptr + r0 * groups : nullptr,
                             int4 ? gm.ptr + r0 * groups : nullptr};
    ASSERT_GT(kernels::launch_dequantize(sub, r1 - r0, cols, reinterpret_cast<__nv_bfloat16*>(part.ptr + r0 * cols),
                                         nullptr),
              0u);
    ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
    const std::vector<std::uint16_t> got = part.download();
    for (std::int64_t i = 0; i < rows * cols; ++i) {
      const std::int64_t r = i / cols;
      const std::uint16_t want = r >= r0 && r < r1 ? whole[i] : std::uint16_t{0xFFFF};
      if (got[i] != want) {
        ADD_FAILURE() << "row-range dequantize differs at " << where(i, cols) << ": 0x" << std::hex << got[i]
                      << " vs 0x" << want;
        break;
      }
    }
    std::vector<float> row(static_cast<std::size_t>(cols));
    for (std::int64_t r = 0; r < rows && !HasFailure(); ++r) {
      dequantize_row(cpu, r, row.data());
      for (std::int64_t c = 0; c < cols; ++c)
        if (whole[r * cols + c] != bf16_rne(row[c])) {
          ADD_FAILURE() << "dequantize differs from the CPU at row " << r << ", col " << c;
          break;
        }
    }

    // A bad weight at absolute row r0 + 2 is row 2 of a launch starting at r0.
    std::vector<std::uint16_t> bad = data;
    bad[static_cast<std::size_t>((r0 + 2) * cols + 5)] = 0x7FC0u;
    src.upload(bad);
    kernels::QuantOut o;
    o.q = q.ptr + r0 * rb;
    o.row_scale = int4 ? nullptr : rs.ptr + r0;
    o.group_scale = int4 ? gs.ptr + r0 * groups : nullptr;
    o.group_min = int4 ? gm.ptr + r0 * groups : nullptr;
    kernels::launch_quantize(s + r0 * cols, r1 - r0, cols, kind, o, st.ptr, nullptr);
    ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
    const kernels::QuantStatus status = st.download()[0];
    EXPECT_EQ(status.non_finite, (2ull << 32) | 5ull);
    EXPECT_EQ(status.out_of_range, kernels::kQuantNoError);
  }
}

// Arbitrary q bytes, scales and minima (not only what quantize makes): E4M3 NaN codes, subnormal
// scales, int4 q * s + m with both roundings visible.
TEST_P(GpuQuantizeKind, DequantizeArbitraryBytes) {
  const QuantKind kind = GetParam();
  for (const std::int64_t cols : {999, 1000, 3584}) {
    const std::int64_t rows = 9;
    QuantizedMatrix m = make_quantized(format_of(kind), rows, cols);
    Rng rng(1234 + cols);
    for (std::size_t i = 0; i < m.q.size(); ++i)
      m.q[i] = kind == QuantKind::fp8_row && i < 256 ? static_cast<std::uint8_t>(i) : static_cast<std::uint8_t>(rng.bits());
    for (std::size_t r = 0; r < m.row_scale.size(); ++r) {
      // normal scales over 2^-126 .. 2^100, subnormal ones, and zero
      const std::uint32_t bits = r % 3 == 0   ? static_cast<std::uint32_t>(rng.bits() & 0x7FFFFFu)
                                 : r == 4     ? 0u
                                              : (static_cast<std::uint32_t>(1 + rng.below(226)) << 23) |
                                                static_cast<std::uint32_t>(rng.bits() & 0x7FFFFFu);
      m.row_scale[r] = std::bit_cast<float>(bits);
    }
    for (std::size_t i = 0; i < m.group_scale.size(); ++i) {
      m.group_scale[i] = static_cast<std::uint16_t>(i % 5 == 0 ? rng.below(0x80) : rng.below(0x7E00));
      m.group_min[i] = static_cast<std::uint16_t>(rng.below(0x7E00) | ((rng.bits() & 1) ? 0x8000u : 0u));
    }
    SCOPED_TRACE("cols " + std::to_string(cols));
    expect_dequantize(m, 0);
    expect_dequantize(m, 1);
  }
}

// NaN, infinities and weights beyond +-2^126: the smallest (row << 32 | col) of each kind; the CPU
// reports the first bad weight in row-major order, which is the smaller of the two.
TEST_P(GpuQuantizeKind, BadWeights) {
  const QuantKind kind = GetParam();
  struct Bad {
    std::int64_t row, col;
    std::uint16_t bits;
  };
  struct Scenario {
    const char* name;
    std::int64_t rows, cols;
    std::vector<Bad> bad;
    bool all_bad_from_row3 = false;
  };
  const std::vector<Scenario> scenarios = {
      {"mixed", 6, 300, {{4, 10, 0x7FC0u}, {4, 200, 0x7F80u}, {2, 250, 0x7F00u}, {5, 0, 0xFF00u}}},
      {"non_finite_only", 5, 1000, {{3, 0, 0x7F80u}, {0, 129, 0xFFC1u}, {0, 998, 0x7FC0u}, {0, 997, 0xFF80u}}},
      {"range_edge", 4, 3584, {{1, 0, 0xFE80u}, {1, 7, 0x7E80u}, {1, 900, 0x7E81u}, {2, 3, 0xFE81u}}},
      {"range_before_nan_same_row", 3, 129, {{1, 128, 0x7FFFu}, {1, 64, 0x7F7Fu}}},
      {"all_bad", 64, 1000, {}, true},
      {"one_col", 7, 1, {{6, 0, 0x7F80u}, {5, 0, 0xFEFFu}}},
  };
  for (const Scenario& sc : scenarios) {
    for (const std::size_t off : {std::size_t{0}, std::size_t{1}}) {
      SCOPED_TRACE(std::string(sc.name) + (off ? " misaligned" : ""));
      std::vector<std::uint16_t> data = make_data(Pattern::normal, kind, sc.rows, sc.cols, 99);
      unsigned long long want_nf = kernels::kQuantNoError, want_rg = kernels::kQuantNoError;
      auto put = [&](std::int64_t r, std::int64_t c, std::uint16_t bits) {
        data[static_cast<std::size_t>(r * sc.cols + c)] = bits;
        const unsigned long long key = (static_cast<unsigned long long>(r) << 32) | static_cast<unsigned long long>(c);
        const std::uint16_t a = bits & 0x7FFFu;
        if (a >= 0x7F80u) want_nf = std::min(want_nf, key);
        else if (a > 0x7E80u) want_rg = std::min(want_rg, key);
      };
      for (const Bad& b : sc.bad) put(b.row, b.col, b.bits);
      if (sc.all_bad_from_row3)
        for (std::int64_t r = 3; r < sc.rows; ++r)
          for (std::int64_t c = 0; c < sc.cols; ++c) put(r, c, (r + c) % 3 == 0 ? 0x7F01u : (r + c) % 3 == 1 ? 0xFF80u : 0x7F70u);
      Status cst = ok_status();
      const QuantizedMatrix cpu = cpu_quantize(kind, data, sc.rows, sc.cols, &cst);
      ASSERT_FALSE(cst.ok());
      const unsigned long long first = std::min(want_nf, want_rg);
      const std::int64_t fr = static_cast<std::int64_t>(first >> 32), fc = static_cast<std::int64_t>(first & 0xFFFFFFFFu);
      EXPECT_EQ(cst.error().code, first == want_nf ? "quant.non_finite" : "quant.range");
      EXPECT_NE(cst.error().message.find("row " + std::to_string(fr) + ", column " + std::to_string(fc)),
                std::string::npos)
          << cst.error().message;
      GpuQuant gpu;
      gpu_quantize(kind, data, sc.rows, sc.cols, off, 0xA5, gpu);
      EXPECT_EQ(gpu.status.non_finite, want_nf);
      EXPECT_EQ(gpu.status.out_of_range, want_rg);
      expect_same(cpu, gpu, fr, data.data());  // the rows the CPU quantized before its error
    }
  }
}

// Degenerate launches: no rows; rows of no columns (int8 / fp8 store s = 0 as the CPU does); bad args.
TEST_P(GpuQuantizeKind, EdgeArguments) {
  const QuantKind kind = GetParam();
  const bool int4 = kind == QuantKind::int4_group;
  DevBuf<kernels::QuantStatus> st;
  st.alloc(1, 0, 0);
  DevBuf<float> rs;
  rs.alloc(3, 0, 0xA5);
  DevBuf<std::uint16_t> gs;
  gs.alloc(1, 0, 0xA5);
  kernels::QuantOut o;
  o.row_scale = rs.ptr;
  o.group_scale = gs.ptr;
  o.group_min = gs.ptr;
  EXPECT_GT(kernels::launch_quantize(nullptr, 0, 100, kind, o, st.ptr, nullptr), 0u);
  EXPECT_GT(kernels::launch_quantize(nullptr, 3, 0, kind, o, st.ptr, nullptr), 0u);
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  EXPECT_EQ(st.download()[0].non_finite, kernels::kQuantNoError);
  EXPECT_EQ(st.download()[0].out_of_range, kernels::kQuantNoError);
  if (!int4) {
    for (float s : rs.download()) EXPECT_EQ(std::bit_cast<std::uint32_t>(s), 0u);
  }
  EXPECT_EQ(kernels::launch_quantize(nullptr, -1, 10, kind, o, st.ptr, nullptr), 0u);
  EXPECT_EQ(kernels::launch_quantize(nullptr, 1, 10, kind, o, nullptr, nullptr), 0u);
  EXPECT_EQ(kernels::launch_quantize(nullptr, 1, 10, kind, o, st.ptr, nullptr), 0u);  // no source
  kernels::QuantMatrix qm;
  qm.kind = kind;
  EXPECT_EQ(kernels::launch_dequantize(qm, 1, 10, nullptr, nullptr), 0u);
}

INSTANTIATE_TEST_SUITE_P(Kinds, GpuQuantizeKind,
                         ::testing::Values(QuantKind::int8_row, QuantKind::fp8_row, QuantKind::int4_group),
                         kind_param_name);

}  // namespace
}  // namespace cosmos
