// ConversationTransfer: export of one or all conversations into a temporary folder in each format
// (the format from the file's extension, else the one chosen, its extension then appended; file:
// URLs as the file dialog gives them), importing the JSON export back into a fresh store (the
// signals the app uses to refresh and open the first conversation, duplicates on a second import),
// and the errors it shows in the banner. QTEST_MAIN: the PDF export needs a QGuiApplication.
#include <QFile>
#include <QSignalSpy>
#include <QTemporaryDir>
#include <QUrl>
#include <QtTest>

#include <memory>

#include "conversation_export.h"
#include "conversation_store.h"
#include "conversation_transfer.h"

using cosmos::ui::ConversationStore;
using cosmos::ui::ConversationTransfer;
using cosmos::ui::ExportFormat;

class TestConversationTransfer : public QObject {
  Q_OBJECT

 private:
  QByteArray read(const QString& path) const {
    QFile f(path);
    return f.open(QIODevice::ReadOnly) ? f.readAll() : QByteArray();
  }

 private slots:
  void init() {
    dir_ = std::make_unique<QTemporaryDir>();
    QVERIFY(dir_->isValid());
    store_ = std::make_unique<ConversationStore>();
    QVERIFY2(store_->open(dir_->filePath(QStringLiteral("a.sqlite"))), qPrintable(store_->lastError()));
    robot_ = store_->createConversation(QStringLiteral("Robots"));
    const qint64 q =
        store_->addMessage(robot_, 0, QStringLiteral("user"), QStringLiteral("Will the robot drop the cup?"));
    store_->addMessage(robot_, q, QStringLiteral("assistant"), QStringLiteral("No, it holds it."),
                       QStringLiteral("Friction."), {{QStringLiteral("model"), QStringLiteral("Cosmos-Reason1-7B")}});
    store_->addMessage(robot_, q, QStringLiteral("assistant"), QStringLiteral("Probably not."));  // a second version
    weather_ = store_->createConversation(QStringLiteral("Weather"));
    store_->addMessage(weather_, 0, QStringLiteral("user"), QStringLiteral("Is it raining?"));
    transfer_ = std::make_unique<ConversationTransfer>(store_.get());
  }
  void cleanup() {
    transfer_.reset();
    store_.reset();
    dir_.reset();
  }

  void exportWritesTheFormat_data() {
    QTest::addColumn<QString>("file");
    QTest::addColumn<bool>("asUrl");
    QTest::addColumn<QString>("format");
    QTest::addColumn<QString>("written");
    QTest::addColumn<QByteArray>("starts");
    QTest::newRow("markdown chosen: .md appended") << "notes" << false << "markdown" << "notes.md" << QByteArray();
    QTest::newRow("the extension decides") << "page.html" << false << "pdf" << "page.html" << QByteArray("<!");
    QTest::newRow("json") << "all.json" << false << "" << "all.json" << QByteArray("{");
    QTest::newRow("text by its short name") << "plain" << false << "txt" << "plain.txt" << QByteArray();
    QTest::newRow("pdf") << "report" << false << "pdf" << "report.pdf" << QByteArray("%PDF");
    QTest::newRow("a file URL from the dialog") << "via url.md" << true << "json" << "via url.md" << QByteArray();
    QTest::newRow("nothing chosen: markdown") << "bare" << false << "" << "bare.md" << QByteArray();
    QTest::newRow("an unknown extension keeps it")
        << "notes.v2" << false << "html" << "notes.v2.html" << QByteArray("<!");
  }
  void exportWritesTheFormat() {
    QFETCH(QString, file);
    QFETCH(bool, asUrl);
    QFETCH(QString, format);
    QFETCH(QString, written);
    QFETCH(QByteArray, starts);
    const QString path = dir_->filePath(file);
    QSignalSpy exported(transfer_.get(), &ConversationTransfer::exported);
    QVERIFY(transfer_->exportConversation(robot_, asUrl ? QUrl::fromLocalFile(path).toString() : path, format));
    QVERIFY2(!transfer_->statusIsError(), qPrintable(transfer_->statusText()));
    const QString target = dir_->filePath(written);
    QVERIFY(QFile::exists(target));
    QCOMPARE(exported.count(), 1);
    QCOMPARE(exported.first().at(0).toString(), target);
    QCOMPARE(exported.first().at(1).toInt(), 1);
    QVERIFY2(transfer_->statusText().contains(QStringLiteral("“Robots”")), qPrintable(transfer_->statusText()));
    QVERIFY(transfer_->statusText().contains(written));
    const QByteArray data = read(target);
    QVERIFY(data.startsWith(starts));
    if (!written.endsWith(QLatin1String(".pdf"))) QVERIFY(data.contains("Will the robot drop the cup?"));
    QCOMPARE(transfer_->folder(), QUrl::fromLocalFile(dir_->path()));  // the next dialog opens here
  }

