// Fused gate/up product + SwiGLU on Hopper (kernels/gemm_swiglu.cuh): TMA, mbarriers, wgmma.
//
// Blocks: 384 threads, one per SM, in clusters of two (persistent: cluster c takes tile pairs c,
// c + clusters, ...). A tile is 128 tokens x 128 output columns: the [128, k] rows of x against 128
// gate rows and the same 128 up rows of w. The two blocks of a cluster take token tiles 2i and
// 2i + 1 of one column tile, so they share its weights: each block copies half of them (rank 0 the
// gate rows, rank 1 the up rows) and the TMA multicast writes that half into both blocks' shared
// memory. Against a block copying all of its own operands, the L2 -> SM traffic drops from 48 KB
// to 32 KB per stage. Pairs are numbered with the token pair fastest, so the clusters running at
// once share a few weight tiles (each read from DRAM about once) and all of x (14.7 MB at 2,048 x
// 3,584) stays in L2.
//   warpgroup 0: the producer. One thread issues, per stage of 64 k-columns, its x tile (16 KB) and
//                its weight half (16 KB, multicast), into a ring of 4 stages (48 KB each) with a
//                "full" mbarrier per stage (48 KB of copies expected: its x, both halves) and an
//                "empty" one (16 releases: the 8 consumer warps of both blocks, since a multicast
//                copy overwrites the stage in both).
//   warpgroups 1, 2: the consumers, tokens 64c .. 64c + 63 of the tile (c = 0, 1). Per stage, four
//                wgmma m64n256k16 (A = its 64 x rows, B = the 256 gate|up rows) into a 64 x 256 fp32
//                accumulator (128 registers a thread): columns 0 .. 127 are the gate sums, 128 .. 255
//                the up sums, so column i's gate and up sums sit in one thread (d[4j + e] and
//                d[4j + 64 + e]). A stage is released (to both blocks' producers) once the wgmma group
//                after it has been issued and it has itself completed (wait_group 1). Epilogue:
//                silu(g) * u per pair, rounded to 16 bits, 4-byte stores straight from registers
//                (rows beyond n skipped); meanwhile the producer is already filling the ring with the
//                next tile's stages.
// Shared memory (dynamic, aligned to 1024 in the kernel, the 128-byte swizzle's period; the same
// offsets in both blocks, as multicast needs):
//   stage s at s * 48 KB: x tile [128][64] (16 KB), then w tile [256][64] (32 KB: gate rows, up
//   rows), both K-major with 128-byte rows in the TMA 128B-swizzle layout (kernels/wgmma.cuh: chunk
//   c of row r at c ^ (r & 7)); then the mbarriers: full[4], empty[4] (8 bytes each).
// Registers: setmaxnreg moves them from the producer (40) to the consumers (232).
#include "kernels/gemm_swiglu_sm90a.cuh"

#include <cstdint>

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include "kernels/mma_bf16.cuh"
#include "kernels/pdl.cuh"
#include "kernels/tma_sm90a.cuh"
#include "kernels/wgmma.cuh"
#include "kernels/wgmma_n256.cuh"

