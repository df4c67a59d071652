// Decode matrix-vector product with quantized weights (kernels/gemv_quant.cuh): the structure of
// kernels/gemv.cu ("wave" launch of SMs x occupancy blocks of 8 warps (int4's down projection: one
// block of 16 warps per SM, see plan_fmt), work dealt round-robin to
// blocks and to their warps, each warp computing whole outputs with a shuffle reduction, x staged in
// shared memory with the fused RMSNorm when it fits, 16-byte evict-first weight loads issued before
// pdl_wait()), with the weights dequantized in registers.
//
// Work unit: a warp takes an "item" of kR weight rows: kR = 2 (rows 2t and 2t + 1, with SwiGLU gate
// row t and up row t + F: every x value read serves two rows, half the x traffic per weight) or
// kR = 1 (row t: as many items as rows, so the small matrices keep every warp busy), or, int4 rows
// read as 8-byte vectors, kR = 4 (rows 4t .. 4t + 3, or SwiGLU gate rows 2t, 2t + 1 and their up
// rows; 2 blocks per SM for the 56 weight registers). Lane l reads the
// 16-byte vectors l, l + 32, .., l + 32 (kU - 1) of each row per step (coalesced), kU = 4 or 8 load
// slots per row (int4 rows of 3,584 columns: 8-byte vectors, 7 slots, so that no slot is empty in
// half the lanes, format I4N; int8 / fp8 normalized rows of 3,584 columns (q/k/v, gate/up, lm_head):
// 7 slots, the row in one step).
// Pipelined (kPipe), each slot is refilled with the next step's vector (or, after
// an item's last step, the next item's first) right after it is consumed, so kR x kU loads stay in
// flight while the warp computes, with no second register buffer; otherwise a step's loads go out
// after the step before it is computed. The epilogue's per-row constants (row scale, bias) are
// loaded with an item's first step, the residual at the item's start, so no load latency is left
// at the end of an item. x: staged in shared memory up to 16 KB (4 blocks per SM, <= 64
// registers); larger (the down projection's 74 KB) either read through L1 (4 blocks per SM) or
// staged at 2 blocks per SM (<= 128 registers, which allows kR = 2 with kU = 8): through L1, the
// lanes' x reads are strided (lane l reads the 64 or 128 bytes of x under its own vector) and cost
// many L1 wavefronts per instruction, the int4 down projection's bottleneck. Knobs: QGemvTuning.
// (bench_gemv_quant sets them for every shape; COSMOS_QGEMV_TUNING per shape, kernels/qgemv_tuning_spec.h).
//
// Dequantization (fp32 accumulation; all of it exact: the only roundings are the fp32 products and
// sums that the test's error bound counts):
//   int8  as int4 below, no conversion instruction: b = q + 128 = byte ^ 0x80 (one LOP3 per 4
//         weights), byte k masked in place (t & 0xFF << 8k; byte 3 shifted down) is the fp32 value
//         b * 2^(8k - 149), times x pre-scaled by 2^(K - 8k) (2^K for byte 3): 2.25 instructions per
//         weight with the FFMA. The sums carry b = q + 128; the epilogue takes back 128 sum(x) (x
//         times the norm weight; each warp sums the block's per-warp sums, published by the
//         prologue's barrier), then multiplies by row_scale. The fp32 roundings act on sums of b x
//         instead of q x (the test's bound counts |s| (q + 256) |x| per term). (Before session 32:
//         PRMT under the exponent of 2^23 and an FADD of 2^23 + 128, 3.25 instructions per weight.
//         I2F is a quarter-rate conversion, 16 / clock / SM on sm_90: measured in session 31, every
//         byte by I2F.S8, the step's int8 products 2,054 -> 2,678 us.)
//   fp8   cvt.rn.f16x2.e4m3x2 (hardware, sm_89+) turns 2 weights into a half2, exact, then each half
//         to fp32 (exact): ~2.5 instructions per weight with the FFMA. Row scale in the epilogue.
//   int4  no conversion instruction at all: nibble k of a 32-bit word masked in place (u & 0xF << 4k,
//         one LOP3) is the bit pattern of the fp32 value q * 2^(4k - 149), subnormal or in the first
//         normal binade, where fp32 is linear in the bit pattern. The FFMA (inline PTX fma.rn.f32,
//         which keeps subnormal operands whatever the compiler flags: no flush-to-zero) multiplies it
//         by x pre-scaled by 2^(K - 4k) (in shared memory when staged, else as it is read), so
//         every product is q x 2^(K - 149), exactly the rounded fp32 product of q and x times a
//         power of two. Nibbles 6 and 7 come from (u >> 8) & 0xF0000 and u >> 28. 9 integer instructions per 8 weights: 2.1 per weight
//         with the FFMA. Per 32-column vector the warp then adds s_g * dot (s_g shuffled from the
//         lane that loaded it: one SHFL per vector for both rows, the two bf16 scales packed), and
//         the lane that loaded group g's minimum adds m_g * sum(x over g), the sums computed once
//         per block into shared memory; the epilogue multiplies by 2^(149 - K). K = 96 keeps
//         |x| < 2^32 from overflowing and products of |q x| >= 2^-73 normal (below that they lose
//         precision gradually, an absolute error under 2^-149 * 2^53 per operation).
//   int4, integer path (formats I4D / I4ND, kDp; automatic for q/k/v, gate/up, lm_head and down):
//         the prologue stages x as 16-bit fixed point per group of 128 columns, x~ = xs_g (256 h + l)
//         with xs_g = max |x| / 32767, h a signed and l an unsigned byte, and the group sums of x~
//         (exact integers times xs_g); a word's even and odd nibbles are masked into bytes (2
//         LOP3 + 1 SHF) and meet h and l in 4 DP4A (integer, exact): 7 instructions per 8 weights
//         where the fp32 path takes 17, then per vector and row (256 H + L) (< 2^24, exact as a
//         float) times xs_g, times s_g. The only new error is x~'s, |x - x~| < 2^-16 max_g |x|
//         (bf16 x would be 2^-9 |x|), in both s q . x~ and m sum(x~), so it meets the weights s q +
//         m, not the offset s q alone (that one's common part, shared by every row, made the
//         errors 10x larger: kernels/gemv_quant_vec.cuh, stage_dp).
// Fast path: int8 / fp8 cols % 16 == 0, int4 cols % 128 == 0 (whole groups), q, x (and the norm
// weight) 16-byte aligned; anything else takes the element-wise kernel (same math per element).
#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <type_traits>

