// The GPU's SM clock and the reasons it is held below its maximum, sampled while a benchmark runs,
// so that a measurement taken while the driver lowered the clocks says so (a power cap after a long
// prompt, thermal slowdown): docs/PERFORMANCE.md, session 62. Read through NVML
// (libnvidia-ml.so.1, which comes with the NVIDIA driver), opened at run time: without a driver
// open_nvml_clock_source() returns an error saying why, and nothing else changes.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <thread>
#include <vector>

#include "cosmos/error.h"

namespace cosmos {

// NVML's clock-event reason bits (nvmlClocksEventReasons; the same as its older "throttle reasons").
namespace clock_event {
inline constexpr std::uint64_t gpu_idle = 0x1;
inline constexpr std::uint64_t applications_clocks = 0x2;
inline constexpr std::uint64_t sw_power_cap = 0x4;
inline constexpr std::uint64_t hw_slowdown = 0x8;
inline constexpr std::uint64_t sync_boost = 0x10;
inline constexpr std::uint64_t sw_thermal = 0x20;
inline constexpr std::uint64_t hw_thermal = 0x40;
inline constexpr std::uint64_t hw_power_brake = 0x80;
inline constexpr std::uint64_t display_clocks = 0x100;
// Reasons that lower the clock under load (idle, application and display settings and sync boost
// are not slowdowns of a running benchmark).
inline constexpr std::uint64_t slowdowns = sw_power_cap | hw_slowdown | sw_thermal | hw_thermal | hw_power_brake;
}  // namespace clock_event

struct ClockSample {
  unsigned sm_mhz = 0;
  std::uint64_t reasons = 0;  // clock_event bits active at the sample
  unsigned power_mw = 0;      // 0 when the device does not report it
};

struct ClockSummary {
  int samples = 0;
  unsigned sm_mhz_min = 0, sm_mhz_max = 0;
  double sm_mhz_mean = 0;
  unsigned sm_mhz_limit = 0;  // the device's maximum SM clock (0: unknown)
  double power_w_mean = 0;    // over the samples that report power (0: none did)
  double power_cap_share = 0; // fraction of samples with sw_power_cap or hw_power_brake set
  double thermal_share = 0;   // ... with sw_thermal or hw_thermal
  double slowdown_share = 0;  // ... with any clock_event::slowdowns bit
  // The slowdown reasons seen, by name, comma-separated ("" when none).
  std::string reasons_seen;
};

// Sums up samples (pure; an empty span gives samples = 0).
ClockSummary summarize_clocks(std::span<const ClockSample> samples, unsigned sm_mhz_limit);

// One line for people: "SM clock 1455-1980 MHz (mean 1845, limit 1980), slowed in 25% of samples
// (sw_power_cap), 626 W" ("no slowdown" when none; the power when reported; "no samples" when empty).
std::string describe_clocks(const ClockSummary& s);

// Names of the slowdown bits set in `reasons`, comma-separated ("sw_power_cap, hw_thermal").
std::string clock_event_names(std::uint64_t reasons);

// Where samples come from: one reading now, or nullopt when the reading failed.
struct ClockSource {
  std::function<std::optional<ClockSample>()> read;
  unsigned sm_mhz_limit = 0;
  std::string device;  // e.g. "NVIDIA H100 80GB HBM3 (00000000:1A:00.0)"
};

// NVML's view of the GPU with this PCI bus id (cosmos::gpu_pci_bus_id(); empty: NVML's device 0).
// Errors: "clocks.nvml" (unsupported_model) saying why (no driver library, no such device).
Result<ClockSource> open_nvml_clock_source(const std::string& pci_bus_id);

// Reads `source` every `period` on a thread of its own between start() and stop().
class ClockSampler {
 public:
  explicit ClockSampler(ClockSource source, std::chrono::microseconds period = std::chrono::milliseconds(5));
  ~ClockSampler();
  ClockSampler(const ClockSampler&) = delete;
  ClockSampler& operator=(const ClockSampler&) = delete;

  void start();            // clears the samples and starts reading (no-op if running)
  ClockSummary stop();     // stops, joins, and sums up what was read since start()
  // What was read since the last start() (complete once stop() has returned).
  const std::vector<ClockSample>& samples() const { return samples_; }
  const ClockSource& source() const { return source_; }

 private:
  ClockSource source_;
  std::chrono::microseconds period_;
  std::atomic<bool> running_{false};
  std::thread thread_;
  std::vector<ClockSample> samples_;  // written by the thread only while running_
};

}  // namespace cosmos
