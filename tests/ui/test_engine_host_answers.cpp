// EngineHost::generateMany ("Generate N answers") through EngineController on its worker thread,
// driven by the FakeChatEngine's scripted batches: each answer's text batched on its own (at most
// ~30 signals a second per answer, in order, all of it), on the GUI thread; an answer's restart
// voiding its text; answers ending one by one (finished / failed) before the request's
// generationFinished; stop cancelling every answer; refused without a model.
#include <QElapsedTimer>
#include <QSignalSpy>
#include <QThread>
#include <QtTest>

#include <map>

#include "engine_controller.h"
#include "engine_host.h"
#include "engine_host_fixture.h"
#include "fake_chat_engine.h"

using cosmos::ui::EngineHost;
using namespace cosmos::ui::testing;

namespace {

std::vector<cosmos::ChatMessage> hello() { return {cosmos::ChatMessage::text("user", "hi")}; }

// What arrived for each answer of one request.
struct Received {
  std::map<int, QString> text;        // since the last restart
  std::map<int, int> batches;
  std::map<int, int> restarts;
  std::map<int, QVariantMap> finished;
  std::map<int, QString> failed;
  QList<int> endOrder;                // answers in the order they ended
  bool requestEnded = false;
  bool signalAfterEnd = false;        // an answer signal after generationFinished
  bool offGuiThread = false;
  qint64 otherRequest = 0;            // signals for another request id
};

void record(EngineHost* host, QObject* context, qint64& id, Received& r) {
  auto check = [&r, &id](qint64 requestId) {
    if (requestId != id) ++r.otherRequest;
    if (r.requestEnded) r.signalAfterEnd = true;
    if (QThread::currentThread() != QCoreApplication::instance()->thread()) r.offGuiThread = true;
  };
  QObject::connect(host, &EngineHost::answerPiecesReady, context, [&r, check](qint64 rid, int a, const QString& t) {
    check(rid);
    r.text[a] += t;
    ++r.batches[a];
  });
  QObject::connect(host, &EngineHost::answerRestarted, context, [&r, check](qint64 rid, int a) {
    check(rid);
    r.text[a].clear();
    ++r.restarts[a];
  });
  QObject::connect(host, &EngineHost::answerFinished, context, [&r, check](qint64 rid, int a, const QVariantMap& s) {
    check(rid);
    r.finished[a] = s;
    r.endOrder << a;
  });
  QObject::connect(host, &EngineHost::answerFailed, context, [&r, check](qint64 rid, int a, const QString& m) {
    check(rid);
    r.failed[a] = m;
    r.endOrder << a;
  });
  QObject::connect(host, &EngineHost::generationFinished, context, [&r](qint64, const QVariantMap&) { r.requestEnded = true; });
}

}  // namespace

class TestEngineHostAnswers : public QObject {
  Q_OBJECT

 private:
  std::shared_ptr<FakeScript> script_;

  std::unique_ptr<EngineHost> loadedHost() { return loadedFakeHost(script_); }

 private slots:
  void init() { script_ = std::make_shared<FakeScript>(); }

  void refusedWithoutAModelOrAnswers() {
    EngineHost host(makeFakeEngine(script_));
    QCOMPARE(host.generateMany(hello(), {}, 3), qint64(-1));
    auto loaded = loadedHost();
    QCOMPARE(loaded->generateMany(hello(), {}, 0), qint64(-1));
    QCOMPARE(loaded->state(), EngineHost::Ready);
  }

  // 3 answers of 300 pieces each, 1 ms a round (3,000 tok/s over all): each answer's text arrives
  // whole and in order, batched (not a signal per piece), on the GUI thread.
  void answersAreBatchedEachOnItsOwn() {
    auto host = loadedHost();
    const int n = 3, pieces = 300;
    FakeBatch b;
    b.delayMs = 1;
    std::map<int, QString> expected;
    for (int i = 0; i < n; ++i) {
      FakeAnswer a;
      for (int k = 0; k < pieces; ++k) a.pieces << QStringLiteral("%1:%2 ").arg(i).arg(k);
      expected[i] = a.pieces.join(QString());
      b.answers.push_back(a);
    }
    b.promptTokens = 30;
    script_->pushBatch(b);
    qint64 id = 0;
    Received r;
    record(host.get(), this, id, r);
    QSignalSpy done(host.get(), &EngineHost::generationFinished);
    QElapsedTimer t;
    t.start();
    cosmos::GenerateOptions options;
    options.sampling.seed = 77;
    id = host->generateMany(hello(), options, n);
    QVERIFY(id > 0);
    QCOMPARE(host->state(), EngineHost::Generating);
    QVERIFY(done.wait(20000));
    const double seconds = t.elapsed() / 1000.0;
    QCOMPARE(done.first().at(0).toLongLong(), id);
    QCOMPARE(host->state(), EngineHost::Ready);
    QVERIFY(!r.offGuiThread);
    QCOMPARE(r.otherRequest, 0);
    QCoreApplication::processEvents();
    QVERIFY(!r.signalAfterEnd);
    for (int i = 0; i < n; ++i) {
      QCOMPARE(r.text[i], expected[i]);
      QVERIFY2(r.batches[i] >= 2 && r.batches[i] <= seconds * 1000.0 / cosmos::ui::EngineController::kBatchIntervalMs + 2,
               qPrintable(QStringLiteral("answer %1: %2 batches in %3 s").arg(i).arg(r.batches[i]).arg(seconds)));
      QCOMPARE(r.finished[i].value(QStringLiteral("stop_reason")).toString(), QStringLiteral("eos"));
      QCOMPARE(r.finished[i].value(QStringLiteral("generated_tokens")).toInt(), pieces);
      QCOMPARE(r.finished[i].value(QStringLiteral("prompt_tokens")).toInt(), 30);
    }
    QCOMPARE(r.endOrder.size(), n);
    const QVariantMap total = done.first().at(1).toMap();
    QCOMPARE(total.value(QStringLiteral("answers")).toInt(), n);
    QCOMPARE(total.value(QStringLiteral("generated_tokens")).toInt(), n * pieces);
    QVERIFY(total.value(QStringLiteral("decode_tok_per_s")).toDouble() > 0);
    QCOMPARE(total.value(QStringLiteral("stop_reason")).toString(), QStringLiteral("none"));
    // The engine got the options as given (it derives each answer's seed) and n.
    QCOMPARE(script_->batchSizes(), std::vector<int>{n});
    QCOMPARE(script_->batchOptions().at(0).sampling.seed, std::uint64_t(77));
  }

