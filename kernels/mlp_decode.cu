#include <algorithm>
#include <cstdint>

#include "kernels/gemv_common.cuh"
#include "kernels/half_ops.cuh"
#include "kernels/mlp_decode.cuh"
#include "kernels/pdl.cuh"

namespace cosmos::kernels {
namespace {

constexpr int kWarps = gemv_common::kBlockWarps;  // 8 warps, one block per SM
constexpr int kThreads = kWarps * 32;
constexpr int kChunk = kWarps;  // neurons per chunk: one per warp for the gate/up dot products
constexpr int kU = 7;           // 16-byte gate (and up) loads per lane per step: a 3,584-column row in 2 steps
constexpr int kMaxG = 2;        // 8-output groups per thread for the down part: H <= 2 x 256 x 8
constexpr int kMaxHidden = kMaxG * kThreads * 8;

using half_ops::staged_half;

template <typename T>
struct Params {
  const T* wgu;  // [2F, H]
  const T* wdt;  // [F, H]
  const T* g;    // [H] norm weight
  const float* x;
  float* y;
  int hidden, inter;
  float eps;
};

using half_ops::dot8;

// acc[k] += h * w[k] for the 8 weights of one 16-byte vector.
template <typename Ops>
__device__ __forceinline__ void axpy8(float h, const uint4& w, float (&acc)[8]) {
  const unsigned u[4] = {w.x, w.y, w.z, w.w};
#pragma unroll
  for (int k = 0; k < 4; ++k) {
    const float2 f = Ops::pair(u[k]);
    acc[2 * k] = fmaf(h, f.x, acc[2 * k]);
    acc[2 * k + 1] = fmaf(h, f.y, acc[2 * k + 1]);
  }
}

template <typename Ops>
__global__ void __launch_bounds__(kThreads, 1) mlp_decode_kernel(const Params<typename Ops::T> p) {
  extern __shared__ float4 xs[];  // [2][ps]: n by 8-column groups, the low and the high 4 floats apart
  __shared__ float hs[2][kChunk];  // the chunk's activations; two buffers, one barrier per chunk
  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
  const int H = p.hidden, vecs = H >> 3, ps = staged_half(vecs);
  const int chunks = p.inter / kChunk;
  const int grid = static_cast<int>(gridDim.x);
  int c = static_cast<int>(blockIdx.x);

  uint4 wa[2][kU];           // one step of this warp's gate (0) and up (1) rows, 16-byte vectors
  uint4 wb[kChunk][kMaxG];   // the chunk's 8 transposed down rows at this thread's output groups
  auto load_a = [&](int cc, int s) {
    const std::size_t j = static_cast<std::size_t>(cc) * kChunk + warp;
    const uint4* gate = reinterpret_cast<const uint4*>(p.wgu + j * H);
    const uint4* up = reinterpret_cast<const uint4*>(p.wgu + (j + p.inter) * H);
#pragma unroll
    for (int u = 0; u < kU; ++u) {
      const int i = s + lane + 32 * u;
      const bool in = i < vecs;
      wa[0][u] = in ? __ldcs(gate + i) : make_uint4(0u, 0u, 0u, 0u);  // streamed once: evict-first
      wa[1][u] = in ? __ldcs(up + i) : make_uint4(0u, 0u, 0u, 0u);
    }
  };
  auto load_b = [&](int cc) {
#pragma unroll
    for (int n = 0; n < kChunk; ++n) {
      const uint4* row = reinterpret_cast<const uint4*>(p.wdt + (static_cast<std::size_t>(cc) * kChunk + n) * H);
#pragma unroll
      for (int g = 0; g < kMaxG; ++g) {
        const int i = tid + kThreads * g;
        wb[n][g] = i < vecs ? __ldcs(row + i) : make_uint4(0u, 0u, 0u, 0u);
      }
    }
  };

  // Weights are immutable: the first chunk's loads go out before waiting on the previous kernel.
  if (c < chunks) {
    load_a(c, 0);
    load_b(c);
  }
  gemv_common::prefetch_l1<kThreads>(p.g, H * 2);  // the norm weight, read after the norm's reduction
  pdl_wait();  // from here on x and y, which the previous kernels wrote
  pdl_launch_dependents();

  // n = rmsnorm(x) * norm_weight, staged in shared memory (kernels/gemv.cu's layout and order).
  {
    const float4* x4 = reinterpret_cast<const float4*>(p.x);
    const int n4 = H >> 2;
    float ss = 0.0f;
    constexpr int kB = 4;  // float4s per thread loaded before any is used: one round trip to L2
    for (int i0 = tid; i0 < n4; i0 += kB * kThreads) {
      float4 v[kB];
#pragma unroll
      for (int b = 0; b < kB; ++b) {
        const int i = i0 + b * kThreads;
        if (i < n4) v[b] = __ldcg(x4 + i);
      }
#pragma unroll
      for (int b = 0; b < kB; ++b) {
        const int i = i0 + b * kThreads;
        if (i < n4) {
          ss += v[b].x * v[b].x + v[b].y * v[b].y + v[b].z * v[b].z + v[b].w * v[b].w;
          xs[(i & 1) * ps + (i >> 1)] = v[b];
        }
      }
    }
    const float inv = gemv_common::block_inv_rms<kWarps>(ss, H, p.eps);
    // Each thread rescales what it staged: no barrier between.
    gemv_common::rescale_staged<Ops, kThreads, kMaxHidden / 4>(xs, ps, reinterpret_cast<const uint2*>(p.g), n4, inv);
    __syncthreads();
  }

  float acc[kMaxG][8];
#pragma unroll
  for (int g = 0; g < kMaxG; ++g)
#pragma unroll
    for (int k = 0; k < 8; ++k) acc[g][k] = 0.0f;
  const bool any = c < chunks;
  for (int buf = 0; c < chunks; c += grid, buf ^= 1) {
    // Gate and up of neuron c * 8 + warp.
    float a0 = 0.0f, a1 = 0.0f;
    for (int s = 0;;) {
#pragma unroll
      for (int u = 0; u < kU; ++u) {
        const int i = s + lane + 32 * u;
        if (i < vecs) {
          const float4 lo = xs[i], hi = xs[ps + i];
          a0 += dot8<Ops>(wa[0][u], lo, hi);
          a1 += dot8<Ops>(wa[1][u], lo, hi);
        }
      }
      s += 32 * kU;
      if (s >= vecs) break;
      load_a(c, s);
    }
    const bool more = c + grid < chunks;
    if (more) load_a(c + grid, 0);  // the next chunk's first step, before the reduction and the barrier
    a0 = gemv_common::warp_sum(a0);
    a1 = gemv_common::warp_sum(a1);
    if (lane == 0) hs[buf][warp] = a0 / (1.0f + expf(-a0)) * a1;
    __syncthreads();
    // Down: this thread's outputs += h_j * down_t[j, outputs] over the chunk's neurons.
#pragma unroll
    for (int n = 0; n < kChunk; ++n) {
      const float h = hs[buf][n];
#pragma unroll
      for (int g = 0; g < kMaxG; ++g) axpy8<Ops>(h, wb[n][g], acc[g]);
    }
    if (more) load_b(c + grid);
  }
  if (!any) return;
  float4* y4 = reinterpret_cast<float4*>(p.y);
#pragma unroll
  for (int g = 0; g < kMaxG; ++g) {
    const int i = tid + kThreads * g;
    if (i < vecs) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
      atomicAdd(y4 + 2 * i, make_float4(acc[g][0], acc[g][1], acc[g][2], acc[g][3]));
      atomicAdd(y4 + 2 * i + 1, make_float4(acc[g][4], acc[g][5], acc[g][6], acc[g][7]));
#else
      // (16-byte atomic adds are sm_90+; older GPUs add element by element.)
#pragma unroll
      for (int k = 0; k < 8; ++k) atomicAdd(p.y + 8 * i + k, acc[g][k]);
#endif
    }
  }
}

bool aligned16(const void* p) { return reinterpret_cast<std::uintptr_t>(p) % 16 == 0; }

}  // namespace

