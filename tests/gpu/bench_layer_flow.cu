// What the one-token decode step's structure costs at its floor (reports, never fails). A synthetic
// step of L layers with the 7B shape's bytes per product (int8: 1 byte per weight; int4: half a
// byte plus one bf16 scale per 128) and its dependencies, run seven ways:
//   kernels:         5 launches per layer in one CUDA graph with programmatic dependent launch, as
//                    the engine: q/k/v, attention, o, gate/up, down, each waiting for all of its
//                    predecessor's output;
//   kernels, MLP:    gate/up and down in one launch, split over the neurons (down's partial sums
//                    added with vector atomics), as bf16's fused MLP: 4 launches per layer;
//   dataflow:        one persistent kernel (cooperative launch, one block per SM) in which each step
//                    waits only for the slices it reads: KV head g's attention for the q/k/v rows of
//                    head g, o's columns of head g (a split-K product) for head g's attention, the
//                    MLP split over neurons with no wait between gate/up and down. Only o -> MLP and
//                    down -> the next q/k/v wait for a whole vector (per-layer counters, no barrier);
//   dataflow, look:  the same, each block copying the first bytes of its next step into shared
//                    memory (cp.async) before it waits, so DRAM keeps streaming through the waits;
//   no waits:        the dataflow kernel without its waits (wrong data flow, the same traffic): how
//                    fast this code streams the bytes with no dependency at all;
//   ring:            the dataflow kernel's steps and waits, but one producer warp per block streams
//                    the block's bytes of every step and layer, in order of use, into a ring of
//                    kStages x 32 KB of shared memory with bulk copies (TMA), never waiting for a
//                    dependency, only for a free stage; the other 15 warps wait, stage and fold the
//                    stages. So DRAM streams through every wait that the ring can cover (192 KB, ~6 us
//                    of an SM's share of the bandwidth);
//   ring, no waits:  the same without its waits: how fast the ring streams.
// The ring kernels also check their bookkeeping: the XOR of every word they fold must equal the
// XOR of the whole weight buffer (printed as "ring check").
// Each step streams its bytes (16-byte loads past L1, kU per thread in flight, the first batch
// before the wait as the engine's products do), reads its input vector from L2 after the wait (the
// products' staging) and writes its output. The arithmetic is an XOR fold: this measures the
// structure, not the kernels, so a design whose floor here is not below today's cannot pay.
// Printed: us per token and per layer, and the excess over the bytes at the copy bandwidth.
//   bench_layer_flow [--layers 28] [--depth 0] [--fmt int8|int4] [--bps 1]   (--bps: the kernels' blocks per SM)
#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <string>

#include <cuda_runtime.h>

#include "bench_check.h"
#include "kernels/device_info.cuh"
#include "bench_layer_flow_common.cuh"
#include "kernels/pdl.cuh"

