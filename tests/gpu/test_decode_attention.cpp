// decode_attention (flash-decoding) against a float64 CPU reference and the reference kernel, on
// the 7B model's attention shape (28 query heads, 4 KV heads, head_dim 128) over a shuffled paged
// cache in fp32 and in bf16 (the reference then reads the same rounded values), for context lengths
// that fit one split, end inside a tile and span every split; output poisoned with NaN first. Each
// case launches twice: the second launch checks the split counters were left at zero.
#include <algorithm>
#include <cmath>
#include <numeric>
#include <random>
#include <vector>

#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include "kernels/decode_attention.cuh"
#include "cuda_upload.h"
#include "kernels/device_info.cuh"

#include <cuda_bf16.h>

namespace cosmos {
namespace {

class GpuDecodeAttention : public ::testing::TestWithParam<std::tuple<std::vector<int>, bool>> {
 protected:
  void SetUp() override {
    const auto q = kernels::query_gpus();
    if (q.gpus.empty()) GTEST_SKIP() << q.why_none;
  }
};

using testing::upload;

TEST_P(GpuDecodeAttention, MatchesFloat64ReferenceAndTheReferenceKernel) {
  const std::vector<int> lens = std::get<0>(GetParam());
  const bool kv_bf16 = std::get<1>(GetParam());
  const int heads = 28, kv_heads = 4, D = 128, bs = 16, n = static_cast<int>(lens.size());
  const int max_ctx = 4096, blocks = max_ctx / bs * n;
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
  ASSERT_EQ(cudaMemset(scratch, 0, scratch_bytes), cudaSuccess);
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
  a.out = dref;
  a.max_ctx = *std::max_element(lens.begin(), lens.end());
  kernels::launch_attention(a, nullptr);
  ASSERT_EQ(cudaGetLastError(), cudaSuccess);
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  std::vector<float> out(q.size()), ref_kernel(q.size());
  ASSERT_EQ(cudaMemcpy(out.data(), dout, q.size() * 4, cudaMemcpyDeviceToHost), cudaSuccess);
  ASSERT_EQ(cudaMemcpy(ref_kernel.data(), dref, q.size() * 4, cudaMemcpyDeviceToHost), cudaSuccess);

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
  EXPECT_LT(std::sqrt(num / den), 1e-5);    // fp32 arithmetic, reordered sums
  EXPECT_LT(std::sqrt(num_k / den), 1e-5);
  for (void* p : {static_cast<void*>(dq), dk, dv, static_cast<void*>(dtab),
                  static_cast<void*>(doff), static_cast<void*>(dctx), static_cast<void*>(dout),
                  static_cast<void*>(dref), static_cast<void*>(scratch)})
    cudaFree(p);
}

INSTANTIATE_TEST_SUITE_P(Lengths, GpuDecodeAttention,
                         ::testing::Combine(::testing::Values(std::vector<int>{1}, std::vector<int>{64}, std::vector<int>{65},
                                           std::vector<int>{1, 300, 3001}, std::vector<int>{4096, 17},
                                           std::vector<int>{2047, 33, 2048}),
                         ::testing::Bool()));

}  // namespace
}  // namespace cosmos
