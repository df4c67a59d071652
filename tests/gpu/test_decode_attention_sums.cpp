// The decode attention's merge left to the o product (kernels/decode_attention.cuh,
// DecodeAttentionSums): the tensor-core kernel's two-bucket sums, divided on the host, against its
// own merged output (checked against float64 in test_decode_attention.cpp), fused with RoPE and not,
// for contexts of one split (stored), several, and every split; and with key 0's K row set so that
// one head of each group scores key 0 ~180 binary orders of magnitude below the other keys (all its
// splits in bucket 1), one ~120 below (its splits on both sides of the bucket boundary), or both
// heads far above them (key 0 dominant: the other splits' weights vanish); with the default splits
// and with counts the merge cannot take (DecodeAttentionSums::splits); with every warp on half of
// head_dim (DecodeAttentionSums::halves), which must give the same per-block results; and on an int8
// cache (cosmos/kv_format.h: the rows quantized on the host, the fused rows by the kernel), whose
// merged output test_kv_int8.cpp checks against float64. Two launches in turn on
// two buffer sets, as two layers do: each must zero the other set (poisoned before) and add into
// its own. Then the o product's staging of sums (GemvArgsT::x_sums) against the same product of the
// quotients computed on the host, for divisors in bucket 0 only, in both, and in bucket 1 only, and
// the arguments it must refuse.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include "cosmos/kv_format.h"
#include "cuda_upload.h"
#include "half_convert.h"
#include "kernels/decode_attention.cuh"
#include "kernels/device_info.cuh"
#include "kernels/gemv.cuh"

