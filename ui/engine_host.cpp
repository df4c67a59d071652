#include "engine_host.h"

#include <QMetaObject>

#include "cosmos/quant_cache.h"
#include "engine_controller.h"

namespace cosmos::ui {

EngineHost::EngineHost(std::unique_ptr<ChatEngine> engine, QObject* parent) : QObject(parent) {
  controller_ = new EngineController(std::move(engine));
  controller_->moveToThread(&thread_);
  thread_.setObjectName(QStringLiteral("cosmos-engine"));

  connect(controller_, &EngineController::loadProgress, this, [this](double fraction) {
    if (state_ == Loading) setLoadProgress(fraction);
  }, Qt::QueuedConnection);
  connect(controller_, &EngineController::loaded, this, &EngineHost::onLoaded, Qt::QueuedConnection);
  connect(controller_, &EngineController::loadFailed, this, &EngineHost::onLoadFailed, Qt::QueuedConnection);
  connect(controller_, &EngineController::loadCancelled, this, &EngineHost::onLoadCancelled,
          Qt::QueuedConnection);
  connect(controller_, &EngineController::piecesReady, this, &EngineHost::piecesReady, Qt::QueuedConnection);
  connect(controller_, &EngineController::statsSample, this, &EngineHost::statsSample, Qt::QueuedConnection);
  connect(controller_, &EngineController::answerPiecesReady, this, &EngineHost::answerPiecesReady,
          Qt::QueuedConnection);
  connect(controller_, &EngineController::answerRestarted, this, &EngineHost::answerRestarted, Qt::QueuedConnection);
  connect(controller_, &EngineController::answerFinished, this, &EngineHost::answerFinished, Qt::QueuedConnection);
  connect(controller_, &EngineController::answerFailed, this, &EngineHost::answerFailed, Qt::QueuedConnection);
  connect(controller_, &EngineController::generationFinished, this,
          [this](qint64 requestId, const QVariantMap& stats) {
            onGenerationEnded(requestId);
            emit generationFinished(requestId, stats);
          }, Qt::QueuedConnection);
  connect(controller_, &EngineController::generationFailed, this,
          [this](qint64 requestId, const QString& message) {
            onGenerationEnded(requestId);
            emit generationFailed(requestId, message);
          }, Qt::QueuedConnection);
  thread_.start();
}

EngineHost::~EngineHost() {
  // Whatever the worker is doing returns at its next callback; queued requests then see the flags.
  controller_->requestStop();
  controller_->requestCancelLoad();
  thread_.quit();
  thread_.wait();
  delete controller_;  // the thread has ended: nothing else touches it
}

void EngineHost::setState(State state) {
  if (state_ == state) return;
  state_ = state;
  emit stateChanged();
}

void EngineHost::setLoadProgress(double fraction) {
  if (loadProgress_ == fraction) return;
  loadProgress_ = fraction;
  emit loadProgressChanged();
}

void EngineHost::setErrorText(const QString& text) {
  if (errorText_ == text) return;
  errorText_ = text;
  emit errorTextChanged();
}

void EngineHost::clearError() { setErrorText({}); }

void EngineHost::loadModel(const QString& dir, const QString& device, const QString& precision, int context,
                           bool keepQuantized, const QString& kvCache) {
  if (state_ == Loading) return;
  if (state_ == Generating) controller_->requestStop();  // the load is queued behind the reply
  loadingDir_ = dir;
  setErrorText({});
  setLoadProgress(0);
  setState(Loading);
  controller_->clearCancelLoad();
  EngineLoadRequest request;
  request.modelDir = dir;
  request.device = device;
  request.precision = precision;
  request.contextTokens = context;
  request.kvCache = kvCache;
  if (keepQuantized) request.quantCacheDir = QString::fromStdString(cosmos::default_quant_cache_dir().string());
  EngineController* controller = controller_;
  QMetaObject::invokeMethod(controller, [controller, request] { controller->load(request); }, Qt::QueuedConnection);
}

void EngineHost::cancelLoad() {
  if (state_ == Loading) controller_->requestCancelLoad();
}

void EngineHost::stop() { controller_->requestStop(); }

qint64 EngineHost::startRequest(std::function<void(EngineController*, qint64)> call) {
  const qint64 id = ++nextRequest_;
  activeRequest_ = id;
  controller_->clearStop();
  setState(Generating);
  EngineController* controller = controller_;
  QMetaObject::invokeMethod(
      controller, [controller, id, call = std::move(call)] { call(controller, id); }, Qt::QueuedConnection);
  return id;
}

qint64 EngineHost::generate(std::vector<cosmos::ChatMessage> messages, cosmos::GenerateOptions options) {
  if (state_ != Ready) return -1;
  return startRequest([m = std::move(messages), o = std::move(options)](EngineController* c, qint64 id) {
    c->generate(id, m, o);
  });
}

qint64 EngineHost::generateMany(std::vector<cosmos::ChatMessage> messages, cosmos::GenerateOptions options, int n) {
  if (state_ != Ready || n < 1) return -1;
  return startRequest([n, m = std::move(messages), o = std::move(options)](EngineController* c, qint64 id) {
    c->generateMany(id, m, o, n);
  });
}

void EngineHost::onLoaded(const EngineInfo& info) {
  info_ = info;
  modelDir_ = loadingDir_;
  hasModel_ = true;
  emit infoChanged();
  setLoadProgress(1.0);
  setState(Ready);
}

void EngineHost::onLoadFailed(const QString& message) {
  if (hasModel_) {
    setErrorText(message + QStringLiteral(" (the model loaded before, %1, is still loaded)").arg(modelDir_));
    setState(Ready);
  } else {
    setErrorText(message);
    setState(Failed);
  }
}

void EngineHost::onLoadCancelled(const QString& message) {
  Q_UNUSED(message);
  if (hasModel_) {
    setErrorText(QStringLiteral("Loading was cancelled; the model loaded before (%1) is still loaded.").arg(modelDir_));
    setState(Ready);
  } else {
    setErrorText(QStringLiteral("Loading was cancelled; no model is loaded."));
    setState(NoModel);
  }
}

void EngineHost::onGenerationEnded(qint64 requestId) {
  if (requestId != activeRequest_) return;
  activeRequest_ = -1;
  if (state_ == Generating) setState(Ready);
}

}  // namespace cosmos::ui
