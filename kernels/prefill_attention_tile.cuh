// What the two causal prefill attention kernels share (kernels/prefill_attention.cu on mma.sync,
// kernels/prefill_attention_wgmma.cu on wgmma): where a block's query tile sits in its sequence and
// its KV head's cache, and the 16-byte cp.async copies of its Q, K and V tiles into shared memory and
// of the staged output back to global memory. The shared-memory tile layout is the kernel's own: a
// Layout functor gives the byte offset of 16-byte chunk c (elements 8c .. 8c + 7) of row r.
#pragma once

#include <cmath>
#include <cstddef>
#include <cstdint>

#include <cuda_bf16.h>

#include "kernels/mma_bf16.cuh"
#include "kernels/prefill_attention.cuh"

namespace cosmos::kernels::prefill {

// One block's (sequence, query head, tile of up to kBM query rows), D = head_dim. Thread tid copies
// chunk tid % (D / 8) of rows tid / (D / 8) + i * (kThreads / (D / 8)).
template <int D, int kThreads>
struct Tile {
  static constexpr int kChunks = D / 8;                  // 16-byte chunks per row
  static constexpr int kRowStep = kThreads / kChunks;  // rows one pass of the block copies
  static_assert(kThreads % kChunks == 0, "whole rows per pass");

  int head = 0, q_start = 0, r0 = 0, rows = 0, ctx = 0;
  int kv_end = 0;  // keys 0 .. kv_end - 1 are visible to some row of this tile
  const std::int32_t* table = nullptr;
  int bs = 16, bs_shift = -1;
  std::size_t kv_stride = 0;  // elements per cache slot
  const __nv_bfloat16* k_head = nullptr;
  const __nv_bfloat16* v_head = nullptr;

  // The block's tile of kBM rows (the heaviest, last tiles are scheduled first); false when it starts
  // past the sequence's q_len, and the block has nothing to do.
  __device__ bool init(const PrefillAttentionArgs& a, int kBM) {
    head = blockIdx.x;
    const int seq = blockIdx.z;
    r0 = (gridDim.y - 1 - blockIdx.y) * kBM;
    const int q_len = a.q_len[seq];
    if (r0 >= q_len) return false;
    q_start = a.q_start[seq];
    ctx = a.ctx_start[seq];
    rows = min(kBM, q_len - r0);
    kv_end = ctx + r0 + rows;
    const int kvh = head / (a.heads / a.kv_heads);
    table = a.block_tables + a.table_offset[seq];
    bs = a.block_size;
    bs_shift = __popc(bs) == 1 ? __ffs(bs) - 1 : -1;
    kv_stride = static_cast<std::size_t>(a.kv_heads) * D;
    k_head = a.k_cache + static_cast<std::size_t>(kvh) * D;
    v_head = a.v_cache + static_cast<std::size_t>(kvh) * D;
    return true;
  }

  // The Q tile's kRows rows at dst (rows past `rows` are zeros); not committed.
  template <int kRows, class Layout>
  __device__ void load_q(const PrefillAttentionArgs& a, unsigned dst, int tid, Layout layout) const {
    const int row = tid / kChunks, chunk = tid % kChunks;
#pragma unroll
    for (int i = 0; i < kRows / kRowStep; ++i) {
      const int r = row + i * kRowStep;
      const bool valid = r < rows;
      const __nv_bfloat16* src =
          a.q + (static_cast<std::size_t>(q_start + r0 + (valid ? r : 0)) * a.heads + head) * D + chunk * 8;
      mma::cp_async_16(dst + layout(r, chunk), src, valid);
    }
  }

  // The staged output tile (kRows rows in shared memory at `staged`, bf16 or fp16 bits) to out; only
  // the tile's `rows` rows are written.
  template <int kRows, class Layout>
  __device__ void store_out(const PrefillAttentionArgs& a, const unsigned char* staged, int tid, Layout layout) const {
    const int row = tid / kChunks, chunk = tid % kChunks;
    std::uint16_t* out = static_cast<std::uint16_t*>(a.out);
#pragma unroll
    for (int i = 0; i < kRows / kRowStep; ++i) {
      const int r = row + i * kRowStep;
      if (r < rows) {
        const uint4 v = *reinterpret_cast<const uint4*>(staged + layout(r, chunk));
        *reinterpret_cast<uint4*>(out + (static_cast<std::size_t>(q_start + r0 + r) * a.heads + head) * D + chunk * 8) =
            v;
      }
    }
  }
};

// One thread's rows of a key tile of kBN keys: their cache slots (-1 past kv_end), found once per
// tile and used for both its K and its V copy.
template <int D, int kThreads, int kBN>
struct KvRows {
  using T = Tile<D, kThreads>;
  static constexpr int kRows = kBN / T::kRowStep;  // rows this thread copies
  static_assert(kRows * T::kRowStep == kBN, "whole rows per pass");
  int slot[kRows];

