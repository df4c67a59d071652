// One warp turns one fp32 row of the KV cache into the int8 cache's row and scale, with the
// operations of cosmos::quantize_kv_row (cosmos/kv_format.h), so both give the same bytes for the
// same fp32 row: amax = max |x|; scale = amax / 127 and q = rint(x * (127 / amax)) clamped to +-127;
// a zero row gets scale 0, a row with a non-finite value scale NaN; both get q = 0.
#pragma once

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

}  // namespace cosmos::kernels
