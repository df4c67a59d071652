// decode_attention (flash-decoding) against a float64 CPU reference and the reference kernel, on
// the 7B model's attention shape (28 query heads, 4 KV heads, head_dim 128) over a shuffled paged
// cache in fp32 and in bf16 (the reference then reads the same rounded values), for context lengths
// that fit one split (<= 256 keys), end inside a warp's 32 keys, span every split and take two
// rounds per split (8,193); output poisoned with NaN first. Each case launches twice: the second
// launch checks the split counters were left at zero, a third writes bf16 (the fp32 output rounded).
// The fused RoPE path is checked against
// launch_rope_kv followed by the unfused kernel: same output, same cache rows written. Both
// kernels: the CUDA-core one (fp32 and bf16 cache) and the tensor-core one (bf16 cache).
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include "kernels/decode_attention.cuh"
#include "cuda_upload.h"
#include "kernels/device_info.cuh"

#include <cuda_bf16.h>

namespace cosmos {
namespace {

// (context lengths, bf16 cache, tensor-core kernel, head_dim): the tensor-core kernel only with the
// bf16 cache.
using Param = std::tuple<std::vector<int>, bool, bool, int>;

std::vector<Param> params(const std::vector<std::vector<int>>& lens, int head_dim = 128) {
  std::vector<Param> v;
  for (const auto& l : lens) {
    v.emplace_back(l, false, false, head_dim);
    v.emplace_back(l, true, false, head_dim);
    v.emplace_back(l, true, true, head_dim);
  }
  return v;
}

// The 7B shape's cases (head_dim 128) and a few with head_dim 64, which both kernels also support.
std::vector<Param> operator+(std::vector<Param> a, const std::vector<Param>& b) {
  a.insert(a.end(), b.begin(), b.end());
  return a;
}

// A continuous-batching step: n sequences of lengths spread over 1..max_len, one new token each
// (more than 4 tokens: fewer splits per token, decode_attention_splits).
std::vector<int> batch_lens(int n, int max_len) {
  std::vector<int> v(n);
  for (int i = 0; i < n; ++i) v[i] = 1 + (i * 7919 + 13) % max_len;
  return v;
}

// Cache slots per token: 8,448 for the few-token cases (as they always had); a batch's cases only
// what their longest context needs (n x 8,448 slots of random K/V made a batch of 200 take
// minutes to fill on the host).
int cache_len(const std::vector<int>& lens, int bs) {
  if (lens.size() <= 4) return 8448;
  const int longest = *std::max_element(lens.begin(), lens.end());
  return (longest + bs - 1) / bs * bs;
}

std::string param_name(const ::testing::TestParamInfo<Param>& info) {
  std::string s;
  const auto& lens = std::get<0>(info.param);
  if (lens.size() > 4)
    s = "batch" + std::to_string(lens.size()) + "_upto" + std::to_string(*std::max_element(lens.begin(), lens.end())) + "_";
  else
    for (int len : lens) s += std::to_string(len) + "_";
  s += std::get<1>(info.param) ? "bf16" : "fp32";
  if (std::get<2>(info.param)) s += "_tensorcores";
  if (std::get<3>(info.param) != 128) s += "_d" + std::to_string(std::get<3>(info.param));
  return s;
}

// The kernel of a test case; the tensor-core kernel (the default) again when the case ends.
struct KernelChoice {
  explicit KernelChoice(const Param& p) { kernels::set_decode_attention_tensor_cores(std::get<2>(p)); }
  ~KernelChoice() { kernels::set_decode_attention_tensor_cores(true); }
};

class GpuDecodeAttention : public ::testing::TestWithParam<Param> {
 protected:
  void SetUp() override {
    const auto q = kernels::query_gpus();
    if (q.gpus.empty()) GTEST_SKIP() << q.why_none;
  }
};

using testing::upload;

TEST_P(GpuDecodeAttention, MatchesFloat64ReferenceAndTheReferenceKernel) {
  const std::vector<int> lens = std::get<0>(GetParam());
  const bool kv_bf16 = std::get<1>(GetParam()), tc = std::get<2>(GetParam());
  KernelChoice choice(GetParam());
  const int heads = 28, kv_heads = 4, D = std::get<3>(GetParam()), bs = 16, n = static_cast<int>(lens.size());
  const int max_ctx = cache_len(lens, bs), blocks = max_ctx / bs * n;
  std::mt19937 rng(static_cast<unsigned>(lens.back()));
  std::normal_distribution<float> normal;
  std::vector<float> q(static_cast<std::size_t>(n) * heads * D), k(static_cast<std::size_t>(blocks) * bs * kv_heads * D),
      v(k.size());
  for (auto* x : {&q, &k, &v})
    for (auto& e : *x) e = normal(rng);
  // bf16 cache: round k and v once; the reference below reads the rounded values.
  std::vector<__nv_bfloat16> kb(k.size()), vb(v.size());
  if (kv_bf16)
    for (std::size_t i = 0; i < k.size(); ++i) {
      kb[i] = __float2bfloat16(k[i]);
      vb[i] = __float2bfloat16(v[i]);
      k[i] = __bfloat162float(kb[i]);
      v[i] = __bfloat162float(vb[i]);
    }
  // Each token gets its own shuffled block table.
  std::vector<int> perm(blocks);
  std::iota(perm.begin(), perm.end(), 0);
  std::shuffle(perm.begin(), perm.end(), rng);
  std::vector<std::int32_t> tables(perm.begin(), perm.end()), offsets(n), ctx(lens.begin(), lens.end());
  for (int t = 0; t < n; ++t) offsets[t] = t * (max_ctx / bs);
  const float scale = 1.0f / std::sqrt(static_cast<float>(D));

  auto* dq = upload(q);
  void* dk = kv_bf16 ? static_cast<void*>(upload(kb)) : static_cast<void*>(upload(k));
  void* dv = kv_bf16 ? static_cast<void*>(upload(vb)) : static_cast<void*>(upload(v));
  auto *dtab = upload(tables), *doff = upload(offsets), *dctx = upload(ctx);
  float *dout = nullptr, *dref = nullptr;
  void* scratch = nullptr;
  ASSERT_EQ(cudaMalloc(&dout, q.size() * 4), cudaSuccess);
  ASSERT_EQ(cudaMalloc(&dref, q.size() * 4), cudaSuccess);
  const std::size_t scratch_bytes = kernels::decode_attention_scratch_bytes(n, heads, kv_heads, D);
  ASSERT_EQ(cudaMalloc(&scratch, scratch_bytes), cudaSuccess);
  // Only the counters' region (first, the same for every batch size) starts at zero; the rest holds
  // what a launch of another batch size could have left there (partials, here 0x7F7F7F7F).
  const std::size_t counters = static_cast<std::size_t>(kernels::kDecodeAttentionMaxTokens) * kv_heads * sizeof(int);
  ASSERT_EQ(cudaMemset(scratch, 0x7F, scratch_bytes), cudaSuccess);
  ASSERT_EQ(cudaMemset(scratch, 0, counters), cudaSuccess);
  ASSERT_EQ(cudaMemset(dout, 0xFF, q.size() * 4), cudaSuccess);
  kernels::AttentionArgs a;
  a.q = dq;
  a.k_cache = dk;
  a.v_cache = dv;
  a.kv_type = kv_bf16 ? kernels::ElemType::bf16 : kernels::ElemType::f32;
  a.block_tables = dtab;
  a.table_offset = doff;
  a.ctx_len = dctx;
  a.out = dout;
  a.n = n;
  a.heads = heads;
  a.kv_heads = kv_heads;
  a.head_dim = D;
  a.block_size = bs;
  a.max_ctx = max_ctx;
  a.scale = scale;
  ASSERT_TRUE(kernels::decode_attention_supports(heads, kv_heads, D));
  kernels::launch_decode_attention(a, scratch, nullptr);
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  ASSERT_EQ(cudaMemset(dout, 0xFF, q.size() * 4), cudaSuccess);
  kernels::launch_decode_attention(a, scratch, nullptr);  // again: counters must be back at zero
  // Once more with a bf16 output (the quantized one-token steps' o input, CudaBackend::att16_).
  __nv_bfloat16* dout16 = nullptr;
  ASSERT_EQ(cudaMalloc(&dout16, q.size() * 2), cudaSuccess);
  ASSERT_EQ(cudaMemset(dout16, 0xFF, q.size() * 2), cudaSuccess);  // NaN
  a.out = dout16;
  a.out_type = kernels::ElemType::bf16;
  kernels::launch_decode_attention(a, scratch, nullptr);
  a.out_type = kernels::ElemType::f32;
  a.out = dref;
  a.max_ctx = *std::max_element(lens.begin(), lens.end());
  kernels::launch_attention(a, nullptr);
  ASSERT_EQ(cudaGetLastError(), cudaSuccess);
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  std::vector<float> out(q.size()), ref_kernel(q.size());
  ASSERT_EQ(cudaMemcpy(out.data(), dout, q.size() * 4, cudaMemcpyDeviceToHost), cudaSuccess);
  ASSERT_EQ(cudaMemcpy(ref_kernel.data(), dref, q.size() * 4, cudaMemcpyDeviceToHost), cudaSuccess);
  {
    // The bf16 output is the fp32 one rounded: within 2^-9 of it relative (2^-8 allowed).
    std::vector<__nv_bfloat16> out16(q.size());
    ASSERT_EQ(cudaMemcpy(out16.data(), dout16, q.size() * 2, cudaMemcpyDeviceToHost), cudaSuccess);
    int bad = 0;
    for (std::size_t i = 0; i < q.size(); ++i) {
      const float o16 = __bfloat162float(out16[i]);
      ASSERT_FALSE(std::isnan(o16)) << "bf16 output " << i << " not written";
      if (std::fabs(o16 - out[i]) > 0x1p-8f * std::fabs(out[i]) && ++bad <= 5)
        ADD_FAILURE() << "bf16 output " << i << ": " << o16 << " against " << out[i];
    }
    cudaFree(dout16);
  }

  kernels::set_decode_attention_tensor_cores(true);
  // The tensor-core kernel multiplies q in bf16 (as the model's bf16 q/k/v product gives it): the
  // reference then uses the same rounded q.
  if (tc)
    for (auto& e : q) e = __bfloat162float(__float2bfloat16(e));
  double num = 0, den = 0, num_k = 0;
  for (int t = 0; t < n; ++t) {
    for (int h = 0; h < heads; ++h) {
      const int kvh = h / (heads / kv_heads);
      std::vector<double> s(lens[t]);
      double mx = -1e300;
      for (int j = 0; j < lens[t]; ++j) {
        const std::size_t slot = static_cast<std::size_t>(tables[offsets[t] + j / bs]) * bs + j % bs;
        double dot = 0;
        for (int d = 0; d < D; ++d)
          dot += static_cast<double>(q[(static_cast<std::size_t>(t) * heads + h) * D + d]) * k[(slot * kv_heads + kvh) * D + d];
        s[j] = dot * scale;
        mx = std::max(mx, s[j]);
      }
      double sum = 0;
      for (auto& e : s) sum += (e = std::exp(e - mx));
      for (int d = 0; d < D; ++d) {
        double r = 0;
        for (int j = 0; j < lens[t]; ++j) {
          const std::size_t slot = static_cast<std::size_t>(tables[offsets[t] + j / bs]) * bs + j % bs;
          r += s[j] / sum * v[(slot * kv_heads + kvh) * D + d];
        }
        const std::size_t i = (static_cast<std::size_t>(t) * heads + h) * D + d;
        ASSERT_FALSE(std::isnan(out[i])) << "token " << t << " head " << h << " dim " << d << " not written";
        num += (out[i] - r) * (out[i] - r);
        num_k += (out[i] - ref_kernel[i]) * (out[i] - ref_kernel[i]);
        den += r * r;
      }
    }
  }
  if (tc) {
    // The probabilities enter P V as bf16: each carries a relative rounding error of at most 2^-9,
    // which bounds the output's relative error (fp32 accumulation adds ~1e-6). The reference
    // kernel used the unrounded q, so it is not compared here.
    EXPECT_LT(std::sqrt(num / den), 1.0 / 512);
  } else {
    EXPECT_LT(std::sqrt(num / den), 1e-5);  // fp32 arithmetic, reordered sums
    EXPECT_LT(std::sqrt(num_k / den), 1e-5);
  }
  std::printf("[ measured ] relative L2 error against float64: %.3g\n", std::sqrt(num / den));
  for (void* p : {static_cast<void*>(dq), dk, dv, static_cast<void*>(dtab),
                  static_cast<void*>(doff), static_cast<void*>(dctx), static_cast<void*>(dout),
                  static_cast<void*>(dref), static_cast<void*>(scratch)})
    cudaFree(p);
}

INSTANTIATE_TEST_SUITE_P(Lengths, GpuDecodeAttention,
                         ::testing::ValuesIn(params({{1}, {300, 3001}}, 64) +
                                             params({{1}, {64}, {65}, {1, 300, 3001}, {4096, 17}, {2047, 33, 2048},
                                                     {256, 257, 8193}, batch_lens(5, 4100), batch_lens(8, 1500),
                                                     batch_lens(64, 2100), batch_lens(200, 700)})),
                         param_name);

class GpuDecodeAttentionRope : public GpuDecodeAttention {};

TEST_P(GpuDecodeAttentionRope, FusedRopeEqualsRopeThenAttention) {
  const std::vector<int> lens = std::get<0>(GetParam());
  const bool kv_bf16 = std::get<1>(GetParam());
  KernelChoice choice(GetParam());
  const int heads = 28, kv_heads = 4, D = std::get<3>(GetParam()), bs = 16, n = static_cast<int>(lens.size());
  const int max_ctx = cache_len(lens, bs), per_seq = max_ctx / bs, blocks = per_seq * n;
  const int width = (heads + 2 * kv_heads) * D;
  std::mt19937 rng(static_cast<unsigned>(lens.back()) + 99);
  std::normal_distribution<float> normal;
  std::vector<float> qkv(static_cast<std::size_t>(n) * width), bias(width), cache(static_cast<std::size_t>(blocks) * bs * kv_heads * D);
  for (auto* x : {&qkv, &bias, &cache})
    for (auto& e : *x) e = normal(rng);
  std::vector<float> inv_freq(D / 2);
  for (int i = 0; i < D / 2; ++i) inv_freq[i] = std::pow(1e6f, -2.0f * i / D);
  std::vector<int> perm(blocks);
  std::iota(perm.begin(), perm.end(), 0);
  std::shuffle(perm.begin(), perm.end(), rng);
  std::vector<std::int32_t> tables(perm.begin(), perm.end()), offsets(n), ctx(lens.begin(), lens.end()), slots(n), pos(3 * n);
  for (int t = 0; t < n; ++t) {
    offsets[t] = t * per_seq;
    const int p = lens[t] - 1;  // the newest token of each sequence
    slots[t] = tables[offsets[t] + p / bs] * bs + p % bs;
    pos[3 * t] = p;
    pos[3 * t + 1] = p / 3;  // M-RoPE: three position components (sections 16, 24, 24)
    pos[3 * t + 2] = p / 7;
  }
  const std::size_t es = kv_bf16 ? 2 : 4;
  std::vector<__nv_bfloat16> cache_b(cache.size());
  for (std::size_t i = 0; i < cache.size(); ++i) cache_b[i] = __float2bfloat16(cache[i]);
  auto upload_cache = [&]() -> void* {
    return kv_bf16 ? static_cast<void*>(testing::upload(cache_b)) : static_cast<void*>(testing::upload(cache));
  };
  void *k1 = upload_cache(), *v1 = upload_cache(), *k2 = upload_cache(), *v2 = upload_cache();
  auto *dqkv = upload(qkv), *dbias = upload(bias), *dfreq = upload(inv_freq);
  auto *dtab = upload(tables), *doff = upload(offsets), *dctx = upload(ctx), *dslots = upload(slots), *dpos = upload(pos);
  float *dq = nullptr, *out1 = nullptr, *out2 = nullptr;
  const std::size_t qn = static_cast<std::size_t>(n) * heads * D;
  ASSERT_EQ(cudaMalloc(&dq, qn * 4), cudaSuccess);
  ASSERT_EQ(cudaMalloc(&out1, qn * 4), cudaSuccess);
  ASSERT_EQ(cudaMalloc(&out2, qn * 4), cudaSuccess);
  ASSERT_EQ(cudaMemset(out2, 0xFF, qn * 4), cudaSuccess);
  void* scratch = nullptr;
  const std::size_t scratch_bytes = kernels::decode_attention_scratch_bytes(n, heads, kv_heads, D);
  ASSERT_EQ(cudaMalloc(&scratch, scratch_bytes), cudaSuccess);
  ASSERT_EQ(cudaMemset(scratch, 0, scratch_bytes), cudaSuccess);

  kernels::RopeKvArgs r;
  r.qkv = dqkv;
  r.bias = dbias;
  r.positions = dpos;
  r.inv_freq = dfreq;
  r.slots = dslots;
  r.q = dq;
  r.k_cache = k1;
  r.v_cache = v1;
  r.kv_type = kv_bf16 ? kernels::ElemType::bf16 : kernels::ElemType::f32;
  r.n = n;
  r.heads = heads;
  r.kv_heads = kv_heads;
  r.head_dim = D;
  r.section0 = 16;
  r.section1 = 24;
  kernels::AttentionArgs a;
  a.q = dq;
  a.k_cache = k1;
  a.v_cache = v1;
  a.kv_type = r.kv_type;
  a.block_tables = dtab;
  a.table_offset = doff;
  a.ctx_len = dctx;
  a.out = out1;
  a.n = n;
  a.heads = heads;
  a.kv_heads = kv_heads;
  a.head_dim = D;
  a.block_size = bs;
  a.max_ctx = max_ctx;
  a.scale = 1.0f / std::sqrt(static_cast<float>(D));
  kernels::launch_rope_kv(r, nullptr);
  kernels::launch_decode_attention(a, scratch, nullptr);
  a.k_cache = r.k_cache = k2;
  a.v_cache = r.v_cache = v2;
  a.q = nullptr;  // the fused path must not read it
  a.out = out2;
  kernels::launch_decode_attention(a, scratch, nullptr, &r);
  ASSERT_EQ(cudaGetLastError(), cudaSuccess);
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  kernels::set_decode_attention_tensor_cores(true);

  std::vector<float> o1(qn), o2(qn);
  ASSERT_EQ(cudaMemcpy(o1.data(), out1, qn * 4, cudaMemcpyDeviceToHost), cudaSuccess);
  ASSERT_EQ(cudaMemcpy(o2.data(), out2, qn * 4, cudaMemcpyDeviceToHost), cudaSuccess);
  double num = 0, den = 0;
  for (std::size_t i = 0; i < qn; ++i) {
    ASSERT_FALSE(std::isnan(o2[i])) << "output " << i << " not written";
    num += (o2[i] - o1[i]) * (o2[i] - o1[i]);
    den += o1[i] * o1[i];
  }
  EXPECT_LT(std::sqrt(num / den), 1e-6);  // same arithmetic up to contraction
  // The cache rows of the new tokens: what rope_kv wrote (within one rounding of the cache type).
  const std::size_t row = static_cast<std::size_t>(kv_heads) * D;
  for (int t = 0; t < n; ++t)
    for (int which = 0; which < 2; ++which) {
      std::vector<unsigned char> c1(row * es), c2(row * es);
      const std::size_t at = static_cast<std::size_t>(slots[t]) * row * es;
      ASSERT_EQ(cudaMemcpy(c1.data(), static_cast<char*>(which ? v1 : k1) + at, c1.size(), cudaMemcpyDeviceToHost), cudaSuccess);
      ASSERT_EQ(cudaMemcpy(c2.data(), static_cast<char*>(which ? v2 : k2) + at, c2.size(), cudaMemcpyDeviceToHost), cudaSuccess);
      for (std::size_t i = 0; i < row; ++i) {
        float x1, x2;
        if (kv_bf16) {
          x1 = __bfloat162float(reinterpret_cast<const __nv_bfloat16*>(c1.data())[i]);
          x2 = __bfloat162float(reinterpret_cast<const __nv_bfloat16*>(c2.data())[i]);
        } else {
          x1 = reinterpret_cast<const float*>(c1.data())[i];
          x2 = reinterpret_cast<const float*>(c2.data())[i];
        }
        ASSERT_NEAR(x2, x1, (kv_bf16 ? 8e-3f : 1e-5f) * (1.0f + std::fabs(x1)))
            << (which ? "v" : "k") << " row of token " << t << ", element " << i;
      }
    }
  for (void* p : {k1, v1, k2, v2, static_cast<void*>(dqkv), static_cast<void*>(dbias), static_cast<void*>(dfreq),
                  static_cast<void*>(dtab), static_cast<void*>(doff), static_cast<void*>(dctx), static_cast<void*>(dslots),
                  static_cast<void*>(dpos), static_cast<void*>(dq), static_cast<void*>(out1), static_cast<void*>(out2), scratch})
    cudaFree(p);
}

INSTANTIATE_TEST_SUITE_P(Lengths, GpuDecodeAttentionRope,
                         ::testing::ValuesIn(params({{257, 33, 4096}}, 64) +
                                             params({{1}, {256}, {257, 33, 4096}, {8193, 1000}, batch_lens(48, 900)})),
                         param_name);

}  // namespace
}  // namespace cosmos
