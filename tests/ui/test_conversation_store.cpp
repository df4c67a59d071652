// ConversationStore: the schema, default titles, the message tree, transactions, soft delete, the
// data folder, and cosmos-cli's listing. Migrations, corrupt-file recovery and newer-schema refusal
// are in test_conversation_store_migration.cpp; full-text search in test_conversation_store_search.cpp.
#include <QDir>
#include <QElapsedTimer>
#include <QJsonDocument>
#include <QProcess>
#include <QSignalSpy>
#include <QtTest>

#include "conversation_db_util.h"
#include "conversation_store.h"
#include "conversation_store_fixture.h"

using cosmos::ui::ConversationStore;
using cosmos::ui::StoredMessage;

namespace {

QStringList contents(const QList<StoredMessage>& messages) {
  QStringList out;
  for (const StoredMessage& m : messages) out << m.content;
  return out;
}

}  // namespace

class TestConversationStore : public QObject, protected ConversationStoreFolder {
  Q_OBJECT

 private slots:
  void init() { makeFolder(); }  // a fresh folder per test (and per data row)

  void defaultPathHonorsXdgDataHome() {
    QTemporaryDir home;
    const QByteArray previous = qgetenv("XDG_DATA_HOME");
    qputenv("XDG_DATA_HOME", home.path().toUtf8());
    QCoreApplication::setOrganizationName(QString());
    QCoreApplication::setApplicationName(QStringLiteral("cosmos-chat"));
    const QString expected = home.path() + QStringLiteral("/cosmos-chat/conversations.sqlite");
    QCOMPARE(ConversationStore::defaultPath(), expected);
    ConversationStore store;
    QVERIFY2(store.open(), qPrintable(store.lastError()));  // creates the folder and the file
    QCOMPARE(store.filePath(), expected);
    QVERIFY(QFileInfo::exists(expected));
    store.close();
    qputenv("XDG_DATA_HOME", previous);
  }

  void defaultTitle_data() {
    QTest::addColumn<QString>("text");
    QTest::addColumn<QString>("expected");
    const QString ell(QChar(0x2026));
    QTest::newRow("short") << "Hello" << "Hello";
    QTest::newRow("whitespace") << "  Hello \t  world  " << "Hello world";
    QTest::newRow("multiline") << "First line\n\n  second line\r\nend" << "First line second line end";
    QTest::newRow("blank") << " \n\t " << "";
    QTest::newRow("ideographic space") << QStringLiteral("你好\u3000\u3000世界") << QStringLiteral("你好 世界");
    QTest::newRow("exactly 60") << QString(60, u'a') << QString(60, u'a');
    QTest::newRow("61, one word") << QString(61, u'a') << QString(59, u'a') + ell;
    QTest::newRow("long, ends at a word")
        << "Please summarize the following meeting notes and list every action item with its owner"
        << "Please summarize the following meeting notes and list every" + ell;
    QTest::newRow("long, cut inside a word")
        << "How do I configure the build so that warnings, errors and notes are all reported together?"
        << "How do I configure the build so that warnings, errors and" + ell;
    QTest::newRow("long, comma before the cut")
        << "Fruit I like: apples, oranges, bananas, cherries, plums, pears, grapefruit and more"
        << "Fruit I like: apples, oranges, bananas, cherries, plums" + ell;
    QTest::newRow("long word after a short one")
        << "Look: " + QString(80, u'x') << "Look: " + QString(53, u'x') + ell;
    const QString cjk = QStringLiteral("机器学习模型").repeated(12);  // 72 characters, no spaces
    QTest::newRow("CJK") << cjk << cjk.left(59) + ell;
    const QString thumbs = QStringLiteral("👍");  // 2 UTF-16 units, one character
    QTest::newRow("emoji") << thumbs.repeated(70) << thumbs.repeated(59) + ell;
    QTest::newRow("emoji, 60 fit") << thumbs.repeated(60) << thumbs.repeated(60);
    const QString family = QStringLiteral("👨\u200D👩\u200D👧");  // one grapheme cluster of 8 units
    QTest::newRow("ZWJ sequences") << family.repeated(61) << family.repeated(59) + ell;
  }
  void defaultTitle() {
    QFETCH(QString, text);
    QFETCH(QString, expected);
    const QString title = ConversationStore::defaultTitle(text);
    QCOMPARE(title, expected);
    QVERIFY(!title.isEmpty() || text.trimmed().isEmpty());
  }

