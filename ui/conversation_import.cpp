// Importing conversations from JSON (see conversation_import.h and docs/CONVERSATION_JSON.md).
#include "conversation_import.h"

#include "cosmos/reasoning_parser.h"

#include <QDir>
#include <QFile>
#include <QFileInfo>
#include <QHash>
#include <QJsonArray>
#include <QJsonDocument>
#include <QJsonObject>
#include <QJsonParseError>
#include <QSet>

#include <algorithm>
#include <cstdio>
#include <limits>
#include <optional>

namespace cosmos::ui {
namespace {

const QString kRoles = QStringLiteral("system, user, assistant or tool");

QString typeName(const QJsonValue& v) {
  switch (v.type()) {
    case QJsonValue::Null:
      return QStringLiteral("null");
    case QJsonValue::Bool:
      return QStringLiteral("a boolean");
    case QJsonValue::Double:
      return QStringLiteral("a number");
    case QJsonValue::String:
      return QStringLiteral("a string");
    case QJsonValue::Array:
      return QStringLiteral("an array");
    case QJsonValue::Object:
      return QStringLiteral("an object");
    case QJsonValue::Undefined:
      break;
  }
  return QStringLiteral("nothing");
}

QString quoted(const QString& s) { return u'"' + (s.size() > 40 ? s.left(39) + QChar(0x2026) : s) + u'"'; }

QString mib(qint64 bytes) { return QString::number(double(bytes) / (1 << 20), 'f', 1); }

// Validates JSON into NewConversations; the first problem stops it (error() says where and what).
class Reader {
 public:
  bool ok() const { return error_.isEmpty(); }
  QString error() const { return error_; }
  QList<NewConversation> take() { return std::move(out_); }

  void read(const QJsonDocument& doc) {
    if (!doc.isObject() && !doc.isArray()) {
      fail(QStringLiteral("$"), notAConversationFile());
      return;
    }
    if (doc.isObject()) {
      const QJsonObject top = doc.object();
      if (top.contains(u"format") || top.contains(u"conversations")) {
        readOurs(top);
      } else if (top.contains(u"messages")) {
        readOpenAiConversation(top, QStringLiteral("$"));
      } else {
        fail(QStringLiteral("$"), notAConversationFile());
      }
      return;
    }
    const QJsonArray top = doc.array();
    if (top.isEmpty()) {
      fail(QStringLiteral("$"), QStringLiteral("the array is empty: no messages or conversations to import"));
      return;
    }
    const QJsonObject first = top.first().toObject();
    if (first.contains(u"messages")) {
      for (qsizetype i = 0; ok() && i < top.size(); ++i) {
        const QString path = QStringLiteral("$[%1]").arg(i);
        if (const auto object = objectAt(top.at(i), path)) readOpenAiConversation(*object, path);
      }
    } else if (first.contains(u"role")) {
      NewConversation conversation;
      readOpenAiMessages(top, QStringLiteral("$"), &conversation);
      if (ok()) append(std::move(conversation));
    } else {
      fail(QStringLiteral("$[0]"), QStringLiteral("expected a message (with \"role\") or a conversation (with "
                                                  "\"messages\"), got %1")
                                       .arg(first.isEmpty() ? typeName(top.first())
                                                            : QStringLiteral("an object "
                                                                             "without them")));
    }
  }

 private:
  static QString notAConversationFile() {
    return QStringLiteral(
        "not a conversation file: expected a Cosmos Chat export (with \"format\"), an object with \"messages\", "
        "or an array of messages or of conversations");
  }

  bool fail(const QString& path, const QString& problem) {
    if (error_.isEmpty()) error_ = path + QStringLiteral(": ") + problem;
    return false;
  }
  bool wrongType(const QString& path, const QString& expected, const QJsonValue& got) {
    return fail(path, QStringLiteral("expected %1, got %2").arg(expected, typeName(got)));
  }

