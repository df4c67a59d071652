#include <algorithm>
#include "kernels/decode_attention.cuh"

#include <atomic>
#include <cfloat>
#include <cstdint>
#include <type_traits>

#include "kernels/decode_attention_detail.cuh"
#include "kernels/kv_quant_row.cuh"
#include "kernels/pdl.cuh"

namespace cosmos::kernels {
namespace {

using namespace decode_detail;

constexpr int kWarps = kMaxGroup;
constexpr int kThreads = kWarps * 32;
constexpr int kKeys = 32;                    // keys per warp per round: lane = key

// The cache element type's 16-byte vector (bf16: 8 values, fp32: 4) and a lane's slice of a V row
// (D / 32 values: 8 bytes of bf16 or 16 of fp32 for D = 128).
template <typename KV>
struct Vec;
template <>
struct Vec<__nv_bfloat16> {
  static constexpr int kPer16 = 8;
  __device__ static void unpack16(const uint4& r, float* f) {
    const unsigned w[4] = {r.x, r.y, r.z, r.w};
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      f[2 * i] = __uint_as_float(w[i] << 16);
      f[2 * i + 1] = __uint_as_float(w[i] & 0xffff0000u);
    }
  }
};
template <>
struct Vec<std::int8_t> {  // the int8 cache: 16 values, exact in fp32 (the row's scale is applied to the sums)
  static constexpr int kPer16 = 16;
  __device__ static void unpack16(const uint4& r, float* f) {
    const unsigned w[4] = {r.x, r.y, r.z, r.w};
#pragma unroll
    for (int i = 0; i < 4; ++i)
#pragma unroll
      for (int b = 0; b < 4; ++b) f[4 * i + b] = static_cast<float>(static_cast<int>(w[i] << (24 - 8 * b)) >> 24);
  }
};
template <>
struct Vec<float> {
  static constexpr int kPer16 = 4;
  __device__ static void unpack16(const uint4& r, float* f) {
    f[0] = __uint_as_float(r.x);
    f[1] = __uint_as_float(r.y);
    f[2] = __uint_as_float(r.z);
    f[3] = __uint_as_float(r.w);
  }
};

// A lane's slice of a V row: N (= D / 32: 2 or 4) consecutive cache elements, loaded raw (so the
// 32 rows of a round stay in half the registers for bf16) and unpacked when used.
template <typename KV, int N>
struct Slice;
template <>
struct Slice<__nv_bfloat16, 4> {
  using Raw = uint2;
  __device__ static void unpack(const Raw& r, float* f) {
    f[0] = __uint_as_float(r.x << 16);
    f[1] = __uint_as_float(r.x & 0xffff0000u);
    f[2] = __uint_as_float(r.y << 16);
    f[3] = __uint_as_float(r.y & 0xffff0000u);
  }
};
template <>
struct Slice<__nv_bfloat16, 2> {
  using Raw = unsigned;
  __device__ static void unpack(const Raw& r, float* f) {
    f[0] = __uint_as_float(r << 16);
    f[1] = __uint_as_float(r & 0xffff0000u);
  }
};
template <>
struct Slice<std::int8_t, 4> {
  using Raw = unsigned;
  __device__ static void unpack(const Raw& r, float* f) {
#pragma unroll
    for (int b = 0; b < 4; ++b) f[b] = static_cast<float>(static_cast<int>(r << (24 - 8 * b)) >> 24);
  }
};
template <>
struct Slice<std::int8_t, 2> {
  using Raw = unsigned short;
  __device__ static void unpack(const Raw& r, float* f) {
    const unsigned u = r;
    f[0] = static_cast<float>(static_cast<int>(u << 24) >> 24);
    f[1] = static_cast<float>(static_cast<int>(u << 16) >> 24);
  }
};
template <>
struct Slice<float, 4> {
  using Raw = float4;
  __device__ static void unpack(const Raw& r, float* f) { f[0] = r.x, f[1] = r.y, f[2] = r.z, f[3] = r.w; }
};
template <>
struct Slice<float, 2> {
  using Raw = float2;
  __device__ static void unpack(const Raw& r, float* f) { f[0] = r.x, f[1] = r.y; }
};


// Block (token t, KV head, split); warp g computes query head g of the group over the split's keys
// (the group's warps read the same K/V rows, mostly from L1). Each round the warp takes 32 keys,
// lane = key: the lane reads its key's K row (16-byte loads) and scores it against q (shared
// memory, read as broadcasts); online softmax with warp reductions; then P V with the lane owning
// D / 32 dimensions, each probability broadcast by a shuffle (the round's V rows all in flight). The warp
// writes its head's result (context within one split) or a partial that the last block of the
// (token, KV head) merges. With `rope`, the block first applies the rotary embedding to its q heads,
// and the block holding the newest key writes that key's K and V rows into the cache (valid when
// every token of the launch belongs to a different sequence).
//
// What the decode step pays for this kernel is mostly its latency chain after the q/k/v product
// (metadata, the q/k/v row, RoPE, the K/V rows), so with `rope` the first round's K/V loads go out
// before pdl_wait (docs/PERFORMANCE.md, session 3). Loop bodies are unrolled per key, the loops are
// not: an 8-heads-per-warp version unrolled over everything was 142 KB of machine code and ran
// 32 us alone at 10 keys of context (ncu), this one ~27 KB and 8.5 us.
template <int D, typename KV, typename Out>
__global__ void __launch_bounds__(kThreads)
    decode_attention_kernel(const AttentionArgs a, const RopeIn rope, const Scratch sc) {
  constexpr int kDL = D / 32;                   // dims per lane in P V and the merges
  constexpr int kPer16 = Vec<KV>::kPer16;
  constexpr int kChunks = D / kPer16;           // 16-byte vectors per K row
  // int8 cache: each key's K and V scales (the lane's key) multiply its score and its weight in P V;
  // fused with RoPE, the newest key's rows go through shared memory (kvrow), where a warp each
  // quantizes them (kernels/kv_quant_row.cuh).
  constexpr bool kI8 = std::is_same_v<KV, std::int8_t>;
  __shared__ float kvrow[kI8 ? 2 : 1][kI8 ? D : 1];  // int8, fused: the newest key's roped K and V rows
  using VS = Slice<KV, kDL>;
  __shared__ __align__(16) float qs[kMaxGroup][D];  // scaled (roped) q of the group
  __shared__ int last_flag;

  // Fused (decode steps): the metadata (uploaded before the graph) and the cache rows of earlier
  // positions (written by earlier steps) are not written by the kernels this one overlaps under
  // programmatic dependent launch, so they are read before pdl_wait: the first round's K/V loads
  // then overlap the q/k/v product's tail instead of adding their latency to the step. Everything
  // else (the q/k/v row, the newest key) waits. Unfused, everything waits.
  const bool fused = rope.qkv != nullptr;
  if (!fused) pdl_wait();
  const int t = blockIdx.x, kvh = blockIdx.y, split = blockIdx.z;
  const int lane = threadIdx.x & 31, g = threadIdx.x >> 5;
  const int G = a.heads / a.kv_heads;
  const int len = a.ctx_len[t];
  const int splits = gridDim.z;
  const int per = split_len(len, splits);
  const int active = (len + per - 1) / per;
  if (split >= active) return;
  const int j0 = split * per, j1 = min(len, j0 + per);
  const std::int32_t* table = a.block_tables + a.table_offset[t];
  const int kvd = a.kv_heads * D;
  KV* kc = static_cast<KV*>(const_cast<void*>(a.k_cache));
  KV* vc = static_cast<KV*>(const_cast<void*>(a.v_cache));

  // One round's loads for keys [base, base + 32): the lane's K row, every key's V slice.
  // skip_newest: leave out the newest key (len - 1), which this kernel writes first.
  int base = j0, nk = 0;
  bool valid = false;
  float ksc = 1.0f, vsc = 1.0f;  // int8: the lane's key's K and V scales
  unsigned off = 0;  // element offset of the lane's key row for this KV head (< 2^32 per layer)
  uint4 kr[kChunks];
  typename VS::Raw vb[kKeys];
  auto locate = [&] {
    nk = min(kKeys, j1 - base);
    const int j = base + lane;
    valid = lane < nk;
    off = valid ? (static_cast<unsigned>(table[j / a.block_size]) * a.block_size + j % a.block_size) * kvd + kvh * D : 0u;
    if constexpr (kI8) {  // row (slot, kvh) = off / D
      ksc = valid ? a.k_scale[off / D] : 0.0f;
      vsc = valid ? a.v_scale[off / D] : 0.0f;
    }
  };
  auto load_k = [&](bool skip_newest) {
    const bool load = valid && !(skip_newest && base + lane == len - 1);
    const uint4* krow = reinterpret_cast<const uint4*>(kc + off);
#pragma unroll
    for (int c = 0; c < kChunks; ++c) kr[c] = load ? krow[c] : make_uint4(0u, 0u, 0u, 0u);
  };
  auto load_v = [&](bool skip_newest) {
#pragma unroll
    for (int u = 0; u < kKeys; ++u) {
      const unsigned o = __shfl_sync(0xffffffffu, off, u);
      if (u < nk && !(skip_newest && base + u == len - 1))
        vb[u] = *reinterpret_cast<const typename VS::Raw*>(vc + o + lane * kDL);
    }
  };
  if (g < G) {
    locate();
    load_k(fused);
    load_v(fused);
  }
  if (fused) pdl_wait();
  pdl_launch_dependents();

  if (!rope.qkv) {
    for (int i = threadIdx.x; i < G * D; i += kThreads)
      qs[i / D][i % D] = a.q[(static_cast<std::size_t>(t) * a.heads + kvh * G) * D + i] * a.scale;
  } else {
    // Rotary embedding, as kernels/rope_kv.cu computes it, for this group's q heads (scaled into
    // qs) and, in the split holding the newest key, for k (then k and v go into the cache).
    constexpr int kHalf = D / 2;
    const int qd = a.heads * D;
    const float* row = rope.qkv + static_cast<std::size_t>(t) * (qd + 2 * kvd);
    const std::int32_t* pos = rope.positions + 3 * t;
    const bool writes_kv = split == active - 1;
    const int pairs = (G + (writes_kv ? 1 : 0)) * kHalf;
    KV* kh = kc + static_cast<std::size_t>(rope.slots[t]) * kvd + kvh * D;
    for (int i = threadIdx.x; i < pairs; i += kThreads) {
      const int h = i / kHalf, p = i % kHalf;
      float y1, y2;
      rope_pair<D>(rope, row, pos, h < G ? (kvh * G + h) * D : qd + kvh * D, p, y1, y2);
      if (h < G) {
        qs[h][p] = y1 * a.scale;
        qs[h][p + kHalf] = y2 * a.scale;
      } else if constexpr (kI8) {
        kvrow[0][p] = y1;
        kvrow[0][p + kHalf] = y2;
      } else {
        store_elem(kh, p, y1);
        store_elem(kh, p + kHalf, y2);
      }
    }
    if (writes_kv) {
      const int vo = qd + kvd + kvh * D;
      KV* vh = vc + static_cast<std::size_t>(rope.slots[t]) * kvd + kvh * D;
      for (int i = threadIdx.x; i < D; i += kThreads) {
        const float v = row[vo + i] + (rope.bias ? rope.bias[vo + i] : 0.0f);
        if constexpr (kI8)
          kvrow[1][i] = v;
        else
          store_elem(vh, i, v);
      }
    }
    if constexpr (kI8) {
      __syncthreads();  // the rows in kvrow (writes_kv is the same for the whole block)
      if (writes_kv && threadIdx.x < 64) {
        const int which = threadIdx.x >> 5;  // warp 0: K, warp 1: V
        const std::size_t r = static_cast<std::size_t>(rope.slots[t]) * a.kv_heads + kvh;  // the row's scale
        quantize_kv_row_warp(kvrow[which], D, (which ? vc : kc) + r * D,
                             const_cast<float*>(which ? a.v_scale : a.k_scale) + r);
      }
    }
  }
  __syncthreads();  // qs ready, and the newest K/V rows (written above) visible to the block
  if (g >= G) return;
  if (fused && len - 1 < base + nk) {  // the newest key is in the first round: load it now
    const int jn = len - 1 - base;
    if (lane == jn) {
      const uint4* krow = reinterpret_cast<const uint4*>(kc + off);
#pragma unroll
      for (int c = 0; c < kChunks; ++c) kr[c] = krow[c];
      if constexpr (kI8) {  // its scales too: locate() read them before this kernel wrote them
        ksc = a.k_scale[off / D];
        vsc = a.v_scale[off / D];
      }
    }
    const unsigned o = __shfl_sync(0xffffffffu, off, jn);
#pragma unroll
    for (int u = 0; u < kKeys; ++u)
      if (u == jn) vb[u] = *reinterpret_cast<const typename VS::Raw*>(vc + o + lane * kDL);
  }

  float m = -FLT_MAX, l = 0.0f, acc[kDL];
#pragma unroll
  for (int k = 0; k < kDL; ++k) acc[k] = 0.0f;
  const float4* q4 = reinterpret_cast<const float4*>(qs[g]);

#pragma unroll 1
  for (;;) {
    // The lane's score (four partial sums for latency), then the online softmax.
    float s4[4] = {0.0f, 0.0f, 0.0f, 0.0f};
#pragma unroll
    for (int c = 0; c < kChunks; ++c) {
      float kf[kPer16];
      Vec<KV>::unpack16(kr[c], kf);
#pragma unroll
      for (int e = 0; e < kPer16 / 4; ++e) {
        const float4 q = q4[c * (kPer16 / 4) + e];
        s4[0] = fmaf(q.x, kf[4 * e], s4[0]);
        s4[1] = fmaf(q.y, kf[4 * e + 1], s4[1]);
        s4[2] = fmaf(q.z, kf[4 * e + 2], s4[2]);
        s4[3] = fmaf(q.w, kf[4 * e + 3], s4[3]);
      }
    }
    const float dot = (s4[0] + s4[1]) + (s4[2] + s4[3]);
    const float sc_ = valid ? (kI8 ? dot * ksc : dot) : -FLT_MAX;
    const float m_new = fmaxf(m, warp_max(sc_));
    const float p = valid ? expf(sc_ - m_new) : 0.0f;
    const float pv = kI8 ? p * vsc : p;  // the weight of the key's V row (before locate() moves on)
    const float corr = expf(m - m_new);
    l = l * corr + warp_sum(p);
    m = m_new;
#pragma unroll
    for (int k = 0; k < kDL; ++k) acc[k] *= corr;
    // The next round's K rows go out now (behind this round's P V); its V slices after it.
    const int nk_now = nk;
    const bool more = base + kKeys < j1;
    if (more) {
      base += kKeys;
      locate();
      load_k(false);
    }
    // P V over this round's keys (their V slices are in registers).
#pragma unroll
    for (int jj = 0; jj < kKeys; ++jj) {
      const float pj = __shfl_sync(0xffffffffu, pv, jj);
      if (jj < nk_now) {
        float vf[kDL];
        VS::unpack(vb[jj], vf);
#pragma unroll
        for (int k = 0; k < kDL; ++k) acc[k] = fmaf(pj, vf[k], acc[k]);
      }
    }
    if (!more) break;
    load_v(false);
  }

  const std::size_t head = static_cast<std::size_t>(t) * a.heads + kvh * G + g;
  if (active == 1) {  // the context fits one split: the result is final
    Out* o = static_cast<Out*>(a.out) + head * D;
    const float inv = 1.0f / l;
#pragma unroll
    for (int k = 0; k < kDL; ++k) store_elem(o, lane * kDL + k, acc[k] * inv);
    return;
  }
  // Partial result of this split; the last block of the (token, KV head) to finish merges them.
  const std::size_t at = head * splits + split;
  if (lane == 0) {
    sc.ml[2 * at] = m;
    sc.ml[2 * at + 1] = l;
  }
#pragma unroll
  for (int k = 0; k < kDL; ++k) sc.o[at * D + lane * kDL + k] = acc[k];
  // Warps g >= G returned above: count the group's warps on a named barrier instead of the block.
  asm volatile("bar.sync 1, %0;" ::"r"(G * 32) : "memory");
  if (threadIdx.x == 0) last_flag = arrive_last(sc.counters + t * a.kv_heads + kvh, active);
  asm volatile("bar.sync 1, %0;" ::"r"(G * 32) : "memory");
  if (!last_flag) return;
  // Last block: warp g merges head g over the splits, lane s reading split s's (max, sum).
  const std::size_t at0 = head * splits;
  float w0, w1;
  const float Ltot = split_weights<false>(sc.ml, at0, active, lane, w0, w1);
  float o[kDL];
#pragma unroll
  for (int k = 0; k < kDL; ++k) o[k] = 0.0f;
#pragma unroll 16
  for (int s = 0; s < active; ++s) {
    const float w = __shfl_sync(0xffffffffu, s < 32 ? w0 : w1, s & 31);
    const float* src = sc.o + (at0 + s) * D + lane * kDL;
#pragma unroll
    for (int k = 0; k < kDL; ++k) o[k] = fmaf(w, __ldcg(src + k), o[k]);
  }
  Out* out = static_cast<Out*>(a.out) + head * D;
  const float inv = 1.0f / Ltot;
#pragma unroll
  for (int k = 0; k < kDL; ++k) store_elem(out, lane * kDL + k, o[k] * inv);
}

template <int D, typename KV>
void launch_kv(const AttentionArgs& a, const RopeIn& r, const Scratch& s, cudaStream_t stream) {
  const dim3 grid(a.n, a.kv_heads, decode_attention_splits(a.n, a.kv_heads));
  switch (a.out_type) {
    case ElemType::f32: launch_pdl(decode_attention_kernel<D, KV, float>, grid, kThreads, 0, stream, a, r, s); break;
    case ElemType::bf16:
      launch_pdl(decode_attention_kernel<D, KV, __nv_bfloat16>, grid, kThreads, 0, stream, a, r, s);
      break;
    case ElemType::f16: launch_pdl(decode_attention_kernel<D, KV, __half>, grid, kThreads, 0, stream, a, r, s); break;
  }
}

template <int D>
void launch_d(const AttentionArgs& a, const RopeIn& r, const Scratch& s, cudaStream_t stream) {
  if (a.k_scale)
    launch_kv<D, std::int8_t>(a, r, s, stream);
  else if (a.kv_type == ElemType::bf16)
    launch_kv<D, __nv_bfloat16>(a, r, s, stream);
  else
    launch_kv<D, float>(a, r, s, stream);
}

std::size_t slots_of(int n, int heads, int kv_heads) {
  return static_cast<std::size_t>(n) * heads * decode_attention_splits(n, kv_heads);
}

std::atomic<bool> g_use_mma{true};

}  // namespace

