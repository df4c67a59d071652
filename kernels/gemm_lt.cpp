#include "kernels/gemm_lt.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <utility>

namespace cosmos::kernels {
namespace {

std::string status_text(const char* call, cublasStatus_t st) {
  return std::string(call) + ": " + cublasLtGetStatusName(st) + " (" + cublasLtGetStatusString(st) + ")";
}

#define LT_TRY(call)                                            \
  do {                                                          \
    const cublasStatus_t st_ = (call);                          \
    if (st_ != CUBLAS_STATUS_SUCCESS) return status_text(#call, st_); \
  } while (0)

// The scale vectors of an fp8 product (attributes of the op, set before each call).
std::string set_scales(cublasLtMatmulDesc_t op, const float* w_scale, const float* x_scale) {
  LT_TRY(cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_A_SCALE_POINTER, &w_scale, sizeof(w_scale)));
  LT_TRY(cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_B_SCALE_POINTER, &x_scale, sizeof(x_scale)));
  return {};
}

void destroy(cublasLtMatmulDesc_t op, cublasLtMatrixLayout_t a, cublasLtMatrixLayout_t b, cublasLtMatrixLayout_t c) {
  if (a) cublasLtMatrixLayoutDestroy(a);
  if (b) cublasLtMatrixLayoutDestroy(b);
  if (c) cublasLtMatrixLayoutDestroy(c);
  if (op) cublasLtMatmulDescDestroy(op);
}

}  // namespace

GemmLt::~GemmLt() {
  for (auto& [key, p] : plans_) {
    cublasLtMatrixLayoutDestroy(p.a);
    cublasLtMatrixLayoutDestroy(p.b);
    cublasLtMatrixLayoutDestroy(p.c);
    cublasLtMatmulDescDestroy(p.op);
  }
  if (handle_) cublasLtDestroy(handle_);
}

std::string GemmLt::init(void* workspace, std::size_t workspace_bytes) {
  workspace_ = workspace;
  workspace_bytes_ = workspace_bytes;
  LT_TRY(cublasLtCreate(&handle_));
  return {};
}

// cuBLASLt is column-major: y^T [rows, n] = W [rows, cols] (stored as W^T col-major, ld = cols,
// op T) x x^T [cols, n] (x row-major = col-major [cols, n], ld = cols, op N).
// fp8: A (W) and B (x) in E4M3 with outer-vector scales: A's vector has M = rows elements, B's N = n.
std::string GemmLt::describe(const Key& key, Plan& p) {
  const auto [n, rows, cols, accumulate, type_int, out_int, w_t] = key;
  const bool fp8 = type_int == kFp8;
  const cudaDataType_t t = fp8 ? CUDA_R_8F_E4M3 : static_cast<ElemType>(type_int) == ElemType::f16 ? CUDA_R_16F : CUDA_R_16BF;
  const ElemType out_e = static_cast<ElemType>(out_int);
  const cudaDataType_t out = out_e == ElemType::f32 ? CUDA_R_32F : out_e == ElemType::f16 ? CUDA_R_16F : CUDA_R_16BF;
  LT_TRY(cublasLtMatmulDescCreate(&p.op, CUBLAS_COMPUTE_32F, CUDA_R_32F));
  if (fp8) {
    const std::int32_t mode = CUBLASLT_MATMUL_MATRIX_SCALE_OUTER_VEC_32F;
    LT_TRY(cublasLtMatmulDescSetAttribute(p.op, CUBLASLT_MATMUL_DESC_A_SCALE_MODE, &mode, sizeof(mode)));
    LT_TRY(cublasLtMatmulDescSetAttribute(p.op, CUBLASLT_MATMUL_DESC_B_SCALE_MODE, &mode, sizeof(mode)));
    // The heuristic refuses null scale pointers (CUBLAS_STATUS_INVALID_VALUE, measured on the
    // H200): placeholders that are never read; each call sets the real vectors.
    const void* placeholder = workspace_;
    LT_TRY(cublasLtMatmulDescSetAttribute(p.op, CUBLASLT_MATMUL_DESC_A_SCALE_POINTER, &placeholder, sizeof(placeholder)));
    LT_TRY(cublasLtMatmulDescSetAttribute(p.op, CUBLASLT_MATMUL_DESC_B_SCALE_POINTER, &placeholder, sizeof(placeholder)));
  }
  // Column-major views: W [rows, cols] row-major is A = [cols x rows] (ld cols), used transposed;
  // stored transposed ([cols, rows] row-major) it is A = [rows x cols] (ld rows), used as it is.
  const cublasOperation_t ta = w_t ? CUBLAS_OP_N : CUBLAS_OP_T, tb = CUBLAS_OP_N;
  LT_TRY(cublasLtMatmulDescSetAttribute(p.op, CUBLASLT_MATMUL_DESC_TRANSA, &ta, sizeof(ta)));
  LT_TRY(cublasLtMatmulDescSetAttribute(p.op, CUBLASLT_MATMUL_DESC_TRANSB, &tb, sizeof(tb)));
  if (w_t)
    LT_TRY(cublasLtMatrixLayoutCreate(&p.a, t, rows, cols, rows));
  else
    LT_TRY(cublasLtMatrixLayoutCreate(&p.a, t, cols, rows, cols));
  LT_TRY(cublasLtMatrixLayoutCreate(&p.b, t, cols, n, cols));
  LT_TRY(cublasLtMatrixLayoutCreate(&p.c, out, rows, n, rows));
  return {};
}

