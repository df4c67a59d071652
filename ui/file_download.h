// One file of a model download: GET {endpoint}/{repo}/resolve/{revision}/{path}, redirects
// followed by hand (the token is not sent to another host), the bytes appended to <file>.part and
// hashed as they arrive. A dropped connection, a stall or HTTP 408/429/5xx is retried with backoff
// and resumes with "Range: bytes=N-"; an existing .part (a restart) is hashed and resumed the same
// way. At the end the hash must equal the file list's (SHA-256 for LFS files, the git blob SHA-1
// for the others): a mismatch deletes the .part and is an error; a match renames it to the file.
#pragma once

#include <QCryptographicHash>
#include <QFile>
#include <QObject>
#include <QString>
#include <QTimer>
#include <QUrl>

#include <memory>

#include "hub_client.h"

class QNetworkAccessManager;
class QNetworkReply;

namespace cosmos::ui {

class FileDownload : public QObject {
  Q_OBJECT

 public:
  FileDownload(QNetworkAccessManager* network, const HubClient* hub, HubFile file, const QString& outDir,
               RetryPolicy retry, QObject* parent = nullptr);
  ~FileDownload() override;

  static QString partPath(const QString& finalPath) { return finalPath + QStringLiteral(".part"); }
  QString finalPath() const { return finalPath_; }
  const HubFile& file() const { return file_; }
  qint64 written() const { return written_; }

  // Starts (or, after a restart, resumes from the .part). Answers with done or failed.
  void start();
  // Stops the transfer and keeps the .part open; resume() continues with a Range request.
  void pause();
  void resume();
  // Stops for good; the .part stays on disk for a later start().
  void abort();

 signals:
  void progressed(qint64 deltaBytes);  // negative when a server ignored the range and it restarts
  void retrying(const QString& reason, int delayMs, int attempt);
  void done();
  void failed(const QString& message);

 private:
  void request(const QUrl& url, int redirects);
  void requestFromStart();
  void dropReply();
  void consume(QNetworkReply* reply);
  bool accept(QNetworkReply* reply);
  void onFinished(QNetworkReply* reply);
  void truncate();
  void retryLater(const QString& reason);
  void resetHash();
  bool hashExisting();
  void finish();
  void fail(const QString& message, bool removePart = false);

  QNetworkAccessManager* network_;
  const HubClient* hub_;
  HubFile file_;
  QString finalPath_;
  QString partPath_;
  RetryPolicy retry_;
  QFile out_;
  std::unique_ptr<QCryptographicHash> hash_;
  qint64 written_ = 0;
  qint64 attemptStart_ = 0;
  int attempts_ = 0;
  QNetworkReply* reply_ = nullptr;
  QUrl url_;
  int redirects_ = 0;
  bool accepted_ = false;
  bool stopped_ = false;
  bool paused_ = false;
  QTimer retryTimer_;
};

}  // namespace cosmos::ui