namespace cosmos {
namespace {

using testing::from_f;
using testing::to_f;
using testing::upload;

bool have_gpu() { return !kernels::query_gpus().gpus.empty(); }

// Key 0's K row: random, or set (unfused only: from q) so that heads 0 and 1 of each group score it
// at (-1400, -914) (below the other keys: buckets) or (+1400, +600) (dominant).
enum class Key0 { random, below, dominant };
// (context lengths, head_dim, fused RoPE, key 0, DecodeAttentionSums::splits: 0 the default,
// DecodeAttentionSums::halves, an int8 cache)
using Param = std::tuple<std::vector<int>, int, bool, Key0, int, bool, bool>;

std::string param_name(const ::testing::TestParamInfo<Param>& info) {
  std::string s;
  for (int len : std::get<0>(info.param)) s += std::to_string(len) + "_";
  s += "d";
  s += std::to_string(std::get<1>(info.param));
  if (std::get<2>(info.param)) s += "_rope";
  if (std::get<3>(info.param) == Key0::below) s += "_key0_below";
  if (std::get<3>(info.param) == Key0::dominant) s += "_key0_dominant";
  if (std::get<4>(info.param) > 0) {
    s += "_splits";
    s += std::to_string(std::get<4>(info.param));
  }
  if (std::get<5>(info.param)) s += "_halves";
  if (std::get<6>(info.param)) s += "_int8";
  return s;
}

class GpuDecodeAttentionSums : public ::testing::TestWithParam<Param> {
 protected:
  void SetUp() override {
    if (!have_gpu()) GTEST_SKIP() << kernels::query_gpus().why_none;
  }
};

TEST_P(GpuDecodeAttentionSums, SumsDivideToTheMergedOutputAndClearTheOtherPair) {
  const auto& [lens, D, fused, key0, splits, halves, int8] = GetParam();
  const int heads = 28, kv_heads = 4, bs = 16, n = static_cast<int>(lens.size());
  // Room for the longest context (at least 8,448 keys): each sequence's own blocks, so that no
  // sequence's table reaches into another's (the fused rows are written where the reads are).
  const int longest = *std::max_element(lens.begin(), lens.end());
  const int max_ctx = std::max(8448, (longest + 255) / 256 * 256), per_seq = max_ctx / bs, blocks = per_seq * n;
  const int width = (heads + 2 * kv_heads) * D;
  const std::size_t qn = static_cast<std::size_t>(n) * heads * D, ln = static_cast<std::size_t>(n) * heads;
  std::mt19937 rng(static_cast<unsigned>(lens.back() * 7 + D));
  std::normal_distribution<float> normal;
  std::vector<float> q(qn), qkv(static_cast<std::size_t>(n) * width), bias(width);
  std::vector<float> kf(static_cast<std::size_t>(blocks) * bs * kv_heads * D), vf(kf.size());
  for (auto* x : {&q, &qkv, &bias, &kf, &vf})
    for (auto& e : *x) e = normal(rng);
  std::vector<int> perm(blocks);
  std::iota(perm.begin(), perm.end(), 0);
  std::shuffle(perm.begin(), perm.end(), rng);
  std::vector<std::int32_t> tables(perm.begin(), perm.end()), offsets(n), ctx(lens.begin(), lens.end()), slots(n),
      pos(3 * n);
  const std::size_t row = static_cast<std::size_t>(kv_heads) * D;
  for (int t = 0; t < n; ++t) {
    offsets[t] = t * per_seq;
    const int p = lens[t] - 1;
    slots[t] = tables[offsets[t] + p / bs] * bs + p % bs;
    pos[3 * t] = p;
    pos[3 * t + 1] = p / 3;
    pos[3 * t + 2] = p / 7;
    if (key0 == Key0::random) continue;
    // Key 0 of sequence t, per KV head: k = a q_h0 + b q_h1 with q_h0 . k, q_h1 . k the targets.
    const double c0 = key0 == Key0::below ? -1400 : 1400, c1 = key0 == Key0::below ? -914 : 600;
    const std::size_t k0 = static_cast<std::size_t>(tables[offsets[t]]) * bs * row;
    const int G = heads / kv_heads;
    for (int g = 0; g < kv_heads; ++g) {
      const float* q0 = q.data() + (static_cast<std::size_t>(t) * heads + g * G) * D;
      const float* q1 = q0 + D;
      double a00 = 0, a01 = 0, a11 = 0;
      for (int d = 0; d < D; ++d) {
        a00 += static_cast<double>(q0[d]) * q0[d];
        a01 += static_cast<double>(q0[d]) * q1[d];
        a11 += static_cast<double>(q1[d]) * q1[d];
      }
      const double det = a00 * a11 - a01 * a01, a = (c0 * a11 - c1 * a01) / det, b = (c1 * a00 - c0 * a01) / det;
      for (int d = 0; d < D; ++d) kf[k0 + g * D + d] = static_cast<float>(a * q0[d] + b * q1[d]);
    }
  }
  std::vector<__nv_bfloat16> kb(kf.size()), vb(vf.size());
  for (std::size_t i = 0; i < kf.size(); ++i) {
    kb[i] = __float2bfloat16(kf[i]);
    vb[i] = __float2bfloat16(vf[i]);
  }
  // int8: each (slot, KV head) row as cosmos::quantize_kv_row makes it, with its scale.
  std::vector<std::int8_t> k8(int8 ? kf.size() : 0), v8(k8.size());
  std::vector<float> ksc(int8 ? kf.size() / D : 0), vsc(ksc.size());
  for (std::size_t r = 0; r < ksc.size(); ++r) {
    ksc[r] = quantize_kv_row(kf.data() + r * D, D, k8.data() + r * D);
    vsc[r] = quantize_kv_row(vf.data() + r * D, D, v8.data() + r * D);
  }
  std::vector<float> inv_freq(D / 2);
  for (int i = 0; i < D / 2; ++i) inv_freq[i] = std::pow(1e6f, -2.0f * i / D);

  void* dk = int8 ? static_cast<void*>(upload(k8)) : static_cast<void*>(upload(kb));
  void* dv = int8 ? static_cast<void*>(upload(v8)) : static_cast<void*>(upload(vb));
  float* dks = int8 ? upload(ksc) : nullptr;
  float* dvs = int8 ? upload(vsc) : nullptr;
  auto *dq = upload(q), *dqkv = upload(qkv), *dbias = upload(bias), *dfreq = upload(inv_freq);
  auto *dtab = upload(tables), *doff = upload(offsets), *dctx = upload(ctx), *dslots = upload(slots), *dpos = upload(pos);
  float* dout = nullptr;
  float* dsums = nullptr;  // two sets: [o [2][qn] | l [2][ln]] each
  const std::size_t set = 2 * (qn + ln);
  void* scratch = nullptr;
  ASSERT_EQ(cudaMalloc(&dout, qn * 4), cudaSuccess);
  ASSERT_EQ(cudaMalloc(&dsums, 2 * set * sizeof(float)), cudaSuccess);
  const std::size_t scratch_bytes = kernels::decode_attention_scratch_bytes(n, heads, kv_heads, D);
  ASSERT_EQ(cudaMalloc(&scratch, scratch_bytes), cudaSuccess);
  ASSERT_EQ(cudaMemset(scratch, 0, scratch_bytes), cudaSuccess);
  ASSERT_EQ(cudaMemset(dout, 0xFF, qn * 4), cudaSuccess);

  kernels::RopeKvArgs r;
  r.qkv = dqkv;
  r.bias = dbias;
  r.positions = dpos;
  r.inv_freq = dfreq;
  r.slots = dslots;
  r.kv_type = kernels::ElemType::bf16;
  r.section0 = D / 8;
  r.section1 = 3 * D / 16;
  kernels::AttentionArgs a;
  a.q = fused ? nullptr : dq;
  a.k_cache = dk;
  a.v_cache = dv;
  a.kv_type = kernels::ElemType::bf16;
  a.k_scale = dks;  // int8: the cache's scales, else null
  a.v_scale = dvs;
  a.block_tables = dtab;
  a.table_offset = doff;
  a.ctx_len = dctx;
  a.out = dout;
  a.out_type = kernels::ElemType::f32;
  a.n = n;
  a.heads = heads;
  a.kv_heads = kv_heads;
  a.head_dim = D;
  a.block_size = bs;
  a.max_ctx = max_ctx;
  a.scale = 1.0f / std::sqrt(static_cast<float>(D));
  const kernels::RopeKvArgs* rope = fused ? &r : nullptr;  // fused: the new K/V rows are rewritten alike
  ASSERT_TRUE(kernels::decode_attention_sums_supported(a));

  kernels::DecodeAttentionSums s[2];
  for (int i = 0; i < 2; ++i) {
    s[i].o = dsums + i * set;
    s[i].l = s[i].o + 2 * qn;
    s[i].splits = splits;
    s[i].halves = halves;
  }
  for (int i = 0; i < 2; ++i) {
    s[i].clear_o = s[1 - i].o;
    s[i].clear_l = s[1 - i].l;
  }
  // The merged output first (the reference), then pair 0 zero and pair 1 poisoned.
  ASSERT_GT(kernels::launch_decode_attention(a, scratch, nullptr, rope), 0u);
  ASSERT_EQ(cudaMemset(s[0].o, 0, set * sizeof(float)), cudaSuccess);
  ASSERT_EQ(cudaMemset(s[1].o, 0x7F, set * sizeof(float)), cudaSuccess);
  std::vector<float> ref(qn);
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  ASSERT_EQ(cudaMemcpy(ref.data(), dout, qn * 4, cudaMemcpyDeviceToHost), cudaSuccess);

  int bucket1 = 0;  // heads with a share in bucket 1 (first launch)
  for (int launch = 0; launch < 3; ++launch) {  // sets 0, 1, 0: each launch adds into a zeroed set
    const int i = launch % 2;
    ASSERT_GT(kernels::launch_decode_attention(a, scratch, nullptr, rope, &s[i]), 0u);
    ASSERT_EQ(cudaGetLastError(), cudaSuccess);
    ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
    std::vector<float> got(2 * set);
    ASSERT_EQ(cudaMemcpy(got.data(), dsums, got.size() * sizeof(float), cudaMemcpyDeviceToHost), cudaSuccess);
    const float* o = got.data() + i * set;
    const float* l = o + 2 * qn;
    const float* other = got.data() + (1 - i) * set;
    for (std::size_t j = 0; j < set; ++j) ASSERT_EQ(other[j], 0.0f) << "launch " << launch << ": element " << j << " of the other set";
    double num = 0, den = 0;
    const double down = std::ldexp(1.0, -kernels::kSumsBucket);
    for (std::size_t j = 0; j < qn; ++j) {
      const double l0 = l[j / D], l1 = l[ln + j / D];
      const double x = l1 == 0 ? o[j] / l0 : (o[j] * down + o[qn + j]) / (l0 * down + l1);
      if (launch == 0 && j % D == 0 && l1 != 0) ++bucket1;
      ASSERT_TRUE(std::isfinite(x)) << "launch " << launch << ", element " << j << ": " << o[j] << " / " << l0;
      num += (x - ref[j]) * (x - ref[j]);
      den += static_cast<double>(ref[j]) * ref[j];
    }
    // Default splits: the same per-block results, summed in another order and scale. Other counts
    // cut the context elsewhere, so P is rounded to bf16 against other maxima: both outputs are
    // within test_decode_attention.cpp's 1/512 of float64 (measured here 1.2e-5 to 8.1e-5 apart;
    // a split left out or added twice moves the output by about 1 / splits, 1.5e-2 at 65 splits).
    EXPECT_LT(std::sqrt(num / den), splits == 0 ? 1e-5 : 1.0 / 512) << "launch " << launch;
    if (launch == 0)
      std::printf("[ measured ] relative L2 difference to the merged output: %.3g; heads with a bucket-1 share: %d\n",
                  std::sqrt(num / den), bucket1);
  }
  // key 0 below: every token with several splits puts head 0 of each group (at least) into bucket 1.
  if (key0 == Key0::below) {
    int multi = 0;
    for (int len : lens) multi += len > 64;
    EXPECT_GE(bucket1, multi * kv_heads);
  } else {
    EXPECT_EQ(bucket1, 0);
  }
  // Sums the launch cannot give: refused, nothing launched.
  kernels::DecodeAttentionSums bad = s[0];
  bad.o += 1;
  EXPECT_EQ(kernels::launch_decode_attention(a, scratch, nullptr, rope, &bad), 0u);
  bad = s[0];
  bad.clear_l = nullptr;
  EXPECT_EQ(kernels::launch_decode_attention(a, scratch, nullptr, rope, &bad), 0u);
  bad = s[0];
  bad.splits = -1;
  EXPECT_EQ(kernels::launch_decode_attention(a, scratch, nullptr, rope, &bad), 0u);
  bad.splits = kernels::kDecodeAttentionMaxSumSplits + 1;
  EXPECT_EQ(kernels::launch_decode_attention(a, scratch, nullptr, rope, &bad), 0u);
  kernels::set_decode_attention_tensor_cores(false);
  EXPECT_FALSE(kernels::decode_attention_sums_supported(a));
  EXPECT_EQ(kernels::launch_decode_attention(a, scratch, nullptr, rope, &s[0]), 0u);
  kernels::set_decode_attention_tensor_cores(true);
  for (void* p : {dk, dv, static_cast<void*>(dks), static_cast<void*>(dvs), static_cast<void*>(dq), static_cast<void*>(dqkv),
                  static_cast<void*>(dbias), static_cast<void*>(dfreq), static_cast<void*>(dtab), static_cast<void*>(doff),
                  static_cast<void*>(dctx), static_cast<void*>(dslots), static_cast<void*>(dpos), static_cast<void*>(dout),
                  static_cast<void*>(dsums), scratch})
    cudaFree(p);
}

INSTANTIATE_TEST_SUITE_P(
    Lengths, GpuDecodeAttentionSums,
    ::testing::Values(Param{{1}, 128, false, Key0::random, 0, false, false}, Param{{64}, 128, true, Key0::random, 0, false, false},
                      Param{{65, 1, 300}, 128, false, Key0::random, 0, false, false}, Param{{4096, 17}, 128, true, Key0::random, 0, false, false},
                      Param{{257, 33, 8193}, 128, true, Key0::random, 0, false, false}, Param{{300, 3001}, 64, false, Key0::random, 0, false, false},
                      Param{{257, 4096}, 64, true, Key0::random, 0, false, false}, Param{{4096, 700, 1}, 128, false, Key0::below, 0, false, false},
                      Param{{8193, 65}, 128, false, Key0::below, 0, false, false}, Param{{4096, 700}, 128, false, Key0::dominant, 0, false, false},
                      // More splits than the merge allows (the long-context graphs' 128, an odd count,
                      // one split: every context in one block of several rounds).
                      Param{{4160, 17}, 128, true, Key0::random, kernels::kDecodeAttentionLongSplits, false, false},
                      Param{{8193, 65, 1}, 128, false, Key0::below, kernels::kDecodeAttentionLongSplits, false, false},
                      Param{{300, 3001}, 64, true, Key0::random, 200, false, false}, Param{{4096, 700}, 128, false, Key0::dominant, 1, false, false},
                      // Every warp on half of head_dim (the decode step's launches from
                      // kDecodeAttentionHalvesFrom: several rounds per split), and at one round.
                      Param{{16384, 8193, 3}, 128, true, Key0::random, kernels::kDecodeAttentionLongSplits, true, false},
                      Param{{8193, 65, 1}, 128, false, Key0::below, kernels::kDecodeAttentionLongSplits, true, false},
                      Param{{4096, 700}, 128, false, Key0::dominant, 0, true, false}, Param{{257, 4096}, 64, true, Key0::random, 0, true, false},
                      // The int8 cache: the default, the long graphs' splits, and halves (the decode
                      // step's launches from kDecodeAttentionHalvesFrom with either cache).
                      Param{{4096, 17, 1}, 128, true, Key0::random, 0, false, true},
                      Param{{16384, 8193, 3}, 128, true, Key0::random, kernels::kDecodeAttentionLongSplits, false, true},
                      Param{{16384, 8193, 3}, 128, true, Key0::random, kernels::kDecodeAttentionLongSplits, true, true},
                      Param{{8193, 65, 1}, 128, false, Key0::below, kernels::kDecodeAttentionLongSplits, true, true},
                      Param{{257, 4096}, 64, true, Key0::random, 0, true, true}),
    param_name);

// The o product of x given as sums: y = W (sums / div) + residual, against the plain product of the
// host's quotients (rounded to fp32, what the kernel stages).
template <typename T>
void check_gemv_sums(int D) {
  if (!have_gpu()) GTEST_SKIP() << kernels::query_gpus().why_none;
  const int cols = 3584, heads = cols / D, rows = 3584;
  std::mt19937 rng(11);
  std::uniform_real_distribution<float> u(-1.0f, 1.0f);
  std::vector<T> w(static_cast<std::size_t>(rows) * cols);
  for (auto& e : w) e = from_f<T>(u(rng));
  std::vector<float> x(cols), res(rows);
  for (auto& e : x) e = u(rng);
  for (auto& e : res) e = u(rng);
  // Per group, by h % 4: bucket 0 only (divisors near 2^-60, 2^-20), both buckets (2^90 and 2^-30:
  // equal shares once bucket 0 is scaled by 2^-120), bucket 1 only.
  std::vector<float> sums(2 * cols), div(2 * heads), quot(cols);
  const double down = std::ldexp(1.0, -kernels::kSumsBucket);
  const int exps[] = {-60, -20, 90, 0};
  for (int h = 0; h < heads; ++h) {
    const int kind = h % 4;
    const float d0 = static_cast<float>(std::ldexp(1.0 + 0.5 * (u(rng) + 1.0f), exps[kind]));
    div[h] = kind == 3 ? 0.0f : d0;
    div[heads + h] = kind == 2 || kind == 3 ? static_cast<float>(std::ldexp(1.0 + 0.5 * (u(rng) + 1.0f), -30)) : 0.0f;
    for (int j = h * D; j < (h + 1) * D; ++j) {
      sums[j] = div[h] == 0.0f ? 0.0f : x[j] * div[h] * 0.75f;
      sums[cols + j] = div[heads + h] == 0.0f ? 0.0f : x[j] * div[heads + h] * 0.25f;
      const double q = div[heads + h] == 0.0f ? static_cast<double>(sums[j]) / div[h]
                                              : (sums[j] * down + sums[cols + j]) / (div[h] * down + div[heads + h]);
      quot[j] = static_cast<float>(q);
    }
  }
  auto *dw = upload(w), *dres = upload(res), *dres2 = upload(res);
  auto *dsums = upload(sums), *ddiv = upload(div);
  auto* dquot = upload(quot);
  float *dy = nullptr, *dy2 = nullptr;
  ASSERT_EQ(cudaMalloc(&dy, rows * 4), cudaSuccess);
  ASSERT_EQ(cudaMalloc(&dy2, rows * 4), cudaSuccess);
  ASSERT_EQ(cudaMemset(dy2, 0xFF, rows * 4), cudaSuccess);
  kernels::GemvArgsT<T> plain;
  plain.w = dw;
  plain.x = dquot;
  plain.residual = dres;
  plain.y = dres;
  plain.rows = rows;
  plain.cols = cols;
  kernels::GemvArgsT<T> s = plain;
  s.x = nullptr;
  s.x_sums = dsums;
  s.x_sum_div = ddiv;
  s.sum_group = D;
  s.residual = dres2;
  s.y = dres2;
  s.y2 = dy2;
  ASSERT_GT(kernels::launch_gemv(plain, nullptr), 0u);
  ASSERT_GT(kernels::launch_gemv(s, nullptr), 0u);
  ASSERT_EQ(cudaGetLastError(), cudaSuccess);
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  std::vector<float> y1(rows), y2(rows), y3(rows);
  ASSERT_EQ(cudaMemcpy(y1.data(), dres, rows * 4, cudaMemcpyDeviceToHost), cudaSuccess);
  ASSERT_EQ(cudaMemcpy(y2.data(), dres2, rows * 4, cudaMemcpyDeviceToHost), cudaSuccess);
  ASSERT_EQ(cudaMemcpy(y3.data(), dy2, rows * 4, cudaMemcpyDeviceToHost), cudaSuccess);
  for (int o = 0; o < rows; ++o) {
    double mag = std::fabs(res[o]);
    for (int j = 0; j < cols; ++j) mag += std::fabs(static_cast<double>(to_f(w[static_cast<std::size_t>(o) * cols + j])) * x[j]);
    // Both are within (cols / 32 + 20) u sum |w x| of the exact product (test_gemv.cpp's analysis;
    // the sums path scales each 8-term dot product by 1 / divisor instead of dividing x first).
    ASSERT_NEAR(y2[o], y1[o], 2.0 * (cols / 32 + 20) * mag / (1 << 24)) << "output " << o;
    ASSERT_EQ(y3[o], y2[o]) << "output " << o << ": the second copy";
  }
  EXPECT_TRUE(kernels::gemv_sums_supported(cols, D));
  EXPECT_FALSE(kernels::gemv_sums_supported(cols, 112));   // not a power of two
  EXPECT_FALSE(kernels::gemv_sums_supported(8192, 128));   // x beyond the 16 KB staging
  EXPECT_FALSE(kernels::gemv_sums_supported(4096, 16));    // 256 groups: more than a thread each
  // What the sums path refuses: a norm, a group that does not divide cols, misaligned sums.
  kernels::GemvArgsT<T> bad = s;
  bad.norm_weight = dw;
  EXPECT_EQ(kernels::launch_gemv(bad, nullptr), 0u);
  bad = s;
  bad.sum_group = 112;  // divides cols, not a power of two
  EXPECT_EQ(kernels::launch_gemv(bad, nullptr), 0u);
  bad.sum_group = 8;  // less than two 8-column vectors
  EXPECT_EQ(kernels::launch_gemv(bad, nullptr), 0u);
  bad = s;
  bad.x_sums = dsums + 1;  // misaligned
  EXPECT_EQ(kernels::launch_gemv(bad, nullptr), 0u);
  bad = s;
  bad.x_sum_div = nullptr;
  EXPECT_EQ(kernels::launch_gemv(bad, nullptr), 0u);
  for (void* p : {static_cast<void*>(dw), static_cast<void*>(dres), static_cast<void*>(dres2), static_cast<void*>(dsums),
                  static_cast<void*>(ddiv), static_cast<void*>(dquot), static_cast<void*>(dy), static_cast<void*>(dy2)})
    cudaFree(p);
}

TEST(GpuGemvSums, Bf16WeightsHeadDim128) { check_gemv_sums<__nv_bfloat16>(128); }
TEST(GpuGemvSums, F16WeightsHeadDim128) { check_gemv_sums<__half>(128); }
TEST(GpuGemvSums, Bf16WeightsHeadDim64) { check_gemv_sums<__nv_bfloat16>(64); }

}  // namespace
}  // namespace cosmos