#include <cuda_fp16.h>
#include <cuda_fp8.h>

#include "kernels/gemv_common.cuh"
#include "kernels/gemv_q4_mma.cuh"
#include "kernels/gemv_quant.cuh"
#include "kernels/gemv_quant_formats.cuh"
#include "kernels/ktrace.cuh"
#include "kernels/pdl.cuh"
#include "kernels/qgemv_tuning_spec.h"

namespace cosmos::kernels {
namespace {

using gemv_common::block_inv_rms;
using gemv_common::device_shape;
using gemv_common::DeviceShape;
using gemv_common::warp_max;
using gemv_common::warp_sum;
using namespace qgemv;  // QParams and the formats I8, F8, I4 (kernels/gemv_quant_formats.cuh)

constexpr int kWarps = gemv_common::kBlockWarps;
constexpr int kThreads = kWarps * 32;
constexpr int kStageMaxBytes = 16 * 1024;  // stage x in shared memory at 4 blocks per SM up to this size (as gemv.cu)
constexpr int kI4K = 96;                   // int4 x pre-scale exponent K (see the top comment):
static_assert(kI4K - 149 == -53, "I4::prescale, the group sums and the epilogue use 2^96 .. 2^76, 2^-53, 2^53");

// Where x lives (the kernel's kStage): read through L1; staged in shared memory (<= 16 KB, 4 blocks
// per SM, 64 registers); staged, larger, at 2 blocks per SM (128 registers).
constexpr int kXL1 = 0, kXSmem = 1, kXSmemBig = 2;

#include "kernels/gemv_quant_vec.cuh"  // gemv_q_vec, the vector kernel
#include "kernels/gemv_quant_scalar.cuh"  // gemv_q_scalar, the element-wise kernel

using KernelFn = void (*)(QParams);

// The instantiated variants: SwiGLU kR = 2, kU = 4 (kR x kU x 4 registers of weights: 8 slots fit
// 64 registers, 16 do not), x in shared memory or through L1; otherwise kR x kU in {2 x 4, 1 x 4,
// 1 x 8}, plus 2 x 8 with the big staging (128 registers).
template <typename F, bool kNorm, bool kSwiglu, int kStage, int kR, int kU>
KernelFn pick_pipe(bool pipe) {
  return pipe ? gemv_q_vec<F, kNorm, kSwiglu, kStage, kR, kU, true> : gemv_q_vec<F, kNorm, kSwiglu, kStage, kR, kU, false>;
}

// (int8 / fp8 gate/up at 4 rows per item, 2 gate rows and their up rows, x staged at 2 blocks per
// SM: slower in session 32's sweep, int8 34.23 -> 34.60 us, fp8 34.39 -> 34.88; not built.)
template <typename F, bool kNorm, bool kSwiglu, int kStage>
KernelFn pick_shape(int rows, int loads, bool pipe) {
  if constexpr (kSwiglu) {
    return pick_pipe<F, kNorm, true, kStage, 2, 4>(pipe);
  } else {
    if (rows == 2) {
      if constexpr (kStage == kXSmemBig) {
        if (loads == 8) return pick_pipe<F, kNorm, false, kStage, 2, 8>(pipe);
      }
      return pick_pipe<F, kNorm, false, kStage, 2, 4>(pipe);
    }
    if constexpr (kStage != kXL1) {
      if (loads == 8) return pick_pipe<F, kNorm, false, kStage, 1, 8>(pipe);
    }
    return pick_pipe<F, kNorm, false, kStage, 1, 4>(pipe);
  }
}

template <typename F, bool kNorm, bool kSwiglu>
KernelFn pick(bool vec, int stage, int rows, int loads, bool pipe) {
  if (!vec) return gemv_q_scalar<F, kNorm, kSwiglu>;
  if (stage == kXSmem) return pick_shape<F, kNorm, kSwiglu, kXSmem>(rows, loads, pipe);
  if constexpr (!kSwiglu) {
    if (stage == kXSmemBig) return pick_shape<F, kNorm, kSwiglu, kXSmemBig>(rows, loads, pipe);
  }
  return pick_shape<F, kNorm, kSwiglu, kXL1>(rows, loads, pipe);
}

// int4 rows of this many columns (the 7B model's hidden size: the rows of q/k/v, o, gate/up and
// lm_head) take kernels built for that width (kFixedCols) where the automatic plan runs them: the
// compiler then folds the row and group strides, the staged planes' stride and the steps (one per
// row) into constants, and in o's 2-row kernel the bounds checks too (62 registers, no spills).
// Alone (bench_gemv_quant, graph + PDL): o 5.27 -> 3.88 us, gate/up 22.73 -> 22.28, lm_head 77.37 ->
// 75.74; int4 decode @0 600.2 -> 620.4 tok/s, @4096 506.0 -> 519.9 (session 36's engine A/B, means of
// 2 rounds). int8 (q/k/v, gate/up, lm_head built so) was level (472.6 -> 474.1 @0, 424.8 -> 424.0
// @4096): not built for 8-bit.
constexpr int kModelCols = 3584;
constexpr int kModelFfCols = 18944;  // the 7B's intermediate size: the down projection's rows (int4)

// The I4N kernels (8-byte int4 vectors, 7 per lane and row, x staged, 2 or 4 rows per item); fixed:
// cols == kModelCols, the automatic shapes (normalized at 4 rows: q/k/v, gate/up, lm_head; o at 2).
constexpr int kNarrowLoads = 7;
// wide (o at a long context): the o kernel built for 2 blocks per SM at 128 registers (89 used, no
// spills) instead of 4 at 64, its 14 KB of x in one batch of loads instead of 2. Behind a long
// attention it is faster, behind a short one slower (session 39, `tests/gpu/ab.sh --rounds 2
// --precision int4`, means, tok/s: @0 736.7 -> 725.6, @512 705.5 -> 702.7, @1024 677.9 -> 679.7,
// @2048 631.4 -> 639.3, @3072 618.6 -> 629.6, @4096 594.7 -> 605.1, @8192 563.4 -> 577.1), presumably
// because fewer o blocks fit next to the attention's, so fewer of o's weight loads compete with the
// attention's reads of the KV cache before o can use them. The backend captures decode steps at
// contexts of 1,024 tokens or more with it (CudaBackend::kLongContext).
template <typename FN, bool kNorm, bool kSwiglu>
KernelFn narrow_kernel(int rows, bool fixed, bool wide) {
  if constexpr (kNorm) {
    if (fixed && rows == 4) return gemv_q_vec<FN, true, kSwiglu, kXSmem, 4, kNarrowLoads, false, kWarps, kModelCols>;
  }
  if constexpr (!kNorm && !kSwiglu) {
    if (fixed && rows == 2 && wide) return gemv_q_vec<FN, false, false, kXSmem, 2, kNarrowLoads, false, kWarps, kModelCols, true>;
    if (fixed && rows == 2) return gemv_q_vec<FN, false, false, kXSmem, 2, kNarrowLoads, false, kWarps, kModelCols>;
  }
  return rows == 4 ? gemv_q_vec<FN, kNorm, kSwiglu, kXSmem, 4, kNarrowLoads, false>
                   : gemv_q_vec<FN, kNorm, kSwiglu, kXSmem, 2, kNarrowLoads, false>;
}
// Normalized inputs (q/k/v, gate/up, lm_head) by integer dot products (I4ND), the others (o) on the
// fp32 path (I4N): with I4ND, o took 3.83 -> 5.46 us alone and int4 decode @0 lost 2.5 tok/s of
// the 675.9 without it (session 37's engine A/B; see plan_fmt for the rest).
KernelFn narrow_pick(bool norm, bool swiglu, int rows, bool fixed, bool wide) {
  return norm ? (swiglu ? narrow_kernel<I4ND, true, true>(rows, fixed, false) : narrow_kernel<I4ND, true, false>(rows, fixed, false))
              : (swiglu ? narrow_kernel<I4N, false, true>(rows, fixed, false) : narrow_kernel<I4N, false, false>(rows, fixed, wide));
}

// Shared memory of the staged x (bytes): kP planes of float4s, or kWords of uint4s with kDp.
template <typename F>
std::size_t staged_x_bytes(int cols) {
  const int planes = F::kDp ? F::kWords : F::kCols / 4;
  return static_cast<std::size_t>(planes) * staged_plane(cols / F::kCols, planes) * 16;
}

bool aligned16(const void* ptr) { return reinterpret_cast<std::uintptr_t>(ptr) % 16 == 0; }

constexpr std::size_t kStaticSmem = 256;  // gemv_q_vec's static shared memory (epi, block_inv_rms), rounded up

QGemvTuning g_tuning;  // bench_gemv_quant's knobs for every shape (set_gemv_quant_tuning)

// COSMOS_QGEMV_TUNING's knobs per shape (kernels/qgemv_tuning_spec.h), read once; what it takes and
// what it leaves out are said on stderr.
const QGemvTuningSpec& env_knobs() {
  static const QGemvTuningSpec spec = [] {
    const char* env = std::getenv("COSMOS_QGEMV_TUNING");
    QGemvTuningSpec s = env ? parse_qgemv_tuning(env) : QGemvTuningSpec{};
    for (const std::string& e : s.errors) std::fprintf(stderr, "COSMOS_QGEMV_TUNING: entry left out: %s\n", e.c_str());
    for (const QGemvShapeKnobs& k : s.shapes) {
      std::string line;
      for (int f = 0; f < QGemvShapeKnobs::kFields; ++f)
        if (k.set[f]) line.append(" ").append(QGemvShapeKnobs::kKeys[f]).append("=").append(std::to_string(k.value[f]));
      std::fprintf(stderr, "COSMOS_QGEMV_TUNING: %dx%d products take%s\n", k.rows, k.cols, line.c_str());
    }
    return s;
  }();
  return spec;
}

QGemvTuningSpec g_shape_knobs;  // the engine's per-shape knobs (set_gemv_quant_shape_knobs)

// The knobs a product plans with: bench_gemv_quant's, then its shape's entry of the engine's knobs,
// then its shape's COSMOS_QGEMV_TUNING entry on top.
QGemvTuning tuning_for(const QGemvArgs& a) {
  QGemvTuning t = g_tuning;
  int* field[QGemvShapeKnobs::kFields] = {&t.rows_per_item, &t.loads, &t.pipeline, &t.l2_next,
                                           &t.stage_x, &t.mma, &t.mma_tile_warps, &t.wide};
  const QGemvTuningSpec* specs[] = {&g_shape_knobs, &env_knobs()};
  for (const QGemvTuningSpec* spec : specs)
    if (const QGemvShapeKnobs* k = find_knobs(*spec, a.rows, a.cols))
      for (int f = 0; f < QGemvShapeKnobs::kFields; ++f)
        if (k->set[f]) *field[f] = k->value[f];
  return t;
}

// A launch, fully resolved.
struct Plan {
  QGemvTuning knobs;  // as gemv_quant_plan reports them
  KernelFn kernel = nullptr;
  std::size_t smem = 0;
  int blocks = 0;
  int items = 0;
  int warps = kWarps;  // per block
  bool sums = false;   // int8 / fp8: this shape has a kSums kernel (taken when args.x_div is set)
  bool x16 = false;    // this shape has a kX16 kernel (taken when args.x16 is set)
};

template <typename F>
Plan plan_fmt(const QGemvArgs& a) {
  Plan pl;
  const QGemvTuning tn = tuning_for(a);
  const bool norm = a.norm_weight != nullptr;
  const int outs = a.swiglu ? a.rows / 2 : a.rows;
  const DeviceShape dev = device_shape();
  const void* xin = a.x16 ? static_cast<const void*>(a.x16) : static_cast<const void*>(a.x);
  const bool vec = a.cols % F::kAlign == 0 && aligned16(a.w.q) && aligned16(xin) && (!norm || aligned16(a.norm_weight));
  const std::size_t x_bytes = static_cast<std::size_t>(a.cols) * sizeof(float);
  const std::size_t x_staged = static_cast<std::size_t>(F::kCols / 4) * staged_plane(a.cols / F::kCols, F::kCols / 4) * 16;
  const std::size_t sum_bytes = F::kGroups ? static_cast<std::size_t>(quant_groups(a.cols)) * sizeof(float) : 0;
  const int vecs = a.cols / F::kCols;
  // int4 rows of the 7B width take the kernels built for it (see kModelCols).
  [[maybe_unused]] const bool fixed = a.cols == kModelCols;
  if constexpr (F::kGroups) {
    // int4 on tensor cores when asked for and the shape allows it (not with bf16 x or y, which those
    // kernels do not read or write).
    if ((tn.mma == 2 || tn.mma == 4) && gemv_q4_mma_fits(a) && !a.y16 && !a.x16) {
      pl.knobs = QGemvTuning{0, 0, 0, 0, 0, tn.mma, gemv_q4_mma_tile_warps(a, tn.mma, tn.mma_tile_warps), 0};
      return pl;
    }
  }

  int stage = kXL1;
  if (vec && x_bytes <= std::min<std::size_t>(kStageMaxBytes, dev.smem_optin)) {
    stage = kXSmem;
  } else if (vec && !a.swiglu && tn.stage_x != 0 &&
             x_staged + sum_bytes + kStaticSmem <= static_cast<std::size_t>(dev.smem_optin)) {
    // Two blocks must fit on an SM (each also takes its static shared memory, epi, and the reserved
    // shared memory per block).
    int device = 0, per_sm = 0, reserved = 0;
    cudaGetDevice(&device);
    if (cudaDeviceGetAttribute(&per_sm, cudaDevAttrMaxSharedMemoryPerMultiprocessor, device) != cudaSuccess) per_sm = 0;
    if (cudaDeviceGetAttribute(&reserved, cudaDevAttrReservedSharedMemoryPerBlock, device) != cudaSuccess) reserved = 0;
    if (2 * (x_staged + sum_bytes + kStaticSmem + static_cast<std::size_t>(reserved)) <= static_cast<std::size_t>(per_sm))
      stage = kXSmemBig;
  }
  // Rows per item: 2 (SwiGLU: a gate row and its up row), unless a knob says 1. The products alone
  // (bench_gemv_quant --sweep, H200, docs/PERFORMANCE.md): int4 is fastest at 2 rows on every shape
  // (its x reads per weight dominate), int8 / fp8 at 1 on q/k/v and o, where 1 row fills every warp
  // of the wave. In the engine the 8-bit kernels at 1 row (every register file full) left the next
  // kernel's blocks no room to start under PDL: q/k/v at 2 rows took decode @4096 421.7 -> 425.1 tok/s
  // (int8) and 426.0 -> 428.7 (fp8), @0 463.4 -> 467.8 (int8) and level (fp8) (session 34's engine
  // A/B, means of 3 rounds). o at 2 rows (224 blocks instead of 448): its own time 5.5 -> 6.4 us, but
  // gate/up's first block past its PDL wait 2.2 -> 0.6 us after o's end and gate/up 35.2 -> 33.9 us
  // (kernels/ktrace.cuh); int8 decode @0 482.0 -> 488.8 tok/s, fp8 483.7 -> 487.0 (session 45's
  // engine A/B, means of 3 / 2 rounds; capping 1 row at 2 or 3 blocks per SM instead: -2.4%).
  int rows = 2;
  if (!a.swiglu && (tn.rows_per_item == 1 || tn.rows_per_item == 2)) rows = tn.rows_per_item;
  else if (!F::kGroups && a.x_div && a.sums_rows == 1 && !a.swiglu) rows = 1;
  // Loads per row per step: 8 slots (32 registers) of weights, 16 at 2 blocks per SM; 4 when a row
  // is one step of 4 anyway.
  // Measured: 8 loads and the pipelined refill pay off only for the int8 / fp8 down projection (x
  // staged at 2 blocks per SM: 31.5 -> 20.8 us); elsewhere they cost 3-16% (gate/up 37.7 -> 43.6 us,
  // lm_head 133 -> 155 us with the pipeline on). int4's down projection takes the 8 loads without the
  // pipelined refill (session 28, bench_gemv_quant --sweep --fmt int4: 18.39 -> 17.92 us; pipelined 18.52),
  // but by integer dot products (session 37) it takes the pipelined refill too: 15.67 -> 15.09 us
  // alone, int4 decode @0 680.3 -> 685.1 tok/s, @4096 563.4 -> 570.5 (engine A/B, means of 2 rounds).
  const bool big = stage == kXSmemBig && !F::kGroups;
  int loads = tn.loads == 4 || tn.loads == 8 ? tn.loads : (stage == kXSmemBig ? 8 : 4);
  if (a.swiglu || (rows == 2 && stage != kXSmemBig) || vecs <= 32 * 4) loads = 4;
  const bool big_i4 = F::kGroups && stage == kXSmemBig && vec && !norm && !a.swiglu && rows == 2 && loads == 8;
  const bool pipe = tn.pipeline >= 0 ? tn.pipeline != 0 : big || big_i4;

  // int4 rows of whole sets of 32 x 7 8-byte vectors (3,584 columns): I4N, 7 load slots per lane
  // and row, none empty (x staged, no pipelined refill; loads = 7 in the knobs).
  // (With the pipelined refill, each slot reloaded with the next item's vector as soon as it is
  // consumed: int4 decode 570.6 -> 539.7 tok/s in session 30's engine A/B; not built.)
  // There, 4 rows per item (SwiGLU: 2 gate rows and their up rows): every x value read serves 4 rows
  // and an item's reduction and epilogue 4 rows' worth of weights, at 2 blocks per SM (the weights of 4
  // rows take 56 registers). Automatic where the items give every resident warp 2 or more (gate/up,
  // lm_head; session 28's engine A/B: int4 decode 545.6 -> 554.3 tok/s with the down change below).
  // Measured alone (bench_gemv_quant --sweep --fmt int4, 2 -> 4 rows): gate/up 25.77 -> 25.35 us,
  // lm_head 89.14 -> 84.88, o 4.24 -> 4.05; but o at 4 rows (112 blocks of 2 per SM) lost in the
  // engine (session 29: with the one-pass prologue, int4 decode 553.7 -> 551.7 tok/s), so o keeps 2.
  // q/k/v (a normalized input without SwiGLU; lm_head takes 4 rows by the rule before) takes 4 rows
  // too, on its 144 blocks, instead of the tensor-core kernel's 288: 5.62 against 7.0 us alone, and
  // it leaves room on most SMs for the attention's blocks to start under PDL while q/k/v streams
  // (session 34's engine A/B, 3 rounds: int4 decode @4096 481.0 -> 485.9 tok/s, @0 level at 572).
  // On the full wave (264 blocks, every register file full) it took 6.05 us alone but was 2% slower
  // in the engine.
  // The normalized ones (q/k/v, gate/up, lm_head) by integer dot products on a fixed-point x (I4ND,
  // see the top comment), the down projection below too (I4D): alone gate/up 22.15 -> 20.76 us, down
  // 16.96 -> 15.76, lm_head 75.09 -> 72.32, q/k/v 5.21 -> 6.06 (slower: x's quantization is a larger
  // share of a small product, and its items are one per warp); in the engine, int4 decode @0 620.2
  // -> 675.9 tok/s, @4096 520.3 -> 558.0; with q/k/v on the fp32 kernel 673.1 / 558.4, with o on
  // the integer one too 661.9 / 551.3 (session 37's engine A/B, means of 2 rounds).
  bool narrow = false, wide = false;
  if constexpr (std::is_same_v<F, I4>) {
    const bool fits = vec && stage == kXSmem && rows == 2 && (a.cols / I4N::kCols) % (32 * kNarrowLoads) == 0;
    narrow = fits && !pipe && tn.loads != 4 && tn.loads != 8;
    if (narrow) {
      loads = kNarrowLoads;
      const long long items4 = a.swiglu ? (outs + 1) / 2 : (a.rows + 3) / 4;
      const long long warps2 = static_cast<long long>(dev.sms) * 2 * kWarps;
      if (tn.rows_per_item == 4 || (tn.rows_per_item == 0 && (items4 >= 2 * warps2 || (norm && !a.swiglu))))
        rows = 4;
      wide = !norm && !a.swiglu && rows == 2 && fixed && (tn.wide >= 0 ? tn.wide != 0 : a.long_context);
      pl.kernel = narrow_pick(norm, a.swiglu, rows, fixed, wide);
      // o at a short context: its kX16 twin for a bf16 x (the attention's output)
      if (!norm && !a.swiglu && rows == 2 && fixed && !wide) {
        pl.x16 = true;
        if (a.x16) pl.kernel = gemv_q_vec<I4N, false, false, kXSmem, 2, kNarrowLoads, false, kWarps, kModelCols, false, false, true>;
      }
    }
  }
  // int8 / fp8 rows of whole sets of 32 x 7 16-byte vectors (3,584 columns), x staged: one step of 7
  // loads per lane and row, no bounds checks (kExact), where 4 loads take two steps, the second a
  // quarter empty. Automatic for the normalized products (2 rows per item at 2 blocks per SM for the
  // 56 weight registers): q/k/v alone 7.57 -> 7.16 us (int8), 7.54 -> 7.15 (fp8); int8 decode @0
  // 462.5 -> 469.1 tok/s, @4096 423.1 -> 426.1 (session 35's engine A/B, means of 3 rounds). gate/up
  // (SwiGLU: a gate row and its up row per item) 4.36 -> 3.27 instructions per weight (ncu), alone
  // int8 34.22 -> 33.23 us, fp8 34.47 -> 33.64; decode @0 int8 462.3 -> 472.8, fp8 465.2 -> 475.0,
  // @4096 +0.8% / +1.1% (session 36, means of 3 rounds). The o product took it slower (int8 5.24 ->
  // 5.79 us alone, level in the engine): there only with the knob (loads = 7).
  bool q8n = false;
  if constexpr (!F::kGroups) {
    const bool want = tn.loads == kNarrowLoads || (tn.loads == 0 && norm);
    // (SwiGLU only normalized, as the model's gate/up: no kernel built for a case nothing runs.)
    if (want && vec && stage == kXSmem && (!a.swiglu || norm) && vecs % (32 * kNarrowLoads) == 0 && !pipe) {
      q8n = true;
      loads = kNarrowLoads;
      if (a.swiglu)
        pl.kernel = gemv_q_vec<F, true, true, kXSmem, 2, 7, false>;
      else
        pl.kernel = norm ? (rows == 2 ? gemv_q_vec<F, true, false, kXSmem, 2, 7, false> : gemv_q_vec<F, true, false, kXSmem, 1, 7, false>)
                         : (rows == 2 ? gemv_q_vec<F, false, false, kXSmem, 2, 7, false> : gemv_q_vec<F, false, false, kXSmem, 1, 7, false>);
    }
  }
  // int4 with x staged at 2 blocks per SM (the down projection: 1,792 items of 2 rows, 1 per warp):
  // one block of 16 warps per SM instead, on every SM (blocks = SMs, not items / 8), so each SM
  // stages x once (9.8 instead of 16.6 MB of L2 reads) and runs 13-14 items, where 224 blocks of 8
  // warps gave 92 SMs 16 items and 40 SMs 8. Alone (graph + PDL, chained with itself) it is slower,
  // 16.16 -> 16.97 us, but in the engine, behind gate/up, int4 decode @0 591.9 -> 600.7 tok/s,
  // @4096 500.6 -> 507.1 (session 36's engine A/B, means of 3 rounds). int8 / fp8 (pipelined) were
  // mixed: int8 -0.4% @0, fp8 +0.4%; they keep 8 warps. By integer dot products (I4D; session 37:
  // 16.96 -> 15.76 us alone, see the narrow kernels above), pipelined (above), and for the 7B's
  // 18,944 columns built for that width (kFixedCols): 15.83 -> 15.79 us alone, int4 decode @0
  // 677.2 -> 680.9 tok/s, @4096 560.7 -> 562.4 (session 37, means of 2 rounds). On 2 blocks of 8
  // warps instead it lost 3.4% @0 (17.01 us alone).
  bool w16 = false;
  if constexpr (F::kGroups) {
    if (!narrow && big_i4) {
      w16 = true;
      pl.warps = 2 * kWarps;
      pl.x16 = pipe;  // (x16: the same kernels staging a bf16 x, kernels/gemv_quant_x16.cuh)
      if (!pipe) pl.kernel = gemv_q_vec<I4D, false, false, kXSmemBig, 2, 8, false, 2 * kWarps>;
      else if (a.cols == kModelFfCols && a.x16) pl.kernel = gemv_q_vec<I4D, false, false, kXSmemBig, 2, 8, true, 2 * kWarps, kModelFfCols, false, false, true>;
      else if (a.cols == kModelFfCols) pl.kernel = gemv_q_vec<I4D, false, false, kXSmemBig, 2, 8, true, 2 * kWarps, kModelFfCols>;
      else if (a.x16) pl.kernel = gemv_q_vec<I4D, false, false, kXSmemBig, 2, 8, true, 2 * kWarps, 0, false, false, true>;
      else pl.kernel = gemv_q_vec<I4D, false, false, kXSmemBig, 2, 8, true, 2 * kWarps>;
    }
  }
  if (narrow || q8n || w16) {
  } else if (norm) {
    pl.kernel = a.swiglu ? pick<F, true, true>(vec, stage, rows, loads, pipe) : pick<F, true, false>(vec, stage, rows, loads, pipe);
  } else {
    pl.kernel = a.swiglu ? pick<F, false, true>(vec, stage, rows, loads, pipe) : pick<F, false, false>(vec, stage, rows, loads, pipe);
  }
  // int8 / fp8 down projection (x staged at 2 blocks per SM, pipelined, 2 rows and 8 loads) and o
  // (x staged at 4 blocks per SM, 2 rows and 4 loads): their kX16 twins for a bf16 x.
  if constexpr (!F::kGroups) {
    if (vec && !norm && !a.swiglu && !q8n && stage == kXSmemBig && rows == 2 && loads == 8 && pipe) {
      pl.x16 = true;
      if (a.x16) pl.kernel = gemv_q_vec<F, false, false, kXSmemBig, 2, 8, true, kWarps, 0, false, false, true>;
    } else if (vec && !norm && !a.swiglu && !q8n && stage == kXSmem && rows == 2 && loads == 4 && !pipe) {
      pl.x16 = true;
      if (a.x16) pl.kernel = gemv_q_vec<F, false, false, kXSmem, 2, 4, false, kWarps, 0, false, false, true>;
    }
  }
  // int8 / fp8 o taking the decode attention's sums (QGemvArgs::x_div, long-context graphs): the
  // automatic o shape (x staged, 2 rows per item or 1 by QGemvArgs::sums_rows, 4 loads, no pipelined
  // refill) built with kSums (kernels/gemv_quant_sums.cuh); any other shape refuses sums. With the
  // attention's 128 splits past 4,096 tokens, at 1 row: int8 decode @4096 428.5 -> 435.6 tok/s,
  // @8192 417.5 -> 424.5; fp8 432.6 -> 442.2 and 417.7 -> 428.6 (session 44's engine A/B, means of
  // 3 / 2 rounds); at 2 rows there int8 +1.3%, fp8 +2.0% more, but fp8 at 2,048 tokens -1.7% (session
  // 45; docs/PERFORMANCE.md).
  if constexpr (!F::kGroups) {
    pl.sums = vec && stage == kXSmem && !norm && !a.swiglu && !q8n && (rows == 1 || rows == 2) && loads == 4 && !pipe &&
              a.cols % 128 == 0 && a.cols / 128 <= gemv_quant_sums::kMaxGroups;
    if (pl.sums && a.x_div)
      pl.kernel = rows == 2 ? gemv_q_vec<F, false, false, kXSmem, 2, 4, false, kWarps, 0, false, true>
                            : gemv_q_vec<F, false, false, kXSmem, 1, 4, false, kWarps, 0, false, true>;
  }
  // The integer kernels (kDp) stage x as 16-bit fixed point and keep a scale per group after the sums.
  const bool dp = (narrow && norm) || w16;
  std::size_t x_staged_used = x_staged;
  if constexpr (F::kGroups) {
    if (narrow) x_staged_used = norm ? staged_x_bytes<I4ND>(a.cols) : staged_x_bytes<I4N>(a.cols);
    else if (dp) x_staged_used = staged_x_bytes<I4D>(a.cols);
  }
  pl.smem = (vec && stage != kXL1 ? x_staged_used : 0) + (vec ? sum_bytes * (dp ? 2 : 1) : 0);
  if (pl.smem > 48 * 1024)
    cudaFuncSetAttribute(pl.kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(pl.smem));
  pl.items = vec ? (a.swiglu ? (outs + rows / 2 - 1) / (rows / 2) : (a.rows + rows - 1) / rows) : outs;

  // One wave: every SM gets the same number of blocks, the items dealt round-robin (as gemv.cu).
  int occ = 0;
  if (cudaOccupancyMaxActiveBlocksPerMultiprocessor(&occ, pl.kernel, pl.warps * 32, pl.smem) != cudaSuccess || occ <= 0) occ = 1;
  pl.blocks = static_cast<int>(std::min<long long>(static_cast<long long>(dev.sms) * occ,
                                                   w16 ? pl.items : (static_cast<long long>(pl.items) + kWarps - 1) / kWarps));
  // l2_next: when some warps have a second item and most do not (as gemv.cu).
  const long long launched = static_cast<long long>(pl.blocks) * pl.warps;
  const bool l2 = tn.l2_next >= 0 ? tn.l2_next != 0 : (pl.items > launched && pl.items <= 2 * launched);
  if constexpr (F::kGroups) {
    // Automatic: int4 on tensor cores (4 groups in flight per warp, 8 warps per tile) for a
    // normalized input without SwiGLU whose tiles all run at once, where the 4-row kernel above does
    // not apply (rows of other than whole sets of 3,584 columns): there it measured 6.96 against
    // 8.0 us for 2 rows (its RMSNorm prologue reads x once, into registers; the CUDA-core kernel's
    // takes two passes). Everywhere else the CUDA-core kernel measured faster: o 4.5 against 5.6 us,
    // down 17.9 / 24.1, gate/up 26.4 / 29.9, lm_head 94 / 105 (bench_gemv_quant --sweep,
    // docs/PERFORMANCE.md).
    if (tn.mma < 0 && vec && norm && !a.swiglu && !(narrow && rows == 4) && gemv_q4_mma_fits(a) &&
        gemv_q4_mma_tile_warps(a, 4, tn.mma_tile_warps) == 8) {
      pl.knobs = QGemvTuning{0, 0, 0, 0, 0, 4, 8, 0};
      return pl;
    }
  }
  if (vec) pl.knobs = QGemvTuning{rows, loads, pipe ? 1 : 0, l2 ? 1 : 0, stage == kXSmemBig ? 1 : 0, 0, 0, wide ? 1 : 0};
  else pl.knobs = QGemvTuning{0, 0, 0, 0, 0, 0, 0, 0};
  return pl;
}

template <typename F>
std::size_t launch_fmt(const QGemvArgs& a, cudaStream_t stream) {
  KTRACE_ARM("gemv_quant");
  const Plan pl = plan_fmt<F>(a);
  // only int4 o's long-context kernel and the 8-bit kSums kernel divide sums
  if (a.x_div && (std::is_same_v<F, I4> ? pl.knobs.wide != 1 : !pl.sums)) return 0;
  // only the down- and o-shaped kernels take a bf16 x; a bf16 y only with SwiGLU
  if ((a.x16 && (!pl.x16 || a.x_div)) || (a.y16 && !a.swiglu)) return 0;
  if (pl.knobs.mma != 0) return launch_gemv_q4_mma(a, pl.knobs.mma, pl.knobs.mma_tile_warps, stream);
  QParams p = params_of(a);
  p.items = pl.items;
  p.l2_next = pl.knobs.l2_next;
  (void)launch_pdl(pl.kernel, dim3(static_cast<unsigned>(pl.blocks)), dim3(static_cast<unsigned>(pl.warps * 32)), pl.smem, stream, p);
  return bytes_moved(a);
}

}  // namespace

void set_gemv_quant_tuning(const QGemvTuning& tuning) { g_tuning = tuning; }
void set_gemv_quant_shape_knobs(const QGemvTuningSpec& spec) { g_shape_knobs = spec; }

QGemvTuning gemv_quant_plan(const QGemvArgs& a) {
  if (a.rows <= 0 || a.cols <= 0 || (a.swiglu && a.rows % 2 != 0)) return QGemvTuning{0, 0, 0, 0, 0, 0, 0, 0};
  switch (a.w.kind) {
    case QuantKind::int8_row: return plan_fmt<I8>(a).knobs;
    case QuantKind::fp8_row: return plan_fmt<F8>(a).knobs;
    case QuantKind::int4_group: return plan_fmt<I4>(a).knobs;
  }
  return QGemvTuning{0, 0, 0, 0, 0, 0, 0, 0};
}

bool gemv_quant_takes_sums(const QGemvArgs& a) {
  if (a.rows <= 0 || a.cols <= 0 || a.swiglu || a.norm_weight) return false;
  switch (a.w.kind) {
    case QuantKind::int8_row: return plan_fmt<I8>(a).sums;
    case QuantKind::fp8_row: return plan_fmt<F8>(a).sums;
    case QuantKind::int4_group: return plan_fmt<I4>(a).knobs.wide == 1;
  }
  return false;
}

bool gemv_quant_takes_x16(const QGemvArgs& a) {
  if (a.rows <= 0 || a.cols <= 0 || a.swiglu || a.norm_weight || a.x_div) return false;
  switch (a.w.kind) {
    case QuantKind::int8_row: return plan_fmt<I8>(a).x16;
    case QuantKind::fp8_row: return plan_fmt<F8>(a).x16;
    case QuantKind::int4_group: return plan_fmt<I4>(a).x16;
  }
  return false;
}

std::size_t launch_gemv_quant(const QGemvArgs& a, cudaStream_t stream) {
  if (a.rows <= 0 || a.cols <= 0 || (a.swiglu && a.rows % 2 != 0)) return 0;
  switch (a.w.kind) {
    case QuantKind::int8_row: return launch_fmt<I8>(a, stream);
    case QuantKind::fp8_row: return launch_fmt<F8>(a, stream);
    case QuantKind::int4_group: return launch_fmt<I4>(a, stream);
  }
  return 0;
}

}  // namespace cosmos::kernels
