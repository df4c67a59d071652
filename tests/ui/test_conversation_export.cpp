// Conversation export (ui/conversation_export.h): golden Markdown, HTML and text of a conversation
// with CJK, emoji, code, a table, reasoning, HTML-like text and a regenerated reply; the JSON
// checked field by field (every node, meta kept); the Markdown-to-HTML renderer and its escaping;
// the PDF through pdftotext / pdffonts / pdfimages / pdfinfo (poppler-utils; skipped without);
// atomic writes (missing folder, a file as folder, read-only folder, a full disk simulated with
// RLIMIT_FSIZE, an existing file kept on failure); and `cosmos-cli export`.
//
// Goldens: tests/data/export/; COSMOS_UPDATE_GOLDEN=1 rewrites them (then review the diff).
// Times are fixed: the store's rows get set timestamps and SOURCE_DATE_EPOCH fixes the export time.
// COSMOS_KEEP_EXPORTS=DIR keeps the PDFs there (to look at them).
#include <QDir>
#include <QJsonArray>
#include <QJsonDocument>
#include <QJsonObject>
#include <QProcess>
#include <QRandomGenerator>
#include <QRegularExpression>
#include <QStandardPaths>
#include <QTemporaryDir>
#include <QtTest>

#include <csignal>
#include <memory>
#include <sys/resource.h>
#include <unistd.h>

#include "conversation_db_util.h"
#include "conversation_export.h"
#include "conversation_export_p.h"
#include "conversation_store.h"

using cosmos::ui::ConversationStore;
using cosmos::ui::ExportFormat;
using cosmos::ui::ExportResult;
using cosmos::ui::StoredMessage;
namespace exporting = cosmos::ui::exporting;

namespace {

constexpr qint64 kBaseMs = 1714557600000;     // 2024-05-01T10:00:00Z
constexpr qint64 kExportSecs = 1714564800;    // 2024-05-01T12:00:00Z (SOURCE_DATE_EPOCH)
const QString kGoldenDir = QStringLiteral(COSMOS_TEST_DATA_DIR "/export");

QString user1() {
  return QStringLiteral("Translate 東京の日本語 and explain <script>alert(1)</script> 🚀👍🏽\n"
                        "Also: &amp; and </details> must stay text.");
}
QString reasoning() {
  return QStringLiteral("The user wants a translation. Closing tags must not end the block: </details> "
                        "<details> <summary>x</summary> <!-- a comment\n\n"
                        "```\n</details> inside a code block stays as written\n```");
}
QString reply() {
  return QStringLiteral(
      "**東京** means *Tokyo* 🗼. Here is code:\n\n"
      "```python\ndef greet(name):\n    return f\"<b>{name}</b> & more\"\n```\n\n"
      "| Word | Meaning | 絵文字 |\n| :--- | ---: | :---: |\n| 東京 | Tokyo | 🗼 |\n| 日本 | Japan | 🇯🇵 |\n\n"
      "Raw HTML stays text: <script>alert(1)</script> and &amp; and </details>.\n\n"
      "- one\n- two with `code`\n");
}
QVariantMap replyMeta() {
  return {{QStringLiteral("model"), QStringLiteral("Cosmos-Reason1-7B")},
          {QStringLiteral("precision"), QStringLiteral("bf16")},
          {QStringLiteral("sampling"), QVariantMap{{QStringLiteral("temperature"), 0.6},
                                                   {QStringLiteral("top_p"), 0.95},
                                                   {QStringLiteral("top_k"), 0},
                                                   {QStringLiteral("seed"), 42}}},
          {QStringLiteral("stats"), QVariantMap{{QStringLiteral("prompt_tokens"), 41},
                                                {QStringLiteral("generated_tokens"), 128},
                                                {QStringLiteral("ttft_s"), 0.25},
                                                {QStringLiteral("prefill_tok_per_s"), 812.5},
                                                {QStringLiteral("decode_tok_per_s"), 45.25},
                                                {QStringLiteral("stop_reason"), QStringLiteral("eos")}}},
          {QStringLiteral("thoughtSeconds"), 3.2},
          {QStringLiteral("raw"), QStringLiteral("<think>...</think>")}};
}

QByteArray readFile(const QString& path) {
  QFile f(path);
  return f.open(QIODevice::ReadOnly) ? f.readAll() : QByteArray();
}
bool writeFile(const QString& path, const QByteArray& data) {
  QFile f(path);
  return f.open(QIODevice::WriteOnly) && f.write(data) == data.size();
}

// Runs a poppler tool; empty when it is not installed (the caller skips).
void keep(const QString& pdf) {
  const QString dir = qEnvironmentVariable("COSMOS_KEEP_EXPORTS");
  if (dir.isEmpty()) return;
  const QString target = QDir(dir).filePath(QFileInfo(pdf).fileName());
  QFile::remove(target);
  QFile::copy(pdf, target);
}

QString tool(const QString& name, const QStringList& args, int* exitCode = nullptr) {
  const QString exe = QStandardPaths::findExecutable(name);
  if (exe.isEmpty()) return {};
  QProcess p;
  p.start(exe, args);
  p.waitForFinished(60000);
  if (exitCode) *exitCode = p.exitCode();
  return QString::fromUtf8(p.readAllStandardOutput());
}

}  // namespace

