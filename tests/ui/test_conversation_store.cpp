// ConversationStore: schema and migrations, default titles, the message tree, transactions,
// corrupt-file recovery, newer-schema refusal, soft delete, the data folder, and cosmos-cli's listing.
#include <QCryptographicHash>
#include <QDir>
#include <QElapsedTimer>
#include <QJsonDocument>
#include <QProcess>
#include <QRandomGenerator>
#include <QRegularExpression>
#include <QSignalSpy>
#include <QSqlError>
#include <QSqlQuery>
#include <QSqlRecord>
#include <QTemporaryDir>
#include <QtTest>

#include <algorithm>
#include <memory>

#include "conversation_db_util.h"
#include "conversation_store.h"

using cosmos::ui::ConversationStore;
using cosmos::ui::SearchHit;
using cosmos::ui::StoredMessage;

namespace {

QByteArray fileHash(const QString& path) {
  QFile f(path);
  if (!f.open(QIODevice::ReadOnly)) return {};
  return QCryptographicHash::hash(f.readAll(), QCryptographicHash::Sha256);
}

// Schema version 1 exactly as Cosmos Chat created it (conversation_store_schema.cpp, kSchemaV1,
// before version 2): the fixture for the migration tests. Never edit it to follow the schema.
const char* const kSchemaV1Fixture[] = {
    "CREATE TABLE conversations ("
    " id INTEGER PRIMARY KEY AUTOINCREMENT,"
    " title TEXT NOT NULL DEFAULT '',"
    " created_at INTEGER NOT NULL,"
    " updated_at INTEGER NOT NULL,"
    " deleted INTEGER NOT NULL DEFAULT 0 CHECK (deleted IN (0, 1)))",
    "CREATE INDEX conversations_updated ON conversations(updated_at)",
    "CREATE TABLE messages ("
    " id INTEGER PRIMARY KEY AUTOINCREMENT,"
    " conversation_id INTEGER NOT NULL REFERENCES conversations(id) ON DELETE CASCADE,"
    " parent_id INTEGER REFERENCES messages(id) ON DELETE CASCADE,"
    " role TEXT NOT NULL,"
    " content TEXT NOT NULL DEFAULT '',"
    " reasoning TEXT NOT NULL DEFAULT '',"
    " meta_json TEXT NOT NULL DEFAULT '{}',"
    " created_at INTEGER NOT NULL)",
    "CREATE INDEX messages_conversation ON messages(conversation_id, id)",
    "CREATE INDEX messages_parent ON messages(parent_id)",
    "PRAGMA user_version = 1",
};

// Rows a version-1 app wrote: a branching conversation (CJK, emoji, reasoning, meta), a deleted one.
const char* const kSchemaV1Rows[] = {
    "INSERT INTO conversations VALUES (1, '机器学习 👍', 1700000000000, 1700000005000, 0)",
    "INSERT INTO conversations VALUES (2, 'Gone', 1700000001000, 1700000002000, 1)",
    "INSERT INTO conversations VALUES (5, '', 1700000003000, 1700000003000, 0)",
    "INSERT INTO messages VALUES (1, 1, NULL, 'user', '我喜欢机器学习模型 👍', '', '{}', 1700000000000)",
    "INSERT INTO messages VALUES (2, 1, 1, 'assistant', 'First answer', 'thinking about neural nets', "
    "'{\"stats\":{\"generated_tokens\":12}}', 1700000001000)",
    "INSERT INTO messages VALUES (3, 2, NULL, 'user', 'deleted machine learning', '', '{}', 1700000001500)",
    "INSERT INTO messages VALUES (7, 1, 1, 'assistant', 'Regenerated answer 🚀', 'deeper 深度学习 thought', "
    "'{\"thoughtSeconds\":2.5}', 1700000005000)",
};

QStringList contents(const QList<StoredMessage>& messages) {
  QStringList out;
  for (const StoredMessage& m : messages) out << m.content;
  return out;
}

}  // namespace

class TestConversationStore : public QObject {
  Q_OBJECT

