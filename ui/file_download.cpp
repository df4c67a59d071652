#include "file_download.h"

#include <QDir>
#include <QFileInfo>
#include <QNetworkAccessManager>
#include <QNetworkReply>
#include <QNetworkRequest>
#include <QRegularExpression>

#include <spdlog/spdlog.h>

namespace cosmos::ui {

namespace {
constexpr int kMaxRedirects = 10;
constexpr qint64 kReadBuffer = 8 << 20;  // the reply holds at most this much when the disk is slow
constexpr qint64 kHashChunk = 4 << 20;
}  // namespace

FileDownload::FileDownload(QNetworkAccessManager* network, const HubClient* hub, HubFile file, const QString& outDir,
                           RetryPolicy retry, QObject* parent)
    : QObject(parent),
      network_(network),
      hub_(hub),
      file_(std::move(file)),
      finalPath_(QDir(outDir).filePath(file_.path)),
      partPath_(partPath(finalPath_)),
      retry_(retry) {
  retryTimer_.setSingleShot(true);
  connect(&retryTimer_, &QTimer::timeout, this, &FileDownload::requestFromStart);
}

FileDownload::~FileDownload() {
  dropReply();
  out_.close();
}

void FileDownload::start() {
  stopped_ = false;
  paused_ = false;
  if (!QDir().mkpath(QFileInfo(finalPath_).absolutePath()))
    return fail(tr("cannot create the folder %1").arg(QFileInfo(finalPath_).absolutePath()));
  if (QFileInfo(partPath_).size() > file_.size) QFile::remove(partPath_);  // not this file's beginning
  resetHash();
  written_ = 0;
  if (QFile::exists(partPath_) && !hashExisting()) return;
  out_.setFileName(partPath_);
  if (!out_.open(QIODevice::WriteOnly | QIODevice::Append))
    return fail(tr("cannot write %1: %2").arg(partPath_, out_.errorString()));
  if (written_ == file_.size) return finish();
  if (written_ > 0) spdlog::info("download: resuming {} at byte {}", file_.path.toStdString(), written_);
  attempts_ = 0;
  requestFromStart();
}

void FileDownload::pause() {
  paused_ = true;
  retryTimer_.stop();
  dropReply();
  out_.flush();
}

void FileDownload::resume() {
  if (stopped_ || !paused_) return;
  paused_ = false;
  attempts_ = 0;
  requestFromStart();
}

void FileDownload::abort() {
  stopped_ = true;
  retryTimer_.stop();
  dropReply();
  out_.close();
}

void FileDownload::resetHash() {
  hash_.reset();
  if (file_.isLfs()) {
    hash_ = std::make_unique<QCryptographicHash>(QCryptographicHash::Sha256);
  } else if (!file_.gitOid.isEmpty()) {
    hash_ = std::make_unique<QCryptographicHash>(QCryptographicHash::Sha1);
    hash_->addData("blob " + QByteArray::number(file_.size) + '\0');
  }
}

// The bytes already in the .part (an earlier run) go through the hash before more are appended.
bool FileDownload::hashExisting() {
  QFile part(partPath_);
  if (!part.open(QIODevice::ReadOnly)) {
    fail(tr("cannot read %1: %2").arg(partPath_, part.errorString()));
    return false;
  }
  QByteArray chunk;
  while (!(chunk = part.read(kHashChunk)).isEmpty()) {
    if (hash_) hash_->addData(chunk);
    written_ += chunk.size();
  }
  if (part.error() != QFileDevice::NoError) {
    fail(tr("cannot read %1: %2").arg(partPath_, part.errorString()));
    return false;
  }
  return true;
}

void FileDownload::requestFromStart() {
  attemptStart_ = written_;
  request(hub_->fileUrl(file_.path), 0);
}

void FileDownload::request(const QUrl& url, int redirects) {
  QNetworkRequest req = hub_->request(url);
  req.setAttribute(QNetworkRequest::RedirectPolicyAttribute, QNetworkRequest::ManualRedirectPolicy);
  req.setRawHeader("Accept-Encoding", "identity");  // the bytes of the file, not a compressed form
  if (written_ > 0) req.setRawHeader("Range", "bytes=" + QByteArray::number(written_) + '-');
  url_ = url;
  redirects_ = redirects;
  accepted_ = false;
  QNetworkReply* reply = network_->get(req);
  reply_ = reply;
  reply->setReadBufferSize(kReadBuffer);
  connect(reply, &QNetworkReply::readyRead, this, [this, reply] { consume(reply); });
  connect(reply, &QNetworkReply::finished, this, [this, reply] { onFinished(reply); });
}

void FileDownload::dropReply() {
  if (!reply_) return;
  QNetworkReply* reply = reply_;
  reply_ = nullptr;
  reply->disconnect(this);
  reply->abort();
  reply->deleteLater();
}

// 200: the whole file (a server that ignored the Range starts over); 206: the rest from written_.
bool FileDownload::accept(QNetworkReply* reply) {
  const int status = reply->attribute(QNetworkRequest::HttpStatusCodeAttribute).toInt();
  if (status == 200) {
    if (written_ > 0) truncate();
  } else if (status == 206) {
    static const QRegularExpression range(QStringLiteral("^bytes (\\d+)-"));
    const auto m = range.match(QString::fromLatin1(reply->rawHeader("Content-Range")));
    if (!m.hasMatch() || m.captured(1).toLongLong() != written_) {
      truncate();  // a range other than the one asked for: start this file again
      dropReply();
      retryLater(tr("the server sent another byte range than requested"));
      return false;
    }
  } else {
    return false;  // a redirect or an error: its body is not the file
  }
  accepted_ = true;
  return true;
}

void FileDownload::consume(QNetworkReply* reply) {
  if (reply != reply_ || (!accepted_ && !accept(reply))) return;
  const QByteArray data = reply->readAll();
  if (data.isEmpty()) return;
  if (written_ + data.size() > file_.size) {
    dropReply();
    return fail(tr("%1: the server sent more than the %2 bytes the file list gives; the download was deleted")
                    .arg(hub_->describe(file_.path))
                    .arg(file_.size),
                true);
  }
  if (out_.write(data) != data.size()) {
    dropReply();
    return fail(tr("cannot write %1: %2").arg(partPath_, out_.errorString()));
  }
  if (hash_) hash_->addData(data);
  written_ += data.size();
  emit progressed(data.size());
}

void FileDownload::onFinished(QNetworkReply* reply) {
  if (reply != reply_) return;
  consume(reply);
  if (reply != reply_) return;  // consume failed or restarted
  reply_ = nullptr;
  reply->deleteLater();
  const int status = reply->attribute(QNetworkRequest::HttpStatusCodeAttribute).toInt();
  if (status >= 300 && status < 400 && status != 304) {
    const QString what = hub_->describe(file_.path);
    const QUrl next = reply->url().resolved(QUrl::fromEncoded(reply->rawHeader("Location")));
    if (reply->rawHeader("Location").isEmpty()) return fail(tr("%1: HTTP %2 without a Location").arg(what).arg(status));
    if (redirects_ >= kMaxRedirects) return fail(tr("%1: too many redirects").arg(what));
    // Never from https to anything less, never to anything but http(s).
    const bool https = next.scheme() == QLatin1String("https");
    if (!https && (url_.scheme() == QLatin1String("https") || next.scheme() != QLatin1String("http")))
      return fail(tr("%1: refused a redirect from %2 to %3")
                      .arg(what, url_.toString(QUrl::RemoveQuery), next.toString(QUrl::RemoveQuery)));
    return request(next, redirects_ + 1);
  }
  if (status == 416 && written_ > 0) {  // the .part does not fit the file on the server: start over
    truncate();
    return retryLater(tr("the server refused to resume at byte %1").arg(attemptStart_));
  }
  if (status == 408 || status == 429 || status >= 500) return retryLater(tr("HTTP %1").arg(status));
  if (status >= 400) {
    const QByteArray body = reply->readAll();
    return fail(hub_->httpError(status, reply->rawHeader("X-Error-Code"), HubClient::serverMessage(reply, body), file_.path));
  }
  if (accepted_ && written_ == file_.size) return finish();
  if (status != 0 && !accepted_ && reply->error() == QNetworkReply::NoError)
    return fail(tr("%1: unexpected HTTP %2").arg(hub_->describe(file_.path)).arg(status));
  QString reason = reply->error() == QNetworkReply::OperationCanceledError
                       ? tr("no data for %1 s").arg(retry_.stallTimeoutMs / 1000.0)
                   : reply->error() != QNetworkReply::NoError ? reply->errorString()
                                                              : tr("the connection closed early");
  retryLater(tr("%1 (at %2 of %3 bytes)").arg(reason).arg(written_).arg(file_.size));
}

void FileDownload::truncate() {
  if (written_ > 0) emit progressed(-written_);
  out_.resize(0);
  written_ = 0;
  attemptStart_ = 0;
  resetHash();
}

void FileDownload::retryLater(const QString& reason) {
  if (written_ > attemptStart_) attempts_ = 0;  // this attempt moved on: count afresh
  ++attempts_;
  if (attempts_ >= retry_.maxAttempts)
    return fail(tr("%1: %2; gave up after %3 attempts (the part downloaded is kept: start again to resume)")
                    .arg(hub_->describe(file_.path), reason)
                    .arg(attempts_));
  const int delay = retry_.delayFor(attempts_);
  spdlog::warn("download: {}: {}; retrying in {} ms", file_.path.toStdString(), reason.toStdString(), delay);
  out_.flush();
  emit retrying(tr("%1: %2").arg(file_.path, reason), delay, attempts_);
  retryTimer_.start(delay);
}

void FileDownload::finish() {
  if (!out_.flush()) return fail(tr("cannot write %1: %2").arg(partPath_, out_.errorString()));
  out_.close();
  if (hash_) {
    const QByteArray got = hash_->result().toHex();
    const QByteArray& expected = file_.isLfs() ? file_.sha256 : file_.gitOid;
    if (got != expected)
      return fail(tr("%1 is corrupt: its %2 is %3 but the hub lists %4; the bad download was deleted")
                      .arg(hub_->describe(file_.path), file_.isLfs() ? QStringLiteral("SHA-256") : QStringLiteral("git SHA-1"),
                           QString::fromLatin1(got), QString::fromLatin1(expected)),
                  true);
  }
  if (QFile::exists(finalPath_) && !QFile::remove(finalPath_))
    return fail(tr("cannot replace %1").arg(finalPath_));
  if (!QFile::rename(partPath_, finalPath_)) return fail(tr("cannot rename %1 to %2").arg(partPath_, finalPath_));
  stopped_ = true;
  emit done();
}

void FileDownload::fail(const QString& message, bool removePart) {
  retryTimer_.stop();
  dropReply();
  out_.close();
  if (removePart) QFile::remove(partPath_);
  stopped_ = true;
  spdlog::error("download: {}", message.toStdString());
  emit failed(message);
}

}  // namespace cosmos::ui
