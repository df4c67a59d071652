// What a phase boundary of the decode step costs (reports, never fails). A decode step is 113
// dependent matrix products; each is a memory-bound phase that may only start its dependent work
// when the phase before it has finished. Two ways to run P such phases:
//   kernels:    one launch per phase, all in one CUDA graph with programmatic dependent launch (as
//               the engine runs them): wait (griddepcontrol.wait), release the next launch, stream;
//   persistent: one cooperative launch, the phases separated by a grid-wide barrier (each block
//               arrives on a counter, the last one bumps a generation the others spin on; or the
//               arrivals spread over 16 leaf counters first, "tree barrier").
// "early" variants issue each thread's first loads of a phase before waiting (the engine's kernels
// read their first weights before pdl_wait). The "exclusive" kernel variants take enough shared
// memory that only 4 blocks fit on an SM, so the next phase's blocks start only as this phase's
// blocks leave (as with the engine's gemv, which fills the register file): their early loads then
// go out in the boundary itself rather than long before it; "8 early" issues 128 bytes per thread
// (a gemv lane's first step). "2 lines": the barrier's generation flag on its own 128-byte line. Each phase streams its own bytes (16-byte loads over
// the whole grid, a checksum per block so nothing is dropped), distinct buffers per phase so the
// data comes from DRAM. Printed: us per phase, and the difference to the streaming time at the
// copy bandwidth, i.e. the fixed cost of a boundary. "lookahead": the persistent kernel with each
// block copying its share of the next phase's first bytes (16 KB per block) into shared memory
// before it waits at the barrier, so that DRAM keeps streaming through the barrier (in the engine,
// the next product's weights, which do not depend on the barrier). 0 in a column: not run (the
// variant does not fit one wave on this GPU).
//   bench_phases [--phases 113]
#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <vector>

#include <cuda_runtime.h>

#include "bench_check.h"
#include "kernels/device_info.cuh"
#include "kernels/pdl.cuh"

namespace {

constexpr int kThreads = 256;
constexpr int kEarly = 2;  // loads per thread issued before the wait in the "early" variants
constexpr int kDeep = 8;   // ... in the "exclusive, deep" variant (128 bytes per thread, as a gemv lane's first step)
// Dynamic shared memory that leaves room for 4 blocks per SM and no more, so the next kernel's
// blocks cannot start until this kernel's blocks leave (as the engine's gemv at full register use).
constexpr int kExclusiveSmem = 52 * 1024;

__device__ __forceinline__ uint4 ld_stream(const uint4* p) {
  uint4 v;
  asm volatile("ld.global.nc.L1::no_allocate.v4.u32 {%0, %1, %2, %3}, [%4];"
               : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w)
               : "l"(p));
  return v;
}

// One phase's stream over [data, data + n) by every thread of the grid; `first` holds the thread's
// first kEarly vectors when they were loaded early.
template <bool kEarlyLoads, int kE = kEarly>
__device__ unsigned stream_phase(const uint4* data, std::size_t n, const uint4 (&first)[kE]) {
  const std::size_t stride = static_cast<std::size_t>(gridDim.x) * blockDim.x;
  std::size_t i = static_cast<std::size_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  unsigned acc = 0;
  if constexpr (kEarlyLoads) {
#pragma unroll
    for (int k = 0; k < kE; ++k) acc ^= first[k].x ^ first[k].y ^ first[k].z ^ first[k].w;
    i += kE * stride;
  }
  for (; i + 3 * stride < n; i += 4 * stride) {
    const uint4 a = ld_stream(data + i), b = ld_stream(data + i + stride), c = ld_stream(data + i + 2 * stride),
                d = ld_stream(data + i + 3 * stride);
    acc ^= a.x ^ a.y ^ a.z ^ a.w ^ b.x ^ b.y ^ b.z ^ b.w ^ c.x ^ c.y ^ c.z ^ c.w ^ d.x ^ d.y ^ d.z ^ d.w;
  }
  for (; i < n; i += stride) {
    const uint4 a = ld_stream(data + i);
    acc ^= a.x ^ a.y ^ a.z ^ a.w;
  }
  return acc;
}

template <int kE = kEarly>
__device__ void load_first(const uint4* data, std::size_t n, uint4 (&first)[kE]) {
  const std::size_t stride = static_cast<std::size_t>(gridDim.x) * blockDim.x;
  const std::size_t i = static_cast<std::size_t>(blockIdx.x) * blockDim.x + threadIdx.x;
#pragma unroll
  for (int k = 0; k < kE; ++k) first[k] = i + k * stride < n ? ld_stream(data + i + k * stride) : make_uint4(0, 0, 0, 0);
}

