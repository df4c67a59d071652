// int4 decode matrix-vector product on tensor cores (kernels/gemv_q4_mma.cuh). The CUDA-core kernel
// (gemv_quant.cu) spends ~4.5 instructions per weight (ncu); here the products run as mma.m16n8k16
// (bf16 inputs, fp32 accumulation): ncu counts 2.7 instructions per weight (a LOP3 per two weights,
// 3 shifts per 8, 1/8 of an mma, and the per-group epilogue). Measured (docs/PERFORMANCE.md, session
// 6) it beat the CUDA-core kernel only on the q/k/v shape, where the automatic choice (gemv_quant.cu,
// plan_fmt) used it until session 34; since then q/k/v of 3,584 columns runs on the CUDA-core kernel
// at 4 rows per item, whose 144 blocks leave room for the attention, and this kernel takes the
// normalized products of other widths (and the `mma` knob). Both are latency-bound.
//
// The problem as mma: A = a 16-row tile of W (16 x 16 per mma), B = 16 x 8 with x split as
// x = hi + lo, hi in column 0 and lo in column 1 (bf16 each, so x keeps 16 significant bits; the
// other 6 columns are zero), D columns 0 + 1 = the 16 rows' dot products. The order of k inside an
// mma is free as long as A and B agree, so each lane dequantizes the 16-byte vector it loaded
// itself, no shuffles: lane (g, t) = (lane / 4, lane % 4) loads bytes 64 G + 16 t of rows g and
// g + 8 of the tile (columns 128 G + 32 t .. + 31, group G), and 32-bit word w of it feeds two mmas
// (h = 0, 1): A slots (2t, 2t+1) take the nibbles 2h and 2h + 4 of the word, slots (2t+8, 2t+9) the
// nibbles 2h + 1 and 2h + 5. One LOP3 makes a pair: ((u >> 4s) & 0x000F000F) | 0x43004300 is the
// bf16 pair (128 + q_s, 128 + q_{s+4}), exact. B holds x in the same order, prepared once per
// block in shared memory as the lanes' fragments ("frag" below).
// Per group G and row: D_G = sum_c (128 + q_c)(hi_c + lo_c) = sum q_c x'_c + 128 X'_G with
// x' = hi + lo and X'_G = sum of x' over the group, so the row gains s_G (D_G - 128 X'_G) + m_G X'_G
// (fp32; the q + 128 offset costs a few bits of the accumulator's 24, covered by the test's bound).
//
// Work: tiles of 16 rows (SwiGLU: 8 gate rows and their 8 up rows, rows g and g + 8, so one lane
// holds an output's gate and up); kTW = 8 or 4 warps per tile splitting its groups (warp w of the
// tile takes groups w, w + kTW, ..; a block runs 8 / kTW tiles at once), a deterministic reduction
// through shared memory at the end of a tile, and the epilogue (bias, SwiGLU, residual) in one warp.
// Loads: kJ groups per warp in flight (2 x 16 bytes per lane each); a slot is refilled with its next
// group (this tile's next round or the next tile's first) right after it is consumed; the first
// loads go out before pdl_wait(). Grid: at most one wave of blocks, tiles dealt round-robin.
#include <algorithm>
#include <cstdint>

#include <cuda_bf16.h>

#include "kernels/gemv_common.cuh"
#include "kernels/gemv_q4_mma.cuh"
#include "kernels/gemv_quant_formats.cuh"
#include "kernels/mma_bf16.cuh"
#include "kernels/pdl.cuh"

