// HTML export: one self-contained file (inline CSS, nothing loaded from outside, no script) that
// follows the reader's light or dark preference. Each conversation's branch shown: a heading per
// message, the reasoning in a <details> block (folded), the text rendered from Markdown by
// markdownToHtml() with every character escaped. conversationsHtml() also feeds the PDF export.
#include "conversation_export_p.h"

namespace cosmos::ui::exporting {
namespace {

// Light colors first; the dark set when the reader's system prefers it.
constexpr const char* kStyle = R"css(
:root {
  color-scheme: light dark;
  --bg: #ffffff; --fg: #1f2328; --muted: #59636e; --border: #d1d9e0;
  --code-bg: #f6f8fa; --user-bg: #eef3fc; --link: #0969da; --accent: #76b900;
}
@media (prefers-color-scheme: dark) {
  :root {
    --bg: #0d1117; --fg: #e6edf3; --muted: #9198a1; --border: #3d444d;
    --code-bg: #161b22; --user-bg: #16213a; --link: #4493f8; --accent: #8fd600;
  }
}
* { box-sizing: border-box; }
body {
  margin: 0 auto; max-width: 52rem; padding: 2rem 1.25rem 3rem;
  background: var(--bg); color: var(--fg); line-height: 1.6; overflow-wrap: break-word;
  font: 16px/1.6 system-ui, -apple-system, "Segoe UI", "Noto Sans", "Noto Sans CJK SC", "Noto Sans CJK JP",
    sans-serif, "Apple Color Emoji", "Segoe UI Emoji", "Noto Color Emoji";
}
h1 { font-size: 1.6rem; line-height: 1.3; margin: 0 0 .25rem; }
.info, .note, .meta, footer { color: var(--muted); font-size: .875rem; }
.note { border-left: 3px solid var(--accent); padding-left: .75rem; }
article + article { border-top: 2px solid var(--border); margin-top: 3rem; padding-top: 2rem; }
.message { margin: 1.25rem 0; padding: .75rem 1rem; border: 1px solid var(--border); border-radius: 10px; }
.message.user { background: var(--user-bg); }
.message.user .text p { white-space: pre-line; }  /* typed line breaks, as the app shows them */
.role { margin: 0 0 .5rem; font-size: .8rem; text-transform: uppercase; letter-spacing: .06em; color: var(--muted); }
.version { text-transform: none; letter-spacing: 0; font-weight: normal; }
.message > :last-child, .text > :last-child, .reasoning > :last-child { margin-bottom: 0; }
details.reasoning { margin: 0 0 .75rem; padding: .25rem .75rem; border-left: 3px solid var(--border);
  color: var(--muted); }
details.reasoning summary { cursor: pointer; font-size: .875rem; }
pre { background: var(--code-bg); border: 1px solid var(--border); border-radius: 6px; padding: .75rem 1rem;
  overflow-x: auto; line-height: 1.45; }
code { font-family: ui-monospace, SFMono-Regular, "DejaVu Sans Mono", Menlo, Consolas, monospace; font-size: .875em; }
:not(pre) > code { background: var(--code-bg); padding: .1em .35em; border-radius: 4px; }
table { border-collapse: collapse; margin: .75rem 0; display: block; max-width: 100%; overflow-x: auto; }
th, td { border: 1px solid var(--border); padding: .35rem .7rem; }
th { background: var(--code-bg); }
blockquote { margin: .5rem 0; padding: 0 1rem; border-left: 3px solid var(--border); color: var(--muted); }
a { color: var(--link); }
footer { margin-top: 3rem; border-top: 1px solid var(--border); padding-top: 1rem; }
@media print { details.reasoning { border-color: #999; } pre { white-space: pre-wrap; } }
)css";

QString roleClass(const QString& role) {
  return role == u"user" || role == u"assistant" || role == u"system" || role == u"tool" ? role
                                                                                          : QStringLiteral("other");
}

}  // namespace

QString conversationsHtml(const ExportDocument& d, HtmlFlavor flavor) {
  const bool browser = flavor == HtmlFlavor::Browser;
  QString out;
  for (const ExportedConversation& c : d.conversations) {
    if (browser) out += QStringLiteral("<article class=\"conversation\" id=\"conversation-%1\">\n").arg(c.summary.id);
    else if (&c != &d.conversations.front()) out += QStringLiteral("<hr>\n");
    out += QStringLiteral("<h1>") + htmlEscape(conversationTitle(c)) + QStringLiteral("</h1>\n");
    out += QStringLiteral("<p class=\"info\">") + htmlEscape(conversationInfo(c)) + QStringLiteral("</p>\n");
    if (const QString note = versionsNote(c); !note.isEmpty())
      out += QStringLiteral("<p class=\"note\">") + htmlEscape(note) + QStringLiteral("</p>\n");
    for (const BranchMessage& b : c.branch) {
      const StoredMessage& m = b.message;
      if (browser)
        out += QStringLiteral("<section class=\"message %1\" id=\"message-%2\">\n").arg(roleClass(m.role)).arg(m.id);
      out += QStringLiteral("<h2 class=\"role\">") + htmlEscape(roleName(m.role));
      if (const QString version = versionLabel(b); !version.isEmpty())
        out += QStringLiteral(" <span class=\"version\">(") + htmlEscape(version) + QStringLiteral(")</span>");
      out += QStringLiteral("</h2>\n");
      if (!m.reasoning.trimmed().isEmpty()) {
        const QString summary = htmlEscape(reasoningSummary(m));
        const QString body = markdownToHtml(m.reasoning, flavor);
        if (browser)
          out += QStringLiteral("<details class=\"reasoning\">\n<summary>%1</summary>\n%2</details>\n")
                     .arg(summary, body);
        else  // QTextDocument has no <details>: an indented, muted block under its title
          out += QStringLiteral("<p class=\"summary\">%1</p>\n<blockquote class=\"reasoning\">\n%2</blockquote>\n")
                     .arg(summary, body);
      }
      if (!m.content.trimmed().isEmpty()) {
        const QString text = markdownToHtml(m.content, flavor);
        out += browser ? QStringLiteral("<div class=\"text\">\n") + text + QStringLiteral("</div>\n") : text;
      }
      if (const QString meta = metaLine(m); !meta.isEmpty())
        out += QStringLiteral("<p class=\"meta\">") + htmlEscape(meta) + QStringLiteral("</p>\n");
      if (browser) out += QStringLiteral("</section>\n");
    }
    if (browser) out += QStringLiteral("</article>\n");
  }
  return out;
}

QByteArray renderHtml(const ExportDocument& d) {
  QString out = QStringLiteral(
      "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n"
      "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n"
      // Defense in depth: no script runs and nothing is fetched, even if some text were not escaped.
      "<meta http-equiv=\"Content-Security-Policy\" content=\"default-src 'none'; style-src 'unsafe-inline'\">\n");
  out += QStringLiteral("<meta name=\"generator\" content=\"%1\">\n").arg(htmlEscape(d.app));
  out += QStringLiteral("<title>") + htmlEscape(documentTitle(d)) + QStringLiteral("</title>\n<style>");
  out += QString::fromLatin1(kStyle);
  out += QStringLiteral("</style>\n</head>\n<body>\n");
  out += conversationsHtml(d, HtmlFlavor::Browser);
  out += QStringLiteral("<footer>") + htmlEscape(exportFooter(d)) + QStringLiteral("</footer>\n</body>\n</html>\n");
  return out.toUtf8();
}

}  // namespace cosmos::ui::exporting
