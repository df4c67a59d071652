#include "kernels/embedding.cuh"

#include "kernels/pdl.cuh"

namespace cosmos::kernels {
namespace {

__global__ void embedding_kernel(const __nv_bfloat16* __restrict__ table, const std::int32_t* __restrict__ ids,
                                 float* __restrict__ out, int hidden) {
  pdl_wait();
  pdl_launch_dependents();
  const std::int32_t id = ids[blockIdx.x];
  if (id < 0) return;
  const __nv_bfloat16* row = table + static_cast<std::size_t>(id) * hidden;
  float* o = out + static_cast<std::size_t>(blockIdx.x) * hidden;
  for (int i = threadIdx.x; i < hidden; i += blockDim.x) o[i] = __bfloat162float(row[i]);
}

}  // namespace

std::size_t launch_embedding(const __nv_bfloat16* table, const std::int32_t* ids, float* out, int n, int hidden,
                             cudaStream_t stream) {
  if (n <= 0) return 0;
  launch_pdl(embedding_kernel, n, 256, 0, stream, table, ids, out, hidden);
  return static_cast<std::size_t>(n) * (4 + hidden * 6);
}

}  // namespace cosmos::kernels