class TestConversationExport : public QObject {
  Q_OBJECT

 private:
  std::unique_ptr<QTemporaryDir> tmp_;
  QString dbPath_;
  std::unique_ptr<ConversationStore> store_;  // read-only, on the fixture
  qint64 chat_ = 0, second_ = 0, deleted_ = 0;
  qint64 u1_ = 0, oldReply_ = 0, reply_ = 0, u2_ = 0, stopped_ = 0;
  QString app_;  // "Cosmos Chat <version>", replaced by "Cosmos Chat VERSION" in the goldens

  QByteArray render(ExportFormat f, const QList<qint64>& ids) {
    QString error;
    const QByteArray out = cosmos::ui::renderExport(*store_, ids, f, &error);
    if (!error.isEmpty()) qWarning() << error;
    return out;
  }
  QByteArray normalized(QByteArray data) const {
    return data.replace(app_.toUtf8(), QByteArrayLiteral("Cosmos Chat VERSION"));
  }
  QStringList folderEntries(const QString& dir) const {
    return QDir(dir).entryList(QDir::AllEntries | QDir::Hidden | QDir::System | QDir::NoDotAndDotDot);
  }

 private slots:
  void initTestCase() {
    qputenv("SOURCE_DATE_EPOCH", QByteArray::number(kExportSecs));
    tmp_ = std::make_unique<QTemporaryDir>();
    QVERIFY(tmp_->isValid());
    dbPath_ = tmp_->filePath(QStringLiteral("conversations.sqlite"));
    {
      ConversationStore s;
      QVERIFY2(s.open(dbPath_), qPrintable(s.lastError()));
      chat_ = s.createConversation();
      u1_ = s.addMessage(chat_, 0, QStringLiteral("user"), user1());
      oldReply_ = s.addMessage(chat_, u1_, QStringLiteral("assistant"), QStringLiteral("An older answer, regenerated."), {},
                               {{QStringLiteral("stats"), QVariantMap{{QStringLiteral("generated_tokens"), 7}}}});
      reply_ = s.addMessage(chat_, u1_, QStringLiteral("assistant"), reply(), reasoning(), replyMeta());
      u2_ = s.addMessage(chat_, reply_, QStringLiteral("user"), QStringLiteral("Now one that stops mid-code."));
      stopped_ = s.addMessage(chat_, u2_, QStringLiteral("assistant"),
                              QStringLiteral("Sure:\n\n```cpp\nint main() {\n  return 0;"), {},
                              {{QStringLiteral("stopped"), true},
                               {QStringLiteral("stats"), QVariantMap{{QStringLiteral("generated_tokens"), 12},
                                                                     {QStringLiteral("decode_tok_per_s"), 40.0},
                                                                     {QStringLiteral("stop_reason"), QStringLiteral("cancelled")}}}});
      second_ = s.createConversation(QStringLiteral("Second chat"));
      const qint64 hello = s.addMessage(second_, 0, QStringLiteral("user"), QStringLiteral("Hello"));
      s.addMessage(second_, hello, QStringLiteral("assistant"), QStringLiteral("Hi!"));
      deleted_ = s.createConversation(QStringLiteral("Deleted one"));
      s.addMessage(deleted_, 0, QStringLiteral("user"), QStringLiteral("gone"));
      QVERIFY(s.deleteConversation(deleted_));
      QVERIFY(u1_ > 0 && oldReply_ > 0 && reply_ > 0 && u2_ > 0 && stopped_ > 0 && hello > 0);
    }
    {
      RawDb raw(dbPath_);  // fixed times: a message a minute; the second conversation is newer
      QVERIFY(raw.exec(QStringLiteral("UPDATE messages SET created_at = %1 + id * 60000").arg(kBaseMs)));
      QVERIFY(raw.exec(QStringLiteral("UPDATE conversations SET "
                                      "created_at = (SELECT MIN(created_at) FROM messages m WHERE m.conversation_id = conversations.id) - 30000,"
                                      " updated_at = (SELECT MAX(created_at) FROM messages m WHERE m.conversation_id = conversations.id)")));
      QVERIFY(raw.exec(QStringLiteral("UPDATE conversations SET updated_at = %1 WHERE id = %2").arg(kBaseMs + 86400000).arg(second_)));
    }
    store_ = std::make_unique<ConversationStore>();
    QVERIFY2(store_->open(dbPath_, ConversationStore::OpenMode::ReadOnly), qPrintable(store_->lastError()));
    QCOMPARE(store_->latestLeaf(chat_), stopped_);
    app_ = QJsonDocument::fromJson(render(ExportFormat::Json, {chat_})).object().value(QStringLiteral("app")).toString();
    QVERIFY(app_.startsWith(QStringLiteral("Cosmos Chat ")));
  }

