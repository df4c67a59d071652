#include "kernels/swiglu.cuh"

#include <algorithm>

#include "kernels/pdl.cuh"

namespace cosmos::kernels {
namespace {

template <typename In, typename Out>
__global__ void swiglu_kernel(const In* __restrict__ gu, Out* __restrict__ out, int n, int ff) {
  pdl_wait();
  pdl_launch_dependents();
  const std::size_t total = static_cast<std::size_t>(n) * ff;
  for (std::size_t i = blockIdx.x * static_cast<std::size_t>(blockDim.x) + threadIdx.x; i < total;
       i += static_cast<std::size_t>(gridDim.x) * blockDim.x) {
    const std::size_t t = i / ff, c = i % ff;
    const float g = load_elem(gu, t * 2 * ff + c), u = load_elem(gu, t * 2 * ff + ff + c);
    store_elem(out, i, g / (1.0f + expf(-g)) * u);
  }
}

template <typename In>
void launch_in(const In* gu, void* out, ElemType out_type, int n, int ff, unsigned blocks, cudaStream_t stream) {
  switch (out_type) {
    case ElemType::f32:
      launch_pdl(swiglu_kernel<In, float>, blocks, 256, 0, stream, gu, static_cast<float*>(out), n, ff);
      break;
    case ElemType::bf16:
      launch_pdl(swiglu_kernel<In, __nv_bfloat16>, blocks, 256, 0, stream, gu, static_cast<__nv_bfloat16*>(out), n, ff);
      break;
    case ElemType::f16:
      launch_pdl(swiglu_kernel<In, __half>, blocks, 256, 0, stream, gu, static_cast<__half*>(out), n, ff);
      break;
  }
}

}  // namespace

std::size_t launch_swiglu(const void* gu, ElemType gu_type, void* out, ElemType out_type, int n, int ff,
                          cudaStream_t stream) {
  if (n <= 0) return 0;
  const std::size_t total = static_cast<std::size_t>(n) * ff;
  const unsigned blocks = static_cast<unsigned>(std::min<std::size_t>((total + 255) / 256, 4096));
  switch (gu_type) {
    case ElemType::f32: launch_in(static_cast<const float*>(gu), out, out_type, n, ff, blocks, stream); break;
    case ElemType::bf16: launch_in(static_cast<const __nv_bfloat16*>(gu), out, out_type, n, ff, blocks, stream); break;
    case ElemType::f16: launch_in(static_cast<const __half*>(gu), out, out_type, n, ff, blocks, stream); break;
  }
  return total * (2 * elem_size(gu_type) + elem_size(out_type));
}

}  // namespace cosmos::kernels
