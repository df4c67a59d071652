// Decode launch tuning (cosmos/decode_tuner.h): screen, confirm, combine. Decisions depend only on
// the measurements, so tests drive them with a fake measure; measure_decode() times a real backend.
#include "cosmos/decode_tuner.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <random>
#include <set>
#include <utility>

namespace cosmos {
namespace {

using Clock = std::chrono::steady_clock;

double mean(const std::vector<double>& v) {
  double s = 0;
  for (double x : v) s += x;
  return v.empty() ? 0.0 : s / static_cast<double>(v.size());
}

// The fraction of A's time a variant saves (0.02: 2% faster; negative: slower).
double gain(double base_us, double us) { return 1.0 - us / base_us; }

// "3584x18944/loads=4" -> "3584x18944": variants of one product change the same kernel, so at most
// one of them can be in force and only the best of them is worth confirming.
std::string product_of(const std::string& spec) { return spec.substr(0, spec.find('/')); }

std::string label(const std::string& spec) { return spec.empty() ? "A" : spec; }

// 1612.44 -> "1,612.4" (the progress lines are read by people). Built by appending: GCC 12 warns
// (-Wrestrict, a false positive) on std::string::insert here.
std::string format_us(double us) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.1f", us < 0 ? -us : us);
  const std::string digits = buf;
  const std::size_t whole = digits.find('.');
  std::string s = us < 0 ? "-" : "";
  for (std::size_t i = 0; i < digits.size(); ++i) {
    if (i > 0 && i < whole && (whole - i) % 3 == 0) s += ',';
    s += digits[i];
  }
  return s;
}

Status check(const DecodeTuneOptions& o) {
  auto bad = [](const std::string& what) { return make_error(ErrorCategory::bad_input, "tuning.options", what); };
  if (o.depths.empty()) return bad("decode tuning needs at least one depth");
  for (int d : o.depths)
    if (d < 0) return bad("decode tuning depth " + std::to_string(d) + " is negative");
  if (o.rounds < 1) return bad("decode tuning needs rounds >= 1 (got " + std::to_string(o.rounds) + ")");
  if (o.recheck_every < 1) return bad("decode tuning needs recheck_every >= 1");
  if (o.max_confirm < 0) return bad("decode tuning needs max_confirm >= 0");
  if (!(o.margin >= 0) || !std::isfinite(o.margin)) return bad("decode tuning needs a finite margin >= 0");
  if (!(o.budget_s >= 0)) return bad("decode tuning needs budget_s >= 0");
  return ok_status();
}

// Every call to `measure` goes through here: it is counted, reported, and its failure named.
class Timer {
 public:
  Timer(const DecodeMeasure& measure, const DecodeTuneOptions& options, DecodeTuneResult& result)
      : measure_(measure), options_(options), result_(result) {}

  Result<double> time(const std::string& spec, int depth, const std::string& stage) {
    Result<double> us = measure_(spec, depth);
    ++result_.measurements;
    const std::string what = "timing " + (spec.empty() ? std::string("the automatic plan") : "\"" + spec + "\"") +
                             " at depth " + std::to_string(depth);
    if (!us) return us.error().with_context(what);
    // A zero, negative or NaN time would make every comparison below meaningless.
    if (!(*us > 0) || !std::isfinite(*us))
      return make_error(ErrorCategory::internal, "tuning.measurement", what + ": not a positive time");
    if (options_.progress &&
        !options_.progress(stage + " " + label(spec) + " @" + std::to_string(depth) + ": " + format_us(*us) + " us"))
      return make_error(ErrorCategory::cancelled, "tuning.cancelled", "decode tuning was cancelled");
    return us;
  }

 private:
  const DecodeMeasure& measure_;
  const DecodeTuneOptions& options_;
  DecodeTuneResult& result_;
};

struct Confirmation {
  std::vector<double> base_us, us;  // per depth: A's mean, the variant's mean
  bool kept = false;
};

// `rounds` A/B pairs per depth; the order alternates (A B, B A, ...) so that a clock drifting
// during the pairs adds as much to A as to B. Kept: ahead by more than `margin` at the first depth,
// and behind by no more than `margin` at any other (a variant that speeds up short contexts but
// slows long ones is not worth it).
Result<Confirmation> confirm(Timer& timer, const std::string& spec, const std::string& stage,
                             const DecodeTuneOptions& o, std::vector<DecodeTuneRow>& rows) {
  Confirmation c;
  for (int depth : o.depths) {
    std::vector<double> a, b;
    for (int r = 0; r < o.rounds; ++r) {
      for (int k = 0; k < 2; ++k) {
        const bool is_a = (k == 0) == (r % 2 == 0);
        auto t = timer.time(is_a ? std::string() : spec, depth, stage);
        if (!t) return t.error();
        (is_a ? a : b).push_back(*t);
      }
    }
    c.base_us.push_back(mean(a));
    c.us.push_back(mean(b));
  }
  c.kept = gain(c.base_us[0], c.us[0]) > o.margin;
  for (std::size_t i = 1; i < c.us.size(); ++i) c.kept = c.kept && c.us[i] <= c.base_us[i] * (1.0 + o.margin);
  for (std::size_t i = 0; i < c.us.size(); ++i) rows.push_back({spec, stage, o.depths[i], c.us[i], c.base_us[i], c.kept});
  return c;
}

}  // namespace

