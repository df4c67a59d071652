// Tensor-core GEMMs for prefill and batches through cuBLASLt:
//   y[n, rows] = x[n, cols] (bf16 or fp16) . W[rows, cols]^T (same type)  (+ y when accumulate)
// fp32 accumulation; y fp32, or the input type (halves the bytes of wide outputs such as gate/up);
// `accumulate` adds the residual in place (beta = 1, C = D = y, fp32 only).
// fp8 (run_fp8, GPUs with fp8 tensor cores: sm_89+): W and x in E4M3 with fp32 outer-vector scales,
//   y[t, r] = w_scale[r] * x_scale[t] * sum_c e4m3(W[r, c]) e4m3(x[t, c])  (+ y when accumulate)
// (the per-output-channel weight scales of the fp8 format, per-token activation scales from
// kernels/quantize_act.cuh), fp32 accumulation, y fp32 or bf16.
// One GemmLt per stream owner: it holds the cuBLASLt handle, a workspace and the algorithm per
// shape (looked up once, outside any graph capture). Autotuning (on unless set_autotune(false)):
// the first product with n >= kTuneMinTokens of each (rows, cols, types) and power-of-two bucket of
// n times cuBLASLt's candidate algorithms on its real inputs (writing a scratch output, never y)
// and keeps the fastest for the bucket; other sizes in the bucket reuse it when cuBLASLt accepts it
// for their shape. The candidates are the heuristic's first kTuneCandidates plus "wave-fill"
// configurations: the heuristic's algorithm with the kWaveTiles tiles whose blocks waste the least
// of their waves (the heuristic does not offer them: for the 7B down product at 2,048 tokens a
// 224 x 128 tile, 256 blocks = 1.94 waves on 132 SMs, ran 7% faster than its picks;
// docs/PERFORMANCE.md session 17). The fastest few are timed again before one is kept. This costs a few hundred
// milliseconds once per bucket.
#pragma once

