// A local stand-in for the Hugging Face Hub (QTcpServer, HTTP/1.1, one request per connection) for
// the download tests: the file list (GET /api/models/{repo}/tree/{revision}?recursive=true, paged
// with a Link header when pageSize is set), the files (GET /{repo}/resolve/{revision}/{path}; LFS
// files answer 302 to /cdn/{sha256} on `redirectHost`), Range requests, a token requirement, and
// scripted faults per file: a connection dropped after N bytes, a stall after N bytes, wrong
// bytes, an HTTP status once, a server that ignores Range. Every request is recorded.
#pragma once

#include <QCryptographicHash>
#include <QHash>
#include <QJsonArray>
#include <QJsonDocument>
#include <QJsonObject>
#include <QList>
#include <QPointer>
#include <QSet>
#include <QTcpServer>
#include <QTcpSocket>
#include <QUrl>
#include <QUrlQuery>

#include <map>

class FakeHub : public QObject {
 public:
  struct File {
    QByteArray content;
    bool lfs = false;
  };
  struct Fault {
    qint64 dropAfter = -1;   // this many body bytes, then the connection closes (once)
    qint64 stallAfter = -1;  // this many body bytes, then nothing (while set)
    bool corrupt = false;    // one byte flipped in every answer
    int statusOnce = 0;      // answer this HTTP status once (503, 404, ...)
    int status = 0;          // answer this HTTP status every time
    bool ignoreRange = false;
  };
  struct Request {
    QByteArray path;
    QByteArray range;
    QByteArray authorization;
  };

  QByteArray requiredToken;  // not empty: the API and resolve answer 401 without "Bearer <token>"
  int pageSize = 0;          // > 0: the file list comes in pages of this many entries
  QString redirectHost;      // the host LFS redirects go to (default: 127.0.0.1)
  QHash<QString, Fault> faults;  // by file path
  QList<Request> requests;

  FakeHub() {
    connect(&server_, &QTcpServer::newConnection, this, [this] {
      while (QTcpSocket* s = server_.nextPendingConnection()) {
        connect(s, &QTcpSocket::readyRead, this, [this, s] { onReadyRead(s); });
        connect(s, &QTcpSocket::disconnected, s, &QObject::deleteLater);
      }
    });
  }
  bool listen() { return server_.listen(QHostAddress::Any, 0); }
  quint16 port() const { return server_.serverPort(); }
  QString endpoint() const { return QStringLiteral("http://127.0.0.1:%1").arg(port()); }

  static QByteArray gitOid(const QByteArray& content) {
    return QCryptographicHash::hash("blob " + QByteArray::number(content.size()) + '\0' + content,
                                    QCryptographicHash::Sha1)
        .toHex();
  }
  static QByteArray sha256(const QByteArray& content) {
    return QCryptographicHash::hash(content, QCryptographicHash::Sha256).toHex();
  }
  void addFile(const QString& repo, const QString& revision, const QString& path, const QByteArray& content, bool lfs) {
    repos_[repo + QLatin1Char('@') + revision][path] = File{content, lfs};
  }
  // Requests whose path contains `part`; with a Range header only when `withRange`.
  int count(const QByteArray& part, bool withRange = false) const {
    int n = 0;
    for (const Request& r : requests)
      if (r.path.contains(part) && (!withRange || !r.range.isEmpty())) ++n;
    return n;
  }
  QList<QByteArray> ranges(const QByteArray& part) const {
    QList<QByteArray> out;
    for (const Request& r : requests)
      if (r.path.contains(part) && !r.range.isEmpty()) out.append(r.range);
    return out;
  }
  // Closes the stalled connections (the client sees them drop).
  void closeStalled() {
    for (const QPointer<QTcpSocket>& s : stalled_)
      if (s) s->abort();
    stalled_.clear();
  }

