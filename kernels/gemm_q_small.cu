// Quantized weights times a few tokens (kernels/gemm_q_small.cuh), on tensor cores.
//
// The problem as mma.m16n8k16 (bf16 inputs, fp32 accumulators): A = a 16-row tile of W dequantized
// in registers, B = 16 columns of x for 8 tokens (one n8 tile per 8 tokens, up to 4 per pass), so
// every weight byte is read once per pass for all of the pass's tokens. The order of k inside an mma
// is free as long as A and B agree, so each lane dequantizes the 16-byte vector it loaded itself:
// lane (g, t) = (lane / 4, lane % 4) loads bytes 16 t .. 16 t + 15 of the chunk's 64 bytes of rows
// g and g + 8 of the tile (a chunk: 64 columns of int8 / fp8, 128 of int4 = one group), and
//   int8 / fp8  k-step j (4 per chunk) takes word j: columns 16 t + 4 j + (0, 1) as A slots
//               (2t, 2t + 1) and + (2, 3) as slots (2t + 8, 2t + 9); B is then x at the same four
//               consecutive columns, one 8-byte piece of the lane's 32 bytes of x per token;
//   int4        k-step 2 w + h (8 per chunk) takes word w of 8 nibbles, columns 32 t + 8 w + c:
//               nibbles (2h, 2h + 4) as slots (2t, 2t + 1) and (2h + 1, 2h + 5) as (2t + 8, 2t + 9);
//               B takes the same columns from the lane's 16 bytes of x (two PRMTs per token tile).
// Dequantization, exact except where said:
//   int8  byte ^ 0x80 under the exponent of 2^23 (PRMT), minus 2^23 + 128 (FADD): q as fp32, two of
//         them packed into a bf16 pair (exact: |q| <= 128). The row scale multiplies the sums.
//   fp8   cvt.rn.f16x2.e4m3x2 (two weights), each half to fp32, packed to bf16 (exact: E4M3 has 3
//         mantissa bits and fp32's range covers it). The row scale multiplies the sums.
//   int4  ((u >> 4s) & 0x000F000F) | 0x43004300 is the bf16 pair (128 + q_s, 128 + q_{s+4}) (one
//         LOP3); an FMA.BF16x2 with (1, -128) makes it (q, q') exactly, a second with the group's
//         (scale, minimum) the weights q s + m rounded once to bf16 (relative error <= 2^-9, far
//         below the format's own step s).
// Work: a warp owns a row unit of kM 16-row tiles (each x fragment it loads serves all kM tiles, so
// x's traffic from L2 is n / (8 kM) times the int8 weight bytes: at 32 tokens and kM = 1, 4x); kS
// warps of a block share a unit's columns (warp ks takes chunks ks, ks + kS, ..); (kM, kS) chosen per
// shape (QSmallPlan) so the units spread evenly over the resident blocks. The kS partial sums meet in
// shared memory in warp order (deterministic), and warp 0 of the unit scales and stores. Weights load
// in batches of 4 / kM chunks per warp (4 KB in flight per warp whatever kM), the first before
// pdl_wait().
#include <algorithm>
#include <cstdint>
#include <map>
#include <mutex>

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_fp8.h>

#include "kernels/gemm_q_small.cuh"
#include "kernels/gemv_common.cuh"
#include "kernels/mma_bf16.cuh"
#include "kernels/pdl.cuh"

