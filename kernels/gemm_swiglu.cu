// Host side of the fused gate/up + SwiGLU product (kernels/gemm_swiglu.cuh): checks, the TMA tensor
// maps (kernels/tensor_map.cuh, encoded per launch: ~1 us against a launch of ~1 ms), then the
// sm_90a launcher.
#include "kernels/gemm_swiglu.cuh"

#include <cstdint>

#include <cuda.h>

#include "kernels/device_info.cuh"
#include "kernels/tensor_map.cuh"

#if COSMOS_HAVE_SM90A
#include "kernels/gemm_swiglu_sm90a.cuh"
#endif

namespace cosmos::kernels {
namespace {

#if COSMOS_HAVE_SM90A
// A [rows, k] row-major 16-bit matrix read in boxes of 64 columns x 128 rows, 128-byte swizzled.
bool encode(CUtensorMap& map, const void* ptr, int rows, int k, bool f16) {
  const std::uint64_t dims[2] = {static_cast<std::uint64_t>(k), static_cast<std::uint64_t>(rows)};
  const std::uint64_t strides[1] = {static_cast<std::uint64_t>(k) * 2};
  const std::uint32_t box[2] = {kGemmSwigluBlockK, kGemmSwigluBlockRows};
  return encode_tensor_map_16bit(map, ptr, 2, dims, strides, box, f16);
}
#endif

}  // namespace

bool gemm_swiglu_available() {
#if COSMOS_HAVE_SM90A
  return current_device_is(9, 0) && tensor_maps_available();
#else
  return false;
#endif
}

bool gemm_swiglu_supports(int ff, int k) { return ff > 0 && ff % 128 == 0 && k > 0 && k % 8 == 0; }

std::size_t launch_gemm_swiglu(const GemmSwigluArgs& a, cudaStream_t stream) {
  if (a.n <= 0 || !gemm_swiglu_supports(a.ff, a.k) || !a.x || !a.w || !a.out) return 0;
  if (reinterpret_cast<std::uintptr_t>(a.x) % 16 || reinterpret_cast<std::uintptr_t>(a.w) % 16 ||
      reinterpret_cast<std::uintptr_t>(a.out) % 4)
    return 0;
#if COSMOS_HAVE_SM90A
  if (!gemm_swiglu_available()) return 0;
  int dev = 0, sms = 0;
  if (cudaGetDevice(&dev) != cudaSuccess || cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev) != cudaSuccess ||
      sms <= 0)
    return 0;
  CUtensorMap tx{}, tw{};
  if (!encode(tx, a.x, a.n, a.k, a.f16) || !encode(tw, a.w, 2 * a.ff, a.k, a.f16)) return 0;
  if (launch_gemm_swiglu_sm90a(tx, tw, a, sms, stream) != cudaSuccess) {
    (void)cudaGetLastError();  // a refused launch (say, no room for a cluster of two): the caller falls back
    return 0;
  }
  return static_cast<std::size_t>(a.n) * a.k * 2 + static_cast<std::size_t>(2) * a.ff * a.k * 2 +
         static_cast<std::size_t>(a.n) * a.ff * 2;
#else
  (void)stream;
  return 0;
#endif
}

}  // namespace cosmos::kernels
