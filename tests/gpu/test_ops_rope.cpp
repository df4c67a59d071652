// test_gpu_ops, part 4 of 4 (split from part 1): rope_kv, M-RoPE on q and k of the
// fused q/k/v product, k and v written into the paged KV cache, against a float64 CPU reference.
// Conventions (poisoned outputs, guard elements, tolerances) and helpers: test_ops_common.h.
//
// q and k rotated (half-split pairs x[i], x[i + half]); frequency i (0 <= i < half, units of
// frequency pairs) takes its angle from position t when i < section0, h when i < section0 +
// section1, else w; v copied; k and v stored at cache slot slots[token] (distinct, shuffled slots:
// the others must stay poisoned).
//
// The kernel has a vector path (head_dim % 8 == 0 and 16-byte aligned qkv, bias, q and caches) and
// a scalar path (anything else; its (cos, sin) table also moves out of shared memory above
// head_dim 12288). Every case runs twice: on aligned buffers (checked against the reference) and
// with qkv, bias, q and both caches one element into their allocations (misaligned: the scalar
// path), which must give the same bits; the element before each shifted output stays poisoned.
//
// The angle f = float(pos) * inv_freq[i] is one fp32 product, rounded identically on the host, so
// the reference takes cos/sin in double of that same float f. fp32 error of y1 = x1 c - x2 s:
// cosf/sinf within 2 ulp (<= 2u absolute, |c|, |s| <= 1), the products and the difference u each:
// <= 5u (|x1| + |x2|), with x1, x2 the bias-added fp32 inputs (that sum is also done in fp32 on the
// host). Bound used: 16u (|x1| + |x2|). v is a copy (plus bias): exact, bit for bit.
#include <algorithm>
#include <bit>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include "test_ops_common.h"
#include "kernels/elem_type.cuh"
#include "kernels/rope_kv.cuh"

