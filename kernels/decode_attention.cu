#include "kernels/decode_attention.cuh"

#include <cfloat>

#include "kernels/pdl.cuh"

namespace cosmos::kernels {
namespace {

constexpr int kWarps = 4;
constexpr int kThreads = kWarps * 32;
constexpr int kMaxGroup = 2 * kWarps;  // warp w owns query heads w and w + kWarps of the group
constexpr int kTile = kDecodeAttentionTile;
constexpr int kSplits = kDecodeAttentionSplits;

__device__ __forceinline__ int split_len(int len) {
  // Keys per split: a multiple of the tile, at least one tile.
  const int per = (len + kSplits - 1) / kSplits;
  return ((per + kTile - 1) / kTile) * kTile;
}

template <typename KV>
__device__ __forceinline__ void stage_row(const KV* src, float* dst, int d0, int n);

// 8 bytes of bf16 (4 values) or 16 bytes of fp32 (4 values) per call.
template <>
__device__ __forceinline__ void stage_row<__nv_bfloat16>(const __nv_bfloat16* src, float* dst, int d0, int) {
  const uint2 raw = *reinterpret_cast<const uint2*>(src + d0);
  const __nv_bfloat162* h = reinterpret_cast<const __nv_bfloat162*>(&raw);
  const float2 a = __bfloat1622float2(h[0]), b = __bfloat1622float2(h[1]);
  dst[d0] = a.x;
  dst[d0 + 1] = a.y;
  dst[d0 + 2] = b.x;
  dst[d0 + 3] = b.y;
}
template <>
__device__ __forceinline__ void stage_row<float>(const float* src, float* dst, int d0, int) {
  const float4 v = *reinterpret_cast<const float4*>(src + d0);
  dst[d0] = v.x;
  dst[d0 + 1] = v.y;
  dst[d0 + 2] = v.z;
  dst[d0 + 3] = v.w;
}

// Block (token t, KV head, split). Shared: q [G][D] (scaled), K and V tiles [kTile][D + 1] fp32
// (the +1 keeps the per-key row reads of the score loop free of bank conflicts), P [G][kTile].
template <int D, typename KV, typename Out>
__global__ void __launch_bounds__(kThreads) decode_attention_kernel(AttentionArgs a, float* partial, int* counters) {
  __shared__ float qs[kMaxGroup][D];
  __shared__ float ks[kTile][D + 1];
  __shared__ float vs[kTile][D + 1];
  __shared__ float ps[kMaxGroup][kTile];
  __shared__ int last_flag;
  pdl_wait();
  pdl_launch_dependents();
  const int t = blockIdx.x, kvh = blockIdx.y, split = blockIdx.z;
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const int G = a.heads / a.kv_heads;
  const int len = a.ctx_len[t];
  const int per = split_len(len);
  const int active = (len + per - 1) / per;
  if (split >= active) return;
  const int j0 = split * per, j1 = min(len, j0 + per);
  const std::int32_t* table = a.block_tables + a.table_offset[t];
  const int kvd = a.kv_heads * D;
  const KV* kc = static_cast<const KV*>(a.k_cache);
  const KV* vc = static_cast<const KV*>(a.v_cache);

  for (int i = threadIdx.x; i < G * D; i += kThreads)
    qs[i / D][i % D] = a.q[(static_cast<std::size_t>(t) * a.heads + kvh * G) * D + i] * a.scale;
  float m[2] = {-FLT_MAX, -FLT_MAX}, l[2] = {0.0f, 0.0f};
  float acc[2][D / 32];
#pragma unroll
  for (int h = 0; h < 2; ++h)
#pragma unroll
    for (int k = 0; k < D / 32; ++k) acc[h][k] = 0.0f;

  for (int base = j0; base < j1; base += kTile) {
    const int nk = min(kTile, j1 - base);
    __syncthreads();  // the previous tile is fully used (and q is staged on the first pass)
    // Stage K and V: 4 values per thread per step, all loads of the tile issued together.
    constexpr int kQuads = kTile * D / 4;
#pragma unroll 4
    for (int i = threadIdx.x; i < kQuads; i += kThreads) {
      const int j = i / (D / 4), d0 = (i % (D / 4)) * 4;
      if (j < nk) {
        const int pos = base + j;
        const std::size_t slot = static_cast<std::size_t>(table[pos / a.block_size]) * a.block_size + pos % a.block_size;
        const std::size_t off = slot * kvd + static_cast<std::size_t>(kvh) * D;
        stage_row<KV>(kc + off, ks[j], d0, D);
        stage_row<KV>(vc + off, vs[j], d0, D);
      }
    }
    __syncthreads();
    // Scores: warp w, lane = key, heads w and w + kWarps.
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      const int g = warp + h * kWarps;
      if (g >= G) break;
      float s = -FLT_MAX;
      if (lane < nk) {
        s = 0.0f;
#pragma unroll 16
        for (int d = 0; d < D; ++d) s += qs[g][d] * ks[lane][d];
      }
      float mx = s;
#pragma unroll
      for (int off = 16; off > 0; off >>= 1) mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, off));
      const float m_new = fmaxf(m[h], mx);
      const float p = lane < nk ? expf(s - m_new) : 0.0f;
      float sum = p;
#pragma unroll
      for (int off = 16; off > 0; off >>= 1) sum += __shfl_xor_sync(0xffffffffu, sum, off);
      const float corr = expf(m[h] - m_new);
      l[h] = l[h] * corr + sum;
      m[h] = m_new;
      ps[g][lane] = p;
      __syncwarp();
#pragma unroll
      for (int k = 0; k < D / 32; ++k) {
        float o = acc[h][k] * corr;
        for (int j = 0; j < nk; ++j) o += ps[g][j] * vs[j][lane + 32 * k];
        acc[h][k] = o;
      }
      __syncwarp();
    }
  }

  // One split: the result is final.
  if (active == 1) {
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      const int g = warp + h * kWarps;
      if (g >= G) break;
      Out* o = static_cast<Out*>(a.out) + (static_cast<std::size_t>(t) * a.heads + kvh * G + g) * D;
#pragma unroll
      for (int k = 0; k < D / 32; ++k) store_elem(o, lane + 32 * k, acc[h][k] / l[h]);
    }
    return;
  }
  // Partial result of this split: partial[t][head][split] = (m, l, acc[D]).
