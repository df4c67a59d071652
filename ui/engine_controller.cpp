#include "engine_controller.h"

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

}  // namespace cosmos::ui
