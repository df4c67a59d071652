// The int8 KV cache's rows on the GPU, both ways. quantize_kv_row_warp: one warp turns one fp32 row of the KV cache into the int8 cache's row and scale, with the
// operations of cosmos::quantize_kv_row (cosmos/kv_format.h), so both give the same bytes for the
// same fp32 row: amax = max |x|; scale = amax / 127 and q = rint(x * (127 / amax)) clamped to +-127;
// a zero row gets scale 0, a row with a non-finite value scale NaN; both get q = 0.
#pragma once

#include <cuda_bf16.h>

#include <cstdint>

namespace cosmos::kernels {

struct NoEmit {
  __device__ void operator()(int, float, int) const {}
};

// Every lane of the warp calls it with the same x (shared or global memory), n, q and scale.
// x: [n] fp32; q: [n] int8 (4-byte aligned); n a multiple of 4. Each lane quantizes the runs of
// four values at 4 x lane + 128 k and stores each run as one 32-bit word. Returns the scale to
// every lane, and calls emit(i, scale, q_i) for each value the lane made, so a caller can use the
// quantized row without reading it back from memory.
template <typename Emit = NoEmit>
__device__ __forceinline__ float quantize_kv_row_warp(const float* x, int n, std::int8_t* q, float* scale,
                                                      Emit emit = {}) {
  const int lane = threadIdx.x & 31;
  float amax = 0.0f;
  bool finite = true;
  for (int i = lane; i < n; i += 32) {
    amax = fmaxf(amax, fabsf(x[i]));
    finite = finite && isfinite(x[i]);
  }
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) amax = fmaxf(amax, __shfl_xor_sync(0xffffffffu, amax, o));
  finite = __all_sync(0xffffffffu, finite);
  const bool zero = !finite || amax == 0.0f;
  const float inv = zero ? 0.0f : __fdiv_rn(127.0f, amax);
  const float s = finite ? __fdiv_rn(amax, 127.0f) : __int_as_float(0x7fc00000);
  for (int i = 4 * lane; i < n; i += 128) {
    std::uint32_t word = 0;
#pragma unroll
    for (int j = 0; j < 4; ++j) {
      const int v = zero ? 0 : static_cast<int>(fminf(fmaxf(rintf(__fmul_rn(x[i + j], inv)), -127.0f), 127.0f));
      word |= (static_cast<std::uint32_t>(v) & 0xffu) << (8 * j);
      emit(i + j, s, v);
    }
    *reinterpret_cast<std::uint32_t*>(q + i) = word;
  }
  if (lane == 0) *scale = s;
  return s;
}

// 16 int8 values (one 16-byte load) times their row's scale as 16 bf16 (two 16-byte stores): the
// fp32 product rounded to nearest, the rounding every reader of the int8 cache uses (the decode
// attention's tiles, kv_dequant.cu's bf16 copy for prompts).
__device__ __forceinline__ void expand_kv_i8(const uint4 q, float s, uint4& lo, uint4& hi) {
  const unsigned w[4] = {q.x, q.y, q.z, q.w};
  unsigned out[8];
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    float f[4];
#pragma unroll
    for (int b = 0; b < 4; ++b) f[b] = s * static_cast<float>(static_cast<int>(w[i] << (24 - 8 * b)) >> 24);
    const __nv_bfloat162 p0 = __floats2bfloat162_rn(f[0], f[1]), p1 = __floats2bfloat162_rn(f[2], f[3]);
    out[2 * i] = *reinterpret_cast<const unsigned*>(&p0);
    out[2 * i + 1] = *reinterpret_cast<const unsigned*>(&p1);
  }
  lo = make_uint4(out[0], out[1], out[2], out[3]);
  hi = make_uint4(out[4], out[5], out[6], out[7]);
}

}  // namespace cosmos::kernels
