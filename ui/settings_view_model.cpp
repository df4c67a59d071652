#include "settings_view_model.h"

#include <QCoreApplication>
#include <QDir>
#include <QFile>
#include <QFileInfo>
#include <QRandomGenerator>
#include <QStandardPaths>
#include <QUrl>

#include <spdlog/spdlog.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <string>

#include "cosmos/chat_format.h"
#include "cosmos/checkpoint.h"
#include "cosmos/memory_estimate.h"
#include "cosmos/precision.h"
#include "cosmos/test_model.h"
#include "cosmos/tokenizer.h"

#ifndef COSMOS_DEFAULT_TEST_TOKENIZER
#define COSMOS_DEFAULT_TEST_TOKENIZER ""
#endif

namespace cosmos::ui {
namespace {

namespace fs = std::filesystem;

const QString kKeyModelDir = QStringLiteral("model/dir");
const QString kKeyPrecision = QStringLiteral("model/precision");
const QString kKeyContext = QStringLiteral("model/contextLength");
const QString kKeyKvCache = QStringLiteral("model/kvCache");
const QString kKeyKeepQuantized = QStringLiteral("model/keepQuantizedWeights");
const QString kKeyTemperature = QStringLiteral("sampling/temperature");
const QString kKeyTopP = QStringLiteral("sampling/topP");
const QString kKeyTopK = QStringLiteral("sampling/topK");
const QString kKeyPenalty = QStringLiteral("sampling/repetitionPenalty");
const QString kKeyMaxNew = QStringLiteral("sampling/maxNewTokens");
const QString kKeySeed = QStringLiteral("sampling/seed");
const QString kKeySystem = QStringLiteral("chat/systemPrompt");
const QString kKeyTheme = QStringLiteral("appearance/theme");
const QString kKeyFont = QStringLiteral("appearance/fontSize");

constexpr int kMinContext = 256;
constexpr int kMaxContextFallback = 32768;
constexpr const char* kDemoMarker = "DEMO-MODEL.txt";
fs::path toPath(const QString& s) { return fs::path(s.toStdString()); }

bool nearlyEqual(double a, double b) { return std::abs(a - b) < 1e-9; }

}  // namespace

// ~/.config/<organization or application>/<application>.conf ($XDG_CONFIG_HOME honored); QSettings'
// default would write to "Unknown Organization" when the organization is empty.
SettingsViewModel::SettingsViewModel(QObject* parent)
    : QObject(parent),
      settings_(std::make_unique<QSettings>(
          QSettings::NativeFormat, QSettings::UserScope,
          QCoreApplication::organizationName().isEmpty() ? QCoreApplication::applicationName()
                                                         : QCoreApplication::organizationName(),
          QCoreApplication::applicationName())) {
  load();
}

SettingsViewModel::SettingsViewModel(const QString& iniFile, QObject* parent)
    : QObject(parent), settings_(std::make_unique<QSettings>(iniFile, QSettings::IniFormat)) {
  load();
}

SettingsViewModel::~SettingsViewModel() = default;

QStringList SettingsViewModel::precisionNames() {
  return {QStringLiteral("auto"), QStringLiteral("bf16"), QStringLiteral("fp16"),
          QStringLiteral("fp8"),  QStringLiteral("int8"), QStringLiteral("int4")};
}

QString SettingsViewModel::defaultSystemPrompt() { return QString::fromUtf8(cosmos::kReasoningSystemPrompt); }

void SettingsViewModel::load() {
  const QSettings& s = *settings_;
  modelDir_ = s.value(kKeyModelDir).toString();
  const QString p = s.value(kKeyPrecision, QStringLiteral("auto")).toString();
  precision_ = precisionNames().contains(p) ? p : QStringLiteral("auto");
  contextLength_ = std::max(kMinContext, s.value(kKeyContext, kDefaultContextLength).toInt());
  const QString kv = s.value(kKeyKvCache, QStringLiteral("full")).toString();
  kvCache_ = kv == QLatin1String("int8") ? kv : QStringLiteral("full");
  temperature_ = std::clamp(s.value(kKeyTemperature, kDefaultTemperature).toDouble(), 0.0, 2.0);
  topP_ = std::clamp(s.value(kKeyTopP, kDefaultTopP).toDouble(), 0.01, 1.0);
  topK_ = std::max(0, s.value(kKeyTopK, kDefaultTopK).toInt());
  repetitionPenalty_ = std::clamp(s.value(kKeyPenalty, kDefaultRepetitionPenalty).toDouble(), 0.5, 2.0);
  maxNewTokens_ = std::max(1, s.value(kKeyMaxNew, kDefaultMaxNewTokens).toInt());
  seed_ = std::max<qint64>(-1, s.value(kKeySeed, kDefaultSeed).toLongLong());
  systemPrompt_ = s.contains(kKeySystem) ? s.value(kKeySystem).toString() : defaultSystemPrompt();
  const QString t = s.value(kKeyTheme, QStringLiteral("system")).toString();
  theme_ = (t == QLatin1String("light") || t == QLatin1String("dark")) ? t : QStringLiteral("system");
  fontSize_ = std::clamp(s.value(kKeyFont, kDefaultFontSize).toInt(), 7, 24);
  keepQuantizedWeights_ = s.value(kKeyKeepQuantized, false).toBool();
  memoryBudget_ = availableMemory();
  reloadModelConfig();
}

void SettingsViewModel::save(const QString& key, const QVariant& value) {
  settings_->setValue(key, value);
  settings_->sync();
  if (settings_->status() != QSettings::NoError)
    spdlog::warn("settings: could not write {} ({})", settings_->fileName().toStdString(), key.toStdString());
}

void SettingsViewModel::setModelDir(const QString& dir) {
  const QString clean = dir.isEmpty() ? QString() : QDir::cleanPath(pathFromUrl(dir));
  if (clean == modelDir_) return;
  modelDir_ = clean;
  save(kKeyModelDir, modelDir_);
  reloadModelConfig();
  emit modelDirChanged();
}

void SettingsViewModel::setPrecision(const QString& precision) {
  if (precision == precision_ || !precisionNames().contains(precision)) return;
  precision_ = precision;
  save(kKeyPrecision, precision_);
  emit precisionChanged();
}

void SettingsViewModel::setKvCache(const QString& format) {
  if (format == kvCache_ || (format != QLatin1String("full") && format != QLatin1String("int8"))) return;
  kvCache_ = format;
  save(kKeyKvCache, kvCache_);
  recomputePrecisionOptions();
  emit kvCacheChanged();
}

QString SettingsViewModel::resolvedKvCache() const { return kvCache_; }

cosmos::KvFormat SettingsViewModel::kvFormat() const {
  return resolvedKvCache() == QLatin1String("int8") ? cosmos::KvFormat::int8 : cosmos::KvFormat::full;
}

int SettingsViewModel::maxContextLength() const {
  if (config_ && config_->max_position_embeddings > 0) return config_->max_position_embeddings;
  return kMaxContextFallback;
}

void SettingsViewModel::setContextLength(int tokens) {
  tokens = std::max(kMinContext, tokens);
  if (tokens == contextLength_) return;
  contextLength_ = tokens;
  save(kKeyContext, contextLength_);
  recomputePrecisionOptions();
  emit contextLengthChanged();
}

void SettingsViewModel::setTemperature(double value) {
  if (!std::isfinite(value)) return;
  value = std::clamp(value, 0.0, 2.0);
  if (nearlyEqual(value, temperature_)) return;
  temperature_ = value;
  save(kKeyTemperature, temperature_);
  emit temperatureChanged();
}

void SettingsViewModel::setTopP(double value) {
  if (!std::isfinite(value)) return;
  value = std::clamp(value, 0.01, 1.0);
  if (nearlyEqual(value, topP_)) return;
  topP_ = value;
  save(kKeyTopP, topP_);
  emit topPChanged();
}

void SettingsViewModel::setTopK(int value) {
  value = std::max(0, value);
  if (value == topK_) return;
  topK_ = value;
  save(kKeyTopK, topK_);
  emit topKChanged();
}

void SettingsViewModel::setRepetitionPenalty(double value) {
  if (!std::isfinite(value)) return;
  value = std::clamp(value, 0.5, 2.0);
  if (nearlyEqual(value, repetitionPenalty_)) return;
  repetitionPenalty_ = value;
  save(kKeyPenalty, repetitionPenalty_);
  emit repetitionPenaltyChanged();
}

void SettingsViewModel::setMaxNewTokens(int value) {
  value = std::max(1, value);
  if (value == maxNewTokens_) return;
  maxNewTokens_ = value;
  save(kKeyMaxNew, maxNewTokens_);
  emit maxNewTokensChanged();
}

void SettingsViewModel::setSeed(qint64 value) {
  value = std::max<qint64>(-1, value);
  if (value == seed_) return;
  seed_ = value;
  save(kKeySeed, seed_);
  emit seedChanged();
}

void SettingsViewModel::setSystemPrompt(const QString& text) {
  if (text == systemPrompt_) return;
  systemPrompt_ = text;
  save(kKeySystem, systemPrompt_);
  emit systemPromptChanged();
}

void SettingsViewModel::setTheme(const QString& theme) {
  if (theme == theme_) return;
  if (theme != QLatin1String("system") && theme != QLatin1String("light") && theme != QLatin1String("dark")) return;
  theme_ = theme;
  save(kKeyTheme, theme_);
  emit themeChanged();
}

void SettingsViewModel::setFontSize(int points) {
  points = std::clamp(points, 7, 24);
  if (points == fontSize_) return;
  fontSize_ = points;
  save(kKeyFont, fontSize_);
  emit fontSizeChanged();
}

void SettingsViewModel::setMemoryBudget(double bytes) {
  if (!std::isfinite(bytes) || bytes < 0 || nearlyEqual(bytes, memoryBudget_)) return;
  memoryBudget_ = bytes;
  recomputePrecisionOptions();
}

void SettingsViewModel::setKeepQuantizedWeights(bool on) {
  if (on == keepQuantizedWeights_) return;
  keepQuantizedWeights_ = on;
  save(kKeyKeepQuantized, on);
  emit keepQuantizedWeightsChanged();
}

void SettingsViewModel::setGpuInUse(bool on) {
  if (on == gpuInUse_) return;
  gpuInUse_ = on;
  recomputePrecisionOptions();
}

void SettingsViewModel::resetSampling() {
  setTemperature(kDefaultTemperature);
  setTopP(kDefaultTopP);
  setTopK(kDefaultTopK);
  setRepetitionPenalty(kDefaultRepetitionPenalty);
  setMaxNewTokens(kDefaultMaxNewTokens);
  setSeed(kDefaultSeed);
}

void SettingsViewModel::resetSystemPrompt() { setSystemPrompt(defaultSystemPrompt()); }

void SettingsViewModel::reloadModelConfig() {
  config_.reset();
  if (!modelDir_.isEmpty()) {
    const fs::path file = toPath(modelDir_) / "config.json";
    std::error_code ec;
    if (fs::exists(file, ec)) {
      auto config = cosmos::load_model_config(file);
      if (config) config_ = std::move(config.value());
    }
  }
  recomputePrecisionOptions();
}

void SettingsViewModel::recomputePrecisionOptions() {
  QVariantList options;
  for (const cosmos::Precision p : cosmos::kAllPrecisions) {
    const QString name = QString::fromUtf8(std::string(cosmos::to_string(p)));
    QVariantMap o;
    o[QStringLiteral("name")] = name;
    double bytes = 0;
    if (config_) {
      cosmos::EstimateOptions eo;
      eo.context_tokens = contextLength_;
      eo.gpu = gpuInUse_;
      eo.kv_format = kvFormat();
      const cosmos::MemoryEstimate e = cosmos::estimate_memory(*config_, p, eo);
      bytes = static_cast<double>(e.total());
      o[QStringLiteral("weightBytes")] = static_cast<double>(e.weights());
      o[QStringLiteral("kvCacheBytes")] = static_cast<double>(e.kv_cache);
      o[QStringLiteral("workspaceBytes")] = static_cast<double>(e.workspace);
    }
    const bool fits = bytes <= 0 || memoryBudget_ <= 0 || bytes <= memoryBudget_;
    // fp16 needs the GPU (on the CPU bf16 is as fast); every other format runs on both backends.
    const bool enabled = p != cosmos::Precision::fp16 || gpuInUse_;
    o[QStringLiteral("bytes")] = bytes;
    o[QStringLiteral("fits")] = fits;
    o[QStringLiteral("enabled")] = enabled;
    QString reason;
    if (!enabled) {
      reason = tr("fp16 runs on the GPU only; on the CPU bf16 is as fast");
    } else if (!fits) {
      reason = tr("needs about %1; %2 is available").arg(formatBytes(bytes), formatBytes(memoryBudget_));
    }
    o[QStringLiteral("reason")] = reason;
    options.append(o);
  }
  // auto: the most accurate enabled option that fits.
  QVariantMap autoOption;
  for (const cosmos::Precision p : cosmos::kPrecisionsByAccuracy) {
    const QVariantMap o = options.at(static_cast<int>(p)).toMap();  // options are in enum order
    if (o.value(QStringLiteral("enabled")).toBool() && o.value(QStringLiteral("fits")).toBool()) {
      autoOption = o;
      break;
    }
  }
  QVariantMap a;
  a[QStringLiteral("name")] = QStringLiteral("auto");
  a[QStringLiteral("enabled")] = true;
  if (!autoOption.isEmpty()) {
    a[QStringLiteral("bytes")] = autoOption.value(QStringLiteral("bytes"));
    a[QStringLiteral("fits")] = true;
    a[QStringLiteral("resolved")] = autoOption.value(QStringLiteral("name"));
    a[QStringLiteral("reason")] =
        tr("the most precise that fits: %1").arg(autoOption.value(QStringLiteral("name")).toString());
  } else {
    a[QStringLiteral("bytes")] = options.isEmpty() ? 0.0 : options.front().toMap().value(QStringLiteral("bytes"));
    a[QStringLiteral("fits")] = false;
    a[QStringLiteral("resolved")] = QStringLiteral("bf16");
    a[QStringLiteral("reason")] = tr("no precision fits the available memory; bf16 will be tried");
  }
  options.prepend(a);
  precisionOptions_ = options;
  // The cache's two formats at this context (the same for every precision).
  QVariantList kv;
  for (const cosmos::KvFormat f : {cosmos::KvFormat::full, cosmos::KvFormat::int8}) {
    QVariantMap o;
    o[QStringLiteral("name")] = QString::fromUtf8(std::string(cosmos::to_string(f)));
    double bytes = 0;
    if (config_)
      bytes = static_cast<double>(contextLength_) *
              static_cast<double>(cosmos::kv_bytes_per_token(*config_, f, gpuInUse_ ? 2 : 4));
    o[QStringLiteral("bytes")] = bytes;
    o[QStringLiteral("enabled")] = true;
    o[QStringLiteral("reason")] =
        f == cosmos::KvFormat::full
            ? (gpuInUse_ ? tr("bf16 keys and values") : tr("fp32 keys and values"))
            : (gpuInUse_ ? tr("8-bit keys and values with a scale per token and head: about half the memory of bf16, "
                              "and of the bytes long contexts read each token")
                         : tr("8-bit keys and values with a scale per token and head: about a quarter of the memory "
                              "and of the bytes long contexts read each token"));
    kv.append(o);
  }
  kvCacheOptions_ = kv;
  emit precisionOptionsChanged();
}

QString SettingsViewModel::resolvedPrecision() const {
  if (precision_ != QLatin1String("auto")) return precision_;
  for (const QVariant& v : precisionOptions_) {
    const QVariantMap o = v.toMap();
    if (o.value(QStringLiteral("name")) == QLatin1String("auto"))
      return o.value(QStringLiteral("resolved"), QStringLiteral("bf16")).toString();
  }
  return QStringLiteral("bf16");
}

QString SettingsViewModel::validateModelDir(const QString& dirOrUrl) const {
  const QString dir = pathFromUrl(dirOrUrl);
  if (dir.trimmed().isEmpty()) return tr("Choose the folder that holds the model (config.json, *.safetensors, tokenizer.json).");
  const QFileInfo info(dir);
  if (!info.exists()) return tr("The folder %1 does not exist.").arg(dir);
  if (!info.isDir()) return tr("%1 is a file; choose the folder that holds it.").arg(dir);
  const fs::path path = toPath(dir);
  std::error_code ec;
  if (!fs::exists(path / "config.json", ec))
    return tr("%1 has no config.json: it is not a Hugging Face model folder. "
              "Download the model from the welcome page (Download Cosmos-Reason1-7B) or with cosmos-cli download.").arg(dir);
  auto config = cosmos::load_model_config(path / "config.json");
  if (!config) return tr("config.json cannot be used: %1").arg(QString::fromStdString(config.error().message));
  auto checkpoint = cosmos::Checkpoint::open(path);
  if (!checkpoint) {
    if (checkpoint.error().code == "checkpoint.no_weights")
      return tr("%1 has no weights: model.safetensors or model.safetensors.index.json with its shards "
                "is missing (the download may be incomplete).").arg(dir);
    return tr("The weights cannot be read: %1").arg(QString::fromStdString(checkpoint.error().message));
  }
  if (auto st = checkpoint->validate_text_model(*config); !st)
    return tr("The weights do not match config.json: %1").arg(QString::fromStdString(st.error().message));
  if (!fs::exists(path / "tokenizer.json", ec) && !fs::exists(path / "tokenizer.model", ec))
    return tr("%1 has no tokenizer: tokenizer.json is missing (the download may be incomplete).").arg(dir);
  auto tokenizer = cosmos::load_tokenizer(path);
  if (!tokenizer) return tr("The tokenizer cannot be read: %1").arg(QString::fromStdString(tokenizer.error().message));
  return {};
}

QVariantList SettingsViewModel::systemPromptPresets() const {
  auto preset = [](const QString& name, const QString& text) {
    QVariantMap m;
    m[QStringLiteral("name")] = name;
    m[QStringLiteral("text")] = text;
    return QVariant(m);
  };
  return {preset(tr("Reasoning (recommended)"), defaultSystemPrompt()),
          preset(tr("Plain assistant"), QString::fromUtf8(cosmos::kDefaultSystemText)),
          preset(tr("Concise reasoning"),
                 defaultSystemPrompt() + QStringLiteral(" Keep the reasoning short and the answer to one paragraph.")),
          preset(tr("None"), QString())};
}

QString SettingsViewModel::demoModelDir() {
  return QDir(QStandardPaths::writableLocation(QStandardPaths::AppDataLocation)).filePath(QStringLiteral("demo-model"));
}

QString SettingsViewModel::testTokenizerPath() {
  QStringList candidates;
  const QByteArray env = qgetenv("COSMOS_TEST_TOKENIZER");
  if (!env.isEmpty()) candidates << QString::fromLocal8Bit(env);
  candidates << QString::fromUtf8(COSMOS_DEFAULT_TEST_TOKENIZER);
  QString cache = qEnvironmentVariable("COSMOS_CACHE_DIR");
  if (cache.isEmpty()) {
    const QString xdg = qEnvironmentVariable("XDG_CACHE_HOME");
    cache = (xdg.isEmpty() ? QDir::homePath() + QStringLiteral("/.cache") : xdg) + QStringLiteral("/cosmos-chat");
  }
  candidates << cache + QStringLiteral("/test-tokenizer/tokenizer.json");
  candidates << QDir::homePath() + QStringLiteral("/.cache/cosmos-chat/test-tokenizer/tokenizer.json");
  for (const QString& c : candidates)
    if (!c.isEmpty() && QFileInfo(c).isFile()) return c;
  return {};
}

bool SettingsViewModel::isDemoModel(const QString& dir) const {
  return !dir.isEmpty() && QFileInfo::exists(QDir(pathFromUrl(dir)).filePath(QString::fromUtf8(kDemoMarker)));
}

QVariantMap SettingsViewModel::createDemoModel() {
  QVariantMap result;
  const QString dir = demoModelDir();
  if (isDemoModel(dir) && validateModelDir(dir).isEmpty()) {
    result[QStringLiteral("path")] = dir;
    return result;
  }
  const QString tokenizer = testTokenizerPath();
  if (tokenizer.isEmpty()) {
    result[QStringLiteral("error")] =
        tr("The demo model needs the test tokenizer, which is not on this machine. Run packaging/setup.sh "
           "(it fetches it into ~/.cache/cosmos-chat/test-tokenizer/).");
    return result;
  }
  std::error_code ec;
  fs::remove_all(toPath(dir), ec);
  fs::create_directories(toPath(dir), ec);
  if (ec) {
    result[QStringLiteral("error")] = tr("Cannot create %1: %2").arg(dir, QString::fromStdString(ec.message()));
    return result;
  }
  cosmos::TestModelOptions o;
  o.preset = "tiny";
  o.seed = 1;
  o.shards = 1;
  o.tokenizer_json = toPath(tokenizer);
  o.out_dir = toPath(dir);
  spdlog::info("settings: writing the demo model into {}", dir.toStdString());
  if (auto st = cosmos::make_test_model(o); !st) {
    result[QStringLiteral("error")] =
        tr("The demo model could not be written: %1").arg(QString::fromStdString(st.error().message));
    return result;
  }
  std::ofstream marker(o.out_dir / kDemoMarker);
  marker << "Cosmos Chat demo model: the tiny test model (2 layers, hidden size 64) with RANDOM weights\n"
            "and the real tokenizer. It runs the whole app end to end, but its replies are meaningless text.\n"
            "Download nvidia/Cosmos-Reason1-7B for real answers.\n";
  if (!marker) {
    result[QStringLiteral("error")] = tr("Cannot write %1 in %2").arg(QString::fromUtf8(kDemoMarker), dir);
    return result;
  }
  result[QStringLiteral("path")] = dir;
  return result;
}

QString SettingsViewModel::formatBytes(double bytes) {
  if (!(bytes > 0)) return QStringLiteral("0 B");
  static const char* const kUnits[] = {"B", "KB", "MB", "GB", "TB"};
  int unit = 0;
  while (bytes >= 1000.0 && unit < 4) {
    bytes /= 1000.0;
    ++unit;
  }
  return QStringLiteral("%1 %2").arg(bytes, 0, 'f', unit == 0 ? 0 : 1).arg(QLatin1String(kUnits[unit]));
}

QString SettingsViewModel::pathFromUrl(const QString& urlOrPath) {
  if (urlOrPath.startsWith(QLatin1String("file:"))) return QUrl(urlOrPath).toLocalFile();
  return urlOrPath;
}

double SettingsViewModel::availableMemory() {
  QFile f(QStringLiteral("/proc/meminfo"));
  if (!f.open(QIODevice::ReadOnly)) return 0;
  const QList<QByteArray> lines = f.readAll().split('\n');
  for (const QByteArray& line : lines) {
    if (!line.startsWith("MemAvailable:")) continue;
    const QList<QByteArray> parts = line.simplified().split(' ');
    if (parts.size() >= 2) return parts[1].toDouble() * 1024.0;  // kB
  }
  return 0;
}

cosmos::GenerateOptions SettingsViewModel::generateOptions() const {
  cosmos::GenerateOptions o;
  o.sampling.temperature = static_cast<float>(temperature_);
  o.sampling.top_p = static_cast<float>(topP_);
  o.sampling.top_k = topK_;
  o.sampling.repetition_penalty = static_cast<float>(repetitionPenalty_);
  // A random seed fits a qint64, so the reply's meta (JSON) records it exactly.
  o.sampling.seed = seed_ >= 0 ? static_cast<std::uint64_t>(seed_) : QRandomGenerator::global()->generate64() >> 1;
  o.max_new_tokens = maxNewTokens_;
  return o;
}

}  // namespace cosmos::ui
