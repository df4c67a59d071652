// A small Markdown-to-HTML renderer for the HTML and PDF exports: the blocks (inline text:
// conversation_export_inline.cpp).
//
// Why not QTextDocument::setMarkdown + toHtml: its HTML carries the platform's default font
// family and size and Qt-specific styles (-qt-paragraph-type, -qt-block-indent) on every
// paragraph, so the file would differ between machines and Qt versions and could not be styled
// for light and dark; and unless MarkdownNoHTML is set it passes raw HTML through. This renderer
// emits only the tags it knows, and every character of the message goes through htmlEscape():
// raw HTML in a message (<script>, </details>) and entities (&amp;) stay visible text.
//
// Supported: fenced code blocks (also unclosed), ATX headings (shifted down two levels, below the
// message headings), thematic breaks, block quotes, bullet and ordered lists (nested by
// indentation), GitHub tables (with alignment), paragraphs.
#include <QRegularExpression>

#include "conversation_export_p.h"

namespace cosmos::ui::exporting {
namespace {

bool isBlank(QStringView l) { return l.trimmed().isEmpty(); }

int indentOf(QStringView l) {
  int n = 0;
  for (QChar c : l) {
    if (c == u' ') ++n;
    else if (c == u'\t') n += 4 - n % 4;
    else break;
  }
  return n;
}

// Removes up to n columns of leading indentation.
QString dedent(QStringView l, int n) {
  qsizetype i = 0;
  int col = 0;
  while (i < l.size() && col < n && (l[i] == u' ' || l[i] == u'\t')) {
    col += l[i] == u'\t' ? 4 - col % 4 : 1;
    ++i;
  }
  return l.mid(i).toString();
}

const QRegularExpression& headingRe() {
  static const QRegularExpression re(QStringLiteral("^ {0,3}(#{1,6})(?:[ \\t]+(.*?))?(?:[ \\t]+#+)?[ \\t]*$"));
  return re;
}
bool isHeading(QStringView l) { return headingRe().match(l).hasMatch(); }

bool isRule(QStringView l) {
  static const QRegularExpression re(
      QStringLiteral("^ {0,3}(?:(?:\\*[ \\t]*){3,}|(?:-[ \\t]*){3,}|(?:_[ \\t]*){3,})$"));
  return re.match(l).hasMatch();
}

bool isQuote(QStringView l) { return indentOf(l) < 4 && l.trimmed().startsWith(u'>'); }

struct ListMarker {
  bool ordered = false;
  QChar kind;        // '-', '*', '+', or '.' / ')' for ordered lists
  int start = 1;     // an ordered list's first number
  int indent = 0;    // columns before the marker
  int content = 0;   // columns before the item's text
};
std::optional<ListMarker> listMarker(QStringView l) {
  static const QRegularExpression re(QStringLiteral("^( {0,3})(?:([-*+])|(\\d{1,9})([.)]))(?:([ \\t]+)|$)"));
  const QRegularExpressionMatch m = re.match(l);
  if (!m.hasMatch()) return std::nullopt;
  ListMarker k;
  k.ordered = m.capturedLength(3) > 0;
  k.kind = k.ordered ? m.capturedView(4).front() : m.capturedView(2).front();
  k.start = k.ordered ? m.capturedView(3).toInt() : 1;
  k.indent = static_cast<int>(m.capturedLength(1));
  // The text starts after the marker and 1-4 spaces (more: the first is the separator).
  const qsizetype spaces = m.capturedLength(5);
  const qsizetype markerEnd = spaces > 0 ? m.capturedStart(5) : m.capturedEnd(0);
  k.content = static_cast<int>(markerEnd + (spaces >= 1 && spaces <= 4 ? spaces : 1));
  return k;
}

// Table cells of a row: split at | outside code spans and not escaped; outer pipes dropped.
QStringList tableCells(QStringView row) {
  QStringView t = row.trimmed();
  if (t.startsWith(u'|')) t = t.mid(1);
  if (t.endsWith(u'|') && !t.endsWith(QStringLiteral("\\|"))) t.chop(1);
  QStringList cells;
  QString cell;
  bool code = false;
  for (qsizetype i = 0; i < t.size(); ++i) {
    if (t[i] == u'\\' && i + 1 < t.size() && t[i + 1] == u'|') {
      cell += u'|';
      ++i;
    } else if (t[i] == u'|' && !code) {
      cells << cell.trimmed();
      cell.clear();
    } else {
      if (t[i] == u'`') code = !code;
      cell += t[i];
    }
  }
  cells << cell.trimmed();
  return cells;
}

bool isDelimiterRow(QStringView l) {
  static const QRegularExpression re(
      QStringLiteral("^ {0,3}\\|?[ \\t]*:?-+:?[ \\t]*(?:\\|[ \\t]*:?-+:?[ \\t]*)*\\|?[ \\t]*$"));
  return l.contains(u'-') && l.contains(u'|') && re.match(l).hasMatch();
}

// A GitHub table: a header row and a delimiter row with as many cells.
bool isTableStart(const QStringList& lines, qsizetype i) {
  return i + 1 < lines.size() && lines[i].contains(u'|') && isDelimiterRow(lines[i + 1]) &&
         tableCells(lines[i]).size() == tableCells(lines[i + 1]).size();
}


class Renderer {
 public:
  explicit Renderer(HtmlFlavor flavor) : flavor_(flavor) {}

