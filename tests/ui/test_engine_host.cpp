// EngineHost + EngineController on their worker thread, driven by the scripted FakeChatEngine:
// loading (progress, failure, cancel with and without a previous model), batching of a 1,000 tok/s
// stream, stats samples, stop, engine errors, and shutdown while generating.
#include <QElapsedTimer>
#include <QMetaProperty>
#include <QSignalSpy>
#include <QtTest>

#include "engine_controller.h"
#include "engine_host.h"
#include "engine_host_fixture.h"
#include "fake_chat_engine.h"

using cosmos::ui::EngineHost;
using namespace cosmos::ui::testing;

namespace {

std::vector<cosmos::ChatMessage> hello() { return {cosmos::ChatMessage::text("user", "hi")}; }

}  // namespace

class TestEngineHost : public QObject {
  Q_OBJECT

 private:
  std::shared_ptr<FakeScript> script_;

  std::unique_ptr<EngineHost> loadedHost() { return loadedFakeHost(script_); }

 private slots:
  void init() { script_ = std::make_shared<FakeScript>(); }

  void exposesTheDocumentedProperties() {
    EngineHost host(makeFakeEngine(script_));
    const QMetaObject* mo = host.metaObject();
    for (const char* name : {"state", "loadProgress", "modelDir", "deviceName", "precision", "deviceNote",
                             "errorText", "contextLimit", "weightBytes", "kvCacheBytes", "workspaceBytes", "onGpu"}) {
      const int i = mo->indexOfProperty(name);
      QVERIFY2(i >= 0, name);
      QVERIFY2(mo->property(i).hasNotifySignal(), name);
    }
    const QMetaEnum states = QMetaEnum::fromType<EngineHost::State>();
    QCOMPARE(states.keyCount(), 5);
    QCOMPARE(QByteArray(states.valueToKey(EngineHost::Generating)), QByteArray("Generating"));
    QCOMPARE(host.state(), EngineHost::NoModel);
    QCOMPARE(host.generate(hello(), {}), qint64(-1));
  }

  void loadReportsProgressAndInfo() {
    FakeLoad load;
    load.steps = 5;
    load.stepDelayMs = 5;
    script_->setLoad(load);
    EngineHost host(makeFakeEngine(script_));
    QList<double> progress;
    connect(&host, &EngineHost::loadProgressChanged, this, [&] { progress.append(host.loadProgress()); });
    QSignalSpy info(&host, &EngineHost::infoChanged);
    QSignalSpy states(&host, &EngineHost::stateChanged);
    host.loadModel(QStringLiteral("/models/a"), QStringLiteral("auto"), QStringLiteral("bf16"), 2048);
    QCOMPARE(host.state(), EngineHost::Loading);
    QCOMPARE(host.generate(hello(), {}), qint64(-1));  // not while loading
    QTRY_COMPARE(host.state(), EngineHost::Ready);
    QCOMPARE(info.count(), 1);
    QVERIFY(progress.size() >= 3);
    for (int i = 1; i < progress.size(); ++i) QVERIFY(progress[i] >= progress[i - 1]);
    QCOMPARE(progress.last(), 1.0);
    QCOMPARE(host.modelDir(), QStringLiteral("/models/a"));
    QCOMPARE(host.deviceName(), QStringLiteral("Fake CPU (2 threads)"));
    QCOMPARE(host.deviceNote(), QStringLiteral("using the CPU: the fake has no GPU"));
    QCOMPARE(host.contextLimit(), 4096);
    QCOMPARE(host.weightBytes(), qint64(1000000));
    QVERIFY(host.errorText().isEmpty());
    QVERIFY(host.hasModel());
  }

  void loadFailure_data() {
    QTest::addColumn<bool>("previous");
    QTest::addColumn<int>("expectedState");
    QTest::newRow("no model before") << false << int(EngineHost::Failed);
    QTest::newRow("a model before") << true << int(EngineHost::Ready);
  }
  void loadFailure() {
    QFETCH(bool, previous);
    QFETCH(int, expectedState);
    auto host = previous ? loadedHost() : std::make_unique<EngineHost>(makeFakeEngine(script_));
    FakeLoad bad;
    bad.error = QStringLiteral("config.json: missing \"hidden_size\"");
    script_->setLoad(bad);
    host->loadModel(QStringLiteral("/models/broken"));
    QTRY_VERIFY(host->state() != EngineHost::Loading);
    QCOMPARE(int(host->state()), expectedState);
    QVERIFY2(host->errorText().startsWith(bad.error), qPrintable(host->errorText()));
    QCOMPARE(host->modelDir(), previous ? QStringLiteral("/models/first") : QString());
    if (previous) QVERIFY(host->errorText().contains(QStringLiteral("still loaded")));
    host->clearError();
    QVERIFY(host->errorText().isEmpty());
  }

