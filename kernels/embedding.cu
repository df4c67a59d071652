// Embedding gather (kernels/embedding.cuh). One block per token. Every load of a row goes out
// before any store: the table may be pinned host memory read over PCIe (the quantized formats keep
// it there), where each dependent round trip costs ~1.5 us; a loop of load-convert-store pays one
// per iteration (14 for a 3,584-wide row: ~21 us per decode step, ncu), this shape about one.
#include "kernels/embedding.cuh"

#include <cstdint>

#include "kernels/pdl.cuh"

namespace cosmos::kernels {
namespace {

constexpr int kThreads = 256;
constexpr int kBatch = 4;  // loads in flight per thread before its stores

// Rows of 16-byte vectors (8 bf16 in, two float4 out): table and out 16-byte aligned, hidden % 8 == 0.
__global__ void __launch_bounds__(kThreads) embedding_vec(const __nv_bfloat16* __restrict__ table,
                                                          const std::int32_t* __restrict__ ids, float* __restrict__ out,
                                                          int hidden) {
  pdl_wait();
  pdl_launch_dependents();
  const std::int32_t id = ids[blockIdx.x];
  if (id < 0) return;
  const uint4* row = reinterpret_cast<const uint4*>(table + static_cast<std::size_t>(id) * hidden);  // [hidden / 8]
  float4* o = reinterpret_cast<float4*>(out + static_cast<std::size_t>(blockIdx.x) * hidden);      // [hidden / 4]
  const int vecs = hidden / 8;
  for (int base = 0; base < vecs; base += kBatch * kThreads) {
    uint4 v[kBatch];
#pragma unroll
    for (int k = 0; k < kBatch; ++k) {
      const int i = base + k * kThreads + static_cast<int>(threadIdx.x);
      if (i < vecs) v[k] = row[i];
    }
#pragma unroll
    for (int k = 0; k < kBatch; ++k) {
      const int i = base + k * kThreads + static_cast<int>(threadIdx.x);
      if (i >= vecs) continue;
      const auto* h = reinterpret_cast<const __nv_bfloat162*>(&v[k]);
      const float2 a = __bfloat1622float2(h[0]), b = __bfloat1622float2(h[1]);
      const float2 c = __bfloat1622float2(h[2]), d = __bfloat1622float2(h[3]);
      o[2 * i] = make_float4(a.x, a.y, b.x, b.y);
      o[2 * i + 1] = make_float4(c.x, c.y, d.x, d.y);
    }
  }
}

// Any width or alignment: scalar loads, kBatch per thread in flight before the stores.
__global__ void __launch_bounds__(kThreads) embedding_scalar(const __nv_bfloat16* __restrict__ table,
                                                             const std::int32_t* __restrict__ ids,
                                                             float* __restrict__ out, int hidden) {
  pdl_wait();
  pdl_launch_dependents();
  const std::int32_t id = ids[blockIdx.x];
  if (id < 0) return;
  const __nv_bfloat16* row = table + static_cast<std::size_t>(id) * hidden;  // [hidden]
  float* o = out + static_cast<std::size_t>(blockIdx.x) * hidden;            // [hidden]
  for (int base = 0; base < hidden; base += kBatch * kThreads) {
    __nv_bfloat16 v[kBatch];
#pragma unroll
    for (int k = 0; k < kBatch; ++k) {
      const int i = base + k * kThreads + static_cast<int>(threadIdx.x);
      if (i < hidden) v[k] = row[i];
    }
#pragma unroll
    for (int k = 0; k < kBatch; ++k) {
      const int i = base + k * kThreads + static_cast<int>(threadIdx.x);
      if (i < hidden) o[i] = __bfloat162float(v[k]);
    }
  }
}

bool aligned16(const void* p) { return reinterpret_cast<std::uintptr_t>(p) % 16 == 0; }

}  // namespace

std::size_t launch_embedding(const __nv_bfloat16* table, const std::int32_t* ids, float* out, int n, int hidden,
                             cudaStream_t stream) {
  if (n <= 0) return 0;
  if (hidden % 8 == 0 && aligned16(table) && aligned16(out))
    launch_pdl(embedding_vec, n, kThreads, 0, stream, table, ids, out, hidden);
  else
    launch_pdl(embedding_scalar, n, kThreads, 0, stream, table, ids, out, hidden);
  return static_cast<std::size_t>(n) * (4 + hidden * 6);
}

}  // namespace cosmos::kernels
