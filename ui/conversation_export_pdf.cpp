// PDF export: the HTML export's content (QtRichText flavor) laid out by QTextDocument on A4 pages
// of a QPdfWriter, with page numbers (N / M). Qt embeds the fonts it uses (subsets); CJK
// text falls back to Noto Sans CJK through fontconfig (packaging/setup.sh installs fonts-noto-cjk).
//
// Workarounds for Qt's PDF engine (Qt 6.4):
//  - It cannot draw color emoji (Noto Color Emoji is a bitmap font: the glyphs come out blank), so
//    each emoji is drawn into an image with the color font and placed in the text as an image.
//  - Its ToUnicode maps (what copy, search and pdftotext read) give each glyph the lowest code
//    point that maps to it, and CJK fonts map Kangxi radicals (U+2F00..) to the same glyphs as
//    the ideographs (U+4E00..): 日 would be extracted as the radical ⽇, 長 as ⻑. fixToUnicodeMaps()
//    maps such entries to the ideograph, in place (same length: the file's offsets stay valid).
//    Latin ligatures (fi) would be extracted as U+FB01: the text is laid out without them
//    (QFont::PreferNoShaping; scripts that need shaping keep it).
// Emoji are images, so they are visible but not part of the extractable text.
#include <QAbstractTextDocumentLayout>
#include <QBuffer>
#include <QCoreApplication>
#include <QFontDatabase>
#include <QFontMetricsF>
#include <QGuiApplication>
#include <QHash>
#include <QImage>
#include <QPainter>
#include <QPdfWriter>
#include <QRegularExpression>
#include <QTextBoundaryFinder>
#include <QTextDocument>
#include <QUrl>

#include "conversation_export_p.h"

