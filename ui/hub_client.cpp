#include "hub_client.h"

#include <QDir>
#include <QFile>
#include <QJsonArray>
#include <QJsonDocument>
#include <QJsonObject>
#include <QNetworkAccessManager>
#include <QNetworkReply>
#include <QNetworkRequest>
#include <QRegularExpression>
#include <QtNetwork/qtnetworkglobal.h>
#if QT_CONFIG(ssl)
#include <QSslSocket>
#endif

#include <algorithm>

#ifndef COSMOS_VERSION
#define COSMOS_VERSION "0.0.0"
#endif

namespace cosmos::ui {

namespace {

bool isHex(const QString& s, int length) {
  static const QRegularExpression hex(QStringLiteral("^[0-9a-fA-F]+$"));
  return s.size() == length && hex.match(s).hasMatch();
}

bool sameOrigin(const QUrl& a, const QUrl& b) {
  return a.scheme() == b.scheme() && a.host().compare(b.host(), Qt::CaseInsensitive) == 0 &&
         a.port(a.scheme() == QLatin1String("https") ? 443 : 80) == b.port(b.scheme() == QLatin1String("https") ? 443 : 80);
}

// The "next" page from an RFC 8288 Link header: <url>; rel="next", ...
QUrl nextPage(const QByteArray& link, const QUrl& base) {
  for (const QByteArray& part : link.split(',')) {
    const int open = part.indexOf('<');
    const int close = part.indexOf('>');
    if (open < 0 || close < open) continue;
    if (!part.mid(close).contains("rel=\"next\"") && !part.mid(close).contains("rel=next")) continue;
    return base.resolved(QUrl::fromEncoded(part.mid(open + 1, close - open - 1).trimmed()));
  }
  return {};
}

QString readTokenFile(const QString& path) {
  QFile f(path);
  if (path.isEmpty() || !f.open(QIODevice::ReadOnly)) return {};
  return QString::fromUtf8(f.readAll()).trimmed();
}

}  // namespace

int RetryPolicy::delayFor(int attempt) const {
  qint64 delay = firstDelayMs;
  for (int i = 1; i < attempt && delay < maxDelayMs; ++i) delay *= 2;
  return static_cast<int>(std::min<qint64>(delay, maxDelayMs));
}

HubClient::HubClient(QNetworkAccessManager* network, HubTarget target, RetryPolicy retry, QObject* parent)
    : QObject(parent), network_(network), target_(std::move(target)), retry_(retry) {
  retryTimer_.setSingleShot(true);
  connect(&retryTimer_, &QTimer::timeout, this, &HubClient::fetchPage);
}

HubClient::~HubClient() { abort(); }

QString HubClient::resolveEndpoint(const QString& explicitEndpoint) {
  QString endpoint = explicitEndpoint.trimmed();
  if (endpoint.isEmpty()) endpoint = qEnvironmentVariable("HF_ENDPOINT").trimmed();
  if (endpoint.isEmpty()) endpoint = QString::fromLatin1(kDefaultEndpoint);
  while (endpoint.endsWith(QLatin1Char('/'))) endpoint.chop(1);
  return endpoint;
}

QString HubClient::resolveToken() {
  for (const char* name : {"HF_TOKEN", "HUGGING_FACE_HUB_TOKEN"}) {
    const QString token = qEnvironmentVariable(name).trimmed();
    if (!token.isEmpty()) return token;
  }
  QString path = qEnvironmentVariable("HF_TOKEN_PATH");
  if (path.isEmpty()) {
    QString home = qEnvironmentVariable("HF_HOME");
    if (home.isEmpty()) {
      const QString cache = qEnvironmentVariable("XDG_CACHE_HOME");
      home = (cache.isEmpty() ? QDir::home().filePath(QStringLiteral(".cache")) : cache) + QStringLiteral("/huggingface");
    }
    path = home + QStringLiteral("/token");
  }
  return readTokenFile(path);
}

QString HubClient::checkRepo(const QString& repo) {
  static const QRegularExpression id(QStringLiteral("^([A-Za-z0-9][A-Za-z0-9._-]*/)?[A-Za-z0-9][A-Za-z0-9._-]*$"));
  if (repo.trimmed().isEmpty()) return tr("Enter the repository to download, like nvidia/Cosmos-Reason1-7B.");
  if (!id.match(repo).hasMatch() || repo.contains(QStringLiteral("..")))
    return tr("\"%1\" is not a Hugging Face repository id (owner/name, like nvidia/Cosmos-Reason1-7B).").arg(repo);
  return {};
}

QString HubClient::checkEndpoint(const QString& endpoint) {
  const QUrl url(endpoint, QUrl::StrictMode);
  const QString scheme = url.scheme();
  if (!url.isValid() || url.host().isEmpty() || (scheme != QLatin1String("http") && scheme != QLatin1String("https")))
    return tr("The hub address \"%1\" is not an http(s) URL (like https://huggingface.co).").arg(endpoint);
  if (scheme == QLatin1String("https")) {
#if QT_CONFIG(ssl)
    if (!QSslSocket::supportsSsl())
      return tr("Cannot reach %1: this Qt has no working TLS backend (install libssl3 and Qt's OpenSSL plugin, "
                "libqt6network6).").arg(endpoint);
#else
    return tr("Cannot reach %1: this Qt was built without TLS support.").arg(endpoint);
#endif
  }
  return {};
}

bool HubClient::isSafePath(const QString& path) {
  if (path.isEmpty() || path.startsWith(QLatin1Char('/')) || path.contains(QLatin1Char('\\')) ||
      path.contains(QChar(0)))
    return false;
  for (const QString& part : path.split(QLatin1Char('/')))
    if (part.isEmpty() || part == QLatin1String(".") || part == QLatin1String("..")) return false;
  return true;
}

QUrl HubClient::treeUrl() const {
  return QUrl::fromEncoded(target_.endpoint.toUtf8() + "/api/models/" + target_.repo.toUtf8() + "/tree/" +
                           QUrl::toPercentEncoding(target_.revision) + "?recursive=true");
}

QUrl HubClient::fileUrl(const QString& path) const {
  QByteArray encoded;
  for (const QString& part : path.split(QLatin1Char('/'))) encoded += '/' + QUrl::toPercentEncoding(part);
  return QUrl::fromEncoded(target_.endpoint.toUtf8() + '/' + target_.repo.toUtf8() + "/resolve/" +
                           QUrl::toPercentEncoding(target_.revision) + encoded);
}

QNetworkRequest HubClient::request(const QUrl& url) const {
  QNetworkRequest req(url);
  req.setHeader(QNetworkRequest::UserAgentHeader, QByteArrayLiteral("cosmos-chat/" COSMOS_VERSION));
  if (!target_.token.isEmpty() && sameOrigin(url, QUrl(target_.endpoint)))
    req.setRawHeader("Authorization", "Bearer " + target_.token.toUtf8());
  req.setTransferTimeout(retry_.stallTimeoutMs);
  return req;
}

QString HubClient::describe(const QString& path) const {
  const QString base = target_.repo + QLatin1Char('/') + target_.revision;
  return path.isEmpty() ? tr("%1 (file list)").arg(base) : base + QLatin1Char('/') + path;
}

QString HubClient::httpError(int status, const QByteArray& errorCode, const QString& serverMessage,
                             const QString& path) const {
  const QString what = describe(path);
  const QString page = target_.endpoint + QLatin1Char('/') + target_.repo;
  QString text;
  if (status == 404) {
    text = tr("not found: %1 (HTTP 404)").arg(what);
    if (errorCode == "RepoNotFound")
      text += tr(": there is no repository %1 on %2 (a private one needs HF_TOKEN)").arg(target_.repo, target_.endpoint);
    else if (errorCode == "RevisionNotFound")
      text += tr(": %1 has no revision %2").arg(target_.repo, target_.revision);
  } else if (status == 401 || status == 403) {
    if (target_.token.isEmpty())
      text = tr("%1 needs a Hugging Face token (HF_TOKEN) (HTTP %2): create one at %3/settings/tokens, accept the "
                "model's terms on %4 if it asks, then set HF_TOKEN (or run huggingface-cli login)")
                 .arg(what).arg(status).arg(QString::fromLatin1(kDefaultEndpoint), page);
    else
      text = tr("%1 needs a Hugging Face token (HF_TOKEN) with access to it (HTTP %2): the token given was refused; "
                "check it and that your account has accepted the model's terms on %3")
                 .arg(what).arg(status).arg(page);
    if (errorCode == "RepoNotFound") text += tr(" (or there is no repository %1)").arg(target_.repo);
  } else {
    text = tr("%1: the hub answered HTTP %2").arg(what).arg(status);
  }
  if (!serverMessage.isEmpty()) text += tr(" — the hub says: %1").arg(serverMessage);
  return text;
}

QString HubClient::serverMessage(QNetworkReply* reply, const QByteArray& body) {
  QString message = QString::fromUtf8(reply->rawHeader("X-Error-Message")).trimmed();
  if (message.isEmpty() && body.size() < 4096) {
    const QJsonObject o = QJsonDocument::fromJson(body).object();
    message = o.value(QStringLiteral("error")).toString().trimmed();
  }
  return message.left(300);
}

void HubClient::listFiles() {
  abort();
  files_.clear();
  attempts_ = 0;
  pageUrl_ = treeUrl();
  fetchPage();
}

void HubClient::abort() {
  retryTimer_.stop();
  if (!reply_) return;
  QNetworkReply* reply = reply_;
  reply_ = nullptr;
  reply->disconnect(this);
  reply->abort();
  reply->deleteLater();
}

void HubClient::fetchPage() {
  QNetworkRequest req = request(pageUrl_);
  req.setRawHeader("Accept", "application/json");
  reply_ = network_->get(req);
  connect(reply_, &QNetworkReply::finished, this, &HubClient::onPageFinished);
}

void HubClient::retryLater(const QString& reason) {
  ++attempts_;
  if (attempts_ >= retry_.maxAttempts) {
    emit failed(tr("%1: %2 (gave up after %3 attempts)").arg(describe({}), reason).arg(attempts_));
    return;
  }
  const int delay = retry_.delayFor(attempts_);
  emit retrying(tr("%1: %2").arg(describe({}), reason), delay, attempts_);
  retryTimer_.start(delay);
}

void HubClient::onPageFinished() {
  QNetworkReply* reply = reply_;
  reply_ = nullptr;
  if (!reply) return;
  reply->deleteLater();
  const int status = reply->attribute(QNetworkRequest::HttpStatusCodeAttribute).toInt();
  const QByteArray body = reply->readAll();
  switch (status == 0 ? reply->error() : QNetworkReply::NoError) {
    case QNetworkReply::ConnectionRefusedError:
    case QNetworkReply::HostNotFoundError:
    case QNetworkReply::SslHandshakeFailedError:
    case QNetworkReply::ProtocolUnknownError:
    case QNetworkReply::ProxyNotFoundError:
      // Nothing to wait for before the download has started: say so at once.
      emit failed(tr("Cannot reach the hub at %1: %2").arg(target_.endpoint, reply->errorString()));
      return;
    default:
      break;
  }
  if (status == 0 || status == 408 || status == 429 || status >= 500) {
    retryLater(status == 0 ? reply->errorString() : tr("HTTP %1").arg(status));
    return;
  }
  if (status != 200) {
    emit failed(httpError(status, reply->rawHeader("X-Error-Code"), serverMessage(reply, body), {}));
    return;
  }
  if (reply->error() != QNetworkReply::NoError) {
    retryLater(reply->errorString());
    return;
  }
  QString error;
  if (!parsePage(body, &error)) {
    emit failed(tr("%1: %2").arg(describe({}), error));
    return;
  }
  const QUrl next = nextPage(reply->rawHeader("Link"), reply->url());
  if (next.isValid() && !next.isEmpty()) {
    attempts_ = 0;
    pageUrl_ = next;
    fetchPage();
    return;
  }
  emit listed(files_);
}

bool HubClient::parsePage(const QByteArray& body, QString* error) {
  QJsonParseError parseError{};
  const QJsonDocument doc = QJsonDocument::fromJson(body, &parseError);
  if (!doc.isArray()) {
    *error = tr("the file list is not a JSON array (%1)").arg(parseError.errorString());
    return false;
  }
  for (const QJsonValue& v : doc.array()) {
    const QJsonObject o = v.toObject();
    if (o.value(QStringLiteral("type")).toString() != QLatin1String("file")) continue;  // directories
    HubFile f;
    f.path = o.value(QStringLiteral("path")).toString();
    const QJsonObject lfs = o.value(QStringLiteral("lfs")).toObject();
    double size = o.value(QStringLiteral("size")).toDouble(-1);
    if (!lfs.isEmpty()) {
      QString oid = lfs.value(QStringLiteral("oid")).toString();
      if (oid.startsWith(QLatin1String("sha256:"))) oid = oid.mid(7);
      if (!isHex(oid, 64)) {
        *error = tr("%1 has no valid SHA-256 in the file list").arg(f.path);
        return false;
      }
      f.sha256 = oid.toLower().toLatin1();
      size = lfs.value(QStringLiteral("size")).toDouble(size);
    } else {
      const QString oid = o.value(QStringLiteral("oid")).toString();
      if (isHex(oid, 40)) f.gitOid = oid.toLower().toLatin1();
    }
    if (f.path.isEmpty() || size < 0 || size > 9.0e15) {
      *error = tr("an entry has no path or size: %1").arg(QString::fromUtf8(QJsonDocument(o).toJson(QJsonDocument::Compact)));
      return false;
    }
    f.size = static_cast<qint64>(size);
    files_.append(f);
  }
  return true;
}

}  // namespace cosmos::ui
