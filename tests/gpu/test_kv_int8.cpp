// The int8 KV cache on the GPU (cosmos/kv_format.h), kernel by kernel and end to end:
//   - rope_kv's int8 write: the same launch with an fp32 cache gives the roped rows; each int8 row
//     and its scale must be exactly cosmos::quantize_kv_row of that fp32 row (same fp32 operations),
//     q unchanged, the other slots untouched;
//   - kv_dequant: bf16(scale x q) bit for bit, at the listed blocks' slots only;
//   - decode attention over an int8 cache against a float64 reference on the dequantized rows: the
//     CUDA-core kernel within fp32 sums' tolerance (1e-4 of sum_j p_j |v_j|), the tensor-core kernel
//     within its bf16 probabilities' (relative L2 2^-9, on rows rounded as it rounds them);
//   - the backend on tiny-hd128 (bf16 and int4 weights, both kernels): prefill + 11 decode steps
//     against the CPU backend with the same int8 cache, within the bf16 fast path's bound; its
//     memory and format.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include <cuda_bf16.h>
#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include "cosmos/cpu_backend.h"
#include "cosmos/cuda_backend.h"
#include "cosmos/kv_format.h"
#include "cosmos/memory_estimate.h"
#include "cuda_upload.h"
#include "kernels/decode_attention.cuh"
#include "kernels/device_info.cuh"
#include "kernels/kv_dequant.cuh"
#include "kernels/rope_kv.cuh"
#include "step_compare.h"
#include "tiny_model.h"

