// Quantized-weight gemv benchmark (reports, never fails): launch_gemv_quant for int8, fp8 (E4M3)
// and int4 weights on every matrix of a Cosmos-Reason1-7B decode step, fused as the engine runs
// them (norm + q/k/v + bias, o + residual aliasing y, norm + gate/up + SwiGLU, down + residual,
// norm + lm_head). Each matrix: weights rotated over enough copies to exceed 4x the L2 cache, so
// the figures are DRAM figures; a warm-up, then the median of several batches of launches (eager
// with PDL off, and in one CUDA graph with PDL on, as the engine runs them). Printed: microseconds
// per launch, GB/s from the bytes launch_gemv_quant returns, % of the device copy bandwidth, and
// the whole chain per token estimated as 28 x (q/k/v + o + gate/up + down) + lm_head.
// --sweep: graph + PDL only, every QGemvTuning combination per format and matrix (one line each,
// combinations resolving to the same launch timed once), the best per matrix, and the chain with the
// best per matrix and with the automatic knobs. --views: the split-K stand-ins below instead of the
// model's matrices (their per-token sums then mean nothing). --chain: the step's products in the engine's order
// with launch variants (see chain()). --fmt int8|fp8|int4 limits any mode to a format.
//   bench_gemv_quant [--sweep | --chain] [--views] [--fmt FMT]
#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <iterator>
#include <string>
#include <vector>

#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include "kernels/device_info.cuh"
#include "kernels/gemv_quant.cuh"
#include "kernels/pdl.cuh"
#include "bench_check.h"
#include "bench_quant_fill.cuh"

