#include "kernels/decode_attention.cuh"

#include <cfloat>

namespace cosmos::kernels {
namespace {

constexpr int kWarps = 4;
constexpr int kMaxGroup = 8;

// Block: (token, kv head, chunk). Warp w takes keys j0 + w, j0 + w + 4, ...; lane l holds dims
// [l * DPL, (l + 1) * DPL) of q (for each of the G query heads), of K and V rows, and of the
// accumulators. Online softmax per (warp, head); the 4 warps are merged through shared memory.
template <int DPL>
__global__ void __launch_bounds__(kWarps * 32) decode_attention_chunk(AttentionArgs a, float* scratch, int chunks) {
  constexpr int D = DPL * 32;
  const int t = blockIdx.x, kvh = blockIdx.y, chunk = blockIdx.z;
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const int G = a.heads / a.kv_heads;
  const int len = a.ctx_len[t];
  const int j0 = chunk * kDecodeAttentionChunk, j1 = min(len, j0 + kDecodeAttentionChunk);
  const std::int32_t* table = a.block_tables + a.table_offset[t];
  const int kvd = a.kv_heads * D;

  float q[kMaxGroup][DPL];
  float m[kMaxGroup], l[kMaxGroup], acc[kMaxGroup][DPL];
#pragma unroll
  for (int g = 0; g < kMaxGroup; ++g) {
    m[g] = -FLT_MAX;
    l[g] = 0.0f;
#pragma unroll
    for (int d = 0; d < DPL; ++d) {
      acc[g][d] = 0.0f;
      q[g][d] = g < G ? a.q[(static_cast<std::size_t>(t) * a.heads + kvh * G + g) * D + lane * DPL + d] * a.scale : 0.0f;
    }
  }
  for (int j = j0 + warp; j < j1; j += kWarps) {
    const std::size_t slot = static_cast<std::size_t>(table[j / a.block_size]) * a.block_size + j % a.block_size;
    const float* kr = a.k_cache + slot * kvd + kvh * D + lane * DPL;
    const float* vr = a.v_cache + slot * kvd + kvh * D + lane * DPL;
    float k[DPL], v[DPL];
#pragma unroll
    for (int d = 0; d < DPL; ++d) {
      k[d] = kr[d];
      v[d] = vr[d];
    }
#pragma unroll
    for (int g = 0; g < kMaxGroup; ++g) {
      if (g >= G) break;
      float s = 0.0f;
#pragma unroll
      for (int d = 0; d < DPL; ++d) s += q[g][d] * k[d];
#pragma unroll
      for (int off = 16; off > 0; off >>= 1) s += __shfl_xor_sync(0xffffffffu, s, off);
      const float m_new = fmaxf(m[g], s);
      const float corr = expf(m[g] - m_new), p = expf(s - m_new);
      l[g] = l[g] * corr + p;
#pragma unroll
      for (int d = 0; d < DPL; ++d) acc[g][d] = acc[g][d] * corr + p * v[d];
      m[g] = m_new;
    }
  }
  // Merge the warps: [warps][G] (m, l) and [warps][G][D] acc in shared memory.
  __shared__ float sm[kWarps][kMaxGroup], sl[kWarps][kMaxGroup];
  __shared__ float sacc[kWarps][kMaxGroup][D];
#pragma unroll
  for (int g = 0; g < kMaxGroup; ++g) {
    if (g >= G) break;
    if (lane == 0) {
      sm[warp][g] = m[g];
      sl[warp][g] = l[g];
    }
#pragma unroll
    for (int d = 0; d < DPL; ++d) sacc[warp][g][lane * DPL + d] = acc[g][d];
  }
  __syncthreads();
  // Threads write this chunk's partial result: scratch[t][head][chunk] = (m, l, acc[D]).
  for (int idx = threadIdx.x; idx < G * D; idx += kWarps * 32) {
    const int g = idx / D, d = idx % D;
    float mm = -FLT_MAX;
    for (int w = 0; w < kWarps; ++w) mm = fmaxf(mm, sm[w][g]);
    float ll = 0.0f, aa = 0.0f;
    for (int w = 0; w < kWarps; ++w) {
      const float c = sm[w][g] == -FLT_MAX ? 0.0f : expf(sm[w][g] - mm);
      ll += sl[w][g] * c;
      aa += sacc[w][g][d] * c;
    }
    float* out = scratch + ((static_cast<std::size_t>(t) * a.heads + kvh * G + g) * chunks + chunk) * (D + 2);
    if (d == 0) {
      out[0] = mm;
      out[1] = ll;
    }
    out[2 + d] = aa;
  }
}

// Block: (token, head); thread d merges the chunks for dim d.
__global__ void decode_attention_combine(AttentionArgs a, const float* scratch, int chunks) {
  const int t = blockIdx.x, head = blockIdx.y;
  const int D = a.head_dim;
  const int used = (a.ctx_len[t] + kDecodeAttentionChunk - 1) / kDecodeAttentionChunk;
  const float* base = scratch + (static_cast<std::size_t>(t) * a.heads + head) * chunks * (D + 2);
  float mm = -FLT_MAX;
  for (int c = 0; c < used; ++c) mm = fmaxf(mm, base[c * (D + 2)]);
  for (int d = threadIdx.x; d < D; d += blockDim.x) {
    float ll = 0.0f, aa = 0.0f;
    for (int c = 0; c < used; ++c) {
      const float* p = base + c * (D + 2);
      const float w = p[0] == -FLT_MAX ? 0.0f : expf(p[0] - mm);
      ll += p[1] * w;
      aa += p[2 + d] * w;
    }
    a.out[(static_cast<std::size_t>(t) * a.heads + head) * D + d] = aa / ll;
  }
}

}  // namespace

bool decode_attention_supports(int heads, int kv_heads, int head_dim) {
  return (head_dim == 64 || head_dim == 128) && kv_heads > 0 && heads % kv_heads == 0 && heads / kv_heads <= kMaxGroup;
}

std::size_t decode_attention_scratch_floats(int n, int heads, int head_dim, int max_ctx) {
  const std::size_t chunks = (static_cast<std::size_t>(max_ctx) + kDecodeAttentionChunk - 1) / kDecodeAttentionChunk;
  return static_cast<std::size_t>(n) * heads * chunks * (head_dim + 2);
}

std::size_t launch_decode_attention(const AttentionArgs& a, float* scratch, cudaStream_t stream) {
  if (a.n <= 0) return 0;
  const int chunks = (a.max_ctx + kDecodeAttentionChunk - 1) / kDecodeAttentionChunk;
  const dim3 grid(a.n, a.kv_heads, chunks);
  if (a.head_dim == 128) {
    decode_attention_chunk<4><<<grid, kWarps * 32, 0, stream>>>(a, scratch, chunks);
  } else {
    decode_attention_chunk<2><<<grid, kWarps * 32, 0, stream>>>(a, scratch, chunks);
  }
  decode_attention_combine<<<dim3(a.n, a.heads), 128, 0, stream>>>(a, scratch, chunks);
  return static_cast<std::size_t>(a.n) * a.kv_heads * a.max_ctx * a.head_dim * 8;
}

}  // namespace cosmos::kernels
