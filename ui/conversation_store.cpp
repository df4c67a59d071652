// ConversationStore, part 1: the queries and transactional writes (opening, migrations and
// recovery are in conversation_store_schema.cpp; search and import in conversation_store_search.cpp).
#include "conversation_store.h"
#include "conversation_store_p.h"

#include <QDir>
#include <QJsonDocument>
#include <QJsonObject>
#include <QSqlError>
#include <QTextBoundaryFinder>

#include <spdlog/spdlog.h>

#include <algorithm>
#include <atomic>

namespace cosmos::ui {
using namespace store_detail;
namespace {

std::atomic<int> g_connectionCounter{0};

}  // namespace

ConversationStore::ConversationStore(QObject* parent)
    : QObject(parent), connectionName_(QStringLiteral("cosmos-conversations-%1").arg(g_connectionCounter++)) {}

ConversationStore::~ConversationStore() { close(); }

QString ConversationStore::defaultTitle(const QString& firstUserMessage) {
  const QString s = firstUserMessage.simplified();  // whitespace runs (newlines too) → one space
  if (s.isEmpty()) return {};
  // Count grapheme clusters (an emoji sequence or a CJK character is one), remembering where the
  // (limit - 1)th ends: room for the "…".
  QTextBoundaryFinder finder(QTextBoundaryFinder::Grapheme, s);
  int count = 0;
  qsizetype hardCut = -1;
  for (qsizetype pos = finder.toNextBoundary(); pos != -1; pos = finder.toNextBoundary()) {
    if (++count == kTitleLimit - 1) hardCut = pos;
    if (count > kTitleLimit) break;
  }
  if (count <= kTitleLimit) return s;
  // Prefer the last word boundary, unless that would drop more than half of the text.
  const qsizetype space = s.at(hardCut) == u' ' ? hardCut : s.lastIndexOf(u' ', hardCut - 1);
  QString head = s.left(space > 0 && space * 2 >= hardCut ? space : hardCut);
  const QString trailing = QStringLiteral(" ,;:.-\u2013\u2014");
  while (head.size() > 1 && trailing.contains(head.back())) head.chop(1);
  return head + QChar(0x2026);
}

// --- helpers ---

QSqlQuery& ConversationStore::prepared(const char* sql) const {
  if (auto it = statements_.find(sql); it != statements_.end()) return *it->second;
  auto q = std::make_unique<QSqlQuery>(db_);
  q->setForwardOnly(true);
  if (!q->prepare(QString::fromUtf8(sql))) {  // not cached: exec() reports the error
    failedStatement_ = std::move(q);
    return *failedStatement_;
  }
  return *statements_.emplace(sql, std::move(q)).first->second;
}

bool ConversationStore::exec(QSqlQuery& q, const QString& what) const {
  if (q.exec()) return true;
  const QString error = q.lastError().text().trimmed();
  q.finish();
  return fail(what, error.isEmpty() ? tr("unknown SQL error") : error);
}

bool ConversationStore::execSql(const QString& sql, const char* what) {
  QSqlQuery q(db_);
  if (q.exec(sql)) return true;
  return fail(tr(what), q.lastError().text().trimmed());
}

bool ConversationStore::fail(const QString& what, const QString& why) const {
  lastError_ = tr("Could not %1: %2 (database %3)").arg(what, why, QDir::toNativeSeparators(path_));
  spdlog::warn("{}", lastError_.toStdString());
  return false;
}

bool ConversationStore::requireWritable(const QString& what) const {
  if (!isOpen()) return fail(what, tr("the database is not open"));
  if (readOnly_) return fail(what, tr("the database is open read-only"));
  return true;
}

qint64 ConversationStore::nextTimestamp() {
  lastTimestamp_ = std::max(QDateTime::currentMSecsSinceEpoch(), lastTimestamp_ + 1);
  return lastTimestamp_;
}

StoredMessage ConversationStore::readMessage(const QSqlQuery& q) {
  StoredMessage m;
  m.id = q.value(0).toLongLong();
  m.conversationId = q.value(1).toLongLong();
  m.parentId = q.value(2).isNull() ? 0 : q.value(2).toLongLong();
  m.role = q.value(3).toString();
  m.content = q.value(4).toString();
  m.reasoning = q.value(5).toString();
  m.meta = QJsonDocument::fromJson(q.value(6).toString().toUtf8()).object().toVariantMap();
  m.createdAt = fromMs(q.value(7).toLongLong());
  return m;
}

// --- conversations ---

qint64 ConversationStore::createConversation(const QString& title) {
  const QString what = tr("create a conversation");
  if (!requireWritable(what)) return -1;
  Transaction tx(db_);
  if (!tx.active()) return failId(what, db_.lastError().text());
  QSqlQuery& q = prepared("INSERT INTO conversations (title, created_at, updated_at, deleted) VALUES (?, ?, ?, 0)");
  const qint64 now = nextTimestamp();
  q.addBindValue(text(title.simplified()));
  q.addBindValue(now);
  q.addBindValue(now);
  if (!exec(q, what)) return -1;
  const qint64 id = q.lastInsertId().toLongLong();
  q.finish();
  if (!tx.commit()) return failId(what, db_.lastError().text());
  emit conversationsChanged();
  return id;
}

bool ConversationStore::renameConversation(qint64 id, const QString& title) {
  const QString what = tr("rename conversation %1").arg(id);
  if (!requireWritable(what)) return false;
  Transaction tx(db_);
  if (!tx.active()) return fail(what, db_.lastError().text());
  QSqlQuery& q = prepared("UPDATE conversations SET title = ? WHERE id = ?");
  q.addBindValue(text(title.simplified()));
  q.addBindValue(id);
  if (!exec(q, what)) return false;
  const int rows = q.numRowsAffected();
  q.finish();
  if (rows == 0) return fail(what, tr("no such conversation"));
  if (!tx.commit()) return fail(what, db_.lastError().text());
  emit conversationsChanged();
  return true;
}

bool ConversationStore::setDeleted(qint64 id, bool deleted, const QString& what) {
  if (!requireWritable(what)) return false;
  Transaction tx(db_);
  if (!tx.active()) return fail(what, db_.lastError().text());
  QSqlQuery& q = prepared("UPDATE conversations SET deleted = ? WHERE id = ?");
  q.addBindValue(deleted ? 1 : 0);
  q.addBindValue(id);
  if (!exec(q, what)) return false;
  const int rows = q.numRowsAffected();
  q.finish();
  if (rows == 0) return fail(what, tr("no such conversation"));
  if (!tx.commit()) return fail(what, db_.lastError().text());
  emit conversationsChanged();
  return true;
}

bool ConversationStore::deleteConversation(qint64 id) {
  return setDeleted(id, true, tr("delete conversation %1").arg(id));
}

bool ConversationStore::restoreConversation(qint64 id) {
  return setDeleted(id, false, tr("restore conversation %1").arg(id));
}

int ConversationStore::purgeDeleted() {
  const QString what = tr("remove the deleted conversations");
  if (!requireWritable(what)) return -1;
  Transaction tx(db_);
  if (!tx.active()) return failId(what, db_.lastError().text());
  QSqlQuery& q = prepared("DELETE FROM conversations WHERE deleted = 1");  // messages: ON DELETE CASCADE
  if (!exec(q, what)) return -1;
  const int rows = q.numRowsAffected();
  q.finish();
  if (!tx.commit()) return failId(what, db_.lastError().text());
  if (rows > 0) emit conversationsChanged();
  return rows;
}

QList<ConversationSummary> ConversationStore::conversations() const {
  QList<ConversationSummary> out;
  if (!isOpen()) {
    fail(tr("list the conversations"), tr("the database is not open"));
    return out;
  }
  QSqlQuery& q = prepared(
      "SELECT c.id, c.title, c.created_at, c.updated_at,"
      " (SELECT COUNT(*) FROM messages m WHERE m.conversation_id = c.id)"
      " FROM conversations c WHERE c.deleted = 0 ORDER BY c.updated_at DESC, c.id DESC");
  if (!exec(q, tr("list the conversations"))) return out;
  while (q.next()) {
    out.append(ConversationSummary{q.value(0).toLongLong(), q.value(1).toString(), fromMs(q.value(2).toLongLong()),
                                   fromMs(q.value(3).toLongLong()), q.value(4).toInt()});
  }
  q.finish();
  return out;
}

std::optional<ConversationSummary> ConversationStore::conversation(qint64 id) const {
  if (!isOpen()) return std::nullopt;
  QSqlQuery& q = prepared(
      "SELECT c.id, c.title, c.created_at, c.updated_at,"
      " (SELECT COUNT(*) FROM messages m WHERE m.conversation_id = c.id)"
      " FROM conversations c WHERE c.id = ?");
  q.addBindValue(id);
  if (!exec(q, tr("read conversation %1").arg(id))) return std::nullopt;
  std::optional<ConversationSummary> out;
  if (q.next()) {
    out = ConversationSummary{q.value(0).toLongLong(), q.value(1).toString(), fromMs(q.value(2).toLongLong()),
                              fromMs(q.value(3).toLongLong()), q.value(4).toInt()};
  }
  q.finish();
  return out;
}

bool ConversationStore::isDeleted(qint64 id) const {
  if (!isOpen()) return false;
  QSqlQuery& q = prepared("SELECT deleted FROM conversations WHERE id = ?");
  q.addBindValue(id);
  if (!exec(q, tr("read conversation %1").arg(id))) return false;
  const bool deleted = q.next() && q.value(0).toInt() != 0;
  q.finish();
  return deleted;
}

QJsonArray ConversationStore::summaryJson() const {
  QJsonArray out;
  for (const ConversationSummary& c : conversations()) {
    out.append(QJsonObject{{QStringLiteral("id"), c.id},
                           {QStringLiteral("title"), c.title},
                           {QStringLiteral("message_count"), c.messageCount},
                           {QStringLiteral("updated"), c.updatedAt.toString(Qt::ISODateWithMs)}});
  }
  return out;
}

// --- messages ---

qint64 ConversationStore::addMessage(qint64 conversationId, qint64 parentId, const QString& role,
                                     const QString& content, const QString& reasoning, const QVariantMap& meta) {
  const QString what = tr("add a message to conversation %1").arg(conversationId);
  if (!requireWritable(what)) return -1;
  if (!knownRole(role)) return failId(what, tr("unknown role \"%1\"").arg(role));
  Transaction tx(db_);
  if (!tx.active()) return failId(what, db_.lastError().text());

  QSqlQuery& conv = prepared("SELECT title FROM conversations WHERE id = ?");
  conv.addBindValue(conversationId);
  if (!exec(conv, what)) return -1;
  const bool found = conv.next();
  const QString title = found ? conv.value(0).toString() : QString();
  conv.finish();
  if (!found) return failId(what, tr("no such conversation"));

  if (parentId > 0) {
    QSqlQuery& parent = prepared("SELECT conversation_id FROM messages WHERE id = ?");
    parent.addBindValue(parentId);
    if (!exec(parent, what)) return -1;
    const qint64 parentConversation = parent.next() ? parent.value(0).toLongLong() : 0;
    parent.finish();
    if (parentConversation != conversationId)
      return failId(what, tr("message %1 is not in this conversation").arg(parentId));
  }

  const qint64 now = nextTimestamp();
  QSqlQuery& insert = prepared(
      "INSERT INTO messages (conversation_id, parent_id, role, content, reasoning, meta_json, created_at)"
      " VALUES (?, ?, ?, ?, ?, ?, ?)");
  insert.addBindValue(conversationId);
  insert.addBindValue(nullableId(parentId));
  insert.addBindValue(role);
  insert.addBindValue(text(content));
  insert.addBindValue(text(reasoning));
  insert.addBindValue(metaToJson(meta));
  insert.addBindValue(now);
  if (!exec(insert, what)) return -1;
  const qint64 id = insert.lastInsertId().toLongLong();
  insert.finish();

  const QString newTitle = role == u"user" && title.isEmpty() ? defaultTitle(content) : QString();
  QSqlQuery& touch = newTitle.isEmpty() ? prepared("UPDATE conversations SET updated_at = ? WHERE id = ?")
                                        : prepared("UPDATE conversations SET updated_at = ?, title = ? WHERE id = ?");
  touch.addBindValue(now);
  if (!newTitle.isEmpty()) touch.addBindValue(newTitle);
  touch.addBindValue(conversationId);
  if (!exec(touch, what)) return -1;
  touch.finish();

  if (!tx.commit()) return failId(what, db_.lastError().text());
  emit conversationsChanged();
  return id;
}

bool ConversationStore::updateMessage(qint64 id, const QString& content, const QString& reasoning,
                                      const QVariantMap& meta) {
  const QString what = tr("save message %1").arg(id);
  if (!requireWritable(what)) return false;
  Transaction tx(db_);
  if (!tx.active()) return fail(what, db_.lastError().text());
  QSqlQuery& update = prepared("UPDATE messages SET content = ?, reasoning = ?, meta_json = ? WHERE id = ?");
  update.addBindValue(text(content));
  update.addBindValue(text(reasoning));
  update.addBindValue(metaToJson(meta));
  update.addBindValue(id);
  if (!exec(update, what)) return false;
  const int rows = update.numRowsAffected();
  update.finish();
  if (rows == 0) return fail(what, tr("no such message"));

  QSqlQuery& touch =
      prepared("UPDATE conversations SET updated_at = ? WHERE id = (SELECT conversation_id FROM messages WHERE id = ?)");
  touch.addBindValue(nextTimestamp());
  touch.addBindValue(id);
  if (!exec(touch, what)) return false;
  touch.finish();
  if (!tx.commit()) return fail(what, db_.lastError().text());
  emit conversationsChanged();
  return true;
}

std::optional<StoredMessage> ConversationStore::message(qint64 id) const {
  if (!isOpen()) return std::nullopt;
  QSqlQuery& q = prepared(
      "SELECT id, conversation_id, parent_id, role, content, reasoning, meta_json, created_at"
      " FROM messages WHERE id = ?");
  q.addBindValue(id);
  if (!exec(q, tr("read message %1").arg(id))) return std::nullopt;
  std::optional<StoredMessage> out;
  if (q.next()) out = readMessage(q);
  q.finish();
  return out;
}

QList<StoredMessage> ConversationStore::messages(qint64 conversationId) const {
  QList<StoredMessage> out;
  if (!isOpen()) return out;
  QSqlQuery& q = prepared(
      "SELECT id, conversation_id, parent_id, role, content, reasoning, meta_json, created_at"
      " FROM messages WHERE conversation_id = ? ORDER BY id");
  q.addBindValue(conversationId);
  if (!exec(q, tr("read conversation %1").arg(conversationId))) return out;
  while (q.next()) out.append(readMessage(q));
  q.finish();
  return out;
}

QList<StoredMessage> ConversationStore::path(qint64 leafId) const {
  QList<StoredMessage> out;
  if (!isOpen()) return out;
  // Walks parent_id up from the leaf; a parent always has a smaller id, so the walk ends.
  QSqlQuery& q = prepared(
      "WITH RECURSIVE chain(id, depth) AS ("
      " SELECT id, 0 FROM messages WHERE id = ?"
      " UNION ALL SELECT m.parent_id, chain.depth + 1 FROM messages m JOIN chain ON m.id = chain.id"
      " WHERE m.parent_id IS NOT NULL AND m.parent_id < m.id)"
      " SELECT m.id, m.conversation_id, m.parent_id, m.role, m.content, m.reasoning, m.meta_json, m.created_at"
      " FROM messages m JOIN chain ON m.id = chain.id ORDER BY chain.depth DESC");
  q.addBindValue(leafId);
  if (!exec(q, tr("read the branch of message %1").arg(leafId))) return out;
  while (q.next()) out.append(readMessage(q));
  q.finish();
  return out;
}

QList<StoredMessage> ConversationStore::children(qint64 parentId, qint64 conversationId) const {
  QList<StoredMessage> out;
  if (!isOpen()) return out;
  QSqlQuery& q = parentId > 0
                     ? prepared("SELECT id, conversation_id, parent_id, role, content, reasoning, meta_json, created_at"
                                " FROM messages WHERE parent_id = ? AND conversation_id = ? ORDER BY id")
                     : prepared("SELECT id, conversation_id, parent_id, role, content, reasoning, meta_json, created_at"
                                " FROM messages WHERE parent_id IS NULL AND conversation_id = ? ORDER BY id");
  if (parentId > 0) q.addBindValue(parentId);
  q.addBindValue(conversationId);
  if (!exec(q, tr("read the replies to message %1").arg(parentId))) return out;
  while (q.next()) out.append(readMessage(q));
  q.finish();
  return out;
}

qint64 ConversationStore::latestLeaf(qint64 conversationId) const {
  if (!isOpen()) return 0;
  QSqlQuery& q = prepared(
      "SELECT COALESCE("
      " (SELECT m.id FROM conversations c JOIN messages m ON m.id = c.current_leaf"
      "  WHERE c.id = ? AND m.conversation_id = c.id),"
      " (SELECT m.id FROM messages m WHERE m.conversation_id = ?"
      "  AND NOT EXISTS (SELECT 1 FROM messages c WHERE c.parent_id = m.id) ORDER BY m.id DESC LIMIT 1), 0)");
  q.addBindValue(conversationId);
  q.addBindValue(conversationId);
  if (!exec(q, tr("read conversation %1").arg(conversationId))) return 0;
  const qint64 id = q.next() ? q.value(0).toLongLong() : 0;
  q.finish();
  return id;
}

}  // namespace cosmos::ui
