// Decode attention on tensor cores (bf16 or int8 KV cache, head_dim 64 or 128), the default for
// both (kernels/decode_attention.cuh has the contract, shared with the CUDA-core kernel in
// decode_attention.cu; docs/PERFORMANCE.md has the measurements behind each choice below).
//
// Block (token t, KV head, split), 8 warps: 4 run the tensor-core work, all 8 copy, rope, combine
// and merge (8 instead of 4: H200 decode 250 -> 256 tok/s short, 234 -> 248 at 4k, mostly a twice
// as parallel merge). The group's query heads (up to 8) are the rows of one m16 tile: Q [16][D]
// bf16 in shared memory (rows past the group zero). Per round of 64 keys the block copies the K
// and V rows [64][D] from the paged cache into shared memory (16-byte asynchronous copies, 32 KB
// for D = 128, one buffer), then mma warp w takes keys 16w .. 16w + 15 of the round:
//   S = Q K^T  (16 x 16, D/16 k-steps of mma.m16n8k16: 2 D/16 mma),
//   online softmax in base 2 over its keys (the scale folded into the exponent),
//   O += P V   (16 x D, P re-packed from the S accumulators as the A operand: D/8 mma).
// At the end of the split the 4 mma warps' (max, sum, O) are combined through shared memory into
// the split's result: final when the context fits one split, else a partial that the last block of
// the (token, KV head) merges, one head per warp (a chain of dependent L2 round trips, 2-3 us per
// layer; a two-level merge over groups of 8 splits measured 3.5 us slower, session 10).
//
// Splits as the CUDA-core kernel's (up to 64 of multiples of 64 keys; at 4k 64 splits of one round
// beat 32 of two and 16 of four, sessions 4 and 13). Fused with RoPE (decode steps): the first
// round's K/V copies, the metadata, the rotation angles and the bias go out before pdl_wait
// (nothing the overlapped kernels write); after it the q/k/v row is read in one round (0.77 us per
// layer less than a loop of dependent reads, session 13), except the newest key's row, which this
// kernel computes: the block holding it writes it into the cache and straight into its K/V tiles.
//
// With sums (DecodeAttentionSums, the decode step's default on Hopper): no partials, ticket or
// merge; each split adds its O and L, weighted by 2^(M - c) against c = q . k_0 (key 0's row copied
// with the first round, the dot product after the last) and shifted into one of two exponent
// buckets, into fp32 sums with 16-byte red.adds, and the o product divides (the merge's ~2 us per
// layer at 4k gone, session 14); the split-0 block of each (token, KV head) zeroes the previous
// layer's sums of its heads after the PDL wait.
//
// The int8 cache (cosmos/kv_format.h) reads half the bytes: each thread loads 16-byte pieces of its
// rows with their scales into registers and stores them into the same bf16 tiles as bf16(scale x
// q), so the tensor-core work is the bf16 cache's.
//
// Bytes: the K and V rows of the context (2 x len x D x 2 per KV head; int8: half, plus a scale per
// row), the q/k/v row, the output; with several splits the partials (D + 2 floats per head and
// split) written and read back once, or with sums (D + 1) floats per head added and 2 (D + 1) zeroed.
#include <cfloat>
#include <cstdint>

#include "kernels/decode_attention_detail.cuh"
#include "kernels/mma_bf16.cuh"
#include "kernels/ktrace.cuh"
#include "kernels/kv_quant_row.cuh"
#include "kernels/pdl.cuh"

