// ConversationStore, part 2: opening a database file — the damage checks, the schema migrations
// and the recovery that moves a corrupt file aside (the queries live in conversation_store.cpp).
#include "conversation_store.h"

#include <QDir>
#include <QFile>
#include <QFileInfo>
#include <QSqlError>
#include <QStandardPaths>

#include <spdlog/spdlog.h>

#include <algorithm>

namespace cosmos::ui {
namespace {

constexpr char kSqliteMagic[] = "SQLite format 3";  // 16 bytes with its NUL: the file header

// Schema steps: kMigrations[v - 1] brings a database from version v - 1 to v. A later schema adds
// a step here (and bumps kSchemaVersion); each runs in one transaction with its user_version.
const char* const kSchemaV1[] = {
    "CREATE TABLE conversations ("
    " id INTEGER PRIMARY KEY AUTOINCREMENT,"
    " title TEXT NOT NULL DEFAULT '',"
    " created_at INTEGER NOT NULL,"                         // ms since the epoch, UTC
    " updated_at INTEGER NOT NULL,"
    " deleted INTEGER NOT NULL DEFAULT 0 CHECK (deleted IN (0, 1)))",
    "CREATE INDEX conversations_updated ON conversations(updated_at)",
    "CREATE TABLE messages ("
    " id INTEGER PRIMARY KEY AUTOINCREMENT,"
    " conversation_id INTEGER NOT NULL REFERENCES conversations(id) ON DELETE CASCADE,"
    " parent_id INTEGER REFERENCES messages(id) ON DELETE CASCADE,"  // NULL: a root
    " role TEXT NOT NULL,"
    " content TEXT NOT NULL DEFAULT '',"
    " reasoning TEXT NOT NULL DEFAULT '',"
    " meta_json TEXT NOT NULL DEFAULT '{}',"
    " created_at INTEGER NOT NULL)",
    "CREATE INDEX messages_conversation ON messages(conversation_id, id)",
    "CREATE INDEX messages_parent ON messages(parent_id)",
};
// Version 2: full-text search and import. messages_fts is an FTS5 index over messages.content and
// .reasoning (external content: the text is stored once, in messages; triggers keep the index in
// step, and FOREIGN KEY cascades fire them too). The trigram tokenizer matches any substring of 3+
// characters, so CJK text (no spaces between words) is searchable mid-word; shorter query words are
// matched with LIKE (ConversationStore::search). conversations.fingerprint caches the duplicate
// check of imports (NULL: not computed since the last change); current_leaf is the message whose
// branch an import marked as shown (NULL: the newest leaf). Both are cleared by the triggers when
// a message is added (and the fingerprint when one changes).
const char* const kSchemaV2[] = {
    "ALTER TABLE conversations ADD COLUMN fingerprint TEXT",
    "ALTER TABLE conversations ADD COLUMN current_leaf INTEGER",
    "CREATE VIRTUAL TABLE messages_fts USING fts5("
    " content, reasoning, content='messages', content_rowid='id', tokenize='trigram')",
    "CREATE TRIGGER messages_fts_insert AFTER INSERT ON messages BEGIN"
    " INSERT INTO messages_fts (rowid, content, reasoning) VALUES (new.id, new.content, new.reasoning);"
    " END",
    "CREATE TRIGGER messages_fts_delete AFTER DELETE ON messages BEGIN"
    " INSERT INTO messages_fts (messages_fts, rowid, content, reasoning)"
    " VALUES ('delete', old.id, old.content, old.reasoning);"
    " END",
    "CREATE TRIGGER messages_fts_update AFTER UPDATE OF content, reasoning ON messages BEGIN"
    " INSERT INTO messages_fts (messages_fts, rowid, content, reasoning)"
    " VALUES ('delete', old.id, old.content, old.reasoning);"
    " INSERT INTO messages_fts (rowid, content, reasoning) VALUES (new.id, new.content, new.reasoning);"
    " END",
    "CREATE TRIGGER messages_added AFTER INSERT ON messages BEGIN"
    " UPDATE conversations SET fingerprint = NULL, current_leaf = NULL WHERE id = new.conversation_id;"
    " END",
    "CREATE TRIGGER messages_changed AFTER UPDATE OF role, content, parent_id ON messages BEGIN"
    " UPDATE conversations SET fingerprint = NULL WHERE id = new.conversation_id;"
    " END",
    "CREATE TRIGGER conversations_renamed AFTER UPDATE OF title ON conversations BEGIN"
    " UPDATE conversations SET fingerprint = NULL WHERE id = new.id;"  // an empty one's fingerprint has the title
    " END",
    "INSERT INTO messages_fts (messages_fts) VALUES ('rebuild')",  // index the rows a version-1 file holds
};
struct Migration {
  const char* const* statements;
  std::size_t count;
};
// Version 0 is a new (empty) file: every step runs. A file with tables but no user_version was not
// written by Cosmos Chat (openFile() treats it as damaged); Cosmos Chat always set user_version.
const Migration kMigrations[] = {
    {kSchemaV1, std::size(kSchemaV1)},
    {kSchemaV2, std::size(kSchemaV2)},
};
static_assert(std::size(kMigrations) == ConversationStore::kSchemaVersion, "one migration step per version");

// Columns each table needs at each version (checked before and after migrating: a file whose
// tables differ is unreadable). kColumns[v - 1] lists what version v adds.
struct Columns {
  QStringList conversations;
  QStringList messages;
};
const Columns kColumns[] = {
    {{"id", "title", "created_at", "updated_at", "deleted"},
     {"id", "conversation_id", "parent_id", "role", "content", "reasoning", "meta_json", "created_at"}},
    {{"fingerprint", "current_leaf"}, {}},
};
static_assert(std::size(kColumns) == std::size(kMigrations), "the columns of each version");

}  // namespace

QString ConversationStore::defaultPath() {
  return QStandardPaths::writableLocation(QStandardPaths::AppDataLocation) + QStringLiteral("/conversations.sqlite");
}

// --- opening ---

bool ConversationStore::open(const QString& path, OpenMode mode) {
  close();
  lastError_.clear();
  recoveryNotice_.clear();
  migrationsApplied_ = 0;
  path_ = path.isEmpty() ? defaultPath() : path;
  readOnly_ = mode == OpenMode::ReadOnly;
  if (readOnly_) {
    if (!QFileInfo::exists(path_)) return fail(tr("open the conversations"), tr("no such file"));
  } else if (!QDir().mkpath(QFileInfo(path_).absolutePath())) {
    return fail(tr("open the conversations"), tr("cannot create the folder %1").arg(QFileInfo(path_).absolutePath()));
  }

  QString corrupt;
  if (openFile(&corrupt)) {
    emit conversationsChanged();
    return true;
  }
  closeConnection();
  if (corrupt.isEmpty()) return false;  // refused (newer schema) or an I/O error: the file is left alone
  if (readOnly_) return fail(tr("read the conversations"), tr("the database is damaged (%1)").arg(corrupt));

  QString movedTo;
  if (!moveAside(&movedTo)) return false;
  spdlog::warn("conversation database {} is damaged ({}); moved to {}", path_.toStdString(), corrupt.toStdString(),
               movedTo.toStdString());
  QString again;
  if (!openFile(&again)) {
    closeConnection();
    if (lastError_.isEmpty()) fail(tr("create a new conversation database"), again);
    return false;
  }
  recoveryNotice_ = tr("Your conversation database was damaged and could not be read (%1). It was moved to %2 "
                       "and a new, empty one was created.")
                        .arg(corrupt, QDir::toNativeSeparators(movedTo));
  emit conversationsChanged();
  return true;
}

// Opens path_ and brings it to kSchemaVersion. False with *corruptReason set when the file is
// damaged (the caller moves it aside); false with it empty when refused (lastError_ says why).
bool ConversationStore::openFile(QString* corruptReason) {
  corruptReason->clear();
  QFile header(path_);
  if (header.exists() && header.size() > 0) {
    if (!header.open(QIODevice::ReadOnly)) return fail(tr("open the conversations"), header.errorString());
    const QByteArray magic = header.read(sizeof kSqliteMagic);
    if (magic != QByteArray(kSqliteMagic, sizeof kSqliteMagic)) {
      *corruptReason = tr("it is not a SQLite database");
      return false;
    }
  }
  db_ = QSqlDatabase::addDatabase(QStringLiteral("QSQLITE"), connectionName_);
  if (!db_.isValid()) return fail(tr("open the conversations"), tr("Qt's SQLite driver (QSQLITE) is not available"));
  db_.setDatabaseName(path_);
  db_.setConnectOptions(readOnly_ ? QStringLiteral("QSQLITE_OPEN_READONLY;QSQLITE_BUSY_TIMEOUT=2000")
                                  : QStringLiteral("QSQLITE_BUSY_TIMEOUT=2000"));
  if (!db_.open()) return fail(tr("open the conversations"), db_.lastError().text());

  int version = -1;
  {
    QSqlQuery q(db_);
    if (!q.exec(QStringLiteral("PRAGMA user_version")) || !q.next()) {
      *corruptReason = q.lastError().text().trimmed();
      return false;
    }
    version = q.value(0).toInt();
  }
  if (version > kSchemaVersion) {
    return fail(tr("open the conversations"),
                tr("the database was written by a newer version of Cosmos Chat (schema %1; this version knows up "
                   "to %2). It was not changed; update Cosmos Chat to open it")
                    .arg(version)
                    .arg(kSchemaVersion));
  }
  // Everything that can mark the file as damaged is checked before the first write.
  if (!checkIntegrity(corruptReason)) return false;
  if (version > 0 && !schemaReadable(version, corruptReason)) return false;
  if (version == 0) {
    QSqlQuery q(db_);
    if (!q.exec(QStringLiteral("SELECT COUNT(*) FROM sqlite_master")) || !q.next()) {
      *corruptReason = q.lastError().text().trimmed();
      return false;
    }
    if (q.value(0).toInt() > 0) {
      *corruptReason = tr("it holds other tables (not a Cosmos Chat database)");
      return false;
    }
  }
  if (readOnly_) {
    if (version == 0)
      return fail(tr("read the conversations"), tr("not a Cosmos Chat database (schema 0)"));
    if (version < kSchemaVersion)
      return fail(tr("read the conversations"),
                  tr("the database has an older schema (%1; this version uses %2): open it once in Cosmos Chat "
                     "to upgrade it")
                      .arg(version)
                      .arg(kSchemaVersion));
  } else {
    QSqlQuery q(db_);
    if (!q.exec(QStringLiteral("PRAGMA journal_mode=WAL")) || !q.next() ||
        q.value(0).toString().compare(u"wal", Qt::CaseInsensitive) != 0)
      return fail(tr("switch the database to WAL"), q.lastError().text().trimmed());
    if (!execSql(QStringLiteral("PRAGMA synchronous=NORMAL"), "set synchronous")) return false;
  }
  if (!execSql(QStringLiteral("PRAGMA foreign_keys=ON"), "enable foreign keys")) return false;
  if (!readOnly_ && !migrate(version)) return false;
  if (!schemaReadable(kSchemaVersion, corruptReason)) return false;

  // Timestamps stay increasing across runs even when the clock was behind the newest row.
  QSqlQuery q(db_);
  if (q.exec(QStringLiteral("SELECT MAX(updated_at) FROM conversations")) && q.next())
    lastTimestamp_ = std::max(lastTimestamp_, q.value(0).toLongLong());
  if (q.exec(QStringLiteral("SELECT created_at FROM messages ORDER BY id DESC LIMIT 1")) && q.next())
    lastTimestamp_ = std::max(lastTimestamp_, q.value(0).toLongLong());
  return true;
}

bool ConversationStore::checkIntegrity(QString* reason) {
  QSqlQuery q(db_);
  if (!q.exec(QStringLiteral("PRAGMA integrity_check(1)"))) {
    *reason = q.lastError().text().trimmed();
    return false;
  }
  if (!q.next()) {
    *reason = tr("the integrity check returned nothing");
    return false;
  }
  const QString result = q.value(0).toString();
  if (result != u"ok") {
    *reason = tr("integrity check: %1").arg(result);
    return false;
  }
  return true;
}

// Runs the steps from fromVersion to kSchemaVersion, each in its own transaction with its
// user_version, so an interrupted upgrade leaves the last complete version.
bool ConversationStore::migrate(int fromVersion) {
  const QString what = tr("upgrade the database");
  for (int target = fromVersion + 1; target <= kSchemaVersion; ++target) {
    const Migration& step = kMigrations[target - 1];
    if (!db_.transaction()) return fail(what, db_.lastError().text());
    bool ok = true;
    for (std::size_t i = 0; ok && i < step.count; ++i)
      ok = execSql(QString::fromLatin1(step.statements[i]), "upgrade the database");
    ok = ok && execSql(QStringLiteral("PRAGMA user_version = %1").arg(target), "upgrade the database");
    if (ok && !db_.commit()) ok = fail(what, db_.lastError().text());
    if (!ok) {
      db_.rollback();
      return false;
    }
    ++migrationsApplied_;
    spdlog::info("conversation database {}: schema {} -> {}", path_.toStdString(), target - 1, target);
  }
  return true;
}

bool ConversationStore::schemaReadable(int version, QString* reason) {
  const auto check = [&](const QString& table, const QStringList& needed) {
    QSqlQuery q(db_);
    if (!q.exec(QStringLiteral("PRAGMA table_info(%1)").arg(table))) {
      *reason = q.lastError().text().trimmed();
      return false;
    }
    QStringList have;
    while (q.next()) have << q.value(1).toString();
    for (const QString& column : needed) {
      if (!have.contains(column)) {
        *reason = tr("table %1 lacks column %2").arg(table, column);
        return false;
      }
    }
    return true;
  };
  QStringList conversationColumns, messageColumns;
  for (int v = 1; v <= version; ++v) {
    conversationColumns += kColumns[v - 1].conversations;
    messageColumns += kColumns[v - 1].messages;
  }
  if (!check(QStringLiteral("conversations"), conversationColumns) ||
      !check(QStringLiteral("messages"), messageColumns))
    return false;
  if (version < 2) return true;
  QSqlQuery q(db_);
  if (!q.exec(QStringLiteral("SELECT COUNT(*) FROM sqlite_master WHERE name = 'messages_fts'")) || !q.next()) {
    *reason = q.lastError().text().trimmed();
    return false;
  }
  if (q.value(0).toInt() == 0) {
    *reason = tr("the search index (messages_fts) is missing");
    return false;
  }
  return true;
}

bool ConversationStore::moveAside(QString* movedTo) {
  const QString base = path_ + QStringLiteral(".corrupt-") +
                       QDateTime::currentDateTime().toString(QStringLiteral("yyyyMMdd-HHmmss"));
  QString target = base;
  for (int n = 2; QFileInfo::exists(target); ++n) target = base + QStringLiteral("-%1").arg(n);
  if (!QFile::rename(path_, target))
    return fail(tr("move the damaged database aside"), tr("cannot rename it to %1").arg(target));
  // The journal files belong to the damaged file: they travel with it (SQLite finds them by name).
  for (const char* suffix : {"-wal", "-shm", "-journal"}) {
    const QString side = path_ + QLatin1String(suffix);
    if (QFileInfo::exists(side) && !QFile::rename(side, target + QLatin1String(suffix))) QFile::remove(side);
  }
  *movedTo = target;
  return true;
}

void ConversationStore::close() {
  closeConnection();
  readOnly_ = false;
}

void ConversationStore::closeConnection() {
  statements_.clear();
  failedStatement_.reset();
  if (db_.isValid()) {
    db_.close();
    db_ = QSqlDatabase();
    QSqlDatabase::removeDatabase(connectionName_);
  }
}

int ConversationStore::schemaVersion() const {
  if (!isOpen()) return -1;
  QSqlQuery q(db_);
  return q.exec(QStringLiteral("PRAGMA user_version")) && q.next() ? q.value(0).toInt() : -1;
}

}  // namespace cosmos::ui
