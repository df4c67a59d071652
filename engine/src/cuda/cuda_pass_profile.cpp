#include "cuda/cuda_pass_profile.h"

#include <cstdio>
#include <cstdlib>
#include <string_view>

#include <spdlog/spdlog.h>

namespace cosmos {
namespace {

constexpr const char* kNames[PassProfile::kOps] = {"embedding", "rms_norm", "q/k/v GEMM", "rope_kv", "attention",
                                                   "o GEMM",    "gate/up GEMM", "swiglu", "down GEMM", "lm_head",
                                                   "sampling"};

}  // namespace

PassProfile::PassProfile() {
  const char* env = std::getenv("COSMOS_PROFILE");
  enabled_ = env && std::string_view(env) == "1";
}

PassProfile::~PassProfile() {
  for (cudaEvent_t e : events_) cudaEventDestroy(e);
}

cudaEvent_t PassProfile::event(std::size_t i) {
  while (events_.size() <= i) {
    cudaEvent_t e = nullptr;
    if (cudaEventCreate(&e) != cudaSuccess) {
      cudaGetLastError();
      return nullptr;
    }
    events_.push_back(e);
  }
  return events_[i];
}

void PassProfile::begin(cudaStream_t stream, int tokens) {
  active_ = false;
  cudaStreamCaptureStatus capturing = cudaStreamCaptureStatusNone;
  if (!enabled_ || tokens <= 1 || cudaStreamIsCapturing(stream, &capturing) != cudaSuccess ||
      capturing != cudaStreamCaptureStatusNone)
    return;
  cudaEvent_t e = event(0);
  if (!e || cudaEventRecord(e, stream) != cudaSuccess) return;
  active_ = true;
  stream_ = stream;
  tokens_ = tokens;
  ops_.clear();
  flops_.fill(0);
  bytes_.fill(0);
  count_.fill(0);
}

void PassProfile::mark(Op op, double flops, double bytes) {
  if (!active_) return;
  cudaEvent_t e = event(ops_.size() + 1);
  if (!e || cudaEventRecord(e, stream_) != cudaSuccess) {
    active_ = false;
    return;
  }
  ops_.push_back(op);
  flops_[op] += flops;
  bytes_[op] += bytes;
  ++count_[op];
}

std::string PassProfile::end() {
  if (!active_) return {};
  active_ = false;
  if (ops_.empty() || cudaEventSynchronize(events_[ops_.size()]) != cudaSuccess) return {};
  std::array<double, kOps> ms{};
  for (std::size_t i = 0; i < ops_.size(); ++i) {
    float t = 0;
    if (cudaEventElapsedTime(&t, events_[i], events_[i + 1]) == cudaSuccess) ms[ops_[i]] += t;
  }
  float span = 0;
  cudaEventElapsedTime(&span, events_[0], events_[ops_.size()]);
  double sum = 0;
  for (double m : ms) sum += m;
  std::string out = "pass profile, " + std::to_string(tokens_) + " tokens (COSMOS_PROFILE=1):\n";
  char line[160];
  for (int k = 0; k < kOps; ++k) {
    if (count_[k] == 0) continue;
    const double s = ms[k] * 1e-3;
    if (flops_[k] > 0)
      std::snprintf(line, sizeof line, "  %-13s %8.3f ms %5.1f%%  x%-3d %7.1f TFLOP/s\n", kNames[k], ms[k],
                    100.0 * ms[k] / sum, count_[k], flops_[k] / s * 1e-12);
    else
      std::snprintf(line, sizeof line, "  %-13s %8.3f ms %5.1f%%  x%-3d %7.0f GB/s\n", kNames[k], ms[k],
                    100.0 * ms[k] / sum, count_[k], bytes_[k] / s * 1e-9);
    out += line;
  }
  std::snprintf(line, sizeof line, "  %-13s %8.3f ms (pass span %.3f ms, %.0f tok/s)", "sum", sum, span,
                tokens_ / (span * 1e-3));
  out += line;
  spdlog::info("{}", out);
  return out;
}

}  // namespace cosmos
