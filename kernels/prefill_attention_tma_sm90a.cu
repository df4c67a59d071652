// Causal prefill attention on Hopper, warp-specialized (flash-attention 3 style; the contract of
// kernels/prefill_attention.cuh, head_dim 128). Against kernels/prefill_attention_wgmma.cu (cp.async
// copies by every thread, one K and one V tile, block barriers, each product waited for at once):
// a producer warp feeds K/V tiles of 128 keys through TMA into a two-stage ring with mbarriers, and
// each consumer warpgroup overlaps its softmax with its tensor-core work: while the scores of key
// tile j are turned into probabilities, the product P V of tile j - 1 runs.
//
// Blocks: 384 threads, one per SM, persistent: in round r a block takes one of work items r * grid ..
// r * grid + grid - 1 (forward in even rounds, backward in odd ones: item_index). An item is 128
// query rows of one (sequence, query head); items are numbered heaviest first (every head's last
// query tile, then the tiles before), consecutive items are the heads of one GQA group, so a K/V tile
// is read from DRAM about once and served to its group's other heads from L2.
//   warpgroup 0: warp 0 is the producer (warps 1-3 leave at once). Per item it copies the Q tile
//                (two boxes of 128 rows x 64 dims), then per key tile the K and the V tile: one box
//                (block_size rows x 64 dims) per cache block and half, issued by lanes 0 .. 2 *
//                blocks - 1 in parallel, each at its block's slot from the block table. A tile's
//                blocks past the item's last key repeat the last block (finite values; the keys are
//                masked and their V rows zeroed before use).
//   warpgroups 1, 2: consumers, rows 64c .. 64c + 63 of the item (c = 0, 1). Per key tile j:
//                S_j = Q K_j^T (m64n128k16, both from shared memory) is issued, then O += P_{j-1}
//                V_{j-1} (m64n128k16, P from registers, V MN-major); once S_j is done (wait_group 1)
//                the causal mask and the online softmax run on it while the P V product is still
//                in flight; after it (wait_group 0) O is rescaled and P_j packed to bf16. Key tiles
//                that none of the warpgroup's rows see are only waited for and released. The two
//                warpgroups take turns issuing their products (pingpong, two named barriers), so
//                one's softmax runs while the other's products occupy the tensor cores: 3-5% faster
//                than letting them issue freely (bench_attention, session 21).
//                Epilogue: O / l staged in shared memory, then 16-byte stores of the item's rows.
// Shared memory (dynamic, aligned to 1024 in the kernel, the 128-byte swizzle's period):
//   Q [128][128] (32 KB), K stages [2][128][128] (64 KB), V stages [2][128][128] (64 KB), the output
//   staging [2 warpgroups][64][128] (32 KB), all bf16 in the 128-byte-swizzled layout of
//   kernels/wgmma.cuh (64-dim halves of 128 rows x 128 bytes, 16 KB apart); then the mbarriers:
//   q_full, q_empty, k_full[2], k_empty[2], v_full[2], v_empty[2] (8 bytes each). A "full" barrier
//   counts the producer's arrival and the copies' bytes; an "empty" one the 8 consumer warps.
// Registers: setmaxnreg moves them from the producer warpgroup (40) to the consumers (232): O and S
// are 64 fp32 a thread each, P 32.
#include "kernels/prefill_attention_tma_sm90a.cuh"

#include <cmath>
#include <cstdint>

#include "kernels/mma_bf16.cuh"
#include "kernels/pdl.cuh"
#include "kernels/prefill_attention_tile.cuh"
#include "kernels/tma_sm90a.cuh"
#include "kernels/wgmma.cuh"

