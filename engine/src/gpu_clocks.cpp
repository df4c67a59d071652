#include "cosmos/gpu_clocks.h"

#include <dlfcn.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <utility>

namespace cosmos {

ClockSummary summarize_clocks(std::span<const ClockSample> samples, unsigned sm_mhz_limit) {
  ClockSummary s;
  s.sm_mhz_limit = sm_mhz_limit;
  s.samples = static_cast<int>(samples.size());
  if (samples.empty()) return s;
  s.sm_mhz_min = samples.front().sm_mhz;
  double clock_sum = 0, power_sum = 0;
  int power_n = 0, cap = 0, thermal = 0, slow = 0;
  std::uint64_t seen = 0;
  for (const ClockSample& x : samples) {
    s.sm_mhz_min = std::min(s.sm_mhz_min, x.sm_mhz);
    s.sm_mhz_max = std::max(s.sm_mhz_max, x.sm_mhz);
    clock_sum += x.sm_mhz;
    if (x.power_mw > 0) {
      power_sum += x.power_mw / 1000.0;
      ++power_n;
    }
    cap += (x.reasons & (clock_event::sw_power_cap | clock_event::hw_power_brake)) != 0;
    thermal += (x.reasons & (clock_event::sw_thermal | clock_event::hw_thermal)) != 0;
    slow += (x.reasons & clock_event::slowdowns) != 0;
    seen |= x.reasons & clock_event::slowdowns;
  }
  const double n = static_cast<double>(samples.size());
  s.sm_mhz_mean = clock_sum / n;
  s.power_w_mean = power_n > 0 ? power_sum / power_n : 0.0;
  s.power_cap_share = cap / n;
  s.thermal_share = thermal / n;
  s.slowdown_share = slow / n;
  s.reasons_seen = clock_event_names(seen);
  return s;
}

std::string describe_clocks(const ClockSummary& s) {
  if (s.samples == 0) return "SM clock: no samples";
  std::string line = "SM clock " + std::to_string(s.sm_mhz_min) + "-" + std::to_string(s.sm_mhz_max) + " MHz (mean " +
                     std::to_string(static_cast<long>(std::lround(s.sm_mhz_mean)));
  if (s.sm_mhz_limit > 0) line += ", limit " + std::to_string(s.sm_mhz_limit);
  line += "), ";
  if (s.slowdown_share > 0)
    line += "slowed in " + std::to_string(static_cast<long>(std::lround(100.0 * s.slowdown_share))) +
            "% of samples (" + s.reasons_seen + ")";
  else
    line += "no slowdown";
  if (s.power_w_mean > 0) line += ", " + std::to_string(static_cast<long>(std::lround(s.power_w_mean))) + " W";
  return line;
}

std::string clock_event_names(std::uint64_t reasons) {
  static constexpr std::array<std::pair<std::uint64_t, const char*>, 5> kNames{{
      {clock_event::sw_power_cap, "sw_power_cap"},
      {clock_event::hw_slowdown, "hw_slowdown"},
      {clock_event::sw_thermal, "sw_thermal"},
      {clock_event::hw_thermal, "hw_thermal"},
      {clock_event::hw_power_brake, "hw_power_brake"},
  }};
  std::string out;
  for (const auto& [bit, name] : kNames) {
    if (!(reasons & bit)) continue;
    if (!out.empty()) out += ", ";
    out += name;
  }
  return out;
}

namespace {

// NVML's C interface, as far as this file uses it (nvml.h: nvmlReturn_t is an enum with
// NVML_SUCCESS = 0, nvmlDevice_t an opaque handle, NVML_CLOCK_SM = 1).
using NvmlReturn = int;
using NvmlDevice = struct NvmlDeviceOpaque*;
constexpr NvmlReturn kNvmlSuccess = 0;
constexpr int kNvmlClockSm = 1;

struct Nvml {
  NvmlReturn (*init)() = nullptr;
  NvmlReturn (*shutdown)() = nullptr;
  const char* (*error_string)(NvmlReturn) = nullptr;
  NvmlReturn (*by_index)(unsigned, NvmlDevice*) = nullptr;
  NvmlReturn (*by_bus_id)(const char*, NvmlDevice*) = nullptr;
  NvmlReturn (*name)(NvmlDevice, char*, unsigned) = nullptr;
  NvmlReturn (*clock)(NvmlDevice, int, unsigned*) = nullptr;
  NvmlReturn (*max_clock)(NvmlDevice, int, unsigned*) = nullptr;
  NvmlReturn (*reasons)(NvmlDevice, unsigned long long*) = nullptr;
  NvmlReturn (*power)(NvmlDevice, unsigned*) = nullptr;
};

template <typename F>
bool bind(void* lib, F& fn, const char* name) {
  fn = reinterpret_cast<F>(dlsym(lib, name));
  return fn != nullptr;
}

// The library, loaded and initialized once per process (never unloaded: the sources it gave out
// may outlive any one user).
struct NvmlLibrary {
  Nvml api;
  std::string why_not;  // empty when usable
};

const NvmlLibrary& nvml_library() {
  static const NvmlLibrary lib = [] {
    NvmlLibrary l;
    void* h = dlopen("libnvidia-ml.so.1", RTLD_NOW | RTLD_LOCAL);
    if (!h) {
      const char* e = dlerror();
      l.why_not = std::string("cannot load NVML (libnvidia-ml.so.1, part of the NVIDIA driver): ") +
                  (e ? e : "unknown error");
      return l;
    }
    Nvml& n = l.api;
    // The clock-event query's newer name first (drivers from 535), then its older one.
    const bool ok = bind(h, n.init, "nvmlInit_v2") && bind(h, n.shutdown, "nvmlShutdown") &&
                    bind(h, n.error_string, "nvmlErrorString") && bind(h, n.by_index, "nvmlDeviceGetHandleByIndex_v2") &&
                    bind(h, n.by_bus_id, "nvmlDeviceGetHandleByPciBusId_v2") && bind(h, n.name, "nvmlDeviceGetName") &&
                    bind(h, n.clock, "nvmlDeviceGetClockInfo") && bind(h, n.max_clock, "nvmlDeviceGetMaxClockInfo") &&
                    (bind(h, n.reasons, "nvmlDeviceGetCurrentClocksEventReasons") ||
                     bind(h, n.reasons, "nvmlDeviceGetCurrentClocksThrottleReasons"));
    if (!ok) {
      l.why_not = "libnvidia-ml.so.1 lacks a function the clock sampler needs (driver too old)";
      return l;
    }
    bind(h, n.power, "nvmlDeviceGetPowerUsage");  // optional
    if (const NvmlReturn r = n.init(); r != kNvmlSuccess)
      l.why_not = std::string("NVML did not start: ") + n.error_string(r);
    return l;
  }();
  return lib;
}

}  // namespace

Result<ClockSource> open_nvml_clock_source(const std::string& pci_bus_id) {
  const NvmlLibrary& lib = nvml_library();
  if (!lib.why_not.empty()) return make_error(ErrorCategory::unsupported_model, "clocks.nvml", lib.why_not);
  const Nvml& n = lib.api;
  NvmlDevice dev = nullptr;
  const NvmlReturn r = pci_bus_id.empty() ? n.by_index(0, &dev) : n.by_bus_id(pci_bus_id.c_str(), &dev);
  if (r != kNvmlSuccess)
    return make_error(ErrorCategory::unsupported_model, "clocks.nvml",
                      "NVML has no GPU " + (pci_bus_id.empty() ? std::string("0") : "at PCI bus id " + pci_bus_id) +
                          ": " + n.error_string(r));
  ClockSource src;
  unsigned limit = 0;
  if (n.max_clock(dev, kNvmlClockSm, &limit) == kNvmlSuccess) src.sm_mhz_limit = limit;
  std::array<char, 96> name{};
  src.device = n.name(dev, name.data(), static_cast<unsigned>(name.size())) == kNvmlSuccess ? name.data() : "GPU";
  if (!pci_bus_id.empty()) src.device += " (" + pci_bus_id + ")";
  src.read = [dev, &n]() -> std::optional<ClockSample> {
    ClockSample s;
    unsigned long long reasons = 0;
    if (n.clock(dev, kNvmlClockSm, &s.sm_mhz) != kNvmlSuccess || n.reasons(dev, &reasons) != kNvmlSuccess)
      return std::nullopt;
    s.reasons = reasons;
    if (n.power && n.power(dev, &s.power_mw) != kNvmlSuccess) s.power_mw = 0;
    return s;
  };
  return src;
}

ClockSampler::ClockSampler(ClockSource source, std::chrono::microseconds period)
    : source_(std::move(source)), period_(period) {}

ClockSampler::~ClockSampler() { (void)stop(); }

void ClockSampler::start() {
  if (running_.exchange(true)) return;
  samples_.clear();
  thread_ = std::thread([this] {
    auto next = std::chrono::steady_clock::now();
    while (running_.load(std::memory_order_relaxed)) {
      if (source_.read)
        if (auto s = source_.read()) samples_.push_back(*s);
      next += period_;
      std::this_thread::sleep_until(next);
    }
  });
}

ClockSummary ClockSampler::stop() {
  if (running_.exchange(false) && thread_.joinable()) thread_.join();
  return summarize_clocks(samples_, source_.sm_mhz_limit);
}

}  // namespace cosmos
