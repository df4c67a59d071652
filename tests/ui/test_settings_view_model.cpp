// SettingsViewModel: defaults, persistence through QSettings, clamping, the model-folder check,
// the precision estimates and the demo model.
#include <QFile>
#include <QSignalSpy>
#include <QTemporaryDir>
#include <QtTest>

#include <filesystem>

#include "cosmos/chat_format.h"
#include "cosmos/test_model.h"
#include "settings_view_model.h"

using cosmos::ui::SettingsViewModel;

// QSKIP returns from the calling function, so this is a macro.
#define REQUIRE_TINY() \
  if (!haveTiny_) QSKIP("test tokenizer missing: run packaging/setup.sh")

namespace {

QVariantMap optionNamed(const QVariantList& options, const QString& name) {
  for (const QVariant& v : options)
    if (v.toMap().value(QStringLiteral("name")).toString() == name) return v.toMap();
  return {};
}
}  // namespace

class TestSettingsViewModel : public QObject {
  Q_OBJECT

 private slots:
  void initTestCase() {
    QVERIFY(tmp_.isValid());
    // AppDataLocation (the demo model) goes under the temporary folder.
    qputenv("XDG_DATA_HOME", tmp_.filePath(QStringLiteral("data")).toUtf8());
    QCoreApplication::setApplicationName(QStringLiteral("cosmos-chat-test"));
    tinyModel_ = tmp_.filePath(QStringLiteral("tiny"));
    if (!QFile::exists(QStringLiteral(COSMOS_TEST_TOKENIZER))) return;  // tests needing it skip
    cosmos::TestModelOptions o;
    o.preset = "tiny";
    o.seed = 1;
    o.shards = 1;
    o.tokenizer_json = COSMOS_TEST_TOKENIZER;
    o.out_dir = tinyModel_.toStdString();
    const auto st = cosmos::make_test_model(o);
    QVERIFY2(st.ok(), st.ok() ? "" : st.error().message.c_str());
    haveTiny_ = true;
  }

  void init() { ini_ = tmp_.filePath(QStringLiteral("settings-%1.ini").arg(++iniCounter_)); }

  void defaults() {
    SettingsViewModel s(ini_);
    QCOMPARE(s.modelDir(), QString());
    QCOMPARE(s.precision(), QStringLiteral("auto"));
    QCOMPARE(s.contextLength(), 8192);
    QCOMPARE(s.temperature(), 0.6);
    QCOMPARE(s.topP(), 0.95);
    QCOMPARE(s.topK(), 0);
    QCOMPARE(s.repetitionPenalty(), 1.05);
    QCOMPARE(s.maxNewTokens(), 4096);
    QCOMPARE(s.seed(), qint64(-1));
    QCOMPARE(s.systemPrompt(), QString::fromUtf8(cosmos::kReasoningSystemPrompt));
    QVERIFY(s.systemPrompt().contains(QStringLiteral("<think>")));
    QCOMPARE(s.theme(), QStringLiteral("system"));
    QCOMPARE(s.fontSize(), SettingsViewModel::kDefaultFontSize);
    QVERIFY(!s.modelIsDemo());
    QVERIFY(!s.keepQuantizedWeights());  // off unless asked: the files are large
    QCOMPARE(s.kvCache(), QStringLiteral("full"));
    QCOMPARE(s.resolvedKvCache(), QStringLiteral("full"));
  }

