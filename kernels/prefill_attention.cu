#include "kernels/prefill_attention.cuh"

#include <cmath>
#include <cstdint>

#include "kernels/device_info.cuh"
#include "kernels/mma_bf16.cuh"
#include "kernels/pdl.cuh"
#include "kernels/prefill_attention_tile.cuh"
#include "kernels/tensor_map.cuh"
#if COSMOS_HAVE_SM90A
#include "kernels/prefill_attention_tma_sm90a.cuh"
#include "kernels/prefill_attention_wgmma.cuh"
#endif

namespace cosmos::kernels {
namespace {

using namespace mma;

// Block: 4 warps, 64 query rows (warp w owns rows 16w .. 16w + 15) of one (sequence, query head).
// Shared memory: the Q tile (64 rows x D), one K tile and one V tile (64 keys x D), bf16: 48 KB for
// D = 128, 24 KB for D = 64 (static, no opt-in). Q is read from shared memory at each k step rather
// than held in registers: that keeps the kernel at ~166 registers, 3 blocks (12 warps) per SM, which
// measured faster on an H200 than Q in registers at 216 registers and 2 blocks per SM. Rows of 16-byte
// chunks are XOR-swizzled with (row & 7) so that ldmatrix (8 rows, one chunk each) and the output
// staging stores are free of bank conflicts.
//
// Pipeline (one barrier pair per key tile): the V tile's copy runs under S = Q K^T and the softmax,
// the next K tile's copy under O += P V.
constexpr int kWarps = 4;
constexpr int kThreads = kWarps * 32;
constexpr int kBM = kPrefillAttentionTileQ;
constexpr int kBN = kPrefillAttentionTileKv;
static_assert(kBM == 16 * kWarps, "one m16 row slab per warp");
static_assert(kBN % 16 == 0, "key tiles are whole k16 steps");

// The [rows][D] tiles' layout (kernels/mma_bf16.cuh, tile_offset).
template <int D>
struct Layout {
  __device__ unsigned operator()(int r, int c) const { return tile_offset<D>(r, c); }
};

// kF16: the output in fp16 instead of bf16 (only the final packing differs).
template <int D, bool kF16>
__global__ void __launch_bounds__(kThreads) prefill_attention_kernel(PrefillAttentionArgs a) {
  constexpr int kTileBytes = kBN * D * 2;  // one K or V tile (= the Q tile)
  static_assert(kBM == kBN, "the Q, K, V and output tiles share one shape");
  __shared__ __align__(128) unsigned char smem[3 * kTileBytes];
  const unsigned sK = smem_u32(smem), sV = sK + kTileBytes, sQ = sV + kTileBytes;
  const Layout<D> layout;

  pdl_wait();
  pdl_launch_dependents();

  prefill::Tile<D, kThreads> tile;
  if (!tile.init(a, kBM)) return;
  const int ctx = tile.ctx, r0 = tile.r0;
  const int n_kt = (tile.kv_end + kBN - 1) / kBN;
  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;

  tile.template load_q<kBM>(a, sQ, tid, layout);
  cp_async_commit();
  prefill::KvRows<D, kThreads, kBN> kv;
  kv.find(tile, 0, tid);
  kv.load(sK, tile.k_head, tile, tid, layout);
  cp_async_commit();

  const int g = lane >> 2, t = lane & 3;
  const int lim0 = ctx + r0 + warp * 16 + g;  // last key visible to row g of this warp's slab (row g + 8: lim0 + 8)
  const float scale_log2 = a.scale * 1.4426950408889634f;
  float o[D / 8][4];
#pragma unroll
  for (int dt = 0; dt < D / 8; ++dt) o[dt][0] = o[dt][1] = o[dt][2] = o[dt][3] = 0.0f;
  float m[2] = {-INFINITY, -INFINITY};  // running max of the raw scores of rows g, g + 8
  float l[2] = {0.0f, 0.0f};            // running sum of this lane's probabilities (quad-reduced at the end)

  for (int kt = 0; kt < n_kt; ++kt) {
    cp_async_wait<0>();  // K tile kt (and, first, the Q tile) has landed
    __syncthreads();     // ... for every thread; and everyone is done reading V tile kt - 1
    kv.load(sV, tile.v_head, tile, tid, layout);
    cp_async_commit();

    // S = Q K^T: 16 rows x 64 keys per warp.
    float s[kBN / 8][4];
#pragma unroll
    for (int nt = 0; nt < kBN / 8; ++nt) s[nt][0] = s[nt][1] = s[nt][2] = s[nt][3] = 0.0f;
#pragma unroll
    for (int ks = 0; ks < D / 16; ++ks) {
      unsigned qf[4];  // A fragment: this warp's 16 rows, dims 16 ks .. 16 ks + 15
      ldmatrix_x4(sQ + tile_offset<D>(warp * 16 + (lane & 15), ks * 2 + (lane >> 4)), qf[0], qf[1], qf[2], qf[3]);
#pragma unroll
      for (int np = 0; np < kBN / 16; ++np) {
        // Matrices: keys +0..7 dims +0..7 | keys +0..7 dims +8..15 | keys +8..15 dims +0..7 | keys +8..15 dims +8..15.
        unsigned b0, b1, b2, b3;
        ldmatrix_x4(sK + tile_offset<D>(np * 16 + (lane & 7) + ((lane >> 4) << 3), ks * 2 + ((lane >> 3) & 1)), b0, b1,
                    b2, b3);
        mma_bf16(s[2 * np], qf, b0, b1);
        mma_bf16(s[2 * np + 1], qf, b2, b3);
      }
    }

    // Causal mask, only on tiles that reach past the first row's limit (keys >= kv_end are past every
    // valid row's limit too; the zero rows past q_len are never stored). Then the online softmax.
    auto sv = [&](int nt, int e) -> float& { return s[nt][e]; };
    auto ov = [&](int dt, int e) -> float& { return o[dt][e]; };
    const int k0 = kt * kBN;
    if (k0 + kBN - 1 > ctx + r0) prefill::causal_mask<kBN>(sv, k0, lim0, t);
    unsigned p[kBN / 16][4];
    prefill::online_softmax<kBN, D>(sv, ov, m, l, scale_log2, p);

    cp_async_wait<0>();  // V tile kt has landed
    __syncthreads();     // ... for every thread; and everyone is done reading K tile kt
    if (kt + 1 < n_kt) {
      kv.find(tile, kt + 1, tid);
      kv.load(sK, tile.k_head, tile, tid, layout);
      cp_async_commit();
    }

    // O += P V: V is [key][dim] in shared memory, read transposed into col-major B fragments.
#pragma unroll
    for (int kk = 0; kk < kBN / 16; ++kk) {
#pragma unroll
      for (int dp = 0; dp < D / 16; ++dp) {
        // Matrices: keys +0..7 dims +0..7 | keys +8..15 dims +0..7 | keys +0..7 dims +8..15 | keys +8..15 dims +8..15.
        unsigned b0, b1, b2, b3;
        ldmatrix_x4_trans(sV + tile_offset<D>(kk * 16 + (lane & 7) + (((lane >> 3) & 1) << 3), dp * 2 + (lane >> 4)),
                          b0, b1, b2, b3);
        mma_bf16(o[2 * dp], p[kk], b0, b1);
        mma_bf16(o[2 * dp + 1], p[kk], b2, b3);
      }
    }
  }

  // Normalize, stage the bf16 output tile in the Q buffer, then 16-byte coalesced stores.
  float inv[2];
#pragma unroll
  for (int i = 0; i < 2; ++i) {
    l[i] += __shfl_xor_sync(0xffffffffu, l[i], 1);
    l[i] += __shfl_xor_sync(0xffffffffu, l[i], 2);
    inv[i] = 1.0f / l[i];  // > 0: key 0 is visible to every row
  }
  __syncthreads();  // everyone is done reading Q (no copies are in flight)
  const int orow = warp * 16 + g;
#pragma unroll
  for (int dt = 0; dt < D / 8; ++dt) {
    const float v0 = o[dt][0] * inv[0], v1 = o[dt][1] * inv[0], v2 = o[dt][2] * inv[1], v3 = o[dt][3] * inv[1];
    const unsigned lo = kF16 ? pack_f16(v0, v1) : pack_bf16(v0, v1);
    const unsigned hi = kF16 ? pack_f16(v2, v3) : pack_bf16(v2, v3);
    asm volatile("st.shared.u32 [%0], %1;\n" ::"r"(sQ + tile_offset<D>(orow, dt) + t * 4), "r"(lo) : "memory");
    asm volatile("st.shared.u32 [%0], %1;\n" ::"r"(sQ + tile_offset<D>(orow + 8, dt) + t * 4), "r"(hi) : "memory");
  }
  __syncthreads();
  tile.template store_out<kBM>(a, smem + 2 * kTileBytes, tid, layout);
}

}  // namespace

bool prefill_attention_supports(int heads, int kv_heads, int head_dim) {
  return (head_dim == 64 || head_dim == 128) && heads > 0 && kv_heads > 0 && heads % kv_heads == 0;
}

bool prefill_attention_wgmma_available() {
#if COSMOS_HAVE_SM90A
  return current_device_is(9, 0);
#else
  return false;
#endif
}

bool prefill_attention_tma_supports(const PrefillAttentionArgs& a) {
  const auto aligned = [](const void* ptr) { return reinterpret_cast<std::uintptr_t>(ptr) % 16 == 0; };
  return prefill_attention_wgmma_available() && tensor_maps_available() && a.head_dim == 128 && a.block_size >= 8 &&
         a.block_size <= 128 && (a.block_size & (a.block_size - 1)) == 0 && a.kv_slots > 0 && a.n > 0 &&
         aligned(a.q) && aligned(a.k_cache) && aligned(a.v_cache);
}

namespace {

// The TMA kernel: its three maps, then the launch; false (the error consumed) when either is refused.
bool launch_tma(const PrefillAttentionArgs& a, cudaStream_t stream) {
#if COSMOS_HAVE_SM90A
  int dev = 0, sms = 0;
  if (cudaGetDevice(&dev) != cudaSuccess || cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev) != cudaSuccess ||
      sms <= 0)
    return (void)cudaGetLastError(), false;
  const std::uint64_t D = 128, row = static_cast<std::uint64_t>(a.heads) * D * 2;
  const std::uint64_t q_dims[3] = {D, static_cast<std::uint64_t>(a.heads), static_cast<std::uint64_t>(a.n)};
  const std::uint64_t q_strides[2] = {D * 2, row};
  const std::uint32_t q_box[3] = {64, 1, kPrefillTmaRows};
  const std::uint64_t kv_dims[3] = {D, static_cast<std::uint64_t>(a.kv_heads), static_cast<std::uint64_t>(a.kv_slots)};
  const std::uint64_t kv_strides[2] = {D * 2, static_cast<std::uint64_t>(a.kv_heads) * D * 2};
  const std::uint32_t kv_box[3] = {64, 1, static_cast<std::uint32_t>(a.block_size)};
  CUtensorMap tq{}, tk{}, tv{};
  if (!encode_tensor_map_16bit(tq, a.q, 3, q_dims, q_strides, q_box, false) ||
      !encode_tensor_map_16bit(tk, a.k_cache, 3, kv_dims, kv_strides, kv_box, false) ||
      !encode_tensor_map_16bit(tv, a.v_cache, 3, kv_dims, kv_strides, kv_box, false))
    return false;
  if (launch_prefill_attention_tma_sm90a(tq, tk, tv, a, sms, stream) != cudaSuccess) return (void)cudaGetLastError(), false;
  return true;
#else
  (void)a;
  (void)stream;
  return false;
#endif
}

}  // namespace

