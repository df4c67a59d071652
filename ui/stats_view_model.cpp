#include "stats_view_model.h"

#include <QFile>

#include <algorithm>
#include <unistd.h>

#include "engine_host.h"
#include "memory_sampler.h"

namespace cosmos::ui {

StatsViewModel::StatsViewModel(EngineHost* engine, QObject* parent) : QObject(parent), engine_(engine) {
  if (engine_) {
    connect(engine_, &EngineHost::infoChanged, this, &StatsViewModel::onInfoChanged);
    connect(engine_, &EngineHost::statsSample, this, &StatsViewModel::onSample);
    connect(engine_, &EngineHost::generationFinished, this,
            [this](qint64, const QVariantMap& stats) { onFinished(stats); });
    if (engine_->hasModel()) onInfoChanged();
  }
  memoryTotal_ = physicalMemoryBytes();
  memoryUsed_ = processResidentBytes();
  // Periodic readings come from the sampler's own thread (queued to this one).
  sampler_ = std::make_unique<MemorySampler>();
  connect(sampler_.get(), &MemorySampler::sampled, this,
          [this](qint64 used, qint64 total, bool gpu) {
            if (gpu == onGpu_) applyMemory(used, total);
          });
}

qint64 StatsViewModel::otherBytes() const {
  // Mapped weights count in the resident set only once touched, so this is at least 0.
  return std::max<qint64>(0, memoryUsed_ - weightBytes_ - kvCacheBytes_ - workspaceBytes_);
}

QVariantList StatsViewModel::history() const {
  QVariantList out;
  out.reserve(history_.size());
  for (double v : history_) out.append(v);
  return out;
}

void StatsViewModel::refreshMemory() {
  // The process's memory can be read here at once; the GPU's is read on the sampler's thread.
  if (onGpu_) {
    sampler_->requestSample();
    return;
  }
  applyMemory(processResidentBytes(), physicalMemoryBytes());
}

void StatsViewModel::applyMemory(qint64 used, qint64 total) {
  if (used == memoryUsed_ && total == memoryTotal_) return;
  memoryUsed_ = used;
  memoryTotal_ = total;
  emit memoryChanged();
}

void StatsViewModel::clearHistory() {
  history_.clear();
  tokensPerSecond_ = 0;
  emit speedChanged();
}

void StatsViewModel::onInfoChanged() {
  if (!engine_) return;
  const EngineInfo& info = engine_->info();
  deviceName_ = info.deviceName;
  precision_ = info.precision;
  onGpu_ = info.onGpu;
  sampler_->setGpu(onGpu_);
  weightBytes_ = static_cast<qint64>(info.weightBytes);
  kvCacheBytes_ = static_cast<qint64>(info.kvCacheBytes);
  workspaceBytes_ = static_cast<qint64>(info.workspaceBytes);
  contextLimit_ = info.contextLimit;
  emit infoChanged();
  refreshMemory();       // GPU or RAM figures, whichever the model now lives in
  emit memoryChanged();  // otherBytes depends on the model's bytes
}

void StatsViewModel::onSample(const QVariantMap& sample) {
  tokensPerSecond_ = sample.value(QStringLiteral("tokens_per_s")).toDouble();
  contextUsed_ = sample.value(QStringLiteral("context_used"), contextUsed_).toInt();
  history_.append(tokensPerSecond_);
  while (history_.size() > kHistoryPoints) history_.removeFirst();
  emit speedChanged();
  refreshMemory();
}

void StatsViewModel::onFinished(const QVariantMap& stats) {
  ttft_ = stats.value(QStringLiteral("ttft_s")).toDouble();
  prefillSpeed_ = stats.value(QStringLiteral("prefill_tok_per_s")).toDouble();
  decodeSpeed_ = stats.value(QStringLiteral("decode_tok_per_s")).toDouble();
  emit lastReplyChanged();
  tokensPerSecond_ = 0;  // idle now; decodeSpeed keeps the reply's speed
  contextUsed_ = stats.value(QStringLiteral("context_used"), contextUsed_).toInt();
  emit speedChanged();
  refreshMemory();
}

StatsViewModel::~StatsViewModel() = default;

qint64 StatsViewModel::processResidentBytes() { return MemorySampler::processResidentBytes(); }

qint64 StatsViewModel::physicalMemoryBytes() { return MemorySampler::physicalMemoryBytes(); }

}  // namespace cosmos::ui