  void formatNames_data() {
    QTest::addColumn<QString>("name");
    QTest::addColumn<int>("format");  // -1: unknown
    QTest::addColumn<QString>("extension");
    QTest::newRow("md") << "md" << int(ExportFormat::Markdown) << "md";
    QTest::newRow("markdown") << "Markdown" << int(ExportFormat::Markdown) << "md";
    QTest::newRow("json") << "json" << int(ExportFormat::Json) << "json";
    QTest::newRow("html") << "HTML" << int(ExportFormat::Html) << "html";
    QTest::newRow("pdf") << "pdf" << int(ExportFormat::Pdf) << "pdf";
    QTest::newRow("txt") << "txt" << int(ExportFormat::Text) << "txt";
    QTest::newRow("text") << "text" << int(ExportFormat::Text) << "txt";
    QTest::newRow("unknown") << "docx" << -1 << "";
    QTest::newRow("empty") << "" << -1 << "";
  }
  void formatNames() {
    QFETCH(QString, name);
    QFETCH(int, format);
    QFETCH(QString, extension);
    const auto f = cosmos::ui::exportFormatFromString(name);
    QCOMPARE(f.has_value(), format >= 0);
    if (f) {
      QCOMPARE(int(*f), format);
      QCOMPARE(cosmos::ui::exportFormatExtension(*f), extension);
    }
  }

  void golden_data() {
    QTest::addColumn<int>("format");
    QTest::addColumn<QString>("file");
    QTest::newRow("markdown") << int(ExportFormat::Markdown) << "conversation.md";
    QTest::newRow("html") << int(ExportFormat::Html) << "conversation.html";
    QTest::newRow("text") << int(ExportFormat::Text) << "conversation.txt";
  }
  void golden() {
    QFETCH(int, format);
    QFETCH(QString, file);
    const QByteArray actual = normalized(render(ExportFormat(format), {chat_}));
    QVERIFY(!actual.isEmpty());
    const QString path = kGoldenDir + u'/' + file;
    if (qEnvironmentVariableIsSet("COSMOS_UPDATE_GOLDEN")) {
      QVERIFY(QDir().mkpath(kGoldenDir));
      QVERIFY(writeFile(path, actual));
    }
    const QByteArray expected = readFile(path);
    QVERIFY2(!expected.isEmpty(), qPrintable(path + QStringLiteral(" is missing (COSMOS_UPDATE_GOLDEN=1 writes it)")));
    if (actual != expected) {
      const QList<QByteArray> a = actual.split('\n'), e = expected.split('\n');
      for (qsizetype i = 0; i < std::max(a.size(), e.size()); ++i) {
        const QByteArray al = i < a.size() ? a[i] : "<end>", el = i < e.size() ? e[i] : "<end>";
        if (al != el) QFAIL(qPrintable(QStringLiteral("%1 line %2:\n actual:   %3\n expected: %4")
                                           .arg(file).arg(i + 1).arg(QString::fromUtf8(al), QString::fromUtf8(el))));
      }
    }
  }

  // The Markdown keeps its structure: one reasoning block, balanced fences, dangerous tags escaped.
  void markdownStructure() {
    const QString md = QString::fromUtf8(render(ExportFormat::Markdown, {chat_}));
    const QStringList lines = md.split(u'\n');
    QCOMPARE(lines.count(QStringLiteral("<details>")), 1);
    QCOMPARE(lines.count(QStringLiteral("</details>")), 1);
    QCOMPARE(md.count(QStringLiteral("</details>")), 2);  // ours, and the one inside the code block
    QVERIFY(md.contains(QStringLiteral("&lt;/details> &lt;details> &lt;summary>x&lt;/summary> &lt;!-- a comment")));
    QVERIFY(md.contains(QStringLiteral("Raw HTML stays text: &lt;script>alert(1)&lt;/script> and &amp; and &lt;/details>.")));
    QVERIFY(!md.contains(QRegularExpression(QStringLiteral("(?<!\\\\)<script"))));  // "\\<script" in the title
    int fences = 0;
    for (const QString& l : lines)
      if (l.startsWith(QStringLiteral("```"))) ++fences;
    QCOMPARE(fences % 2, 0);  // the stopped reply's open fence was closed
    QVERIFY(md.contains(QStringLiteral("  return 0;\n```\n")));
    QVERIFY(md.contains(QStringLiteral("## Assistant (version 2 of 2)")));
    QVERIFY(md.contains(QStringLiteral("1 other version")));
    QVERIFY(!md.contains(QStringLiteral("An older answer")));  // not the branch shown
  }

  void htmlEscapesEverything() {
    const QString html = QString::fromUtf8(render(ExportFormat::Html, {chat_}));
    QVERIFY(!html.contains(QStringLiteral("<script")));
    QVERIFY(html.contains(QStringLiteral("&lt;script&gt;alert(1)&lt;/script&gt;")));
    QVERIFY(html.contains(QStringLiteral("&amp;amp;")));
    QCOMPARE(html.count(QStringLiteral("<details")), 1);
    QCOMPARE(html.count(QStringLiteral("</details>")), 1);
    QVERIFY(html.contains(QStringLiteral("&lt;/details&gt; inside a code block")));
    QVERIFY(!html.contains(QRegularExpression(QStringLiteral("(src|href)=\"(?!https?:|mailto:)"))));  // nothing loaded
    QVERIFY(html.contains(QStringLiteral("@media (prefers-color-scheme: dark)")));
  }

