// test_gpu_ops, part 1 of 3: the element-wise kernels against float64 CPU references: embedding,
// rms_norm, swiglu and rope_kv (M-RoPE and the paged KV cache). Conventions (poisoned outputs,
// guard elements, tolerances) and helpers: test_ops_common.h; matmuls: test_ops_matmul.cpp; test
// weights, conversions and PDL: test_ops_misc.cpp.
#include <algorithm>
#include <bit>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <limits>
#include <numeric>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include "test_ops_common.h"
#include "kernels/elem_type.cuh"
#include "kernels/embedding.cuh"
#include "kernels/rms_norm.cuh"
#include "kernels/rope_kv.cuh"
#include "kernels/swiglu.cuh"

namespace cosmos::gpu_ops_test {
namespace {

// ---------------------------------------------------------------------------------------------
// 1. embedding: out[i] = fp32(table[ids[i]]) bit for bit (the conversion is exact); rows with a
// negative id are left untouched (still poisoned).

struct EmbCase {
  int vocab, hidden, n;
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
  dt.alloc(table.size());
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
                                           EmbCase{1000, 3584, 33}, EmbCase{3, 257, 1}),
                         [](const ::testing::TestParamInfo<EmbCase>& i) {
                           return cat("v", i.param.vocab, "_h", i.param.hidden, "_n", i.param.n);
                         });

// ---------------------------------------------------------------------------------------------
// 2. rms_norm: y = w * (x * rsqrt(mean(x^2) + eps)), x with a row stride >= d (the gap holds NaN,
// so reading it fails), y dense.
//
// fp32 error: each thread sums ceil(d/256) squares (2 roundings each without FMA), 5 shuffle levels
// and 8 warp partials follow: the sum of squares (positive terms) is within (2 ceil(d/256) + 13) u
// relative; / d and + eps add 2u, rsqrtf (2 ulp = 4u) halves that and adds 4u, then x * inv and
// * w add 2u: (ceil(d/256) + 14) u |y| in all. Bound used: 2 (ceil(d/256) + 24) u |y|.

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
      {ElemType::f32, 9, 257, 4608},
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
// 3. swiglu: out[t, i] = silu(gu[t, i]) * gu[t, ff + i].
//
// fp32 error: expf within 2 ulp (4u relative), 1 + e adds u (and passes on at most the 4u of e),
// the division (IEEE) and the product u each: 7u |out| (g itself is exact). Bound used: 16u |out|.
// The first two elements of every case are +-90000 (gate 300, up +-300), beyond fp16's range: the
// fp16 output must saturate to exactly +-65504 (not inf).

struct SwiGluCase {
  ElemType type;
  int n, ff;
};

using GpuSwiGlu = GpuOpsP<SwiGluCase>;

TEST_P(GpuSwiGlu, MatchesFloat64Reference) {
  const SwiGluCase c = GetParam();
  Rng rng(static_cast<std::uint64_t>(c.n) * 7919 + static_cast<std::uint64_t>(c.ff) * 3 +
          static_cast<std::uint64_t>(c.type) * 1000003);
  const std::size_t w2 = 2 * static_cast<std::size_t>(c.ff);
  std::vector<float> gu(static_cast<std::size_t>(c.n) * w2);
  for (int t = 0; t < c.n; ++t)
    for (int i = 0; i < c.ff; ++i) {
      gu[t * w2 + i] = 8.0f * rng.next();       // gate: silu's whole shape, both tails
      gu[t * w2 + c.ff + i] = 4.0f * rng.next();  // up
    }
  gu[0] = 300.0f;
  gu[c.ff] = 300.0f;
  if (c.ff > 1) {
    gu[1] = 300.0f;
    gu[c.ff + 1] = -300.0f;
  }

  DevBuf<float> dgu;
  DevOut dout;
  dgu.alloc(gu.size());
  dgu.upload(gu);
  const std::size_t outs = static_cast<std::size_t>(c.n) * c.ff;
  dout.alloc(c.type, outs);
  const std::size_t bytes = kernels::launch_swiglu(dgu.ptr, dout.ptr(), c.type, c.n, c.ff, nullptr);
  ASSERT_EQ(cudaGetLastError(), cudaSuccess);
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  EXPECT_EQ(bytes, outs * (8 + kernels::elem_size(c.type)));
  const std::vector<unsigned char> out = dout.download();

  Checker ck{std::string("swiglu_") + type_name(c.type)};
  for (int t = 0; t < c.n; ++t)
    for (int i = 0; i < c.ff; ++i) {
      const double g = gu[t * w2 + i], u = gu[t * w2 + c.ff + i];
      const double ref = g / (1.0 + std::exp(-g)) * u;
      const Expect e = stored(c.type, ref, 16 * kU * std::fabs(ref));
      ck.near(load(out, c.type, static_cast<std::size_t>(t) * c.ff + i), e.want, e.tol, t, i);
    }
  if (c.type == ElemType::f16) {
    std::uint16_t b0, b1;
    std::memcpy(&b0, out.data(), 2);
    EXPECT_EQ(b0, 0x7BFF) << "+90000 must saturate to fp16 65504";
    if (c.ff > 1) {
      std::memcpy(&b1, out.data() + 2, 2);
      EXPECT_EQ(b1, 0xFBFF) << "-90000 must saturate to fp16 -65504";
    }
  }
  DevOut::expect_guard(out, c.type, outs, ck.what);
  ck.finish();
}

std::vector<SwiGluCase> swiglu_cases() {
  // (70, 18944): 1.3 M outputs, more than the 4096 x 256 threads launched: the grid-stride loop.
  const std::pair<int, int> shapes[] = {{1, 1}, {3, 77}, {2, 5}, {16, 3584}, {33, 1001}, {70, 18944}};
  std::vector<SwiGluCase> v;
  for (const ElemType t : {ElemType::f32, ElemType::bf16, ElemType::f16})
    for (const auto& [n, ff] : shapes) v.push_back({t, n, ff});
  return v;
}

INSTANTIATE_TEST_SUITE_P(Shapes, GpuSwiGlu, ::testing::ValuesIn(swiglu_cases()),
                         [](const ::testing::TestParamInfo<SwiGluCase>& i) {
                           return cat(type_name(i.param.type), "_n", i.param.n, "_ff", i.param.ff);
                         });

// ---------------------------------------------------------------------------------------------
// 4. rope_kv: q and k rotated (half-split pairs x[i], x[i + half]); frequency i (0 <= i < half,
// units of frequency pairs) takes its angle from position t when i < section0, h when i <
// section0 + section1, else w; v copied; k and v stored at cache slot slots[token].
//
// The angle f = float(pos) * inv_freq[i] is one fp32 product, rounded identically on the host, so
// the reference takes cos/sin in double of that same float f. fp32 error of y1 = x1 c - x2 s:
// cosf/sinf within 2 ulp (<= 2u absolute, |c|, |s| <= 1), the products and the difference u each:
// <= 5u (|x1| + |x2|), with x1, x2 the bias-added fp32 inputs (that sum is also done in fp32 on the
// host). Bound used: 16u (|x1| + |x2|). v is a copy (plus bias): exact, bit for bit.

struct RopeCase {
  ElemType q_type, kv_type;
  int heads, kv_heads, head_dim, section0, section1, n;
  bool bias;
};

using GpuRopeKv = GpuOpsP<RopeCase>;

TEST_P(GpuRopeKv, MatchesFloat64ReferenceAndWritesOnlyItsSlots) {
  const RopeCase c = GetParam();
  const int D = c.head_dim, half = D / 2, qd = c.heads * D, kvd = c.kv_heads * D, width = qd + 2 * kvd;
  const int block_size = 16;
  const int n_slots = ((3 * c.n + 16) + block_size - 1) / block_size * block_size;
  Rng rng(static_cast<std::uint64_t>(c.n) * 131 + static_cast<std::uint64_t>(D) * 17 + c.heads * 3 + c.section0 +
          (c.bias ? 5000 : 0) + static_cast<std::uint64_t>(c.q_type) * 100 + static_cast<std::uint64_t>(c.kv_type) * 1000);
  std::vector<float> qkv(static_cast<std::size_t>(c.n) * width), bias(width);
  for (auto& v : qkv) v = 3.0f * rng.next();
  for (auto& v : bias) v = 0.5f * rng.next();
  std::vector<std::int32_t> pos(3 * static_cast<std::size_t>(c.n));
  for (int t = 0; t < c.n; ++t) {
    // t != h != w; token 0 at the origin of time, the last one far out (large angles).
    pos[3 * t] = t == 0 ? 0 : (t == c.n - 1 ? 32000 : rng.below(4096));
    pos[3 * t + 1] = pos[3 * t] + 1 + rng.below(50);
    pos[3 * t + 2] = pos[3 * t] + 60 + rng.below(50);
  }
  std::vector<float> inv_freq(half);
  for (int j = 0; j < half; ++j)
    inv_freq[j] = 1.0f / std::pow(1e6f, static_cast<float>(2 * j) / static_cast<float>(D));
  // Each token goes to a distinct, shuffled slot; the other slots must stay poisoned.
  std::vector<std::int32_t> perm(n_slots);
  std::iota(perm.begin(), perm.end(), 0);
  std::mt19937 gen(static_cast<unsigned>(c.n * 7 + D));
  std::shuffle(perm.begin(), perm.end(), gen);
  const std::vector<std::int32_t> slots(perm.begin(), perm.begin() + c.n);

  DevBuf<float> dqkv, dbias, dinv;
  DevBuf<std::int32_t> dpos, dslots;
  DevOut dq, dk, dv;
  dqkv.alloc(qkv.size());
  dqkv.upload(qkv);
  dbias.alloc(bias.size());
  dbias.upload(bias);
  dinv.alloc(inv_freq.size());
  dinv.upload(inv_freq);
  dpos.alloc(pos.size());
  dpos.upload(pos);
  dslots.alloc(slots.size());
  dslots.upload(slots);
  dq.alloc(c.q_type, static_cast<std::size_t>(c.n) * qd);
  dk.alloc(c.kv_type, static_cast<std::size_t>(n_slots) * kvd);
  dv.alloc(c.kv_type, static_cast<std::size_t>(n_slots) * kvd);

  kernels::RopeKvArgs a;
  a.qkv = dqkv.ptr;
  a.bias = c.bias ? dbias.ptr : nullptr;
  a.positions = dpos.ptr;
  a.inv_freq = dinv.ptr;
  a.slots = dslots.ptr;
  a.q = dq.ptr();
  a.q_type = c.q_type;
  a.k_cache = dk.ptr();
  a.v_cache = dv.ptr();
  a.kv_type = c.kv_type;
  a.n = c.n;
  a.heads = c.heads;
  a.kv_heads = c.kv_heads;
  a.head_dim = D;
  a.section0 = c.section0;
  a.section1 = c.section1;
  EXPECT_GT(kernels::launch_rope_kv(a, nullptr), 0u);
  ASSERT_EQ(cudaGetLastError(), cudaSuccess);
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  const std::vector<unsigned char> q = dq.download(), k = dk.download(), v = dv.download();

  Checker cq{std::string("rope_q_") + type_name(c.q_type)}, ckk{std::string("rope_k_") + type_name(c.kv_type)},
      cv{std::string("rope_v_") + type_name(c.kv_type)};
  std::vector<bool> used(n_slots, false);
  for (int t = 0; t < c.n; ++t) {
    used[slots[t]] = true;
    const float* row = qkv.data() + static_cast<std::size_t>(t) * width;
    auto in = [&](int idx) { return c.bias ? row[idx] + bias[idx] : row[idx]; };  // fp32, as the kernel
    for (int head = 0; head < c.heads + c.kv_heads; ++head) {
      const bool is_q = head < c.heads;
      const int off = is_q ? head * D : qd + (head - c.heads) * D;
      for (int i = 0; i < half; ++i) {
        const int which = i < c.section0 ? 0 : (i < c.section0 + c.section1 ? 1 : 2);
        const float f = static_cast<float>(pos[3 * t + which]) * inv_freq[i];
        const double cs = std::cos(static_cast<double>(f)), sn = std::sin(static_cast<double>(f));
        const float x1 = in(off + i), x2 = in(off + i + half);
        const double y1 = x1 * cs - x2 * sn, y2 = x2 * cs + x1 * sn;
        const double e32 = 16 * kU * (std::fabs(x1) + std::fabs(x2));
        if (is_q) {
          const std::size_t o = static_cast<std::size_t>(t) * qd + head * D;
          const Expect e1 = stored(c.q_type, y1, e32), e2 = stored(c.q_type, y2, e32);
          cq.near(load(q, c.q_type, o + i), e1.want, e1.tol, t, head * D + i);
          cq.near(load(q, c.q_type, o + i + half), e2.want, e2.tol, t, head * D + i + half);
        } else {
          const std::size_t o = static_cast<std::size_t>(slots[t]) * kvd + (head - c.heads) * D;
          const Expect e1 = stored(c.kv_type, y1, e32), e2 = stored(c.kv_type, y2, e32);
          ckk.near(load(k, c.kv_type, o + i), e1.want, e1.tol, t, (head - c.heads) * D + i);
          ckk.near(load(k, c.kv_type, o + i + half), e2.want, e2.tol, t, (head - c.heads) * D + i + half);
        }
      }
    }
    for (int i = 0; i < kvd; ++i) {
      // The kernel's expression, evaluated in fp32 on the host: the same bits.
      const float want_exact = row[qd + kvd + i] + (c.bias ? bias[qd + kvd + i] : 0.0f);
      const std::size_t o = static_cast<std::size_t>(slots[t]) * kvd + i;
      if (c.kv_type == ElemType::f32) {
        float got;
        std::memcpy(&got, v.data() + 4 * o, 4);
        cv.near(got, want_exact, 0.0, t, i);
        if (std::bit_cast<std::uint32_t>(got) != std::bit_cast<std::uint32_t>(want_exact)) cv.fail("v bits differ");
      } else {
        std::uint16_t got;
        std::memcpy(&got, v.data() + 2 * o, 2);
        cv.near(bf16_to_float(got), bf16_to_float(float_to_bf16(want_exact)), 0.0, t, i);
      }
    }
  }
  // Slots no token maps to: untouched.
  for (int s = 0; s < n_slots; ++s) {
    if (used[s]) continue;
    for (int i = 0; i < kvd; ++i) {
      const std::size_t o = static_cast<std::size_t>(s) * kvd + i;
      if (!poisoned(k, c.kv_type, o)) {
        ckk.fail(cat("slot ", s, " (no token's) written"));
        break;
      }
      if (!poisoned(v, c.kv_type, o)) {
        cv.fail(cat("slot ", s, " (no token's) written"));
        break;
      }
    }
  }
  DevOut::expect_guard(q, c.q_type, static_cast<std::size_t>(c.n) * qd, cq.what);
  DevOut::expect_guard(k, c.kv_type, static_cast<std::size_t>(n_slots) * kvd, ckk.what);
  DevOut::expect_guard(v, c.kv_type, static_cast<std::size_t>(n_slots) * kvd, cv.what);
  cq.finish();
  ckk.finish();
  cv.finish();
}

std::vector<RopeCase> rope_cases() {
  std::vector<RopeCase> v;
  for (const ElemType qt : {ElemType::f32, ElemType::bf16, ElemType::f16})
    for (const ElemType kt : {ElemType::f32, ElemType::bf16})
      for (const bool bias : {false, true}) {
        v.push_back({qt, kt, 28, 4, 128, 16, 24, 9, bias});   // the 7B model's M-RoPE sections
        v.push_back({qt, kt, 28, 4, 128, 128, 0, 3, bias});   // plain RoPE: section0 = head_dim, all t
        v.push_back({qt, kt, 4, 2, 16, 2, 3, 5, bias});       // the tiny test model
      }
  v.push_back({ElemType::f32, ElemType::f32, 28, 4, 128, 16, 24, 1, true});
  v.push_back({ElemType::f32, ElemType::bf16, 28, 4, 128, 16, 24, 37, true});
  v.push_back({ElemType::bf16, ElemType::bf16, 3, 1, 10, 1, 2, 7, true});  // odd head counts, half = 5
  v.push_back({ElemType::f32, ElemType::f32, 12, 2, 64, 0, 32, 4, false});  // section0 = 0: no t at all
  return v;
}

INSTANTIATE_TEST_SUITE_P(Shapes, GpuRopeKv, ::testing::ValuesIn(rope_cases()),
                         [](const ::testing::TestParamInfo<RopeCase>& i) {
                           const RopeCase& c = i.param;
                           return cat(i.index, "_q", type_name(c.q_type), "_kv", type_name(c.kv_type), "_h", c.heads,
                                      "_kvh", c.kv_heads, "_d", c.head_dim, "_s", c.section0, "x", c.section1, "_n",
                                      c.n, c.bias ? "_bias" : "");
                         });

}  // namespace
}  // namespace cosmos::gpu_ops_test
