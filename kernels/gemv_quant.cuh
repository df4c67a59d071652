// Matrix-vector product for batch-1 decode with quantized weights (kernels/quant_format.cuh),
// dequantized in registers: y = W x (+ bias) (+ residual), x and y fp32, with the same two fusions
// as kernels/gemv.cuh (RMSNorm prologue with a bf16 norm weight; SwiGLU epilogue over [2F, cols]
// gate-then-up rows) and the same PDL contract (weights and scales are read before pdl_wait()).
// Accumulation is fp32; the per-row scale of int8 / fp8 is applied once to the row's sum, int4's
// per-group scale and minimum per group (sum_g s_g * (q . x)_g + m_g * sum(x)_g). int4 products of
// whole 3,584-column steps with a normalized input, and int4 down projections staged in shared
// memory, take x as 16-bit fixed point per group of 128 columns (|x - x~| < 2^-16 max |x| over the
// group) into integer dot products (DP4A; gemv_quant.cu's top comment).
#pragma once

#include <cstddef>

#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include "kernels/qgemv_tuning_spec.h"
#include "kernels/quant_format.cuh"

namespace cosmos::kernels {

struct QGemvArgs {
  QuantMatrix w;                          // [rows, cols]
  const float* x = nullptr;               // [cols] fp32
  const __nv_bfloat16* bias = nullptr;    // [rows] or null (with swiglu: added to gate and up)
  const float* residual = nullptr;        // [outputs] or null; may alias y
  float* y = nullptr;                     // [outputs]: rows, or rows / 2 with swiglu
  int rows = 0;
  int cols = 0;
  const __nv_bfloat16* norm_weight = nullptr;  // [cols] or null: x is RMS-normalized and scaled first
  float norm_eps = 1e-6f;
  bool swiglu = false;
  // A decode step at a long context (the attention before this product is long): int4's o product
  // then takes a kernel that leaves more of each SM to the attention (gemv_quant.cu, narrow_kernel).
  bool long_context = false;
  // int8 / fp8 o taking sums (x_div set): rows per item of its kSums kernel, 1 or 2. Two leave the
  // next kernel room to start under PDL (the default; +1.3-2.0% decode at 4,096 tokens of context),
  // one measured faster from 1,025 to 4,096 tokens (fp8 +1.7-2.3% at 2,048; docs/PERFORMANCE.md
  // session 45).
  int sums_rows = 2;
  // Or null. Set: x is the decode attention's output as sums ([2][cols] fp32, buckets 0 and 1 of
  // kernels/decode_attention.cuh's DecodeAttentionSums) and x_div their divisors ([2][cols / 128]),
  // so the attention leaves its split merge to this product, which divides per head of 128 columns
  // as it stages x. Only o-shaped products take it: int4 on the long-context kernel, int8 / fp8 on
  // their automatic shape (gemv_quant_takes_sums); launch_gemv_quant launches nothing and returns 0
  // for any other.
  const float* x_div = nullptr;
  // SwiGLU only, or null: the outputs as bf16 here instead of y (the gate/up product writing the
  // down product's input at half the bytes; Hugging Face keeps it in bf16 too).
  __nv_bfloat16* y16 = nullptr;
  // Or null: x given as bf16 [cols] here instead of x. Only the down- and o-shaped kernels take it
  // (gemv_quant_takes_x16), staging half the loads of fp32 x; launch_gemv_quant launches nothing and
  // returns 0 for any other.
  const __nv_bfloat16* x16 = nullptr;
};

// Enqueues through launch_pdl. Returns the bytes moved (q, scales, x, norm weight, bias, residual,
// y); 0 with nothing launched for an empty problem or swiglu with odd rows. Any shape and alignment
// works; the fast path needs full-width aligned rows (see gemv_quant.cu).
std::size_t launch_gemv_quant(const QGemvArgs& args, cudaStream_t stream);

// Whether launch_gemv_quant takes args.x_div for this product on the current device under the
// current tuning: no norm, no SwiGLU; int4: rows of 3,584 columns on the long-context kernel
// (QGemvArgs::long_context or the wide knob); int8 / fp8: columns a multiple of 128 (at most 8,192)
// on the automatic shape of an o product (x staged, one row per item, 4 loads).
bool gemv_quant_takes_sums(const QGemvArgs& args);

// Whether launch_gemv_quant takes args.x16 for this product on the current device under the current
// tuning: no norm, no SwiGLU, no sums, the automatic shape of a down projection (x staged at 2
// blocks per SM: int4 by integer dot products on one block of 16 warps per SM, int8 / fp8 pipelined
// at 2 rows and 8 loads) or of an o product at a short context (int4: the 2-row kernel built for
// 3,584 columns; int8 / fp8: x staged at 4 blocks per SM, 2 rows and 4 loads).
bool gemv_quant_takes_x16(const QGemvArgs& args);

// Launch knobs, for the benchmark and tests only (process-wide, not synchronized with concurrent
// launches, like set_gemv_tuning). -1 / 0 = automatic (see launch_fmt in gemv_quant.cu); a knob that
// does not apply to a shape is ignored (SwiGLU takes 2 rows per item, or 4, and 4 or 7 loads; rows = 2
// with 8 loads needs stage_x; a row of at most 128 vectors takes 4 loads).
//   rows_per_item: weight rows per warp item, 1 or 2 (the non-SwiGLU matrices); or 4 (int4 with
//                  8-byte vectors, below, SwiGLU too: 2 gate rows and their up rows; 2 blocks per SM);
//   loads:         16-byte loads per row per step and lane, 4 or 8; or 7: rows of 3,584 columns (any
//                  multiple) in steps of 7 loads per lane and row, none empty (x staged, no pipeline):
//                  int4 as 8-byte vectors (2 or 4 rows per item; the automatic choice there: 16-byte
//                  vectors leave a load slot empty in half the lanes), int8 / fp8 as 16-byte vectors
//                  (1 or 2 rows, SwiGLU 2 when normalized; automatic for a normalized product: q/k/v, gate/up);
//   pipeline:      1: each load slot is refilled with the next step's (or the next item's) vector as
//                  soon as it is consumed, so the loads of step s + 1 are in flight while step s is
//                  computed; 0: step s + 1 is loaded after step s is computed;
//   l2_next:       1: prefetch the next item's rows into L2 (cp.async.bulk.prefetch.L2) at the start
//                  of each item;
//   stage_x:       x larger than 16 KB (the down projection's 74 KB): 1: staged in shared memory, 2
//                  blocks per SM; 0: read through L1, 4 blocks per SM. Not used with SwiGLU.
//   mma:           int4 only: 2 or 4: the tensor-core kernel (kernels/gemv_q4_mma.cu) with that many
//                  groups of 128 columns in flight per warp (the other knobs then do not apply and
//                  read 0); 0: the CUDA-core kernel. Shapes the tensor-core kernel cannot run take
//                  the CUDA-core kernel whatever this says;
//   mma_tile_warps: with mma: warps per 16-row tile, 8 or 4 (a block then runs two tiles at once);
//   wide:          int4 o-shaped products (rows of 3,584 columns, no norm, no SwiGLU, 2 rows per item):
//                  1: the kernel built for 2 blocks per SM (see QGemvArgs::long_context, automatic
//                  with it); 0: the 4-blocks-per-SM kernel. Reads 0 where it does not apply.
struct QGemvTuning {
  int rows_per_item = 0;  // 0 auto, 1, 2 or 4 (int4, see above)
  int loads = 0;          // 0 auto, 4, 8 or 7 (int4, see above)
  int pipeline = -1;      // -1 auto, 0 / 1
  int l2_next = -1;       // -1 auto, 0 / 1
  int stage_x = -1;       // -1 auto, 0 / 1
  int mma = -1;           // -1 auto, 0, 2 or 4
  int mma_tile_warps = 0; // 0 auto, 4 or 8
  int wide = -1;          // -1 auto (long_context), 0 / 1 (int4 o-shaped products, see above)
};
void set_gemv_quant_tuning(const QGemvTuning& tuning);

// Per-shape knobs the engine plans with (Backend::set_decode_tuning, from `cosmos-cli tune`):
// process-wide, set between decode steps, never during a launch or a graph capture. A shape's
// COSMOS_QGEMV_TUNING entry still goes on top (the environment is the experimenter's word).
void set_gemv_quant_shape_knobs(const QGemvTuningSpec& spec);

// The knobs launch_gemv_quant would use for `args` on the current device under the current tuning,
// all resolved (stage_x: 1 when x is staged at 2 blocks per SM, else 0; mma: the depth when the
// tensor-core kernel runs, else 0); rows_per_item and mma 0 for the element-wise path or an empty
// problem. For the benchmark's sweep (duplicate plans) and tests.
QGemvTuning gemv_quant_plan(const QGemvArgs& args);

}  // namespace cosmos::kernels
