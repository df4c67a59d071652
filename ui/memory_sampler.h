// MemorySampler: reads memory use on its own thread, about 4 times a second, so the live panel
// never waits on /proc or the CUDA driver on the GUI thread. On the GPU it reads the device's
// used/total (all processes); on the CPU the process's resident set and the machine's RAM.
#pragma once

#include <QObject>
#include <QThread>
#include <QTimer>

#include <atomic>

namespace cosmos::ui {

class MemorySampler : public QObject {
  Q_OBJECT

 public:
  static constexpr int kIntervalMs = 250;

  // Starts its thread; samples until destroyed (from the thread that created it).
  MemorySampler();
  ~MemorySampler() override;

  // Which memory to read from now on; thread-safe.
  void setGpu(bool gpu) { gpu_.store(gpu); }
  // Asks for one sample at once (queued to the sampler's thread).
  void requestSample();

  // The readings, in bytes (0 when unknown).
  static qint64 processResidentBytes();
  static qint64 physicalMemoryBytes();

 signals:
  void sampled(qint64 used, qint64 total, bool gpu);

 private slots:
  void sample();

 private:
  QThread thread_;
  QTimer* timer_ = nullptr;  // lives on thread_
  std::atomic<bool> gpu_{false};
};

}  // namespace cosmos::ui
