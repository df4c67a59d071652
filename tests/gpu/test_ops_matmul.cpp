// test_gpu_ops, part 2 of 4: the matmuls against float64 CPU references: matmul_bf16 (the SIMT
// reference matmul) and GemmLt (cuBLASLt). Conventions (poisoned outputs, guard elements,
// tolerances) and helpers: test_ops_common.h.
#include <algorithm>
#include <bit>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include "test_ops_common.h"
#include "kernels/elem_type.cuh"
#include "kernels/gemm_lt.h"
#include "kernels/matmul_bf16.cuh"

namespace cosmos::gpu_ops_test {
namespace {

// ---------------------------------------------------------------------------------------------
// 5. matmul_bf16 (SIMT reference matmul): y = x W^T (+ bias) (+ residual, possibly aliasing y).
//
// fp32 error: each output is one thread's sequential sum over k (first-order bound cols u sum|w x|),
// then + bias and + residual (u each on the running value): <= (cols + 2) u sum|w x| +
// 2u (|bias| + |residual|). Bound used: twice that. Plus a relative L2 error over all outputs below
// 2e-5 (a sequential fp32 sum over 3584 random terms errs by about sqrt(K / 2) u = 2.5e-6 relative),
// which a single wrong or missing term in every output (about 1 / sqrt(cols) relative) would exceed.

struct MatmulCase {
  int n, rows, cols;
  bool bias, residual, alias;
};

using GpuMatmulBf16 = GpuOpsP<MatmulCase>;

TEST_P(GpuMatmulBf16, MatchesFloat64Reference) {
  const MatmulCase c = GetParam();
  Rng rng(static_cast<std::uint64_t>(c.n) * 100 + static_cast<std::uint64_t>(c.rows) * 10007 +
          static_cast<std::uint64_t>(c.cols) * 7 + (c.bias ? 1 : 0) + (c.residual ? 2 : 0) + (c.alias ? 4 : 0));
  const float ws = std::sqrt(3.0f / static_cast<float>(c.cols));
  std::vector<std::uint16_t> w(static_cast<std::size_t>(c.rows) * c.cols), b(c.rows);
  std::vector<float> x(static_cast<std::size_t>(c.n) * c.cols), res(static_cast<std::size_t>(c.n) * c.rows);
  for (auto& v : w) v = rbf(ws * rng.next());
  for (auto& v : b) v = rbf(rng.next());
  for (auto& v : x) v = 2.0f * rng.next();
  for (auto& v : res) v = rng.next();

  DevBuf<std::uint16_t> dw, db;
  DevBuf<float> dx, dres, dy;
  dw.alloc(w.size());
  dw.upload(w);
  db.alloc(b.size());
  db.upload(b);
  dx.alloc(x.size());
  dx.upload(x);
  dres.alloc(res.size());
  dres.upload(res);
  dy.alloc(res.size());
  if (c.alias) dy.upload(res);
  kernels::MatmulArgs a;
  a.x = dx.ptr;
  a.w = as_bf16(dw.ptr);
  a.bias = c.bias ? as_bf16(db.ptr) : nullptr;
  a.residual = c.residual ? (c.alias ? dy.ptr : dres.ptr) : nullptr;
  a.y = dy.ptr;
  a.n = c.n;
  a.rows = c.rows;
  a.cols = c.cols;
  EXPECT_GT(kernels::launch_matmul_bf16(a, nullptr), 0u);
  ASSERT_EQ(cudaGetLastError(), cudaSuccess);
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  const std::vector<float> y = dy.download();

  Checker ck{"matmul_bf16"};
  std::vector<float> wf(w.size());
  for (std::size_t i = 0; i < w.size(); ++i) wf[i] = bf16_to_float(w[i]);
  double num = 0, den = 0;
  for (int t = 0; t < c.n; ++t)
    for (int r = 0; r < c.rows; ++r) {
      const float* wr = wf.data() + static_cast<std::size_t>(r) * c.cols;
      const float* xr = x.data() + static_cast<std::size_t>(t) * c.cols;
      double acc = 0, mag = 0;
      for (int k = 0; k < c.cols; ++k) {
        const double p = static_cast<double>(wr[k]) * xr[k];
        acc += p;
        mag += std::fabs(p);
      }
      double extra = 0;
      if (c.bias) {
        acc += bf16_to_float(b[r]);
        extra += std::fabs(bf16_to_float(b[r]));
      }
      const std::size_t idx = static_cast<std::size_t>(t) * c.rows + r;
      if (c.residual) {
        acc += res[idx];
        extra += std::fabs(res[idx]);
      }
      const double tol = 2 * ((c.cols + 2) * kU * mag + 2 * kU * extra) + 1e-30;
      ck.near(y[idx], acc, tol, t, r);
      num += (y[idx] - acc) * (y[idx] - acc);
      den += acc * acc;
    }
  for (int k = 0; k < kGuard; ++k)
    if (std::bit_cast<std::uint32_t>(y[res.size() + k]) != 0xFFFFFFFFu)
      ck.fail(cat("write past the end at +", k));
  if (!std::isnan(num)) {
    EXPECT_LT(std::sqrt(num / std::max(den, 1e-30)), 2e-5);
  }
  ck.finish();
}

INSTANTIATE_TEST_SUITE_P(Shapes, GpuMatmulBf16,
                         ::testing::Values(MatmulCase{1, 1, 1, false, false, false},
                                           MatmulCase{1, 65, 33, true, false, false},
                                           MatmulCase{5, 7, 1, true, true, true},
                                           MatmulCase{16, 64, 32, false, false, false},
                                           MatmulCase{17, 130, 31, true, true, true},
                                           MatmulCase{33, 64, 1003, false, true, false},
                                           MatmulCase{3, 129, 77, true, true, false},
                                           MatmulCase{40, 300, 3584, true, true, true},
                                           MatmulCase{19, 4608, 3584, true, false, false}),
                         [](const ::testing::TestParamInfo<MatmulCase>& i) {
                           const MatmulCase& c = i.param;
                           return cat("n", c.n, "_", c.rows, "x", c.cols, c.bias ? "_bias" : "",
                                      c.residual ? (c.alias ? "_resalias" : "_res") : "");
                         });

// ---------------------------------------------------------------------------------------------
// 6. GemmLt (cuBLASLt): y[n, rows] = x[n, cols] W[rows, cols]^T (+ y when accumulate), bf16 or fp16
// inputs, fp32 accumulation and output.
//
// The products of two bf16 (8 + 8 significant bits) or two fp16 (11 + 11) values are exact in
// fp32, so the only error is the fp32 accumulation over cols terms in whatever order (and split-K)
// the algorithm uses; tensor cores may truncate instead of rounding when they add, so each addition
// costs at most one ulp (2u) of the running sum: |err| <= 2 cols u sum|w x| (first order), plus
// 2u (|y| + |residual|) for beta = 1. Bound used: twice that. Plus a relative L2 error over all
// outputs below 1e-4 (typical errors are near sqrt(cols) u), which a missing term or wrong element
// would exceed. Shapes: cols a multiple of 8 (16-byte aligned rows of W and x, the layouts the
// engine uses and for which cuBLASLt always has tensor-core algorithms), rows a multiple of 8 too
// (y's leading dimension 16-byte aligned); n free (1, 7, 128, 300). Cases with `transposed` store
// W as [cols, rows] (the fused decode MLP's down weights) and pass w_transposed.

struct GemmCase {
  ElemType type;
  int n, rows, cols;
  bool accumulate;
  bool transposed = false;
};

using GpuGemmLt = GpuOpsP<GemmCase>;

TEST_P(GpuGemmLt, MatchesFloat64Reference) {
  const GemmCase c = GetParam();
  Rng rng(static_cast<std::uint64_t>(c.n) * 999983 + static_cast<std::uint64_t>(c.rows) * 97 + c.cols +
          (c.accumulate ? 55 : 0) + static_cast<std::uint64_t>(c.type) * 12345);
  const bool f16 = c.type == ElemType::f16;
  auto round_in = [&](float v) { return f16 ? float_to_f16(v) : float_to_bf16(v); };
  auto value = [&](std::uint16_t bits) { return f16 ? f16_to_float(bits) : bf16_to_float(bits); };
  const float ws = std::sqrt(3.0f / static_cast<float>(c.cols));
  std::vector<std::uint16_t> w(static_cast<std::size_t>(c.rows) * c.cols), x(static_cast<std::size_t>(c.n) * c.cols);
  std::vector<float> res(static_cast<std::size_t>(c.n) * c.rows);
  for (auto& v : w) v = round_in(ws * rng.next());
  for (auto& v : x) v = round_in(2.0f * rng.next());
  for (auto& v : res) v = rng.next();

  DevBuf<std::uint16_t> dw, dx;
  DevBuf<float> dy;
  DevBuf<unsigned char> workspace;
  dw.alloc(w.size());
  if (c.transposed) {
    std::vector<std::uint16_t> wt(w.size());
    for (int r = 0; r < c.rows; ++r)
      for (int k = 0; k < c.cols; ++k)
        wt[static_cast<std::size_t>(k) * c.rows + r] = w[static_cast<std::size_t>(r) * c.cols + k];
    dw.upload(wt);
  } else {
    dw.upload(w);
  }
  dx.alloc(x.size());
  dx.upload(x);
  dy.alloc(res.size());
  if (c.accumulate) dy.upload(res);
  const std::size_t ws_bytes = std::size_t{32} << 20;
  workspace.alloc(ws_bytes, 0, 0);
  cudaStream_t stream;
  ASSERT_EQ(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking), cudaSuccess);
  {
    kernels::GemmLt gemm;
    const std::string init_err = gemm.init(workspace.ptr, ws_bytes);
    ASSERT_EQ(init_err, "");
    const std::string err = gemm.run(dw.ptr, dx.ptr, dy.ptr, c.n, c.rows, c.cols, c.accumulate, c.type, stream,
                                     ElemType::f32, c.transposed);
    ASSERT_EQ(err, "");
    ASSERT_EQ(cudaGetLastError(), cudaSuccess);
    ASSERT_EQ(cudaStreamSynchronize(stream), cudaSuccess);
  }
  cudaStreamDestroy(stream);
  const std::vector<float> y = dy.download();

