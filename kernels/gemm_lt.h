// Tensor-core GEMMs for prefill and batches through cuBLASLt:
//   y[n, rows] = x[n, cols] (bf16 or fp16) . W[rows, cols]^T (same type)  (+ y when accumulate)
// fp32 accumulation; y fp32, or the input type (halves the bytes of wide outputs such as gate/up);
// `accumulate` adds the residual in place (beta = 1, C = D = y, fp32 only).
// One GemmLt per stream owner: it holds the cuBLASLt handle, a workspace and the algorithm per
// shape (looked up once, outside any graph capture). Autotuning (on unless set_autotune(false)):
// the first product with n >= kTuneMinTokens of each (rows, cols, types) and power-of-two bucket of
// n times cuBLASLt's candidate algorithms on its real inputs (writing a scratch output, never y)
// and keeps the fastest for the bucket; other sizes in the bucket reuse it when cuBLASLt accepts it
// for their shape. This costs a few hundred milliseconds once per bucket.
#pragma once

#include <cstddef>
#include <map>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include <cublasLt.h>
#include <cuda_runtime.h>

#include "kernels/elem_type.cuh"

namespace cosmos::kernels {

class GemmLt {
 public:
  GemmLt() = default;
  ~GemmLt();
  GemmLt(const GemmLt&) = delete;
  GemmLt& operator=(const GemmLt&) = delete;

  // workspace: device memory owned by the caller ([workspace_bytes] bytes, 32 MiB recommended).
  // Returns an empty string or the reason it failed.
  std::string init(void* workspace, std::size_t workspace_bytes);

  // type: bf16 or f16 (W and x); out_type: f32 or `type`. Returns an empty string or
  // "cublasLt<call>: <status>" on failure.
  std::string run(const void* w, const void* x, void* y, int n, int rows, int cols, bool accumulate, ElemType type,
                  cudaStream_t stream, ElemType out_type = ElemType::f32);

  // Times up to max_algos of cuBLASLt's candidate algorithms for this product on these inputs
  // (output to a scratch allocation, y is not touched), median of `reps` runs each, in ms; entry 0
  // is the heuristic's first choice. Empty with `error` set on failure. For benchmarks and tuning.
  std::vector<float> time_candidates(const void* w, const void* x, int n, int rows, int cols, bool accumulate,
                                     ElemType type, ElemType out_type, cudaStream_t stream, int max_algos, int reps,
                                     std::string& error);
  void set_autotune(bool on) { autotune_ = on; }
  // The last autotuning failure (empty when none), then cleared: the caller logs it.
  std::string take_tune_error() { return std::exchange(tune_error_, {}); }
  static constexpr int kTuneMinTokens = 256;
  static constexpr int kTuneCandidates = 8;

  // Bytes a product moves at least (W, x, y read/written once), for GB/s.
  static std::size_t bytes(int n, int rows, int cols, bool accumulate, ElemType out_type = ElemType::f32) {
    return static_cast<std::size_t>(rows) * cols * 2 + static_cast<std::size_t>(n) * cols * 2 +
           static_cast<std::size_t>(n) * rows * elem_size(out_type) * (accumulate ? 2 : 1);
  }

 private:
  struct Plan {
    cublasLtMatmulDesc_t op = nullptr;
    cublasLtMatrixLayout_t a = nullptr, b = nullptr, c = nullptr;
    cublasLtMatmulAlgo_t algo{};
  };
  using Key = std::tuple<int, int, int, bool, int, int>;  // n, rows, cols, accumulate, type, out type
  std::string plan(const Key& key, Plan& out);
  std::string describe(const Key& key, Plan& p);  // op and layouts
  std::string candidates(const Key& key, Plan& p, int max_algos, std::vector<cublasLtMatmulHeuristicResult_t>& out);
  static Key bucket_of(const Key& key);

  cublasLtHandle_t handle_ = nullptr;
  void* workspace_ = nullptr;
  std::size_t workspace_bytes_ = 0;
  std::map<Key, Plan> plans_;
  std::map<Key, cublasLtMatmulAlgo_t> tuned_;  // by bucket_of(key)
  bool autotune_ = true;
  std::string tune_error_;
};

}  // namespace cosmos::kernels