  void titleFromFirstUserMessage() {
    ConversationStore store;
    QVERIFY(store.open(dbPath_));
    const qint64 c = store.createConversation();
    QVERIFY2(store.conversation(c).has_value(), qPrintable(store.lastError()));
    QCOMPARE(store.conversation(c)->title, QString());
    const qint64 sys = store.addMessage(c, 0, QStringLiteral("system"), QStringLiteral("You are helpful."));
    QCOMPARE(store.conversation(c)->title, QString());  // only a user message names it
    const qint64 u1 = store.addMessage(c, sys, QStringLiteral("user"), QStringLiteral("  What is\nWAL mode? "));
    QCOMPARE(store.conversation(c)->title, QStringLiteral("What is WAL mode?"));
    store.addMessage(c, u1, QStringLiteral("user"), QStringLiteral("Another question"));
    QCOMPARE(store.conversation(c)->title, QStringLiteral("What is WAL mode?"));

    const qint64 named = store.createConversation(QStringLiteral("My title"));
    store.addMessage(named, 0, QStringLiteral("user"), QStringLiteral("Hello"));
    QCOMPARE(store.conversation(named)->title, QStringLiteral("My title"));
  }

  void freshDatabaseHasSchema() {
    ConversationStore store;
    QVERIFY2(store.open(dbPath_), qPrintable(store.lastError()));
    QCOMPARE(store.schemaVersion(), ConversationStore::kSchemaVersion);
    QCOMPARE(store.migrationsApplied(), 2);
    QVERIFY(store.recoveryNotice().isEmpty());
    RawDb raw(dbPath_);
    QCOMPARE(raw.scalar(QStringLiteral("PRAGMA journal_mode")).toString(), QStringLiteral("wal"));
    QCOMPARE(raw.scalar(QStringLiteral("PRAGMA user_version")).toInt(), 2);
    // FTS5 with the trigram tokenizer is there (Qt's SQLite driver uses the system's libsqlite3).
    qInfo("SQLite %s", qPrintable(raw.scalar(QStringLiteral("SELECT sqlite_version()")).toString()));
    QCOMPARE(raw.scalar(QStringLiteral("SELECT COUNT(*) FROM pragma_compile_options WHERE compile_options = "
                                       "'ENABLE_FTS5'")).toInt(), 1);
    QVERIFY(raw.scalar(QStringLiteral("SELECT sql FROM sqlite_master WHERE name = 'messages_fts'"))
                .toString().contains(QStringLiteral("trigram")));
    QVERIFY(raw.exec(QStringLiteral("INSERT INTO messages_fts (messages_fts) VALUES ('integrity-check')")));
    QCOMPARE(raw.scalar(QStringLiteral("SELECT COUNT(*) FROM pragma_table_info('conversations') WHERE name IN "
                                       "('fingerprint','current_leaf')")).toInt(), 2);
    QCOMPARE(raw.scalar(QStringLiteral("SELECT COUNT(*) FROM pragma_table_info('messages') WHERE name IN "
                                       "('id','conversation_id','parent_id','role','content','reasoning',"
                                       "'meta_json','created_at')")).toInt(), 8);
    QCOMPARE(raw.scalar(QStringLiteral("SELECT COUNT(*) FROM pragma_table_info('conversations') WHERE name IN "
                                       "('id','title','created_at','updated_at','deleted')")).toInt(), 5);
  }

  void reopeningIsANoOp() {
    qint64 c = 0;
    {
      ConversationStore store;
      QVERIFY(store.open(dbPath_));
      c = store.createConversation(QStringLiteral("kept"));
      store.addMessage(c, 0, QStringLiteral("user"), QStringLiteral("hi"));
    }
    ConversationStore store;
    QVERIFY(store.open(dbPath_));
    QCOMPARE(store.migrationsApplied(), 0);
    QCOMPARE(store.schemaVersion(), ConversationStore::kSchemaVersion);
    QCOMPARE(store.conversations().size(), 1);
    QCOMPARE(store.conversation(c)->title, QStringLiteral("kept"));
    QCOMPARE(store.messages(c).size(), 1);
  }

  void readOnlyDoesNotCreate() {
    ConversationStore store;
    QVERIFY(!store.open(dbPath_, ConversationStore::OpenMode::ReadOnly));
    QVERIFY(!QFileInfo::exists(dbPath_));
    QVERIFY(store.lastError().contains(dbPath_));
  }

