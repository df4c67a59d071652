#include "kernels/gemm_lt.h"

#include <algorithm>
#include <cstdint>

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

namespace {

void destroy(cublasLtMatmulDesc_t op, cublasLtMatrixLayout_t a, cublasLtMatrixLayout_t b, cublasLtMatrixLayout_t c) {
  if (a) cublasLtMatrixLayoutDestroy(a);
  if (b) cublasLtMatrixLayoutDestroy(b);
  if (c) cublasLtMatrixLayoutDestroy(c);
  if (op) cublasLtMatmulDescDestroy(op);
}

}  // namespace

std::vector<float> GemmLt::time_candidates(const void* w, const void* x, int n, int rows, int cols, bool accumulate,
                                           ElemType type, ElemType out_type, cudaStream_t stream, int max_algos,
                                           int reps, std::string& error, const float* w_scale, const float* x_scale,
                                           bool w_transposed) {
  std::vector<float> times;
  error.clear();
  const int type_key = w_scale ? kFp8 : static_cast<int>(type);
  const Key key{n, rows, cols, accumulate, type_key, static_cast<int>(out_type), w_transposed && !w_scale};
  Plan p;
  std::vector<cublasLtMatmulHeuristicResult_t> found;
  void* scratch = nullptr;
  cudaEvent_t e0 = nullptr, e1 = nullptr;
  auto cleanup = [&] {
    destroy(p.op, p.a, p.b, p.c);
    if (scratch) cudaFree(scratch);
    if (e0) cudaEventDestroy(e0);
    if (e1) cudaEventDestroy(e1);
  };
  if ((error = describe(key, p)).empty() && w_scale) error = set_scales(p.op, w_scale, x_scale);
  if (error.empty()) error = candidates(key, p, max_algos, found);
  const std::size_t out_bytes = static_cast<std::size_t>(rows) * n * elem_size(out_type);
  if (error.empty() && cudaMalloc(&scratch, out_bytes) != cudaSuccess) {
    cudaGetLastError();
    scratch = nullptr;
    error = "no memory for a " + std::to_string(out_bytes >> 20) + " MiB tuning output";
  }
  if (error.empty() && (cudaEventCreate(&e0) != cudaSuccess || cudaEventCreate(&e1) != cudaSuccess))
    error = "cudaEventCreate failed";
  const float alpha = 1.0f, beta = 0.0f;
  for (std::size_t i = 0; error.empty() && i < found.size(); ++i) {
    std::vector<float> t;
    for (int r = 0; r <= reps && error.empty(); ++r) {  // r == 0: warm-up
      if (cudaEventRecord(e0, stream) != cudaSuccess) {
        error = std::string("cudaEventRecord: ") + cudaGetErrorString(cudaGetLastError());
        break;
      }
      const cublasStatus_t st = cublasLtMatmul(handle_, p.op, &alpha, w, p.a, x, p.b, &beta, scratch, p.c, scratch,
                                               p.c, &found[i].algo, workspace_, workspace_bytes_, stream);
      if (st != CUBLAS_STATUS_SUCCESS) {
        t.assign(1, 1e30f);  // this candidate cannot run here: never picked
        break;
      }
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
    std::sort(t.begin(), t.end());
    if (error.empty()) times.push_back(t[t.size() / 2]);
  }
  if (error.empty() && times.empty()) error = "no GEMM candidate ran";
  // Remember the winner for the bucket (used by run() for later plans).
  if (error.empty()) {
    const std::size_t best = static_cast<std::size_t>(std::min_element(times.begin(), times.end()) - times.begin());
    tuned_[bucket_of(key)] = found[best].algo;
  } else {
    times.clear();
  }
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
