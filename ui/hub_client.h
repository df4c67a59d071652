// The Hugging Face Hub's HTTP API as the model download needs it: where the hub is (a setting or
// --endpoint, else $HF_ENDPOINT, else https://huggingface.co), the token ($HF_TOKEN, else the one
// `huggingface-cli login` saved), the URLs of a repository's file list and files, and the file
// list itself (GET {endpoint}/api/models/{repo}/tree/{revision}?recursive=true, following the
// hub's pages), with the sizes and hashes every downloaded file is checked against.
#pragma once

#include <QByteArray>
#include <QList>
#include <QObject>
#include <QString>
#include <QTimer>
#include <QUrl>

class QNetworkAccessManager;
class QNetworkReply;
class QNetworkRequest;

namespace cosmos::ui {

// One file of a repository, from the hub's file list.
struct HubFile {
  QString path;       // relative to the repository, '/'-separated
  qint64 size = 0;    // bytes of the content (for LFS files: the real file, not the pointer)
  QByteArray sha256;  // LFS files: lowercase hex SHA-256 of the content
  QByteArray gitOid;  // the other files: lowercase hex git blob SHA-1 ("blob <size>\0" + content)
  bool isLfs() const { return !sha256.isEmpty(); }
};

// Where and as whom to download.
struct HubTarget {
  QString endpoint;  // resolved (resolveEndpoint), no trailing '/'
  QString repo;      // "owner/name"
  QString revision = QStringLiteral("main");
  QString token;     // empty: anonymous
};

// Automatic retries after a dropped connection, a timeout, HTTP 408/429/5xx: the wait doubles
// from firstDelayMs up to maxDelayMs; a download that makes progress starts counting again.
struct RetryPolicy {
  int maxAttempts = 8;
  int firstDelayMs = 1000;
  int maxDelayMs = 30000;
  int stallTimeoutMs = 60000;  // no byte for this long: the connection is given up and retried
  int delayFor(int attempt) const;
};

class HubClient : public QObject {
  Q_OBJECT

 public:
  static constexpr const char* kDefaultEndpoint = "https://huggingface.co";

  HubClient(QNetworkAccessManager* network, HubTarget target, RetryPolicy retry, QObject* parent = nullptr);
  ~HubClient() override;

  // An explicit endpoint (setting, --endpoint) when not blank, else $HF_ENDPOINT, else
  // https://huggingface.co; without the trailing '/'.
  static QString resolveEndpoint(const QString& explicitEndpoint);
  // $HF_TOKEN, else the file `huggingface-cli login` writes ($HF_TOKEN_PATH, else $HF_HOME/token,
  // else ~/.cache/huggingface/token); empty when none.
  static QString resolveToken();
  // Why `repo` is not a repository id ("owner/name": letters, digits, '-', '_', '.'); empty when it is.
  static QString checkRepo(const QString& repo);
  // Why `endpoint` cannot be used (not an http(s) URL; https without TLS support); empty when fine.
  static QString checkEndpoint(const QString& endpoint);
  // A path from the file list that stays inside the destination folder (relative, no "..").
  static bool isSafePath(const QString& path);

  const HubTarget& target() const { return target_; }
  QUrl treeUrl() const;
  QUrl fileUrl(const QString& path) const;
  // A GET with the user agent, and the token only when `url` is on the endpoint's host (a redirect
  // to a CDN does not get it).
  QNetworkRequest request(const QUrl& url) const;
  // "repo/revision/path" (the file list when path is empty): how errors name what failed.
  QString describe(const QString& path) const;
  // The sentence for an HTTP error status on `path` (empty: the file list). errorCode and
  // serverMessage are the hub's X-Error-Code / X-Error-Message headers, when it sent them.
  QString httpError(int status, const QByteArray& errorCode, const QString& serverMessage, const QString& path) const;
  // The hub's own explanation from an error reply (X-Error-Message, else a JSON body's "error").
  static QString serverMessage(QNetworkReply* reply, const QByteArray& body);

  // Fetches the whole file list (every page); answers with listed or failed.
  void listFiles();
  void abort();

 signals:
  void listed(const QList<cosmos::ui::HubFile>& files);
  void failed(const QString& message);
  void retrying(const QString& reason, int delayMs, int attempt);

 private:
  void fetchPage();
  void onPageFinished();
  void retryLater(const QString& reason);
  bool parsePage(const QByteArray& body, QString* error);

  QNetworkAccessManager* network_;
  HubTarget target_;
  RetryPolicy retry_;
  QNetworkReply* reply_ = nullptr;
  QUrl pageUrl_;
  QList<HubFile> files_;
  int attempts_ = 0;
  QTimer retryTimer_;
};

}  // namespace cosmos::ui