  void tree_data() {
    QTest::addColumn<QString>("node");
    QTest::addColumn<QStringList>("children");
    QTest::addColumn<QStringList>("path");
    // u1 ─ a1            (first answer)
    //    └ a2 ─ u2 ─ a3  (regenerated answer, then a follow-up)
    //         └ u2b ─ a4 (the follow-up edited)
    QTest::newRow("root") << "u1" << QStringList{"a1", "a2"} << QStringList{"u1"};
    QTest::newRow("regenerated answer") << "a2" << QStringList{"u2", "u2b"} << QStringList{"u1", "a2"};
    QTest::newRow("old answer is a leaf") << "a1" << QStringList{} << QStringList{"u1", "a1"};
    QTest::newRow("first branch") << "a3" << QStringList{} << QStringList{"u1", "a2", "u2", "a3"};
    QTest::newRow("edited branch") << "a4" << QStringList{} << QStringList{"u1", "a2", "u2b", "a4"};
  }
  void tree() {
    QFETCH(QString, node);
    QFETCH(QStringList, children);
    QFETCH(QStringList, path);
    ConversationStore store;
    QVERIFY(store.open(dbPath_));
    const qint64 c = store.createConversation();
    const qint64 other = store.createConversation();
    store.addMessage(other, 0, QStringLiteral("user"), QStringLiteral("elsewhere"));
    QHash<QString, qint64> id;
    const auto add = [&](const QString& name, const QString& parent) {
      id[name] = store.addMessage(c, id.value(parent), name.startsWith(u'u') ? QStringLiteral("user")
                                                                            : QStringLiteral("assistant"), name);
      QVERIFY2(id[name] > 0, qPrintable(store.lastError()));
    };
    add("u1", {});
    add("a1", "u1");
    add("a2", "u1");
    add("u2", "a2");
    add("a3", "u2");
    add("u2b", "a2");
    add("a4", "u2b");

    QCOMPARE(contents(store.children(id[node], c)), children);
    QCOMPARE(contents(store.path(id[node])), path);
    QCOMPARE(contents(store.children(0, c)), QStringList{"u1"});
    QCOMPARE(store.latestLeaf(c), id["a4"]);
    QCOMPARE(store.messages(c).size(), 7);
    QCOMPARE(store.conversation(c)->messageCount, 7);
    const StoredMessage a3 = *store.message(id["a3"]);
    QCOMPARE(a3.parentId, id["u2"]);
    QCOMPARE(a3.role, QStringLiteral("assistant"));
    QCOMPARE(store.message(id["u1"])->parentId, qint64(0));
    QVERIFY(store.path(999999).isEmpty());
    add("a5", "a1");  // continuing an old branch makes it the latest
    QCOMPARE(store.latestLeaf(c), id["a5"]);
  }

  void rejectsBadMessages() {
    ConversationStore store;
    QVERIFY(store.open(dbPath_));
    const qint64 a = store.createConversation();
    const qint64 b = store.createConversation();
    const qint64 inA = store.addMessage(a, 0, QStringLiteral("user"), QStringLiteral("in a"));
    QCOMPARE(store.addMessage(b, inA, QStringLiteral("assistant"), QStringLiteral("x")), qint64(-1));
    QVERIFY(store.lastError().contains(QStringLiteral("not in this conversation")));
    QCOMPARE(store.addMessage(a, inA, QStringLiteral("robot"), QStringLiteral("x")), qint64(-1));
    QCOMPARE(store.addMessage(424242, 0, QStringLiteral("user"), QStringLiteral("x")), qint64(-1));
    QCOMPARE(store.messages(a).size(), 1);
    QVERIFY(store.messages(b).isEmpty());
    QCOMPARE(store.conversation(b)->title, QString());
  }