namespace {

// --- kernels: one launch per step --------------------------------------------------------------
// A product: block b streams its share of w, stages `in` (n_in floats) after the wait and writes
// its slice of `out` (n_out floats).
__global__ void __launch_bounds__(kT) product_kernel(const uint4* w, std::size_t n, const float* in, int n_in, float* out,
                                                     int n_out) {
  const Share s = share_of(w, n, blockIdx.x, gridDim.x);
  Early e;
  load_early(s, e);
  cosmos::kernels::pdl_wait();
  cosmos::kernels::pdl_launch_dependents();
  const float xs = stage(in, n_in);
  write_slice(out, n_out, blockIdx.x, gridDim.x, stream_rest(s, e), xs);
}
// The attention: blocks [0, kKvHeads x splits) each take a split of one KV head's K/V rows; they
// stage the head's q/k/v rows and write their part of its outputs.
// (kRingGraph: a second copy for the graph of ring products, so that its shared-memory carveout can be
// set apart from the plain graph's.)
template <bool kRingGraph = false>
__global__ void __launch_bounds__(kT) attention_kernel(const uint4* kv, std::size_t n, const float* qkv, float* att,
                                                       int splits) {
  const int b = blockIdx.x, g = b % kKvHeads, split = b / kKvHeads;
  const bool active = split < splits;
  const Share s = share_of(kv, n, b, kKvHeads * splits);
  Early e;
  if (active) load_early(s, e);
  cosmos::kernels::pdl_wait();
  cosmos::kernels::pdl_launch_dependents();
  if (!active) return;
  const float xs = stage(qkv + g * kGroupQkv, kGroupQkv);
  write_slice(att + g * kGroupAtt, kGroupAtt, split, splits, stream_rest(s, e), xs);
}
// gate/up and down in one launch, split over the neurons: gate/up's rows and down's columns of the
// block's neurons, down's partial sums added into x_next.
__global__ void __launch_bounds__(kT) mlp_kernel(const uint4* gu, std::size_t n_gu, const uint4* down, std::size_t n_down,
                                                 const float* o, float* x_next) {
  const Share s = share_of(gu, n_gu, blockIdx.x, gridDim.x), d = share_of(down, n_down, blockIdx.x, gridDim.x);
  Early e;
  load_early(s, e);
  cosmos::kernels::pdl_wait();
  cosmos::kernels::pdl_launch_dependents();
  const float xs = stage(o, kHidden);
  unsigned acc = stream_rest(s, e);
  load_early(d, e);
  acc ^= stream_rest(d, e);
  add_all(x_next, acc, xs);
}

// --- dataflow: one persistent kernel ------------------------------------------------------------
__device__ void signal(int* ctr) {
  __syncthreads();  // every thread's writes issued
  if (threadIdx.x == 0) {
    __threadfence();
    atomicAdd(ctr, 1);
  }
}
template <bool kWait = true>
__device__ void wait_for(const int* ctr, int target) {
  if (kWait && threadIdx.x == 0)
    while (ld_acquire(ctr) < target) {
    }
  __syncthreads();
}

// The block's share of a step with its first bytes taken before the wait: in registers (Early), or
// with kLook the first kLookVec vectors copied into shared memory (cp.async) and folded after it.
template <bool kLook>
struct Ahead {
  Early e;
  __device__ void issue(const Share& s, uint4* look) {
    if constexpr (kLook) {
      __syncthreads();  // the previous step's reads of `look` are done
      const std::size_t m = s.n < kLookVec ? s.n : kLookVec;
      for (std::size_t i = threadIdx.x; i < m; i += kT)
        asm volatile("cp.async.cg.shared.global [%0], [%1], 16;" ::"r"(static_cast<unsigned>(__cvta_generic_to_shared(look + i))),
                     "l"(s.p + i)
                     : "memory");
      asm volatile("cp.async.commit_group;" ::: "memory");
      load_early(s, e, m);
    } else {
      load_early(s, e);
    }
  }
  __device__ unsigned finish(const Share& s, const uint4* look) {
    if constexpr (kLook) {
      asm volatile("cp.async.wait_all;" ::: "memory");
      __syncthreads();
      const std::size_t m = s.n < kLookVec ? s.n : kLookVec;
      unsigned acc = 0;
      for (std::size_t i = threadIdx.x; i < m; i += kT) acc ^= fold(look[i]);
      return acc ^ stream_rest(s, e, m);
    } else {
      return stream_rest(s, e);
    }
  }
};

// kWait false: no step waits (wrong data flow; the same bytes, loads and writes): what this code
// streams with no dependency at all, the ceiling that the other variants are measured against.
template <bool kLook, bool kWait = true>
__global__ void __launch_bounds__(kT, 1) dataflow_kernel(const Layer* layers, int n_layers, int splits) {
  extern __shared__ uint4 look[];  // kLook: [kLookVec]
  const int b = blockIdx.x, nb = gridDim.x;
  Ahead<kLook> a;
  for (int l = 0; l < n_layers; ++l) {
    const Layer& L = layers[l];
    const Counters k = counters_of(L);
    int *const qkv_done = k.qkv, *const att_done = k.att, *const o_done = k.o, *const down_done = k.down;
    // q/k/v, KV head by KV head (each head's rows over all blocks), after the whole input vector.
    {
      const std::size_t per = L.n_qkv / kKvHeads;
      Share s = share_of(L.w_qkv, per, b, nb);
      a.issue(s, look);
      if (l > 0) wait_for<kWait>(counters_of(layers[l - 1]).down, nb);
      const float xs = stage(L.x, kHidden);
      for (int g = 0; g < kKvHeads; ++g) {
        unsigned acc;
        if (g == 0) {
          acc = a.finish(s, look);
        } else {
          s = share_of(L.w_qkv + g * per, per, b, nb);
          Early e;
          load_early(s, e);
          acc = stream_rest(s, e);
        }
        write_slice(L.qkv + g * kGroupQkv, kGroupQkv, b, nb, acc, xs);
        signal(qkv_done + 32 * g);
      }
    }
    // The attention of KV head g on the blocks b = g + kKvHeads x split, after head g's q/k/v rows.
    if (b < kKvHeads * splits) {
      const int g = b % kKvHeads, split = b / kKvHeads;
      const Share s = share_of(L.kv, L.n_kv, b, kKvHeads * splits);
      a.issue(s, look);
      wait_for<kWait>(qkv_done + 32 * g, nb);
      const float xs = stage(L.qkv + g * kGroupQkv, kGroupQkv);
      write_slice(L.att + g * kGroupAtt, kGroupAtt, split, splits, a.finish(s, look), xs);
      signal(att_done + 32 * g);
    }
    // o as a split-K product: the columns of head g after head g's attention, each block's rows'
    // partial sums added into o.
    {
      const std::size_t per = L.n_o / kKvHeads;
      for (int g = 0; g < kKvHeads; ++g) {
        const Share s = share_of(L.w_o + g * per, per, b, nb);
        a.issue(s, look);
        wait_for<kWait>(att_done + 32 * g, splits);
        const float xs = stage(L.att + g * kGroupAtt, kGroupAtt);
        add_slice(L.o, kHidden, b, nb, a.finish(s, look), xs);
      }
      signal(o_done);
    }
    // The MLP split over neurons: gate/up's rows and down's columns of the block's neurons, after
    // the whole of o; down's partial sums added into the next layer's x.
    {
      const Share s = share_of(L.w_gu, L.n_gu, b, nb), d = share_of(L.w_down, L.n_down, b, nb);
      a.issue(s, look);
      wait_for<kWait>(o_done, nb);
      const float xs = stage(L.o, kHidden);
      unsigned acc = a.finish(s, look);
      Early e;
      load_early(d, e);
      acc ^= stream_rest(d, e);
      add_all(L.x_next, acc, xs);
      signal(down_done);
    }
  }
}

}  // namespace