  // Answer 0 restarts after 2 pieces (its text so far was sent: 45 ms rounds); answer 1 fails
  // after 1 piece; answer 2 finishes. Each ends once, the request after them.
  void restartAndFailureAreReportedPerAnswer() {
    auto host = loadedHost();
    FakeBatch b;
    b.delayMs = 45;
    FakeAnswer restarting;
    restarting.pieces = {QStringLiteral("r1"), QStringLiteral("r2"), QStringLiteral("r3")};
    restarting.restartAfter = 2;
    FakeAnswer failing;
    failing.pieces = {QStringLiteral("f1"), QStringLiteral("f2")};
    failing.failAfter = 1;
    failing.error = QStringLiteral("no KV memory for this answer");
    FakeAnswer fine;
    fine.pieces = {QStringLiteral("g1"), QStringLiteral("g2")};
    b.answers = {restarting, failing, fine};
    script_->pushBatch(b);
    qint64 id = 0;
    Received r;
    record(host.get(), this, id, r);
    QSignalSpy done(host.get(), &EngineHost::generationFinished);
    QSignalSpy failedRequest(host.get(), &EngineHost::generationFailed);
    id = host->generateMany(hello(), {}, 3);
    QVERIFY(done.wait(10000));
    QCOMPARE(failedRequest.count(), 0);
    QCOMPARE(r.restarts[0], 1);
    QVERIFY(r.batches[0] >= 3);  // text before the restart was sent, then voided
    QCOMPARE(r.text[0], QStringLiteral("r1r2r3"));
    QCOMPARE(r.finished[0].value(QStringLiteral("stop_reason")).toString(), QStringLiteral("eos"));
    QCOMPARE(r.failed[1], failing.error);
    QVERIFY(!r.finished.count(1));
    QCOMPARE(r.text[1], QStringLiteral("f1"));  // flushed before the failure
    QCOMPARE(r.text[2], QStringLiteral("g1g2"));
    QCOMPARE(r.restarts.count(2), std::size_t(0));
    QCOMPARE(r.endOrder, (QList<int>{1, 2, 0}));
    QVERIFY(!r.signalAfterEnd);
    QCOMPARE(host->state(), EngineHost::Ready);
  }

  void stopCancelsEveryAnswer() {
    auto host = loadedHost();
    FakeBatch b;
    b.delayMs = 1;
    for (int i = 0; i < 4; ++i) {
      FakeAnswer a;
      a.pieces = {QStringLiteral("%1 ").arg(i)};
      a.untilStopped = true;
      b.answers.push_back(a);
    }
    script_->pushBatch(b);
    qint64 id = 0;
    Received r;
    record(host.get(), this, id, r);
    QSignalSpy done(host.get(), &EngineHost::generationFinished);
    id = host->generateMany(hello(), {}, 4);
    QTRY_VERIFY(r.batches[0] > 0 && r.batches[3] > 0);
    host->stop();
    QVERIFY(done.wait(5000));
    QCOMPARE(done.first().at(1).toMap().value(QStringLiteral("stop_reason")).toString(), QStringLiteral("cancelled"));
    for (int i = 0; i < 4; ++i) {
      QCOMPARE(r.finished[i].value(QStringLiteral("stop_reason")).toString(), QStringLiteral("cancelled"));
      QVERIFY(r.text[i].startsWith(QStringLiteral("%1 ").arg(i)));
      QCOMPARE(r.text[i], QStringLiteral("%1 ").arg(i).repeated(r.finished[i].value(QStringLiteral("generated_tokens")).toInt()));
    }
    QCOMPARE(host->state(), EngineHost::Ready);
    // The next request is not stopped by the old flag.
    script_->pushStream(FakeStream{});
    done.clear();
    host->generate(hello(), {});
    QVERIFY(done.wait(5000));
    QCOMPARE(done.first().at(1).toMap().value(QStringLiteral("stop_reason")).toString(), QStringLiteral("eos"));
  }
};

QTEST_GUILESS_MAIN(TestEngineHostAnswers)
#include "test_engine_host_answers.moc"