namespace cosmos {
namespace {

using kernels::ElemType;
using testing::upload;

class KvInt8 : public ::testing::Test {
 protected:
  void SetUp() override {
    const auto q = kernels::query_gpus();
    if (q.gpus.empty()) GTEST_SKIP() << q.why_none;
  }
};

template <typename T>
std::vector<T> download(const T* d, std::size_t n) {
  std::vector<T> h(n);
  EXPECT_EQ(cudaMemcpy(h.data(), d, n * sizeof(T), cudaMemcpyDeviceToHost), cudaSuccess);
  return h;
}

std::vector<float> randoms(std::size_t n, float spread, std::uint32_t seed) {
  std::mt19937 g(seed);
  std::uniform_real_distribution<float> u(-spread, spread);
  std::vector<float> v(n);
  for (float& x : v) x = u(g);
  return v;
}

TEST_F(KvInt8, RopeKvWritesQuantizeKvRowOfTheRopedRows) {
  const int heads = 28, kv_heads = 4, D = 128, n = 37, slots_total = 64;
  const int qd = heads * D, kvd = kv_heads * D, width = qd + 2 * kvd;
  std::vector<float> qkv = randoms(static_cast<std::size_t>(n) * width, 3.0f, 1), bias = randoms(width, 0.5f, 2);
  qkv[5 * width + qd + 3] = 400.0f;  // an outlier in one K row
  for (int i = 0; i < D; ++i) qkv[7 * width + qd + kvd + D + i] = 0.0f;  // a zero V row (head 1 of token 7),
  for (int i = 0; i < D; ++i) bias[qd + kvd + D + i] = 0.0f;             // bias included
  std::vector<std::int32_t> pos(3 * n), slots(slots_total);
  for (int t = 0; t < n; ++t) pos[3 * t] = pos[3 * t + 1] = pos[3 * t + 2] = 3 * t + 1;
  std::iota(slots.begin(), slots.end(), 0);
  std::shuffle(slots.begin(), slots.end(), std::mt19937(3));
  slots.resize(n);
  std::vector<float> inv(D / 2);
  for (int j = 0; j < D / 2; ++j) inv[j] = 1.0f / std::pow(1e6f, static_cast<float>(2 * j) / D);
  float *d_qkv = upload(qkv), *d_bias = upload(bias), *d_inv = upload(inv);
  std::int32_t *d_pos = upload(pos), *d_slots = upload(slots);
  float *q32, *q8, *k32, *v32, *ks, *vs;
  std::int8_t *k8, *v8;
  const std::size_t cache = static_cast<std::size_t>(slots_total) * kvd;
  ASSERT_EQ(cudaMalloc(&q32, n * qd * 4), cudaSuccess);
  ASSERT_EQ(cudaMalloc(&q8, n * qd * 4), cudaSuccess);
  ASSERT_EQ(cudaMalloc(&k32, cache * 4), cudaSuccess);
  ASSERT_EQ(cudaMalloc(&v32, cache * 4), cudaSuccess);
  ASSERT_EQ(cudaMalloc(&k8, cache), cudaSuccess);
  ASSERT_EQ(cudaMalloc(&v8, cache), cudaSuccess);
  ASSERT_EQ(cudaMalloc(&ks, slots_total * kv_heads * 4), cudaSuccess);
  ASSERT_EQ(cudaMalloc(&vs, slots_total * kv_heads * 4), cudaSuccess);
  ASSERT_EQ(cudaMemset(k8, 0x55, cache), cudaSuccess);  // poison: untouched slots keep it
  ASSERT_EQ(cudaMemset(v8, 0x55, cache), cudaSuccess);
  kernels::RopeKvArgs r;
  r.qkv = d_qkv;
  r.bias = d_bias;
  r.positions = d_pos;
  r.inv_freq = d_inv;
  r.slots = d_slots;
  r.q = q32;
  r.q_type = ElemType::f32;
  r.k_cache = k32;
  r.v_cache = v32;
  r.kv_type = ElemType::f32;
  r.n = n;
  r.heads = heads;
  r.kv_heads = kv_heads;
  r.head_dim = D;
  r.section0 = 16;
  r.section1 = 24;
  ASSERT_GT(kernels::launch_rope_kv(r, nullptr), 0u);
  r.q = q8;
  r.k_cache = k8;
  r.v_cache = v8;
  r.k_scale = ks;
  r.v_scale = vs;
  ASSERT_GT(kernels::launch_rope_kv(r, nullptr), 0u);
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  EXPECT_EQ(download(q32, n * qd), download(q8, n * qd));
  const auto hk32 = download(k32, cache), hv32 = download(v32, cache);
  const auto hk8 = download(k8, cache), hv8 = download(v8, cache);
  const auto hks = download(ks, slots_total * kv_heads), hvs = download(vs, slots_total * kv_heads);
  std::vector<bool> written(slots_total, false);
  std::vector<std::int8_t> want(D);
  int zero_rows = 0;
  for (int t = 0; t < n; ++t) {
    const int s = slots[t];
    written[s] = true;
    for (int h = 0; h < kv_heads; ++h) {
      const std::size_t at = static_cast<std::size_t>(s) * kvd + h * D, sat = static_cast<std::size_t>(s) * kv_heads + h;
      for (int which = 0; which < 2; ++which) {
        const float* x = (which ? hv32 : hk32).data() + at;
        const float scale = quantize_kv_row(x, D, want.data());
        EXPECT_EQ((which ? hvs : hks)[sat], scale) << "token " << t << " head " << h << (which ? " V" : " K");
        EXPECT_EQ(0, std::memcmp((which ? hv8 : hk8).data() + at, want.data(), D))
            << "token " << t << " head " << h << (which ? " V" : " K");
        zero_rows += scale == 0.0f;
      }
    }
  }
  EXPECT_EQ(zero_rows, 1);  // the zero V row: scale 0
  for (int s = 0; s < slots_total; ++s) {
    if (written[s]) continue;
    for (int e = 0; e < kvd; ++e) {
      ASSERT_EQ(hk8[static_cast<std::size_t>(s) * kvd + e], 0x55) << "slot " << s;
      ASSERT_EQ(hv8[static_cast<std::size_t>(s) * kvd + e], 0x55) << "slot " << s;
    }
  }
  for (void* p : std::initializer_list<void*>{d_qkv, d_bias, d_inv, d_pos, d_slots, q32, q8, k32, v32, k8, v8, ks, vs})
    cudaFree(p);
}

TEST_F(KvInt8, DequantExpandsTheListedBlocksBitForBit) {
  const int kv_heads = 4, D = 128, bs = 16, n_blocks = 10, kvd = kv_heads * D;
  const std::size_t slots = static_cast<std::size_t>(n_blocks) * bs, cache = slots * kvd;
  std::mt19937 g(9);
  std::vector<std::int8_t> k8(cache), v8(cache);
  for (auto* v : {&k8, &v8})
    for (auto& x : *v) x = static_cast<std::int8_t>(static_cast<int>(g() % 255) - 127);
  std::vector<float> ksc = randoms(slots * kv_heads, 2.0f, 4), vsc = randoms(slots * kv_heads, 2.0f, 5);
  const std::vector<std::int32_t> blocks = {7, 2, 5, 2};  // a repeat is harmless
  auto *dk = upload(k8), *dv = upload(v8);
  auto *dks = upload(ksc), *dvs = upload(vsc);
  auto* db = upload(blocks);
  __nv_bfloat16 *k16, *v16;
  ASSERT_EQ(cudaMalloc(&k16, cache * 2), cudaSuccess);
  ASSERT_EQ(cudaMalloc(&v16, cache * 2), cudaSuccess);
  ASSERT_EQ(cudaMemset(k16, 0xff, cache * 2), cudaSuccess);
  ASSERT_EQ(cudaMemset(v16, 0xff, cache * 2), cudaSuccess);
  kernels::KvDequantArgs a;
  a.k8 = dk;
  a.v8 = dv;
  a.k_scale = dks;
  a.v_scale = dvs;
  a.blocks = db;
  a.k16 = k16;
  a.v16 = v16;
  a.n_blocks = static_cast<int>(blocks.size());
  a.block_size = bs;
  a.kv_heads = kv_heads;
  a.head_dim = D;
  ASSERT_GT(kernels::launch_kv_dequant(a, nullptr), 0u);
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  const auto hk = download(reinterpret_cast<std::uint16_t*>(k16), cache);
  const auto hv = download(reinterpret_cast<std::uint16_t*>(v16), cache);
  for (std::size_t s = 0; s < slots; ++s) {
    const bool listed = std::find(blocks.begin(), blocks.end(), static_cast<int>(s / bs)) != blocks.end();
    for (int e = 0; e < kvd; ++e) {
      const std::size_t i = s * kvd + e, r = s * kv_heads + e / D;
      for (int which = 0; which < 2; ++which) {
        const std::uint16_t got = (which ? hv : hk)[i];
        if (!listed) {
          ASSERT_EQ(got, 0xffff) << "slot " << s;
          continue;
        }
        const float f = (which ? vsc : ksc)[r] * static_cast<float>((which ? v8 : k8)[i]);
        ASSERT_EQ(got, __bfloat16_as_ushort(__float2bfloat16(f))) << "slot " << s << " element " << e;
      }
    }
  }
  for (void* p : std::initializer_list<void*>{dk, dv, dks, dvs, db, k16, v16}) cudaFree(p);
}

// One token per sequence (a decode step), contexts of 1 to 3,000 keys in a paged cache, on both
// kernels (the parameter: tensor cores). A wrong scale (another row's, K's for V) or int8 read as
// unsigned moves outputs by their own size.
class KvInt8Decode : public KvInt8, public ::testing::WithParamInterface<bool> {
 protected:
  void TearDown() override { kernels::set_decode_attention_tensor_cores(true); }
};

TEST_P(KvInt8Decode, AttentionMatchesFloat64OnTheDequantizedRows) {
  const bool tc = GetParam();
  kernels::set_decode_attention_tensor_cores(tc);
  const int heads = 28, kv_heads = 4, D = 128, G = heads / kv_heads, bs = 16;
  const std::vector<int> lens = {1, 33, 700, 3000};
  const int n = static_cast<int>(lens.size());
  int total_blocks = 0;
  for (int l : lens) total_blocks += (l + bs - 1) / bs;
  const std::size_t slots = static_cast<std::size_t>(total_blocks) * bs, kvd = static_cast<std::size_t>(kv_heads) * D;
  std::mt19937 g(11);
  std::vector<std::int8_t> k8(slots * kvd), v8(slots * kvd);
  for (auto* v : {&k8, &v8})
    for (auto& x : *v) x = static_cast<std::int8_t>(static_cast<int>(g() % 255) - 127);
  std::vector<float> ksc = randoms(slots * kv_heads, 0.02f, 12), vsc = randoms(slots * kv_heads, 0.05f, 13);
  for (float& s : ksc) s = std::fabs(s);
  for (float& s : vsc) s = std::fabs(s);
  const std::vector<float> q = randoms(static_cast<std::size_t>(n) * heads * D, 1.0f, 14);
  // Blocks handed out in reverse, so that tables are not in slot order.
  std::vector<std::int32_t> tables, toff, ctx;
  int next = total_blocks - 1;
  for (int t = 0; t < n; ++t) {
    toff.push_back(static_cast<std::int32_t>(tables.size()));
    for (int b = 0; b < (lens[t] + bs - 1) / bs; ++b) tables.push_back(next--);
    ctx.push_back(lens[t]);
  }
  auto *dk = upload(k8), *dv = upload(v8);
  auto *dks = upload(ksc), *dvs = upload(vsc), *dq = upload(q);
  auto *dt = upload(tables), *dto = upload(toff), *dc = upload(ctx);
  float* out;
  ASSERT_EQ(cudaMalloc(&out, q.size() * 4), cudaSuccess);
  void* scratch;
  const std::size_t scratch_bytes = kernels::decode_attention_scratch_bytes(n, heads, kv_heads, D);
  ASSERT_EQ(cudaMalloc(&scratch, scratch_bytes), cudaSuccess);
  ASSERT_EQ(cudaMemset(scratch, 0, scratch_bytes), cudaSuccess);
  kernels::AttentionArgs a;
  a.q = dq;
  a.k_cache = dk;
  a.v_cache = dv;
  a.k_scale = dks;
  a.v_scale = dvs;
  a.block_tables = dt;
  a.table_offset = dto;
  a.ctx_len = dc;
  a.out = out;
  a.out_type = ElemType::f32;
  a.n = n;
  a.heads = heads;
  a.kv_heads = kv_heads;
  a.head_dim = D;
  a.block_size = bs;
  a.max_ctx = 3000;
  a.scale = 1.0f / std::sqrt(static_cast<float>(D));
  ASSERT_GT(kernels::launch_decode_attention(a, scratch, nullptr), 0u);
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  const auto got = download(out, q.size());
  // The tensor-core kernel multiplies bf16 q by bf16(scale x q8) rows, its probabilities rounded to
  // bf16 for P V: against float64 on those same rounded rows, the probabilities' rounding (2^-9
  // each, relative) bounds the output's relative L2 error, as for the bf16 cache
  // (test_gpu_decode_attention). The CUDA-core kernel keeps fp32 q and exact scale x q8 products.
  if (tc) {
    auto r16 = [](double x) { return static_cast<double>(__bfloat162float(__float2bfloat16(static_cast<float>(x)))); };
    double num = 0, den = 0;
    for (int t = 0; t < n; ++t)
      for (int h = 0; h < heads; ++h) {
        const int kvh = h / G;
        auto slot_of = [&](int j) { return static_cast<std::size_t>(tables[toff[t] + j / bs]) * bs + j % bs; };
        std::vector<double> s(lens[t]);
        double mx = -1e300;
        for (int j = 0; j < lens[t]; ++j) {
          const std::size_t slot = slot_of(j), at = slot * kvd + static_cast<std::size_t>(kvh) * D;
          double d = 0;
          for (int e = 0; e < D; ++e)
            d += r16(q[(static_cast<std::size_t>(t) * heads + h) * D + e]) * r16(static_cast<double>(ksc[slot * kv_heads + kvh] * k8[at + e]));
          s[j] = d * a.scale;
          mx = std::max(mx, s[j]);
        }
        double sum = 0;
        for (double& x : s) sum += (x = std::exp(x - mx));
        for (int e = 0; e < D; ++e) {
          double o = 0;
          for (int j = 0; j < lens[t]; ++j) {
            const std::size_t slot = slot_of(j);
            o += s[j] / sum * r16(static_cast<double>(vsc[slot * kv_heads + kvh] * v8[slot * kvd + static_cast<std::size_t>(kvh) * D + e]));
          }
          const double gv = got[(static_cast<std::size_t>(t) * heads + h) * D + e];
          ASSERT_FALSE(std::isnan(gv)) << "context " << lens[t] << " head " << h << " dim " << e;
          num += (gv - o) * (gv - o);
          den += o * o;
        }
      }
    std::printf("[ measured ] tensor cores, int8 cache: relative L2 error against float64: %.3g\n", std::sqrt(num / den));
    EXPECT_LT(std::sqrt(num / den), 1.0 / 512);
    for (void* p : std::initializer_list<void*>{dk, dv, dks, dvs, dq, dt, dto, dc, out, scratch}) cudaFree(p);
    return;
  }
  for (int t = 0; t < n; ++t)
    for (int h = 0; h < heads; ++h) {
      const int kvh = h / G;
      std::vector<double> s(lens[t]);
      double mx = -1e300;
      for (int j = 0; j < lens[t]; ++j) {
        const std::size_t slot = static_cast<std::size_t>(tables[toff[t] + j / bs]) * bs + j % bs;
        const std::size_t at = slot * kvd + static_cast<std::size_t>(kvh) * D;
        double d = 0;
        for (int e = 0; e < D; ++e) d += static_cast<double>(q[(static_cast<std::size_t>(t) * heads + h) * D + e]) * k8[at + e];
        s[j] = d * ksc[slot * kv_heads + kvh] * a.scale;
        mx = std::max(mx, s[j]);
      }
      double sum = 0;
      for (double& x : s) sum += (x = std::exp(x - mx));
      // fp32 sums: the error is bounded by a multiple of u times sum_j p_j |v_j| (mag), not |o|.
      double worst = 0, mag = 0;
      for (int e = 0; e < D; ++e) {
        double o = 0, m = 0;
        for (int j = 0; j < lens[t]; ++j) {
          const std::size_t slot = static_cast<std::size_t>(tables[toff[t] + j / bs]) * bs + j % bs;
          const double term = s[j] / sum * vsc[slot * kv_heads + kvh] * v8[slot * kvd + static_cast<std::size_t>(kvh) * D + e];
          o += term;
          m += std::fabs(term);
        }
        const double gv = got[(static_cast<std::size_t>(t) * heads + h) * D + e];
        worst = std::max(worst, std::fabs(gv - o));
        mag = std::max(mag, m);
      }
      ASSERT_LE(worst, 1e-4 * mag) << "context " << lens[t] << " head " << h;
    }
  for (void* p : std::initializer_list<void*>{dk, dv, dks, dvs, dq, dt, dto, dc, out, scratch}) cudaFree(p);
}

INSTANTIATE_TEST_SUITE_P(Kernels, KvInt8Decode, ::testing::Bool(),
                         [](const auto& p) { return p.param ? "TensorCores" : "CudaCores"; });

// The backend reports the int8 cache and its bytes, as the estimator counts them.
TEST_F(KvInt8, BackendReportsItsCacheAndItsBytes) {
  const auto& dir = testing::tiny_hd128_model_dir();
  BackendOptions o;
  o.context_tokens = 1024;
  o.kv_format = KvFormat::int8;
  auto b = create_cuda_backend(dir, o);
  ASSERT_TRUE(b.ok()) << b.error().message;
  EXPECT_EQ((*b)->kv_format(), KvFormat::int8);
  EXPECT_EQ((*b)->memory().kv_cache,
            static_cast<std::uint64_t>((*b)->kv_cache().shape().tokens()) * kv_bytes_per_token((*b)->config(), KvFormat::int8, 2));
  // What `inspect --kv-cache int8` and the settings page estimate for it.
  EstimateOptions eo;
  eo.context_tokens = 1024;
  eo.kv_format = KvFormat::int8;
  EXPECT_EQ((*b)->memory().kv_cache, estimate_memory((*b)->config(), Precision::bf16, eo).kv_cache);
}

// Prefill of 150 tokens (the prefill attention on the expanded copy) and 11 decode steps (the decode
// attention on the int8 rows, RoPE and the rows' quantization fused into it; 2-3 splits, so with int4
// weights the tensor-core kernel's sums for the o product) against the CPU backend with the same
// cache format and weights. Rows: the weights, and the decode attention's kernel.
struct BackendRow {
  const char* name;
  Precision precision;
  bool tensor_cores;
};

class KvInt8Backend : public KvInt8, public ::testing::WithParamInterface<BackendRow> {
 protected:
  void TearDown() override { kernels::set_decode_attention_tensor_cores(true); }
};

TEST_P(KvInt8Backend, MatchesTheCpuWithTheSameCache) {
  const BackendRow& row = GetParam();
  kernels::set_decode_attention_tensor_cores(row.tensor_cores);
  const auto& dir = testing::tiny_hd128_model_dir();
  BackendOptions o;
  o.context_tokens = 1024;
  o.kv_format = KvFormat::int8;
  o.precision = row.precision;
  auto cpu_b = create_cpu_backend(dir, o);
  ASSERT_TRUE(cpu_b.ok()) << cpu_b.error().message;
  auto gpu_b = create_cuda_backend(dir, o);
  ASSERT_TRUE(gpu_b.ok()) << gpu_b.error().message;
  const testing::StepDiff d = testing::prefill_then_decode_diff(**gpu_b, **cpu_b);
  std::printf("tiny-hd128 %s, int8 KV cache: largest |cuda - cpu| over prefill + 11 decode steps: %.3g (max |logit| %.3g)\n",
              row.name, d.worst, d.scale);
  EXPECT_LT(d.worst, 3e-2f * d.scale);  // the bf16 fast path's bound (test_cuda_backend.cpp, kBf16Rel)
}

INSTANTIATE_TEST_SUITE_P(Rows, KvInt8Backend,
                         ::testing::Values(BackendRow{"bf16_TensorCores", Precision::bf16, true},
                                           BackendRow{"bf16_CudaCores", Precision::bf16, false},
                                           BackendRow{"int4_TensorCores", Precision::int4, true}),
                         [](const auto& p) { return std::string(p.param.name); });

}  // namespace
}  // namespace cosmos
