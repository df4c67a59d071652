// The small-batch kernel itself (kernels/gemm_q_small.cu has the problem, the dequantization and
// the launch plans; this header is included once per weight format by gemm_q_small_{i8,f8,i4}.cu so
// the formats' ~100 instantiations each compile in parallel).
//
// Three ways to feed a warp its weights and x (QSmallPlan::feed; the third, x shared by the block,
// is gemm_q_small_xs_kernel in kernels/gemm_q_small_xs_kernel.cuh):
//   registers  batches of 4 / kM chunks (2 x 16 bytes per lane and 16-row tile each) loaded into
//              registers, the next batch only after the last is used (4 KB per warp in flight);
//   ring       a per-warp ring of kR = 8 / kM slots in shared memory filled by cp.async, each slot
//              refilled with the chunk kR ahead of the stream (the next unit's chunks included) as
//              soon as it is used: 8 KB per warp always in flight and no registers held for it. Each
//              lane copies exactly the bytes it reads back, so cp.async.wait_group alone orders them
//              (no barrier). int4's 2-byte scales travel as the aligned 4-byte words holding them.
#pragma once

#include <cstdint>

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_fp8.h>

#include "kernels/mma_bf16.cuh"
#include "kernels/pdl.cuh"

namespace cosmos::kernels::qsmall {

constexpr int kWarps = 8;
constexpr int kThreads = kWarps * 32;
constexpr int kChunkBytes = 64;    // bytes of one row per chunk (16 per lane t)
constexpr int kRingBytes = 8192;   // per warp, ring plans

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
  int csplit;         // x shared: blocks sharing a unit group's columns (1: no partial sums)
  float* part;        // x shared, csplit > 1: partial sums [csplit][n][rows]
  unsigned* tickets;  // x shared, csplit > 1: [tile_groups], zero between launches
};
using Kernel = void (*)(SP);

