// ConversationTransfer (QML: `transfer`): export and import in the app, over exportConversations()
// (conversation_export.h) and importConversations() (conversation_import.h). Runs on the GUI
// thread (a file of conversations is written or read in well under a second). The outcome is a
// sentence in statusText (statusIsError for a failure), shown in the window's banner.
//
// Paths may be local paths or file: URLs (what QtQuick.Dialogs' FileDialog gives). The format is
// the file's extension when it names one (.md .json .html .pdf .txt), else the format chosen
// (its extension is then appended), else Markdown. A successful import makes the store announce
// conversationsChanged (the lists refresh) and emits imported() with the first new conversation.
#pragma once

#include <QObject>
#include <QPointer>
#include <QString>
#include <QStringList>
#include <QUrl>
#include <QVariantList>

#include <optional>
#include <utility>

#include "conversation_export.h"
#include "conversation_store.h"

namespace cosmos::ui {

class ConversationTransfer : public QObject {
  Q_OBJECT
  Q_PROPERTY(QString statusText READ statusText NOTIFY statusChanged)
  Q_PROPERTY(bool statusIsError READ statusIsError NOTIFY statusChanged)
  // [{name: "markdown", label: "Markdown", extension: "md", filter: "Markdown (*.md)"}, …]: the
  // export formats in menu order (Markdown first).
  Q_PROPERTY(QVariantList formats READ formats CONSTANT)
  Q_PROPERTY(QStringList exportNameFilters READ exportNameFilters CONSTANT)  // formats' filters
  Q_PROPERTY(QStringList importNameFilters READ importNameFilters CONSTANT)
  // Where the file dialogs open: the last folder used, else Documents (else home).
  Q_PROPERTY(QUrl folder READ folder NOTIFY folderChanged)

 public:
  explicit ConversationTransfer(ConversationStore* store, QObject* parent = nullptr);

  QString statusText() const { return statusText_; }
  bool statusIsError() const { return statusIsError_; }
  static QVariantList formats();
  static QStringList exportNameFilters();
  static QStringList importNameFilters();
  QUrl folder() const;

  // Exports one conversation / every conversation (not deleted). `format`: a format's name
  // ("markdown", "json", "html", "pdf", "text"), used when the file's extension names none.
  Q_INVOKABLE bool exportConversation(qint64 conversationId, const QString& file, const QString& format = {});
  Q_INVOKABLE bool exportAll(const QString& file, const QString& format = {});
  // Imports the conversations in `file` (see conversation_import.h for what it reads).
  Q_INVOKABLE bool importFile(const QString& file);
  // A file URL in folder() for the save dialog: the conversation's title (id 0: every
  // conversation, "cosmos-chat-conversations-YYYY-MM-DD") with the format's extension.
  Q_INVOKABLE QUrl suggestedFile(qint64 conversationId, const QString& format) const;
  Q_INVOKABLE void clearStatus() { setStatus({}, false); }

  // A local path for a path or a file: URL ("" for other URLs).
  static QString localPath(const QString& file);
  // The format a name stands for ("markdown", "md", "JSON", …); nullopt when unknown.
  static std::optional<ExportFormat> formatNamed(const QString& name);
  // The path to write and its format (see the header comment).
  static std::pair<QString, ExportFormat> resolveTarget(const QString& path, const QString& format);
  static QString extensionOf(ExportFormat format);  // "md", "json", … (no dot)

 signals:
  void statusChanged();
  void folderChanged();
  void exported(const QString& path, int conversations);
  void imported(qint64 firstConversationId, int count);

 private:
  bool runExport(const QList<qint64>& ids, const QString& file, const QString& format, const QString& what);
  void setStatus(const QString& text, bool error);
  void rememberFolder(const QString& path);

  QPointer<ConversationStore> store_;
  QString statusText_;
  bool statusIsError_ = false;
  QString folder_;  // the last folder used
};

}  // namespace cosmos::ui
