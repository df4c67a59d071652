// Rotary embedding (M-RoPE, half-split) of q and k plus the paged KV-cache write of k and v.
//   qkv:       [n, (heads + 2 kv_heads) * head_dim] fp32, row t = q heads | k heads | v heads
//   bias:      [(heads + 2 kv_heads) * head_dim] fp32, added before the rotation, or null
//   positions: [n, 3] int32 (temporal, height, width);  inv_freq: [head_dim / 2] fp32
//   slots:     [n] int32, the cache row of each token
//   q:         [n, heads, head_dim] q_type (f32, bf16 or f16), roped
//   k_cache:   [slots, kv_heads, head_dim] kv_type (f32 or bf16), row slots[t] written (roped)
//   v_cache:   [slots, kv_heads, head_dim] kv_type, row slots[t] written (copy + bias)
// Bytes moved: n * ((heads + 2 kv_heads) * head_dim * 4 + heads * head_dim * sizeof(q_type)
//   + 2 * kv_heads * head_dim * sizeof(kv_type) + 16); the 7B prefill (n = 2048, 28 + 2 x 4 heads of
//   128, bf16 q and cache) moves 37.7 MB + 18.9 MB = 57 MB.
//
// One block per token, for all heads: the block first puts the head_dim / 2 (cos, sin) pairs of its
// token (they depend only on the token's positions and inv_freq) in shared memory, then its threads
// rotate every q and k head and copy v. Fast path (head_dim % 8 == 0, 16-byte aligned buffers):
// each thread item is 4 consecutive pairs (float4 loads of x1 and x2, 16-byte stores for fp32, 8 for
// 16-bit types) or 4 elements of v. Otherwise a scalar path with the same block layout. Both
// evaluate per element exactly the fp32 operations of the original per-head kernel: angle
// f = float(pos) * inv_freq[i], sincosf(f), x (+ bias), y1 = x1 c - x2 s, y2 = x2 c + x1 s (with its
// fma contraction, see rotate), and v + (bias or 0.0f); the results do not depend on the path.
#include "kernels/rope_kv.cuh"

#include <algorithm>
#include <cstdint>

#include "kernels/kv_quant_row.cuh"
#include "kernels/pdl.cuh"