Result<DecodeTuneResult> tune_decode(const std::vector<std::string>& candidates, const DecodeMeasure& measure,
                                     const DecodeTuneOptions& options) {
  if (auto st = check(options); !st) return st.error();
  DecodeTuneResult result;
  Timer timer(measure, options, result);
  const int d0 = options.depths[0];
  const auto start = Clock::now();

  // 1. Screen: each candidate once at the first depth, against the mean of the A timings just
  // before and just after its group, so that a clock drifting over the screen (warming, power
  // caps) moves A and the candidates alike.
  struct Winner {
    std::size_t index;
    double gain;
  };
  std::vector<Winner> winners;
  std::vector<double> a_screen;
  std::vector<std::pair<std::size_t, double>> group;  // candidate index, time
  auto time_a = [&]() -> Status {
    auto t = timer.time("", d0, "screen");
    if (!t) return t.error();
    a_screen.push_back(*t);
    return ok_status();
  };
  auto close_group = [&]() -> Status {
    if (auto st = time_a(); !st) return st;
    const double base = (a_screen[a_screen.size() - 2] + a_screen.back()) / 2;
    for (const auto& [i, us] : group) {
      result.rows.push_back({candidates[i], "screen", d0, us, base, false});
      if (gain(base, us) > options.margin) winners.push_back({i, gain(base, us)});
    }
    group.clear();
    return ok_status();
  };
  if (auto st = time_a(); !st) return st.error();
  for (std::size_t i = 0; i < candidates.size(); ++i) {
    const std::chrono::duration<double> elapsed = Clock::now() - start;
    if (options.budget_s > 0 && elapsed.count() >= options.budget_s) {
      result.budget_hit = true;
      break;
    }
    auto t = timer.time(candidates[i], d0, "screen");
    if (!t) return t.error();
    group.emplace_back(i, *t);
    if (static_cast<int>(group.size()) == options.recheck_every)
      if (auto st = close_group(); !st) return st.error();
  }
  if (!group.empty())  // the closing A (also when the budget stopped the screen)
    if (auto st = close_group(); !st) return st.error();

  // 2. Confirm the best screen winners (stable: ties keep the candidates' order), one per product.
  std::stable_sort(winners.begin(), winners.end(), [](const Winner& x, const Winner& y) { return x.gain > y.gain; });
  std::set<std::string> products;
  struct Kept {
    std::size_t index;
    Confirmation c;
  };
  std::vector<Kept> kept;
  int confirmed = 0;
  for (const Winner& w : winners) {
    if (confirmed >= options.max_confirm) break;
    if (!products.insert(product_of(candidates[w.index])).second) continue;
    ++confirmed;
    auto c = confirm(timer, candidates[w.index], "confirm", options, result.rows);
    if (!c) return c.error();
    if (c->kept) kept.push_back({w.index, std::move(*c)});
  }

  // Nothing beat A: report A per depth (the screen's mean at the first, one timing at the others).
  if (kept.empty()) {
    result.base_us.push_back(mean(a_screen));
    for (std::size_t i = 1; i < options.depths.size(); ++i) {
      auto t = timer.time("", options.depths[i], "baseline");
      if (!t) return t.error();
      result.base_us.push_back(*t);
    }
    result.tuned_us = result.base_us;
    return result;
  }

  // 3. Combine: the kept variants change different products, so their gains may add; the
  // combination is confirmed against A like a single variant. If it loses, the best single stays.
  const Kept* best = &kept[0];
  for (const Kept& k : kept)
    if (gain(k.c.base_us[0], k.c.us[0]) > gain(best->c.base_us[0], best->c.us[0])) best = &k;
  result.spec = candidates[best->index];
  result.base_us = best->c.base_us;
  result.tuned_us = best->c.us;
  if (kept.size() >= 2) {
    // Joined in the backend's candidate order, so that the same choice always reads the same.
    std::vector<std::size_t> order;
    for (const Kept& k : kept) order.push_back(k.index);
    std::sort(order.begin(), order.end());
    std::string combo;
    for (std::size_t i : order) combo += (combo.empty() ? "" : ";") + candidates[i];
    auto c = confirm(timer, combo, "combine", options, result.rows);
    if (!c) return c.error();
    if (c->kept) {
      result.spec = combo;
      result.base_us = c->base_us;
      result.tuned_us = c->us;
    }
  }
  return result;
}