  void persists_data() {
    QTest::addColumn<QByteArray>("property");
    QTest::addColumn<QVariant>("value");
    QTest::newRow("modelDir") << QByteArray("modelDir") << QVariant(QStringLiteral("/models/Cosmos-Reason1-7B"));
    QTest::newRow("precision") << QByteArray("precision") << QVariant(QStringLiteral("int4"));
    QTest::newRow("contextLength") << QByteArray("contextLength") << QVariant(32768);
    QTest::newRow("temperature") << QByteArray("temperature") << QVariant(0.0);
    QTest::newRow("topP") << QByteArray("topP") << QVariant(0.5);
    QTest::newRow("topK") << QByteArray("topK") << QVariant(40);
    QTest::newRow("repetitionPenalty") << QByteArray("repetitionPenalty") << QVariant(1.2);
    QTest::newRow("maxNewTokens") << QByteArray("maxNewTokens") << QVariant(128);
    QTest::newRow("seed") << QByteArray("seed") << QVariant(qint64(1234567890123));
    QTest::newRow("systemPrompt") << QByteArray("systemPrompt") << QVariant(QStringLiteral("Réponds en français.\nMerci"));
    QTest::newRow("empty systemPrompt") << QByteArray("systemPrompt") << QVariant(QString());
    QTest::newRow("theme") << QByteArray("theme") << QVariant(QStringLiteral("dark"));
    QTest::newRow("fontSize") << QByteArray("fontSize") << QVariant(14);
    QTest::newRow("keepQuantizedWeights") << QByteArray("keepQuantizedWeights") << QVariant(true);
    QTest::newRow("kvCache") << QByteArray("kvCache") << QVariant(QStringLiteral("int8"));
  }
  void persists() {
    QFETCH(QByteArray, property);
    QFETCH(QVariant, value);
    {
      SettingsViewModel s(ini_);
      const int idx = s.metaObject()->indexOfProperty(property.constData());
      QVERIFY(idx >= 0);
      QSignalSpy spy(&s, s.metaObject()->property(idx).notifySignal());
      QVERIFY(s.setProperty(property.constData(), value));
      QCOMPARE(s.property(property.constData()), value);
      QCOMPARE(spy.count(), 1);
      QVERIFY(s.setProperty(property.constData(), value));  // same value: no second signal
      QCOMPARE(spy.count(), 1);
    }
    SettingsViewModel reopened(ini_);
    QCOMPARE(reopened.property(property.constData()), value);
  }

  void rejectsAndClamps() {
    SettingsViewModel s(ini_);
    s.setPrecision(QStringLiteral("fp4"));
    QCOMPARE(s.precision(), QStringLiteral("auto"));
    s.setTheme(QStringLiteral("purple"));
    QCOMPARE(s.theme(), QStringLiteral("system"));
    s.setTemperature(-1);
    QCOMPARE(s.temperature(), 0.0);
    s.setTopP(0);
    QVERIFY(s.topP() > 0);
    s.setTopK(-5);
    QCOMPARE(s.topK(), 0);
    s.setMaxNewTokens(0);
    QCOMPARE(s.maxNewTokens(), 1);
    s.setSeed(-7);
    QCOMPARE(s.seed(), qint64(-1));
    s.setFontSize(100);
    QCOMPARE(s.fontSize(), 24);
    s.setContextLength(3);
    QCOMPARE(s.contextLength(), 256);
  }

  void resetsSamplingAndPrompt() {
    SettingsViewModel s(ini_);
    s.setTemperature(1.5);
    s.setTopK(7);
    s.setSeed(3);
    s.setSystemPrompt(QStringLiteral("x"));
    s.resetSampling();
    s.resetSystemPrompt();
    QCOMPARE(s.temperature(), 0.6);
    QCOMPARE(s.topK(), 0);
    QCOMPARE(s.seed(), qint64(-1));
    QCOMPARE(s.systemPrompt(), SettingsViewModel::defaultSystemPrompt());
    const QVariantList presets = s.systemPromptPresets();
    QVERIFY(presets.size() >= 3);
    QCOMPARE(presets.front().toMap().value(QStringLiteral("text")).toString(), SettingsViewModel::defaultSystemPrompt());
  }

  void generateOptions() {
    SettingsViewModel s(ini_);
    s.setTemperature(0.7);
    s.setTopP(0.9);
    s.setTopK(20);
    s.setRepetitionPenalty(1.1);
    s.setMaxNewTokens(99);
    s.setSeed(42);
    const cosmos::GenerateOptions o = s.generateOptions();
    QCOMPARE(o.sampling.temperature, 0.7f);
    QCOMPARE(o.sampling.top_p, 0.9f);
    QCOMPARE(o.sampling.top_k, 20);
    QCOMPARE(o.sampling.repetition_penalty, 1.1f);
    QCOMPARE(o.sampling.seed, std::uint64_t(42));
    QCOMPARE(o.max_new_tokens, 99);
    s.setSeed(-1);
    QVERIFY(s.generateOptions().sampling.seed != s.generateOptions().sampling.seed);
  }