namespace {

using bench_quant::fill_bf16;
using bench_quant::fill_bytes;
using bench_quant::fill_f32;
using cosmos::kernels::QGemvArgs;
using cosmos::kernels::QGemvTuning;
using cosmos::kernels::QuantKind;

constexpr int kLayers = 28, kH = 3584, kQkv = 4608, kFF = 18944, kVocab = 152064;

struct Shape {
  const char* name;
  int rows, cols;
  bool norm, bias, residual, swiglu;
  int per_token;  // launches per token
};
const Shape kShapes[] = {{"norm+qkv+bias", kQkv, kH, true, true, false, false, kLayers},
                         {"o+residual", kH, kH, false, false, true, false, kLayers},
                         {"norm+gate/up+swiglu", 2 * kFF, kH, true, false, false, true, kLayers},
                         {"down+residual", kH, kFF, false, false, true, false, kLayers},
                         {"norm+lm_head", kVocab, kH, true, false, false, false, 1}};
// --views: timing-only stand-ins for products split over their columns (split-K), each slice of a
// row taken as a row of its own: S x rows rows of cols / S columns (the same bytes; y holds S x rows
// sums, each block stages cols / S of x). What a split kernel would pay for its x staging and its
// items, without the adds that would merge the slices' sums.
const Shape kViewShapes[] = {{"down split 2 (view)", 2 * kH, kFF / 2, false, false, true, false, kLayers},
                             {"down split 4 (view)", 4 * kH, kFF / 4, false, false, true, false, kLayers},
                             {"down split 8 (view)", 8 * kH, kFF / 8, false, false, true, false, kLayers},
                             {"o split 2 (view)", 2 * kH, kH / 2, false, false, true, false, kLayers}};
struct Shapes {
  const Shape* first;
  int count;
  const Shape* begin() const { return first; }
  const Shape* end() const { return first + count; }
};
// int4's fast path takes whole groups of 128 columns.
bool runs_fast(QuantKind kind, const Shape& s) { return kind != QuantKind::int4_group || s.cols % 128 == 0; }

const char* kind_name(QuantKind k) {
  switch (k) {
    case QuantKind::int8_row: return "int8";
    case QuantKind::fp8_row: return "fp8";
    case QuantKind::int4_group: return "int4";
  }
  return "?";
}

// Bytes of one quantized [rows, cols] matrix: values and scales (int4: a scale and a minimum per group).
std::size_t matrix_bytes(QuantKind kind, int rows, int cols) {
  const std::size_t r = static_cast<std::size_t>(rows);
  const std::size_t q = r * static_cast<std::size_t>(cosmos::kernels::quant_row_bytes(kind, cols));
  return kind == QuantKind::int4_group ? q + r * static_cast<std::size_t>(cosmos::kernels::quant_groups(cols)) * 4
                                      : q + r * 4;
}

// A quantized [rows, cols] matrix of random bytes and plausible scales; `alloc` gives device memory.
template <typename Alloc>
cosmos::kernels::QuantMatrix make_matrix(QuantKind kind, int rows_, int cols_, unsigned& seed, Alloc&& alloc,
                                         cudaStream_t stream) {
  const std::size_t rows = static_cast<std::size_t>(rows_);
  const std::size_t groups = static_cast<std::size_t>(cosmos::kernels::quant_groups(cols_));
  const std::size_t q_bytes = rows * static_cast<std::size_t>(cosmos::kernels::quant_row_bytes(kind, cols_));
  cosmos::kernels::QuantMatrix m;
  m.kind = kind;
  auto* q = static_cast<std::uint8_t*>(alloc(q_bytes));
  fill_bytes<<<2048, 256, 0, stream>>>(q, q_bytes, seed++, kind == QuantKind::fp8_row);
  m.q = q;
  if (kind == QuantKind::int4_group) {
    auto* gs = static_cast<__nv_bfloat16*>(alloc(rows * groups * 2));
    auto* gm = static_cast<__nv_bfloat16*>(alloc(rows * groups * 2));
    fill_bf16<<<1024, 256, 0, stream>>>(gs, rows * groups, seed++, 0.002f, 0.004f);
    fill_bf16<<<1024, 256, 0, stream>>>(gm, rows * groups, seed++, 0.01f, -0.03f);
    m.group_scale = reinterpret_cast<const std::uint16_t*>(gs);
    m.group_min = reinterpret_cast<const std::uint16_t*>(gm);
  } else {
    auto* rs = static_cast<float*>(alloc(rows * 4));
    fill_f32<<<256, 256, 0, stream>>>(rs, rows, seed++, 0.0002f, kind == QuantKind::fp8_row ? 0.0002f : 0.0005f);
    m.row_scale = rs;
  }
  return m;
}

// Median of `batches` timings of `launch` (which enqueues one batch of `per_batch` launches on
// `stream`), after two warm-up batches: microseconds per launch.
template <typename F>
float us_per_launch(F&& launch, int per_batch, cudaStream_t stream, int batches = 9) {
  const float ms = median_event_ms(stream, batches, 2, launch);
  CHECK(cudaGetLastError());
  return ms * 1e3f / static_cast<float>(per_batch);
}

// One model matrix in one format on the device: weights rotated over enough copies to exceed 4x
// the L2, x, y, bias and norm weight; times batches of launches under the current QGemvTuning.
class ShapeBench {
 public:
  ShapeBench(QuantKind kind, const Shape& s, cudaStream_t stream) : s_(s), stream_(stream) {
    const std::size_t rows = static_cast<std::size_t>(s.rows), cols = static_cast<std::size_t>(s.cols);
    copies_ = std::max(1, static_cast<int>((256ull << 20) / matrix_bytes(kind, s.rows, s.cols)));  // > 4x the L2
    unsigned seed = 1;
    mats_.resize(copies_);
    for (auto& m : mats_) m = make_matrix(kind, s.rows, s.cols, seed, [&](std::size_t b) { return dalloc(b); }, stream);
    x_ = static_cast<float*>(dalloc(cols * 4));
    y_ = static_cast<float*>(dalloc(rows * 4));
    bias_ = static_cast<__nv_bfloat16*>(dalloc(rows * 2));
    g_ = static_cast<__nv_bfloat16*>(dalloc(cols * 2));
    fill_f32<<<256, 256, 0, stream>>>(x_, cols, 7u, 2.0f, 0.0f);
    fill_f32<<<256, 256, 0, stream>>>(y_, rows, 8u, 2.0f, 0.0f);
    fill_bf16<<<256, 256, 0, stream>>>(bias_, rows, 9u, 0.2f, 0.0f);
    fill_bf16<<<256, 256, 0, stream>>>(g_, cols, 10u, 0.5f, 1.0f);
    CHECK(cudaGetLastError());
    CHECK(cudaStreamSynchronize(stream));
    per_batch_ = s.per_token == 1 ? 4 : kLayers;
  }
  ShapeBench(const ShapeBench&) = delete;
  ShapeBench& operator=(const ShapeBench&) = delete;
  ~ShapeBench() {
    cudaStreamSynchronize(stream_);
    for (void* p : allocs_) cudaFree(p);
  }

