// The "Download model" page (QML: `download`): which repository and revision, into which folder,
// from which hub; progress (bytes, speed, time left, the current file), pause/resume, cancel. The
// ModelDownloader runs on its own thread (hashing and writing gigabytes stay off the GUI thread).
// When the download is complete and the folder is a usable model, it becomes the settings' model
// folder and modelReady turns true (the page offers to load it). Repository, revision,
// destination and hub address are remembered (QSettings group "download"); a token typed on the
// page is used for this session only.
#pragma once

#include <QObject>
#include <QSettings>
#include <QString>
#include <QThread>

#include <memory>

#include "model_downloader.h"

namespace cosmos::ui {

class SettingsViewModel;

class DownloadViewModel : public QObject {
  Q_OBJECT
  Q_PROPERTY(QString repo READ repo WRITE setRepo NOTIFY repoChanged)
  Q_PROPERTY(QString revision READ revision WRITE setRevision NOTIFY revisionChanged)
  // The folder chosen by the user; blank: defaultDestination(repo). targetDir is the one used.
  Q_PROPERTY(QString destination READ destination WRITE setDestination NOTIFY destinationChanged)
  Q_PROPERTY(QString targetDir READ targetDir NOTIFY destinationChanged)
  // The hub's address as set on the page; blank: $HF_ENDPOINT, else https://huggingface.co.
  Q_PROPERTY(QString endpoint READ endpoint WRITE setEndpoint NOTIFY endpointChanged)
  Q_PROPERTY(QString effectiveEndpoint READ effectiveEndpoint NOTIFY endpointChanged)
  Q_PROPERTY(QString token READ token WRITE setToken NOTIFY tokenChanged)
  Q_PROPERTY(bool hasSavedToken READ hasSavedToken CONSTANT)  // $HF_TOKEN or huggingface-cli login
  // "idle", "listing", "downloading", "paused", "finished", "failed", "cancelled".
  Q_PROPERTY(QString state READ state NOTIFY stateChanged)
  Q_PROPERTY(bool active READ active NOTIFY stateChanged)  // listing, downloading or paused
  Q_PROPERTY(bool modelReady READ modelReady NOTIFY stateChanged)
  Q_PROPERTY(double bytesDone READ bytesDone NOTIFY progressChanged)
  Q_PROPERTY(double bytesTotal READ bytesTotal NOTIFY progressChanged)
  Q_PROPERTY(double fraction READ fraction NOTIFY progressChanged)
  Q_PROPERTY(double bytesPerSecond READ bytesPerSecond NOTIFY progressChanged)
  Q_PROPERTY(double secondsLeft READ secondsLeft NOTIFY progressChanged)  // negative: unknown
  Q_PROPERTY(QString currentFile READ currentFile NOTIFY fileChanged)
  Q_PROPERTY(int fileIndex READ fileIndex NOTIFY fileChanged)
  Q_PROPERTY(int fileCount READ fileCount NOTIFY fileChanged)
  Q_PROPERTY(QString statusText READ statusText NOTIFY statusChanged)
  Q_PROPERTY(QString errorText READ errorText NOTIFY statusChanged)

 public:
  static constexpr const char* kDefaultRepo = "nvidia/Cosmos-Reason1-7B";

  // Remembers its fields in the application's QSettings; `settings` receives the model folder.
  explicit DownloadViewModel(SettingsViewModel* settings, QObject* parent = nullptr);
  // The same in an INI file (tests).
  DownloadViewModel(SettingsViewModel* settings, const QString& iniFile, QObject* parent = nullptr);
  ~DownloadViewModel() override;

  QString repo() const { return repo_; }
  void setRepo(const QString& repo);
  QString revision() const { return revision_; }
  void setRevision(const QString& revision);
  QString destination() const { return destination_; }
  void setDestination(const QString& dirOrUrl);
  QString targetDir() const;
  QString endpoint() const { return endpoint_; }
  void setEndpoint(const QString& endpoint);
  QString effectiveEndpoint() const;
  QString token() const { return token_; }
  void setToken(const QString& token);
  bool hasSavedToken() const { return hasSavedToken_; }
  QString state() const { return ModelDownloader::stateName(state_); }
  bool active() const;
  bool modelReady() const { return modelReady_; }
  double bytesDone() const { return static_cast<double>(done_); }
  double bytesTotal() const { return static_cast<double>(total_); }
  double fraction() const { return total_ > 0 ? static_cast<double>(done_) / static_cast<double>(total_) : 0.0; }
  double bytesPerSecond() const { return speed_; }
  double secondsLeft() const { return secondsLeft_; }
  QString currentFile() const { return currentFile_; }
  int fileIndex() const { return fileIndex_; }
  int fileCount() const { return fileCount_; }
  QString statusText() const { return statusText_; }
  QString errorText() const { return errorText_; }

  // ~/models/<name of the repository>.
  static QString defaultDestination(const QString& repo);
  // Tests: the free-space check and the retry timing of the next start().
  void setFreeSpaceProvider(ModelDownloader::FreeSpaceProvider provider);
  void setRetryPolicy(const RetryPolicy& policy);

  Q_INVOKABLE void start();
  Q_INVOKABLE void pause();
  Q_INVOKABLE void resume();
  Q_INVOKABLE void cancel();
  Q_INVOKABLE void clearError();
  // "2 h 05 min", "3 min 20 s", "12 s"; "" when unknown (negative).
  Q_INVOKABLE static QString formatDuration(double seconds);
  // "112.4 MB/s".
  Q_INVOKABLE static QString formatSpeed(double bytesPerSecond);

 signals:
  void repoChanged();
  void revisionChanged();
  void destinationChanged();
  void endpointChanged();
  void tokenChanged();
  void stateChanged();
  void progressChanged();
  void fileChanged();
  void statusChanged();
  void finished(const QString& dir);

 private:
  void init();
  void save(const QString& key, const QString& value);
  void setStatus(const QString& status, const QString& error);
  void onStateChanged(cosmos::ui::ModelDownloader::State state);
  void onFinished(const QString& dir, int files, qint64 bytes);

  SettingsViewModel* settings_;
  std::unique_ptr<QSettings> store_;
  QThread thread_;
  ModelDownloader* downloader_ = nullptr;  // lives on thread_
  QString repo_ = QString::fromLatin1(kDefaultRepo);
  QString revision_ = QStringLiteral("main");
  QString destination_;
  QString endpoint_;
  QString token_;
  bool hasSavedToken_ = false;
  ModelDownloader::State state_ = ModelDownloader::State::Idle;
  bool modelReady_ = false;
  qint64 done_ = 0;
  qint64 total_ = 0;
  double speed_ = 0;
  double secondsLeft_ = -1;
  QString currentFile_;
  int fileIndex_ = 0;
  int fileCount_ = 0;
  QString statusText_;
  QString errorText_;
};

}  // namespace cosmos::ui