  void updateMessageAndOrder() {
    ConversationStore store;
    QVERIFY(store.open(dbPath_));
    const qint64 a = store.createConversation(QStringLiteral("a"));
    const qint64 m = store.addMessage(a, 0, QStringLiteral("assistant"), QStringLiteral("partial"));
    const qint64 b = store.createConversation(QStringLiteral("b"));
    const qint64 c = store.createConversation(QStringLiteral("c"));
    const auto ids = [&] {
      QList<qint64> out;
      for (const auto& s : store.conversations()) out << s.id;
      return out;
    };
    QCOMPARE(ids(), (QList<qint64>{c, b, a}));
    QVERIFY(store.updateMessage(m, QStringLiteral("full answer"), QStringLiteral("thought"),
                                {{QStringLiteral("tokens"), 42}, {QStringLiteral("speed"), 12.5}}));
    QCOMPARE(ids(), (QList<qint64>{a, c, b}));  // an updated message bumps its conversation
    const StoredMessage saved = *store.message(m);
    QCOMPARE(saved.content, QStringLiteral("full answer"));
    QCOMPARE(saved.reasoning, QStringLiteral("thought"));
    QCOMPARE(saved.meta.value(QStringLiteral("tokens")).toInt(), 42);
    QCOMPARE(saved.meta.value(QStringLiteral("speed")).toDouble(), 12.5);
    QVERIFY(store.renameConversation(b, QStringLiteral("  renamed\nb ")));
    QCOMPARE(ids(), (QList<qint64>{a, c, b}));  // a rename does not reorder
    QCOMPARE(store.conversation(b)->title, QStringLiteral("renamed b"));
    store.addMessage(b, 0, QStringLiteral("user"), QStringLiteral("x"));
    QCOMPARE(ids(), (QList<qint64>{b, a, c}));
    QVERIFY(!store.updateMessage(999999, {}, {}, {}));
    QVERIFY(!store.renameConversation(999999, QStringLiteral("x")));
  }

  void streamingUpdatesAreCheap() {
    ConversationStore store;
    QVERIFY(store.open(dbPath_));
    const qint64 c = store.createConversation();
    const qint64 m = store.addMessage(c, 0, QStringLiteral("assistant"), {});
    QString text;
    QElapsedTimer timer;
    timer.start();
    for (int i = 0; i < 500; ++i) {
      text += QStringLiteral("token%1 ").arg(i);
      QVERIFY(store.updateMessage(m, text, {}, {{QStringLiteral("generated"), i}}));
    }
    QVERIFY2(timer.elapsed() < 5000, qPrintable(QString::number(timer.elapsed())));
    QCOMPARE(store.message(m)->content, text);
  }

  void softDeleteRestorePurge() {
    ConversationStore store;
    QVERIFY(store.open(dbPath_));
    const qint64 keep = store.createConversation(QStringLiteral("keep"));
    const qint64 gone = store.createConversation(QStringLiteral("gone"));
    const qint64 root = store.addMessage(gone, 0, QStringLiteral("user"), QStringLiteral("q"));
    store.addMessage(gone, root, QStringLiteral("assistant"), QStringLiteral("a"));
    QVERIFY(store.deleteConversation(gone));
    QCOMPARE(store.conversations().size(), 1);
    QCOMPARE(store.conversations().first().id, keep);
    QVERIFY(store.isDeleted(gone));
    QVERIFY(store.restoreConversation(gone));
    QCOMPARE(store.conversations().size(), 2);
    QCOMPARE(store.messages(gone).size(), 2);  // nothing lost on the way
    QVERIFY(store.deleteConversation(gone));
    QCOMPARE(store.purgeDeleted(), 1);
    QVERIFY(!store.conversation(gone).has_value());
    QVERIFY(!store.restoreConversation(gone));
    RawDb raw(dbPath_);
    QCOMPARE(raw.scalar(QStringLiteral("SELECT COUNT(*) FROM messages WHERE conversation_id = %1").arg(gone)).toInt(),
             0);  // cascaded
    QCOMPARE(store.purgeDeleted(), 0);
  }

