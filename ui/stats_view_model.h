// StatsViewModel (QML: `stats`): the live panel. Fed by EngineHost: what is loaded (infoChanged),
// statsSample while generating (tokens/s, context used), generationFinished (the reply's ttft,
// prefill and decode speeds). Memory on the CPU backend is the process's: memoryUsed is the
// resident set (/proc/self/statm), memoryTotal the physical RAM, the model's own bytes come from
// the engine, otherBytes = memoryUsed - (weights + KV cache + workspace), at least 0. On the GPU
// memoryUsed/memoryTotal are the device's (all processes). Memory is read about 4 times a second
// on a MemorySampler thread, never on the GUI thread's clock.
#pragma once

#include <QList>
#include <QObject>
#include <QString>
#include <QTimer>
#include <QVariantList>
#include <QVariantMap>

#include <memory>

namespace cosmos::ui {

class EngineHost;
class MemorySampler;

class StatsViewModel : public QObject {
  Q_OBJECT
  Q_PROPERTY(QString deviceName READ deviceName NOTIFY infoChanged)
  Q_PROPERTY(QString precision READ precision NOTIFY infoChanged)
  Q_PROPERTY(bool onGpu READ onGpu NOTIFY infoChanged)
  Q_PROPERTY(qint64 weightBytes READ weightBytes NOTIFY infoChanged)
  Q_PROPERTY(qint64 kvCacheBytes READ kvCacheBytes NOTIFY infoChanged)
  Q_PROPERTY(qint64 workspaceBytes READ workspaceBytes NOTIFY infoChanged)
  Q_PROPERTY(int contextLimit READ contextLimit NOTIFY infoChanged)
  Q_PROPERTY(qint64 memoryUsed READ memoryUsed NOTIFY memoryChanged)
  Q_PROPERTY(qint64 memoryTotal READ memoryTotal NOTIFY memoryChanged)
  Q_PROPERTY(qint64 otherBytes READ otherBytes NOTIFY memoryChanged)
  Q_PROPERTY(double tokensPerSecond READ tokensPerSecond NOTIFY speedChanged)
  // tokens/s samples, oldest first: the last kHistoryPoints (60 s at 4 Hz) while generating.
  Q_PROPERTY(QVariantList history READ history NOTIFY speedChanged)
  Q_PROPERTY(int contextUsed READ contextUsed NOTIFY speedChanged)
  // The last finished reply: seconds to the first token, prefill and decode tokens/s.
  Q_PROPERTY(double ttft READ ttft NOTIFY lastReplyChanged)
  Q_PROPERTY(double prefillSpeed READ prefillSpeed NOTIFY lastReplyChanged)
  Q_PROPERTY(double decodeSpeed READ decodeSpeed NOTIFY lastReplyChanged)

 public:
  static constexpr int kHistoryPoints = 240;  // 60 s at 4 Hz

  // engine may be null (tests feed onSample/onFinished directly).
  explicit StatsViewModel(EngineHost* engine, QObject* parent = nullptr);

  QString deviceName() const { return deviceName_; }
  QString precision() const { return precision_; }
  bool onGpu() const { return onGpu_; }
  qint64 weightBytes() const { return weightBytes_; }
  qint64 kvCacheBytes() const { return kvCacheBytes_; }
  qint64 workspaceBytes() const { return workspaceBytes_; }
  int contextLimit() const { return contextLimit_; }
  qint64 memoryUsed() const { return memoryUsed_; }
  qint64 memoryTotal() const { return memoryTotal_; }
  qint64 otherBytes() const;
  double tokensPerSecond() const { return tokensPerSecond_; }
  QVariantList history() const;
  int contextUsed() const { return contextUsed_; }
  double ttft() const { return ttft_; }
  double prefillSpeed() const { return prefillSpeed_; }
  double decodeSpeed() const { return decodeSpeed_; }

  // Re-reads memory now (the process's synchronously; the GPU's through the sampler thread).
  Q_INVOKABLE void refreshMemory();
  ~StatsViewModel() override;
  // Forgets the speed history.
  Q_INVOKABLE void clearHistory();

  // Feeds (connected to EngineHost; public for tests).
  void onInfoChanged();
  void onSample(const QVariantMap& sample);
  void onFinished(const QVariantMap& stats);

  // The process's resident set and the machine's physical RAM, in bytes (0 when unknown).
  static qint64 processResidentBytes();
  static qint64 physicalMemoryBytes();

 signals:
  void infoChanged();
  void memoryChanged();
  void speedChanged();
  void lastReplyChanged();

 private:
  void applyMemory(qint64 used, qint64 total);

  EngineHost* engine_ = nullptr;
  std::unique_ptr<MemorySampler> sampler_;
  QString deviceName_, precision_;
  bool onGpu_ = false;
  qint64 weightBytes_ = 0, kvCacheBytes_ = 0, workspaceBytes_ = 0;
  int contextLimit_ = 0;
  qint64 memoryUsed_ = 0, memoryTotal_ = 0;
  double tokensPerSecond_ = 0;
  QList<double> history_;  // [<= kHistoryPoints] tokens/s
  int contextUsed_ = 0;
  double ttft_ = 0, prefillSpeed_ = 0, decodeSpeed_ = 0;
};

}  // namespace cosmos::ui
