// Downloads a Hugging Face model repository into a folder (like `huggingface-cli download REPO
// --local-dir DIR`): the file list (HubClient), a check of the free disk space against what is
// left to fetch, then each file in turn (FileDownload: <file>.part, resumed with Range, verified
// against its hash, renamed). Files already there with the listed size are kept. Progress is
// bytes done / total with the speed over the last seconds and the time left; pause() and resume()
// stop and continue the transfer; cancel() stops it and keeps the .part files, so the next
// start() resumes them. Used on one thread (the CLI's main thread, or the app's download thread:
// DownloadViewModel).
#pragma once

#include <QElapsedTimer>
#include <QList>
#include <QObject>
#include <QString>

#include <deque>
#include <functional>
#include <memory>
#include <utility>

#include "hub_client.h"

class QNetworkAccessManager;

namespace cosmos::ui {

class FileDownload;

struct DownloadRequest {
  QString repo;
  QString revision = QStringLiteral("main");
  QString outDir;
  QString endpoint;  // blank: $HF_ENDPOINT, else https://huggingface.co
  QString token;     // blank: $HF_TOKEN, else huggingface-cli's saved token
};

class ModelDownloader : public QObject {
  Q_OBJECT

 public:
  enum class State { Idle, Listing, Downloading, Paused, Finished, Failed, Cancelled };
  Q_ENUM(State)
  // Bytes free for a new file in `dir` (negative: unknown, not checked). Tests replace it.
  using FreeSpaceProvider = std::function<qint64(const QString& dir)>;

  explicit ModelDownloader(QObject* parent = nullptr);
  ~ModelDownloader() override;

  static qint64 systemFreeSpace(const QString& dir);  // QStorageInfo
  static QString stateName(State state);              // "idle", "listing", "downloading", ...
  void setFreeSpaceProvider(FreeSpaceProvider provider);
  void setRetryPolicy(const RetryPolicy& policy) { retry_ = policy; }

  State state() const { return state_; }
  bool active() const { return state_ == State::Listing || state_ == State::Downloading || state_ == State::Paused; }
  qint64 bytesDone() const { return done_; }
  qint64 bytesTotal() const { return total_; }
  double bytesPerSecond() const { return speed_; }
  double secondsLeft() const;  // negative: unknown
  QString outDir() const { return request_.outDir; }
  QList<HubFile> files() const { return files_; }

  // Starts (or resumes, after a cancel or a restart) the download; ignored while one is active.
  void start(const cosmos::ui::DownloadRequest& request);
  void pause();
  void resume();
  void cancel();

 signals:
  void stateChanged(cosmos::ui::ModelDownloader::State state);
  // At most ~8 times a second, and at each file's end.
  void progressChanged(qint64 done, qint64 total, double bytesPerSecond, double secondsLeft);
  void fileStarted(const QString& path, int index, int count);  // index from 1
  void notice(const QString& text);  // a retry, a resume; empty: the last one is over
  void finished(const QString& outDir, int files, qint64 bytes);
  void failed(const QString& message);
  void cancelled(const QString& message);

 private:
  void onListed(const QList<HubFile>& files);
  void nextFile();
  void onProgress(qint64 delta);
  void emitProgress(bool force);
  void onRetrying(const QString& reason, int delayMs, int attempt);
  void fail(const QString& message);
  void setState(State state);
  void stopWork();

  FreeSpaceProvider freeSpace_;
  RetryPolicy retry_;
  QNetworkAccessManager* network_ = nullptr;
  std::unique_ptr<HubClient> hub_;
  FileDownload* job_ = nullptr;
  DownloadRequest request_;
  State state_ = State::Idle;
  QList<HubFile> files_;
  QList<bool> complete_;
  int index_ = 0;
  qint64 done_ = 0;
  qint64 total_ = 0;
  double speed_ = 0;
  QElapsedTimer clock_;
  qint64 lastEmitMs_ = -1000;
  std::deque<std::pair<qint64, qint64>> samples_;  // (ms, bytes received so far) over the last seconds
  qint64 received_ = 0;
  bool retryNotice_ = false;
};

}  // namespace cosmos::ui
