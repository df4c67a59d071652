// bench_layer_flow's synthetic step: the 7B shape, the layer's buffers, and the streaming, staging
// and output helpers every variant shares. Included by bench_layer_flow.cu only.
#pragma once

#include <cstddef>
#include <cstdint>

#include <cuda_runtime.h>

namespace {

constexpr int kHidden = 3584, kQkv = 4608, kInter = 18944;  // Cosmos-Reason1-7B
constexpr int kKvHeads = 4, kHeadDim = 128, kGroup = 7;      // 28 query heads
constexpr int kGroupQkv = kQkv / kKvHeads;                   // q/k/v rows of one KV head: 1,152
constexpr int kGroupAtt = kGroup * kHeadDim;                 // attention outputs of one KV head: 896
constexpr int kT = 512;                                      // threads per block (one block per SM)
constexpr int kU = 8;                                        // 16-byte loads per thread in flight: 64 KB per SM
constexpr int kLookBytes = 96 * 1024;                        // dataflow, look: bytes per block copied ahead
constexpr int kLookVec = kLookBytes / 16;
constexpr int kCounters = 2 * kKvHeads + 2;  // per layer: q/k/v done [4], attention done [4], o done, down done

__device__ __forceinline__ uint4 ld_stream(const uint4* p) {
  uint4 v;
  asm volatile("ld.global.nc.L1::no_allocate.v4.u32 {%0, %1, %2, %3}, [%4];"
               : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w)
               : "l"(p));
  return v;
}
__device__ __forceinline__ unsigned fold(const uint4& v) { return v.x ^ v.y ^ v.z ^ v.w; }
__device__ __forceinline__ int ld_acquire(const int* p) {
  int v;
  asm volatile("ld.acquire.gpu.global.s32 %0, [%1];" : "=r"(v) : "l"(p) : "memory");
  return v;
}

// One block's part of a step's bytes: vectors [n * part / parts, n * (part + 1) / parts).
struct Share {
  const uint4* p;
  std::size_t n;
};
__device__ Share share_of(const uint4* base, std::size_t n, int part, int parts) {
  const std::size_t a = n * part / parts, b = n * (part + 1) / parts;
  return {base + a, b - a};
}

struct Early {
  uint4 v[kU];
};
// The block's first batch (kU vectors per thread), before the wait.
__device__ void load_early(const Share& s, Early& e, std::size_t skip = 0) {
#pragma unroll
  for (int u = 0; u < kU; ++u) {
    const std::size_t i = skip + threadIdx.x + static_cast<std::size_t>(u) * kT;
    e.v[u] = i < s.n ? ld_stream(s.p + i) : make_uint4(0u, 0u, 0u, 0u);
  }
}
// The rest of the share after the first batch (which starts at `skip`), kU loads in flight.
__device__ unsigned stream_rest(const Share& s, const Early& e, std::size_t skip = 0) {
  unsigned acc = 0;
#pragma unroll
  for (int u = 0; u < kU; ++u) acc ^= fold(e.v[u]);
  for (std::size_t i = skip + threadIdx.x + static_cast<std::size_t>(kU) * kT; i < s.n; i += static_cast<std::size_t>(kU) * kT) {
    uint4 v[kU];
#pragma unroll
    for (int u = 0; u < kU; ++u) {
      const std::size_t j = i + static_cast<std::size_t>(u) * kT;
      v[u] = j < s.n ? ld_stream(s.p + j) : make_uint4(0u, 0u, 0u, 0u);
    }
#pragma unroll
    for (int u = 0; u < kU; ++u) acc ^= fold(v[u]);
  }
  return acc;
}
// The staging of an input vector written by other blocks: from L2 (never a stale L1 line).
__device__ float stage(const float* x, int n, int nt = kT) {
  float s = 0.0f;
  for (int i = threadIdx.x; i < n; i += nt) s += __ldcg(x + i);
  return s;
}
__device__ __forceinline__ float value(unsigned acc, float xs) { return static_cast<float>(acc & 0xffffu) * 1e-6f + xs * 1e-9f; }
// Writes the block's slice `part` of `parts` of an output vector of n floats.
__device__ void write_slice(float* out, int n, int part, int parts, unsigned acc, float xs, int nt = kT) {
  const int a = n * part / parts, b = n * (part + 1) / parts;
  for (int i = a + threadIdx.x; i < b; i += nt) out[i] = value(acc, xs);
}
__device__ void add_slice(float* out, int n, int part, int parts, unsigned acc, float xs, int nt = kT) {
  const int a = n * part / parts, b = n * (part + 1) / parts;
  for (int i = a + threadIdx.x; i < b; i += nt) atomicAdd(out + i, value(acc, xs));
}
// Down's partial sums of all kHidden outputs, as float4 atomics.
__device__ void add_all(float* out, unsigned acc, float xs, int nt = kT) {
  const float v = value(acc, xs);
#if __CUDA_ARCH__ >= 900
  for (int i = threadIdx.x; i < kHidden / 4; i += nt) atomicAdd(reinterpret_cast<float4*>(out) + i, make_float4(v, v, v, v));
#else
  for (int i = threadIdx.x; i < kHidden; i += nt) atomicAdd(out + i, v);
#endif
}

// One layer's buffers. Bytes: w_* the weights of each product, kv the layer's K and V rows.
// Vectors (fp32): x [kHidden] the layer's input, qkv [kQkv], att [kHidden], o [kHidden] (an
// accumulator in the dataflow), h [kInter] (gate/up's output, kernels only), and the next layer's x.
struct Layer {
  const uint4 *w_qkv, *w_o, *w_gu, *w_down, *kv;
  std::size_t n_qkv, n_o, n_gu, n_down, n_kv;  // 16-byte vectors
  const float* x;
  float *qkv, *att, *o, *h, *x_next;
  int* ctr;  // [kCounters] on their own 128-byte lines (32 ints apart)
};
// The layer's counters: q/k/v done per KV head, attention done per KV head, o done, down done.
struct Counters {
  int *qkv, *att, *o, *down;
};
__device__ __forceinline__ Counters counters_of(const Layer& L) {
  return {L.ctr, L.ctr + 32 * kKvHeads, L.ctr + 32 * 2 * kKvHeads, L.ctr + 32 * (2 * kKvHeads + 1)};
}

}  // namespace