#include "bench_layer_flow_ring.cuh"

int main(int argc, char** argv) {
  int n_layers = 28, depth = 0, bps = 1;
  std::string fmt = "int8";
  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], "--layers") == 0 && i + 1 < argc) {
      n_layers = std::max(1, std::atoi(argv[++i]));
    } else if (std::strcmp(argv[i], "--depth") == 0 && i + 1 < argc) {
      depth = std::max(0, std::atoi(argv[++i]));
    } else if (std::strcmp(argv[i], "--bps") == 0 && i + 1 < argc) {
      bps = std::max(1, std::atoi(argv[++i]));
    } else if (std::strcmp(argv[i], "--fmt") == 0 && i + 1 < argc) {
      fmt = argv[++i];
    } else {
      std::printf("usage: bench_layer_flow [--layers 28] [--depth 0] [--fmt int8|int4] [--bps 1]\n");
      return 2;
    }
  }
  if (fmt != "int8" && fmt != "int4") {
    std::printf("bench_layer_flow: --fmt is int8 or int4\n");
    return 2;
  }
  const auto q = cosmos::kernels::query_gpus();
  if (q.gpus.empty()) {
    std::printf("bench_layer_flow: %s\n", q.why_none.c_str());
    return 0;
  }
  const int sms = q.gpus[0].multiprocessors;
  const double copy_gbs = cosmos::kernels::measure_copy_gbps();
  // Bytes per weight: int8 1; int4 a half plus a bf16 scale per group of 128.
  const double bpw = fmt == "int8" ? 1.0 : 0.5 + 2.0 / 128;
  auto vecs = [&](double weights) { return static_cast<std::size_t>(weights * bpw / 16); };
  const std::size_t n_qkv = vecs(double(kQkv) * kHidden), n_o = vecs(double(kHidden) * kHidden),
                    n_gu = vecs(2.0 * kInter * kHidden), n_down = vecs(double(kHidden) * kInter);
  const std::size_t n_kv = static_cast<std::size_t>(depth) * 2 * kKvHeads * kHeadDim * 2 / 16;  // bf16 K and V rows
  const std::size_t per_layer = n_qkv + n_o + n_gu + n_down + n_kv;
  const int splits = std::max(1, std::min({depth / 64, 32, sms / kKvHeads}));
  std::printf("GPU: %s, %d SMs; device copy %.0f GB/s; %s, %d layers, depth %d (%d attention splits per KV head); "
              "%.1f MB per layer; kernels: %d blocks of %d threads per SM; median of 9 runs\n",
              q.gpus[0].name.c_str(), sms, copy_gbs, fmt.c_str(), n_layers, depth, splits, per_layer * 16 / 1e6, bps, kT);
  const int grid = sms * bps;

  uint4* w = nullptr;
  CHECK(cudaMalloc(&w, per_layer * 16 * n_layers));
  fill_kernel<<<sms * 4, 256>>>(w, per_layer * n_layers);
  CHECK(cudaGetLastError());
  unsigned* check = nullptr;  // [0] the weights' XOR, [1] / [2] the two ring variants', [3] the timed runs'
  CHECK(cudaMalloc(&check, 4 * sizeof(unsigned)));
  CHECK(cudaMemset(check, 0, 4 * sizeof(unsigned)));
  xor_kernel<<<sms * 4, 256>>>(w, per_layer * n_layers, check);
  CHECK(cudaGetLastError());
  CHECK(cudaDeviceSynchronize());  // the legacy stream's work done before the non-blocking stream's
  const std::size_t fl_layer = kQkv + 3 * kHidden + kInter + kHidden;  // qkv, att, o, h, x_next
  float* f = nullptr;
  CHECK(cudaMalloc(&f, (kHidden + fl_layer * n_layers) * sizeof(float)));
  CHECK(cudaMemset(f, 0, (kHidden + fl_layer * n_layers) * sizeof(float)));
  int* ctr = nullptr;
  const std::size_t ctr_bytes = static_cast<std::size_t>(n_layers) * kCounters * 32 * sizeof(int);
  CHECK(cudaMalloc(&ctr, ctr_bytes));
  Layer* h_layers = new Layer[n_layers];
  const float* x = f;
  for (int l = 0; l < n_layers; ++l) {
    const uint4* base = w + per_layer * l;
    float* v = f + kHidden + fl_layer * l;
    Layer& L = h_layers[l];
    L.w_qkv = base, L.w_o = base + n_qkv, L.w_gu = L.w_o + n_o, L.w_down = L.w_gu + n_gu, L.kv = L.w_down + n_down;
    L.n_qkv = n_qkv, L.n_o = n_o, L.n_gu = n_gu, L.n_down = n_down, L.n_kv = n_kv;
    L.x = x, L.qkv = v, L.att = v + kQkv, L.o = L.att + kHidden, L.h = L.o + kHidden, L.x_next = L.h + kInter;
    L.ctr = ctr + static_cast<std::size_t>(l) * kCounters * 32;
    x = L.x_next;
  }
  Layer* d_layers = nullptr;
  CHECK(cudaMalloc(&d_layers, sizeof(Layer) * n_layers));
  CHECK(cudaMemcpy(d_layers, h_layers, sizeof(Layer) * n_layers, cudaMemcpyHostToDevice));

  cosmos::kernels::set_pdl_enabled(true);
  cudaStream_t s;
  CHECK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  // The accumulators (o, x_next) and the counters start at zero in every run, for every variant.
  auto reset = [&] {
    for (int l = 0; l < n_layers; ++l) {
      CHECK(cudaMemsetAsync(h_layers[l].o, 0, kHidden * sizeof(float), s));
      CHECK(cudaMemsetAsync(h_layers[l].x_next, 0, kHidden * sizeof(float), s));
    }
    CHECK(cudaMemsetAsync(ctr, 0, ctr_bytes, s));
  };
  // Graphs: 0 five kernels, 1 the MLP in one, 2 five kernels with the products fed by rings (sm_90+).
  const bool hopper = q.gpus[0].sm_major >= 9;
  const std::size_t kring = static_cast<std::size_t>(kKStages) * kStageBytes;
  if (hopper) {
    CHECK(cudaFuncSetAttribute(ring_product_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(kring)));
    // Every kernel of the ring graph asks for the whole carveout, so an SM's split of shared memory
    // and L1 does not change between neighbours (suspected of a 20% loss in the engine once:
    // kernels/decode_attention_mma.cu).
    CHECK(cudaFuncSetAttribute(ring_product_kernel, cudaFuncAttributePreferredSharedMemoryCarveout, 100));
    CHECK(cudaFuncSetAttribute(attention_kernel<true>, cudaFuncAttributePreferredSharedMemoryCarveout, 100));
  }
  cudaGraphExec_t exec[3] = {};
  for (int v = 0; v < (hopper ? 3 : 2); ++v) {
    cudaGraph_t g;
    CHECK(cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal));
    for (int l = 0; l < n_layers; ++l) {
      const Layer& L = h_layers[l];
      using cosmos::kernels::launch_pdl;
      if (v == 2)
        CHECK(launch_pdl(ring_product_kernel, dim3(grid), dim3(kT), kring, s, L.w_qkv, L.n_qkv, L.x, kHidden, L.qkv, kQkv));
      else
        CHECK(launch_pdl(product_kernel, dim3(grid), dim3(kT), 0, s, L.w_qkv, L.n_qkv, L.x, kHidden, L.qkv, kQkv));
      if (v == 2)
        CHECK(launch_pdl(attention_kernel<true>, dim3(grid), dim3(kT), 0, s, L.kv, L.n_kv, static_cast<const float*>(L.qkv),
                         L.att, splits));
      else
        CHECK(launch_pdl(attention_kernel<false>, dim3(grid), dim3(kT), 0, s, L.kv, L.n_kv, static_cast<const float*>(L.qkv),
                         L.att, splits));
      if (v == 2)
        CHECK(launch_pdl(ring_product_kernel, dim3(grid), dim3(kT), kring, s, L.w_o, L.n_o, static_cast<const float*>(L.att),
                         kHidden, L.o, kHidden));
      else
        CHECK(launch_pdl(product_kernel, dim3(grid), dim3(kT), 0, s, L.w_o, L.n_o, static_cast<const float*>(L.att), kHidden,
                         L.o, kHidden));
      if (v == 2) {
        CHECK(launch_pdl(ring_product_kernel, dim3(grid), dim3(kT), kring, s, L.w_gu, L.n_gu, static_cast<const float*>(L.o),
                         kHidden, L.h, kInter));
        CHECK(launch_pdl(ring_product_kernel, dim3(grid), dim3(kT), kring, s, L.w_down, L.n_down, static_cast<const float*>(L.h),
                         kInter, L.x_next, kHidden));
      } else if (v == 0) {
        CHECK(launch_pdl(product_kernel, dim3(grid), dim3(kT), 0, s, L.w_gu, L.n_gu, static_cast<const float*>(L.o), kHidden, L.h,
                         kInter));
        CHECK(launch_pdl(product_kernel, dim3(grid), dim3(kT), 0, s, L.w_down, L.n_down, static_cast<const float*>(L.h), kInter,
                         L.x_next, kHidden));
      } else {
        CHECK(launch_pdl(mlp_kernel, dim3(grid), dim3(kT), 0, s, L.w_gu, L.n_gu, L.w_down, L.n_down, static_cast<const float*>(L.o),
                         L.x_next));
      }
    }
    CHECK(cudaStreamEndCapture(s, &g));
    CHECK(cudaGraphInstantiate(&exec[v], g, 0));
    CHECK(cudaGraphDestroy(g));
  }
  float ms[8] = {};
  for (int v = 0; v < (hopper ? 3 : 2); ++v)
    ms[v == 2 ? 7 : v] = median_event_ms(s, 9, 2, [&] {
      reset();
      CHECK(cudaGraphLaunch(exec[v], s));
    });
  CHECK(cudaFuncSetAttribute(dataflow_kernel<true>, cudaFuncAttributeMaxDynamicSharedMemorySize, kLookBytes));
  for (int v = 0; v < 3; ++v) {
    void* const kernel = v == 0   ? reinterpret_cast<void*>(dataflow_kernel<false>)
                         : v == 1 ? reinterpret_cast<void*>(dataflow_kernel<true>)
                                  : reinterpret_cast<void*>(dataflow_kernel<false, false>);
    const std::size_t smem = v == 1 ? kLookBytes : 0;
    int occ = 0;
    CHECK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&occ, kernel, kT, smem));
    if (occ < 1) continue;  // printed as 0: not run
    ms[2 + v] = median_event_ms(s, 9, 2, [&] {
      reset();
      const Layer* dl = d_layers;
      int nl = n_layers, sp = splits;
      void* args[] = {&dl, &nl, &sp};
      CHECK(cudaLaunchCooperativeKernel(kernel, dim3(sms), dim3(kT), args, smem, s));
    });
  }
  // The ring kernels (sm_90 and later: bulk copies into shared memory on mbarriers).
  unsigned want = 0, got[2] = {};
  if (hopper) {
    for (int v = 0; v < 2; ++v) {
      void* const kernel = v == 0 ? reinterpret_cast<void*>(ring_kernel<true>) : reinterpret_cast<void*>(ring_kernel<false>);
      CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, kRingBytes));
      int occ = 0;
      CHECK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&occ, kernel, kT, kRingBytes));
      if (occ < 1) continue;
      // One run for the check (the word XOR of one run), then the timed runs.
      unsigned* const c = check + 1 + v;
      auto run = [&](unsigned* ck) {
        reset();
        const Layer* dl = d_layers;
        int nl = n_layers, sp = splits;
        void* args[] = {&dl, &nl, &sp, &ck};
        CHECK(cudaLaunchCooperativeKernel(kernel, dim3(sms), dim3(kT), args, kRingBytes, s));
      };
      run(c);
      CHECK(cudaStreamSynchronize(s));
      CHECK(cudaMemcpy(&got[v], c, sizeof(unsigned), cudaMemcpyDeviceToHost));
      ms[5 + v] = median_event_ms(s, 9, 2, [&] { run(check + 3); });
    }
    CHECK(cudaMemcpy(&want, check, sizeof(unsigned), cudaMemcpyDeviceToHost));
  }
  const double floor_us = per_layer * 16.0 * n_layers / (copy_gbs * 1e3);
  const char* const names[8] = {"kernels (5 per layer, PDL)", "kernels, MLP in one (4)", "dataflow (persistent)",
                                "dataflow, look-ahead", "no waits (this code's ceiling)", "ring (TMA producer warp)",
                                "ring, no waits", "kernels (5), 96 KB rings"};
  std::printf("%-28s | %10s | %9s | %16s\n", "variant", "us / token", "us / layer", "excess / layer");
  for (int v = 0; v < 8; ++v) {
    const double us = ms[v] * 1e3;
    std::printf("%-28s | %10.1f | %9.2f | %13.2f us\n", names[v], us, us / n_layers, (us - floor_us) / n_layers);
  }
  std::printf("%-28s | %10.1f | %9.2f |\n", "bytes at the copy bandwidth", floor_us, floor_us / n_layers);
  if (ms[5] > 0 || ms[6] > 0)
    std::printf("ring check: %s (weights' word XOR %08x; ring %08x, ring without waits %08x)\n",
                got[0] == want && got[1] == want ? "ok" : "MISMATCH", want, got[0], got[1]);
  else
    std::printf("ring check: not run (needs sm_90 and %d KB of shared memory per block)\n", kRingBytes / 1024);
  for (auto& ge : exec)
    if (ge) CHECK(cudaGraphExecDestroy(ge));
  delete[] h_layers;
  CHECK(cudaFree(d_layers));
  CHECK(cudaFree(ctr));
  CHECK(cudaFree(check));
  CHECK(cudaFree(f));
  CHECK(cudaFree(w));
  CHECK(cudaStreamDestroy(s));
  return 0;
}
