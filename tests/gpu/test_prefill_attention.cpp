// prefill_attention (tensor cores, bf16) against a float64 CPU reference computed from the same bf16
// values, over a paged cache with a shuffled block table. Each case launches several sequences at
// once with different q_len and ctx_start (a prompt continuing a cached prefix), lengths on and off
// the 64-row/64-key tile edges, head_dim 64 and 128, GQA groups 1, 2 and 7; every case with bf16 and
// with fp16 output (PrefillAttentionArgs::out_f16), and for each kernel: mma.sync, the Hopper wgmma
// kernel and the warp-specialized TMA kernel (head_dim 128 only; each skipped, saying why, where it
// cannot run). The automatic choice must give the same bits as the kernel it picks.
//
// Poison: `out` starts as NaN; the q rows between and after the sequences are NaN, and so are the
// cache slots no sequence owns and the slots of a sequence's last block past its length, so a read
// of a slot or row the kernel must not use shows as NaN. Rows outside the sequences must still hold
// the poison bits afterwards. The launch runs with PDL off and on; both results must be identical.
//
// Tolerance, per output element: the scores are exact products of bf16 values summed in fp32 and the
// softmax runs in fp32 (errors ~1e-6 relative); what remains is bf16 rounding (unit roundoff
// u = 2^-8) of (1) each probability p_j fed to the P V product, error <= u * sum_j p_j |v_j| / sum p,
// (2) the normalizer, summed from the unrounded p_j, which differs from the sum of the rounded ones
// by <= u relative, error <= u |o|, and (3) the output, <= u |o|. With A = sum_j p_j |v_j| / sum_j p_j
// (>= |o|) the error is at most 3u A; the test allows 4u A + 1e-5. Scores are made peaky (q has
// standard deviation 2, so a score has standard deviation 2 after the 1/sqrt(D) scale) so that each
// output is dominated by a few keys and a missing, extra or misplaced key shows well above that bound.
// The relative L2 error over all elements must also stay under 1e-2 (rounding alone gives ~2e-3).
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <numeric>
#include <random>
#include <sstream>
#include <string>
#include <tuple>
#include <vector>

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include "cuda_upload.h"
#include "kernels/device_info.cuh"
#include "kernels/pdl.cuh"
#include "kernels/prefill_attention.cuh"