  std::optional<QJsonObject> objectAt(const QJsonValue& v, const QString& path) {
    if (v.isObject()) return v.toObject();
    wrongType(path, QStringLiteral("an object"), v);
    return std::nullopt;
  }
  std::optional<QJsonArray> requiredArray(const QJsonObject& o, const QString& key, const QString& path) {
    const QJsonValue v = o.value(key);
    if (v.isUndefined()) {
      fail(path + u'.' + key, QStringLiteral("missing field"));
      return std::nullopt;
    }
    if (!v.isArray()) {
      wrongType(path + u'.' + key, QStringLiteral("an array"), v);
      return std::nullopt;
    }
    return v.toArray();
  }
  // A string field; absent or null: `fallback` unless required.
  std::optional<QString> string(const QJsonObject& o, const QString& key, const QString& path, bool required,
                                const QString& fallback = QString()) {
    const QJsonValue v = o.value(key);
    if (v.isUndefined() && required) {
      fail(path + u'.' + key, QStringLiteral("missing field"));
      return std::nullopt;
    }
    if (v.isUndefined() || (v.isNull() && !required)) return fallback;
    if (!v.isString()) {
      wrongType(path + u'.' + key, QStringLiteral("a string"), v);
      return std::nullopt;
    }
    return v.toString();
  }
  // An integer (an id, the version); absent or null: 0 (unless required).
  std::optional<qint64> id(const QJsonObject& o, const QString& key, const QString& path, bool required) {
    const QJsonValue v = o.value(key);
    if (v.isUndefined() && required) {
      fail(path + u'.' + key, QStringLiteral("missing field"));
      return std::nullopt;
    }
    if (v.isUndefined() || (v.isNull() && !required)) return 0;
    constexpr qint64 kNotAnInteger = std::numeric_limits<qint64>::min();
    const qint64 value = v.toInteger(kNotAnInteger);
    if (!v.isDouble() || value == kNotAnInteger) {
      wrongType(path + u'.' + key, QStringLiteral("an integer"), v);
      return std::nullopt;
    }
    return value;
  }
  // An ISO 8601 time; absent or null: an invalid QDateTime (the store uses now).
  std::optional<QDateTime> time(const QJsonObject& o, const QString& key, const QString& path) {
    const auto s = string(o, key, path, false);
    if (!s) return std::nullopt;
    if (s->isEmpty()) return QDateTime();
    const QDateTime t = QDateTime::fromString(*s, Qt::ISODateWithMs);
    if (!t.isValid()) {
      fail(path + u'.' + key, QStringLiteral("%1 is not an ISO 8601 date and time").arg(quoted(*s)));
      return std::nullopt;
    }
    return t.toUTC();
  }
  bool role(const QString& value, const QString& path, bool openAi, QString* out) {
    if (value == u"system" || value == u"user" || value == u"assistant" || value == u"tool") {
      *out = value;
      return true;
    }
    if (openAi && value == u"developer") {
      *out = QStringLiteral("system");
      return true;
    }
    if (openAi && value == u"function") {
      *out = QStringLiteral("tool");
      return true;
    }
    return fail(path, QStringLiteral("unknown role %1 (expected %2)").arg(quoted(value), kRoles));
  }

  // --- our format ---

  void readOurs(const QJsonObject& top) {
    const QString path = QStringLiteral("$");
    const auto format = string(top, QStringLiteral("format"), path, true);
    if (!format) return;
    if (*format != QLatin1String(kConversationFormat)) {
      fail(QStringLiteral("$.format"), QStringLiteral("%1 is not a Cosmos Chat conversation export (expected \"%2\")")
                                           .arg(quoted(*format), QLatin1String(kConversationFormat)));
      return;
    }
    const auto version = id(top, QStringLiteral("version"), path, true);
    if (!version) return;
    if (*version > kConversationFormatVersion) {
      fail(QStringLiteral("$.version"),
           QStringLiteral("the file was made by a newer Cosmos Chat (format version %1; this version reads version "
                          "%2): update Cosmos Chat to import it")
               .arg(*version)
               .arg(kConversationFormatVersion));
      return;
    }
    if (*version < 1) {
      fail(QStringLiteral("$.version"), QStringLiteral("%1 is not a format version (the first is 1)").arg(*version));
      return;
    }
    static const QSet<QString> known = {QStringLiteral("format"), QStringLiteral("version"),
                                        QStringLiteral("exported_at"), QStringLiteral("app"),
                                        QStringLiteral("conversations")};
    for (auto it = top.begin(); it != top.end(); ++it) {
      if (!known.contains(it.key())) {
        fail(QStringLiteral("$.") + it.key(),
             QStringLiteral("unknown field: the file was made by a newer Cosmos Chat (this version reads format "
                            "version %1: format, version, exported_at, app, conversations)")
                 .arg(kConversationFormatVersion));
        return;
      }
    }
    if (!string(top, QStringLiteral("exported_at"), path, false) || !string(top, QStringLiteral("app"), path, false))
      return;
    const auto conversations = requiredArray(top, QStringLiteral("conversations"), path);
    if (!conversations) return;
    for (qsizetype i = 0; ok() && i < conversations->size(); ++i) {
      const QString cpath = QStringLiteral("$.conversations[%1]").arg(i);
      if (const auto object = objectAt(conversations->at(i), cpath)) readOurConversation(*object, cpath);
    }
  }

