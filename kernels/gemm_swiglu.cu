// Host side of the fused gate/up + SwiGLU product (kernels/gemm_swiglu.cuh): checks, the TMA tensor
// maps (encoded per launch by the driver's cuTensorMapEncodeTiled, fetched through the runtime so
// nothing links libcuda; ~1 us against a launch of ~1 ms), then the sm_90a launcher.
#include "kernels/gemm_swiglu.cuh"

#include <cstdint>

#include <cuda.h>
#include <cudaTypedefs.h>

#include "kernels/device_info.cuh"

#if COSMOS_HAVE_SM90A
#include "kernels/gemm_swiglu_sm90a.cuh"
#endif

namespace cosmos::kernels {
namespace {

#if COSMOS_HAVE_SM90A
PFN_cuTensorMapEncodeTiled_v12000 encoder() {
  static const PFN_cuTensorMapEncodeTiled_v12000 fn = [] {
    void* p = nullptr;
    cudaDriverEntryPointQueryResult q{};
    if (cudaGetDriverEntryPointByVersion("cuTensorMapEncodeTiled", &p, 12000, cudaEnableDefault, &q) != cudaSuccess ||
        q != cudaDriverEntryPointSuccess) {
      (void)cudaGetLastError();
      p = nullptr;
    }
    return reinterpret_cast<PFN_cuTensorMapEncodeTiled_v12000>(p);
  }();
  return fn;
}

// A [rows, k] row-major 16-bit matrix read in boxes of 64 columns x 128 rows, 128-byte swizzled.
bool encode(PFN_cuTensorMapEncodeTiled_v12000 fn, CUtensorMap& map, const void* ptr, int rows, int k, bool f16) {
  const cuuint64_t dims[2] = {static_cast<cuuint64_t>(k), static_cast<cuuint64_t>(rows)};
  const cuuint64_t strides[1] = {static_cast<cuuint64_t>(k) * 2};
  const cuuint32_t box[2] = {kGemmSwigluBlockK, kGemmSwigluBlockRows};
  const cuuint32_t elem_strides[2] = {1, 1};
  return fn(&map, f16 ? CU_TENSOR_MAP_DATA_TYPE_FLOAT16 : CU_TENSOR_MAP_DATA_TYPE_BFLOAT16, 2, const_cast<void*>(ptr),
            dims, strides, box, elem_strides, CU_TENSOR_MAP_INTERLEAVE_NONE, CU_TENSOR_MAP_SWIZZLE_128B,
            CU_TENSOR_MAP_L2_PROMOTION_L2_256B, CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE) == CUDA_SUCCESS;
}
#endif

}  // namespace

bool gemm_swiglu_available() {
#if COSMOS_HAVE_SM90A
  return current_device_is(9, 0) && encoder() != nullptr;
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
  if (!encode(encoder(), tx, a.x, a.n, a.k, a.f16) || !encode(encoder(), tw, a.w, 2 * a.ff, a.k, a.f16)) return 0;
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
