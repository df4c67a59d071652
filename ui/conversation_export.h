// Conversation export: one conversation, several or all of them to Markdown, JSON, HTML, PDF or
// plain text (the app's Ctrl+E / Ctrl+Shift+E and `cosmos-cli export`).
//
// Branches: JSON keeps every node of each conversation's message tree (the format is specified in
// docs/CONVERSATION_JSON.md; import reads it back). Markdown, HTML, PDF and text show the branch on
// screen (root .. ConversationStore::latestLeaf) and say how many other versions exist.
//
// Implemented in conversation_export.cpp (formats, collecting, writing, JSON and text),
// conversation_export_markdown.cpp, conversation_export_html.cpp (with a small Markdown-to-HTML
// renderer in conversation_export_render.cpp and _inline.cpp) and conversation_export_pdf.cpp.
#pragma once

#include <QByteArray>
#include <QList>
#include <QString>
#include <QStringView>

#include <optional>

namespace cosmos::ui {

class ConversationStore;

enum class ExportFormat { Markdown, Json, Html, Pdf, Text };

// "md"/"markdown", "json", "html", "pdf", "txt"/"text" (case-insensitive); nullopt otherwise.
std::optional<ExportFormat> exportFormatFromString(QStringView name);
// "md", "json", "html", "pdf", "txt".
QString exportFormatExtension(ExportFormat f);

struct ExportResult {
  bool ok = false;
  QString error;          // why it failed (what, the file and the system's reason)
  int conversations = 0;  // how many were written
};

// ids empty: every conversation not deleted (newest first, as in the sidebar); otherwise those, in
// that order (a deleted one too, when asked for by id). Writes atomically with QSaveFile (temporary
// file, then rename): a full disk or any failure leaves no half-written file, an existing file is
// replaced only on success, and the error says why.
// PDF needs a QGuiApplication (fonts, layout); the other formats need only the store.
ExportResult exportConversations(const ConversationStore& store, const QList<qint64>& ids, ExportFormat format,
                                 const QString& path);

// The same export in memory (tests). Empty with *error set on failure.
// The export time is the current time, or SOURCE_DATE_EPOCH (seconds) when that is set, for
// reproducible files.
QByteArray renderExport(const ConversationStore& store, const QList<qint64>& ids, ExportFormat format,
                        QString* error = nullptr);

}  // namespace cosmos::ui