namespace cosmos::kernels {
namespace {

using gemv_common::block_inv_rms;
using qgemv::bf16f;
using qgemv::params_of;
using qgemv::QParams;
using qgemv::word;

constexpr int kWarps = gemv_common::kBlockWarps;
constexpr int kThreads = kWarps * 32;
constexpr int kGroupCols = 128;  // == kQuantGroup
// uint2 per (group, word): [h][column hi / lo][t] = 16 fragments, padded to 18 so the staging
// writes (8 words per warp instruction, 144 bytes apart) take 2 wavefronts, the minimum for 256 bytes.
constexpr int kFragStride = 18;
constexpr std::size_t kSmemPerGroup = 4 * kFragStride * sizeof(uint2) + sizeof(float);  // 580
// Zeros that lanes 8 .. 31 read as their B fragments (columns 2 .. 7): the offsets w * kFragStride
// + 8 h of one group's fragments, < 64.
constexpr int kZeroFrag = 64;


// bf16 pair (128 + nibble s, 128 + nibble s + 4) of word u: one LOP3 (a & b) | c (left to itself
// the compiler emits two, one per immediate).
__device__ __forceinline__ unsigned nib_pair(unsigned u, int s) {
  unsigned d;
  asm("lop3.b32 %0, %1, %2, %3, 0xEA;" : "=r"(d) : "r"(u >> (4 * s)), "r"(0x000F000Fu), "r"(0x43004300u));
  return d;
}

// x' = hi + lo of v: the bf16 bits of hi and lo, and their fp32 sum.
__device__ __forceinline__ void split(float v, unsigned& hi, unsigned& lo, float& sum) {
  const __nv_bfloat16 h = __float2bfloat16_rn(v);
  const float hf = __bfloat162float(h);
  const __nv_bfloat16 l = __float2bfloat16_rn(v - hf);  // v - hf is exact
  hi = __bfloat16_as_ushort(h);
  lo = __bfloat16_as_ushort(l);
  sum += hf + __bfloat162float(l);
}

template <bool kNorm, bool kSwiglu, int kJ, int kTW>
__global__ void __launch_bounds__(kThreads, kJ == 4 ? 3 : 4) gemv_q4_mma(const QParams p) {
  constexpr int kTPB = kWarps / kTW;  // tiles a block runs at a time, kTW warps each
  extern __shared__ uint2 frag[];     // [groups][4 words][kFragStride]: B fragments (x hi / lo)
  uint2* zero = frag + static_cast<std::size_t>(p.groups) * 4 * kFragStride;  // [kZeroFrag]: lanes >= 8's B
  float* xsum = reinterpret_cast<float*>(zero + kZeroFrag);                    // [groups] X'_G
  __shared__ float red[2][kWarps][16];  // [tile parity][warp][tile row]: the warps' partial sums
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const int g = lane >> 2, t = lane & 3;
  const int ts = warp / kTW, wi = warp % kTW;  // the block's tile this warp works on, its rank there
  const int nj = wi < p.groups ? (p.groups - wi + kTW - 1) / kTW : 0;  // groups wi, wi + kTW, .. per tile

  // Row r (0: row g, 1: row g + 8) of tile T, clamped to a valid row (a partial or absent tile).
  auto tile_row = [&](int T, int r) -> int {
    if constexpr (kSwiglu) {
      return min(T * 8 + g, p.outs - 1) + r * p.half;
    } else {
      return min(T * 16 + g + 8 * r, p.rows - 1);
    }
  };
  // This lane's pointers into tile T at the warp's first group: rows g and g + 8, its s / m value.
  struct Ptrs {
    const std::uint8_t* a;
    const std::uint8_t* b;
    const std::uint16_t* s;
  };
  auto ptrs_at = [&](int r0, int r1) {
    const std::size_t col = static_cast<std::size_t>(wi) * 64 + t * 16;
    return Ptrs{p.q + static_cast<std::size_t>(r0) * p.row_bytes + col, p.q + static_cast<std::size_t>(r1) * p.row_bytes + col,
                ((t & 2) ? p.gm : p.gs) + static_cast<std::size_t>((t & 1) ? r1 : r0) * p.groups + wi};
  };
  auto ptrs_of = [&](int T) { return ptrs_at(tile_row(T, 0), tile_row(T, 1)); };
  uint4 A[kJ][2];  // slot j: 16 bytes of rows g and g + 8 of one group
  unsigned S[kJ];  // slot j: lane t's s / m value: t = 0 s(row g), 1 s(row g + 8), 2 m(row g), 3 m(row g + 8)
  auto load = [&](int j, const Ptrs& pt, int jj) {  // slot j <- the warp's group jj of the tile of pt
    A[j][0] = __ldcs(reinterpret_cast<const uint4*>(pt.a + jj * (kTW * 64)));
    A[j][1] = __ldcs(reinterpret_cast<const uint4*>(pt.b + jj * (kTW * 64)));
    S[j] = __ldcs(pt.s + jj * kTW);
  };

  const int stride = static_cast<int>(gridDim.x) * kTPB;  // tiles per round of the grid
  int base = static_cast<int>(blockIdx.x) * kTPB;          // the block's first tile this round (block-uniform)
  Ptrs cur = ptrs_of(base + ts);
  if (base + ts < p.items) {
#pragma unroll
    for (int j = 0; j < kJ; ++j)
      if (j < nj) load(j, cur, j);
  }
  if constexpr (kNorm) gemv_common::prefetch_l1<kThreads>(p.g, p.cols * 2);  // read after the norm's reduction
  pdl_wait();  // from here on: x, the residual and y
  pdl_launch_dependents();

  // Stage x (normalized with kNorm) as B fragments: thread jw takes x word k = 16 G + 4 t + w
  // (columns 8k .. 8k + 7) for q = 4 G + w = jw / 4, t = jw % 4, and writes the fragments of mmas
  // (w, h = 0, 1) for lane t of columns hi and lo; a warp covers two whole groups, whose X' the
  // half-warps sum.
  const float4* x4 = reinterpret_cast<const float4*>(p.x);
  const int words = p.cols / 8;
  constexpr int kSB = 2;  // words per thread per batch, all loaded before any is used
  const bool one_batch = words <= kSB * kThreads;
  float v[kSB][8];
  auto load_batch = [&](int base) {
#pragma unroll
    for (int b = 0; b < kSB; ++b) {
      const int jw = base + b * kThreads + threadIdx.x, q = jw >> 2;
      const int k = 16 * (q >> 2) + 4 * (jw & 3) + (q & 3);
      float4 lo4 = make_float4(0.0f, 0.0f, 0.0f, 0.0f), hi4 = lo4;
      if (jw < words) lo4 = __ldcg(x4 + 2 * k), hi4 = __ldcg(x4 + 2 * k + 1);
      v[b][0] = lo4.x, v[b][1] = lo4.y, v[b][2] = lo4.z, v[b][3] = lo4.w;
      v[b][4] = hi4.x, v[b][5] = hi4.y, v[b][6] = hi4.z, v[b][7] = hi4.w;
    }
  };
  float inv = 1.0f;
  if constexpr (kNorm) {
    float ss = 0.0f;
    if (one_batch) {  // x read once: the squares from the values staged below
      load_batch(0);
#pragma unroll
      for (int b = 0; b < kSB; ++b)
#pragma unroll
        for (int e = 0; e < 8; ++e) ss += v[b][e] * v[b][e];
    } else {
      for (int f = threadIdx.x; f < p.cols / 4; f += kThreads) {
        const float4 a = __ldcg(x4 + f);
        ss += a.x * a.x + a.y * a.y + a.z * a.z + a.w * a.w;
      }
    }
    inv = block_inv_rms(ss, p.cols, p.eps);
  }
  for (int i = threadIdx.x; i < kZeroFrag; i += kThreads) zero[i] = make_uint2(0u, 0u);
  for (int base = 0; base < words; base += kSB * kThreads) {  // block-uniform trip count: full-warp shuffles below
    if (!(kNorm && one_batch)) load_batch(base);
#pragma unroll
    for (int b = 0; b < kSB; ++b) {
      const int jw = base + b * kThreads + threadIdx.x, q = jw >> 2, tt = jw & 3;
      const bool ok = jw < words;
      if constexpr (kNorm) {
        if (ok) {
          const uint4 gw = __ldg(reinterpret_cast<const uint4*>(p.g) + 16 * (q >> 2) + 4 * tt + (q & 3));
#pragma unroll
          for (int e = 0; e < 8; ++e) v[b][e] = bf16f((word(gw, e / 2) >> (16 * (e & 1))) & 0xFFFFu) * (v[b][e] * inv);
        }
      }
      float part = 0.0f;
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        unsigned hi[4], lo[4];
        split(v[b][2 * h], hi[0], lo[0], part);
        split(v[b][2 * h + 4], hi[1], lo[1], part);
        split(v[b][2 * h + 1], hi[2], lo[2], part);
        split(v[b][2 * h + 5], hi[3], lo[3], part);
        if (ok) {
          uint2* dst = frag + q * kFragStride + h * 8 + tt;
          dst[0] = make_uint2(hi[0] | hi[1] << 16, hi[2] | hi[3] << 16);  // column 0: hi
          dst[4] = make_uint2(lo[0] | lo[1] << 16, lo[2] | lo[3] << 16);  // column 1: lo
        }
      }
#pragma unroll
      for (int off = 8; off > 0; off >>= 1) part += __shfl_xor_sync(0xffffffffu, part, off);
      if (ok && (lane & 15) == 0) xsum[jw >> 4] = part;
    }
  }
  __syncthreads();