std::string GemmLt::candidates(const Key& key, Plan& p, int max_algos,
                               std::vector<cublasLtMatmulHeuristicResult_t>& out) {
  const auto [n, rows, cols, accumulate, type_int, out_int, w_t] = key;
  cublasLtMatmulPreference_t pref = nullptr;
  LT_TRY(cublasLtMatmulPreferenceCreate(&pref));
  const cublasStatus_t ps = cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES,
                                                                 &workspace_bytes_, sizeof(workspace_bytes_));
  if (ps != CUBLAS_STATUS_SUCCESS) {
    cublasLtMatmulPreferenceDestroy(pref);
    return status_text("cublasLtMatmulPreferenceSetAttribute", ps);
  }
  out.assign(static_cast<std::size_t>(max_algos), cublasLtMatmulHeuristicResult_t{});
  int found = 0;
  const cublasStatus_t st =
      cublasLtMatmulAlgoGetHeuristic(handle_, p.op, p.a, p.b, p.c, p.c, pref, max_algos, out.data(), &found);
  cublasLtMatmulPreferenceDestroy(pref);
  if (st != CUBLAS_STATUS_SUCCESS) return status_text("cublasLtMatmulAlgoGetHeuristic", st);
  if (found == 0)
    return "cublasLtMatmulAlgoGetHeuristic: no algorithm for " + std::to_string(n) + "x" + std::to_string(rows) + "x" +
           std::to_string(cols) + (accumulate ? " (accumulate)" : "");
  out.resize(static_cast<std::size_t>(found));
  return {};
}

namespace {

struct TileDims {
  std::uint32_t id;
  int m, n;
};
// Every cublasLtMatmulTile_t of this toolkit (generated from cublasLt.h by kernels/CMakeLists.txt).
constexpr TileDims kTiles[] = {
#include "gemm_lt_tiles.inc"
    {CUBLASLT_MATMUL_TILE_UNDEFINED, 0, 0}};

}  // namespace