__device__ void block_out(unsigned acc, unsigned* out) {
  __shared__ unsigned part[kThreads / 32];
  for (int o = 16; o > 0; o >>= 1) acc ^= __shfl_xor_sync(0xffffffffu, acc, o);
  if ((threadIdx.x & 31) == 0) part[threadIdx.x >> 5] = acc;
  __syncthreads();
  if (threadIdx.x == 0) {
    unsigned v = 0;
    for (int w = 0; w < kThreads / 32; ++w) v ^= part[w];
    out[blockIdx.x] ^= v;
  }
}

template <bool kEarlyLoads, int kE = kEarly>
__global__ void __launch_bounds__(kThreads) phase_kernel(const uint4* data, std::size_t n, unsigned* out) {
  uint4 first[kE];
  if constexpr (kEarlyLoads) load_first<kE>(data, n, first);
  cosmos::kernels::pdl_wait();
  cosmos::kernels::pdl_launch_dependents();
  block_out(stream_phase<kEarlyLoads, kE>(data, n, first), out);
}

__device__ __forceinline__ unsigned ld_acquire(const unsigned* p) {
  unsigned v;
  asm volatile("ld.acquire.gpu.global.u32 %0, [%1];" : "=r"(v) : "l"(p) : "memory");
  return v;
}
__device__ __forceinline__ void st_release(unsigned* p, unsigned v) {
  asm volatile("st.release.gpu.global.u32 [%0], %1;" ::"l"(p), "r"(v) : "memory");
}

// Grid-wide barrier: bar[0] arrivals, bar[1] generation.
__device__ void grid_barrier(unsigned* bar) {
  __syncthreads();
  if (threadIdx.x == 0) {
    const unsigned gen = ld_acquire(bar + 1);
    if (atomicAdd(bar, 1u) == gridDim.x - 1) {
      bar[0] = 0;
      st_release(bar + 1, gen + 1);
    } else {
      while (ld_acquire(bar + 1) == gen) {
      }
    }
  }
  __syncthreads();
}

// The same barrier with the arrivals spread over kLeaves counters (128 bytes apart, block b on leaf
// b % kLeaves): the last block of a leaf arrives at the root, so no counter sees more than
// ~gridDim.x / kLeaves atomics in a row. bar: [0] root, [1] generation, leaf k at 32 (k + 1).
constexpr int kLeaves = 16;
__device__ void grid_barrier_tree(unsigned* bar) {
  __syncthreads();
  if (threadIdx.x == 0) {
    const unsigned gen = ld_acquire(bar + 1);
    const unsigned leaves = gridDim.x < kLeaves ? gridDim.x : kLeaves, k = blockIdx.x % leaves;
    const unsigned members = (gridDim.x - k + leaves - 1) / leaves;
    unsigned* leaf = bar + 32 * (k + 1);
    if (atomicAdd(leaf, 1u) == members - 1) {
      *leaf = 0;
      __threadfence();
      if (atomicAdd(bar, 1u) == leaves - 1) {
        bar[0] = 0;
        __threadfence();
        st_release(bar + 1, gen + 1);
      }
    }
    while (ld_acquire(bar + 1) == gen) {
    }
  }
  __syncthreads();
}

// The one-counter barrier with the generation on its own 128-byte line (gen), so the blocks that
// spin on it do not slow the arrivals' atomics on the counter's line.
__device__ void grid_barrier_split(unsigned* bar, unsigned* gen_at) {
  __syncthreads();
  if (threadIdx.x == 0) {
    const unsigned gen = ld_acquire(gen_at);
    if (atomicAdd(bar, 1u) == gridDim.x - 1) {
      bar[0] = 0;
      st_release(gen_at, gen + 1);
    } else {
      while (ld_acquire(gen_at) == gen) {
      }
    }
  }
  __syncthreads();
}

// kMode: 0 one counter, 1 one counter with early loads, 2 tree barrier, 3 counter and generation
// on separate lines.
template <int kMode>
__global__ void __launch_bounds__(kThreads) persistent_kernel(const uint4* data, std::size_t n, int phases,
                                                              unsigned* out, unsigned* bar) {
  constexpr bool kEarlyLoads = kMode == 1;
  uint4 first[kEarly];
  for (int p = 0; p < phases; ++p) {
    const uint4* d = data + static_cast<std::size_t>(p) * n;
    if constexpr (kEarlyLoads) load_first(d, n, first);
    if (p > 0) {
      if constexpr (kMode == 2)
        grid_barrier_tree(bar);
      else if constexpr (kMode == 3)
        grid_barrier_split(bar, bar + 32 * (kLeaves + 1));
      else
        grid_barrier(bar);
    }
    block_out(stream_phase<kEarlyLoads>(d, n, first), out);
  }
}

