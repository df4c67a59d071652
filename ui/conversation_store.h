// ConversationStore: the conversations and their messages in SQLite (Qt SQL, "QSQLITE"), used on
// the GUI thread. Messages form a tree by parent_id, so regenerate and edit add siblings and keep
// the old versions; the branch shown is path(leaf) from the root to a leaf. Implemented in
// conversation_store.cpp (queries, writes), conversation_store_schema.cpp (open, migrate, recover)
// and conversation_store_search.cpp (search, the bulk insert of imports, fingerprints).
//
// Schema (PRAGMA user_version = 2; WAL journal, synchronous=NORMAL; foreign keys on; times in ms
// since the epoch, UTC):
//   conversations(id INTEGER PK AUTOINCREMENT, title TEXT, created_at INTEGER, updated_at INTEGER,
//                 deleted INTEGER 0|1,                        -- deleted = 1: soft-deleted, undoable
//                 fingerprint TEXT,                           -- v2: duplicate check of imports, NULL: stale
//                 current_leaf INTEGER)                       -- v2: the branch an import showed, NULL: newest
//   messages(id INTEGER PK AUTOINCREMENT, conversation_id → conversations ON DELETE CASCADE,
//            parent_id → messages ON DELETE CASCADE (NULL for a root), role TEXT, content TEXT,
//            reasoning TEXT, meta_json TEXT (a JSON object), created_at INTEGER)
//   messages_fts: FTS5 (v2), external content over messages(content, reasoning), trigram tokenizer,
//            kept in step by triggers (conversation_store_schema.cpp has the SQL)
// Every older version migrates step by step (0: a new, empty file; 1: no search index), each step
// in one transaction. Search needs SQLite with FTS5 and its trigram tokenizer (3.34 or later; Debian
// 12 ships 3.40 with FTS5, and Qt's bundled SQLite enables it); without them the upgrade fails
// with "no such module: fts5" (open() returns false and names it) and the file stays at version 1.
//
// Every public write runs in one transaction; a failure rolls it back, returns false / -1 and sets
// lastError() (what failed, the SQL error and the database file). A file that is not a SQLite
// database, fails `PRAGMA integrity_check` or has an unreadable schema is moved aside as
// `<name>.corrupt-YYYYMMDD-HHMMSS` and a fresh database is created; recoveryNotice() says where
// the old file went. A database written by a newer schema is refused and left untouched.
#pragma once

#include <QDateTime>
#include <QJsonArray>
#include <QJsonObject>
#include <QList>
#include <QObject>
#include <QSet>
#include <QSqlDatabase>
#include <QSqlQuery>
#include <QString>
#include <QVariantMap>

#include <memory>
#include <optional>
#include <unordered_map>

namespace cosmos::ui {

// One row of conversations() (deleted ones are not listed).
struct ConversationSummary {
  qint64 id = 0;
  QString title;           // empty until the first user message (or a rename)
  QDateTime createdAt;     // UTC
  QDateTime updatedAt;     // UTC; bumped when messages are added or updated
  int messageCount = 0;    // every message of the tree, all branches
  bool operator==(const ConversationSummary&) const = default;
};

// One message (a node of the conversation's tree).
struct StoredMessage {
  qint64 id = 0;
  qint64 conversationId = 0;
  qint64 parentId = 0;     // 0: a root (no parent)
  QString role;            // system | user | assistant | tool
  QString content;         // the text (for an assistant: the answer, tags removed)
  QString reasoning;       // an assistant's thinking, empty otherwise
  QVariantMap meta;        // stats and other extras (stored as a JSON object)
  QDateTime createdAt;     // UTC
};

// One result of search(): a message of a conversation that is not deleted.
struct SearchHit {
  qint64 conversationId = 0;
  qint64 messageId = 0;
  QString title;    // the conversation's
  QString snippet;  // ~12 words around the first match, each match wrapped in U+0002 ... U+0003
  int rank = 0;     // the hit's place in the results: 0 is the best match
  bool operator==(const SearchHit&) const = default;
};

// A conversation for insertConversations() (import): its messages, parents before children.
struct NewMessage {
  int parent = -1;       // index in NewConversation::messages of an earlier message; -1: a root
  QString role;          // system | user | assistant | tool
  QString content;
  QString reasoning;
  QJsonObject meta;      // stored verbatim (meta_json)
  QDateTime createdAt;   // invalid: now
};
struct NewConversation {
  QString title;         // stored as given (whitespace collapsed), empty too
  QDateTime createdAt;   // invalid: the earliest message's time (or now)
  QDateTime updatedAt;   // invalid: the newest message's time (or createdAt)
  QList<NewMessage> messages;
  int currentLeaf = -1;  // index of the message whose branch is shown on opening; -1: the newest leaf
};

class ConversationStore : public QObject {
  Q_OBJECT

