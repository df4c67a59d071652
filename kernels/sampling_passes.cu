// GPU sampling, the passes before the draw (see sampling.cuh for what each does and costs): prep
// (workspace zeroing, repetition penalty), stats, top-k (2 passes), total, top-p (3 passes) and
// tie, with their host launchers. Shared definitions: sampling_detail.cuh; the draw (final,
// probs): sampling_draw.cu; launch_sample() in sampling.cu chains them.
#include <climits>
#include <cstddef>

#include "kernels/sampling_detail.cuh"

namespace cosmos::kernels::sampling_detail {
namespace {

// Zeroes the ticket counters and histograms (`words` 16-byte words, grid-stride over all blocks),
// then the repetition penalty, each distinct history id once: block b of a row owns the ids
// [b * kPenaltyIds, (b + 1) * kPenaltyIds), reads the whole history, and the entry that sets an
// id's bit in the block's shared bitset applies the penalty to it.
__global__ void __launch_bounds__(kThreads) prep_kernel(Job j, uint4* zero, std::size_t words, bool penalty) {
  pdl_wait();
  pdl_launch_dependents();
  const std::size_t flat = (static_cast<std::size_t>(blockIdx.y) * gridDim.x + blockIdx.x) * kThreads + threadIdx.x;
  const std::size_t stride = static_cast<std::size_t>(gridDim.x) * gridDim.y * kThreads;
  for (std::size_t i = flat; i < words; i += stride) zero[i] = make_uint4(0u, 0u, 0u, 0u);
  if (!penalty) return;
  const int row = blockIdx.y;
  const float rp = effective(j.params[row]).rp;
  if (rp == 1.0f) return;
  __shared__ unsigned bits[kPenaltyIds / 32];
  for (int i = threadIdx.x; i < kPenaltyIds / 32; i += kThreads) bits[i] = 0;
  __syncthreads();
  const int lo = static_cast<int>(blockIdx.x) * kPenaltyIds;
  const int hi = min(j.vocab, lo + kPenaltyIds);
  const int begin = j.hoff[row], end = j.hoff[row + 1];
  float* x = j.logits + static_cast<std::size_t>(row) * j.vocab;
  constexpr int kBatch = kHistBatch;
  for (int i0 = begin; i0 < end; i0 += kThreads * kBatch) {
    int ids[kBatch];
#pragma unroll
    for (int q = 0; q < kBatch; ++q) {
      const int i = i0 + q * kThreads + static_cast<int>(threadIdx.x);
      ids[q] = i < end ? j.history[i] : -1;
    }
#pragma unroll
    for (int q = 0; q < kBatch; ++q) {
      const int id = ids[q];
      if (id < lo || id >= hi) {
        ids[q] = -1;
        continue;
      }
      const unsigned bit = 1u << ((id - lo) & 31);
      if (atomicOr(&bits[(id - lo) >> 5], bit) & bit) ids[q] = -1;  // another entry has it
    }
    float v[kBatch];
#pragma unroll
    for (int q = 0; q < kBatch; ++q) v[q] = ids[q] >= 0 ? x[ids[q]] : 0.0f;
#pragma unroll
    for (int q = 0; q < kBatch; ++q)
      if (ids[q] >= 0) x[ids[q]] = v[q] < 0.0f ? v[q] * rp : v[q] / rp;
  }
}

// NaN -> -inf, max and first argmax (before the temperature), logits / t written back, the first
// top-k digit's histogram. Last block: the row's mode (greedy rows get their id here) and the
// first top-k digit.
__global__ void __launch_bounds__(kThreads) stats_kernel(Job j, Ws w) {
  pdl_wait();
  pdl_launch_dependents();
  const int row = blockIdx.y;
  const Slice sl = slice(j);
  float* x = j.logits + sl.off;
  float v[kItems];
  load_items(x, sl.base, j.vocab, v, -kInf);
  const Eff e = effective(j.params[row]);
  // All-greedy launches run no prep pass: the repetition penalty of this block's 1,024 ids is
  // applied here, each distinct history id once (a shared bitset), to the raw logit as prep would.
  bool penalized = false;
  if (j.stats_penalty && e.rp != 1.0f) {  // uniform in the block
    __shared__ unsigned bits[kChunk / 32];
    for (int i = threadIdx.x; i < kChunk / 32; i += kThreads) bits[i] = 0;
    __syncthreads();
    const int lo = static_cast<int>(blockIdx.x) * kChunk;
    const int begin = j.hoff[row], end = j.hoff[row + 1];
    for (int i0 = begin; i0 < end; i0 += kThreads * kHistBatch) {
      int ids[kHistBatch];  // independent loads in flight per thread (a long history is many rounds)
#pragma unroll
      for (int q = 0; q < kHistBatch; ++q) {
        const int i = i0 + q * kThreads + static_cast<int>(threadIdx.x);
        ids[q] = i < end ? j.history[i] : -1;
      }
#pragma unroll
      for (int q = 0; q < kHistBatch; ++q) {
        const int id = ids[q];
        if (id >= lo && id < lo + kChunk && id < j.vocab) atomicOr(&bits[(id - lo) >> 5], 1u << ((id - lo) & 31));
      }
    }
    __syncthreads();
#pragma unroll
    for (int it = 0; it < kItems; ++it) {
      const int k = sl.base + it - lo;
      if (sl.base + it < j.vocab && (bits[k >> 5] >> (k & 31) & 1u)) {
        v[it] = v[it] < 0.0f ? v[it] * e.rp : v[it] / e.rp;
        penalized = true;
      }
    }
  }
  const bool greedy = j.all_greedy || e.t <= 0.0f;
  const bool divide = !greedy && e.t != 1.0f;
  const bool topk = j.top_k && !greedy && e.k > 0 && e.k < j.vocab;
  __shared__ unsigned hist[kBins];
  if (topk) zero_hist(hist);
  Best<float> best{-kInf, INT_MAX};
  bool any_nan = false;
#pragma unroll
  for (int it = 0; it < kItems; ++it) {
    if (isnan(v[it])) {
      v[it] = -kInf;
      any_nan = true;
    }
    if (v[it] > best.v) best = Best<float>{v[it], sl.base + it};  // index order: the first maximum
    if (divide) {
      v[it] = v[it] / e.t;
      if (isnan(v[it])) v[it] = -kInf;  // only for t = inf (rejected by validate())
    }
    if (topk && sl.base + it < j.vocab) atomicAdd(&hist[key_of(v[it]) >> 21], 1u);
  }
  if (any_nan || divide || penalized) store_items(x, sl.base, j.vocab, v);
  best = block_best(best);
  const std::size_t first = static_cast<std::size_t>(row) * w.nb;
  if (threadIdx.x == 0) {
    w.part_f[first + blockIdx.x] = best.v;
    w.part_i[first + blockIdx.x] = best.i;
  }
  unsigned* ghist = w.hist_k + static_cast<std::size_t>(row) * 3 * kBins;
  if (topk) flush_hist(ghist, hist, kBins);
  if (!arrive_last(&w.counters[row * kCounters + kCtrStats])) return;
  if (threadIdx.x == 0) w.counters[row * kCounters + kCtrStats] = 0;  // for the next launch (no prep when greedy)

  Best<float> r{-kInf, INT_MAX};
  for (int b = threadIdx.x; b < w.nb; b += kThreads)
    r = better(r, Best<float>{__ldcg(&w.part_f[first + b]), __ldcg(&w.part_i[first + b])});
  r = block_best(r);
  RowState s{};
  s.mode = kSingle;
  s.token = 0;
  const float xmax = r.v;
  if (xmax == -kInf) {
    s.token = 0;  // no usable logit
  } else if (greedy) {
    s.token = r.i;
  } else if (xmax == kInf) {
    s.mode = kPosInf;
  } else if (e.t != 1.0f && isinf(xmax / e.t)) {
    s.token = r.i;  // overflow: the t -> 0 limit is greedy
  } else {
    s.mode = kSample;
    s.token = r.i;  // the first maximum: the answer if top-p finds it dominant (topp pass 0)
    s.M = e.t != 1.0f ? xmax / e.t : xmax;
    s.use_topk = topk;
    s.use_topp = j.top_p && e.top_p < 1.0f;
    s.use_minp = e.min_p > 0.0f;
    s.thr = s.use_topp ? top_p_threshold(e.top_p) : 0.0f;
    s.min_p = e.min_p;
  }
  if (s.use_topk) {  // uniform in the block
    for (int b = threadIdx.x; b < kBins; b += kThreads) hist[b] = __ldcg(&ghist[b]);
    __syncthreads();
    int bin;
    unsigned above;
    select_from_top(hist, kBins, static_cast<unsigned>(e.k), bin, above);
    s.k_prefix0 = static_cast<unsigned>(bin) << 21;
    s.k_rem0 = static_cast<unsigned>(e.k) - above;
  }
  if (threadIdx.x == 0) {
    if (s.mode == kSingle) write_id(j, row, s.token);
    w.state[row] = s;
  }
}

// Top-k select, digit 2 (pass 1: key bits 20..10) and digit 3 (pass 2: bits 9..0; its prologue
// finishes digit 2).
__global__ void __launch_bounds__(kThreads) topk_kernel(Job j, Ws w, int pass) {
  pdl_wait();
  pdl_launch_dependents();
  const int row = blockIdx.y;
  const Slice sl = slice(j);
  float y[kItems];
  load_items(j.logits + sl.off, sl.base, j.vocab, y, -kInf);
  const RowState st = w.state[row];
  if (st.mode != kSample || !st.use_topk) return;
  __shared__ unsigned hist[kBins];
  unsigned* ghist = w.hist_k + static_cast<std::size_t>(row) * 3 * kBins;
  unsigned prefix = st.k_prefix0;
  if (pass == 2) {
    load_hist(hist, ghist + kBins, kBins);
    int bin;
    unsigned above;
    select_from_top(hist, kBins, st.k_rem0, bin, above);
    prefix |= static_cast<unsigned>(bin) << 10;
    if (block0_thread0()) {
      w.state[row].k_prefix1 = prefix;
      w.state[row].k_rem1 = st.k_rem0 - above;
    }
  }
  zero_hist(hist);
  const unsigned mask = pass == 1 ? 0xffe00000u : 0xfffffc00u;
  const int shift = pass == 1 ? 10 : 0;
  const unsigned dmask = pass == 1 ? 0x7ffu : 0x3ffu;
#pragma unroll
  for (int it = 0; it < kItems; ++it) {
    const unsigned k = key_of(y[it]);
    if (sl.base + it < j.vocab && (k & mask) == prefix) atomicAdd(&hist[(k >> shift) & dmask], 1u);
  }
  flush_hist(ghist + pass * kBins, hist, static_cast<int>(dmask) + 1);
}

// The candidates' weights w = fp32(exp(y - M)) (kept by top-k; 0 otherwise, -inf and underflow too)
// into wbuf, computed once for all later passes, and the blocks' sums of them. Its prologue
// finishes the top-k select: the k-th largest key.
__global__ void __launch_bounds__(kThreads) total_kernel(Job j, Ws w) {
  pdl_wait();
  pdl_launch_dependents();
  const int row = blockIdx.y;
  const Slice sl = slice(j);
  float y[kItems], wv[kItems];
  load_items(j.logits + sl.off, sl.base, j.vocab, y, -kInf);
  const RowState st = w.state[row];
  if (st.mode != kSample) return;
  unsigned kth = 0;
  if (st.use_topk) {
    __shared__ unsigned hist[kBins];
    load_hist(hist, w.hist_k + (static_cast<std::size_t>(row) * 3 + 2) * kBins, 1024);
    int bin;
    unsigned above;
    select_from_top(hist, 1024, st.k_rem1, bin, above);
    kth = st.k_prefix1 | static_cast<unsigned>(bin);
    if (block0_thread0()) w.state[row].kth_key = kth;
  }
  double sum = 0.0;
#pragma unroll
  for (int it = 0; it < kItems; ++it) {
    wv[it] = key_of(y[it]) >= kth ? weight_of(y[it], st.M) : 0.0f;
    sum += wv[it];
  }
  store_items(w.wbuf + sl.off, sl.base, j.vocab, wv);
  sum = block_sum(sum);
  if (threadIdx.x == 0) w.part_d[static_cast<std::size_t>(row) * w.nb + blockIdx.x] = sum;
}

// T = the sum of the candidates' weights, from total's block sums in a fixed order.
__device__ double row_total(const Ws& w, int row) {
  const double* p = w.part_d + static_cast<std::size_t>(row) * w.nb;
  double s = 0.0;
  for (int b = threadIdx.x; b < w.nb; b += kThreads) s += p[b];
  return block_sum(s);
}

// Top-p select on the probability mass p = fp32(w / T) in ascending key order, digit `pass + 1`
// (0: key bits 31..21, 1: 20..10, 2: 9..0); the prologue finishes the digit before (pass 0: T).
__global__ void __launch_bounds__(kThreads) topp_kernel(Job j, Ws w, int pass) {
  pdl_wait();
  pdl_launch_dependents();
  const int row = blockIdx.y;
  const Slice sl = slice(j);
  float y[kItems], wv[kItems];
  load_items(j.logits + sl.off, sl.base, j.vocab, y, -kInf);
  load_items(w.wbuf + sl.off, sl.base, j.vocab, wv, 0.0f);
  const RowState st = w.state[row];
  if (st.mode != kSample || !st.use_topp) return;
  if (pass == 2 && st.p_none) return;
  __shared__ unsigned long long hist[kBins];
  unsigned long long* ghist = w.hist_p + static_cast<std::size_t>(row) * 3 * kBins;
  RowState& out = w.state[row];
  double T;
  unsigned prefix = 0;
  if (pass == 0) {
    T = row_total(w, row);
    // A dominant token: the top token's weight is exp(0) = 1, so T - 1 is the others' weight. When
    // their mass is clearly at most fp32(1 - top_p) (a 1e-5 margin over the rounding of the p's
    // and their fixed-point sum), the ascending cumulative sum stays <= 1 - top_p up to the top
    // token, so top-p keeps it alone and the draw can only return it, whatever top-k, min-p and the
    // random number do; T - 1 < 0.5 rules out a tie at the maximum, where HF would keep the highest
    // id. Every block of the row sees the same T and returns; block 0 writes the id and the mode,
    // and the later passes (2 top-p digits, the ties, the draw) return at once for the row.
    const double others = T - 1.0;
    if (others < 0.5 && others <= static_cast<double>(st.thr) * T * (1.0 - 1e-5)) {
      if (block0_thread0()) {
        out.mode = kSingle;
        write_id(j, row, st.token);
      }
      return;
    }
    if (block0_thread0()) out.T = T;
  } else {
    T = st.T;
    load_hist(hist, ghist + (pass - 1) * kBins, kBins);
    int bin = 0;
    unsigned long long below = 0;
    const bool found = select_mass_from_bottom(hist, kBins, pass == 1 ? 0ull : st.p_below1, st.thr, bin, below);
    if (!found) {  // fp32(total) <= thr (pass 1 only; pass 2 finds a digit by construction): keep the top
      if (block0_thread0()) {
        out.p_none = 1;
        out.pkey = key_of(st.M);
      }
      return;
    }
    prefix = pass == 1 ? static_cast<unsigned>(bin) << 21 : st.p_prefix1 | (static_cast<unsigned>(bin) << 10);
    if (block0_thread0()) {
      if (pass == 1) {
        out.p_prefix1 = prefix;
        out.p_below1 = below;
      } else {
        out.p_prefix2 = prefix;
        out.p_below2 = below;
      }
    }
  }
  zero_hist(hist);
  const unsigned mask = pass == 0 ? 0u : pass == 1 ? 0xffe00000u : 0xfffffc00u;
  const int shift = pass == 0 ? 21 : pass == 1 ? 10 : 0;
  const unsigned dmask = pass == 2 ? 0x3ffu : 0x7ffu;
#pragma unroll
  for (int it = 0; it < kItems; ++it) {
    const unsigned k = key_of(y[it]);
    if (!(wv[it] > 0.0f) || (k & mask) != prefix) continue;
    const unsigned long long fx = fixed_of(prob_of(wv[it], T));
    if (fx) atomicAdd(&hist[(k >> shift) & dmask], fx);
  }
  flush_hist(ghist + pass * kBins, hist, static_cast<int>(dmask) + 1);
}

// The tokens at the boundary key pkey (ties, removed by ascending id): their count per block, and
// the weight above pkey. The prologue finishes the top-p select: pkey and the mass below it.
__global__ void __launch_bounds__(kThreads) tie_kernel(Job j, Ws w) {
  pdl_wait();
  pdl_launch_dependents();
  const int row = blockIdx.y;
  const Slice sl = slice(j);
  float y[kItems], wv[kItems];
  load_items(j.logits + sl.off, sl.base, j.vocab, y, -kInf);
  load_items(w.wbuf + sl.off, sl.base, j.vocab, wv, 0.0f);
  const RowState st = w.state[row];
  if (st.mode != kSample || !st.use_topp) return;
  unsigned pkey = st.pkey;
  if (!st.p_none) {
    __shared__ unsigned long long hist[kBins];
    load_hist(hist, w.hist_p + (static_cast<std::size_t>(row) * 3 + 2) * kBins, 1024);
    int bin = 0;
    unsigned long long below = 0;
    const bool found = select_mass_from_bottom(hist, 1024, st.p_below2, st.thr, bin, below);
    pkey = found ? st.p_prefix2 | static_cast<unsigned>(bin) : key_of(st.M);  // not found: impossible
    if (block0_thread0()) {
      w.state[row].pkey = pkey;
      w.state[row].p_below = below;
      if (!found) w.state[row].p_none = 1;
    }
  }
  int cnt = 0;
  double above = 0.0;
#pragma unroll
  for (int it = 0; it < kItems; ++it) {
    const unsigned k = key_of(y[it]);
    if (!(wv[it] > 0.0f) || k < pkey) continue;
    if (k == pkey) {
      ++cnt;
    } else {
      above += wv[it];
    }
  }
  cnt = block_sum(cnt);
  above = block_sum(above);
  if (threadIdx.x == 0) {
    const std::size_t at = static_cast<std::size_t>(row) * w.nb + blockIdx.x;
    w.tie_cnt[at] = cnt;
    w.part_a[at] = above;
  }
}

}  // namespace

cudaError_t launch_prep_pass(dim3 grid, cudaStream_t stream, const Job& j, uint4* zero, std::size_t words,
                             bool penalty) {
  return launch_pdl(prep_kernel, grid, dim3(kThreads), 0, stream, j, zero, words, penalty);
}

cudaError_t launch_stats_pass(dim3 grid, cudaStream_t stream, const Job& j, const Ws& w) {
  return launch_pdl(stats_kernel, grid, dim3(kThreads), 0, stream, j, w);
}

cudaError_t launch_topk_pass(dim3 grid, cudaStream_t stream, const Job& j, const Ws& w, int pass) {
  return launch_pdl(topk_kernel, grid, dim3(kThreads), 0, stream, j, w, pass);
}

cudaError_t launch_total_pass(dim3 grid, cudaStream_t stream, const Job& j, const Ws& w) {
  return launch_pdl(total_kernel, grid, dim3(kThreads), 0, stream, j, w);
}

cudaError_t launch_topp_pass(dim3 grid, cudaStream_t stream, const Job& j, const Ws& w, int pass) {
  return launch_pdl(topp_kernel, grid, dim3(kThreads), 0, stream, j, w, pass);
}

cudaError_t launch_tie_pass(dim3 grid, cudaStream_t stream, const Job& j, const Ws& w) {
  return launch_pdl(tie_kernel, grid, dim3(kThreads), 0, stream, j, w);
}

}  // namespace cosmos::kernels::sampling_detail