#pragma unroll
  for (int h = 0; h < 2; ++h) {
    const int g = warp + h * kWarps;
    if (g >= G) break;
    float* p = partial + ((static_cast<std::size_t>(t) * a.heads + kvh * G + g) * kSplits + split) * (D + 2);
    if (lane == 0) {
      p[0] = m[h];
      p[1] = l[h];
    }
#pragma unroll
    for (int k = 0; k < D / 32; ++k) p[2 + lane + 32 * k] = acc[h][k];
  }
  // The last split to finish merges all of them.
  __threadfence();
  __syncthreads();
  if (threadIdx.x == 0) {
    int* counter = counters + t * a.kv_heads + kvh;
    const int ticket = atomicAdd(counter, 1);
    last_flag = ticket == active - 1;
    if (last_flag) *counter = 0;  // ready for the next launch
  }
  __syncthreads();
  if (!last_flag) return;
  __threadfence();
  // Merge: lanes read the splits' (m, l) in parallel (splits lane and lane + 32), the weights go to
  // shared memory, then every lane sums its dims over the splits with independent loads in flight.
  __shared__ float sw[kMaxGroup][kSplits];
  static_assert(kSplits <= 64, "two splits per lane");
#pragma unroll
  for (int h = 0; h < 2; ++h) {
    const int g = warp + h * kWarps;
    if (g >= G) break;
    const float* base = partial + (static_cast<std::size_t>(t) * a.heads + kvh * G + g) * kSplits * (D + 2);
    const int s0 = lane, s1 = lane + 32;
    const float m0 = s0 < active ? __ldcg(base + s0 * (D + 2)) : -FLT_MAX;
    const float m1 = s1 < active ? __ldcg(base + s1 * (D + 2)) : -FLT_MAX;
    const float l0 = s0 < active ? __ldcg(base + s0 * (D + 2) + 1) : 0.0f;
    const float l1 = s1 < active ? __ldcg(base + s1 * (D + 2) + 1) : 0.0f;
    float mm = fmaxf(m0, m1);
#pragma unroll
    for (int off = 16; off > 0; off >>= 1) mm = fmaxf(mm, __shfl_xor_sync(0xffffffffu, mm, off));
    const float w0 = s0 < active ? expf(m0 - mm) : 0.0f, w1 = s1 < active ? expf(m1 - mm) : 0.0f;
    float ll = l0 * w0 + l1 * w1;
#pragma unroll
    for (int off = 16; off > 0; off >>= 1) ll += __shfl_xor_sync(0xffffffffu, ll, off);
    if (s0 < active) sw[g][s0] = w0;
    if (s1 < active) sw[g][s1] = w1;
    __syncwarp();
    float o[D / 32];
#pragma unroll
    for (int k = 0; k < D / 32; ++k) o[k] = 0.0f;
#pragma unroll 8
    for (int s = 0; s < active; ++s) {
      const float* p = base + s * (D + 2) + 2 + lane;
      const float w = sw[g][s];
#pragma unroll
      for (int k = 0; k < D / 32; ++k) o[k] += __ldcg(p + 32 * k) * w;
    }
    Out* out = static_cast<Out*>(a.out) + (static_cast<std::size_t>(t) * a.heads + kvh * G + g) * D;
    const float inv = 1.0f / ll;
#pragma unroll
    for (int k = 0; k < D / 32; ++k) store_elem(out, lane + 32 * k, o[k] * inv);
  }
}