// Persistent with lookahead: before waiting at phase p's barrier, each block copies its share of
// phase p + 1's first bytes (kLookBytes per block, the next phase's weights in the engine, which do
// not depend on the barrier) into shared memory with cp.async, double-buffered, so DRAM keeps
// streaming through the barrier; after the barrier the block reads its share from shared memory
// and the grid streams the rest of the phase from DRAM.
constexpr int kLookBytes = 16 * 1024;  // per block and buffer: 64 KB per SM in flight at 4 blocks
constexpr int kLookVec = kLookBytes / 16;
constexpr std::size_t kLookSmem = 2 * kLookBytes;

__device__ void issue_lookahead(const uint4* d, std::size_t n, uint4* dst) {
  const std::size_t base = static_cast<std::size_t>(blockIdx.x) * kLookVec;
  for (int i = threadIdx.x; i < kLookVec; i += kThreads) {
    if (base + i < n) {
      asm volatile("cp.async.cg.shared.global [%0], [%1], 16;" ::"r"(static_cast<unsigned>(__cvta_generic_to_shared(dst + i))),
                   "l"(d + base + i)
                   : "memory");
    }
  }
  asm volatile("cp.async.commit_group;" ::: "memory");
}

__global__ void __launch_bounds__(kThreads) persistent_lookahead_kernel(const uint4* data, std::size_t n, int phases,
                                                                        unsigned* out, unsigned* bar) {
  extern __shared__ uint4 look[];  // [2][kLookVec]: phase p's share in buffer p % 2
  const std::size_t all = static_cast<std::size_t>(gridDim.x) * kLookVec, ahead = n < all ? n : all;
  const uint4 none[kEarly] = {};
  issue_lookahead(data, n, look);
  for (int p = 0; p < phases; ++p) {
    const uint4* d = data + static_cast<std::size_t>(p) * n;
    // The next phase's share first (an empty group after the last phase keeps the wait count uniform).
    if (p + 1 < phases)
      issue_lookahead(d + n, n, look + ((p + 1) & 1) * kLookVec);
    else
      asm volatile("cp.async.commit_group;" ::: "memory");
    if (p > 0) grid_barrier(bar);
    asm volatile("cp.async.wait_group 1;" ::: "memory");  // this phase's share has landed
    __syncthreads();
    unsigned acc = 0;
    const std::size_t base = static_cast<std::size_t>(blockIdx.x) * kLookVec;
    const uint4* mine = look + (p & 1) * kLookVec;
    for (int i = threadIdx.x; i < kLookVec && base + i < n; i += kThreads) acc ^= mine[i].x ^ mine[i].y ^ mine[i].z ^ mine[i].w;
    acc ^= stream_phase<false>(d + ahead, n - ahead, none);
    block_out(acc, out);  // its barrier also ends every thread's reads of buffer p % 2
  }
}

}  // namespace

