// bench_gemm_search: every cuBLASLt configuration (algorithm id x tile x stages x cluster shape x
// CTA swizzle x custom option) that cublasLtMatmulAlgoCheck accepts for the prefill GEMMs of one
// 7B layer; those whose last wave of blocks is at least [min fill] full are timed on real inputs
// (fewest waves first, up to [max] per product) against the heuristic's candidates (the first 8
// are what GemmLt's tuner started from). This search found the wave-fill rule of GemmLt's tuner
// (docs/PERFORMANCE.md session 17).
//   bench_gemm_search [n=2048] [max configs timed per product=4000] [min last-wave fill=0.9]
// Prints per product: the heuristic's first choice, the best of its first 8, and the fastest
// configurations found, with their ids (tile ids decode with cublasLt.h's cublasLtMatmulTile_t).
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include <cublasLt.h>
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#define CK(x)                                                                             \
  do {                                                                                    \
    cudaError_t e_ = (x);                                                                 \
    if (e_ != cudaSuccess) {                                                              \
      std::fprintf(stderr, "%s:%d %s: %s\n", __FILE__, __LINE__, #x, cudaGetErrorString(e_)); \
      std::exit(1);                                                                       \
    }                                                                                     \
  } while (0)
#define LK(x)                                                                        \
  do {                                                                               \
    cublasStatus_t s_ = (x);                                                         \
    if (s_ != CUBLAS_STATUS_SUCCESS) {                                               \
      std::fprintf(stderr, "%s:%d %s: %s\n", __FILE__, __LINE__, #x, cublasLtGetStatusName(s_)); \
      std::exit(1);                                                                  \
    }                                                                                \
  } while (0)

namespace {

// Deterministic pseudo-random values in [-scale, scale), written on the host and uploaded.
__nv_bfloat16* upload_random(std::size_t n, unsigned seed, float scale) {
  std::vector<__nv_bfloat16> h(n);
  for (std::size_t i = 0; i < n; ++i) {
    unsigned v = static_cast<unsigned>(i) * 2654435761u ^ seed * 40503u;
    v ^= v >> 13;
    v *= 0x5bd1e995u;
    v ^= v >> 15;
    h[i] = __float2bfloat16(scale * (static_cast<float>(v & 0xffff) / 32768.0f - 1.0f));
  }
  __nv_bfloat16* d = nullptr;
  CK(cudaMalloc(&d, n * sizeof(__nv_bfloat16)));
  CK(cudaMemcpy(d, h.data(), n * sizeof(__nv_bfloat16), cudaMemcpyHostToDevice));
  return d;
}

struct Config {
  int algo = 0;
  unsigned tile = 0, stages = 0, swizzle = 0, custom = 0;
  unsigned short cluster = 0;
  int splitk = 1;
  float waves = 0;
  float us = 0;
};

template <typename T>
T get_config(const cublasLtMatmulAlgo_t& a, cublasLtMatmulAlgoConfigAttributes_t attr) {
  T v{};
  std::size_t w = 0;
  cublasLtMatmulAlgoConfigGetAttribute(&a, attr, &v, sizeof(v), &w);
  return v;
}

Config describe(const cublasLtMatmulAlgo_t& a) {
  Config c;
  c.algo = get_config<int>(a, CUBLASLT_ALGO_CONFIG_ID);
  c.tile = get_config<unsigned>(a, CUBLASLT_ALGO_CONFIG_TILE_ID);
  c.stages = get_config<unsigned>(a, CUBLASLT_ALGO_CONFIG_STAGES_ID);
  c.swizzle = get_config<unsigned>(a, CUBLASLT_ALGO_CONFIG_CTA_SWIZZLING);
  c.custom = get_config<unsigned>(a, CUBLASLT_ALGO_CONFIG_CUSTOM_OPTION);
  c.cluster = get_config<unsigned short>(a, CUBLASLT_ALGO_CONFIG_CLUSTER_SHAPE_ID);
  c.splitk = get_config<int>(a, CUBLASLT_ALGO_CONFIG_SPLITK_NUM);
  return c;
}

struct Product {
  const char* name;
  int rows, cols;
  bool accumulate, out_bf16;
};

struct Ctx {
  cublasLtHandle_t h = nullptr;
  cublasLtMatmulDesc_t op = nullptr;
  cublasLtMatrixLayout_t a = nullptr, b = nullptr, c = nullptr;
  void* ws = nullptr;
  std::size_t ws_bytes = 32u << 20;
  const void *w = nullptr, *x = nullptr;
  void* y = nullptr;
  float beta = 0;
  cudaEvent_t e0 = nullptr, e1 = nullptr;
};

// Median of `reps` runs in microseconds; negative when the configuration does not run.
float time_algo(Ctx& c, const cublasLtMatmulAlgo_t& algo, int reps) {
  const float alpha = 1.0f;
  std::vector<float> t;
  for (int r = 0; r <= reps; ++r) {
    CK(cudaEventRecord(c.e0));
    if (cublasLtMatmul(c.h, c.op, &alpha, c.w, c.a, c.x, c.b, &c.beta, c.y, c.c, c.y, c.c, &algo, c.ws, c.ws_bytes,
                       nullptr) != CUBLAS_STATUS_SUCCESS) {
      cudaGetLastError();
      return -1;
    }
    CK(cudaEventRecord(c.e1));
    CK(cudaEventSynchronize(c.e1));
    float ms = 0;
    CK(cudaEventElapsedTime(&ms, c.e0, c.e1));
    if (r > 0) t.push_back(ms * 1e3f);
  }
  std::sort(t.begin(), t.end());
  return t[t.size() / 2];
}

void print(const char* label, const Config& k, double flops) {
  std::printf("    %-10s %8.1f us %5.0f TFLOP/s  algo %3d tile %4u stages %3u cluster %2u swizzle %u custom %2u splitk %d waves %.2f\n",
              label, k.us, flops / (k.us * 1e-6) / 1e12, k.algo, k.tile, k.stages, k.cluster, k.swizzle, k.custom, k.splitk,
              k.waves);
}

struct SearchOpts {
  int max_configs;
  float min_eff;
};
bool print_algos = true;

void search(Ctx& c, const Product& p, int n, const SearchOpts& o) {
  const int max_configs = o.max_configs;
  const float min_eff = o.min_eff;
  const cudaDataType_t out = p.out_bf16 ? CUDA_R_16BF : CUDA_R_32F;
  LK(cublasLtMatmulDescCreate(&c.op, CUBLAS_COMPUTE_32F, CUDA_R_32F));
  const cublasOperation_t ta = CUBLAS_OP_T, tb = CUBLAS_OP_N;
  LK(cublasLtMatmulDescSetAttribute(c.op, CUBLASLT_MATMUL_DESC_TRANSA, &ta, sizeof(ta)));
  LK(cublasLtMatmulDescSetAttribute(c.op, CUBLASLT_MATMUL_DESC_TRANSB, &tb, sizeof(tb)));
  LK(cublasLtMatrixLayoutCreate(&c.a, CUDA_R_16BF, p.cols, p.rows, p.cols));
  LK(cublasLtMatrixLayoutCreate(&c.b, CUDA_R_16BF, p.cols, n, p.cols));
  LK(cublasLtMatrixLayoutCreate(&c.c, out, p.rows, n, p.rows));
  c.beta = p.accumulate ? 1.0f : 0.0f;
  const double flops = 2.0 * n * p.rows * p.cols;
  std::printf("\n%s: n %d, rows %d, cols %d%s\n", p.name, n, p.rows, p.cols, p.accumulate ? ", accumulate" : "");

  // The heuristic's candidates (GemmLt's tuner times the first 8).
  cublasLtMatmulPreference_t pref = nullptr;
  LK(cublasLtMatmulPreferenceCreate(&pref));
  LK(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &c.ws_bytes, sizeof(c.ws_bytes)));
  std::vector<cublasLtMatmulHeuristicResult_t> heur(64);
  int found = 0;
  LK(cublasLtMatmulAlgoGetHeuristic(c.h, c.op, c.a, c.b, c.c, c.c, pref, 64, heur.data(), &found));
  cublasLtMatmulPreferenceDestroy(pref);
  std::vector<Config> hconf;
  for (int i = 0; i < found; ++i) {
    Config k = describe(heur[i].algo);
    k.waves = heur[i].wavesCount;
    k.us = time_algo(c, heur[i].algo, 15);
    hconf.push_back(k);
  }
  std::printf("  heuristic: %d candidates\n", found);
  for (int i = 0; i < found; ++i) {
    char label[16];
    std::snprintf(label, sizeof label, "h%d", i);
    print(label, hconf[i], flops);
  }

  // Every configuration cuBLASLt accepts.
  std::vector<int> ids(512);
  int nids = 0;
  LK(cublasLtMatmulAlgoGetIds(c.h, CUBLAS_COMPUTE_32F, CUDA_R_32F, CUDA_R_16BF, CUDA_R_16BF, out, out, 512, ids.data(),
                              &nids));
  // Pass 1: every configuration cublasLtMatmulAlgoCheck accepts (host only), with its wave count.
  struct Cand {
    cublasLtMatmulAlgo_t algo;
    float waves;
  };
  std::vector<Cand> cands;
  int checked = 0;
  const unsigned short clusters[] = {0, 2, 3, 5, 4, 8, 6};
  for (int ii = 0; ii < nids; ++ii) {
    cublasLtMatmulAlgo_t algo{};
    if (cublasLtMatmulAlgoInit(c.h, CUBLAS_COMPUTE_32F, CUDA_R_32F, CUDA_R_16BF, CUDA_R_16BF, out, out, ids[ii], &algo) !=
        CUBLAS_STATUS_SUCCESS)
      continue;
    std::size_t w = 0;
    std::vector<unsigned> tiles(1024), stages(1024);
    if (cublasLtMatmulAlgoCapGetAttribute(&algo, CUBLASLT_ALGO_CAP_TILE_IDS, tiles.data(), tiles.size() * 4, &w) !=
        CUBLAS_STATUS_SUCCESS)
      w = 0;
    tiles.resize(w / 4);
    if (tiles.empty()) tiles.push_back(0);
    if (cublasLtMatmulAlgoCapGetAttribute(&algo, CUBLASLT_ALGO_CAP_STAGES_IDS, stages.data(), stages.size() * 4, &w) !=
        CUBLAS_STATUS_SUCCESS)
      w = 0;
    stages.resize(w / 4);
    if (stages.empty()) stages.push_back(0);
    int swz = 0, custom_max = 0;
    cublasLtMatmulAlgoCapGetAttribute(&algo, CUBLASLT_ALGO_CAP_CTA_SWIZZLING_SUPPORT, &swz, sizeof swz, &w);
    cublasLtMatmulAlgoCapGetAttribute(&algo, CUBLASLT_ALGO_CAP_CUSTOM_OPTION_MAX, &custom_max, sizeof custom_max, &w);
    if (print_algos)
      std::printf("  algo %d: %zu tiles, %zu stages, swizzle %d, custom max %d\n", ids[ii], tiles.size(), stages.size(),
                  swz, custom_max);
    for (unsigned tile : tiles)
      for (unsigned st : stages)
        for (unsigned short cl : clusters)
          for (unsigned sw = 0; sw <= (swz ? 1u : 0u); ++sw)
            for (int cu = 0; cu <= std::min(custom_max, 7); ++cu) {
              cublasLtMatmulAlgo_t a = algo;
              const unsigned cuu = static_cast<unsigned>(cu);
              cublasLtMatmulAlgoConfigSetAttribute(&a, CUBLASLT_ALGO_CONFIG_TILE_ID, &tile, sizeof tile);
              cublasLtMatmulAlgoConfigSetAttribute(&a, CUBLASLT_ALGO_CONFIG_STAGES_ID, &st, sizeof st);
              if (cublasLtMatmulAlgoConfigSetAttribute(&a, CUBLASLT_ALGO_CONFIG_CLUSTER_SHAPE_ID, &cl, sizeof cl) !=
                      CUBLAS_STATUS_SUCCESS &&
                  cl != 0)
                continue;
              cublasLtMatmulAlgoConfigSetAttribute(&a, CUBLASLT_ALGO_CONFIG_CTA_SWIZZLING, &sw, sizeof sw);
              cublasLtMatmulAlgoConfigSetAttribute(&a, CUBLASLT_ALGO_CONFIG_CUSTOM_OPTION, &cuu, sizeof cuu);
              cublasLtMatmulHeuristicResult_t r{};
              ++checked;
              if (cublasLtMatmulAlgoCheck(c.h, c.op, c.a, c.b, c.c, c.c, &a, &r) != CUBLAS_STATUS_SUCCESS) continue;
              if (r.workspaceSize > c.ws_bytes) continue;
              cands.push_back({a, r.wavesCount});
            }
  }
  // Pass 2: time the configurations whose last wave is nearly full, largest tiles first.
  std::vector<Cand> pick;
  for (const Cand& k : cands) {
    const float eff = k.waves / std::ceil(k.waves);
    if (eff >= min_eff && k.waves >= 0.85f) pick.push_back(k);
  }
  // Fewest waves first: the largest tiles that still fill the GPU.
  std::stable_sort(pick.begin(), pick.end(), [](const Cand& x, const Cand& y) { return x.waves < y.waves; });
  if (static_cast<int>(pick.size()) > max_configs) pick.resize(static_cast<std::size_t>(max_configs));
  std::vector<Config> all;
  std::vector<cublasLtMatmulAlgo_t> all_algo;
  for (const Cand& k : pick) {
    Config cf = describe(k.algo);
    cf.waves = k.waves;
    cf.us = time_algo(c, k.algo, 3);
    if (cf.us > 0) {
      all.push_back(cf);
      all_algo.push_back(k.algo);
    }
  }
  std::printf("  search: %d configurations checked, %zu accepted, %zu with the last wave >= %.2f full, %zu ran\n", checked,
              cands.size(), pick.size(), min_eff, all.size());
  // Re-time the 16 fastest with more runs (single runs vary by a few percent).
  {
    std::vector<std::size_t> order(all.size());
    for (std::size_t i = 0; i < order.size(); ++i) order[i] = i;
    std::sort(order.begin(), order.end(), [&](std::size_t x, std::size_t y) { return all[x].us < all[y].us; });
    for (std::size_t i = 0; i < std::min<std::size_t>(16, order.size()); ++i)
      all[order[i]].us = time_algo(c, all_algo[order[i]], 15);
  }
  std::sort(all.begin(), all.end(), [](const Config& x, const Config& y) { return x.us < y.us; });
  std::printf("  search: %d configurations checked, %zu ran\n", checked, all.size());
  Config tuned = hconf.empty() ? Config{} : *std::min_element(hconf.begin(), hconf.begin() + std::min(8, found),
                                                              [](const Config& x, const Config& y) { return x.us < y.us; });
  if (!hconf.empty()) {
    print("heur. #0", hconf[0], flops);
    print("tuned(8)", tuned, flops);
  }
  for (std::size_t i = 0; i < std::min<std::size_t>(12, all.size()); ++i) {
    char label[16];
    std::snprintf(label, sizeof label, "best %zu", i);
    print(label, all[i], flops);
  }
  if (!all.empty() && !hconf.empty())
    std::printf("  RESULT %s: tuned %.1f us, search best %.1f us (%+.1f%%)\n", p.name, tuned.us, all[0].us,
                100.0 * (all[0].us - tuned.us) / tuned.us);
  std::fflush(stdout);
  cublasLtMatrixLayoutDestroy(c.a);
  cublasLtMatrixLayoutDestroy(c.b);
  cublasLtMatrixLayoutDestroy(c.c);
  cublasLtMatmulDescDestroy(c.op);
}

}  // namespace

int main(int argc, char** argv) {
  const int n = argc > 1 ? std::atoi(argv[1]) : 2048;
  const int max_configs = argc > 2 ? std::atoi(argv[2]) : 4000;
  const int kH = 3584, kFF = 18944, kQkv = 3584 + 2 * 512;
  const Product products[] = {{"o + residual", kH, kH, true, false},
                              {"down + residual", kH, kFF, true, false},
                              {"qkv", kQkv, kH, false, false},
                              {"gate/up (bf16 out)", 2 * kFF, kH, false, true}};
  Ctx c;
  LK(cublasLtCreate(&c.h));
  __nv_bfloat16* w = upload_random(static_cast<std::size_t>(2 * kFF) * kH, 5u, 0.1f);
  __nv_bfloat16* x = upload_random(static_cast<std::size_t>(n) * kFF, 6u, 1.0f);
  CK(cudaMalloc(&c.y, static_cast<std::size_t>(n) * 2 * kFF * 4));
  CK(cudaMalloc(&c.ws, c.ws_bytes));
  CK(cudaMemset(c.y, 0, static_cast<std::size_t>(n) * 2 * kFF * 4));
  CK(cudaDeviceSynchronize());
  CK(cudaEventCreate(&c.e0));
  CK(cudaEventCreate(&c.e1));
  c.w = w;
  c.x = x;
  const SearchOpts o{max_configs, argc > 3 ? static_cast<float>(std::atof(argv[3])) : 0.9f};
  for (const Product& p : products) {
    search(c, p, n, o);
    print_algos = false;
  }
  return 0;
}