 public:
  static constexpr int kSchemaVersion = 2;
  static constexpr int kTitleLimit = 60;  // characters (grapheme clusters), "…" included

  enum class OpenMode { ReadWrite, ReadOnly };  // ReadOnly: no create, migrate or recovery (the CLI)

  explicit ConversationStore(QObject* parent = nullptr);
  ~ConversationStore() override;
  ConversationStore(const ConversationStore&) = delete;
  ConversationStore& operator=(const ConversationStore&) = delete;

  // AppDataLocation/conversations.sqlite (XDG_DATA_HOME honored; uses the application name).
  static QString defaultPath();
  // The default title for a first user message: whitespace collapsed, at most kTitleLimit
  // characters, cut at a word boundary with "…" when longer. Empty for blank text.
  static QString defaultTitle(const QString& firstUserMessage);

  // Opens (creating the file and its folder when missing) and migrates. An empty path means
  // defaultPath(). Returns false with lastError() set; the store is then closed.
  bool open(const QString& path = {}, OpenMode mode = OpenMode::ReadWrite);
  void close();
  bool isOpen() const { return db_.isOpen(); }
  QString filePath() const { return path_; }
  QString lastError() const { return lastError_; }
  QString recoveryNotice() const { return recoveryNotice_; }  // empty unless a corrupt file was moved aside
  int schemaVersion() const;  // PRAGMA user_version, -1 when closed
  int migrationsApplied() const { return migrationsApplied_; }  // schema steps the last open() ran

  // --- conversations ---
  qint64 createConversation(const QString& title = {});  // the new id, -1 on failure
  bool renameConversation(qint64 id, const QString& title);  // does not reorder (updated_at kept)
  bool deleteConversation(qint64 id);   // soft: deleted = 1, restoreConversation undoes it
  bool restoreConversation(qint64 id);
  int purgeDeleted();                   // removes soft-deleted rows (messages cascade); count or -1
  QList<ConversationSummary> conversations() const;  // not deleted, newest updated_at first
  std::optional<ConversationSummary> conversation(qint64 id) const;  // deleted ones too
  bool isDeleted(qint64 id) const;
  // conversations() as [{id, title, message_count, updated (ISO 8601, UTC)}] (cosmos-cli).
  QJsonArray summaryJson() const;

  // --- messages ---
  // parentId 0 adds a root. The parent must be in the same conversation. Sets the default title
  // when this is a user message and the title is empty. The new id, -1 on failure.
  qint64 addMessage(qint64 conversationId, qint64 parentId, const QString& role, const QString& content,
                    const QString& reasoning = {}, const QVariantMap& meta = {});
  // Called while a reply streams (about once a second): cached prepared statements, one transaction.
  bool updateMessage(qint64 id, const QString& content, const QString& reasoning, const QVariantMap& meta);
  std::optional<StoredMessage> message(qint64 id) const;
  QList<StoredMessage> messages(qint64 conversationId) const;  // every branch, in creation order
  QList<StoredMessage> path(qint64 leafId) const;              // root .. leaf; empty when unknown
  QList<StoredMessage> children(qint64 parentId, qint64 conversationId) const;  // siblings, oldest first
  // The leaf whose branch to show: the one an import marked (until a message is added), else the
  // newest message without children; 0 when empty.
  qint64 latestLeaf(qint64 conversationId) const;

