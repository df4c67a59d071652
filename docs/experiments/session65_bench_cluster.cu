// Session 65's micro-benchmark (docs/PERFORMANCE.md, session 65): what a thread-block cluster kernel
// pays per cluster barrier (each followed by one distributed-shared-memory read), for 1-16 blocks per
// cluster and 256 / 1,024 threads per block; what contended 64-bit shared-memory atomics and
// double-precision exp cost on 16 blocks. Each figure: 50 launches in a CUDA graph, 10 replays.
// Not part of the build: nvcc -std=c++17 -O3 -arch=sm_90 -o bench_cluster session65_bench_cluster.cu
#include <cstdio>
#include <cooperative_groups.h>
#include <cuda_runtime.h>
namespace cg = cooperative_groups;
__global__ void k_sync(int K, int* out) {
  cg::cluster_group c = cg::this_cluster();
  __shared__ int v;
  if (threadIdx.x == 0) v = blockIdx.x;
  int acc = 0;
  for (int i = 0; i < K; ++i) {
    c.sync();
    acc += *c.map_shared_rank(&v, (c.block_rank() + 1 + i) % c.num_blocks());
  }
  c.sync();
  if (threadIdx.x == 0 && acc == -1) out[0] = acc;
}
__global__ void k_shist(int* out, int n) {  // 64-bit shared atomics on 32 bins from every thread, n each
  __shared__ unsigned long long h[32];
  if (threadIdx.x < 32) h[threadIdx.x] = 0;
  __syncthreads();
  for (int i = 0; i < n; ++i) atomicAdd(&h[(threadIdx.x * 7 + i) & 31], 1ull + i);
  __syncthreads();
  if (threadIdx.x == 0 && h[0] == 12345) out[0] = 1;
}
__global__ void k_dexp(float* out, int n) {
  float s = 0;
  for (int i = 0; i < n; ++i) s += (float)exp((double)(-(float)(threadIdx.x + i) * 1e-3f));
  if (s == -1) out[0] = s;
}
int main() {
  int* out; cudaMalloc(&out, 4);
  cudaStream_t st; cudaStreamCreate(&st);
  cudaEvent_t e0, e1; cudaEventCreate(&e0); cudaEventCreate(&e1);
  cudaFuncSetAttribute(k_sync, cudaFuncAttributeNonPortableClusterSizeAllowed, 1);
  auto timeit = [&](auto launch) {
    cudaGraph_t g; cudaGraphExec_t ge;
    cudaStreamBeginCapture(st, cudaStreamCaptureModeGlobal);
    for (int i = 0; i < 50; ++i) launch();
    cudaStreamEndCapture(st, &g); cudaGraphInstantiate(&ge, g, 0);
    for (int i = 0; i < 3; ++i) cudaGraphLaunch(ge, st);
    cudaEventRecord(e0, st);
    for (int i = 0; i < 10; ++i) cudaGraphLaunch(ge, st);
    cudaEventRecord(e1, st); cudaEventSynchronize(e1);
    float ms; cudaEventElapsedTime(&ms, e0, e1);
    cudaGraphExecDestroy(ge); cudaGraphDestroy(g);
    return 1000.0 * ms / 500;
  };
  for (int cs : {1, 2, 4, 8, 16}) for (int nt : {256, 1024}) for (int K : {0, 1, 4, 16}) {
    cudaLaunchConfig_t cfg{}; cfg.gridDim = dim3(16); cfg.blockDim = dim3(nt); cfg.stream = st;
    cudaLaunchAttribute a[1]; a[0].id = cudaLaunchAttributeClusterDimension; a[0].val.clusterDim.x = cs; a[0].val.clusterDim.y = 1; a[0].val.clusterDim.z = 1;
    cfg.attrs = a; cfg.numAttrs = 1;
    const double us = timeit([&] { cudaLaunchKernelEx(&cfg, k_sync, K, out); });
    printf("cluster %2d threads %4d syncs %2d: %6.2f us per launch (%s)\n", cs, nt, K, us, cudaGetErrorString(cudaGetLastError()));
  }
  for (int n : {1, 10, 40}) printf("shared u64 atomics, 1024 threads x %d on 32 bins, 16 blocks: %6.2f us\n", n,
      timeit([&] { k_shist<<<16, 1024, 0, st>>>(out, n); }));
  for (int n : {1, 10, 40}) printf("double exp x %d per thread, 16 blocks x 1024: %6.2f us\n", n,
      timeit([&] { k_dexp<<<16, 1024, 0, st>>>((float*)out, n); }));
  printf("empty-ish plain launch: %6.2f us\n", timeit([&] { k_dexp<<<16, 1024, 0, st>>>((float*)out, 0); }));
  return 0;
}
