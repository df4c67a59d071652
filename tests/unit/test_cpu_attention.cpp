// The CPU backend's grouped-query attention (engine/src/cpu/cpu_attention.cpp) against a float64
// reference that attends head by head over the same paged cache: fp32 and int8 caches (the int8
// rows' values times their scales, exactly as the format defines them), contexts from 1 key to
// several splits, one token or a prompt's worth, 1 or 8 threads, and splits forced short
// (min_split 16) so that the merge of partial softmax sums runs on small contexts too. A wrong KV
// head for a query head, a missing scale or a merge weighted wrongly moves outputs by their own size.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <ostream>
#include <random>
#include <string>
#include <vector>

#include "cpu/cpu_attention.h"

namespace cosmos {
namespace {

struct Row {
  const char* name;
  bool int8;
  std::vector<int> lens;  // per token: keys it sees
  int threads;
  int min_split;
};
void PrintTo(const Row& r, std::ostream* os) { *os << r.name; }

class CpuAttention : public ::testing::TestWithParam<Row> {};

TEST_P(CpuAttention, MatchesFloat64HeadByHead) {
  const Row& row = GetParam();
  const int heads = 28, kv_heads = 4, D = 128, G = heads / kv_heads, bs = 16;
  const int N = static_cast<int>(row.lens.size());
  // Each token its own sequence, blocks handed out in reverse (tables not in slot order).
  int total = 0;
  for (int l : row.lens) total += (l + bs - 1) / bs;
  std::vector<std::vector<int>> tables(N);
  int next = total - 1;
  for (int t = 0; t < N; ++t)
    for (int b = 0; b < (row.lens[t] + bs - 1) / bs; ++b) tables[t].push_back(next--);
  const std::size_t rows = static_cast<std::size_t>(total) * bs, kvd = static_cast<std::size_t>(kv_heads) * D;
  std::mt19937 g(7);
  std::normal_distribution<float> nd(0.0f, 1.0f);
  std::vector<float> k(rows * kvd), v(rows * kvd), ks(rows * kv_heads), vs(rows * kv_heads);
  std::vector<std::int8_t> k8(rows * kvd), v8(rows * kvd);
  for (std::size_t i = 0; i < rows * kvd; ++i) {
    k8[i] = static_cast<std::int8_t>(static_cast<int>(g() % 255) - 127);
    v8[i] = static_cast<std::int8_t>(static_cast<int>(g() % 255) - 127);
  }
  for (std::size_t i = 0; i < rows * kv_heads; ++i) {
    ks[i] = 0.02f * (1.0f + static_cast<float>(g() % 100) / 100.0f);
    vs[i] = 0.05f * (1.0f + static_cast<float>(g() % 100) / 100.0f);
  }
  // fp32 cache: the int8 rows' values times their scales (so both rows attend to the same keys).
  for (std::size_t r = 0; r < rows; ++r)
    for (int h = 0; h < kv_heads; ++h)
      for (int d = 0; d < D; ++d) {
        const std::size_t i = r * kvd + static_cast<std::size_t>(h) * D + d;
        k[i] = ks[r * kv_heads + h] * k8[i];
        v[i] = vs[r * kv_heads + h] * v8[i];
      }
  std::vector<float> q(static_cast<std::size_t>(N) * heads * D);
  for (float& x : q) x = nd(g);

  cpu::KvLayerView view;
  if (row.int8) {
    view.k8 = k8.data();
    view.v8 = v8.data();
    view.k_scale = ks.data();
    view.v_scale = vs.data();
  } else {
    view.k = k.data();
    view.v = v.data();
  }
  view.kv_heads = kv_heads;
  view.head_dim = D;
  view.block_size = bs;
  std::vector<cpu::AttentionQuery> queries;
  for (int t = 0; t < N; ++t) queries.push_back({tables[t], row.lens[t]});
  std::vector<float> out(q.size(), NAN);
  cpu::grouped_attention(view, queries, heads, q.data(), out.data(), row.threads, row.min_split);

  const double scale = 1.0 / std::sqrt(static_cast<double>(D));
  for (int t = 0; t < N; ++t) {
    const int len = row.lens[t];
    for (int h = 0; h < heads; ++h) {
      const int kvh = h / G;
      auto at = [&](int j) {
        const std::size_t r = static_cast<std::size_t>(tables[t][j / bs]) * bs + j % bs;
        return r * kvd + static_cast<std::size_t>(kvh) * D;
      };
      std::vector<double> s(len);
      double mx = -1e300;
      for (int j = 0; j < len; ++j) {
        double dot = 0;
        for (int d = 0; d < D; ++d) dot += static_cast<double>(q[(static_cast<std::size_t>(t) * heads + h) * D + d]) * k[at(j) + d];
        s[j] = dot * scale;
        mx = std::max(mx, s[j]);
      }
      double sum = 0;
      for (double& x : s) sum += (x = std::exp(x - mx));
      double worst = 0, mag = 0;
      for (int d = 0; d < D; ++d) {
        double o = 0, m = 0;
        for (int j = 0; j < len; ++j) {
          const double term = s[j] / sum * v[at(j) + d];
          o += term;
          m += std::fabs(term);
        }
        const float got = out[(static_cast<std::size_t>(t) * heads + h) * D + d];
        ASSERT_FALSE(std::isnan(got)) << "token " << t << " head " << h << " dim " << d << " not written";
        worst = std::max(worst, std::fabs(got - o));
        mag = std::max(mag, m);
      }
      // fp32 dot products and sums over up to a few thousand terms: relative to sum_j p_j |v_j|.
      ASSERT_LE(worst, 2e-5 * mag) << "token " << t << " (" << len << " keys) head " << h;
    }
  }
}

INSTANTIATE_TEST_SUITE_P(
    Rows, CpuAttention,
    ::testing::Values(Row{"fp32_one_key", false, {1}, 1, 256}, Row{"fp32_decode_3000", false, {3000}, 8, 256},
                      Row{"fp32_decode_split16", false, {37}, 8, 16}, Row{"fp32_prompt", false, {1, 2, 17, 64, 65}, 16, 16},
                      Row{"int8_one_key", true, {1}, 1, 256}, Row{"int8_decode_3000", true, {3000}, 8, 256},
                      Row{"int8_decode_split16", true, {37}, 8, 16}, Row{"int8_prompt", true, {1, 2, 17, 64, 65}, 16, 16},
                      Row{"int8_decode_one_thread", true, {700}, 1, 16}),
    [](const auto& p) { return std::string(p.param.name); });

}  // namespace
}  // namespace cosmos