  // --- search ---
  // Full-text search over message text and reasoning of conversations not deleted. `query` is
  // user text: each word (split at whitespace) must occur in the message's content or reasoning,
  // as a substring, case-insensitive; so the last word, still being typed, matches as a prefix, CJK
  // text matches mid-sentence, and FTS syntax (" * - OR NEAR ( : ^) is plain text. Words of three
  // or more characters use the FTS5 trigram index (best bm25 first, a match in the content weighing
  // twice one in the reasoning); shorter ones are matched with LIKE (case-insensitive for ASCII
  // only), and a query of only short words lists the newest matches first. snippet: ~12 words
  // around the first match of the content (else of the reasoning), whitespace collapsed, "…" where
  // cut, each match wrapped in U+0002 ... U+0003 (those characters are removed from the text
  // first). Best matches first, at most `limit` (1..1000); empty for a blank query or on an error
  // (lastError() set).
  QList<SearchHit> search(const QString& query, int limit = 50) const;
  static constexpr QChar kMatchStart = QChar(0x0002);
  static constexpr QChar kMatchEnd = QChar(0x0003);

  // --- import ---
  // Inserts the conversations in ONE transaction: all or nothing (nullopt with lastError() set and
  // the database unchanged). Timestamps given are kept. A conversation identical to one
  // stored and not deleted, or to one earlier in the list (same fingerprint()), is skipped and
  // counted in *duplicatesSkipped. Returns the new ids in list order, skipped ones left out.
  std::optional<QList<qint64>> insertConversations(const QList<NewConversation>& conversations,
                                                   int* duplicatesSkipped = nullptr);
  // SHA-256 (hex) of the message tree: each message's role, content and place in the tree (depth
  // in a pre-order walk, siblings in order); ids, times, reasoning and meta are left out. A
  // conversation without messages hashes its title instead.
  static QString fingerprint(const NewConversation& conversation);

 signals:
  // Any change to the list (create, rename, delete, restore, purge, messages added or updated,
  // a reopen). ConversationListModel refreshes on it.
  void conversationsChanged();

 private:
  bool openFile(QString* corruptReason);
  bool checkIntegrity(QString* reason);
  bool migrate(int fromVersion);
  bool schemaReadable(int version, QString* reason);  // the tables version `version` needs
  bool moveAside(QString* movedTo);
  void closeConnection();
  QSqlQuery& prepared(const char* sql) const;
  bool exec(QSqlQuery& q, const QString& what) const;
  bool execSql(const QString& sql, const char* what);
  bool fail(const QString& what, const QString& why) const;  // sets lastError_, returns false
  qint64 failId(const QString& what, const QString& why) const { return fail(what, why) ? 0 : -1; }
  bool requireWritable(const QString& what) const;
  bool setDeleted(qint64 id, bool deleted, const QString& what);
  qint64 nextTimestamp();  // ms since the epoch, strictly increasing within this store
  static StoredMessage readMessage(const QSqlQuery& q);
  bool storedFingerprints(QSet<QString>* out);  // of conversations not deleted, computing stale ones

  QString connectionName_;
  QString path_;
  QSqlDatabase db_;
  bool readOnly_ = false;
  // Prepared statements of this connection, keyed by the address of the SQL literal.
  mutable std::unordered_map<const char*, std::unique_ptr<QSqlQuery>> statements_;
  mutable std::unique_ptr<QSqlQuery> failedStatement_;  // one whose prepare() failed (not cached)
  mutable QString lastError_;
  QString recoveryNotice_;
  qint64 lastTimestamp_ = 0;
  int migrationsApplied_ = 0;
};

}  // namespace cosmos::ui
