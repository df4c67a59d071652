// The MLP's gate/up product and SwiGLU on the 7B shape (reports, never fails): the fused Hopper
// kernel (kernels/gemm_swiglu.cuh; its blocks in clusters of two sharing the weight copies, as the
// engine runs it, and one by one) against what runs without it, cuBLASLt's product (the engine's
// GemmLt, tuned as in the engine) into a [n, 2 ff] buffer followed by launch_swiglu. bf16 and fp16,
// n = 512, 2,048 and 4,096 tokens (or the token counts given as arguments), ff = 18,944, k = 3,584; the median of 20 (after 3 warm-ups, PDL on)
// in ms, TFLOP/s (2 n 2ff k) and GB/s of each launcher's bytes. The last line is the summary for
// 2,048 bf16 tokens (tests/gpu/run.sh prints it):
//   gate/up + swiglu 2048 bf16: fused X.XXX ms (Y TFLOP/s), cuBLASLt + swiglu Z.ZZZ ms (W TFLOP/s)
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include "bench_check.h"
#include "bench_fill.cuh"
#include "kernels/device_info.cuh"
#include "kernels/gemm_lt.h"
#include "kernels/gemm_swiglu.cuh"
#include "kernels/pdl.cuh"
#include "kernels/swiglu.cuh"

namespace {

constexpr int kFF = 18944, kK = 3584;

struct Pair {
  float fused_ms = 0, lt_ms = 0;
};

Pair run_shape(int n, bool f16, cosmos::kernels::GemmLt& lt, cudaStream_t stream) {
  namespace k = cosmos::kernels;
  const auto type = f16 ? k::ElemType::f16 : k::ElemType::bf16;
  __nv_bfloat16 *x = nullptr, *w = nullptr, *gu = nullptr, *out = nullptr;
  CHECK(cudaMalloc(&x, static_cast<std::size_t>(n) * kK * 2));          // [n, k]
  CHECK(cudaMalloc(&w, static_cast<std::size_t>(2) * kFF * kK * 2));    // [2 ff, k]: gate rows, then up rows
  CHECK(cudaMalloc(&gu, static_cast<std::size_t>(n) * 2 * kFF * 2));    // [n, 2 ff]: cuBLASLt's output
  CHECK(cudaMalloc(&out, static_cast<std::size_t>(n) * kFF * 2));       // [n, ff]
  // Small values either way (bf16 bits read as fp16 are of order 1: sums stay finite).
  bench::fill_bf16(x, static_cast<std::size_t>(n) * kK, 1.0f, 11);
  bench::fill_bf16(w, static_cast<std::size_t>(2) * kFF * kK, 0.02f, 12);
  CHECK(cudaDeviceSynchronize());
  const double flops = 2.0 * n * 2.0 * kFF * kK;
  Pair r;
  if (k::gemm_swiglu_available()) {
    k::GemmSwigluArgs a;
    a.x = x;
    a.w = w;
    a.out = out;
    a.n = n;
    a.ff = kFF;
    a.k = kK;
    a.f16 = f16;
    for (const int cluster : {2, 1}) {
      a.cluster = cluster;
      std::size_t bytes = 0;
      const float ms = median_event_ms(stream, 20, 3, [&] { bytes = k::launch_gemm_swiglu(a, stream); });
      CHECK(cudaGetLastError());
      if (cluster == 2) r.fused_ms = ms;
      std::printf("fused, clusters of %d %-4s n %4d | %7.3f ms | %6.1f TFLOP/s | %6.0f GB/s%s\n", cluster,
                  f16 ? "fp16" : "bf16", n, ms, flops / (ms * 1e-3) / 1e12, bytes / (ms * 1e-3) / 1e9,
                  bytes ? "" : " (REFUSED)");
    }
  }
  std::string err;
  r.lt_ms = median_event_ms(stream, 20, 3, [&] {
    std::string e = lt.run(w, x, gu, n, 2 * kFF, kK, false, type, stream, type);
    if (!e.empty()) err = e;
    k::launch_swiglu(gu, type, out, type, n, kFF, stream);
  });
  CHECK(cudaGetLastError());
  if (!err.empty()) std::printf("cuBLASLt: %s\n", err.c_str());
  std::printf("cuBLASLt+swiglu %-4s n %4d | %7.3f ms | %6.1f TFLOP/s\n", f16 ? "fp16" : "bf16", n, r.lt_ms,
              flops / (r.lt_ms * 1e-3) / 1e12);
  std::fflush(stdout);
  for (void* p : {static_cast<void*>(x), static_cast<void*>(w), static_cast<void*>(gu), static_cast<void*>(out)})
    CHECK(cudaFree(p));
  return r;
}

}  // namespace

int main(int argc, char** argv) {
  std::vector<int> ns = {512, 2048, 4096};
  if (argc > 1) {
    ns.clear();
    for (int i = 1; i < argc; ++i) ns.push_back(std::atoi(argv[i]));
  }
  const auto gq = cosmos::kernels::query_gpus();
  if (gq.gpus.empty()) {
    std::printf("bench_gemm_swiglu: %s\n", gq.why_none.c_str());
    return 0;
  }
  std::printf("GPU: %s, %d SMs; gate/up (2 x %d rows, k %d) + SwiGLU; median of 20, PDL on\n\n", gq.gpus[0].name.c_str(),
              gq.gpus[0].multiprocessors, kFF, kK);
  if (!cosmos::kernels::gemm_swiglu_available())
    std::printf("fused: not available (needs compute capability 9.0 and a build for sm_90a)\n");
  cosmos::kernels::set_pdl_enabled(true);
  cudaStream_t s;
  CHECK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  void* ws = nullptr;
  const std::size_t ws_bytes = std::size_t{32} << 20;
  CHECK(cudaMalloc(&ws, ws_bytes));
  cosmos::kernels::GemmLt lt;
  if (const std::string e = lt.init(ws, ws_bytes); !e.empty()) {
    std::printf("cuBLASLt: %s\n", e.c_str());
    return 0;
  }
  Pair at2048;
  for (const bool f16 : {false, true})
    for (const int n : ns) {
      const Pair r = run_shape(n, f16, lt, s);
      if (n == 2048 && !f16) at2048 = r;
    }
  CHECK(cudaStreamDestroy(s));
  CHECK(cudaFree(ws));
  cosmos::kernels::set_pdl_enabled(false);
  if (at2048.lt_ms > 0) {
    const double flops = 2.0 * 2048 * 2.0 * kFF * kK;
    std::printf("\ngate/up + swiglu 2048 bf16: fused %.3f ms (%.0f TFLOP/s), cuBLASLt + swiglu %.3f ms (%.0f TFLOP/s)\n",
                at2048.fused_ms, at2048.fused_ms > 0 ? flops / (at2048.fused_ms * 1e-3) / 1e12 : 0.0, at2048.lt_ms,
                flops / (at2048.lt_ms * 1e-3) / 1e12);
  }
  return 0;
}
