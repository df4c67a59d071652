// GPU sampling: see sampling.cuh for the semantics, the passes and their cost. This file: the
// workspace layout, sample_workspace_bytes() and launch_sample(), which chains the passes (kernels
// in sampling_passes.cu and sampling_draw.cu; their shared definitions and the grid layout in
// sampling_detail.cuh).
#include "kernels/sampling.cuh"

#include <algorithm>
#include <cstddef>
#include <cstdint>

#include "kernels/sampling_detail.cuh"

namespace cosmos::kernels {

using namespace sampling_detail;

namespace {

struct Layout {
  std::size_t counters, hist_k, hist_p, zero_end, state, part_d, part_a, part_tf, part_f, part_i, tie_cnt, wbuf,
      total;
  int nb;
};

Layout layout(int rows, int vocab) {
  Layout l{};
  l.nb = vocab > 0 ? (vocab + kChunk - 1) / kChunk : 1;
  const std::size_t r = static_cast<std::size_t>(rows > 0 ? rows : 1);
  const std::size_t nb = static_cast<std::size_t>(l.nb);
  std::size_t at = 0;
  auto take = [&at](std::size_t bytes) {
    const std::size_t p = at;
    at += (bytes + 255) / 256 * 256;
    return p;
  };
  l.counters = take(r * kCounters * sizeof(unsigned));
  l.hist_k = take(r * 3 * kBins * sizeof(unsigned));
  l.hist_p = take(r * 3 * kBins * sizeof(unsigned long long));
  l.zero_end = at;
  l.state = take(r * sizeof(RowState));
  l.part_d = take(r * nb * sizeof(double));
  l.part_a = take(r * nb * sizeof(double));
  l.part_tf = take(r * nb * sizeof(double));
  l.part_f = take(r * nb * sizeof(float));
  l.part_i = take(r * nb * sizeof(int));
  l.tie_cnt = take(r * nb * sizeof(int));
  l.wbuf = take(r * static_cast<std::size_t>(vocab > 0 ? vocab : 1) * sizeof(float));
  l.total = at;
  return l;
}

}  // namespace

float sample_top_p_threshold(float top_p) { return top_p_threshold(top_p); }

std::size_t sample_workspace_bytes(int rows, int vocab) { return layout(rows, vocab).total; }

cudaError_t sample_workspace_init(void* workspace, int rows, int vocab, cudaStream_t stream) {
  const Layout l = layout(rows, vocab);
  return cudaMemsetAsync(static_cast<unsigned char*>(workspace) + l.counters, 0, l.hist_k - l.counters, stream);
}

std::size_t launch_sample(const SampleArgs& a, cudaStream_t stream) {
  if (a.rows <= 0 || a.rows > 65535 || !a.out_ids) return 0;
  const std::size_t ids_bytes = static_cast<std::size_t>(a.rows) * sizeof(int);
  if (a.vocab <= 0) {
    cudaMemsetAsync(a.out_ids, 0, ids_bytes, stream);
    if (a.next_ids) cudaMemsetAsync(a.next_ids, 0, ids_bytes, stream);
    return ids_bytes;
  }
  if (!a.logits || !a.params || !a.workspace || (a.any_penalty && !a.history_offsets)) return 0;
  const Layout l = layout(a.rows, a.vocab);
  if (a.workspace_bytes < l.total) return 0;

  auto* base = static_cast<unsigned char*>(a.workspace);
  const Ws w{reinterpret_cast<unsigned*>(base + l.counters),
             reinterpret_cast<unsigned*>(base + l.hist_k),
             reinterpret_cast<unsigned long long*>(base + l.hist_p),
             reinterpret_cast<RowState*>(base + l.state),
             reinterpret_cast<double*>(base + l.part_d),
             reinterpret_cast<double*>(base + l.part_a),
             reinterpret_cast<double*>(base + l.part_tf),
             reinterpret_cast<float*>(base + l.part_f),
             reinterpret_cast<int*>(base + l.part_i),
             reinterpret_cast<int*>(base + l.tie_cnt),
             reinterpret_cast<float*>(base + l.wbuf),
             l.nb};
  const bool sample = !a.all_greedy;
  const bool top_k = sample && a.need_sort && !a.skip_top_k;
  const bool top_p = sample && a.need_sort && !a.skip_top_p;
  if (a.history_append && (a.rows != 1 || !a.history_offsets)) return 0;
  const Job j{a.logits, a.params, a.history, a.history_offsets, a.out_ids, a.next_ids, a.history_append, a.probs_out,
              a.rows,   a.vocab,  a.all_greedy, top_k,         top_p,          a.all_greedy && a.any_penalty};
  // Zeroed by prep: the ticket counters, and the histograms when top-k / top-p run. An all-greedy
  // launch runs no prep (one kernel boundary less per decode step): its only counter, stats', is
  // zero from sample_workspace_init or the launch before, and stats applies the penalty.
  const std::size_t zero = sample ? (top_k || top_p ? l.zero_end : l.hist_k) : 0;
  if (sample) {
    const std::size_t words = zero / sizeof(uint4);
    const unsigned prep_blocks =
        a.any_penalty ? static_cast<unsigned>((a.vocab + kPenaltyIds - 1) / kPenaltyIds)
                      : static_cast<unsigned>(std::min<std::size_t>((words + kThreads - 1) / kThreads, 64));
    launch_prep_pass(dim3(prep_blocks, a.any_penalty ? a.rows : 1), stream, j, reinterpret_cast<uint4*>(base), words,
                     a.any_penalty);
  }

  const dim3 grid(static_cast<unsigned>(l.nb), static_cast<unsigned>(a.rows));
  launch_stats_pass(grid, stream, j, w);
  const std::size_t row_bytes = static_cast<std::size_t>(a.rows) * a.vocab * sizeof(float);
  std::size_t bytes = zero + 2 * row_bytes + ids_bytes;  // stats reads and writes the logits
  if (sample) {
    if (top_k) {
      launch_topk_pass(grid, stream, j, w, 1);
      launch_topk_pass(grid, stream, j, w, 2);
      bytes += 2 * row_bytes;
    }
    launch_total_pass(grid, stream, j, w);
    bytes += 2 * row_bytes;
    if (top_p) {
      for (int pass = 0; pass < 3; ++pass) launch_topp_pass(grid, stream, j, w, pass);
      launch_tie_pass(grid, stream, j, w);
      bytes += 8 * row_bytes;
    }
    launch_final_pass(grid, stream, j, w);
    bytes += 2 * row_bytes;
  }
  if (a.probs_out) {
    launch_probs_pass(grid, stream, j, w);
    bytes += 3 * row_bytes;
  }
  return bytes;
}

}  // namespace cosmos::kernels
