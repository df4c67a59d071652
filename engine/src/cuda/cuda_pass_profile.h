// Per-operation GPU time of the CUDA backend's passes of several tokens (prefill), for performance
// work: with COSMOS_PROFILE=1 the backend records an event after each operation of enqueue() and,
// after the pass, logs each kind's time summed over the layers with its rate (TFLOP/s for the
// products and the attention, GB/s for the rest), and the sum against the pass's own span.
// Events between kernels cost each boundary its programmatic-dependent-launch overlap, so the sum
// is a little above an unprofiled pass; the split is what it is for.
#pragma once

#include <cuda_runtime.h>

#include <array>
#include <string>
#include <vector>

namespace cosmos {

class PassProfile {
 public:
  enum Op { embed, norm, qkv, rope_kv, attention, o, gate_up, swiglu, down, lm_head, sample, kOps };

  PassProfile();  // reads COSMOS_PROFILE
  ~PassProfile();
  PassProfile(const PassProfile&) = delete;
  PassProfile& operator=(const PassProfile&) = delete;

  bool enabled() const { return enabled_; }
  // Starts a pass of `tokens` new tokens on `stream` (a no-op unless enabled and tokens > 1).
  void begin(cudaStream_t stream, int tokens);
  // The operation that just ended on the stream, with the floating-point operations and the bytes
  // it moves at least (either may be 0).
  void mark(Op op, double flops, double bytes);
  // Waits for the pass and logs it; returns the table (empty when nothing was recorded).
  std::string end();

 private:
  cudaEvent_t event(std::size_t i);

  bool enabled_ = false;
  bool active_ = false;
  cudaStream_t stream_ = nullptr;
  int tokens_ = 0;
  std::vector<cudaEvent_t> events_;   // [marks + 1]: events_[0] before the pass
  std::vector<Op> ops_;               // [marks]
  std::array<double, kOps> flops_{}, bytes_{};
  std::array<int, kOps> count_{};
};

}  // namespace cosmos
