// MemorySampler reads memory on its own thread, about 4 times a second, and can be asked for a
// sample at once.
#include <QSignalSpy>
#include <QtTest>

#include <atomic>

#include "memory_sampler.h"

using cosmos::ui::MemorySampler;

class TestMemorySampler : public QObject {
  Q_OBJECT

 private slots:
  void samplesOffTheCallingThread() {
    MemorySampler sampler;
    std::atomic<QThread*> where{nullptr};
    connect(&sampler, &MemorySampler::sampled, &sampler,
            [&where](qint64, qint64, bool) { where = QThread::currentThread(); }, Qt::DirectConnection);
    QSignalSpy spy(&sampler, &MemorySampler::sampled);
    QVERIFY(spy.wait(10000));  // generous: a loaded CI machine, not a speed check
    QVERIFY(where.load() != nullptr);
    QVERIFY(where.load() != QThread::currentThread());
    const auto args = spy.takeFirst();
    QVERIFY(args.at(0).toLongLong() > 1024 * 1024);                 // this process's resident set
    QVERIFY(args.at(1).toLongLong() > args.at(0).toLongLong());     // the machine's RAM
    QCOMPARE(args.at(2).toBool(), false);                           // CPU reading by default
  }

  void keepsSamplingAndAnswersRequests() {
    MemorySampler sampler;
    QSignalSpy spy(&sampler, &MemorySampler::sampled);
    QTRY_VERIFY_WITH_TIMEOUT(spy.count() >= 3, 10000);  // periodic: 4 per second (timeout generous for loaded CI)
    const int before = spy.count();
    sampler.requestSample();
    QTRY_VERIFY_WITH_TIMEOUT(spy.count() > before, 5000);
  }

  void gpuWithoutAGpuFallsBackToTheProcess() {
    MemorySampler sampler;
    sampler.setGpu(true);  // no usable GPU on CI machines: the CPU reading comes instead
    QSignalSpy spy(&sampler, &MemorySampler::sampled);
    sampler.requestSample();
    QVERIFY(spy.wait(10000));  // generous: a loaded CI machine, not a speed check
    QVERIFY(spy.last().at(1).toLongLong() > 0);
  }
};

QTEST_GUILESS_MAIN(TestMemorySampler)
#include "test_memory_sampler.moc"