namespace cosmos::kernels {
namespace {

constexpr int kWarps = 8;
constexpr int kThreads = kWarps * 32;
constexpr int kChunkBytes = 64;  // bytes of one row per chunk (16 per lane t)

enum : int { kI8 = 0, kF8 = 1, kI4 = 2 };
template <int F>
constexpr int kChunkCols = F == kI4 ? 128 : 64;
template <int F>
constexpr int kXVecs = F == kI4 ? 4 : 2;  // 16-byte pieces of x per lane, chunk and token

struct SP {
  const std::uint8_t* q;
  const float* row_scale;
  const std::uint16_t* gs;
  const std::uint16_t* gm;
  const std::uint16_t* x;  // bf16 bits [n][cols]
  void* y;
  int n, rows, cols, row_bytes, groups, chunks, tiles, tile_groups;
  int accumulate, y_bf16;
};

__device__ __forceinline__ unsigned bf2_fma(unsigned a, unsigned b, unsigned c) {
  unsigned d;
  asm("fma.rn.bf16x2 %0, %1, %2, %3;" : "=r"(d) : "r"(a), "r"(b), "r"(c));
  return d;
}
__device__ __forceinline__ unsigned nib_pair(unsigned u, int s) {  // bf16 (128 + nibble s, 128 + nibble s + 4)
  unsigned d;
  asm("lop3.b32 %0, %1, %2, %3, 0xEA;" : "=r"(d) : "r"(u >> (4 * s)), "r"(0x000F000Fu), "r"(0x43004300u));
  return d;
}
__device__ __forceinline__ float i8f(unsigned t, unsigned sel) {  // t = word ^ 0x80808080
  return __uint_as_float(__byte_perm(t, 0x4B000000u, sel)) - 8388736.0f;
}
__device__ __forceinline__ unsigned f8pair(unsigned bits16) {
  const __half2_raw h = __nv_cvt_fp8x2_to_halfraw2(static_cast<__nv_fp8x2_storage_t>(bits16), __NV_E4M3);
  const float2 f = __half22float2(__half2(h));
  return mma::pack_bf16(f.x, f.y);
}
__device__ __forceinline__ unsigned word(const uint4& v, int j) {
  return j == 0 ? v.x : j == 1 ? v.y : j == 2 ? v.z : v.w;
}

// A pairs of k-step s of one row's 16-byte vector v: lo = slots (2t, 2t + 1), hi = (2t + 8, 2t + 9).
// sm: int4 (scale, scale) and (minimum, minimum) of the row's group as bf16 pairs.
template <int F>
__device__ __forceinline__ void a_pairs(const uint4& v, int s, unsigned ss, unsigned mm, unsigned& lo, unsigned& hi) {
  if constexpr (F == kI8) {
    const unsigned t = word(v, s) ^ 0x80808080u;
    lo = mma::pack_bf16(i8f(t, 0x7440), i8f(t, 0x7441));
    hi = mma::pack_bf16(i8f(t, 0x7442), i8f(t, 0x7443));
  } else if constexpr (F == kF8) {
    const unsigned u = word(v, s);
    lo = f8pair(u & 0xFFFFu);
    hi = f8pair(u >> 16);
  } else {
    const unsigned u = word(v, s >> 1);
    const int h = s & 1;
    constexpr unsigned kOne = 0x3F803F80u, kMinus128 = 0xC300C300u;
    lo = bf2_fma(bf2_fma(nib_pair(u, 2 * h), kOne, kMinus128), ss, mm);
    hi = bf2_fma(bf2_fma(nib_pair(u, 2 * h + 1), kOne, kMinus128), ss, mm);
  }
}

// B registers of k-step s for one token tile, from the lane's x piece v = s / 2 of the chunk.
template <int F>
__device__ __forceinline__ void b_regs(const uint4& v, int s, unsigned& b0, unsigned& b1) {
  if constexpr (F == kI4) {
    const int h = s & 1;
    const unsigned lo = h ? v.y : v.x, hi = h ? v.w : v.z;  // (e_2h, e_2h+1), (e_2h+4, e_2h+5)
    b0 = __byte_perm(lo, hi, 0x5410);
    b1 = __byte_perm(lo, hi, 0x7632);
  } else {
    b0 = (s & 1) ? v.z : v.x;
    b1 = (s & 1) ? v.w : v.y;
  }
}

template <int F, int kNT, int kS, int kM>
__global__ void __launch_bounds__(kThreads, 2) gemm_q_small_kernel(const SP p) {
  constexpr int kTPB = kWarps / kS;  // row units a block works on at once
  constexpr int kD = 4 / kM;         // chunks per batch of weight loads (4 KB per warp in flight)
  __shared__ float red[kS > 1 ? kWarps : 1][kM * kNT * 4][32];
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const int g = lane >> 2, t = lane & 3;
  const int ts = warp / kS, ks = warp % kS;
  const int nchunks = ks < p.chunks ? (p.chunks - ks + kS - 1) / kS : 0;  // this warp's chunks of a unit

  // Row r (0: g, 1: g + 8) of 16-row tile m of row unit u (16 kM rows), clamped to the matrix.
  auto row_of = [&](int u, int m, int r) { return min(u * 16 * kM + m * 16 + g + 8 * r, p.rows - 1); };
  uint4 A[kD][kM][2];
  [[maybe_unused]] unsigned S[kD][kM][2], M[kD][kM][2];  // int4: bf16 (s, s), (m, m) of each row
  auto load_batch = [&](int u, int i0) {
#pragma unroll
    for (int d = 0; d < kD; ++d) {
      if (i0 + d < nchunks) {
        const int c = ks + (i0 + d) * kS;
#pragma unroll
        for (int m = 0; m < kM; ++m)
#pragma unroll
          for (int r = 0; r < 2; ++r) {
            const int row = row_of(u, m, r);
            A[d][m][r] = __ldcs(reinterpret_cast<const uint4*>(p.q + static_cast<std::size_t>(row) * p.row_bytes + 16 * t +
                                                               static_cast<std::size_t>(c) * kChunkBytes));
            if constexpr (F == kI4) {
              const std::size_t k = static_cast<std::size_t>(row) * p.groups + c;
              const unsigned s = __ldg(p.gs + k), mn = __ldg(p.gm + k);
              S[d][m][r] = s | (s << 16);
              M[d][m][r] = mn | (mn << 16);
            }
          }
      }
    }
  };

  int tg = blockIdx.x;
  if (tg < p.tile_groups && nchunks > 0) load_batch(tg * kTPB + ts, 0);
  pdl_wait();  // x and y from here on
  pdl_launch_dependents();

  for (; tg < p.tile_groups; tg += gridDim.x) {
    const int unit = tg * kTPB + ts;
    float acc[kM][kNT][4];
#pragma unroll
    for (int m = 0; m < kM; ++m)
#pragma unroll
      for (int nt = 0; nt < kNT; ++nt)
#pragma unroll
        for (int i = 0; i < 4; ++i) acc[m][nt][i] = 0.0f;
    if (unit < p.tiles) {
      for (int i0 = 0; i0 < nchunks; i0 += kD) {
        if (i0 > 0) load_batch(unit, i0);
#pragma unroll
        for (int d = 0; d < kD; ++d) {
          if (i0 + d >= nchunks) break;
          const int c = ks + (i0 + d) * kS;
          const std::uint16_t* xc = p.x + static_cast<std::size_t>(c) * kChunkCols<F>;
#pragma unroll
          for (int v = 0; v < kXVecs<F>; ++v) {  // x piece v serves k-steps 2 v and 2 v + 1
            uint4 X[kNT];
#pragma unroll
            for (int nt = 0; nt < kNT; ++nt) {
              const int n = nt * 8 + g;
              X[nt] = n < p.n ? __ldg(reinterpret_cast<const uint4*>(xc + static_cast<std::size_t>(n) * p.cols) +
                                      kXVecs<F> * t + v)
                              : make_uint4(0, 0, 0, 0);
            }
#pragma unroll
            for (int s = 2 * v; s < 2 * v + 2; ++s) {
#pragma unroll
              for (int m = 0; m < kM; ++m) {
                unsigned a[4];
                unsigned ss0 = 0, mm0 = 0, ss1 = 0, mm1 = 0;
                if constexpr (F == kI4) {
                  ss0 = S[d][m][0], mm0 = M[d][m][0], ss1 = S[d][m][1], mm1 = M[d][m][1];
                }
                a_pairs<F>(A[d][m][0], s, ss0, mm0, a[0], a[2]);
                a_pairs<F>(A[d][m][1], s, ss1, mm1, a[1], a[3]);
#pragma unroll
                for (int nt = 0; nt < kNT; ++nt) {
                  unsigned b0, b1;
                  b_regs<F>(X[nt], s, b0, b1);
                  mma::mma_bf16(acc[m][nt], a, b0, b1);
                }
              }
            }
          }
        }
      }
    }
    // The kS warps of the unit meet in shared memory; warp ks = 0 adds them in order and stores.
    if constexpr (kS > 1) {
#pragma unroll
      for (int m = 0; m < kM; ++m)
#pragma unroll
        for (int nt = 0; nt < kNT; ++nt)
#pragma unroll
          for (int i = 0; i < 4; ++i) red[warp][(m * kNT + nt) * 4 + i][lane] = acc[m][nt][i];
      __syncthreads();
      if (ks == 0) {
#pragma unroll
        for (int w = 1; w < kS; ++w)
#pragma unroll
          for (int m = 0; m < kM; ++m)
#pragma unroll
            for (int nt = 0; nt < kNT; ++nt)
#pragma unroll
              for (int i = 0; i < 4; ++i) acc[m][nt][i] += red[warp + w][(m * kNT + nt) * 4 + i][lane];
      }
    }
    if (ks == 0 && unit < p.tiles) {
#pragma unroll
      for (int m = 0; m < kM; ++m)
#pragma unroll
        for (int r = 0; r < 2; ++r) {
          const int row = unit * 16 * kM + m * 16 + g + 8 * r;
          if (row >= p.rows) continue;
          const float scale = F == kI4 ? 1.0f : __ldg(p.row_scale + row);
#pragma unroll
          for (int nt = 0; nt < kNT; ++nt) {
#pragma unroll
            for (int e = 0; e < 2; ++e) {
              const int n = nt * 8 + 2 * t + e;
              if (n >= p.n) continue;
              const float v = acc[m][nt][2 * r + e] * scale;
              const std::size_t at = static_cast<std::size_t>(n) * p.rows + row;
              if (p.y_bf16) {
                static_cast<__nv_bfloat16*>(p.y)[at] = __float2bfloat16_rn(v);
              } else {
                float* y = static_cast<float*>(p.y) + at;
                *y = p.accumulate ? *y + v : v;
              }
            }
          }
        }
    }
    if constexpr (kS > 1) __syncthreads();  // red is reused by the next unit group
    // The next unit group's first batch of weights.
    if (tg + static_cast<int>(gridDim.x) < p.tile_groups && nchunks > 0)
      load_batch((tg + static_cast<int>(gridDim.x)) * kTPB + ts, 0);
  }
}

using Kernel = void (*)(SP);

template <int F, int kNT, int kM>
Kernel pick_split(int ks) {
  switch (ks) {
    case 1: return gemm_q_small_kernel<F, kNT, 1, kM>;
    case 2: return gemm_q_small_kernel<F, kNT, 2, kM>;
    case 4: return gemm_q_small_kernel<F, kNT, 4, kM>;
    default: return gemm_q_small_kernel<F, kNT, 8, kM>;
  }
}
// kM = 4 only up to two token tiles (16 tokens): its accumulators and loads fit the registers there.
template <int F, int kM>
Kernel pick_nt(int nt, int ks) {
  switch (nt) {
    case 1: return pick_split<F, 1, kM>(ks);
    case 2: return pick_split<F, 2, kM>(ks);
    case 3: if constexpr (kM < 4) return pick_split<F, 3, kM>(ks); else return nullptr;
    default: if constexpr (kM < 4) return pick_split<F, 4, kM>(ks); else return nullptr;
  }
}
template <int F>
Kernel pick_m(int nt, int ks, int km) {
  return km == 1 ? pick_nt<F, 1>(nt, ks) : km == 2 ? pick_nt<F, 2>(nt, ks) : pick_nt<F, 4>(nt, ks);
}
Kernel pick(int f, int nt, int ks, int km) {
  return f == kI8 ? pick_m<kI8>(nt, ks, km) : f == kF8 ? pick_m<kF8>(nt, ks, km) : pick_m<kI4>(nt, ks, km);
}

bool aligned16(const void* ptr) { return reinterpret_cast<std::uintptr_t>(ptr) % 16 == 0; }

// Resident blocks per SM of a kernel, asked once per kernel (the answer depends only on the kernel).
int occupancy(Kernel k) {
  static std::mutex mu;
  static std::map<Kernel, int> known;
  const std::lock_guard<std::mutex> lock(mu);
  const auto it = known.find(k);
  if (it != known.end()) return it->second;
  int occ = 0;
  if (cudaOccupancyMaxActiveBlocksPerMultiprocessor(&occ, k, kThreads, 0) != cudaSuccess || occ <= 0) occ = 1;
  known.emplace(k, occ);
  return occ;
}

struct Shape {
  int f, nt, rows, cols, chunks, tiles16;
};

Shape shape_of(const QSmallArgs& a, int n) {
  Shape s{};
  s.f = a.w.kind == QuantKind::int8_row ? kI8 : a.w.kind == QuantKind::fp8_row ? kF8 : kI4;
  s.nt = (n + 7) / 8;
  s.rows = a.rows;
  s.cols = a.cols;
  s.chunks = a.cols / (s.f == kI4 ? kChunkCols<kI4> : kChunkCols<kI8>);
  s.tiles16 = (a.rows + 15) / 16;
  return s;
}

struct Launch {
  Kernel kernel = nullptr;
  int km = 1, ks = 1, units = 0, groups = 0, blocks = 0;
};

Launch launch_for(const Shape& s, int km, int ks) {
  Launch l;
  l.kernel = pick(s.f, s.nt, ks, km);
  if (!l.kernel) return l;
  l.km = km;
  l.ks = ks;
  l.units = (s.tiles16 + km - 1) / km;
  l.groups = (l.units + kWarps / ks - 1) / (kWarps / ks);
  l.blocks = static_cast<int>(
      std::min<long long>(l.groups, static_cast<long long>(gemv_common::device_shape().sms) * occupancy(l.kernel)));
  return l;
}

// The automatic plan: the least time estimated as W (1 + 0.2 X), W the busiest warp's work (rounds
// of unit groups over resident blocks x its chunks of a unit x kM tiles) and X the bytes of x each
// weight byte brings from L2 (n / (8 kM); int4, with half the bytes per column, twice that). Fitted
// to every plan of every 7B matrix at 1-64 tokens (bench_gemm_q_small --sweep on an H200,
// docs/PERFORMANCE.md session 24): the steps' products within 0-8% of the best plan of each matrix
// (the plain W of session 23 was up to 25% off at 32 tokens). Ties to the smaller kM, then kS.
Launch choose(const Shape& s, int n, const QSmallPlan& want) {
  Launch best;
  double best_cost = -1;
  for (int km : {1, 2, 4}) {
    if (want.m_tiles && km != want.m_tiles) continue;
    for (int ks : {1, 2, 4, 8}) {
      if (want.split && ks != want.split) continue;
      const Launch l = launch_for(s, km, ks);
      if (!l.kernel) continue;
      const double work = static_cast<double>((l.groups + l.blocks - 1) / l.blocks) * ((s.chunks + ks - 1) / ks) * km;
      const double x_per_w = static_cast<double>(n) / (8.0 * km) * (s.f == kI4 ? 2.0 : 1.0);
      const double cost = work * (1.0 + 0.2 * x_per_w);
      if (best_cost < 0 || cost < best_cost) {
        best_cost = cost;
        best = l;
      }
    }
  }
  return best;
}

// One pass of at most kQSmallTokens tokens.
std::size_t launch_pass(const QSmallArgs& a, cudaStream_t stream) {
  const Shape sh = shape_of(a, a.n);
  const Launch l = choose(sh, a.n, a.plan);
  if (!l.kernel) return 0;
  SP p{};
  p.q = a.w.q;
  p.row_scale = a.w.row_scale;
  p.gs = a.w.group_scale;
  p.gm = a.w.group_min;
  p.x = static_cast<const std::uint16_t*>(a.x);
  p.y = a.y;
  p.n = a.n;
  p.rows = a.rows;
  p.cols = a.cols;
  p.row_bytes = static_cast<int>(quant_row_bytes(a.w.kind, a.cols));
  p.groups = static_cast<int>(quant_groups(a.cols));
  p.chunks = sh.chunks;
  p.tiles = l.units;
  p.tile_groups = l.groups;
  p.accumulate = a.accumulate ? 1 : 0;
  p.y_bf16 = a.y_bf16 ? 1 : 0;
  (void)launch_pdl(l.kernel, dim3(static_cast<unsigned>(l.blocks)), dim3(kThreads), 0, stream, p);

  const std::size_t r = static_cast<std::size_t>(a.rows), c = static_cast<std::size_t>(a.cols),
                    n = static_cast<std::size_t>(a.n);
  const std::size_t scales = sh.f == kI4 ? r * static_cast<std::size_t>(p.groups) * 4 : r * 4;
  return r * static_cast<std::size_t>(p.row_bytes) + scales + n * c * 2 + n * r * (a.y_bf16 ? 2 : a.accumulate ? 8 : 4);
}

}  // namespace

const char* gemm_q_small_unsupported(const QSmallArgs& a) {
  if (a.n < 1 || a.n > kQSmallMaxTokens) return "the token count is outside 1..64";
  if (a.rows < 1 || a.cols < 1) return "an empty matrix";
  const int chunk = a.w.kind == QuantKind::int4_group ? 128 : 64;
  if (a.cols % chunk != 0) return a.w.kind == QuantKind::int4_group ? "int4 columns must be a multiple of 128"
                                                                   : "8-bit columns must be a multiple of 64";
  if (!aligned16(a.w.q) || !aligned16(a.x)) return "the weights and x must be 16-byte aligned";
  if (a.w.kind == QuantKind::int4_group ? (!a.w.group_scale || !a.w.group_min) : !a.w.row_scale)
    return "the matrix has no scales";
  if (a.y_bf16 && a.accumulate) return "bf16 output cannot accumulate";
  const int km = a.plan.m_tiles, ks = a.plan.split;
  if (km != 0 && km != 1 && km != 2 && km != 4) return "plan.m_tiles must be 0 (automatic), 1, 2 or 4";
  if (ks != 0 && ks != 1 && ks != 2 && ks != 4 && ks != 8) return "plan.split must be 0 (automatic), 1, 2, 4 or 8";
  if (km == 4 && std::min(a.n, kQSmallTokens) > 16) return "plan.m_tiles 4 takes at most 16 tokens per pass";
  return nullptr;
}

std::size_t launch_gemm_q_small(const QSmallArgs& a, cudaStream_t stream) {
  if (gemm_q_small_unsupported(a)) return 0;
  std::size_t bytes = 0;
  for (int n0 = 0; n0 < a.n; n0 += kQSmallTokens) {
    QSmallArgs part = a;
    part.n = std::min(kQSmallTokens, a.n - n0);
    part.x = static_cast<const std::uint16_t*>(a.x) + static_cast<std::size_t>(n0) * a.cols;
    part.y = static_cast<std::uint8_t*>(a.y) + static_cast<std::size_t>(n0) * a.rows * (a.y_bf16 ? 2 : 4);
    bytes += launch_pass(part, stream);
  }
  return bytes;
}

QSmallPlan gemm_q_small_plan(const QSmallArgs& a) {
  QSmallPlan p;
  if (gemm_q_small_unsupported(a)) return p;
  const int n = std::min(a.n, kQSmallTokens);
  const Launch l = choose(shape_of(a, n), n, a.plan);
  p.m_tiles = l.km;
  p.split = l.ks;
  return p;
}

}  // namespace cosmos::kernels
