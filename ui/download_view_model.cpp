#include "download_view_model.h"

#include <QDir>
#include <QFileInfo>
#include <QMetaObject>

#include <cmath>

#include "settings_view_model.h"

namespace cosmos::ui {

namespace {
const QString kKeyRepo = QStringLiteral("download/repo");
const QString kKeyRevision = QStringLiteral("download/revision");
const QString kKeyDestination = QStringLiteral("download/destination");
const QString kKeyEndpoint = QStringLiteral("download/endpoint");
}  // namespace

DownloadViewModel::DownloadViewModel(SettingsViewModel* settings, QObject* parent)
    : QObject(parent), settings_(settings), store_(std::make_unique<QSettings>()) {
  init();
}

DownloadViewModel::DownloadViewModel(SettingsViewModel* settings, const QString& iniFile, QObject* parent)
    : QObject(parent), settings_(settings), store_(std::make_unique<QSettings>(iniFile, QSettings::IniFormat)) {
  init();
}

void DownloadViewModel::init() {
  repo_ = store_->value(kKeyRepo, QString::fromLatin1(kDefaultRepo)).toString();
  revision_ = store_->value(kKeyRevision, QStringLiteral("main")).toString();
  destination_ = store_->value(kKeyDestination).toString();
  endpoint_ = store_->value(kKeyEndpoint).toString();
  hasSavedToken_ = !HubClient::resolveToken().isEmpty();

  thread_.setObjectName(QStringLiteral("cosmos-download"));
  downloader_ = new ModelDownloader;  // no parent: it moves to the download thread
  downloader_->moveToThread(&thread_);
  connect(downloader_, &ModelDownloader::stateChanged, this, &DownloadViewModel::onStateChanged);
  connect(downloader_, &ModelDownloader::progressChanged, this,
          [this](qint64 done, qint64 total, double speed, double left) {
            done_ = done;
            total_ = total;
            speed_ = speed;
            secondsLeft_ = left;
            emit progressChanged();
          });
  connect(downloader_, &ModelDownloader::fileStarted, this, [this](const QString& path, int index, int count) {
    currentFile_ = path;
    fileIndex_ = index;
    fileCount_ = count;
    emit fileChanged();
  });
  connect(downloader_, &ModelDownloader::notice, this, [this](const QString& text) { setStatus(text, {}); });
  connect(downloader_, &ModelDownloader::failed, this, [this](const QString& message) { setStatus({}, message); });
  connect(downloader_, &ModelDownloader::cancelled, this, [this](const QString& message) { setStatus(message, {}); });
  connect(downloader_, &ModelDownloader::finished, this, &DownloadViewModel::onFinished);
  thread_.start();
}

DownloadViewModel::~DownloadViewModel() {
  // Closing the app mid-download: stop, keep the .part files for the next start.
  downloader_->disconnect(this);
  ModelDownloader* downloader = downloader_;
  QMetaObject::invokeMethod(
      downloader_, [downloader] {
        downloader->cancel();
        delete downloader;
      },
      Qt::BlockingQueuedConnection);
  thread_.quit();
  thread_.wait();
}

void DownloadViewModel::save(const QString& key, const QString& value) {
  store_->setValue(key, value);
  store_->sync();
}

void DownloadViewModel::setRepo(const QString& repo) {
  const QString clean = repo.trimmed();
  if (clean == repo_) return;
  repo_ = clean;
  save(kKeyRepo, repo_);
  emit repoChanged();
  if (destination_.isEmpty()) emit destinationChanged();  // targetDir follows the repository
}

void DownloadViewModel::setRevision(const QString& revision) {
  const QString clean = revision.trimmed();
  if (clean == revision_) return;
  revision_ = clean;
  save(kKeyRevision, revision_);
  emit revisionChanged();
}

void DownloadViewModel::setDestination(const QString& dirOrUrl) {
  const QString path = SettingsViewModel::pathFromUrl(dirOrUrl.trimmed());
  const QString clean = path.isEmpty() ? QString() : QDir::cleanPath(path);
  if (clean == destination_) return;
  destination_ = clean;
  save(kKeyDestination, destination_);
  emit destinationChanged();
}

QString DownloadViewModel::targetDir() const {
  return destination_.isEmpty() ? defaultDestination(repo_) : destination_;
}

void DownloadViewModel::setEndpoint(const QString& endpoint) {
  const QString clean = endpoint.trimmed();
  if (clean == endpoint_) return;
  endpoint_ = clean;
  save(kKeyEndpoint, endpoint_);
  emit endpointChanged();
}

QString DownloadViewModel::effectiveEndpoint() const { return HubClient::resolveEndpoint(endpoint_); }

void DownloadViewModel::setToken(const QString& token) {
  if (token == token_) return;
  token_ = token;
  emit tokenChanged();
}

bool DownloadViewModel::active() const {
  return state_ == ModelDownloader::State::Listing || state_ == ModelDownloader::State::Downloading ||
         state_ == ModelDownloader::State::Paused;
}

QString DownloadViewModel::defaultDestination(const QString& repo) {
  QString name = repo.trimmed().section(QLatin1Char('/'), -1);
  if (name.isEmpty() || !HubClient::checkRepo(repo.trimmed()).isEmpty()) name = QStringLiteral("model");
  return QDir::home().filePath(QStringLiteral("models/") + name);
}

void DownloadViewModel::setFreeSpaceProvider(ModelDownloader::FreeSpaceProvider provider) {
  ModelDownloader* d = downloader_;
  QMetaObject::invokeMethod(
      downloader_, [d, provider] { d->setFreeSpaceProvider(provider); },
      Qt::BlockingQueuedConnection);
}

void DownloadViewModel::setRetryPolicy(const RetryPolicy& policy) {
  ModelDownloader* d = downloader_;
  QMetaObject::invokeMethod(downloader_, [d, policy] { d->setRetryPolicy(policy); }, Qt::BlockingQueuedConnection);
}

void DownloadViewModel::start() {
  if (active()) return;
  DownloadRequest request;
  request.repo = repo_;
  request.revision = revision_;
  request.outDir = targetDir();
  request.endpoint = endpoint_;
  request.token = token_;
  modelReady_ = false;
  done_ = total_ = 0;
  speed_ = 0;
  secondsLeft_ = -1;
  currentFile_.clear();
  fileIndex_ = fileCount_ = 0;
  emit progressChanged();
  emit fileChanged();
  setStatus({}, {});
  // Shown at once (the thread answers with the same state a moment later).
  state_ = ModelDownloader::State::Listing;
  emit stateChanged();
  ModelDownloader* d = downloader_;
  QMetaObject::invokeMethod(downloader_, [d, request] { d->start(request); }, Qt::QueuedConnection);
}

void DownloadViewModel::pause() {
  ModelDownloader* d = downloader_;
  QMetaObject::invokeMethod(downloader_, [d] { d->pause(); }, Qt::QueuedConnection);
}

void DownloadViewModel::resume() {
  ModelDownloader* d = downloader_;
  QMetaObject::invokeMethod(downloader_, [d] { d->resume(); }, Qt::QueuedConnection);
}

void DownloadViewModel::cancel() {
  ModelDownloader* d = downloader_;
  QMetaObject::invokeMethod(downloader_, [d] { d->cancel(); }, Qt::QueuedConnection);
}

void DownloadViewModel::clearError() { setStatus(statusText_, {}); }

void DownloadViewModel::setStatus(const QString& status, const QString& error) {
  if (status == statusText_ && error == errorText_) return;
  statusText_ = status;
  errorText_ = error;
  emit statusChanged();
}

void DownloadViewModel::onStateChanged(ModelDownloader::State state) {
  if (state == state_) return;
  state_ = state;
  if (state == ModelDownloader::State::Paused)
    setStatus(tr("Paused. The part downloaded is kept; resume to continue."), {});
  else if (state == ModelDownloader::State::Downloading && statusText_.startsWith(tr("Paused")))
    setStatus({}, {});
  emit stateChanged();
}

void DownloadViewModel::onFinished(const QString& dir, int files, qint64 bytes) {
  const QString problem = settings_ ? settings_->validateModelDir(dir) : QString();
  const QString what = tr("Downloaded %1 (%2 files, %3) into %4.")
                           .arg(repo_)
                           .arg(files)
                           .arg(SettingsViewModel::formatBytes(static_cast<double>(bytes)), dir);
  if (!settings_) {
    setStatus(what, {});
  } else if (problem.isEmpty()) {
    settings_->setModelDir(dir);
    modelReady_ = true;
    setStatus(what + QLatin1Char(' ') + tr("It is now the model folder."), {});
  } else {
    setStatus(what, tr("The downloaded folder cannot be loaded as a model: %1").arg(problem));
  }
  emit stateChanged();
  emit finished(dir);
}

QString DownloadViewModel::formatDuration(double seconds) {
  if (!(seconds >= 0) || std::isinf(seconds)) return {};
  const qint64 s = static_cast<qint64>(std::llround(seconds));
  if (s >= 3600) return tr("%1 h %2 min").arg(s / 3600).arg((s % 3600) / 60, 2, 10, QLatin1Char('0'));
  if (s >= 60) return tr("%1 min %2 s").arg(s / 60).arg(s % 60, 2, 10, QLatin1Char('0'));
  return tr("%1 s").arg(s);
}

QString DownloadViewModel::formatSpeed(double bytesPerSecond) {
  return SettingsViewModel::formatBytes(bytesPerSecond) + QStringLiteral("/s");
}

}  // namespace cosmos::ui