  // The renderer alone: output for common Markdown, and hostile text that must stay text.
  void markdownToHtml_data() {
    QTest::addColumn<QString>("markdown");
    QTest::addColumn<QString>("html");
    QTest::newRow("paragraph") << "Hello *world* and **bold** ~~gone~~" << "<p>Hello <em>world</em> and <strong>bold</strong> <del>gone</del></p>\n";
    QTest::newRow("snake_case") << "call my_func_name now" << "<p>call my_func_name now</p>\n";
    QTest::newRow("soft and hard breaks") << "a\nb  \nc\\\nd" << "<p>a\nb<br>\nc<br>\nd</p>\n";
    QTest::newRow("code fence") << "```js\nif (a < b && c) {}\n```" << "<pre><code class=\"language-js\">if (a &lt; b &amp;&amp; c) {}</code></pre>\n";
    QTest::newRow("unclosed fence") << "```\nx <y>" << "<pre><code>x &lt;y&gt;</code></pre>\n";
    QTest::newRow("inline code") << "use `<b>` here" << "<p>use <code>&lt;b&gt;</code> here</p>\n";
    QTest::newRow("heading") << "# Title\ntext" << "<h3>Title</h3>\n<p>text</p>\n";
    QTest::newRow("list") << "- a\n- b\n  - c\n1. x" << "<ul>\n<li>a</li>\n<li>b\n<ul>\n<li>c</li>\n</ul></li>\n</ul>\n<ol>\n<li>x</li>\n</ol>\n";
    QTest::newRow("ordered start") << "3. three\n4. four" << "<ol start=\"3\">\n<li>three</li>\n<li>four</li>\n</ol>\n";
    QTest::newRow("table") << "| a | b |\n|:-|-:|\n| 1 | `x|y` |"
                           << "<table>\n<thead>\n<tr><th>a</th><th style=\"text-align:right\">b</th></tr>\n</thead>\n"
                              "<tbody>\n<tr><td>1</td><td style=\"text-align:right\"><code>x|y</code></td></tr>\n</tbody>\n</table>\n";
    QTest::newRow("quote") << "> quoted\n> more" << "<blockquote>\n<p>quoted\nmore</p>\n</blockquote>\n";
    QTest::newRow("rule") << "a\n\n---\n\nb" << "<p>a</p>\n<hr>\n<p>b</p>\n";
    QTest::newRow("link") << "[site](https://example.com/a?b=1&c=2)" << "<p><a href=\"https://example.com/a?b=1&amp;c=2\">site</a></p>\n";
    QTest::newRow("bare url") << "see https://example.com/x." << "<p>see <a href=\"https://example.com/x\">https://example.com/x</a>.</p>\n";
    QTest::newRow("javascript link") << "[x](javascript:alert(1))" << "<p>[x](javascript:alert(1))</p>\n";
    QTest::newRow("image is a link") << "![cat](https://example.com/c.png)" << "<p><a href=\"https://example.com/c.png\">cat</a></p>\n";
    QTest::newRow("raw html") << "<script>alert(1)</script> <img src=x onerror=alert(1)>"
                              << "<p>&lt;script&gt;alert(1)&lt;/script&gt; &lt;img src=x onerror=alert(1)&gt;</p>\n";
    QTest::newRow("entity") << "&amp; &lt;" << "<p>&amp;amp; &amp;lt;</p>\n";
    QTest::newRow("quote in url") << "[a](https://x.org/\"onmouseover=\"alert(1))"
                                  << "<p><a href=\"https://x.org/&quot;onmouseover=&quot;alert(1\">a</a>)</p>\n";
    QTest::newRow("escape") << "\\*not em\\*" << "<p>*not em*</p>\n";
    QTest::newRow("CJK and emoji") << "東京 🚀 **日本**" << "<p>東京 🚀 <strong>日本</strong></p>\n";
  }
  void markdownToHtml() {
    QFETCH(QString, markdown);
    QFETCH(QString, html);
    const QString out = exporting::markdownToHtml(markdown, exporting::HtmlFlavor::Browser);
    QCOMPARE(out, html);
    // Only the renderer's own tags.
    static const QRegularExpression foreign(QStringLiteral(
        "<(?!/?(?:p|pre|code|em|strong|del|a|ul|ol|li|h[3-6]|table|thead|tbody|tr|th|td|blockquote|hr|br)[ >])"));
    QVERIFY2(!out.contains(foreign), qPrintable(out));
  }