Result<double> measure_decode(Backend& backend, const std::string& spec, int depth, int steps, int warmup) {
  if (depth < 0 || steps < 1 || warmup < 0)
    return make_error(ErrorCategory::bad_input, "tuning.options",
                      "measure_decode needs depth >= 0, steps >= 1 and warmup >= 0");
  if (auto st = backend.set_decode_tuning(spec); !st) return st.error();

  // The sequence ends holding the prompt, the warmup steps and the timed steps. Checked up front:
  // running out of blocks mid-way would waste the prefill and say less about why.
  const int prompt = std::max(depth, 1);
  KvCache& kv = backend.kv_cache();
  const std::int64_t needed = static_cast<std::int64_t>(prompt) + warmup + steps;
  const std::int64_t free_tokens = static_cast<std::int64_t>(kv.free_blocks()) * kv.shape().block_size;
  if (needed > free_tokens)
    return make_error(ErrorCategory::bad_input, "tuning.context",
                      "timing decode at depth " + std::to_string(depth) + " needs " + std::to_string(needed) +
                          " tokens of KV cache (depth + " + std::to_string(warmup) + " warmup + " +
                          std::to_string(steps) + " timed steps), but only " + std::to_string(free_tokens) +
                          " are free (of " + std::to_string(kv.shape().tokens()) + "); load with a larger context");
  const int vocab = backend.config().vocab_size;
  if (vocab <= 0) return make_error(ErrorCategory::internal, "tuning.vocab", "the model reports no vocabulary");

  // Freed on every path, errors included: a tuning run must leave the cache as it found it.
  struct SequenceGuard {
    KvCache& kv;
    SeqId seq;
    ~SequenceGuard() { kv.free_sequence(seq); }
  } guard{kv, kv.create_sequence()};

  // Random ids (fixed seed: every variant sees the same prompt) with greedy next tokens, as
  // `cosmos-cli bench` runs decode: sampled on the device where the backend can, so only the id
  // comes back as in the app; else the argmax of the logits row on the host.
  std::mt19937 rng(7);
  SequenceInput in;
  in.seq = guard.seq;
  in.tokens.resize(static_cast<std::size_t>(prompt));
  for (auto& id : in.tokens) id = static_cast<TokenId>(rng() % static_cast<std::uint32_t>(vocab));
  SamplingParams greedy;
  greedy.temperature = 0.0f;
  const bool on_device = backend.samples_on_device();
  ForwardOutput out;
  std::uint64_t draw = 0;
  auto step = [&](const std::string& what) -> Status {
    if (on_device) {
      in.sampling = &greedy;
      in.sample_step = draw;
    }
    ++draw;
    if (auto st = backend.forward(std::span<const SequenceInput>(&in, 1), out); !st)
      return st.error().with_context(what + " at depth " + std::to_string(depth));
    TokenId next = 0;
    if (!out.sampled.empty()) {
      next = out.sampled[0];
    } else {
      if (out.vocab <= 0 || out.logits.size() < static_cast<std::size_t>(out.vocab))
        return make_error(ErrorCategory::internal, "tuning.logits", "the backend returned no logits row");
      const auto row = out.row(0);
      next = static_cast<TokenId>(std::max_element(row.begin(), row.end()) - row.begin());
    }
    in.tokens.assign(1, next);
    return ok_status();
  };

  if (auto st = step("prefill of " + std::to_string(prompt) + " tokens"); !st) return st.error();
  for (int i = 0; i < warmup; ++i)
    if (auto st = step("warmup decode step"); !st) return st.error();
  const auto t0 = Clock::now();
  for (int i = 0; i < steps; ++i)
    if (auto st = step("timed decode step"); !st) return st.error();
  const std::chrono::duration<double, std::micro> elapsed = Clock::now() - t0;
  return elapsed.count() / steps;
}

}  // namespace cosmos
