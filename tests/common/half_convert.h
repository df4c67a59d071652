// Test helper: fp32 <-> bf16 / fp16 on the host, by element type (to_f(T), from_f<T>(float)), for
// tests templated on a kernel's half-precision type.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>

namespace cosmos::testing {

inline float to_f(__nv_bfloat16 v) { return __bfloat162float(v); }
inline float to_f(__half v) { return __half2float(v); }

template <typename T>
T from_f(float v);
template <>
inline __nv_bfloat16 from_f(float v) {
  return __float2bfloat16(v);
}
template <>
inline __half from_f(float v) {
  return __float2half(v);
}

}  // namespace cosmos::testing
