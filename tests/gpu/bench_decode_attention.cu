// Decode attention (reports, never fails): launch_decode_attention fused with RoPE and the KV-cache
// write, as the engine's decode step runs it, on the Cosmos-Reason1-7B shape (28 query heads, 4 KV
// heads, head_dim 128, bf16 cache in 16-slot blocks with a shuffled block table), one token, at
// contexts from 1 to 16,384 keys. One CUDA graph of 28 launches (PDL on), each layer with its own
// cache so that K/V come from DRAM as in the model; per context, the median of 20 replays in us per
// layer and the GB/s of the K/V rows read, and the same with the output left as sums (the
// decode step's mode with the fused MLP: DecodeAttentionSums, column "sums"). More columns: the
// CUDA-core kernel on the bf16 cache ("cores"), and the int8 cache with its scales (cosmos/kv_format.h)
// on tensor cores ("int8"), with sums ("i8 sums") and on the CUDA-core kernel ("i8 cores"); K/V GB/s
// counts the bf16 cache's bytes.
// The attention's neighbours in the engine (the q/k/v and o products) are not part of it: read its
// figures as the kernel's own time, not as a decode step's share.
//   bench_decode_attention [--contexts 1,1024,4096]
// Last line (tests/gpu/run.sh prints it): "decode attention 4096: X.XX us per layer (Y GB/s; sums Z.ZZ; int8
// sums W.WW), 8192: ...".
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <numeric>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include "bench_check.h"
#include "bench_fill.cuh"
#include "kernels/decode_attention.cuh"
#include "kernels/device_info.cuh"
#include "kernels/pdl.cuh"

