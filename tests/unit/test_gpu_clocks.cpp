// cosmos/gpu_clocks.h: the clock summary over samples, the reason names, the sampler's thread with
// a fake source, and NVML's absence reported as an error (CI has no NVIDIA driver).
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <mutex>
#include <string>
#include <vector>

#include "cosmos/gpu_clocks.h"

namespace cosmos {
namespace {

namespace ce = clock_event;

struct SummaryRow {
  const char* name;
  std::vector<ClockSample> samples;
  unsigned limit;
  int n;
  unsigned min, max;
  double mean, power_w, cap, thermal, slowdown;
  const char* seen;
};

class SummarizeClocks : public testing::TestWithParam<SummaryRow> {};

TEST_P(SummarizeClocks, Row) {
  const SummaryRow& r = GetParam();
  const ClockSummary s = summarize_clocks(r.samples, r.limit);
  EXPECT_EQ(s.samples, r.n);
  EXPECT_EQ(s.sm_mhz_limit, r.limit);
  EXPECT_EQ(s.sm_mhz_min, r.min);
  EXPECT_EQ(s.sm_mhz_max, r.max);
  EXPECT_DOUBLE_EQ(s.sm_mhz_mean, r.mean);
  EXPECT_DOUBLE_EQ(s.power_w_mean, r.power_w);
  EXPECT_DOUBLE_EQ(s.power_cap_share, r.cap);
  EXPECT_DOUBLE_EQ(s.thermal_share, r.thermal);
  EXPECT_DOUBLE_EQ(s.slowdown_share, r.slowdown);
  EXPECT_EQ(s.reasons_seen, r.seen);
}

INSTANTIATE_TEST_SUITE_P(
    Rows, SummarizeClocks,
    testing::Values(
        SummaryRow{"empty", {}, 1980, 0, 0, 0, 0.0, 0.0, 0.0, 0.0, 0.0, ""},
        SummaryRow{"steady", {{1980, 0, 630000}, {1980, 0, 640000}}, 1980, 2, 1980, 1980, 1980.0, 635.0, 0.0, 0.0,
                   0.0, ""},
        // Session 62's H100 after a 4k prompt: the power cap lowers the clock, then lets go.
        SummaryRow{"power capped quarter",
                   {{1455, ce::sw_power_cap, 624000}, {1980, 0, 630000}, {1980, 0, 630000}, {1965, 0, 620000}},
                   1980, 4, 1455, 1980, 1845.0, 626.0, 0.25, 0.0, 0.25, "sw_power_cap"},
        // Idle, application clocks and sync boost are not slowdowns; power unreported is left out.
        SummaryRow{"not slowdowns",
                   {{345, ce::gpu_idle, 0}, {1600, ce::applications_clocks | ce::sync_boost, 0}},
                   0, 2, 345, 1600, 972.5, 0.0, 0.0, 0.0, 0.0, ""},
        SummaryRow{"thermal and brake",
                   {{1200, ce::hw_thermal, 700000}, {1300, ce::hw_power_brake | ce::sw_thermal, 0},
                    {1400, ce::hw_slowdown, 0}, {1500, 0, 0}},
                   1980, 4, 1200, 1500, 1350.0, 700.0, 0.25, 0.5, 0.75, "hw_slowdown, sw_thermal, hw_thermal, hw_power_brake"}),
    [](const testing::TestParamInfo<SummaryRow>& row) {
      std::string n = row.param.name;
      for (char& c : n)
        if (c == ' ') c = '_';
      return n;
    });

TEST(DescribeClocks, OneLineForPeople) {
  EXPECT_EQ(describe_clocks(ClockSummary{}), "SM clock: no samples");
  const std::vector<ClockSample> capped{
      {1455, ce::sw_power_cap, 624000}, {1980, 0, 630000}, {1980, 0, 630000}, {1965, 0, 620000}};
  EXPECT_EQ(describe_clocks(summarize_clocks(capped, 1980)),
            "SM clock 1455-1980 MHz (mean 1845, limit 1980), slowed in 25% of samples (sw_power_cap), 626 W");
  const std::vector<ClockSample> steady{{1980, 0, 0}, {1980, ce::gpu_idle, 0}};
  EXPECT_EQ(describe_clocks(summarize_clocks(steady, 0)), "SM clock 1980-1980 MHz (mean 1980), no slowdown");
}

TEST(ClockEventNames, NamesOnlyTheSlowdownBitsInOrder) {
  EXPECT_EQ(clock_event_names(0), "");
  EXPECT_EQ(clock_event_names(ce::gpu_idle | ce::display_clocks), "");
  EXPECT_EQ(clock_event_names(ce::sw_power_cap), "sw_power_cap");
  EXPECT_EQ(clock_event_names(ce::hw_thermal | ce::sw_power_cap), "sw_power_cap, hw_thermal");
  EXPECT_EQ(clock_event_names(~std::uint64_t{0}), "sw_power_cap, hw_slowdown, sw_thermal, hw_thermal, hw_power_brake");
}

// A source that counts its reads and wakes the test after `wanted` of them; every third read fails
// (a failed reading is skipped, not summed as zeros).
struct FakeSource {
  std::mutex mu;
  std::condition_variable cv;
  int reads = 0, wanted = 0;
  ClockSource source() {
    ClockSource s;
    s.sm_mhz_limit = 2000;
    s.device = "fake";
    s.read = [this]() -> std::optional<ClockSample> {
      std::lock_guard<std::mutex> lock(mu);
      const int i = ++reads;
      if (i >= wanted) cv.notify_all();
      if (i % 3 == 0) return std::nullopt;
      return ClockSample{i % 2 ? 1000u : 2000u, i % 2 ? ce::sw_power_cap : 0u, 0};
    };
    return s;
  }
  bool wait_for(int n) {
    std::unique_lock<std::mutex> lock(mu);
    wanted = n;
    return cv.wait_for(lock, std::chrono::seconds(20), [&] { return reads >= n; });
  }
};

TEST(ClockSampler, ReadsOnItsThreadUntilStoppedAndSumsUp) {
  FakeSource fake;
  ClockSampler sampler(fake.source(), std::chrono::microseconds(100));
  EXPECT_EQ(sampler.stop().samples, 0);  // never started
  sampler.start();
  ASSERT_TRUE(fake.wait_for(12));
  const ClockSummary s = sampler.stop();
  int reads = 0;
  {
    std::lock_guard<std::mutex> lock(fake.mu);
    reads = fake.reads;
  }
  // Reads 1..reads, less every third: the odd ones at 1,000 MHz capped, the even ones at 2,000.
  int n = 0, capped = 0;
  double sum = 0;
  for (int i = 1; i <= reads; ++i) {
    if (i % 3 == 0) continue;
    ++n;
    capped += i % 2;
    sum += i % 2 ? 1000 : 2000;
  }
  EXPECT_EQ(s.samples, n);
  EXPECT_EQ(s.sm_mhz_limit, 2000u);
  EXPECT_EQ(s.sm_mhz_min, 1000u);
  EXPECT_EQ(s.sm_mhz_max, 2000u);
  EXPECT_DOUBLE_EQ(s.sm_mhz_mean, sum / n);
  EXPECT_DOUBLE_EQ(s.power_cap_share, static_cast<double>(capped) / n);
  EXPECT_EQ(s.reasons_seen, "sw_power_cap");

  // Stopped: no more reads; a second start clears the first run's samples.
  EXPECT_EQ(sampler.stop().samples, n);
  sampler.start();
  ASSERT_TRUE(fake.wait_for(reads + 3));
  const int second = sampler.stop().samples;
  std::lock_guard<std::mutex> lock(fake.mu);
  int expected = 0;
  for (int i = reads + 1; i <= fake.reads; ++i) expected += i % 3 != 0;
  EXPECT_EQ(second, expected);
}

TEST(NvmlClockSource, OpensOrSaysWhy) {
  auto src = open_nvml_clock_source("");
  if (src.ok()) {  // a machine with an NVIDIA driver and a GPU
    ASSERT_TRUE(static_cast<bool>(src->read));
    EXPECT_FALSE(src->device.empty());
    const auto s = src->read();
    ASSERT_TRUE(s.has_value());
    EXPECT_GT(s->sm_mhz, 0u);
  } else {
    EXPECT_EQ(src.error().code, "clocks.nvml");
    EXPECT_EQ(src.error().category, ErrorCategory::unsupported_model);
    EXPECT_NE(src.error().message.find("NVML"), std::string::npos) << src.error().message;
  }
  // A bus id no GPU has is refused by name (or NVML is absent altogether).
  auto none = open_nvml_clock_source("ffff:ff:1f.7");
  ASSERT_FALSE(none.ok());
  EXPECT_EQ(none.error().code, "clocks.nvml");
}

}  // namespace
}  // namespace cosmos