  // Random Markdown-ish text: the renderer ends and emits only its own tags and safe links.
  void markdownToHtmlRandom() {
    static const QRegularExpression foreign(QStringLiteral(
        "<(?!/?(?:p|pre|code|em|strong|del|a|ul|ol|li|h[3-6]|table|thead|tbody|tr|th|td|blockquote|hr|br)[ >])"));
    static const QRegularExpression badHref(QStringLiteral("href=\"(?!https?://|mailto:)"));
    const QStringList pieces{"*", "**", "_", "~~", "`", "```", "~~~", "\n", "\n\n", " ", "  ", "|", "-", "1.", "#",
                             ">", "[", "]", "(", ")", "!", "<", "</details>", "<script>", "&amp;", "\\", "http://x.y",
                             "javascript:", "\"", "'", "東京", "🚀", "a", "b_c", "\t", ":--", "    "};
    QRandomGenerator rng(7);
    for (int round = 0; round < 3000; ++round) {
      QString text;
      const int n = static_cast<int>(rng.bounded(40));
      for (int k = 0; k < n; ++k) text += pieces[static_cast<int>(rng.bounded(static_cast<quint32>(pieces.size())))];
      const QString out = exporting::markdownToHtml(text, exporting::HtmlFlavor::Browser);
      QVERIFY2(!out.contains(foreign) && !out.contains(badHref), qPrintable(text + QStringLiteral(" -> ") + out));
    }
  }

  void jsonIsLossless() {
    const QJsonObject root = QJsonDocument::fromJson(render(ExportFormat::Json, {chat_})).object();
    QCOMPARE(root.value(QStringLiteral("format")).toString(), QStringLiteral("cosmos-chat-conversations"));
    QCOMPARE(root.value(QStringLiteral("version")).toInt(), 1);
    QCOMPARE(root.value(QStringLiteral("exported_at")).toString(), QStringLiteral("2024-05-01T12:00:00.000Z"));
    QCOMPARE(root.value(QStringLiteral("app")).toString(), app_);
    const QJsonArray conversations = root.value(QStringLiteral("conversations")).toArray();
    QCOMPARE(conversations.size(), 1);
    const QJsonObject c = conversations.at(0).toObject();
    const auto summary = store_->conversation(chat_);
    QCOMPARE(c.value(QStringLiteral("id")).toInteger(), chat_);
    QCOMPARE(c.value(QStringLiteral("title")).toString(), summary->title);
    QCOMPARE(c.value(QStringLiteral("created_at")).toString(), summary->createdAt.toString(Qt::ISODateWithMs));
    QCOMPARE(c.value(QStringLiteral("updated_at")).toString(), QStringLiteral("2024-05-01T10:05:00.000Z"));
    QCOMPARE(c.value(QStringLiteral("current_leaf")).toInteger(), stopped_);
    const QJsonArray messages = c.value(QStringLiteral("messages")).toArray();
    const QList<StoredMessage> stored = store_->messages(chat_);
    QCOMPARE(messages.size(), 5);  // every node, the regenerated reply's old version too
    QCOMPARE(stored.size(), 5);
    QSet<qint64> seen;
    for (qsizetype i = 0; i < messages.size(); ++i) {
      const QJsonObject m = messages.at(i).toObject();
      const StoredMessage& s = stored[i];
      QCOMPARE(m.keys(), (QStringList{"content", "created_at", "id", "meta", "parent_id", "reasoning", "role"}));
      QCOMPARE(m.value(QStringLiteral("id")).toInteger(), s.id);
      if (s.parentId == 0) QVERIFY(m.value(QStringLiteral("parent_id")).isNull());
      else QCOMPARE(m.value(QStringLiteral("parent_id")).toInteger(), s.parentId);
      if (s.parentId) QVERIFY(seen.contains(s.parentId));  // parents before children
      seen.insert(s.id);
      QCOMPARE(m.value(QStringLiteral("role")).toString(), s.role);
      QCOMPARE(m.value(QStringLiteral("content")).toString(), s.content);
      QCOMPARE(m.value(QStringLiteral("reasoning")).toString(), s.reasoning);
      QCOMPARE(m.value(QStringLiteral("created_at")).toString(),
               QDateTime::fromMSecsSinceEpoch(kBaseMs + s.id * 60000, Qt::UTC).toString(Qt::ISODateWithMs));
      QCOMPARE(m.value(QStringLiteral("meta")).toObject(), QJsonObject::fromVariantMap(s.meta));
    }
    const QJsonObject replyJson = messages.at(2).toObject();
    QCOMPARE(replyJson.value(QStringLiteral("content")).toString(), reply());
    QCOMPARE(replyJson.value(QStringLiteral("reasoning")).toString(), reasoning());
    QCOMPARE(replyJson.value(QStringLiteral("meta")).toObject(), QJsonObject::fromVariantMap(replyMeta()));
    const QJsonObject stats = replyJson.value(QStringLiteral("meta")).toObject().value(QStringLiteral("stats")).toObject();
    QCOMPARE(stats.value(QStringLiteral("decode_tok_per_s")).toDouble(), 45.25);
    QCOMPARE(stats.value(QStringLiteral("generated_tokens")).toInt(), 128);
    QCOMPARE(messages.at(1).toObject().value(QStringLiteral("content")).toString(), QStringLiteral("An older answer, regenerated."));
    QCOMPARE(messages.at(1).toObject().value(QStringLiteral("parent_id")).toInteger(), u1_);
  }

