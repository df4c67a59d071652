// launch_quantize / launch_dequantize per format (kernels/quantize.cuh), beyond the value patterns of
// test_quantize.cpp: a 4608 x 3584 matrix (with a timing report), row ranges through offset
// pointers, dequantization of arbitrary bytes, NaN / infinity / out-of-range weights, and degenerate
// launches. Same binary (test_gpu_quantize), helpers in quantize_test_common.h.
#include <cstdint>
#include <cstdio>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "quantize_test_common.h"

namespace cosmos {
namespace {

using namespace quantize_test;

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
