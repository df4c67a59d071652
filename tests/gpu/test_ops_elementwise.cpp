// test_gpu_ops, part 1 of 4: the element-wise kernels against float64 CPU references: embedding,
// rms_norm and swiglu (rope_kv, M-RoPE and the paged KV cache: test_ops_rope.cpp). Conventions
// (poisoned outputs, guard elements, tolerances) and helpers: test_ops_common.h; matmuls:
// test_ops_matmul.cpp; test weights, conversions and PDL: test_ops_misc.cpp.
#include <algorithm>
#include <bit>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <limits>
#include <string>
#include <utility>
#include <vector>

#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include "test_ops_common.h"
#include "kernels/elem_type.cuh"
#include "kernels/embedding.cuh"
#include "kernels/rms_norm.cuh"
#include "kernels/swiglu.cuh"

namespace cosmos::gpu_ops_test {
namespace {

// ---------------------------------------------------------------------------------------------
// 1. embedding: out[i] = fp32(table[ids[i]]) bit for bit (the conversion is exact); rows with a
// negative id are left untouched (still poisoned). Widths that are and are not multiples of 8 and a
// table that is not 16-byte aligned (the scalar kernel), and a row of 8,200 (the vector kernel's
// second batch of loads).

struct EmbCase {
  int vocab, hidden, n;
  int table_offset = 0;  // elements: a table not 16-byte aligned takes the scalar kernel
};

using GpuEmbedding = GpuOpsP<EmbCase>;

TEST_P(GpuEmbedding, GathersRowsExactlyAndSkipsNegativeIds) {
  const EmbCase c = GetParam();
  Rng rng(static_cast<std::uint64_t>(c.vocab) * 31 + static_cast<std::uint64_t>(c.hidden) * 7 + c.n);
  std::vector<std::uint16_t> table(static_cast<std::size_t>(c.vocab) * c.hidden);
  for (auto& v : table) v = rbf(4.0f * rng.next());
  std::vector<std::int32_t> ids(c.n);
  for (auto& id : ids) id = rng.below(c.vocab);
  ids[0] = 0;
  if (c.n > 1) ids[1] = -1;
  if (c.n > 2) ids[c.n - 1] = c.vocab - 1;
  if (c.n > 4) ids[3] = ids[2];  // a repeated id
  if (c.n > 5) ids[4] = -7;

  DevBuf<std::uint16_t> dt;
  DevBuf<std::int32_t> di;
  DevBuf<float> dout;
  dt.alloc(table.size(), static_cast<std::size_t>(c.table_offset));
  dt.upload(table);
  di.alloc(ids.size());
  di.upload(ids);
  dout.alloc(static_cast<std::size_t>(c.n) * c.hidden);
  const std::size_t bytes = kernels::launch_embedding(as_bf16(dt.ptr), di.ptr, dout.ptr, c.n, c.hidden, nullptr);
  ASSERT_EQ(cudaGetLastError(), cudaSuccess);
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  EXPECT_EQ(bytes, static_cast<std::size_t>(c.n) * (4 + static_cast<std::size_t>(c.hidden) * 6));
  const std::vector<float> out = dout.download();
  Checker ck{"embedding"};
  for (int t = 0; t < c.n; ++t) {
    for (int j = 0; j < c.hidden; ++j) {
      const std::uint32_t got = std::bit_cast<std::uint32_t>(out[static_cast<std::size_t>(t) * c.hidden + j]);
      if (ids[t] < 0) {
        if (got != 0xFFFFFFFFu) ck.fail(cat("row ", t, " (id ", ids[t], ") written"));
      } else {
        const float want = bf16_to_float(table[static_cast<std::size_t>(ids[t]) * c.hidden + j]);
        ++ck.checked;
        if (got != std::bit_cast<std::uint32_t>(want))  // exact conversion: bit for bit
          ck.fail(cat("[", t, ",", j, "]: got ", std::bit_cast<float>(got), ", want ", want));
      }
    }
  }
  for (int k = 0; k < kGuard; ++k)
    if (std::bit_cast<std::uint32_t>(out[static_cast<std::size_t>(c.n) * c.hidden + k]) != 0xFFFFFFFFu)
      ck.fail(cat("write past the end at +", k));
  ck.finish();
}

INSTANTIATE_TEST_SUITE_P(Shapes, GpuEmbedding,
                         ::testing::Values(EmbCase{5, 1, 3}, EmbCase{100, 64, 7}, EmbCase{37, 77, 6},
                                           EmbCase{1000, 3584, 33}, EmbCase{3, 257, 1}, EmbCase{50, 3584, 5, 1},
                                           EmbCase{20, 8200, 6}, EmbCase{20, 9000, 3}),
                         [](const ::testing::TestParamInfo<EmbCase>& i) {
                           return cat("v", i.param.vocab, "_h", i.param.hidden, "_n", i.param.n,
                                      i.param.table_offset ? cat("_off", i.param.table_offset) : std::string());
                         });

// ---------------------------------------------------------------------------------------------
// 2. rms_norm: y = w * (x * rsqrt(mean(x^2) + eps)), x with a row stride >= d (the gap holds NaN,
// so reading it fails), y dense.
//
// fp32 error: each thread sums ceil(d/256) squares (the kernel for d % 4 == 0, d <= 4,096: up to 16,
// at most ceil(d/256) + 3; 2 roundings each without FMA), 5 shuffle levels and 8 warp partials
// follow: the sum of squares (positive terms) is within (2 ceil(d/256) + 19) u relative; / d and
// + eps add 2u, rsqrtf (2 ulp = 4u) halves that and adds 4u, then x * inv and * w add 2u:
// (ceil(d/256) + 18) u |y| in all. Bound used: 2 (ceil(d/256) + 24) u |y|.

struct NormCase {
  ElemType type;
  int n, d, x_stride;
};

using GpuRmsNorm = GpuOpsP<NormCase>;

TEST_P(GpuRmsNorm, MatchesFloat64Reference) {
  const NormCase c = GetParam();
  const float eps = 1e-6f;
  Rng rng(static_cast<std::uint64_t>(c.n) * 1009 + static_cast<std::uint64_t>(c.d) * 13 + c.x_stride +
          static_cast<std::uint64_t>(c.type) * 100003);
  std::vector<float> x(static_cast<std::size_t>(c.n) * c.x_stride, std::numeric_limits<float>::quiet_NaN());
  for (int t = 0; t < c.n; ++t) {
    const float scale = t % 3 == 0 ? 40.0f : (t % 3 == 1 ? 0.01f : 2.0f);  // rows of different magnitude
    for (int i = 0; i < c.d; ++i) x[static_cast<std::size_t>(t) * c.x_stride + i] = scale * rng.next();
  }
  std::vector<std::uint16_t> w(c.d);
  for (auto& v : w) v = rbf(1.0f + 0.5f * rng.next());

  DevBuf<float> dx;
  DevBuf<std::uint16_t> dw;
  DevOut dy;
  dx.alloc(x.size());
  dx.upload(x);
  dw.alloc(w.size());
  dw.upload(w);
  dy.alloc(c.type, static_cast<std::size_t>(c.n) * c.d);
  const std::size_t bytes =
      kernels::launch_rms_norm(dx.ptr, c.x_stride, as_bf16(dw.ptr), dy.ptr(), c.type, c.n, c.d, eps, nullptr);
  ASSERT_EQ(cudaGetLastError(), cudaSuccess);
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  EXPECT_GT(bytes, 0u);
  const std::vector<unsigned char> y = dy.download();

  Checker ck{std::string("rms_norm_") + type_name(c.type)};
  const double rel = 2.0 * (std::ceil(c.d / 256.0) + 24) * kU;
  for (int t = 0; t < c.n; ++t) {
    const float* xr = x.data() + static_cast<std::size_t>(t) * c.x_stride;
    double ss = 0;
    for (int i = 0; i < c.d; ++i) ss += static_cast<double>(xr[i]) * xr[i];
    const double inv = 1.0 / std::sqrt(ss / c.d + static_cast<double>(eps));
    for (int i = 0; i < c.d; ++i) {
      const double ref = static_cast<double>(bf16_to_float(w[i])) * (xr[i] * inv);
      const Expect e = stored(c.type, ref, rel * std::fabs(ref));
      ck.near(load(y, c.type, static_cast<std::size_t>(t) * c.d + i), e.want, e.tol, t, i);
    }
  }
  DevOut::expect_guard(y, c.type, static_cast<std::size_t>(c.n) * c.d, ck.what);
  ck.finish();
}

std::vector<NormCase> norm_cases() {
  const NormCase shapes[] = {
      {ElemType::f32, 1, 3584, 3584},  {ElemType::f32, 5, 3584, 3600},   {ElemType::f32, 7, 77, 77},
      {ElemType::f32, 3, 77, 80},      {ElemType::f32, 2, 1, 1},         {ElemType::f32, 4, 1, 5},
      {ElemType::f32, 64, 1000, 1003}, {ElemType::f32, 3, 18944, 18944}, {ElemType::f32, 2, 255, 256},
      {ElemType::f32, 9, 257, 4608},   {ElemType::f32, 40, 128, 132},    {ElemType::f32, 6, 4096, 4096},
      {ElemType::f32, 5, 4100, 4100},  {ElemType::f32, 33, 3584, 3584},
  };
  std::vector<NormCase> v;
  for (const ElemType t : {ElemType::f32, ElemType::bf16, ElemType::f16})
    for (NormCase c : shapes) {
      c.type = t;
      v.push_back(c);
    }
  return v;
}

INSTANTIATE_TEST_SUITE_P(Shapes, GpuRmsNorm, ::testing::ValuesIn(norm_cases()),
                         [](const ::testing::TestParamInfo<NormCase>& i) {
                           return cat(type_name(i.param.type), "_n", i.param.n, "_d", i.param.d, "_stride",
                                      i.param.x_stride);
                         });

// ---------------------------------------------------------------------------------------------
// 3. swiglu: out[t, i] = silu(gu[t, i]) * gu[t, ff + i], gu of type `in` (f32, bf16 or f16), out of
// type `out`. ff % 8 == 0 on 16-byte aligned buffers takes the kernel's vector path (8 columns a
// thread), anything else the scalar path. Every case runs twice: on aligned buffers (checked
// against the reference) and with gu and out one element into their allocations (misaligned, so
// always the scalar path), which must give the same bits; the element before each shifted output
// and the guard after every output must stay poisoned.
//
// fp32 error: expf within 2 ulp (4u relative), 1 + e adds u (and passes on at most the 4u of e),
// the division (IEEE) and the product u each: 7u |out| (g itself is exact: the reference reads the
// same rounded inputs). Bound used: 16u |out|. The first two elements of every case are +-90000
// (gate 300, up +-300), beyond fp16's range: the fp16 output must saturate to exactly +-65504.

struct SwiGluCase {
  ElemType in, out;
  int n, ff;
};

using GpuSwiGlu = GpuOpsP<SwiGluCase>;

// Rounds v to type t (nearest even) and appends its bytes to raw; returns the value stored.
float append_as(ElemType t, float v, std::vector<unsigned char>& raw) {
  unsigned char b[4];
  float held = v;
  if (t == ElemType::f32) {
    std::memcpy(b, &v, 4);
  } else {
    const std::uint16_t h = t == ElemType::bf16 ? float_to_bf16(v) : float_to_f16(v);
    held = t == ElemType::bf16 ? bf16_to_float(h) : f16_to_float(h);
    std::memcpy(b, &h, 2);
  }
  raw.insert(raw.end(), b, b + kernels::elem_size(t));
  return held;
}

TEST_P(GpuSwiGlu, MatchesFloat64ReferenceOnBothPaths) {
  const SwiGluCase c = GetParam();
  Rng rng(static_cast<std::uint64_t>(c.n) * 7919 + static_cast<std::uint64_t>(c.ff) * 3 +
          static_cast<std::uint64_t>(c.out) * 1000003 + static_cast<std::uint64_t>(c.in) * 10007);
  const std::size_t w2 = 2 * static_cast<std::size_t>(c.ff);
  std::vector<float> gu(static_cast<std::size_t>(c.n) * w2);
  for (int t = 0; t < c.n; ++t)
    for (int i = 0; i < c.ff; ++i) {
      gu[t * w2 + i] = 8.0f * rng.next();         // gate: silu's whole shape, both tails
      gu[t * w2 + c.ff + i] = 4.0f * rng.next();  // up
    }
  gu[0] = 300.0f;
  gu[c.ff] = 300.0f;
  if (c.ff > 1) {
    gu[1] = 300.0f;
    gu[c.ff + 1] = -300.0f;
  }
  std::vector<unsigned char> raw;
  raw.reserve(gu.size() * kernels::elem_size(c.in));
  for (float& v : gu) v = append_as(c.in, v, raw);  // gu now holds what the kernel reads
  const std::size_t outs = static_cast<std::size_t>(c.n) * c.ff;
  const std::size_t in_size = kernels::elem_size(c.in), out_size = kernels::elem_size(c.out);

  auto run = [&](std::size_t offset) {
    DevBuf<unsigned char> dgu;
    DevOut dout;
    dgu.alloc(raw.size(), offset * in_size);
    dgu.upload(raw);
    dout.alloc(c.out, outs, offset);
    const std::size_t bytes = kernels::launch_swiglu(dgu.ptr, c.in, dout.ptr(), c.out, c.n, c.ff, nullptr);
    EXPECT_EQ(cudaGetLastError(), cudaSuccess);
    EXPECT_EQ(cudaDeviceSynchronize(), cudaSuccess);
    EXPECT_EQ(bytes, outs * (2 * in_size + out_size));
    const std::string what = cat("swiglu_", type_name(c.in), "_", type_name(c.out), "_offset", offset);
    dout.expect_head(what);
    std::vector<unsigned char> out = dout.download();
    DevOut::expect_guard(out, c.out, outs, what);
    return out;
  };
  const std::vector<unsigned char> out = run(0);

  Checker ck{cat("swiglu_", type_name(c.in), "_", type_name(c.out))};
  for (int t = 0; t < c.n; ++t)
    for (int i = 0; i < c.ff; ++i) {
      const double g = gu[t * w2 + i], u = gu[t * w2 + c.ff + i];
      const double ref = g / (1.0 + std::exp(-g)) * u;
      const Expect e = stored(c.out, ref, 16 * kU * std::fabs(ref));
      ck.near(load(out, c.out, static_cast<std::size_t>(t) * c.ff + i), e.want, e.tol, t, i);
    }
  if (c.out == ElemType::f16) {
    std::uint16_t b0, b1;
    std::memcpy(&b0, out.data(), 2);
    EXPECT_EQ(b0, 0x7BFF) << "+90000 must saturate to fp16 65504";
    if (c.ff > 1) {
      std::memcpy(&b1, out.data() + 2, 2);
      EXPECT_EQ(b1, 0xFBFF) << "-90000 must saturate to fp16 -65504";
    }
  }
  ck.finish();

  // The scalar path on misaligned buffers: the same bits.
  const std::vector<unsigned char> shifted = run(1);
  const std::size_t n_bytes = outs * out_size;
  const auto diff = std::mismatch(out.begin(), out.begin() + static_cast<std::ptrdiff_t>(n_bytes), shifted.begin());
  EXPECT_TRUE(diff.first == out.begin() + static_cast<std::ptrdiff_t>(n_bytes))
      << "misaligned (scalar) run differs first at element " << (diff.first - out.begin()) / out_size;
}

std::vector<SwiGluCase> swiglu_cases() {
  // ff % 8 != 0 (scalar path only), then ff % 8 == 0 (vector path): one vector of 8, 3 a row, a
  // partial second block (1032 / 8 = 129 threads), the 7B shapes. 65539 tokens: more than the 65535
  // grid rows, so the token loop wraps.
  const std::pair<int, int> shapes[] = {{1, 1},    {2, 5},     {3, 77},  {33, 1001},  {4, 12},    {1, 8},
                                        {5, 24},   {3, 1032},  {16, 3584}, {70, 18944}, {65539, 8}};
  std::vector<SwiGluCase> v;
  // The supported pairs (gu in fp32, or in the output's type)...
  const std::pair<ElemType, ElemType> types[] = {{ElemType::f32, ElemType::f32},   {ElemType::f32, ElemType::bf16},
                                                 {ElemType::f32, ElemType::f16},   {ElemType::bf16, ElemType::bf16},
                                                 {ElemType::f16, ElemType::f16}};
  for (const auto& [in, out] : types)
    for (const auto& [n, ff] : shapes) v.push_back({in, out, n, ff});
  // ...and the other pairs the launcher accepts, on a scalar and a vector shape.
  const std::pair<ElemType, ElemType> others[] = {{ElemType::bf16, ElemType::f32}, {ElemType::bf16, ElemType::f16},
                                                  {ElemType::f16, ElemType::f32}, {ElemType::f16, ElemType::bf16}};
  for (const auto& [in, out] : others)
    for (const auto& [n, ff] : {std::pair{3, 77}, std::pair{5, 24}}) v.push_back({in, out, n, ff});
  return v;
}

INSTANTIATE_TEST_SUITE_P(Shapes, GpuSwiGlu, ::testing::ValuesIn(swiglu_cases()),
                         [](const ::testing::TestParamInfo<SwiGluCase>& i) {
                           return cat(type_name(i.param.in), "_to_", type_name(i.param.out), "_n", i.param.n, "_ff",
                                      i.param.ff);
                         });

}  // namespace
}  // namespace cosmos::gpu_ops_test
