// ChatEngine: the engine as the app sees it (docs/UI_ARCHITECTURE.md). Called only on the worker
// thread, by EngineController. RealChatEngine wraps cosmos::load_model + cosmos::Session; tests use
// FakeChatEngine (tests/ui/fake_chat_engine.h) with scripted streams. generateMany() runs n answers
// to one prompt as a batch (cosmos::BatchScheduler) for "Generate N answers".
#pragma once

#include <QMetaType>
#include <QString>

#include <atomic>
#include <functional>
#include <memory>
#include <string_view>
#include <vector>

#include "cosmos/chat_format.h"
#include "cosmos/error.h"
#include "cosmos/session.h"

namespace cosmos::ui {

// What to load: a model folder on a device ("auto" | "cpu" | "cuda"), a weight precision
// ("bf16", "fp16", …; "auto" means bf16), the KV-cache capacity in tokens and how the cache stores
// K and V ("full" | "int8": cosmos/kv_format.h).
struct EngineLoadRequest {
  QString modelDir;
  QString device = QStringLiteral("auto");
  QString precision = QStringLiteral("bf16");
  int contextTokens = 8192;
  QString kvCache = QStringLiteral("full");
  // Where quantized weights (int8, fp8, int4) are kept between loads (cosmos/quant_cache.h); empty:
  // quantize at every load.
  QString quantCacheDir;
};

// What was loaded, for the stats panel and the header. deviceNote says why this device was chosen
// (e.g. why the GPU is not used with device "auto"); empty when there is nothing to say.
struct EngineInfo {
  QString deviceName, precision, deviceNote;
  QString kvCache = QStringLiteral("full");  // the loaded cache's format ("full" | "int8")
  bool onGpu = false;
  quint64 weightBytes = 0, kvCacheBytes = 0, workspaceBytes = 0;
  int contextLimit = 0;  // the longest prompt + reply the session holds (tokens)
};

// What generateMany() reports while it runs (on the worker thread, from inside the call). Answers
// are numbered 0..n-1.
struct AnswerCallbacks {
  // Text appended to an answer.
  std::function<void(int answer, std::string_view piece)> piece;
  // The answer starts over (the engine needed its memory for the others): its text so far is void.
  std::function<void(int answer)> restarted;
  // The answer is complete, exactly once per answer: its reply (a stopped one with stop reason
  // `cancelled` and its text so far), or why it failed; the other answers go on.
  std::function<void(int answer, const cosmos::Result<cosmos::GenerationResult>& result)> finished;
  // Between steps, with the tokens generated so far over all answers; false stops every answer.
  std::function<bool(long long generatedTokens)> step;
};

// The options of answer `answer` of a batch: its own seed, options.sampling.seed + answer.
inline cosmos::GenerateOptions optionsForAnswer(const cosmos::GenerateOptions& options, int answer) {
  cosmos::GenerateOptions o = options;
  o.sampling.seed = options.sampling.seed + static_cast<std::uint64_t>(answer);
  return o;
}
// Greedy decoding (temperature 0, or top-k 1) picks the same tokens whatever the seed: several
// answers to one prompt would all be the same.
inline bool answersWouldBeIdentical(const cosmos::SamplingParams& p) { return p.greedy() || p.top_k == 1; }

class ChatEngine {
 public:
  virtual ~ChatEngine() = default;
  // progress(fraction in 0..1) returns false to cancel; the load then fails with an Error of
  // category `cancelled`. A failed or cancelled load keeps the model loaded before, if any.
  virtual cosmos::Result<EngineInfo> load(const EngineLoadRequest& request,
                                          const std::function<bool(double)>& progress) = 0;
  // Generates the assistant's reply to `messages` (system first, then the branch) on the loaded
  // model, streaming pieces; the session keeps its KV cache across calls (prefix reuse).
  virtual cosmos::Result<cosmos::GenerationResult> generate(const std::vector<cosmos::ChatMessage>& messages,
                                                            const cosmos::GenerateOptions& options,
                                                            const cosmos::StreamCallback& onPiece) = 0;
  // Generates n answers to `messages` at once (one batch: they share the forward passes), answer i
  // sampled with optionsForAnswer(options, i). Returns the n results, each also reported by
  // callbacks.finished. The session's KV cache stays as it was (it may be dropped when the answers
  // need its memory: the next generate() then prefills the whole conversation).
  virtual std::vector<cosmos::Result<cosmos::GenerationResult>> generateMany(
      const std::vector<cosmos::ChatMessage>& messages, const cosmos::GenerateOptions& options, int n,
      const AnswerCallbacks& callbacks) = 0;
  virtual int contextUsed() const = 0;  // tokens in the session's KV cache now
};

// The engine over cosmos::load_model (CPU backend today) and one cosmos::Session.
std::unique_ptr<ChatEngine> makeRealChatEngine();

}  // namespace cosmos::ui

Q_DECLARE_METATYPE(cosmos::ui::EngineLoadRequest)
Q_DECLARE_METATYPE(cosmos::ui::EngineInfo)