 private:
  void onReadyRead(QTcpSocket* s) {
    QByteArray& buffer = buffers_[s];
    buffer += s->readAll();
    const int end = buffer.indexOf("\r\n\r\n");
    if (end < 0) return;
    const QList<QByteArray> lines = buffer.left(end).split('\n');
    buffers_.remove(s);
    const QList<QByteArray> first = lines.value(0).trimmed().split(' ');
    Request r;
    r.path = first.value(1);
    for (const QByteArray& line : lines.mid(1)) {
      const int colon = line.indexOf(':');
      const QByteArray name = line.left(colon).trimmed().toLower(), value = line.mid(colon + 1).trimmed();
      if (name == "range") r.range = value;
      if (name == "authorization") r.authorization = value;
    }
    requests.append(r);
    route(s, r);
  }

  void reply(QTcpSocket* s, int status, const QByteArray& body, const QList<QByteArray>& headers = {}) {
    send(s, status, body, headers, body.size(), -1, false);
  }
  void send(QTcpSocket* s, int status, const QByteArray& body, const QList<QByteArray>& headers, qint64 length,
            qint64 cut, bool stall) {
    QByteArray head = "HTTP/1.1 " + QByteArray::number(status) + " X\r\nConnection: close\r\nContent-Length: " +
                      QByteArray::number(length) + "\r\n";
    for (const QByteArray& h : headers) head += h + "\r\n";
    s->write(head + "\r\n" + (cut >= 0 ? body.left(cut) : body));
    if (stall) {
      stalled_.append(s);
      return;
    }
    s->disconnectFromHost();  // after the pending bytes are written
  }

  void route(QTcpSocket* s, const Request& r) {
    const QUrl url = QUrl::fromEncoded("http://x" + r.path);
    const QString path = url.path(QUrl::FullyEncoded);
    if (path.startsWith(QLatin1String("/cdn/"))) return serveContent(s, r, path.mid(5), true);
    const bool authorized = requiredToken.isEmpty() || r.authorization == "Bearer " + requiredToken;
    if (path.startsWith(QLatin1String("/api/models/"))) {
      const int tree = path.indexOf(QLatin1String("/tree/"));
      const QString repo = path.mid(12, tree - 12), rev = QUrl::fromPercentEncoding(path.mid(tree + 6).toUtf8());
      if (!authorized) return reply(s, 401, "{\"error\":\"Access restricted\"}", {"X-Error-Code: GatedRepo"});
      if (!repos_.count(repo + QLatin1Char('@') + rev))
        return reply(s, 404, "{\"error\":\"Repository not found\"}", {"X-Error-Code: RepoNotFound"});
      return serveList(s, url, repo + QLatin1Char('@') + rev);
    }
    const int resolve = path.indexOf(QLatin1String("/resolve/"));
    if (resolve < 0) return reply(s, 404, "no such route");
    const QString repo = path.mid(1, resolve - 1);
    const QString rest = path.mid(resolve + 9);
    const QString rev = QUrl::fromPercentEncoding(rest.section(QLatin1Char('/'), 0, 0).toUtf8());
    const QString file = QUrl::fromPercentEncoding(rest.section(QLatin1Char('/'), 1).toUtf8());
    if (!authorized) return reply(s, 401, {}, {"X-Error-Code: GatedRepo", "X-Error-Message: Access restricted"});
    const auto it = repos_.find(repo + QLatin1Char('@') + rev);
    if (it == repos_.end() || !it->second.count(file))
      return reply(s, 404, {}, {"X-Error-Code: EntryNotFound", "X-Error-Message: Entry not found"});
    Fault& f = faults[file];
    if (f.status || f.statusOnce) {
      const int status = f.status ? f.status : f.statusOnce;
      f.statusOnce = 0;
      return reply(s, status, "{\"error\":\"scripted\"}");
    }
    const File& content = it->second.at(file);
    if (content.lfs) {
      const QString host = redirectHost.isEmpty() ? QStringLiteral("127.0.0.1") : redirectHost;
      return reply(s, 302, {}, {"Location: http://" + host.toUtf8() + ':' + QByteArray::number(port()) + "/cdn/" +
                                    QUrl::toPercentEncoding(repo + QLatin1Char('@') + rev + QLatin1Char('|') + file)});
    }
    serveContent(s, r, QString::fromUtf8(QUrl::toPercentEncoding(repo + QLatin1Char('@') + rev + QLatin1Char('|') + file)), false);
  }

