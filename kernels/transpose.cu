#include "kernels/transpose.cuh"

namespace cosmos::kernels {
namespace {

constexpr int kTile = 32;
constexpr int kRowsPerPass = 8;  // block of 32 x 8 threads, 4 elements per thread per tile

__global__ void __launch_bounds__(kTile * kRowsPerPass) transpose16_kernel(const std::uint16_t* __restrict__ src,
                                                                            int rows, int cols,
                                                                            std::uint16_t* __restrict__ dst) {
  __shared__ std::uint16_t tile[kTile][kTile + 1];  // +1: the column reads hit different banks
  const int c0 = blockIdx.x * kTile, r0 = blockIdx.y * kTile;
  for (int k = threadIdx.y; k < kTile; k += kRowsPerPass) {
    const int r = r0 + k, c = c0 + threadIdx.x;
    if (r < rows && c < cols) tile[k][threadIdx.x] = src[static_cast<std::size_t>(r) * cols + c];
  }
  __syncthreads();
  for (int k = threadIdx.y; k < kTile; k += kRowsPerPass) {
    const int c = c0 + k, r = r0 + threadIdx.x;  // dst row c, column r
    if (c < cols && r < rows) dst[static_cast<std::size_t>(c) * rows + r] = tile[threadIdx.x][k];
  }
}

}  // namespace

std::size_t launch_transpose16(const std::uint16_t* src, int rows, int cols, std::uint16_t* dst, cudaStream_t stream) {
  if (rows <= 0 || cols <= 0) return 0;
  const dim3 grid(static_cast<unsigned>((cols + kTile - 1) / kTile), static_cast<unsigned>((rows + kTile - 1) / kTile));
  transpose16_kernel<<<grid, dim3(kTile, kRowsPerPass), 0, stream>>>(src, rows, cols, dst);
  return 2 * static_cast<std::size_t>(rows) * static_cast<std::size_t>(cols) * 2;
}

}  // namespace cosmos::kernels