namespace cosmos::gpu_ops_test {
namespace {

struct RopeCase {
  ElemType q_type, kv_type;
  int heads, kv_heads, head_dim, section0, section1, n;
  bool bias;
};

using GpuRopeKv = GpuOpsP<RopeCase>;

// What one launch wrote: q [n * qd] and the caches [n_slots * kvd] (plus their guards), raw.
struct RopeOut {
  std::vector<unsigned char> q, k, v;
};

TEST_P(GpuRopeKv, MatchesFloat64ReferenceOnBothPathsAndWritesOnlyItsSlots) {
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

  DevBuf<float> dinv;
  DevBuf<std::int32_t> dpos, dslots;
  dinv.alloc(inv_freq.size());
  dinv.upload(inv_freq);
  dpos.alloc(pos.size());
  dpos.upload(pos);
  dslots.alloc(slots.size());
  dslots.upload(slots);
  const std::size_t qn = static_cast<std::size_t>(c.n) * qd, cn = static_cast<std::size_t>(n_slots) * kvd;
  // One launch with qkv, bias, q and the caches `offset` elements into their allocations.
  auto run = [&](std::size_t offset) {
    DevBuf<float> dqkv, dbias;
    DevOut dq, dk, dv;
    dqkv.alloc(qkv.size(), offset);
    dqkv.upload(qkv);
    dbias.alloc(bias.size(), offset);
    dbias.upload(bias);
    dq.alloc(c.q_type, qn, offset);
    dk.alloc(c.kv_type, cn, offset);
    dv.alloc(c.kv_type, cn, offset);
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
    const std::size_t bytes = kernels::launch_rope_kv(a, nullptr);
    EXPECT_EQ(bytes, static_cast<std::size_t>(c.n) *
                         (static_cast<std::size_t>(width) * 4 + qd * kernels::elem_size(c.q_type) +
                          2 * static_cast<std::size_t>(kvd) * kernels::elem_size(c.kv_type) + 16));
    EXPECT_EQ(cudaGetLastError(), cudaSuccess);
    EXPECT_EQ(cudaDeviceSynchronize(), cudaSuccess);
    const std::string at = cat("_offset", offset);
    dq.expect_head("rope_q" + at);
    dk.expect_head("rope_k" + at);
    dv.expect_head("rope_v" + at);
    RopeOut r{dq.download(), dk.download(), dv.download()};
    DevOut::expect_guard(r.q, c.q_type, qn, "rope_q" + at);
    DevOut::expect_guard(r.k, c.kv_type, cn, "rope_k" + at);
    DevOut::expect_guard(r.v, c.kv_type, cn, "rope_v" + at);
    return r;
  };
  const RopeOut out = run(0);
  const std::vector<unsigned char>& q = out.q;
  const std::vector<unsigned char>& k = out.k;
  const std::vector<unsigned char>& v = out.v;

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
  cq.finish();
  ckk.finish();
  cv.finish();

  // The scalar path on misaligned buffers: the same bits everywhere (the unwritten slots included).
  const RopeOut shifted = run(1);
  auto same = [](const std::vector<unsigned char>& a, const std::vector<unsigned char>& b, std::size_t count,
                 ElemType t, const char* what) {
    const std::size_t sz = kernels::elem_size(t);
    const auto d = std::mismatch(a.begin(), a.begin() + static_cast<std::ptrdiff_t>(count * sz), b.begin());
    EXPECT_TRUE(d.first == a.begin() + static_cast<std::ptrdiff_t>(count * sz))
        << what << ": misaligned (scalar) run differs first at element " << (d.first - a.begin()) / sz;
  };
  same(out.q, shifted.q, qn, c.q_type, "q");
  same(out.k, shifted.k, cn, c.kv_type, "k cache");
  same(out.v, shifted.v, cn, c.kv_type, "v cache");
}

std::vector<RopeCase> rope_cases() {
  std::vector<RopeCase> v;
  for (const ElemType qt : {ElemType::f32, ElemType::bf16, ElemType::f16})
    for (const ElemType kt : {ElemType::f32, ElemType::bf16})
      for (const bool bias : {false, true}) {
        v.push_back({qt, kt, 28, 4, 128, 16, 24, 9, bias});   // the 7B model's M-RoPE sections
        v.push_back({qt, kt, 28, 4, 128, 128, 0, 3, bias});   // plain RoPE: section0 = head_dim, all t
        v.push_back({qt, kt, 4, 2, 16, 2, 3, 5, bias});       // the tiny test model
        v.push_back({qt, kt, 3, 1, 10, 1, 2, 3, bias});       // odd head counts, half = 5: scalar path only
      }
  // The 7B shape (28 q heads, 4 kv heads, head_dim 128) for the q and cache types the engine uses:
  // one token (a decode step), 3, and 67 (a prefill chunk).
  for (const ElemType qt : {ElemType::f32, ElemType::bf16})
    for (const ElemType kt : {ElemType::f32, ElemType::bf16})
      for (const bool bias : {false, true})
        for (const int n : {1, 3, 67}) v.push_back({qt, kt, 28, 4, 128, 16, 24, n, bias});
  v.push_back({ElemType::f32, ElemType::bf16, 28, 4, 128, 16, 24, 37, true});
  v.push_back({ElemType::bf16, ElemType::bf16, 3, 1, 10, 1, 2, 7, true});   // odd head counts, half = 5
  v.push_back({ElemType::bf16, ElemType::f32, 3, 1, 10, 1, 2, 67, false});
  v.push_back({ElemType::f32, ElemType::f32, 12, 2, 64, 0, 32, 4, false});  // section0 = 0: no t at all
  v.push_back({ElemType::f32, ElemType::bf16, 5, 3, 24, 4, 4, 67, true});   // half = 12: 3 items a head
  v.push_back({ElemType::f16, ElemType::f32, 7, 1, 12, 2, 2, 3, true});     // head_dim % 8 == 4: scalar path
  v.push_back({ElemType::f32, ElemType::f32, 1, 1, 12288, 1000, 2000, 2, true});   // 48 KB (cos, sin) table
  v.push_back({ElemType::bf16, ElemType::bf16, 2, 1, 12290, 3000, 0, 2, false});  // no table: sincosf per pair
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
