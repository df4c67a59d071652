// Decode launch tuning on the user's GPU (`cosmos-cli tune`). The quantized one-token products'
// launch knobs (rows per item, loads in flight, staging, ...; kernels/qgemv_tuning_spec.h) were
// chosen by engine A/Bs on H100s. Another GPU, with another bandwidth x latency product, may want
// others. The tuner times whole decode steps, as `cosmos-cli bench` does, for each one-knob variant
// the backend offers, and keeps only what wins again in interleaved confirmation rounds at every
// depth asked for:
//   1. screen: the automatic plan (A) and each candidate once at the first depth, A re-timed after
//      every few candidates so that a drifting clock does not look like a win;
//   2. confirm: the best screened candidates (at most one per product), each in `rounds` A/B pairs
//      at every depth; kept when its mean is ahead of A's by `margin` at the first depth and not
//      behind by more than `margin` at any other;
//   3. combine: the kept variants (one per product) together, confirmed the same way against A; if
//      that loses, the single best kept variant alone.
// The result is a spec for Backend::set_decode_tuning (empty: the automatic plan stays). The
// decisions are pure functions of the measurements (tests/unit/test_decode_tuner.cpp drives them
// with a fake measure); measure_decode() times a real backend.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "cosmos/backend.h"
#include "cosmos/error.h"

namespace cosmos {

struct DecodeTuneOptions {
  std::vector<int> depths = {0, 4096};  // context lengths the decode steps are timed at; the first screens
  int rounds = 3;                       // confirmation A/B pairs per depth
  double margin = 0.01;                 // a win is more than this fraction faster (0.01: 1%)
  int recheck_every = 6;                // screen: A is timed again after this many candidates
  int max_confirm = 5;                  // screen winners taken on to confirmation (best first)
  double budget_s = 0;                  // screen: no new candidate after this many seconds (0: no limit)
  // Called after each measurement with a line for people ("screen down/loads=4 @0: 1,612.4 us");
  // returning false stops the tuning (it then fails with "tuning.cancelled").
  std::function<bool(const std::string& line)> progress;
};

// One timing: microseconds per decode step of `spec` at context `depth`.
using DecodeMeasure = std::function<Result<double>(const std::string& spec, int depth)>;

struct DecodeTuneRow {
  std::string spec;     // the variant ("" for A)
  std::string stage;    // "screen", "confirm", "combine"
  int depth = 0;
  double us = 0;        // the variant's time (confirm / combine: mean over rounds)
  double base_us = 0;   // A's time it was compared with (the mean of A's nearest timings, or of its rounds)
  bool kept = false;    // confirm / combine: the variant passed
};

struct DecodeTuneResult {
  std::string spec;                 // what to set ("" when nothing beat A)
  std::vector<double> base_us;      // A per depth (the chosen spec's confirmation means; when nothing was
                                    // kept, the screen's A mean and one A timing at each other depth)
  std::vector<double> tuned_us;     // the chosen spec per depth (equal to base_us when spec is "")
  std::vector<DecodeTuneRow> rows;  // every measurement's summary, in order
  int measurements = 0;
  bool budget_hit = false;          // the screen stopped early (budget_s)
};

// Runs the three stages with `measure`. Rows summarize variants only (A's timings are in base_us and
// the progress lines). Errors: the first measurement that fails (its own code, with the spec and depth
// it was timing as context), "tuning.measurement" for a time that is not positive, "tuning.cancelled"
// when progress returns false, "tuning.options" for no depths, a negative depth, rounds < 1,
// recheck_every < 1, max_confirm < 0, or a negative or non-finite margin or budget.
Result<DecodeTuneResult> tune_decode(const std::vector<std::string>& candidates, const DecodeMeasure& measure,
                                     const DecodeTuneOptions& options);

// Times `steps` greedy decode steps of `backend` under `spec` at context `depth` (a new sequence of
// max(depth, 1) random prompt tokens, `warmup` untimed steps first, the sequence freed after):
// microseconds per step. The spec stays set afterwards. Errors: set_decode_tuning's, forward()'s (with
// the step as context), "tuning.context" when the free KV cache cannot hold the timing's tokens (the
// message says how many it needs), "tuning.options" for depth < 0, steps < 1 or warmup < 0.
Result<double> measure_decode(Backend& backend, const std::string& spec, int depth, int steps = 64, int warmup = 8);

}  // namespace cosmos