template <int D, typename KV>
void launch_out(const AttentionArgs& a, float* partial, int* counters, cudaStream_t stream) {
  const dim3 grid(a.n, a.kv_heads, kSplits);
  switch (a.out_type) {
    case ElemType::f32:
      launch_pdl(decode_attention_kernel<D, KV, float>, grid, kThreads, 0, stream, a, partial, counters);
      break;
    case ElemType::bf16:
      launch_pdl(decode_attention_kernel<D, KV, __nv_bfloat16>, grid, kThreads, 0, stream, a, partial, counters);
      break;
    case ElemType::f16:
      launch_pdl(decode_attention_kernel<D, KV, __half>, grid, kThreads, 0, stream, a, partial, counters);
      break;
  }
}

template <int D>
void launch_d(const AttentionArgs& a, float* partial, int* counters, cudaStream_t stream) {
  if (a.kv_type == ElemType::bf16)
    launch_out<D, __nv_bfloat16>(a, partial, counters, stream);
  else
    launch_out<D, float>(a, partial, counters, stream);
}

std::size_t partial_floats(int n, int heads, int head_dim) {
  return static_cast<std::size_t>(n) * heads * kSplits * (head_dim + 2);
}

}  // namespace

bool decode_attention_supports(int heads, int kv_heads, int head_dim) {
  return (head_dim == 64 || head_dim == 128) && kv_heads > 0 && heads % kv_heads == 0 && heads / kv_heads <= kMaxGroup;
}

std::size_t decode_attention_scratch_bytes(int n, int heads, int kv_heads, int head_dim) {
  return partial_floats(n, heads, head_dim) * sizeof(float) + static_cast<std::size_t>(n) * kv_heads * sizeof(int);
}

std::size_t launch_decode_attention(const AttentionArgs& a, void* scratch, cudaStream_t stream) {
  if (a.n <= 0) return 0;
  float* partial = static_cast<float*>(scratch);
  int* counters = reinterpret_cast<int*>(partial + partial_floats(a.n, a.heads, a.head_dim));
  if (a.head_dim == 128)
    launch_d<128>(a, partial, counters, stream);
  else
    launch_d<64>(a, partial, counters, stream);
  return static_cast<std::size_t>(a.n) * a.kv_heads * a.max_ctx * a.head_dim * 2 * elem_size(a.kv_type);
}

}  // namespace cosmos::kernels
