#include "memory_sampler.h"

#include <QFile>
#include <QMetaObject>

#include <unistd.h>

#include "cosmos/cuda_backend.h"

namespace cosmos::ui {

MemorySampler::MemorySampler() {
  thread_.setObjectName(QStringLiteral("memory sampler"));
  moveToThread(&thread_);
  connect(&thread_, &QThread::started, this, [this] {
    timer_ = new QTimer(this);  // created on the sampler's thread
    timer_->setInterval(kIntervalMs);
    connect(timer_, &QTimer::timeout, this, &MemorySampler::sample);
    timer_->start();
    sample();
  });
  // The timer is stopped and deleted on its own thread as the thread ends: deleted later by this
  // object's destructor (on the GUI thread) it would be stopped from another thread, which Qt
  // refuses ("Timers cannot be stopped from another thread").
  connect(&thread_, &QThread::finished, this, [this] {
    delete timer_;
    timer_ = nullptr;
  }, Qt::DirectConnection);
  thread_.start();
}

MemorySampler::~MemorySampler() {
  thread_.quit();
  thread_.wait();
}

void MemorySampler::requestSample() { QMetaObject::invokeMethod(this, &MemorySampler::sample, Qt::QueuedConnection); }

void MemorySampler::sample() {
  const bool gpu = gpu_.load();
  if (gpu) {
    if (const auto m = cosmos::gpu_memory_info()) {
      emit sampled(static_cast<qint64>(m->used), static_cast<qint64>(m->total), true);
      return;
    }
  }
  emit sampled(processResidentBytes(), physicalMemoryBytes(), false);
}

qint64 MemorySampler::processResidentBytes() {
  // /proc/self/statm: size resident shared text lib data dt, in pages.
  QFile f(QStringLiteral("/proc/self/statm"));
  if (!f.open(QIODevice::ReadOnly)) return 0;
  const QList<QByteArray> fields = f.readAll().split(' ');
  if (fields.size() < 2) return 0;
  return fields[1].toLongLong() * static_cast<qint64>(sysconf(_SC_PAGESIZE));
}

qint64 MemorySampler::physicalMemoryBytes() {
  const long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGESIZE);
  return pages > 0 && page > 0 ? static_cast<qint64>(pages) * page : 0;
}

}  // namespace cosmos::ui