 private slots:
  void init() {  // a fresh folder per test (and per data row)
    tmp_ = std::make_unique<QTemporaryDir>();
    QVERIFY(tmp_->isValid());
    dir_ = QDir(tmp_->path());
    dbPath_ = dir_.filePath(QStringLiteral("conversations.sqlite"));
  }

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

  void emptyFileIsMigrated() {
    QFile f(dbPath_);
    QVERIFY(f.open(QIODevice::WriteOnly));
    f.close();
    ConversationStore store;
    QVERIFY2(store.open(dbPath_), qPrintable(store.lastError()));
    QCOMPARE(store.migrationsApplied(), 2);
    QVERIFY(store.recoveryNotice().isEmpty());
    QVERIFY(store.createConversation() > 0);
  }

  void newerSchemaIsRefused() {
    {
      RawDb raw(dbPath_);
      QVERIFY(raw.exec(QStringLiteral("CREATE TABLE future (x)")));
      QVERIFY(raw.exec(QStringLiteral("PRAGMA user_version = 7")));
    }
    const QByteArray before = fileHash(dbPath_);
    ConversationStore store;
    QVERIFY(!store.open(dbPath_));
    QVERIFY(!store.isOpen());
    QVERIFY2(store.lastError().contains(QStringLiteral("newer version")), qPrintable(store.lastError()));
    QVERIFY(store.lastError().contains(QStringLiteral("schema 7")));
    QVERIFY(store.lastError().contains(dbPath_));
    QVERIFY(store.recoveryNotice().isEmpty());
    QCOMPARE(fileHash(dbPath_), before);
    QCOMPARE(dir_.entryList({QStringLiteral("*.corrupt-*")}), QStringList());
    QCOMPARE(store.createConversation(), qint64(-1));
  }