std::size_t launch_prefill_attention(const PrefillAttentionArgs& a, cudaStream_t stream) {
  if (a.seqs <= 0 || a.max_q_len <= 0 || a.block_size <= 0 ||
      !prefill_attention_supports(a.heads, a.kv_heads, a.head_dim))
    return 0;
  PrefillAttentionKernel k = a.kernel;
  if (k == PrefillAttentionKernel::automatic)
    k = prefill_attention_tma_supports(a)           ? PrefillAttentionKernel::tma
        : prefill_attention_wgmma_available() ? PrefillAttentionKernel::wgmma
                                              : PrefillAttentionKernel::mma;
  if (k == PrefillAttentionKernel::tma) {
    if (!prefill_attention_tma_supports(a) || !launch_tma(a, stream)) return 0;
  } else if (k == PrefillAttentionKernel::wgmma) {
    if (!prefill_attention_wgmma_available()) return 0;
#if COSMOS_HAVE_SM90A
    launch_prefill_attention_wgmma(a, stream);
#endif
  } else {
    const dim3 grid(a.heads, (a.max_q_len + kBM - 1) / kBM, a.seqs);
    if (a.head_dim == 128)
      launch_pdl(a.out_f16 ? prefill_attention_kernel<128, true> : prefill_attention_kernel<128, false>, grid,
                 dim3(kThreads), 0, stream, a);
    else
      launch_pdl(a.out_f16 ? prefill_attention_kernel<64, true> : prefill_attention_kernel<64, false>, grid,
                 dim3(kThreads), 0, stream, a);
  }
  const std::size_t kv_len = a.max_kv_len > 0 ? a.max_kv_len : a.max_q_len;
  return static_cast<std::size_t>(a.n) * a.heads * a.head_dim * 2 * 2 +
         static_cast<std::size_t>(a.seqs) * a.kv_heads * kv_len * a.head_dim * 2 * 2;
}

}  // namespace cosmos::kernels