  void readOurConversation(const QJsonObject& o, const QString& path) {
    NewConversation c;
    const auto title = string(o, QStringLiteral("title"), path, false);
    if (!title || !id(o, QStringLiteral("id"), path, false)) return;
    c.title = *title;
    const auto created = time(o, QStringLiteral("created_at"), path);
    if (!created) return;
    const auto updated = time(o, QStringLiteral("updated_at"), path);
    if (!updated) return;
    c.createdAt = *created;
    c.updatedAt = *updated;
    const auto messages = requiredArray(o, QStringLiteral("messages"), path);
    if (!messages) return;
    QHash<qint64, int> index;  // source id → index in c.messages
    for (qsizetype i = 0; i < messages->size(); ++i) {
      const QString mpath = path + QStringLiteral(".messages[%1]").arg(i);
      const auto m = objectAt(messages->at(i), mpath);
      if (!m) return;
      const auto sourceId = id(*m, QStringLiteral("id"), mpath, true);
      if (!sourceId) return;
      if (index.contains(*sourceId)) {
        fail(mpath + QStringLiteral(".id"), QStringLiteral("%1 is used by two messages").arg(*sourceId));
        return;
      }
      const QJsonValue parentValue = m->value(u"parent_id");
      const auto parent = id(*m, QStringLiteral("parent_id"), mpath, false);
      if (!parent) return;
      NewMessage message;
      if (!parentValue.isNull() && !parentValue.isUndefined()) {
        if (!index.contains(*parent)) {
          fail(mpath + QStringLiteral(".parent_id"),
               QStringLiteral("%1 is not an earlier message of this conversation (parents come before their "
                              "children)")
                   .arg(*parent));
          return;
        }
        message.parent = index.value(*parent);
      }
      const auto roleValue = string(*m, QStringLiteral("role"), mpath, true);
      if (!roleValue || !role(*roleValue, mpath + QStringLiteral(".role"), false, &message.role)) return;
      const auto content = string(*m, QStringLiteral("content"), mpath, true);
      if (!content) return;
      message.content = *content;
      const auto reasoning = string(*m, QStringLiteral("reasoning"), mpath, false);
      if (!reasoning) return;
      message.reasoning = *reasoning;
      const auto createdAt = time(*m, QStringLiteral("created_at"), mpath);
      if (!createdAt) return;
      message.createdAt = *createdAt;
      const QJsonValue meta = m->value(u"meta");
      if (meta.isObject()) {
        message.meta = meta.toObject();
      } else if (!meta.isUndefined() && !meta.isNull()) {
        wrongType(mpath + QStringLiteral(".meta"), QStringLiteral("an object"), meta);
        return;
      }
      index.insert(*sourceId, static_cast<int>(c.messages.size()));
      c.messages.append(std::move(message));
    }
    const QJsonValue leafValue = o.value(u"current_leaf");
    const auto leaf = id(o, QStringLiteral("current_leaf"), path, false);
    if (!leaf) return;
    if (!leafValue.isNull() && !leafValue.isUndefined()) {
      if (!index.contains(*leaf)) {
        fail(path + QStringLiteral(".current_leaf"),
             QStringLiteral("%1 is not a message of this conversation").arg(*leaf));
        return;
      }
      c.currentLeaf = index.value(*leaf);
    }
    out_.append(std::move(c));
  }

  // --- OpenAI style ---