  float acc0 = 0.0f, acc1 = 0.0f;  // lanes t == 0: rows g and g + 8 of the current tile
  for (int i = 0; base < p.items; ++i, base += stride) {
    const int T = base + ts;
    const bool live = T < p.items, next_live = T + stride < p.items;
    const int n0 = tile_row(T + stride, 0), n1 = tile_row(T + stride, 1);  // clamped: valid even past the end
    // The epilogue's inputs for this tile, read by the warp that will finish it (lanes < 16: tile
    // row `lane`; SwiGLU: lanes < 8 the gate rows, 8 .. 15 the up rows).
    const bool finisher = wi == i % kTW;
    float res = 0.0f, bias = 0.0f;
    if (finisher && live && lane < 16) {
      int row, out;
      if constexpr (kSwiglu) {
        out = min(T * 8 + (lane & 7), p.outs - 1);
        row = out + (lane >= 8 ? p.half : 0);
      } else {
        out = row = min(T * 16 + lane, p.rows - 1);
      }
      if (p.bias) bias = bf16f(p.bias[row]);
      if (p.residual && (!kSwiglu || lane < 8)) res = p.residual[out];
    }
    if (live) {  // warp-uniform
      for (int r = 0; r * kJ < nj; ++r) {
#pragma unroll
        for (int j = 0; j < kJ; ++j) {
          const int jj = r * kJ + j;
          if (jj < nj) {  // warp-uniform
            const int G = wi + kTW * jj;
            float c[2][4] = {};  // h = 0, 1: two independent chains of 4 mmas
            const uint2* fb = lane < 8 ? frag + static_cast<std::size_t>(G) * 4 * kFragStride + lane : zero;
#pragma unroll
            for (int w = 0; w < 4; ++w) {
              const unsigned ua = word(A[j][0], w), ub = word(A[j][1], w);
#pragma unroll
              for (int h = 0; h < 2; ++h) {
                const uint2 b = fb[w * kFragStride + h * 8];
                const unsigned a[4] = {nib_pair(ua, 2 * h), nib_pair(ub, 2 * h), nib_pair(ua, 2 * h + 1),
                                       nib_pair(ub, 2 * h + 1)};
                mma::mma_bf16(c[h], a, b.x, b.y);
              }
            }
            // The group's scales and minimums, shuffled out of slot j before its refill (with the
            // refill first, the compiler kept the old value alive and moved the new one in with a
            // register move that waited for the load: ncu's top stall, 41% of the stalls).
            const unsigned own = S[j];
            const float s0 = bf16f(own), s8 = bf16f(__shfl_down_sync(0xffffffffu, own, 1));
            const float m0 = bf16f(__shfl_down_sync(0xffffffffu, own, 2));
            const float m8 = bf16f(__shfl_down_sync(0xffffffffu, own, 3));
            // Refill the slot: this tile's next round, or the next tile's first. (One load site
            // with the pointers selected measured 15-25% slower on gate/up and lm_head.)
            if (jj + kJ < nj) {
              load(j, cur, jj + kJ);
            } else if (next_live) {
              load(j, ptrs_at(n0, n1), j);
            }
            const float X = xsum[G];
            const float d0 = (c[0][0] + c[0][1]) + (c[1][0] + c[1][1]), d8 = (c[0][2] + c[0][3]) + (c[1][2] + c[1][3]);
            acc0 = fmaf(s0, d0 - 128.0f * X, fmaf(m0, X, acc0));
            acc1 = fmaf(s8, d8 - 128.0f * X, fmaf(m8, X, acc1));
          }
        }
      }
    }
    const int buf = i & 1;  // double-buffered: round i + 1's writes cannot meet round i's reads
    if (t == 0) {
      red[buf][warp][g] = acc0;
      red[buf][warp][g + 8] = acc1;
    }
    acc0 = acc1 = 0.0f;
    __syncthreads();
    if (finisher && live && lane < 16) {
      float v = 0.0f;
#pragma unroll
      for (int w = 0; w < kTW; ++w) v += red[buf][ts * kTW + w][lane];
      v += bias;
      if constexpr (kSwiglu) {
        const float up = __shfl_down_sync(0x0000FFFFu, v, 8);
        const int out = T * 8 + lane;
        if (lane < 8 && out < p.outs) p.y[out] = v / (1.0f + expf(-v)) * up + res;
      } else {
        const int row = T * 16 + lane;
        if (row < p.rows) p.y[row] = v + res;
      }
    }
    cur = ptrs_at(n0, n1);
  }
}

using KernelFn = void (*)(QParams);

template <bool kNorm, bool kSwiglu, int kTW>
KernelFn pick_depth(int depth) {
  return depth == 2 ? gemv_q4_mma<kNorm, kSwiglu, 2, kTW> : gemv_q4_mma<kNorm, kSwiglu, 4, kTW>;
}

template <int kTW>
KernelFn pick_tw(bool norm, bool swiglu, int depth) {
  if (norm) return swiglu ? pick_depth<true, true, kTW>(depth) : pick_depth<true, false, kTW>(depth);
  return swiglu ? pick_depth<false, true, kTW>(depth) : pick_depth<false, false, kTW>(depth);
}

KernelFn pick(bool norm, bool swiglu, int depth, int tile_warps) {
  return tile_warps == 4 ? pick_tw<4>(norm, swiglu, depth) : pick_tw<8>(norm, swiglu, depth);
}

bool aligned16(const void* ptr) { return reinterpret_cast<std::uintptr_t>(ptr) % 16 == 0; }

std::size_t smem_bytes(int cols) {
  return static_cast<std::size_t>(cols / kGroupCols) * kSmemPerGroup + kZeroFrag * sizeof(uint2);
}

}  // namespace

