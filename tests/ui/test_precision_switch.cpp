// Switching the precision while a conversation is open, end to end on the CPU backend: the real
// engine (makeRealChatEngine) on the tiny test model, ChatViewModel over a real ConversationStore,
// and the SettingsViewModel the app takes the precision from. One reply in bf16; then what the
// settings page does on a change (set the precision, reload with resolvedPrecision() and device
// "auto"); the model reloads in the new format (keeping its quantized weights on disk, as the
// setting asks), the conversation stays open and unchanged, and its next reply comes from the new
// model and records that precision. One row also switches the KV cache to int8 (the settings'
// "KV cache" box) in the same reload.
#include <QDir>
#include <QSignalSpy>
#include <QTemporaryDir>
#include <QtTest>

#include <filesystem>
#include <memory>

#include "chat_engine.h"
#include "chat_view_model.h"
#include "conversation_store.h"
#include "cosmos/test_model.h"
#include "engine_host.h"
#include "settings_view_model.h"

using cosmos::ui::ChatSettings;
using cosmos::ui::ChatViewModel;
using cosmos::ui::ConversationStore;
using cosmos::ui::EngineHost;
using cosmos::ui::SettingsViewModel;

namespace {

// Waits until the host leaves Loading (a load was just asked for).
bool waitLoaded(EngineHost& host) {
  QSignalSpy states(&host, &EngineHost::stateChanged);
  QElapsedTimer t;
  t.start();
  while (host.state() != EngineHost::Ready && host.state() != EngineHost::Failed && t.elapsed() < 120000)
    states.wait(1000);
  return host.state() == EngineHost::Ready;
}

QVariantMap optionNamed(const QVariantList& options, const QString& name) {
  for (const QVariant& v : options)
    if (v.toMap().value(QStringLiteral("name")) == name) return v.toMap();
  return {};
}

}  // namespace

class TestPrecisionSwitch : public QObject {
  Q_OBJECT

 private slots:
  void switchKeepsTheConversation_data() {
    QTest::addColumn<QString>("target");
    QTest::addColumn<QString>("kvCache");
    QTest::newRow("int8") << QStringLiteral("int8") << QStringLiteral("full");
    QTest::newRow("fp8") << QStringLiteral("fp8") << QStringLiteral("full");
    QTest::newRow("int4") << QStringLiteral("int4") << QStringLiteral("full");
    QTest::newRow("int4, int8 KV cache") << QStringLiteral("int4") << QStringLiteral("int8");
  }

