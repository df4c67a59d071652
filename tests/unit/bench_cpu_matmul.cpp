// The CPU backend's matrix product (cpu::matmul, engine/src/cpu/cpu_ops.cpp) on the 7B model's
// layer shapes: q, k, v, o, gate, up, down of `--layers` layers (more bytes than any cache, so every
// pass reads the weights from memory), `--tokens` tokens at a time, in each weight format. Prints
// milliseconds per layer, the weights' GB/s and GFLOP/s (2 FLOPs per weight and
// token). Random bytes stand in for quantized weights: the kernels' speed does not depend on values.
// (A plain vectorized read of 1 GB measured slower, 27.6 GB/s, than the int8 product's 42 on the
// 2-core VM, so it is no floor and is not printed; docs/PERFORMANCE.md, session 50.)
// Not a test (no assertion); speed is measured here, never asserted.
//
//   bench_cpu_matmul [--formats int4,int8,fp8,bf16] [--tokens 1] [--layers 8] [--reps 5] [--threads N]
//                    [--isa avx512|avx2|portable]
// --isa picks the quantized one-token products' instruction set (set_quant_dot_isa; default: the best
// this CPU runs), so an AVX-512 machine can time the AVX2 kernels too; bf16 and prompts ignore it.
#include <omp.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "cosmos/quant.h"
#include "cpu/cpu_ops.h"
#include "cpu_bench_args.h"

namespace {

using namespace cosmos;

using testing::k7bLayer;
using testing::LayerShape;
using testing::split_commas;

// One weight matrix in a format: its quantized copy, or raw bf16 bits.
struct Weight {
  QuantizedMatrix q;
  std::vector<std::uint16_t> bf16;  // [rows, cols] (bf16 only)
  cpu::WeightView view;
};

Weight make_weight(const std::string& format, const LayerShape& s, std::mt19937& rng) {
  Weight w;
  std::uniform_int_distribution<int> byte(0, 255);
  if (format == "bf16") {
    w.bf16.resize(static_cast<std::size_t>(s.rows * s.cols));
    std::normal_distribution<float> dist(0.0f, 0.02f);
    for (auto& b : w.bf16) {
      const float f = dist(rng);
      std::uint32_t bits;
      std::memcpy(&bits, &f, 4);
      b = static_cast<std::uint16_t>(bits >> 16);
    }
    w.view = {reinterpret_cast<const std::byte*>(w.bf16.data()), DType::bf16, s.rows, s.cols, nullptr};
    return w;
  }
  const QuantFormat f = format == "int4" ? QuantFormat::int4_group : format == "int8" ? QuantFormat::int8_row : QuantFormat::fp8_row;
  w.q = make_quantized(f, s.rows, s.cols);
  for (auto& b : w.q.q) b = static_cast<std::uint8_t>(byte(rng) & (f == QuantFormat::fp8_row ? 0xF7 : 0xFF));  // no NaN codes
  std::fill(w.q.row_scale.begin(), w.q.row_scale.end(), 1e-3f);
  std::fill(w.q.group_scale.begin(), w.q.group_scale.end(), std::uint16_t{0x3A83});  // bf16 ~1e-3
  std::fill(w.q.group_min.begin(), w.q.group_min.end(), std::uint16_t{0xBC23});      // bf16 ~-1e-2
  w.view = {nullptr, DType::bf16, s.rows, s.cols, nullptr};
  return w;
}

}  // namespace

int main(int argc, char** argv) {
  std::string formats = "int4,int8,fp8,bf16";
  int tokens = 1, layers = 8, reps = 5, threads = omp_get_num_procs();
  std::string isa;
  if (!testing::parse_bench_args(argc, argv, {{"--formats", &formats}, {"--isa", &isa}},
                                 {{"--tokens", &tokens}, {"--layers", &layers}, {"--reps", &reps}, {"--threads", &threads}}))
    return 2;
  if (!isa.empty()) {
    const QuantDotIsa want = isa == "avx512" ? QuantDotIsa::avx512 : isa == "avx2" ? QuantDotIsa::avx2 : QuantDotIsa::portable;
    if ((isa != "avx512" && isa != "avx2" && isa != "portable") || !set_quant_dot_isa(want)) {
      std::fprintf(stderr, "--isa %s: not one of avx512, avx2, portable that this CPU runs\n", isa.c_str());
      return 2;
    }
  }
  std::printf("quantized one-token products on %s\n", name(quant_dot_isa()));
  std::printf("%-5s %6s %6s %10s %9s %9s %9s\n", "fmt", "tokens", "layers", "ms/layer", "GB/s", "GFLOP/s", "best GB/s");
  for (const std::string& format : split_commas(formats)) {
    if (format != "int4" && format != "int8" && format != "fp8" && format != "bf16") {
      std::fprintf(stderr, "unknown format %s (int4, int8, fp8, bf16)\n", format.c_str());
      return 2;
    }
    std::mt19937 rng(1);
    std::vector<Weight> ws;  // [layers * 7]
    ws.reserve(static_cast<std::size_t>(layers) * std::size(k7bLayer));
    std::uint64_t bytes = 0, weights = 0;
    for (int l = 0; l < layers; ++l) {
      for (const LayerShape& s : k7bLayer) {
        ws.push_back(make_weight(format, s, rng));
        bytes += format == "bf16" ? static_cast<std::uint64_t>(s.rows * s.cols) * 2 : ws.back().q.bytes();
        weights += static_cast<std::uint64_t>(s.rows * s.cols);
      }
    }
    for (Weight& w : ws)
      if (format != "bf16") w.view.quant = &w.q;  // after the vector stops moving
    std::normal_distribution<float> dist(0.0f, 1.0f);
    std::vector<float> x(static_cast<std::size_t>(tokens) * 18944), y(static_cast<std::size_t>(tokens) * 18944);  // [tokens, <= 18944]
    for (float& v : x) v = dist(rng);
    double total = 0.0, best = 1e30;
    for (int r = 0; r <= reps; ++r) {  // pass 0 warms up (page faults, thread pool)
      const auto t0 = std::chrono::steady_clock::now();
      for (const Weight& w : ws) cpu::matmul(x.data(), w.view, nullptr, y.data(), tokens, threads);
      const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
      if (r > 0) total += s, best = std::min(best, s);
    }
    const double mean = total / reps;
    std::printf("%-5s %6d %6d %10.2f %9.1f %9.1f %9.1f\n", format.c_str(), tokens, layers, 1e3 * mean / layers,
                bytes / mean / 1e9, 2.0 * static_cast<double>(weights) * tokens / mean / 1e9, bytes / best / 1e9);
  }
  return 0;
}
