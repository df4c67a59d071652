#include "engine_controller.h"

#include <algorithm>
#include <chrono>
#include <string>

#include <spdlog/spdlog.h>

namespace cosmos::ui {
namespace {

using Clock = std::chrono::steady_clock;

QString fromStd(const std::string& s) { return QString::fromUtf8(s.data(), static_cast<qsizetype>(s.size())); }

}  // namespace

EngineController::EngineController(std::unique_ptr<ChatEngine> engine, QObject* parent)
    : QObject(parent), engine_(std::move(engine)) {}

EngineController::~EngineController() = default;

QVariantMap EngineController::statsToMap(const cosmos::GenerationStats& stats) {
  QVariantMap m;
  m.insert(QStringLiteral("prompt_tokens"), stats.prompt_tokens);
  m.insert(QStringLiteral("reused_tokens"), stats.reused_tokens);
  m.insert(QStringLiteral("generated_tokens"), stats.generated_tokens);
  m.insert(QStringLiteral("ttft_s"), stats.ttft_s);
  m.insert(QStringLiteral("prefill_tok_per_s"), stats.prefill_tok_per_s);
  m.insert(QStringLiteral("decode_tok_per_s"), stats.decode_tok_per_s);
  m.insert(QStringLiteral("stop_reason"), QString::fromLatin1(cosmos::to_string(stats.stop)));
  return m;
}

void EngineController::load(const EngineLoadRequest& request) {
  auto progress = [this](double fraction) {
    emit loadProgress(fraction);
    return !cancelLoad_.load();
  };
  auto result = engine_->load(request, progress);
  if (result) {
    emit loadProgress(1.0);
    emit loaded(*result);
    return;
  }
  const cosmos::Error& error = result.error();
  if (error.category == cosmos::ErrorCategory::cancelled) {
    spdlog::info("app: loading {} was cancelled", request.modelDir.toStdString());
    emit loadCancelled(fromStd(error.message));
    return;
  }
  spdlog::warn("app: loading {} failed: {} ({})", request.modelDir.toStdString(), error.message, error.code);
  emit loadFailed(fromStd(error.message));
}

void EngineController::generate(qint64 requestId, const std::vector<cosmos::ChatMessage>& messages,
                                const cosmos::GenerateOptions& options) {
  const auto batchInterval = std::chrono::milliseconds(kBatchIntervalMs);
  const auto statsInterval = std::chrono::milliseconds(kStatsIntervalMs);
  std::string pending;                       // text not sent yet (valid UTF-8: whole pieces)
  Clock::time_point lastBatch = Clock::now();  // the first piece after a long prefill goes at once
  Clock::time_point lastSample = lastBatch;
  int generatedAtSample = 0;

  auto flush = [&] {
    if (pending.empty()) return;
    emit piecesReady(requestId, fromStd(pending));
    pending.clear();
  };

  auto onPiece = [&](std::string_view piece, const cosmos::GenerationStats& stats) {
    pending.append(piece);
    const Clock::time_point now = Clock::now();
    if (!pending.empty() && now - lastBatch >= batchInterval) {
      flush();
      lastBatch = now;
    }
    if (now - lastSample >= statsInterval) {
      const double seconds = std::chrono::duration<double>(now - lastSample).count();
      QVariantMap sample;
      sample.insert(QStringLiteral("tokens_per_s"), (stats.generated_tokens - generatedAtSample) / seconds);
      sample.insert(QStringLiteral("generated_tokens"), stats.generated_tokens);
      sample.insert(QStringLiteral("context_used"), engine_->contextUsed());
      emit statsSample(sample);
      generatedAtSample = stats.generated_tokens;
      lastSample = now;
    }
    return !stop_.load();
  };

  // Stopped before it started (or the engine itself reports a cancel): an empty, cancelled reply.
  auto finishCancelled = [&] {
    cosmos::GenerationStats stats;
    stats.stop = cosmos::StopReason::cancelled;
    QVariantMap map = statsToMap(stats);
    map.insert(QStringLiteral("context_used"), engine_->contextUsed());
    emit generationFinished(requestId, map);
  };
  if (stop_.load()) {
    finishCancelled();
    return;
  }
  auto result = engine_->generate(messages, options, onPiece);
  flush();
  if (!result) {
    if (result.error().category == cosmos::ErrorCategory::cancelled) {
      finishCancelled();
      return;
    }
    spdlog::warn("app: generation failed: {} ({})", result.error().message, result.error().code);
    emit generationFailed(requestId, fromStd(result.error().message));
    return;
  }
  QVariantMap map = statsToMap(result->stats);
  map.insert(QStringLiteral("context_used"), engine_->contextUsed());
  emit generationFinished(requestId, map);
}

void EngineController::generateMany(qint64 requestId, const std::vector<cosmos::ChatMessage>& messages,
                                    const cosmos::GenerateOptions& options, int n) {
  const auto batchInterval = std::chrono::milliseconds(kBatchIntervalMs);
  const auto statsInterval = std::chrono::milliseconds(kStatsIntervalMs);
  const Clock::time_point start = Clock::now();
  std::vector<std::string> pending(static_cast<std::size_t>(std::max(0, n)));  // per answer, not sent yet
  std::vector<bool> reported(pending.size(), false);
  Clock::time_point lastBatch = start;
  Clock::time_point lastSample = start;
  long long generatedAtSample = 0;
  cosmos::GenerationStats total;  // over all answers
  total.stop = cosmos::StopReason::none;
  double firstToken = -1;  // seconds from the start to the first answer's first token

  auto flush = [&](int answer) {
    std::string& text = pending[static_cast<std::size_t>(answer)];
    if (text.empty()) return;
    emit answerPiecesReady(requestId, answer, fromStd(text));
    text.clear();
  };
  auto flushAll = [&] {
    for (int i = 0; i < n; ++i) flush(i);
  };
  auto cancelledStats = [] {
    cosmos::GenerationStats stats;
    stats.stop = cosmos::StopReason::cancelled;
    return stats;
  };

  AnswerCallbacks callbacks;
  callbacks.piece = [&](int answer, std::string_view piece) {
    if (answer >= 0 && answer < n) pending[static_cast<std::size_t>(answer)].append(piece);
  };
  callbacks.restarted = [&](int answer) {
    if (answer < 0 || answer >= n) return;
    pending[static_cast<std::size_t>(answer)].clear();  // void, like what was sent before
    emit answerRestarted(requestId, answer);
  };
  callbacks.finished = [&](int answer, const cosmos::Result<cosmos::GenerationResult>& result) {
    if (answer < 0 || answer >= n || reported[static_cast<std::size_t>(answer)]) return;
    reported[static_cast<std::size_t>(answer)] = true;
    flush(answer);
    if (!result && result.error().category != cosmos::ErrorCategory::cancelled) {
      spdlog::warn("app: answer {} of {} failed: {} ({})", answer + 1, n, result.error().message, result.error().code);
      emit answerFailed(requestId, answer, fromStd(result.error().message));
      return;
    }
    const cosmos::GenerationStats stats = result ? result->stats : cancelledStats();
    total.prompt_tokens = std::max(total.prompt_tokens, stats.prompt_tokens);
    total.generated_tokens += stats.generated_tokens;
    emit answerFinished(requestId, answer, statsToMap(stats));
  };
  callbacks.step = [&](long long generated) {
    const Clock::time_point now = Clock::now();
    if (generated > 0 && firstToken < 0) firstToken = std::chrono::duration<double>(now - start).count();
    if (now - lastBatch >= batchInterval) {
      flushAll();
      lastBatch = now;
    }
    if (now - lastSample >= statsInterval) {
      const double seconds = std::chrono::duration<double>(now - lastSample).count();
      QVariantMap sample;
      sample.insert(QStringLiteral("tokens_per_s"), static_cast<double>(generated - generatedAtSample) / seconds);
      sample.insert(QStringLiteral("generated_tokens"), generated);
      sample.insert(QStringLiteral("context_used"), engine_->contextUsed());
      emit statsSample(sample);
      generatedAtSample = generated;
      lastSample = now;
    }
    return !stop_.load();
  };

  if (!stop_.load() && n > 0) engine_->generateMany(messages, options, n, callbacks);
  flushAll();
  // Stopped before it started, or an answer the engine did not report: an empty, cancelled answer.
  for (int i = 0; i < n; ++i)
    if (!reported[static_cast<std::size_t>(i)]) callbacks.finished(i, cosmos::GenerationResult{{}, {}, cancelledStats()});

  const double seconds = std::chrono::duration<double>(Clock::now() - start).count();
  QVariantMap map = statsToMap(total);
  if (firstToken >= 0) {
    map.insert(QStringLiteral("ttft_s"), firstToken);
    map.insert(QStringLiteral("decode_tok_per_s"),
               static_cast<double>(total.generated_tokens) / std::max(seconds - firstToken, 1e-9));
  }
  map.insert(QStringLiteral("answers"), n);
  map.insert(QStringLiteral("stop_reason"), QString::fromLatin1(cosmos::to_string(
                                                stop_.load() ? cosmos::StopReason::cancelled : cosmos::StopReason::none)));
  map.insert(QStringLiteral("context_used"), engine_->contextUsed());
  emit generationFinished(requestId, map);
}

}  // namespace cosmos::ui