namespace cosmos::kernels {
namespace {

using namespace tma;

constexpr int kD = 128;
constexpr int kBM = kPrefillTmaRows, kBN = kPrefillTmaKeys;
[[maybe_unused]] constexpr int kWgRows = 64;  // query rows per consumer warpgroup (wgmma m64)
constexpr int kThreads = 384;
constexpr int kStages = 2;
constexpr unsigned kTileBytes = kBN * kD * 2;  // 32 KB: a Q, K or V tile
[[maybe_unused]] constexpr unsigned kHalfBytes = kBN * 128;  // 16 KB: its 64-dim half (128 rows of 128 bytes)
static_assert(kBM == kBN, "the Q and K/V tiles share one layout");
constexpr unsigned kOffK = kTileBytes, kOffV = kOffK + kStages * kTileBytes, kOffOut = kOffV + kStages * kTileBytes;
constexpr unsigned kOffBars = kOffOut + kTileBytes;
constexpr int kBars = 2 + 4 * kStages;
constexpr int kSmem = kOffBars + kBars * 8 + 1024;
static_assert(kSmem <= 227 * 1024, "fits an sm_90 block's shared memory");

struct Params {
  const std::int32_t* block_tables;
  const std::int32_t* table_offset;
  const std::int32_t* q_start;
  const std::int32_t* q_len;
  const std::int32_t* ctx_start;
  void* out;
  int seqs, heads, kv_heads, bs_shift, q_tiles, items;
  float scale_log2;
};

struct Item {
  int head, kvh, r0, rows, ctx, kv_end;
  int q_row;  // the item's first row in q / out
  const std::int32_t* table;
};

#if defined(__CUDA_ARCH__) && defined(__CUDA_ARCH_FEAT_SM90_ALL)
// The item this block takes in round r: items r * grid .. r * grid + grid - 1 go to the blocks in
// order in even rounds and in reverse order in odd ones, so the block with the heaviest item of one
// round gets the lightest of the next. On 2,048 tokens (448 items of 1-16 key tiles on 132 SMs,
// counting one tile more per item for its Q copy and epilogue) the busiest block has ~6% more work
// than the mean, against ~27% when every round is in order.
__device__ __forceinline__ int item_index(int r, int grid) {
  return r * grid + ((r & 1) ? grid - 1 - static_cast<int>(blockIdx.x) : static_cast<int>(blockIdx.x));
}

// Work item i: query tile q_tiles - 1 - i / (heads * seqs) (heaviest first), then sequence, then head.
// False when the tile starts past the sequence's q_len (nothing to do).
__device__ __forceinline__ bool item_of(const Params& p, int i, Item& it) {
  const int per_tile = p.heads * p.seqs;
  const int qt = p.q_tiles - 1 - i / per_tile, rem = i % per_tile;
  const int seq = rem / p.heads;
  it.head = rem % p.heads;
  it.r0 = qt * kBM;
  const int q_len = __ldg(p.q_len + seq);
  if (it.r0 >= q_len) return false;
  it.rows = min(kBM, q_len - it.r0);
  it.ctx = __ldg(p.ctx_start + seq);
  it.kv_end = it.ctx + it.r0 + it.rows;
  it.q_row = __ldg(p.q_start + seq) + it.r0;
  it.kvh = it.head / (p.heads / p.kv_heads);
  it.table = p.block_tables + __ldg(p.table_offset + seq);
  return true;
}
#endif

template <bool kF16>
__global__ void __launch_bounds__(kThreads, 1)
    prefill_attention_tma_kernel(const __grid_constant__ CUtensorMap tq, const __grid_constant__ CUtensorMap tk,
                                 const __grid_constant__ CUtensorMap tv, Params p) {
#if defined(__CUDA_ARCH__) && defined(__CUDA_ARCH_FEAT_SM90_ALL)
  extern __shared__ unsigned char smem_raw[];
  const unsigned base = (mma::smem_u32(smem_raw) + 1023u) & ~1023u;
  const unsigned sQ = base, bars = base + kOffBars;
  auto sK = [&](int s) { return base + kOffK + s * kTileBytes; };
  auto sV = [&](int s) { return base + kOffV + s * kTileBytes; };
  const unsigned q_full = bars, q_empty = bars + 8;
  auto k_full = [&](int s) { return bars + 8u * (2 + s); };
  auto k_empty = [&](int s) { return bars + 8u * (2 + kStages + s); };
  auto v_full = [&](int s) { return bars + 8u * (2 + 2 * kStages + s); };
  auto v_empty = [&](int s) { return bars + 8u * (2 + 3 * kStages + s); };
  const int wg = threadIdx.x / 128;

  if (threadIdx.x == 0) {
    mbar_init(q_full, 1);
    mbar_init(q_empty, 8);
    for (int s = 0; s < kStages; ++s) {
      mbar_init(k_full(s), 1);
      mbar_init(k_empty(s), 8);
      mbar_init(v_full(s), 1);
      mbar_init(v_empty(s), 8);
    }
    mbar_init_fence();
  }
  __syncthreads();
  pdl_wait();  // q and the cache come from the kernels before
  pdl_launch_dependents();

  if (wg == 0) {
    asm volatile("setmaxnreg.dec.sync.aligned.u32 40;\n" ::: "memory");
    if (threadIdx.x >= 32) return;
    const int lane = threadIdx.x;
    if (lane == 0) {
      prefetch_map(&tq);
      prefetch_map(&tk);
      prefetch_map(&tv);
    }
    const int bs = 1 << p.bs_shift, blocks = kBN >> p.bs_shift;  // cache blocks per key tile (<= 16)
    const bool copier = lane < 2 * blocks;
    const int blk_in_tile = lane >> 1, half = lane & 1;
    const unsigned dst_off = half * kHalfBytes + blk_in_tile * bs * 128;
    int qi = 0, kv = 0;
    for (int round = 0, i; (i = item_index(round, gridDim.x)) < p.items; ++round) {
      Item it;
      if (!item_of(p, i, it)) continue;
      if (qi > 0) mbar_wait(q_empty, (qi - 1) & 1);
      if (lane == 0) {
        mbar_expect_tx(q_full, kTileBytes);  // rows past q's n arrive as zeros, counted
        load_3d(sQ, &tq, 0, it.head, it.q_row, q_full);
        load_3d(sQ + kHalfBytes, &tq, 64, it.head, it.q_row, q_full);
      }
      ++qi;
      const int n_kt = (it.kv_end + kBN - 1) / kBN;
      const int last_blk = (it.kv_end - 1) >> p.bs_shift;
      for (int kt = 0; kt < n_kt; ++kt, ++kv) {
        const int s = kv % kStages, use = kv / kStages;
        int slot = 0;
        if (copier) slot = __ldg(it.table + min(((kt * kBN) >> p.bs_shift) + blk_in_tile, last_blk)) << p.bs_shift;
        if (use > 0) mbar_wait(k_empty(s), (use - 1) & 1);
        if (lane == 0) mbar_expect_tx(k_full(s), kTileBytes);
        __syncwarp();
        if (copier) load_3d(sK(s) + dst_off, &tk, half * 64, it.kvh, slot, k_full(s));
        if (use > 0) mbar_wait(v_empty(s), (use - 1) & 1);
        if (lane == 0) mbar_expect_tx(v_full(s), kTileBytes);
        __syncwarp();
        if (copier) load_3d(sV(s) + dst_off, &tv, half * 64, it.kvh, slot, v_full(s));
      }
    }
    return;
  }

  asm volatile("setmaxnreg.inc.sync.aligned.u32 232;\n" ::: "memory");
  const int c = wg - 1;                  // this warpgroup's rows: 64c .. 64c + 63 of an item
  const int tid = threadIdx.x - 128 * wg;  // 0 .. 127
  const int warp = tid / 32, lane = tid % 32, g = lane >> 2, t = lane & 3;
  const unsigned sOut = base + kOffOut + c * (kTileBytes / 2);
  const unsigned qa = sQ + c * kWgRows * 128;  // this warpgroup's Q rows in each 64-dim half
  const float sl2 = p.scale_log2;
  auto release = [&](unsigned bar) {
    if (lane == 0) mbar_arrive(bar);
  };

  float o[64];  // O: 64 rows x 128 dims; o[4 dt + e] is dim 8 dt + 2t + (e & 1), row g (+8 for e >= 2) of the warp's 16
  float s[64];  // S (then P in fp32): 64 rows x 128 keys, the same layout over keys
  unsigned pf[8][4];  // P as bf16 A fragments, 16 keys per k step
  float m[2] = {-INFINITY, -INFINITY}, l[2] = {0.0f, 0.0f}, corr[2] = {0.0f, 0.0f};
  auto sv = [&](int nt, int e) -> float& { return s[4 * nt + e]; };

  auto issue_s = [&](int st) {  // S = Q K^T over the 128 dims: 8 k steps of 16
    wgmma::fence();
#pragma unroll
    for (int ks = 0; ks < kD / 16; ++ks) {
      const unsigned off = (ks >> 2) * kHalfBytes + (ks & 3) * 32;
      wgmma::wgmma_m64n128k16_ss(s, wgmma::desc_sw128(qa + off, 16, 1024), wgmma::desc_sw128(sK(st) + off, 16, 1024),
                                 ks > 0);
    }
    wgmma::commit();
  };
  auto issue_pv = [&](int st) {  // O += P V: k step kk reads keys 16 kk .. 16 kk + 15
    wgmma::fence();
#pragma unroll
    for (int kk = 0; kk < kBN / 16; ++kk)
      wgmma::wgmma_m64n128k16_rs_tb(o, pf[kk], wgmma::desc_sw128(sV(st) + kk * 16 * 128, kHalfBytes, 1024));
    wgmma::commit();
  };
  // The new running max, the correction of the old sums and the probabilities (in s, fp32).
  auto softmax_scores = [&]() {
    float msc[2];
    prefill::softmax_max<kBN>(sv, m, l, sl2, msc, corr);
#pragma unroll
    for (int nt = 0; nt < kBN / 8; ++nt) {
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        const float pe = mma::fast_exp2(fmaf(s[4 * nt + e], sl2, -msc[e >> 1]));
        s[4 * nt + e] = pe;
        l[e >> 1] += pe;
      }
    }
  };
  auto rescale_pack = [&]() {  // after the P V product in flight has completed
#pragma unroll
    for (int dt = 0; dt < kD / 8; ++dt) {
      o[4 * dt] *= corr[0];
      o[4 * dt + 1] *= corr[0];
      o[4 * dt + 2] *= corr[1];
      o[4 * dt + 3] *= corr[1];
    }
#pragma unroll
    for (int nt = 0; nt < kBN / 8; ++nt) {
      pf[nt / 2][(nt % 2) * 2] = mma::pack_bf16(s[4 * nt], s[4 * nt + 1]);
      pf[nt / 2][(nt % 2) * 2 + 1] = mma::pack_bf16(s[4 * nt + 2], s[4 * nt + 3]);
    }
  };
  // V rows past the item's last key (other blocks' data, or never written) must not reach O as
  // 0 * NaN: both warpgroups write zeros over them (the same bits) before their product reads them.
  auto zero_v_tail = [&](int st, int k0, int kv_end) {
    const int from = kv_end - k0;
    if (from >= kBN) return;
    for (int x = tid; x < (kBN - from) * 16; x += 128) {
      const int r = from + x / 16, ch = x % 16;
      asm volatile("st.shared.v4.u32 [%0], {%1, %1, %1, %1};\n" ::"r"(sV(st) + (ch >> 3) * kHalfBytes + r * 128 +
                                                                      (ch & 7) * 16),
                   "r"(0u)
                   : "memory");
    }
    wgmma::fence_proxy_async();
    named_sync(1 + c, 128);
  };