// Wave-fill candidates: of the heuristic algorithm's tiles that cuBLASLt accepts for this product,
// the kWaveTiles that waste the least of the GPU: useful outputs rows x n over what the blocks'
// waves occupy, ceil(waves) x blocks per wave x tile area (blocks per wave from cuBLASLt's
// wavesCount). Tiles smaller than 128 x 128 in outputs per operand element (m n / (m + n) < 64) or
// above 192 x 192 in area are left out: they lose on data reuse or registers. Each is tried with the
// cluster shapes and custom options that won on the H200 (docs/PERFORMANCE.md session 17).
void GemmLt::wave_candidates(const Key& key, Plan& p, const cublasLtMatmulAlgo_t& base,
                             std::vector<cublasLtMatmulAlgo_t>& out) {
  const int n = std::get<0>(key), rows = std::get<1>(key);
  std::vector<std::uint32_t> tiles(CUBLASLT_MATMUL_TILE_END);
  std::size_t written = 0;
  if (cublasLtMatmulAlgoCapGetAttribute(&base, CUBLASLT_ALGO_CAP_TILE_IDS, tiles.data(), tiles.size() * sizeof(tiles[0]),
                                        &written) != CUBLAS_STATUS_SUCCESS)
    return;
  tiles.resize(written / sizeof(tiles[0]));
  std::uint32_t custom_max = 0;
  cublasLtMatmulAlgoCapGetAttribute(&base, CUBLASLT_ALGO_CAP_CUSTOM_OPTION_MAX, &custom_max, sizeof(custom_max),
                                    &written);
  auto configure = [&](std::uint32_t tile, std::uint16_t cluster, std::uint32_t custom, cublasLtMatmulAlgo_t& a,
                       float& waves) {
    a = base;
    cublasLtMatmulHeuristicResult_t r{};
    if (cublasLtMatmulAlgoConfigSetAttribute(&a, CUBLASLT_ALGO_CONFIG_TILE_ID, &tile, sizeof(tile)) !=
            CUBLAS_STATUS_SUCCESS ||
        cublasLtMatmulAlgoConfigSetAttribute(&a, CUBLASLT_ALGO_CONFIG_CLUSTER_SHAPE_ID, &cluster, sizeof(cluster)) !=
            CUBLAS_STATUS_SUCCESS ||
        cublasLtMatmulAlgoConfigSetAttribute(&a, CUBLASLT_ALGO_CONFIG_CUSTOM_OPTION, &custom, sizeof(custom)) !=
            CUBLAS_STATUS_SUCCESS ||
        cublasLtMatmulAlgoCheck(handle_, p.op, p.a, p.b, p.c, p.c, &a, &r) != CUBLAS_STATUS_SUCCESS ||
        r.workspaceSize > workspace_bytes_ || !(r.wavesCount > 0.0f))
      return false;
    waves = r.wavesCount;
    return true;
  };
  struct Fill {
    double use;  // useful share of the occupied waves
    std::uint32_t tile;
    std::uint16_t cluster;  // 1x1x1, or AUTO where clusters are refused (before Hopper)
  };
  std::vector<Fill> fill;
  for (const std::uint32_t tile : tiles) {
    const auto dims = std::find_if(std::begin(kTiles), std::end(kTiles), [&](const TileDims& t) { return t.id == tile; });
    if (dims == std::end(kTiles) || dims->m == 0) continue;
    const double tm = dims->m, tn = dims->n;
    if (tm * tn / (tm + tn) < 64.0 || tm * tn > 192.0 * 192.0) continue;
    cublasLtMatmulAlgo_t a;
    float waves = 0;
    std::uint16_t cluster = CUBLASLT_CLUSTER_SHAPE_1x1x1;
    if (!configure(tile, cluster, 0, a, waves)) {
      cluster = CUBLASLT_CLUSTER_SHAPE_AUTO;
      if (!configure(tile, cluster, 0, a, waves)) continue;
    }
    const double blocks = std::ceil(rows / tm) * std::ceil(n / tn);
    const double occupied = std::ceil(static_cast<double>(waves) - 1e-3) * (blocks / waves) * tm * tn;
    fill.push_back({static_cast<double>(rows) * n / occupied, tile, cluster});
  }
  std::stable_sort(fill.begin(), fill.end(), [](const Fill& x, const Fill& y) { return x.use > y.use; });
  if (fill.size() > static_cast<std::size_t>(kWaveTiles)) fill.resize(kWaveTiles);
  const std::uint32_t customs[] = {0, 4, 6};
  for (const Fill& f : fill) {
    const std::uint16_t clusters[] = {f.cluster, CUBLASLT_CLUSTER_SHAPE_2x1x1, CUBLASLT_CLUSTER_SHAPE_1x2x1};
    for (std::size_t c = 0; c < (f.cluster == CUBLASLT_CLUSTER_SHAPE_AUTO ? 1u : 3u); ++c)
      for (const std::uint32_t custom : customs) {
        cublasLtMatmulAlgo_t a;
        float waves = 0;
        if (custom <= custom_max && configure(f.tile, clusters[c], custom, a, waves)) out.push_back(a);
      }
  }
}