int main(int argc, char** argv) {
  int phases = 113;
  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], "--phases") == 0 && i + 1 < argc) {
      phases = std::max(2, std::atoi(argv[++i]));
    } else {
      std::printf("usage: bench_phases [--phases 113]\n");
      return 2;
    }
  }
  const auto q = cosmos::kernels::query_gpus();
  if (q.gpus.empty()) {
    std::printf("bench_phases: %s\n", q.why_none.c_str());
    return 0;
  }
  const double copy_gbs = cosmos::kernels::measure_copy_gbps();
  std::printf("GPU: %s, %d SMs; device copy %.0f GB/s; %d phases per run, median of 9 runs\n\n", q.gpus[0].name.c_str(),
              q.gpus[0].multiprocessors, copy_gbs, phases);
  cosmos::kernels::set_pdl_enabled(true);
  cudaStream_t s;
  CHECK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  int occ_p = 0;
  CHECK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&occ_p, persistent_kernel<1>, kThreads, 0));
  const int sms = q.gpus[0].multiprocessors;
  const int blocks = sms * std::min(occ_p, 4);  // one wave, as the gemv kernels (4 blocks of 8 warps per SM)
  CHECK(cudaFuncSetAttribute(persistent_lookahead_kernel, cudaFuncAttributePreferredSharedMemoryCarveout, 100));
  int occ_l = 0;
  CHECK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&occ_l, persistent_lookahead_kernel, kThreads, kLookSmem));
  const bool lookahead_fits = occ_l * sms >= blocks;  // a cooperative launch needs every block resident
  unsigned *out = nullptr, *bar = nullptr;
  CHECK(cudaMalloc(&out, blocks * sizeof(unsigned)));
  const std::size_t bar_bytes = 32 * (kLeaves + 2) * sizeof(unsigned);
  CHECK(cudaMalloc(&bar, bar_bytes));
  CHECK(cudaMemset(bar, 0, bar_bytes));
  CHECK(cudaFuncSetAttribute(phase_kernel<false>, cudaFuncAttributeMaxDynamicSharedMemorySize, kExclusiveSmem));
  CHECK(cudaFuncSetAttribute(phase_kernel<true, kDeep>, cudaFuncAttributeMaxDynamicSharedMemorySize, kExclusiveSmem));
  constexpr int kKernelVariants = 4, kPersistentVariants = 5;
  const char* const names[kKernelVariants + kPersistentVariants] = {
      "kernels (graph, PDL)", "kernels, early loads", "kernels, exclusive", "exclusive, 8 early",
      "persistent",           "persistent, early",    "persistent, tree",   "persistent, 2 lines",
      "persistent, lookahead"};
  std::printf("%-10s |", "MB / phase");
  for (const char* nm : names) std::printf(" %-22s |", nm);
  std::printf(" us at copy bandwidth\n");
  for (const double mb : {0.0, 1.0, 8.8, 25.7}) {
    const std::size_t n = std::max<std::size_t>(16, static_cast<std::size_t>(mb * 1e6 / 16) / 16 * 16);  // uint4s
    uint4* data = nullptr;
    CHECK(cudaMalloc(&data, n * 16 * phases));
    CHECK(cudaMemset(data, 1, n * 16 * phases));
    // Kernel variants: 0 plain, 1 early loads, 2 exclusive (4 blocks per SM, nothing co-resides),
    // 3 exclusive with kDeep early loads.
    cudaGraphExec_t exec[kKernelVariants];
    for (int v = 0; v < kKernelVariants; ++v) {
      cudaGraph_t g;
      const std::size_t smem = v >= 2 ? kExclusiveSmem : 0;
      CHECK(cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal));
      for (int p = 0; p < phases; ++p) {
        const uint4* d = data + static_cast<std::size_t>(p) * n;
        if (v == 0 || v == 2)
          CHECK(cosmos::kernels::launch_pdl(phase_kernel<false>, dim3(blocks), dim3(kThreads), smem, s, d, n, out));
        else if (v == 1)
          CHECK(cosmos::kernels::launch_pdl(phase_kernel<true>, dim3(blocks), dim3(kThreads), smem, s, d, n, out));
        else
          CHECK(cosmos::kernels::launch_pdl(phase_kernel<true, kDeep>, dim3(blocks), dim3(kThreads), smem, s, d, n, out));
      }
      CHECK(cudaStreamEndCapture(s, &g));
      CHECK(cudaGraphInstantiate(&exec[v], g, 0));
      CHECK(cudaGraphDestroy(g));
    }
    float ms[kKernelVariants + kPersistentVariants];
    for (int v = 0; v < kKernelVariants; ++v)
      ms[v] = median_event_ms(s, 9, 1, [&] { CHECK(cudaGraphLaunch(exec[v], s)); });
    void* const kernels[kPersistentVariants] = {
        reinterpret_cast<void*>(persistent_kernel<0>), reinterpret_cast<void*>(persistent_kernel<1>),
        reinterpret_cast<void*>(persistent_kernel<2>), reinterpret_cast<void*>(persistent_kernel<3>),
        reinterpret_cast<void*>(persistent_lookahead_kernel)};
    for (int v = 0; v < kPersistentVariants; ++v) {
      if (v == 4 && !lookahead_fits) {
        ms[kKernelVariants + v] = 0.0f;  // printed as 0: not run
        continue;
      }
      ms[kKernelVariants + v] = median_event_ms(s, 9, 1, [&] {
        const uint4* d = data;
        std::size_t nn = n;
        int ph = phases;
        void* args[] = {&d, &nn, &ph, &out, &bar};
        const std::size_t smem = v == 4 ? kLookSmem : 0;
        CHECK(cudaLaunchCooperativeKernel(kernels[v], dim3(blocks), dim3(kThreads), args, smem, s));
      });
    }
    const double floor_us = n * 16.0 / (copy_gbs * 1e3);
    std::printf("%-10.1f |", n * 16 / 1e6);
    for (float m : ms) {
      const double us = m * 1e3 / phases;
      std::printf(" %6.2f us (+%6.2f)   |", us, us - floor_us);
    }
    std::printf(" %.2f\n", floor_us);
    std::fflush(stdout);
    for (auto& x : exec) CHECK(cudaGraphExecDestroy(x));
    CHECK(cudaFree(data));
  }
  CHECK(cudaFree(out));
  CHECK(cudaFree(bar));
  CHECK(cudaStreamDestroy(s));
  return 0;
}
