// Kernel benchmark (reports, never fails): the device-to-device copy bandwidth of this GPU, then
// gemv_bf16 on every matrix shape of a Cosmos-Reason1-7B decode step, as GB/s and % of the copy.
// Weights rotate over enough copies to exceed the L2 cache, so the figures are DRAM figures.
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <vector>

#include <cuda_runtime.h>

#include "kernels/device_info.cuh"
#include "kernels/gemv_bf16.cuh"

namespace {

#define CHECK(x)                                                                          \
  do {                                                                                    \
    cudaError_t e = (x);                                                                  \
    if (e != cudaSuccess) {                                                               \
      std::fprintf(stderr, "%s failed: %s (%s:%d)\n", #x, cudaGetErrorString(e), __FILE__, __LINE__); \
      std::exit(1);                                                                       \
    }                                                                                     \
  } while (0)

template <typename F>
float median_ms(F&& launch, int reps) {
  cudaEvent_t a, b;
  CHECK(cudaEventCreate(&a));
  CHECK(cudaEventCreate(&b));
  std::vector<float> t;
  for (int i = 0; i < 3; ++i) launch(i);
  for (int i = 0; i < reps; ++i) {
    CHECK(cudaEventRecord(a, 0));
    launch(i);
    CHECK(cudaEventRecord(b, 0));
    CHECK(cudaEventSynchronize(b));
    float ms = 0;
    CHECK(cudaEventElapsedTime(&ms, a, b));
    t.push_back(ms);
  }
  std::sort(t.begin(), t.end());
  return t[t.size() / 2];
}

__global__ void fill(__nv_bfloat16* p, std::size_t n, unsigned seed) {
  for (std::size_t i = blockIdx.x * static_cast<std::size_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<std::size_t>(gridDim.x) * blockDim.x) {
    unsigned h = static_cast<unsigned>(i) * 2654435761u ^ seed;
    h ^= h >> 13;
    p[i] = __float2bfloat16((static_cast<float>(h & 0xFFFF) / 65536.0f - 0.5f) * 0.1f);
  }
}

}  // namespace

int main() {
  const auto q = cosmos::kernels::query_gpus();
  if (q.gpus.empty()) {
    std::printf("bench_kernels: %s\n", q.why_none.c_str());
    return 0;
  }
  std::printf("GPU: %s\n", q.gpus[0].name.c_str());
  const std::size_t copy_bytes = 1ull << 30;
  void *src, *dst;
  CHECK(cudaMalloc(&src, copy_bytes));
  CHECK(cudaMalloc(&dst, copy_bytes));
  CHECK(cudaMemset(src, 1, copy_bytes));
  const float copy_ms = median_ms([&](int) { CHECK(cudaMemcpyAsync(dst, src, copy_bytes, cudaMemcpyDeviceToDevice)); }, 20);
  const double copy_gbs = 2.0 * copy_bytes / (copy_ms * 1e-3) / 1e9;  // read + write
  std::printf("device copy: %.0f GB/s (1 GiB, read + write counted)\n\n", copy_gbs);
  CHECK(cudaFree(src));
  CHECK(cudaFree(dst));

  struct Mat {
    const char* name;
    int rows, cols, per_token;
  };
  const Mat mats[] = {{"q_proj", 3584, 3584, 28},   {"k_proj / v_proj", 512, 3584, 56}, {"o_proj", 3584, 3584, 28},
                      {"gate / up", 18944, 3584, 56}, {"down_proj", 3584, 18944, 28},  {"lm_head", 152064, 3584, 1}};
  std::printf("%-16s %8s %8s %10s %9s %7s\n", "matrix", "rows", "cols", "time (us)", "GB/s", "% copy");
  double step_us = 0;
  for (const Mat& m : mats) {
    const std::size_t n = static_cast<std::size_t>(m.rows) * m.cols;
    const int copies = std::max(1, static_cast<int>((256ull << 20) / (n * 2)));  // > 5x the 50 MB L2
    std::vector<__nv_bfloat16*> w(copies);
    for (int c = 0; c < copies; ++c) {
      CHECK(cudaMalloc(&w[c], n * 2));
      fill<<<1024, 256>>>(w[c], n, 17u + c);
    }
    float *x, *y;
    CHECK(cudaMalloc(&x, m.cols * sizeof(float)));
    CHECK(cudaMalloc(&y, m.rows * sizeof(float)));
    std::vector<float> hx(m.cols);
    for (int i = 0; i < m.cols; ++i) hx[i] = static_cast<float>((i * 7919) % 1000) / 1000.0f - 0.5f;
    CHECK(cudaMemcpy(x, hx.data(), m.cols * sizeof(float), cudaMemcpyHostToDevice));
    std::size_t bytes = 0;
    const float ms = median_ms([&](int i) {
      cosmos::kernels::GemvArgs a;
      a.w = w[i % copies];
      a.x = x;
      a.y = y;
      a.rows = m.rows;
      a.cols = m.cols;
      bytes = cosmos::kernels::launch_gemv_bf16(a, nullptr);
    }, 50);
    CHECK(cudaGetLastError());
    const double gbs = bytes / (ms * 1e-3) / 1e9;
    std::printf("%-16s %8d %8d %10.1f %9.0f %6.1f%%\n", m.name, m.rows, m.cols, ms * 1e3, gbs, 100 * gbs / copy_gbs);
    step_us += ms * 1e3 * m.per_token;
    for (auto* p : w) CHECK(cudaFree(p));
    CHECK(cudaFree(x));
    CHECK(cudaFree(y));
  }
  std::printf("\nall matrices of one decode step, launched one by one: %.0f us -> %.0f tok/s\n", step_us, 1e6 / step_us);

  // The whole decode step's matrix work as it will run: q/k/v fused into one [4608, 3584] matrix,
  // gate/up into one [37888, 3584], 28 layers + lm_head, captured once in a CUDA graph and replayed.
  struct Layer {
    __nv_bfloat16 *qkv, *o, *gu, *down;
  };
  std::vector<Layer> layers(28);
  std::size_t total_bytes = 0;
  auto alloc = [&](int rows, int cols) {
    __nv_bfloat16* p;
    const std::size_t n = static_cast<std::size_t>(rows) * cols;
    CHECK(cudaMalloc(&p, n * 2));
    fill<<<1024, 256>>>(p, n, static_cast<unsigned>(total_bytes));
    total_bytes += n * 2;
    return p;
  };
  for (auto& l : layers) {
    l.qkv = alloc(4608, 3584);
    l.o = alloc(3584, 3584);
    l.gu = alloc(37888, 3584);
    l.down = alloc(3584, 18944);
  }
  __nv_bfloat16* lm = alloc(152064, 3584);
  float *xa, *xb;
  CHECK(cudaMalloc(&xa, 37888 * sizeof(float)));
  CHECK(cudaMalloc(&xb, 152064 * sizeof(float)));
  {
    std::vector<float> hx(37888);
    for (int i = 0; i < 37888; ++i) hx[i] = static_cast<float>((i * 7919) % 1000) / 1000.0f - 0.5f;
    CHECK(cudaMemcpy(xa, hx.data(), hx.size() * sizeof(float), cudaMemcpyHostToDevice));
  }
  cudaStream_t stream;
  CHECK(cudaStreamCreate(&stream));
  auto gemv = [&](const __nv_bfloat16* w, int rows, int cols, const float* in, float* out) {
    cosmos::kernels::GemvArgs a;
    a.w = w;
    a.x = in;
    a.y = out;
    a.rows = rows;
    a.cols = cols;
    cosmos::kernels::launch_gemv_bf16(a, stream);
  };
  cudaGraph_t graph;
  cudaGraphExec_t exec;
  CHECK(cudaStreamBeginCapture(stream, cudaStreamCaptureModeGlobal));
  for (const auto& l : layers) {
    gemv(l.qkv, 4608, 3584, xa, xb);
    gemv(l.o, 3584, 3584, xa, xb);
    gemv(l.gu, 37888, 3584, xa, xb);
    gemv(l.down, 3584, 18944, xa, xb);
  }
  gemv(lm, 152064, 3584, xa, xb);
  CHECK(cudaStreamEndCapture(stream, &graph));
  CHECK(cudaGraphInstantiate(&exec, graph, 0));
  const float graph_ms = median_ms([&](int) { CHECK(cudaGraphLaunch(exec, stream)); }, 20);
  CHECK(cudaGetLastError());
  const double graph_gbs = total_bytes / (graph_ms * 1e-3) / 1e9;
  std::printf("decode-step matrices in one CUDA graph (qkv and gate/up fused): %.0f us, %.0f GB/s (%.1f%% of copy)"
              " -> %.0f tok/s\n", graph_ms * 1e3, graph_gbs, 100 * graph_gbs / copy_gbs, 1e3 / graph_ms);
  return 0;
}