namespace cosmos::kernels {
namespace {

constexpr int kMaxThreads = 256;
constexpr std::size_t kMaxTableBytes = 48 * 1024;  // dynamic shared memory without an opt-in

// (sin, cos) of frequency i (0 <= i < head_dim / 2) of the token whose positions are pos[0..3).
__device__ __forceinline__ void rope_angle(const RopeKvArgs& a, const std::int32_t* pos, int i, float& s, float& c) {
  const int which = i < a.section0 ? 0 : (i < a.section0 + a.section1 ? 1 : 2);
  const float f = static_cast<float>(pos[which]) * a.inv_freq[i];
  sincosf(f, &s, &c);
}

// Fills table[0, half) with cos and table[half, 2 half) with sin for token t's positions.
__device__ __forceinline__ void fill_table(const RopeKvArgs& a, const std::int32_t* pos, int half, float* table) {
  for (int i = threadIdx.x; i < half; i += blockDim.x) {
    float s, c;
    rope_angle(a, pos, i, s, c);
    table[i] = c;
    table[half + i] = s;
  }
}

// y1 = x1 c - x2 s and y2 = x2 c + x1 s with the roundings the original per-head kernel compiled to
// (nvcc 13, sm_90, default contraction: its SASS is fma(c, x1, -(s x2)) and fma(s, x1, c x2)),
// spelled out so that the compiler cannot contract this code's plain expressions differently.
__device__ __forceinline__ void rotate(float x1, float x2, float c, float s, float& y1, float& y2) {
  y1 = __fmaf_rn(c, x1, -__fmul_rn(s, x2));
  y2 = __fmaf_rn(s, x1, __fmul_rn(c, x2));
}

// The 16 bits store_elem would write for v (same conversion, same fp16 saturation).
__device__ __forceinline__ std::uint32_t bits16(__nv_bfloat16*, float v) {
  return __bfloat16_as_ushort(__float2bfloat16(v));
}
__device__ __forceinline__ std::uint32_t bits16(__half*, float v) {
  return __half_as_ushort(__float2half(v != v ? v : fminf(fmaxf(v, -65504.0f), 65504.0f)));
}

// Stores 4 consecutive values at p (16-byte aligned for fp32, 8-byte for 16-bit types).
__device__ __forceinline__ void store4(float* p, float4 v) { *reinterpret_cast<float4*>(p) = v; }
template <typename T>
__device__ __forceinline__ void store4(T* p, float4 v) {
  *reinterpret_cast<uint2*>(p) =
      make_uint2(bits16(p, v.x) | (bits16(p, v.y) << 16), bits16(p, v.z) | (bits16(p, v.w) << 16));
}

__device__ __forceinline__ float4 load4(const float* p) { return *reinterpret_cast<const float4*>(p); }

// Fast path: block = token blockIdx.x. Items [0, rot): head w / q4 (q heads, then k heads), pairs
// [4 (w % q4), 4 (w % q4) + 4); items [rot, rot + kvd / 4): 4 elements of the token's v row.
template <typename QT, typename KVT>
__global__ void __launch_bounds__(kMaxThreads) rope_kv_vec4_kernel(RopeKvArgs a) {
  extern __shared__ float4 table4[];  // [head_dim]: cos[0, half) | sin[0, half)
  pdl_wait();
  pdl_launch_dependents();
  float* table = reinterpret_cast<float*>(table4);
  const int t = blockIdx.x;
  const int D = a.head_dim, half = D / 2, q4 = half / 4;
  const int qd = a.heads * D, kvd = a.kv_heads * D;
  const float* row = a.qkv + static_cast<std::size_t>(t) * (qd + 2 * kvd);
  const float* bias = a.bias;
  fill_table(a, a.positions + 3 * t, half, table);
  __syncthreads();
  const std::size_t slot = static_cast<std::size_t>(a.slots[t]) * kvd;
  QT* qo = static_cast<QT*>(a.q) + static_cast<std::size_t>(t) * qd;
  KVT* ko = static_cast<KVT*>(a.k_cache) + slot;
  KVT* vo = static_cast<KVT*>(a.v_cache) + slot;
  const int rot = (a.heads + a.kv_heads) * q4, items = rot + kvd / 4;
  for (int w = threadIdx.x; w < items; w += blockDim.x) {
    if (w < rot) {
      const int head = w / q4, i = 4 * (w - head * q4), off = head * D + i;
      float4 x1 = load4(row + off), x2 = load4(row + off + half);
      if (bias) {
        const float4 b1 = __ldg(reinterpret_cast<const float4*>(bias + off));
        const float4 b2 = __ldg(reinterpret_cast<const float4*>(bias + off + half));
        x1.x += b1.x, x1.y += b1.y, x1.z += b1.z, x1.w += b1.w;
        x2.x += b2.x, x2.y += b2.y, x2.z += b2.z, x2.w += b2.w;
      }
      const float4 c = *reinterpret_cast<const float4*>(table + i);
      const float4 s = *reinterpret_cast<const float4*>(table + half + i);
      float4 y1, y2;
      rotate(x1.x, x2.x, c.x, s.x, y1.x, y2.x);
      rotate(x1.y, x2.y, c.y, s.y, y1.y, y2.y);
      rotate(x1.z, x2.z, c.z, s.z, y1.z, y2.z);
      rotate(x1.w, x2.w, c.w, s.w, y1.w, y2.w);
      if (head < a.heads) {
        store4(qo + off, y1);
        store4(qo + off + half, y2);
      } else {
        store4(ko + (off - qd), y1);
        store4(ko + (off - qd + half), y2);
      }
    } else {
      const int e = 4 * (w - rot), off = qd + kvd + e;
      const float4 x = load4(row + off);
      const float4 b = bias ? __ldg(reinterpret_cast<const float4*>(bias + off)) : make_float4(0.0f, 0.0f, 0.0f, 0.0f);
      store4(vo + e, make_float4(x.x + b.x, x.y + b.y, x.z + b.z, x.w + b.w));
    }
  }
}

// Scalar path (any head_dim, any alignment), same block layout: items [0, rot) are the pairs
// (head w / half, i = w % half), items [rot, rot + kvd) the v elements. The (cos, sin) table is in
// shared memory when it fits (tabled), else computed per pair.
template <typename QT, typename KVT>
__global__ void __launch_bounds__(kMaxThreads) rope_kv_kernel(RopeKvArgs a, bool tabled) {
  extern __shared__ float4 table4[];  // [head_dim] when tabled: cos[0, half) | sin[0, half)
  pdl_wait();
  pdl_launch_dependents();
  float* table = reinterpret_cast<float*>(table4);
  const int t = blockIdx.x;
  const int D = a.head_dim, half = D / 2;
  const int qd = a.heads * D, kvd = a.kv_heads * D;
  const float* row = a.qkv + static_cast<std::size_t>(t) * (qd + 2 * kvd);
  const float* bias = a.bias;
  const std::int32_t* pos = a.positions + 3 * t;
  if (tabled) {
    fill_table(a, pos, half, table);
    __syncthreads();
  }
  const std::size_t slot = static_cast<std::size_t>(a.slots[t]) * kvd;
  QT* qo = static_cast<QT*>(a.q) + static_cast<std::size_t>(t) * qd;
  KVT* ko = static_cast<KVT*>(a.k_cache) + slot;
  KVT* vo = static_cast<KVT*>(a.v_cache) + slot;
  const int rot = (a.heads + a.kv_heads) * half, items = rot + kvd;
  for (int w = threadIdx.x; w < items; w += blockDim.x) {
    if (w < rot) {
      const int head = w / half, i = w - head * half, off = head * D + i;
      float s, c;
      if (tabled) {
        c = table[i];
        s = table[half + i];
      } else {
        rope_angle(a, pos, i, s, c);
      }
      float x1 = row[off], x2 = row[off + half];
      if (bias) {
        x1 += bias[off];
        x2 += bias[off + half];
      }
      float y1, y2;
      rotate(x1, x2, c, s, y1, y2);
      if (head < a.heads) {
        store_elem(qo, off, y1);
        store_elem(qo, off + half, y2);
      } else {
        store_elem(ko, off - qd, y1);
        store_elem(ko, off - qd + half, y2);
      }
    } else {
      const int e = w - rot, off = qd + kvd + e;
      store_elem(vo, e, row[off] + (bias ? bias[off] : 0.0f));
    }
  }
}

// int8 cache (a.k_scale set): block = token. Phase 1 rotates q (stored) and k and copies v into
// shared memory as fp32 rows; phase 2 quantizes each of the token's 2 kv_heads rows (K heads, then V
// heads) with one warp (kernels/kv_quant_row.cuh).
template <typename QT>
__global__ void __launch_bounds__(kMaxThreads) rope_kv_i8_kernel(RopeKvArgs a) {
  extern __shared__ float4 smem4[];  // [head_dim] cos | sin, then [2 kv_heads, head_dim] the k and v rows
  pdl_wait();
  pdl_launch_dependents();
  float* table = reinterpret_cast<float*>(smem4);
  const int t = blockIdx.x;
  const int D = a.head_dim, half = D / 2;
  const int qd = a.heads * D, kvd = a.kv_heads * D;
  float* kv = table + D;
  const float* row = a.qkv + static_cast<std::size_t>(t) * (qd + 2 * kvd);
  const float* bias = a.bias;
  fill_table(a, a.positions + 3 * t, half, table);
  __syncthreads();
  QT* qo = static_cast<QT*>(a.q) + static_cast<std::size_t>(t) * qd;
  const int rot = (a.heads + a.kv_heads) * half, items = rot + kvd;
  for (int w = threadIdx.x; w < items; w += blockDim.x) {
    if (w < rot) {
      const int head = w / half, i = w - head * half, off = head * D + i;
      float x1 = row[off], x2 = row[off + half];
      if (bias) {
        x1 += bias[off];
        x2 += bias[off + half];
      }
      float y1, y2;
      rotate(x1, x2, table[i], table[half + i], y1, y2);
      if (head < a.heads) {
        store_elem(qo, off, y1);
        store_elem(qo, off + half, y2);
      } else {
        kv[off - qd] = y1;
        kv[off - qd + half] = y2;
      }
    } else {
      const int e = w - rot, off = qd + kvd + e;
      kv[kvd + e] = row[off] + (bias ? bias[off] : 0.0f);
    }
  }
  __syncthreads();
  const int warps = blockDim.x >> 5;
  const std::size_t slot = static_cast<std::size_t>(a.slots[t]);
  for (int r = threadIdx.x >> 5; r < 2 * a.kv_heads; r += warps) {
    const bool is_v = r >= a.kv_heads;
    const int h = is_v ? r - a.kv_heads : r;
    std::int8_t* out = static_cast<std::int8_t*>(is_v ? a.v_cache : a.k_cache) + slot * kvd + static_cast<std::size_t>(h) * D;
    quantize_kv_row_warp(kv + static_cast<std::size_t>(r) * D, D, out, (is_v ? a.v_scale : a.k_scale) + slot * a.kv_heads + h);
  }
}

bool aligned16(const void* p) { return reinterpret_cast<std::uintptr_t>(p) % 16 == 0; }

template <typename QT, typename KVT>
void launch_typed(const RopeKvArgs& a, cudaStream_t stream) {
  const int D = a.head_dim, half = D / 2;
  const std::size_t table_bytes = 2 * static_cast<std::size_t>(std::max(half, 0)) * sizeof(float);
  const bool tabled = table_bytes <= kMaxTableBytes;
  const bool vec = D > 0 && D % 8 == 0 && tabled && aligned16(a.qkv) && (!a.bias || aligned16(a.bias)) &&
                   aligned16(a.q) && aligned16(a.k_cache) && aligned16(a.v_cache);
  // Work items per token: pairs (4 at a time on the fast path) plus v elements (idem).
  const long long elems = static_cast<long long>(a.heads + a.kv_heads) * half + static_cast<long long>(a.kv_heads) * D;
  const long long per = vec ? elems / 4 : elems;
  const unsigned threads = static_cast<unsigned>(std::clamp<long long>((per + 31) / 32 * 32, 32, kMaxThreads));
  const dim3 grid(static_cast<unsigned>(a.n));
  if (vec)
    launch_pdl(rope_kv_vec4_kernel<QT, KVT>, grid, threads, table_bytes, stream, a);
  else
    launch_pdl(rope_kv_kernel<QT, KVT>, grid, threads, tabled ? table_bytes : 0, stream, a, tabled);
}

template <typename QT>
void launch_q(const RopeKvArgs& a, cudaStream_t stream) {
  if (a.k_scale) {
    const std::size_t bytes = (static_cast<std::size_t>(a.head_dim) + 2ull * a.kv_heads * a.head_dim) * sizeof(float);
    launch_pdl(rope_kv_i8_kernel<QT>, dim3(static_cast<unsigned>(a.n)), static_cast<unsigned>(kMaxThreads), bytes,
               stream, a);
  } else if (a.kv_type == ElemType::bf16)
    launch_typed<QT, __nv_bfloat16>(a, stream);
  else
    launch_typed<QT, float>(a, stream);
}

}  // namespace

std::size_t launch_rope_kv(const RopeKvArgs& a, cudaStream_t stream) {
  if (a.n <= 0) return 0;
  // The int8 path keeps the token's k and v rows in shared memory (without an opt-in: 48 KB).
  if (a.k_scale && (!a.v_scale || (static_cast<std::size_t>(a.head_dim) + 2ull * a.kv_heads * a.head_dim) * 4 > kMaxTableBytes ||
                    a.head_dim % 2 != 0))
    return 0;
  switch (a.q_type) {
    case ElemType::f32: launch_q<float>(a, stream); break;
    case ElemType::bf16: launch_q<__nv_bfloat16>(a, stream); break;
    case ElemType::f16: launch_q<__half>(a, stream); break;
  }
  const std::size_t width = static_cast<std::size_t>(a.heads + 2 * a.kv_heads) * a.head_dim;
  const std::size_t kv_row = a.k_scale ? a.head_dim + sizeof(float) : a.head_dim * elem_size(a.kv_type);
  const std::size_t out = static_cast<std::size_t>(a.heads) * a.head_dim * elem_size(a.q_type) +
                          2 * static_cast<std::size_t>(a.kv_heads) * kv_row;
  return static_cast<std::size_t>(a.n) * (width * 4 + out + 16);
}

}  // namespace cosmos::kernels
