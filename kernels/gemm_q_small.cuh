// Products of a quantized weight matrix with a few tokens at once (kernels/gemm_q_small.cu):
// y[n][r] (+)= sum_c W[r][c] x[n][c] for n < N <= 64 tokens, W int8 / fp8 (per-row scale) or int4
// (groups of 128), x bf16. The weights are read once for all N tokens and dequantized in registers
// into bf16 mma fragments (tensor cores, fp32 accumulation): the batched decode step of a few
// sequences and short prompts in the quantized precisions, where dequantizing a whole matrix to bf16
// for a GEMM costs more than the product.
#pragma once

#include <cstddef>
#include <string>

#include <cuda_runtime.h>

#include "kernels/quant_format.cuh"

namespace cosmos::kernels {

inline constexpr int kQSmallMaxTokens = 64;  // what launch_gemm_q_small takes

// How a launch spreads the work (0 = chosen per shape by the launcher): m_tiles 16-row tiles per warp
// (1, 2 or 4; each x fragment loaded serves all of them, so x's L2 traffic is n / (8 m_tiles) times
// the int8 weight bytes), split warps of a block sharing those rows' columns (1, 2, 4 or 8), feed
// how weights reach a warp (1: register batches of 4 KB per warp; 2: a shared-memory ring of 8 KB
// per warp filled by cp.async, m_tiles 1 or 2; 3: the ring, with each chunk of x copied once per
// block into shared memory, split 1), pass the tokens per pass over the weights (32 or 64), and
// col_split the blocks sharing a unit group's columns (1, 2, 4, 8 or 16; feed 1, m_tiles 2 or 4,
// split 4 or 8), whose partial sums meet in QSmallArgs::scratch. For tests and the benchmark; the engine sets feed 1 (registers)
// below its ring threshold and leaves the rest automatic.
struct QSmallPlan {
  int m_tiles = 0, split = 0, feed = 0, pass = 0, col_split = 0;
};

// Scratch of the plans that split columns over blocks (col_split > 1): fp32 partial sums
// [col_split][n][rows] and one ticket per unit group (at most one per 16 rows; the last block of a
// group adds the partials
// in split order, so the result does not depend on which block finishes last). The tickets must be
// zero before the first launch; every launch leaves them zero. Without enough of it an automatic plan
// takes another feed and a forced one is refused.
struct QSmallScratch {
  float* partials = nullptr;  // [partial_floats]
  std::size_t partial_floats = 0;
  unsigned* tickets = nullptr;  // [ticket_count], zeroed
  int ticket_count = 0;
};
// What the engine (and the benchmark that makes the tuned plans) allocates: room for matrices of up to
// kQSmallScratchRows rows (q/k/v's 4,608; o and down have 3,584) at 64 tokens and the largest split.
inline constexpr int kQSmallMaxSplit = 16;
inline constexpr int kQSmallScratchRows = 4608;
inline constexpr std::size_t qsmall_scratch_floats(int rows) {
  return static_cast<std::size_t>(kQSmallMaxSplit) * kQSmallMaxTokens * static_cast<std::size_t>(rows);
}
inline constexpr int qsmall_scratch_tickets(int rows) { return (rows + 15) / 16; }

struct QSmallArgs {
  QuantMatrix w;            // [rows, cols] quantized (kernels/quant_format.cuh)
  const void* x = nullptr;  // [n, cols] bf16
  void* y = nullptr;        // [n, rows] fp32, or bf16 with y_bf16
  int n = 0, rows = 0, cols = 0;
  bool y_bf16 = false;      // bf16 output (no accumulation)
  bool accumulate = false;  // y += W x (fp32 output only)
  QSmallPlan plan;          // automatic unless set
  QSmallScratch scratch;    // for plans that split columns over blocks (none: such plans are not used)
};

// nullptr when the shape and pointers run on this kernel; otherwise why not (cols a multiple of 64
// for int8 / fp8 and of 128 for int4, 16-byte aligned q and x, 1 <= n <= kQSmallMaxTokens).
const char* gemm_q_small_unsupported(const QSmallArgs& a);

// Enqueues the product; returns the bytes it moves (weights, scales, x once per pass, y).
std::size_t launch_gemm_q_small(const QSmallArgs& a, cudaStream_t stream);

// The plan a pass of n tokens gets (what launch_gemm_q_small runs for that shape, a.plan applied).
QSmallPlan gemm_q_small_plan(const QSmallArgs& a);

// Replaces the built-in tuned plans (kernels/gemm_q_small_plans.inc) with rows of the same form, one
// per line, as bench_gemm_q_small --table prints them ("TABLE" prefixes, comments and blank lines
// skipped), so plan tables can be compared in the engine without a rebuild; empty text restores the
// built-in table. Returns the rows taken, or -1 with *why set and the table unchanged when a line does
// not parse or repeats an earlier row's format, shape and token tiles.
int gemm_q_small_set_plans(const std::string& text, std::string* why);

}  // namespace cosmos::kernels