  void failedWriteRollsBack_data() {
    QTest::addColumn<bool>("update");
    QTest::newRow("addMessage") << false;
    QTest::newRow("updateMessage") << true;
  }
  void failedWriteRollsBack() {
    QFETCH(bool, update);
    ConversationStore store;
    QVERIFY(store.open(dbPath_));
    const qint64 c = store.createConversation();
    const qint64 m = store.addMessage(c, 0, QStringLiteral("assistant"), QStringLiteral("before"));
    const QString titleBefore = store.conversation(c)->title;
    // The second statement of the write (touching the conversation) fails; the first must not stay.
    RawDb raw(dbPath_);
    QVERIFY(raw.exec(QStringLiteral("CREATE TRIGGER fail_touch BEFORE UPDATE ON conversations "
                                    "BEGIN SELECT RAISE(ABORT, 'injected failure'); END")));
    QSignalSpy changed(&store, &ConversationStore::conversationsChanged);
    if (update) {
      QVERIFY(!store.updateMessage(m, QStringLiteral("after"), {}, {}));
    } else {
      QCOMPARE(store.addMessage(c, m, QStringLiteral("user"), QStringLiteral("new question")), qint64(-1));
    }
    QVERIFY2(store.lastError().contains(QStringLiteral("injected failure")), qPrintable(store.lastError()));
    QVERIFY(store.lastError().contains(dbPath_));
    QCOMPARE(changed.count(), 0);
    QCOMPARE(contents(store.messages(c)), QStringList{"before"});
    QCOMPARE(store.conversation(c)->title, titleBefore);
    QVERIFY(raw.exec(QStringLiteral("DROP TRIGGER fail_touch")));
    QVERIFY(store.addMessage(c, m, QStringLiteral("user"), QStringLiteral("new question")) > 0);
    QCOMPARE(changed.count(), 1);
  }

  void summaryJson() {
    ConversationStore store;
    QVERIFY(store.open(dbPath_));
    const qint64 a = store.createConversation();
    store.addMessage(a, 0, QStringLiteral("user"), QStringLiteral("Hello there"));
    const qint64 b = store.createConversation(QStringLiteral("Empty"));
    const QJsonArray json = store.summaryJson();
    QCOMPARE(json.size(), 2);
    const QJsonObject first = json.at(0).toObject();
    QCOMPARE(first.value(QStringLiteral("id")).toInteger(), b);
    QCOMPARE(first.value(QStringLiteral("title")).toString(), QStringLiteral("Empty"));
    QCOMPARE(first.value(QStringLiteral("message_count")).toInt(), 0);
    const QJsonObject second = json.at(1).toObject();
    QCOMPARE(second.value(QStringLiteral("title")).toString(), QStringLiteral("Hello there"));
    QCOMPARE(second.value(QStringLiteral("message_count")).toInt(), 1);
    const QDateTime updated = QDateTime::fromString(second.value(QStringLiteral("updated")).toString(), Qt::ISODateWithMs);
    QCOMPARE(updated, store.conversation(a)->updatedAt);
    QVERIFY(second.value(QStringLiteral("updated")).toString().endsWith(u'Z'));
  }

  void cliListsConversations() {
    const QString cli = qEnvironmentVariable("COSMOS_CLI");
    if (cli.isEmpty()) QSKIP("set COSMOS_CLI to the cosmos-cli binary to run this check");
    QJsonArray expected;
    {
      ConversationStore store;
      QVERIFY(store.open(dbPath_));
      const qint64 c = store.createConversation();
      store.addMessage(c, 0, QStringLiteral("user"), QStringLiteral("机器人 👍 question"));
      store.createConversation(QStringLiteral("Second"));
      expected = store.summaryJson();
    }
    const QString log = dir_.filePath(QStringLiteral("cli.log"));
    QProcess p;
    p.start(cli, {QStringLiteral("--log-file"), log, QStringLiteral("conversations"), QStringLiteral("--db"), dbPath_,
                  QStringLiteral("--json")});
    QVERIFY(p.waitForFinished(30000));
    QCOMPARE(p.exitCode(), 0);
    QCOMPARE(QJsonDocument::fromJson(p.readAllStandardOutput()).array(), expected);

    p.start(cli, {QStringLiteral("--log-file"), log, QStringLiteral("conversations"), QStringLiteral("--db"), dbPath_});
    QVERIFY(p.waitForFinished(30000));
    QCOMPARE(p.exitCode(), 0);
    const QString table = QString::fromUtf8(p.readAllStandardOutput());
    QVERIFY2(table.contains(QStringLiteral("机器人 👍 question")) && table.contains(QStringLiteral("Second")),
             qPrintable(table));

    const QString missing = dir_.filePath(QStringLiteral("missing.sqlite"));
    p.start(cli, {QStringLiteral("--log-file"), log, QStringLiteral("conversations"), QStringLiteral("--db"), missing});
    QVERIFY(p.waitForFinished(30000));
    QCOMPARE(p.exitCode(), 1);
    QVERIFY(QString::fromUtf8(p.readAllStandardError()).contains(missing));
    QVERIFY(!QFileInfo::exists(missing));
  }
};

QTEST_GUILESS_MAIN(TestConversationStore)
#include "test_conversation_store.moc"
