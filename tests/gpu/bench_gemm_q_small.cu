// Quantized weights times a few tokens (launch_gemm_q_small, reports, never fails): every matrix of
// a Cosmos-Reason1-7B layer and lm_head, int8 / fp8 / int4, for 1..64 tokens. Weights rotated over
// enough copies to exceed 4x the L2 cache (DRAM figures); each point is the median of 7 batches of
// launches in a CUDA graph with PDL on, as the engine runs them. Printed: us per launch, GB/s from
// the bytes launch_gemm_q_small returns, % of the device copy bandwidth, and per token count the
// step's products estimated as 28 x (q/k/v + o + gate/up + down) + lm_head, in ms and tokens/s.
// --sweep also times every launch plan (16-row tiles per warp x warps per tile, weights in registers or
// through the shared-memory ring, and above 32 tokens passes of 32 or 64; kernels/gemm_q_small.cuh
// QSmallPlan) per matrix and token count, and the step with the best plan of each. --table sweeps the
// one-pass plans and prints, per matrix and token count, the best with weights in registers and the
// best through shared memory (the ring, or the ring with x shared by the block; where >= 5% faster) as
// rows of kernels/gemm_q_small_plans.inc (run with
// --tokens 8,16,24,32,48,64, one per token-tile count).
//   bench_gemm_q_small [--fmt int8|fp8|int4] [--tokens 1,8,32] [--sweep | --table]
#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include "kernels/device_info.cuh"
#include "kernels/gemm_q_small.cuh"
#include "kernels/pdl.cuh"
#include "bench_check.h"
#include "bench_quant_fill.cuh"

namespace {

using cosmos::kernels::QSmallArgs;
using cosmos::kernels::QuantKind;

using bench_quant::fill_bf16;
using bench_quant::fill_bytes;
using bench_quant::fill_f32;

struct Matrix {
  const char* name;
  int rows, cols, per_step;  // per_step: launches per decode step (28 layers, 1 lm_head)
  bool accumulate, bf16_out;
};

void* dalloc(std::size_t bytes, std::vector<void*>& keep) {
  void* p = nullptr;
  CHECK(cudaMalloc(&p, bytes));
  keep.push_back(p);
  return p;
}

}  // namespace