  __device__ void find(const T& t, int kt, int tid) {
    const int row = tid / T::kChunks;
#pragma unroll
    for (int i = 0; i < kRows; ++i) {
      const int key = kt * kBN + row + i * T::kRowStep;
      int s = -1;
      if (key < t.kv_end) {
        const int blk = t.bs_shift >= 0 ? key >> t.bs_shift : key / t.bs;
        const int off = t.bs_shift >= 0 ? key & (t.bs - 1) : key % t.bs;
        s = __ldg(t.table + blk) * t.bs + off;
      }
      slot[i] = s;
    }
  }

  // This thread's rows of the tile from `head` (t.k_head or t.v_head) to dst; not committed.
  template <class Layout>
  __device__ void load(unsigned dst, const __nv_bfloat16* head, const T& t, int tid, Layout layout) const {
    const int row = tid / T::kChunks, chunk = tid % T::kChunks;
#pragma unroll
    for (int i = 0; i < kRows; ++i) {
      const bool valid = slot[i] >= 0;
      const __nv_bfloat16* src = head + (valid ? static_cast<std::size_t>(slot[i]) * t.kv_stride : 0) + chunk * 8;
      mma::cp_async_16(dst + layout(row + i * T::kRowStep, chunk), src, valid);
    }
  }
};

// One key tile's scores for a warp's 16 rows in the mma.m16n8 C layout (lane = 4g + t; element e of
// score tile nt is key k0 + 8 nt + 2t + (e & 1), row g, or g + 8 for e >= 2), reached through
// s(nt, e); the output accumulator likewise through o(dt, e) for D / 8 column tiles.

// Causal mask: keys past row g's last visible key `lim` (row g + 8's: lim + 8) become -inf.
template <int kBN, class S>
__device__ __forceinline__ void causal_mask(S s, int k0, int lim, int t) {
#pragma unroll
  for (int nt = 0; nt < kBN / 8; ++nt) {
#pragma unroll
    for (int e = 0; e < 4; ++e) {
      const int key = k0 + nt * 8 + 2 * t + (e & 1);
      if (key > lim + (e >= 2 ? 8 : 0)) s(nt, e) = -INFINITY;
    }
  }
}

// Online softmax over the tile (base 2, p = 2^(s scale_log2 - m scale_log2)): updates the running
// max m of the raw scores and this lane's probability sum l of rows g and g + 8, rescales o, and
// packs P as bf16 A fragments (key chunk kk of 16 keys = score tiles 2kk in p[kk][0..1] and 2kk + 1 in
// p[kk][2..3]).
// The online softmax's first half: the new running max m of rows g, g + 8 (over the tile and the
// quad), the exponent offset msc = m scale_log2 (0 for a row with no visible key yet, so its p stay
// 0) and the correction corr of the old sums (0 on the first tile, m = -inf); l is rescaled by it.
template <int kBN, class S>
__device__ __forceinline__ void softmax_max(S s, float (&m)[2], float (&l)[2], float scale_log2, float (&msc)[2],
                                            float (&corr)[2]) {
  float mx[2] = {m[0], m[1]};
#pragma unroll
  for (int nt = 0; nt < kBN / 8; ++nt) {
    mx[0] = fmaxf(mx[0], fmaxf(s(nt, 0), s(nt, 1)));
    mx[1] = fmaxf(mx[1], fmaxf(s(nt, 2), s(nt, 3)));
  }
#pragma unroll
  for (int i = 0; i < 2; ++i) {
    mx[i] = fmaxf(mx[i], __shfl_xor_sync(0xffffffffu, mx[i], 1));
    mx[i] = fmaxf(mx[i], __shfl_xor_sync(0xffffffffu, mx[i], 2));
    msc[i] = mx[i] == -INFINITY ? 0.0f : mx[i] * scale_log2;
    corr[i] = mma::fast_exp2(m[i] * scale_log2 - msc[i]);
    m[i] = mx[i];
    l[i] *= corr[i];
  }
}

template <int kBN, int D, class S, class O>
__device__ __forceinline__ void online_softmax(S s, O o, float (&m)[2], float (&l)[2], float scale_log2,
                                               unsigned (&p)[kBN / 16][4]) {
  float msc[2], corr[2];
  softmax_max<kBN>(s, m, l, scale_log2, msc, corr);
#pragma unroll
  for (int dt = 0; dt < D / 8; ++dt) {
    o(dt, 0) *= corr[0];
    o(dt, 1) *= corr[0];
    o(dt, 2) *= corr[1];
    o(dt, 3) *= corr[1];
  }
#pragma unroll
  for (int nt = 0; nt < kBN / 8; ++nt) {
    const float p0 = mma::fast_exp2(fmaf(s(nt, 0), scale_log2, -msc[0]));
    const float p1 = mma::fast_exp2(fmaf(s(nt, 1), scale_log2, -msc[0]));
    const float p2 = mma::fast_exp2(fmaf(s(nt, 2), scale_log2, -msc[1]));
    const float p3 = mma::fast_exp2(fmaf(s(nt, 3), scale_log2, -msc[1]));
    l[0] += p0 + p1;
    l[1] += p2 + p3;
    p[nt / 2][(nt % 2) * 2] = mma::pack_bf16(p0, p1);
    p[nt / 2][(nt % 2) * 2 + 1] = mma::pack_bf16(p2, p3);
  }
}

}  // namespace cosmos::kernels::prefill