std::string GemmLt::tuning_candidates(const Key& key, Plan& p, int max_algos, std::vector<cublasLtMatmulAlgo_t>& out) {
  std::vector<cublasLtMatmulHeuristicResult_t> found;
  if (std::string err = candidates(key, p, max_algos, found); !err.empty()) return err;
  for (const auto& f : found) out.push_back(f.algo);
  if (wave_fill_) wave_candidates(key, p, found[0].algo, out);
  return {};
}

std::string GemmLt::run_candidate(int index, const void* w, const void* x, void* y, int n, int rows, int cols,
                                  bool accumulate, ElemType type, cudaStream_t stream, ElemType out_type) {
  if (!handle_) return "cuBLASLt is not initialized";
  const Key key{n, rows, cols, accumulate, static_cast<int>(type), static_cast<int>(out_type), false};
  Plan p;
  std::vector<cublasLtMatmulAlgo_t> algos;
  std::string err = describe(key, p);
  if (err.empty()) err = tuning_candidates(key, p, kTuneCandidates, algos);
  if (err.empty() && (index < 0 || static_cast<std::size_t>(index) >= algos.size()))
    err = "no tuning candidate " + std::to_string(index) + " (" + std::to_string(algos.size()) + ")";
  const float alpha = 1.0f, beta = accumulate ? 1.0f : 0.0f;
  if (err.empty()) {
    const cublasStatus_t st = cublasLtMatmul(handle_, p.op, &alpha, w, p.a, x, p.b, &beta, y, p.c, y, p.c,
                                             &algos[static_cast<std::size_t>(index)], workspace_, workspace_bytes_, stream);
    if (st != CUBLAS_STATUS_SUCCESS) err = status_text("cublasLtMatmul", st);
  }
  destroy(p.op, p.a, p.b, p.c);
  return err;
}

int GemmLt::tuning_candidate_count(int n, int rows, int cols, bool accumulate, ElemType type, ElemType out_type,
                                   int* wave_fill) {
  if (!handle_) return 0;
  const Key key{n, rows, cols, accumulate, static_cast<int>(type), static_cast<int>(out_type), false};
  Plan p;
  std::vector<cublasLtMatmulHeuristicResult_t> found;
  std::vector<cublasLtMatmulAlgo_t> algos;
  if (describe(key, p).empty() && candidates(key, p, kTuneCandidates, found).empty() && wave_fill_)
    wave_candidates(key, p, found[0].algo, algos);
  destroy(p.op, p.a, p.b, p.c);
  if (wave_fill) *wave_fill = static_cast<int>(algos.size());
  return static_cast<int>(found.size() + algos.size());
}

std::string GemmLt::identity() const {
  int dev = 0;
  cudaDeviceProp prop{};
  if (cudaGetDevice(&dev) != cudaSuccess || cudaGetDeviceProperties(&prop, dev) != cudaSuccess) {
    cudaGetLastError();
    return {};
  }
  return std::string(prop.name) + ", cc " + std::to_string(prop.major) + "." + std::to_string(prop.minor) + ", " +
         std::to_string(prop.multiProcessorCount) + " SMs, cuBLASLt " + std::to_string(cublasLtGetVersion());
}

std::vector<GemmLt::Tuned> GemmLt::tuned() const {
  std::vector<Tuned> out;
  for (const auto& [key, algo] : tuned_) {
    const auto [n, rows, cols, accumulate, type_int, out_int, w_t] = key;
    out.push_back({{n, rows, cols, accumulate ? 1 : 0, type_int, out_int, w_t ? 1 : 0}, algo});
  }
  return out;
}