void set_decode_attention_tensor_cores(bool on) { g_use_mma.store(on); }

bool decode_attention_supports(int heads, int kv_heads, int head_dim) {
  return (head_dim == 64 || head_dim == 128) && kv_heads > 0 && heads % kv_heads == 0 && heads / kv_heads <= kMaxGroup;
}

int decode_attention_splits(int n, int kv_heads) {
  if (n <= 4) return kDecodeAttentionSplits;
  const int pairs = n * std::max(kv_heads, 1);
  return std::clamp((kDecodeAttentionBlocks + pairs - 1) / pairs, 1, kDecodeAttentionSplits);
}

// The completion counters' region: first, and the same for every n, so that a launch of one batch
// size never finds another's partials where its counters are (they must be zero on entry).
std::size_t counter_bytes(int kv_heads) {
  return static_cast<std::size_t>(kDecodeAttentionMaxTokens) * std::max(kv_heads, 1) * sizeof(int);
}

std::size_t decode_attention_scratch_bytes(int n, int heads, int kv_heads, int head_dim) {
  return counter_bytes(kv_heads) + slots_of(n, heads, kv_heads) * (2 + head_dim) * sizeof(float);
}

bool decode_attention_sums_supported(const AttentionArgs& a) {
  return (a.k_scale || a.kv_type == ElemType::bf16) && g_use_mma.load() &&
         decode_attention_supports(a.heads, a.kv_heads, a.head_dim);
}

