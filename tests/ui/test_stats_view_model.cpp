// StatsViewModel: what is loaded comes from EngineHost, speed samples fill a capped history, a
// finished reply sets ttft/prefill/decode, memory comes from /proc/self/statm and sysconf.
#include <QMetaProperty>
#include <QSignalSpy>
#include <QtTest>

#include "engine_host.h"
#include "fake_chat_engine.h"
#include "stats_view_model.h"

using cosmos::ui::EngineHost;
using cosmos::ui::StatsViewModel;
using namespace cosmos::ui::testing;

class TestStatsViewModel : public QObject {
  Q_OBJECT

 private slots:
  void exposesTheDocumentedProperties() {
    StatsViewModel stats(nullptr);
    const QMetaObject* mo = stats.metaObject();
    for (const char* name : {"deviceName", "precision", "onGpu", "memoryUsed", "memoryTotal", "weightBytes",
                             "kvCacheBytes", "workspaceBytes", "otherBytes", "tokensPerSecond", "history", "ttft",
                             "prefillSpeed", "decodeSpeed", "contextUsed", "contextLimit"}) {
      const int i = mo->indexOfProperty(name);
      QVERIFY2(i >= 0, name);
      QVERIFY2(mo->property(i).hasNotifySignal(), name);
    }
  }

  void memoryComesFromTheProcess() {
    StatsViewModel stats(nullptr);
    QVERIFY(stats.memoryUsed() > 1024 * 1024);           // a Qt process is at least a megabyte
    QVERIFY(stats.memoryTotal() > stats.memoryUsed());
    QCOMPARE(stats.otherBytes(), stats.memoryUsed());   // no model: everything is "other"
    // Touch 64 MiB: the resident set grows by about that much.
    const qint64 before = StatsViewModel::processResidentBytes();
    std::vector<char> block(64 << 20, 1);
    const qint64 after = StatsViewModel::processResidentBytes();
    QVERIFY(block.back() == 1);
    QVERIFY2(after - before > (48 << 20), qPrintable(QString::number(after - before)));
    QSignalSpy memory(&stats, &StatsViewModel::memoryChanged);
    stats.refreshMemory();
    QCOMPARE(memory.count(), 1);
  }

  void infoFollowsTheHost() {
    auto script = std::make_shared<FakeScript>();
    EngineHost host(makeFakeEngine(script));
    StatsViewModel stats(&host);
    QSignalSpy info(&stats, &StatsViewModel::infoChanged);
    host.loadModel(QStringLiteral("/models/a"));
    QVERIFY(info.wait(5000));
    const cosmos::ui::EngineInfo expected = FakeLoad::defaultInfo();
    QCOMPARE(stats.deviceName(), expected.deviceName);
    QCOMPARE(stats.precision(), QStringLiteral("bf16"));
    QCOMPARE(stats.onGpu(), false);
    QCOMPARE(stats.weightBytes(), qint64(expected.weightBytes));
    QCOMPARE(stats.kvCacheBytes(), qint64(expected.kvCacheBytes));
    QCOMPARE(stats.workspaceBytes(), qint64(expected.workspaceBytes));
    QCOMPARE(stats.contextLimit(), 4096);
    QCOMPARE(stats.otherBytes(),
             std::max<qint64>(0, stats.memoryUsed() - qint64(expected.weightBytes + expected.kvCacheBytes +
                                                              expected.workspaceBytes)));

    // A reply: samples while it streams, the reply's stats at the end.
    FakeStream s;
    s.pieces = QStringList(60, QStringLiteral("x"));
    s.delayMs = 10;
    script->pushStream(s);
    QSignalSpy speed(&stats, &StatsViewModel::speedChanged);
    QSignalSpy reply(&stats, &StatsViewModel::lastReplyChanged);
    QTRY_COMPARE(host.state(), EngineHost::Ready);
    host.generate({cosmos::ChatMessage::text("user", "hi")}, {});
    QVERIFY(reply.wait(5000));
    QVERIFY(speed.count() >= 2);
    QVERIFY(!stats.history().isEmpty());
    QVERIFY(stats.history().first().toDouble() > 0);
    QCOMPARE(stats.ttft(), 0.01);
    QCOMPARE(stats.prefillSpeed(), 500.0);
    QVERIFY(stats.decodeSpeed() > 0);
    QCOMPARE(stats.contextUsed(), 12 + 60);
    QCOMPARE(stats.tokensPerSecond(), 0.0);  // idle again
  }

  void historyKeepsTheLastMinute_data() {
    QTest::addColumn<int>("samples");
    QTest::addColumn<int>("expected");
    QTest::newRow("few") << 10 << 10;
    QTest::newRow("exactly a minute") << 240 << 240;
    QTest::newRow("more") << 1000 << 240;
  }
  void historyKeepsTheLastMinute() {
    QFETCH(int, samples);
    QFETCH(int, expected);
    StatsViewModel stats(nullptr);
    for (int i = 0; i < samples; ++i)
      stats.onSample({{QStringLiteral("tokens_per_s"), double(i)},
                      {QStringLiteral("generated_tokens"), i},
                      {QStringLiteral("context_used"), 100 + i}});
    const QVariantList h = stats.history();
    QCOMPARE(h.size(), expected);
    QCOMPARE(h.last().toDouble(), double(samples - 1));
    QCOMPARE(h.first().toDouble(), double(samples - expected));
    QCOMPARE(stats.tokensPerSecond(), double(samples - 1));
    QCOMPARE(stats.contextUsed(), 100 + samples - 1);
    stats.clearHistory();
    QVERIFY(stats.history().isEmpty());
  }
};

QTEST_GUILESS_MAIN(TestStatsViewModel)
#include "test_stats_view_model.moc"
