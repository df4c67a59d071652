// MemorySampler reads memory on its own thread, about 4 times a second, and can be asked for a
// sample at once.
#include <QtTest>

#include <atomic>
#include <memory>

#include "memory_sampler.h"

using cosmos::ui::MemorySampler;

// Records the samples on this (the test's) thread: the signal is emitted on the sampler's thread,
// and a QSignalSpy connected there would append to its list while the test reads it (Qt 6.4's spy
// has no lock), which crashed CI once. A queued connection to an object living here avoids that.
struct Recorder : QObject {
  struct Sample {
    qint64 used, total;
    bool gpu;
    QThread* emittedOn;
  };
  QList<Sample> samples;
  // Written on the sampler's thread (shared, so a late emission after this object is gone is harmless).
  std::shared_ptr<std::atomic<QThread*>> lastEmitter = std::make_shared<std::atomic<QThread*>>(nullptr);

  explicit Recorder(MemorySampler& sampler) {
    // Direct: note the emitting thread. Queued (this object lives here): store the sample here.
    connect(&sampler, &MemorySampler::sampled, &sampler,
            [emitter = lastEmitter](qint64, qint64, bool) { *emitter = QThread::currentThread(); },
            Qt::DirectConnection);
    connect(&sampler, &MemorySampler::sampled, this, [this](qint64 used, qint64 total, bool gpu) {
      samples.append({used, total, gpu, lastEmitter->load()});
    });
  }
};

class TestMemorySampler : public QObject {
  Q_OBJECT

 private slots:
  // Each test ends by destroying its sampler: its timer must be stopped on the sampler's thread.
  void init() { QTest::failOnWarning(QRegularExpression(QStringLiteral("Timers cannot be stopped"))); }

  void samplesOffTheCallingThread() {
    MemorySampler sampler;
    Recorder rec(sampler);
    QTRY_VERIFY_WITH_TIMEOUT(!rec.samples.isEmpty(), 10000);  // generous: a loaded CI machine, not a speed check
    const auto s = rec.samples.first();
    QVERIFY(s.emittedOn != nullptr);
    QVERIFY(s.emittedOn != QThread::currentThread());
    QVERIFY(s.used > 1024 * 1024);  // this process's resident set
    QVERIFY(s.total > s.used);      // the machine's RAM
    QCOMPARE(s.gpu, false);         // CPU reading by default
  }

  void keepsSamplingAndAnswersRequests() {
    MemorySampler sampler;
    Recorder rec(sampler);
    QTRY_VERIFY_WITH_TIMEOUT(rec.samples.size() >= 3, 10000);  // periodic: 4 per second (timeout generous for loaded CI)
    const auto before = rec.samples.size();
    sampler.requestSample();
    QTRY_VERIFY_WITH_TIMEOUT(rec.samples.size() > before, 5000);
  }

  void gpuWithoutAGpuFallsBackToTheProcess() {
    MemorySampler sampler;
    sampler.setGpu(true);  // no usable GPU on CI machines: the CPU reading comes instead
    Recorder rec(sampler);
    sampler.requestSample();
    QTRY_VERIFY_WITH_TIMEOUT(!rec.samples.isEmpty(), 10000);  // generous: a loaded CI machine, not a speed check
    QVERIFY(rec.samples.last().total > 0);
  }

  void destroyedRightAfterStartingOrWhileSampling_data() {
    QTest::addColumn<int>("lifeMs");
    QTest::newRow("at once") << 0;
    QTest::newRow("after a sample") << 300;
  }
  void destroyedRightAfterStartingOrWhileSampling() {
    QFETCH(int, lifeMs);
    auto sampler = std::make_unique<MemorySampler>();
    if (lifeMs > 0) QTest::qWait(lifeMs);
    // Joins the thread. What is checked: no crash, and no warning (init()'s failOnWarning fails
    // the row on "Timers cannot be stopped from another thread").
    sampler.reset();
  }
};

QTEST_GUILESS_MAIN(TestMemorySampler)
#include "test_memory_sampler.moc"
