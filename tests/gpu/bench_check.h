// CHECK(call) for the GPU benchmarks (bench_kernels, bench_stream): a failed CUDA call prints the
// call, the error and the place, and ends the benchmark.
#pragma once

#include <cstdio>
#include <cstdlib>

#include <cuda_runtime.h>

#define CHECK(x)                                                                                        \
  do {                                                                                                  \
    cudaError_t e = (x);                                                                                \
    if (e != cudaSuccess) {                                                                             \
      std::fprintf(stderr, "%s failed: %s (%s:%d)\n", #x, cudaGetErrorString(e), __FILE__, __LINE__); \
      std::exit(1);                                                                                     \
    }                                                                                                   \
  } while (0)
