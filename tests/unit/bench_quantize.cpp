// Quantization at load (quantize_rows, engine/src/quant.cpp) on the 7B model's layer shapes, from
// bf16 weights, as the CPU backend runs it: rows in chunks of 64 over the threads. Prints, per
// format, seconds per billion weights and the bf16 source's GB/s. The matrices are made (and their
// pages touched) before the clock starts, so this times the quantization alone; a real load also
// reads the checkpoint and faults in the quantized pages. Random Gaussian weights: the speed does not
// depend on the values. Not a test (no assertion); speed is measured here, never asserted.
//
//   bench_quantize [--formats int4,int8,fp8] [--layers 2] [--reps 3] [--threads N]
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
#include "cpu_bench_args.h"

namespace {

using namespace cosmos;

using testing::k7bLayer;
using testing::split_commas;

}  // namespace

int main(int argc, char** argv) {
  std::string formats = "int4,int8,fp8";
  int layers = 2, reps = 3, threads = omp_get_num_procs();
  if (!testing::parse_bench_args(argc, argv, {{"--formats", &formats}},
                                 {{"--layers", &layers}, {"--reps", &reps}, {"--threads", &threads}}))
    return 2;
  // The bf16 source: one buffer as large as the largest matrix, reused ([18944 * 3584] bf16).
  std::vector<std::uint16_t> src(static_cast<std::size_t>(18944) * 3584);
  std::mt19937 rng(1);
  std::normal_distribution<float> dist(0.0f, 0.02f);
  for (auto& b : src) {
    const float f = dist(rng);
    std::uint32_t bits;
    std::memcpy(&bits, &f, 4);
    b = static_cast<std::uint16_t>(bits >> 16);
  }
  std::printf("%-5s %6s %8s %12s %10s\n", "fmt", "layers", "threads", "s/1e9 wts", "src GB/s");
  for (const std::string& format : split_commas(formats)) {
    if (format != "int4" && format != "int8" && format != "fp8") {
      std::fprintf(stderr, "unknown format %s (int4, int8, fp8)\n", format.c_str());
      return 2;
    }
    const QuantFormat f = format == "int4" ? QuantFormat::int4_group : format == "int8" ? QuantFormat::int8_row : QuantFormat::fp8_row;
    std::vector<QuantizedMatrix> ms;  // [layers * 7]
    std::uint64_t weights = 0;
    for (int l = 0; l < layers; ++l)
      for (const testing::LayerShape& s : k7bLayer) {
        ms.push_back(make_quantized(f, s.rows, s.cols));  // zero-filled: its pages are touched
        weights += static_cast<std::uint64_t>(s.rows * s.cols);
      }
    double best = 1e30;
    for (int r = 0; r <= reps; ++r) {  // pass 0 warms up
      const auto t0 = std::chrono::steady_clock::now();
      for (QuantizedMatrix& m : ms) {
        constexpr std::int64_t kChunk = 64;
        const std::int64_t chunks = (m.rows + kChunk - 1) / kChunk;
#pragma omp parallel for num_threads(threads) schedule(dynamic)
        for (std::int64_t c = 0; c < chunks; ++c) {
          const Status st = quantize_rows(reinterpret_cast<const std::byte*>(src.data()), DType::bf16, m, c * kChunk,
                                          std::min(m.rows, (c + 1) * kChunk));
          if (!st.ok()) std::abort();
        }
      }
      const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
      if (r > 0) best = std::min(best, s);
    }
    std::printf("%-5s %6d %8d %12.2f %10.2f\n", format.c_str(), layers, threads, best / (static_cast<double>(weights) / 1e9),
                2.0 * static_cast<double>(weights) / best / 1e9);
  }
  return 0;
}