namespace {

namespace k = cosmos::kernels;

constexpr int kLayers = 28, kHeads = 28, kKvHeads = 4, kD = 128, kBlockSize = 16;
constexpr int kWidth = (kHeads + 2 * kKvHeads) * kD;  // one token's q | k | v row

template <typename T>
T* upload(const std::vector<T>& v) {
  T* d = nullptr;
  CHECK(cudaMalloc(&d, v.size() * sizeof(T)));
  CHECK(cudaMemcpy(d, v.data(), v.size() * sizeof(T), cudaMemcpyHostToDevice));
  return d;
}

struct Setup {
  int max_ctx = 0, blocks = 0;
  std::vector<__nv_bfloat16*> k, v;  // per layer: [blocks * kBlockSize, kKvHeads, kD] bf16
  std::vector<void*> k8, v8;         // per layer: [blocks * kBlockSize, kKvHeads, kD] int8
  std::vector<float*> ks, vs;        // per layer: [blocks * kBlockSize, kKvHeads] fp32 (zeros: the timing
                                     // does not depend on the values)
  float* qkv = nullptr;              // [1, kWidth] fp32
  float* inv_freq = nullptr;         // [kD / 2]
  std::int32_t* meta = nullptr;      // [table..., table_offset, ctx_len, slot, pos x3]
  void* out = nullptr;               // [kHeads, kD] bf16
  void* scratch = nullptr;
  float* sums = nullptr;             // [kLayers][kSumStride]: per layer the output as sums, divisors (2 buckets)
  std::vector<std::int32_t> table;
};
constexpr int kSumStride = 2 * kHeads * (kD + 1);  // a multiple of 4 for the 7B shape: 16-byte aligned sets
static_assert(kSumStride % 4 == 0, "16-byte aligned sums");

Setup make_setup(int max_ctx) {
  Setup s;
  s.max_ctx = max_ctx;
  s.blocks = (max_ctx + kBlockSize - 1) / kBlockSize;
  const std::size_t elems = static_cast<std::size_t>(s.blocks) * kBlockSize * kKvHeads * kD;
  for (int l = 0; l < kLayers; ++l) {
    __nv_bfloat16 *kc = nullptr, *vc = nullptr;
    CHECK(cudaMalloc(&kc, elems * 2));
    CHECK(cudaMalloc(&vc, elems * 2));
    bench::fill_bf16(kc, elems, 1.0f, 2 * l + 1);
    bench::fill_bf16(vc, elems, 1.0f, 2 * l + 2);
    s.k.push_back(kc);
    s.v.push_back(vc);
    void *k8 = nullptr, *v8 = nullptr;
    float *ks = nullptr, *vs = nullptr;
    CHECK(cudaMalloc(&k8, elems));
    CHECK(cudaMalloc(&v8, elems));
    CHECK(cudaMemset(k8, 0x11, elems));
    CHECK(cudaMemset(v8, 0x22, elems));
    CHECK(cudaMalloc(&ks, elems / kD * sizeof(float)));
    CHECK(cudaMalloc(&vs, elems / kD * sizeof(float)));
    CHECK(cudaMemset(ks, 0, elems / kD * sizeof(float)));
    CHECK(cudaMemset(vs, 0, elems / kD * sizeof(float)));
    s.k8.push_back(k8);
    s.v8.push_back(v8);
    s.ks.push_back(ks);
    s.vs.push_back(vs);
  }
  std::mt19937 rng(5);
  std::normal_distribution<float> normal;
  std::vector<float> qkv(kWidth), freq(kD / 2);
  for (auto& x : qkv) x = normal(rng);
  for (int i = 0; i < kD / 2; ++i) freq[i] = std::pow(1e6f, -2.0f * i / kD);
  s.qkv = upload(qkv);
  s.inv_freq = upload(freq);
  s.table.resize(s.blocks);
  std::iota(s.table.begin(), s.table.end(), 0);
  std::shuffle(s.table.begin(), s.table.end(), rng);
  CHECK(cudaMalloc(&s.meta, (s.table.size() + 6) * sizeof(std::int32_t)));
  CHECK(cudaMalloc(&s.out, kHeads * kD * 2));
  const std::size_t sb = k::decode_attention_scratch_bytes(1, kHeads, kKvHeads, kD);
  CHECK(cudaMalloc(&s.scratch, sb));
  CHECK(cudaMemset(s.scratch, 0, sb));
  CHECK(cudaMalloc(&s.sums, sizeof(float) * kSumStride * kLayers));
  CHECK(cudaMemset(s.sums, 0, sizeof(float) * kSumStride * kLayers));
  CHECK(cudaDeviceSynchronize());
  return s;
}

// The metadata of one token at context `len` (its own key the newest).
void set_context(Setup& s, int len) {
  std::vector<std::int32_t> m(s.table);
  const int p = len - 1;
  for (const int x : {0, len, s.table[p / kBlockSize] * kBlockSize + p % kBlockSize, p, p, p}) m.push_back(x);
  CHECK(cudaMemcpy(s.meta, m.data(), m.size() * sizeof(std::int32_t), cudaMemcpyHostToDevice));
}

// us per layer: the median replay of a graph of kLayers launches; sums: each leaves its output as
// sums (DecodeAttentionSums) and zeroes the previous layer's, as in the engine's decode step;
// int8: the int8 cache.
float time_layers(Setup& s, cudaStream_t stream, bool sums, bool int8 = false) {
  const std::int32_t* m = s.meta + s.table.size();
  k::RopeKvArgs r;
  r.qkv = s.qkv;
  r.positions = m + 3;
  r.inv_freq = s.inv_freq;
  r.slots = m + 2;
  r.kv_type = k::ElemType::bf16;
  r.n = 1;
  r.heads = kHeads;
  r.kv_heads = kKvHeads;
  r.head_dim = kD;
  r.section0 = 16;
  r.section1 = 24;
  k::AttentionArgs a;
  a.kv_type = k::ElemType::bf16;
  a.block_tables = s.meta;
  a.table_offset = m;
  a.ctx_len = m + 1;
  a.out = s.out;
  a.out_type = k::ElemType::bf16;
  a.n = 1;
  a.heads = kHeads;
  a.kv_heads = kKvHeads;
  a.head_dim = kD;
  a.block_size = kBlockSize;
  a.max_ctx = s.max_ctx;
  a.scale = 1.0f / std::sqrt(static_cast<float>(kD));
  cudaGraph_t g;
  cudaGraphExec_t exec;
  CHECK(cudaStreamBeginCapture(stream, cudaStreamCaptureModeThreadLocal));
  for (int l = 0; l < kLayers; ++l) {
    a.k_cache = r.k_cache = int8 ? s.k8[l] : static_cast<void*>(s.k[l]);
    a.v_cache = r.v_cache = int8 ? s.v8[l] : static_cast<void*>(s.v[l]);
    a.k_scale = r.k_scale = int8 ? s.ks[l] : nullptr;
    a.v_scale = r.v_scale = int8 ? s.vs[l] : nullptr;
    k::DecodeAttentionSums ds;
    ds.o = s.sums + static_cast<std::size_t>(l) * kSumStride;
    ds.l = ds.o + 2 * kHeads * kD;
    ds.clear_o = s.sums + static_cast<std::size_t>((l + kLayers - 1) % kLayers) * kSumStride;
    ds.clear_l = ds.clear_o + 2 * kHeads * kD;
    if (k::launch_decode_attention(a, s.scratch, stream, &r, sums ? &ds : nullptr) == 0) {
      std::fprintf(stderr, "bench_decode_attention: the launch refused its arguments\n");
      std::exit(1);
    }
  }
  CHECK(cudaStreamEndCapture(stream, &g));
  CHECK(cudaGraphInstantiate(&exec, g, 0));
  CHECK(cudaGraphDestroy(g));
  const float ms = median_event_ms(stream, 20, 3, [&] { CHECK(cudaGraphLaunch(exec, stream)); });
  CHECK(cudaGraphExecDestroy(exec));
  return ms * 1e3f / kLayers;
}

std::vector<int> parse_list(const char* s) {
  std::vector<int> v;
  std::stringstream in(s);
  for (std::string item; std::getline(in, item, ',');) v.push_back(std::atoi(item.c_str()));
  return v;
}

}  // namespace