  void allConversations() {
    const QJsonObject root = QJsonDocument::fromJson(render(ExportFormat::Json, {})).object();
    const QJsonArray list = root.value(QStringLiteral("conversations")).toArray();
    QCOMPARE(list.size(), 2);  // not the deleted one; newest first
    QCOMPARE(list.at(0).toObject().value(QStringLiteral("id")).toInteger(), second_);
    QCOMPARE(list.at(1).toObject().value(QStringLiteral("id")).toInteger(), chat_);
    const QString md = QString::fromUtf8(render(ExportFormat::Markdown, {}));
    QCOMPARE(md.count(QRegularExpression(QStringLiteral("^# "), QRegularExpression::MultilineOption)), 2);
    QVERIFY(md.indexOf(QStringLiteral("# Second chat")) < md.indexOf(QStringLiteral("# Translate")));
    QVERIFY(md.contains(QStringLiteral("(2 conversations)")));
    // By id, a deleted conversation can still be exported.
    QCOMPARE(QJsonDocument::fromJson(render(ExportFormat::Json, {deleted_})).object()
                 .value(QStringLiteral("conversations")).toArray().size(), 1);
  }

  void unknownConversationFails() {
    QString error;
    QVERIFY(cosmos::ui::renderExport(*store_, {chat_, 9999}, ExportFormat::Markdown, &error).isEmpty());
    QVERIFY2(error.contains(QStringLiteral("9999")) && error.contains(QStringLiteral("does not exist")), qPrintable(error));
    ConversationStore closed;
    QVERIFY(cosmos::ui::renderExport(closed, {}, ExportFormat::Json, &error).isEmpty());
    QVERIFY2(error.contains(QStringLiteral("not open")), qPrintable(error));
  }

  void pdfTextFontsAndEmoji() {
    if (QStandardPaths::findExecutable(QStringLiteral("pdftotext")).isEmpty())
      QSKIP("pdftotext is not installed (poppler-utils; packaging/setup.sh installs it)");
    const QString path = tmp_->filePath(QStringLiteral("chat.pdf"));
    const ExportResult r = cosmos::ui::exportConversations(*store_, {chat_}, ExportFormat::Pdf, path);
    QVERIFY2(r.ok, qPrintable(r.error));
    QVERIFY(readFile(path).startsWith("%PDF-"));
    keep(path);
    const QString text = tool(QStringLiteral("pdftotext"), {QStringLiteral("-enc"), QStringLiteral("UTF-8"), path, QStringLiteral("-")});
    for (const char* expected : {"Translate", "User", "Assistant", "version 2 of 2", "1 other version", "東京の日本語",
                                 "Tokyo", "日本", "絵文字", "def greet(name):", "<script>alert(1)</script>",
                                 "</details> inside a code block", "Reasoning · thought for 3.2 s", "int main() {",
                                 "Cosmos-Reason1-7B · bf16 · 128 tokens · 45.3 tok/s · first token 0.25 s"})
      QVERIFY2(text.contains(QString::fromUtf8(expected)), qPrintable(QStringLiteral("missing \"%1\" in:\n%2").arg(QString::fromUtf8(expected), text)));
    QVERIFY2(!text.contains(QChar(0x2F47)), "日 extracted as the Kangxi radical ⽇");
    QVERIFY(text.contains(QRegularExpression(QStringLiteral("^1 ?/ ?1$"), QRegularExpression::MultilineOption)));  // page number
    const QString fonts = tool(QStringLiteral("pdffonts"), {path});
    const QStringList rows = fonts.split(u'\n', Qt::SkipEmptyParts).mid(2);
    QVERIFY2(!rows.isEmpty(), qPrintable(fonts));
    for (const QString& row : rows) QVERIFY2(row.contains(QStringLiteral(" yes ")), qPrintable(fonts));  // embedded
    QVERIFY2(fonts.contains(QStringLiteral("CJK")), qPrintable(fonts));
    const QString images = tool(QStringLiteral("pdfimages"), {QStringLiteral("-list"), path});
    QVERIFY2(images.split(u'\n', Qt::SkipEmptyParts).size() > 2, qPrintable(images));  // the emoji, as images
  }