  QString blocks(const QStringList& lines) const;

 private:
  QString codeBlock(const QStringList& body, const QString& info) const;
  QString table(const QStringList& rows) const;
  qsizetype list(const QStringList& lines, qsizetype i, QString& out) const;
  bool startsBlock(const QStringList& lines, qsizetype i) const;

  HtmlFlavor flavor_;
};

QString Renderer::codeBlock(const QStringList& body, const QString& info) const {
  const QString language = info.section(u' ', 0, 0, QString::SectionSkipEmpty);
  const QString code = htmlEscape(body.join(u'\n'));
  if (flavor_ == HtmlFlavor::QtRichText) return QStringLiteral("<pre>") + code + QStringLiteral("</pre>\n");
  const QString cls =
      language.isEmpty() ? QString() : QStringLiteral(" class=\"language-%1\"").arg(htmlEscape(language));
  return QStringLiteral("<pre><code%1>%2</code></pre>\n").arg(cls, code);
}

QString Renderer::table(const QStringList& rows) const {
  const QStringList header = tableCells(rows[0]);
  QStringList align;
  for (const QString& d : tableCells(rows[1])) {
    const bool left = d.startsWith(u':'), right = d.endsWith(u':');
    align << (left && right ? QStringLiteral(" style=\"text-align:center\"")
                            : right ? QStringLiteral(" style=\"text-align:right\"") : QString());
  }
  QString out = flavor_ == HtmlFlavor::QtRichText
                    ? QStringLiteral("<table border=\"1\" cellspacing=\"0\" cellpadding=\"4\">\n")
                                                  : QStringLiteral("<table>\n");
  auto row = [&](const QStringList& cells, const char* tag) {
    out += QStringLiteral("<tr>");
    for (qsizetype c = 0; c < header.size(); ++c) {
      out += QStringLiteral("<%1%2>%3</%1>")
                 .arg(QLatin1String(tag), c < align.size() ? align[c] : QString(),
                      c < cells.size() ? inlineHtml(cells[c]) : QString());
    }
    out += QStringLiteral("</tr>\n");
  };
  out += QStringLiteral("<thead>\n");
  row(header, "th");
  out += QStringLiteral("</thead>\n<tbody>\n");
  for (qsizetype r = 2; r < rows.size(); ++r) row(tableCells(rows[r]), "td");
  return out + QStringLiteral("</tbody>\n</table>\n");
}

bool Renderer::startsBlock(const QStringList& lines, qsizetype i) const {
  const QString& l = lines[i];
  FenceTracker fence;
  return fence.feed(l) || isHeading(l) || isRule(l) || isQuote(l) || isTableStart(lines, i);
}

// A list starting at lines[i]; returns the index after it.
qsizetype Renderer::list(const QStringList& lines, qsizetype i, QString& out) const {
  const ListMarker first = *listMarker(lines[i]);
  QList<QStringList> items;
  bool loose = false;
  while (i < lines.size()) {
    const std::optional<ListMarker> m = listMarker(lines[i]);
    if (!m || m->ordered != first.ordered || m->kind != first.kind || m->indent >= first.content) break;
    QStringList item{lines[i].mid(m->content)};
    ++i;
    // The item's lines: indented to its content column, or paragraph continuation; blank lines
    // inside when an indented line follows them.
    while (i < lines.size()) {
      if (isBlank(lines[i])) {
        qsizetype next = i;
        while (next < lines.size() && isBlank(lines[next])) ++next;
        if (next < lines.size() && indentOf(lines[next]) >= m->content) {
          for (; i < next; ++i) item << QString();
          loose = true;
          continue;
        }
        break;
      }
      if (indentOf(lines[i]) >= m->content) {
        item << dedent(lines[i], m->content);
      } else if (!listMarker(lines[i]) && !startsBlock(lines, i) && !isBlank(item.back())) {
        item << lines[i];  // lazy continuation of the item's paragraph
      } else {
        break;
      }
      ++i;
    }
    items << item;
    qsizetype next = i;
    while (next < lines.size() && isBlank(lines[next])) ++next;
    if (next > i && next < lines.size()) {
      const std::optional<ListMarker> n = listMarker(lines[next]);
      if (!n || n->kind != first.kind || n->indent >= first.content) break;
      loose = true;
      i = next;
    }
  }
  const QString tag = first.ordered ? QStringLiteral("ol") : QStringLiteral("ul");
  out += first.ordered && first.start != 1 ? QStringLiteral("<ol start=\"%1\">\n").arg(first.start)
                                           : u'<' + tag + QStringLiteral(">\n");
  static const QRegularExpression singleParagraph(QStringLiteral("^<p>((?:(?!<p>).)*)</p>\\n"),
                                                  QRegularExpression::DotMatchesEverythingOption);
  for (const QStringList& item : items) {
    QString body = blocks(item);
    if (!loose) body.replace(singleParagraph, QStringLiteral("\\1\n"));  // tight: no <p> around the text
    if (body.endsWith(u'\n')) body.chop(1);
    out += QStringLiteral("<li>") + body + QStringLiteral("</li>\n");
  }
  out += QStringLiteral("</") + tag + QStringLiteral(">\n");
  return i;
}

QString Renderer::blocks(const QStringList& lines) const {
  QString out;
  qsizetype i = 0;
  while (i < lines.size()) {
    const QString& l = lines[i];
    if (isBlank(l)) {
      ++i;
      continue;
    }
    FenceTracker fence;
    if (fence.feed(l)) {
      const int indent = indentOf(l);
      const QString info = l.trimmed().remove(QRegularExpression(QStringLiteral("^[`~]+"))).trimmed();
      QStringList body;
      for (++i; i < lines.size(); ++i) {
        fence.feed(lines[i]);
        if (!fence.open()) {
          ++i;
          break;
        }
        body << dedent(lines[i], indent);
      }
      out += codeBlock(body, info);
    } else if (const QRegularExpressionMatch h = headingRe().match(l); h.hasMatch()) {
      const int level = std::min(6, static_cast<int>(h.capturedLength(1)) + 2);
      out += QStringLiteral("<h%1>%2</h%1>\n").arg(level).arg(inlineHtml(h.capturedView(2)));
      ++i;
    } else if (isRule(l)) {
      out += QStringLiteral("<hr>\n");
      ++i;
    } else if (isQuote(l)) {
      QStringList quoted;
      for (; i < lines.size() && !isBlank(lines[i]) && (isQuote(lines[i]) || !startsBlock(lines, i)); ++i) {
        QString q = lines[i].trimmed();
        if (q.startsWith(u'>')) q = q.mid(q.startsWith(QStringLiteral("> ")) ? 2 : 1);
        quoted << q;
      }
      out += QStringLiteral("<blockquote>\n") + blocks(quoted) + QStringLiteral("</blockquote>\n");
    } else if (isTableStart(lines, i)) {
      QStringList rows{l, lines[i + 1]};
      for (i += 2; i < lines.size() && !isBlank(lines[i]) && lines[i].contains(u'|'); ++i) rows << lines[i];
      out += table(rows);
    } else if (listMarker(l)) {
      i = list(lines, i, out);
    } else {
      QStringList para;
      for (; i < lines.size() && !isBlank(lines[i]) && (para.isEmpty() || !startsBlock(lines, i)); ++i) {
        if (!para.isEmpty() && listMarker(lines[i])) break;
        para << lines[i];
      }
      // Lines joined (leading indentation dropped); inlineHtml() turns hard breaks into <br>.
      QStringList joined;
      for (const QString& p : para) joined << dedent(p, 1000);
      const QString text = inlineHtml(joined.join(u'\n').trimmed());
      out += QStringLiteral("<p>") + text + QStringLiteral("</p>\n");
    }
  }
  return out;
}

}  // namespace

QString markdownToHtml(QStringView markdown, HtmlFlavor flavor) {
  QStringList lines;
  for (QStringView l : textLines(markdown)) lines << l.toString();
  return Renderer(flavor).blocks(lines);
}

}  // namespace cosmos::ui::exporting
