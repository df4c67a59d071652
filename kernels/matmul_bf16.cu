#include "kernels/matmul_bf16.cuh"

namespace cosmos::kernels {
namespace {

constexpr int kTileO = 64, kTileT = 16, kTileK = 32, kThreads = 256;

__global__ void __launch_bounds__(kThreads) matmul_bf16_kernel(MatmulArgs a) {
  __shared__ float ws[kTileO][kTileK + 1];  // [64 outputs, 32 k] weights as fp32 (+1: no bank conflicts)
  __shared__ float xs[kTileT][kTileK + 1];  // [16 tokens, 32 k]
  const int o0 = blockIdx.x * kTileO, t0 = blockIdx.y * kTileT;
  // Each thread computes 4 outputs of one token: outputs o0 + (tid % 16) * 4 + {0..3}, token tid / 16.
  const int tid = threadIdx.x, tt = tid / 16, oo = (tid % 16) * 4;
  float acc[4] = {0, 0, 0, 0};
  for (int k0 = 0; k0 < a.cols; k0 += kTileK) {
    for (int i = tid; i < kTileO * kTileK; i += kThreads) {
      const int r = i / kTileK, k = i % kTileK;
      const int o = o0 + r, kk = k0 + k;
      ws[r][k] = (o < a.rows && kk < a.cols) ? __bfloat162float(a.w[static_cast<std::size_t>(o) * a.cols + kk]) : 0.0f;
    }
    for (int i = tid; i < kTileT * kTileK; i += kThreads) {
      const int r = i / kTileK, k = i % kTileK;
      const int t = t0 + r, kk = k0 + k;
      xs[r][k] = (t < a.n && kk < a.cols) ? a.x[static_cast<std::size_t>(t) * a.cols + kk] : 0.0f;
    }
    __syncthreads();
#pragma unroll 8
    for (int k = 0; k < kTileK; ++k) {
      const float xv = xs[tt][k];
#pragma unroll
      for (int j = 0; j < 4; ++j) acc[j] += ws[oo + j][k] * xv;
    }
    __syncthreads();
  }
  const int t = t0 + tt;
  if (t >= a.n) return;
#pragma unroll
  for (int j = 0; j < 4; ++j) {
    const int o = o0 + oo + j;
    if (o >= a.rows) continue;
    float v = acc[j];
    if (a.bias) v += __bfloat162float(a.bias[o]);
    const std::size_t idx = static_cast<std::size_t>(t) * a.rows + o;
    if (a.residual) v += a.residual[idx];
    a.y[idx] = v;
  }
}

}  // namespace

std::size_t launch_matmul_bf16(const MatmulArgs& a, cudaStream_t stream) {
  if (a.n <= 0 || a.rows <= 0 || a.cols <= 0) return 0;
  const dim3 grid((a.rows + kTileO - 1) / kTileO, (a.n + kTileT - 1) / kTileT);
  matmul_bf16_kernel<<<grid, kThreads, 0, stream>>>(a);
  const std::size_t tiles_t = grid.y;
  return tiles_t * a.rows * static_cast<std::size_t>(a.cols) * 2 + static_cast<std::size_t>(a.n) * a.cols * 4 +
         static_cast<std::size_t>(a.n) * a.rows * 4 * (a.residual ? 2 : 1);
}

}  // namespace cosmos::kernels