namespace cosmos::ui::exporting {
namespace {

QString tr(const char* text) { return QCoreApplication::translate("cosmos::ui::ConversationExport", text); }

constexpr qreal kBodyPoints = 10.5;
constexpr qreal kFooterPoints = 8;
const QString kEmojiFamily = QStringLiteral("Noto Color Emoji");

// What QTextDocument's CSS subset supports; print colors (black text on white).
constexpr const char* kStyle = R"css(
h1 { font-size: 17pt; margin-bottom: 2pt; }
h2.role { font-size: 11pt; color: #4a4a4a; margin-top: 16pt; margin-bottom: 4pt; }
h3 { font-size: 14pt; } h4 { font-size: 12.5pt; } h5 { font-size: 11pt; } h6 { font-size: 10.5pt; }
p.info, p.note, p.meta, p.footer { color: #666666; font-size: 9pt; }
p.summary { color: #666666; font-size: 9pt; font-style: italic; margin-bottom: 0; }
blockquote { color: #555555; }
pre { background-color: #f3f4f6; font-family: "DejaVu Sans Mono", "Noto Sans Mono", monospace; font-size: 9pt;
      white-space: pre-wrap; }
code { background-color: #f3f4f6; font-family: "DejaVu Sans Mono", "Noto Sans Mono", monospace; }
th { background-color: #eeeeee; }
a { color: #0b57d0; }
)css";

// Code points that are emoji by default (Emoji_Presentation) in the BMP, as ranges.
constexpr char32_t kBmpEmoji[][2] = {
    {0x231A, 0x231B}, {0x23E9, 0x23EC}, {0x23F0, 0x23F0}, {0x23F3, 0x23F3}, {0x25FD, 0x25FE}, {0x2614, 0x2615},
    {0x2648, 0x2653}, {0x267F, 0x267F}, {0x2693, 0x2693}, {0x26A1, 0x26A1}, {0x26AA, 0x26AB}, {0x26BD, 0x26BE},
    {0x26C4, 0x26C5}, {0x26CE, 0x26CE}, {0x26D4, 0x26D4}, {0x26EA, 0x26EA}, {0x26F2, 0x26F3}, {0x26F5, 0x26F5},
    {0x26FA, 0x26FA}, {0x26FD, 0x26FD}, {0x2705, 0x2705}, {0x270A, 0x270B}, {0x2728, 0x2728}, {0x274C, 0x274C},
    {0x274E, 0x274E}, {0x2753, 0x2755}, {0x2757, 0x2757}, {0x2795, 0x2797}, {0x27B0, 0x27B0}, {0x27BF, 0x27BF},
    {0x2B1B, 0x2B1C}, {0x2B50, 0x2B50}, {0x2B55, 0x2B55}};

bool isEmojiCluster(QStringView cluster) {
  const QList<uint> cps = cluster.toUcs4();
  if (cps.isEmpty()) return false;
  const char32_t first = cps.front();
  if (first >= 0x1F000 && first <= 0x1FAFF) return true;  // pictographs, emoticons, flags, ...
  if (cps.contains(0xFE0F) || cps.contains(0x20E3)) return true;  // emoji presentation, keycaps
  for (const auto& r : kBmpEmoji)
    if (first >= r[0] && first <= r[1]) return true;
  return false;
}

// CJK Radicals Supplement -> the ideograph with the same glyph (Unicode 14's
// EquivalentUnifiedIdeograph.txt, the entries whose ideograph is in the BMP).
constexpr char16_t kRadicalIdeograph[][2] = {
    {0x2E81, 0x5382}, {0x2E82, 0x4E5B}, {0x2E83, 0x4E5A}, {0x2E84, 0x4E59}, {0x2E85, 0x4EBB}, {0x2E86, 0x5182},
    {0x2E88, 0x5200}, {0x2E89, 0x5202}, {0x2E8A, 0x535C}, {0x2E8B, 0x353E}, {0x2E8C, 0x5C0F}, {0x2E8D, 0x5C0F},
    {0x2E8E, 0x5140}, {0x2E8F, 0x5C23}, {0x2E90, 0x5C22}, {0x2E92, 0x5DF3}, {0x2E93, 0x5E7A}, {0x2E94, 0x5F51},
    {0x2E95, 0x5F50}, {0x2E96, 0x5FC4}, {0x2E97, 0x5FC3}, {0x2E98, 0x624C}, {0x2E99, 0x6535}, {0x2E9B, 0x65E1},
    {0x2E9C, 0x65E5}, {0x2E9D, 0x6708}, {0x2E9E, 0x6B7A}, {0x2E9F, 0x6BCD}, {0x2EA0, 0x6C11}, {0x2EA1, 0x6C35},
    {0x2EA2, 0x6C3A}, {0x2EA3, 0x706C}, {0x2EA4, 0x722B}, {0x2EA5, 0x722B}, {0x2EA6, 0x4E2C}, {0x2EA7, 0x725B},
    {0x2EA8, 0x72AD}, {0x2EA9, 0x738B}, {0x2EAB, 0x76EE}, {0x2EAC, 0x793A}, {0x2EAD, 0x793B}, {0x2EAF, 0x7CF9},
    {0x2EB0, 0x7E9F}, {0x2EB1, 0x7F53}, {0x2EB2, 0x7F52}, {0x2EB3, 0x34C1}, {0x2EB4, 0x5197}, {0x2EB6, 0x7F8A},
    {0x2EB9, 0x8002}, {0x2EBA, 0x8080}, {0x2EBB, 0x807F}, {0x2EBC, 0x8089}, {0x2EBE, 0x8279}, {0x2EBF, 0x8279},
    {0x2EC0, 0x8279}, {0x2EC1, 0x864E}, {0x2EC2, 0x8864}, {0x2EC3, 0x8980}, {0x2EC4, 0x897F}, {0x2EC5, 0x89C1},
    {0x2EC6, 0x89D2}, {0x2EC8, 0x8BA0}, {0x2EC9, 0x8D1D}, {0x2ECB, 0x8F66}, {0x2ECC, 0x8FB6}, {0x2ECD, 0x8FB6},
    {0x2ECE, 0x8FB6}, {0x2ECF, 0x9091}, {0x2ED0, 0x9485}, {0x2ED1, 0x9577}, {0x2ED2, 0x9578}, {0x2ED3, 0x957F},
    {0x2ED4, 0x95E8}, {0x2ED6, 0x961D}, {0x2ED7, 0x96E8}, {0x2ED8, 0x9752}, {0x2ED9, 0x97E6}, {0x2EDA, 0x9875},
    {0x2EDB, 0x98CE}, {0x2EDC, 0x98DE}, {0x2EDD, 0x98DF}, {0x2EDF, 0x98E0}, {0x2EE0, 0x9963}, {0x2EE2, 0x9A6C},
    {0x2EE3, 0x9AA8}, {0x2EE4, 0x9B3C}, {0x2EE5, 0x9C7C}, {0x2EE6, 0x9E1F}, {0x2EE7, 0x5364}, {0x2EE8, 0x9EA6},
    {0x2EE9, 0x9EC4}, {0x2EEA, 0x9EFE}, {0x2EEB, 0x6589}, {0x2EEC, 0x9F50}, {0x2EED, 0x6B6F}, {0x2EEE, 0x9F7F},
    {0x2EEF, 0x7ADC}, {0x2EF0, 0x9F99}, {0x2EF1, 0x9F9C}, {0x2EF2, 0x4E80}, {0x2EF3, 0x9F9F},
};

// The ideograph a radical-like code point stands for in a ToUnicode map; 0 when there is none.
char16_t ideographFor(char16_t code) {
  for (const auto& r : kRadicalIdeograph)
    if (r[0] == code) return r[1];
  // Kangxi radicals, Hangzhou numerals and Kanbun: their compatibility decomposition.
  if ((code >= 0x2F00 && code <= 0x2FDF) || (code >= 0x3038 && code <= 0x303A) || (code >= 0x3190 && code <= 0x319F)) {
    const QString n = QString(QChar(code)).normalized(QString::NormalizationForm_KC);
    if (n.size() == 1 && n[0].unicode() >= 0x3400) return n[0].unicode();
  }
  return 0;
}

// A QTextDocument that serves the emoji images and loads nothing else (no files, no network).
class PdfDocument : public QTextDocument {
 public:
  // Replaces the emoji in the text of `html` (outside tags) with images of `sizePx` (CSS pixels).
  QString withEmojiImages(const QString& html, int sizePx) {
    if (!QFontDatabase::families().contains(kEmojiFamily)) return html;  // fonts-noto-color-emoji missing
    QString out;
    qsizetype pos = 0;
    while (pos < html.size()) {
      if (html[pos] == u'<') {  // one of the renderer's tags (text has its "<" escaped)
        const qsizetype end = html.indexOf(u'>', pos);
        out += QStringView(html).mid(pos, end < 0 ? html.size() - pos : end + 1 - pos);
        pos = end < 0 ? html.size() : end + 1;
        continue;
      }
      qsizetype end = html.indexOf(u'<', pos);
      if (end < 0) end = html.size();
      const QString text = html.mid(pos, end - pos);
      QTextBoundaryFinder graphemes(QTextBoundaryFinder::Grapheme, text);
      qsizetype from = 0;
      for (qsizetype to = graphemes.toNextBoundary(); to != -1; to = graphemes.toNextBoundary()) {
        const QStringView cluster = QStringView(text).mid(from, to - from);
        const QString name = isEmojiCluster(cluster) ? emojiImage(cluster.toString()) : QString();
        static const QString img =
            QStringLiteral("<img src=\"%1\" width=\"%2\" height=\"%2\" style=\"vertical-align: middle\">");
        out += name.isEmpty() ? cluster.toString() : img.arg(name).arg(sizePx);
        from = to;
      }
      pos = end;
    }
    return out;
  }

 protected:
  QVariant loadResource(int type, const QUrl& name) override {
    if (type == QTextDocument::ImageResource) {
      if (const auto it = images_.constFind(name.toString()); it != images_.constEnd()) return it.value();
    }
    return {};
  }

 private:
  // The image's resource name ("emoji:N"); empty when the color font lacks the character.
  QString emojiImage(const QString& cluster) {
    if (const auto it = names_.constFind(cluster); it != names_.constEnd()) return it.value();
    QFont font(kEmojiFamily);
    font.setPixelSize(100);
    QString name;
    if (QFontMetricsF(font).inFontUcs4(cluster.toUcs4().front())) {
      QImage image(128, 128, QImage::Format_ARGB32_Premultiplied);
      image.fill(Qt::transparent);
      QPainter p(&image);
      p.setFont(font);
      p.drawText(image.rect(), Qt::AlignCenter, cluster);
      p.end();
      name = QStringLiteral("emoji:%1").arg(images_.size());
      images_.insert(name, image);
    }
    names_.insert(cluster, name);
    return name;
  }

  QHash<QString, QString> names_;   // emoji -> resource name
  QHash<QString, QImage> images_;   // resource name -> image
};

// See the file comment: ToUnicode entries that name a CJK radical become the ideograph.
void fixToUnicodeMaps(QByteArray& pdf) {
  static const QByteArray begin = "/CIDInit /ProcSet findresource begin";
  static const QRegularExpression hex(QStringLiteral("<([0-9A-Fa-f]{4})>"));
  for (qsizetype pos = pdf.indexOf(begin); pos >= 0; pos = pdf.indexOf(begin, pos)) {
    const qsizetype end = pdf.indexOf("endcmap", pos);
    if (end < 0) return;
    qsizetype lineStart = pos;
    while (lineStart < end) {
      qsizetype lineEnd = pdf.indexOf('\n', lineStart);
      if (lineEnd < 0 || lineEnd > end) lineEnd = end;
      const QString line = QString::fromLatin1(pdf.mid(lineStart, lineEnd - lineStart));
      // "<src> <src> <dst>" (one glyph) or "<first> <last> [<dst> <dst> ...]"; a linear range
      // "<first> <last> <dst>" (consecutive code points) is left alone.
      QList<QRegularExpressionMatch> codes;
      for (auto it = hex.globalMatch(line); it.hasNext();) codes << it.next();
      const bool array = line.contains(u'[');
      const bool single =
          codes.size() == 3 && codes[0].captured(1).compare(codes[1].captured(1), Qt::CaseInsensitive) == 0;
      if (array || single) {
        for (qsizetype k = 2; k < codes.size(); ++k) {
          const char16_t ideograph = ideographFor(static_cast<char16_t>(codes[k].captured(1).toUInt(nullptr, 16)));
          if (ideograph == 0) continue;
          const QByteArray digits = QByteArray::number(ideograph, 16).toUpper().rightJustified(4, '0');
          pdf.replace(lineStart + codes[k].capturedStart(1), 4, digits);
        }
      }
      lineStart = lineEnd + 1;
    }
    pos = end;
  }
}

}  // namespace

QByteArray renderPdf(const ExportDocument& d, QString* error) {
  if (!qobject_cast<QGuiApplication*>(QCoreApplication::instance())) {
    *error = tr("Could not export a PDF: it needs a QGuiApplication (fonts and text layout)");
    return {};
  }
  QByteArray bytes;
  {
    QBuffer buffer(&bytes);
    buffer.open(QIODevice::WriteOnly);
    QPdfWriter writer(&buffer);
    writer.setPageLayout(QPageLayout(QPageSize(QPageSize::A4), QPageLayout::Portrait, QMarginsF(18, 16, 18, 12),
                                     QPageLayout::Millimeter));
    writer.setResolution(300);
    writer.setTitle(documentTitle(d));
    writer.setCreator(d.app);

    PdfDocument doc;
    doc.documentLayout()->setPaintDevice(&writer);
    QFont font;
    font.setFamilies({QStringLiteral("Noto Sans"), QStringLiteral("DejaVu Sans")});
    font.setPointSizeF(kBodyPoints);
    font.setStyleStrategy(QFont::PreferNoShaping);
    doc.setDefaultFont(font);
    doc.setDefaultStyleSheet(QString::fromLatin1(kStyle));
    const QString body = conversationsHtml(d, HtmlFlavor::QtRichText) + QStringLiteral("<p class=\"footer\">") +
                         htmlEscape(exportFooter(d)) + QStringLiteral("</p>");
    const int emojiPx = qRound(kBodyPoints * 96 / 72 * 1.25);  // the glyph fills ~80% of its image
    doc.setHtml(QStringLiteral("<html><body>") + doc.withEmojiImages(body, emojiPx) + QStringLiteral("</body></html>"));

    const QRectF page = writer.pageLayout().paintRectPixels(writer.resolution());
    QFont small = font;
    small.setPointSizeF(kFooterPoints);
    const qreal footerHeight = QFontMetricsF(small, &writer).height() * 2;
    const QSizeF pageBody(page.width(), page.height() - footerHeight);
    doc.setPageSize(pageBody);
    const int pages = doc.pageCount();
    QPainter painter;
    if (!painter.begin(&writer)) {
      *error = tr("Could not export a PDF: the PDF writer could not start");
      return {};
    }
    for (int p = 0; p < pages; ++p) {
      if (p > 0) writer.newPage();
      painter.save();
      painter.translate(0, -p * pageBody.height());
      QAbstractTextDocumentLayout::PaintContext context;
      context.clip = QRectF(0, p * pageBody.height(), pageBody.width(), pageBody.height());
      context.palette.setColor(QPalette::Text, Qt::black);
      doc.documentLayout()->draw(&painter, context);
      painter.restore();
      painter.setFont(small);
      painter.setPen(QColor(0x66, 0x66, 0x66));
      const QRectF footer(0, page.height() - footerHeight, page.width(), footerHeight);
      painter.drawText(footer, Qt::AlignRight | Qt::AlignBottom, QStringLiteral("%1 / %2").arg(p + 1).arg(pages));
    }
    if (!painter.end()) {
      *error = tr("Could not export a PDF: writing it failed");
      return {};
    }
  }
  fixToUnicodeMaps(bytes);
  return bytes;
}

}  // namespace cosmos::ui::exporting
