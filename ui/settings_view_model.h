// The app's settings (QML: `settings`), kept in QSettings so they survive a restart: the model
// folder and precision, the context length, sampling, the system prompt and the appearance.
// Also answers questions the settings page asks: which precisions fit (cosmos::estimate_memory on
// the folder's config.json), whether a folder is a usable model, and it makes the demo model.
#pragma once

#include <QObject>
#include <QSettings>
#include <QString>
#include <QVariantList>
#include <QVariantMap>

#include <memory>
#include <optional>

#include "cosmos/kv_format.h"
#include "cosmos/model_config.h"
#include "cosmos/session.h"

namespace cosmos::ui {

class SettingsViewModel : public QObject {
  Q_OBJECT
  Q_PROPERTY(QString modelDir READ modelDir WRITE setModelDir NOTIFY modelDirChanged)
  Q_PROPERTY(QString precision READ precision WRITE setPrecision NOTIFY precisionChanged)
  Q_PROPERTY(int contextLength READ contextLength WRITE setContextLength NOTIFY contextLengthChanged)
  // How the KV cache stores K and V: "full" or "int8" (cosmos/kv_format.h). The precision
  // estimates count it; resolvedKvCache() is what a load uses.
  Q_PROPERTY(QString kvCache READ kvCache WRITE setKvCache NOTIFY kvCacheChanged)
  // [{name, bytes (the cache at contextLength), enabled, reason}] for "full" and "int8".
  Q_PROPERTY(QVariantList kvCacheOptions READ kvCacheOptions NOTIFY precisionOptionsChanged)
  // Keep quantized weights on disk between loads (cosmos::default_quant_cache_dir(); off by default:
  // a file per model and precision, e.g. 7.1 GB for the 7B in int8).
  Q_PROPERTY(bool keepQuantizedWeights READ keepQuantizedWeights WRITE setKeepQuantizedWeights NOTIFY
                 keepQuantizedWeightsChanged)
  Q_PROPERTY(int maxContextLength READ maxContextLength NOTIFY modelDirChanged)
  Q_PROPERTY(double temperature READ temperature WRITE setTemperature NOTIFY temperatureChanged)
  Q_PROPERTY(double topP READ topP WRITE setTopP NOTIFY topPChanged)
  Q_PROPERTY(int topK READ topK WRITE setTopK NOTIFY topKChanged)
  Q_PROPERTY(double repetitionPenalty READ repetitionPenalty WRITE setRepetitionPenalty NOTIFY
                 repetitionPenaltyChanged)
  Q_PROPERTY(int maxNewTokens READ maxNewTokens WRITE setMaxNewTokens NOTIFY maxNewTokensChanged)
  // -1: a new random seed for every reply; >= 0: the same seed every time (reproducible replies).
  Q_PROPERTY(qint64 seed READ seed WRITE setSeed NOTIFY seedChanged)
  Q_PROPERTY(QString systemPrompt READ systemPrompt WRITE setSystemPrompt NOTIFY systemPromptChanged)
  Q_PROPERTY(QString theme READ theme WRITE setTheme NOTIFY themeChanged)
  Q_PROPERTY(int fontSize READ fontSize WRITE setFontSize NOTIFY fontSizeChanged)
  Q_PROPERTY(QVariantList precisionOptions READ precisionOptions NOTIFY precisionOptionsChanged)
  // Bytes a model may use on the device that runs it (the CPU backend: available RAM). "fits" in
  // precisionOptions compares against it; EngineHost may set the GPU's free memory later.
  Q_PROPERTY(double memoryBudget READ memoryBudget WRITE setMemoryBudget NOTIFY precisionOptionsChanged)
  // Whether the loaded model runs on the GPU (EngineHost::onGpu, set by the app): which precisions
  // precisionOptions enables: the CUDA backend runs all five formats, the CPU backend all but fp16.
  Q_PROPERTY(bool gpuInUse READ gpuInUse WRITE setGpuInUse NOTIFY precisionOptionsChanged)
  Q_PROPERTY(bool modelIsDemo READ modelIsDemo NOTIFY modelDirChanged)

 public:
  static constexpr int kDefaultContextLength = 8192;
  static constexpr double kDefaultTemperature = 0.6;
  static constexpr double kDefaultTopP = 0.95;
  static constexpr int kDefaultTopK = 0;
  static constexpr double kDefaultRepetitionPenalty = 1.05;
  static constexpr int kDefaultMaxNewTokens = 4096;
  static constexpr qint64 kDefaultSeed = -1;
  static constexpr int kDefaultFontSize = 10;

  // Settings in the application's default QSettings location.
  explicit SettingsViewModel(QObject* parent = nullptr);
  // Settings in an INI file (tests).
  explicit SettingsViewModel(const QString& iniFile, QObject* parent = nullptr);
  ~SettingsViewModel() override;