  void validateMissingFolder() {
    SettingsViewModel s(ini_);
    QVERIFY(s.validateModelDir(QString()).contains(QStringLiteral("Choose")));
    const QString missing = tmp_.filePath(QStringLiteral("nope"));
    QCOMPARE(s.validateModelDir(missing), QStringLiteral("The folder %1 does not exist.").arg(missing));
  }

  void validateMissingConfig() {
    SettingsViewModel s(ini_);
    const QString dir = tmp_.filePath(QStringLiteral("empty"));
    QVERIFY(QDir().mkpath(dir));
    const QString msg = s.validateModelDir(dir);
    QVERIFY2(msg.contains(QStringLiteral("no config.json")), qPrintable(msg));
    // A file URL (what FolderDialog gives) is understood too.
    QCOMPARE(s.validateModelDir(QUrl::fromLocalFile(dir).toString()), msg);
  }

  void validateBadConfig() {
    SettingsViewModel s(ini_);
    const QString dir = tmp_.filePath(QStringLiteral("badconfig"));
    QVERIFY(QDir().mkpath(dir));
    QFile f(dir + QStringLiteral("/config.json"));
    QVERIFY(f.open(QIODevice::WriteOnly));
    f.write("{\"model_type\": ");
    f.close();
    const QString msg = s.validateModelDir(dir);
    QVERIFY2(msg.startsWith(QStringLiteral("config.json cannot be used")), qPrintable(msg));
  }

  void validateMissingWeights() {
    REQUIRE_TINY();
    SettingsViewModel s(ini_);
    const QString dir = tmp_.filePath(QStringLiteral("noweights"));
    QVERIFY(QDir().mkpath(dir));
    QVERIFY(QFile::copy(tinyModel_ + QStringLiteral("/config.json"), dir + QStringLiteral("/config.json")));
    QVERIFY(QFile::copy(tinyModel_ + QStringLiteral("/tokenizer.json"), dir + QStringLiteral("/tokenizer.json")));
    const QString msg = s.validateModelDir(dir);
    QVERIFY2(msg.contains(QStringLiteral("has no weights")), qPrintable(msg));
    QVERIFY(msg.contains(QStringLiteral("model.safetensors")));
  }

  void validateMissingTokenizer() {
    REQUIRE_TINY();
    SettingsViewModel s(ini_);
    const QString dir = tmp_.filePath(QStringLiteral("notokenizer"));
    QVERIFY(QDir().mkpath(dir));
    QVERIFY(QFile::copy(tinyModel_ + QStringLiteral("/config.json"), dir + QStringLiteral("/config.json")));
    QVERIFY(QFile::link(tinyModel_ + QStringLiteral("/model.safetensors"), dir + QStringLiteral("/model.safetensors")));
    const QString msg = s.validateModelDir(dir);
    QVERIFY2(msg.contains(QStringLiteral("no tokenizer")), qPrintable(msg));
    QVERIFY(msg.contains(QStringLiteral("tokenizer.json")));
  }

  void validateGoodModel() {
    REQUIRE_TINY();
    SettingsViewModel s(ini_);
    QCOMPARE(s.validateModelDir(tinyModel_), QString());
  }

  void precisionOptionsWithoutModel() {
    SettingsViewModel s(ini_);
    const QVariantList options = s.precisionOptions();
    QCOMPARE(options.size(), 6);
    QStringList names;
    for (const QVariant& v : options) names << v.toMap().value(QStringLiteral("name")).toString();
    QCOMPARE(names, SettingsViewModel::precisionNames());
    QCOMPARE(optionNamed(options, QStringLiteral("bf16")).value(QStringLiteral("bytes")).toDouble(), 0.0);
    QCOMPARE(s.resolvedPrecision(), QStringLiteral("bf16"));
  }

