// Causal prefill attention (reports, never fails): launch_prefill_attention on the
// Cosmos-Reason1-7B shape (28 query heads, 4 KV heads, head_dim 128, the engine's 16-slot cache
// blocks, a shuffled block table), one sequence of 512, 2,048 and 4,096 new tokens on an empty cache
// and 512 new tokens after 1,536 cached, with each kernel (mma.sync; wgmma and the warp-specialized
// TMA kernel where prefill_attention_wgmma_available()). Per shape: the median of 20 launches (after 3 warm-ups, PDL
// on) in ms, the 28 layers' total, causal TFLOP/s (4 * heads * head_dim * the keys each row attends,
// summed over the rows) and the GB/s of the launcher's bytes estimate. The last line is the summary
// for 2,048 tokens with the kernel the engine picks (tests/gpu/run.sh prints it):
//   prefill attention 2048: X.XXX ms per layer (Y TFLOP/s), Z.ZZ ms for 28 layers (KERNEL)
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <numeric>
#include <random>
#include <utility>
#include <vector>

#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include "bench_check.h"
#include "bench_fill.cuh"
#include "kernels/device_info.cuh"
#include "kernels/pdl.cuh"
#include "kernels/prefill_attention.cuh"
#include "kernels/tensor_map.cuh"

namespace {

constexpr int kHeads = 28, kKvHeads = 4, kD = 128, kBlockSize = 16;

struct Result {
  float ms = 0;
  double tflops = 0;
};

const char* name(cosmos::kernels::PrefillAttentionKernel k) {
  using K = cosmos::kernels::PrefillAttentionKernel;
  return k == K::tma ? "tma" : k == K::wgmma ? "wgmma" : "mma";
}

Result run_shape(int q_len, int ctx, cosmos::kernels::PrefillAttentionKernel kernel, cudaStream_t stream) {
  namespace k = cosmos::kernels;
  const int kv_len = ctx + q_len, blocks = (kv_len + kBlockSize - 1) / kBlockSize;
  std::vector<std::int32_t> table(blocks);  // a shuffled block table, as a long-lived cache has
  std::iota(table.begin(), table.end(), 0);
  std::shuffle(table.begin(), table.end(), std::mt19937(7));
  const std::size_t q_elems = static_cast<std::size_t>(q_len) * kHeads * kD;  // q, out: [q_len, heads, D]
  const std::size_t kv_elems = static_cast<std::size_t>(blocks) * kBlockSize * kKvHeads * kD;  // [slots, kv_heads, D]
  __nv_bfloat16 *q = nullptr, *kc = nullptr, *vc = nullptr, *out = nullptr;
  std::int32_t* meta = nullptr;  // [table..., table_offset, q_start, q_len, ctx_start]
  CHECK(cudaMalloc(&q, q_elems * 2));
  CHECK(cudaMalloc(&out, q_elems * 2));
  CHECK(cudaMalloc(&kc, kv_elems * 2));
  CHECK(cudaMalloc(&vc, kv_elems * 2));
  std::vector<std::int32_t> host_meta(table);
  for (const int x : {0, 0, q_len, ctx}) host_meta.push_back(x);
  CHECK(cudaMalloc(&meta, host_meta.size() * sizeof(std::int32_t)));
  CHECK(cudaMemcpy(meta, host_meta.data(), host_meta.size() * sizeof(std::int32_t), cudaMemcpyHostToDevice));
  bench::fill_bf16(q, q_elems, 2.0f, 1);
  bench::fill_bf16(kc, kv_elems, 1.0f, 2);
  bench::fill_bf16(vc, kv_elems, 1.0f, 3);
  CHECK(cudaDeviceSynchronize());

  k::PrefillAttentionArgs a;
  a.q = q;
  a.k_cache = kc;
  a.v_cache = vc;
  a.block_tables = meta;
  a.table_offset = meta + blocks;
  a.q_start = meta + blocks + 1;
  a.q_len = meta + blocks + 2;
  a.ctx_start = meta + blocks + 3;
  a.out = out;
  a.seqs = 1;
  a.heads = kHeads;
  a.kv_heads = kKvHeads;
  a.head_dim = kD;
  a.block_size = kBlockSize;
  a.n = q_len;
  a.max_q_len = q_len;
  a.max_kv_len = kv_len;
  a.kv_slots = blocks * kBlockSize;
  a.scale = 1.0f / std::sqrt(static_cast<float>(kD));
  a.kernel = kernel;

  double keys = 0;  // keys attended, summed over the rows
  for (int j = 0; j < q_len; ++j) keys += ctx + j + 1;
  const double flops = 4.0 * kHeads * kD * keys;
  std::size_t bytes = 0;
  const float ms = median_event_ms(stream, 20, 3, [&] { bytes = k::launch_prefill_attention(a, stream); });
  CHECK(cudaGetLastError());
  CHECK(cudaStreamSynchronize(stream));
  const Result r{ms, flops / (ms * 1e-3) / 1e12};
  std::printf("%-5s q %4d after %4d | %7.3f ms per layer, %6.2f ms for 28 | %6.1f TFLOP/s | %6.0f GB/s (estimate)\n",
              name(kernel), q_len,
              ctx, r.ms, 28 * r.ms, r.tflops, bytes / (ms * 1e-3) / 1e9);
  std::fflush(stdout);
  for (void* p : {static_cast<void*>(q), static_cast<void*>(out), static_cast<void*>(kc), static_cast<void*>(vc),
                  static_cast<void*>(meta)})
    CHECK(cudaFree(p));
  return r;
}

}  // namespace

int main() {
  const auto gq = cosmos::kernels::query_gpus();
  if (gq.gpus.empty()) {
    std::printf("bench_attention: %s\n", gq.why_none.c_str());
    return 0;
  }
  std::printf("GPU: %s, %d SMs; prefill attention bf16, %d/%d heads, head_dim %d, block size %d; median of 20, "
              "PDL on\n\n",
              gq.gpus[0].name.c_str(), gq.gpus[0].multiprocessors, kHeads, kKvHeads, kD, kBlockSize);
  cosmos::kernels::set_pdl_enabled(true);
  cudaStream_t s;
  CHECK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  using Kernel = cosmos::kernels::PrefillAttentionKernel;
  const bool wgmma = cosmos::kernels::prefill_attention_wgmma_available();
  // What the engine runs on this shape (the TMA kernel needs the tensor-map encoder too).
  const Kernel chosen = wgmma && cosmos::kernels::tensor_maps_available() ? Kernel::tma : wgmma ? Kernel::wgmma : Kernel::mma;
  Result at2048;
  for (const Kernel kernel : {Kernel::mma, Kernel::wgmma, Kernel::tma}) {
    if (kernel != Kernel::mma && !wgmma) {
      std::printf("%s: not available (needs compute capability 9.0 and a build for sm_90)\n", name(kernel));
      continue;
    }
    for (const auto [q_len, ctx] : {std::pair{512, 0}, std::pair{2048, 0}, std::pair{4096, 0}, std::pair{512, 1536}}) {
      const Result r = run_shape(q_len, ctx, kernel, s);
      if (q_len == 2048 && ctx == 0 && kernel == chosen) at2048 = r;
    }
  }
  CHECK(cudaStreamDestroy(s));
  cosmos::kernels::set_pdl_enabled(false);
  std::printf("\nprefill attention 2048: %.3f ms per layer (%.0f TFLOP/s), %.2f ms for 28 layers (%s)\n", at2048.ms,
              at2048.tflops, 28 * at2048.ms, name(chosen));
  return 0;
}