bool gemv_q4_mma_fits(const QGemvArgs& a) {
  static_assert(kGroupCols == kQuantGroup, "one int4 group per 128 columns");
  if (a.w.kind != QuantKind::int4_group || a.rows <= 0 || a.cols <= 0 || a.cols % kGroupCols != 0) return false;
  if (a.swiglu && a.rows % 2 != 0) return false;
  if (!aligned16(a.w.q) || !aligned16(a.x) || (a.norm_weight && !aligned16(a.norm_weight))) return false;
  int device = 0, major = 0;
  if (cudaGetDevice(&device) != cudaSuccess ||
      cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, device) != cudaSuccess || major < 8)
    return false;
  return smem_bytes(a.cols) <= static_cast<std::size_t>(gemv_common::device_shape().smem_optin);
}

namespace {

int occupancy(KernelFn kernel, std::size_t smem) {
  if (smem > 48 * 1024) cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(smem));
  int occ = 0;
  if (cudaOccupancyMaxActiveBlocksPerMultiprocessor(&occ, kernel, kThreads, smem) != cudaSuccess || occ <= 0) occ = 1;
  return occ;
}

int tile_count(const QGemvArgs& a) { return a.swiglu ? (a.rows / 2 + 7) / 8 : (a.rows + 15) / 16; }

}  // namespace