namespace cosmos::kernels {
namespace {

using namespace tma;

constexpr int kBM = kGemmSwigluBlockRows, kBN = kGemmSwigluBlockCols, kBK = kGemmSwigluBlockK;
constexpr int kStages = 4;
constexpr int kThreads = 384;
constexpr unsigned kXBytes = kBM * kBK * 2;             // 16 KB
constexpr unsigned kWHalfBytes = kBN * kBK * 2;         // 16 KB: 128 gate (or up) rows
constexpr unsigned kStageBytes = kXBytes + 2 * kWHalfBytes;  // 48 KB
constexpr int kSmem = kStages * kStageBytes + 2 * kStages * 8 + 1024;
static_assert(kBK * 2 == 128, "a stage's rows are one 128-byte swizzle row");
static_assert(kSmem <= 227 * 1024, "fits an sm_90 block's shared memory");

struct Params {
  void* out;
  int n, ff, k;
  int m_tiles;  // token tiles of 128
  int m_pairs;  // pairs of token tiles (the last may have one past n: all zeros, nothing stored)
  int units;    // work units: tile pairs (clusters of two) or tiles (kCluster == 1)
};

// silu(g) * u with the fast exponential and division (a few ulp; the output is rounded to 16 bits).
__device__ __forceinline__ float silu_mul(float g, float u) { return __fdividef(g, 1.0f + __expf(-g)) * u; }

template <bool kF16>
__device__ __forceinline__ unsigned pack_out(float lo, float hi) {
  if constexpr (kF16) {
    lo = lo != lo ? lo : fminf(fmaxf(lo, -65504.0f), 65504.0f);
    hi = hi != hi ? hi : fminf(fmaxf(hi, -65504.0f), 65504.0f);
    return mma::pack_f16(lo, hi);
  } else {
    return mma::pack_bf16(lo, hi);
  }
}

template <bool kF16, int kCluster>
__global__ void __launch_bounds__(kThreads, 1)
    gemm_swiglu_kernel(const __grid_constant__ CUtensorMap tx, const __grid_constant__ CUtensorMap tw, Params p) {
#if defined(__CUDA_ARCH__) && defined(__CUDA_ARCH_FEAT_SM90_ALL)
  extern __shared__ unsigned char smem_raw[];
  const unsigned base = (mma::smem_u32(smem_raw) + 1023u) & ~1023u;
  const unsigned bars = base + kStages * kStageBytes;
  auto full = [&](int s) { return bars + 8u * s; };
  auto empty = [&](int s) { return bars + 8u * (kStages + s); };
  const int wg = threadIdx.x / 128;
  const int k_tiles = (p.k + kBK - 1) / kBK;
  const int rank = kCluster == 2 ? static_cast<int>(cluster_rank()) : 0;
  const int unit0 = static_cast<int>(blockIdx.x) / kCluster, unit_step = static_cast<int>(gridDim.x) / kCluster;
  // Work unit u: token tile and first output column of this block.
  auto tile_of = [&](int u, int& m0, int& j0) {
    if constexpr (kCluster == 2) {
      m0 = (2 * (u % p.m_pairs) + rank) * kBM;
      j0 = (u / p.m_pairs) * kBN;
    } else {
      m0 = (u % p.m_tiles) * kBM;
      j0 = (u / p.m_tiles) * kBN;
    }
  };

  if (threadIdx.x == 0) {
    for (int s = 0; s < kStages; ++s) {
      mbar_init(full(s), 1);                 // the producer's arrive (with the copies' byte count)
      mbar_init(empty(s), 8 * kCluster);     // one arrive per consumer warp of every block it feeds
    }
    mbar_init_fence();
  }
  if constexpr (kCluster == 2) {
    cluster_sync();  // both blocks' barriers exist before either copies into or arrives on them
  } else {
    __syncthreads();
  }
  pdl_wait();  // x comes from the kernel before
  pdl_launch_dependents();

  if (wg == 0) {
    asm volatile("setmaxnreg.dec.sync.aligned.u32 40;\n" ::: "memory");
    if (threadIdx.x == 0) {
      prefetch_map(&tx);
      prefetch_map(&tw);
      int it = 0;
      for (int u = unit0; u < p.units; u += unit_step) {
        int m0, j0;
        tile_of(u, m0, j0);
        for (int kt = 0; kt < k_tiles; ++kt, ++it) {
          const int s = it % kStages, use = it / kStages;
          if (use > 0) mbar_wait(empty(s), (use - 1) & 1);
          const unsigned sx = base + s * kStageBytes, sw = sx + kXBytes;
          mbar_expect_tx(full(s), kStageBytes);  // out-of-range rows and columns arrive as zeros, counted
          load_2d(sx, &tx, kt * kBK, m0, full(s));
          if constexpr (kCluster == 2) {
            load_2d_multicast(sw + rank * kWHalfBytes, &tw, kt * kBK, rank * p.ff + j0, full(s));
          } else {
            load_2d(sw, &tw, kt * kBK, j0, full(s));
            load_2d(sw + kWHalfBytes, &tw, kt * kBK, p.ff + j0, full(s));
          }
        }
      }
    }
  } else {
    asm volatile("setmaxnreg.inc.sync.aligned.u32 232;\n" ::: "memory");
    const int c = wg - 1;  // this warpgroup's tokens: 64c .. 64c + 63 of the tile
    const int warp = (threadIdx.x / 32) % 4, lane = threadIdx.x % 32, g = lane >> 2, t = lane & 3;
    // Hands stage s back to the producers of every block whose copies wrote into it.
    auto release = [&](int s) {
      if (lane == 0) {
        mbar_arrive(empty(s));
        if constexpr (kCluster == 2) mbar_arrive_remote(empty(s), rank ^ 1);
      }
    };
    float d[128];
    int it = 0;
    for (int u = unit0; u < p.units; u += unit_step) {
      int m0, j0;
      tile_of(u, m0, j0);
#pragma unroll
      for (int i = 0; i < 128; ++i) d[i] = 0.0f;
      for (int kt = 0; kt < k_tiles; ++kt, ++it) {
        const int s = it % kStages;
        mbar_wait(full(s), (it / kStages) & 1);
        const unsigned sx = base + s * kStageBytes + c * 64 * 128, sw = base + s * kStageBytes + kXBytes;
        wgmma::fence();
#pragma unroll
        for (int kk = 0; kk < kBK / 16; ++kk) {
          const std::uint64_t da = wgmma::desc_sw128(sx + kk * 32, 16, 1024);
          const std::uint64_t db = wgmma::desc_sw128(sw + kk * 32, 16, 1024);
          if constexpr (kF16) {
            wgmma::wgmma_m64n256k16_ss_f16(d, da, db);
          } else {
            wgmma::wgmma_m64n256k16_ss_bf16(d, da, db);
          }
        }
        wgmma::commit();
        wgmma::wait<1>();  // the stage before this one has been read: hand it back
        if (kt > 0) release((it - 1) % kStages);
      }
      wgmma::wait<0>();
      wgmma::fence_operands(d);
      if (k_tiles > 0) release((it - 1) % kStages);

      // Epilogue: row r0 (and r0 + 8), columns j0 + 8j + 2t, +1.
      const int r0 = m0 + c * 64 + warp * 16 + g;
      auto* out = static_cast<unsigned*>(p.out);  // pairs of 16-bit outputs; ff is even
      const std::size_t half_ff = static_cast<std::size_t>(p.ff) / 2;
#pragma unroll
      for (int j = 0; j < 16; ++j) {
        const int col2 = (j0 + 8 * j + 2 * t) / 2;
        if (r0 < p.n)
          out[r0 * half_ff + col2] =
              pack_out<kF16>(silu_mul(d[4 * j], d[4 * j + 64]), silu_mul(d[4 * j + 1], d[4 * j + 65]));
        if (r0 + 8 < p.n)
          out[(r0 + 8) * half_ff + col2] =
              pack_out<kF16>(silu_mul(d[4 * j + 2], d[4 * j + 66]), silu_mul(d[4 * j + 3], d[4 * j + 67]));
      }
    }
  }
  // Neither block of a cluster leaves while the other may still copy into it or arrive on its barriers.
  if constexpr (kCluster == 2) cluster_sync();
#else
  (void)tx;
  (void)tw;
  (void)p;  // built only for sm_90a; never launched on anything else
#endif
}

template <bool kF16, int kCluster>
cudaError_t launch_variant(const CUtensorMap& tx, const CUtensorMap& tw, Params p, int sms, cudaStream_t stream) {
  auto kernel = gemm_swiglu_kernel<kF16, kCluster>;
  if (const cudaError_t e = cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, kSmem);
      e != cudaSuccess)
    return e;
  cudaLaunchConfig_t cfg{};
  cfg.blockDim = dim3(kThreads);
  cfg.dynamicSmemBytes = kSmem;
  cfg.stream = stream;
  cudaLaunchAttribute attr[2];
  attr[0].id = cudaLaunchAttributeProgrammaticStreamSerialization;
  attr[0].val.programmaticStreamSerializationAllowed = pdl_enabled() ? 1 : 0;
  attr[1].id = cudaLaunchAttributeClusterDimension;
  attr[1].val.clusterDim.x = kCluster;
  attr[1].val.clusterDim.y = 1;
  attr[1].val.clusterDim.z = 1;
  cfg.attrs = attr;
  cfg.numAttrs = kCluster > 1 ? 2 : 1;
  // Persistent: as many clusters as fit at once (an SM left over in a GPC of odd size stays idle).
  int clusters = sms / kCluster;
  cfg.gridDim = dim3(clusters * kCluster);
  if (kCluster > 1) {
    int fit = 0;
    if (cudaOccupancyMaxActiveClusters(&fit, kernel, &cfg) == cudaSuccess && fit > 0) clusters = fit;
    (void)cudaGetLastError();
  }
  if (clusters > p.units) clusters = p.units;
  cfg.gridDim = dim3(clusters * kCluster);
  return cudaLaunchKernelEx(&cfg, kernel, tx, tw, p);
}

}  // namespace

cudaError_t launch_gemm_swiglu_sm90a(const CUtensorMap& tx, const CUtensorMap& tw, const GemmSwigluArgs& a, int sms,
                                     cudaStream_t stream) {
  Params p{a.out, a.n, a.ff, a.k, (a.n + kBM - 1) / kBM, 0, 0};
  p.m_pairs = (p.m_tiles + 1) / 2;
  const int n_tiles = a.ff / kBN;
  if (a.cluster == 1) {
    p.units = p.m_tiles * n_tiles;
    return a.f16 ? launch_variant<true, 1>(tx, tw, p, sms, stream) : launch_variant<false, 1>(tx, tw, p, sms, stream);
  }
  p.units = p.m_pairs * n_tiles;
  return a.f16 ? launch_variant<true, 2>(tx, tw, p, sms, stream) : launch_variant<false, 2>(tx, tw, p, sms, stream);
}

}  // namespace cosmos::kernels