std::size_t launch_decode_attention(const AttentionArgs& a, void* scratch, cudaStream_t stream, const RopeKvArgs* rope,
                                    const DecodeAttentionSums* sums) {
  if (a.n <= 0 || a.n > kDecodeAttentionMaxTokens) return 0;
  if (a.k_scale && !a.v_scale) return 0;  // int8: both scales
  if (sums && (!decode_attention_sums_supported(a) || !sums->o || !sums->l ||
               reinterpret_cast<std::uintptr_t>(sums->o) % 16 != 0 || (!sums->clear_o) != (!sums->clear_l) ||
               sums->splits < 0 || sums->splits > kDecodeAttentionMaxSumSplits))
    return 0;
  Scratch s;
  s.counters = static_cast<int*>(scratch);
  s.ml = reinterpret_cast<float*>(static_cast<std::uint8_t*>(scratch) + counter_bytes(a.kv_heads));
  s.o = s.ml + 2 * slots_of(a.n, a.heads, a.kv_heads);
  if (sums) {
    s.sum_o = sums->o;
    s.sum_l = sums->l;
    s.clear_o = sums->clear_o;
    s.clear_l = sums->clear_l;
    s.sum_splits = sums->splits;
    s.halves = sums->halves;
  }
  RopeIn r;
  if (rope) {
    r.qkv = rope->qkv;
    r.bias = rope->bias;
    r.positions = rope->positions;
    r.inv_freq = rope->inv_freq;
    r.slots = rope->slots;
    r.section0 = rope->section0;
    r.section1 = rope->section1;
  }
  if ((a.k_scale || a.kv_type == ElemType::bf16) && g_use_mma.load())
    launch_decode_attention_mma(a, r, s, stream);
  else if (a.head_dim == 128)
    launch_d<128>(a, r, s, stream);
  else
    launch_d<64>(a, r, s, stream);
  const std::size_t kv_row = a.k_scale ? a.head_dim + sizeof(float) : a.head_dim * elem_size(a.kv_type);
  const std::size_t kv = static_cast<std::size_t>(a.n) * a.kv_heads * a.max_ctx * 2 * kv_row;
  const std::size_t qkv = rope ? static_cast<std::size_t>(a.n) * (a.heads + 2 * a.kv_heads) * a.head_dim * 4
                               : static_cast<std::size_t>(a.n) * a.heads * a.head_dim * 4;
  const std::size_t out = sums ? static_cast<std::size_t>(a.n) * a.heads * (a.head_dim + 1) * sizeof(float) * 4
                                : static_cast<std::size_t>(a.n) * a.heads * a.head_dim * elem_size(a.out_type);
  return kv + qkv + out;
}

}  // namespace cosmos::kernels