  void readOpenAiConversation(const QJsonObject& o, const QString& path) {
    NewConversation c;
    const auto title = string(o, QStringLiteral("title"), path, false);
    if (!title) return;
    c.title = *title;
    const auto messages = requiredArray(o, QStringLiteral("messages"), path);
    if (!messages) return;
    readOpenAiMessages(*messages, path + QStringLiteral(".messages"), &c);
    if (ok()) append(std::move(c));
  }

  // An OpenAI-style chat without a title is named like the app names one: its first user message.
  void append(NewConversation c) {
    for (qsizetype i = 0; c.title.trimmed().isEmpty() && i < c.messages.size(); ++i)
      if (c.messages[i].role == u"user") c.title = ConversationStore::defaultTitle(c.messages[i].content);
    out_.append(std::move(c));
  }

  void readOpenAiMessages(const QJsonArray& messages, const QString& path, NewConversation* c) {
    for (qsizetype i = 0; i < messages.size(); ++i) {
      const QString mpath = path + QStringLiteral("[%1]").arg(i);
      const auto m = objectAt(messages.at(i), mpath);
      if (!m) return;
      NewMessage message;
      message.parent = static_cast<int>(i) - 1;  // one branch
      const auto roleValue = string(*m, QStringLiteral("role"), mpath, true);
      if (!roleValue || !role(*roleValue, mpath + QStringLiteral(".role"), true, &message.role)) return;
      const QJsonValue content = m->value(u"content");
      if (content.isString()) {
        message.content = content.toString();
      } else if (content.isArray()) {
        QStringList parts;
        const QJsonArray array = content.toArray();
        for (qsizetype p = 0; p < array.size(); ++p) {
          const QString ppath = mpath + QStringLiteral(".content[%1]").arg(p);
          const auto part = objectAt(array.at(p), ppath);
          if (!part) return;
          const QString type = part->value(u"type").toString();
          if (type != u"text" && type != u"input_text" && type != u"output_text") {
            fail(ppath + QStringLiteral(".type"),
                 QStringLiteral("part type %1 is not supported (only text parts are)").arg(quoted(type)));
            return;
          }
          const auto text = string(*part, QStringLiteral("text"), ppath, true);
          if (!text) return;
          parts << *text;
        }
        message.content = parts.join(u'\n');
      } else if (content.isUndefined() && !m->contains(u"tool_calls") && !m->contains(u"function_call")) {
        fail(mpath + QStringLiteral(".content"), QStringLiteral("missing field"));
        return;
      } else if (!content.isNull() && !content.isUndefined()) {
        wrongType(mpath + QStringLiteral(".content"), QStringLiteral("a string, an array of text parts or null"),
                  content);
        return;
      }
      for (const char* key : {"reasoning_content", "reasoning"}) {
        const auto reasoning = string(*m, QString::fromLatin1(key), mpath, false);
        if (!reasoning) return;
        if (message.reasoning.isEmpty()) message.reasoning = *reasoning;
      }
      // A Cosmos-Reason / DeepSeek-style reply with its reasoning inline ("<think>…</think> answer"):
      // split it as the app stores its own replies (the raw text is kept in meta.raw).
      if (message.role == u"assistant" && message.reasoning.isEmpty() && message.content.contains(u"</think>")) {
        cosmos::ReasoningParser parser;
        parser.push(message.content.toStdString());
        parser.finish();
        message.meta.insert(QStringLiteral("raw"), message.content);
        message.reasoning = QString::fromStdString(parser.reasoning());
        message.content = QString::fromStdString(parser.answer());
      }
      QJsonObject extra = *m;
      for (const char* key : {"role", "content", "reasoning_content", "reasoning"}) extra.remove(QLatin1String(key));
      if (!extra.isEmpty()) message.meta.insert(QStringLiteral("openai"), extra);
      c->messages.append(std::move(message));
    }
  }

