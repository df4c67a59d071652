// ConversationStore opening an existing file (conversation_store_schema.cpp): the schema migrations
// from each older version (a failed one leaving the old version), corrupt-file recovery, and
// newer-schema refusal. The rest of the store is tested in test_conversation_store.cpp.
#include <QCryptographicHash>
#include <QDir>
#include <QRandomGenerator>
#include <QRegularExpression>
#include <QtTest>

#include <algorithm>

#include "conversation_db_util.h"
#include "conversation_store.h"
#include "conversation_store_fixture.h"

using cosmos::ui::ConversationStore;
using cosmos::ui::SearchHit;

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

}  // namespace

class TestConversationStoreMigration : public QObject, protected ConversationStoreFolder {
  Q_OBJECT

 private slots:
  void init() { makeFolder(); }  // a fresh folder per test (and per data row)

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
};

QTEST_GUILESS_MAIN(TestConversationStoreMigration)
#include "test_conversation_store_migration.moc"
