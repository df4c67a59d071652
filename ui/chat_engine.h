// ChatEngine: the engine as the app sees it (docs/UI_ARCHITECTURE.md). Called only on the worker
// thread, by EngineController. RealChatEngine wraps cosmos::load_model + cosmos::Session; tests use
// FakeChatEngine (tests/ui/fake_chat_engine.h) with scripted streams.
#pragma once

#include <QMetaType>
#include <QString>

#include <atomic>
#include <functional>
#include <memory>
#include <vector>

#include "cosmos/chat_format.h"
#include "cosmos/error.h"
#include "cosmos/session.h"

namespace cosmos::ui {

// What to load: a model folder on a device ("auto" | "cpu" | "cuda"), a weight precision
// ("bf16", "fp16", …; "auto" means bf16) and the KV-cache capacity in tokens.
struct EngineLoadRequest {
  QString modelDir;
  QString device = QStringLiteral("auto");
  QString precision = QStringLiteral("bf16");
  int contextTokens = 8192;
  // Where quantized weights (int8, fp8, int4) are kept between loads (cosmos/quant_cache.h); empty:
  // quantize at every load.
  QString quantCacheDir;
};

// What was loaded, for the stats panel and the header. deviceNote says why this device was chosen
// (e.g. why the GPU is not used with device "auto"); empty when there is nothing to say.
struct EngineInfo {
  QString deviceName, precision, deviceNote;
  bool onGpu = false;
  quint64 weightBytes = 0, kvCacheBytes = 0, workspaceBytes = 0;
  int contextLimit = 0;  // the longest prompt + reply the session holds (tokens)
};

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
  virtual int contextUsed() const = 0;  // tokens in the session's KV cache now
};

// The engine over cosmos::load_model (CPU backend today) and one cosmos::Session.
std::unique_ptr<ChatEngine> makeRealChatEngine();

}  // namespace cosmos::ui

Q_DECLARE_METATYPE(cosmos::ui::EngineLoadRequest)
Q_DECLARE_METATYPE(cosmos::ui::EngineInfo)