  void precisionOptionsWithModel() {
    REQUIRE_TINY();
    SettingsViewModel s(ini_);
    s.setMemoryBudget(1e12);
    QSignalSpy spy(&s, &SettingsViewModel::precisionOptionsChanged);
    s.setModelDir(tinyModel_);
    QVERIFY(spy.count() >= 1);
    const QVariantList options = s.precisionOptions();
    QCOMPARE(options.size(), 6);
    int enabled = 0, disabled = 0;
    for (const QVariant& v : options) {
      const QVariantMap o = v.toMap();
      QVERIFY(o.value(QStringLiteral("bytes")).toDouble() > 0);
      QVERIFY(o.value(QStringLiteral("fits")).toBool());
      if (o.value(QStringLiteral("enabled")).toBool()) {
        ++enabled;
      } else {
        ++disabled;
        QCOMPARE(o.value(QStringLiteral("name")).toString(), QStringLiteral("fp16"));  // the CPU: no fp16
        QVERIFY(o.value(QStringLiteral("reason")).toString().contains(QStringLiteral("GPU")));
      }
    }
    QCOMPARE(enabled, 5);  // auto, bf16, fp8, int8, int4
    QCOMPARE(disabled, 1);
    const double bf16 = optionNamed(options, QStringLiteral("bf16")).value(QStringLiteral("bytes")).toDouble();
    const double int8 = optionNamed(options, QStringLiteral("int8")).value(QStringLiteral("bytes")).toDouble();
    const double int4 = optionNamed(options, QStringLiteral("int4")).value(QStringLiteral("bytes")).toDouble();
    QVERIFY(bf16 > int8);
    QVERIFY(int8 > int4);
    QCOMPARE(optionNamed(options, QStringLiteral("auto")).value(QStringLiteral("resolved")).toString(), QStringLiteral("bf16"));

    // A longer context costs more KV cache.
    s.setContextLength(32768);
    const double bf16Long = optionNamed(s.precisionOptions(), QStringLiteral("bf16")).value(QStringLiteral("bytes")).toDouble();
    QVERIFY(bf16Long > bf16);

    // Too little memory: bf16 does not fit and says so.
    s.setMemoryBudget(1000);
    const QVariantMap tight = optionNamed(s.precisionOptions(), QStringLiteral("bf16"));
    QCOMPARE(tight.value(QStringLiteral("fits")).toBool(), false);
    QVERIFY(tight.value(QStringLiteral("reason")).toString().contains(QStringLiteral("available")));
    QCOMPARE(optionNamed(s.precisionOptions(), QStringLiteral("auto")).value(QStringLiteral("fits")).toBool(), false);
  }

  // Which precisions each device offers, and what it says of the others.
  void precisionOptionsPerDevice_data() {
    QTest::addColumn<bool>("gpu");
    QTest::addColumn<QString>("name");
    QTest::addColumn<bool>("enabled");
    QTest::addColumn<QString>("reasonContains");  // empty: no reason
    QTest::newRow("cpu bf16") << false << "bf16" << true << "";
    QTest::newRow("cpu fp16") << false << "fp16" << false << "GPU only";
    QTest::newRow("cpu fp8") << false << "fp8" << true << "";
    QTest::newRow("cpu int8") << false << "int8" << true << "";
    QTest::newRow("cpu int4") << false << "int4" << true << "";
    QTest::newRow("gpu bf16") << true << "bf16" << true << "";
    QTest::newRow("gpu fp16") << true << "fp16" << true << "";
    QTest::newRow("gpu fp8") << true << "fp8" << true << "";
    QTest::newRow("gpu int8") << true << "int8" << true << "";
    QTest::newRow("gpu int4") << true << "int4" << true << "";
  }
  void precisionOptionsPerDevice() {
    REQUIRE_TINY();
    QFETCH(bool, gpu);
    QFETCH(QString, name);
    QFETCH(bool, enabled);
    QFETCH(QString, reasonContains);
    SettingsViewModel s(ini_);
    s.setMemoryBudget(1e12);
    s.setModelDir(tinyModel_);
    QSignalSpy spy(&s, &SettingsViewModel::precisionOptionsChanged);
    s.setGpuInUse(gpu);
    QCOMPARE(spy.count(), gpu ? 1 : 0);  // false is the default: no change
    const QVariantMap o = optionNamed(s.precisionOptions(), name);
    QCOMPARE(o.value(QStringLiteral("enabled")).toBool(), enabled);
    const QString reason = o.value(QStringLiteral("reason")).toString();
    if (reasonContains.isEmpty())
      QVERIFY2(reason.isEmpty(), qPrintable(reason));
    else
      QVERIFY2(reason.contains(reasonContains), qPrintable(reason));
  }