  void serveList(QTcpSocket* s, const QUrl& url, const QString& key) {
    QJsonArray all;
    QSet<QString> dirs;
    for (const auto& [path, file] : repos_[key]) {
      for (int i = path.indexOf(QLatin1Char('/')); i > 0; i = path.indexOf(QLatin1Char('/'), i + 1))
        if (!dirs.contains(path.left(i))) {
          dirs.insert(path.left(i));
          all.append(QJsonObject{{QStringLiteral("type"), QStringLiteral("directory")}, {QStringLiteral("path"), path.left(i)}});
        }
      QJsonObject o{{QStringLiteral("type"), QStringLiteral("file")},
                    {QStringLiteral("path"), path},
                    {QStringLiteral("size"), static_cast<double>(file.content.size())},
                    {QStringLiteral("oid"), QString::fromLatin1(gitOid(file.content))}};
      if (file.lfs)
        o[QStringLiteral("lfs")] = QJsonObject{{QStringLiteral("oid"), QString::fromLatin1(sha256(file.content))},
                                               {QStringLiteral("size"), static_cast<double>(file.content.size())},
                                               {QStringLiteral("pointerSize"), 134}};
      all.append(o);
    }
    const int cursor = QUrlQuery(url).queryItemValue(QStringLiteral("cursor")).toInt();
    QList<QByteArray> headers{"Content-Type: application/json"};
    QJsonArray page = all;
    if (pageSize > 0) {
      page = QJsonArray();
      for (int i = cursor; i < all.size() && i < cursor + pageSize; ++i) page.append(all[i]);
      if (cursor + pageSize < all.size()) {
        QUrl next = url;
        QUrlQuery q(url);
        q.removeAllQueryItems(QStringLiteral("cursor"));
        q.addQueryItem(QStringLiteral("cursor"), QString::number(cursor + pageSize));
        next.setQuery(q);
        headers.append("Link: <" + endpoint().toUtf8() + next.toEncoded(QUrl::RemoveScheme | QUrl::RemoveAuthority) +
                       ">; rel=\"next\"");
      }
    }
    reply(s, 200, QJsonDocument(page).toJson(QJsonDocument::Compact), headers);
  }

  void serveContent(QTcpSocket* s, const Request& r, const QString& encodedKey, bool viaCdn) {
    const QString key = QUrl::fromPercentEncoding(encodedKey.toUtf8());
    const QString repoKey = key.section(QLatin1Char('|'), 0, 0), file = key.section(QLatin1Char('|'), 1);
    const auto it = repos_.find(repoKey);
    if (it == repos_.end() || !it->second.count(file)) return reply(s, 404, "gone");
    (void)viaCdn;
    Fault& f = faults[file];
    QByteArray body = it->second.at(file).content;
    if (f.corrupt && !body.isEmpty()) body[body.size() / 2] = static_cast<char>(body[body.size() / 2] ^ 0x5a);
    qint64 start = 0;
    if (!r.range.isEmpty() && !f.ignoreRange) {
      start = r.range.mid(6, r.range.indexOf('-') - 6).toLongLong();
      if (start >= body.size())
        return reply(s, 416, {}, {"Content-Range: bytes */" + QByteArray::number(body.size())});
    }
    const qint64 size = body.size();
    body = body.mid(start);
    QList<QByteArray> headers{"Accept-Ranges: bytes", "Content-Type: application/octet-stream"};
    const bool partial = !r.range.isEmpty() && !f.ignoreRange;
    if (partial)
      headers.append("Content-Range: bytes " + QByteArray::number(start) + '-' + QByteArray::number(size - 1) + '/' +
                     QByteArray::number(size));
    qint64 cut = -1;
    bool stall = false;
    if (f.dropAfter >= 0) {
      cut = f.dropAfter;
      f.dropAfter = -1;
    } else if (f.stallAfter >= 0) {
      cut = f.stallAfter;
      stall = true;
    }
    send(s, partial ? 206 : 200, body, headers, body.size(), cut, stall);
  }

  QTcpServer server_;
  std::map<QString, std::map<QString, File>> repos_;  // "repo@revision" -> path -> file
  QHash<QTcpSocket*, QByteArray> buffers_;
  QList<QPointer<QTcpSocket>> stalled_;
};