int main(int argc, char** argv) {
  const char* only = nullptr;
  std::vector<int> tokens = {1, 2, 4, 8, 16, 32, 64};
  bool sweep = false, table = false;
  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], "--sweep") == 0) {
      sweep = true;
    } else if (std::strcmp(argv[i], "--table") == 0) {
      sweep = table = true;
    } else if (std::strcmp(argv[i], "--fmt") == 0 && i + 1 < argc) {
      only = argv[++i];
    } else if (std::strcmp(argv[i], "--tokens") == 0 && i + 1 < argc) {
      tokens.clear();
      for (const char* s = argv[++i]; *s;) {
        tokens.push_back(std::atoi(s));
        while (*s && *s != ',') ++s;
        if (*s == ',') ++s;
      }
    } else {
      std::printf("usage: bench_gemm_q_small [--fmt int8|fp8|int4] [--tokens 1,8,32] [--sweep | --table]\n");
      return 2;
    }
  }
  const auto q = cosmos::kernels::query_gpus();
  if (q.gpus.empty()) {
    std::printf("bench_gemm_q_small: %s\n", q.why_none.c_str());
    return 0;
  }
  cosmos::kernels::set_pdl_enabled(true);
  const double copy = cosmos::kernels::measure_copy_gbps();
  std::printf("GPU: %s; device copy %.0f GB/s\n", q.gpus[0].name.c_str(), copy);
  int l2 = 0;
  CHECK(cudaDeviceGetAttribute(&l2, cudaDevAttrL2CacheSize, 0));
  cudaStream_t stream;
  CHECK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  // The engine's scratch for plans that split columns over blocks (kernels/gemm_q_small.cuh).
  cosmos::kernels::QSmallScratch scratch;
  scratch.partial_floats = cosmos::kernels::qsmall_scratch_floats(cosmos::kernels::kQSmallScratchRows);
  scratch.ticket_count = cosmos::kernels::qsmall_scratch_tickets(cosmos::kernels::kQSmallScratchRows);
  CHECK(cudaMalloc(&scratch.partials, scratch.partial_floats * 4));
  CHECK(cudaMalloc(&scratch.tickets, static_cast<std::size_t>(scratch.ticket_count) * 4));
  CHECK(cudaMemset(scratch.tickets, 0, static_cast<std::size_t>(scratch.ticket_count) * 4));
  const Matrix mats[] = {{"q/k/v", 4608, 3584, 28, false, false},    {"o + residual", 3584, 3584, 28, true, false},
                         {"gate/up", 37888, 3584, 28, false, true},  {"down + residual", 3584, 18944, 28, true, false},
                         {"lm_head", 152064, 3584, 1, false, false}};
  struct Fmt {
    const char* name;
    QuantKind kind;
  };
  for (const Fmt f : {Fmt{"int8", QuantKind::int8_row}, Fmt{"fp8", QuantKind::fp8_row}, Fmt{"int4", QuantKind::int4_group}}) {
    if (only && std::strcmp(only, f.name) != 0) continue;
    std::printf("\n%-5s %-16s %6s | us per launch, GB/s, %% of copy\n", f.name, "matrix", "tokens");
    std::vector<double> step_us(tokens.size(), 0.0), best_step_us(tokens.size(), 0.0);
    for (const Matrix& m : mats) {
      std::vector<void*> keep;
      const bool i4 = f.kind == QuantKind::int4_group;
      const std::size_t qbytes = static_cast<std::size_t>(m.rows) * (i4 ? m.cols / 2 : m.cols);
      const std::size_t groups = static_cast<std::size_t>(m.cols / 128);
      const int copies = static_cast<int>(std::max<std::size_t>(1, (4 * static_cast<std::size_t>(l2)) / qbytes + 1));
      std::vector<QSmallArgs> args(copies);
      const int nmax = *std::max_element(tokens.begin(), tokens.end());
      auto* x = static_cast<__nv_bfloat16*>(dalloc(static_cast<std::size_t>(nmax) * m.cols * 2, keep));
      fill_bf16<<<256, 256, 0, stream>>>(x, static_cast<std::size_t>(nmax) * m.cols, 7u, 2.0f, 0.0f);
      void* y = dalloc(static_cast<std::size_t>(nmax) * m.rows * 4, keep);
      CHECK(cudaMemsetAsync(y, 0, static_cast<std::size_t>(nmax) * m.rows * 4, stream));
      for (int c = 0; c < copies; ++c) {
        QSmallArgs& a = args[c];
        auto* qp = static_cast<std::uint8_t*>(dalloc(qbytes, keep));
        fill_bytes<<<2048, 256, 0, stream>>>(qp, qbytes, 11u + c, f.kind == QuantKind::fp8_row);
        a.w.kind = f.kind;
        a.w.q = qp;
        if (i4) {
          auto* gs = static_cast<__nv_bfloat16*>(dalloc(m.rows * groups * 2, keep));
          auto* gm = static_cast<__nv_bfloat16*>(dalloc(m.rows * groups * 2, keep));
          fill_bf16<<<1024, 256, 0, stream>>>(gs, m.rows * groups, 3u + c, 0.002f, 0.004f);
          fill_bf16<<<1024, 256, 0, stream>>>(gm, m.rows * groups, 5u + c, 0.01f, -0.03f);
          a.w.group_scale = reinterpret_cast<const std::uint16_t*>(gs);
          a.w.group_min = reinterpret_cast<const std::uint16_t*>(gm);
        } else {
          auto* rs = static_cast<float*>(dalloc(static_cast<std::size_t>(m.rows) * 4, keep));
          fill_f32<<<256, 256, 0, stream>>>(rs, m.rows, 9u + c, 0.0002f, f.kind == QuantKind::fp8_row ? 0.0002f : 0.0005f);
          a.w.row_scale = rs;
        }
        a.x = x;
        a.y = y;
        a.rows = m.rows;
        a.cols = m.cols;
        a.accumulate = m.accumulate;
        a.y_bf16 = m.bf16_out;
        a.scratch = scratch;
      }
      CHECK(cudaStreamSynchronize(stream));
      // us per launch of the matrix's n-token product with plan `plan`; bytes from the launcher.
      auto time_plan = [&](int n, cosmos::kernels::QSmallPlan plan, std::size_t& bytes) {
        cudaGraph_t graph;
        cudaGraphExec_t exec;
        const int launches = std::max(copies, 8);
        CHECK(cudaStreamBeginCapture(stream, cudaStreamCaptureModeThreadLocal));
        for (int i = 0; i < launches; ++i) {
          QSmallArgs a = args[i % copies];
          a.n = n;
          a.plan = plan;
          bytes = cosmos::kernels::launch_gemm_q_small(a, stream);
        }
        CHECK(cudaStreamEndCapture(stream, &graph));
        CHECK(cudaGraphInstantiate(&exec, graph, 0));
        const float ms = median_event_ms(stream, 7, 2, [&] { CHECK(cudaGraphLaunch(exec, stream)); });
        CHECK(cudaGraphExecDestroy(exec));
        CHECK(cudaGraphDestroy(graph));
        return 1000.0 * ms / launches;
      };
      for (std::size_t ti = 0; ti < tokens.size(); ++ti) {
        const int n = tokens[ti];
        std::size_t bytes = 0;
        QSmallArgs probe = args[0];
        probe.n = n;
        const cosmos::kernels::QSmallPlan chosen = cosmos::kernels::gemm_q_small_plan(probe);
        const double us = time_plan(n, {}, bytes);
        const double gbs = static_cast<double>(bytes) / (us * 1e3);
        step_us[ti] += us * m.per_step;
        std::printf("%-5s %-16s %6d | %8.1f us %6.0f GB/s %5.1f%% (m %d, split %d, %s, pass %d)\n", f.name, m.name, n,
                    us, gbs, 100.0 * gbs / copy, chosen.m_tiles, chosen.split, chosen.feed == 3 ? "x shared" : chosen.feed == 2 ? "ring" : "registers",
                    chosen.pass);
        if (chosen.col_split > 1) std::printf("      (columns split over %d blocks)\n", chosen.col_split);
        double best = us;
        // --table: the best plan of each feed (registers, ring), one pass.
        double best_feed[4] = {0, 1e30, 1e30, 1e30};
        cosmos::kernels::QSmallPlan best_of[4];
        if (sweep) {
          for (int pass : {32, 64}) {
            if (pass == 64 && n <= 32) continue;  // one pass either way
            if (table && pass == 32 && n > 32) continue;  // the table holds plans of one pass
            for (int feed : {1, 2, 3}) {
              std::printf("      %s, pass %d (m x split[/column split]: us):", feed == 3 ? "x shared" : feed == 2 ? "ring" : "registers", pass);
              for (int km : {1, 2, 4}) {
                for (int ks : {1, 2, 4, 8}) {
                  for (int cs : {1, 2, 4, 8, 16}) {
                    probe.plan = {km, ks, feed, pass, cs};
                    if (cosmos::kernels::gemm_q_small_unsupported(probe)) continue;
                    std::size_t b = 0;
                    const double t = time_plan(n, probe.plan, b);
                    best = std::min(best, t);
                    if (t < best_feed[feed]) best_feed[feed] = t, best_of[feed] = probe.plan;
                    if (cs == 1) std::printf(" %dx%d: %.1f", km, ks, t);
                    else std::printf(" %dx%d/%d: %.1f", km, ks, cs, t);
                  }
                }
              }
              std::printf("\n");
            }
          }
        }
        best_step_us[ti] += best * m.per_step;
        if (table) {  // a row of kernels/gemm_q_small_plans.inc; a shared-memory feed only where >= 5% faster
          const cosmos::kernels::QSmallPlan& r = best_of[1];
          const int sf = best_feed[3] < best_feed[2] ? 3 : 2;
          const bool shared = best_feed[sf] < 0.95 * best_feed[1];
          const int nt = (n + 7) / 8 <= 4 ? (n + 7) / 8 : (n + 7) / 8 <= 6 ? 6 : 8;
          std::printf("TABLE   {%s, %d, %d, %d, %d, %d, %d, %d, %d, %d, %d},  // %d tokens: registers %.1f us",
                      f.kind == QuantKind::int8_row ? "kI8" : f.kind == QuantKind::fp8_row ? "kF8" : "kI4", m.rows,
                      m.cols, nt, r.m_tiles, r.split, r.col_split, shared ? sf : 0, shared ? best_of[sf].m_tiles : 0,
                      shared ? best_of[sf].split : 0, shared ? best_of[sf].col_split : 0, n, best_feed[1]);
          if (shared) std::printf(", %s %.1f us", sf == 3 ? "x shared" : "ring", best_feed[sf]);
          std::printf("\n");
        }
      }
      CHECK(cudaStreamSynchronize(stream));
      for (void* p : keep) CHECK(cudaFree(p));
    }
    std::printf("%-5s step's products (28 layers + lm_head):", f.name);
    for (std::size_t ti = 0; ti < tokens.size(); ++ti)
      std::printf("  %d: %.2f ms = %.0f tok/s", tokens[ti], step_us[ti] / 1000.0, tokens[ti] * 1e6 / step_us[ti]);
    std::printf("\n");
    if (sweep) {
      std::printf("%-5s step's products, best plan of each:", f.name);
      for (std::size_t ti = 0; ti < tokens.size(); ++ti)
        std::printf("  %d: %.2f ms", tokens[ti], best_step_us[ti] / 1000.0);
      std::printf("\n");
    }
  }
  CHECK(cudaFree(scratch.partials));
  CHECK(cudaFree(scratch.tickets));
  CHECK(cudaStreamDestroy(stream));
  return 0;
}