  // The KV cache's options at the context length (tiny: 2 layers x K, V x 2 KV heads x 16 values per
  // token): fp32 on the CPU, bf16 on the GPU, int8 with a 4-byte scale per 16 values on both; the
  // precision estimates count the chosen one, and a load takes resolvedKvCache().
  void kvCacheOptionsPerDevice_data() {
    QTest::addColumn<bool>("gpu");
    QTest::addColumn<double>("fullBytes");
    QTest::addColumn<bool>("int8Enabled");
    QTest::addColumn<QString>("resolved");  // with kvCache "int8"
    QTest::newRow("cpu") << false << 1024.0 * 2 * 2 * 2 * 16 * 4 << true << "int8";
    QTest::newRow("gpu") << true << 1024.0 * 2 * 2 * 2 * 16 * 2 << true << "int8";
  }
  void kvCacheOptionsPerDevice() {
    REQUIRE_TINY();
    QFETCH(bool, gpu);
    QFETCH(double, fullBytes);
    QFETCH(bool, int8Enabled);
    QFETCH(QString, resolved);
    SettingsViewModel s(ini_);
    s.setMemoryBudget(1e12);
    s.setModelDir(tinyModel_);
    s.setContextLength(1024);
    s.setGpuInUse(gpu);
    const QVariantMap full = optionNamed(s.kvCacheOptions(), QStringLiteral("full"));
    const QVariantMap int8 = optionNamed(s.kvCacheOptions(), QStringLiteral("int8"));
    QCOMPARE(full.value(QStringLiteral("bytes")).toDouble(), fullBytes);
    QVERIFY(full.value(QStringLiteral("enabled")).toBool());
    QCOMPARE(int8.value(QStringLiteral("bytes")).toDouble(), 1024.0 * 2 * 2 * 2 * (16 + 4));
    QCOMPARE(int8.value(QStringLiteral("enabled")).toBool(), int8Enabled);
    // The reason compares it with the device's full cache (fp32 on the CPU, bf16 on the GPU).
    QVERIFY(int8.value(QStringLiteral("reason")).toString().contains(gpu ? QStringLiteral("half") : QStringLiteral("quarter")));
    const double int4Full =
        optionNamed(s.precisionOptions(), QStringLiteral("int4")).value(QStringLiteral("kvCacheBytes")).toDouble();
    QCOMPARE(int4Full, fullBytes);
    QSignalSpy changed(&s, &SettingsViewModel::kvCacheChanged);
    s.setKvCache(QStringLiteral("int8"));
    QCOMPARE(changed.count(), 1);
    QCOMPARE(s.resolvedKvCache(), resolved);
    const double int4Now =
        optionNamed(s.precisionOptions(), QStringLiteral("int4")).value(QStringLiteral("kvCacheBytes")).toDouble();
    QCOMPARE(int4Now, resolved == QLatin1String("int8") ? 1024.0 * 2 * 2 * 2 * (16 + 4) : fullBytes);
    s.setKvCache(QStringLiteral("fp8"));  // not a format: ignored
    QCOMPARE(s.kvCache(), QStringLiteral("int8"));
    QCOMPARE(changed.count(), 1);
  }

