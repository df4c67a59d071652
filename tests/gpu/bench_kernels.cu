// Kernel benchmark (reports, never fails): the device-to-device copy bandwidth of this GPU, then
// launch_gemv (bf16 and fp16 weights) on every matrix shape of a Cosmos-Reason1-7B decode step, as
// GB/s and % of the copy, then the decode step's whole chain of matrix products with the fused
// kernels (RMSNorm prologue, SwiGLU epilogue, bias, residual) captured in one CUDA graph, with
// programmatic dependent launch off and on. Weights rotate over enough copies to exceed the L2
// cache (the chain's weights are 14 GB), so the figures are DRAM figures.
//   bench_kernels            the report (tests/gpu/run.sh prints its last line)
//   bench_kernels --sweep    also the chain under several launch shapes (GemvTuning)
//   bench_kernels --gemms    only the prefill GEMM table (heuristic, its best of 8, the tuned pick)
// Last, the prefill GEMMs of one layer (cuBLASLt, bf16) at 512, 2,048 and 4,096 tokens: the
// heuristic's first algorithm against the fastest of its candidates (what GemmLt's autotuning picks).
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include "kernels/device_info.cuh"
#include "kernels/gemm_lt.h"
#include "kernels/gemv.cuh"
#include "kernels/mlp_decode.cuh"
#include "kernels/pdl.cuh"
#include "bench_check.h"

