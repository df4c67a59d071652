#include "model_downloader.h"

#include <QDir>
#include <QFileInfo>
#include <QNetworkAccessManager>
#include <QStorageInfo>

#include <spdlog/spdlog.h>

#include "file_download.h"
#include "settings_view_model.h"

namespace cosmos::ui {

namespace {
constexpr qint64 kSpeedWindowMs = 8000;
constexpr qint64 kEmitIntervalMs = 125;
}  // namespace

ModelDownloader::ModelDownloader(QObject* parent) : QObject(parent), freeSpace_(&ModelDownloader::systemFreeSpace) {
  clock_.start();
}

ModelDownloader::~ModelDownloader() { stopWork(); }

qint64 ModelDownloader::systemFreeSpace(const QString& dir) {
  QStorageInfo storage(dir);
  if (!storage.isValid() || !storage.isReady()) return -1;
  return storage.bytesAvailable();
}

QString ModelDownloader::stateName(State state) {
  switch (state) {
    case State::Idle: return QStringLiteral("idle");
    case State::Listing: return QStringLiteral("listing");
    case State::Downloading: return QStringLiteral("downloading");
    case State::Paused: return QStringLiteral("paused");
    case State::Finished: return QStringLiteral("finished");
    case State::Failed: return QStringLiteral("failed");
    case State::Cancelled: return QStringLiteral("cancelled");
  }
  return {};
}

void ModelDownloader::setFreeSpaceProvider(FreeSpaceProvider provider) {
  freeSpace_ = provider ? std::move(provider) : FreeSpaceProvider(&ModelDownloader::systemFreeSpace);
}

double ModelDownloader::secondsLeft() const {
  if (!(speed_ > 0)) return -1;
  return static_cast<double>(total_ - done_) / speed_;
}

void ModelDownloader::setState(State state) {
  if (state == state_) return;
  state_ = state;
  emit stateChanged(state);
}

void ModelDownloader::stopWork() {
  if (hub_) hub_->abort();
  if (job_) {
    job_->abort();
    job_->disconnect(this);
    job_->deleteLater();
    job_ = nullptr;
  }
}

void ModelDownloader::fail(const QString& message) {
  stopWork();
  speed_ = 0;
  setState(State::Failed);
  emit failed(message);
}

void ModelDownloader::start(const DownloadRequest& request) {
  if (active()) return;
  stopWork();
  request_ = request;
  request_.repo = request_.repo.trimmed();
  request_.revision = request_.revision.trimmed().isEmpty() ? QStringLiteral("main") : request_.revision.trimmed();
  request_.outDir = request_.outDir.trimmed().isEmpty() ? QString() : QDir::cleanPath(request_.outDir.trimmed());
  files_.clear();
  complete_.clear();
  index_ = 0;
  done_ = total_ = received_ = 0;
  speed_ = 0;
  samples_.clear();
  retryNotice_ = false;
  setState(State::Listing);  // before any failure, so a failure always changes the state
  if (const QString problem = HubClient::checkRepo(request_.repo); !problem.isEmpty()) return fail(problem);
  if (request_.outDir.isEmpty()) return fail(tr("Choose the folder to download into."));
  HubTarget target;
  target.endpoint = HubClient::resolveEndpoint(request_.endpoint);
  if (const QString problem = HubClient::checkEndpoint(target.endpoint); !problem.isEmpty()) return fail(problem);
  target.repo = request_.repo;
  target.revision = request_.revision;
  target.token = request_.token.trimmed().isEmpty() ? HubClient::resolveToken() : request_.token.trimmed();
  if (!network_) network_ = new QNetworkAccessManager(this);
  hub_ = std::make_unique<HubClient>(network_, target, retry_);
  connect(hub_.get(), &HubClient::listed, this, &ModelDownloader::onListed);
  connect(hub_.get(), &HubClient::failed, this, &ModelDownloader::fail);
  connect(hub_.get(), &HubClient::retrying, this, &ModelDownloader::onRetrying);
  spdlog::info("download: {} at {} from {} into {}{}", target.repo.toStdString(), target.revision.toStdString(),
               target.endpoint.toStdString(), request_.outDir.toStdString(), target.token.isEmpty() ? "" : " (with a token)");
  hub_->listFiles();
}

void ModelDownloader::onListed(const QList<HubFile>& files) {
  if (state_ != State::Listing) return;
  if (files.isEmpty())
    return fail(tr("%1 has no files at revision %2.").arg(request_.repo, request_.revision));
  for (const HubFile& f : files)
    if (!HubClient::isSafePath(f.path))
      return fail(tr("The file list of %1 names an unsafe path, \"%2\": nothing was downloaded.").arg(request_.repo, f.path));
  if (!QDir().mkpath(request_.outDir)) return fail(tr("Cannot create the folder %1.").arg(request_.outDir));
  files_ = files;
  qint64 remaining = 0;
  int parts = 0;
  for (const HubFile& f : files_) {
    const QString path = QDir(request_.outDir).filePath(f.path);
    const QFileInfo existing(path);
    const bool have = existing.isFile() && existing.size() == f.size && !QFile::exists(FileDownload::partPath(path));
    complete_.append(have);
    total_ += f.size;
    if (have) {
      done_ += f.size;
      continue;
    }
    const qint64 part = QFileInfo(FileDownload::partPath(path)).size();
    const qint64 kept = part <= f.size ? part : 0;
    parts += kept > 0;
    done_ += kept;
    remaining += f.size - kept;
  }
  const qint64 free = freeSpace_(request_.outDir);
  if (free >= 0 && free < remaining)
    return fail(tr("Not enough free disk space in %1: the download needs %2 more, only %3 are free.")
                    .arg(request_.outDir, SettingsViewModel::formatBytes(static_cast<double>(remaining)),
                         SettingsViewModel::formatBytes(static_cast<double>(free))));
  if (parts > 0 || done_ > 0)
    emit notice(tr("Resuming: %1 of %2 already here.").arg(SettingsViewModel::formatBytes(static_cast<double>(done_)),
                                                           SettingsViewModel::formatBytes(static_cast<double>(total_))));
  setState(State::Downloading);
  emitProgress(true);
  nextFile();
}

void ModelDownloader::nextFile() {
  while (index_ < files_.size() && complete_[index_]) ++index_;
  if (index_ >= files_.size()) {
    speed_ = 0;
    emitProgress(true);
    spdlog::info("download: {} complete in {}", request_.repo.toStdString(), request_.outDir.toStdString());
    setState(State::Finished);
    emit finished(request_.outDir, static_cast<int>(files_.size()), total_);
    return;
  }
  const HubFile& file = files_[index_];
  job_ = new FileDownload(network_, hub_.get(), file, request_.outDir, retry_, this);
  connect(job_, &FileDownload::progressed, this, &ModelDownloader::onProgress);
  connect(job_, &FileDownload::retrying, this, &ModelDownloader::onRetrying);
  connect(job_, &FileDownload::failed, this, &ModelDownloader::fail);
  connect(job_, &FileDownload::done, this, [this] {
    complete_[index_] = true;
    job_->deleteLater();
    job_ = nullptr;
    emitProgress(true);
    nextFile();
  });
  emit fileStarted(file.path, index_ + 1, static_cast<int>(files_.size()));
  job_->start();  // a .part's bytes were counted when the list came; the job reports only new ones
}

void ModelDownloader::onProgress(qint64 delta) {
  done_ += delta;
  const qint64 now = clock_.elapsed();
  if (delta < 0) {  // the file starts over: the speed so far says nothing
    samples_.clear();
    return;
  }
  received_ += delta;
  if (retryNotice_) {  // data flows again: the retry notice is over
    retryNotice_ = false;
    emit notice(QString());
  }
  samples_.emplace_back(now, received_);
  while (samples_.size() > 2 && samples_.front().first < now - kSpeedWindowMs) samples_.pop_front();
  emitProgress(false);
}

void ModelDownloader::emitProgress(bool force) {
  const qint64 now = clock_.elapsed();
  if (!force && now - lastEmitMs_ < kEmitIntervalMs) return;
  lastEmitMs_ = now;
  if (state_ == State::Downloading && samples_.size() >= 2) {
    const qint64 ms = samples_.back().first - samples_.front().first;
    if (ms >= 250) speed_ = static_cast<double>(samples_.back().second - samples_.front().second) * 1000.0 / ms;
  }
  emit progressChanged(done_, total_, speed_, secondsLeft());
}

void ModelDownloader::onRetrying(const QString& reason, int delayMs, int attempt) {
  retryNotice_ = true;
  emit notice(tr("%1; retrying in %2 s (attempt %3 of %4)")
                  .arg(reason)
                  .arg(delayMs / 1000.0, 0, 'f', delayMs % 1000 == 0 ? 0 : 1)
                  .arg(attempt + 1)
                  .arg(retry_.maxAttempts));
}

void ModelDownloader::pause() {
  if (state_ != State::Downloading || !job_) return;
  job_->pause();
  speed_ = 0;
  samples_.clear();
  setState(State::Paused);
  emitProgress(true);
}

void ModelDownloader::resume() {
  if (state_ != State::Paused || !job_) return;
  setState(State::Downloading);
  job_->resume();
}

void ModelDownloader::cancel() {
  if (!active()) return;
  stopWork();
  speed_ = 0;
  samples_.clear();
  qint64 kept = 0;
  for (const HubFile& f : files_) kept += QFileInfo(FileDownload::partPath(QDir(request_.outDir).filePath(f.path))).size();
  setState(State::Cancelled);
  emitProgress(true);
  emit cancelled(kept > 0 ? tr("Download cancelled. The %1 downloaded so far are kept in %2 (the *.part files): "
                               "start it again to resume.")
                                .arg(SettingsViewModel::formatBytes(static_cast<double>(kept)), request_.outDir)
                          : tr("Download cancelled."));
}

}  // namespace cosmos::ui
