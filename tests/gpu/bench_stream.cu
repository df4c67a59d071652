// Streaming-read probes (reports, never fails): how fast can one kernel read a matrix of each size
// of the Cosmos-Reason1-7B decode chain when nothing else limits it? Each probe reads its bytes
// once and folds them into a checksum (no arithmetic worth the name), 28 launches back to back in
// one CUDA graph with programmatic dependent launch, each launch a different slice of a buffer
// larger than the L2 cache. The gap between these figures and the gemv kernels' (bench_kernels
// --sweep, "alone" lines) is what the gemv's own structure costs; the gap between these and the
// copy bandwidth is what a kernel boundary and a matrix of that size cost.
//   ld<U>      8 warps per block, one wave (4 blocks per SM), each warp a contiguous slice, U 16-byte
//              loads per lane in flight, consumed before the next U are issued (the gemv's pattern);
//   ld<U>x2    the same with the next U loads issued before the current ones are consumed;
//   tma<S,KB>  one block per SM, a ring of S stages of KB kilobytes in shared memory filled by bulk
//              asynchronous copies (cp.async.bulk, mbarrier completion) from one thread, read by 8
//              consumer warps (sm_90 only).
//   bench_stream
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <vector>

#include <cuda/ptx>
#include <cuda_runtime.h>

#include "kernels/pdl.cuh"
#include "bench_check.h"

namespace {


using cosmos::kernels::pdl_launch_dependents;
using cosmos::kernels::pdl_wait;

__device__ __forceinline__ unsigned fold(const uint4& v) { return v.x ^ (v.y * 3u) ^ (v.z * 5u) ^ (v.w * 7u); }

// One wave of 8-warp blocks; warp w of W reads 16-byte vectors [n w / W, n (w + 1) / W).
template <int U, bool kDouble>
__global__ void __launch_bounds__(256, 4) probe_ld(const uint4* p, std::size_t n, unsigned* sink) {
  const int lane = threadIdx.x & 31;
  const std::size_t W = static_cast<std::size_t>(gridDim.x) * 8;
  const std::size_t w = static_cast<std::size_t>(blockIdx.x) * 8 + (threadIdx.x >> 5);
  const std::size_t begin = n * w / W, end = n * (w + 1) / W;
  uint4 a[U], b[U];
  auto load = [&](uint4 (&r)[U], std::size_t s) {
#pragma unroll
    for (int u = 0; u < U; ++u) {
      const std::size_t i = s + lane + 32 * u;
      r[u] = i < end ? __ldcs(p + i) : make_uint4(0, 0, 0, 0);
    }
  };
  unsigned acc = 0;
  load(a, begin);
  pdl_wait();
  pdl_launch_dependents();
  for (std::size_t s = begin; s < end; s += 32 * U) {
    if constexpr (kDouble) {
      load(b, s + 32 * U);
#pragma unroll
      for (int u = 0; u < U; ++u) acc += fold(a[u]);
#pragma unroll
      for (int u = 0; u < U; ++u) a[u] = b[u];
    } else {
#pragma unroll
      for (int u = 0; u < U; ++u) acc += fold(a[u]);
      load(a, s + 32 * U);
    }
  }
  if (acc == 0x9e3779b9u) sink[0] = acc;  // keeps the loads alive
}

// One block per SM: thread 0 of warp 8 fills a ring of S stages with bulk copies, warps 0-7 read.
template <int S, int KB>
__global__ void __launch_bounds__(288, 1) probe_tma(const unsigned char* p, std::size_t bytes, unsigned* sink) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  namespace ptx = cuda::ptx;
  constexpr int kChunk = KB * 1024;
  constexpr int kConsumers = 8;
  extern __shared__ __align__(128) unsigned char ring[];  // [S][kChunk]
  __shared__ __align__(8) std::uint64_t full[S], empty[S];
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  const std::size_t v = bytes / 16;
  const std::size_t begin = v * blockIdx.x / gridDim.x * 16, end = v * (blockIdx.x + 1) / gridDim.x * 16;
  const int chunks = static_cast<int>((end - begin + kChunk - 1) / kChunk);
  if (threadIdx.x == 0) {
    for (int s = 0; s < S; ++s) {
      ptx::mbarrier_init(&full[s], 1);
      ptx::mbarrier_init(&empty[s], kConsumers);
    }
    ptx::fence_mbarrier_init(ptx::sem_release, ptx::scope_cluster);
  }
  __syncthreads();
  if (warp == kConsumers) {
    if (lane == 0) {
      for (int c = 0; c < chunks; ++c) {
        const int s = c % S, k = c / S;
        if (k > 0)
          while (!ptx::mbarrier_try_wait_parity(&empty[s], static_cast<std::uint32_t>((k - 1) & 1))) {
          }
        const std::size_t off = begin + static_cast<std::size_t>(c) * kChunk;
        const std::uint32_t size = static_cast<std::uint32_t>((end - off < kChunk ? end - off : kChunk));
        ptx::mbarrier_arrive_expect_tx(ptx::sem_release, ptx::scope_cta, ptx::space_shared, &full[s], size);
        ptx::cp_async_bulk(ptx::space_cluster, ptx::space_global, ring + s * kChunk, p + off, size, &full[s]);
        if (c == (S < chunks ? S : chunks) - 1) {  // the ring is full: now wait for the previous kernel
          pdl_wait();
          pdl_launch_dependents();
        }
      }
    }
    return;
  }
  pdl_wait();
  pdl_launch_dependents();
  unsigned acc = 0;
  for (int c = 0; c < chunks; ++c) {
    const int s = c % S, k = c / S;
    while (!ptx::mbarrier_try_wait_parity(&full[s], static_cast<std::uint32_t>(k & 1))) {
    }
    const std::size_t off = begin + static_cast<std::size_t>(c) * kChunk;
    const int n16 = static_cast<int>((end - off < kChunk ? end - off : kChunk) / 16);
    const uint4* src = reinterpret_cast<const uint4*>(ring + s * kChunk);
    for (int i = threadIdx.x; i < n16; i += kConsumers * 32) acc += fold(src[i]);
    __syncwarp();
    if (lane == 0) ptx::mbarrier_arrive(&empty[s]);
  }
  if (acc == 0x9e3779b9u) sink[0] = acc;
#endif
}