  void cancelLoad_data() {
    QTest::addColumn<bool>("previous");
    QTest::addColumn<int>("expectedState");
    QTest::newRow("no model before") << false << int(EngineHost::NoModel);
    QTest::newRow("a model before") << true << int(EngineHost::Ready);
  }
  void cancelLoad() {
    QFETCH(bool, previous);
    QFETCH(int, expectedState);
    auto host = previous ? loadedHost() : std::make_unique<EngineHost>(makeFakeEngine(script_));
    FakeLoad slow;
    slow.steps = 400;
    slow.stepDelayMs = 5;  // 2 s if never cancelled
    script_->setLoad(slow);
    QSignalSpy progress(host.get(), &EngineHost::loadProgressChanged);
    QElapsedTimer t;
    t.start();
    host->loadModel(QStringLiteral("/models/slow"));
    QTRY_VERIFY(host->loadProgress() > 0);
    host->cancelLoad();
    QTRY_VERIFY(host->state() != EngineHost::Loading);
    QVERIFY(t.elapsed() < 1500);
    QCOMPARE(int(host->state()), expectedState);
    QVERIFY2(host->errorText().contains(QStringLiteral("cancelled")), qPrintable(host->errorText()));
    QCOMPARE(host->modelDir(), previous ? QStringLiteral("/models/first") : QString());
    QCOMPARE(host->hasModel(), previous);
  }

  // 2,000 pieces at 1 ms (a 1,000 tok/s stream) arrive in ~30 batches a second, all of the text,
  // every batch before generationFinished.
  void burstIsBatched() {
    auto host = loadedHost();
    FakeStream burst;
    QString expected;
    burst.pieces.clear();
    for (int i = 0; i < 2000; ++i) {
      burst.pieces.append(QStringLiteral("t%1 ").arg(i));
      expected += burst.pieces.last();
    }
    burst.delayMs = 1;
    script_->pushStream(burst);
    QString received;
    int batches = 0;
    bool finished = false, batchAfterFinish = false;
    connect(host.get(), &EngineHost::piecesReady, this, [&](qint64, const QString& text) {
      received += text;
      ++batches;
      batchAfterFinish = batchAfterFinish || finished;
    });
    QSignalSpy done(host.get(), &EngineHost::generationFinished);
    QElapsedTimer t;
    t.start();
    const qint64 id = host->generate(hello(), {});
    QVERIFY(id > 0);
    QCOMPARE(host->state(), EngineHost::Generating);
    QVERIFY(done.wait(20000));
    finished = true;
    const double seconds = t.elapsed() / 1000.0;
    QCOMPARE(done.first().at(0).toLongLong(), id);
    QCOMPARE(received, expected);
    QVERIFY2(batches >= 40 && batches <= 120, qPrintable(QString::number(batches)));
    QVERIFY2(batches <= seconds * 1000.0 / cosmos::ui::EngineController::kBatchIntervalMs + 2,
             qPrintable(QStringLiteral("%1 batches in %2 s").arg(batches).arg(seconds)));
    QCoreApplication::processEvents();
    QVERIFY(!batchAfterFinish);
    QCOMPARE(host->state(), EngineHost::Ready);
  }

  void statsSamplesAtMostFourPerSecond() {
    auto host = loadedHost();
    FakeStream s;
    s.pieces = QStringList(100, QStringLiteral("x"));
    s.delayMs = 10;  // ~1 s
    script_->pushStream(s);
    QSignalSpy samples(host.get(), &EngineHost::statsSample);
    QSignalSpy done(host.get(), &EngineHost::generationFinished);
    QElapsedTimer t;
    t.start();
    host->generate(hello(), {});
    QVERIFY(done.wait(10000));
    const double seconds = t.elapsed() / 1000.0;
    QVERIFY(samples.count() >= 2);
    QVERIFY2(samples.count() <= seconds * 4 + 1, qPrintable(QString::number(samples.count())));
    const QVariantMap sample = samples.last().at(0).toMap();
    QVERIFY(sample.value(QStringLiteral("tokens_per_s")).toDouble() > 10);
    QVERIFY(sample.value(QStringLiteral("generated_tokens")).toInt() > 0);
    QVERIFY(sample.value(QStringLiteral("context_used")).toInt() > 12);
  }

