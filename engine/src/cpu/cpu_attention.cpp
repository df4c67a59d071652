#include "cpu/cpu_attention.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "cpu/cpu_ops.h"

namespace cosmos::cpu {
namespace {

constexpr std::size_t kDirect = std::numeric_limits<std::size_t>::max();

// Keys [j0, j1) of token t for KV head kvh. part: where its partial goes (G maxima, G sums, then
// [G, head_dim] unnormalized outputs), or kDirect when it is the pair's only split (it writes out).
struct Item {
  int t = 0, kvh = 0, j0 = 0, j1 = 0;
  std::size_t part = kDirect;
};

// The G heads' scores over the item's keys, their softmax terms, and sum_j exp(s_j - m) v_j.
// s: scratch [G, j1 - j0]. m, l: [G]; o: [G, head_dim].
void attend_item(const KvLayerView& kv, const AttentionQuery& tok, const Item& it, int G, const float* qg,
                 std::vector<float>& s, float* m, float* l, float* o) {
  const int D = kv.head_dim, n = it.j1 - it.j0, bs = kv.block_size;
  const std::size_t row_elems = static_cast<std::size_t>(kv.kv_heads) * D;
  const float scale = 1.0f / std::sqrt(static_cast<float>(D));
  s.resize(static_cast<std::size_t>(G) * n);
  auto row_of = [&](int j) {
    return static_cast<std::size_t>(tok.table[j / bs]) * bs + static_cast<std::size_t>(j % bs);
  };
  for (int jj = 0; jj < n; ++jj) {
    const std::size_t row = row_of(it.j0 + jj), at = row * row_elems + static_cast<std::size_t>(it.kvh) * D;
    if (kv.int8()) {
      // The row's scale factors out of the dot product (cosmos/kv_format.h).
      const float ks = kv.k_scale[row * kv.kv_heads + it.kvh] * scale;
      for (int g = 0; g < G; ++g) s[static_cast<std::size_t>(g) * n + jj] = dot_i8(qg + g * D, kv.k8 + at, D) * ks;
    } else {
      for (int g = 0; g < G; ++g) s[static_cast<std::size_t>(g) * n + jj] = dot(qg + g * D, kv.k + at, D) * scale;
    }
  }
  for (int g = 0; g < G; ++g) {
    float* sg = s.data() + static_cast<std::size_t>(g) * n;
    const float mx = *std::max_element(sg, sg + n);
    float sum = 0.0f;
    for (int jj = 0; jj < n; ++jj) sum += (sg[jj] = std::exp(sg[jj] - mx));
    m[g] = mx;
    l[g] = sum;
  }
  std::fill_n(o, static_cast<std::size_t>(G) * D, 0.0f);
  for (int jj = 0; jj < n; ++jj) {
    const std::size_t row = row_of(it.j0 + jj), at = row * row_elems + static_cast<std::size_t>(it.kvh) * D;
    const float vs = kv.int8() ? kv.v_scale[row * kv.kv_heads + it.kvh] : 1.0f;
    for (int g = 0; g < G; ++g) {
      const float p = s[static_cast<std::size_t>(g) * n + jj];
      if (kv.int8())
        axpy_i8(p * vs, kv.v8 + at, o + static_cast<std::size_t>(g) * D, D);
      else
        axpy(p, kv.v + at, o + static_cast<std::size_t>(g) * D, D);
    }
  }
}

}  // namespace

void grouped_attention(const KvLayerView& kv, std::span<const AttentionQuery> tokens, int heads, const float* q,
                       float* out, int threads, int min_split) {
  const int N = static_cast<int>(tokens.size()), KVH = kv.kv_heads, D = kv.head_dim, G = heads / KVH;
  const std::size_t part_floats = static_cast<std::size_t>(G) * (D + 2);
  // Splits: enough work items for ~4 per thread when there are few (token, KV head) pairs, no
  // split shorter than min_split keys.
  const int pairs = N * KVH;
  const int want = std::max(1, (4 * std::max(threads, 1) + pairs - 1) / std::max(pairs, 1));
  std::vector<Item> items;
  std::vector<int> pair_first(static_cast<std::size_t>(pairs) + 1, 0);  // [pairs + 1] items of each pair
  std::size_t parts = 0;
  for (int t = 0; t < N; ++t) {
    const int len = tokens[t].len;
    const int splits = std::clamp((len + min_split - 1) / std::max(min_split, 1), 1, want);
    const int per = (len + splits - 1) / splits;
    for (int kvh = 0; kvh < KVH; ++kvh) {
      pair_first[static_cast<std::size_t>(t) * KVH + kvh] = static_cast<int>(items.size());
      for (int j0 = 0; j0 < len; j0 += per)
        items.push_back({t, kvh, j0, std::min(len, j0 + per), splits > 1 ? parts++ : kDirect});
    }
  }
  pair_first[pairs] = static_cast<int>(items.size());
  std::vector<float> partial(parts * part_floats);  // per split of a split pair: m [G], l [G], o [G, D]

#pragma omp parallel num_threads(threads)
  {
    std::vector<float> s, direct(part_floats);
#pragma omp for schedule(dynamic)
    for (std::size_t i = 0; i < items.size(); ++i) {
      const Item& it = items[i];
      const float* qg = q + (static_cast<std::size_t>(it.t) * heads + static_cast<std::size_t>(it.kvh) * G) * D;
      float* p = it.part == kDirect ? direct.data() : partial.data() + it.part * part_floats;
      attend_item(kv, tokens[it.t], it, G, qg, s, p, p + G, p + 2 * G);
      if (it.part != kDirect) continue;
      float* og = out + (static_cast<std::size_t>(it.t) * heads + static_cast<std::size_t>(it.kvh) * G) * D;
      for (int g = 0; g < G; ++g)
        for (int d = 0; d < D; ++d) og[g * D + d] = p[2 * G + g * D + d] / p[G + g];
    }
    // Merge the split pairs: out = sum_s o_s e^(m_s - M) / sum_s l_s e^(m_s - M).
#pragma omp for schedule(dynamic)
    for (int pair = 0; pair < pairs; ++pair) {
      const int a = pair_first[pair], b = pair_first[pair + 1];
      if (b - a < 2) continue;  // written directly
      float* og = out + static_cast<std::size_t>(pair) * G * D;  // pair = t * KVH + kvh: heads t * heads + kvh * G
      for (int g = 0; g < G; ++g) {
        float M = -INFINITY;
        for (int i = a; i < b; ++i) M = std::max(M, partial[items[i].part * part_floats + g]);
        float L = 0.0f;
        std::fill_n(og + g * D, D, 0.0f);
        for (int i = a; i < b; ++i) {
          const float* p = partial.data() + items[i].part * part_floats;
          const float w = std::exp(p[g] - M);
          L += p[G + g] * w;
          axpy(w, p + 2 * G + static_cast<std::size_t>(g) * D, og + g * D, D);
        }
        for (int d = 0; d < D; ++d) og[g * D + d] /= L;
      }
    }
  }
}

}  // namespace cosmos::cpu
