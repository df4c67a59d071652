#include "conversation_transfer.h"

#include <QDate>
#include <QDir>
#include <QFileInfo>
#include <QRegularExpression>
#include <QStandardPaths>

#include <array>

#include "conversation_import.h"

namespace cosmos::ui {
namespace {

struct FormatInfo {
  ExportFormat format;
  const char* name;
  const char* label;
};
// Menu order: the first is the default.
constexpr std::array<FormatInfo, 5> kFormats{{{ExportFormat::Markdown, "markdown", "Markdown"},
                                             {ExportFormat::Json, "json", "JSON"},
                                             {ExportFormat::Html, "html", "HTML"},
                                             {ExportFormat::Pdf, "pdf", "PDF"},
                                             {ExportFormat::Text, "text", "Plain text"}}};

// A title as a file name: no path separators or characters other systems refuse.
QString fileNameFor(const QString& title) {
  static const QRegularExpression bad(QStringLiteral(R"([\\/:*?"<>|\x00-\x1f]+)"));
  QString name = QString(title).replace(bad, QStringLiteral(" ")).simplified();
  while (name.startsWith(u'.')) name.remove(0, 1);
  if (name.size() > 80) name = name.left(80).trimmed();
  return name.isEmpty() ? QStringLiteral("conversation") : name;
}

}  // namespace

ConversationTransfer::ConversationTransfer(ConversationStore* store, QObject* parent)
    : QObject(parent), store_(store) {}

QVariantList ConversationTransfer::formats() {
  QVariantList out;
  for (const FormatInfo& f : kFormats) {
    const QString ext = extensionOf(f.format);
    out.append(QVariantMap{{QStringLiteral("name"), QString::fromLatin1(f.name)},
                           {QStringLiteral("label"), QString::fromLatin1(f.label)},
                           {QStringLiteral("extension"), ext},
                           {QStringLiteral("filter"), QStringLiteral("%1 (*.%2)").arg(QLatin1String(f.label), ext)}});
  }
  return out;
}

QStringList ConversationTransfer::exportNameFilters() {
  QStringList out;
  for (const QVariant& f : formats()) out << f.toMap().value(QStringLiteral("filter")).toString();
  return out;
}

QStringList ConversationTransfer::importNameFilters() {
  return {QStringLiteral("Cosmos Chat or OpenAI-style JSON (*.json)"), QStringLiteral("All files (*)")};
}

QUrl ConversationTransfer::folder() const {
  QString dir = folder_;
  if (dir.isEmpty() || !QFileInfo(dir).isDir())
    dir = QStandardPaths::writableLocation(QStandardPaths::DocumentsLocation);
  if (dir.isEmpty() || !QFileInfo(dir).isDir()) dir = QDir::homePath();
  return QUrl::fromLocalFile(dir);
}

QString ConversationTransfer::extensionOf(ExportFormat format) {
  QString ext = exportFormatExtension(format);
  while (ext.startsWith(u'.')) ext.remove(0, 1);
  return ext.toLower();
}

std::optional<ExportFormat> ConversationTransfer::formatNamed(const QString& name) {
  const QString n = name.trimmed().toLower();
  if (n.isEmpty()) return std::nullopt;
  for (const FormatInfo& f : kFormats)
    if (n == QLatin1String(f.name) || n == extensionOf(f.format)) return f.format;
  return exportFormatFromString(n);
}

QString ConversationTransfer::localPath(const QString& file) {
  if (file.startsWith(QLatin1String("file:"), Qt::CaseInsensitive)) return QUrl(file).toLocalFile();
  if (file.contains(QLatin1String("://"))) return {};
  return file;
}

std::pair<QString, ExportFormat> ConversationTransfer::resolveTarget(const QString& path, const QString& format) {
  const QString suffix = QFileInfo(path).suffix();
  // The extension decides when it names a format ("notes.md" is Markdown whatever was chosen).
  for (const FormatInfo& f : kFormats)
    if (suffix.compare(extensionOf(f.format), Qt::CaseInsensitive) == 0) return {path, f.format};
  if (!suffix.isEmpty()) {
    if (const auto named = exportFormatFromString(suffix.toLower())) return {path, *named};  // .htm, .txt, …
  }
  const ExportFormat chosen = formatNamed(format).value_or(ExportFormat::Markdown);
  return {path + u'.' + extensionOf(chosen), chosen};
}

QUrl ConversationTransfer::suggestedFile(qint64 conversationId, const QString& format) const {
  QString name;
  if (conversationId > 0) {
    const auto summary = store_ ? store_->conversation(conversationId) : std::nullopt;
    name = fileNameFor(summary ? summary->title : QString());
  } else {
    name = QStringLiteral("cosmos-chat-conversations-%1").arg(QDate::currentDate().toString(Qt::ISODate));
  }
  const ExportFormat f = formatNamed(format).value_or(ExportFormat::Markdown);
  return QUrl::fromLocalFile(QDir(folder().toLocalFile()).filePath(name + u'.' + extensionOf(f)));
}

bool ConversationTransfer::exportConversation(qint64 conversationId, const QString& file, const QString& format) {
  if (!store_ || !store_->isOpen()) {
    setStatus(tr("Export failed: the conversation database is not open."), true);
    return false;
  }
  const auto summary = conversationId > 0 ? store_->conversation(conversationId) : std::nullopt;
  if (!summary || store_->isDeleted(conversationId)) {
    setStatus(tr("Export failed: open a saved conversation first."), true);
    return false;
  }
  const QString title = summary->title.isEmpty() ? tr("New conversation") : summary->title;
  return runExport({conversationId}, file, format, tr("“%1”").arg(title));
}

bool ConversationTransfer::exportAll(const QString& file, const QString& format) {
  if (!store_ || !store_->isOpen()) {
    setStatus(tr("Export failed: the conversation database is not open."), true);
    return false;
  }
  QList<qint64> ids;
  for (const ConversationSummary& c : store_->conversations()) ids.append(c.id);
  if (ids.isEmpty()) {
    setStatus(tr("Export failed: there are no conversations to export."), true);
    return false;
  }
  return runExport(ids, file, format,
                   ids.size() == 1 ? tr("1 conversation") : tr("%1 conversations").arg(ids.size()));
}

bool ConversationTransfer::runExport(const QList<qint64>& ids, const QString& file, const QString& format,
                                     const QString& what) {
  const QString path = localPath(file);
  if (path.isEmpty()) {
    setStatus(tr("Export failed: choose a file on this computer (%1 is not one).").arg(file), true);
    return false;
  }
  const auto [target, exportFormat] = resolveTarget(path, format);
  const ExportResult result = exportConversations(*store_, ids, exportFormat, target);
  if (!result.ok) {
    setStatus(tr("Export failed: %1").arg(result.error), true);
    return false;
  }
  rememberFolder(target);
  setStatus(tr("Exported %1 to %2").arg(what, QDir::toNativeSeparators(target)), false);
  emit exported(target, result.conversations);
  return true;
}

bool ConversationTransfer::importFile(const QString& file) {
  if (!store_ || !store_->isOpen()) {
    setStatus(tr("Import failed: the conversation database is not open."), true);
    return false;
  }
  const QString path = localPath(file);
  if (path.isEmpty()) {
    setStatus(tr("Import failed: choose a file on this computer (%1 is not one).").arg(file), true);
    return false;
  }
  const ImportResult result = importConversations(*store_, path);
  if (!result.ok) {
    setStatus(tr("Import failed: %1").arg(result.error), true);
    return false;
  }
  rememberFolder(path);
  const int added = static_cast<int>(result.conversationIds.size());
  const QString name = QFileInfo(path).fileName();
  QString text = added == 0   ? tr("Nothing new in %1").arg(name)
                 : added == 1 ? tr("Imported 1 conversation from %1").arg(name)
                              : tr("Imported %1 conversations from %2").arg(added).arg(name);
  if (result.duplicatesSkipped > 0)
    text += result.duplicatesSkipped == 1 ? tr(" (1 was already here)")
                                          : tr(" (%1 were already here)").arg(result.duplicatesSkipped);
  setStatus(text + u'.', false);
  if (added > 0) {
    emit store_->conversationsChanged();  // the lists refresh (a no-op for them if the import already said so)
    emit imported(result.conversationIds.first(), added);
  }
  return true;
}

void ConversationTransfer::setStatus(const QString& text, bool error) {
  if (text == statusText_ && error == statusIsError_) return;
  statusText_ = text;
  statusIsError_ = error;
  emit statusChanged();
}

void ConversationTransfer::rememberFolder(const QString& path) {
  const QString dir = QFileInfo(path).absolutePath();
  if (dir == folder_) return;
  folder_ = dir;
  emit folderChanged();
}

}  // namespace cosmos::ui