  QString error_;
  QList<NewConversation> out_;
};

// "line L, column C" of a byte offset (columns count bytes, from 1).
QString lineColumn(const QByteArray& data, qsizetype offset) {
  offset = std::clamp<qsizetype>(offset, 0, data.size());
  const QByteArrayView head(data.constData(), offset);
  const qsizetype lastNewline = head.lastIndexOf('\n');
  return QStringLiteral("line %1, column %2").arg(head.count('\n') + 1).arg(offset - lastNewline);
}

ImportResult failed(const QString& error) {
  ImportResult r;
  r.error = error;
  return r;
}

}  // namespace

ParsedConversations parseConversations(const QByteArray& data) {
  ParsedConversations out;
  if (data.size() > kImportMaxBytes) {
    out.error = QStringLiteral("the data is %1 MiB; files over %2 MiB are not imported")
                    .arg(mib(data.size()))
                    .arg(kImportMaxBytes >> 20);
    return out;
  }
  if (data.startsWith("\xEF\xBB\xBF")) return parseConversations(data.mid(3));  // a UTF-8 byte order mark
  if (data.trimmed().isEmpty()) {
    out.error = QStringLiteral("the file is empty");
    return out;
  }
  QJsonParseError parse;
  const QJsonDocument doc = QJsonDocument::fromJson(data, &parse);
  if (parse.error != QJsonParseError::NoError) {
    qsizetype end = data.size();  // after the last byte that is not whitespace
    while (end > 0 && QChar::isSpace(static_cast<unsigned char>(data.at(end - 1)))) --end;
    const bool truncated = parse.offset >= end - 1;  // the parser ran out of text
    const QString where = QStringLiteral("byte %1 (%2)").arg(parse.offset).arg(lineColumn(data, parse.offset));
    out.error =
        truncated
            ? QStringLiteral("the file is truncated: the JSON ends early (%1 at %2)").arg(parse.errorString(), where)
            : QStringLiteral("invalid JSON at %1: %2").arg(where, parse.errorString());
    return out;
  }
  Reader reader;
  reader.read(doc);
  if (!reader.ok()) {
    out.error = reader.error();
    return out;
  }
  out.conversations = reader.take();
  return out;
}

ImportResult importConversationsFromData(ConversationStore& store, const QByteArray& data) {
  ParsedConversations parsed = parseConversations(data);
  if (!parsed.error.isEmpty()) return failed(parsed.error);
  ImportResult result;
  const auto ids = store.insertConversations(parsed.conversations, &result.duplicatesSkipped);
  if (!ids) return failed(store.lastError());
  result.ok = true;
  result.conversationIds = *ids;
  return result;
}

ImportResult importConversations(ConversationStore& store, const QString& path) {
  const QString name = path == u"-" ? QStringLiteral("standard input") : QDir::toNativeSeparators(path);
  QFile file;
  if (path == u"-") {
    if (!file.open(stdin, QIODevice::ReadOnly)) return failed(name + QStringLiteral(": ") + file.errorString());
  } else {
    if (QFileInfo(path).isDir()) return failed(QStringLiteral("cannot read %1: it is a folder").arg(name));
    file.setFileName(path);
    if (!file.open(QIODevice::ReadOnly))
      return failed(QStringLiteral("cannot read %1: %2").arg(name, file.errorString()));
  }
  if (!file.isSequential() && file.size() > kImportMaxBytes)
    return failed(QStringLiteral("%1 is %2 MiB; files over %3 MiB are not imported")
                      .arg(name, mib(file.size()))
                      .arg(kImportMaxBytes >> 20));
  // A pipe's size is unknown: read up to one byte past the limit to notice a larger input.
  QByteArray data;
  if (file.isSequential()) {
    while (data.size() <= kImportMaxBytes) {
      const QByteArray chunk = file.read(std::min<qint64>(1 << 20, kImportMaxBytes + 1 - data.size()));
      if (chunk.isEmpty()) break;  // the end (or an error, checked below)
      data += chunk;
    }
  } else {
    data = file.readAll();
  }
  if (file.error() != QFileDevice::NoError)
    return failed(QStringLiteral("cannot read %1: %2").arg(name, file.errorString()));
  if (data.size() > kImportMaxBytes)
    return failed(
        QStringLiteral("%1 is over %2 MiB; larger files are not imported").arg(name).arg(kImportMaxBytes >> 20));
  ImportResult result = importConversationsFromData(store, data);
  if (!result.ok) result.error = name + QStringLiteral(": ") + result.error;
  return result;
}

}  // namespace cosmos::ui