  void importBringsTheExportBack() {
    const QString file = dir_->filePath(QStringLiteral("everything.json"));
    QVERIFY(transfer_->exportAll(file, QStringLiteral("markdown")));  // the extension wins: JSON
    QVERIFY2(transfer_->statusText().contains(QStringLiteral("2 conversations")), qPrintable(transfer_->statusText()));

    ConversationStore fresh;
    QVERIFY(fresh.open(dir_->filePath(QStringLiteral("b.sqlite"))));
    ConversationTransfer into(&fresh);
    QSignalSpy imported(&into, &ConversationTransfer::imported);
    QSignalSpy changed(&fresh, &ConversationStore::conversationsChanged);
    QVERIFY(into.importFile(QUrl::fromLocalFile(file).toString()));
    QVERIFY2(!into.statusIsError(), qPrintable(into.statusText()));
    QCOMPARE(into.statusText(), QStringLiteral("Imported 2 conversations from everything.json."));
    QVERIFY(changed.count() >= 1);  // the sidebar and the search results refresh
    QCOMPARE(imported.count(), 1);
    QCOMPARE(imported.first().at(1).toInt(), 2);
    const qint64 first = imported.first().at(0).toLongLong();
    QVERIFY(fresh.conversation(first).has_value());
    const auto list = fresh.conversations();
    QCOMPARE(list.size(), 2);
    QStringList titles;
    int messages = 0;
    for (const auto& c : list) {
      titles << c.title;
      messages += c.messageCount;
    }
    titles.sort();
    QCOMPARE(titles, (QStringList{"Robots", "Weather"}));
    QCOMPARE(messages, 4);  // both versions of the reply came back
    bool metaKept = false;
    for (const auto& c : list)
      for (const auto& m : fresh.messages(c.id))
        metaKept = metaKept || m.meta.value(QStringLiteral("model")).toString() == QStringLiteral("Cosmos-Reason1-7B");
    QVERIFY(metaKept);

    // Again: nothing new, nothing to open.
    QVERIFY(into.importFile(file));
    QCOMPARE(into.statusText(), QStringLiteral("Nothing new in everything.json (2 were already here)."));
    QVERIFY(!into.statusIsError());
    QCOMPARE(imported.count(), 1);
    QCOMPARE(fresh.conversations().size(), 2);
  }

  void errorsAreShown_data() {
    QTest::addColumn<QString>("action");
    QTest::addColumn<QString>("prefix");
    QTest::addColumn<QString>("mentions");
    QTest::newRow("import a missing file") << "import-missing" << "Import failed: " << "missing.json";
    QTest::newRow("import invalid JSON") << "import-invalid" << "Import failed: " << "";
    QTest::newRow("import from a web URL") << "import-url" << "Import failed: " << "https://example.com/c.json";
    QTest::newRow("export where no folder can be") << "export-missing-folder" << "Export failed: " << "";
    QTest::newRow("export with no conversation open") << "export-none" << "Export failed: " << "";
    QTest::newRow("export a deleted conversation") << "export-deleted" << "Export failed: " << "";
    QTest::newRow("export all of an empty store") << "export-empty" << "Export failed: " << "no conversations";
  }
  void errorsAreShown() {
    QFETCH(QString, action);
    QFETCH(QString, prefix);
    QFETCH(QString, mentions);
    QSignalSpy status(transfer_.get(), &ConversationTransfer::statusChanged);
    QSignalSpy imported(transfer_.get(), &ConversationTransfer::imported);
    QSignalSpy exported(transfer_.get(), &ConversationTransfer::exported);
    const int before = static_cast<int>(store_->conversations().size());
    bool ok = true;
    if (action == u"import-missing") {
      ok = transfer_->importFile(dir_->filePath(QStringLiteral("missing.json")));
    } else if (action == u"import-invalid") {
      QFile f(dir_->filePath(QStringLiteral("bad.json")));
      QVERIFY(f.open(QIODevice::WriteOnly));
      f.write("{\"format\": \"cosmos-chat-conversations\", \"conversations\": [");
      f.close();
      ok = transfer_->importFile(f.fileName());
    } else if (action == u"import-url") {
      ok = transfer_->importFile(QStringLiteral("https://example.com/c.json"));
    } else if (action == u"export-missing-folder") {
      ok = transfer_->exportConversation(robot_, dir_->filePath(QStringLiteral("a.sqlite/x.md")));  // under a file
    } else if (action == u"export-none") {
      ok = transfer_->exportConversation(0, dir_->filePath(QStringLiteral("x.md")));
    } else if (action == u"export-deleted") {
      QVERIFY(store_->deleteConversation(weather_));
      ok = transfer_->exportConversation(weather_, dir_->filePath(QStringLiteral("x.md")));
    } else if (action == u"export-empty") {
      ConversationStore empty;
      QVERIFY(empty.open(dir_->filePath(QStringLiteral("empty.sqlite"))));
      ConversationTransfer t(&empty);
      QVERIFY(!t.exportAll(dir_->filePath(QStringLiteral("x.md"))));
      QVERIFY(t.statusIsError());
      QVERIFY2(t.statusText().startsWith(prefix) && t.statusText().contains(mentions), qPrintable(t.statusText()));
      return;
    }
    QVERIFY(!ok);
    QVERIFY(transfer_->statusIsError());
    QCOMPARE(status.count(), 1);
    QVERIFY2(transfer_->statusText().startsWith(prefix), qPrintable(transfer_->statusText()));
    QVERIFY2(transfer_->statusText().size() > prefix.size() + 3, qPrintable(transfer_->statusText()));
    QVERIFY2(transfer_->statusText().contains(mentions), qPrintable(transfer_->statusText()));
    QCOMPARE(imported.count(), 0);
    QCOMPARE(exported.count(), 0);
    QVERIFY(!QFile::exists(dir_->filePath(QStringLiteral("x.md"))));
    if (action.startsWith(u"import")) QCOMPARE(static_cast<int>(store_->conversations().size()), before);
    transfer_->clearStatus();
    QVERIFY(transfer_->statusText().isEmpty());
    QVERIFY(!transfer_->statusIsError());
  }

