// Conversation export: format names, reading the conversations from the store, the atomic write,
// the wording the formats share, and the JSON and plain-text formats.
#include "conversation_export.h"

#include <QCoreApplication>
#include <QDir>
#include <QFileInfo>
#include <QHash>
#include <QJsonArray>
#include <QJsonDocument>
#include <QJsonObject>
#include <QSaveFile>
#include <QSet>

#include "conversation_export_p.h"

#ifndef COSMOS_VERSION
#define COSMOS_VERSION "unknown"
#endif

namespace cosmos::ui {
namespace exporting {
namespace {

QString tr(const char* text) { return QCoreApplication::translate("cosmos::ui::ConversationExport", text); }

QDateTime exportTime() {
  // SOURCE_DATE_EPOCH (reproducible builds' convention): a fixed export time, for identical files.
  bool ok = false;
  const qint64 fixed = qEnvironmentVariable("SOURCE_DATE_EPOCH").toLongLong(&ok);
  return ok ? QDateTime::fromSecsSinceEpoch(fixed, Qt::UTC) : QDateTime::currentDateTimeUtc();
}

// Reads one conversation; nullopt with *error set when it is missing or cannot be read.
std::optional<ExportedConversation> readConversation(const ConversationStore& store, qint64 id, QString* error) {
  const std::optional<ConversationSummary> summary = store.conversation(id);
  if (!summary) {
    *error = tr("Conversation %1 does not exist in %2").arg(id).arg(QDir::toNativeSeparators(store.filePath()));
    return std::nullopt;
  }
  ExportedConversation c;
  c.summary = *summary;
  c.messages = store.messages(id);
  if (c.messages.size() != summary->messageCount) {  // a read failed part-way (the store says why)
    *error = tr("Could not read conversation %1: %2").arg(id).arg(store.lastError());
    return std::nullopt;
  }
  QHash<qint64, QList<qint64>> children;  // parent id (0: roots) -> children, creation order
  for (const StoredMessage& m : c.messages) children[m.parentId].append(m.id);
  for (const StoredMessage& m : c.messages)
    if (!children.contains(m.id)) ++c.otherVersions;  // a leaf
  c.currentLeaf = store.latestLeaf(id);
  if (c.currentLeaf > 0) {
    --c.otherVersions;
    for (const StoredMessage& m : store.path(c.currentLeaf)) {
      const QList<qint64>& siblings = children.value(m.parentId);
      const int version = static_cast<int>(siblings.indexOf(m.id)) + 1;
      c.branch.append(BranchMessage{m, version, static_cast<int>(siblings.size())});
    }
  }
  return c;
}

std::optional<ExportDocument> collect(const ConversationStore& store, const QList<qint64>& ids, QString* error) {
  if (!store.isOpen()) {
    *error = tr("Could not export: the conversation database is not open");
    return std::nullopt;
  }
  ExportDocument d;
  d.exportedAt = exportTime();
  d.app = QStringLiteral("Cosmos Chat " COSMOS_VERSION);
  QList<qint64> wanted = ids;
  if (wanted.isEmpty()) {
    const QString before = store.lastError();
    for (const ConversationSummary& s : store.conversations()) wanted.append(s.id);
    if (wanted.isEmpty() && store.lastError() != before) {
      *error = tr("Could not list the conversations: %1").arg(store.lastError());
      return std::nullopt;
    }
  }
  for (qint64 id : wanted) {
    std::optional<ExportedConversation> c = readConversation(store, id, error);
    if (!c) return std::nullopt;
    d.conversations.append(std::move(*c));
  }
  return d;
}

QByteArray render(const ExportDocument& d, ExportFormat format, QString* error) {
  switch (format) {
    case ExportFormat::Markdown: return renderMarkdown(d);
    case ExportFormat::Json: return renderJson(d);
    case ExportFormat::Html: return renderHtml(d);
    case ExportFormat::Pdf: return renderPdf(d, error);
    case ExportFormat::Text: return renderText(d);
  }
  *error = tr("Could not export: unknown format");
  return {};
}

QJsonValue idOrNull(qint64 id) { return id > 0 ? QJsonValue(id) : QJsonValue(QJsonValue::Null); }

QString plural(int n, const char* one, const char* many) { return (n == 1 ? tr(one) : tr(many)).arg(n); }

}  // namespace

// --- shared wording ---

QString isoUtc(const QDateTime& t) { return t.toUTC().toString(Qt::ISODateWithMs); }

QString displayTime(const QDateTime& t) { return t.toUTC().toString(QStringLiteral("yyyy-MM-dd HH:mm 'UTC'")); }

QString conversationTitle(const ExportedConversation& c) {
  return c.summary.title.isEmpty() ? tr("Untitled conversation") : c.summary.title;
}

QString roleName(const QString& role) {
  if (role == u"user") return tr("User");
  if (role == u"assistant") return tr("Assistant");
  if (role == u"system") return tr("System");
  if (role == u"tool") return tr("Tool");
  return role;
}

QString versionLabel(const BranchMessage& m) {
  return m.versions > 1 ? tr("version %1 of %2").arg(m.version).arg(m.versions) : QString();
}

QString conversationInfo(const ExportedConversation& c) {
  return tr("Conversation %1 · %2 · created %3 · updated %4")
      .arg(c.summary.id)
      .arg(plural(static_cast<int>(c.branch.size()), "%1 message", "%1 messages"), displayTime(c.summary.createdAt),
           displayTime(c.summary.updatedAt));
}

QString versionsNote(const ExportedConversation& c) {
  if (c.otherVersions <= 0) return {};
  return plural(c.otherVersions,
                "This conversation has %1 other version (a regenerated or edited message) that is not shown "
                "here; the JSON export keeps every version.",
                "This conversation has %1 other versions (regenerated or edited messages) that are not shown "
                "here; the JSON export keeps every version.");
}

QString reasoningSummary(const StoredMessage& m) {
  bool ok = false;
  const double seconds = m.meta.value(QStringLiteral("thoughtSeconds")).toDouble(&ok);
  return ok && seconds > 0 ? tr("Reasoning · thought for %1 s").arg(seconds, 0, 'f', 1) : tr("Reasoning");
}

QString metaLine(const StoredMessage& m) {
  QStringList parts;
  for (const char* key : {"model", "precision"}) {
    const QString v = m.meta.value(QString::fromLatin1(key)).toString();
    if (!v.isEmpty()) parts << v;
  }
  const QVariantMap stats = m.meta.value(QStringLiteral("stats")).toMap();
  if (stats.contains(QStringLiteral("generated_tokens")))
    parts << plural(stats.value(QStringLiteral("generated_tokens")).toInt(), "%1 token", "%1 tokens");
  if (const double v = stats.value(QStringLiteral("decode_tok_per_s")).toDouble(); v > 0)
    parts << tr("%1 tok/s").arg(v, 0, 'f', 1);
  if (const double v = stats.value(QStringLiteral("ttft_s")).toDouble(); v > 0)
    parts << tr("first token %1 s").arg(v, 0, 'f', 2);
  if (m.meta.value(QStringLiteral("stopped")).toBool()) parts << tr("stopped");
  if (m.meta.value(QStringLiteral("streaming")).toBool()) parts << tr("unfinished");
  const QString error = m.meta.value(QStringLiteral("error")).toString();
  if (!error.isEmpty()) parts << tr("error: %1").arg(error);
  return parts.join(QStringLiteral(" · ")).simplified();  // one line (an error may have several)
}

QString exportFooter(const ExportDocument& d) {
  return tr("Exported from %1 on %2 (%3).")
      .arg(d.app, displayTime(d.exportedAt),
           plural(static_cast<int>(d.conversations.size()), "%1 conversation", "%1 conversations"));
}

QString documentTitle(const ExportDocument& d) {
  if (d.conversations.size() == 1) return conversationTitle(d.conversations.front());
  return tr("Cosmos Chat: %1").arg(plural(static_cast<int>(d.conversations.size()), "%1 conversation",
                                          "%1 conversations"));
}

// --- fences ---

bool FenceTracker::feed(QStringView line) {
  qsizetype i = 0;
  while (i < line.size() && (line[i] == u' ' || line[i] == u'\t')) ++i;
  qsizetype n = 0;
  const QChar c = i < line.size() ? line[i] : QChar();
  if (c == u'`' || c == u'~')
    while (i + n < line.size() && line[i + n] == c) ++n;
  const QStringView rest = line.mid(i + n);
  if (run_ > 0) {  // inside: does this line close it?
    if (c == fenceChar_ && n >= run_ && rest.trimmed().isEmpty()) run_ = 0;
    return true;
  }
  if (n < 3 || (c == u'`' && rest.contains(u'`'))) return false;
  fenceChar_ = c;
  run_ = static_cast<int>(n);
  return true;
}

QList<QStringView> textLines(QStringView text) {
  QList<QStringView> lines = text.split(u'\n');
  if (!lines.isEmpty() && lines.back().isEmpty()) lines.removeLast();
  for (QStringView& l : lines)
    if (l.endsWith(u'\r')) l.chop(1);
  return lines;
}

// --- JSON: lossless (every node), versioned; docs/CONVERSATION_JSON.md specifies it ---

QByteArray renderJson(const ExportDocument& d) {
  QJsonArray conversations;
  for (const ExportedConversation& c : d.conversations) {
    QJsonArray messages;
    for (const StoredMessage& m : c.messages) {
      messages.append(QJsonObject{{QStringLiteral("id"), m.id},
                                  {QStringLiteral("parent_id"), idOrNull(m.parentId)},
                                  {QStringLiteral("role"), m.role},
                                  {QStringLiteral("content"), m.content},
                                  {QStringLiteral("reasoning"), m.reasoning},
                                  {QStringLiteral("created_at"), isoUtc(m.createdAt)},
                                  {QStringLiteral("meta"), QJsonObject::fromVariantMap(m.meta)}});
    }
    conversations.append(QJsonObject{{QStringLiteral("id"), c.summary.id},
                                     {QStringLiteral("title"), c.summary.title},
                                     {QStringLiteral("created_at"), isoUtc(c.summary.createdAt)},
                                     {QStringLiteral("updated_at"), isoUtc(c.summary.updatedAt)},
                                     {QStringLiteral("current_leaf"), idOrNull(c.currentLeaf)},
                                     {QStringLiteral("messages"), messages}});
  }
  const QJsonObject root{{QStringLiteral("format"), QStringLiteral("cosmos-chat-conversations")},
                         {QStringLiteral("version"), 1},
                         {QStringLiteral("exported_at"), isoUtc(d.exportedAt)},
                         {QStringLiteral("app"), d.app},
                         {QStringLiteral("conversations"), conversations}};
  return QJsonDocument(root).toJson(QJsonDocument::Indented);
}

// --- plain text: the branch shown, text verbatim, reasoning indented under a label ---

QByteArray renderText(const ExportDocument& d) {
  const QString rule(72, u'=');
  QString out;
  for (const ExportedConversation& c : d.conversations) {
    out += conversationTitle(c) + u'\n' + rule + u'\n' + conversationInfo(c) + u'\n';
    if (const QString note = versionsNote(c); !note.isEmpty()) out += note + u'\n';
    for (const BranchMessage& b : c.branch) {
      const StoredMessage& m = b.message;
      const QString version = versionLabel(b);
      out += QStringLiteral("\n--- %1 ---\n").arg(version.isEmpty() ? roleName(m.role)
                                                                     : roleName(m.role) + QStringLiteral(" (") +
                                                                           version + u')');
      if (!m.reasoning.trimmed().isEmpty()) {
        out += u'[' + reasoningSummary(m) + QStringLiteral("]\n");
        const QString reasoning = m.reasoning.trimmed();
        for (QStringView line : textLines(reasoning))
          out += (line.isEmpty() ? QStringLiteral("  |") : QStringLiteral("  | ") + line.toString()) + u'\n';
        out += u'\n';
      }
      const QString content = m.content.trimmed();
      if (!content.isEmpty()) out += content + u'\n';
      if (const QString meta = metaLine(m); !meta.isEmpty())
        out += QStringLiteral("\n(") + meta + QStringLiteral(")\n");
    }
    out += u'\n';
  }
  out += exportFooter(d) + u'\n';
  return out.toUtf8();
}

}  // namespace exporting

// --- the API ---

std::optional<ExportFormat> exportFormatFromString(QStringView name) {
  const QString n = name.trimmed().toString().toLower();
  if (n == u"md" || n == u"markdown") return ExportFormat::Markdown;
  if (n == u"json") return ExportFormat::Json;
  if (n == u"html" || n == u"htm") return ExportFormat::Html;
  if (n == u"pdf") return ExportFormat::Pdf;
  if (n == u"txt" || n == u"text") return ExportFormat::Text;
  return std::nullopt;
}

QString exportFormatExtension(ExportFormat f) {
  switch (f) {
    case ExportFormat::Markdown: return QStringLiteral("md");
    case ExportFormat::Json: return QStringLiteral("json");
    case ExportFormat::Html: return QStringLiteral("html");
    case ExportFormat::Pdf: return QStringLiteral("pdf");
    case ExportFormat::Text: return QStringLiteral("txt");
  }
  return {};
}

QByteArray renderExport(const ConversationStore& store, const QList<qint64>& ids, ExportFormat format,
                        QString* error) {
  QString why;
  QByteArray out;
  if (const std::optional<exporting::ExportDocument> d = exporting::collect(store, ids, &why))
    out = exporting::render(*d, format, &why);
  if (error) *error = why;
  return why.isEmpty() ? out : QByteArray();
}

ExportResult exportConversations(const ConversationStore& store, const QList<qint64>& ids, ExportFormat format,
                                 const QString& path) {
  using exporting::tr;
  ExportResult r;
  const QString file = QDir::toNativeSeparators(path);
  auto fail = [&r, &file](const QString& why) {
    r.error = tr("Could not export to %1: %2").arg(file, why);
    return r;
  };
  if (path.isEmpty()) {
    r.error = tr("Could not export: no file name given");
    return r;
  }
  const QFileInfo info(path);
  const QFileInfo folder(info.absolutePath());
  const QString folderName = QDir::toNativeSeparators(folder.filePath());
  if (!folder.exists()) return fail(tr("the folder %1 does not exist").arg(folderName));
  if (!folder.isDir()) return fail(tr("%1 is not a folder").arg(folderName));
  if (info.isDir()) return fail(tr("it is a folder"));

  QString why;
  const std::optional<exporting::ExportDocument> d = exporting::collect(store, ids, &why);
  const QByteArray data = d ? exporting::render(*d, format, &why) : QByteArray();
  if (!why.isEmpty()) {  // nothing was written: an existing file is untouched
    r.error = why;
    return r;
  }
  // QSaveFile writes a temporary file next to the target and renames it over the target only in
  // commit(); on any failure (or when destroyed uncommitted) it removes the temporary file.
  QSaveFile out(path);
  if (!out.open(QIODevice::WriteOnly)) return fail(out.errorString());
  if (out.write(data) != data.size()) {
    const QString error = out.errorString();
    out.cancelWriting();
    return fail(error);
  }
  if (!out.commit()) return fail(out.errorString());
  r.ok = true;
  r.conversations = static_cast<int>(d->conversations.size());
  return r;
}

}  // namespace cosmos::ui