  void pdfPaginatesAndWraps() {
    if (QStandardPaths::findExecutable(QStringLiteral("pdfinfo")).isEmpty()) QSKIP("poppler-utils is not installed");
    QTemporaryDir dir;
    ConversationStore s;
    QVERIFY(s.open(dir.filePath(QStringLiteral("long.sqlite"))));
    const qint64 c = s.createConversation(QStringLiteral("Long"));
    QStringList paragraphs;
    for (int i = 0; i < 120; ++i) paragraphs << QStringLiteral("Paragraph %1 about 長い文章 and more words to fill the line.").arg(i);
    const QString longLine = QStringList(QList<QString>(40, QStringLiteral("wrapword"))).join(u' ');
    const qint64 q = s.addMessage(c, 0, QStringLiteral("user"), QStringLiteral("```\n") + longLine + QStringLiteral("\n```"));
    s.addMessage(c, q, QStringLiteral("assistant"), paragraphs.join(QStringLiteral("\n\n")));
    const QString path = dir.filePath(QStringLiteral("long.pdf"));
    const ExportResult r = cosmos::ui::exportConversations(s, {c}, ExportFormat::Pdf, path);
    QVERIFY2(r.ok, qPrintable(r.error));
    keep(path);
    const QRegularExpressionMatch pages =
        QRegularExpression(QStringLiteral("Pages:\\s+(\\d+)")).match(tool(QStringLiteral("pdfinfo"), {path}));
    QVERIFY(pages.hasMatch());
    QVERIFY2(pages.captured(1).toInt() >= 3, qPrintable(pages.captured(0)));
    const QString text = tool(QStringLiteral("pdftotext"), {QStringLiteral("-enc"), QStringLiteral("UTF-8"), path, QStringLiteral("-")});
    QVERIFY(text.contains(QStringLiteral("Paragraph 119 about 長い文章")));
    QCOMPARE(text.count(QStringLiteral("wrapword")), 40);  // all of the long code line, wrapped
    for (const QString& line : text.split(u'\n')) QVERIFY2(line.size() < longLine.size(), qPrintable(line));
  }

  void writesAtomically() {
    const QString path = tmp_->filePath(QStringLiteral("out.json"));
    const ExportResult r = cosmos::ui::exportConversations(*store_, {}, ExportFormat::Json, path);
    QVERIFY2(r.ok, qPrintable(r.error));
    QCOMPARE(r.conversations, 2);
    QCOMPARE(readFile(path), render(ExportFormat::Json, {}));
  }

  void writeFailures_data() {
    QTest::addColumn<QString>("relative");  // under a fresh folder; "F" is a file there, "D" a folder
    QTest::addColumn<QString>("mentions");
    QTest::newRow("missing folder") << "missing/out.md" << "does not exist";
    QTest::newRow("folder is a file") << "F/out.md" << "is not a folder";
    QTest::newRow("target is a folder") << "D" << "is a folder";
    QTest::newRow("no name") << "" << "no file name";
  }
  void writeFailures() {
    QFETCH(QString, relative);
    QFETCH(QString, mentions);
    QTemporaryDir dir;
    QVERIFY(writeFile(dir.filePath(QStringLiteral("F")), "file"));
    QVERIFY(QDir(dir.path()).mkdir(QStringLiteral("D")));
    const QStringList before = folderEntries(dir.path());
    const ExportResult r = cosmos::ui::exportConversations(*store_, {chat_}, ExportFormat::Markdown,
                                                           relative.isEmpty() ? QString() : dir.filePath(relative));
    QVERIFY(!r.ok);
    QVERIFY2(r.error.contains(mentions), qPrintable(r.error));
    QCOMPARE(folderEntries(dir.path()), before);
    QCOMPARE(readFile(dir.filePath(QStringLiteral("F"))), QByteArray("file"));
  }

  void readOnlyFolder() {
    if (::geteuid() == 0) QSKIP("running as root: permissions do not stop root (fullDisk covers a failing write)");
    QTemporaryDir dir;
    const QString path = dir.filePath(QStringLiteral("out.md"));
    QVERIFY(writeFile(path, "old"));
    QVERIFY(QFile::setPermissions(dir.path(), QFile::ReadOwner | QFile::ExeOwner));
    const ExportResult r = cosmos::ui::exportConversations(*store_, {chat_}, ExportFormat::Markdown, path);
    QFile::setPermissions(dir.path(), QFile::ReadOwner | QFile::WriteOwner | QFile::ExeOwner);
    QVERIFY(!r.ok);
    QVERIFY2(r.error.contains(QDir::toNativeSeparators(path)), qPrintable(r.error));
    QCOMPARE(readFile(path), QByteArray("old"));
    QCOMPARE(folderEntries(dir.path()), QStringList{QStringLiteral("out.md")});
  }

  // A full disk: the file-size limit makes the write fail part-way (EFBIG); the old file stays.
  void fullDiskKeepsOldFile() {
    QTemporaryDir dir;
    ConversationStore big;
    QVERIFY(big.open(dir.filePath(QStringLiteral("big.sqlite"))));
    const qint64 c = big.createConversation(QStringLiteral("Big"));
    big.addMessage(c, 0, QStringLiteral("user"), QString(100000, u'x'));
    const QString path = dir.filePath(QStringLiteral("out.html"));
    QVERIFY(writeFile(path, "old"));
    const QStringList before = folderEntries(dir.path());
    rlimit saved{};
    QCOMPARE(::getrlimit(RLIMIT_FSIZE, &saved), 0);
    const auto previousHandler = std::signal(SIGXFSZ, SIG_IGN);  // write() then fails with EFBIG
    rlimit small = saved;
    small.rlim_cur = 32768;
    QCOMPARE(::setrlimit(RLIMIT_FSIZE, &small), 0);
    const ExportResult r = cosmos::ui::exportConversations(big, {c}, ExportFormat::Html, path);
    ::setrlimit(RLIMIT_FSIZE, &saved);
    std::signal(SIGXFSZ, previousHandler);
    QVERIFY(!r.ok);
    QVERIFY2(r.error.startsWith(QStringLiteral("Could not export to ")) && r.error.contains(QStringLiteral("out.html")),
             qPrintable(r.error));
    QCOMPARE(readFile(path), QByteArray("old"));
    QCOMPARE(folderEntries(dir.path()), before);  // no temporary file left
    const ExportResult ok = cosmos::ui::exportConversations(big, {c}, ExportFormat::Html, path);
    QVERIFY2(ok.ok, qPrintable(ok.error));
    QVERIFY(readFile(path).size() > 100000);
  }

