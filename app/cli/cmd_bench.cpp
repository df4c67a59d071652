// cosmos-cli bench: decode speed at several context depths, prefill speed and time to first
// token per prompt length, load time, memory by part, and achieved bandwidth against the measured
// copy bandwidth of the device that runs it (the GPU's, or host memory's for the CPU backend).
// Medians over --reps. Reports; never fails on speed.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <iostream>
#include <new>
#include <optional>
#include <random>
#include <sstream>
#include <thread>
#include <vector>

#include <unistd.h>

#include <nlohmann/json.hpp>

#include "bench_backend.h"
#include "bench_batch.h"
#include "cli_common.h"
#include "cosmos/cuda_backend.h"
#include "cosmos/gpu_clocks.h"
#include "cosmos/model_loader.h"
#include "cosmos/memory_estimate.h"
#include "cosmos/model_tensors.h"
#include "cosmos/test_model.h"
#include "cosmos/tune_cache.h"

namespace cosmos::cli {
namespace {

using Clock = std::chrono::steady_clock;

nlohmann::json clocks_json(const ClockSummary& c) {
  if (c.samples == 0) return nlohmann::json();
  return {{"samples", c.samples},           {"sm_mhz_min", c.sm_mhz_min},
          {"sm_mhz_mean", c.sm_mhz_mean},   {"sm_mhz_max", c.sm_mhz_max},
          {"sm_mhz_limit", c.sm_mhz_limit}, {"power_w_mean", c.power_w_mean},
          {"power_cap_share", c.power_cap_share}, {"thermal_share", c.thermal_share},
          {"slowdown_share", c.slowdown_share},   {"slowdown_reasons", c.reasons_seen}};
}

struct BenchArgs {
  std::string model;
  std::string random;
  std::string device = "auto";
  std::string precision = "bf16";
  KvFormat kv_cache = KvFormat::full;
  std::string prompt_lens = "128,2048";
  std::string depths = "0,4096";
  int gen = 256;
  int settle_ms = 0;  // --settle-ms: idle this long after each depth's prompt before timing (diagnosis)
  int reps = 5;
  int threads = 0;
  float repetition_penalty = 1.0f;  // decoding with this repetition penalty (the app's default is 1.05)
  float temperature = 0.0f;         // 0: greedy; the app's default is 0.6 with top_p 0.95
  float top_p = 1.0f;
  std::string batch;     // batch sizes: decode throughput of many sequences at once (bench_batch.h)
  int batch_prompt = 128;
  int batch_gen = 128;
  bool json = false;
  bool no_clocks = false;  // --no-clocks: do not sample the GPU's clock (NVML) while timing
};

Result<std::vector<int>> parse_list(const std::string& s, const char* what) {
  std::vector<int> out;
  std::stringstream ss(s);
  std::string item;
  while (std::getline(ss, item, ',')) {
    try {
      out.push_back(std::stoi(item));
    } catch (const std::exception&) {
      return make_error(ErrorCategory::bad_input, "cli.usage", std::string(what) + ": \"" + item + "\" is not a number");
    }
    if (out.back() < 0) return make_error(ErrorCategory::bad_input, "cli.usage", std::string(what) + " must be >= 0");
  }
  return out;
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0 : v[v.size() / 2];
}

double seconds(Clock::time_point a, Clock::time_point b) { return std::chrono::duration<double>(b - a).count(); }

// Host memory's copy bandwidth in GB/s (bytes read + written, as gpu_copy_bandwidth_gbps counts):
// 256 MiB copied with memcpy split over `threads` threads (0: one per core), median of 5 after a
// warm-up pass that faults the pages in; 0 when the buffers cannot be allocated.
double host_copy_bandwidth_gbps(int threads) {
  constexpr std::size_t kBytes = std::size_t{256} << 20;
  std::vector<char> src, dst;
  try {
    src.assign(kBytes, 1);
    dst.assign(kBytes, 0);
  } catch (const std::bad_alloc&) {
    return 0.0;
  }
  const int n = threads > 0 ? threads : static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  auto copy_once = [&] {
    std::vector<std::thread> pool;
    const std::size_t chunk = kBytes / static_cast<std::size_t>(n);
    for (int i = 0; i < n; ++i)
      pool.emplace_back([&, i] {
        const std::size_t off = static_cast<std::size_t>(i) * chunk, len = i == n - 1 ? kBytes - off : chunk;
        std::memcpy(dst.data() + off, src.data() + off, len);
      });
    for (auto& t : pool) t.join();
  };
  copy_once();
  std::vector<double> gbps;
  for (int r = 0; r < 5; ++r) {
    const auto t0 = Clock::now();
    copy_once();
    gbps.push_back(2.0 * static_cast<double>(kBytes) / seconds(t0, Clock::now()) / 1e9);
  }
  return median(gbps);
}

TokenId argmax(std::span<const float> row) {
  return static_cast<TokenId>(std::max_element(row.begin(), row.end()) - row.begin());
}

int run_bench(const BenchArgs& a) {
  namespace fs = std::filesystem;
  if (a.model.empty() == a.random.empty())
    return report(make_error(ErrorCategory::bad_input, "cli.usage", "give exactly one of --model DIR or --random PRESET"));
  auto prompt_lens = parse_list(a.prompt_lens, "--prompt-lens");
  if (!prompt_lens) return report(prompt_lens.error());
  auto depths = parse_list(a.depths, "--depth");
  if (!depths) return report(depths.error());
  BatchBenchOptions batch;
  if (!a.batch.empty()) {
    auto sizes = parse_list(a.batch, "--batch");
    if (!sizes) return report(sizes.error());
    batch.sizes = *sizes;
    batch.prompt = a.batch_prompt;
    batch.gen = a.batch_gen;
    batch.reps = std::min(a.reps, 3);
    batch.sampling.temperature = a.temperature;
    batch.sampling.top_p = a.top_p;
    batch.sampling.repetition_penalty = a.repetition_penalty;
    batch.sampling.seed = 7;
    // --batch measures only the batches unless lengths and depths are asked for too.
    if (a.prompt_lens == BenchArgs{}.prompt_lens) prompt_lens->clear();
    if (a.depths == BenchArgs{}.depths) depths->clear();
  }
  // The KV cache holds the longest prompt or the deepest context plus the generated tokens (or
  // every sequence of the largest batch).
  int max_len = 1;
  for (int l : *prompt_lens) max_len = std::max(max_len, l + 1);
  for (int d : *depths) max_len = std::max(max_len, d + a.gen + 1);
  if (!batch.sizes.empty()) max_len = std::max(max_len, batch_bench_context(batch, KvCacheShape{}.block_size));
  std::optional<Precision> precision = precision_from_string(a.precision);
  if (a.precision == "auto") {
    // The model's config: the folder's, or the random preset's.
    auto config = a.random.empty() ? load_model_config(fs::path(a.model) / "config.json") : preset_config(a.random);
    if (!config) return report(config.error());
    std::string note;
    auto picked = resolve_auto_precision(*config, *device_from_string(a.device), max_len + 16, note, a.kv_cache);
    if (!picked) return report(picked.error());
    std::cerr << note << "\n";
    precision = *picked;
  }
  if (!precision) return report(make_error(ErrorCategory::bad_input, "cli.usage", "unknown precision " + a.precision));

  BackendOptions bo;
  bo.context_tokens = max_len + 16;
  bo.precision = *precision;
  bo.kv_format = a.kv_cache;
  bo.threads = a.threads;
  const Device device = *device_from_string(a.device);
  // The GEMM tuner's choices and the decode tuning saved for this GPU (`cosmos-cli tune`), as the
  // app and generate load them.
  bo.tune_cache_dir = default_tune_cache_dir();

  const auto t_load = Clock::now();
  auto loaded = load_bench_backend(a.model, a.random, device, bo, "bench");
  if (!loaded) return report(loaded.error());
  const std::string device_note = (*loaded)->device_note;
  const double load_s = seconds(t_load, Clock::now());
  Backend& b = *(*loaded)->backend;
  const ModelConfig& c = b.config();
  if (!device_note.empty()) std::cerr << device_note << "\n";

  // Bytes a decode step reads: every text-model matrix once, in the loaded precision's format
  // (quantized values and scales for the linear weights and lm_head; embedding: one bf16 row).
  std::uint64_t step_bytes = 0;
  for (const auto& t : text_model_tensors(c)) {
    switch (t.role) {
      case TensorRole::embedding: step_bytes += static_cast<std::uint64_t>(c.hidden_size) * 2; break;
      case TensorRole::attn_weight:
      case TensorRole::mlp_weight:
      case TensorRole::lm_head: step_bytes += linear_weight_bytes(t.shape[0], t.shape[1], b.precision()); break;
      default: step_bytes += t.numel() * 2; break;
    }
  }
  const double copy_gbps = b.name() == "cuda" ? gpu_copy_bandwidth_gbps() : host_copy_bandwidth_gbps(a.threads);
  // Bytes of keys and values stored per token of context (every layer, K and V, in the cache's own
  // element type: bf16 on the GPU, fp32 on the CPU); a decode step reads them for its whole context.
  const auto kv_tokens = b.kv_cache().shape().tokens();
  const double kv_per_token = kv_tokens > 0 ? static_cast<double>(b.memory().kv_cache) / static_cast<double>(kv_tokens) : 0.0;

  std::mt19937 rng(7);
  auto random_ids = [&](int n) {
    std::vector<TokenId> ids(n);
    for (auto& id : ids) id = static_cast<TokenId>(rng() % 151643);
    return ids;
  };
  // The next token, sampled on the device where the backend can (only the id comes back, as in
  // the app), else from the logits on the host: greedy by default; --temperature / --top-p draw
  // (seeded, one draw counter per step, as a Session does) and --repetition-penalty penalizes the
  // prompt and the tokens so far (`history`).
  SamplingParams sampling;
  sampling.temperature = a.temperature;
  sampling.top_p = a.top_p;
  sampling.repetition_penalty = a.repetition_penalty;
  sampling.seed = 7;
  const bool penalty = a.repetition_penalty != 1.0f;
  std::vector<TokenId> history;
  std::uint64_t draw = 0;
  auto forward = [&](SeqId seq, std::vector<TokenId> ids, ForwardOutput& out) -> Status {
    SequenceInput in;
    in.seq = seq;
    in.tokens = std::move(ids);
    if (penalty) history.insert(history.end(), in.tokens.begin(), in.tokens.end());
    if (b.samples_on_device()) {
      in.sampling = &sampling;
      in.history = history;
      in.sample_step = draw;
    }
    return b.forward(std::span<const SequenceInput>(&in, 1), out);
  };
  std::vector<float> row_copy;
  Sampler host_sampler(sampling);
  auto next_token = [&](const ForwardOutput& out) {
    ++draw;
    if (!out.sampled.empty()) return out.sampled[0];
    if (!penalty && sampling.greedy()) return argmax(out.row(0));
    const auto row = out.row(0);
    row_copy.assign(row.begin(), row.end());
    return host_sampler.sample(row_copy, history);
  };

  nlohmann::json prefill = nlohmann::json::array(), decode = nlohmann::json::array();
  ForwardOutput out;
  // The GPU's SM clock and its slowdown reasons while the decode steps are timed (NVML), so that a
  // measurement the driver slowed (the power cap after a long prompt) says so.
  std::optional<ClockSampler> clocks;
  std::string clocks_note;
  std::vector<ClockSummary> clock_summaries;  // per depth, when sampled
  if (b.name() == "cuda" && !a.no_clocks) {
    auto src = open_nvml_clock_source(gpu_pci_bus_id());
    if (src) clocks.emplace(std::move(*src));
    else clocks_note = src.error().message;
  }
  for (int len : *prompt_lens) {
    if (len < 1) continue;
    std::vector<double> tps, ttft;
    for (int r = 0; r < a.reps; ++r) {
      const SeqId seq = b.kv_cache().create_sequence();
      history.clear();
      const auto ids = random_ids(len);
      const auto t0 = Clock::now();
      if (auto st = forward(seq, ids, out); !st) return report(st.error());
      const auto t1 = Clock::now();
      (void)next_token(out);
      const auto t2 = Clock::now();
      b.kv_cache().free_sequence(seq);
      tps.push_back(len / seconds(t0, t1));
      ttft.push_back(seconds(t0, t2));
    }
    prefill.push_back({{"prompt_tokens", len}, {"tok_per_s", median(tps)}, {"ttft_s", median(ttft)}});
  }
  for (int depth : *depths) {
    std::vector<double> tps;
    int ahead = 0;  // steps the backend had submitted before they were asked for (CUDA)
    std::vector<ClockSample> clock_samples;  // over the timed steps of every rep
    for (int r = 0; r < a.reps; ++r) {
      const SeqId seq = b.kv_cache().create_sequence();
      history.clear();
      if (auto st = forward(seq, random_ids(std::max(depth, 1)), out); !st) return report(st.error());
      TokenId next = next_token(out);
      if (a.settle_ms > 0) {
        std::this_thread::sleep_for(std::chrono::milliseconds(a.settle_ms));
        // A step the GPU ran ahead during the pause is done by now: take it untimed, so that the
        // timed steps start as they do without a pause (the next one just submitted).
        if (auto st = forward(seq, {next}, out); !st) return report(st.error());
        next = next_token(out);
      }
      if (clocks) clocks->start();
      const auto t0 = Clock::now();
      for (int g = 0; g < a.gen; ++g) {
        if (auto st = forward(seq, {next}, out); !st) return report(st.error());
        next = next_token(out);
        ahead += out.ran_ahead ? 1 : 0;
      }
      tps.push_back(a.gen / seconds(t0, Clock::now()));
      if (clocks) {
        (void)clocks->stop();
        clock_samples.insert(clock_samples.end(), clocks->samples().begin(), clocks->samples().end());
      }
      b.kv_cache().free_sequence(seq);
    }
    const double t = median(tps);
    const double gbps = t * static_cast<double>(step_bytes) / 1e9;
    // The timed steps attend over max(depth, 1) + 1 ... max(depth, 1) + gen tokens.
    // (--settle-ms: one untimed step comes first.)
    const double kv_step = kv_per_token * (std::max(depth, 1) + (a.settle_ms > 0 ? 1 : 0) + (a.gen + 1) / 2.0);
    const double kv_gbps = t * kv_step / 1e9;
    if (clocks) clock_summaries.push_back(summarize_clocks(clock_samples, clocks->source().sm_mhz_limit));
    decode.push_back({{"depth", depth}, {"tok_per_s", t}, {"weight_gb_per_s", gbps},
                      {"steps_ran_ahead", static_cast<double>(ahead) / std::max(1, a.gen * a.reps)},
                      {"pct_of_copy", copy_gbps > 0 ? 100.0 * gbps / copy_gbps : 0.0},
                      {"kv_bytes_per_step", kv_step},
                      {"kv_gb_per_s", kv_gbps},
                      {"pct_of_copy_with_kv", copy_gbps > 0 ? 100.0 * (gbps + kv_gbps) / copy_gbps : 0.0},
                      // The speed this depth would keep against the first depth measured if every step
                      // ran at the same bandwidth: the bytes alone's bound on the ratio of the two.
                      {"bytes_bound_vs_first", 0.0},
                      {"speed_vs_first", 0.0},
                      {"clocks", clocks ? clocks_json(clock_summaries.back()) : nlohmann::json()}});
  }
  for (auto& d : decode) {
    const double first_bytes = static_cast<double>(step_bytes) + decode.front()["kv_bytes_per_step"].get<double>();
    d["bytes_bound_vs_first"] = first_bytes / (static_cast<double>(step_bytes) + d["kv_bytes_per_step"].get<double>());
    d["speed_vs_first"] = d["tok_per_s"].get<double>() / decode.front()["tok_per_s"].get<double>();
  }
  nlohmann::json batches = nlohmann::json::array();
  if (!batch.sizes.empty()) {
    auto rows = run_batch_bench(b, batch, rng);
    if (!rows) return report(rows.error());
    batches = std::move(*rows);
  }
  const BackendMemory m = b.memory();
  const nlohmann::json result = {
      {"model", a.random.empty() ? a.model : "random " + a.random},
      {"device", b.device_name()},
      {"backend", b.name()},
      {"precision", to_string(b.precision())},
      {"kv_cache", to_string(b.kv_format())},
      {"decode_tuning", b.decode_tuning()},
      {"load_s", load_s},
      {"copy_gb_per_s", copy_gbps},
      {"clock_source", clocks ? clocks->source().device : std::string()},
      {"clocks_unavailable", clocks_note},
      {"bytes_per_decode_step", step_bytes},
      {"reps", a.reps},
      {"gen_tokens", a.gen},
      {"settle_ms", a.settle_ms},
      {"repetition_penalty", a.repetition_penalty},
      {"temperature", a.temperature},
      {"top_p", a.top_p},
      {"prefill", prefill},
      {"decode", decode},
      {"batch", batches},
      {"batch_prompt_tokens", batch.prompt},
      {"memory", {{"weights", m.weights}, {"kv_cache", m.kv_cache}, {"workspace", m.workspace}, {"host", m.host}, {"on_gpu", m.on_gpu}}}};
  if (a.json) {
    std::cout << result.dump(2) << "\n";
    return kExitOk;
  }
  std::printf("%s on %s (%s, %s, KV cache %s), load %.2f s, copy bandwidth %.0f GB/s\n",
              result["model"].get<std::string>().c_str(), b.device_name().c_str(), std::string(b.name()).c_str(),
              std::string(to_string(b.precision())).c_str(), std::string(to_string(b.kv_format())).c_str(), load_s,
              copy_gbps);
  if (!b.decode_tuning().empty()) std::printf("decode tuning (cosmos-cli tune): %s\n", b.decode_tuning().c_str());
  if (sampling.greedy())
    std::printf("decoding: greedy, repetition penalty %.2f\n", a.repetition_penalty);
  else
    std::printf("decoding: drawn at temperature %.2f, top-p %.2f, repetition penalty %.2f\n", a.temperature, a.top_p,
                a.repetition_penalty);
  for (const auto& p : prefill)
    std::printf("prefill %5d tokens: %9.1f tok/s, time to first token %.3f s\n", p["prompt_tokens"].get<int>(),
                p["tok_per_s"].get<double>(), p["ttft_s"].get<double>());
  for (std::size_t i = 0; i < decode.size(); ++i) {
    const auto& d = decode[i];
    std::printf("decode at depth %5d: %7.1f tok/s, %6.0f GB/s of weights + %.0f of K/V (%.1f%% of copy), %.0f%% of steps run ahead\n",
                d["depth"].get<int>(), d["tok_per_s"].get<double>(), d["weight_gb_per_s"].get<double>(),
                d["kv_gb_per_s"].get<double>(), d["pct_of_copy_with_kv"].get<double>(),
                100.0 * d["steps_ran_ahead"].get<double>());
    if (i > 0)
      std::printf("  against depth %d: %.1f%% of its speed; the bytes alone allow %.1f%%\n", decode.front()["depth"].get<int>(),
                  100.0 * d["speed_vs_first"].get<double>(), 100.0 * d["bytes_bound_vs_first"].get<double>());
    if (i < clock_summaries.size()) std::printf("  %s\n", describe_clocks(clock_summaries[i]).c_str());
  }
  if (!clocks_note.empty()) std::printf("SM clock not sampled: %s\n", clocks_note.c_str());
  double single = 0;
  for (const auto& r : batches)
    if (r["batch"].get<int>() == 1) single = r["per_stream_tok_per_s"].get<double>();
  if (!batches.empty())
    std::printf("batched decode: %d-token prompts, %d steps timed (context %d at the end)\n", batch.prompt, batch.gen,
                batch.prompt + 2 + batch.gen);
  for (const auto& r : batches) {
    std::printf("batch %4d: %9.1f tok/s in all, %7.1f tok/s per stream", r["batch"].get<int>(),
                r["tok_per_s"].get<double>(), r["per_stream_tok_per_s"].get<double>());
    if (single > 0) std::printf(" (%5.1f%% of batch 1)", 100.0 * r["per_stream_tok_per_s"].get<double>() / single);
    std::printf(", %.2f ms a step\n", r["ms_per_step"].get<double>());
  }
  std::printf("memory: weights %.2f GiB, KV cache %.2f GiB, workspace %.2f GiB", m.weights / 1073741824.0,
              m.kv_cache / 1073741824.0, m.workspace / 1073741824.0);
  if (m.host) std::printf(" (+ %.2f GiB of pinned host memory: the embedding)", m.host / 1073741824.0);
  std::printf("\n");
  return kExitOk;
}

}  // namespace

void register_bench(CLI::App& app, RunFn& run) {
  auto a = std::make_shared<BenchArgs>();
  auto* cmd = app.add_subcommand("bench", "Measure decode/prefill speed, load time and memory (reports; medians)");
  cmd->add_option("--model", a->model, "model folder");
  cmd->add_option("--random", a->random, "a random model of this shape: cosmos-reason1-7b | tiny")
      ->check(CLI::IsMember({"cosmos-reason1-7b", "tiny"}));
  cmd->add_option("--device", a->device, "auto | cpu | cuda")->check(CLI::IsMember({"auto", "cpu", "cuda"}))->capture_default_str();
  cmd->add_option("--precision", a->precision, "bf16 | fp16 | fp8 | int8 | int4 | auto")->capture_default_str();
  add_kv_cache_option(*cmd, a->kv_cache);
  cmd->add_option("--prompt-lens", a->prompt_lens, "prompt lengths for prefill, comma-separated")->capture_default_str();
  cmd->add_option("--depth", a->depths, "context depths for decode, comma-separated")->capture_default_str();
  cmd->add_option("--gen", a->gen, "tokens decoded per measurement")->check(CLI::Range(1, 1 << 16))->capture_default_str();
  cmd->add_option("--settle-ms", a->settle_ms,
                  "idle this long after each depth's prompt before the timed steps (diagnosis: lets the GPU's clock "
                  "recover from the prompt; 0, the default, times them as a reply runs)")
      ->check(CLI::Range(0, 60000))
      ->capture_default_str();
  cmd->add_option("--reps", a->reps)->check(CLI::Range(1, 100))->capture_default_str();
  cmd->add_option("--threads", a->threads, "CPU threads (0: all cores)");
  cmd->add_option("--repetition-penalty", a->repetition_penalty,
                  "decode with this repetition penalty over the prompt and the tokens so far")
      ->check(CLI::Range(0.01f, 100.0f))
      ->capture_default_str();
  cmd->add_option("--temperature", a->temperature,
                  "0: greedy decoding; above 0 tokens are drawn (the app's default: 0.6 with --top-p 0.95)")
      ->check(CLI::Range(0.0f, 100.0f))
      ->capture_default_str();
  cmd->add_option("--top-p", a->top_p, "nucleus sampling when drawing (1: off)")
      ->check(CLI::Range(0.0f, 1.0f))
      ->capture_default_str();
  cmd->add_option("--batch", a->batch,
                  "decode throughput of this many sequences at once, comma-separated (e.g. 1,8,64,256); alone it "
                  "skips the single-sequence prefill and decode runs");
  cmd->add_option("--batch-prompt", a->batch_prompt, "prompt tokens per sequence for --batch")
      ->check(CLI::Range(1, 1 << 16))
      ->capture_default_str();
  cmd->add_option("--batch-gen", a->batch_gen, "decode steps timed per batch size")
      ->check(CLI::Range(1, 1 << 16))
      ->capture_default_str();
  cmd->add_flag("--json", a->json, "machine-readable output");
  cmd->add_flag("--no-clocks", a->no_clocks, "GPU: do not sample the SM clock and its slowdown reasons (NVML) while timing");
  cmd->callback([&run, a] { run = [a] { return run_bench(*a); }; });
}

}  // namespace cosmos::cli