  void corruptFileIsMovedAside_data() {
    QTest::addColumn<QString>("kind");
    QTest::newRow("random bytes") << "random";
    QTest::newRow("SQLite header, then garbage") << "header";
    QTest::newRow("truncated real database") << "truncated";
    QTest::newRow("our version, other tables") << "foreign";
    QTest::newRow("no version, other tables") << "foreign0";
    QTest::newRow("schema 2 without its search index") << "nofts";
  }
  void corruptFileIsMovedAside() {
    QFETCH(QString, kind);
    if (kind == u"random" || kind == u"header") {
      QByteArray bytes(64 * 1024, '\0');
      auto* rng = QRandomGenerator::global();
      for (char& b : bytes) b = static_cast<char>(rng->bounded(256));
      if (kind == u"header") bytes.replace(0, 16, QByteArray("SQLite format 3\0", 16));
      else bytes[0] = 'X';  // never a SQLite header by chance
      QFile f(dbPath_);
      QVERIFY(f.open(QIODevice::WriteOnly));
      f.write(bytes);
    } else if (kind == u"truncated") {
      {
        ConversationStore store;
        QVERIFY(store.open(dbPath_));
        for (int c = 0; c < 20; ++c) {
          const qint64 id = store.createConversation();
          qint64 parent = 0;
          for (int m = 0; m < 20; ++m)
            parent = store.addMessage(id, parent, QStringLiteral("user"), QString(400, QChar(u'a' + m)));
        }
      }
      QFile f(dbPath_);
      const qint64 size = f.size();
      QVERIFY(size > 100 * 1024);
      QVERIFY(f.resize(size / 2));
    } else if (kind == u"nofts") {
      {
        ConversationStore store;
        QVERIFY(store.open(dbPath_));
        store.addMessage(store.createConversation(), 0, QStringLiteral("user"), QStringLiteral("hello"));
      }
      RawDb raw(dbPath_);
      QVERIFY(raw.exec(QStringLiteral("DROP TABLE messages_fts")));
      QVERIFY(raw.exec(QStringLiteral("PRAGMA wal_checkpoint(TRUNCATE)")));
    } else {
      RawDb raw(dbPath_);
      QVERIFY(raw.exec(QStringLiteral("CREATE TABLE conversations (name TEXT)")));
      if (kind == u"foreign") QVERIFY(raw.exec(QStringLiteral("PRAGMA user_version = 1")));
    }
    const QByteArray before = fileHash(dbPath_);

    ConversationStore store;
    QVERIFY2(store.open(dbPath_), qPrintable(store.lastError()));
    const QStringList moved = dir_.entryList({QStringLiteral("conversations.sqlite.corrupt-*")});
    QCOMPARE(moved.size(), 1);
    QVERIFY2(QRegularExpression(QStringLiteral("^conversations\\.sqlite\\.corrupt-\\d{8}-\\d{6}$"))
                 .match(moved.first()).hasMatch(), qPrintable(moved.first()));
    const QString movedPath = dir_.filePath(moved.first());
    QCOMPARE(fileHash(movedPath), before);  // the old bytes are kept as they were
    QVERIFY2(store.recoveryNotice().contains(movedPath), qPrintable(store.recoveryNotice()));
    QCOMPARE(store.schemaVersion(), ConversationStore::kSchemaVersion);
    QVERIFY(store.conversations().isEmpty());
    const qint64 c = store.createConversation();
    QVERIFY(store.addMessage(c, 0, QStringLiteral("user"), QStringLiteral("works again")) > 0);

    // A read-only open (cosmos-cli) reports damage and moves nothing.
    store.close();
    QFile::remove(dbPath_ + QStringLiteral("-wal"));
    QFile::remove(dbPath_ + QStringLiteral("-shm"));
    QVERIFY(QFile::remove(dbPath_));
    QVERIFY(QFile::copy(movedPath, dbPath_));
    ConversationStore reader;
    QVERIFY(!reader.open(dbPath_, ConversationStore::OpenMode::ReadOnly));
    QVERIFY(reader.lastError().contains(QStringLiteral("damaged")) ||
            reader.lastError().contains(QStringLiteral("not a Cosmos Chat database")));
    QCOMPARE(fileHash(dbPath_), before);
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

  // --- schema migrations ---

  void migratesFromEachOlderVersion_data() {
    QTest::addColumn<int>("from");
    QTest::addColumn<QString>("kind");
    QTest::newRow("0: empty file") << 0 << "empty";
    QTest::newRow("0: SQLite database without tables") << 0 << "sqlite";
    QTest::newRow("1: schema 1 with rows") << 1 << "v1";
  }
  void migratesFromEachOlderVersion() {
    QFETCH(int, from);
    QFETCH(QString, kind);
    QStringList before;
    if (kind == u"empty") {
      QFile f(dbPath_);
      QVERIFY(f.open(QIODevice::WriteOnly));
    } else {
      RawDb raw(dbPath_);
      if (kind == u"sqlite") {
        QVERIFY(raw.exec(QStringLiteral("CREATE TABLE t (x)")));
        QVERIFY(raw.exec(QStringLiteral("DROP TABLE t")));  // a real database file with no tables
      } else {
        for (const char* sql : kSchemaV1Fixture) QVERIFY(raw.exec(QString::fromUtf8(sql)));
        for (const char* sql : kSchemaV1Rows) QVERIFY(raw.exec(QString::fromUtf8(sql)));
      }
      QCOMPARE(raw.scalar(QStringLiteral("PRAGMA user_version")).toInt(), from);
    }
    if (kind == u"v1") before = dumpDatabase(dbPath_, {"conversations", "messages", "sqlite_sequence"});

    ConversationStore store;
    QVERIFY2(store.open(dbPath_), qPrintable(store.lastError()));
    QVERIFY(store.recoveryNotice().isEmpty());
    QCOMPARE(store.migrationsApplied(), ConversationStore::kSchemaVersion - from);
    QCOMPARE(store.schemaVersion(), ConversationStore::kSchemaVersion);
    {
      RawDb raw(dbPath_);
      QVERIFY(raw.exec(QStringLiteral("INSERT INTO messages_fts (messages_fts) VALUES ('integrity-check')")));
    }
    if (kind == u"v1") {
      // Every row is kept as it was (the new columns are NULL).
      QStringList after = dumpDatabase(dbPath_, {"conversations", "messages", "sqlite_sequence"});
      for (QString& row : after)
        if (row.startsWith(u"conversations: ")) row.remove(QRegularExpression(QStringLiteral("\\|NULL\\|NULL$")));
      QCOMPARE(after, before);
      QCOMPARE(store.conversations().size(), 2);
      QCOMPARE(store.messages(1).size(), 3);
      QCOMPARE(store.latestLeaf(1), qint64(7));
      const QVariantMap stats = store.message(2)->meta.value(QStringLiteral("stats")).toMap();
      QCOMPARE(stats.value(QStringLiteral("generated_tokens")).toInt(), 12);
      // ...and searchable: content, reasoning, CJK mid-sentence, emoji; the deleted one is not.
      const auto ids = [&](const QString& q) {
        QList<qint64> out;
        for (const SearchHit& h : store.search(q)) out << h.messageId;
        std::sort(out.begin(), out.end());
        return out;
      };
      QCOMPARE(ids(QStringLiteral("机器学习")), QList<qint64>{1});
      QCOMPARE(ids(QStringLiteral("学习")), (QList<qint64>{1, 7}));
      QCOMPARE(ids(QStringLiteral("👍")), QList<qint64>{1});
      QCOMPARE(ids(QStringLiteral("neural")), QList<qint64>{2});
      QCOMPARE(ids(QStringLiteral("answer")), (QList<qint64>{2, 7}));
      QCOMPARE(ids(QStringLiteral("machine")), QList<qint64>{});
      QVERIFY(store.restoreConversation(2));
      QCOMPARE(ids(QStringLiteral("machine")), QList<qint64>{3});
    }
    // New rows go to id 8 and later (AUTOINCREMENT kept), and are indexed.
    const qint64 c = store.createConversation();
    const qint64 m = store.addMessage(c, 0, QStringLiteral("user"), QStringLiteral("after the upgrade"));
    QVERIFY(m > 0);
    if (kind == u"v1") QVERIFY(m > 7 && c > 5);
    QCOMPARE(store.search(QStringLiteral("upgrade")).size(), 1);

    store.close();
    QVERIFY(store.open(dbPath_));
    QCOMPARE(store.migrationsApplied(), 0);
  }

  void failedMigrationLeavesTheOldVersion() {
    {
      RawDb raw(dbPath_);
      for (const char* sql : kSchemaV1Fixture) QVERIFY(raw.exec(QString::fromUtf8(sql)));
      for (const char* sql : kSchemaV1Rows) QVERIFY(raw.exec(QString::fromUtf8(sql)));
      // Something in the way of step 2: it fails half-way and must roll back entirely.
      QVERIFY(raw.exec(QStringLiteral("CREATE TABLE messages_fts (x)")));
    }
    const QStringList before = dumpDatabase(dbPath_);
    ConversationStore store;
    QVERIFY(!store.open(dbPath_));
    QVERIFY2(store.lastError().contains(QStringLiteral("upgrade")), qPrintable(store.lastError()));
    QCOMPARE(dumpDatabase(dbPath_), before);
    RawDb raw(dbPath_);
    QCOMPARE(raw.scalar(QStringLiteral("PRAGMA user_version")).toInt(), 1);
    QCOMPARE(raw.scalar(QStringLiteral("SELECT COUNT(*) FROM pragma_table_info('conversations') WHERE name = "
                                       "'fingerprint'")).toInt(), 0);
  }

  void readOnlyRefusesAnOlderSchema() {
    {
      RawDb raw(dbPath_);
      for (const char* sql : kSchemaV1Fixture) QVERIFY(raw.exec(QString::fromUtf8(sql)));
    }
    const QByteArray before = fileHash(dbPath_);
    ConversationStore store;
    QVERIFY(!store.open(dbPath_, ConversationStore::OpenMode::ReadOnly));
    QVERIFY2(store.lastError().contains(QStringLiteral("older schema")), qPrintable(store.lastError()));
    QCOMPARE(fileHash(dbPath_), before);
  }

  // --- search ---

  void search_data() {
    QTest::addColumn<QString>("query");
    QTest::addColumn<QStringList>("expected");  // the hits' message contents, best first
    QTest::addColumn<QString>("marked");         // a part of the first snippet, [ ] for the markers
    const QString u1 = QStringLiteral("How do I configure the build so that warnings are errors?");
    const QString a1 = QStringLiteral("Add -Werror to CMAKE_CXX_FLAGS; \"quoted\" text, a*b globs, this OR that.");
    const QString u2 = QStringLiteral("我喜欢机器学习模型");
    const QString a2 = QStringLiteral("机器学习是人工智能的一个分支。");
    const QString u3 = QStringLiteral("Thumbs up 👍 for the release 🚀, 100% sure");
    QTest::newRow("word") << "configure" << QStringList{u1} << "[configure]";
    QTest::newRow("case-insensitive") << "CONFIGURE" << QStringList{u1} << "[configure]";
    QTest::newRow("two words, any order") << "errors build" << QStringList{u1} << "[build]";
    QTest::newRow("prefix of the last word") << "warnings are err" << QStringList{u1} << "[err]ors";
    QTest::newRow("short prefix") << "build co" << QStringList{u1} << "[co]nfigure";
    QTest::newRow("word in the reasoning") << "neural" << QStringList{a1} << "[neural]";
    QTest::newRow("CJK, two characters, mid-sentence") << "学习" << QStringList{a2, u2} << "[学习]";
    QTest::newRow("CJK, four characters") << "学习模型" << QStringList{u2} << "机器[学习模型]";
    QTest::newRow("CJK in the reasoning") << "深度学习" << QStringList{a2} << "[深度学习]";
    QTest::newRow("emoji") << "👍" << QStringList{u3} << "[👍]";
    QTest::newRow("emoji and a word") << "🚀 RELEASE" << QStringList{u3} << "[release] [🚀]";
    QTest::newRow("double quotes are text") << "\"quoted\"" << QStringList{a1} << "[\"quoted\"]";
    QTest::newRow("an unbalanced quote") << "\"quoted" << QStringList{a1} << "[\"quoted]";
    QTest::newRow("a lone quote") << "\"" << QStringList{a1} << "[\"]quoted";
    QTest::newRow("star is text") << "a*b" << QStringList{a1} << "[a*b]";
    QTest::newRow("star is not a prefix operator") << "configu*" << QStringList{} << "";
    QTest::newRow("minus is text") << "-Werror" << QStringList{a1} << "[-Werror]";
    QTest::newRow("OR is not an operator") << "configure OR zzzz" << QStringList{} << "";
    QTest::newRow("OR is a word, found") << "this OR that" << QStringList{a1} << "[this] [OR] [that]";
    QTest::newRow("NEAR and parentheses") << "NEAR(configure build)" << QStringList{} << "";
    QTest::newRow("column filter syntax") << "content:configure" << QStringList{} << "";
    QTest::newRow("caret and braces") << "^{configure}" << QStringList{} << "";
    QTest::newRow("percent is not a wildcard") << "%" << QStringList{u3} << "[%]";
    QTest::newRow("underscore is not a wildcard") << "_" << QStringList{a1} << "CMAKE[_]CXX[_]FLAGS";
    QTest::newRow("deleted conversations are left out") << "secret" << QStringList{} << "";
    QTest::newRow("no match") << "zzzz" << QStringList{} << "";
    QTest::newRow("blank") << "  \t " << QStringList{} << "";
  }
  void search() {
    QFETCH(QString, query);
    QFETCH(QStringList, expected);
    QFETCH(QString, marked);
    ConversationStore store;
    QVERIFY(store.open(dbPath_));
    const qint64 c1 = store.createConversation(QStringLiteral("Build"));
    const qint64 u1 = store.addMessage(c1, 0, QStringLiteral("user"),
                                       QStringLiteral("How do I configure the build so that warnings are errors?"));
    store.addMessage(c1, u1, QStringLiteral("assistant"),
                     QStringLiteral("Add -Werror to CMAKE_CXX_FLAGS; \"quoted\" text, a*b globs, this OR that."),
                     QStringLiteral("Recall neural compilers."));
    const qint64 c2 = store.createConversation();
    const qint64 u2 = store.addMessage(c2, 0, QStringLiteral("user"), QStringLiteral("我喜欢机器学习模型"));
    store.addMessage(c2, u2, QStringLiteral("assistant"), QStringLiteral("机器学习是人工智能的一个分支。"),
                     QStringLiteral("用户想了解深度学习"));
    const qint64 c3 = store.createConversation();
    store.addMessage(c3, 0, QStringLiteral("user"), QStringLiteral("Thumbs up 👍 for the release 🚀, 100% sure"));
    const qint64 gone = store.createConversation(QStringLiteral("Gone"));
    store.addMessage(gone, 0, QStringLiteral("user"), QStringLiteral("a secret about how to configure 机器学习"));
    QVERIFY(store.deleteConversation(gone));

    const QList<SearchHit> hits = store.search(query);
    QVERIFY2(store.lastError().isEmpty(), qPrintable(store.lastError()));
    QStringList got;
    for (const SearchHit& h : hits) got << store.message(h.messageId)->content;
    QCOMPARE(got, expected);
    for (int i = 0; i < hits.size(); ++i) {
      QCOMPARE(hits[i].rank, i);
      QCOMPARE(hits[i].conversationId, store.message(hits[i].messageId)->conversationId);
      QCOMPARE(hits[i].title, store.conversation(hits[i].conversationId)->title);
      QVERIFY(hits[i].snippet.contains(ConversationStore::kMatchStart));
      QCOMPARE(hits[i].snippet.count(ConversationStore::kMatchStart),
               hits[i].snippet.count(ConversationStore::kMatchEnd));
    }
    marked.replace(u'[', ConversationStore::kMatchStart).replace(u']', ConversationStore::kMatchEnd);
    if (!marked.isEmpty()) QVERIFY2(hits.first().snippet.contains(marked), qPrintable(hits.first().snippet));
  }

  void searchSnippet_data() {
    QTest::addColumn<QString>("text");
    QTest::addColumn<QString>("query");
    QTest::addColumn<QString>("snippet");
    const QString s(QChar(0x02)), e(QChar(0x03)), ell(QChar(0x2026));
    QTest::newRow("short text, whole") << "Just a short answer." << "short" << "Just a " + s + "short" + e + " answer.";
    QTest::newRow("long text: 4 words before, 12 in all")
        << "one two three four five six seven eight nine ten eleven twelve thirteen fourteen fifteen sixteen "
           "seventeen eighteen nineteen twenty"
        << "eight"
        << ell + "four five six seven " + s + "eight" + e + " nine ten eleven twelve thirteen fourteen fifteen" + ell;
    QTest::newRow("match at the start")
        << "alpha beta gamma delta epsilon zeta eta theta iota kappa lambda mu nu xi omicron pi"
        << "alpha" << s + "alpha" + e + " beta gamma delta epsilon zeta eta theta iota kappa lambda mu" + ell;
    QTest::newRow("every match in the window marked, whitespace collapsed")
        << "cats\n\nand   dogs and cats\tand more cats" << "cats"
        << s + "cats" + e + " and dogs and " + s + "cats" + e + " and more " + s + "cats" + e;
    QTest::newRow("two words marked") << "red green blue" << "blue red" << s + "red" + e + " green " + s + "blue" + e;
    QTest::newRow("overlapping matches merged") << "abcdef" << "abcd cdef" << s + "abcdef" + e;
    QTest::newRow("marker characters in the text are removed")
        << QStringLiteral("x\u0002y\u0003z marker") << "marker" << "xyz " + s + "marker" + e;
    QTest::newRow("CJK counts characters as half words")
        << QStringLiteral("第一第二第三第四第五机器学习第六第七第八第九第十第十一第十二") << "机器学习"
        << ell + QStringLiteral("第二第三第四第五") + s + QStringLiteral("机器学习") + e +
               QStringLiteral("第六第七第八第九第十第十") + ell;
    QTest::newRow("a very long word is cut by characters")
        << QString(1000, u'x') + QStringLiteral("needle") + QString(1000, u'y') << "needle"
        << ell + QString(60, u'x') + s + "needle" + e + QString(174, u'y') + ell;
  }
  void searchSnippet() {
    QFETCH(QString, text);
    QFETCH(QString, query);
    QFETCH(QString, snippet);
    ConversationStore store;
    QVERIFY(store.open(dbPath_));
    const qint64 c = store.createConversation();
    store.addMessage(c, 0, QStringLiteral("user"), text);
    const QList<SearchHit> hits = store.search(query);
    QCOMPARE(hits.size(), 1);
    QCOMPARE(hits.first().snippet, snippet);
  }

  void searchRanksAndFollowsChanges() {
    ConversationStore store;
    QVERIFY(store.open(dbPath_));
    const qint64 c = store.createConversation(QStringLiteral("Ranking"));
    const qint64 reasoningOnly = store.addMessage(c, 0, QStringLiteral("assistant"), QStringLiteral("unrelated"),
                                                  QStringLiteral("think about kernels"));
    const qint64 once = store.addMessage(c, 0, QStringLiteral("user"), QStringLiteral("kernels, once"));
    const qint64 many = store.addMessage(c, 0, QStringLiteral("user"), QStringLiteral("kernels kernels kernels"));
    QList<qint64> ids;
    for (const SearchHit& h : store.search(QStringLiteral("kernels"))) ids << h.messageId;
    QCOMPARE(ids, (QList<qint64>{many, once, reasoningOnly}));
    // A reasoning match shows the reasoning.
    QCOMPARE(store.search(QStringLiteral("kernels")).last().snippet,
             QStringLiteral("think about \u0002kernels\u0003"));
    QCOMPARE(store.search(QStringLiteral("kernels"), 2).size(), 2);
    QCOMPARE(store.search(QStringLiteral("kernels"), 0).size(), 1);  // at least one

    // Updates (a streaming reply) and deletes keep the index in step.
    QVERIFY(store.updateMessage(many, QStringLiteral("rewritten completely"), {}, {}));
    ids.clear();
    for (const SearchHit& h : store.search(QStringLiteral("kernels"))) ids << h.messageId;
    QCOMPARE(ids, (QList<qint64>{once, reasoningOnly}));
    QCOMPARE(store.search(QStringLiteral("rewritten")).size(), 1);
    QVERIFY(store.deleteConversation(c));
    QVERIFY(store.search(QStringLiteral("rewritten")).isEmpty());
    QCOMPARE(store.purgeDeleted(), 1);
    RawDb raw(dbPath_);
    QVERIFY(raw.exec(QStringLiteral("INSERT INTO messages_fts (messages_fts) VALUES ('integrity-check')")));
    QCOMPARE(raw.scalar(QStringLiteral("SELECT COUNT(*) FROM messages_fts WHERE messages_fts MATCH 'rewritten'"))
                 .toInt(), 0);
  }

  void searchIsFastEnough() {
    ConversationStore store;
    QVERIFY(store.open(dbPath_));
    const qint64 c = store.createConversation();
    qint64 parent = 0;
    QString filler;
    for (int w = 0; w < 200; ++w) filler += QStringLiteral("word%1 ").arg(w);
    for (int i = 0; i < 1000; ++i)
      parent = store.addMessage(c, parent, i % 2 ? QStringLiteral("assistant") : QStringLiteral("user"),
                                filler + QStringLiteral("token%1").arg(i));
    QElapsedTimer timer;
    timer.start();
    QCOMPARE(store.search(QStringLiteral("token987")).size(), 1);
    QCOMPARE(store.search(QStringLiteral("word17 word18")).size(), 50);
    QVERIFY2(timer.elapsed() < 2000, qPrintable(QString::number(timer.elapsed())));
  }

  void searchWhenClosed() {
    ConversationStore store;
    QVERIFY(store.search(QStringLiteral("x")).isEmpty());
    QVERIFY(store.lastError().contains(QStringLiteral("not open")));
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

 private:
  std::unique_ptr<QTemporaryDir> tmp_;
  QDir dir_;
  QString dbPath_;
};

QTEST_GUILESS_MAIN(TestConversationStore)
#include "test_conversation_store.moc"
