// bench_layer_flow's ring variants: a producer warp streams each block's bytes into a ring of 32 KB
// stages in shared memory with bulk copies (TMA, mbarriers), while the other 15 warps wait for
// their inputs, stage them and fold the stages. Included by bench_layer_flow.cu only.
#pragma once

#include "bench_layer_flow_common.cuh"
#include "kernels/pdl.cuh"
#include "kernels/tma_sm90a.cuh"

namespace {

// --- ring: the dataflow kernel fed by a producer warp through shared memory ---------------------
constexpr int kStages = 6;                     // ring stages per block
constexpr int kStageBytes = 32 * 1024;         // one bulk copy per stage
constexpr int kStageVec = kStageBytes / 16;
constexpr int kRingBytes = kStages * kStageBytes;  // 192 KB of dynamic shared memory
constexpr int kCons = kT - 32;                 // consumer threads (warps 0-14); warp 15 produces

// The ring's position, the same sequence in the producer and in the consumers: stage and parity.
struct Ring {
  unsigned base, full, empty;  // shared addresses: [stages][kStageBytes] bytes, full[stages], empty[stages] (8 bytes each)
  int stages;
  int stage = 0;
  unsigned phase = 0;
  __device__ void next() {
    if (++stage == stages) stage = 0, phase ^= 1;
  }
  // By thread 0, then a barrier of every thread of the block before the ring is used.
  __device__ void init() const {
    using namespace cosmos::kernels::tma;
    for (int i = 0; i < stages; ++i) mbar_init(full + 8 * i, 1), mbar_init(empty + 8 * i, kCons / 32);
    mbar_init_fence();
  }
};
__device__ Ring make_ring(const uint4* ring, const unsigned long long* bars, int stages) {
  return Ring{static_cast<unsigned>(__cvta_generic_to_shared(ring)), static_cast<unsigned>(__cvta_generic_to_shared(bars)),
              static_cast<unsigned>(__cvta_generic_to_shared(bars + stages)), stages};
}
// Copies n bytes (a multiple of 16, 16-byte aligned) from global memory into shared memory at dst;
// they complete on the mbarrier at bar.
__device__ __forceinline__ void bulk_load(unsigned dst, const void* src, unsigned n, unsigned bar) {
  asm volatile("cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1], %2, [%3];" ::"r"(dst),
               "l"(src), "r"(n), "r"(bar)
               : "memory");
}
// Producer (one thread): a share into the ring, one stage per 32 KB piece, as stages come free.
__device__ void produce(const Share& s, Ring& r) {
  using namespace cosmos::kernels::tma;
  for (std::size_t i = 0; i < s.n; i += kStageVec) {
    const unsigned bytes = static_cast<unsigned>(s.n - i < kStageVec ? s.n - i : kStageVec) * 16;
    mbar_wait(r.empty + 8 * r.stage, r.phase ^ 1);  // a fresh barrier passes parity 1 at once
    mbar_expect_tx(r.full + 8 * r.stage, bytes);
    bulk_load(r.base + r.stage * kStageBytes, s.p + i, bytes, r.full + 8 * r.stage);
    r.next();
  }
}
// Consumers: fold a share's stages in order and release each (one arrival per consumer warp).
__device__ unsigned consume(const Share& s, Ring& r, const uint4* ring) {
  using namespace cosmos::kernels::tma;
  unsigned acc = 0;
  for (std::size_t i = 0; i < s.n; i += kStageVec) {
    const int n = static_cast<int>(s.n - i < kStageVec ? s.n - i : kStageVec);
    mbar_wait(r.full + 8 * r.stage, r.phase);
    const uint4* st = ring + r.stage * kStageVec;
    for (int j = threadIdx.x; j < n; j += kCons) acc ^= fold(st[j]);
    __syncwarp();
    if ((threadIdx.x & 31) == 0) mbar_arrive(r.empty + 8 * r.stage);
    r.next();
  }
  return acc;
}
// signal / wait_for among the consumers only (named barrier 1; the producer never joins).
__device__ void cons_signal(int* ctr) {
  cosmos::kernels::tma::named_sync(1, kCons);
  if (threadIdx.x == 0) {
    __threadfence();
    atomicAdd(ctr, 1);
  }
}
template <bool kWait>
__device__ void cons_wait(const int* ctr, int target) {
  if (kWait && threadIdx.x == 0)
    while (ld_acquire(ctr) < target) {
    }
  cosmos::kernels::tma::named_sync(1, kCons);
}

// The dataflow kernel's steps, shares and waits, its bytes through the ring. check: XOR of every word
// folded (all blocks), for the bookkeeping check.
template <bool kWait>
__global__ void __launch_bounds__(kT, 1) ring_kernel(const Layer* layers, int n_layers, int splits, unsigned* check) {
#if __CUDA_ARCH__ >= 900
  extern __shared__ __align__(128) uint4 ring[];  // [kStages][kStageVec] the block's bytes in order of use
  __shared__ __align__(8) unsigned long long bars[2 * kStages];  // full [kStages], empty [kStages]
  using namespace cosmos::kernels::tma;
  const int b = blockIdx.x, nb = gridDim.x;
  Ring r = make_ring(ring, bars, kStages);
  if (threadIdx.x == 0) r.init();
  __syncthreads();
  const bool attends = b < kKvHeads * splits;
  if (threadIdx.x >= kCons) {  // the producer warp: lane 0 streams every step of every layer in order
    if (threadIdx.x != kCons) return;
    for (int l = 0; l < n_layers; ++l) {
      const Layer& L = layers[l];
      const std::size_t per_qkv = L.n_qkv / kKvHeads, per_o = L.n_o / kKvHeads;
      for (int g = 0; g < kKvHeads; ++g) produce(share_of(L.w_qkv + g * per_qkv, per_qkv, b, nb), r);
      if (attends) produce(share_of(L.kv, L.n_kv, b, kKvHeads * splits), r);
      for (int g = 0; g < kKvHeads; ++g) produce(share_of(L.w_o + g * per_o, per_o, b, nb), r);
      produce(share_of(L.w_gu, L.n_gu, b, nb), r);
      produce(share_of(L.w_down, L.n_down, b, nb), r);
    }
    return;
  }
  unsigned all = 0;
  for (int l = 0; l < n_layers; ++l) {
    const Layer& L = layers[l];
    const Counters k = counters_of(L);
    int *const qkv_done = k.qkv, *const att_done = k.att, *const o_done = k.o, *const down_done = k.down;
    const std::size_t per_qkv = L.n_qkv / kKvHeads, per_o = L.n_o / kKvHeads;
    if (l > 0) cons_wait<kWait>(counters_of(layers[l - 1]).down, nb);
    float xs = stage(L.x, kHidden, kCons);
    for (int g = 0; g < kKvHeads; ++g) {
      const unsigned acc = consume(share_of(L.w_qkv + g * per_qkv, per_qkv, b, nb), r, ring);
      all ^= acc;
      write_slice(L.qkv + g * kGroupQkv, kGroupQkv, b, nb, acc, xs, kCons);
      cons_signal(qkv_done + 32 * g);
    }
    if (attends) {
      const int g = b % kKvHeads, split = b / kKvHeads;
      cons_wait<kWait>(qkv_done + 32 * g, nb);
      xs = stage(L.qkv + g * kGroupQkv, kGroupQkv, kCons);
      const unsigned acc = consume(share_of(L.kv, L.n_kv, b, kKvHeads * splits), r, ring);
      all ^= acc;
      write_slice(L.att + g * kGroupAtt, kGroupAtt, split, splits, acc, xs, kCons);
      cons_signal(att_done + 32 * g);
    }
    for (int g = 0; g < kKvHeads; ++g) {
      cons_wait<kWait>(att_done + 32 * g, splits);
      xs = stage(L.att + g * kGroupAtt, kGroupAtt, kCons);
      const unsigned acc = consume(share_of(L.w_o + g * per_o, per_o, b, nb), r, ring);
      all ^= acc;
      add_slice(L.o, kHidden, b, nb, acc, xs, kCons);
    }
    cons_signal(o_done);
    cons_wait<kWait>(o_done, nb);
    xs = stage(L.o, kHidden, kCons);
    unsigned acc = consume(share_of(L.w_gu, L.n_gu, b, nb), r, ring);
    acc ^= consume(share_of(L.w_down, L.n_down, b, nb), r, ring);
    all ^= acc;
    add_all(L.x_next, acc, xs, kCons);
    cons_signal(down_done);
  }
  atomicXor(check, all);
#endif
}

// kernels, ring: a product as product_kernel, its block's share streamed by a producer warp into a
// ring of kKStages x 32 KB from the block's start, before and through the PDL wait (96 KB: two
// neighbouring kernels' blocks fit on one SM, so the next product streams while this one finishes).
constexpr int kKStages = 3;
__global__ void __launch_bounds__(kT, 2) ring_product_kernel(const uint4* w, std::size_t n, const float* in, int n_in,
                                                             float* out, int n_out) {
#if __CUDA_ARCH__ >= 900
  extern __shared__ __align__(128) uint4 ring[];                  // [kKStages][kStageVec] the block's share in order
  __shared__ __align__(8) unsigned long long bars[2 * kKStages];  // full [kKStages], empty [kKStages]
  Ring r = make_ring(ring, bars, kKStages);
  if (threadIdx.x == 0) r.init();
  __syncthreads();
  const Share s = share_of(w, n, blockIdx.x, gridDim.x);
  if (threadIdx.x >= kCons) {  // weights only: no wait needed
    if (threadIdx.x == kCons) produce(s, r);
    return;
  }
  cosmos::kernels::pdl_wait();
  cosmos::kernels::pdl_launch_dependents();
  const float xs = stage(in, n_in, kCons);
  write_slice(out, n_out, blockIdx.x, gridDim.x, consume(s, r, ring), xs, kCons);
#endif
}

// The weights as a pattern (so that the ring check sees which words were folded), and their XOR.
__global__ void fill_kernel(uint4* w, std::size_t n) {
  for (std::size_t i = blockIdx.x * std::size_t(blockDim.x) + threadIdx.x; i < n; i += std::size_t(gridDim.x) * blockDim.x) {
    const unsigned h = static_cast<unsigned>(i) * 2654435761u ^ static_cast<unsigned>(i >> 32);
    w[i] = make_uint4(h, h * 3u + 1u, h ^ 0x5bd1e995u, h + 7u);
  }
}
__global__ void xor_kernel(const uint4* w, std::size_t n, unsigned* out) {
  unsigned acc = 0;
  for (std::size_t i = blockIdx.x * std::size_t(blockDim.x) + threadIdx.x; i < n; i += std::size_t(gridDim.x) * blockDim.x)
    acc ^= fold(w[i]);
  atomicXor(out, acc);
}

}  // namespace
