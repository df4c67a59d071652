// Which NVIDIA GPUs this process can use. "No GPU" (no driver, or a driver older than the runtime)
// is a normal answer with a reason, not an error.
#pragma once

#include <cstddef>
#include <string>
#include <vector>

namespace cosmos::kernels {

struct GpuInfo {
  int index = 0;
  std::string name;
  int sm_major = 0, sm_minor = 0;
  std::size_t total_bytes = 0, free_bytes = 0;
  int multiprocessors = 0;
};

struct GpuQuery {
  std::vector<GpuInfo> gpus;
  std::string why_none;  // set when gpus is empty
};

GpuQuery query_gpus();

// Whether the current device has exactly this compute capability (false when there is none). The
// sm_90a kernels (warpgroup MMA, TMA) run on 9.0 only.
bool current_device_is(int major, int minor);

}  // namespace cosmos::kernels

namespace cosmos::kernels {

// Device-to-device copy bandwidth of the current GPU in GB/s (bytes read + written, median of
// `reps` copies of `bytes`); 0 when it cannot be measured.
double measure_copy_gbps(std::size_t bytes = std::size_t{1} << 30, int reps = 10);

}  // namespace cosmos::kernels