  void switchKeepsTheConversation() {
    QFETCH(QString, target);
    QFETCH(QString, kvCache);
    const std::filesystem::path tokenizer = COSMOS_TEST_TOKENIZER;
    if (!std::filesystem::exists(tokenizer)) QSKIP("no test tokenizer (run packaging/setup.sh)");
    QTemporaryDir tmp;
    const QString modelDir = tmp.filePath(QStringLiteral("tiny"));
    cosmos::TestModelOptions o;
    o.preset = "tiny";
    o.seed = 1;
    o.shards = 1;
    o.tokenizer_json = tokenizer;
    o.out_dir = modelDir.toStdString();
    const auto made = cosmos::make_test_model(o);
    QVERIFY2(made.ok(), made.ok() ? "" : made.error().message.c_str());

    ConversationStore store;
    QVERIFY2(store.open(tmp.filePath(QStringLiteral("chat.sqlite"))), qPrintable(store.lastError()));
    EngineHost host(cosmos::ui::makeRealChatEngine());
    ChatViewModel vm(&host, &store);
    vm.setSettingsProvider([] {
      ChatSettings s;
      s.options.max_new_tokens = 8;
      s.options.sampling.temperature = 0.0f;
      return s;
    });
    SettingsViewModel settings(tmp.filePath(QStringLiteral("settings.ini")));
    QObject::connect(&host, &EngineHost::infoChanged, &settings, [&] { settings.setGpuInUse(host.onGpu()); });
    settings.setModelDir(modelDir);
    settings.setPrecision(QStringLiteral("bf16"));

    // bf16, one exchange.
    host.loadModel(modelDir, QStringLiteral("auto"), settings.resolvedPrecision(), 512);
    QVERIFY2(waitLoaded(host), qPrintable(host.errorText()));
    QCOMPARE(host.precision(), QStringLiteral("bf16"));
    QCOMPARE(host.kvCache(), QStringLiteral("full"));
    const qint64 bf16Bytes = host.weightBytes();
    const qint64 fullCacheBytes = host.kvCacheBytes();
    QSignalSpy finished(&host, &EngineHost::generationFinished);
    QVERIFY(vm.send(QStringLiteral("Describe the scene.")));
    QVERIFY(finished.wait(120000));
    QTRY_VERIFY(!vm.busy());
    QVERIFY2(vm.errorText().isEmpty(), qPrintable(vm.errorText()));
    QCOMPARE(vm.rowCount(), 2);
    const qint64 conversation = vm.conversationId();
    const qint64 firstReplyId = vm.data(vm.index(1), ChatViewModel::MessageIdRole).toLongLong();
    const auto firstReply = store.message(firstReplyId);
    QVERIFY(firstReply.has_value());
    QCOMPARE(firstReply->meta.value(QStringLiteral("precision")).toString(), QStringLiteral("bf16"));

    // The settings page: the target is offered on this device (on a GPU machine it loads on the
    // CPU, "auto" saying why), chosen, and the model reloads.
    QVERIFY(optionNamed(settings.precisionOptions(), target).value(QStringLiteral("enabled")).toBool());
    settings.setPrecision(target);
    QCOMPARE(settings.resolvedPrecision(), target);
    settings.setKvCache(kvCache);
    QCOMPARE(settings.resolvedKvCache(), kvCache);
    // With "keep quantized weights" on, the load leaves a cache file (in COSMOS_CACHE_DIR here).
    settings.setKeepQuantizedWeights(true);
    qputenv("COSMOS_CACHE_DIR", tmp.filePath(QStringLiteral("cache")).toUtf8());
    host.loadModel(modelDir, QStringLiteral("auto"), settings.resolvedPrecision(), 512, settings.keepQuantizedWeights(),
                   settings.resolvedKvCache());
    QVERIFY2(waitLoaded(host), qPrintable(host.errorText()));
    QCOMPARE(host.precision(), target);
    QCOMPARE(host.kvCache(), kvCache);
    QVERIFY(host.weightBytes() < bf16Bytes);
    // The int8 cache: 1 + 4 / 16 bytes per value on tiny against the CPU's fp32.
    if (kvCache == QLatin1String("int8"))
      QCOMPARE(host.kvCacheBytes() * 64, fullCacheBytes * 20);
    else
      QCOMPARE(host.kvCacheBytes(), fullCacheBytes);
    const QStringList cached = QDir(tmp.filePath(QStringLiteral("cache/quantized")))
                                   .entryList({QStringLiteral("*-") + target + QStringLiteral(".safetensors")});
    QCOMPARE(cached.size(), 1);

    // Same conversation, unchanged; the next reply comes from the new model.
    QCOMPARE(vm.conversationId(), conversation);
    QCOMPARE(vm.rowCount(), 2);
    QVERIFY(vm.send(QStringLiteral("And then?")));
    QVERIFY(finished.wait(120000));
    QTRY_VERIFY(!vm.busy());
    QVERIFY2(vm.errorText().isEmpty(), qPrintable(vm.errorText()));
    QCOMPARE(vm.rowCount(), 4);
    const auto secondReply = store.message(vm.data(vm.index(3), ChatViewModel::MessageIdRole).toLongLong());
    QVERIFY(secondReply.has_value());
    QCOMPARE(secondReply->meta.value(QStringLiteral("precision")).toString(), target);
    QVERIFY(secondReply->meta.value(QStringLiteral("stats")).toMap().value(QStringLiteral("generated_tokens")).toInt() > 0);
    const auto firstAgain = store.message(firstReplyId);
    QVERIFY(firstAgain.has_value());
    QCOMPARE(firstAgain->content, firstReply->content);
    QCOMPARE(firstAgain->meta.value(QStringLiteral("precision")).toString(), QStringLiteral("bf16"));
    const auto path = store.path(store.latestLeaf(conversation));
    QCOMPARE(path.size(), 4);
  }
};

QTEST_GUILESS_MAIN(TestPrecisionSwitch)
#include "test_precision_switch.moc"
