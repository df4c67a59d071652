// GPU sampling, the draw (see sampling.cuh): final (top-p's tie removal, min-p, the exponential
// race and the final total) and probs (the final distribution, for probs_out), with their host
// launchers. Shared definitions: sampling_detail.cuh; the passes before: sampling_passes.cu.
#include <climits>
#include <cstddef>

#include "kernels/sampling_detail.cuh"

namespace cosmos::kernels::sampling_detail {
namespace {

// The ties at pkey before this block (for their ranks), and all of them.
__device__ void tie_counts(const Ws& w, int row, int& before, int& all) {
  const int* c = w.tie_cnt + static_cast<std::size_t>(row) * w.nb;
  int b_sum = 0, a_sum = 0;
  for (int b = threadIdx.x; b < w.nb; b += kThreads) {
    a_sum += c[b];
    if (b < static_cast<int>(blockIdx.x)) b_sum += c[b];
  }
  before = block_sum(b_sum);
  all = block_sum(a_sum);
}

// The final weights of this thread's tokens (w: the candidate weights in, the kept ones out):
// top-p keeps keys above pkey and the ties of rank >= m, min-p weights >= w_min. Calls block helpers
// when top-p is on (uniform per row).
__device__ void final_weights(const RowState& st, int m, float w_min, int ties_before, const float (&y)[kItems],
                              float (&wv)[kItems]) {
  bool tie[kItems];
  int ties = 0;
#pragma unroll
  for (int it = 0; it < kItems; ++it) {
    tie[it] = false;
    if (!(wv[it] > 0.0f)) continue;
    if (st.use_topp) {
      const unsigned k = key_of(y[it]);
      if (k < st.pkey) {
        wv[it] = 0.0f;
        continue;
      }
      if (k == st.pkey) {
        tie[it] = true;  // ranked among the ties even if min-p drops it
        ++ties;
      }
    }
    if (wv[it] < w_min) wv[it] = 0.0f;
  }
  if (st.use_topp) {
    int rank = ties_before + block_exclusive_sum(ties);
#pragma unroll
    for (int it = 0; it < kItems; ++it) {
      if (!tie[it]) continue;
      if (rank < m) wv[it] = 0.0f;
      ++rank;
    }
  }
}

// The draw, an exponential race over the final weights (argmax w / E), and the final total. Its
// prologue finishes top-p (how many ties it removes) and min-p (w_min); the last block writes the id.
__global__ void __launch_bounds__(kThreads) final_kernel(Job j, Ws w) {
  pdl_wait();
  pdl_launch_dependents();
  const int row = blockIdx.y;
  const Slice sl = slice(j);
  float y[kItems], wv[kItems];
  load_items(j.logits + sl.off, sl.base, j.vocab, y, -kInf);
  load_items(w.wbuf + sl.off, sl.base, j.vocab, wv, 0.0f);
  const RowState st = w.state[row];
  if (st.mode == kSingle) return;
  const SampleParams p = j.params[row];
  if (st.mode == kPosInf) {
#pragma unroll
    for (int it = 0; it < kItems; ++it) wv[it] = y[it] == kInf ? 1.0f : 0.0f;
  } else {
    // One pass over the blocks' partials (T summed in row_total's order, so equal to pass 0's T).
    const std::size_t first = static_cast<std::size_t>(row) * w.nb;
    double t_sum = 0.0, a_sum = 0.0;
    int all_sum = 0, before_sum = 0;
    for (int b = threadIdx.x; b < w.nb; b += kThreads) {
      t_sum += w.part_d[first + b];
      if (st.use_topp) {
        const int c = w.tie_cnt[first + b];
        a_sum += w.part_a[first + b];
        all_sum += c;
        if (b < static_cast<int>(blockIdx.x)) before_sum += c;
      }
    }
    const double T = block_sum(t_sum);
    double Tp = T;
    int m = 0, ties_before = 0;
    if (st.use_topp) {
      const double A = block_sum(a_sum);
      const int n_tie = block_sum(all_sum);
      ties_before = block_sum(before_sum);
      const float wstar = weight_of(float_of_key(st.pkey), st.M);
      m = n_tie - 1;
      if (!st.p_none) {
        // The ties' cumulative sums are B + (i + 1) p*: remove the largest m with fp32(B + m p*) <= thr.
        const double pstar = prob_of(wstar, T);
        const double B = static_cast<double>(st.p_below) * 0x1p-60;
        int lo = 0, hi = n_tie;
        while (lo < hi) {
          const int mid = lo + (hi - lo + 1) / 2;
          if (static_cast<float>(B + mid * pstar) <= st.thr) {
            lo = mid;
          } else {
            hi = mid - 1;
          }
        }
        m = lo < n_tie - 1 ? lo : n_tie - 1;  // the top token always stays
      }
      if (m < 0) m = 0;
      Tp = A + static_cast<double>(n_tie - m) * wstar;
    }
    const float w_min = st.use_minp ? min_p_weight(st.min_p * static_cast<float>(1.0 / Tp), Tp) : 0.0f;
    if (block0_thread0()) {
      w.state[row].m = m;
      w.state[row].w_min = w_min;
    }
    final_weights(st, m, w_min, ties_before, y, wv);
  }
  float e[kItems];
  exp_noise4(p.seed, p.step, sl.base, e);
  double sum = 0.0;
  Best<float> best{-1.0f, INT_MAX};
#pragma unroll
  for (int it = 0; it < kItems; ++it) {
    if (!(wv[it] > 0.0f)) continue;
    sum += wv[it];
    const float r = wv[it] / e[it];
    if (r > best.v) best = Best<float>{r, sl.base + it};
  }
  sum = block_sum(sum);
  best = block_best(best);
  const std::size_t first = static_cast<std::size_t>(row) * w.nb;
  if (threadIdx.x == 0) {
    w.part_tf[first + blockIdx.x] = sum;
    w.part_f[first + blockIdx.x] = best.v;
    w.part_i[first + blockIdx.x] = best.i;
  }
  if (!arrive_last(&w.counters[row * kCounters + kCtrFinal])) return;

  const double Tf = sum_parts(w.part_tf + first, w.nb);
  Best<float> r{-1.0f, INT_MAX};
  for (int b = threadIdx.x; b < w.nb; b += kThreads)
    r = better(r, Best<float>{__ldcg(&w.part_f[first + b]), __ldcg(&w.part_i[first + b])});
  r = block_best(r);
  if (threadIdx.x == 0) {
    w.state[row].Tf = Tf;
    write_id(j, row, r.i == INT_MAX ? 0 : r.i);
  }
}

// probs_out: the final distribution (one-hot for greedy and degenerate rows).
__global__ void __launch_bounds__(kThreads) probs_kernel(Job j, Ws w) {
  pdl_wait();
  pdl_launch_dependents();
  const int row = blockIdx.y;
  const Slice sl = slice(j);
  float y[kItems], wv[kItems];
  load_items(j.logits + sl.off, sl.base, j.vocab, y, -kInf);
  load_items(w.wbuf + sl.off, sl.base, j.vocab, wv, 0.0f);
  const RowState st = w.state[row];
  if (st.mode == kSingle) {
#pragma unroll
    for (int it = 0; it < kItems; ++it) wv[it] = sl.base + it == st.token ? 1.0f : 0.0f;
  } else {
    if (st.mode == kPosInf) {
#pragma unroll
      for (int it = 0; it < kItems; ++it) wv[it] = y[it] == kInf ? 1.0f : 0.0f;
    } else {
      int ties_before = 0, n_tie = 0;
      if (st.use_topp) tie_counts(w, row, ties_before, n_tie);
      final_weights(st, st.m, st.w_min, ties_before, y, wv);
    }
#pragma unroll
    for (int it = 0; it < kItems; ++it)
      wv[it] = wv[it] > 0.0f ? static_cast<float>(static_cast<double>(wv[it]) / st.Tf) : 0.0f;
  }
  store_items(j.probs + sl.off, sl.base, j.vocab, wv);
}

}  // namespace

cudaError_t launch_final_pass(dim3 grid, cudaStream_t stream, const Job& j, const Ws& w) {
  return launch_pdl(final_kernel, grid, dim3(kThreads), 0, stream, j, w);
}

cudaError_t launch_probs_pass(dim3 grid, cudaStream_t stream, const Job& j, const Ws& w) {
  return launch_pdl(probs_kernel, grid, dim3(kThreads), 0, stream, j, w);
}

}  // namespace cosmos::kernels::sampling_detail
