// Inline Markdown to HTML for the HTML and PDF exports (the blocks: conversation_export_render.cpp):
// code spans, emphasis (* _), strong, strikethrough (~~), backslash escapes, hard breaks, links and
// autolinks to http(s) and mailto addresses (images become links: the file loads nothing from
// outside). Every character of the text goes through htmlEscape().
#include <QRegularExpression>

#include "conversation_export_p.h"

namespace cosmos::ui::exporting {
namespace {

constexpr auto kAnchored = QRegularExpression::AnchorAtOffsetMatchOption;

bool isAsciiPunct(QChar c) {
  static const QString punct = QStringLiteral("!\"#$%&'()*+,-./:;<=>?@[\\]^_`{|}~");
  return punct.contains(c);
}

bool allowedUrl(QStringView url) {
  return url.startsWith(QStringLiteral("https://"), Qt::CaseInsensitive) ||
         url.startsWith(QStringLiteral("http://"), Qt::CaseInsensitive) ||
         url.startsWith(QStringLiteral("mailto:"), Qt::CaseInsensitive);
}

// Emphasis, strong or strikethrough opening at s[i]: a closing run of the same length that is not
// preceded by a space ("_" also not inside a word, so snake_case stays as written).
bool emphasis(QStringView s, qsizetype& i, QString& out) {
  const QChar c = s[i];
  qsizetype run = 0;
  while (i + run < s.size() && s[i + run] == c) ++run;
  if (c == u'~' && run != 2) return false;
  run = std::min<qsizetype>(run, 3);
  const qsizetype open = i + run;
  if (open >= s.size() || s[open].isSpace()) return false;
  if (c == u'_' && i > 0 && s[i - 1].isLetterOrNumber()) return false;  // snake_case stays as written
  for (qsizetype j = s.indexOf(QString(run, c), open + 1); j > open; j = s.indexOf(QString(run, c), j + 1)) {
    if (s[j - 1].isSpace() || s[j - 1] == c || (j + run < s.size() && s[j + run] == c)) continue;
    if (c == u'_' && j + run < s.size() && s[j + run].isLetterOrNumber()) continue;
    const QString inner = inlineHtml(s.mid(open, j - open));
    if (c == u'~') out += QStringLiteral("<del>") + inner + QStringLiteral("</del>");
    else if (run == 1) out += QStringLiteral("<em>") + inner + QStringLiteral("</em>");
    else if (run == 2) out += QStringLiteral("<strong>") + inner + QStringLiteral("</strong>");
    else out += QStringLiteral("<em><strong>") + inner + QStringLiteral("</strong></em>");
    i = j + run;
    return true;
  }
  return false;
}

// [text](url) or ![alt](url) at s[i]: a link when the address is http(s) or mailto.
bool link(QStringView s, qsizetype& i, QString& out) {
  const qsizetype open = s[i] == u'!' ? i + 1 : i;
  int depth = 0;
  qsizetype close = -1;
  for (qsizetype j = open; j < s.size() && close < 0; ++j) {
    if (s[j] == u'\\') ++j;
    else if (s[j] == u'[') ++depth;
    else if (s[j] == u']' && --depth == 0) close = j;
  }
  if (close < 0 || close + 1 >= s.size() || s[close + 1] != u'(') return false;
  const qsizetype end = s.indexOf(u')', close + 2);
  if (end < 0) return false;
  QStringView target = s.mid(close + 2, end - close - 2).trimmed();
  if (const qsizetype space = target.indexOf(u' '); space >= 0) target = target.left(space);  // drop a title
  if (target.startsWith(u'<') && target.endsWith(u'>')) target = target.mid(1, target.size() - 2);
  if (!allowedUrl(target)) return false;
  out += QStringLiteral("<a href=\"%1\">%2</a>").arg(htmlEscape(target), inlineHtml(s.mid(open + 1, close - open - 1)));
  i = end + 1;
  return true;
}

}  // namespace

QString inlineHtml(QStringView s) {
  QString out;
  qsizetype i = 0;
  while (i < s.size()) {
    const QChar c = s[i];
    if (c == u'\\' && i + 1 < s.size() && s[i + 1] == u'\n') {  // hard line break
      out += QStringLiteral("<br>");
      ++i;
    } else if (c == u' ' || c == u'\t') {  // spaces before a newline: none, or a hard break (2+)
      qsizetype run = 0;
      while (i + run < s.size() && (s[i + run] == u' ' || s[i + run] == u'\t')) ++run;
      if (i + run < s.size() && s[i + run] == u'\n') {
        if (run >= 2) out += QStringLiteral("<br>");
      } else {
        out += s.mid(i, run);
      }
      i += run;
    } else if (c == u'\\' && i + 1 < s.size() && isAsciiPunct(s[i + 1])) {
      out += htmlEscape(s.mid(i + 1, 1));
      i += 2;
    } else if (c == u'`') {
      qsizetype run = 0;
      while (i + run < s.size() && s[i + run] == u'`') ++run;
      const QString fence(run, u'`');
      qsizetype close = s.indexOf(fence, i + run);
      while (close >= 0 && close + run < s.size() && s[close + run] == u'`') {  // exactly `run` backticks
        qsizetype more = close;
        while (more < s.size() && s[more] == u'`') ++more;
        close = s.indexOf(fence, more);
      }
      if (close < 0) {
        out += fence;
        i += run;
        continue;
      }
      QString code = s.mid(i + run, close - i - run).toString().replace(u'\n', u' ');
      if (code.size() > 2 && code.startsWith(u' ') && code.endsWith(u' ') && !code.trimmed().isEmpty())
        code = code.mid(1, code.size() - 2);  // one space either side is padding
      out += QStringLiteral("<code>") + htmlEscape(code) + QStringLiteral("</code>");
      i = close + run;
    } else if ((c == u'*' || c == u'_' || c == u'~') && emphasis(s, i, out)) {
      continue;
    } else if ((c == u'[' || (c == u'!' && i + 1 < s.size() && s[i + 1] == u'[')) && link(s, i, out)) {
      continue;
    } else if (c == u'<') {
      static const QRegularExpression autolink(QStringLiteral("<((?:https?://|mailto:)[^\\s<>]+)>"),
                                               QRegularExpression::CaseInsensitiveOption);
      const QRegularExpressionMatch m = autolink.match(s, i, QRegularExpression::NormalMatch, kAnchored);
      if (m.hasMatch()) {
        const QString url = htmlEscape(m.capturedView(1));
        out += QStringLiteral("<a href=\"%1\">%1</a>").arg(url);
        i = m.capturedEnd(0);
      } else {
        out += QStringLiteral("&lt;");
        ++i;
      }
    } else if ((c == u'h' || c == u'H') && (i == 0 || !s[i - 1].isLetterOrNumber())) {
      static const QRegularExpression bare(QStringLiteral("https?://[^\\s<>\"]+"),
                                           QRegularExpression::CaseInsensitiveOption);
      const QRegularExpressionMatch m = bare.match(s, i, QRegularExpression::NormalMatch, kAnchored);
      if (!m.hasMatch()) {
        out += c;
        ++i;
        continue;
      }
      QStringView url = m.capturedView(0);
      while (!url.isEmpty() && QStringLiteral(".,:;!?)'*_").contains(url.back())) url.chop(1);
      out += QStringLiteral("<a href=\"%1\">%1</a>").arg(htmlEscape(url));
      i += url.size();
    } else {
      out += htmlEscape(s.mid(i, 1));
      ++i;
    }
  }
  return out;
}


QString htmlEscape(QStringView text) {
  QString out;
  out.reserve(text.size() + text.size() / 8);
  for (QChar c : text) {
    switch (c.unicode()) {
      case '&': out += QStringLiteral("&amp;"); break;
      case '<': out += QStringLiteral("&lt;"); break;
      case '>': out += QStringLiteral("&gt;"); break;
      case '"': out += QStringLiteral("&quot;"); break;
      case '\'': out += QStringLiteral("&#39;"); break;
      default: out += c;
    }
  }
  return out;
}

}  // namespace cosmos::ui::exporting
