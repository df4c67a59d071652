#include "chat_engine.h"

#include <filesystem>

#include <spdlog/spdlog.h>

#include "cosmos/batch_scheduler.h"
#include "cosmos/kv_format.h"
#include "cosmos/model_loader.h"
#include "cosmos/precision.h"
#include "cosmos/tune_cache.h"
#include "model_switch.h"

namespace cosmos::ui {
namespace {

// Owns the loaded model: the session refers to the backend and the tokenizer, so they are
// declared before it and outlive it (members are destroyed in reverse order).
struct LoadedEngine {
  cosmos::LoadedModel model;                  // tokenizer + backend
  std::unique_ptr<cosmos::Session> session;   // on model.backend / model.tokenizer
};

class RealChatEngine final : public ChatEngine {
 public:
  cosmos::Result<EngineInfo> load(const EngineLoadRequest& request,
                                  const std::function<bool(double)>& progress) override {
    auto cancelled = [] {
      return cosmos::make_error(cosmos::ErrorCategory::cancelled, "load.cancelled", "loading was cancelled");
    };
    if (progress && !progress(0.0)) return cancelled();

    const std::string deviceName = request.device.isEmpty() ? std::string("auto") : request.device.toStdString();
    const auto device = cosmos::device_from_string(deviceName);
    if (!device)
      return cosmos::make_error(cosmos::ErrorCategory::bad_input, "load.device",
                                "unknown device \"" + deviceName + "\" (use auto, cpu or cuda)");
    std::string precisionName = request.precision.toStdString();
    if (precisionName.empty() || precisionName == "auto") precisionName = "bf16";
    const auto precision = cosmos::precision_from_string(precisionName);
    if (!precision)
      return cosmos::make_error(cosmos::ErrorCategory::bad_input, "load.precision",
                                "unknown precision \"" + precisionName + "\"");
    const std::string kvName = request.kvCache.isEmpty() ? std::string("full") : request.kvCache.toStdString();
    const auto kvFormat = cosmos::kv_format_from_string(kvName);
    if (!kvFormat)
      return cosmos::make_error(cosmos::ErrorCategory::bad_input, "load.kv_cache",
                                "unknown KV cache format \"" + kvName + "\" (use full or int8)");
    if (request.modelDir.isEmpty())
      return cosmos::make_error(cosmos::ErrorCategory::bad_input, "load.model_dir", "no model folder was chosen");

    cosmos::BackendOptions options;
    options.context_tokens = request.contextTokens;
    options.precision = *precision;
    options.kv_format = *kvFormat;
    if (!request.quantCacheDir.isEmpty()) options.quant_cache_dir = request.quantCacheDir.toStdString();
    // The GEMM tuner's choices for this GPU (a small text file): the first long prompt after a
    // restart skips re-timing cuBLASLt's candidates.
    options.tune_cache_dir = cosmos::default_tune_cache_dir();
    // Weights placed on the device map to 5%..90% of the bar; returning false cancels the load.
    if (progress) options.progress = [&progress](double f) { return progress(0.05 + 0.85 * f); };
    // The previous model stays loaded until the new one is complete (a failed or cancelled load
    // keeps it); when both do not fit at once, model_switch.h releases it and retries, and loads it
    // back if the new one does not fit alone either.
    using Loaded = cosmos::Result<std::unique_ptr<LoadedEngine>>;
    auto loadWith = [](const std::string& dir, cosmos::Device dev, const cosmos::BackendOptions& opts) -> Loaded {
      auto loaded = cosmos::load_model(std::filesystem::path(dir), dev, opts);
      if (!loaded) return loaded.error();
      auto e = std::make_unique<LoadedEngine>();
      e->model = std::move(*loaded);
      e->session = std::make_unique<cosmos::Session>(*e->model.backend, *e->model.tokenizer);
      return e;
    };
    const std::string dir = request.modelDir.toStdString();
    // Switching away from a model on the GPU with device "auto": the GPU only, so that running out
    // of GPU memory reaches switchModel (retry without the old model, else restore it) instead of
    // quietly moving the new model to the CPU, as "auto" does when nothing is loaded.
    const bool fromGpu = current_ && current_->model.backend->memory().on_gpu;
    const cosmos::Device target = *device == cosmos::Device::auto_select && fromGpu ? cosmos::Device::cuda : *device;
    SwitchOutcome outcome;
    auto switched = switchModel<LoadedEngine>(
        current_, [&]() -> Loaded { return loadWith(dir, target, options); },
        [&]() -> Loaded { return loadWith(previous_.dir, previous_.device, previous_.options); }, &outcome);
    if (!switched) {
      if (outcome.retriedAlone) spdlog::warn("app: {}", switched.error().message);
      return switched.error();
    }
    std::unique_ptr<LoadedEngine> next = std::move(*switched);
    // Cancelled after the new model was complete: it is dropped, the old one stays (unless it had
    // to be released for the new one to fit).
    if (progress && !progress(0.9)) return cancelled();

    const cosmos::Backend& backend = *next->model.backend;
    const cosmos::BackendMemory memory = backend.memory();
    EngineInfo info;
    info.deviceName = QString::fromStdString(backend.device_name());
    const std::string_view precisionText = cosmos::to_string(backend.precision());
    info.precision = QString::fromUtf8(precisionText.data(), static_cast<qsizetype>(precisionText.size()));
    info.kvCache = QString::fromUtf8(std::string(cosmos::to_string(backend.kv_format())));
    info.deviceNote = QString::fromStdString(next->model.device_note);
    info.onGpu = memory.on_gpu;
    info.weightBytes = memory.weights;
    info.kvCacheBytes = memory.kv_cache;
    info.workspaceBytes = memory.workspace;
    info.contextLimit = next->session->context_limit();
    if (progress && !progress(1.0)) return cancelled();

    current_ = std::move(next);  // the old session, backend and tokenizer go here, in that order
    previous_ = Request{dir, *device, options};
    previous_.options.progress = nullptr;  // a reload after a failed switch reports no progress
    spdlog::info("app: loaded {} on {} ({})", request.modelDir.toStdString(), info.deviceName.toStdString(),
                 info.precision.toStdString());
    return info;
  }