#include <array>
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

  // type: bf16 or f16 (W and x); out_type: f32 or `type`. w_transposed: W is stored transposed,
  // [cols, rows] row-major (the fused decode MLP's down weights, kernels/mlp_decode.cuh). Returns an
  // empty string or "cublasLt<call>: <status>" on failure.
  std::string run(const void* w, const void* x, void* y, int n, int rows, int cols, bool accumulate, ElemType type,
                  cudaStream_t stream, ElemType out_type = ElemType::f32, bool w_transposed = false);

  // fp8 product (see the top): w [rows, cols] E4M3 bytes with w_scale [rows], x [n, cols] E4M3 with
  // x_scale [n]; out_type f32 (accumulate allowed) or bf16. cols must be a multiple of 16 and the
  // pointers 16-byte aligned (cuBLASLt's fp8 rules). Errors as run().
  std::string run_fp8(const void* w, const float* w_scale, const void* x, const float* x_scale, void* y, int n,
                      int rows, int cols, bool accumulate, cudaStream_t stream, ElemType out_type = ElemType::f32);
  // Whether cuBLASLt on this GPU has an fp8 algorithm with outer-vector scales for this shape:
  // empty, or the reason it has none (callers then keep the bf16 path and say why).
  std::string probe_fp8(int n, int rows, int cols, bool accumulate, ElemType out_type = ElemType::f32);

  // Times up to max_algos of cuBLASLt's candidate algorithms for this product on these inputs, then
  // the wave-fill configurations (see the top), output to a scratch allocation (y is not touched;
  // with accumulate the scratch is read too, as run() reads y), median of `reps` runs each, in ms; entry 0 is the heuristic's first choice. The three fastest
  // are timed again with 2 x reps + 1 runs, and the fastest of those is kept for the bucket. Empty
  // with `error` set on failure. For benchmarks and tuning.
  // With w_scale and x_scale it times the fp8 product of run_fp8 (w and x E4M3; `type` unused).
  std::vector<float> time_candidates(const void* w, const void* x, int n, int rows, int cols, bool accumulate,
                                     ElemType type, ElemType out_type, cudaStream_t stream, int max_algos, int reps,
                                     std::string& error, const float* w_scale = nullptr,
                                     const float* x_scale = nullptr, bool w_transposed = false);
  // The tuner's candidates for a bf16/fp16 product (heuristic first, then wave-fill): how many
  // (and, in *wave_fill, how many of them are wave-fill configurations), and one of them run into y
  // as run() would (tests check that every configuration the tuner may keep computes the product).
  int tuning_candidate_count(int n, int rows, int cols, bool accumulate, ElemType type, ElemType out_type,
                             int* wave_fill = nullptr);
  std::string run_candidate(int index, const void* w, const void* x, void* y, int n, int rows, int cols,
                            bool accumulate, ElemType type, cudaStream_t stream, ElemType out_type = ElemType::f32);
  // The tuner's choices, for an on-disk cache (cosmos/tune_cache.h): the identity they hold for
  // (GPU name, compute capability, SM count, cuBLASLt version), every (key, algorithm) chosen so far,
  // and restoring such a list: each algorithm is kept only if cublasLtMatmulAlgoCheck accepts it for
  // its key (returns how many were), so a stale or damaged list costs a re-tuning, never a wrong or
  // failing product. tunings() counts the size classes timed by this object (restored ones are not).
  struct Tuned {
    std::array<int, 7> key;  // n bucket, rows, cols, accumulate, type, out type, W transposed
    cublasLtMatmulAlgo_t algo;
  };
  std::string identity() const;
  std::vector<Tuned> tuned() const;
  int restore_tuned(const std::vector<Tuned>& list);
  int tunings() const { return tunings_; }
  void set_autotune(bool on) { autotune_ = on; }
  void set_wave_fill(bool on) { wave_fill_ = on; }  // off: the tuner times the heuristic's candidates only
  // The last autotuning failure (empty when none), then cleared: the caller logs it.
  std::string take_tune_error() { return std::exchange(tune_error_, {}); }
  // One line per size class tuned since the last call (the kept configuration and its time), then
  // cleared: the caller logs it.
  std::string take_tune_log() { return std::exchange(tune_log_, {}); }
  static constexpr int kTuneMinTokens = 256;
  static constexpr int kTuneCandidates = 8;
  static constexpr int kWaveTiles = 4;  // wave-fill tiles tried, each with 3 cluster shapes x 3 custom options

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
  using Key = std::tuple<int, int, int, bool, int, int, bool>;  // n, rows, cols, accumulate, type, out type, W transposed
  static constexpr int kFp8 = 100;  // Key's type for E4M3 inputs (ElemType has no fp8)
  std::string run_key(const Key& key, const void* w, const void* x, void* y, cudaStream_t stream,
                      const float* w_scale, const float* x_scale);
  std::string plan(const Key& key, Plan& out);
  std::string describe(const Key& key, Plan& p);  // op and layouts
  std::string candidates(const Key& key, Plan& p, int max_algos, std::vector<cublasLtMatmulHeuristicResult_t>& out);
  // The heuristic's first max_algos, then the wave-fill configurations (p described).
  std::string tuning_candidates(const Key& key, Plan& p, int max_algos, std::vector<cublasLtMatmulAlgo_t>& out);
  // Appends the wave-fill configurations of `base`'s algorithm that cuBLASLt accepts (see the top).
  void wave_candidates(const Key& key, Plan& p, const cublasLtMatmulAlgo_t& base, std::vector<cublasLtMatmulAlgo_t>& out);
  static Key bucket_of(const Key& key);

  cublasLtHandle_t handle_ = nullptr;
  void* workspace_ = nullptr;
  std::size_t workspace_bytes_ = 0;
  std::map<Key, Plan> plans_;
  std::map<Key, cublasLtMatmulAlgo_t> tuned_;  // by bucket_of(key)
  bool autotune_ = true;
  bool wave_fill_ = true;
  int tunings_ = 0;
  std::string tune_error_;
  std::string tune_log_;
};

}  // namespace cosmos::kernels