int gemv_q4_mma_tile_warps(const QGemvArgs& a, int depth, int requested) {
  if (requested == 4 || requested == 8) return requested;
  // 8 warps per tile while every tile gets a block of its own (the small matrices: all 28 groups in
  // flight at once); else 4 (two tiles per block: 28 and 148 groups split evenly over 4 warps).
  const KernelFn k = pick(a.norm_weight != nullptr, a.swiglu, depth, 8);
  const long long slots = static_cast<long long>(gemv_common::device_shape().sms) * occupancy(k, smem_bytes(a.cols));
  return tile_count(a) <= slots ? 8 : 4;
}

std::size_t launch_gemv_q4_mma(const QGemvArgs& a, int depth, int tile_warps, cudaStream_t stream) {
  const bool norm = a.norm_weight != nullptr;
  QParams p = params_of(a);
  p.items = tile_count(a);

  const int tw = gemv_q4_mma_tile_warps(a, depth, tile_warps);
  const KernelFn kernel = pick(norm, a.swiglu, depth, tw);
  const std::size_t smem = smem_bytes(a.cols);
  const int occ = occupancy(kernel, smem);
  const int blocks = std::min((p.items + kWarps / tw - 1) / (kWarps / tw), gemv_common::device_shape().sms * occ);
  (void)launch_pdl(kernel, dim3(static_cast<unsigned>(blocks)), dim3(kThreads), smem, stream, p);
  return qgemv::bytes_moved(a);
}

}  // namespace cosmos::kernels
