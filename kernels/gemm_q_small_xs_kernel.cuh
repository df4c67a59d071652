// The small-batch kernel with x shared by the block (QSmallPlan::feed = 3; kernels/gemm_q_small.cu
// has the problem and the launch plans, kernels/gemm_q_small_kernel.cuh the dequantization, the
// other two feeds and what all of them share). Included once per weight format by
// gemm_q_small_{i8,f8,i4}.cu.
#pragma once

#include "kernels/gemm_q_small_kernel.cuh"

namespace cosmos::kernels::qsmall {

// x shared (QSmallPlan::feed = 3): kS = 1, so the block's 8 warps own 8 units and walk the same
// chunks in step; each chunk's x for all of the pass's tokens is copied into shared memory once per
// block (not once per warp), in the same cp.async groups as the warps' weight rings (kXR slots each),
// and one block barrier per chunk makes a chunk's x visible and frees the slot used before it.
// Token rows of a stage are padded by 16 bytes so the 8-byte B pieces of 8 tokens hit distinct banks.
__host__ __device__ constexpr int xs_slots(int km) { return 6 / km; }
template <int F>
constexpr int kXRowBytes = kChunkCols<F> * 2 + 16;
constexpr std::size_t smem_bytes_xs(int f, int nt, int km) {
  const std::size_t slots = static_cast<std::size_t>(kWarps) * xs_slots(km) * km * 2 * 32;
  const std::size_t xrow = f == kI4 ? kXRowBytes<kI4> : kXRowBytes<kI8>;
  return slots * 16 + (f == kI4 ? slots * 2 * 4 : 0) + static_cast<std::size_t>(xs_slots(km)) * nt * 8 * xrow;
}

template <int F, int kNT, int kM>
__global__ void __launch_bounds__(kThreads, min_blocks(kNT, kM, true)) gemm_q_small_xs_kernel(const SP p) {
  constexpr int kR = xs_slots(kM);
  constexpr int kSlot = kM * 2 * 32;                               // 16-byte weight pieces per warp slot
  constexpr int kRowB = kXRowBytes<F>;                             // bytes per token row of an x stage
  constexpr int kPPR = kChunkCols<F> * 2 / 16;                     // 16-byte x pieces per token row
  constexpr int kStageB = kNT * 8 * kRowB;
  extern __shared__ uint4 smem[];
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const int g = lane >> 2, t = lane & 3;
  uint4* wring = smem + static_cast<std::size_t>(warp) * kR * kSlot;                        // [kR][kM][2][32]
  unsigned* sring = reinterpret_cast<unsigned*>(smem + static_cast<std::size_t>(kWarps) * kR * kSlot) +
                    static_cast<std::size_t>(warp) * kR * kSlot * 2;                         // int4: [kR][kM][2][2][32]
  unsigned char* xst = reinterpret_cast<unsigned char*>(smem + static_cast<std::size_t>(kWarps) * kR * kSlot) +
                       (F == kI4 ? static_cast<std::size_t>(kWarps) * kR * kSlot * 2 * 4 : 0);  // [kR][kNT 8][kRowB]
  auto row_of = [&](int u, int m, int r) { return min(u * 16 * kM + m * 16 + g + 8 * r, p.rows - 1); };
  auto issue_w = [&](int slot, int u, int c) {
#pragma unroll
    for (int m = 0; m < kM; ++m)
#pragma unroll
      for (int r = 0; r < 2; ++r) {
        const int row = row_of(u, m, r), at = (slot * kM + m) * 2 + r;
        mma::cp_async_16(mma::smem_u32(wring + at * 32 + lane),
                         p.q + static_cast<std::size_t>(row) * p.row_bytes + 16 * t + static_cast<std::size_t>(c) * kChunkBytes,
                         true);
        if constexpr (F == kI4) {
          const std::size_t k = (static_cast<std::size_t>(row) * p.groups + c) & ~static_cast<std::size_t>(1);
          cp_async_4(mma::smem_u32(sring + (at * 2 + 0) * 32 + lane), p.gs + k);
          cp_async_4(mma::smem_u32(sring + (at * 2 + 1) * 32 + lane), p.gm + k);
        }
      }
  };
  auto issue_x = [&](int slot, int c) {  // the block's share: chunk c of x for the pass's tokens
    for (int i = threadIdx.x; i < kNT * 8 * kPPR; i += kThreads) {
      const int row = i / kPPR, pc = i % kPPR;
      const std::uint16_t* src = p.x + static_cast<std::size_t>(min(row, p.n - 1)) * p.cols +
                                 static_cast<std::size_t>(c) * kChunkCols<F> + pc * 8;
      mma::cp_async_16(mma::smem_u32(xst + slot * kStageB + row * kRowB + pc * 16), src, row < p.n);
    }
  };
  // The block's stream of items (unit group, chunk); all warps walk it in step.
  auto advance = [&](int& tg, int& c) {
    if (++c == p.chunks) c = 0, tg += gridDim.x;
  };
  int wtg = blockIdx.x, wc = 0;
#pragma unroll
  for (int s = 0; s < kR - 1; ++s) {
    if (wtg < p.tile_groups) issue_w(s, wtg * kWarps + warp, wc);
    advance(wtg, wc);
  }
  pdl_wait();  // x and y from here on
  pdl_launch_dependents();
  int rtg = blockIdx.x, rc = 0;
#pragma unroll
  for (int s = 0; s < kR - 1; ++s) {
    if (rtg < p.tile_groups) issue_x(s, rc);
    advance(rtg, rc);
    mma::cp_async_commit();  // group s: x item s (group 0 also every prologue weight)
  }
  int j = 0;  // item index; its slot is j % kR
  for (int tg = blockIdx.x; tg < p.tile_groups; tg += gridDim.x) {
    const int unit = tg * kWarps + warp;
    float acc[kM][kNT][4];
#pragma unroll
    for (int m = 0; m < kM; ++m)
#pragma unroll
      for (int nt = 0; nt < kNT; ++nt)
#pragma unroll
        for (int i = 0; i < 4; ++i) acc[m][nt][i] = 0.0f;
    for (int c = 0; c < p.chunks; ++c, ++j) {
      mma::cp_async_wait<kR - 2>();  // this thread's copies of item j are done
      __syncthreads();               // everyone's: item j's x is visible, item j - 1's slot is free
      const int fill = (j + kR - 1) % kR;
      if (rtg < p.tile_groups) {
        issue_w(fill, rtg * kWarps + warp, rc);
        issue_x(fill, rc);
      }
      advance(rtg, rc);
      mma::cp_async_commit();
      const int slot = j % kR;
      uint4 A[kM][2];
      unsigned S[kM][2] = {}, M[kM][2] = {};
      ring_fragments<F, kM>(p, wring, sring, slot, unit, c, g, lane, A, S, M);
      const unsigned char* xs = xst + slot * kStageB;
#pragma unroll
      for (int v = 0; v < kXVecs<F>; ++v) {
        uint4 X[kNT];
#pragma unroll
        for (int nt = 0; nt < kNT; ++nt)
          X[nt] = *reinterpret_cast<const uint4*>(xs + (nt * 8 + g) * kRowB + (kXVecs<F> * t + v) * 16);
        piece_product<F, kNT, kM>(v, X, A, S, M, acc);
      }
    }
    store_unit<F, kM, kNT>(p, unit, g, t, acc);
  }
  mma::cp_async_wait<0>();  // nothing in flight into shared memory at exit
}

template <int F, int kM>
Kernel pick_xs_nt(int nt) {
  switch (nt) {
    case 1: return gemm_q_small_xs_kernel<F, 1, kM>;
    case 2: return gemm_q_small_xs_kernel<F, 2, kM>;
    case 3: return gemm_q_small_xs_kernel<F, 3, kM>;
    case 4: return gemm_q_small_xs_kernel<F, 4, kM>;
    case 6: return gemm_q_small_xs_kernel<F, 6, kM>;
    case 8: return gemm_q_small_xs_kernel<F, 8, kM>;
    default: return nullptr;
  }
}
// The x-shared kernel for nt token tiles and km (1, 2) tiles per warp; nullptr where none is built.
template <int F>
Kernel pick_xs(int nt, int km);
template <>
Kernel pick_xs<kI8>(int nt, int km);
template <>
Kernel pick_xs<kF8>(int nt, int km);
template <>
Kernel pick_xs<kI4>(int nt, int km);
template <int F>
Kernel pick_xs_format(int nt, int km) {
  return km == 1 ? pick_xs_nt<F, 1>(nt) : km == 2 ? pick_xs_nt<F, 2>(nt) : nullptr;
}

}  // namespace cosmos::kernels::qsmall
