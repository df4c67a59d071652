// EngineController: the worker-thread object that owns the ChatEngine. EngineHost moves it to its
// QThread and calls load()/generate() through queued invocations; results come back as signals
// (queued to the GUI thread). Text is batched: pieces are accumulated and sent at most every
// kBatchIntervalMs (a time check inside the stream callback: the worker is busy in generate, so a
// timer could not fire), and the remainder is flushed before generationFinished/Failed.
//
// generateMany() ("Generate N answers") streams n answers at once: each answer's text is batched
// on its own (answerPiecesReady carries the answer's index, at most every kBatchIntervalMs for all
// of them), answerRestarted voids an answer's text (its pending text is dropped), answerFinished /
// answerFailed end one answer (its text flushed first) while the others go on, and
// generationFinished ends the request after the last one.
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
  void generateMany(qint64 requestId, const std::vector<cosmos::ChatMessage>& messages,
                    const cosmos::GenerateOptions& options, int n);

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
  // generateMany(): answer = 0..n-1. answerFinished's stats are statsToMap() of that answer (stop
  // reason "cancelled" when stopped). The request then ends with generationFinished (stats over all
  // answers: answers, prompt_tokens, generated_tokens (sum), ttft_s (first answer's first token),
  // decode_tok_per_s (all answers' tokens over the time since the first), stop_reason "cancelled"
  // when stopped, context_used).
  void answerPiecesReady(qint64 requestId, int answer, const QString& text);
  void answerRestarted(qint64 requestId, int answer);
  void answerFinished(qint64 requestId, int answer, const QVariantMap& stats);
  void answerFailed(qint64 requestId, int answer, const QString& message);
  // While generating, at most every kStatsIntervalMs: tokens_per_s (over the last window),
  // generated_tokens, context_used.
  void statsSample(const QVariantMap& sample);

 private:
  std::unique_ptr<ChatEngine> engine_;
  std::atomic<bool> stop_{false};
  std::atomic<bool> cancelLoad_{false};
};

}  // namespace cosmos::ui