namespace {


template <typename F>
float median_ms(F&& launch, int reps, cudaStream_t stream = nullptr) {
  cudaEvent_t a, b;
  CHECK(cudaEventCreate(&a));
  CHECK(cudaEventCreate(&b));
  std::vector<float> t;
  for (int i = 0; i < 3; ++i) launch(i);
  for (int i = 0; i < reps; ++i) {
    CHECK(cudaEventRecord(a, stream));
    launch(i);
    CHECK(cudaEventRecord(b, stream));
    CHECK(cudaEventSynchronize(b));
    float ms = 0;
    CHECK(cudaEventElapsedTime(&ms, a, b));
    t.push_back(ms);
  }
  CHECK(cudaEventDestroy(a));
  CHECK(cudaEventDestroy(b));
  std::sort(t.begin(), t.end());
  return t[t.size() / 2];
}

__device__ void store(__nv_bfloat16* p, float v) { *p = __float2bfloat16(v); }
__device__ void store(__half* p, float v) { *p = __float2half(v); }

// Pseudo-random values in [offset - scale / 2, offset + scale / 2).
template <typename T>
__global__ void fill(T* p, std::size_t n, unsigned seed, float scale, float offset) {
  for (std::size_t i = blockIdx.x * static_cast<std::size_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<std::size_t>(gridDim.x) * blockDim.x) {
    unsigned h = static_cast<unsigned>(i) * 2654435761u ^ seed;
    h ^= h >> 13;
    h *= 0x5bd1e995u;
    h ^= h >> 15;
    store(p + i, (static_cast<float>(h & 0xFFFF) / 65536.0f - 0.5f) * scale + offset);
  }
}

template <typename T>
const char* type_name();
template <>
const char* type_name<__nv_bfloat16>() {
  return "bf16";
}
template <>
const char* type_name<__half>() {
  return "fp16";
}

struct Mat {
  const char* name;
  int rows, cols, per_token;
};
const Mat kMats[] = {{"q_proj", 3584, 3584, 28},    {"k_proj / v_proj", 512, 3584, 56}, {"o_proj", 3584, 3584, 28},
                     {"gate / up", 18944, 3584, 56}, {"down_proj", 3584, 18944, 28},  {"lm_head", 152064, 3584, 1}};

// One matrix alone, launched eagerly (launch cost included): microseconds and bytes.
template <typename T>
float time_matrix(const Mat& m, std::size_t* bytes) {
  const std::size_t n = static_cast<std::size_t>(m.rows) * m.cols;
  const int copies = std::max(1, static_cast<int>((256ull << 20) / (n * sizeof(T))));  // > 4x the L2
  std::vector<T*> w(copies);
  for (int c = 0; c < copies; ++c) {
    CHECK(cudaMalloc(&w[c], n * sizeof(T)));
    fill<<<1024, 256>>>(w[c], n, 17u + c, 0.1f, 0.0f);
  }
  float *x, *y;
  CHECK(cudaMalloc(&x, m.cols * sizeof(float)));
  CHECK(cudaMalloc(&y, m.rows * sizeof(float)));
  std::vector<float> hx(m.cols);
  for (int i = 0; i < m.cols; ++i) hx[i] = static_cast<float>((i * 7919) % 1000) / 1000.0f - 0.5f;
  CHECK(cudaMemcpy(x, hx.data(), m.cols * sizeof(float), cudaMemcpyHostToDevice));
  const float ms = median_ms([&](int i) {
    cosmos::kernels::GemvArgsT<T> a;
    a.w = w[i % copies];
    a.x = x;
    a.y = y;
    a.rows = m.rows;
    a.cols = m.cols;
    *bytes = cosmos::kernels::launch_gemv(a, nullptr);
  }, 50);
  CHECK(cudaGetLastError());
  for (auto* p : w) CHECK(cudaFree(p));
  CHECK(cudaFree(x));
  CHECK(cudaFree(y));
  return ms * 1e3f;
}

// The decode step's matrix work, fused as the engine runs it, on one set of weights.
constexpr int kLayers = 28, kH = 3584, kQkv = 4608, kFF = 18944, kVocab = 152064;

struct Chain {
  void* weights = nullptr;  // all matrices, norm weights and biases, in one allocation
  std::size_t weight_bytes = 0;
  std::size_t matrix_bytes = 0;  // the matrices only (what the per-token floor counts)
  float *x = nullptr, *qkv = nullptr, *act = nullptr, *logits = nullptr;
  float* xm = nullptr;  // fused MLP: the o product's copy of x, the MLP's input
  cudaStream_t stream = nullptr;
};

template <typename T>
struct Layout {
  struct Layer {
    const T *qkv, *qkv_bias, *o, *gu, *down, *in_norm, *post_norm;
  };
  std::vector<Layer> layers;
  const T *final_norm, *lm_head;
};

template <typename T>
Layout<T> layout(const Chain& c) {
  T* p = static_cast<T*>(c.weights);
  auto take = [&](std::size_t n) {
    T* q = p;
    p += (n + 63) / 64 * 64;  // keep every tensor 128-byte aligned
    return q;
  };
  Layout<T> l;
  for (int i = 0; i < kLayers; ++i) {
    typename Layout<T>::Layer L;
    L.qkv = take(static_cast<std::size_t>(kQkv) * kH);
    L.qkv_bias = take(kQkv);
    L.o = take(static_cast<std::size_t>(kH) * kH);
    L.gu = take(static_cast<std::size_t>(2 * kFF) * kH);
    L.down = take(static_cast<std::size_t>(kH) * kFF);
    L.in_norm = take(kH);
    L.post_norm = take(kH);
    l.layers.push_back(L);
  }
  l.final_norm = take(kH);
  l.lm_head = take(static_cast<std::size_t>(kVocab) * kH);
  return l;
}

std::size_t chain_elements() {
  auto r = [](std::size_t n) { return (n + 63) / 64 * 64; };
  const std::size_t per_layer = r(static_cast<std::size_t>(kQkv) * kH) + r(kQkv) + r(static_cast<std::size_t>(kH) * kH) +
                                r(static_cast<std::size_t>(2 * kFF) * kH) + r(static_cast<std::size_t>(kH) * kFF) + 2 * r(kH);
  return kLayers * per_layer + r(kH) + r(static_cast<std::size_t>(kVocab) * kH);
}

template <typename T>
void fill_chain(const Chain& c) {
  const Layout<T> l = layout<T>(c);
  unsigned seed = 1;
  auto f = [&](const T* p, std::size_t n, float scale, float offset) {
    fill<<<2048, 256>>>(const_cast<T*>(p), n, seed++, scale, offset);
  };
  for (const auto& L : l.layers) {
    f(L.qkv, static_cast<std::size_t>(kQkv) * kH, 0.05f, 0.0f);
    f(L.qkv_bias, kQkv, 0.2f, 0.0f);
    f(L.o, static_cast<std::size_t>(kH) * kH, 0.05f, 0.0f);
    f(L.gu, static_cast<std::size_t>(2 * kFF) * kH, 0.05f, 0.0f);
    f(L.down, static_cast<std::size_t>(kH) * kFF, 0.02f, 0.0f);
    f(L.in_norm, kH, 0.5f, 1.0f);
    f(L.post_norm, kH, 0.5f, 1.0f);
  }
  f(l.final_norm, kH, 0.5f, 1.0f);
  f(l.lm_head, static_cast<std::size_t>(kVocab) * kH, 0.05f, 0.0f);
  CHECK(cudaGetLastError());
  CHECK(cudaDeviceSynchronize());
}

// 28 x [norm + qkv + bias, o + residual, norm + gate/up + swiglu, down + residual] + norm + lm_head:
// 113 launches. o reads the q part of the qkv output (attention is not part of this benchmark).
// kinds: bit 0 q/k/v, 1 o, 2 gate/up, 3 down, 4 lm_head (all by default). fused: gate/up and down
// as one fused MLP kernel (kernels/mlp_decode.cuh; its down weights read as the transposed matrix,
// the same bytes here), o writing the MLP's input copy; run when bit 2 or 3 is set.
template <typename T>
void enqueue_chain(const Chain& c, const Layout<T>& l, unsigned kinds = 31u, bool fused = false) {
  using cosmos::kernels::GemvArgsT;
  const float eps = 1e-6f;
  for (const auto& L : l.layers) {
    GemvArgsT<T> qkv;
    qkv.w = L.qkv;
    qkv.x = c.x;
    qkv.bias = L.qkv_bias;
    qkv.y = c.qkv;
    qkv.rows = kQkv;
    qkv.cols = kH;
    qkv.norm_weight = L.in_norm;
    qkv.norm_eps = eps;
    if (kinds & 1u) cosmos::kernels::launch_gemv(qkv, c.stream);
    GemvArgsT<T> o;
    o.w = L.o;
    o.x = c.qkv;
    o.residual = c.x;
    o.y = c.x;
    if (fused) o.y2 = c.xm;
    o.rows = kH;
    o.cols = kH;
    if (kinds & 2u) cosmos::kernels::launch_gemv(o, c.stream);
    if (fused) {
      cosmos::kernels::MlpDecodeArgsT<T> m;
      m.w_gate_up = L.gu;
      m.w_down_t = L.down;
      m.norm_weight = L.post_norm;
      m.x = c.xm;
      m.y = c.x;
      m.hidden = kH;
      m.inter = kFF;
      if (kinds & 12u) cosmos::kernels::launch_mlp_decode(m, c.stream);
      continue;
    }
    GemvArgsT<T> gu;
    gu.w = L.gu;
    gu.x = c.x;
    gu.y = c.act;
    gu.rows = 2 * kFF;
    gu.cols = kH;
    gu.norm_weight = L.post_norm;
    gu.norm_eps = eps;
    gu.swiglu = true;
    if (kinds & 4u) cosmos::kernels::launch_gemv(gu, c.stream);
    GemvArgsT<T> down;
    down.w = L.down;
    down.x = c.act;
    down.residual = c.x;
    down.y = c.x;
    down.rows = kH;
    down.cols = kFF;
    if (kinds & 8u) cosmos::kernels::launch_gemv(down, c.stream);
  }
  GemvArgsT<T> lm;
  lm.w = l.lm_head;
  lm.x = c.x;
  lm.y = c.logits;
  lm.rows = kVocab;
  lm.cols = kH;
  lm.norm_weight = l.final_norm;
  lm.norm_eps = eps;
  if (kinds & 16u) cosmos::kernels::launch_gemv(lm, c.stream);
}

void reset_x(const Chain& c) {
  std::vector<float> hx(kH);
  for (int i = 0; i < kH; ++i) hx[i] = static_cast<float>((i * 7919) % 1000) / 1000.0f - 0.5f;
  CHECK(cudaMemcpy(c.x, hx.data(), hx.size() * sizeof(float), cudaMemcpyHostToDevice));
}

// Captures the chain in one CUDA graph with PDL on or off and returns the median replay time (us).
template <typename T>
float time_chain(const Chain& c, bool pdl, unsigned kinds = 31u, bool fused = false) {
  cosmos::kernels::set_pdl_enabled(pdl);
  const Layout<T> l = layout<T>(c);
  cudaGraph_t graph;
  cudaGraphExec_t exec;
  CHECK(cudaStreamBeginCapture(c.stream, cudaStreamCaptureModeThreadLocal));
  enqueue_chain(c, l, kinds, fused);
  CHECK(cudaStreamEndCapture(c.stream, &graph));
  CHECK(cudaGraphInstantiate(&exec, graph, 0));
  reset_x(c);
  const float ms = median_ms([&](int) { CHECK(cudaGraphLaunch(exec, c.stream)); }, 20, c.stream);
  CHECK(cudaGetLastError());
  CHECK(cudaStreamSynchronize(c.stream));
  CHECK(cudaGraphExecDestroy(exec));
  CHECK(cudaGraphDestroy(graph));
  cosmos::kernels::set_pdl_enabled(false);
  return ms * 1e3f;
}

// Prefill GEMMs of one 7B layer through GemmLt::time_candidates: heuristic choice vs the fastest.
void bench_gemms() {
  struct G {
    const char* name;
    int rows, cols;
    bool accumulate, out_bf16, w_t;
  };
  // The engine's bf16/fp16 down weights are stored transposed (the fused decode MLP reads them so):
  // its prefill runs the "down, W transposed" product; the plain one is for comparison (not in the
  // layer sums).
  const G shapes[] = {{"qkv", kQkv, kH, false, false, false},
                      {"o + residual", kH, kH, true, false, false},
                      {"gate/up (bf16 out)", 2 * kFF, kH, false, true, false},
                      {"down, W transposed", kH, kFF, true, false, true},
                      {"down (W as stored)", kH, kFF, true, false, false}};
  const int max_n = 4096;
  __nv_bfloat16 *w = nullptr, *x = nullptr;
  void* ws = nullptr;
  const std::size_t ws_bytes = 32u << 20;
  CHECK(cudaMalloc(&w, static_cast<std::size_t>(2 * kFF) * kH * 2));
  CHECK(cudaMalloc(&x, static_cast<std::size_t>(max_n) * kFF * 2));
  CHECK(cudaMalloc(&ws, ws_bytes));
  fill<<<2048, 256>>>(w, static_cast<std::size_t>(2 * kFF) * kH, 5u, 0.1f, 0.0f);
  fill<<<2048, 256>>>(x, static_cast<std::size_t>(max_n) * kFF, 6u, 1.0f, 0.0f);
  CHECK(cudaDeviceSynchronize());
  cosmos::kernels::GemmLt g;
  if (std::string err = g.init(ws, ws_bytes); !err.empty()) {
    std::printf("cuBLASLt: %s\n", err.c_str());
    return;
  }
  std::printf("\nprefill GEMMs of one layer (cuBLASLt bf16, fp32 accumulate; median of 5 per algorithm)\n");
  std::printf("  %6s %-20s %10s %9s %10s %9s %10s %9s %5s %5s\n", "tokens", "product", "heur. us", "TFLOP/s", "heur. 8",
              "TFLOP/s", "best us", "TFLOP/s", "algo", "of");
  for (const int n : {512, 2048, max_n}) {
    double layer_h = 0, layer_h8 = 0, layer_b = 0, flops_layer = 0;
    for (const G& s : shapes) {
      std::string err;
      const auto t = g.time_candidates(w, x, n, s.rows, s.cols, s.accumulate, cosmos::kernels::ElemType::bf16,
                                       s.out_bf16 ? cosmos::kernels::ElemType::bf16 : cosmos::kernels::ElemType::f32,
                                       nullptr, cosmos::kernels::GemmLt::kTuneCandidates, 5, err, nullptr, nullptr,
                                       s.w_t);
      if (t.empty()) {
        std::printf("  %6d %-20s %s\n", n, s.name, err.c_str());
        continue;
      }
      // Entries past the heuristic's (at most kTuneCandidates) are the tuner's wave-fill configurations.
      const std::size_t best = static_cast<std::size_t>(std::min_element(t.begin(), t.end()) - t.begin());
      const auto h_end = t.begin() + std::min<std::ptrdiff_t>(cosmos::kernels::GemmLt::kTuneCandidates,
                                                               static_cast<std::ptrdiff_t>(t.size()));
      const float h8 = *std::min_element(t.begin(), h_end);
      const double flops = 2.0 * n * s.rows * s.cols;
      std::printf("  %6d %-20s %10.0f %9.0f %10.0f %9.0f %10.0f %9.0f %5zu %5zu\n", n, s.name, t[0] * 1e3,
                  flops / (t[0] * 1e-3) / 1e12, h8 * 1e3, flops / (h8 * 1e-3) / 1e12, t[best] * 1e3,
                  flops / (t[best] * 1e-3) / 1e12, best, t.size());
      if (&s == &shapes[4]) continue;  // the comparison row
      layer_h += t[0];
      layer_h8 += h8;
      layer_b += t[best];
      flops_layer += flops;
    }
    std::printf("  %6d %-20s %10.0f %9.0f %10.0f %9.0f %10.0f %9.0f   -> 28 layers: %.1f ms heuristic, %.1f ms best of "
                "its 8, %.1f ms tuned\n",
                n, "layer", layer_h * 1e3, flops_layer / (layer_h * 1e-3) / 1e12, layer_h8 * 1e3,
                flops_layer / (layer_h8 * 1e-3) / 1e12, layer_b * 1e3, flops_layer / (layer_b * 1e-3) / 1e12, 28 * layer_h,
                28 * layer_h8, 28 * layer_b);
    std::fflush(stdout);
    // What the engine's tuner costs for this size class: its call (2 timed runs per candidate) on a
    // fresh GemmLt per product, host wall time, with and without the wave-fill candidates.
    for (const bool wave : {false, true}) {
      double tune_ms = 0;
      for (const G& s : shapes) {
        cosmos::kernels::GemmLt fresh;
        if (!fresh.init(ws, ws_bytes).empty()) break;
        fresh.set_wave_fill(wave);
        std::string err;
        CHECK(cudaDeviceSynchronize());
        const auto t0 = std::chrono::steady_clock::now();
        if (&s == &shapes[4]) continue;
        (void)fresh.time_candidates(w, x, n, s.rows, s.cols, s.accumulate, cosmos::kernels::ElemType::bf16,
                                    s.out_bf16 ? cosmos::kernels::ElemType::bf16 : cosmos::kernels::ElemType::f32,
                                    nullptr, cosmos::kernels::GemmLt::kTuneCandidates, 2, err, nullptr, nullptr, s.w_t);
        tune_ms += std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
      }
      std::printf("  %6d tuning the four products once (as the engine does, wave-fill %s): %.0f ms\n", n,
                  wave ? "on" : "off", tune_ms);
    }
    std::fflush(stdout);
  }
  CHECK(cudaFree(w));
  CHECK(cudaFree(x));
  CHECK(cudaFree(ws));
}

struct ChainResult {
  const char* type;
  bool pdl;
  float us;
};

}  // namespace

