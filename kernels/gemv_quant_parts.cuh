// Helpers of kernels/gemv_quant_vec.cuh's gemv_q_vec: the four-sums butterfly warp_sum4, the
// register budget kMinBlocks and the staged planes' stride staged_plane (also used by gemv_quant.cu's
// plan for the shared memory). Included by gemv_quant_vec.cuh only, inside gemv_quant.cu's anonymous
// namespace, after the formats and the staging modes (kXSmemBig) are in scope.
#pragma once

// Four warp sums in one butterfly, 6 shuffles on one dependent chain of 5 instead of 4 chains of 5:
// lane l gets the sum over the warp of v[(l >> 3) & 3]. For the int4 prologue's group sums of the
// down projection's 74 KB x, 4 groups per batch: one after another, their shuffles were ~8% of the
// kernel's stall samples (ncu source view). In one butterfly: int4 down 17.0 -> 16.2 us alone, int4
// decode @0 571.6 -> 578.7 tok/s, @4096 482.6 -> 490.6 (session 35's engine A/B, means of 3 rounds).
__device__ __forceinline__ float warp_sum4(const float (&v)[4]) {
  const unsigned lane = threadIdx.x & 31u;
  const bool h16 = (lane & 16u) != 0, h8 = (lane & 8u) != 0;
  // Lanes < 16 keep values 0 and 1 and send 2 and 3; lanes >= 16 the other way round.
  const float a0 = (h16 ? v[2] : v[0]) + __shfl_xor_sync(0xffffffffu, h16 ? v[0] : v[2], 16);
  const float a1 = (h16 ? v[3] : v[1]) + __shfl_xor_sync(0xffffffffu, h16 ? v[1] : v[3], 16);
  float a = (h8 ? a1 : a0) + __shfl_xor_sync(0xffffffffu, h8 ? a0 : a1, 8);
#pragma unroll
  for (int off = 4; off > 0; off >>= 1) a += __shfl_xor_sync(0xffffffffu, a, off);
  return a;
}

// Resident blocks per SM the kernel is built for (its register budget): 2 (128 registers) with the
// big staging or more than 32 weight registers (kR x kU vectors: int4 4 x 7, int8 / fp8 2 x 7), else 4;
// with kBW warps per block instead of 8, that times 8 / kBW (16 warps: one block, the same registers).
template <typename F, int kStage, int kR, int kU>
constexpr int kMinBlocks = kStage == kXSmemBig || kR * kU * static_cast<int>(sizeof(typename F::Vec)) / 4 > 32 ? 2 : 4;

// Float4s per plane of staged x: vecs, padded so that the staging writes (thread f writes float4 f
// of x to plane f % kP, slot f / kP; 8 threads per 128-byte wavefront) hit 8 different 4-bank
// groups: with (ps % 8) * kP == 8 the planes start 32 / kP banks apart. Unpadded (ps = vecs = 224
// for int8, a multiple of 8) every plane starts on bank 0: 2-way (int8 / fp8) and 8-way (int4)
// conflicts, which ncu counted as 35-42% excess shared-memory wavefronts.
__host__ __device__ constexpr int staged_plane(int vecs, int kp) { return vecs + ((8 / kp - vecs % 8) + 8) % 8; }
