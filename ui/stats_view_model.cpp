#include "stats_view_model.h"

#include <QFile>

#include <algorithm>
#include <unistd.h>

#include "cosmos/cuda_backend.h"
#include "engine_host.h"

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
  memoryTimer_.setInterval(kMemoryRefreshMs);
  connect(&memoryTimer_, &QTimer::timeout, this, &StatsViewModel::refreshMemory);
  memoryTimer_.start();
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
  // On the GPU: the device's memory (every process on it); on the CPU: this process in RAM.
  qint64 used = 0, total = 0;
  const auto gpu = onGpu_ ? cosmos::gpu_memory_info() : std::nullopt;
  if (gpu) {
    used = static_cast<qint64>(gpu->used);
    total = static_cast<qint64>(gpu->total);
  } else {
    used = processResidentBytes();
    total = physicalMemoryBytes();
  }
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

qint64 StatsViewModel::processResidentBytes() {
  // /proc/self/statm: size resident shared text lib data dt (pages).
  QFile f(QStringLiteral("/proc/self/statm"));
  if (!f.open(QIODevice::ReadOnly)) return 0;
  const QList<QByteArray> fields = f.readAll().simplified().split(' ');
  if (fields.size() < 2) return 0;
  bool ok = false;
  const qint64 pages = fields[1].toLongLong(&ok);
  const long pageSize = ::sysconf(_SC_PAGESIZE);
  return ok && pageSize > 0 ? pages * pageSize : 0;
}

qint64 StatsViewModel::physicalMemoryBytes() {
  const long pages = ::sysconf(_SC_PHYS_PAGES);
  const long pageSize = ::sysconf(_SC_PAGESIZE);
  return pages > 0 && pageSize > 0 ? static_cast<qint64>(pages) * pageSize : 0;
}

}  // namespace cosmos::ui