int GemmLt::restore_tuned(const std::vector<Tuned>& list) {
  if (!handle_) return 0;
  int kept = 0;
  for (const Tuned& t : list) {
    const auto& k = t.key;
    if (k[0] <= 0 || k[1] <= 0 || k[2] <= 0 || (k[3] != 0 && k[3] != 1) || (k[6] != 0 && k[6] != 1)) continue;
    const auto half = [](int e) { return e == static_cast<int>(ElemType::bf16) || e == static_cast<int>(ElemType::f16); };
    if (!(k[4] == kFp8 || half(k[4])) || !(half(k[5]) || k[5] == static_cast<int>(ElemType::f32))) continue;
    const Key key{k[0], k[1], k[2], k[3] == 1, k[4], k[5], k[6] == 1};
    if (bucket_of(key) != key) continue;
    Plan p;
    cublasLtMatmulHeuristicResult_t check{};
    if (describe(key, p).empty() &&
        cublasLtMatmulAlgoCheck(handle_, p.op, p.a, p.b, p.c, p.c, &t.algo, &check) == CUBLAS_STATUS_SUCCESS &&
        check.workspaceSize <= workspace_bytes_) {
      tuned_[key] = t.algo;
      ++kept;
    }
    destroy(p.op, p.a, p.b, p.c);
  }
  return kept;
}

GemmLt::Key GemmLt::bucket_of(const Key& key) {
  Key b = key;
  int n = 1;
  while (n < std::get<0>(key)) n *= 2;
  std::get<0>(b) = n;
  return b;
}

// The algorithm for a new shape: the one tuned for its bucket when cuBLASLt accepts it here, else
// the heuristic's first choice.
std::string GemmLt::plan(const Key& key, Plan& p) {
  if (std::string err = describe(key, p); !err.empty()) return err;
  if (auto it = tuned_.find(bucket_of(key)); it != tuned_.end()) {
    cublasLtMatmulHeuristicResult_t check{};
    if (cublasLtMatmulAlgoCheck(handle_, p.op, p.a, p.b, p.c, p.c, &it->second, &check) == CUBLAS_STATUS_SUCCESS &&
        check.workspaceSize <= workspace_bytes_) {
      p.algo = it->second;
      return {};
    }
  }
  std::vector<cublasLtMatmulHeuristicResult_t> found;
  if (std::string err = candidates(key, p, 1, found); !err.empty()) return err;
  p.algo = found[0].algo;
  return {};
}