  void formatsAndNames_data() {
    QTest::addColumn<QString>("path");
    QTest::addColumn<QString>("format");
    QTest::addColumn<QString>("target");
    QTest::addColumn<int>("resolved");
    QTest::newRow("md") << "/t/a.md" << "pdf" << "/t/a.md" << int(ExportFormat::Markdown);
    QTest::newRow("upper-case extension") << "/t/a.JSON" << "" << "/t/a.JSON" << int(ExportFormat::Json);
    QTest::newRow("htm") << "/t/a.htm" << "" << "/t/a.htm" << int(ExportFormat::Html);
    QTest::newRow("chosen by label") << "/t/a" << "Markdown" << "/t/a.md" << int(ExportFormat::Markdown);
    QTest::newRow("chosen: text") << "/t/a" << "text" << "/t/a.txt" << int(ExportFormat::Text);
    QTest::newRow("unknown choice: markdown") << "/t/a" << "docx" << "/t/a.md" << int(ExportFormat::Markdown);
  }
  void formatsAndNames() {
    QFETCH(QString, path);
    QFETCH(QString, format);
    QFETCH(QString, target);
    QFETCH(int, resolved);
    const auto [file, f] = ConversationTransfer::resolveTarget(path, format);
    QCOMPARE(file, target);
    QCOMPARE(int(f), resolved);

    const QVariantList formats = ConversationTransfer::formats();
    QCOMPARE(formats.size(), 5);
    QCOMPARE(formats.first().toMap().value(QStringLiteral("name")).toString(), QStringLiteral("markdown"));
    QCOMPARE(ConversationTransfer::exportNameFilters().first(), QStringLiteral("Markdown (*.md)"));
    QCOMPARE(ConversationTransfer::localPath(QStringLiteral("file:///tmp/a%20b.md")), QStringLiteral("/tmp/a b.md"));
    QCOMPARE(ConversationTransfer::localPath(QStringLiteral("/tmp/x.md")), QStringLiteral("/tmp/x.md"));
    // The save dialog's suggestion: the title made safe for a file name, or a dated name for all.
    QVERIFY(store_->renameConversation(robot_, QStringLiteral("a/b: c?")));
    QCOMPARE(transfer_->suggestedFile(robot_, QStringLiteral("pdf")).fileName(), QStringLiteral("a b c.pdf"));
    const QUrl all = transfer_->suggestedFile(0, QStringLiteral("json"));
    QVERIFY(all.isLocalFile());
    QVERIFY(all.fileName().startsWith(QStringLiteral("cosmos-chat-conversations-")));
    QVERIFY(all.fileName().endsWith(QStringLiteral(".json")));
  }

 private:
  std::unique_ptr<QTemporaryDir> dir_;
  std::unique_ptr<ConversationStore> store_;
  std::unique_ptr<ConversationTransfer> transfer_;
  qint64 robot_ = 0, weather_ = 0;
};

QTEST_MAIN(TestConversationTransfer)
#include "test_conversation_transfer.moc"