  QString modelDir() const { return modelDir_; }
  void setModelDir(const QString& dir);
  QString precision() const { return precision_; }
  void setPrecision(const QString& precision);
  int contextLength() const { return contextLength_; }
  QString kvCache() const { return kvCache_; }
  void setKvCache(const QString& format);
  QVariantList kvCacheOptions() const { return kvCacheOptions_; }
  bool keepQuantizedWeights() const { return keepQuantizedWeights_; }
  void setKeepQuantizedWeights(bool on);
  void setContextLength(int tokens);
  int maxContextLength() const;
  double temperature() const { return temperature_; }
  void setTemperature(double value);
  double topP() const { return topP_; }
  void setTopP(double value);
  int topK() const { return topK_; }
  void setTopK(int value);
  double repetitionPenalty() const { return repetitionPenalty_; }
  void setRepetitionPenalty(double value);
  int maxNewTokens() const { return maxNewTokens_; }
  void setMaxNewTokens(int value);
  qint64 seed() const { return seed_; }
  void setSeed(qint64 value);
  QString systemPrompt() const { return systemPrompt_; }
  void setSystemPrompt(const QString& text);
  QString theme() const { return theme_; }
  void setTheme(const QString& theme);
  int fontSize() const { return fontSize_; }
  void setFontSize(int points);
  QVariantList precisionOptions() const { return precisionOptions_; }
  double memoryBudget() const { return memoryBudget_; }
  void setMemoryBudget(double bytes);
  bool gpuInUse() const { return gpuInUse_; }
  void setGpuInUse(bool on);
  bool modelIsDemo() const { return isDemoModel(modelDir_); }

  // "auto", "bf16", "fp16", "fp8", "int8", "int4".
  static QStringList precisionNames();
  static QString defaultSystemPrompt();

  // What is missing or wrong in a model folder, in one sentence; empty when it can be loaded.
  Q_INVOKABLE QString validateModelDir(const QString& dir) const;
  // [{name, text}]: the reasoning prompt (default), the plain assistant, none.
  Q_INVOKABLE QVariantList systemPromptPresets() const;
  // Writes the tiny test model (random weights, real tokenizer) into AppDataLocation/demo-model
  // unless it is there already. Returns {path, error}: path set on success, error otherwise.
  Q_INVOKABLE QVariantMap createDemoModel();
  Q_INVOKABLE bool isDemoModel(const QString& dir) const;
  // The precision to load: "auto" resolved to the most precise enabled option that fits.
  Q_INVOKABLE QString resolvedPrecision() const;
  // The KV cache to load: kvCache (both backends run both formats).
  Q_INVOKABLE QString resolvedKvCache() const;
  // Sampling back to the recommended values (temperature, top-p, top-k, penalty, max tokens, seed).
  Q_INVOKABLE void resetSampling();
  Q_INVOKABLE void resetSystemPrompt();
  // "15.2 GB", "40.1 MB", "512 KB".
  Q_INVOKABLE static QString formatBytes(double bytes);
  // A local file URL or path (FolderDialog gives URLs) as a plain path.
  Q_INVOKABLE static QString pathFromUrl(const QString& urlOrPath);

  // The engine's options for the next reply (a random seed per call when seed is -1).
  cosmos::GenerateOptions generateOptions() const;

  // Where createDemoModel writes, and the test tokenizer it copies (first that exists of
  // $COSMOS_TEST_TOKENIZER, the build's default, the user's cache).
  static QString demoModelDir();
  static QString testTokenizerPath();
  // Bytes of memory available now (MemAvailable from /proc/meminfo; 0 when unknown).
  static double availableMemory();

 signals:
  void modelDirChanged();
  void precisionChanged();
  void contextLengthChanged();
  void kvCacheChanged();
  void keepQuantizedWeightsChanged();
  void temperatureChanged();
  void topPChanged();
  void topKChanged();
  void repetitionPenaltyChanged();
  void maxNewTokensChanged();
  void seedChanged();
  void systemPromptChanged();
  void themeChanged();
  void fontSizeChanged();
  void precisionOptionsChanged();

 private:
  void load();
  void save(const QString& key, const QVariant& value);
  void reloadModelConfig();
  void recomputePrecisionOptions();

  std::unique_ptr<QSettings> settings_;
  QString modelDir_;
  QString precision_ = QStringLiteral("auto");
  int contextLength_ = kDefaultContextLength;
  QString kvCache_ = QStringLiteral("full");
  double temperature_ = kDefaultTemperature;
  double topP_ = kDefaultTopP;
  int topK_ = kDefaultTopK;
  double repetitionPenalty_ = kDefaultRepetitionPenalty;
  int maxNewTokens_ = kDefaultMaxNewTokens;
  qint64 seed_ = kDefaultSeed;
  QString systemPrompt_;
  QString theme_ = QStringLiteral("system");
  int fontSize_ = kDefaultFontSize;
  double memoryBudget_ = 0;
  bool gpuInUse_ = false;
  bool keepQuantizedWeights_ = false;
  std::optional<cosmos::ModelConfig> config_;
  QVariantList precisionOptions_;
  QVariantList kvCacheOptions_;
  cosmos::KvFormat kvFormat() const;  // resolvedKvCache() as the engine's enum
};

}  // namespace cosmos::ui