  cosmos::Result<cosmos::GenerationResult> generate(const std::vector<cosmos::ChatMessage>& messages,
                                                    const cosmos::GenerateOptions& options,
                                                    const cosmos::StreamCallback& onPiece) override {
    if (!current_)
      return cosmos::make_error(cosmos::ErrorCategory::bad_input, "generate.no_model", "no model is loaded");
    return current_->session->chat(messages, options, onPiece);
  }

  std::vector<cosmos::Result<cosmos::GenerationResult>> generateMany(const std::vector<cosmos::ChatMessage>& messages,
                                                                     const cosmos::GenerateOptions& options, int n,
                                                                     const AnswerCallbacks& callbacks) override {
    std::vector<cosmos::Result<cosmos::GenerationResult>> results;
    if (n <= 0) return results;
    auto reportAll = [&](const cosmos::Error& error) {
      results.assign(static_cast<std::size_t>(n), error);
      for (int i = 0; i < n; ++i)
        if (callbacks.finished) callbacks.finished(i, results[static_cast<std::size_t>(i)]);
      return results;
    };
    if (!current_)
      return reportAll(cosmos::make_error(cosmos::ErrorCategory::bad_input, "generate.no_model", "no model is loaded"));
    cosmos::Backend& backend = *current_->model.backend;
    const cosmos::Tokenizer& tokenizer = *current_->model.tokenizer;
    std::vector<cosmos::TokenId> prompt = cosmos::chat_token_ids(tokenizer, messages, cosmos::ChatFormatOptions{});

    // The answers are sequences of their own in the session's KV cache (the scheduler creates and
    // frees them); the session's sequence and its cached tokens are not touched, so its next turn
    // still reuses them. The first answer prefills the prompt and the others share its whole
    // blocks (BatchScheduler), so they need the prompt once plus about two blocks each (the
    // prompt's last partial block and a block of reply): when that does not fit beside the
    // session's cache, the session gives its cache back (its next turn prefills the whole
    // conversation) rather than the answers running one at a time.
    cosmos::KvCache& kv = backend.kv_cache();
    const int blockSize = std::max(1, kv.shape().block_size);
    const int promptBlocks = (static_cast<int>(prompt.size()) + blockSize - 1) / blockSize;
    if (kv.free_blocks() < promptBlocks + 2 * n && !current_->session->cached_tokens().empty()) {
      spdlog::info("app: {} answers need the KV cache of the conversation ({} tokens); it is dropped", n,
                   current_->session->cached_tokens().size());
      current_->session->reset();
    }

    cosmos::BatchSchedulerOptions batchOptions;
    batchOptions.max_batch = n;
    batchOptions.step_tokens = std::max(1, options.prefill_chunk);
    cosmos::BatchScheduler scheduler(backend, tokenizer, batchOptions);
    std::vector<bool> reported(static_cast<std::size_t>(n), false);
    scheduler.set_listener([&](const cosmos::BatchEvent& e) {
      switch (e.kind) {
        case cosmos::BatchEvent::Kind::text:
          if (callbacks.piece) callbacks.piece(e.request, e.text);
          break;
        case cosmos::BatchEvent::Kind::restarted:
          if (callbacks.restarted) callbacks.restarted(e.request);
          break;
        case cosmos::BatchEvent::Kind::finished:
          reported[static_cast<std::size_t>(e.request)] = true;
          if (callbacks.finished) callbacks.finished(e.request, scheduler.result(e.request));
          break;
      }
    });
    for (int i = 0; i < n; ++i) scheduler.submit(prompt, optionsForAnswer(options, i));

    bool stopped = false;
    while (true) {
      if (!stopped && callbacks.step && !callbacks.step(scheduler.progress().generated_tokens)) {
        stopped = true;  // every answer keeps its text so far
        for (int i = 0; i < n; ++i) scheduler.cancel(i);
      }
      auto more = scheduler.step();
      if (!more) {  // a backend error: the answers still running fail with it
        spdlog::warn("app: generating {} answers failed: {} ({})", n, more.error().message, more.error().code);
        for (int i = 0; i < n; ++i) {
          if (reported[static_cast<std::size_t>(i)]) continue;
          reported[static_cast<std::size_t>(i)] = true;
          if (callbacks.finished) callbacks.finished(i, more.error());
        }
        for (int i = 0; i < n; ++i)
          results.push_back(scheduler.finished(i) ? scheduler.result(i) : cosmos::Result<cosmos::GenerationResult>(more.error()));
        return results;
      }
      if (!*more) break;
    }
    for (int i = 0; i < n; ++i) results.push_back(scheduler.result(i));
    return results;
  }

  int contextUsed() const override {
    return current_ ? static_cast<int>(current_->session->cached_tokens().size()) : 0;
  }

 private:
  std::unique_ptr<LoadedEngine> current_;
  // How current_ was loaded, to load it again when a switch released it and then failed.
  struct Request {
    std::string dir;
    cosmos::Device device = cosmos::Device::cpu;
    cosmos::BackendOptions options;
  };
  Request previous_;
};

}  // namespace

std::unique_ptr<ChatEngine> makeRealChatEngine() { return std::make_unique<RealChatEngine>(); }

}  // namespace cosmos::ui
