#include "kernels/gemm_lt.h"

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
std::string GemmLt::plan(const Key& key, Plan& p) {
  const auto [n, rows, cols, accumulate, type_int, out_int] = key;
  const cudaDataType_t t = static_cast<ElemType>(type_int) == ElemType::f16 ? CUDA_R_16F : CUDA_R_16BF;
  const cudaDataType_t out = static_cast<ElemType>(out_int) == ElemType::f32 ? CUDA_R_32F : t;
  LT_TRY(cublasLtMatmulDescCreate(&p.op, CUBLAS_COMPUTE_32F, CUDA_R_32F));
  const cublasOperation_t ta = CUBLAS_OP_T, tb = CUBLAS_OP_N;
  LT_TRY(cublasLtMatmulDescSetAttribute(p.op, CUBLASLT_MATMUL_DESC_TRANSA, &ta, sizeof(ta)));
  LT_TRY(cublasLtMatmulDescSetAttribute(p.op, CUBLASLT_MATMUL_DESC_TRANSB, &tb, sizeof(tb)));
  LT_TRY(cublasLtMatrixLayoutCreate(&p.a, t, cols, rows, cols));
  LT_TRY(cublasLtMatrixLayoutCreate(&p.b, t, cols, n, cols));
  LT_TRY(cublasLtMatrixLayoutCreate(&p.c, out, rows, n, rows));
  cublasLtMatmulPreference_t pref = nullptr;
  LT_TRY(cublasLtMatmulPreferenceCreate(&pref));
  const cublasStatus_t ps = cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES,
                                                                 &workspace_bytes_, sizeof(workspace_bytes_));
  if (ps != CUBLAS_STATUS_SUCCESS) {
    cublasLtMatmulPreferenceDestroy(pref);
    return status_text("cublasLtMatmulPreferenceSetAttribute", ps);
  }
  cublasLtMatmulHeuristicResult_t result{};
  int found = 0;
  const cublasStatus_t st = cublasLtMatmulAlgoGetHeuristic(handle_, p.op, p.a, p.b, p.c, p.c, pref, 1, &result, &found);
  cublasLtMatmulPreferenceDestroy(pref);
  if (st != CUBLAS_STATUS_SUCCESS) return status_text("cublasLtMatmulAlgoGetHeuristic", st);
  if (found == 0)
    return "cublasLtMatmulAlgoGetHeuristic: no algorithm for " + std::to_string(n) + "x" + std::to_string(rows) + "x" +
           std::to_string(cols) + (accumulate ? " (accumulate)" : "");
  p.algo = result.algo;
  return {};
}

std::string GemmLt::run(const void* w, const void* x, void* y, int n, int rows, int cols, bool accumulate, ElemType type,
                        cudaStream_t stream, ElemType out_type) {
  if (!handle_) return "cuBLASLt is not initialized";
  if (type != ElemType::bf16 && type != ElemType::f16) return "GemmLt: inputs must be bf16 or fp16";
  if (out_type != ElemType::f32 && (out_type != type || accumulate))
    return "GemmLt: the output is fp32, or the input type without accumulation";
  if (n <= 0) return {};
  const Key key{n, rows, cols, accumulate, static_cast<int>(type), static_cast<int>(out_type)};
  auto it = plans_.find(key);
  if (it == plans_.end()) {
    Plan p;
    if (std::string err = plan(key, p); !err.empty()) {
      if (p.a) cublasLtMatrixLayoutDestroy(p.a);
      if (p.b) cublasLtMatrixLayoutDestroy(p.b);
      if (p.c) cublasLtMatrixLayoutDestroy(p.c);
      if (p.op) cublasLtMatmulDescDestroy(p.op);
      return err;
    }
    it = plans_.emplace(key, p).first;
  }
  const Plan& p = it->second;
  const float alpha = 1.0f, beta = accumulate ? 1.0f : 0.0f;
  LT_TRY(cublasLtMatmul(handle_, p.op, &alpha, w, p.a, x, p.b, &beta, y, p.c, y, p.c, &p.algo, workspace_,
                        workspace_bytes_, stream));
  return {};
}

}  // namespace cosmos::kernels