  // "auto" takes the most accurate option that fits: int8 before fp8 and int4 when bf16 does not
  // fit, on the CPU and on the GPU alike.
  void autoPicksTheMostAccurateThatFits() {
    REQUIRE_TINY();
    SettingsViewModel s(ini_);
    s.setModelDir(tinyModel_);
    s.setPrecision(QStringLiteral("auto"));
    const QVariantList all = s.precisionOptions();
    const double bf16 = optionNamed(all, QStringLiteral("bf16")).value(QStringLiteral("bytes")).toDouble();
    const double int8 = optionNamed(all, QStringLiteral("int8")).value(QStringLiteral("bytes")).toDouble();
    const double fp8 = optionNamed(all, QStringLiteral("fp8")).value(QStringLiteral("bytes")).toDouble();
    const double int4 = optionNamed(all, QStringLiteral("int4")).value(QStringLiteral("bytes")).toDouble();
    QVERIFY(bf16 > int8 && int8 >= fp8 && fp8 > int4);
    s.setMemoryBudget(1e12);
    QCOMPARE(s.resolvedPrecision(), QStringLiteral("bf16"));
    s.setMemoryBudget((bf16 + int8) / 2);  // bf16 no longer fits, int8 does
    QCOMPARE(s.resolvedPrecision(), QStringLiteral("int8"));
    s.setMemoryBudget((fp8 + int4) / 2);  // only int4 fits
    QCOMPARE(s.resolvedPrecision(), QStringLiteral("int4"));
    s.setGpuInUse(true);  // the GPU runs every format too, with its own estimates (embedding in host memory)
    const QVariantList gpu = s.precisionOptions();
    const double gpuFp8 = optionNamed(gpu, QStringLiteral("fp8")).value(QStringLiteral("bytes")).toDouble();
    const double gpuInt4 = optionNamed(gpu, QStringLiteral("int4")).value(QStringLiteral("bytes")).toDouble();
    QVERIFY(gpuInt4 < int4);
    s.setMemoryBudget((gpuFp8 + gpuInt4) / 2);
    QCOMPARE(s.resolvedPrecision(), QStringLiteral("int4"));
    s.setMemoryBudget(gpuInt4 / 2);  // nothing fits: bf16 is tried, and said so
    QCOMPARE(s.resolvedPrecision(), QStringLiteral("bf16"));
    QCOMPARE(optionNamed(s.precisionOptions(), QStringLiteral("auto")).value(QStringLiteral("fits")).toBool(), false);
  }

  void createDemoModel() {
    if (SettingsViewModel::testTokenizerPath().isEmpty()) QSKIP("test tokenizer missing: run packaging/setup.sh");
    SettingsViewModel s(ini_);
    const QString expected = tmp_.filePath(QStringLiteral("data/cosmos-chat-test/demo-model"));
    QCOMPARE(SettingsViewModel::demoModelDir(), expected);
    const QVariantMap r = s.createDemoModel();
    QCOMPARE(r.value(QStringLiteral("error")).toString(), QString());
    QCOMPARE(r.value(QStringLiteral("path")).toString(), expected);
    QCOMPARE(s.validateModelDir(expected), QString());
    QVERIFY(s.isDemoModel(expected));
    QFile marker(expected + QStringLiteral("/DEMO-MODEL.txt"));
    QVERIFY(marker.open(QIODevice::ReadOnly));
    QVERIFY(marker.readAll().contains("RANDOM weights"));
    s.setModelDir(expected);
    QVERIFY(s.modelIsDemo());
    // A second call reuses the folder.
    const QDateTime written = QFileInfo(expected + QStringLiteral("/model.safetensors")).lastModified();
    QCOMPARE(s.createDemoModel().value(QStringLiteral("path")).toString(), expected);
    QCOMPARE(QFileInfo(expected + QStringLiteral("/model.safetensors")).lastModified(), written);
  }

  void helpers() {
    QCOMPARE(SettingsViewModel::formatBytes(0), QStringLiteral("0 B"));
    QCOMPARE(SettingsViewModel::formatBytes(512), QStringLiteral("512 B"));
    QCOMPARE(SettingsViewModel::formatBytes(15.2e9), QStringLiteral("15.2 GB"));
    QCOMPARE(SettingsViewModel::pathFromUrl(QStringLiteral("file:///tmp/a%20b")), QStringLiteral("/tmp/a b"));
    QCOMPARE(SettingsViewModel::pathFromUrl(QStringLiteral("/tmp/x")), QStringLiteral("/tmp/x"));
    QVERIFY(SettingsViewModel::availableMemory() > 0);
  }

 private:
  QTemporaryDir tmp_;
  QString tinyModel_;
  QString ini_;
  int iniCounter_ = 0;
  bool haveTiny_ = false;
};

QTEST_GUILESS_MAIN(TestSettingsViewModel)
#include "test_settings_view_model.moc"
