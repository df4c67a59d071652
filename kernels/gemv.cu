#include <algorithm>

#include "kernels/gemv.cuh"
#include "kernels/gemv_common.cuh"
#include "kernels/gemv_sums.cuh"
#include "kernels/half_ops.cuh"
#include "kernels/pdl.cuh"

namespace cosmos::kernels {
namespace {

constexpr int kWarps = 8;  // warps per block; each warp computes whole outputs (no cross-warp reduction)
constexpr int kThreads = kWarps * 32;
// Kernel shapes (measured on the H200, see tests/gpu/bench_kernels.cu):
//   x staged in shared memory ("wave" launches with x up to kStageMaxBytes, the hidden size's
//   14 KB): 8 16-byte weight loads in flight per lane (4 KB per warp; 4 per row of a SwiGLU pair),
//   <= 64 registers, 4 blocks per SM;
//   x read through L1 (larger x, such as the down projection's 74 KB, which staged would take L1
//   space from the loads in flight; and "blocks" launches): 4 loads per row in flight, <= 48
//   registers and 5 blocks per SM when nothing is fused, else <= 64 registers.
constexpr int kStageMaxBytes = 16 * 1024;
template <bool kStage, bool kSwiglu>
constexpr int kLoads = kStage ? (kSwiglu ? 4 : 8) : 4;
template <bool kStage, bool kFused>
constexpr int kMinBlocks = kStage || kFused ? 4 : 5;

GemvTuning g_tuning;

using half_ops::Bf16Ops;
using half_ops::F16Ops;
using half_ops::OpsOf;
using half_ops::staged_half;

template <typename T>
struct Params {
  const T* w;
  const float* x;
  const T* bias;
  const float* residual;  // may alias y: not restrict
  float* y;
  float* y2;   // null or a second copy of y
  const T* g;  // norm weight
  float eps;
  int cols;
  int outs;         // outputs (rows, or rows / 2 with swiglu)
  int half;         // swiglu: row offset of the up rows (F); else 0
  int l2_next;        // prefetch the rows of each warp's next output into L2 (sm_90), see the launcher
  int early_trigger;  // 1: pdl_launch_dependents() right after pdl_wait(); 0: when the block is done
  int early_epi;      // 1: a warp's first output's bias before the wait and residual right after it
  const float* xs_l;  // kSums: x = p.x, sums in two buckets [2][cols], their divisors [2][cols / group]
  int group;
  int group_shift;  // kSums: log2(group / 8), the group of 8-column vector i is i >> group_shift
};

template <typename Ops>
__device__ __forceinline__ float ld_elem(const typename Ops::T* p) {
  return Ops::one(*reinterpret_cast<const unsigned short*>(p));
}

using half_ops::dot8;

using gemv_common::block_inv_rms;
using gemv_common::warp_sum;
static_assert(kWarps == gemv_common::kBlockWarps, "block_inv_rms reduces over kBlockWarps warps");

// The epilogue's inputs of output o: bias (gate and up with swiglu) and residual, 0 where absent.
struct Epi {
  float b0 = 0.0f, b1 = 0.0f, res = 0.0f;
};
template <typename Ops, bool kSwiglu>
__device__ __forceinline__ void load_bias(const Params<typename Ops::T>& p, int o, Epi& e) {
  if (p.bias) {
    e.b0 = ld_elem<Ops>(p.bias + o);
    if constexpr (kSwiglu) e.b1 = ld_elem<Ops>(p.bias + o + p.half);
  }
}
template <typename Ops, bool kSwiglu>
__device__ __forceinline__ Epi load_epi(const Params<typename Ops::T>& p, int o) {
  Epi e;
  load_bias<Ops, kSwiglu>(p, o, e);
  if (p.residual) e.res = __ldcg(p.residual + o);
  return e;
}

// Lane 0's epilogue for output `o`: a0 is the full dot product of row o, a1 of row o + half (swiglu).
template <typename Ops, bool kSwiglu>
__device__ __forceinline__ void finish(const Params<typename Ops::T>& p, int o, float a0, float a1, const Epi& e) {
  float v;
  if constexpr (kSwiglu) {
    const float gate = a0 + e.b0, up = a1 + e.b1;
    v = gate / (1.0f + expf(-gate)) * up;
  } else {
    v = a0 + e.b0;
  }
  if (p.residual) v += e.res;
  p.y[o] = v;
  if (p.y2) p.y2[o] = v;
}

// Vector path: cols % 8 == 0, w / x / g 16-byte aligned. Each warp computes whole outputs: lane l
// reads the 16-byte weight vectors l, l + 32, ... of its row(s), kU of them per step, and the
// matching 8 x values. kStage: x (normalized when kNorm) is first copied into shared memory, split
// into the low and high 4 floats of each 8-column group so the lanes' 16-byte reads don't conflict.
// kNarrow (products without SwiGLU): blocks of 7 warps at 5 per SM (<= 56 registers), 35 warps per
// SM instead of 32; with x staged, 7 loads per row in flight (a 3,584-column row in exactly two
// steps). q/k/v (4,608 rows) then runs in one round on 132 SMs, and o and down get the same launch
// shape as q/k/v, which is what keeps the PDL handovers between them cheap (docs/PERFORMANCE.md,
// session 8 step 8: narrow for q/k/v alone lost in the chain, for all three won).
template <bool kNarrow>
constexpr int kWarpsOf = kNarrow ? 7 : kWarps;
// kSums: x staged from the decode attention's sums (GemvArgsT::x_sums; p.x is bucket 0,
// gemv_sums::stage), only with kStage and kNarrow, no norm.
template <typename Ops, bool kNorm, bool kSwiglu, bool kStage, bool kNarrow = false, bool kSums = false>
__global__ void __launch_bounds__(kWarpsOf<kNarrow> * 32, kNarrow ? 5 : kMinBlocks<kStage, kNorm || kSwiglu>)
    gemv_vec(const Params<typename Ops::T> p) {
  static_assert(!kNarrow || !kSwiglu, "no narrow SwiGLU");
  static_assert(!kSums || (kStage && kNarrow && !kNorm), "sums: staged, narrow, no norm");
  constexpr int kWarps = kWarpsOf<kNarrow>;
  constexpr int kThreads = kWarps * 32;
  constexpr int kR = kSwiglu ? 2 : 1;          // weight rows per output
  constexpr int kU = kNarrow && kStage ? 7 : kLoads<kStage, kSwiglu>;  // 16-byte loads per row per step
  constexpr int kStep = 32 * kU;               // 16-byte vectors per row per step
  extern __shared__ float4 xs[];               // kStage: [2][ps] (ps = staged_half(vecs) >= vecs)
  __shared__ float s_inv[kSums ? gemv_sums::kMaxGroups : 1];  // kSums: 1 / divisor per group
  const int lane = threadIdx.x & 31;
  const int warp = threadIdx.x >> 5;
  const int vecs = p.cols >> 3;
  const int ps = staged_half(vecs);
  // Outputs are dealt to blocks round-robin (block b gets b, b + grid, ...: equal counts within 1)
  // and, within a block, to its warps in turn.
  const int stride = gridDim.x * kWarps;
  int o = blockIdx.x + gridDim.x * warp;

  uint4 w[kR][kU];
  auto load = [&](int out, int s) {
#pragma unroll
    for (int r = 0; r < kR; ++r) {
      const uint4* row = reinterpret_cast<const uint4*>(p.w + static_cast<std::size_t>(out + r * p.half) * p.cols);
#pragma unroll
      for (int u = 0; u < kU; ++u) {
        const int i = s + lane + 32 * u;
        w[r][u] = i < vecs ? __ldcs(row + i) : make_uint4(0u, 0u, 0u, 0u);  // streamed once: evict-first
      }
    }
  };

  // Weights are immutable: the first step's loads go out before waiting on the previous kernel, so
  // they overlap its tail (and this kernel's own launch ramp). With p.early_epi lane 0 also reads
  // the first output's bias then, and its residual right after the wait: the epilogue's loads
  // are otherwise a dependent round trip at the very end, on the path to the next kernel's start.
  // (Not with SwiGLU: the model has neither bias nor residual there, and the registers would spill.)
  const bool early_epi = !kSwiglu && p.early_epi;
  Epi first;  // early_epi: the epilogue inputs of this warp's first output (lane 0)
  if (o < p.outs) {
    load(o, 0);
    if (early_epi && lane == 0) load_bias<Ops, kSwiglu>(p, o, first);
  }
  if constexpr (kNorm && kStage) gemv_common::prefetch_l1<kThreads>(p.g, p.cols * 2);  // read after the norm's reduction
  pdl_wait();  // from here on: x, the residual and y, which other kernels write or read
  if (p.early_trigger) pdl_launch_dependents();
  if (early_epi && lane == 0 && o < p.outs && p.residual) first.res = __ldcg(p.residual + o);
  const int first_o = o;

  const float4* x4 = reinterpret_cast<const float4*>(p.x);
  float inv = 1.0f;
  if constexpr (kSums) {
    gemv_sums::stage<kThreads>(xs, ps, s_inv, p.x, p.xs_l, p.cols, p.group);  // ends with a barrier
  } else if constexpr (kNorm || kStage) {
    const int n4 = p.cols >> 2;
    float ss = 0.0f;
    // Batches of kB float4s per thread, all loaded before any is used: 14 KB of x in one round
    // trip to L2 (a plain loop left 2-3 dependent ones after the compiler's unrolling).
    constexpr int kB = 4;
    for (int i0 = threadIdx.x; i0 < n4; i0 += kB * kThreads) {
      float4 v[kB];
#pragma unroll
      for (int b = 0; b < kB; ++b) {
        const int i = i0 + b * kThreads;
        if (i < n4) v[b] = kStage ? __ldcg(x4 + i) : x4[i];  // staged: read once, keep it out of L1
      }
#pragma unroll
      for (int b = 0; b < kB; ++b) {
        const int i = i0 + b * kThreads;
        if (i < n4) {
          if constexpr (kNorm) ss += v[b].x * v[b].x + v[b].y * v[b].y + v[b].z * v[b].z + v[b].w * v[b].w;
          if constexpr (kStage) xs[(i & 1) * ps + (i >> 1)] = v[b];
        }
      }
    }
    if constexpr (kNorm) {
      inv = block_inv_rms<kWarps>(ss, p.cols, p.eps);
      if constexpr (kStage) {
        // Each thread rescales the elements it staged itself: no barrier needed in between.
        gemv_common::rescale_staged<Ops, kThreads, kStageMaxBytes / 16>(xs, ps, reinterpret_cast<const uint2*>(p.g),
                                                                        n4, inv);
      }
    }
    if constexpr (kStage) __syncthreads();
  }

  // x values for 16-byte weight vector i (columns 8i .. 8i+7).
  auto xval = [&](int i, float4& a, float4& b) {
    if constexpr (kStage) {
      a = xs[i];
      b = xs[ps + i];
    } else {
      a = x4[2 * i];
      b = x4[2 * i + 1];
      if constexpr (kNorm) {
        const uint4 gv = __ldg(reinterpret_cast<const uint4*>(p.g) + i);
        const float2 g0 = Ops::pair(gv.x), g1 = Ops::pair(gv.y), g2 = Ops::pair(gv.z), g3 = Ops::pair(gv.w);
        a = make_float4(g0.x * (a.x * inv), g0.y * (a.y * inv), g1.x * (a.z * inv), g1.y * (a.w * inv));
        b = make_float4(g2.x * (b.x * inv), g2.y * (b.y * inv), g3.x * (b.z * inv), g3.y * (b.w * inv));
      }
    }
  };

  for (; o < p.outs; o += stride) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
    if (p.l2_next && lane == 0 && o + stride < p.outs) {
      const unsigned row_bytes = static_cast<unsigned>(p.cols) * sizeof(typename Ops::T);  // a multiple of 16
#pragma unroll
      for (int r = 0; r < kR; ++r) {
        const typename Ops::T* row = p.w + static_cast<std::size_t>(o + stride + r * p.half) * p.cols;
        asm volatile("cp.async.bulk.prefetch.L2.global [%0], %1;" ::"l"(row), "r"(row_bytes) : "memory");
      }
    }
#endif
    float acc[kR];
#pragma unroll
    for (int r = 0; r < kR; ++r) acc[r] = 0.0f;
    for (int s = 0;;) {
#pragma unroll
      for (int u = 0; u < kU; ++u) {
        const int i = s + lane + 32 * u;
        if (i < vecs) {
          float4 a, b;
          xval(i, a, b);
#pragma unroll
          for (int r = 0; r < kR; ++r) {
            if constexpr (kSums)
              acc[r] = fmaf(dot8<Ops>(w[r][u], a, b), s_inv[i >> p.group_shift], acc[r]);  // vector i's group
            else
              acc[r] += dot8<Ops>(w[r][u], a, b);
          }
        }
      }
      s += kStep;
      if (s >= vecs) break;
      load(o, s);
    }
    if (o + stride < p.outs) load(o + stride, 0);  // next output's first step, before the reduction
#pragma unroll
    for (int r = 0; r < kR; ++r) acc[r] = warp_sum(acc[r]);
    if (lane == 0)
      finish<Ops, kSwiglu>(p, o, acc[0], acc[kR - 1], early_epi && o == first_o ? first : load_epi<Ops, kSwiglu>(p, o));
  }
  if (!p.early_trigger) pdl_launch_dependents();
}

// Any cols and alignment: one element per lane per step.
template <typename Ops, bool kNorm, bool kSwiglu>
__global__ void __launch_bounds__(kThreads) gemv_scalar(const Params<typename Ops::T> p) {
  constexpr int kR = kSwiglu ? 2 : 1;
  const int lane = threadIdx.x & 31;
  const int warp = threadIdx.x >> 5;
  pdl_wait();
  pdl_launch_dependents();
  float inv = 1.0f;
  if constexpr (kNorm) inv = gemv_common::block_inv_rms_of(p.x, p.cols, p.eps);
  for (int o = blockIdx.x + gridDim.x * warp; o < p.outs; o += gridDim.x * kWarps) {
    const unsigned short* row[kR];
#pragma unroll
    for (int r = 0; r < kR; ++r)
      row[r] = reinterpret_cast<const unsigned short*>(p.w + static_cast<std::size_t>(o + r * p.half) * p.cols);
    float acc[kR];
#pragma unroll
    for (int r = 0; r < kR; ++r) acc[r] = 0.0f;
#pragma unroll 4
    for (int c = lane; c < p.cols; c += 32) {
      float xv = p.x[c];
      if constexpr (kNorm) xv = ld_elem<Ops>(p.g + c) * (xv * inv);
#pragma unroll
      for (int r = 0; r < kR; ++r) acc[r] = fmaf(Ops::one(__ldcs(row[r] + c)), xv, acc[r]);
    }
#pragma unroll
    for (int r = 0; r < kR; ++r) acc[r] = warp_sum(acc[r]);
    if (lane == 0) finish<Ops, kSwiglu>(p, o, acc[0], acc[kR - 1], load_epi<Ops, kSwiglu>(p, o));
  }
}

template <typename T>
using KernelFn = void (*)(Params<T>);

template <typename Ops, bool kNorm, bool kSwiglu>
KernelFn<typename Ops::T> pick(bool vec, bool stage, bool narrow) {
  if (!vec) return gemv_scalar<Ops, kNorm, kSwiglu>;
  if constexpr (!kSwiglu)
    if (narrow) return stage ? gemv_vec<Ops, kNorm, kSwiglu, true, true> : gemv_vec<Ops, kNorm, kSwiglu, false, true>;
  return stage ? gemv_vec<Ops, kNorm, kSwiglu, true> : gemv_vec<Ops, kNorm, kSwiglu, false>;
}

bool aligned16(const void* p) { return reinterpret_cast<std::uintptr_t>(p) % 16 == 0; }

using gemv_common::device_shape;
using gemv_common::DeviceShape;

}  // namespace

