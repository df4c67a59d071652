// EngineHost (QML: `engine`): the GUI-side owner of the worker thread and the EngineController on
// it. It turns the controller's queued signals into properties (state, load progress, what was
// loaded, errors) and forwards the generation signals to ChatViewModel and StatsViewModel.
// stop() and cancelLoad() set the controller's atomics directly, so they act while the worker is
// busy. The destructor stops any generation, cancels any load, then quits and waits for the thread.
//
// errorText holds load errors (the engine's sentence); a failed generation is reported by
// generationFailed and shown by ChatViewModel.
#pragma once

#include <QObject>
#include <QString>
#include <QThread>
#include <QVariantMap>

#include <functional>
#include <memory>
#include <vector>

#include "chat_engine.h"

namespace cosmos::ui {

class EngineController;

class EngineHost : public QObject {
  Q_OBJECT
  Q_PROPERTY(State state READ state NOTIFY stateChanged)
  Q_PROPERTY(double loadProgress READ loadProgress NOTIFY loadProgressChanged)
  Q_PROPERTY(QString errorText READ errorText NOTIFY errorTextChanged)
  // What is loaded now (infoChanged when a load completes).
  Q_PROPERTY(QString modelDir READ modelDir NOTIFY infoChanged)
  Q_PROPERTY(QString deviceName READ deviceName NOTIFY infoChanged)
  Q_PROPERTY(QString precision READ precision NOTIFY infoChanged)
  Q_PROPERTY(QString kvCache READ kvCache NOTIFY infoChanged)  // "full" | "int8"
  Q_PROPERTY(QString deviceNote READ deviceNote NOTIFY infoChanged)
  Q_PROPERTY(int contextLimit READ contextLimit NOTIFY infoChanged)
  Q_PROPERTY(qint64 weightBytes READ weightBytes NOTIFY infoChanged)
  Q_PROPERTY(qint64 kvCacheBytes READ kvCacheBytes NOTIFY infoChanged)
  Q_PROPERTY(qint64 workspaceBytes READ workspaceBytes NOTIFY infoChanged)
  Q_PROPERTY(bool onGpu READ onGpu NOTIFY infoChanged)
  Q_PROPERTY(bool hasModel READ hasModel NOTIFY infoChanged)

 public:
  enum State { NoModel, Loading, Ready, Generating, Failed };
  Q_ENUM(State)

  // Takes the engine (makeRealChatEngine() in the app, a FakeChatEngine in tests) and starts the
  // worker thread.
  explicit EngineHost(std::unique_ptr<ChatEngine> engine, QObject* parent = nullptr);
  ~EngineHost() override;
  EngineHost(const EngineHost&) = delete;
  EngineHost& operator=(const EngineHost&) = delete;

  State state() const { return state_; }
  double loadProgress() const { return loadProgress_; }
  QString errorText() const { return errorText_; }
  QString modelDir() const { return modelDir_; }
  QString deviceName() const { return info_.deviceName; }
  QString precision() const { return info_.precision; }
  QString kvCache() const { return info_.kvCache; }
  QString deviceNote() const { return info_.deviceNote; }
  int contextLimit() const { return info_.contextLimit; }
  qint64 weightBytes() const { return static_cast<qint64>(info_.weightBytes); }
  qint64 kvCacheBytes() const { return static_cast<qint64>(info_.kvCacheBytes); }
  qint64 workspaceBytes() const { return static_cast<qint64>(info_.workspaceBytes); }
  bool onGpu() const { return info_.onGpu; }
  bool hasModel() const { return hasModel_; }
  const EngineInfo& info() const { return info_; }

  // Starts loading (ignored while a load runs; a running generation is stopped first).
  // device: "auto" | "cpu" | "cuda"; precision: "bf16", …; context: KV-cache tokens; keepQuantized:
  // keep quantized weights in cosmos::default_quant_cache_dir() for the next load; kvCache: "full" |
  // "int8" (cosmos/kv_format.h).
  Q_INVOKABLE void loadModel(const QString& dir, const QString& device = QStringLiteral("auto"),
                             const QString& precision = QStringLiteral("bf16"), int context = 8192,
                             bool keepQuantized = false, const QString& kvCache = QStringLiteral("full"));
  // Cancels a running load: the model loaded before stays (state Ready), else state NoModel;
  // errorText says which.
  Q_INVOKABLE void cancelLoad();
  // Stops the running generation (it finishes with stop_reason "cancelled").
  Q_INVOKABLE void stop();
  Q_INVOKABLE void clearError();

  // Queues a reply to `messages`; returns its request id, or -1 when no model is ready (state not
  // Ready). The state is Generating until generationFinished/generationFailed for that id.
  qint64 generate(std::vector<cosmos::ChatMessage> messages, cosmos::GenerateOptions options);
  // Queues n answers to `messages` as one batch (EngineController::generateMany); returns the
  // request id, or -1 when no model is ready or n < 1. The answers stream through answerPiecesReady
  // (answer 0..n-1) and end one by one (answerFinished / answerFailed); generationFinished for the
  // request id follows the last one.
  qint64 generateMany(std::vector<cosmos::ChatMessage> messages, cosmos::GenerateOptions options, int n);
  qint64 activeRequest() const { return activeRequest_; }

 signals:
  void stateChanged();
  void loadProgressChanged();
  void errorTextChanged();
  void infoChanged();
  void piecesReady(qint64 requestId, const QString& text);
  void generationFinished(qint64 requestId, const QVariantMap& stats);
  void generationFailed(qint64 requestId, const QString& message);
  void statsSample(const QVariantMap& sample);
  void answerPiecesReady(qint64 requestId, int answer, const QString& text);
  void answerRestarted(qint64 requestId, int answer);
  void answerFinished(qint64 requestId, int answer, const QVariantMap& stats);
  void answerFailed(qint64 requestId, int answer, const QString& message);

 private:
  // A generation request: a new id made active, the stop flag cleared, state Generating, then
  // `call` queued on the worker thread with the id.
  qint64 startRequest(std::function<void(EngineController*, qint64)> call);
  void setState(State state);
  void setLoadProgress(double fraction);
  void setErrorText(const QString& text);
  void onLoaded(const EngineInfo& info);
  void onLoadFailed(const QString& message);
  void onLoadCancelled(const QString& message);
  void onGenerationEnded(qint64 requestId);

  QThread thread_;
  EngineController* controller_ = nullptr;  // lives on thread_; deleted after the thread ends
  State state_ = NoModel;
  double loadProgress_ = 0;
  QString errorText_;
  QString modelDir_;         // the loaded model's folder
  QString loadingDir_;       // the folder being loaded
  EngineInfo info_;
  bool hasModel_ = false;
  qint64 nextRequest_ = 0;
  qint64 activeRequest_ = -1;
};

}  // namespace cosmos::ui
