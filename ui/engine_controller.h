// EngineController: the worker-thread object that owns the ChatEngine. EngineHost moves it to its
// QThread and calls load()/generate() through queued invocations; results come back as signals
// (queued to the GUI thread). Text is batched: pieces are accumulated and sent at most every
// kBatchIntervalMs (a time check inside the stream callback: the worker is busy in generate, so a
// timer could not fire), and the remainder is flushed before generationFinished/Failed.
#pragma once

#include <QObject>
#include <QString>
#include <QVariantMap>

#include <atomic>
#include <memory>
#include <vector>

#include "chat_engine.h"

namespace cosmos::ui {

class EngineController : public QObject {
  Q_OBJECT

 public:
  static constexpr int kBatchIntervalMs = 33;   // piecesReady at most ~30 times a second
  static constexpr int kStatsIntervalMs = 250;  // statsSample at most 4 times a second

  explicit EngineController(std::unique_ptr<ChatEngine> engine, QObject* parent = nullptr);
  ~EngineController() override;

  // Any thread. The stream callback returns false once stop is set; the load progress callback
  // returns false once cancel is set. EngineHost clears them before queuing the next request.
  void requestStop() { stop_.store(true); }
  void clearStop() { stop_.store(false); }
  void requestCancelLoad() { cancelLoad_.store(true); }
  void clearCancelLoad() { cancelLoad_.store(false); }

  // Worker thread only (EngineHost queues them).
  void load(const EngineLoadRequest& request);
  void generate(qint64 requestId, const std::vector<cosmos::ChatMessage>& messages,
                const cosmos::GenerateOptions& options);

  // The GenerationStats as the map generationFinished carries: prompt_tokens, reused_tokens,
  // generated_tokens, ttft_s, prefill_tok_per_s, decode_tok_per_s, stop_reason (string).
  static QVariantMap statsToMap(const cosmos::GenerationStats& stats);

 signals:
  void loadProgress(double fraction);
  void loaded(const cosmos::ui::EngineInfo& info);
  void loadFailed(const QString& message);
  void loadCancelled(const QString& message);
  void piecesReady(qint64 requestId, const QString& text);
  // stats: statsToMap() plus context_used (tokens in the KV cache after the reply).
  void generationFinished(qint64 requestId, const QVariantMap& stats);
  void generationFailed(qint64 requestId, const QString& message);
  // While generating, at most every kStatsIntervalMs: tokens_per_s (over the last window),
  // generated_tokens, context_used.
  void statsSample(const QVariantMap& sample);

 private:
  std::unique_ptr<ChatEngine> engine_;
  std::atomic<bool> stop_{false};
  std::atomic<bool> cancelLoad_{false};
};

}  // namespace cosmos::ui
