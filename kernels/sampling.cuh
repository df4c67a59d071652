// Token sampling on the GPU: turns the lm_head output [rows, vocab] into one token id per row, so
// only the ids cross to the host. Same processors, order, comparisons and tie rules as the CPU
// cosmos::Sampler (engine/include/cosmos/sampler.h), i.e. Hugging Face `generate`:
//   repetition penalty -> temperature -> top-k -> top-p -> min-p -> softmax -> multinomial draw,
// greedy (temperature <= 0) = penalty, then argmax (ties: the lowest id).
//
// Everything is capturable in a CUDA graph: no allocation, no host synchronization, no host read of
// device data; per-step values (parameters, the draw's step counter, the history) are read from
// device memory, and the launched sequence depends only on the host flags in SampleArgs.
//
// How (no sort of the vocabulary; every pass is a kernel over the whole row, 1024 logits per block,
// 149 blocks per row for 152064; rows add blocks, not passes; the kernels form one programmatic-
// dependent-launch chain, kernels/pdl.cuh):
//   1. prep (not for all-greedy launches): zeroes the workspace's counters and histograms;
//      repetition penalty: block b of a row owns ids [b * 32768, (b + 1) * 32768) with a
//      shared-memory bitset, and the history entry that sets an id's bit penalizes its logit, so
//      each distinct id is penalized once (HF's gather/scatter);
//   2. stats: NaN -> -inf, the max and its first index, logits / temperature written in place;
//      greedy rows are done here (the last block of a row writes the id and sets its ticket
//      counter back to zero); in an all-greedy launch stats applies the penalty itself, each block
//      to its 1,024 ids with a bitset over the history, so greedy decoding is one kernel;
//   3. top-k (2 passes): radix select of the k-th largest processed logit on its order-preserving
//      32-bit key, digits of 11 + 11 + 10 bits (the first counted in stats), counting duplicates
//      like torch.topk;
//   4. total: the candidates' weights w = fp32(exp(y - max)) (exp in double, rounded once), stored
//      for the later passes, and their sum T (double, fixed order);
//   5. top-p (3 passes): the same radix select on the probability mass p = fp32(w / T) (exact 2^-60
//      fixed point, so sums do not depend on the order), accumulated in HF's ascending order: finds
//      the logit at which the ascending cumulative probability first exceeds fp32(1 - top_p);
//      a row whose top token clearly holds more than top_p of the mass (T - 1, the others' weight,
//      at most fp32(1 - top_p) T with a 1e-5 margin, and under half the top's weight, so no tie)
//      ends in the first of them: top-p keeps that token alone, so the draw can only return it;
//      the row's later passes return at once (a token the model is sure of: 4 passes' work less);
//   6. tie: the tokens at that logit are removed by ascending id (HF's stable sort), via per-block
//      counts and a block scan in the final pass;
//   7. final: min-p (as one weight threshold), and the draw as an exponential race
//      (argmax_i w_i / E_i, E_i ~ Exp(1) from Philox4x32-10 keyed by (seed, step), counter = token
//      id), which picks token i with probability w_i / sum(w), like an inverse-CDF draw, without a
//      prefix sum; the last block of a row writes the id.
// A pass's result (a select digit, a sum) is derived at the start of the next pass by every block
// from the global histograms / block partials (same data, same order: deterministic), so only stats
// and final need a last-block reduction.
//
// Measured on an H200 (vocab 152064, CUDA graph replay, logits in L2 from the lm_head), with the
// prep pass that all-greedy launches no longer run:
//   greedy 5 us (6 us for 4 rows); greedy + penalty over 2000 ids 9 us (10);
//   temperature only 13 us (18); temperature + top_p + penalty 36 us (52);
//   top_k + top_p + min_p + penalty 40 us (58).
// On an H100 (test_gpu_sampling, session 66): temperature 0.6 + top_p 0.95 + penalty 36.7 us (54.5),
// 17.0-17.5 us (24.1-24.2) when one token holds more than 95% of the mass and top-p's pass 0 ends
// the row.
// Each pass costs 3-8 us, almost all latency (launch, L2 round trips, block barriers): a pass reads
// the 608 KB row from L2 (about 0.1 us of bandwidth), so the cost is the number of passes:
// 1 kernel for greedy, 4 for temperature, + 4 for top-p, + 2 for top-k.
//
// Differences from the CPU Sampler:
//   - The draw: same distribution, another random stream (Philox; the CPU uses mt19937_64, so ids
//     differ draw by draw). The same seed + step + logits gives the same id. Uniforms have 24 bits
//     and the race is in fp32: probabilities are followed to about 1e-7 relative.
//   - exp is computed in double and rounded to fp32 (the CPU uses std::exp in fp32, within an ulp);
//     T, the tie sums and the cumulative mass are summed in another order (double, or exact fixed
//     point), so probabilities agree to about 1e-7 relative, and a top-p / min-p decision can differ
//     only where the CPU's own double sum is within ~1e-12 of the fp32 rounding boundary.
//   - fp32(1 - top_p) uses top_p's shortest decimal like the CPU, found by rounding to n decimal
//     places (exact for n <= 12 digits; smaller top_p fall back to the float's own value, which
//     changes fp32(1 - top_p) by at most an ulp).
//   - An infinite temperature (which validate() rejects) gives -inf / inf = NaN on the CPU; here
//     such NaNs become -inf.
// Host flags must describe the rows (the engine's cuda_backend.cpp computes them); they fix the
// launched sequence, so a captured graph has one shape per flag set: when any_penalty is false no
// penalty is applied, when need_sort is false (or skip_top_k / skip_top_p is true) top-k / top-p
// are not applied, when all_greedy is true every row is treated as greedy.
#pragma once

