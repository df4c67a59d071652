// One warp turns one fp32 row of the KV cache into the int8 cache's row and scale, with the
// operations of cosmos::quantize_kv_row (cosmos/kv_format.h), so both give the same bytes for the
// same fp32 row: amax = max |x|; scale = amax / 127 and q = rint(x * (127 / amax)) clamped to +-127;
// a zero row gets scale 0, a row with a non-finite value scale NaN; both get q = 0.
#pragma once

#include <cstdint>

namespace cosmos::kernels {

// Every lane of the warp calls it with the same x (shared or global memory), n and outputs.
__device__ __forceinline__ void quantize_kv_row_warp(const float* x, int n, std::int8_t* q, float* scale) {
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
  for (int i = lane; i < n; i += 32)
    q[i] = zero ? std::int8_t{0} : static_cast<std::int8_t>(fminf(fmaxf(rintf(__fmul_rn(x[i], inv)), -127.0f), 127.0f));
  if (lane == 0) *scale = finite ? __fdiv_rn(amax, 127.0f) : __int_as_float(0x7fc00000);
}

}  // namespace cosmos::kernels