  // Pingpong: the two warpgroups take turns issuing their products (n_kt + 1 turns per item each),
  // so that one's softmax runs under the other's products.
  auto turn_begin = [&]() { named_sync(3 + c, 256); };
  auto turn_end = [&]() { named_arrive(3 + (c ^ 1), 256); };
  int qi = 0, kv = 0;
  if (c == 1) named_arrive(3, 256);  // warpgroup 0 takes the first turn
  for (int round = 0, i; (i = item_index(round, gridDim.x)) < p.items; ++round) {
    Item it;
    if (!item_of(p, i, it)) continue;
    const int n_kt = (it.kv_end + kBN - 1) / kBN;
    const int first = it.ctx + it.r0 + c * kWgRows;  // last key visible to the warpgroup's first row
    // Key tiles some row of this warpgroup sees: 0 .. n_act - 1 (none when it has no rows).
    const int n_act = c * kWgRows >= it.rows ? 0 : min(n_kt, (first + kWgRows - 1) / kBN + 1);
    const int lim0 = first + warp * 16 + g;  // last key row g sees (row g + 8: lim0 + 8)
    auto mask = [&](int j) {
      if (j * kBN + kBN - 1 > first) prefill::causal_mask<kBN>(sv, j * kBN, lim0, t);
    };
    auto stage = [&](int j) { return (kv + j) % kStages; };
    auto parity = [&](int j) { return static_cast<unsigned>((kv + j) / kStages) & 1u; };

    mbar_wait(q_full, qi & 1);
    ++qi;
    if (n_act > 0) {
#pragma unroll
      for (int x = 0; x < 64; ++x) o[x] = 0.0f;
      m[0] = m[1] = -INFINITY;
      l[0] = l[1] = 0.0f;
      turn_begin();
      mbar_wait(k_full(stage(0)), parity(0));
      issue_s(stage(0));
      turn_end();
      wgmma::wait<0>();
      wgmma::fence_operands(s);
      release(k_empty(stage(0)));
      if (n_act == 1) release(q_empty);
      mask(0);
      softmax_scores();
      rescale_pack();
      for (int j = 1; j < n_act; ++j) {
        turn_begin();
        mbar_wait(k_full(stage(j)), parity(j));
        issue_s(stage(j));
        mbar_wait(v_full(stage(j - 1)), parity(j - 1));  // tile j - 1 < n_kt - 1 holds only keys < kv_end
        issue_pv(stage(j - 1));
        turn_end();
        wgmma::wait<1>();  // S_j is done; P_{j-1} V_{j-1} may still run
        wgmma::fence_operands(s);
        release(k_empty(stage(j)));
        if (j == n_act - 1) release(q_empty);
        mask(j);
        softmax_scores();
        wgmma::wait<0>();
        wgmma::fence_operands(o);
        wgmma::fence_operands(s);
        release(v_empty(stage(j - 1)));
        rescale_pack();
      }
      const int j = n_act - 1;
      turn_begin();
      mbar_wait(v_full(stage(j)), parity(j));
      zero_v_tail(stage(j), j * kBN, it.kv_end);
      issue_pv(stage(j));
      turn_end();
      wgmma::wait<0>();
      wgmma::fence_operands(o);
      release(v_empty(stage(j)));
    } else {
      release(q_empty);
      turn_begin();
      turn_end();
    }
    for (int j = n_act; j < n_kt; ++j) {  // tiles none of this warpgroup's rows see
      turn_begin();
      turn_end();
      mbar_wait(k_full(stage(j)), parity(j));
      release(k_empty(stage(j)));
      mbar_wait(v_full(stage(j)), parity(j));
      release(v_empty(stage(j)));
    }
    kv += n_kt;
    if (n_act == 0) continue;

    // Epilogue: normalize, stage this warpgroup's 64 rows, then 16-byte stores of the item's rows.
    float inv[2];
#pragma unroll
    for (int x = 0; x < 2; ++x) {
      l[x] += __shfl_xor_sync(0xffffffffu, l[x], 1);
      l[x] += __shfl_xor_sync(0xffffffffu, l[x], 2);
      inv[x] = 1.0f / l[x];  // > 0 on every row of the item: key 0 is visible to all
    }
    const int orow = warp * 16 + g;
#pragma unroll
    for (int dt = 0; dt < kD / 8; ++dt) {
      const float v0 = o[4 * dt] * inv[0], v1 = o[4 * dt + 1] * inv[0];
      const float v2 = o[4 * dt + 2] * inv[1], v3 = o[4 * dt + 3] * inv[1];
      const unsigned lo = kF16 ? mma::pack_f16(v0, v1) : mma::pack_bf16(v0, v1);
      const unsigned hi = kF16 ? mma::pack_f16(v2, v3) : mma::pack_bf16(v2, v3);
      asm volatile("st.shared.u32 [%0], %1;\n" ::"r"(sOut + wgmma::sw128_offset<kWgRows>(orow, dt) + t * 4), "r"(lo)
                   : "memory");
      asm volatile("st.shared.u32 [%0], %1;\n" ::"r"(sOut + wgmma::sw128_offset<kWgRows>(orow + 8, dt) + t * 4),
                   "r"(hi)
                   : "memory");
    }
    named_sync(1 + c, 128);
    auto* out = static_cast<std::uint16_t*>(p.out);
    for (int x = tid; x < kWgRows * 16; x += 128) {
      const int r = x / 16, ch = x % 16;
      if (c * kWgRows + r < it.rows) {
        uint4 v;
        asm volatile("ld.shared.v4.u32 {%0, %1, %2, %3}, [%4];\n"
                     : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w)
                     : "r"(sOut + wgmma::sw128_offset<kWgRows>(r, ch))
                     : "memory");
        const std::size_t row = static_cast<std::size_t>(it.q_row + c * kWgRows + r);
        *reinterpret_cast<uint4*>(out + (row * p.heads + it.head) * kD + ch * 8) = v;
      }
    }
    named_sync(1 + c, 128);  // the staging is free for the next item
  }
  if (c == 0) named_sync(3, 256);  // warpgroup 1's last turn handed over
#else
  (void)tq;
  (void)tk;
  (void)tv;
  (void)p;  // built only for sm_90a; never launched on anything else
#endif
}