#include <cstddef>

#include <cuda_runtime.h>

namespace cosmos::kernels {

// One row's sampling parameters (cosmos::SamplingParams + the draw's step), in device memory.
// Invalid values are clamped like the CPU Sampler's constructor does.
struct SampleParams {
  float temperature = 1.0f;         // <= 0: greedy
  int top_k = 0;                    // 0: off
  float top_p = 1.0f;               // 1: off
  float min_p = 0.0f;               // 0: off
  float repetition_penalty = 1.0f;  // 1: off
  unsigned long long seed = 0;
  unsigned long long step = 0;      // the draw's counter: same seed + step, same draw
};

struct SampleArgs {
  float* logits = nullptr;                 // [rows, vocab] fp32, modified in place (scratch)
  int rows = 0;                            // 1..65535
  int vocab = 0;
  const SampleParams* params = nullptr;    // [rows] device
  const int* history = nullptr;            // flat device ids: the penalty history of all rows
  const int* history_offsets = nullptr;    // [rows + 1] device CSR offsets into history
  int* out_ids = nullptr;                  // [rows] device
  int* next_ids = nullptr;                 // optional [rows] device: a second copy of the ids (the next
                                           // decode step's input ids, read there on the device)
  int* history_append = nullptr;           // optional, rows == 1 and vocab > 0: the id is also written at
                                           // history_append[history_offsets[1]] (the next step's history
                                           // is this one's plus the id); pass the history buffer
  void* workspace = nullptr;               // device, >= sample_workspace_bytes(rows, vocab) bytes
  std::size_t workspace_bytes = 0;
  bool any_penalty = false;  // some row has repetition_penalty != 1 (history is read only then)
  bool all_greedy = false;   // every row is greedy: only the penalty and the argmax run
  bool need_sort = false;    // some sampled row uses top_k > 0 or top_p < 1
  bool skip_top_k = false;   // optional, with need_sort: no row uses top_k (skips 2 passes)
  bool skip_top_p = false;   // optional, with need_sort: no row uses top_p (skips 4 passes)
  float* probs_out = nullptr;  // optional [rows, vocab] device: the final distribution, for tests
};

// Workspace bytes for up to `rows` rows of `vocab` logits (per row: 72 KB of histograms, the
// candidate weights (4 B per logit) and 36 B per 1024 logits: 0.69 MB for 152064).
std::size_t sample_workspace_bytes(int rows, int vocab);

// Zeroes the workspace's ticket counters (enqueued on `stream`); call it once after allocating a
// workspace for up to `rows` rows, before its first launch. Every launch leaves the counter that
// an all-greedy launch uses at zero; nothing else in the workspace needs initial values.
cudaError_t sample_workspace_init(void* workspace, int rows, int vocab, cudaStream_t stream);

// Enqueues the sampling on `stream`. Returns the bytes the kernels move (for GB/s), or 0 when
// nothing was launched: rows <= 0, a null pointer, or a workspace smaller than needed. vocab <= 0
// writes id 0 for every row (like the CPU sampler's empty span).
std::size_t launch_sample(const SampleArgs& args, cudaStream_t stream);

// fp32(1 - top_p) as the kernels (and the CPU Sampler) compare the top-p cumulative sum with it,
// for tests.
float sample_top_p_threshold(float top_p);

}  // namespace cosmos::kernels