std::vector<float> GemmLt::time_candidates(const void* w, const void* x, int n, int rows, int cols, bool accumulate,
                                           ElemType type, ElemType out_type, cudaStream_t stream, int max_algos,
                                           int reps, std::string& error, const float* w_scale, const float* x_scale,
                                           bool w_transposed) {
  std::vector<float> times;
  error.clear();
  const int type_key = w_scale ? kFp8 : static_cast<int>(type);
  const Key key{n, rows, cols, accumulate, type_key, static_cast<int>(out_type), w_transposed && !w_scale};
  Plan p;
  std::vector<cublasLtMatmulAlgo_t> algos;
  void* scratch = nullptr;
  cudaEvent_t e0 = nullptr, e1 = nullptr;
  auto cleanup = [&] {
    destroy(p.op, p.a, p.b, p.c);
    if (scratch) cudaFree(scratch);
    if (e0) cudaEventDestroy(e0);
    if (e1) cudaEventDestroy(e1);
  };
  if ((error = describe(key, p)).empty() && w_scale) error = set_scales(p.op, w_scale, x_scale);
  if (error.empty()) error = tuning_candidates(key, p, max_algos, algos);
  const std::size_t out_bytes = static_cast<std::size_t>(rows) * n * elem_size(out_type);
  if (error.empty() && cudaMalloc(&scratch, out_bytes) != cudaSuccess) {
    cudaGetLastError();
    scratch = nullptr;
    error = "no memory for a " + std::to_string(out_bytes >> 20) + " MiB tuning output";
  }
  if (error.empty() && (cudaEventCreate(&e0) != cudaSuccess || cudaEventCreate(&e1) != cudaSuccess))
    error = "cudaEventCreate failed";
  // Timed as it runs: an accumulating product also reads its output (zeros here).
  if (error.empty() && accumulate && cudaMemsetAsync(scratch, 0, out_bytes, stream) != cudaSuccess)
    error = std::string("cudaMemsetAsync: ") + cudaGetErrorString(cudaGetLastError());
  const float alpha = 1.0f, beta = accumulate ? 1.0f : 0.0f;
  // Median of `runs` timed runs after a warm-up; 1e30 when the algorithm cannot run here.
  auto time_one = [&](const cublasLtMatmulAlgo_t& algo, int runs) {
    std::vector<float> t;
    for (int r = 0; r <= runs && error.empty(); ++r) {  // r == 0: warm-up
      if (cudaEventRecord(e0, stream) != cudaSuccess) {
        error = std::string("cudaEventRecord: ") + cudaGetErrorString(cudaGetLastError());
        break;
      }
      const cublasStatus_t st = cublasLtMatmul(handle_, p.op, &alpha, w, p.a, x, p.b, &beta, scratch, p.c, scratch,
                                               p.c, &algo, workspace_, workspace_bytes_, stream);
      if (st != CUBLAS_STATUS_SUCCESS) return 1e30f;  // never picked
      float ms = 0.0f;
      cudaError_t ce = cudaEventRecord(e1, stream);
      if (ce == cudaSuccess) ce = cudaEventSynchronize(e1);
      if (ce == cudaSuccess) ce = cudaEventElapsedTime(&ms, e0, e1);
      if (ce != cudaSuccess) {
        error = std::string("timing GEMM algorithms: ") + cudaGetErrorString(ce);
        break;
      }
      if (r > 0) t.push_back(ms);
    }
    if (t.empty()) return 1e30f;
    std::sort(t.begin(), t.end());
    return t[t.size() / 2];
  };
  for (std::size_t i = 0; error.empty() && i < algos.size(); ++i) times.push_back(time_one(algos[i], reps));
  if (error.empty() && (times.empty() || *std::min_element(times.begin(), times.end()) >= 1e30f))
    error = "no GEMM candidate ran";
  // Single runs vary by a few percent: the three fastest again, with more runs, pick the winner for
  // the bucket (used by run() for later plans).
  if (error.empty()) {
    std::vector<std::size_t> order(times.size());
    for (std::size_t i = 0; i < order.size(); ++i) order[i] = i;
    const std::size_t top = std::min<std::size_t>(3, order.size());
    std::partial_sort(order.begin(), order.begin() + static_cast<std::ptrdiff_t>(top), order.end(),
                      [&](std::size_t a, std::size_t b) { return times[a] < times[b]; });
    std::size_t best = order[0];
    for (std::size_t i = 0; i < top && error.empty(); ++i) {
      times[order[i]] = time_one(algos[order[i]], 2 * reps + 1);
      if (times[order[i]] < times[best]) best = order[i];
    }
    if (error.empty()) {
      tuned_[bucket_of(key)] = algos[best];
      ++tunings_;
      // The attribute's own size first (the call refuses any other), then its value, zero-extended.
      const auto attr = [&](cublasLtMatmulAlgoConfigAttributes_t a) {
        std::uint64_t v = 0;
        std::size_t size = 0;
        if (cublasLtMatmulAlgoConfigGetAttribute(&algos[best], a, nullptr, 0, &size) == CUBLAS_STATUS_SUCCESS &&
            size <= sizeof(v))
          cublasLtMatmulAlgoConfigGetAttribute(&algos[best], a, &v, size, &size);
        return v;
      };
      char line[200];
      std::snprintf(line, sizeof line,
                    "%dx%dx%d%s: kept candidate %zu of %zu (algo %llu, tile %llu, stages %llu, cluster %llu, custom "
                    "%llu) at %.1f us; the heuristic's first %.1f us\n",
                    n, rows, cols, accumulate ? " +=" : "", best, algos.size(),
                    static_cast<unsigned long long>(attr(CUBLASLT_ALGO_CONFIG_ID)),
                    static_cast<unsigned long long>(attr(CUBLASLT_ALGO_CONFIG_TILE_ID)),
                    static_cast<unsigned long long>(attr(CUBLASLT_ALGO_CONFIG_STAGES_ID)),
                    static_cast<unsigned long long>(attr(CUBLASLT_ALGO_CONFIG_CLUSTER_SHAPE_ID)),
                    static_cast<unsigned long long>(attr(CUBLASLT_ALGO_CONFIG_CUSTOM_OPTION)), 1e3 * times[best],
                    1e3 * times[0]);
      tune_log_ += line;
    }
  }
  if (!error.empty()) times.clear();
  cleanup();
  return times;
}

