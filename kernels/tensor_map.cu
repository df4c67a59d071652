// TMA tensor maps (kernels/tensor_map.cuh).
#include "kernels/tensor_map.cuh"

#include <cudaTypedefs.h>
#include <cuda_runtime.h>

namespace cosmos::kernels {
namespace {

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

}  // namespace

bool tensor_maps_available() { return encoder() != nullptr; }

bool encode_tensor_map_16bit(CUtensorMap& map, const void* ptr, int rank, const std::uint64_t* dims,
                             const std::uint64_t* strides, const std::uint32_t* box, bool f16) {
  const auto fn = encoder();
  if (!fn || rank < 2 || rank > 3 || box[0] * 2 > 128) return false;
  cuuint64_t d[3] = {}, s[2] = {};
  cuuint32_t b[3] = {}, e[3] = {1, 1, 1};
  for (int i = 0; i < rank; ++i) {
    d[i] = dims[i];
    b[i] = box[i];
  }
  for (int i = 0; i + 1 < rank; ++i) s[i] = strides[i];
  return fn(&map, f16 ? CU_TENSOR_MAP_DATA_TYPE_FLOAT16 : CU_TENSOR_MAP_DATA_TYPE_BFLOAT16, static_cast<cuuint32_t>(rank),
            const_cast<void*>(ptr), d, s, b, e, CU_TENSOR_MAP_INTERLEAVE_NONE, CU_TENSOR_MAP_SWIZZLE_128B,
            CU_TENSOR_MAP_L2_PROMOTION_L2_256B, CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE) == CUDA_SUCCESS;
}

}  // namespace cosmos::kernels