  QGemvArgs args(int copy) const {
    QGemvArgs a;
    a.w = mats_[copy % copies_];
    a.x = x_;
    a.y = y_;
    a.rows = s_.rows;
    a.cols = s_.cols;
    a.bias = s_.bias ? bias_ : nullptr;
    a.residual = s_.residual ? y_ : nullptr;  // o / down: the residual stream is y itself
    a.norm_weight = s_.norm ? g_ : nullptr;
    a.swiglu = s_.swiglu;
    return a;
  }

  // Eager launches with PDL off: microseconds per launch.
  float eager_us() {
    cosmos::kernels::set_pdl_enabled(false);
    int next = 0;
    return us_per_launch([&] { enqueue(next); }, per_batch_, stream_);
  }
  // One batch in a CUDA graph with PDL on, as the engine's decode step runs; copies rotate across
  // batches by capturing as many graphs as it takes to use each copy once per cycle.
  float graph_us() {
    cosmos::kernels::set_pdl_enabled(true);
    const int graphs = std::max(1, (copies_ + per_batch_ - 1) / per_batch_);
    std::vector<cudaGraphExec_t> execs(graphs);
    int next = 0;
    for (auto& exec : execs) {
      cudaGraph_t graph;
      CHECK(cudaStreamBeginCapture(stream_, cudaStreamCaptureModeThreadLocal));
      enqueue(next);
      CHECK(cudaStreamEndCapture(stream_, &graph));
      CHECK(cudaGraphInstantiate(&exec, graph, 0));
      CHECK(cudaGraphDestroy(graph));
    }
    int which = 0;
    const float us =
        us_per_launch([&] { CHECK(cudaGraphLaunch(execs[which++ % graphs], stream_)); }, per_batch_, stream_);
    cosmos::kernels::set_pdl_enabled(false);
    for (auto& exec : execs) CHECK(cudaGraphExecDestroy(exec));
    CHECK(cudaStreamSynchronize(stream_));
    return us;
  }
  std::size_t launched_bytes() const { return bytes_; }

 private:
  void* dalloc(std::size_t bytes) {
    void* p = nullptr;
    CHECK(cudaMalloc(&p, std::max<std::size_t>(bytes, 16)));
    allocs_.push_back(p);
    return p;
  }
  void enqueue(int& next) {
    for (int l = 0; l < per_batch_; ++l) bytes_ = cosmos::kernels::launch_gemv_quant(args(next++), stream_);
  }