// Ring slots per warp (0: registers).
__host__ __device__ constexpr int ring_slots(int km, bool ring) { return ring ? kRingBytes / (km * 2 * 32 * 16) : 0; }
// Dynamic shared memory of a launch: the kS partial sums ([kWarps][kM kNT 4][32] floats, kS > 1) and
// the rings ([kWarps][kR][kM][2 rows][32 lanes] 16-byte pieces; int4 also [..][2 (s, m)][32] words).
constexpr std::size_t smem_bytes(int f, int nt, int ks, int km, bool ring) {
  const std::size_t red = ks > 1 ? static_cast<std::size_t>(kWarps) * km * nt * 4 * 32 * 4 : 0;
  const std::size_t slots = static_cast<std::size_t>(kWarps) * ring_slots(km, ring) * km * 2 * 32;
  return red + slots * 16 + (f == kI4 ? slots * 2 * 4 : 0);
}
// Two blocks per SM (128 registers) where the accumulators, x pieces and register batches fit
// (ptxas -v: no spills, or 4-8 bytes for 8 token tiles on the ring); one from 6 token tiles otherwise.
__host__ __device__ constexpr int min_blocks(int nt, int km, bool ring) { return nt < 6 || (km == 1 && ring) ? 2 : 1; }

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
__device__ __forceinline__ void cp_async_4(unsigned dst, const void* src) {
  asm volatile("cp.async.ca.shared.global [%0], [%1], 4;\n" ::"r"(dst), "l"(src) : "memory");
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

// The two k-steps of x piece v (2 v, 2 v + 1) for every row tile and token tile: X[nt] the lane's
// piece of token tile nt, A / S / M as in chunk_product.
template <int F, int kNT, int kM>
__device__ __forceinline__ void piece_product(int v, const uint4 (&X)[kNT], const uint4 (&A)[kM][2],
                                              const unsigned (&S)[kM][2], const unsigned (&M)[kM][2],
                                              float (&acc)[kM][kNT][4]) {
#pragma unroll
  for (int s = 2 * v; s < 2 * v + 2; ++s) {
#pragma unroll
    for (int m = 0; m < kM; ++m) {
      unsigned a[4];
      a_pairs<F>(A[m][0], s, S[m][0], M[m][0], a[0], a[2]);
      a_pairs<F>(A[m][1], s, S[m][1], M[m][1], a[1], a[3]);
#pragma unroll
      for (int nt = 0; nt < kNT; ++nt) {
        unsigned b0, b1;
        b_regs<F>(X[nt], s, b0, b1);
        mma::mma_bf16(acc[m][nt], a, b0, b1);
      }
    }
  }
}

// One chunk c of a unit: A[m][r] the 16-byte pieces of rows g, g + 8 of tile m, S / M int4's bf16
// (s, s) and (m, m) pairs of those rows, acc the unit's sums.
template <int F, int kNT, int kM>
__device__ __forceinline__ void chunk_product(const SP& p, int c, int g, int t, const uint4 (&A)[kM][2],
                                              const unsigned (&S)[kM][2], const unsigned (&M)[kM][2],
                                              float (&acc)[kM][kNT][4]) {
  const std::uint16_t* xc = p.x + static_cast<std::size_t>(c) * kChunkCols<F>;
#pragma unroll
  for (int v = 0; v < kXVecs<F>; ++v) {  // x piece v serves k-steps 2 v and 2 v + 1
    uint4 X[kNT];
#pragma unroll
    for (int nt = 0; nt < kNT; ++nt) {
      const int n = nt * 8 + g;
      X[nt] = n < p.n ? __ldg(reinterpret_cast<const uint4*>(xc + static_cast<std::size_t>(n) * p.cols) + kXVecs<F> * t + v)
                      : make_uint4(0, 0, 0, 0);
    }
    piece_product<F, kNT, kM>(v, X, A, S, M, acc);
  }
}

// A warp's fragments of one ring slot: its kM x 2 weight vectors and, for int4, the group scale and
// minimum of each fragment row at chunk c as bf16 pairs (the 32-bit ring word holds two groups' halves).
template <int F, int kM>
__device__ __forceinline__ void ring_fragments(const SP& p, const uint4* wring, const unsigned* sring, int slot,
                                               int unit, int c, int g, int lane, uint4 (&A)[kM][2],
                                               unsigned (&S)[kM][2], unsigned (&M)[kM][2]) {
#pragma unroll
  for (int m = 0; m < kM; ++m)
#pragma unroll
    for (int r = 0; r < 2; ++r) {
      const int at = (slot * kM + m) * 2 + r;
      A[m][r] = wring[at * 32 + lane];
      if constexpr (F == kI4) {
        const int row = min(unit * 16 * kM + m * 16 + g + 8 * r, p.rows - 1);
        const int sh = static_cast<int>((static_cast<std::size_t>(row) * p.groups + c) & 1) * 16;
        const unsigned s = (sring[(at * 2 + 0) * 32 + lane] >> sh) & 0xFFFFu;
        const unsigned z = (sring[(at * 2 + 1) * 32 + lane] >> sh) & 0xFFFFu;
        S[m][r] = s | (s << 16);
        M[m][r] = z | (z << 16);
      }
    }
}

// Scales a unit's sums (int8 / fp8 by the row scale) and stores them into y (bf16, fp32, or added to
// fp32), rows and tokens past the matrix skipped.
template <int F, int kM, int kNT>
__device__ __forceinline__ void store_unit(const SP& p, int unit, int g, int t, const float (&acc)[kM][kNT][4]) {
  if (unit >= p.tiles) return;
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

// Plans that split a unit group's chunks over p.csplit blocks (slices): each block stores its unscaled
// sums of the slice in part[slice][n][row] (owner: the warp holding the unit's sums) and takes the
// group's ticket; the last of them adds the csplit partials of the group's rows in slice order (so the
// result does not depend on which block finishes last; all of its threads, coalesced over rows, every
// slice's load in flight at once), scales and stores them, and sets the ticket back to zero for the
// next launch, which reads it only after its pdl_wait. The caller stores nothing itself.
constexpr int kMaxColSplit = 16;
template <int F, int kM, int kNT>
__device__ __forceinline__ void split_finish(const SP& p, int tg, int slice, int unit, bool owner, int g, int t,
                                             const float (&acc)[kM][kNT][4], int group_rows, int& last_flag) {
  if (owner && unit < p.tiles) {
#pragma unroll
    for (int m = 0; m < kM; ++m)
#pragma unroll
      for (int r = 0; r < 2; ++r) {
        const int row = unit * 16 * kM + m * 16 + g + 8 * r;
        if (row >= p.rows) continue;
#pragma unroll
        for (int nt = 0; nt < kNT; ++nt)
#pragma unroll
          for (int e = 0; e < 2; ++e) {
            const int n = nt * 8 + 2 * t + e;
            if (n < p.n) __stcg(p.part + (static_cast<std::size_t>(slice) * p.n + n) * p.rows + row, acc[m][nt][2 * r + e]);
          }
      }
  }
  __threadfence();  // the partials before the ticket
  __syncthreads();
  if (threadIdx.x == 0) last_flag = atomicAdd(p.tickets + tg, 1u) == static_cast<unsigned>(p.csplit - 1);
  __syncthreads();
  const bool last = last_flag != 0;
  __syncthreads();  // last_flag is read by every thread before thread 0 can set it again
  if (!last) return;
  __threadfence();  // every slice's partials after its ticket
  const int row0 = tg * group_rows, nr = min(group_rows, p.rows - row0);
  const std::size_t stride = static_cast<std::size_t>(p.n) * p.rows;
  for (int i = threadIdx.x; i < p.n * nr; i += blockDim.x) {
    const int n = i / nr, row = row0 + (i - n * nr);
    const float* src = p.part + static_cast<std::size_t>(n) * p.rows + row;
    float v[kMaxColSplit];
#pragma unroll
    for (int sl = 0; sl < kMaxColSplit; ++sl) v[sl] = sl < p.csplit ? __ldcg(src + sl * stride) : 0.0f;
    float sum = v[0];
#pragma unroll
    for (int sl = 1; sl < kMaxColSplit; ++sl)
      if (sl < p.csplit) sum += v[sl];
    if constexpr (F != kI4) sum *= __ldg(p.row_scale + row);
    const std::size_t at = static_cast<std::size_t>(n) * p.rows + row;
    if (p.y_bf16) {
      static_cast<__nv_bfloat16*>(p.y)[at] = __float2bfloat16_rn(sum);
    } else {
      float* y = static_cast<float*>(p.y) + at;
      *y = p.accumulate ? *y + sum : sum;
    }
  }
  if (threadIdx.x == 0) p.tickets[tg] = 0;
}

template <int F, int kNT, int kS, int kM, bool kRing, bool kSplit = false>
__global__ void __launch_bounds__(kThreads, min_blocks(kNT, kM, kRing)) gemm_q_small_kernel(const SP p) {
  static_assert(!(kRing && kSplit), "the ring's refill cursor walks whole units");
  constexpr int kTPB = kWarps / kS;             // row units a block works on at once
  constexpr int kD = 4 / kM;                    // registers: chunks per batch of weight loads
  constexpr int kR = ring_slots(kM, kRing);     // ring: slots per warp
  constexpr int kSlot = kM * 2 * 32;            // ring: 16-byte pieces per slot
  extern __shared__ uint4 smem[];
  float* red = reinterpret_cast<float*>(smem);  // kS > 1: [kWarps][kM kNT 4][32]
  constexpr std::size_t kRedVec = kS > 1 ? static_cast<std::size_t>(kWarps) * kM * kNT * 4 * 32 / 4 : 0;
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const int g = lane >> 2, t = lane & 3;
  const int ts = warp / kS, ks = warp % kS;
  const int nchunks = ks < p.chunks ? (p.chunks - ks + kS - 1) / kS : 0;  // this warp's chunks of a unit (ring)
  // Items: unit groups x slices of their chunks (p.csplit; kSplit kernels only, the others take whole
  // units and compile to no more than they did before splits existed: registers decide their
  // occupancy). Item it's group, first chunk c0 and this warp's chunks of it nch (c0 + ks + i kS).
  const int items = kSplit ? p.tile_groups * p.csplit : p.tile_groups;
  auto slice_of = [&](int it, int& tg, int& c0, int& nch) {
    if constexpr (!kSplit) {
      tg = it;
      c0 = 0;
      nch = nchunks;
      return;
    }
    tg = it / p.csplit;
    const int sl = it - tg * p.csplit;
    c0 = sl * p.chunks / p.csplit;
    const int cn = (sl + 1) * p.chunks / p.csplit - c0;
    nch = ks < cn ? (cn - ks + kS - 1) / kS : 0;
  };
  uint4* wring = smem + kRedVec + static_cast<std::size_t>(warp) * kR * kSlot;  // [kR][kM][2][32]
  unsigned* sring = reinterpret_cast<unsigned*>(smem + kRedVec + static_cast<std::size_t>(kWarps) * kR * kSlot) +
                    static_cast<std::size_t>(warp) * kR * kSlot * 2;             // [kR][kM][2][2][32]

  // Row r (0: g, 1: g + 8) of 16-row tile m of row unit u (16 kM rows), clamped to the matrix.
  auto row_of = [&](int u, int m, int r) { return min(u * 16 * kM + m * 16 + g + 8 * r, p.rows - 1); };
  auto wptr = [&](int row, int c) {
    return reinterpret_cast<const uint4*>(p.q + static_cast<std::size_t>(row) * p.row_bytes + 16 * t +
                                          static_cast<std::size_t>(c) * kChunkBytes);
  };
  auto pair_of = [](unsigned v) { return v | (v << 16); };

  // Registers: batches of kD chunks.
  [[maybe_unused]] uint4 AB[kRing ? 1 : kD][kM][2];
  [[maybe_unused]] unsigned SB[kRing ? 1 : kD][kM][2] = {}, MB[kRing ? 1 : kD][kM][2] = {};
  auto load_batch = [&](int u, int i0, int c0, int nch) {
#pragma unroll
    for (int d = 0; d < kD; ++d) {
      if (i0 + d < nch) {
        const int c = c0 + ks + (i0 + d) * kS;
#pragma unroll
        for (int m = 0; m < kM; ++m)
#pragma unroll
          for (int r = 0; r < 2; ++r) {
            const int row = row_of(u, m, r);
            AB[d][m][r] = __ldcs(wptr(row, c));
            if constexpr (F == kI4) {
              const std::size_t k = static_cast<std::size_t>(row) * p.groups + c;
              SB[d][m][r] = pair_of(__ldg(p.gs + k));
              MB[d][m][r] = pair_of(__ldg(p.gm + k));
            }
          }
      }
    }
  };
  // Ring: the refill cursor walks this warp's stream of (unit, chunk) in consumption order.
  int rtg = blockIdx.x, ri = 0;
  auto refill = [&](int slot) {
    if (nchunks > 0 && rtg < p.tile_groups && rtg * kTPB + ts < p.tiles) {
      const int u = rtg * kTPB + ts, c = ks + ri * kS;
#pragma unroll
      for (int m = 0; m < kM; ++m)
#pragma unroll
        for (int r = 0; r < 2; ++r) {
          const int row = row_of(u, m, r), at = (slot * kM + m) * 2 + r;
          mma::cp_async_16(mma::smem_u32(wring + at * 32 + lane), wptr(row, c), true);
          if constexpr (F == kI4) {
            const std::size_t k = (static_cast<std::size_t>(row) * p.groups + c) & ~static_cast<std::size_t>(1);
            cp_async_4(mma::smem_u32(sring + (at * 2 + 0) * 32 + lane), p.gs + k);
            cp_async_4(mma::smem_u32(sring + (at * 2 + 1) * 32 + lane), p.gm + k);
          }
        }
      if (++ri == nchunks) ri = 0, rtg += gridDim.x;
    }
    mma::cp_async_commit();  // one group per slot use, empty or not: wait_group counts stay exact
  };

  if constexpr (kRing) {
#pragma unroll
    for (int s = 0; s < kR; ++s) refill(s);
  } else if (static_cast<int>(blockIdx.x) < items) {
    int tg0, c0, nch;
    slice_of(blockIdx.x, tg0, c0, nch);
    if (nch > 0) load_batch(tg0 * kTPB + ts, 0, c0, nch);
  }
  pdl_wait();  // x and y from here on
  pdl_launch_dependents();

  int slot = 0;
  for (int it = blockIdx.x; it < items; it += gridDim.x) {
    int tg, c0, nch;
    slice_of(it, tg, c0, nch);
    const int unit = tg * kTPB + ts;
    float acc[kM][kNT][4];
#pragma unroll
    for (int m = 0; m < kM; ++m)
#pragma unroll
      for (int nt = 0; nt < kNT; ++nt)
#pragma unroll
        for (int i = 0; i < 4; ++i) acc[m][nt][i] = 0.0f;
    if (unit < p.tiles) {
      if constexpr (kRing) {
        for (int i = 0; i < nchunks; ++i) {
          const int c = ks + i * kS;
          mma::cp_async_wait<kR - 1>();
          uint4 A[kM][2];
          unsigned S[kM][2] = {}, M[kM][2] = {};
          ring_fragments<F, kM>(p, wring, sring, slot, unit, c, g, lane, A, S, M);
          chunk_product<F, kNT, kM>(p, c, g, t, A, S, M, acc);
          refill(slot);  // the slot's values are in registers and used: copy the chunk kR ahead into it
          slot = slot + 1 == kR ? 0 : slot + 1;
        }
      } else {
        for (int i0 = 0; i0 < nch; i0 += kD) {
          if (i0 > 0) load_batch(unit, i0, c0, nch);
#pragma unroll
          for (int d = 0; d < kD; ++d) {
            if (i0 + d >= nch) break;
            chunk_product<F, kNT, kM>(p, c0 + ks + (i0 + d) * kS, g, t, AB[d], SB[d], MB[d], acc);
          }
        }
      }
    }
    // The kS warps of the unit meet in shared memory; warp ks = 0 adds them in order and stores.
    if constexpr (kS > 1) {
      auto red_at = [&](int w, int j) -> float& { return red[(static_cast<std::size_t>(w) * kM * kNT * 4 + j) * 32 + lane]; };
#pragma unroll
      for (int m = 0; m < kM; ++m)
#pragma unroll
        for (int nt = 0; nt < kNT; ++nt)
#pragma unroll
          for (int i = 0; i < 4; ++i) red_at(warp, (m * kNT + nt) * 4 + i) = acc[m][nt][i];
      __syncthreads();
      if (ks == 0) {
#pragma unroll
        for (int w = 1; w < kS; ++w)
#pragma unroll
          for (int m = 0; m < kM; ++m)
#pragma unroll
            for (int nt = 0; nt < kNT; ++nt)
#pragma unroll
              for (int i = 0; i < 4; ++i) acc[m][nt][i] += red_at(warp + w, (m * kNT + nt) * 4 + i);
      }
    }
    bool store = true;
    if constexpr (kSplit) {
      __shared__ int last_of_group;
      split_finish<F, kM, kNT>(p, tg, it - tg * p.csplit, unit, ks == 0, g, t, acc, kTPB * 16 * kM, last_of_group);
      store = false;
    }
    if (store && ks == 0) store_unit<F, kM, kNT>(p, unit, g, t, acc);
    if constexpr (kS > 1) __syncthreads();  // red is reused by the next unit group
    // Registers: the next unit group's first batch of weights.
    if constexpr (!kRing) {
      if (it + static_cast<int>(gridDim.x) < items) {
        int tg2, c2, nch2;
        slice_of(it + static_cast<int>(gridDim.x), tg2, c2, nch2);
        if (nch2 > 0) load_batch(tg2 * kTPB + ts, 0, c2, nch2);
      }
    }
  }
  if constexpr (kRing) mma::cp_async_wait<0>();  // nothing in flight into shared memory at exit
}

// The kernel of a plan: token tiles nt (1-4, 6, 8), warps per unit ks (1, 2, 4, 8), 16-row tiles per
// warp km (1, 2; 4 up to 2 token tiles), ring or registers. nullptr where no such kernel is built.
// Defined once per format (gemm_q_small_{i8,f8,i4}.cu).
template <int F>
Kernel pick(int nt, int ks, int km, bool ring);
template <>
Kernel pick<kI8>(int nt, int ks, int km, bool ring);
template <>
Kernel pick<kF8>(int nt, int ks, int km, bool ring);
template <>
Kernel pick<kI4>(int nt, int ks, int km, bool ring);

template <int F, int kNT, int kM, bool kRing>
Kernel pick_split(int ks) {
  switch (ks) {
    case 1: return gemm_q_small_kernel<F, kNT, 1, kM, kRing>;
    case 2: return gemm_q_small_kernel<F, kNT, 2, kM, kRing>;
    case 4: return gemm_q_small_kernel<F, kNT, 4, kM, kRing>;
    default: return gemm_q_small_kernel<F, kNT, 8, kM, kRing>;
  }
}
template <int F, int kM, bool kRing>
Kernel pick_nt(int nt, int ks) {
  if constexpr (kM == 4) {  // registers only, up to 2 token tiles: its accumulators and loads fit there
    if constexpr (kRing) return nullptr;
    else return nt == 1 ? pick_split<F, 1, 4, false>(ks) : nt == 2 ? pick_split<F, 2, 4, false>(ks) : nullptr;
  } else {
    switch (nt) {
      case 1: return pick_split<F, 1, kM, kRing>(ks);
      case 2: return pick_split<F, 2, kM, kRing>(ks);
      case 3: return pick_split<F, 3, kM, kRing>(ks);
      case 4: return pick_split<F, 4, kM, kRing>(ks);
      case 6: return pick_split<F, 6, kM, kRing>(ks);
      case 8: return pick_split<F, 8, kM, kRing>(ks);
      default: return nullptr;
    }
  }
}
template <int F>
Kernel pick_format(int nt, int ks, int km, bool ring) {
  if (km == 1) return ring ? pick_nt<F, 1, true>(nt, ks) : pick_nt<F, 1, false>(nt, ks);
  if (km == 2) return ring ? pick_nt<F, 2, true>(nt, ks) : pick_nt<F, 2, false>(nt, ks);
  return ring ? nullptr : pick_nt<F, 4, false>(nt, ks);
}

// Kernels whose unit groups' columns split over blocks (registers; 16 per format): 2 row tiles per
// warp at every token-tile count and 4 up to 2 token tiles, 4 or 8 warps per unit, what the tuned
// plans with col_split > 1 use (the int4 o and down products, session 26). nullptr otherwise.
template <int F, int kNT, int kM>
Kernel pick_col_split_ks(int ks) {
  return ks == 4 ? gemm_q_small_kernel<F, kNT, 4, kM, false, true> : ks == 8 ? gemm_q_small_kernel<F, kNT, 8, kM, false, true> : nullptr;
}
template <int F>
Kernel pick_col_split_format(int nt, int ks, int km) {
  if (km == 4) return nt == 1 ? pick_col_split_ks<F, 1, 4>(ks) : nt == 2 ? pick_col_split_ks<F, 2, 4>(ks) : nullptr;
  if (km != 2) return nullptr;
  switch (nt) {
    case 1: return pick_col_split_ks<F, 1, 2>(ks);
    case 2: return pick_col_split_ks<F, 2, 2>(ks);
    case 3: return pick_col_split_ks<F, 3, 2>(ks);
    case 4: return pick_col_split_ks<F, 4, 2>(ks);
    case 6: return pick_col_split_ks<F, 6, 2>(ks);
    case 8: return pick_col_split_ks<F, 8, 2>(ks);
    default: return nullptr;
  }
}
template <int F>
Kernel pick_col_split(int nt, int ks, int km);
template <>
Kernel pick_col_split<kI8>(int nt, int ks, int km);
template <>
Kernel pick_col_split<kF8>(int nt, int ks, int km);
template <>
Kernel pick_col_split<kI4>(int nt, int ks, int km);

}  // namespace cosmos::kernels::qsmall