int main(int argc, char** argv) {
  const bool sweep = argc > 1 && std::strcmp(argv[1], "--sweep") == 0;
  const auto q = cosmos::kernels::query_gpus();
  if (q.gpus.empty()) {
    std::printf("bench_kernels: %s\n", q.why_none.c_str());
    return 0;
  }
  std::printf("GPU: %s\n", q.gpus[0].name.c_str());
  if (argc > 1 && std::strcmp(argv[1], "--gemms") == 0) {  // the prefill GEMM table alone
    bench_gemms();
    return 0;
  }
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

  // Each matrix alone, plain y = W x, launched eagerly (launch cost included), PDL off.
  std::printf("%-16s %8s %8s | %-26s | %-26s\n", "matrix", "rows", "cols", "bf16: us, GB/s, % copy", "fp16: us, GB/s, % copy");
  double step_us[2] = {0, 0};
  for (const Mat& m : kMats) {
    std::size_t bytes = 0;
    const float ub = time_matrix<__nv_bfloat16>(m, &bytes);
    const double gb = bytes / (ub * 1e-6) / 1e9;
    const float uh = time_matrix<__half>(m, &bytes);
    const double gh = bytes / (uh * 1e-6) / 1e9;
    std::printf("%-16s %8d %8d | %7.1f %7.0f %8.1f%%  | %7.1f %7.0f %8.1f%%\n", m.name, m.rows, m.cols, ub, gb,
                100 * gb / copy_gbs, uh, gh, 100 * gh / copy_gbs);
    step_us[0] += ub * m.per_token;
    step_us[1] += uh * m.per_token;
  }
  std::printf("\nall matrices of one decode step, launched one by one: bf16 %.0f us -> %.0f tok/s, fp16 %.0f us -> %.0f tok/s\n",
              step_us[0], 1e6 / step_us[0], step_us[1], 1e6 / step_us[1]);

  // The whole decode step's matrix work as the engine runs it, in one CUDA graph.
  Chain c;
  c.weight_bytes = chain_elements() * 2;
  c.matrix_bytes = (static_cast<std::size_t>(kLayers) *
                        (static_cast<std::size_t>(kQkv) * kH + static_cast<std::size_t>(kH) * kH +
                         static_cast<std::size_t>(2 * kFF) * kH + static_cast<std::size_t>(kH) * kFF) +
                    static_cast<std::size_t>(kVocab) * kH) * 2;
  CHECK(cudaMalloc(&c.weights, c.weight_bytes));
  CHECK(cudaMalloc(&c.x, kH * sizeof(float)));
  CHECK(cudaMalloc(&c.qkv, kQkv * sizeof(float)));
  CHECK(cudaMalloc(&c.act, kFF * sizeof(float)));
  CHECK(cudaMalloc(&c.xm, kH * sizeof(float)));
  CHECK(cudaMalloc(&c.logits, kVocab * sizeof(float)));
  CHECK(cudaStreamCreateWithFlags(&c.stream, cudaStreamNonBlocking));
  // Bytes per token: all weights (matrices, biases, norm weights) + the fp32 activations each launch
  // reads and writes (x, residual, y), about 1 MB.
  const std::size_t act_bytes =
      static_cast<std::size_t>(kLayers) * ((kH + kQkv) + (kH + 2 * kH) + (kH + kFF) + (kFF + 2 * kH)) * 4 +
      static_cast<std::size_t>(kH + kVocab) * 4;
  const double total_bytes = static_cast<double>(c.weight_bytes) + act_bytes;
  const double floor_us = total_bytes / (copy_gbs * 1e9) * 1e6;
  const int launches = kLayers * 4 + 1;
  std::printf("\ndecode chain per token, one CUDA graph of %d launches: %d x [norm+qkv+bias %dx%d, o+residual %dx%d,\n"
              "  norm+gate/up+swiglu %dx%d, down+residual %dx%d] + norm+lm_head %dx%d; %.2f GB per token\n"
              "  (time at the copy bandwidth: %.0f us)\n",
              launches, kLayers, kQkv, kH, kH, kH, 2 * kFF, kH, kH, kFF, kVocab, kH, total_bytes / 1e9, floor_us);
  std::printf("  %-7s %-5s %10s %9s %7s %9s %18s\n", "weights", "pdl", "time (us)", "GB/s", "% copy", "tok/s",
              "us/launch over copy");
  std::vector<ChainResult> results;
  auto report = [&](const char* type, bool pdl, float us) {
    const double gbs = total_bytes / (us * 1e-6) / 1e9;
    std::printf("  %-7s %-5s %10.0f %9.0f %6.1f%% %9.1f %18.2f\n", type, pdl ? "on" : "off", us, gbs, 100 * gbs / copy_gbs,
                1e6 / us, (us - floor_us) / launches);
    std::fflush(stdout);
    results.push_back({type, pdl, us});
  };
  auto run_type = [&](auto tag) {
    using T = decltype(tag);
    fill_chain<T>(c);
    for (const bool pdl : {false, true}) report(type_name<T>(), pdl, time_chain<T>(c, pdl));
    // The MLP as one kernel split over the neurons (kernels/mlp_decode.cuh): 85 launches.
    for (const bool pdl : {false, true}) {
      const float us = time_chain<T>(c, pdl, 31u, true);
      const double gbs = total_bytes / (us * 1e-6) / 1e9;
      std::printf("  %-7s %-5s %10.0f %9.0f %6.1f%% %9.1f %18s  fused MLP\n", type_name<T>(), pdl ? "on" : "off", us, gbs,
                  100 * gbs / copy_gbs, 1e6 / us, "");
      std::fflush(stdout);
    }
    {
      const float us_sep = time_chain<T>(c, true, 12u), us_fused = time_chain<T>(c, true, 12u, true);
      const double mlp_bytes = 2.0 * 3 * kFF * static_cast<double>(kH) * kLayers;
      std::printf("  %-7s MLP alone, 28 layers (pdl on): two kernels %.0f us (%.0f GB/s), fused %.0f us (%.0f GB/s)\n",
                  type_name<T>(), us_sep, mlp_bytes / (us_sep * 1e-6) / 1e9, us_fused,
                  mlp_bytes / (us_fused * 1e-6) / 1e9);
      std::fflush(stdout);
    }
    if (sweep) {
      // Launch shapes (GemvTuning), each a departure from the default: one output per warp with x
      // through L1 instead of one wave with x staged; no L2 prefetch of the next output's rows;
      // the next kernel launched only when each block is done.
      struct Shape {
        const char* name;
        cosmos::kernels::GemvTuning t;
      };
      cosmos::kernels::GemvTuning blocks, no_l2, late, late_epi, wide, n_all;
      blocks.wave = 0;
      no_l2.l2_next = 0;
      late.early_trigger = 0;
      late_epi.early_epi = 0;
      wide.narrow = 0;
      n_all.narrow = 1;
      const Shape shapes[] = {{"default", {}},          {"wave=0", blocks},       {"l2_next=0", no_l2},
                              {"early_trigger=0", late}, {"early_epi=0", late_epi}, {"narrow=0", wide},
                              {"narrow=1", n_all}};
      for (const Shape& s : shapes) {
        cosmos::kernels::set_gemv_tuning(s.t);
        for (const bool pdl : {false, true}) {
          const float us = time_chain<T>(c, pdl);
          const double gbs = total_bytes / (us * 1e-6) / 1e9;
          std::printf("  sweep %s %-16s pdl=%-3s %8.0f us %6.1f%% copy %7.1f tok/s\n", type_name<T>(), s.name,
                      pdl ? "on" : "off", us, 100 * gbs / copy_gbs, 1e6 / us);
          std::fflush(stdout);
        }
      }
      cosmos::kernels::set_gemv_tuning({});
      // Each kind of product alone, its 28 launches back to back in one graph (PDL on): how close
      // each streams to the copy bandwidth inside a chain.
      struct Kind {
        const char* name;
        unsigned bit;
        double bytes;  // weights per launch
        int launches;
      };
      const Kind kinds[] = {{"q/k/v + norm + bias", 1u, 2.0 * kQkv * kH, kLayers},
                            {"o + residual", 2u, 2.0 * kH * kH, kLayers},
                            {"gate/up + norm + swiglu", 4u, 2.0 * 2 * kFF * kH, kLayers},
                            {"down + residual", 8u, 2.0 * kH * kFF, kLayers},
                            {"lm_head + norm", 16u, 2.0 * kVocab * kH, 1}};
      // The default shape, then the shapes that change single products.
      for (const Shape& sh : {shapes[0], shapes[4], shapes[5]}) {
        cosmos::kernels::set_gemv_tuning(sh.t);
        for (const Kind& k : kinds) {
          const float us = time_chain<T>(c, true, k.bit);
          const double gbs = k.bytes * k.launches / (us * 1e-6) / 1e9;
          std::printf("  alone %s %-24s %3d launches %8.0f us %7.2f us/launch %6.0f GB/s %6.1f%% copy  [%s]\n",
                      type_name<T>(), k.name, k.launches, us, us / k.launches, gbs, 100 * gbs / copy_gbs, sh.name);
          std::fflush(stdout);
        }
      }
      cosmos::kernels::set_gemv_tuning({});
    }
  };
  run_type(__nv_bfloat16{});
  run_type(__half{});
  CHECK(cudaFree(c.weights));
  CHECK(cudaFree(c.x));
  CHECK(cudaFree(c.qkv));
  CHECK(cudaFree(c.act));
  CHECK(cudaFree(c.xm));
  CHECK(cudaFree(c.logits));
  CHECK(cudaStreamDestroy(c.stream));

  bench_gemms();

  // Last line (tests/gpu/run.sh prints it as the summary): the bf16 chain with PDL on.
  const ChainResult* best = &results[0];
  for (const auto& r : results)
    if (std::strcmp(r.type, "bf16") == 0 && r.pdl) best = &r;
  const double gbs = total_bytes / (best->us * 1e-6) / 1e9;
  std::printf("\ndecode-step matrices in one CUDA graph (fused norm/swiglu/bias/residual, bf16, pdl on): %.0f us, %.0f GB/s"
              " (%.1f%% of copy) -> %.0f tok/s\n",
              best->us, gbs, 100 * gbs / copy_gbs, 1e6 / best->us);
  return 0;
}