int main(int argc, char** argv) {
  const auto gq = k::query_gpus();
  if (gq.gpus.empty()) {
    std::printf("bench_decode_attention: %s\n", gq.why_none.c_str());
    return 0;
  }
  std::vector<int> contexts{1, 512, 1024, 2048, 4096, 8192, 16384};
  for (int i = 1; i + 1 < argc; ++i)
    if (std::strcmp(argv[i], "--contexts") == 0) contexts = parse_list(argv[i + 1]);
  int max_ctx = 1;
  for (const int c : contexts) {
    if (c < 1) {
      std::fprintf(stderr, "bench_decode_attention: --contexts takes lengths >= 1, got %d\n", c);
      return 2;
    }
    max_ctx = std::max(max_ctx, c);
  }
  std::printf("GPU: %s, %d SMs; decode attention fused with RoPE, bf16 cache, %d/%d heads, head_dim %d; one "
              "token; graph of %d layers, PDL on, median of 20\n",
              gq.gpus[0].name.c_str(), gq.gpus[0].multiprocessors, kHeads, kKvHeads, kD, kLayers);
  k::set_pdl_enabled(true);
  cudaStream_t stream;
  CHECK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  Setup s = make_setup(max_ctx);
  std::printf("\n%8s | %9s | %9s | %9s | %9s | %9s | %9s | %9s | %s\n", "context", "us/layer", "K/V GB/s", "sums",
              "cores", "int8", "i8 sums", "i8 cores", "us per token (28 layers)");
  std::string summary;
  for (const int c : contexts) {
    set_context(s, c);
    const float us = time_layers(s, stream, false);
    const float us_sums = time_layers(s, stream, true);
    const float us_int8 = time_layers(s, stream, false, true);
    const float us_int8_sums = time_layers(s, stream, true, true);
    k::set_decode_attention_tensor_cores(false);
    const float us_cores = time_layers(s, stream, false);
    const float us_int8_cores = time_layers(s, stream, false, true);
    k::set_decode_attention_tensor_cores(true);
    const double gbs = 2.0 * c * kKvHeads * kD * 2 / (us * 1e-6) / 1e9;  // the K and V rows read
    std::printf("%8d | %9.2f | %9.0f | %9.2f | %9.2f | %9.2f | %9.2f | %9.2f | %.0f\n", c, us, gbs, us_sums, us_cores,
                us_int8, us_int8_sums, us_int8_cores, us * kLayers);
    std::fflush(stdout);
    if (c == 4096 || c == 8192 || c == 16384) {
      char b[128];
      std::snprintf(b, sizeof b, "%s%d: %.2f us per layer (%.0f GB/s; sums %.2f; int8 sums %.2f)",
                    summary.empty() ? "" : ", ", c, us, gbs, us_sums, us_int8_sums);
      summary += b;
    }
  }
  CHECK(cudaStreamDestroy(stream));
  k::set_pdl_enabled(false);
  std::printf("\ndecode attention %s\n", summary.c_str());
  return 0;
}