std::string GemmLt::run(const void* w, const void* x, void* y, int n, int rows, int cols, bool accumulate, ElemType type,
                        cudaStream_t stream, ElemType out_type, bool w_transposed) {
  if (type != ElemType::bf16 && type != ElemType::f16) return "GemmLt: inputs must be bf16 or fp16";
  if (out_type != ElemType::f32 && (out_type != type || accumulate))
    return "GemmLt: the output is fp32, or the input type without accumulation";
  return run_key(Key{n, rows, cols, accumulate, static_cast<int>(type), static_cast<int>(out_type), w_transposed}, w, x,
                 y, stream, nullptr, nullptr);
}

std::string GemmLt::run_fp8(const void* w, const float* w_scale, const void* x, const float* x_scale, void* y, int n,
                            int rows, int cols, bool accumulate, cudaStream_t stream, ElemType out_type) {
  if (!w_scale || !x_scale) return "GemmLt: an fp8 product needs both scale vectors";
  if (out_type != ElemType::f32 && (out_type != ElemType::bf16 || accumulate))
    return "GemmLt: the fp8 product's output is fp32, or bf16 without accumulation";
  if (cols % 16 != 0) return "GemmLt: fp8 products need a multiple of 16 columns, not " + std::to_string(cols);
  return run_key(Key{n, rows, cols, accumulate, kFp8, static_cast<int>(out_type), false}, w, x, y, stream, w_scale, x_scale);
}

std::string GemmLt::probe_fp8(int n, int rows, int cols, bool accumulate, ElemType out_type) {
  if (!handle_) return "cuBLASLt is not initialized";
  if (cols % 16 != 0) return "fp8 products need a multiple of 16 columns, not " + std::to_string(cols);
  const Key key{n, rows, cols, accumulate, kFp8, static_cast<int>(out_type), false};
  Plan p;
  std::vector<cublasLtMatmulHeuristicResult_t> found;
  std::string err = describe(key, p);
  if (err.empty()) err = candidates(key, p, 1, found);
  destroy(p.op, p.a, p.b, p.c);
  return err;
}

std::string GemmLt::run_key(const Key& key, const void* w, const void* x, void* y, cudaStream_t stream,
                            const float* w_scale, const float* x_scale) {
  if (!handle_) return "cuBLASLt is not initialized";
  const auto [n, rows, cols, accumulate, type_int, out_int, w_t] = key;
  if (n <= 0) return {};
  auto it = plans_.find(key);
  if (it == plans_.end()) {
    cudaStreamCaptureStatus capturing = cudaStreamCaptureStatusNone;
    if (autotune_ && n >= kTuneMinTokens && cudaStreamIsCapturing(stream, &capturing) == cudaSuccess &&
        capturing == cudaStreamCaptureStatusNone && tuned_.find(bucket_of(key)) == tuned_.end()) {
      // A tuning failure (for example no memory for the scratch output) keeps the heuristic's
      // choice; the reason is kept for the caller to report (tune_error()).
      std::string err;
      // (For fp8 the type argument is not used: the scales make it an fp8 product.)
      const ElemType type = type_int == kFp8 ? ElemType::bf16 : static_cast<ElemType>(type_int);
      (void)time_candidates(w, x, n, rows, cols, accumulate, type, static_cast<ElemType>(out_int), stream,
                            kTuneCandidates, 2, err, w_scale, x_scale, w_t);
      if (!err.empty()) tune_error_ = err;
    }
    Plan p;
    if (std::string err = plan(key, p); !err.empty()) {
      destroy(p.op, p.a, p.b, p.c);
      return err;
    }
    it = plans_.emplace(key, p).first;
  }
  const Plan& p = it->second;
  if (w_scale)
    if (std::string err = set_scales(p.op, w_scale, x_scale); !err.empty()) return err;
  const float alpha = 1.0f, beta = accumulate ? 1.0f : 0.0f;
  LT_TRY(cublasLtMatmul(handle_, p.op, &alpha, w, p.a, x, p.b, &beta, y, p.c, y, p.c, &p.algo, workspace_,
                        workspace_bytes_, stream));
  return {};
}

}  // namespace cosmos::kernels