bool mlp_decode_supported(int hidden, int inter) {
  return hidden > 0 && inter > 0 && hidden % 8 == 0 && hidden <= kMaxHidden && inter % kChunk == 0;
}

int mlp_decode_blocks() { return gemv_common::device_shape().sms; }

template <typename T>
std::size_t launch_mlp_decode(const MlpDecodeArgsT<T>& a, cudaStream_t stream) {
  using Ops = typename half_ops::OpsOf<T>::type;
  if (!mlp_decode_supported(a.hidden, a.inter)) return 0;
  if (!aligned16(a.w_gate_up) || !aligned16(a.w_down_t) || !aligned16(a.norm_weight) || !aligned16(a.x) ||
      !aligned16(a.y))
    return 0;
  const int chunks = a.inter / kChunk;
  const int blocks = std::min(mlp_decode_blocks(), chunks);
  const std::size_t smem = static_cast<std::size_t>(2 * staged_half(a.hidden / 8)) * 16;
  Params<T> p{a.w_gate_up, a.w_down_t, a.norm_weight, a.x, a.y, a.hidden, a.inter, a.norm_eps};
  (void)launch_pdl(mlp_decode_kernel<Ops>, dim3(static_cast<unsigned>(blocks)), dim3(kThreads), smem, stream, p);
  const std::size_t h = static_cast<std::size_t>(a.hidden), f = static_cast<std::size_t>(a.inter);
  return 3 * f * h * sizeof(T) + h * sizeof(T) + h * 4 + static_cast<std::size_t>(blocks) * h * 4 * 2;
}

template std::size_t launch_mlp_decode<__nv_bfloat16>(const MlpDecodeArgsT<__nv_bfloat16>&, cudaStream_t);
template std::size_t launch_mlp_decode<__half>(const MlpDecodeArgsT<__half>&, cudaStream_t);

}  // namespace cosmos::kernels
