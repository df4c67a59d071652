// For the GPU benchmarks: CHECK(call), which prints a failed CUDA call, the error and the place and
// ends the benchmark; median_event_ms, the median time of a piece of stream work.
#pragma once

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <vector>

#include <cuda_runtime.h>

#define CHECK(x)                                                                                        \
  do {                                                                                                  \
    cudaError_t e = (x);                                                                                \
    if (e != cudaSuccess) {                                                                             \
      std::fprintf(stderr, "%s failed: %s (%s:%d)\n", #x, cudaGetErrorString(e), __FILE__, __LINE__); \
      std::exit(1);                                                                                     \
    }                                                                                                   \
  } while (0)

// Median over `reps` runs of body() (which enqueues work on stream s), each timed with a pair of
// events, after `warmups` untimed runs; in ms.
template <typename Body>
float median_event_ms(cudaStream_t s, int reps, int warmups, const Body& body) {
  cudaEvent_t a, b;
  CHECK(cudaEventCreate(&a));
  CHECK(cudaEventCreate(&b));
  for (int i = 0; i < warmups; ++i) body();
  CHECK(cudaStreamSynchronize(s));
  std::vector<float> t;
  for (int r = 0; r < reps; ++r) {
    CHECK(cudaEventRecord(a, s));
    body();
    CHECK(cudaEventRecord(b, s));
    CHECK(cudaEventSynchronize(b));
    float ms = 0;
    CHECK(cudaEventElapsedTime(&ms, a, b));
    t.push_back(ms);
  }
  std::sort(t.begin(), t.end());
  CHECK(cudaEventDestroy(a));
  CHECK(cudaEventDestroy(b));
  return t[t.size() / 2];
}