template <bool kF16>
cudaError_t launch_variant(const CUtensorMap& tq, const CUtensorMap& tk, const CUtensorMap& tv, const Params& p, int sms,
                           cudaStream_t stream) {
  auto kernel = prefill_attention_tma_kernel<kF16>;
  if (const cudaError_t e = cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, kSmem);
      e != cudaSuccess)
    return e;
  return launch_pdl(kernel, dim3(p.items < sms ? p.items : sms), dim3(kThreads), kSmem, stream, tq, tk, tv, p);
}

}  // namespace

cudaError_t launch_prefill_attention_tma_sm90a(const CUtensorMap& q, const CUtensorMap& k, const CUtensorMap& v,
                                              const PrefillAttentionArgs& a, int sms, cudaStream_t stream) {
  Params p{};
  p.block_tables = a.block_tables;
  p.table_offset = a.table_offset;
  p.q_start = a.q_start;
  p.q_len = a.q_len;
  p.ctx_start = a.ctx_start;
  p.out = a.out;
  p.seqs = a.seqs;
  p.heads = a.heads;
  p.kv_heads = a.kv_heads;
  p.bs_shift = __builtin_ctz(static_cast<unsigned>(a.block_size));
  p.q_tiles = (a.max_q_len + kBM - 1) / kBM;
  p.items = p.q_tiles * a.heads * a.seqs;
  p.scale_log2 = a.scale * 1.4426950408889634f;
  return a.out_f16 ? launch_variant<true>(q, k, v, p, sms, stream) : launch_variant<false>(q, k, v, p, sms, stream);
}

}  // namespace cosmos::kernels