  void finishedCarriesTheStats() {
    auto host = loadedHost();
    FakeStream s;
    s.pieces = {QStringLiteral("a"), QStringLiteral("b"), QStringLiteral("c")};
    s.promptTokens = 40;
    script_->pushStream(s);
    QSignalSpy done(host.get(), &EngineHost::generationFinished);
    host->generate(hello(), {});
    QVERIFY(done.wait(5000));
    const QVariantMap stats = done.first().at(1).toMap();
    for (const char* key : {"prompt_tokens", "reused_tokens", "generated_tokens", "ttft_s", "prefill_tok_per_s",
                            "decode_tok_per_s", "stop_reason"})
      QVERIFY2(stats.contains(QString::fromLatin1(key)), key);
    QCOMPARE(stats.value(QStringLiteral("prompt_tokens")).toInt(), 40);
    QCOMPARE(stats.value(QStringLiteral("reused_tokens")).toInt(), 20);
    QCOMPARE(stats.value(QStringLiteral("generated_tokens")).toInt(), 3);
    QCOMPARE(stats.value(QStringLiteral("stop_reason")).toString(), QStringLiteral("eos"));
    QCOMPARE(stats.value(QStringLiteral("context_used")).toInt(), 43);
  }

  void stopEndsTheStream() {
    auto host = loadedHost();
    FakeStream endless;
    endless.pieces = {QStringLiteral("la ")};
    endless.delayMs = 1;
    endless.untilStopped = true;
    script_->pushStream(endless);
    QSignalSpy pieces(host.get(), &EngineHost::piecesReady);
    QSignalSpy done(host.get(), &EngineHost::generationFinished);
    host->generate(hello(), {});
    QVERIFY(pieces.wait(5000));
    host->stop();
    QVERIFY(done.wait(5000));
    QCOMPARE(done.first().at(1).toMap().value(QStringLiteral("stop_reason")).toString(), QStringLiteral("cancelled"));
    QCOMPARE(host->state(), EngineHost::Ready);
    // The next request is not stopped by the old flag.
    script_->pushStream(FakeStream{});
    done.clear();
    host->generate(hello(), {});
    QVERIFY(done.wait(5000));
    QCOMPARE(done.first().at(1).toMap().value(QStringLiteral("stop_reason")).toString(), QStringLiteral("eos"));
  }

  void engineErrorArrivesAsItsSentence() {
    auto host = loadedHost();
    FakeStream failing;
    failing.pieces = {QStringLiteral("one "), QStringLiteral("two "), QStringLiteral("three "), QStringLiteral("four")};
    failing.failAfter = 2;
    script_->pushStream(failing);
    QString received;
    connect(host.get(), &EngineHost::piecesReady, this, [&](qint64, const QString& text) { received += text; });
    QSignalSpy failed(host.get(), &EngineHost::generationFailed);
    QSignalSpy done(host.get(), &EngineHost::generationFinished);
    const qint64 id = host->generate(hello(), {});
    QVERIFY(failed.wait(5000));
    QCOMPARE(failed.first().at(0).toLongLong(), id);
    QCOMPARE(failed.first().at(1).toString(), failing.error);
    QCOMPARE(received, QStringLiteral("one two "));  // flushed before the failure
    QCOMPARE(done.count(), 0);
    QCOMPARE(host->state(), EngineHost::Ready);
  }

  void loadWhileGeneratingStopsTheReplyFirst() {
    auto host = loadedHost();
    FakeStream endless;
    endless.pieces = {QStringLiteral("x")};
    endless.delayMs = 1;
    endless.untilStopped = true;
    script_->pushStream(endless);
    QSignalSpy pieces(host.get(), &EngineHost::piecesReady);
    QSignalSpy done(host.get(), &EngineHost::generationFinished);
    host->generate(hello(), {});
    QVERIFY(pieces.wait(5000));
    host->loadModel(QStringLiteral("/models/second"));
    QCOMPARE(host->state(), EngineHost::Loading);
    QVERIFY(done.wait(5000));
    QTRY_COMPARE(host->state(), EngineHost::Ready);
    QCOMPARE(host->modelDir(), QStringLiteral("/models/second"));
    QCOMPARE(script_->loads.load(), 2);
  }

  void destructorStopsAGeneration() {
    auto host = loadedHost();
    FakeStream endless;
    endless.pieces = {QStringLiteral("x")};
    endless.delayMs = 1;
    endless.untilStopped = true;
    script_->pushStream(endless);
    QSignalSpy pieces(host.get(), &EngineHost::piecesReady);
    host->generate(hello(), {});
    QVERIFY(pieces.wait(5000));
    QElapsedTimer t;
    t.start();
    host.reset();
    QVERIFY(t.elapsed() < 1000);
  }
};

QTEST_GUILESS_MAIN(TestEngineHost)
#include "test_engine_host.moc"
