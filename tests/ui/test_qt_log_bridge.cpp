// Qt messages of every level reach the spdlog logger with their category and level.
#include <QLoggingCategory>
#include <QtTest>

#include <spdlog/sinks/ostream_sink.h>
#include <spdlog/spdlog.h>

#include <sstream>

#include "qt_log_bridge.h"

Q_LOGGING_CATEGORY(lcTest, "cosmos.test")

class TestQtLogBridge : public QObject {
  Q_OBJECT

 private slots:
  void init() {
    sink_stream_.str("");
    auto sink = std::make_shared<spdlog::sinks::ostream_sink_mt>(sink_stream_);
    sink->set_pattern("%l|%v");
    auto logger = std::make_shared<spdlog::logger>("test", sink);
    logger->set_level(spdlog::level::debug);
    spdlog::set_default_logger(logger);
    previous_ = cosmos::ui::install_qt_log_bridge();
  }
  void cleanup() { qInstallMessageHandler(previous_); }

  void routesEachLevel_data() {
    QTest::addColumn<int>("level");
    QTest::addColumn<QString>("expected");
    QTest::newRow("debug") << 0 << QStringLiteral("debug|[cosmos.test] hello 0");
    QTest::newRow("info") << 1 << QStringLiteral("info|[cosmos.test] hello 1");
    QTest::newRow("warning") << 2 << QStringLiteral("warning|[cosmos.test] hello 2");
    QTest::newRow("critical") << 3 << QStringLiteral("error|[cosmos.test] hello 3");
  }
  void routesEachLevel() {
    QFETCH(int, level);
    QFETCH(QString, expected);
    switch (level) {
      case 0: qCDebug(lcTest) << "hello" << level; break;
      case 1: qCInfo(lcTest) << "hello" << level; break;
      case 2: qCWarning(lcTest) << "hello" << level; break;
      default: qCCritical(lcTest) << "hello" << level; break;
    }
    spdlog::default_logger()->flush();
    QCOMPARE(QString::fromStdString(sink_stream_.str()).trimmed(), expected);
  }

  void keepsUnicode() {
    qCWarning(lcTest).noquote() << QStringLiteral("机器人 👍");
    spdlog::default_logger()->flush();
    QVERIFY(QString::fromStdString(sink_stream_.str()).contains(QStringLiteral("机器人 👍")));
  }

 private:
  std::ostringstream sink_stream_;
  QtMessageHandler previous_ = nullptr;
};

QTEST_GUILESS_MAIN(TestQtLogBridge)
#include "test_qt_log_bridge.moc"