float median_us(cudaGraphExec_t exec, cudaStream_t stream) {
  cudaEvent_t a, b;
  CHECK(cudaEventCreate(&a));
  CHECK(cudaEventCreate(&b));
  std::vector<float> t;
  for (int i = 0; i < 13; ++i) {
    CHECK(cudaEventRecord(a, stream));
    CHECK(cudaGraphLaunch(exec, stream));
    CHECK(cudaEventRecord(b, stream));
    CHECK(cudaEventSynchronize(b));
    float ms = 0;
    CHECK(cudaEventElapsedTime(&ms, a, b));
    if (i >= 3) t.push_back(ms);
  }
  CHECK(cudaEventDestroy(a));
  CHECK(cudaEventDestroy(b));
  std::sort(t.begin(), t.end());
  return t[t.size() / 2] * 1e3f;
}

struct Size {
  const char* name;
  std::size_t bytes;
  int launches;
};

}  // namespace

int main() {
  int count = 0;
  if (cudaGetDeviceCount(&count) != cudaSuccess || count == 0) {
    std::printf("bench_stream: no GPU\n");
    return 0;
  }
  cudaDeviceProp prop{};
  CHECK(cudaGetDeviceProperties(&prop, 0));
  std::printf("GPU: %s, %d SMs\n", prop.name, prop.multiProcessorCount);
  const int sms = prop.multiProcessorCount;
  cosmos::kernels::set_pdl_enabled(prop.major >= 9);

  const std::size_t H = 3584, FF = 18944, V = 152064;
  const Size sizes[] = {{"q/k/v 4608x3584", 4608 * H * 2, 28},  {"o 3584x3584", H * H * 2, 28},
                        {"gate/up 37888x3584", 2 * FF * H * 2, 28}, {"down 3584x18944", H * FF * 2, 28},
                        {"lm_head 152064x3584", V * H * 2, 4}};
  std::size_t cap = 0;
  for (const Size& s : sizes) cap = std::max(cap, s.bytes * s.launches);
  unsigned char* buf = nullptr;
  unsigned* sink = nullptr;
  CHECK(cudaMalloc(&buf, cap));
  CHECK(cudaMalloc(&sink, 64));
  CHECK(cudaMemset(buf, 1, cap));
  cudaStream_t stream;
  CHECK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));

  // Copy bandwidth over 1 GiB between two allocations (read + write counted), as bench_kernels.
  double copy_gbs = 0;
  {
    void *src, *dst;
    CHECK(cudaMalloc(&src, 1ull << 30));
    CHECK(cudaMalloc(&dst, 1ull << 30));
    CHECK(cudaMemset(src, 1, 1ull << 30));
    cudaEvent_t e0, e1;
    CHECK(cudaEventCreate(&e0));
    CHECK(cudaEventCreate(&e1));
    std::vector<float> t;
    for (int i = 0; i < 13; ++i) {
      CHECK(cudaEventRecord(e0, stream));
      CHECK(cudaMemcpyAsync(dst, src, 1ull << 30, cudaMemcpyDeviceToDevice, stream));
      CHECK(cudaEventRecord(e1, stream));
      CHECK(cudaEventSynchronize(e1));
      float ms = 0;
      CHECK(cudaEventElapsedTime(&ms, e0, e1));
      if (i >= 3) t.push_back(ms);
    }
    std::sort(t.begin(), t.end());
    copy_gbs = 2.0 * (1ull << 30) / (t[t.size() / 2] * 1e-3) / 1e9;
    CHECK(cudaEventDestroy(e0));
    CHECK(cudaEventDestroy(e1));
    CHECK(cudaFree(src));
    CHECK(cudaFree(dst));
  }
  std::printf("device copy: %.0f GB/s\n\n", copy_gbs);

  using Launch = std::function<void(const unsigned char*, std::size_t, cudaStream_t, unsigned*, int)>;
  struct Probe {
    const char* name;
    Launch launch;
  };
  auto ld = [](auto kernel) -> Launch {
    return [kernel](const unsigned char* p, std::size_t bytes, cudaStream_t s, unsigned* sink, int sms) {
      CHECK(cosmos::kernels::launch_pdl(kernel, dim3(sms * 4), dim3(256), 0, s, reinterpret_cast<const uint4*>(p),
                                        bytes / 16, sink));
    };
  };
  auto tma = [](auto kernel, int smem) -> Launch {
    return [kernel, smem](const unsigned char* p, std::size_t bytes, cudaStream_t s, unsigned* sink, int sms) {
      CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, smem));
      CHECK(cosmos::kernels::launch_pdl(kernel, dim3(sms), dim3(288), smem, s, p, bytes, sink));
    };
  };
  const Probe probes[] = {{"ld4", ld(probe_ld<4, false>)},
                          {"ld8", ld(probe_ld<8, false>)},
                          {"ld4x2", ld(probe_ld<4, true>)},
                          {"ld8x2", ld(probe_ld<8, true>)},
                          {"tma4x32", tma(probe_tma<4, 32>, 4 * 32 * 1024)},
                          {"tma8x16", tma(probe_tma<8, 16>, 8 * 16 * 1024)},
                          {"tma6x32", tma(probe_tma<6, 32>, 6 * 32 * 1024)},
                          {"tma12x16", tma(probe_tma<12, 16>, 12 * 16 * 1024)}};
  const bool tma_ok = prop.major >= 9;

  std::printf("%-22s %-9s %9s %10s %8s\n", "matrix (launches)", "probe", "us/launch", "GB/s", "% copy");
  for (const Size& sz : sizes) {
    for (const Probe& pr : probes) {
      if (!tma_ok && pr.name[0] == 't') continue;
      cudaGraph_t g;
      cudaGraphExec_t exec;
      CHECK(cudaStreamBeginCapture(stream, cudaStreamCaptureModeThreadLocal));
      for (int l = 0; l < sz.launches; ++l) pr.launch(buf + l * sz.bytes, sz.bytes, stream, sink, sms);
      CHECK(cudaStreamEndCapture(stream, &g));
      CHECK(cudaGraphInstantiate(&exec, g, 0));
      const float us = median_us(exec, stream);
      CHECK(cudaGetLastError());
      CHECK(cudaGraphExecDestroy(exec));
      CHECK(cudaGraphDestroy(g));
      const double gbs = static_cast<double>(sz.bytes) * sz.launches / (us * 1e-6) / 1e9;
      std::printf("%-19s %2d %-9s %9.2f %10.0f %7.1f%%\n", sz.name, sz.launches, pr.name, us / sz.launches, gbs,
                  100 * gbs / copy_gbs);
      std::fflush(stdout);
    }
  }
  CHECK(cudaFree(buf));
  CHECK(cudaFree(sink));
  CHECK(cudaStreamDestroy(stream));
  return 0;
}