  void existingFileReplacedOnlyOnSuccess() {
    QTemporaryDir dir;
    const QString path = dir.filePath(QStringLiteral("out.json"));
    QVERIFY(writeFile(path, "old"));
    ExportResult r = cosmos::ui::exportConversations(*store_, {9999}, ExportFormat::Json, path);
    QVERIFY(!r.ok);
    QVERIFY2(r.error.contains(QStringLiteral("does not exist")), qPrintable(r.error));
    QCOMPARE(readFile(path), QByteArray("old"));
    r = cosmos::ui::exportConversations(*store_, {chat_}, ExportFormat::Json, path);
    QVERIFY2(r.ok, qPrintable(r.error));
    QCOMPARE(r.conversations, 1);
    QCOMPARE(QJsonDocument::fromJson(readFile(path)).object().value(QStringLiteral("version")).toInt(), 1);
    QCOMPARE(folderEntries(dir.path()), QStringList{QStringLiteral("out.json")});
  }

  void cli_data() {
    QTest::addColumn<QStringList>("args");  // after "export --db DB"; OUT is replaced by the file
    QTest::addColumn<int>("exitCode");
    QTest::addColumn<QString>("check");  // md | json | pdf | error text expected on stderr
    QTest::newRow("md, one") << QStringList{"--conversation", "CHAT", "--format", "md", "--out", "OUT"} << 0 << "md";
    QTest::newRow("json, all") << QStringList{"--all", "--format", "json", "--out", "OUT"} << 0 << "json";
    QTest::newRow("pdf") << QStringList{"--conversation", "CHAT", "--format", "pdf", "--out", "OUT"} << 0 << "pdf";
    QTest::newRow("unknown id") << QStringList{"--conversation", "9999", "--format", "md", "--out", "OUT"} << 1
                                << "does not exist";
    QTest::newRow("missing folder") << QStringList{"--all", "--format", "md", "--out", "MISSING"} << 1
                                    << "does not exist";
    QTest::newRow("bad format") << QStringList{"--all", "--format", "docx", "--out", "OUT"} << 105 << "--format";
    QTest::newRow("neither --all nor --conversation") << QStringList{"--format", "md", "--out", "OUT"} << 106 << "--all";
  }
  void cli() {
#ifndef COSMOS_CLI_PATH
    QSKIP("cosmos-cli is not built");
#else
    QFETCH(QStringList, args);
    QFETCH(int, exitCode);
    QFETCH(QString, check);
    QTemporaryDir dir;
    const QString out = dir.filePath(QStringLiteral("export.") + (check.size() <= 4 ? check : QStringLiteral("md")));
    const QString missing = dir.filePath(QStringLiteral("missing/export.md"));
    for (QString& a : args) {
      a.replace(QStringLiteral("MISSING"), missing);
      a.replace(QStringLiteral("CHAT"), QString::number(chat_));
      a.replace(QStringLiteral("OUT"), out);
    }
    QProcess p;
    p.start(QStringLiteral(COSMOS_CLI_PATH), QStringList{QStringLiteral("--log-file"), dir.filePath(QStringLiteral("cli.log")),
                                                         QStringLiteral("export"), QStringLiteral("--db"), dbPath_} + args);
    QVERIFY(p.waitForFinished(60000));
    const QString err = QString::fromUtf8(p.readAllStandardError());
    QVERIFY2(p.exitCode() == exitCode, qPrintable(QStringLiteral("exit code %1: %2").arg(p.exitCode()).arg(err)));
    if (exitCode != 0) {
      QVERIFY2(err.contains(check), qPrintable(err));
      QVERIFY(!QFile::exists(out) && !QFile::exists(missing));
      return;
    }
    QVERIFY(QString::fromUtf8(p.readAllStandardOutput()).startsWith(QStringLiteral("exported ")));
    const QByteArray written = readFile(out);
    if (check == u"md") QCOMPARE(written, render(ExportFormat::Markdown, {chat_}));  // SOURCE_DATE_EPOCH is inherited
    if (check == u"json") QCOMPARE(written, render(ExportFormat::Json, {}));
    if (check == u"pdf") QVERIFY(written.startsWith("%PDF-") && written.size() > 10000);
#endif
  }
};

QTEST_MAIN(TestConversationExport)
#include "test_conversation_export.moc"