namespace cosmos {
namespace {

struct Seq {
  int q_len, ctx_start;
};

struct Case {
  int heads, kv_heads, head_dim;
  std::vector<Seq> seqs;
};

std::ostream& operator<<(std::ostream& os, const Case& c) {
  os << c.heads << "/" << c.kv_heads << " heads, D " << c.head_dim << ", seqs";
  for (const auto& s : c.seqs) os << " (" << s.q_len << " new after " << s.ctx_start << ")";
  return os;
}

using Kernel = kernels::PrefillAttentionKernel;

const char* kernel_name(Kernel k) {
  return k == Kernel::tma ? "tma" : k == Kernel::wgmma ? "wgmma" : k == Kernel::mma ? "mma" : "automatic";
}

class GpuPrefillAttention : public ::testing::TestWithParam<std::tuple<Case, Kernel>> {
 protected:
  void SetUp() override {
    const auto q = kernels::query_gpus();
    if (q.gpus.empty()) GTEST_SKIP() << q.why_none;
    const Kernel k = std::get<1>(GetParam());
    if ((k == Kernel::wgmma || k == Kernel::tma) && !kernels::prefill_attention_wgmma_available())
      GTEST_SKIP() << "the Hopper kernels need a compute capability 9.0 GPU and a build for sm_90 (this GPU: sm_"
                   << q.gpus[0].sm_major << q.gpus[0].sm_minor << ")";
  }
  void TearDown() override { kernels::set_pdl_enabled(false); }
};

using testing::upload;

constexpr std::uint16_t kPoison = 0xFFFF;  // a NaN in bf16 and in fp16

__nv_bfloat16 bf16_bits(std::uint16_t bits) {
  __nv_bfloat16_raw r;
  r.x = bits;
  return __nv_bfloat16(r);
}


TEST_P(GpuPrefillAttention, MatchesFloat64Reference) {
  const Case c = std::get<0>(GetParam());
  const int heads = c.heads, kv_heads = c.kv_heads, D = c.head_dim, bs = 16;
  const int seqs = static_cast<int>(c.seqs.size());
  ASSERT_TRUE(kernels::prefill_attention_supports(heads, kv_heads, D));
  std::mt19937 rng(static_cast<unsigned>(heads * 1000 + D + seqs));
  std::normal_distribution<float> normal;

  // Rows in q / out: each sequence's rows, then a gap of 3 poisoned rows (and 3 more at the end).
  constexpr int kGap = 3;
  std::vector<std::int32_t> q_start(seqs), q_len(seqs), ctx_start(seqs), table_offset(seqs);
  int n = 0, max_q = 0, max_kv = 0, blocks = 0;
  for (int s = 0; s < seqs; ++s) {
    q_start[s] = n;
    q_len[s] = c.seqs[s].q_len;
    ctx_start[s] = c.seqs[s].ctx_start;
    n += q_len[s] + kGap;
    max_q = std::max(max_q, q_len[s]);
    max_kv = std::max(max_kv, ctx_start[s] + q_len[s]);
    table_offset[s] = blocks;
    blocks += (ctx_start[s] + q_len[s] + bs - 1) / bs;
  }
  // The cache has spare blocks nobody owns; the sequences' blocks are a shuffled subset.
  const int cache_blocks = blocks + 5;
  std::vector<int> perm(cache_blocks);
  std::iota(perm.begin(), perm.end(), 0);
  std::shuffle(perm.begin(), perm.end(), rng);
  std::vector<std::int32_t> tables(perm.begin(), perm.begin() + blocks);

  const std::size_t row = static_cast<std::size_t>(kv_heads) * D;  // elements per cache slot
  std::vector<__nv_bfloat16> q(static_cast<std::size_t>(n) * heads * D, bf16_bits(kPoison));
  std::vector<__nv_bfloat16> k(static_cast<std::size_t>(cache_blocks) * bs * row, bf16_bits(kPoison));
  std::vector<__nv_bfloat16> v(k.size(), bf16_bits(kPoison));
  for (int s = 0; s < seqs; ++s) {
    for (int j = 0; j < q_len[s]; ++j)
      for (std::size_t e = 0; e < static_cast<std::size_t>(heads) * D; ++e)
        q[(static_cast<std::size_t>(q_start[s]) + j) * heads * D + e] = __float2bfloat16(2.0f * normal(rng));
    for (int i = 0; i < ctx_start[s] + q_len[s]; ++i) {
      const std::size_t slot = static_cast<std::size_t>(tables[table_offset[s] + i / bs]) * bs + i % bs;
      for (std::size_t e = 0; e < row; ++e) {
        k[slot * row + e] = __float2bfloat16(normal(rng));
        v[slot * row + e] = __float2bfloat16(normal(rng));
      }
    }
  }

  auto *dq = upload(q), *dk = upload(k), *dv = upload(v);
  auto *dtab = upload(tables), *doff = upload(table_offset), *dqs = upload(q_start), *dql = upload(q_len),
       *dctx = upload(ctx_start);
  __nv_bfloat16* dout = nullptr;
  const std::size_t out_bytes = q.size() * sizeof(__nv_bfloat16);
  ASSERT_EQ(cudaMalloc(&dout, out_bytes), cudaSuccess);

  kernels::PrefillAttentionArgs a;
  a.q = dq;
  a.k_cache = dk;
  a.v_cache = dv;
  a.block_tables = dtab;
  a.table_offset = doff;
  a.q_start = dqs;
  a.q_len = dql;
  a.ctx_start = dctx;
  a.out = dout;
  a.seqs = seqs;
  a.heads = heads;
  a.kv_heads = kv_heads;
  a.head_dim = D;
  a.block_size = bs;
  a.n = n;
  a.max_q_len = max_q + 70;  // more tiles than needed: the extra ones must exit without writing
  a.max_kv_len = max_kv;
  a.kv_slots = cache_blocks * bs;
  a.scale = 1.0f / std::sqrt(static_cast<float>(D));
  a.kernel = std::get<1>(GetParam());

  // Both output types (bf16, and fp16 for fp16 weights); the reference and the tolerance are the same:
  // fp16's rounding (2^-11) is finer than bf16's (2^-8).
  for (const bool f16 : {false, true}) {
    SCOPED_TRACE(f16 ? "fp16 output" : "bf16 output");
    a.out_f16 = f16;
    auto value = [&](std::uint16_t bits) -> double {
      if (f16) {
        __half_raw r;
        r.x = bits;
        return __half2float(__half(r));
      }
      return __bfloat162float(bf16_bits(bits));
    };
    std::vector<std::uint16_t> out(q.size()), out_pdl(q.size());  // output bits
    for (int pdl = 0; pdl < 2; ++pdl) {
      kernels::set_pdl_enabled(pdl == 1);
      ASSERT_EQ(cudaMemset(dout, 0xFF, out_bytes), cudaSuccess);
      EXPECT_GT(kernels::launch_prefill_attention(a, nullptr), 0u);
      ASSERT_EQ(cudaGetLastError(), cudaSuccess);
      ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
      ASSERT_EQ(cudaMemcpy(pdl ? out_pdl.data() : out.data(), dout, out_bytes, cudaMemcpyDeviceToHost), cudaSuccess);
    }
    kernels::set_pdl_enabled(false);
    EXPECT_EQ(std::memcmp(out.data(), out_pdl.data(), out_bytes), 0) << "results differ with PDL on";
    // The kernel the automatic choice runs here: the TMA one where it supports the arguments, else wgmma.
    if (a.kernel == Kernel::tma || (a.kernel == Kernel::wgmma && !kernels::prefill_attention_tma_supports(a))) {
      const Kernel forced = a.kernel;
      std::vector<std::uint16_t> out_auto(q.size());
      a.kernel = Kernel::automatic;
      ASSERT_EQ(cudaMemset(dout, 0xFF, out_bytes), cudaSuccess);
      EXPECT_GT(kernels::launch_prefill_attention(a, nullptr), 0u);
      ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
      ASSERT_EQ(cudaMemcpy(out_auto.data(), dout, out_bytes, cudaMemcpyDeviceToHost), cudaSuccess);
      a.kernel = forced;
      EXPECT_EQ(std::memcmp(out.data(), out_auto.data(), out_bytes), 0)
          << "the automatic choice is not the " << kernel_name(forced) << " kernel";
    }

    // Rows outside the sequences keep the poison.
    std::vector<char> owned(n, 0);
    for (int s = 0; s < seqs; ++s) std::fill(owned.begin() + q_start[s], owned.begin() + q_start[s] + q_len[s], 1);
    int stray = 0;
    for (int r = 0; r < n; ++r)
      if (!owned[r])
        for (std::size_t e = 0; e < static_cast<std::size_t>(heads) * D; ++e)
          stray += out[static_cast<std::size_t>(r) * heads * D + e] != kPoison;
    EXPECT_EQ(stray, 0) << "elements written outside the sequences' rows";

    // The reference reads the same bf16 values, widened once.
    auto widen = [](const std::vector<__nv_bfloat16>& x) {
      std::vector<double> w(x.size());
      for (std::size_t i = 0; i < x.size(); ++i) w[i] = __bfloat162float(x[i]);
      return w;
    };
    const std::vector<double> qd = widen(q), kd = widen(k), vd = widen(v);
    const double u = 1.0 / 256;  // bf16 unit roundoff
    double num = 0, den = 0, worst = 0;
    int bad = 0;
    std::vector<double> sc, acc(D), aabs(D);
    for (int s = 0; s < seqs; ++s) {
      for (int j = 0; j < q_len[s]; ++j) {
        const int len = ctx_start[s] + j + 1;
        sc.resize(len);
        for (int h = 0; h < heads; ++h) {
          const int kvh = h / (heads / kv_heads);
          const double* qr = &qd[((static_cast<std::size_t>(q_start[s]) + j) * heads + h) * D];
          double mx = -1e300;
          for (int i = 0; i < len; ++i) {
            const std::size_t slot = static_cast<std::size_t>(tables[table_offset[s] + i / bs]) * bs + i % bs;
            const double* kr = &kd[slot * row + static_cast<std::size_t>(kvh) * D];
            double dot = 0;
            for (int d = 0; d < D; ++d) dot += qr[d] * kr[d];
            sc[i] = dot * a.scale;
            mx = std::max(mx, sc[i]);
          }
          double sum = 0;
          std::fill(acc.begin(), acc.end(), 0.0);
          std::fill(aabs.begin(), aabs.end(), 0.0);
          for (int i = 0; i < len; ++i) {
            const double p = std::exp(sc[i] - mx);
            sum += p;
            const std::size_t slot = static_cast<std::size_t>(tables[table_offset[s] + i / bs]) * bs + i % bs;
            const double* vr = &vd[slot * row + static_cast<std::size_t>(kvh) * D];
            for (int d = 0; d < D; ++d) {
              acc[d] += p * vr[d];
              aabs[d] += p * std::fabs(vr[d]);
            }
          }
          const std::size_t base = ((static_cast<std::size_t>(q_start[s]) + j) * heads + h) * D;
          for (int d = 0; d < D; ++d) {
            const double ref = acc[d] / sum, bound = 4 * u * aabs[d] / sum + 1e-5;
            const double got = value(out[base + d]);
            const double err = std::fabs(got - ref);
            if (!(err <= bound)) {  // also catches NaN
              if (bad < 5)
                ADD_FAILURE() << "seq " << s << " token " << j << " head " << h << " dim " << d << ": got " << got
                              << ", want " << ref << " (bound " << bound << ")";
              ++bad;
            }
            worst = std::max(worst, err / bound);
            num += (got - ref) * (got - ref);
            den += ref * ref;
          }
        }
      }
    }
    EXPECT_EQ(bad, 0) << "elements out of tolerance";
    const double rel = std::sqrt(num / den);
    EXPECT_LT(rel, 1e-2);
    std::ostringstream info;
    info << kernel_name(a.kernel) << (f16 ? ", fp16 out: " : ", bf16 out: ") << "relative L2 error " << rel
         << ", worst error / bound " << worst;
    RecordProperty("accuracy", info.str());
    std::printf("[ info     ] %s\n", info.str().c_str());
  }

  for (void* p : {static_cast<void*>(dq), static_cast<void*>(dk), static_cast<void*>(dv), static_cast<void*>(dtab),
                  static_cast<void*>(doff), static_cast<void*>(dqs), static_cast<void*>(dql),
                  static_cast<void*>(dctx), static_cast<void*>(dout)})
    cudaFree(p);
}

// Every case with each kernel that takes its head_dim (the TMA kernel: 128 only).
std::vector<std::tuple<Case, Kernel>> cases() {
  const std::vector<Case> shapes = {
      // The 7B model's shape (group 7): tile-edge lengths, continued prompts, one long prompt.
      Case{28, 4, 128, {{1, 0}, {17, 5}, {63, 0}, {64, 64}, {65, 100}, {200, 37}}},
      Case{28, 4, 128, {{1030, 0}, {1, 1029}}},
      // Group 1 (heads == kv_heads), head_dim 64 (the tiny test model's).
      Case{4, 4, 64, {{1, 0}, {64, 0}, {65, 3}, {1023, 333}, {17, 1000}}},
      // Group 2, head_dim 128 and 64.
      Case{8, 4, 128, {{200, 0}, {1, 47}, {63, 1}, {130, 16}, {1001, 0}}},
      Case{4, 2, 64, {{129, 0}, {64, 63}, {2, 127}}},
      // Group 7, head_dim 64.
      Case{14, 2, 64, {{100, 0}, {64, 15}, {1, 0}}}};
  std::vector<std::tuple<Case, Kernel>> v;
  for (const Case& c : shapes)
    for (const Kernel k : {Kernel::mma, Kernel::wgmma, Kernel::tma})
      if (k != Kernel::tma || c.head_dim == 128) v.emplace_back(c, k);
  return v;
}

INSTANTIATE_TEST_SUITE_P(Shapes, GpuPrefillAttention, ::testing::ValuesIn(cases()),
                         [](const ::testing::TestParamInfo<std::tuple<Case, Kernel>>& p) {
                           return std::to_string(p.index) + "_" + kernel_name(std::get<1>(p.param));
                         });

}  // namespace
}  // namespace cosmos
