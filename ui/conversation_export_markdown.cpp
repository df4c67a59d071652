// Markdown export: each conversation's branch shown, a "# title" per conversation and a "## Role"
// heading per message, the reasoning in a <details> block, the message text verbatim.
//
// Messages are Markdown already and are kept as they are, except for what could break the
// document's structure (a message must not swallow the headings and messages after it):
//  - a code fence left open (a reply stopped mid-block) is closed at the end of the message;
//  - outside fenced code blocks, the "<" of an HTML tag that could capture what follows is written
//    as "&lt;": details and summary (the reasoning block is one), the raw-text and preformatted
//    elements (script, style, textarea, title, xmp, iframe, noembed, noframes, noscript,
//    plaintext, pre), opening or closing, and "<!" (comments, declarations) and "<?". A Markdown
//    viewer shows them as the text that was written; inside an inline code span the entity shows
//    as "&lt;" (the one place the escape is visible);
//  - titles and the lines this export writes itself are escaped as plain text.
// Everything else (other HTML, entities such as &amp;, tables, code) is left as written.
#include <QRegularExpression>

#include "conversation_export_p.h"

namespace cosmos::ui::exporting {
namespace {

// Plain text inside Markdown (a heading, an emphasized line): backslash before every character
// that could start markup there.
QString escapeInline(const QString& text) {
  static const QString special = QStringLiteral("\\`*_[]<>#|~&!");
  QString out;
  out.reserve(text.size());
  for (QChar c : text) {
    if (special.contains(c)) out += u'\\';
    out += c;
  }
  return out;
}

// "&lt;" for each "<" that opens a dangerous tag (see the file comment), in text outside code fences.
QString neutralizeHtml(QStringView line) {
  static const QRegularExpression dangerous(
      QStringLiteral("<(?=[!?]|/?(?:details|summary|script|style|textarea|title|xmp|iframe|noembed|noframes|"
                     "noscript|plaintext|pre)(?![A-Za-z0-9-]))"),
      QRegularExpression::CaseInsensitiveOption);
  QString out = line.toString();
  out.replace(dangerous, QStringLiteral("&lt;"));
  return out;
}

// A message's text made safe for the document (see the file comment); no trailing newline.
QString safeMarkdown(const QString& text) {
  FenceTracker fence;
  QStringList out;
  for (QStringView line : textLines(text)) out << (fence.feed(line) ? line.toString() : neutralizeHtml(line));
  while (!out.isEmpty() && out.back().trimmed().isEmpty()) out.removeLast();  // trailing blank lines
  if (fence.open()) out << fence.closingLine();
  return out.join(u'\n');
}

}  // namespace

QByteArray renderMarkdown(const ExportDocument& d) {
  QString out;
  bool first = true;
  for (const ExportedConversation& c : d.conversations) {
    if (!first) out += QStringLiteral("---\n\n");
    first = false;
    out += QStringLiteral("# ") + escapeInline(conversationTitle(c)) + QStringLiteral("\n\n");
    out += u'*' + escapeInline(conversationInfo(c)) + QStringLiteral("*\n\n");
    if (const QString note = versionsNote(c); !note.isEmpty())
      out += QStringLiteral("> ") + escapeInline(note) + QStringLiteral("\n\n");
    for (const BranchMessage& b : c.branch) {
      const StoredMessage& m = b.message;
      out += QStringLiteral("## ") + escapeInline(roleName(m.role));
      if (const QString version = versionLabel(b); !version.isEmpty())
        out += QStringLiteral(" (") + escapeInline(version) + u')';
      out += QStringLiteral("\n\n");
      if (!m.reasoning.trimmed().isEmpty()) {
        // The blank lines let the reasoning be Markdown inside the HTML block.
        out += QStringLiteral("<details>\n<summary>") + htmlEscape(reasoningSummary(m)) +
               QStringLiteral("</summary>\n\n") + safeMarkdown(m.reasoning) + QStringLiteral("\n\n</details>\n\n");
      }
      if (const QString content = safeMarkdown(m.content); !content.trimmed().isEmpty())
        out += content + QStringLiteral("\n\n");
      if (const QString meta = metaLine(m); !meta.isEmpty()) out += u'*' + escapeInline(meta) + QStringLiteral("*\n\n");
    }
  }
  out += QStringLiteral("---\n\n*") + escapeInline(exportFooter(d)) + QStringLiteral("*\n");
  return out.toUtf8();
}

}  // namespace cosmos::ui::exporting