namespace cosmos::kernels::decode_detail {
namespace {

using namespace mma;
using bf16 = __nv_bfloat16;

constexpr int kWarps = 4;                 // warps that run the mma work: 16 keys each per round
constexpr int kThreads = 2 * kWarps * 32;  // twice as many threads copy, rope and merge
constexpr int kRound = 16 * kWarps;  // keys per round
static_assert(kSplitKeys % kRound == 0, "splits are whole rounds");

// kSums: the output as sums for the next kernel (DecodeAttentionSums in kernels/decode_attention.cuh):
// no partials, ticket or merge; Out is unused.
// kHalves (sums only, DecodeAttentionSums::halves): every warp runs mma work, warp w on keys
// 16 (w % 4) .. + 15 of a round and on half w / 4 of D (both halves compute the same S and softmax;
// half 0's warps publish the maxima and sums), so O takes D / 16 n8 tiles per warp instead of D / 8
// and the kernel fits 80 registers, 3 blocks per SM instead of 2. Faster where splits take several
// rounds, slower at one: the engine launches it from 8,193 keys on (tiers 3-4; int4 +7-8% at 12-16k,
// sessions 63-64; with the int8 cache the next round's rows are fetched after the mma, not before,
// which spilled 64 bytes at 80 registers).
// kI8: the int8 cache (AttentionArgs::k_scale / v_scale): the K and V rows come into registers
// (16-byte loads of 16 values, the next round's issued before this round's mma, with kHalves after
// it) and go into the same bf16 tiles expanded with their rows' scales, so the mma work is the bf16
// kernel's; the newest key's rows are quantized by two warps (kernels/kv_quant_row.cuh) and put into
// the tiles as a later step will read them.
template <int D, typename Out, bool kSums, bool kI8, bool kHalves = false>
__global__ void __launch_bounds__(kThreads, kHalves ? 3 : 2) decode_attention_mma_kernel(const AttentionArgs a, const RopeIn rope,
                                                                           const Scratch sc) {
  constexpr int kChunks = D / 8;                     // 16-byte chunks per row
  constexpr int kTileBytes = kRound * D * 2;         // one K or V tile
  constexpr int kCopyStep = kThreads / kChunks;      // tile rows per copy pass
  constexpr int kCopyRows = kRound / kCopyStep;      // copy passes per tile
  static_assert(4 * 16 * D * 4 <= 2 * kTileBytes, "the warps' O fit in one buffer for the combine");
  // [K tile 64 x D | V tile 64 x D | Q 16 x D], bf16, swizzled (mma::tile_offset): 36 KB for
  // D = 128, static. (Two buffers, 68 KB of dynamic shared memory, made the whole decode step 20%
  // slower on the H200, at every context length; presumably the shared-memory carveout changing
  // between this kernel and its neighbours.) After the last round the tiles hold the warps' O for
  // the combine: [warp][16][D] fp32.
  __shared__ __align__(128) unsigned char smem[2 * kTileBytes + 16 * D * 2];
  __shared__ float s_m[kWarps][16], s_l[kWarps][16];  // per warp and row: max (raw score), sum
  __shared__ int last_flag;
  const unsigned sK = smem_u32(smem), sV = sK + kTileBytes, sQ = sV + kTileBytes;
  auto elem = [&](unsigned tile, int r, int e) {  // the bf16 element e of row r of a tile
    return reinterpret_cast<bf16*>(smem + (tile - sK) + tile_offset<D>(r, e >> 3) + (e & 7) * 2);
  };

  KTRACE_BLOCK(-1, static_cast<long long>(gridDim.z) * 1000 + gridDim.y);  // kernels/ktrace.cuh
  const bool fused = rope.qkv != nullptr;
  if (!fused) pdl_wait();
  const int t = blockIdx.x, kvh = blockIdx.y, split = blockIdx.z;
  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
  const int G = a.heads / a.kv_heads;
  const int len = a.ctx_len[t];
  const int splits = gridDim.z;
  const int per = split_len(len, splits);
  const int active = (len + per - 1) / per;
  if (split >= active) return;
  const int j0 = split * per, j1 = min(len, j0 + per);
  const std::int32_t* table = a.block_tables + a.table_offset[t];
  const int bs = a.block_size;
  const std::size_t kvd = static_cast<std::size_t>(a.kv_heads) * D;
  bf16* kc = static_cast<bf16*>(const_cast<void*>(a.k_cache));
  bf16* vc = static_cast<bf16*>(const_cast<void*>(a.v_cache));
  const bf16* k_head = kc + static_cast<std::size_t>(kvh) * D;
  const bf16* v_head = vc + static_cast<std::size_t>(kvh) * D;
  // int8 cache: [slots, kv_heads, D] int8 and [slots, kv_heads] fp32 scales.
  const std::int8_t* k8 = static_cast<const std::int8_t*>(a.k_cache) + static_cast<std::size_t>(kvh) * D;
  const std::int8_t* v8 = static_cast<const std::int8_t*>(a.v_cache) + static_cast<std::size_t>(kvh) * D;

  // Copies of round [base, base + kRound): K and V rows; keys >= j1 are zero-filled (finite V for
  // P V, K masked). skip: the newest key, written by this block instead.
  const int crow = tid / kChunks, cchunk = tid % kChunks;
  auto load_round = [&](int base, int skip) {
#pragma unroll
    for (int i = 0; i < kCopyRows; ++i) {
      const int r = crow + i * kCopyStep, key = base + r;
      if (key == skip) continue;
      const bool valid = key < j1;
      const std::size_t slot =
          valid ? static_cast<std::size_t>(table[key / bs]) * bs + key % bs : 0;
      cp_async_16(sK + tile_offset<D>(r, cchunk), k_head + slot * kvd + cchunk * 8, valid);
      cp_async_16(sV + tile_offset<D>(r, cchunk), v_head + slot * kvd + cchunk * 8, valid);
    }
    cp_async_commit();
  };
  // int8: fetch_round loads round [base, base + kRound)'s rows and scales into registers (keys >= j1
  // and `skip` as zeros), store_round expands them into the tiles (leaving row `skip` alone).
  constexpr int kChunks8 = D / 16;             // 16-byte chunks per int8 row
  constexpr int kStep8 = kThreads / kChunks8;  // rows per pass
  constexpr int kRows8 = kRound / kStep8;      // passes per tile
  static_assert(kRound % kStep8 == 0, "whole passes");
  const int crow8 = tid / kChunks8, c8 = tid % kChunks8;
  uint4 k8r[kI8 ? kRows8 : 1], v8r[kI8 ? kRows8 : 1];
  float k8s[kI8 ? kRows8 : 1], v8s[kI8 ? kRows8 : 1];
  auto fetch_round = [&](int base, int skip) {
#pragma unroll
    for (int i = 0; i < kRows8; ++i) {
      const int key = base + crow8 + i * kStep8;
      k8r[i] = v8r[i] = make_uint4(0u, 0u, 0u, 0u);
      k8s[i] = v8s[i] = 0.0f;
      if (key < j1 && key != skip) {
        const std::size_t slot = static_cast<std::size_t>(table[key / bs]) * bs + key % bs;
        k8r[i] = *reinterpret_cast<const uint4*>(k8 + slot * kvd + c8 * 16);
        v8r[i] = *reinterpret_cast<const uint4*>(v8 + slot * kvd + c8 * 16);
        k8s[i] = a.k_scale[slot * a.kv_heads + kvh];
        v8s[i] = a.v_scale[slot * a.kv_heads + kvh];
      }
    }
  };
  auto store_round = [&](int base, int skip) {
#pragma unroll
    for (int i = 0; i < kRows8; ++i) {
      const int r = crow8 + i * kStep8;
      if (base + r == skip) continue;
      uint4 lo, hi;
      expand_kv_i8(k8r[i], k8s[i], lo, hi);
      *reinterpret_cast<uint4*>(smem + tile_offset<D>(r, 2 * c8)) = lo;
      *reinterpret_cast<uint4*>(smem + tile_offset<D>(r, 2 * c8 + 1)) = hi;
      expand_kv_i8(v8r[i], v8s[i], lo, hi);
      *reinterpret_cast<uint4*>(smem + kTileBytes + tile_offset<D>(r, 2 * c8)) = lo;
      *reinterpret_cast<uint4*>(smem + kTileBytes + tile_offset<D>(r, 2 * c8 + 1)) = hi;
    }
  };
  // kSums over several splits: the reference score c = q . k_0 (key 0 is an old key then), its
  // K row copied with the first round.
  __shared__ __align__(16) bf16 s_k0[kSums ? D : 8];
  __shared__ float s_c[kMaxGroup];    // per head row: c
  __shared__ float s_f[kMaxGroup];    // per head row: the split's weight in its bucket
  __shared__ int s_bk[kMaxGroup];     // per head row: the bucket (0 or 1)
  if constexpr (kSums) {
    if constexpr (kI8) {
      if (active > 1 && tid < D / 16) {
        const std::size_t slot0 = static_cast<std::size_t>(table[0]) * bs;
        uint4 lo, hi;
        expand_kv_i8(*reinterpret_cast<const uint4*>(k8 + slot0 * kvd + tid * 16), a.k_scale[slot0 * a.kv_heads + kvh], lo, hi);
        reinterpret_cast<uint4*>(s_k0)[2 * tid] = lo;
        reinterpret_cast<uint4*>(s_k0)[2 * tid + 1] = hi;
      }
    } else if (active > 1 && tid < D / 8) {
      cp_async_16(smem_u32(s_k0) + tid * 16, k_head + static_cast<std::size_t>(table[0]) * bs * kvd + tid * 8, true);
    }
  }
  const bool newest_here = fused && split == active - 1;  // this block writes the newest key
  // The newest row goes into the tiles directly.
  if constexpr (kI8)
    fetch_round(j0, newest_here ? len - 1 : -1);
  else
    load_round(j0, newest_here ? len - 1 : -1);

  // Fused: the rotary embedding of the group's q heads and, in the block holding the newest key,
  // of k (pair i = thread + it x kThreads; h = i / (D / 2) its head, G meaning k). Its angles and
  // the bias (metadata and weights, which no kernel writes) before pdl_wait; after it, one round of
  // loads of the q/k/v row for every pair and the new v row, then the stores.
  constexpr int kHalf = D / 2;
  constexpr int kIt = ((kMaxGroup + 1) * kHalf + kThreads - 1) / kThreads;
  const int qd = a.heads * D;
  const int pairs = fused ? (G + (newest_here ? 1 : 0)) * kHalf : 0;
  const int vo = qd + static_cast<int>(kvd) + kvh * D;  // the head's v in the q/k/v row
  const bool writes_v = newest_here && tid < D;
  float sn[kIt], cs[kIt], x1[kIt], x2[kIt], xv = 0.0f;
  std::int32_t new_slot = 0;
  auto off_of = [&](int h) { return h < G ? (kvh * G + h) * D : qd + kvh * D; };
  if (fused) {
    const std::int32_t* pos = rope.positions + 3 * t;
#pragma unroll
    for (int it = 0; it < kIt; ++it) {
      const int i = tid + it * kThreads, h = i / kHalf, p = i % kHalf;
      x1[it] = x2[it] = sn[it] = cs[it] = 0.0f;
      if (i < pairs) {
        rope_angle(rope, pos, p, sn[it], cs[it]);
        if (rope.bias) {
          x1[it] = rope.bias[off_of(h) + p];
          x2[it] = rope.bias[off_of(h) + p + kHalf];
        }
      }
    }
    if (writes_v && rope.bias) xv = rope.bias[vo + tid];
    new_slot = rope.slots[t];
  }
  // Q rows (bf16, roped, unscaled): the rows past the group are zero.
  for (int i = tid; i < (16 - G) * D; i += kThreads) *elem(sQ, G + i / D, i % D) = __float2bfloat16(0.0f);
  if (fused) pdl_wait();
  pdl_launch_dependents();
  KTRACE_WAITED();
  const std::size_t head0 = static_cast<std::size_t>(t) * a.heads + kvh * G;  // the group's first head
  if constexpr (kSums) {
    // The previous layer's sums of this token's group, read by the kernels this one waited for.
    if (split == 0 && sc.clear_o) {
      const std::size_t bucket_o = static_cast<std::size_t>(a.n) * a.heads * D;
      const std::size_t bucket_l = static_cast<std::size_t>(a.n) * a.heads;
      float4* c0 = reinterpret_cast<float4*>(sc.clear_o + head0 * D);
      float4* c1 = reinterpret_cast<float4*>(sc.clear_o + bucket_o + head0 * D);
      for (int i = tid; i < G * D / 4; i += kThreads) c0[i] = c1[i] = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
      if (tid < G) sc.clear_l[head0 + tid] = sc.clear_l[bucket_l + head0 + tid] = 0.0f;
    }
  }

  if (fused) {
    // The new k and v rows go into the cache (and, when the key is in the first round, into the
    // tiles). The row's values are added to the bias in the order kernels/rope_kv.cu uses.
    const float* row = rope.qkv + static_cast<std::size_t>(t) * (qd + 2 * kvd);
    float r1[kIt], r2[kIt];
#pragma unroll
    for (int it = 0; it < kIt; ++it) {
      const int i = tid + it * kThreads, h = i / kHalf, p = i % kHalf;
      if (i < pairs) {
        r1[it] = row[off_of(h) + p];
        r2[it] = row[off_of(h) + p + kHalf];
      }
    }
    const float rv = writes_v ? row[vo + tid] : 0.0f;
    const int nr = len - 1 - j0;  // the newest key's row in the first round's tiles (if < kRound)
    bf16* kh = kc + static_cast<std::size_t>(new_slot) * kvd + kvh * D;
    __shared__ float s_new[kI8 ? 2 : 1][kI8 ? D : 1];  // int8: the newest key's roped K row and V row
#pragma unroll
    for (int it = 0; it < kIt; ++it) {
      const int i = tid + it * kThreads, h = i / kHalf, p = i % kHalf;
      if (i >= pairs) continue;
      float y1, y2;
      rope_rotate(rope.bias ? r1[it] + x1[it] : r1[it], rope.bias ? r2[it] + x2[it] : r2[it], sn[it], cs[it], y1, y2);
      const bf16 b1 = __float2bfloat16(y1), b2 = __float2bfloat16(y2);
      if (h < G) {
        *elem(sQ, h, p) = b1;
        *elem(sQ, h, p + kHalf) = b2;
      } else if constexpr (kI8) {
        s_new[0][p] = y1;
        s_new[0][p + kHalf] = y2;
      } else {
        kh[p] = b1;
        kh[p + kHalf] = b2;
        if (nr < kRound) {
          *elem(sK, nr, p) = b1;
          *elem(sK, nr, p + kHalf) = b2;
        }
      }
    }
    if (writes_v) {
      if constexpr (kI8) {
        s_new[1][tid] = rv + xv;
      } else {
        const bf16 v = __float2bfloat16(rv + xv);  // xv: the bias, else 0 (as rope_kv.cu adds it)
        vc[static_cast<std::size_t>(new_slot) * kvd + kvh * D + tid] = v;
        if (nr < kRound) *elem(sV, nr, tid) = v;
      }
    }
    if constexpr (kI8) {
      // Warp 0 quantizes the K row, warp 1 the V row, into the cache as cosmos::quantize_kv_row
      // would, and each lane puts the values it made into the tiles expanded (from registers, not
      // read back from the cache), as a later step's store_round will.
      __syncthreads();  // s_new complete (newest_here is the same for the whole block)
      if (newest_here && warp < 2) {
        const std::size_t row = static_cast<std::size_t>(new_slot) * a.kv_heads + kvh;
        std::int8_t* q = static_cast<std::int8_t*>(const_cast<void*>(warp ? a.v_cache : a.k_cache)) + row * D;
        float* scale = const_cast<float*>(warp ? a.v_scale : a.k_scale) + row;
        const unsigned tile = warp ? sV : sK;
        const bool in_tile = nr < kRound;
        quantize_kv_row_warp(s_new[warp], D, q, scale, [&](int e, float s, int qe) {
          if (in_tile) *elem(tile, nr, e) = __float2bfloat16(s * static_cast<float>(qe));
        });
      }
    }
  } else {
    for (int i = tid; i < G * D; i += kThreads)
      *elem(sQ, i / D, i % D) = __float2bfloat16(a.q[(static_cast<std::size_t>(t) * a.heads + kvh * G) * D + i]);
  }

  const int g = lane >> 2, tq = lane & 3;
  const float scale_log2 = a.scale * 1.4426950408889634f;
  static_assert(!kHalves || (kSums && kThreads == 2 * kWarps * 32), "halves: the sums kernel, two warps per 16 keys");
  constexpr int kODt = kHalves ? D / 16 : D / 8;  // O's n8 tiles per warp
  const int kb = kHalves ? warp % kWarps : warp;  // the warp's 16 keys of a round
  const int hd = kHalves ? warp / kWarps : 0;     // kHalves: the warp's half of D
  const bool mma_warp = kHalves || warp < kWarps;
  float o[kODt][4];  // O [16 rows][kODt x 8 columns] as m16n8 accumulators
#pragma unroll
  for (int dt = 0; dt < kODt; ++dt) o[dt][0] = o[dt][1] = o[dt][2] = o[dt][3] = 0.0f;
  float m[2] = {-INFINITY, -INFINITY};  // running max of the raw scores of rows g, g + 8
  float l[2] = {0.0f, 0.0f};            // this lane's part of the running sums

  for (int base = j0;;) {
    if constexpr (kI8) {
      store_round(base, base == j0 && newest_here ? len - 1 : -1);
    } else {
      cp_async_wait<0>();
    }
    __syncthreads();  // the round's tiles (and Q, the newest row) are complete for every warp
    // int8: the next round's rows in flight during this round's mma (halves: after it, below).
    if constexpr (kI8 && !kHalves) {
      if (base + kRound < j1) fetch_round(base + kRound, -1);
    }
    if (base == j0) KTRACE_LOOP();  // the first round's K/V and Q in shared memory
    if (mma_warp) {

    // S = Q K^T for this warp's 16 keys.
    float s[2][4];
#pragma unroll
    for (int nt = 0; nt < 2; ++nt) s[nt][0] = s[nt][1] = s[nt][2] = s[nt][3] = 0.0f;
#pragma unroll
    for (int ks = 0; ks < D / 16; ++ks) {
      unsigned qf[4], b0, b1, b2, b3;
      ldmatrix_x4(sQ + tile_offset<D>(lane & 15, ks * 2 + (lane >> 4)), qf[0], qf[1], qf[2], qf[3]);
      ldmatrix_x4(sK + tile_offset<D>(kb * 16 + (lane & 7) + ((lane >> 4) << 3), ks * 2 + ((lane >> 3) & 1)), b0, b1,
                  b2, b3);
      mma_bf16(s[0], qf, b0, b1);
      mma_bf16(s[1], qf, b2, b3);
    }
    // Keys past the split (or the context) get no weight.
    const int k0 = base + kb * 16;
#pragma unroll
    for (int nt = 0; nt < 2; ++nt)
#pragma unroll
      for (int e = 0; e < 4; ++e)
        if (k0 + nt * 8 + 2 * tq + (e & 1) >= j1) s[nt][e] = -INFINITY;

    // Online softmax in base 2: p = 2^(s scale_log2 - m scale_log2).
    float mx[2] = {fmaxf(m[0], fmaxf(fmaxf(s[0][0], s[0][1]), fmaxf(s[1][0], s[1][1]))),
                   fmaxf(m[1], fmaxf(fmaxf(s[0][2], s[0][3]), fmaxf(s[1][2], s[1][3])))};
    float msc[2];
#pragma unroll
    for (int i = 0; i < 2; ++i) {
      mx[i] = fmaxf(mx[i], __shfl_xor_sync(0xffffffffu, mx[i], 1));
      mx[i] = fmaxf(mx[i], __shfl_xor_sync(0xffffffffu, mx[i], 2));
      msc[i] = mx[i] == -INFINITY ? 0.0f : mx[i] * scale_log2;  // no valid key yet: p stays 0
      const float corr = fast_exp2(m[i] * scale_log2 - msc[i]);  // m = -inf: 0
      m[i] = mx[i];
      l[i] *= corr;
#pragma unroll
      for (int dt = 0; dt < kODt; ++dt) {
        o[dt][2 * i] *= corr;
        o[dt][2 * i + 1] *= corr;
      }
    }
    unsigned p[4];  // P as the A fragment of one k16 step (keys 0..7: p[0], p[1]; 8..15: p[2], p[3])
#pragma unroll
    for (int nt = 0; nt < 2; ++nt) {
      const float p0 = fast_exp2(fmaf(s[nt][0], scale_log2, -msc[0]));
      const float p1 = fast_exp2(fmaf(s[nt][1], scale_log2, -msc[0]));
      const float p2 = fast_exp2(fmaf(s[nt][2], scale_log2, -msc[1]));
      const float p3 = fast_exp2(fmaf(s[nt][3], scale_log2, -msc[1]));
      l[0] += p0 + p1;
      l[1] += p2 + p3;
      p[2 * nt] = pack_bf16(p0, p1);
      p[2 * nt + 1] = pack_bf16(p2, p3);
    }
    // O += P V (V read transposed into col-major B fragments; kHalves: the warp's half of D).
#pragma unroll
    for (int dp = 0; dp < kODt / 2; ++dp) {
      unsigned b0, b1, b2, b3;
      ldmatrix_x4_trans(sV + tile_offset<D>(kb * 16 + (lane & 7) + (((lane >> 3) & 1) << 3), (dp + hd * kODt / 2) * 2 + (lane >> 4)),
                        b0, b1, b2, b3);
      mma_bf16(o[2 * dp], p, b0, b1);
      mma_bf16(o[2 * dp + 1], p, b2, b3);
    }
    }  // the mma warps
    if constexpr (kI8 && kHalves) {
      if (base + kRound < j1) fetch_round(base + kRound, -1);
    }
    base += kRound;
    if (base >= j1) break;
    __syncthreads();  // every warp is done with the tiles
    if constexpr (!kI8) load_round(base, -1);
  }

  KTRACE_PROLOGUE();  // the rounds done
  if constexpr (kSums) {
    if (active > 1 && warp < G) {  // Q is intact (the tiles are reused below, not Q)
      float dot = 0.0f;
#pragma unroll
      for (int i = 0; i < D / 32; ++i)
        dot = fmaf(__bfloat162float(*elem(sQ, warp, lane + 32 * i)), __bfloat162float(s_k0[lane + 32 * i]), dot);
      dot = warp_sum(dot);
      if (lane == 0) s_c[warp] = dot;
    }
  }
  // Combine the warps: per row, M = max of the warps' maxima, each warp's O and sum weighted by
  // 2^((m_w - M) scale_log2).
#pragma unroll
  for (int i = 0; i < 2; ++i) {
    l[i] += __shfl_xor_sync(0xffffffffu, l[i], 1);
    l[i] += __shfl_xor_sync(0xffffffffu, l[i], 2);
  }
  if (tq == 0 && warp < kWarps) {  // (kHalves: half 0's warps; half 1's hold the same values)
    s_m[warp][g] = m[0];
    s_m[warp][g + 8] = m[1];
    s_l[warp][g] = l[0];
    s_l[warp][g + 8] = l[1];
  }
  __syncthreads();  // s_m, s_l complete; every warp is done with the tiles
  float* so = reinterpret_cast<float*>(smem);  // [warp][16][D] fp32, over the K and V tiles
  // Element (row, col) of so, columns XOR-swizzled by row (bits 3-5, so float2 and float4 stay
  // contiguous): the mma warps' stores (lanes g = 0..7 on rows D floats apart, the same bank
  // unswizzled: 8-way conflicts) spread over 4 banks x 2 halves; a row's readers still cover all 32.
  // int4 decode @0 735.7 -> 739.8 tok/s, @4096 620.5 -> 627.0, @8192 596.3 -> 604.6; bf16 @4096
  // 268.2 -> 269.9 (docs/PERFORMANCE.md, session 43).
  auto so_at = [](int row, int col) { return row * D + (col ^ ((row & 7) << 3)); };
#pragma unroll
  for (int i = 0; i < 2 && mma_warp; ++i) {
    const int r = g + 8 * i;
    float M = s_m[0][r];
#pragma unroll
    for (int w = 1; w < kWarps; ++w) M = fmaxf(M, s_m[w][r]);
    const float f = m[i] == -INFINITY ? 0.0f : fast_exp2((m[i] - M) * scale_log2);
    if constexpr (kSums) {
      // The split's bucket and weight (M is finite: the split has a valid key); e in fp64, as M
      // and c can be large and close.
      if (warp == 0 && tq == 0 && r < G && active > 1) {
        const double e = (static_cast<double>(M) - s_c[r]) * scale_log2;
        const int bk = e > kSumsBucket ? 1 : 0;
        s_bk[r] = bk;
        s_f[r] = exp2f(static_cast<float>(fmin(e, 2.0 * kSumsBucket) - kSumsShift - kSumsBucket * bk));
      }
    }
#pragma unroll
    for (int dt = 0; dt < kODt; ++dt) {
      *reinterpret_cast<float2*>(so + so_at(kb * 16 + r, (dt + hd * kODt) * 8 + 2 * tq)) =
          make_float2(o[dt][2 * i] * f, o[dt][2 * i + 1] * f);
    }
  }
  __syncthreads();

  if constexpr (kSums) {
    // Thread i: elements 4i .. 4i + 3 of the group's [G][D] output, one 16-byte add (sm_90) into
    // its bucket's sums (a quarter of the atomic operations of element-wise adds), or a store with
    // one split; the row's first thread also adds (stores) the row's sum.
    const std::size_t bucket_o = static_cast<std::size_t>(a.n) * a.heads * D;
    const std::size_t bucket_l = static_cast<std::size_t>(a.n) * a.heads;
    for (int i = tid; i < G * D / 4; i += kThreads) {
      const int r = 4 * i / D, d = 4 * i % D;
      float4 O = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
#pragma unroll
      for (int w = 0; w < kWarps; ++w) {
        const float4 v = *reinterpret_cast<const float4*>(so + so_at(w * 16 + r, d));
        O = make_float4(O.x + v.x, O.y + v.y, O.z + v.z, O.w + v.w);
      }
      float L = 0.0f;
      if (d == 0) {
        float M = s_m[0][r];
#pragma unroll
        for (int w = 1; w < kWarps; ++w) M = fmaxf(M, s_m[w][r]);
#pragma unroll
        for (int w = 0; w < kWarps; ++w)
          if (s_m[w][r] != -INFINITY) L += s_l[w][r] * fast_exp2((s_m[w][r] - M) * scale_log2);
      }
      const std::size_t hrow = head0 + r;
      if (active == 1) {
        *reinterpret_cast<float4*>(sc.sum_o + hrow * D + d) = O;
        if (d == 0) {
          sc.sum_l[hrow] = L;
          sc.sum_l[bucket_l + hrow] = 0.0f;
        }
      } else {
        const int bk = s_bk[r];
        const float f = s_f[r];
        float* dst = sc.sum_o + bk * bucket_o + hrow * D + d;
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
        atomicAdd(reinterpret_cast<float4*>(dst), make_float4(O.x * f, O.y * f, O.z * f, O.w * f));
#else
        atomicAdd(dst, O.x * f);
        atomicAdd(dst + 1, O.y * f);
        atomicAdd(dst + 2, O.z * f);
        atomicAdd(dst + 3, O.w * f);
#endif
        if (d == 0) atomicAdd(sc.sum_l + bk * bucket_l + hrow, L * f);
      }
    }
  } else {  // the split's result merged here: output, or partial and the last block's merge
    for (int i = tid; i < G * D; i += kThreads) {
      const int r = i / D, d = i % D;
      float M = s_m[0][r];
#pragma unroll
      for (int w = 1; w < kWarps; ++w) M = fmaxf(M, s_m[w][r]);
      float L = 0.0f, O = 0.0f;
#pragma unroll
      for (int w = 0; w < kWarps; ++w) {
        if (s_m[w][r] != -INFINITY) L += s_l[w][r] * fast_exp2((s_m[w][r] - M) * scale_log2);
        O += so[so_at(w * 16 + r, d)];
      }
      if (active == 1) {
        store_elem(static_cast<Out*>(a.out) + (head0 + r) * D, d, O / L);
      } else {
        const std::size_t at = (head0 + r) * splits + split;
        sc.o[at * D + d] = O;
        if (d == 0) {
          sc.ml[2 * at] = M * scale_log2;  // the merge's units: base-2 exponents
          sc.ml[2 * at + 1] = L;
        }
      }
    }
    if (active == 1) return;

    // The last block of the (token, KV head) to finish merges the splits.
    __syncthreads();  // the block's partial stores before thread 0's ticket (arrive_last)
    if (tid == 0) last_flag = arrive_last(sc.counters + t * a.kv_heads + kvh, active);
    __syncthreads();
    if (!last_flag) return;
    // Warp w merges head w (G <= 8 warps), lane l its float4 l of D (for D = 64 lanes 16-31 only
    // help with the weights): the lanes read the splits' (max, sum) (lane l: splits l, l + 32) and
    // the first batch of partials in one round of L2 reads, the weights are shuffled from the lane
    // that computed them, and there is no block barrier between weights and partials.
    constexpr int kBatch = 16;  // partials in flight per lane
    const int r = warp;
    if (r < G) {
      const std::size_t at0 = (head0 + r) * splits;
      const bool mine = lane < D / 4;
      const float4* part = reinterpret_cast<const float4*>(sc.o + at0 * D) + lane;  // + split * D / 4
      float4 v[kBatch];
#pragma unroll
      for (int j = 0; j < kBatch; ++j)
        v[j] = mine && j < active ? __ldcg(part + j * (D / 4)) : make_float4(0.0f, 0.0f, 0.0f, 0.0f);
      float w0, w1;
      const float total = split_weights<true>(sc.ml, at0, active, lane, w0, w1);
      float4 acc = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
      for (int base = 0; base < active; base += kBatch) {
        if (base > 0) {
#pragma unroll
          for (int j = 0; j < kBatch; ++j)
            v[j] = mine && base + j < active ? __ldcg(part + (base + j) * (D / 4)) : make_float4(0.0f, 0.0f, 0.0f, 0.0f);
        }
        const float wsrc = base < 32 ? w0 : w1;  // kBatch divides 32: a batch is within one half
#pragma unroll
        for (int j = 0; j < kBatch; ++j) {
          const float w = __shfl_sync(0xffffffffu, wsrc, (base + j) & 31);  // 0 past `active`
          if (base + j < active) {
            acc.x = fmaf(w, v[j].x, acc.x);
            acc.y = fmaf(w, v[j].y, acc.y);
            acc.z = fmaf(w, v[j].z, acc.z);
            acc.w = fmaf(w, v[j].w, acc.w);
          }
        }
      }
      if (mine) {
        const float inv = 1.0f / total;
        Out* out = static_cast<Out*>(a.out) + (head0 + r) * D + lane * 4;
        store_elem(out, 0, acc.x * inv);
        store_elem(out, 1, acc.y * inv);
        store_elem(out, 2, acc.z * inv);
        store_elem(out, 3, acc.w * inv);
      }
    }
  }  // merged
}

template <int D, bool kI8>
void launch_d(const AttentionArgs& a, const RopeIn& r, const Scratch& s, cudaStream_t stream) {
  KTRACE_ARM("decode_attention");
  const dim3 grid(a.n, a.kv_heads, decode_attention_splits(a.n, a.kv_heads));
  if (s.sum_o) {
    dim3 g = grid;
    if (s.sum_splits > 0 && a.n <= 4) g.z = s.sum_splits;  // DecodeAttentionSums::splits
    if (s.halves)
      launch_pdl(decode_attention_mma_kernel<D, float, true, kI8, true>, g, kThreads, 0, stream, a, r, s);
    else
      launch_pdl(decode_attention_mma_kernel<D, float, true, kI8>, g, kThreads, 0, stream, a, r, s);
    return;
  }
  switch (a.out_type) {
    case ElemType::f32: launch_pdl(decode_attention_mma_kernel<D, float, false, kI8>, grid, kThreads, 0, stream, a, r, s); break;
    case ElemType::bf16: launch_pdl(decode_attention_mma_kernel<D, bf16, false, kI8>, grid, kThreads, 0, stream, a, r, s); break;
    case ElemType::f16: launch_pdl(decode_attention_mma_kernel<D, __half, false, kI8>, grid, kThreads, 0, stream, a, r, s); break;
  }
}

}  // namespace

void launch_decode_attention_mma(const AttentionArgs& a, const RopeIn& r, const Scratch& s, cudaStream_t stream) {
  const bool i8 = a.k_scale != nullptr;
  if (a.head_dim == 128)
    i8 ? launch_d<128, true>(a, r, s, stream) : launch_d<128, false>(a, r, s, stream);
  else
    i8 ? launch_d<64, true>(a, r, s, stream) : launch_d<64, false>(a, r, s, stream);
}

}  // namespace cosmos::kernels::decode_detail
