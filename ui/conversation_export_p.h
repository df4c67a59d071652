// Internals of the conversation export (conversation_export.h), shared by its format files.
#pragma once

#include <QByteArray>
#include <QDateTime>
#include <QList>
#include <QString>
#include <QStringView>

#include "conversation_export.h"
#include "conversation_store.h"

namespace cosmos::ui::exporting {

// A message of the branch shown, with its place among its siblings (regenerated replies, edits).
struct BranchMessage {
  StoredMessage message;
  int version = 1;   // 1-based, siblings in creation order
  int versions = 1;  // the message and its siblings
};

struct ExportedConversation {
  ConversationSummary summary;
  qint64 currentLeaf = 0;          // ConversationStore::latestLeaf, 0 when empty
  QList<StoredMessage> messages;   // every node, in creation order (parents before children)
  QList<BranchMessage> branch;     // root .. currentLeaf
  int otherVersions = 0;           // leaves of the tree besides currentLeaf
};

struct ExportDocument {
  QDateTime exportedAt;  // UTC
  QString app;           // "Cosmos Chat <version>"
  QList<ExportedConversation> conversations;
};

// --- wording shared by the formats (plain text; each format escapes it) ---
QString isoUtc(const QDateTime& t);        // 2024-05-01T10:00:00.000Z (lossless, JSON)
QString displayTime(const QDateTime& t);   // 2024-05-01 10:00 UTC
QString conversationTitle(const ExportedConversation& c);  // the title, or "Untitled conversation"
QString roleName(const QString& role);     // User, Assistant, System, Tool (else the role as stored)
QString versionLabel(const BranchMessage& m);  // "version 2 of 3", empty without siblings
QString conversationInfo(const ExportedConversation& c);  // id, message count, created, updated
QString versionsNote(const ExportedConversation& c);      // how many other versions; empty if none
QString reasoningSummary(const StoredMessage& m);         // "Reasoning", "Reasoning · thought for 3.2 s"
QString metaLine(const StoredMessage& m);  // model, precision, tokens, speeds, stopped/error; may be empty
QString exportFooter(const ExportDocument& d);  // "Exported from Cosmos Chat 0.1.0 on ... ."

// --- fenced code blocks, as MessageBlocksModel splits them: a line of >= 3 backticks (no backtick
// after them) or tildes after any indentation opens one; a line of at least as many of the same
// character (and only whitespace after) closes it; an unclosed one runs to the end of the text ---
class FenceTracker {
 public:
  // Feeds the next line; true when it is part of a fenced block (its opening or closing line too).
  bool feed(QStringView line);
  bool open() const { return run_ > 0; }
  QString closingLine() const { return QString(run_, fenceChar_); }  // closes the open fence

 private:
  QChar fenceChar_;
  int run_ = 0;  // 0: outside a fence
};
// Lines of a text ("\r\n" and "\n" both end a line; no trailing empty line for a final newline).
QList<QStringView> textLines(QStringView text);

// --- renderers (each returns the file's bytes, UTF-8) ---
QByteArray renderJson(const ExportDocument& d);
QByteArray renderText(const ExportDocument& d);
QByteArray renderMarkdown(const ExportDocument& d);
QByteArray renderHtml(const ExportDocument& d);
QByteArray renderPdf(const ExportDocument& d, QString* error);  // needs a QGuiApplication

// --- HTML, shared by the HTML and PDF exports ---
// Browser: the .html file (semantic tags, <details>); QtRichText: what QTextDocument lays out for
// the PDF (tables with border attributes, no <details>: reasoning is an indented block).
enum class HtmlFlavor { Browser, QtRichText };
QString htmlEscape(QStringView text);  // & < > " ' as entities
// A message's Markdown as HTML; every character of the text is escaped (conversation_export_render.cpp).
QString markdownToHtml(QStringView markdown, HtmlFlavor flavor);
// One paragraph's (or cell's) inline Markdown as HTML (conversation_export_inline.cpp).
QString inlineHtml(QStringView markdown);
// The conversations as HTML body content (conversation_export_html.cpp).
QString conversationsHtml(const ExportDocument& d, HtmlFlavor flavor);
QString documentTitle(const ExportDocument& d);  // the one conversation's title, or "Cosmos Chat: N conversations"

}  // namespace cosmos::ui::exporting