  Checker ck{std::string("gemm_lt_") + type_name(c.type)};
  std::vector<float> wf(w.size()), xf(x.size());
  for (std::size_t i = 0; i < w.size(); ++i) wf[i] = value(w[i]);
  for (std::size_t i = 0; i < x.size(); ++i) xf[i] = value(x[i]);
  double num = 0, den = 0;
  for (int t = 0; t < c.n; ++t) {
    const float* xr = xf.data() + static_cast<std::size_t>(t) * c.cols;
    for (int r = 0; r < c.rows; ++r) {
      const float* wr = wf.data() + static_cast<std::size_t>(r) * c.cols;
      double acc = 0, mag = 0;
      for (int k = 0; k < c.cols; ++k) {
        const double p = static_cast<double>(wr[k]) * xr[k];
        acc += p;
        mag += std::fabs(p);
      }
      const std::size_t idx = static_cast<std::size_t>(t) * c.rows + r;
      double tol = 2 * 2 * c.cols * kU * mag;
      if (c.accumulate) {
        acc += res[idx];
        tol += 2 * 2 * kU * (std::fabs(acc) + std::fabs(res[idx]));
      }
      ck.near(y[idx], acc, tol + 1e-30, t, r);
      num += (y[idx] - acc) * (y[idx] - acc);
      den += acc * acc;
    }
  }
  for (int k = 0; k < kGuard; ++k)
    if (std::bit_cast<std::uint32_t>(y[res.size() + k]) != 0xFFFFFFFFu)
      ck.fail(cat("write past the end at +", k));
  if (!std::isnan(num)) {
    EXPECT_LT(std::sqrt(num / std::max(den, 1e-30)), 1e-4);
  }
  ck.finish();
}

std::vector<GemmCase> gemm_cases() {
  std::vector<GemmCase> v;
  for (const ElemType t : {ElemType::bf16, ElemType::f16})
    for (const int n : {1, 7, 128, 300})
      for (const auto& [rows, cols] : {std::pair{24, 72}, std::pair{136, 40}, std::pair{8, 8}})
        for (const bool acc : {false, true}) v.push_back({t, n, rows, cols, acc});
  // The 7B q/k/v shape (rows 4608 = 3584 + 2 * 512, cols 3584).
  v.push_back({ElemType::bf16, 7, 4608, 3584, false});
  v.push_back({ElemType::bf16, 128, 4608, 3584, true});
  v.push_back({ElemType::f16, 1, 4608, 3584, true});
  v.push_back({ElemType::f16, 300, 200, 3584, false});
  // W stored transposed: small shapes, and the 7B down projection (3584 x 18944) with the residual.
  for (const ElemType t : {ElemType::bf16, ElemType::f16})
    for (const int n : {1, 7, 300})
      for (const auto& [rows, cols] : {std::pair{24, 72}, std::pair{136, 40}})
        for (const bool acc : {false, true}) v.push_back({t, n, rows, cols, acc, true});
  v.push_back({ElemType::bf16, 7, 3584, 18944, true, true});
  v.push_back({ElemType::f16, 3, 3584, 18944, true, true});
  return v;
}

INSTANTIATE_TEST_SUITE_P(Shapes, GpuGemmLt, ::testing::ValuesIn(gemm_cases()),
                         [](const ::testing::TestParamInfo<GemmCase>& i) {
                           const GemmCase& c = i.param;
                           return cat(type_name(c.type), "_n", c.n, "_", c.rows, "x", c.cols, c.accumulate ? "_acc" : "",
                                      c.transposed ? "_wt" : "");
                         });

}  // namespace
}  // namespace cosmos::gpu_ops_test