void set_gemv_tuning(const GemvTuning& t) { g_tuning = t; }

bool gemv_sums_supported(int cols, int sum_group) {
  return cols > 0 && cols % 8 == 0 && sum_group >= 16 && (sum_group & (sum_group - 1)) == 0 && cols % sum_group == 0 &&
         cols / sum_group <= gemv_sums::kMaxGroups &&
         static_cast<std::size_t>(cols) * sizeof(float) <=
             std::min<std::size_t>(kStageMaxBytes, static_cast<std::size_t>(device_shape().smem_optin));
}

template <typename T>
std::size_t launch_gemv(const GemvArgsT<T>& a, cudaStream_t stream) {
  using Ops = typename OpsOf<T>::type;
  if (a.rows <= 0 || a.cols <= 0 || (a.swiglu && a.rows % 2 != 0)) return 0;
  const bool norm = a.norm_weight != nullptr;
  const int outs = a.swiglu ? a.rows / 2 : a.rows;
  const bool sums = a.x_sums != nullptr;
  if (sums && (norm || a.swiglu || !a.x_sum_div || !gemv_sums_supported(a.cols, a.sum_group) || !aligned16(a.w) ||
               !aligned16(a.x_sums)))
    return 0;

  const DeviceShape dev = device_shape();

  const bool vec = a.cols % 8 == 0 && aligned16(a.w) && aligned16(a.x) && (!norm || aligned16(a.norm_weight));
  // Two launch shapes. "wave" (the default): exactly as many blocks as fit on the GPU at once
  // (SMs x occupancy), outputs dealt round-robin, so every SM gets the same number of blocks and of
  // outputs (within one), also under PDL where the blocks are placed early, one by one, into the
  // room the previous kernel leaves; x is staged and the norm computed once per block. "blocks":
  // one output per warp and as many blocks as that takes, the hardware dealing blocks to SMs as
  // they free up; each block pays the x / norm prologue. Measured on the H200 decode chain: wave
  // 3706 us, blocks 4000 us.
  const bool wave = sums || g_tuning.wave != 0;  // sums: always staged, in the narrow shape
  const std::size_t stage_bytes = static_cast<std::size_t>(a.cols) * sizeof(float);
  const std::size_t stage_max = g_tuning.stage_max_bytes > 0 ? static_cast<std::size_t>(g_tuning.stage_max_bytes)
                                                             : static_cast<std::size_t>(kStageMaxBytes);
  const bool stage = vec && wave && stage_bytes <= std::min(stage_max, static_cast<std::size_t>(dev.smem_optin)) &&
                     (norm || sums || g_tuning.stage_plain != 0);
  if (sums && !stage) return 0;  // only with a lowered GemvTuning::stage_max_bytes
  const std::size_t smem = stage ? static_cast<std::size_t>(2 * staged_half(a.cols / 8)) * 16 : 0;

  // The narrow shape (see gemv_vec) for the products without SwiGLU up to two rounds of its warps
  // (q/k/v, o, down; not lm_head, whose 152k rows stream better in the default shape).
  const long long narrow_warps = static_cast<long long>(dev.sms) * 5 * 7;
  const bool narrow = sums || (wave && vec && !a.swiglu &&
                               (g_tuning.narrow > 0 || (g_tuning.narrow < 0 && outs <= 2 * narrow_warps)));
  const int wpb = narrow ? 7 : kWarps;
  KernelFn<T> kernel = nullptr;
  if (sums) {
    kernel = gemv_vec<Ops, false, false, true, true, true>;
  } else if (norm) {
    kernel = a.swiglu ? pick<Ops, true, true>(vec, stage, false) : pick<Ops, true, false>(vec, stage, narrow);
  } else {
    kernel = a.swiglu ? pick<Ops, false, true>(vec, stage, false) : pick<Ops, false, false>(vec, stage, narrow);
  }
  if (smem > 48 * 1024) cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(smem));

  unsigned blocks = static_cast<unsigned>((outs + kWarps - 1) / kWarps);
  if (wave) {
    int occ = 0;
    if (cudaOccupancyMaxActiveBlocksPerMultiprocessor(&occ, kernel, wpb * 32, smem) != cudaSuccess || occ <= 0) occ = 1;
    if (g_tuning.blocks_per_sm > 0) occ = std::min(occ, g_tuning.blocks_per_sm);
    blocks = static_cast<unsigned>(std::min<long long>(static_cast<long long>(dev.sms) * occ, outs));
  }

  Params<T> p{};
  p.w = a.w;
  p.x = a.x;
  p.bias = a.bias;
  p.residual = a.residual;
  p.y = a.y;
  p.y2 = a.y2;
  p.g = a.norm_weight;
  p.eps = a.norm_eps;
  p.cols = a.cols;
  p.outs = outs;
  p.half = a.swiglu ? outs : 0;
  // When most warps have one output and some two (the q/k/v projection: 4608 rows for 4224 warps),
  // the second rows would stream at the pace of a few warps per SM after the rest are done: fetch
  // them into L2 up front instead (at most one row per warp, a few MB).
  const long long warps = static_cast<long long>(blocks) * wpb;
  p.l2_next = g_tuning.l2_next >= 0 ? g_tuning.l2_next : (outs > warps && outs <= 2 * warps ? 1 : 0);
  p.early_trigger = g_tuning.early_trigger >= 0 ? g_tuning.early_trigger : 1;
  p.early_epi = g_tuning.early_epi >= 0 ? g_tuning.early_epi : 1;
  if (sums) p.x = a.x_sums;
  p.xs_l = a.x_sum_div;
  p.group = a.sum_group;
  p.group_shift = 0;
  while (sums && (8 << p.group_shift) < a.sum_group) ++p.group_shift;
  (void)launch_pdl(kernel, dim3(blocks), dim3(wpb * 32), smem, stream, p);

  const std::size_t r = static_cast<std::size_t>(a.rows), c = static_cast<std::size_t>(a.cols),
                    n = static_cast<std::size_t>(outs);
  const std::size_t x_bytes = sums ? c * 4 + 2 * (c / static_cast<std::size_t>(a.sum_group)) * 4 : c * 4;
  return r * c * sizeof(T) + x_bytes + (norm ? c * sizeof(T) : 0) + (a.bias ? r * sizeof(T) : 0) +
         (a.residual ? n * 4 : 0) + (a.y2 ? 2 : 1) * n * 4;
}

template std::size_t launch_gemv<__nv_bfloat16>(const GemvArgsT<__nv_bfloat16>&, cudaStream_t);
template std::size_t launch_gemv<__half>(const GemvArgsT<__half>&, cudaStream_t);

}  // namespace cosmos::kernels