  Shape s_;
  cudaStream_t stream_;
  int copies_ = 1, per_batch_ = 1;
  std::vector<cosmos::kernels::QuantMatrix> mats_;
  std::vector<void*> allocs_;
  float* x_ = nullptr;
  float* y_ = nullptr;
  __nv_bfloat16* bias_ = nullptr;
  __nv_bfloat16* g_ = nullptr;
  std::size_t bytes_ = 0;
};

const QuantKind kKinds[] = {QuantKind::int8_row, QuantKind::fp8_row, QuantKind::int4_group};

std::string knobs_str(const QGemvTuning& t) {
  char buf[96];
  if (t.mma != 0) {
    std::snprintf(buf, sizeof buf, "tensor cores, depth=%d tile_warps=%d", t.mma, t.mma_tile_warps);
  } else {
    std::snprintf(buf, sizeof buf, "rows=%d loads=%d pipe=%d l2=%d stage_x=%d", t.rows_per_item, t.loads, t.pipeline,
                  t.l2_next, t.stage_x);
  }
  return buf;
}
bool same_knobs(const QGemvTuning& a, const QGemvTuning& b) {
  return a.rows_per_item == b.rows_per_item && a.loads == b.loads && a.pipeline == b.pipeline &&
         a.l2_next == b.l2_next && a.stage_x == b.stage_x && a.mma == b.mma &&
         a.mma_tile_warps == b.mma_tile_warps;
}

// --sweep: every knob combination (graph + PDL) per format and model matrix, combinations that
// resolve to the same launch timed once; the best per matrix; the per-token chain with the best
// per matrix and with the automatic choice.
int sweep(double copy_gbs, cudaStream_t stream, const char* only_fmt, Shapes shapes) {
  std::printf("sweep: graph + pdl, us per launch; knobs as resolved by gemv_quant_plan (auto = the defaults)\n");
  for (const QuantKind kind : kKinds) {
    if (only_fmt && std::strcmp(only_fmt, kind_name(kind)) != 0) continue;
    double best_chain = 0, auto_chain = 0, mb_chain = 0;
    for (const Shape& s : shapes) {
      if (!runs_fast(kind, s)) continue;
      ShapeBench b(kind, s, stream);
      struct Tried {
        QGemvTuning knobs;
        float us;
      };
      std::vector<Tried> tried;
      auto time_with = [&](const QGemvTuning& t, bool is_auto) {
        cosmos::kernels::set_gemv_quant_tuning(t);
        const QGemvTuning plan = cosmos::kernels::gemv_quant_plan(b.args(0));
        float us = -1;
        for (const Tried& d : tried)
          if (same_knobs(d.knobs, plan)) us = d.us;
        const bool fresh = us < 0;
        if (fresh) {
          us = b.graph_us();
          tried.push_back({plan, us});
        }
        const double gbs = b.launched_bytes() / (us * 1e-6) / 1e9;
        if (fresh || is_auto)
          std::printf("%-5s %-20s %-42s | %8.2f us %7.0f GB/s %6.1f%%%s\n", kind_name(kind), s.name, knobs_str(plan).c_str(),
                      us, gbs, 100 * gbs / copy_gbs, is_auto ? "  <- auto" : "");
        std::fflush(stdout);
        return us;
      };
      const float auto_us = time_with(QGemvTuning{}, true);
      for (int rows : {1, 2})
        for (int loads : {4, 8})
          for (int pipe : {0, 1})
            for (int l2 : {0, 1})
              for (int st : {0, 1}) time_with(QGemvTuning{rows, loads, pipe, l2, st, 0, 0, -1}, false);
      for (int rows : {2, 4}) time_with(QGemvTuning{rows, 7, -1, -1, -1, 0, 0, -1}, false);  // int4, 8-byte vectors
      for (int mma : {2, 4})
        for (int tw : {4, 8}) time_with(QGemvTuning{0, 0, -1, -1, -1, mma, tw, -1}, false);
      cosmos::kernels::set_gemv_quant_tuning(QGemvTuning{});
      const Tried* best = &tried[0];
      for (const Tried& d : tried)
        if (d.us < best->us) best = &d;
      const double gbs = b.launched_bytes() / (best->us * 1e-6) / 1e9;
      std::printf("%-5s %-20s best: %-36s | %8.2f us %7.0f GB/s %6.1f%%  (auto %.2f us)\n\n", kind_name(kind), s.name,
                  knobs_str(best->knobs).c_str(), best->us, gbs, 100 * gbs / copy_gbs, auto_us);
      best_chain += best->us * s.per_token;
      auto_chain += auto_us * s.per_token;
      mb_chain += b.launched_bytes() / 1e6 * s.per_token;
    }
    const double floor_us = mb_chain * 1e3 / copy_gbs;
    std::printf("per token %-5s %8.0f MB: best per matrix %7.0f us (%6.1f tok/s, %5.1f%% of copy), auto %7.0f us (%6.1f "
                "tok/s, %5.1f%%); copy-bandwidth floor %.0f us\n\n",
                kind_name(kind), mb_chain, best_chain, 1e6 / best_chain, 100 * floor_us / best_chain, auto_chain,
                1e6 / auto_chain, 100 * floor_us / auto_chain, floor_us);
  }
  return 0;
}

// --chain: the decode step's products in the engine's order (28 x (norm+q/k/v, o, norm+gate/up+
// SwiGLU, down) + norm+lm_head), every matrix its own weights (the model's bytes, from DRAM), in one
// CUDA graph with PDL, so each launch hands over to its real neighbours (the sweep times one
// product 28 times in a row). Variants override the automatic knobs of some products at capture
// time; one line per variant: us per token and % of the copy bandwidth.
struct ChainVariant {
  const char* name;
  QGemvTuning knobs[5];  // per kShapes entry (QGemvTuning{} = automatic)
};
const QGemvTuning kAuto{};
const QGemvTuning kCudaCores{0, 0, -1, -1, -1, 0, 0};   // int4: the CUDA-core kernel, also for q/k/v
const QGemvTuning kXThroughL1{0, 0, -1, -1, 0, -1, 0};  // down: x read through L1, 4 blocks per SM
const QGemvTuning kRows1{1, 0, -1, -1, -1, -1, 0};
const QGemvTuning kRows2{2, 0, -1, -1, -1, -1, 0};
const QGemvTuning kLoads4{0, 4, -1, -1, -1, -1, 0};
const ChainVariant kChainVariants[] = {
    {"automatic (as the engine)", {kAuto, kAuto, kAuto, kAuto, kAuto}},
    {"q/k/v on CUDA cores", {kCudaCores, kAuto, kAuto, kAuto, kAuto}},
    {"down: x through L1", {kAuto, kAuto, kAuto, kXThroughL1, kAuto}},
    {"down: 4 loads", {kAuto, kAuto, kAuto, kLoads4, kAuto}},
    {"q/k/v, o, down: 1 row per warp", {kRows1, kRows1, kAuto, kRows1, kAuto}},
    {"q/k/v, o, down: 2 rows per warp", {kRows2, kRows2, kAuto, kRows2, kAuto}},
    {"q/k/v CUDA cores + down x through L1", {kCudaCores, kAuto, kAuto, kXThroughL1, kAuto}},
    {"automatic (again)", {kAuto, kAuto, kAuto, kAuto, kAuto}},
};

int chain(double copy_gbs, cudaStream_t stream, const char* only_fmt) {
  std::printf("chain: the decode step's products in order, one graph with PDL, us per token\n");
  for (const QuantKind kind : kKinds) {
    if (only_fmt && std::strcmp(only_fmt, kind_name(kind)) != 0) continue;
    std::vector<void*> allocs;
    auto dalloc = [&](std::size_t bytes) {
      void* p = nullptr;
      CHECK(cudaMalloc(&p, std::max<std::size_t>(bytes, 16)));
      allocs.push_back(p);
      return p;
    };
    unsigned seed = 1;
    std::vector<cosmos::kernels::QuantMatrix> mats;  // [layer * 4 + shape], then lm_head
    double mb = 0;
    for (int l = 0; l <= kLayers; ++l)
      for (int i = 0; i < 5; ++i) {
        if ((l == kLayers) != (i == 4)) continue;
        mats.push_back(make_matrix(kind, kShapes[i].rows, kShapes[i].cols, seed, dalloc, stream));
        mb += matrix_bytes(kind, kShapes[i].rows, kShapes[i].cols) / 1e6;
      }
    auto* x = static_cast<float*>(dalloc(kFF * 4));       // residual stream [H] (and down's input [FF])
    auto* act = static_cast<float*>(dalloc(kFF * 4));     // SwiGLU output [FF]
    auto* qkv = static_cast<float*>(dalloc(kQkv * 4));    // [q_dim + 2 kv_dim]
    auto* logits = static_cast<float*>(dalloc(kVocab * 4));
    auto* bias = static_cast<__nv_bfloat16*>(dalloc(kQkv * 2));
    auto* g = static_cast<__nv_bfloat16*>(dalloc(kH * 2));
    fill_f32<<<256, 256, 0, stream>>>(x, kFF, 7u, 2.0f, 0.0f);
    fill_f32<<<256, 256, 0, stream>>>(act, kFF, 8u, 2.0f, 0.0f);
    fill_bf16<<<256, 256, 0, stream>>>(bias, kQkv, 9u, 0.2f, 0.0f);
    fill_bf16<<<256, 256, 0, stream>>>(g, kH, 10u, 0.5f, 1.0f);
    CHECK(cudaGetLastError());
    CHECK(cudaStreamSynchronize(stream));
    for (const ChainVariant& v : kChainVariants) {
      cosmos::kernels::set_pdl_enabled(true);
      cudaGraph_t graph;
      cudaGraphExec_t exec;
      CHECK(cudaStreamBeginCapture(stream, cudaStreamCaptureModeThreadLocal));
      for (int l = 0; l <= kLayers; ++l)
        for (int i = 0; i < 5; ++i) {
          if ((l == kLayers) != (i == 4)) continue;
          const Shape& sh = kShapes[i];
          QGemvArgs a;
          a.w = mats[static_cast<std::size_t>(l) * 4 + (i == 4 ? 0 : i)];
          a.rows = sh.rows;
          a.cols = sh.cols;
          a.x = i == 1 ? qkv : i == 3 ? act : x;  // o reads the attention output (q's rows of qkv here)
          a.y = i == 0 ? qkv : i == 2 ? act : i == 4 ? logits : x;
          a.bias = sh.bias ? bias : nullptr;
          a.residual = sh.residual ? x : nullptr;
          a.norm_weight = sh.norm ? g : nullptr;
          a.swiglu = sh.swiglu;
          cosmos::kernels::set_gemv_quant_tuning(v.knobs[i]);
          (void)cosmos::kernels::launch_gemv_quant(a, stream);
        }
      cosmos::kernels::set_gemv_quant_tuning(QGemvTuning{});
      CHECK(cudaStreamEndCapture(stream, &graph));
      CHECK(cudaGraphInstantiate(&exec, graph, 0));
      CHECK(cudaGraphDestroy(graph));
      const float us = us_per_launch([&] { CHECK(cudaGraphLaunch(exec, stream)); }, 1, stream, 15);
      CHECK(cudaGraphExecDestroy(exec));
      cosmos::kernels::set_pdl_enabled(false);
      const double floor_us = mb * 1e3 / copy_gbs;
      std::printf("chain %-5s %-40s %8.0f us (%6.1f tok/s, %5.1f%% of copy; floor %.0f us for %.0f MB)\n",
                  kind_name(kind), v.name, us, 1e6 / us, 100 * floor_us / us, floor_us, mb);
      std::fflush(stdout);
    }
    CHECK(cudaStreamSynchronize(stream));
    for (void* p : allocs) CHECK(cudaFree(p));
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  bool do_sweep = false, do_chain = false;
  Shapes shapes{kShapes, static_cast<int>(std::size(kShapes))};
  const char* only_fmt = nullptr;
  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], "--sweep") == 0) {
      do_sweep = true;
    } else if (std::strcmp(argv[i], "--chain") == 0) {
      do_chain = true;
    } else if (std::strcmp(argv[i], "--views") == 0) {
      shapes = Shapes{kViewShapes, static_cast<int>(std::size(kViewShapes))};
    } else if (std::strcmp(argv[i], "--fmt") == 0 && i + 1 < argc) {
      only_fmt = argv[++i];
    } else {
      std::printf("usage: bench_gemv_quant [--sweep | --chain] [--views] [--fmt int8|fp8|int4]\n");
      return 2;
    }
  }
  const auto q = cosmos::kernels::query_gpus();
  if (q.gpus.empty()) {
    std::printf("bench_gemv_quant: %s\n", q.why_none.c_str());
    return 0;
  }
  std::printf("GPU: %s, %d SMs\n", q.gpus[0].name.c_str(), q.gpus[0].multiprocessors);
  const double copy_gbs = cosmos::kernels::measure_copy_gbps();
  std::printf("device copy: %.0f GB/s (1 GiB, read + write counted)\n\n", copy_gbs);
  cudaStream_t stream;
  CHECK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  if (do_sweep || do_chain) {
    const int rc = do_sweep ? sweep(copy_gbs, stream, only_fmt, shapes) : chain(copy_gbs, stream, only_fmt);
    CHECK(cudaStreamDestroy(stream));
    return rc;
  }

  std::printf("%-5s %-20s %7s %6s %9s | %-27s | %-27s\n", "fmt", "matrix", "rows", "cols", "MB",
              "eager, pdl off: us GB/s %copy", "graph, pdl on: us GB/s %copy");
  struct Summary {
    QuantKind kind;
    double eager_us, graph_us, mb;
  };
  std::vector<Summary> sums;
  for (const QuantKind kind : kKinds) {
    if (only_fmt && std::strcmp(only_fmt, kind_name(kind)) != 0) continue;
    Summary sum{kind, 0, 0, 0};
    for (const Shape& s : shapes) {
      if (!runs_fast(kind, s)) continue;
      ShapeBench b(kind, s, stream);
      const float eager_us = b.eager_us(), graph_us = b.graph_us();
      const std::size_t bytes = b.launched_bytes();
      const double ge = bytes / (eager_us * 1e-6) / 1e9, gg = bytes / (graph_us * 1e-6) / 1e9;
      std::printf("%-5s %-20s %7d %6d %9.1f | %8.2f %7.0f %7.1f%%  | %8.2f %7.0f %7.1f%%\n", kind_name(kind), s.name,
                  s.rows, s.cols, bytes / 1e6, eager_us, ge, 100 * ge / copy_gbs, graph_us, gg, 100 * gg / copy_gbs);
      std::fflush(stdout);
      sum.eager_us += eager_us * s.per_token;
      sum.graph_us += graph_us * s.per_token;
      sum.mb += bytes / 1e6 * s.per_token;
    }
    sums.push_back(sum);
  }
  std::printf("\nper token, estimated as %d x (qkv + o + gate/up + down) + lm_head (matrix products only):\n", kLayers);
  for (const Summary& s : sums) {
    const double floor_us = s.mb * 1e3 / copy_gbs;  // MB / (GB/s) in us
    std::printf("  %-5s %8.0f MB  eager %7.0f us (%6.1f tok/s)  graph+pdl %7.0f us (%6.1f tok/s, %5.1f%% of copy; "
                "copy-bandwidth floor %.0f us)\n",
                kind_name(s.kind), s.mb, s.eager_us, 1e6 / s.eager_us, s.graph_us, 1e6 / s.graph_us,
                100 * floor_us / s.graph_us, floor_us);
  }
  CHECK(cudaStreamDestroy(stream));
  return 0;
}
